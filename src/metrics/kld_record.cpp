// The llama-perplexity KLD base file (see kld_record.h).
#include "metrics/kld_record.h"

#include "metrics/token_metrics.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

namespace reap {

namespace {

bool mul_ok(uint64_t a, uint64_t b, uint64_t & out) { return !__builtin_mul_overflow(a, b, &out); }
bool add_ok(uint64_t a, uint64_t b, uint64_t & out) { return !__builtin_add_overflow(a, b, &out); }

} // namespace

bool kld_file_bytes(int64_t n_ctx, int64_t n_vocab, int64_t n_chunk, uint64_t & bytes) {
    const uint64_t per_chunk_records = (uint64_t) (n_ctx - 1 - n_ctx / 2);
    uint64_t tok_bytes, rec_bytes, chunk_bytes, all_records, all_tokens;
    return mul_ok((uint64_t) n_ctx, (uint64_t) n_chunk, all_tokens) &&
           mul_ok(all_tokens, sizeof(int32_t), tok_bytes) &&
           mul_ok(kld_record_u16((int) n_vocab), sizeof(uint16_t), rec_bytes) &&
           mul_ok(rec_bytes, per_chunk_records, chunk_bytes) &&
           mul_ok(chunk_bytes, (uint64_t) n_chunk, all_records) &&
           add_ok(k_kld_header_bytes, tok_bytes, bytes) && add_ok(bytes, all_records, bytes);
}

size_t kld_record_u16(int n_vocab) { return 2 * (((size_t) n_vocab + 1) / 2) + 4; }

double kld_compress_row(const float * logits, int n_vocab, int tok, uint16_t * record) {
    float max_l = logits[0], min_l = logits[0];
    for (int i = 1; i < n_vocab; ++i) {
        max_l = std::max(max_l, logits[i]);
        min_l = std::min(min_l, logits[i]);
    }
    // 16 bits over at most 16 nats below the max; everything lower is clamped.
    min_l = std::max(min_l, max_l - 16);
    const float lse   = log_sum_exp_rel(logits, n_vocab, max_l);
    const float scale = (max_l - min_l) / 65535.f;
    const float off   = min_l - max_l - lse;
    memcpy(record, &scale, sizeof(float));
    memcpy(record + 2, &off, sizeof(float));
    uint16_t * q = record + 4;
    if (scale > 0) {
        const float inv = 1 / scale;
        for (int i = 0; i < n_vocab; ++i) {
            q[i] = logits[i] > min_l ? (uint16_t) lrintf(inv * (logits[i] - min_l)) : 0;
        }
    } else {
        memset(q, 0, sizeof(uint16_t) * (size_t) n_vocab);
    }
    if (n_vocab % 2) q[n_vocab] = 0;  // the pad slot: deterministic bytes
    return max_l + lse - logits[tok];
}

bool kld_decompress_row(const uint16_t * record, int n_vocab, float * log_probs) {
    float scale, off;
    memcpy(&scale, record, sizeof(float));
    memcpy(&off, record + 2, sizeof(float));
    if (!std::isfinite(scale) || !std::isfinite(off) || scale < 0) {
        return false;
    }
    const uint16_t * q = record + 4;
    for (int i = 0; i < n_vocab; ++i) {
        log_probs[i] = scale * q[i] + off;
    }
    return true;
}

bool kld_base_read_header(const std::string & path, kld_base_header & hdr, std::string & err) {
    const std::string what = "KLD base file '" + path + "'";
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        err = "cannot open " + what + ": " + strerror(errno);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        err = what + " is not a regular file";
        return false;
    }
    const uint64_t size = (uint64_t) st.st_size;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        err = "cannot open " + what;
        return false;
    }
    char    magic[8];
    int32_t counts[3];
    if (size < k_kld_header_bytes || !in.read(magic, 8) || !in.read((char *) counts, sizeof(counts))) {
        err = what + " is truncated: " + std::to_string(size) + " bytes, shorter than its " +
              std::to_string(k_kld_header_bytes) + "-byte header";
        return false;
    }
    if (memcmp(magic, k_kld_magic, 8) != 0) {
        err = what + " is not a llama-perplexity log-probability file (no \"_logits_\" magic)";
        return false;
    }
    hdr.n_ctx = counts[0];
    hdr.n_vocab = counts[1];
    hdr.n_chunk = counts[2];
    if (hdr.n_ctx < 3 || hdr.n_ctx > k_kld_max_ctx) {
        err = what + " has n_ctx " + std::to_string(hdr.n_ctx) + ", outside [3, " + std::to_string(k_kld_max_ctx) + "]";
        return false;
    }
    if (hdr.n_vocab < 1 || hdr.n_vocab > k_kld_max_vocab) {
        err = what + " has n_vocab " + std::to_string(hdr.n_vocab) + ", outside [1, " + std::to_string(k_kld_max_vocab) + "]";
        return false;
    }
    if (hdr.n_chunk < 1) {
        err = what + " has n_chunk " + std::to_string(hdr.n_chunk) + " (must be at least 1)";
        return false;
    }
    uint64_t expect = 0;
    if (!kld_file_bytes(hdr.n_ctx, hdr.n_vocab, hdr.n_chunk, expect)) {
        err = what + ": n_ctx " + std::to_string(hdr.n_ctx) + " x n_vocab " + std::to_string(hdr.n_vocab) + " x n_chunk " +
              std::to_string(hdr.n_chunk) + " overflows";
        return false;
    }
    if (size != expect) {
        err = what + (size < expect ? " is truncated" : " has trailing bytes") + ": n_ctx " + std::to_string(hdr.n_ctx) +
              ", n_vocab " + std::to_string(hdr.n_vocab) + ", n_chunk " + std::to_string(hdr.n_chunk) + " need " +
              std::to_string(expect) + " bytes, the file has " + std::to_string(size);
        return false;
    }
    // Sizes agree with the file, so this allocation is bounded by the file size.
    hdr.tokens.resize((size_t) hdr.n_ctx * (size_t) hdr.n_chunk);
    if (!in.read((char *) hdr.tokens.data(), (std::streamsize) (hdr.tokens.size() * sizeof(int32_t)))) {
        err = "cannot read the tokens of " + what;
        return false;
    }
    for (size_t i = 0; i < hdr.tokens.size(); ++i) {
        if (hdr.tokens[i] < 0 || hdr.tokens[i] >= hdr.n_vocab) {
            err = what + ": token " + std::to_string(i) + " is " + std::to_string(hdr.tokens[i]) +
                  ", outside the vocabulary of " + std::to_string(hdr.n_vocab);
            return false;
        }
    }
    hdr.data_offset = k_kld_header_bytes + hdr.tokens.size() * sizeof(int32_t);
    return true;
}

} // namespace reap

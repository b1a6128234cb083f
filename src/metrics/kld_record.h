// The llama-perplexity KLD base file (`--kl-divergence-base`): the format that
// reap eval --kld-base reads and writes, so that either tool's file works with
// the other. Files are hostile: every count is bounded and the file size must
// be exactly what the counts imply, computed without overflow.
//
// Layout (all little-endian, as llama-perplexity writes it):
//   char[8]  "_logits_"
//   int32    n_ctx
//   int32    n_vocab
//   int32    n_chunk
//   int32    tokens[n_chunk * n_ctx]            the evaluated tokens, chunk after chunk
//   per chunk, per scored position (n_ctx - 1 - n_ctx/2 of them):
//     float  scale, float min_log_prob          (4 uint16 slots)
//     uint16 q[n_vocab], padded to even count   log p_i = scale * q_i + min_log_prob
// so one record is kld_record_u16(n_vocab) = 2*((n_vocab+1)/2) + 4 uint16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace reap {

constexpr char   k_kld_magic[8]     = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr int    k_kld_max_ctx      = 1 << 22;  // bounds for counts read from a base file
constexpr int    k_kld_max_vocab    = 1 << 24;
constexpr size_t k_kld_header_bytes = 8 + 3 * sizeof(int32_t);

size_t kld_record_u16(int n_vocab);

// Expected size of a base file, or false if the counts overflow.
bool kld_file_bytes(int64_t n_ctx, int64_t n_vocab, int64_t n_chunk, uint64_t & bytes);

struct kld_base_header {
    int32_t n_ctx   = 0;
    int32_t n_vocab = 0;
    int32_t n_chunk = 0;
    std::vector<int32_t> tokens;  // n_chunk * n_ctx
    uint64_t data_offset = 0;     // where the first record starts
};

// Reads and validates the header and tokens of a base file: magic, counts
// positive and bounded, file size exactly what the counts imply (computed
// without overflow), every token id inside [0, n_vocab).
bool kld_base_read_header(const std::string & path, kld_base_header & hdr, std::string & err);

// Compresses one row of logits into a record (kld_record_u16(n_vocab) uint16)
// the way llama-perplexity does; returns -log p(tok) under the row.
double kld_compress_row(const float * logits, int n_vocab, int tok, uint16_t * record);

// Decompresses a record into log-probabilities; false if the record's scale
// or offset are not finite numbers (a damaged file).
bool kld_decompress_row(const uint16_t * record, int n_vocab, float * log_probs);

} // namespace reap

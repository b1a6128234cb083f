// reap eval's windows and the decodes that run them (eval_windows.h).
#include "llama/eval_windows.h"

#include "llama/corpus.h"

#include <algorithm>

namespace reap::eval_detail {

bool plain_workload(const std::string & path, const std::string & text, const llama_model * model, int n_ctx,
                    int max_chunks, workload & wl, std::string & err) {
    corpus c;
    if (!read_plain_text(path, text, model, corpus_options(), c, err)) {
        return false;
    }
    wl.samples.push_back(c.samples.empty() ? std::vector<int32_t>() : std::move(c.samples[0].tokens));
    const auto & toks = wl.samples.back();
    int64_t n_chunk = (int64_t) toks.size() / n_ctx;
    if (n_chunk == 0) {
        err = "text too short: '" + path + "' tokenizes to " + std::to_string(toks.size()) +
              " tokens, one window needs -c " + std::to_string(n_ctx) + " (give more text or a smaller -c)";
        return false;
    }
    if (max_chunks > 0) n_chunk = std::min<int64_t>(n_chunk, max_chunks);
    wl.domains = {"text"};
    wl.n_samples = 1;
    for (int64_t c = 0; c < n_chunk; ++c) {
        wl.windows.push_back({toks.data() + c * n_ctx, n_ctx, 0});
        wl.n_decode_tokens += n_ctx;
    }
    return true;
}

bool corpus_workload(const std::string & path, const std::string & text, const llama_model * model, int n_ctx,
                     workload & wl, std::string & err) {
    corpus c;
    if (!read_jsonl_corpus(path, text, model, corpus_options(), c, err)) {
        return false;
    }
    wl.corpus    = true;
    wl.domains   = c.domains;
    wl.n_samples = c.n_lines_total;
    wl.n_skipped = c.n_empty;
    for (auto & s : c.samples) {
        // A window of len scores len - 1 - len/2 tokens: at least 3 are needed.
        if (s.tokens.size() < 3) {
            ++wl.n_skipped;
            continue;
        }
        wl.samples.push_back(std::move(s.tokens));
        wl.sample_domain.push_back(s.domain);
    }
    // Windows point into wl.samples, so build them only once it stops growing.
    for (size_t s = 0; s < wl.samples.size(); ++s) {
        const auto &  toks   = wl.samples[s];
        const int     dom    = wl.sample_domain[s];
        const int64_t n_full = (int64_t) toks.size() / n_ctx;
        if (n_full == 0) {
            wl.windows.push_back({toks.data(), (int) toks.size(), dom});
            wl.n_decode_tokens += toks.size();
        } else {
            for (int64_t c = 0; c < n_full; ++c) {
                wl.windows.push_back({toks.data() + c * n_ctx, n_ctx, dom});
                wl.n_decode_tokens += n_ctx;
            }
        }
    }
    if (wl.windows.empty()) {
        err = "corpus '" + path + "' has no sample long enough to score (3 tokens or more)";
        return false;
    }
    return true;
}

// The windows of a base file, checked against the text's tokens when a text
// was given.
bool file_workload(const kld_base_header & hdr, workload & wl, int max_chunks) {
    wl.samples.push_back(hdr.tokens);
    wl.domains = {"text"};
    wl.n_samples = 1;
    int64_t n_chunk = hdr.n_chunk;
    if (max_chunks > 0) n_chunk = std::min<int64_t>(n_chunk, max_chunks);
    for (int64_t c = 0; c < n_chunk; ++c) {
        wl.windows.push_back({wl.samples[0].data() + c * hdr.n_ctx, hdr.n_ctx, 0});
        wl.n_decode_tokens += hdr.n_ctx;
    }
    return true;
}

uint64_t scored_rows(const workload & wl) {
    uint64_t n = 0;
    for (const window & w : wl.windows) n += (uint64_t) scored_in_window(w.len);
    return n;
}

int seqs_per_decode(const eval_runtime & rt, int n_ctx) { return std::max(1, rt.n_batch / n_ctx); }

bool decode_windows(const std::vector<llama_context *> & ctxs, const std::vector<window> & windows, int n_seq,
                    int n_batch, llama_token bos, progress_line & prog, const rows_fn & on_rows, std::string & err,
                    mask_hook * hook) {
    llama_batch batch = llama_batch_init(std::max(n_batch, 1), 0, 1);
    std::vector<out_row> rows;
    bool ok = true;
    // Adds tokens [b, b+n) of window w as sequence seq.
    auto add = [&](const window & w, size_t window_no, int seq, int b, int n) {
        const int first = w.len / 2;
        for (int k = 0; k < n; ++k) {
            const int p = b + k;
            const int i = batch.n_tokens++;
            // Like llama-perplexity: every window starts with BOS, in place of its first token.
            batch.token[i]     = (p == 0 && bos != LLAMA_TOKEN_NULL) ? bos : w.tokens[p];
            batch.pos[i]       = p;
            batch.n_seq_id[i]  = 1;
            batch.seq_id[i][0] = seq;
            batch.logits[i]    = p >= first && p <= w.len - 2;
            if (batch.logits[i]) rows.push_back({i, p, &w, window_no});
        }
    };
    auto decode = [&]() {
        for (auto * c : ctxs) {
            const int rc = llama_decode(c, batch);
            if (rc != 0) {
                err = "llama_decode failed (" + std::to_string(rc) + ")";
                return false;
            }
        }
        if (hook && !hook->check(!rows.empty(), err)) return false;
        // llama_get_logits_ith() first puts the outputs back in batch order
        // (output_reorder swaps rows in place), which is not safe from several
        // threads at once: do it here, once, before the callers read rows in
        // parallel. Multi-sequence batches are split out of order, so without
        // this a run could read half-swapped rows.
        for (auto * c : ctxs) llama_get_logits(c);
        prog.add((int64_t) batch.n_tokens * (int64_t) ctxs.size());
        // Hand rows over in slices, which bounds the callers' per-row buffers
        // (a base file record is 2 bytes per vocabulary entry).
        constexpr size_t SLICE = 256;
        for (size_t r0 = 0; r0 < rows.size(); r0 += SLICE) {
            const std::vector<out_row> slice(rows.begin() + r0, rows.begin() + std::min(rows.size(), r0 + SLICE));
            if (!on_rows(slice)) return false;
        }
        return true;
    };
    for (size_t wi = 0; ok && wi < windows.size();) {
        for (auto * c : ctxs) llama_memory_clear(llama_get_memory(c), true);
        if (n_seq == 1) {
            const window & w = windows[wi];
            for (int b = 0; ok && b < w.len; b += n_batch) {
                batch.n_tokens = 0;
                rows.clear();
                add(w, wi, 0, b, std::min(n_batch, w.len - b));
                ok = decode();
            }
            ++wi;
        } else {
            batch.n_tokens = 0;
            rows.clear();
            for (int seq = 0; seq < n_seq && wi < windows.size() && batch.n_tokens + windows[wi].len <= n_batch; ++seq, ++wi) {
                add(windows[wi], wi, seq, 0, windows[wi].len);
            }
            ok = decode();
        }
    }
    llama_batch_free(batch);
    return ok;
}

}  // namespace reap::eval_detail

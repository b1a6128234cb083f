// reap eval's windows: a plain text or a corpus cut into windows (the
// workload), and the decodes that run them side by side in llama.cpp and hand
// back the scored rows, as llama-perplexity lays them out. Used by eval.cpp
// (its passes) only.
#pragma once

#include "llama/eval.h"
#include "llama/mask.h"
#include "llama/runtime.h"
#include "metrics/kld_record.h"

#include "llama.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace reap::eval_detail {

struct window {
    const int32_t * tokens;  // points into a sample's token vector
    int             len;
    int             domain;  // index into domain names; 0 for plain text
};

struct workload {
    std::vector<std::vector<int32_t>> samples;  // owned tokens (one vector for plain text)
    std::vector<int>                  sample_domain;
    std::vector<window>               windows;
    std::vector<std::string>          domains;
    bool   corpus    = false;
    size_t n_samples = 0, n_skipped = 0;
    size_t n_decode_tokens = 0;  // sum of window lengths, for the progress line
};

// A plain text: tokenized once as llama.cpp's -f reads it (read_plain_text),
// cut into n_ctx windows, remainder dropped.
bool plain_workload(const std::string & path, const std::string & text, const llama_model * model, int n_ctx,
                    int max_chunks, workload & wl, std::string & err);

// A corpus: read, rendered and tokenized by read_jsonl_corpus(); every sample
// is windowed on its own.
bool corpus_workload(const std::string & path, const std::string & text, const llama_model * model, int n_ctx,
                     workload & wl, std::string & err);

// The windows of a base file, checked against the text's tokens when a text
// was given.
bool file_workload(const kld_base_header & hdr, workload & wl, int max_chunks);

// The rows a window of len tokens scores: positions len/2 .. len-2, each
// predicting the next token.
inline int scored_in_window(int len) { return std::max(len - 1 - len / 2, 0); }

// The rows a run scores: scored_in_window of every window.
uint64_t scored_rows(const workload & wl);

// One scored position: row idx of the last decode's logits predicts
// w->tokens[pos + 1]; window_no counts windows from the start of the run.
struct out_row {
    int            idx;
    int            pos;
    const window * w;
    size_t         window_no;
};

using rows_fn = std::function<bool(const std::vector<out_row> &)>;

// Windows decoded side by side per llama_decode: like llama-perplexity,
// n_batch / n_ctx of them when a batch holds more than one window.
int seqs_per_decode(const eval_runtime & rt, int n_ctx);

// Decodes every window in every context of ctxs, with logits requested only
// for the scored positions len/2 .. len-2 of each window, and hands the rows
// of each decode to on_rows (in window order, then position order). With
// n_seq > 1 up to n_seq consecutive windows share one decode as separate
// sequences; with n_seq == 1 a window longer than n_batch takes several.
// With a mask hook, its check runs after every decode (a layer that could not
// be masked stops the run with the reason).
bool decode_windows(const std::vector<llama_context *> & ctxs, const std::vector<window> & windows, int n_seq,
                    int n_batch, llama_token bos, progress_line & prog, const rows_fn & on_rows, std::string & err,
                    mask_hook * hook = nullptr);

}  // namespace reap::eval_detail

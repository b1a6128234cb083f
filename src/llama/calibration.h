// The calibration run of calibrate.cpp as named stages, shared by the files
// that define them: calibrate.cpp (options, corpus, decodes, checkpoints,
// resume) and calibrate_sizes.cpp (rows, -b/-ub, windows per decode).
// Included by those two only; the library's interface is calibrate.h.
#pragma once

#include "llama/calibrate.h"
#include "llama/calibrate_collector.h"
#include "llama/corpus.h"
#include "llama/mtp.h"
#include "llama/pass_size.h"
#include "llama/runtime.h"
#include "gguf/gguf.h"
#include "moe/layout.h"
#include "plan/stability.h"
#include "saliency/archive.h"

#include "llama.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace reap::calibrate_detail {

// The seed of a stability target's window order (shuffle_within_domains).
constexpr uint64_t k_stability_order_seed = 0x5eed5eed;

struct window {
    size_t  sample;
    int64_t offset;
    int     len;
    int     domain;
    bool    bos_first;   // plain text: the first token is replaced by BOS
};

// Windows [first, first + count) of the run's order, decoded together: one
// domain, at most n_seq windows and n_batch tokens, or one window longer than
// n_batch (decoded n_batch tokens at a time).
struct decode_group {
    size_t  first = 0, count = 0;
    int64_t tokens = 0;
    int     half = 0;   // a stability target's split half (0: a, 1: b): its domain's groups take turns
};

std::vector<decode_group> plan_groups(const std::vector<window> & windows, int n_seq, int n_batch);

// The ubatches llama.cpp makes of a group when it splits batches in order.
size_t group_ubatches(const decode_group & g, int n_batch, int n_ubatch);

// One calibration, in named stages (run_calibrate calls them in order).
struct calibration {
    const calibrate_options & opt;
    saliency::archive &       out;
    calibrate_report &        report;
    std::string &             err;

    int         n_ctx = 0;   // opt.rt.window()
    uint64_t    batch_memory = k_default_batch_memory;   // opt.rt.batch_memory, or its default
    std::string ckpt_path;
    gguf::model gm;
    saliency::fingerprint fp;
    uint64_t    model_bytes = 0;
    model_ptr   model;
    corpus      cp;
    std::string corpus_sha;
    std::vector<window>       windows;   // domain by domain, corpus order within a domain (shuffled with a stability target)
    std::vector<decode_group> groups;
    size_t windows_end = 0;   // windows [0, windows_end) of the run's order are decoded (a resume: from next_window)
    std::string options_json;
    bool        has_mtp = false;
    int         n_vocab = 1;

    collector   col;
    std::vector<double> column_norms;   // --width-saliency (calibrate_width.h)
    std::vector<double> shared_norms;   // and the shared expert's, when it is cut too
    int64_t     n_ff = 0;
    saliency::domain_stats scratch;   // forward-only: the callback is off, nothing lands here
    ctx_ptr     ctx;
    mtp_runner  mtp;
    llama_batch batch{};
    std::vector<llama_pos>    row_pos;   // the batch's rows, for the MTP feed
    std::vector<llama_seq_id> row_seq;
    size_t      next_window = 0;
    // --until-stable
    std::unique_ptr<planner::stability_tracker> stab;
    saliency::split_halves halves;   // the tokens so far in two disjoint halves (expert statistics only)
    size_t      stable_every = 0;   // windows between stability checkpoints
    int64_t     n_group = 0;        // the router's expert groups (the plans' rule)

    ~calibration() {
        if (batch.token) llama_batch_free(batch);
    }

    bool check_options();
    bool load_model();
    bool load_llama_model(bool weights);
    bool read_windows();
    bool choose_decodes();
    bool choose_sizes();
    bool stability_target(const moe::layout & lay);
    bool at_stability_checkpoint(size_t first, size_t next) const {
        return stab && next / stable_every != first / stable_every;   // counted from the start: a resumed run checks at the same places
    }
    void shuffle_within_domains();
    void interleave_domains();
    bool check_stability(size_t first, size_t next, bool & held);
    bool checkpoint_sizes(int & b, int & ub);
    void lay_out_decodes(int n_batch, int n_ubatch);
    llama_context_params mtp_params(const llama_context_params & cparams) const;
    bool measure_decodes(context_meter & meter, context_bytes & bytes, std::string & e) const;
    bool probe(bool nextn, collector & pc, bool & all_rows);
    // Output rows whose logits fit --batch-memory: n_vocab floats a row, held twice
    // (llama.cpp's output buffer and the output head's share of the compute buffer).
    int64_t rows_within_batch_memory() const {
        return std::max<int64_t>(1, (int64_t) (batch_memory / (2ull * (uint64_t) n_vocab * sizeof(float))));
    }
    bool is_mtp_block(int l) const {
        return std::find(report.mtp_layers.begin(), report.mtp_layers.end(), l) != report.mtp_layers.end();
    }
    bool make_contexts();
    bool resume();
    void print_cost() const;   // calibrate_cost_text on stderr
    bool decode_group_rows(const decode_group & g);
    bool decode_rows(int n, std::string & e);
    bool decode_all();
    bool finish();

    bool write_checkpoint(size_t next, std::string & e);
    llama_context_params context_params(int n_batch, int n_ubatch, int n_seq, bool unified) const;
};

}  // namespace reap::calibrate_detail

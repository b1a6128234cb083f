// reap fit, the library half: from a memory budget to the best verified build.
// It composes the calls the single commands make, in this order, and adds only
// the search and the bookkeeping:
//
//   calibrate  run_calibrate (llama/calibrate.h) over --corpus into
//              DIR/saliency.gguf (channel scores too, for the width axis), on the
//              reference when given, else on the first source; or --saliency
//   reference  the reference's rows once, as reap eval writes a KLD base file
//              (DIR/reference.kld; or --kld-base as given)
//   space      every source x every width K on the down type's block grid, each
//              planned at the budget by reap sweep's planner (planner::plan_source_points:
//              the largest N whose file, cut to K, fits; sized exactly as reap
//              prune writes it); what does not fit is listed with why
//   search     planner::fit_search (plan/fit_search.h) picks what to score; each
//              pick is one masked pass of its source against the reference's
//              rows (run_eval_candidates, as reap sweep scores)
//   build      the winner's plan (DIR/plan.json), reap prune's stages into
//              DIR/build/, reap verify's audit, reap eval of the written file
//              against the reference (DIR/eval.json); the file's KLD must agree
//              with its mask's, else fit stops with both numbers
//   card       reap report's card (DIR/card/) with the search as a section, and
//              DIR/fit.json: the space, every score, the winner and the passes
//
// Every stage and every score is recorded in DIR/fit-journal.json (written
// whole, durably, after each): a killed fit run again with the same command
// reads them back and redoes nothing; the journal holds the fingerprints of
// the inputs (each source's header and router hashes and size, and each of
// its files' inode and modification time: a source rewritten in place is a
// changed input even with the same header and size; the corpus,
// held-out text and archive's sha256, the budget and search settings), and a
// changed input is refused.
#pragma once

#include "formats/fit_file.h"
#include "llama/choice.h"
#include "llama/eval.h"
#include "llama/generate.h"
#include "llama/needle.h"
#include "plan/fit_search.h"
#include "plan/planners.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace reap {

struct fit_options {
    std::vector<std::string> sources;        // -m, in order (the first is the default reference)
    std::string              reference;      // --reference REF.gguf
    std::string              kld_base;       // --kld-base REF.kld (read; written from --reference when missing)
    std::string              corpus;         // --corpus: calibration corpus
    std::string              saliency;       // --saliency: an archive instead of calibrating
    std::string              heldout;        // -f: held-out plain text (scores)
    std::string              out_dir;        // -o DIR
    uint64_t                 budget = 0;     // --budget, bytes
    std::string              budget_text;    // as given
    bool                     axis_experts = true, axis_width = true, axis_sources = true;   // --axes
    planner::rank_options    rank;           // --method, --domains
    bool                     method_given = false;
    // --methods: the criterion as an axis. Each method's plan at the budget
    // (the first source, every channel) is scored by mask against the
    // reference before the search; the lowest KLD ranks the whole search.
    // aimer ranks with DIR/scores.gguf (reap score of the calibrated model,
    // journalled), the others with the calibration (or --saliency)
    std::vector<planner::method> methods;
    std::string              down_type;      // --down-type (width cuts; "" = each down tensor's own)
    std::string              imatrix;        // --imatrix: the model's llama-imatrix file, sliced beside the build
    size_t                   max_passes = 0; // --max-passes (0 = no bound)
    // the gates, run by mask on the best scored candidates before anything is
    // written: --needle (haystack -f) and --generate PROMPTS
    bool                     gate_needle = false;
    needle_options           needle;         // lengths, depths, needles (paths, seed, runtime: fit's)
    generate_options         generate;       // prompts_path ("" = no generation gate), max_new, temperature
    choice_options           tasks;          // --multiple-choice / --hellaswag / --winogrande FILE ("" = no task gate)
    double                   task_slack = 0.02;  // accuracy a candidate may lose against the reference (and no worse by McNemar)
    int64_t                  needle_slack = 0;   // exact cells a candidate may lose against the reference
    double                   gate_slack = 0.05;  // loop rate may rise, termination rate fall, by this much
    size_t                   gate_top = 3;       // candidates gated a round (the next round: the next best)
    bool                     dry_run = false;
    eval_runtime             rt;             // llama.cpp runtime of every pass (calibrate's too)
    std::string              tool_version;
    bool                     progress = true;
    bool                     verbose = false;
};

// One candidate of the space as fit knows it.
struct fit_candidate {
    planner::fit_point point;
    std::string        source_path;
    plan               p;                    // its plan (a width plan when K < n_ff)
    // Scored from its written file, not by mask: a width cut whose down
    // projection requantises to an importance-matrix type (iq2_xxs, ...),
    // which a mask does not model (issue 49 item 10).
    bool               written = false;
};

// A (source, K) that has no candidate: its smallest file is over the budget.
struct fit_excluded {
    std::string source_path;
    int64_t     width = 0;
    std::string why;
};

struct fit_result {
    std::vector<fit_candidate>       space;
    std::vector<std::vector<size_t>> lines;     // per source, ascending K
    std::vector<fit_excluded>        excluded;
    // every (source, K, N) that fits, N from the experts used per token up to
    // the space's largest: what scoring the whole grid would take
    size_t                           full_grid = 0;
    std::vector<std::optional<planner::fit_score>> scores;   // per candidate
    std::string saliency_path, archive_sha256, metric_set;   // the archive every plan was ranked by
    std::string kld_path;                        // the reference's rows
    std::vector<uint64_t> pool_bytes;            // per source: its routed-expert pool
    size_t      passes_this_run = 0;             // masked passes run by this invocation
    size_t      passes_resumed = 0;              // scores read back from the journal
    std::string stop_reason;
    double      noise = 0;
    std::optional<size_t> winner;
    std::optional<size_t> runner_up;
    // the gates (empty: none given): the reference's measures, then each gated
    // candidate in the order of its KLD; the winner is the first that passed
    std::optional<fit_gate_measure> gate_base;
    std::vector<fit_gate_verdict>   gates;
    std::optional<size_t>           best_by_kld;   // the search's best, when the gates moved the choice
    // --methods: each criterion's score at the budget and the one chosen (the search ranked by it)
    std::optional<fit_methods_doc>  methods;
    // the build
    std::string plan_path, build_path, eval_path, card_dir, fit_json;
    double      file_kld = 0, file_top1 = 0;     // reap eval of the written file against the reference
    uint64_t    file_bytes = 0;
    std::vector<std::string> log;                // what was done and what was resumed, a line each
    // run_fit failed because something checked does not hold (the build does
    // not verify, its file's KLD is not its mask's, no candidate passes the
    // gates): exit 1, not 2
    bool        differs = false;
};

// Runs the whole fit (or, with dry_run, prints the space and the cost model
// and stops). Progress and the cost model go to `out`. Errors are values.
bool run_fit(const fit_options & o, fit_result & r, FILE * out, std::string & err);

// What a finished fit prints: the winner, runner-up, margin, noise, passes and
// the build's numbers (fit_print.cpp).
void print_fit_result(FILE * out, const fit_options & o, const fit_result & r);

} // namespace reap

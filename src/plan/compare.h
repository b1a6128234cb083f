// reap compare as a library call: two plan files in; their per-layer overlap,
// and with a saliency archive the share of saliency each keeps against the
// top-N oracle, and both plans' receipts side by side out (recomputed from the
// archive when one is given, else as each plan recorded them). `reap compare`
// (src/cli/cmd_compare.cpp) parses its options into a compare_request, calls
// compare_plan_files and prints; tests call it in-process.
//
// Core library: no llama.cpp dependency. Errors carry a kind (util/error.h).
#pragma once

#include "plan/planners.h"
#include "plan/receipts.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace reap::planner {

struct compare_request {
    std::string  plan_a, plan_b;     // the two plan files
    std::string  saliency;           // archive of the plans' model ("" = none)
    rank_options rank;               // domains and method of the scoring (with saliency)
    bool         method_given = false;   // false: the archive's default method
};

// One plan's receipts, summarised for the side-by-side table and --json: the
// totals a plan records (recorded_receipts: margin, mean share, dead and super
// experts, each with whether it is known), and what only an archive gives.
struct receipt_column : recorded_receipts {
    double      share_min = 0;
    std::vector<std::pair<int64_t, double>> per_domain;   // margin (0: none) and mean share, per archive domain
};

// From receipts computed with an archive, and from what a plan recorded.
receipt_column column_of(const receipts & rc);
receipt_column column_of(const recorded_receipts & r);

// Width plans: how far the channels each plan keeps agree, over the experts
// both keep (an uncut plan keeps every channel). Without it two cuts of the
// same experts to different channels would compare as identical.
struct width_overlap {
    bool    compared = false;        // either plan cuts the experts' width
    int64_t n_ff = 0;                // the experts' full width
    int64_t keep_a = 0, keep_b = 0;  // channels each plan keeps per expert
    size_t  experts = 0;             // (layer, expert) pairs both plans keep
    double  mean_jaccard = 1;        // channel Jaccard, mean over those pairs
};

struct plan_comparison {
    plan          a, b;
    plan_overlap  overlap;
    width_overlap width;
    bool          have_saliency = false;
    ranking       rank;                  // with saliency: the scoring (rank.opts.how: the method used)
    share_report  share_a, share_b;      // saliency kept by each plan, per layer and mean
    share_report  oracle_a, oracle_b;    // the best any keep-list of the same size could keep
    receipt_column receipts_a, receipts_b;
};

// Reads both plans, compares them (they must be for the same model), and with
// a saliency archive (which must be of the plans' model) scores them.
bool compare_plan_files(const compare_request & req, plan_comparison & out, util::error & err);

// The share kept relative to the oracle's (1 when the oracle keeps nothing).
double oracle_ratio(double share, double oracle);

// ---- what `reap compare` prints ---------------------------------------------------------

// The --json object (every layer).
nlohmann::json comparison_json(const compare_request & req, const plan_comparison & c);
// The table: every layer up to util::k_list_full layers, else a summary; the
// means; the saliency kept; the receipts side by side.
void print_comparison(FILE * out, const compare_request & req, const plan_comparison & c);

} // namespace reap::planner

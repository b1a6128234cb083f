// reap plan as a library call: a typed request in (the archive, the model,
// how many to keep), the chosen plan out with its size and receipts.
// `reap plan` (src/cli/cmd_plan.cpp) parses its options into a plan_request,
// calls choose_plan, prints the result and writes the plan; tests call
// choose_plan in-process.
//
// choose_plan: opens the model, applies the output rule to -o (before any
// other input is read), reads the archive and checks that it was measured on
// the model (sweep.h, rank_opened_model), ranks the experts, turns --keep /
// --ratio / --budget (narrowed by --multiple-of / --fused-kernel) into N,
// makes the plan (planners.h), with --width K cuts each kept expert to its K
// best channels by the archive's channel scores (width_planner.h: summed
// over the plan's domains; the archive's width checked against the model's),
// sizes what `reap prune` would write, records
// the provenance and computes the receipts (receipts.h). It writes nothing.
//
// Core library: no llama.cpp dependency. Errors carry a kind (util/error.h).
#pragma once

#include "plan/kernel_counts.h"
#include "plan/planners.h"
#include "plan/receipts.h"
#include "plan/sweep.h"
#include "plan/width_planner.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace reap::planner {

// What `reap plan` is asked for (its options; see `reap plan --help`).
// Exactly one of keep (>= 0), ratio (>= 0) and budget_text (non-empty) is set.
struct plan_request {
    std::string  saliency;            // the archive
    std::string  model;               // the model the plan is for
    std::string  output;              // PLAN.json ("" with dry_run: none)
    int64_t      keep = -1;           // --keep N
    double       ratio = -1;          // --ratio R: fraction of routed experts removed
    std::string  budget_text;         // --budget as given
    uint64_t     budget = 0;          // ... in bytes
    rank_options rank;
    bool         method_given = false;   // false: the archive's default method
    uint64_t     split_max_bytes = 0;    // size as reap prune will split
    uint64_t     split_max_tensors = 0;
    bool         stamp = true;           // size as reap prune will stamp
    bool         dry_run = false;        // the size table around N too
    bool         force = false;          // replacing an existing output is allowed
    count_rule   counts;                 // --multiple-of / --fused-kernel
    int64_t      width = 0;              // --width K: cut every kept expert to K channels (0: keep them all)
    std::string  down_type;              // --down-type: the type prune will requantise down to (K's block)
    bool         channel_score_given = false;   // false: the archive's default (width_planner.h)
    channel_score channel_by = channel_score::reap;   // --channel-score: what ranks each expert's channels
    std::string  version;                // recorded in the provenance ("reap plan VERSION")
};

// The plan chosen, and what `reap plan` reports of it.
struct plan_choice {
    ranked_model            rm;         // the model, its layout and facts, the archive, the ranking
    int64_t                 n_keep = 0;
    std::string             note;       // how N was rounded (ratio, groups, count rule)
    std::vector<size_point> table;      // N -> size -> share (--budget, --dry-run); ascending N
    plan                    p;          // with its provenance (planners' and add_plan_provenance's)
    uint64_t                bytes = 0;  // exact bytes reap prune will write for it
    uint32_t                n_shards = 1;
    receipts                rc;
};

bool choose_plan(const plan_request & req, plan_choice & out, util::error & err);

// Adds the request to the plan's provenance: the tool and version, the archive
// (path, SHA-256, metric set), the request (keep / ratio / budget, split,
// stamp, count rule) and the predicted size.
bool add_plan_provenance(const plan_request & req, const saliency::archive & arch, uint64_t bytes, uint32_t n_shards,
                         plan & p, std::string & err);

// ---- what `reap plan` prints ------------------------------------------------------

// The report: the model and archive, the size table, N, the file size, the
// fused-kernel note and the receipts.
void print_plan_report(FILE * out, const plan_request & req, const plan_choice & c);

// The --json document: the plan as written, "output" (null on a dry run) and
// the size table when there is one.
nlohmann::json plan_choice_json(const plan_request & req, const plan_choice & c);

} // namespace reap::planner

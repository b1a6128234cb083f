// reap sweep, the library half: plans every requested size from one ranking
// (src/plan/sweep.h: nested plans, exact predicted file sizes), scores each by
// masking its removed experts in the base model (src/llama/mask.h through
// reap eval's engine: the base runs once, then one masked pass per size, one
// model resident), and turns the result into the sweep record
// (formats/sweep_file.h), a table and the chart. src/cli/cmd_sweep.cpp parses,
// calls and prints.
#pragma once

#include "formats/sweep_file.h"
#include "llama/eval.h"
#include "plan/sweep.h"
#include "util/svg_chart.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace reap {

struct sweep_options {
    std::string                          saliency;        // the archive
    std::vector<planner::size_request>   sizes;
    planner::rank_options                rank;
    bool                                 method_given = false;   // else the archive's default method
    uint64_t                             split_max_bytes = 0;    // sizes predicted as prune --split-max-size writes
    std::string                          plans_dir;       // each plan's file as the record names it ("" = none)
    eval_options                         eval;            // base_path, input_path, runtime
    std::string                          tool_version;    // recorded in the JSON and the plans
};

struct sweep_result {
    planner::ranked_model              rm;
    std::vector<planner::sweep_point>  points;    // largest n_keep first
    std::string                        archive_sha256;
    std::vector<eval_report>           reports;   // reports[i] scores points[i]
    sweep_record                       record;
};

// The two steps of a sweep: plan every size (r.points; each plan's provenance
// as reap plan records it, with the model's fingerprint), then score every
// plan by masking and fill the record (the model's fingerprint and the method
// included). Between them a caller can check where the plans would go before
// the long part runs.
bool plan_sweep_points(const sweep_options & o, sweep_result & r, std::string & err);
bool score_sweep(const sweep_options & o, sweep_result & r, std::string & err);

// DIR/keep-N.json.
std::string sweep_plan_path(const std::string & plans_dir, int64_t n_keep);

// The table on `out` (what the JSON holds, for a person).
void print_sweep(FILE * out, const sweep_options & o, const sweep_result & r);

// The chart of the sweep (report/sweep_chart.h), titled with the arch, method and domains.
util::chart sweep_result_chart(const sweep_result & r);

} // namespace reap

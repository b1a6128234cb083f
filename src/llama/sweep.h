// reap sweep, the library half: plans every requested size from one ranking
// (src/plan/sweep.h: nested plans, exact predicted file sizes), scores each by
// masking its removed experts in the base model (src/llama/mask.h through
// reap eval's engine: the base runs once, then one masked pass per size, one
// model resident), and turns the result into the sweep record
// (formats/sweep_file.h), a table and the chart. src/cli/cmd_sweep.cpp parses,
// calls and prints.
//
// Several sources against one reference (-m Q1 -m Q2 ... with --reference
// REF.gguf or --kld-base REF.kld; also one -m with either): every source must
// be the same model as the first (moe/identity.h: arch, blocks, experts,
// vocabulary, router weights; the reference too), each is planned from the one
// ranking and sized for its own file (so at a budget the N may differ, the
// keep-set of an N never: checked), and every plan is masked in its source and
// scored against the reference's rows: the KLD base file, read as reap eval
// --kld-base reads it, or written once from --reference (into --kld-base when
// given and missing, else a temp file removed after). Like --kld-base in reap
// eval this needs plain text -f. The record gets every source and the
// frontier (formats/sweep_file.h, version 3).
#pragma once

#include "formats/sweep_file.h"
#include "llama/choice.h"
#include "llama/eval.h"
#include "llama/generate.h"
#include "llama/needle.h"
#include "moe/identity.h"
#include "plan/sweep.h"
#include "util/svg_chart.h"

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace reap {

struct sweep_options {
    std::string                          saliency;        // the archive
    // --methods: every size planned by each method (empty: one method, rank.how);
    // each ranks with the archive that holds its statistic, `saliency` or
    // `second_saliency` (e.g. a calibration and a weights archive)
    std::vector<planner::method>         methods;
    std::string                          second_saliency;
    std::vector<planner::size_request>   sizes;
    planner::rank_options                rank;
    bool                                 method_given = false;   // else the archive's default method
    uint64_t                             split_max_bytes = 0;    // sizes predicted as prune --split-max-size writes
    std::string                          plans_dir;       // each plan's file as the record names it ("" = none)
    eval_options                         eval;            // base_path (the first -m), input_path, runtime
    std::string                          tool_version;    // recorded in the JSON and the plans
    std::vector<std::string>             more_sources;    // every -m after the first
    std::string                          reference;       // --reference REF.gguf
    std::string                          kld_base;        // --kld-base REF.kld
    // --needle (the haystack is -f) and --generate PROMPTS: each run once on the
    // base, then on every size's mask, as reap eval --mask runs them; the
    // paths, runtime and seed are filled from eval and rank by the sweep
    bool                                 do_needle = false;
    needle_options                       needle;
    generate_options                     generate;
    // --widths K,...: width cuts, each K with every size (alone: every expert
    // kept); K = the experts' width stands for no cut. --down-type and
    // --channel-score as reap plan takes them.
    std::vector<int64_t>                 widths;
    std::string                          down_type;
    planner::channel_score               channel_by = planner::channel_score::reap;
    bool                                 channel_score_given = false;
    // --multiple-choice / --hellaswag / --winogrande FILE: task accuracy of the
    // base and every size's mask (src/llama/choice.h), in the same run
    choice_options                       choice;
    bool behaviour() const { return do_needle || !generate.prompts_path.empty() || !choice.tasks_path.empty(); }
    bool several_sources() const { return !more_sources.empty() || !reference.empty() || !kld_base.empty(); }
};

// A source after the first, planned and scored.
struct sweep_source_run {
    std::string                        path;
    planner::ranked_model              rm;
    std::vector<planner::sweep_point>  points;
    std::vector<eval_report>           reports;
};

struct sweep_result {
    planner::ranked_model              rm;        // the first source (-m)
    std::vector<planner::sweep_point>  points;    // largest n_keep first
    std::string                        archive_sha256;
    std::string                        second_archive_sha256;   // --methods with a second archive
    std::vector<eval_report>           reports;   // reports[i] scores points[i]
    sweep_record                       record;
    moe::model_identity                identity;  // of the first source (several sources)
    std::vector<std::unique_ptr<sweep_source_run>> others;
};

// The two steps of a sweep: plan every size (r.points; each plan's provenance
// as reap plan records it, with the model's fingerprint), then score every
// plan by masking and fill the record (the model's fingerprint and the method
// included). Between them a caller can check where the plans would go before
// the long part runs.
bool plan_sweep_points(const sweep_options & o, sweep_result & r, std::string & err);
bool score_sweep(const sweep_options & o, sweep_result & r, std::string & err);

// A whole reap sweep as one request: the options, the JSON and the chart to
// write ("" = none) and whether existing outputs may be replaced.
struct sweep_request {
    sweep_options sw;
    std::string   output, plot;
    bool          force = false;
};

// The sweep from the request to its files: the output rule (no output is an
// input or another output; the plans' paths checked before the scoring), a
// killed run's journal in the outputs' folders completed (or refused) before
// the scoring, plan -> score -> publish (the plans, the chart, the JSON; every
// file complete before the first appears). `written`: the files, in order.
// The caller prints the table (print_sweep) from `r`.
bool run_sweep(const sweep_request & q, sweep_result & r, std::vector<std::string> & written, std::string & err);

// DIR/keep-N.json (a width cut: DIR/keep-N-width-K.json; --methods:
// DIR/METHOD-keep-N.json); with several
// sources DIR/STEM-keep-N.json (STEM: the source's file name without .gguf;
// two sources of one name are refused).
std::string sweep_plan_path(const std::string & plans_dir, int64_t n_keep, int64_t width = 0, const std::string & method = "");
std::string sweep_plan_path(const sweep_options & o, const std::string & source, int64_t n_keep, int64_t width = 0,
                            const std::string & method = "");

// Every file the run writes, in publishing order (the plans, the chart, the
// JSON that names them), as (path, contents); `plot` and `output` "" = none.
std::vector<std::pair<std::string, std::string>> sweep_output_files(const sweep_options & o, const sweep_result & r,
                                                                    const std::string & plot, const std::string & output);

// The table on `out` (what the JSON holds, for a person).
void print_sweep(FILE * out, const sweep_options & o, const sweep_result & r);
// Its form with several sources: request x source (each source by its file
// name when no two share one, the full paths listed once above; else by its
// path), every column as wide as its widest entry; then each request's winner.
void print_sweep_sources(FILE * out, const sweep_record & s);

// The chart of the sweep (report/sweep_chart.h), titled with the arch, method
// and domains; with several sources the frontier chart.
util::chart sweep_result_chart(const sweep_result & r);

} // namespace reap

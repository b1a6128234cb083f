// reap prune as library calls: a typed request in, a checked job, the files
// written out. `reap prune` (src/cli/cmd_prune.cpp) parses its options into a
// prune_request, runs the stages below and prints between them; tests call
// the same stages in-process.
//
//   prepare_prune   opens the model and the plan, checks the plan against the
//                   model (layout, fingerprint), builds the output spec
//                   (make_pruned_spec) and where every shard goes, and applies
//                   the output rule to every shard and SHA256SUMS. Writes nothing.
//   prepare_imatrix with an --imatrix: reads and checks the source imatrix,
//                   the sliced imatrix's path (the output rule again) and the
//                   coverage of the kept experts; the kept experts below
//                   require_coverage are listed (the command then writes nothing).
//   write_prune     completes a killed earlier run's journal, stages the sliced
//                   imatrix, then writes the shards, SHA256SUMS and the imatrix
//                   so that they appear together (gguf::write_output).
//
// Core library: no llama.cpp dependency. Errors carry a kind (util/error.h).
#pragma once

#include "gguf/gguf.h"
#include "moe/layout.h"
#include "plan/plan.h"
#include "prune/imatrix_slice.h"
#include "prune/width.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace reap::prune {

// What `reap prune` is asked to do (its options; see `reap prune --help`).
struct prune_request {
    std::string model;               // source model (or the first shard of a split set)
    std::string plan;                // plan file
    std::string output;              // OUT.gguf (with splitting: OUT-00001-of-0000N.gguf, ...)
    uint64_t    split_max_bytes = 0;
    uint64_t    split_max_tensors = 0;
    bool        stamp = true;        // record reap.plan.sha256, reap.source.expert_count, reap.version
    bool        force = false;       // replace existing outputs (never an input)
    bool        dry_run = false;
    bool        sums = true;         // update SHA256SUMS beside the output
    bool        allow_other_model = false;
    bool        copy_file_range = true;
    bool        sync = true;         // fsync what is written (off: tests, scratch output)
    std::string version;             // recorded as reap.version
    std::string imatrix;             // the source model's llama-imatrix file ("" = none)
    std::string imatrix_out;         // where its slice goes ("" = beside OUT)
    int64_t     require_coverage = 0;   // > 0: a kept expert with fewer activations stops the prune
    std::string down_type;           // width plans: the type ffn_down_exps is requantised to ("" = its own)
};

// A prune checked and ready to write: the inputs as read and every path
// decided. Not copyable: the imatrix slice points into the plan's keep lists.
struct prune_job {
    prune_job() = default;
    prune_job(const prune_job &) = delete;
    prune_job & operator=(const prune_job &) = delete;

    prune_request                      req;
    std::chrono::steady_clock::time_point started;
    gguf::model                        model;
    plan                               p;
    moe::layout                        lay;
    std::string                        warning;     // a plan without a fingerprint, or another model's (allowed)
    width_options                      width;       // width plans: req.down_type resolved
    bool                               other_model = false;   // the plan is another model's (--allow-other-model)
    gguf::output_spec                  spec;
    gguf::write_options                wopts;
    std::vector<gguf::shard_layout>    shards;      // where the output goes, file by file
    std::string                        sums_path;   // the folder's SHA256SUMS (written with req.sums)
    std::vector<std::pair<std::string, std::string>> inputs;   // (what, path) for the output rule
    size_t                             n_sliced = 0;     // tensors sliced along the expert axis
    uint64_t                           out_bytes = 0;    // of all shards
    // with req.imatrix
    imatrix_slice                      islice;
    std::string                        imatrix_out;
    std::vector<coverage_receipt::expert_ref> below_required;   // kept experts under req.require_coverage

    bool has_imatrix() const { return !req.imatrix.empty(); }
};

// What write_prune wrote.
struct prune_written {
    std::vector<std::string> files;   // the model's files, in shard order
    double                   seconds = 0;   // since prepare_prune began
};

bool prepare_prune(const prune_request & req, prune_job & job, util::error & err);
bool prepare_imatrix(prune_job & job, util::error & err);
bool write_prune(prune_job & job, prune_written & out, util::error & err);

// ---- what `reap prune` prints ------------------------------------------------------

// The two lines on the source and the output's size.
void print_prune_summary(FILE * out, const prune_job & job);
// The imatrix coverage receipt in a few lines (--json has it all).
void print_coverage(FILE * out, const coverage_receipt & c, int64_t threshold);
// Why nothing is written: the kept experts below --require-coverage.
void print_below_required(FILE * out, const prune_job & job);
// What a dry run would write.
void print_dry_run(FILE * out, const prune_job & job);
// What was written, and how fast.
void print_written(FILE * out, const prune_job & job, const prune_written & w);

// The --json object: request, imatrix and coverage (listing those at or below
// `threshold`), the files (`files`: the dry run's shard paths or those
// written; null: none, when the prune stopped before writing) and `status`.
nlohmann::json prune_json(const prune_job & job, int64_t threshold, const std::vector<std::string> * files, int status);

} // namespace reap::prune

// A plan's provenance, both ways: what `reap plan` and `reap sweep` record
// beside what make_plan already wrote (the tool, the archive, the request,
// the predicted size: one function for both, so a plan says the same things
// whichever command made it), and the one typed reader of everything reap
// reads back (plan_provenance: prune, verify, plan, compare and report), each
// field type-checked, a message naming the field.
//
// The provenance is otherwise free-form (plan.h): keys not listed here are
// kept and ignored. Core library: no llama.cpp dependency.
#pragma once

#include "plan/plan.h"
#include "plan/receipts.h"
#include "plan/sweep.h"
#include "plan/width_rerank.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace reap::planner {

// How the size was asked for, as the plan records it under "request".
struct origin_request {
    size_request size;                 // --keep N / --ratio R / --budget SIZE (text and bytes)
    uint64_t     split_max_bytes = 0;  // 0: not split by size
    uint64_t     split_max_tensors = 0;
    bool         stamp = true;         // the build carries reap.* keys (prune --no-stamp: false)
    int64_t      multiple_of = 0;      // --multiple-of (0: none)
    bool         fused_kernel = false; // --fused-kernel
};

struct plan_origin {
    std::string  tool;                 // "reap plan", "reap sweep" (the version is added)
    std::string  saliency_path, saliency_sha256;
    std::string  metric_set;           // saliency::metric_set_name of the archive
    origin_request request;
    uint64_t     predicted_bytes = 0;
    uint32_t     predicted_shards = 1;
};

// Adds "tool", "saliency", "request", "predicted_bytes" and
// "predicted_shards" to p.provenance (replacing them when present).
void record_origin(plan & p, const plan_origin & o, const char * version);

// The ranking's part, as make_plan writes it: "method", "method_description",
// "domains", "consensus", "seed" and "share_method" (random), "protect_super",
// "super_threshold", "super_experts_not_kept" (`super_not_kept`: protected
// super experts the size could not keep) and "never_routed".
void record_ranking(plan & p, const ranking & r, const std::vector<expert_ref> & super_not_kept);

// The receipts (receipts.h): "safety_margin", "saliency_retained",
// "dead_experts", "super_experts".
void record_receipts(plan & p, const receipts & rc);

// A width cut's part (sweep.h: cut_plan_width): "channel_score", "down_type"
// (when the down projections are requantised: the type the size assumes) and
// "width_rerank" (null where a layer's statistic is undefined).
void record_width(plan & p, const std::string & channel_score, const std::string & down_type, const width_rerank & rr);

// Everything reap reads back from a plan's provenance, each field
// type-checked in this one reader (a message names the file and the field).
// Fields absent from a plan stay unset (plans written before the field
// existed); keys not listed here are kept in the plan and ignored.
struct plan_provenance {
    // the origin (record_origin)
    std::string                                      saliency_sha256;   // "" when not recorded
    std::vector<std::pair<std::string, std::string>> request;           // "keep" -> "6", ... (not "stamp")
    std::optional<bool>     stamp;              // request.stamp: the predicted size counts the reap.* keys
    std::optional<uint64_t> predicted_bytes;
    std::optional<uint64_t> predicted_shards;
    // the ranking (make_plan)
    std::string              method, method_description;   // "" when not recorded
    std::vector<std::string> domains;
    bool                     minrank = false;               // consensus "minrank" (else "sum")
    std::optional<uint64_t>  seed;
    std::optional<bool>      protect_super;
    std::vector<expert_ref>  super_not_kept;                // protected super experts the size could not keep
    // the width cut (sweep.h: cut_plan_width)
    std::string channel_score;   // "" when not recorded
    std::string down_type;       // the requantised down projections' type; "" = each tensor's own
    struct rerank_summary {
        double   min = 0, median = 0;
        uint64_t n_defined = 0;
    };
    std::optional<rerank_summary> width_rerank;   // absent, or no layer defined it
    // the receipts' totals (receipts.h: receipts_json)
    recorded_receipts receipts;
};

// Reads the provenance of plan `name` (a JSON object, or absent: null).
bool read_plan_provenance(const nlohmann::json & prov, const std::string & name, plan_provenance & out, std::string & err);

} // namespace reap::planner

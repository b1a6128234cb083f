// A plan's provenance, both ways: what `reap plan` and `reap sweep` record
// beside what make_plan already wrote (the tool, the archive, the request,
// the predicted size: one function for both, so a plan says the same things
// whichever command made it), and the typed view `reap report` reads for the
// model card (each field it uses type-checked; a message names the field).
//
// The provenance is otherwise free-form (plan.h): keys not listed here are
// kept and ignored. Core library: no llama.cpp dependency.
#pragma once

#include "plan/plan.h"
#include "plan/sweep.h"

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

// What the model card reads from a plan's provenance.
struct card_provenance {
    std::string              method, method_description;   // "" when not recorded
    std::vector<std::string> domains;
    bool                     minrank = false;               // consensus "minrank" (else "sum")
    std::optional<uint64_t>  seed;
    std::optional<bool>      protect_super;
    std::string              saliency_sha256;               // "" when not recorded
    std::vector<std::pair<std::string, std::string>> request;   // "keep" -> "6", ... (not "stamp")
    double                   saliency_retained_mean = -1;  // < 0 when not recorded
};

// What a plan says about the build it was sized for, as prune and verify read
// it: the predicted file (when recorded) and, for a width plan sized with a
// requantised down projection, that down type (prune uses it; verify holds
// the build to the predicted size).
struct size_provenance {
    std::optional<uint64_t> predicted_bytes;
    std::optional<uint64_t> predicted_shards;
    std::optional<bool>     stamp;        // request.stamp: the prediction counts the reap.* keys
    std::string             down_type;    // "" = each down tensor's own type
};

bool read_size_provenance(const nlohmann::json & prov, const std::string & name, size_provenance & out, std::string & err);

// Reads the provenance of plan `name`; a listed field of the wrong type or
// range is an error naming it (a plan written by reap never has one).
bool read_card_provenance(const nlohmann::json & prov, const std::string & name, card_provenance & out, std::string & err);

} // namespace reap::planner

// reap plan receipts: the numbers a pruned build's card quotes to justify its
// keep-lists, computed from a ranking (planners.h) and a plan. `reap plan`
// records them in the plan's provenance and prints them; `reap compare`
// shows them for two plans side by side.
//
//   safety margin   the best rank (1 = most salient) any pruned expert holds in
//                   any domain: per layer, the minimum over the pruned experts
//                   and over the plan's domains of the expert's rank within
//                   that domain (the share method's score over the domain
//                   alone; ties to the lower id, as --consensus minrank ranks);
//                   a domain that routed no token in a layer does not rank it.
//                   Overall: the minimum over layers, and the median layer.
//                   Also per domain of the archive, each on its own. "No pruned
//                   expert ranks better than 226 of 896 in any domain, in any
//                   layer (median layer: 314)". A layer that prunes nothing
//                   has no margin (null in JSON).
//   saliency        per layer, Σ_kept score / Σ_all score (saliency_share) for
//   retained        the summed domains of the plan and for every archive domain
//                   alone; mean, min, median and max over layers.
//   dead experts    experts no token was routed to in any domain of the
//                   archive, as "blk.L eE", and whether the plan keeps any.
//   super experts   the detected ones (planners.h), each with its max_norm,
//                   its ratio to the layer's median max_norm, its share of the
//                   layer's summed score, and whether the plan keeps it.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "plan/planners.h"
#include "util/summary.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace reap::planner {

struct layer_receipt {
    int     layer = 0;
    int64_t n_pruned = 0;
    int64_t margin = 0;                    // 0: no margin (nothing pruned, or no plan domain routed here)
    int64_t margin_expert = -1;            // the pruned expert that holds it
    int     margin_domain = -1;            // ... in this archive domain (index)
    std::vector<int64_t> margin_by_domain; // per archive domain on its own (0: none)
    double  share = 0;                     // saliency retained over the plan's domains (summed)
    std::vector<double> share_by_domain;   // per archive domain on its own
};

struct receipts {
    std::string                method;     // the score ranks and shares are measured in
    int64_t                    n_expert = 0;
    std::vector<std::string>   domains;    // every archive domain, in file order
    std::vector<bool>          in_plan;    // per archive domain: one of the plan's domains
    std::vector<layer_receipt> layers;     // in the plan's layer order
    std::vector<expert_ref>    dead;
    std::vector<bool>          dead_kept;
    std::vector<expert_ref>    super;      // super-expert candidates (detected, protected or not)
    std::vector<bool>          super_kept;
};

// The receipts of plan `p` under ranking `r` (same model: the plan's layers
// must be the ranking's; ids in range). Fails naming the layer otherwise.
bool plan_receipts(const ranking & r, const plan & p, receipts & out, std::string & err);

// The margin over layers: `min` (0 when no layer has one), the median of the
// layers that have one, and where the minimum is (first such layer).
struct margin_summary {
    int64_t     min = 0;
    double      median = 0;
    size_t      n_layers = 0;   // layers with a margin
    int         layer = -1;
    int64_t     expert = -1;
    std::string domain;
};
// domain < 0: over the plan's domains; else archive domain `domain` alone.
margin_summary summarize_margin(const receipts & rc, int domain = -1);
// Saliency retained over layers (domain < 0: the plan's summed domains).
util::summary summarize_share(const receipts & rc, int domain = -1);

// "blk.12 e160"
std::string expert_name(int layer, int64_t expert);

// The provenance fields of the receipts: "safety_margin", "saliency_retained",
// "dead_experts", "super_experts" (see README, "reap plan").
nlohmann::json receipts_json(const receipts & rc);

// The totals a plan recorded (for plans read back without their archive),
// as read_plan_provenance reads them (provenance.h): fields absent from older
// plans stay unset.
struct recorded_receipts {
    bool    has_margin = false;
    bool    margin_null = false;   // recorded as null: the plan prunes nothing
    int64_t margin = 0;
    double  margin_median = 0;
    bool    has_share = false;
    double  share_mean = 0;
    bool    has_dead = false;
    int64_t dead = 0, dead_kept = 0;
    bool    has_super = false;
    int64_t super = 0, super_kept = 0;
};

} // namespace reap::planner

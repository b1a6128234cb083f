// How much the keep-list still moves as a calibration goes on, for
// `reap calibrate --until-stable J`. At every checkpoint the archive so far
// gives a plan for the target (n_keep per layer) for the mix of its domains
// and for each domain alone; each is compared with the plan of the previous
// checkpoint, and the plans of the run's two split halves (each domain's
// decodes go to half a and half b in turn, saliency/checkpoint.h: two disjoint
// samples of the same size) are compared with each other: how far two
// independent samples of the tokens so far agree.
// The overlap of two plans is the mean over MoE layers of the Jaccard of their
// keep-lists. The run may stop once the mix's two overlaps have held at or
// above J at two checkpoints in a row; the domains' (the lowest of them) are
// reported beside them: a domain of a few thousand tokens keeps moving long
// after the mix has settled.
//
// Core library: no llama.cpp dependency.
#pragma once

#include "plan/planners.h"
#include "saliency/archive.h"
#include "saliency/checkpoint.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace reap::planner {

// The provenance key of the curve in a finished archive (JSON, curve_json), and of
// the tracker's state in a checkpoint (state_json: what resuming needs).
inline constexpr const char * k_key_stability       = "reap.saliency.calibrate.stability";
inline constexpr const char * k_key_stability_state = "reap.saliency.checkpoint.stability_state";

struct stability_point {
    int64_t     tokens = 0;
    // the mix's plan against the previous checkpoint's, and the two split
    // halves' plans against each other (-1: the first checkpoint / a half
    // without tokens yet)
    double      jaccard_prev = -1;
    double      jaccard_half = -1;
    // the same, the lowest over the domains' own plans, and which domain
    double      domain_prev = -1;
    double      domain_half = -1;
    std::string weakest;
    // The mix plan's safety margin (receipts.h): the best rank any removed expert
    // holds in any domain, the lowest over layers (0: the plan removes nothing).
    int64_t     safety_margin = 0;
    bool        stable = false;      // the mix's two overlaps at or above the threshold
};

class stability_tracker {
  public:
    // threshold: J (0: no --until-stable, the points are only reported, none
    // is stable); n_keep: experts kept per layer; n_group: the router's
    // expert groups (0/1: none).
    stability_tracker(double threshold, int64_t n_keep, int64_t n_group);

    // Plans the archive so far (tokens in all) and its split halves (named as
    // its domains) and appends its point.
    bool observe(const saliency::archive & so_far, const saliency::split_halves & halves, int64_t tokens,
                 stability_point & out, std::string & err);
    // The last two points are stable.
    bool held() const;
    const std::vector<stability_point> & curve() const { return points; }

    // The curve as JSON (an array of points), for the archive.
    std::string curve_json() const;
    // Everything observe() uses later (the curve and the previous checkpoint's
    // plans), for a checkpoint; restore() takes it back.
    std::string state_json() const;
    bool restore(const std::string & json, std::string & err);

    // Mean over layers of the Jaccard of two plans' keep-lists (per layer, ascending).
    static double overlap(const std::vector<std::vector<int64_t>> & a, const std::vector<std::vector<int64_t>> & b);

  private:
    using plans = std::map<std::string, std::vector<std::vector<int64_t>>>;   // "mix" or domain -> layer -> keep
    struct snapshot {
        int64_t tokens = 0;
        plans   keep;
    };
    double  threshold;
    int64_t n_keep, n_group;
    int64_t n_expert_of_state = 0;   // the archive's experts (the bitmaps' width)
    std::vector<stability_point> points;
    std::optional<snapshot>      previous;  // the previous checkpoint's plans (none before the first)

    // The plans of `a` for the mix (its ranking in `mix`) and each domain with tokens; empty + err on failure.
    plans plans_of(const saliency::archive & a, ranking & mix, std::string & err) const;

    static double lowest_overlap(const plans & a, const plans & b, std::string & weakest);
    nlohmann::ordered_json curve_object() const;   // curve_json's document
};

// A recorded curve (curve_json's text, from an archive) read back, checked as a
// file's contents are.
struct stability_curve {
    double                       threshold = 0;
    int64_t                      n_keep = 0;
    std::vector<stability_point> points;
};
bool parse_stability_curve(const std::string & json, stability_curve & out, std::string & err);

// The curve as a table for `reap plan` (indented two spaces).
std::string curve_table(const stability_curve & c);

// One line for the console: "stability at 61,440 tokens: keep-list overlap
// 0.961 with the previous checkpoint, 0.944 with half the tokens (lowest: ja);
// safety margin 9".
std::string describe(const stability_point & p);

}  // namespace reap::planner

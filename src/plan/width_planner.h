// Width planning: from per-channel scores of every kept expert to the
// channel lists of a width plan (plan.h, version 2), the library behind
// `reap plan --width K`.
//
// Each kept expert keeps its own K highest-scoring channels (ties to the
// lower channel id), listed ascending. Where the scores come from is the
// caller's: the saliency archive's channel scores (energy Σa², REAP-style
// Σg·|a|·‖W_down[:,c]‖) once archives carry them; a test's own values.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "plan/plan.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace reap::planner {

// The scores of source expert `expert` of MoE layer `layer`: n_ff values,
// one per intermediate channel, higher = kept first. False with `err` when
// they cannot be had.
using channel_scores = std::function<bool(int layer, int64_t expert, std::vector<double> & scores, std::string & err)>;

// The K channels of `scores` to keep: the K highest (ties to the lower id;
// a NaN ranks last), ascending.
std::vector<int64_t> top_channels(const std::vector<double> & scores, int64_t K);

// Makes `p` (an expert plan: its keep lists) a width plan of width K out of
// n_ff, each kept expert's channels from `scores`. Fails when K is outside
// [1, n_ff] or a score vector does not have n_ff values (naming layer and
// expert).
bool add_width(plan & p, int64_t n_ff, int64_t K, const channel_scores & scores, std::string & err);

}  // namespace reap::planner

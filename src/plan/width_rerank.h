// The rerank statistic of a width plan: does cutting the experts' channels
// change which experts matter? Per MoE layer, Spearman's rank correlation
// between the kept experts' saliency at full width and their saliency
// restricted to the channels each keeps, from the channel scores the plan was
// ranked by (the archive's ch_reap by default, summed over the plan's domains;
// width_planner.h archive_channel_scores):
//   full(e)       = Σ over all n_ff channels c of score(e, c)
//   restricted(e) = Σ over the channels e keeps   of score(e, c)
// With ch_reap, score(e, c) = Σ g·|h_c|·‖W_down[:,c]‖ over the tokens routed
// to e, so full(e) is a channel-wise REAP saliency of the expert. A value near
// 1 says the width cut barely reranks the experts (one public Kimi-K3 card
// reports ≥ 0.988 per layer for its halved experts).
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "plan/plan.h"
#include "plan/width_planner.h"

#include <string>
#include <vector>

namespace reap::planner {

// Spearman's rank correlation of x and y (same length): the Pearson
// correlation of their ranks, tied values sharing the average of their ranks.
// NaN when there are fewer than 2 values or either side is constant.
double spearman(const std::vector<double> & x, const std::vector<double> & y);

struct width_rerank {
    std::vector<int>    layers;     // MoE layers of the plan, in its order
    std::vector<double> spearman;   // per layer (NaN where undefined: one expert, or constant saliency)
    size_t              n_defined = 0;
    double              min = 0, median = 0;   // over the layers where it is defined (0 when none is)
};

// The statistic of width plan `p` (has_width(): every layer lists its
// channels) with `scores` giving each expert's n_ff channel scores; over the
// plan's kept experts in every layer. Fails, naming layer and expert, when a
// score vector does not have width_n_ff values.
bool rerank_of(const plan & p, const channel_scores & scores, width_rerank & out, std::string & err);

}  // namespace reap::planner

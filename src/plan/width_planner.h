// Width planning: from per-channel scores of every kept expert to the
// channel lists of a width plan (plan.h, version 2), the library behind
// `reap plan --width K`.
//
// Each kept expert keeps its own K highest-scoring channels (ties to the
// lower channel id), listed ascending. Where the scores come from is the
// caller's: the saliency archive's channel scores (archive_channel_scores:
// REAP-style Σg·|a_c|·‖W_down[:,c]‖ or the energy Σa_c², summed over the
// plan's domains as the expert scores are); a test's own values. A model
// whose one shared expert is cut with the routed experts (llama4) keeps its
// K best shared channels by the archive's shared-expert statistics of the
// same metric (sh_reap / sh_energy).
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "plan/plan.h"
#include "saliency/archive.h"

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

// The scores of the one shared expert of MoE layer `layer` (llama4, cut with
// the routed experts: moe::expert_width::shared_cut): n_ff values.
using shared_channel_scores = std::function<bool(int layer, std::vector<double> & scores, std::string & err)>;

// Makes `p` (an expert plan: its keep lists) a width plan of width K out of
// n_ff, each kept expert's channels from `scores`, and, when `shared` is
// set, each layer's shared_channels (the shared expert's K best) from it.
// Fails when K is outside [1, n_ff] or a score vector does not have n_ff
// values (naming layer and expert).
bool add_width(plan & p, int64_t n_ff, int64_t K, const channel_scores & scores, std::string & err,
               const shared_channel_scores & shared = nullptr);

// Which of the archive's channel statistics ranks the channels.
enum class channel_score {
    reap,     // ch_reap: Σ g·|a_c|·‖W_down[:,c]‖ (reap calibrate --width-saliency)
    energy,   // ch_energy: Σ a_c² (calibrate or imatrix --width-saliency)
};
const char * channel_score_name(channel_score s);   // "reap" / "energy"
bool parse_channel_score(const std::string & s, channel_score & out);
// The score used when none is asked for: reap for "reap" archives, energy
// for "energy" archives (imatrix imports hold no ch_reap).
channel_score default_channel_score(saliency::metric_set ms);

// The channel scores of archive `a` (read from `archive_name`) for a model
// whose experts have `n_ff` channels: statistic `which` summed over
// `domains` (all when empty; saliency::sum_domains, the sum the expert
// scores are made from; with --consensus minrank too). Fails with a message
// naming the archive when it has no channel statistics (a version 1
// archive, or one made without --width-saliency: the message says how to
// make one), when they were measured at another width than n_ff, when
// `which` is reap and the archive holds energies only, or on an unknown
// domain. The archive's layers and experts are the model's (the caller has
// checked its fingerprint); the callback refuses a layer that is not an MoE
// layer of the archive or an expert outside it.
bool archive_channel_scores(const saliency::archive & a, const std::string & archive_name,
                            const std::vector<std::string> & domains, channel_score which, int64_t n_ff,
                            channel_scores & out, std::string & err);

// The shared expert's channel scores of archive `a` (its sh_energy / sh_reap
// by `which`, the same metric as the routed channels', summed over `domains`
// as archive_channel_scores sums), for a model whose shared expert is cut
// with the routed experts (llama4). Fails, saying how to make one, when the
// archive has no shared-expert statistics (archive::has_shared_channels),
// and as archive_channel_scores does otherwise.
bool archive_shared_channel_scores(const saliency::archive & a, const std::string & archive_name,
                                   const std::vector<std::string> & domains, channel_score which, int64_t n_ff,
                                   shared_channel_scores & out, std::string & err);

}  // namespace reap::planner

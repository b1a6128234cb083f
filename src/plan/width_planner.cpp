// Width planning (width_planner.h): each kept expert's K best channels.
#include "plan/width_planner.h"

#include <algorithm>
#include <memory>
#include <cmath>
#include <numeric>

namespace reap::planner {

std::vector<int64_t> top_channels(const std::vector<double> & scores, int64_t K) {
    std::vector<int64_t> ids(scores.size());
    std::iota(ids.begin(), ids.end(), 0);
    auto key = [&](int64_t c) { return std::isnan(scores[size_t(c)]) ? -INFINITY : scores[size_t(c)]; };
    const size_t k = size_t(std::clamp<int64_t>(K, 0, int64_t(ids.size())));
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), [&](int64_t a, int64_t b) {
        const double x = key(a), y = key(b);
        return x != y ? x > y : a < b;
    });
    ids.resize(k);
    std::sort(ids.begin(), ids.end());
    return ids;
}

bool add_width(plan & p, int64_t n_ff, int64_t K, const channel_scores & scores, std::string & err,
               const shared_channel_scores & shared) {
    if (K < 1 || K > n_ff) {
        err = "width " + std::to_string(K) + " out of range [1, " + std::to_string(n_ff) + "]";
        return false;
    }
    std::vector<double> s;
    for (plan_layer & l : p.layers) {
        l.channels.clear();
        for (int64_t e : l.keep) {
            if (!scores(l.layer, e, s, err)) return false;
            if (int64_t(s.size()) != n_ff) {
                err = "layer " + std::to_string(l.layer) + " expert " + std::to_string(e) + ": " + std::to_string(s.size()) +
                      " channel scores, the experts have " + std::to_string(n_ff) + " channels";
                return false;
            }
            l.channels.push_back(top_channels(s, K));
        }
        l.shared_channels.clear();
        if (!shared) continue;
        if (!shared(l.layer, s, err)) return false;
        if (int64_t(s.size()) != n_ff) {
            err = "layer " + std::to_string(l.layer) + " shared expert: " + std::to_string(s.size()) +
                  " channel scores, it has " + std::to_string(n_ff) + " channels";
            return false;
        }
        l.shared_channels = top_channels(s, K);
    }
    p.width_n_ff = n_ff;
    p.width_keep = K;
    return true;
}

const char * channel_score_name(channel_score s) {
    return s == channel_score::reap ? "reap" : "energy";
}

bool parse_channel_score(const std::string & s, channel_score & out) {
    if (s == "reap") out = channel_score::reap;
    else if (s == "energy") out = channel_score::energy;
    else return false;
    return true;
}

channel_score default_channel_score(saliency::metric_set ms) {
    return ms == saliency::metric_set::reap ? channel_score::reap : channel_score::energy;
}

bool archive_channel_scores(const saliency::archive & a, const std::string & archive_name,
                            const std::vector<std::string> & domains, channel_score which, int64_t n_ff,
                            channel_scores & out, std::string & err) {
    if (a.n_ff == 0) {
        err = archive_name + " has no channel scores (per expert and intermediate channel: the input of ffn_down_exps); "
              "a width plan ranks each expert's channels by them. Make an archive with them with "
              "`reap calibrate --width-saliency` or `reap imatrix --width-saliency`";
        return false;
    }
    if (int64_t(a.n_ff) != n_ff) {
        err = archive_name + " holds channel scores of experts " + std::to_string(a.n_ff) + " channels wide; the model's have " +
              std::to_string(n_ff);
        return false;
    }
    if (which == channel_score::reap && a.metrics != saliency::metric_set::reap) {
        err = archive_name + " holds channel energies only (metric set '" + saliency::metric_set_name(a.metrics) +
              "', no ch_reap): use --channel-score energy, or an archive from reap calibrate --width-saliency";
        return false;
    }
    auto sum = std::make_shared<saliency::domain_stats>();
    if (!saliency::sum_domains(a, domains, *sum, err)) return false;
    auto values = std::shared_ptr<const std::vector<double>>(sum, which == channel_score::reap ? &sum->ch_reap : &sum->ch_energy);
    if (values->size() != a.n_channel_values()) {
        err = archive_name + ": the summed channel scores hold " + std::to_string(values->size()) + " values, expected " +
              std::to_string(a.n_channel_values());
        return false;
    }
    const std::vector<int> moe_layers = a.model.moe_layers;
    const int64_t n_expert = a.model.n_expert;
    const uint32_t width = a.n_ff;
    out = [values, moe_layers, n_expert, width, archive_name](int layer, int64_t expert, std::vector<double> & scores,
                                                              std::string & msg) {
        if (!std::binary_search(moe_layers.begin(), moe_layers.end(), layer) || expert < 0 || expert >= n_expert) {
            msg = archive_name + " has no channel scores for layer " + std::to_string(layer) + " expert " + std::to_string(expert);
            return false;
        }
        // archive::channel_index(layer, expert, 0); the callback outlives `a`
        const size_t at = (size_t(layer) * size_t(n_expert) + size_t(expert)) * width;
        scores.assign(values->begin() + std::ptrdiff_t(at), values->begin() + std::ptrdiff_t(at + width));
        return true;
    };
    return true;
}

bool archive_shared_channel_scores(const saliency::archive & a, const std::string & archive_name,
                                   const std::vector<std::string> & domains, channel_score which, int64_t n_ff,
                                   shared_channel_scores & out, std::string & err) {
    channel_scores routed;   // the archive's channel checks (width, metric set), one rule
    if (!archive_channel_scores(a, archive_name, domains, which, n_ff, routed, err)) return false;
    if (!a.has_shared_channels) {
        err = archive_name + " has no channel scores of the shared expert (the input of ffn_down_shexp); the model's "
              "shared expert is as wide as its routed experts and is cut with them, ranked by them. Make the archive "
              "again with `reap calibrate --width-saliency` or `reap imatrix --width-saliency` (from an imatrix with "
              "ffn_down_shexp entries)";
        return false;
    }
    auto sum = std::make_shared<saliency::domain_stats>();
    if (!saliency::sum_domains(a, domains, *sum, err)) return false;
    auto values = std::shared_ptr<const std::vector<double>>(sum, which == channel_score::reap ? &sum->sh_reap : &sum->sh_energy);
    if (values->size() != a.n_shared_channel_values()) {
        err = archive_name + ": the summed shared-expert channel scores hold " + std::to_string(values->size()) +
              " values, expected " + std::to_string(a.n_shared_channel_values());
        return false;
    }
    const std::vector<int> moe_layers = a.model.moe_layers;
    const uint32_t width = a.n_ff;
    out = [values, moe_layers, width, archive_name](int layer, std::vector<double> & scores, std::string & msg) {
        if (!std::binary_search(moe_layers.begin(), moe_layers.end(), layer)) {
            msg = archive_name + " has no shared-expert channel scores for layer " + std::to_string(layer);
            return false;
        }
        const size_t at = size_t(layer) * width;   // archive::shared_channel_index(layer, 0); the callback outlives `a`
        scores.assign(values->begin() + std::ptrdiff_t(at), values->begin() + std::ptrdiff_t(at + width));
        return true;
    };
    return true;
}

}  // namespace reap::planner

// Width planning (width_planner.h): each kept expert's K best channels.
#include "plan/width_planner.h"

#include <algorithm>
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

bool add_width(plan & p, int64_t n_ff, int64_t K, const channel_scores & scores, std::string & err) {
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
    }
    p.width_n_ff = n_ff;
    p.width_keep = K;
    return true;
}

}  // namespace reap::planner

// The rerank statistic of a width plan (width_rerank.h).
#include "plan/width_rerank.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace reap::planner {

namespace {

// 1-based ranks of v, ties sharing their average rank.
std::vector<double> average_ranks(const std::vector<double> & v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
        const double avg = 0.5 * double(i + j) + 1.0;   // positions i..j hold ranks i+1..j+1
        for (size_t k = i; k <= j; ++k) r[order[k]] = avg;
        i = j + 1;
    }
    return r;
}

}  // namespace

double spearman(const std::vector<double> & x, const std::vector<double> & y) {
    const size_t n = x.size();
    if (n < 2 || y.size() != n) return NAN;
    const std::vector<double> rx = average_ranks(x), ry = average_ranks(y);
    const double mean = 0.5 * double(n + 1);   // the mean of any n ranks, ties averaged or not
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; ++i) {
        sxy += (rx[i] - mean) * (ry[i] - mean);
        sxx += (rx[i] - mean) * (rx[i] - mean);
        syy += (ry[i] - mean) * (ry[i] - mean);
    }
    if (sxx == 0 || syy == 0) return NAN;
    return sxy / std::sqrt(sxx * syy);
}

bool rerank_of(const plan & p, const channel_scores & scores, width_rerank & out, std::string & err) {
    out = width_rerank{};
    std::vector<double> s, full, restricted, defined;
    for (const plan_layer & l : p.layers) {
        full.clear();
        restricted.clear();
        for (size_t k = 0; k < l.keep.size(); ++k) {
            if (!scores(l.layer, l.keep[k], s, err)) return false;
            if (int64_t(s.size()) != p.width_n_ff || k >= l.channels.size()) {
                err = "layer " + std::to_string(l.layer) + " expert " + std::to_string(l.keep[k]) + ": " +
                      std::to_string(s.size()) + " channel scores for experts of " + std::to_string(p.width_n_ff) +
                      " channels" + (k >= l.channels.size() ? " (and no channel list in the plan)" : "");
                return false;
            }
            double f = 0, r = 0;
            for (double v : s) f += v;
            for (int64_t c : l.channels[k]) r += s[size_t(c)];
            full.push_back(f);
            restricted.push_back(r);
        }
        const double rho = spearman(full, restricted);
        out.layers.push_back(l.layer);
        out.spearman.push_back(rho);
        if (!std::isnan(rho)) defined.push_back(rho);
    }
    out.n_defined = defined.size();
    if (!defined.empty()) {
        std::sort(defined.begin(), defined.end());
        const size_t n = defined.size();
        out.min = defined.front();
        out.median = n % 2 ? defined[n / 2] : 0.5 * (defined[n / 2 - 1] + defined[n / 2]);
    }
    return true;
}

}  // namespace reap::planner

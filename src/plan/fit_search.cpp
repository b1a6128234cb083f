// reap fit, the search (see fit_search.h): ends and middles first, then the
// gaps a convexity bound cannot rule out, until none can beat the best by more
// than the noise.
#include "plan/fit_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace reap::planner {

namespace {

constexpr double k_no_bound = -std::numeric_limits<double>::infinity();

// The value at x of the line through (x0, y0) and (x1, y1).
double chord_at(double x0, double y0, double x1, double y1, double x) {
    return y1 + (y1 - y0) / (x1 - x0) * (x - x1);
}

} // namespace

fit_search::fit_search(std::vector<fit_point> points, std::vector<std::vector<size_t>> lines, size_t max_passes)
    : points_(std::move(points)), lines_(std::move(lines)), scores_(points_.size()), max_passes_(max_passes) {}

void fit_search::record(size_t point, const fit_score & s) {
    if (point < scores_.size()) scores_[point] = s;
}

size_t fit_search::n_scored() const {
    return (size_t) std::count_if(scores_.begin(), scores_.end(), [](const auto & s) { return s.has_value(); });
}

std::optional<size_t> fit_search::best() const {
    std::optional<size_t> b;
    for (size_t i = 0; i < scores_.size(); ++i) {
        if (!scores_[i]) continue;
        if (!b || scores_[i]->kld < scores_[*b]->kld ||
            (scores_[i]->kld == scores_[*b]->kld && points_[i].bytes < points_[*b].bytes)) {
            b = i;
        }
    }
    return b;
}

std::optional<size_t> fit_search::runner_up() const {
    const std::optional<size_t> b = best();
    std::optional<size_t> r;
    for (size_t i = 0; i < scores_.size(); ++i) {
        if (!scores_[i] || i == b) continue;
        if (!r || scores_[i]->kld < scores_[*r]->kld) r = i;
    }
    return r;
}

double fit_search::noise() const {
    const std::optional<size_t> b = best(), r = runner_up();
    if (!b || !r) return 0;
    const double d0 = scores_[*r]->kld_half[0] - scores_[*b]->kld_half[0];
    const double d1 = scores_[*r]->kld_half[1] - scores_[*b]->kld_half[1];
    return std::fabs(d0 - d1) / 2;
}

double fit_search::gap_bound(size_t line, size_t a, size_t b) const {
    const std::vector<size_t> & ln = lines_[line];
    std::vector<size_t> scored;   // positions in the line with a score
    for (size_t pos = 0; pos < ln.size(); ++pos) {
        if (scores_[ln[pos]]) scored.push_back(pos);
    }
    const auto ia = std::find(scored.begin(), scored.end(), a), ib = std::find(scored.begin(), scored.end(), b);
    if (ia == scored.end() || ib == scored.end() || ib != ia + 1) return k_no_bound;
    auto value = [&](size_t pos) { return scores_[ln[pos]]->kld; };
    const bool left = ia != scored.begin(), right = ib + 1 != scored.end();
    if (!left && !right) return k_no_bound;
    double lowest = std::numeric_limits<double>::infinity();
    for (size_t x = a + 1; x < b; ++x) {
        double bound = k_no_bound;
        if (left) bound = std::max(bound, chord_at((double) *(ia - 1), value(*(ia - 1)), (double) a, value(a), (double) x));
        if (right) bound = std::max(bound, chord_at((double) *(ib + 1), value(*(ib + 1)), (double) b, value(b), (double) x));
        lowest = std::min(lowest, bound);
    }
    return lowest;
}

std::vector<size_t> fit_search::next() {
    const size_t done = n_scored();
    if (max_passes_ > 0 && done >= max_passes_) {
        stop_reason_ = "--max-passes " + std::to_string(max_passes_) + " reached";
        return {};
    }
    const size_t room = max_passes_ > 0 ? max_passes_ - done : points_.size();
    // 1. the middle, then the ends, of every line not yet scored
    std::vector<size_t> middles, ends;
    for (const std::vector<size_t> & ln : lines_) {
        if (ln.empty() || std::any_of(ln.begin(), ln.end(), [&](size_t i) { return scores_[i].has_value(); })) continue;
        middles.push_back(ln[ln.size() / 2]);
        if (ln.size() / 2 != 0) ends.push_back(ln.front());
        if (ln.size() / 2 != ln.size() - 1) ends.push_back(ln.back());
    }
    std::vector<size_t> out = middles;
    out.insert(out.end(), ends.begin(), ends.end());
    if (out.empty()) {
        // 2. the midpoint of every gap that could beat the best by more than the noise
        const std::optional<size_t> b = best();
        if (!b) {
            stop_reason_ = "no candidate fits the budget";
            return {};
        }
        const double target = scores_[*b]->kld - noise();
        std::vector<std::pair<double, size_t>> gaps;   // (bound, point)
        for (size_t l = 0; l < lines_.size(); ++l) {
            const std::vector<size_t> & ln = lines_[l];
            std::optional<size_t> prev;
            for (size_t pos = 0; pos < ln.size(); ++pos) {
                if (!scores_[ln[pos]]) continue;
                if (prev && pos > *prev + 1) {
                    const double bound = gap_bound(l, *prev, pos);
                    if (bound < target) gaps.push_back({bound, ln[(*prev + pos) / 2]});
                }
                prev = pos;
            }
        }
        std::stable_sort(gaps.begin(), gaps.end(), [](const auto & x, const auto & y) { return x.first < y.first; });
        for (const auto & g : gaps) out.push_back(g.second);
        if (out.empty()) {
            char buf[160];
            snprintf(buf, sizeof(buf), "no unscored candidate can beat the best by more than the noise (%.3g nats)", noise());
            stop_reason_ = buf;
            return {};
        }
    }
    if (out.size() > room) out.resize(room);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

} // namespace reap::planner

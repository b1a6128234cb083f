// reap fit, the search: which candidate builds to score next, and when to stop.
//
// The space is a set of lines, one per source quantisation: along a line the
// channel width K grows (its points ascending in K) and each point is the
// largest expert count N whose file, cut to K, fits the budget. So a line
// trades experts for channels at a fixed size, and every point on every line
// fits. Scoring a point costs one masked pass over the held-out text (one
// read of the expert pool per ubatch when the source streams), so the search
// scores as few as it can:
//
//   1. each line's two ends and its middle;
//   2. then, round after round, the midpoint of every unscored gap between two
//      scored points of a line that could still hold a candidate better than
//      the best by more than the noise.
//
// Whether a gap can hold one is decided by a convexity bound: along a line
// the KLD is taken to be convex in the point's index (it falls as channels
// are traded for experts until it rises again). Then no point inside a gap
// lies below the chords through the two scored points on either side of it
// extended into the gap, and a gap whose bound is at or above
// best - noise is never scored. A gap with fewer than two scored points on
// both sides has no bound and is scored. The search stops when no gap is
// left that can beat the best, or after max_passes scores.
//
// The noise is the split-half disagreement of the decision that matters:
// with d_h = KLD_h(runner-up) - KLD_h(best) on each half h of the held-out
// windows, noise = |d_1 - d_2| / 2 (how far the difference of two means moves
// when the text it is measured on changes); 0 until two points are scored.
//
// Core library: no llama.cpp dependency, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace reap::planner {

// One candidate build.
struct fit_point {
    size_t   source = 0;   // which source quantisation (index into the caller's list)
    int64_t  width = 0;    // K: channels kept per expert (the experts' full width when not cut)
    int64_t  n_keep = 0;   // N: experts kept per MoE layer
    uint64_t bytes = 0;    // the exact size reap prune would write
};

// What scoring a candidate measured.
struct fit_score {
    double kld = 0;                  // mean KL divergence from the reference, nats per token
    double kld_half[2] = {0, 0};     // the same over the first and the second half of the windows
    double top1 = 0;                 // top-1 agreement with the reference, 0..1
};

class fit_search {
public:
    // `lines[s]` lists the indices into `points` of one line, ascending in K.
    // `max_passes`: the most points scored in all (0 = no bound).
    fit_search(std::vector<fit_point> points, std::vector<std::vector<size_t>> lines, size_t max_passes);

    // The points to score next (ascending index; empty: the search is over,
    // stop_reason() says why). Every point returned must be scored before
    // the next call.
    std::vector<size_t> next();
    // A point's score, measured now or read back from a journal.
    void record(size_t point, const fit_score & s);

    const std::vector<fit_point> &           points() const { return points_; }
    const std::vector<std::vector<size_t>> & lines() const { return lines_; }
    const std::optional<fit_score> &         score(size_t point) const { return scores_[point]; }
    size_t                                   n_scored() const;
    // The scored point of least KLD (ties: the smaller file, then the lower index).
    std::optional<size_t> best() const;
    // The scored point of least KLD after best() (none with one score).
    std::optional<size_t> runner_up() const;
    double      noise() const;
    // Lower bound of the KLD of any point strictly between scored points a and
    // b of line `line` (positions in the line, a < b - 1) under convexity;
    // -infinity when the gap has no bound.
    double      gap_bound(size_t line, size_t a, size_t b) const;
    const std::string & stop_reason() const { return stop_reason_; }

private:
    std::vector<fit_point>           points_;
    std::vector<std::vector<size_t>> lines_;
    std::vector<std::optional<fit_score>> scores_;
    size_t      max_passes_ = 0;
    std::string stop_reason_;
};

} // namespace reap::planner

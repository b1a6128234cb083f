// reap fit's search (src/plan/fit_search.h) against the exhaustive answer:
// seeded families of convex lines (the assumption the search states), each
// scored in full by brute force here, and the search run to its end on the same
// functions. It must find the true best (or one within its stated noise), score
// far fewer points than the grid holds, and honour --max-passes.
#include "plan/fit_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <random>

namespace pl = reap::planner;

namespace {

// A space of lines: line s has `lengths[s]` points; f(s, pos) is the KLD.
struct space {
    std::vector<pl::fit_point>       points;
    std::vector<std::vector<size_t>> lines;
    std::vector<std::pair<size_t, size_t>> where;   // point -> (line, position)
};

space make_space(const std::vector<size_t> & lengths) {
    space sp;
    for (size_t s = 0; s < lengths.size(); ++s) {
        sp.lines.emplace_back();
        for (size_t pos = 0; pos < lengths[s]; ++pos) {
            pl::fit_point p;
            p.source = s;
            p.width = 32 * (int64_t) (pos + 1);
            p.n_keep = 64 - (int64_t) pos;
            p.bytes = 1000000 - pos;
            sp.lines.back().push_back(sp.points.size());
            sp.where.push_back({s, pos});
            sp.points.push_back(p);
        }
    }
    return sp;
}

using kld_fn = std::function<double(size_t line, size_t pos)>;

struct run_result {
    size_t best = SIZE_MAX;   // none: the search scored nothing (EXPECTed against)
    size_t passes = 0;
    double noise = 0;
};

// Runs the search to its end; each half of a score is the value +/- `half_gap`.
run_result run(const space & sp, const kld_fn & f, size_t max_passes = 0, double half_gap = 0) {
    pl::fit_search s(sp.points, sp.lines, max_passes);
    for (std::vector<size_t> next = s.next(); !next.empty(); next = s.next()) {
        for (size_t i : next) {
            EXPECT_FALSE(s.score(i).has_value()) << "point " << i << " asked for twice";
            pl::fit_score sc;
            sc.kld = f(sp.where[i].first, sp.where[i].second);
            sc.kld_half[0] = sc.kld + half_gap * (i % 2 ? 1 : -1);
            sc.kld_half[1] = sc.kld - half_gap * (i % 2 ? 1 : -1);
            s.record(i, sc);
        }
    }
    EXPECT_FALSE(s.stop_reason().empty());
    EXPECT_TRUE(s.best().has_value()) << "the search ended without a best point";
    return {s.best().value_or(SIZE_MAX), s.n_scored(), s.noise()};
}

// The exhaustive answer: the point of least KLD.
size_t brute_best(const space & sp, const kld_fn & f) {
    size_t b = 0;
    for (size_t i = 1; i < sp.points.size(); ++i) {
        if (f(sp.where[i].first, sp.where[i].second) < f(sp.where[b].first, sp.where[b].second)) b = i;
    }
    return b;
}

// A convex line: a(x - c)^2 + b|x - c| + floor, x the position in [0, 1].
kld_fn convex_family(uint32_t seed, size_t n_lines, const std::vector<size_t> & lengths) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<std::array<double, 4>> coef;
    for (size_t s = 0; s < n_lines; ++s) coef.push_back({0.2 + 3 * u(rng), u(rng) * 0.5, u(rng), 0.01 + 0.3 * u(rng)});
    return [coef, lengths](size_t line, size_t pos) {
        const auto & c = coef[line];
        const double x = lengths[line] > 1 ? (double) pos / (double) (lengths[line] - 1) : 0.5;
        return c[0] * (x - c[2]) * (x - c[2]) + c[1] * std::fabs(x - c[2]) + c[3];
    };
}

} // namespace

TEST(FitSearch, OneLongLineFindsTheExactBestInFewPasses) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        const std::vector<size_t> lengths = {128};
        const space sp = make_space(lengths);
        const kld_fn f = convex_family(seed, 1, lengths);
        const run_result r = run(sp, f);
        EXPECT_EQ(r.best, brute_best(sp, f)) << "seed " << seed;
        EXPECT_LE(r.passes, 128u / 3) << "seed " << seed;
    }
}

TEST(FitSearch, SeveralSourcesFindTheGlobalBest) {
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        const std::vector<size_t> lengths = {8, 1, 1, 1, 16, 24};
        const space sp = make_space(lengths);
        const kld_fn f = convex_family(1000 + seed, lengths.size(), lengths);
        const run_result r = run(sp, f);
        EXPECT_EQ(r.best, brute_best(sp, f)) << "seed " << seed;
        EXPECT_LT(r.passes, sp.points.size()) << "seed " << seed;
    }
}

TEST(FitSearch, NoiseStopsEarlierButStaysWithinIt) {
    const std::vector<size_t> lengths = {64, 64};
    const space sp = make_space(lengths);
    size_t quiet_total = 0, noisy_total = 0;
    for (uint32_t seed = 1; seed <= 30; ++seed) {
        const kld_fn f = convex_family(2000 + seed, lengths.size(), lengths);
        const size_t truth = brute_best(sp, f);
        const run_result quiet = run(sp, f);
        const run_result noisy = run(sp, f, 0, 0.01);
        EXPECT_EQ(quiet.best, truth);
        const double got = f(sp.where[noisy.best].first, sp.where[noisy.best].second);
        const double want = f(sp.where[truth].first, sp.where[truth].second);
        EXPECT_LE(got - want, noisy.noise + 1e-12) << "seed " << seed;
        quiet_total += quiet.passes;
        noisy_total += noisy.passes;
    }
    EXPECT_LT(noisy_total, quiet_total);
}

TEST(FitSearch, MaxPassesBoundsTheScores) {
    const std::vector<size_t> lengths = {64, 64, 64};
    const space sp = make_space(lengths);
    const kld_fn f = convex_family(7, lengths.size(), lengths);
    for (size_t cap : {1u, 4u, 9u}) {
        pl::fit_search s(sp.points, sp.lines, cap);
        size_t asked = 0;
        for (std::vector<size_t> next = s.next(); !next.empty(); next = s.next()) {
            for (size_t i : next) {
                pl::fit_score sc;
                sc.kld = sc.kld_half[0] = sc.kld_half[1] = f(sp.where[i].first, sp.where[i].second);
                s.record(i, sc);
                ++asked;
            }
        }
        EXPECT_EQ(asked, cap);
        EXPECT_NE(s.stop_reason().find("--max-passes"), std::string::npos) << s.stop_reason();
    }
}

TEST(FitSearch, GapBoundNeverExceedsTheConvexFunctionInTheGap) {
    const std::vector<size_t> lengths = {40};
    const space sp = make_space(lengths);
    std::mt19937 rng(5);
    for (uint32_t seed = 1; seed <= 50; ++seed) {
        const kld_fn f = convex_family(3000 + seed, 1, lengths);
        pl::fit_search s(sp.points, sp.lines, 0);
        std::vector<size_t> scored = {0, 39};
        for (int k = 0; k < 4; ++k) scored.push_back(1 + rng() % 38);
        std::sort(scored.begin(), scored.end());
        scored.erase(std::unique(scored.begin(), scored.end()), scored.end());
        for (size_t pos : scored) {
            pl::fit_score sc;
            sc.kld = f(0, pos);
            s.record(pos, sc);
        }
        for (size_t k = 0; k + 1 < scored.size(); ++k) {
            if (scored[k + 1] == scored[k] + 1) continue;
            double lowest = INFINITY;
            for (size_t x = scored[k] + 1; x < scored[k + 1]; ++x) lowest = std::min(lowest, f(0, x));
            EXPECT_LE(s.gap_bound(0, scored[k], scored[k + 1]), lowest + 1e-12) << "seed " << seed << " gap " << scored[k];
        }
    }
}

TEST(FitSearch, ASinglePointLineIsScoredOnceAndAnEmptySpaceSaysSo) {
    const space sp = make_space({1});
    pl::fit_search s(sp.points, sp.lines, 0);
    EXPECT_EQ(s.next(), std::vector<size_t>{0});
    s.record(0, pl::fit_score{});
    EXPECT_TRUE(s.next().empty());
    pl::fit_search empty({}, {}, 0);
    EXPECT_TRUE(empty.next().empty());
    EXPECT_NE(empty.stop_reason().find("no candidate fits"), std::string::npos);
}

// Tests of the behaviour rules in the core (src/metrics/generation.h,
// needle_grid.h): loops, termination, distinct-4 and agreement against
// numbers worked out by hand here; where a needle goes, what is an exact
// answer, the default grid and the seeded values. Core only, so they also run
// under ASan+UBSan.
#include "metrics/generation.h"
#include "metrics/needle_grid.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace {

std::vector<int32_t> seq(std::initializer_list<int32_t> v) { return v; }

// `times` copies of `span`, after `head`
std::vector<int32_t> repeated(const std::vector<int32_t> & head, const std::vector<int32_t> & span, int times) {
    std::vector<int32_t> t = head;
    for (int i = 0; i < times; ++i) t.insert(t.end(), span.begin(), span.end());
    return t;
}

} // namespace

TEST(BehaviourMetrics, LoopIsASpanOfAtLeastKRepeatedRTimesAtTheEnd) {
    const std::vector<int32_t> span8 = {1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT_TRUE(reap::ends_in_loop(repeated({9, 9, 10}, span8, 3)));
    EXPECT_FALSE(reap::ends_in_loop(repeated({9, 9, 10}, span8, 2)));          // twice is not a loop
    auto cut = repeated({11}, span8, 3);
    cut.insert(cut.end(), {1, 2, 3});                                         // the cap cut the 4th copy short
    EXPECT_TRUE(reap::ends_in_loop(cut));
    auto tail = repeated({}, span8, 3);
    tail.push_back(42);                                                       // it broke out of the loop
    EXPECT_FALSE(reap::ends_in_loop(tail));
    // a short span counts through its multiples: 1 token x 24 is a period-8 run x 3
    EXPECT_TRUE(reap::ends_in_loop(std::vector<int32_t>(24, 5)));
    EXPECT_FALSE(reap::ends_in_loop(std::vector<int32_t>(23, 5)));
    // a 5-token span: its multiple 10 >= 8 needs 30 tokens
    const std::vector<int32_t> span5 = {1, 2, 3, 4, 5};
    EXPECT_FALSE(reap::ends_in_loop(repeated({}, span5, 5)));
    EXPECT_TRUE(reap::ends_in_loop(repeated({}, span5, 6)));
    EXPECT_FALSE(reap::ends_in_loop({}));
    // other k and r
    EXPECT_TRUE(reap::ends_in_loop(repeated({}, seq({1, 2}), 4), 2, 4));
    EXPECT_FALSE(reap::ends_in_loop(repeated({}, seq({1, 2}), 3), 2, 4));
}

TEST(BehaviourMetrics, StatsOfASetOfOutputs) {
    reap::generation_output a, b, base_a, base_b;
    a.tokens = {1, 2, 3, 4, 1, 2, 3, 4};   // 5 4-grams, 4 distinct (1234 twice)
    a.terminated = true;
    b.tokens = repeated({}, seq({7, 7, 7, 7, 7, 7, 7, 7}), 3);  // 24 sevens: a loop; 21 4-grams, 1 distinct
    base_a.tokens = {1, 2, 3, 9};
    base_b.tokens = {8};
    const auto s = reap::generation_stats_of({&a, &b}, {&base_a, &base_b});
    EXPECT_EQ(s.n_outputs, 2u);
    EXPECT_DOUBLE_EQ(s.loop_rate, 0.5);
    EXPECT_DOUBLE_EQ(s.termination_rate, 0.5);
    EXPECT_DOUBLE_EQ(s.distinct_4, 5.0 / 26.0);   // {1234, 2341, 3412, 4123, 7777} over 5 + 21
    EXPECT_DOUBLE_EQ(s.mean_length, (8 + 24) / 2.0);
    EXPECT_DOUBLE_EQ(s.mean_agreement, (3 + 0) / 2.0);
    EXPECT_EQ(reap::generation_stats_of({}, {}).n_outputs, 0u);
}

TEST(BehaviourMetrics, ReportStatsPerDomainAgainstTheBase) {
    reap::generation_report r;
    r.domains = {"en", "ja"};
    r.prompt_domain = {0, 1, 0};
    r.prompt_line = {1, 2, 3};
    r.models.resize(2);
    for (auto * m : {&r.models[0], &r.models[1]}) m->outputs.resize(3);
    r.models[0].outputs[0].tokens = {1, 2, 3};
    r.models[0].outputs[1].tokens = {4, 5};
    r.models[0].outputs[2].tokens = {6};
    r.models[1].outputs[0].tokens = {1, 2, 0};
    r.models[1].outputs[1].tokens = {4, 5};
    r.models[1].outputs[2].tokens = {0};
    r.models[1].outputs[2].terminated = true;
    EXPECT_DOUBLE_EQ(r.stats(1, 0).mean_agreement, (2 + 0) / 2.0);
    EXPECT_DOUBLE_EQ(r.stats(1, 1).mean_agreement, 2.0);
    EXPECT_DOUBLE_EQ(r.stats(1, 0).termination_rate, 0.5);
    EXPECT_EQ(r.stats(1, -1).n_outputs, 3u);
    EXPECT_DOUBLE_EQ(r.stats(0, -1).mean_agreement, 2.0);   // the base against itself: every token
}

TEST(BehaviourMetrics, NeedleGoesInAtTheNearestSentenceBoundary) {
    // pieces: "A", " b", ".", " C", " d", "!", "\n", "E", "f"  (n = 9)
    const std::vector<std::string> p = {"A", " b", ".", " C", " d", "!", "\n", "E", "f"};
    EXPECT_EQ(reap::needle_boundary(p, 0.0), 0u);
    EXPECT_EQ(reap::needle_boundary(p, 1.0), 9u);
    EXPECT_EQ(reap::needle_boundary(p, 0.3), 3u);   // 2.7: after "."
    EXPECT_EQ(reap::needle_boundary(p, 0.6), 6u);   // 5.4: after "!" (6) rather than after "." (3)
    EXPECT_EQ(reap::needle_boundary(p, 0.75), 7u);  // 6.75: after the newline
    // no boundary at all: the start or the end, whichever is nearer (the lower on a tie)
    const std::vector<std::string> none = {"a", "b", "c", "d"};
    EXPECT_EQ(reap::needle_boundary(none, 0.4), 0u);
    EXPECT_EQ(reap::needle_boundary(none, 0.5), 0u);
    EXPECT_EQ(reap::needle_boundary(none, 0.6), 4u);
    EXPECT_EQ(reap::needle_boundary({}, 0.5), 0u);
}

TEST(BehaviourMetrics, ExactAnswers) {
    EXPECT_TRUE(reap::needle_matches(" KVX-7391", "KVX-7391"));
    EXPECT_TRUE(reap::needle_matches("KVX-7391.\n", "KVX-7391"));
    EXPECT_FALSE(reap::needle_matches(" KVX-739", "KVX-7391"));
    EXPECT_FALSE(reap::needle_matches(" kvx-7391", "KVX-7391"));
    EXPECT_FALSE(reap::needle_matches("The KVX-7391", "KVX-7391"));
    EXPECT_FALSE(reap::needle_matches("   ", "KVX-7391"));
}

TEST(BehaviourMetrics, DefaultGridAndSeededValues) {
    EXPECT_EQ(reap::default_needle_lengths(256), (std::vector<int>{64, 128}));
    EXPECT_EQ(reap::default_needle_lengths(131072), (std::vector<int>{4096, 8192, 16384, 32768, 65536}));
    EXPECT_TRUE(reap::default_needle_lengths(100).empty());
    const auto cells = reap::needle_cells({64, 128}, {0.15, 0.5}, 3, 42);
    ASSERT_EQ(cells.size(), 12u);
    EXPECT_EQ(cells[0].length, 64);
    EXPECT_EQ(cells[3].depth, 0.5);
    EXPECT_EQ(cells[5].trial, 2);
    EXPECT_EQ(cells[6].length, 128);
    std::set<std::string> values;
    for (const auto & c : cells) {
        ASSERT_EQ(c.value.size(), 8u) << c.value;
        for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(c.value[i] >= 'A' && c.value[i] <= 'Z') << c.value;
        EXPECT_EQ(c.value[3], '-');
        for (size_t i = 4; i < 8; ++i) EXPECT_TRUE(c.value[i] >= '0' && c.value[i] <= '9') << c.value;
        values.insert(c.value);
    }
    EXPECT_EQ(values.size(), cells.size());
    // the same seed gives the same values, another seed others
    EXPECT_EQ(reap::needle_cells({64, 128}, {0.15, 0.5}, 3, 42)[7].value, cells[7].value);
    EXPECT_NE(reap::needle_cells({64, 128}, {0.15, 0.5}, 3, 43)[7].value, cells[7].value);
}

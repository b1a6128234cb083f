// The statistics of task evidence, without a model: an accuracy's 95%
// interval and the paired test of a candidate against its base on the same
// tasks. One place, so that eval's table, its JSON and the card agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace reap {

// The Wilson score interval at 95% (z = 1.95996398454, as llama-perplexity's
// HellaSwag table) of k successes in n trials; [0, 1] when n is 0.
struct interval {
    double low = 0, high = 1;
};
interval wilson_interval(uint64_t k, uint64_t n);

// McNemar's exact test: of the tasks where two models disagree on being right,
// b went right -> wrong and c wrong -> right; under "no difference" each such
// task is a fair coin, so p = min(1, 2 * P(X <= min(b, c))), X ~ Binomial(b + c, 1/2).
// 1 when b + c is 0.
double mcnemar_exact_p(uint64_t b, uint64_t c);

// A candidate against its base, task for task (both the same length, 1 = right).
struct paired_result {
    uint64_t right_to_wrong = 0, wrong_to_right = 0;
    double   p_value = 1;
};
paired_result paired_against(const std::vector<uint8_t> & base, const std::vector<uint8_t> & cand);

} // namespace reap

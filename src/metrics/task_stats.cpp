// Wilson intervals and McNemar's exact test (task_stats.h).
#include "metrics/task_stats.h"

#include <algorithm>
#include <cmath>

namespace reap {

interval wilson_interval(uint64_t k, uint64_t n) {
    if (n == 0) return {};
    const double za = 1.95996398454, nn = (double) n, f = (double) k / nn;
    const double z = za * za / nn;
    const double half = z * std::sqrt(nn * (4.0 * f * (1 - f) + z)) / (za + za);
    return {std::max(0.0, (f + z * 0.5 - half) / (1.0 + z)), std::min(1.0, (f + z * 0.5 + half) / (1.0 + z))};
}

double mcnemar_exact_p(uint64_t b, uint64_t c) {
    const uint64_t n = b + c, k = std::min(b, c);
    if (n == 0) return 1;
    // P(X <= k) = sum_i C(n, i) / 2^n, summed in log space (n may be large)
    const double ln2n = (double) n * std::log(2.0), lgn = std::lgamma((double) n + 1);
    double top = -INFINITY, sum = 0;
    std::vector<double> terms;
    for (uint64_t i = 0; i <= k; ++i) {
        terms.push_back(lgn - std::lgamma((double) i + 1) - std::lgamma((double) (n - i) + 1) - ln2n);
        top = std::max(top, terms.back());
    }
    for (double t : terms) sum += std::exp(t - top);
    return std::min(1.0, 2 * std::exp(top + std::log(sum)));
}

paired_result paired_against(const std::vector<uint8_t> & base, const std::vector<uint8_t> & cand) {
    paired_result r;
    for (size_t i = 0; i < base.size() && i < cand.size(); ++i) {
        if (base[i] && !cand[i]) ++r.right_to_wrong;
        if (!base[i] && cand[i]) ++r.wrong_to_right;
    }
    r.p_value = mcnemar_exact_p(r.right_to_wrong, r.wrong_to_right);
    return r;
}

} // namespace reap

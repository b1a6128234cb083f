// archive_compare.h: two saliency archives of the same tokens compared the
// way calibrate's packing promises (src/llama/calibrate.h): the same domains,
// token counts and routed-token counts exactly; the float sums (gate, REAP,
// EAN) and max norms within a relative bound. The bound is what llama.cpp's
// arithmetic gives a row in a batch of another shape (other matmul kernels
// and tilings, other softmax lengths), the values summed in double in the same
// token order. Measured per cell, the largest relative difference: F32 models
// (the trained model) 7e-7, kimi-k3 4e-8, F16 zoo models 3e-6 to 7e-4: with F16
// weights some of llama.cpp's matmul paths round the activations to F16 and
// others do not, so values agree to F16's precision (2^-10). k_pack_rel_tol_f32
// and k_pack_rel_tol_f16 leave room for that and nothing more: a token routed
// to another expert changes a count, and a token's values read for another
// token's row move a sum by far more (tens of percent on these models).
#pragma once

#include "saliency/archive.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace reap_test {

constexpr double k_pack_rel_tol_f32 = 1e-5;
constexpr double k_pack_rel_tol_f16 = 2e-3;

// Largest relative difference of two sums (0 when both are 0).
inline double rel_diff(double a, double b) {
    const double scale = std::max(std::fabs(a), std::fabs(b));
    return scale == 0 ? 0 : std::fabs(a - b) / scale;
}

// EXPECTs the promise above; returns the largest relative difference seen.
inline double expect_same_calibration(const reap::saliency::archive & a, const reap::saliency::archive & b,
                                      const std::string & what, double tol) {
    double worst = 0;
    EXPECT_EQ(a.domains.size(), b.domains.size()) << what;
    if (a.domains.size() != b.domains.size()) return 1;
    for (size_t d = 0; d < a.domains.size(); ++d) {
        const auto & x = a.domains[d];
        const auto & y = b.domains[d];
        EXPECT_EQ(x.name, y.name) << what;
        EXPECT_EQ(x.n_tokens, y.n_tokens) << what << " " << x.name;
        EXPECT_EQ(x.count, y.count) << what << " " << x.name << ": routed-token counts differ";
        if (x.count.size() != y.count.size() || x.reap_sum.size() != y.reap_sum.size()) return 1;
        for (size_t i = 0; i < x.count.size(); ++i) {
            worst = std::max({worst, rel_diff(x.gate_sum[i], y.gate_sum[i]), rel_diff(x.reap_sum[i], y.reap_sum[i]),
                              rel_diff(x.ean_sum[i], y.ean_sum[i]), rel_diff(x.max_norm[i], y.max_norm[i])});
        }
    }
    EXPECT_LE(worst, tol) << what << ": sums differ by more than float summation allows";
    return worst;
}

}  // namespace reap_test

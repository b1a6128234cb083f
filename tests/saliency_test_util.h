// saliency_test_util.h: synthetic saliency archives for the archive and
// planner tests, built with reap::saliency's own types (no forward pass): a
// seeded simulation of routing (each token picks n_expert_used distinct
// experts with skewed probabilities) so that the count invariant holds, with
// knobs for never-routed experts and injected max_norm outliers; and seeded
// channel statistics (width saliency) for an archive's routed experts.
// Header-only; links only reap_core.
#pragma once

#include "saliency/archive.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace saliency_test {

namespace s = reap::saliency;

inline s::fingerprint make_fingerprint(uint32_t n_layer = 3, uint32_t n_expert = 8, uint32_t n_used = 2,
                                       std::vector<int> moe_layers = {0, 2}, const std::string & arch = "qwen3moe") {
    s::fingerprint fp;
    fp.arch = arch;
    fp.n_layer = n_layer;
    fp.n_expert = n_expert;
    fp.n_expert_used = n_used;
    fp.moe_layers = std::move(moe_layers);
    fp.router_sha256 = std::string(64, 'a');
    return fp;
}

struct sim_options {
    uint32_t seed = 7;
    int64_t  n_tokens = 500;
    std::vector<int> never_routed;   // experts no token of this domain is routed to (every MoE layer)
};

// Adds domain `name` to `a` with simulated statistics.
inline void simulate_domain(s::archive & a, const std::string & name, const sim_options & o) {
    std::mt19937_64 rng(o.seed);
    s::domain_stats & d = a.add_domain(name);
    d.n_tokens += o.n_tokens;
    const uint32_t E = a.model.n_expert, K = a.model.n_expert_used;
    for (int l : a.model.moe_layers) {
        // skewed popularity per layer
        std::vector<double> w(E);
        std::uniform_real_distribution<double> u(0.0, 1.0);
        for (uint32_t e = 0; e < E; ++e) {
            const bool never = std::find(o.never_routed.begin(), o.never_routed.end(), (int) e) != o.never_routed.end();
            w[e] = never ? 0.0 : 0.05 + std::pow(u(rng), 3.0);
        }
        for (int64_t t = 0; t < o.n_tokens; ++t) {
            std::vector<double> ww = w;
            for (uint32_t k = 0; k < K; ++k) {
                std::discrete_distribution<int> pick(ww.begin(), ww.end());
                const int e = pick(rng);
                ww[e] = 0.0;
                const size_t i = a.index(l, e);
                const double g = 0.1 + 0.8 * u(rng);
                const double norm = 0.5 + 2.0 * u(rng);
                d.count[i] += 1;
                if (a.metrics == s::metric_set::reap) {
                    d.gate_sum[i] += g;
                    d.reap_sum[i] += g * norm;
                    d.ean_sum[i] += norm;
                    if (a.has_sq_norms) d.ean_sq_sum[i] += norm * norm;
                    d.max_norm[i] = std::max(d.max_norm[i], norm);
                } else {
                    d.energy_sum[i] += norm * norm;
                }
            }
        }
    }
}

// An archive with the given domains (seeds 7, 8, ...).
inline s::archive make_archive(const std::vector<std::string> & domains, const s::fingerprint & fp = make_fingerprint(),
                               s::metric_set ms = s::metric_set::reap, int64_t n_tokens = 500, bool sq_norms = false) {
    s::archive a = s::make_archive(fp, ms);
    a.has_sq_norms = sq_norms;   // before the domains: add_domain sizes ean_sq_sum
    uint32_t seed = 7;
    for (const auto & d : domains) {
        sim_options o;
        o.seed = seed++;
        o.n_tokens = n_tokens;
        simulate_domain(a, d, o);
    }
    return a;
}

// Gives `a` channel statistics of width n_ff: seeded values wherever the
// expert has a count, zero elsewhere (ch_reap signed, as a gate may be).
inline void add_channels(s::archive & a, uint32_t n_ff, uint32_t seed = 5) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    a.n_ff = n_ff;
    for (auto & d : a.domains) {
        for (const auto & m : s::channel_metric_names(a.metrics)) {
            std::vector<double> & v = *s::metric_data(d, m);
            v.assign(a.n_channel_values(), 0.0);
            for (size_t cell = 0; cell < a.n_cells(); ++cell) {
                if (d.count[cell] == 0) continue;
                for (uint32_t c = 0; c < n_ff; ++c) v[cell * n_ff + c] = m == "ch_reap" ? u(rng) - 0.2 : u(rng) * 3;
            }
        }
    }
}

// Gives archive `a` (channel statistics already added) the shared expert's channel
// statistics: random values in its MoE layers, zero elsewhere.
inline void add_shared_channels(s::archive & a, uint32_t seed = 11) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    a.has_shared_channels = true;
    for (auto & d : a.domains) {
        for (const auto & m : s::shared_metric_names(a.metrics)) {
            std::vector<double> & v = *s::metric_data(d, m);
            v.assign(a.n_shared_channel_values(), 0.0);
            for (int l : a.model.moe_layers) {
                for (uint32_t c = 0; c < a.n_ff; ++c) v[a.shared_channel_index(l, c)] = m == "sh_reap" ? u(rng) : u(rng) * 5;
            }
        }
    }
}

}  // namespace saliency_test

// Per-token metrics and their summary (see token_metrics.h).
#include "metrics/token_metrics.h"

#include <algorithm>
#include <cmath>

namespace reap {

int argmax_first(const float * v, int n) {
    int best = 0;
    for (int i = 1; i < n; ++i) {
        if (v[i] > v[best]) best = i;
    }
    return best;
}

float log_sum_exp_rel(const float * v, int n, float max_v) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += expf(v[i] - max_v);
    return (float) std::log(s);
}

namespace {
float log_sum_exp(const float * v, int n, float max_v) { return max_v + log_sum_exp_rel(v, n, max_v); }
} // namespace

int base_logp_row(const float * lb, int n_vocab, float * logp) {
    const int   ib = argmax_first(lb, n_vocab);
    const float zb = log_sum_exp(lb, n_vocab, lb[ib]);
    for (int i = 0; i < n_vocab; ++i) logp[i] = lb[i] - zb;
    return ib;
}

token_stat stat_logp(const float * logp_base, int ib, const float * lp, int n_vocab, int tok, bool clip16) {
    token_stat r;
    const int   ip = argmax_first(lp, n_vocab);
    const float zp = log_sum_exp(lp, n_vocab, lp[ip]);
    double kl = 0;
    for (int i = 0; i < n_vocab; ++i) {
        const float lpb = logp_base[i];
        if (!clip16 || lpb > -16.f) {
            kl += (double) expf(lpb) * (double) (lpb - (lp[i] - zp));
        }
    }
    r.nll_base   = -logp_base[tok];
    r.nll_pruned = zp - lp[tok];
    r.kld        = kl;
    r.agree      = ib == ip;
    return r;
}

void metrics_accumulator::add(const token_stat & s) {
    nll_base += s.nll_base;
    nll_pruned += s.nll_pruned;
    ++n;
    agree += s.agree;
    kld.push_back((float) s.kld);
}

eval_metrics metrics_accumulator::finish() {
    eval_metrics m;
    m.n_tokens = n;
    if (n == 0) return m;
    m.ppl_base   = std::exp(nll_base / n);
    m.ppl_pruned = std::exp(nll_pruned / n);
    m.ppl_ratio  = m.ppl_pruned / m.ppl_base;
    double sum = 0;
    for (float v : kld) sum += v;
    m.kld_mean = sum / n;
    std::sort(kld.begin(), kld.end());
    m.kld_median = n % 2 == 0 ? 0.5 * (kld[n / 2] + kld[n / 2 - 1]) : kld[n / 2];
    const double p  = 0.99 * (double) (n - 1);
    const size_t ip = (size_t) p;
    const double fr = p - ip;
    m.kld_p99      = (1 - fr) * kld[ip] + fr * kld[std::min(ip + 1, n - 1)];
    m.kld_max      = kld.back();
    m.argmax_agree = (double) agree / n;
    return m;
}

} // namespace reap

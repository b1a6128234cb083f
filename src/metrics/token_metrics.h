// What a cut costs, per scored token and summed up: perplexity of base and
// pruned model, KL(base || pruned) over the full vocabulary, top-1 agreement,
// and the median / p99 / max of the per-token KLD as llama-perplexity computes
// them. reap eval and reap sweep score through these (src/llama/eval.cpp);
// they need no llama.cpp, so they are tested in the core (and under the
// sanitizers) against numbers computed in the tests.
#pragma once

#include <cstddef>
#include <vector>

namespace reap {

// The numbers for one set of scored tokens.
struct eval_metrics {
    size_t n_tokens     = 0;  // scored tokens
    double ppl_base     = 0;
    double ppl_pruned   = 0;
    double ppl_ratio    = 0;  // ppl_pruned / ppl_base
    double kld_mean     = 0;  // KL(base || pruned), nats per token
    double kld_median   = 0;
    double kld_p99      = 0;
    double kld_max      = 0;
    double argmax_agree = 0;  // fraction of tokens whose argmax is the same, 0..1
};

// One scored position.
struct token_stat {
    double nll_base = 0, nll_pruned = 0, kld = 0;
    bool   agree = false;
};

// The first index of the largest value.
int argmax_first(const float * v, int n);

// log(sum(exp(v - max_v))): the log-normaliser relative to the max.
float log_sum_exp_rel(const float * v, int n, float max_v);

// The base side of one scored position: the row's log-probabilities (logits
// minus their log-normaliser, in float) into logp; returns the argmax of the
// logits. Every base row goes through this, so every way of keeping the base
// (in a temp file, live) gives the same numbers, bit for bit.
int base_logp_row(const float * logits, int n_vocab, float * logp);

// One scored position from the base's log-probabilities (and its argmax) and
// the pruned model's logits, predicting token `tok`. clip16: leave base
// log-probs at or below -16 out of the KLD sum, as llama-perplexity does
// against its base file. Identical distributions give exactly 0.
token_stat stat_logp(const float * logp_base, int argmax_base, const float * logits_pruned, int n_vocab, int tok,
                     bool clip16);

// Sums scored positions; finish() gives the metrics (median and p99 as
// llama-perplexity computes them: the mean of the two middle values for an
// even count, linear interpolation at 0.99 * (n - 1)).
struct metrics_accumulator {
    double nll_base = 0, nll_pruned = 0;
    size_t n = 0, agree = 0;
    std::vector<float> kld;

    void add(const token_stat & s);
    eval_metrics finish();
};

} // namespace reap

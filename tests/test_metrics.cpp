// Tests of the scoring core (src/metrics): per-token KLD, NLL and top-1
// against a double-precision reference computed here; the summary (median,
// p99, perplexity) against the definitions; llama-perplexity's 16-bit record
// round trip; and base files written byte by byte here, valid and damaged in
// every way the reader checks. Core only, so it also runs under ASan+UBSan.
#include "metrics/kld_record.h"
#include "metrics/token_metrics.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<float> random_logits(std::mt19937 & rng, int n, float spread) {
    std::normal_distribution<float> d(0.f, spread);
    std::vector<float> v((size_t) n);
    for (float & x : v) x = d(rng);
    return v;
}

// log-softmax in double, the reference.
std::vector<double> log_softmax(const std::vector<float> & v) {
    double mx = -INFINITY;
    for (float x : v) mx = std::max(mx, (double) x);
    double s = 0;
    for (float x : v) s += std::exp((double) x - mx);
    std::vector<double> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = (double) v[i] - mx - std::log(s);
    return r;
}

TEST(Metrics, TokenStatMatchesDoubleReference) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 50; ++trial) {
        const int n = 50 + trial * 37;
        const auto base = random_logits(rng, n, 3.f), pruned = random_logits(rng, n, 3.f);
        std::vector<float> logp((size_t) n);
        const int ib = reap::base_logp_row(base.data(), n, logp.data());
        const int tok = trial % n;
        const reap::token_stat s = reap::stat_logp(logp.data(), ib, pruned.data(), n, tok, false);
        const auto lb = log_softmax(base), lp = log_softmax(pruned);
        double kl = 0;
        for (int i = 0; i < n; ++i) kl += std::exp(lb[i]) * (lb[i] - lp[i]);
        EXPECT_NEAR(s.kld, kl, 1e-5 * std::max(1.0, kl)) << trial;
        EXPECT_NEAR(s.nll_base, -lb[tok], 1e-5) << trial;
        EXPECT_NEAR(s.nll_pruned, -lp[tok], 1e-5) << trial;
        const int ab = (int) (std::max_element(base.begin(), base.end()) - base.begin());
        const int ap = (int) (std::max_element(pruned.begin(), pruned.end()) - pruned.begin());
        EXPECT_EQ(ib, ab);
        EXPECT_EQ(s.agree, ab == ap);
        // identical rows: exactly zero, full agreement
        const reap::token_stat same = reap::stat_logp(logp.data(), ib, base.data(), n, tok, false);
        EXPECT_EQ(same.kld, 0.0);
        EXPECT_TRUE(same.agree);
    }
}

TEST(Metrics, Clip16LeavesOutTinyBaseProbabilities) {
    // one token far below the rest: its base log-prob is < -16
    std::vector<float> base = {10.f, 9.f, 8.f, -30.f}, pruned = {10.f, 9.f, 8.f, 5.f};
    std::vector<float> logp(4);
    const int ib = reap::base_logp_row(base.data(), 4, logp.data());
    ASSERT_LT(logp[3], -16.f);
    const reap::token_stat all = reap::stat_logp(logp.data(), ib, pruned.data(), 4, 0, false);
    const reap::token_stat clip = reap::stat_logp(logp.data(), ib, pruned.data(), 4, 0, true);
    double without = 0;
    const auto lp = log_softmax(pruned);
    for (int i = 0; i < 3; ++i) without += std::exp((double) logp[i]) * ((double) logp[i] - lp[i]);
    EXPECT_NEAR(clip.kld, without, 1e-6);
    EXPECT_NE(all.kld, clip.kld);
}

TEST(Metrics, SummaryFollowsTheDefinitions) {
    for (size_t n : {1u, 2u, 7u, 100u, 101u}) {
        reap::metrics_accumulator acc;
        std::vector<double> klds, nb, np;
        size_t agree = 0;
        for (size_t i = 0; i < n; ++i) {
            reap::token_stat s;
            s.kld = std::fmod(i * 0.37, 1.3) + (i % 5 == 0 ? 4.0 : 0.0);
            s.nll_base = 1.0 + 0.01 * (double) i;
            s.nll_pruned = 1.5 + 0.02 * (double) i;
            s.agree = i % 3 != 0;
            acc.add(s);
            klds.push_back((float) s.kld);
            nb.push_back(s.nll_base);
            np.push_back(s.nll_pruned);
            agree += s.agree;
        }
        const reap::eval_metrics m = acc.finish();
        std::sort(klds.begin(), klds.end());
        double mean = 0, sb = 0, sp = 0;
        for (size_t i = 0; i < n; ++i) mean += klds[i], sb += nb[i], sp += np[i];
        EXPECT_EQ(m.n_tokens, n);
        EXPECT_NEAR(m.kld_mean, mean / n, 1e-9);
        const double median = n % 2 ? klds[n / 2] : (klds[n / 2 - 1] + klds[n / 2]) / 2;
        EXPECT_NEAR(m.kld_median, median, 1e-7);
        const double pos = 0.99 * (double) (n - 1);
        const size_t lo = (size_t) pos;
        const double p99 = klds[lo] + (pos - (double) lo) * (klds[std::min(lo + 1, n - 1)] - klds[lo]);
        EXPECT_NEAR(m.kld_p99, p99, 1e-6);
        EXPECT_NEAR(m.kld_max, klds.back(), 1e-7);
        EXPECT_NEAR(m.ppl_base, std::exp(sb / n), 1e-9);
        EXPECT_NEAR(m.ppl_pruned, std::exp(sp / n), 1e-9);
        EXPECT_NEAR(m.ppl_ratio, std::exp(sp / n) / std::exp(sb / n), 1e-9);
        EXPECT_NEAR(m.argmax_agree, (double) agree / n, 1e-12);
    }
    EXPECT_EQ(reap::metrics_accumulator().finish().n_tokens, 0u);
}

TEST(Metrics, RecordRoundTripWithin16Bits) {
    std::mt19937 rng(5);
    for (int n : {1, 2, 3, 259, 1000}) {
        const auto logits = random_logits(rng, n, 4.f);
        std::vector<uint16_t> rec(reap::kld_record_u16(n));
        EXPECT_EQ(rec.size(), (size_t) (2 * ((n + 1) / 2) + 4));
        const double nll = reap::kld_compress_row(logits.data(), n, n - 1, rec.data());
        const auto ref = log_softmax(logits);
        EXPECT_NEAR(nll, -ref[(size_t) n - 1], 1e-4);
        std::vector<float> back((size_t) n);
        ASSERT_TRUE(reap::kld_decompress_row(rec.data(), n, back.data()));
        const double mx = *std::max_element(ref.begin(), ref.end());
        for (int i = 0; i < n; ++i) {
            // 16 nats over 65535 steps: half a step of error, for values within 16 nats of the max
            if (ref[(size_t) i] > mx - 16) EXPECT_NEAR(back[(size_t) i], ref[(size_t) i], 16.0 / 65535 + 1e-4) << n << " " << i;
        }
    }
    std::vector<uint16_t> bad(reap::kld_record_u16(4), 0);
    const float nan = NAN;
    std::memcpy(bad.data(), &nan, sizeof(float));
    std::vector<float> out(4);
    EXPECT_FALSE(reap::kld_decompress_row(bad.data(), 4, out.data()));
}

// A base file written here, byte by byte.
std::string base_file(int32_t n_ctx, int32_t n_vocab, int32_t n_chunk, const std::vector<int32_t> & tokens,
                      size_t record_bytes) {
    std::string f(reap::k_kld_magic, 8);
    for (int32_t v : {n_ctx, n_vocab, n_chunk}) f.append((const char *) &v, 4);
    for (int32_t t : tokens) f.append((const char *) &t, 4);
    f.append(record_bytes, '\0');
    return f;
}

std::string write_tmp(const std::string & bytes) {
    char tmpl[] = "/tmp/reap-metrics-XXXXXX";
    const int fd = mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, bytes.data(), bytes.size()), (ssize_t) bytes.size());
    close(fd);
    return tmpl;
}

TEST(Metrics, BaseFileHeaderChecks) {
    const int32_t n_ctx = 8, n_vocab = 5, n_chunk = 2;
    std::vector<int32_t> tokens((size_t) n_ctx * n_chunk);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (int32_t) (i % n_vocab);
    // per chunk n_ctx - 1 - n_ctx/2 = 3 records of kld_record_u16(5) = 10 uint16
    const size_t records = (size_t) n_chunk * 3 * reap::kld_record_u16(n_vocab) * 2;
    uint64_t expect = 0;
    ASSERT_TRUE(reap::kld_file_bytes(n_ctx, n_vocab, n_chunk, expect));
    const std::string good = base_file(n_ctx, n_vocab, n_chunk, tokens, records);
    ASSERT_EQ(good.size(), expect);

    std::string err;
    reap::kld_base_header h;
    const std::string path = write_tmp(good);
    ASSERT_TRUE(reap::kld_base_read_header(path, h, err)) << err;
    EXPECT_EQ(h.n_ctx, n_ctx);
    EXPECT_EQ(h.n_vocab, n_vocab);
    EXPECT_EQ(h.n_chunk, n_chunk);
    EXPECT_EQ(h.tokens, tokens);
    EXPECT_EQ(h.data_offset, 20u + 4u * tokens.size());
    unlink(path.c_str());

    std::vector<int32_t> bad_tok = tokens;
    bad_tok[5] = n_vocab;
    std::string bad_magic = good;
    bad_magic[0] = 'X';
    struct damaged { std::string name, bytes, says; };
    const std::vector<damaged> cases = {
        {"magic", bad_magic, "no \"_logits_\" magic"},
        {"short header", good.substr(0, 15), "truncated"},
        {"truncated records", good.substr(0, good.size() - 1), "is truncated"},
        {"trailing bytes", good + "x", "trailing bytes"},
        {"n_ctx", base_file(2, n_vocab, n_chunk, tokens, records), "n_ctx 2"},
        {"n_vocab", base_file(n_ctx, 0, n_chunk, tokens, records), "n_vocab 0"},
        {"n_chunk", base_file(n_ctx, n_vocab, 0, tokens, records), "n_chunk 0"},
        {"huge counts", base_file(reap::k_kld_max_ctx, reap::k_kld_max_vocab, INT32_MAX, {}, 0), "overflows"},
        {"counts vs size", base_file(n_ctx, n_vocab, n_chunk + 1, tokens, records), "need"},
        {"token", base_file(n_ctx, n_vocab, n_chunk, bad_tok, records), "token 5 is 5"},
    };
    for (const auto & c : cases) {
        const std::string p = write_tmp(c.bytes);
        EXPECT_FALSE(reap::kld_base_read_header(p, h, err)) << c.name;
        EXPECT_NE(err.find(c.says), std::string::npos) << c.name << ": " << err;
        unlink(p.c_str());
    }
    EXPECT_FALSE(reap::kld_base_read_header("/nonexistent/base.kld", h, err));
    EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
    EXPECT_FALSE(reap::kld_base_read_header("/tmp", h, err));
    EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
}

} // namespace

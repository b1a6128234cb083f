// test_llama_width_prune.cpp: the acceptance check of width pruning (issue 27):
// a width-pruned file loads in stock llama.cpp and computes what the base
// model computes with the removed channels zeroed.
//
// For every zoo arch (each has gate/up/down experts), a plan keeps every
// expert and a random half of each expert's channels (and, for llama4, whose
// one shared expert llama.cpp sizes with the experts' width, a random half of
// the shared expert's channels too); reap's slicer
// writes the pruned file. Its bytes are checked against the source from
// ggml's gguf reader (width_test_util.h: gate/up rows exactly, down the kept
// columns requantised here, shared experts byte-identical with
// <arch>.expert_shared_count = S/K where llama.cpp sizes them n_ff x count:
// deepseek2, glm4moe, kimi-k3). The reference is written here,
// independently: the source with, in every down projection (llama4's
// ffn_down_shexp too), the removed channels' columns set to zero (dequantised
// by ggml and written in the pruned file's down type; gate/up untouched: a
// removed channel's activation
// then meets a zero column, which is what dropping its gate/up rows and its
// down column computes). Both run in llama.cpp on the same prompt; the down
// type is the source's (f16: the column drop is exact) or, where the
// source's blocks are wider than the kept width (mxfp4), f32 (exact too). So
// logits agree to rounding only (float sums in another order, and where that
// flips the 8-bit rounding of a quantised expert's input; bound below), and
// the routing is the same.
//
// Quantised down: qwen3moe-wide's f16 down slabs cut from 512 to 256
// channels and requantised to q8_0 / q4_K; the logits' distance from the
// zeroed f16 reference is bounded by the distance that requantising the
// same model's down slabs at full width gives (the cut adds no error of its
// own beyond requantisation): both numbers are printed.
#include "llama_test_util.h"
#include "prune_test_util.h"
#include "width_test_util.h"

#include "gguf/gguf.h"
#include "moe/layout_gguf.h"
#include "moe/width.h"
#include "plan/plan.h"
#include "prune/prune.h"
#include "prune/width.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

using namespace reap_test;

namespace {

const char * k_prompt =
    "Width pruning keeps some channels of every expert: gate and up rows, down columns. "
    "def f(x):\n    return [y * 2 for y in x]\n";

// A plan keeping every expert (identity order) and K random channels of each
// (and of the shared expert, when `shared`).
reap::plan width_plan(const reap::moe::layout & lay, int64_t n_ff, int64_t K, uint32_t seed, bool shared = false) {
    reap::plan p;
    p.arch = lay.arch;
    p.n_layer = lay.n_layer;
    p.n_expert = lay.n_expert;
    p.n_expert_used = lay.n_expert_used;
    p.n_keep = lay.n_expert;
    p.width_n_ff = n_ff;
    p.width_keep = K;
    std::mt19937 rng(seed);
    auto pick = [&] {
        std::vector<int64_t> ch(static_cast<size_t>(n_ff));
        std::iota(ch.begin(), ch.end(), 0);
        std::shuffle(ch.begin(), ch.end(), rng);
        ch.resize(size_t(K));
        std::sort(ch.begin(), ch.end());
        return ch;
    };
    for (int layer : lay.moe_layers) {
        reap::plan_layer pl;
        pl.layer = layer;
        for (int64_t e = 0; e < lay.n_expert; ++e) {
            pl.keep.push_back(e);
            pl.channels.push_back(pick());
        }
        if (shared) pl.shared_channels = pick();
        p.layers.push_back(pl);
    }
    return p;
}

// The width cut by reap's slicer, unstamped (plan written beside it).
bool write_pruned(const reap::gguf::model & m, const reap::moe::layout &, const reap::plan & p,
                  const reap::prune::width_options & wo, const std::string & out, std::string & err) {
    std::vector<std::string> written;
    return prune_test::prune_to(m, p, out + ".plan.json", out, written, err, false, 0, 0, wo);
}

// The reference: `m` with every down_exps column of a removed channel set to
// zero (and ffn_down_shexp's of a removed shared channel, where the plan
// lists them), down written as `down_type` (f16 or f32), everything else copied.
bool write_zeroed(const reap::gguf::model & m, const reap::plan & p, ggml_type down_type, const std::string & out,
                  std::string & err) {
    reap::gguf::output_spec spec = reap::gguf::spec_from_model(m);
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const reap::gguf::tensor_info & t = m.tensors[i];
        const bool shared = t.name.find("ffn_down_shexp.weight") != std::string::npos;
        if (t.name.find("ffn_down_exps.weight") == std::string::npos && !shared) continue;
        size_t dot = 0;
        const reap::plan_layer * pl = p.find_layer(int(reap::gguf::block_index(t.name, dot)));
        if (!pl) {
            err = t.name + ": no plan layer";
            return false;
        }
        if (shared && pl->shared_channels.empty()) continue;   // kept whole (deepseek2, ...)
        std::vector<uint8_t> src;
        if (!reap::gguf::read_tensor(m, t.name, src, err)) return false;
        const int64_t n_ff = t.ne[0], rows = t.ne[1] * t.ne[2];
        const ggml_type st = ggml_type(t.type);
        const size_t row_bytes = ggml_row_size(st, n_ff);
        std::vector<float> vals(static_cast<size_t>(n_ff * rows));
        for (int64_t r = 0; r < rows; ++r) {
            const uint8_t * q = src.data() + size_t(r) * row_bytes;
            if (st == GGML_TYPE_F32) std::memcpy(&vals[size_t(r * n_ff)], q, row_bytes);
            else ggml_get_type_traits(st)->to_float(q, &vals[size_t(r * n_ff)], n_ff);
        }
        for (int64_t e = 0; e < t.ne[2]; ++e) {
            std::vector<bool> kept(static_cast<size_t>(n_ff), false);
            // identity keep: output e = source e; the shared expert is one matrix
            for (int64_t c : shared ? pl->shared_channels : pl->channels[size_t(e)]) kept[size_t(c)] = true;
            for (int64_t r = 0; r < t.ne[1]; ++r) {
                for (int64_t c = 0; c < n_ff; ++c) {
                    if (!kept[size_t(c)]) vals[size_t((e * t.ne[1] + r) * n_ff + c)] = 0.0f;
                }
            }
        }
        auto data = std::make_shared<std::vector<uint8_t>>(ggml_row_size(down_type, n_ff) * size_t(rows));
        ggml_quantize_chunk(down_type, vals.data(), data->data(), 0, rows, n_ff, nullptr);
        spec.tensors[i].type = reap::gguf::tensor_type(down_type);
        spec.tensors[i].pieces.clear();
        spec.tensors[i].memory = data;
    }
    reap::gguf::write_options w;
    w.force = true;
    w.sync = false;
    std::vector<std::string> written;
    return reap::gguf::write_output(spec, w, out, written, err);
}

struct distance {
    double max_diff = 0, max_abs = 0, rel_rms = 0;
};

distance logit_distance(const prompt_run & a, const prompt_run & b) {
    distance d;
    double ss_d = 0, ss = 0;
    for (size_t i = 0; i < a.logits.size() && i < b.logits.size(); ++i) {
        const double x = double(a.logits[i]) - b.logits[i];
        d.max_diff = std::max(d.max_diff, std::fabs(x));
        d.max_abs = std::max(d.max_abs, std::fabs(double(a.logits[i])));
        ss_d += x * x;
        ss += double(a.logits[i]) * a.logits[i];
    }
    d.rel_rms = ss > 0 ? std::sqrt(ss_d / ss) : 0;
    return d;
}

std::string describe(const distance & d) {
    return "max |dlogit| " + std::to_string(d.max_diff) + " (max |logit| " + std::to_string(d.max_abs) + "), relative rms " +
           std::to_string(d.rel_rms);
}

class WidthPrune : public ::testing::TestWithParam<std::string> {};

TEST_P(WidthPrune, EqualsTheBaseWithTheRemovedChannelsZeroed) {
    std::string err;
    const std::string src = zoo_model(GetParam(), err);
    ASSERT_FALSE(src.empty()) << err;
    reap::gguf::model m;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::gguf::open_model(src, m, err) && reap::moe::layout_of(m, lay, err)) << err;
    const reap::plan_model_facts f = reap::facts_of(lay, m);
    ASSERT_EQ(f.width_refusal, "");
    const int64_t K = f.n_ff_exp / 2;
    const reap::plan p = width_plan(lay, f.n_ff_exp, K, 77, f.shared_cut);
    EXPECT_EQ(f.shared_cut, GetParam() == "llama4");
    reap::prune::width_options wo;
    ggml_type down_type = GGML_TYPE_F16;
    if (f.down_block > K) {
        wo.down_type = reap::gguf::tensor_type::F32;
        down_type = GGML_TYPE_F32;
    }
    for (const auto & t : m.tensors) {
        if (reap::moe::width_cuts_columns(t.name, f.shared_cut) && !wo.down_type) {
            ASSERT_EQ(t.type, reap::gguf::tensor_type::F16) << t.name;
        }
    }
    const std::string dir = test_tmp_dir();
    const std::string cut = dir + "/width-" + GetParam() + "-cut.gguf";
    const std::string ref = dir + "/width-" + GetParam() + "-zeroed.gguf";
    ASSERT_TRUE(write_pruned(m, lay, p, wo, cut, err)) << err;
    ASSERT_TRUE(write_zeroed(m, p, down_type, ref, err)) << err;
    width_test::expect_width_cut(src, cut, p, down_type);
    width_test::expect_shared_kept(src, cut, lay.arch, K);

    // attention in F32 (exact): llama.cpp's F16 KV cache rounds the two runs'
    // last-bit differences apart by up to 1e-3 of a logit (kimi-k3: relative
    // rms 6.2e-4 with ggml built for AVX2), which would hide a real error
    prompt_run a, b;
    ASSERT_TRUE(run_prompt(ref, k_prompt, a, err, 2, /*exact=*/true)) << err;
    ASSERT_TRUE(run_prompt(cut, k_prompt, b, err, 2, /*exact=*/true)) << err;   // stock llama.cpp loads the cut file
    ASSERT_EQ(a.logits.size(), b.logits.size());
    std::map<int, std::vector<int32_t>> same_ids;
    std::vector<int64_t> identity(size_t(lay.n_expert));
    std::iota(identity.begin(), identity.end(), 0);
    for (int il : lay.moe_layers) same_ids[il] = inverse_keep(identity, lay.n_expert);
    std::string why;
    EXPECT_TRUE(same_model(a, b, same_ids, why)) << why;
    const distance d = logit_distance(a, b);
    fprintf(stderr, "[ width ] %s K=%lld of %lld, down %s: %s\n", GetParam().c_str(), (long long) K,
            (long long) f.n_ff_exp, ggml_type_name(down_type), describe(d).c_str());
    // rounding only: the down projections sum K terms instead of n_ff with
    // zeros, so the two runs differ in last bits, and llama.cpp quantises the
    // activations of quantised experts to 8 bits (q8_0 for mxfp4, q8_K for
    // k-quants), where a last-bit difference can flip a rounding. Measured
    // 2026-12-02 with ggml built for AVX2 as `make` builds it (Makefile,
    // GGML_ISA): kimi-k3 (mxfp4 experts) relative rms 3.5e-4, max |dlogit|
    // 0.0116 of 4.1; llama4 1.1e-4; the other zoo archs below 1e-4. (ggml built with
    // -march=native on an AVX512-FP16 CPU: qwen3moe-q256 9.9e-4.) A wrong
    // channel is far above this: the base differs from the cut by more than
    // 100 times the distance (below).
    EXPECT_LE(d.rel_rms, 2e-3) << describe(d);
    EXPECT_LE(d.max_diff, 5e-3 * std::max(1.0, d.max_abs)) << describe(d);

    // and the base itself is measurably different (the cut is not a no-op)
    prompt_run base;
    ASSERT_TRUE(run_prompt(src, k_prompt, base, err)) << err;
    EXPECT_GT(logit_distance(base, b).rel_rms, 100 * std::max(d.rel_rms, 1e-7));
}

INSTANTIATE_TEST_SUITE_P(Zoo, WidthPrune, ::testing::ValuesIn(zoo_names()),
                         [](const ::testing::TestParamInfo<std::string> & info) {
                             std::string n = info.param;
                             for (char & c : n) {
                                 if (!isalnum((unsigned char) c)) c = '_';
                             }
                             return n;
                         });

// Quantised down: the cut's logit error against the zeroed f16 reference is
// within what requantising the same down slabs at full width costs.
TEST(WidthPruneQuantised, ErrorWithinTheRequantisationsOwn) {
    std::string err;
    const std::string src = zoo_model("qwen3moe-wide", err);
    ASSERT_FALSE(src.empty()) << err;
    reap::gguf::model m;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::gguf::open_model(src, m, err) && reap::moe::layout_of(m, lay, err)) << err;
    const reap::plan_model_facts f = reap::facts_of(lay, m);
    ASSERT_EQ(f.n_ff_exp, 512);
    const std::string dir = test_tmp_dir();
    const reap::plan half = width_plan(lay, 512, 256, 5);
    const std::string ref = dir + "/width-wide-zeroed.gguf";
    ASSERT_TRUE(write_zeroed(m, half, GGML_TYPE_F16, ref, err)) << err;
    prompt_run base, zeroed;
    ASSERT_TRUE(run_prompt(src, k_prompt, base, err)) << err;
    ASSERT_TRUE(run_prompt(ref, k_prompt, zeroed, err)) << err;
    for (auto type : {reap::gguf::tensor_type::Q8_0, reap::gguf::tensor_type::Q4_K}) {
        SCOPED_TRACE(reap::gguf::type_name(type));
        reap::prune::width_options wo;
        wo.down_type = type;
        const std::string name = reap::gguf::type_name(type);
        // the same model's down slabs requantised at full width (every channel kept)
        const std::string full = dir + "/width-wide-full-" + name + ".gguf";
        ASSERT_TRUE(write_pruned(m, lay, width_plan(lay, 512, 512, 5), wo, full, err)) << err;
        const std::string cut = dir + "/width-wide-cut-" + name + ".gguf";
        ASSERT_TRUE(write_pruned(m, lay, half, wo, cut, err)) << err;
        prompt_run q_full, q_cut;
        ASSERT_TRUE(run_prompt(full, k_prompt, q_full, err)) << err;
        ASSERT_TRUE(run_prompt(cut, k_prompt, q_cut, err)) << err;
        const distance own = logit_distance(base, q_full), cut_err = logit_distance(zeroed, q_cut);
        fprintf(stderr, "[ width ] qwen3moe-wide down %s: full-width requantisation vs base: %s; cut (256 of 512) vs "
                "zeroed base: %s\n", name.c_str(), describe(own).c_str(), describe(cut_err).c_str());
        EXPECT_GT(own.rel_rms, 0.0) << "requantising changes something";
        EXPECT_LE(cut_err.rel_rms, 2.0 * own.rel_rms) << describe(cut_err) << " vs " << describe(own);
    }
}

} // namespace

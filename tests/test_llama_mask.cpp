// Virtual pruning (src/llama/mask.h, reap eval --mask / --base-mask) against
// the real thing: for every zoo arch and the project's trained model, a plan
// that removes about half of the routed experts (chosen at random, in an
// unsorted keep order) is applied two ways, by masking the base model and by
// writing the pruned file, which llama.cpp then loads and runs on its own.
// The two must compute the same model: base masked by the plan vs the pruned
// file has mean KLD <= 1e-5, top-1 agreement >= 99.9% and perplexity within
// 1e-4 relative; and both, scored against the unmasked base, give the same
// perplexity within 1e-4 while the cut itself visibly costs something (so the
// mask cannot be a no-op). Also: a bad plan is refused with the message reap
// prune gives, and a layer whose router cannot be found is an error.
//
// Width masks (virtual width pruning, mask.h set_width_mask): on the trained
// model, llama.cpp with a random half of every expert's channels zeroed gives
// the logits of tools/reference_forward.py --keep-channels (PyTorch, the same
// channels zeroed in the trainer's own forward pass) within 1e-3, while the
// cut moves them far more; on every zoo arch the hook finds the node that feeds
// each layer's down projection (check() holds) and the logits move, and a
// width mask that keeps every channel changes no logit at all.
#include "llama/eval.h"
#include "llama/mask.h"
#include "llama_test_util.h"
#include "prune_test_util.h"
#include "reference_forward_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

namespace {

// About 7 kB of mixed text: over 3,000 scored tokens at -c 128.
std::string long_text() {
    std::string t;
    for (int r = 0; r < 5; ++r) t += reap_test::calibration_text();
    return t;
}

std::string write_text(const std::string & path, const std::string & text) {
    std::ofstream(path) << text;
    return path;
}

reap::eval_options options(const std::string & base, const std::string & input) {
    reap::eval_options o;
    o.base_path = base;
    o.input_path = input;
    o.rt.n_ctx = 128;
    o.rt.n_threads = 2;
    o.progress = false;
    return o;
}

struct mask_case {
    std::string name;   // zoo name, or "trained"
};

std::string model_path(const std::string & name, std::string & err) {
    if (name == "trained") return reap_test::source_dir() + "/models/reap-moe-tiny.gguf";
    return reap_test::zoo_model(name, err);
}

class MaskEqualsPrune : public ::testing::TestWithParam<std::string> {};

TEST_P(MaskEqualsPrune, SameModelAsThePrunedFile) {
    const std::string name = GetParam();
    std::string err;
    const std::string model = model_path(name, err);
    ASSERT_FALSE(model.empty()) << err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(model, m, err)) << err;

    const int64_t n_keep = prune_test::half_keep(m);
    ASSERT_GT(n_keep, 0);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, n_keep, 20261130, p, err)) << err;
    const std::string dir = prune_test::scratch("mask-" + name);
    const std::string plan_path = dir + "/plan.json", cut = dir + "/cut.gguf";
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, plan_path, cut, written, err)) << err;
    const std::string text = write_text(dir + "/text.txt", long_text());

    // masked and pruned, each against the unmasked base, in one run
    std::vector<reap::eval_report> rs;
    ASSERT_TRUE(reap::run_eval_candidates(options(model, text), {{cut, false}, {plan_path, true}}, rs, err)) << err;
    ASSERT_EQ(rs.size(), 2u);
    const reap::eval_metrics pruned = rs[0].overall, masked = rs[1].overall;
    ASSERT_GT(pruned.n_tokens, 2000u);
    EXPECT_EQ(pruned.n_tokens, masked.n_tokens);
    EXPECT_TRUE(rs[1].masked);
    // the cut costs something: a mask that did nothing would give 0 here
    EXPECT_GT(pruned.kld_mean, 1e-4) << name << ": the random half cut changed nothing; the test would prove nothing";
    EXPECT_NEAR(masked.ppl_pruned / pruned.ppl_pruned, 1.0, 1e-4) << name;
    EXPECT_NEAR(masked.kld_mean, pruned.kld_mean, 1e-5 + 1e-3 * pruned.kld_mean) << name;
    EXPECT_EQ(masked.ppl_base, pruned.ppl_base);

    // the masked base against the pruned file directly
    reap::eval_options o = options(model, text);
    o.base_mask_path = plan_path;
    ASSERT_TRUE(reap::run_eval_candidates(o, {{cut, false}}, rs, err)) << err;
    const reap::eval_metrics d = rs[0].overall;
    EXPECT_LE(d.kld_mean, 1e-5) << name;
    EXPECT_GE(d.argmax_agree, 0.999) << name;
    EXPECT_NEAR(d.ppl_ratio, 1.0, 1e-4) << name;
    EXPECT_NEAR(d.ppl_base, pruned.ppl_pruned, 1e-4 * pruned.ppl_pruned) << name;
    std::printf("%-14s keep %3lld of %3lld: cut KLD %.3e top-1 %.2f%% | masked vs pruned: KLD %.2e top-1 %.3f%% PPL ratio %.7f\n",
                name.c_str(), (long long) n_keep, (long long) p.n_expert, pruned.kld_mean, 100 * pruned.argmax_agree,
                d.kld_mean, 100 * d.argmax_agree, d.ppl_ratio);
}

std::vector<std::string> cases() {
    std::vector<std::string> v = reap_test::zoo_names();
    v.push_back("trained");
    return v;
}

INSTANTIATE_TEST_SUITE_P(EveryArch, MaskEqualsPrune, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<std::string> & i) {
                             std::string s = i.param;
                             for (char & c : s) if (!isalnum((unsigned char) c)) c = '_';
                             return s;
                         });

// A bad plan gets reap prune's words: another model's plan, too few experts
// for top-k, a group rule broken.
// A mask that removes no expert, with a width mask keeping a random `fraction` of the
// channels of every expert of every MoE layer (seeded; 1: all of them, in random order).
reap::expert_mask width_mask(const reap::gguf::model & m, double fraction, uint32_t seed,
                             std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> & kept) {
    std::string err;
    reap::moe::layout lay;
    EXPECT_TRUE(reap::model_layout(m, lay, err)) << err;
    const auto * down = m.find_tensor("blk." + std::to_string(lay.moe_layers.front()) + ".ffn_down_exps.weight");
    EXPECT_NE(down, nullptr);
    const int64_t n_ff = down ? down->ne[0] : 1, n_expert = lay.n_expert;
    const int64_t keep = std::max<int64_t>(1, (int64_t) ((double) n_ff * fraction));
    reap::expert_mask mask;
    mask.name = "width";
    mask.n_expert = mask.n_keep = n_expert;
    mask.removed.assign((size_t) lay.n_layer, {});
    std::mt19937 rng(seed);
    kept.clear();
    for (int l : lay.moe_layers) {
        mask.removed[(size_t) l].assign((size_t) n_expert, 0);
        (lay.is_mtp(l) ? mask.mtp_layers : mask.moe_layers).push_back(l);
        std::vector<std::vector<int64_t>> per(n_expert);
        for (auto & chans : per) {
            std::vector<int64_t> all(n_ff);
            for (int64_t c = 0; c < n_ff; ++c) all[(size_t) c] = c;
            std::shuffle(all.begin(), all.end(), rng);
            chans.assign(all.begin(), all.begin() + keep);
        }
        kept.emplace_back(l, std::move(per));
    }
    EXPECT_TRUE(reap::set_width_mask(mask, n_ff, kept, err)) << err;
    return mask;
}

// The logits of `tokens` in one decode, with `mask` applied (nullptr: none); F32 attention.
std::vector<float> logits_with(llama_model * model, const std::vector<llama_token> & tokens, const reap::expert_mask * mask,
                               std::string & err) {
    reap::mask_hook hook;
    hook.active = mask;
    reap_test::context_ptr ctx = reap_test::new_context(model, 256, reap::mask_hook::callback, &hook, /*exact=*/true);
    if (!ctx || reap_test::decode_all(ctx.get(), tokens) != 0) {
        err = "decode failed";
        return {};
    }
    if (!hook.check(true, err)) return {};
    return reap_test::get_logits(ctx.get(), model, (int) tokens.size());
}

double max_abs_diff(const std::vector<float> & a, const std::vector<float> & b) {
    double d = a.size() == b.size() ? 0 : INFINITY;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, (double) std::fabs(a[i] - b[i]));
    return d;
}

TEST(MaskWidth, TrainedModelEqualsReferenceWithTheChannelsZeroed) {
    const std::string model_file = reap_test::source_dir() + "/models/reap-moe-tiny.gguf";
    if (!reap_test::file_exists(model_file)) GTEST_SKIP() << "no " << model_file << " (make model)";
    std::string err, out;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(model_file, m, err)) << err;
    std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> kept;
    const reap::expert_mask mask = width_mask(m, 0.5, 27, kept);
    ASSERT_EQ(mask.n_ff, 128);
    reap_test::model_ptr model = reap_test::load_model(model_file);
    ASSERT_TRUE(model);
    std::vector<llama_token> toks = reap_test::tokenize(model.get(), long_text());
    toks.resize(std::min<size_t>(toks.size(), 256));
    const std::vector<float> masked = logits_with(model.get(), toks, &mask, err);
    ASSERT_FALSE(masked.empty()) << err;
    const std::vector<float> full = logits_with(model.get(), toks, nullptr, err);
    ASSERT_FALSE(full.empty()) << err;

    const std::string dir = prune_test::scratch("mask-width-trained");
    nlohmann::json keep_json = nlohmann::json::object();
    for (const auto & [l, per] : kept) keep_json[std::to_string(l)] = per;
    std::ofstream(dir + "/keep.json") << keep_json.dump();
    reap_test::write_dump(dir + "/masked.bin", toks, masked);
    const double diff = reap_test::reference_max_abs_diff(model_file, dir + "/masked.bin", out,
                                                           "--keep-channels " + reap_test::shell_quote(dir + "/keep.json"));
    ASSERT_GE(diff, 0) << out;
    const double cut = max_abs_diff(masked, full);
    printf("width mask (64 of 128 channels per expert): |llama.cpp - reference| <= %.3e; the cut moves logits by up to %.3f\n",
           diff, cut);
    EXPECT_LE(diff, 1e-3);
    EXPECT_GT(cut, 100 * std::max(diff, 1e-4)) << "the width mask changed too little for the comparison to mean anything";
}

class MaskWidthZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(MaskWidthZoo, FindsTheDownInputAndMovesTheLogits) {
    std::string err;
    const std::string model_file = reap_test::zoo_model(GetParam(), err);
    ASSERT_FALSE(model_file.empty()) << err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(model_file, m, err)) << err;
    reap_test::model_ptr model = reap_test::load_model(model_file);
    ASSERT_TRUE(model);
    std::vector<llama_token> toks = reap_test::tokenize(model.get(), reap_test::calibration_text());
    toks.resize(std::min<size_t>(toks.size(), 128));
    std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> kept;
    const std::vector<float> full = logits_with(model.get(), toks, nullptr, err);
    ASSERT_FALSE(full.empty()) << err;
    const reap::expert_mask every = width_mask(m, 1.0, 2, kept);
    const std::vector<float> same = logits_with(model.get(), toks, &every, err);
    ASSERT_FALSE(same.empty()) << GetParam() << ": " << err;
    EXPECT_EQ(max_abs_diff(same, full), 0.0) << GetParam() << ": keeping every channel must change nothing";
    const reap::expert_mask half = width_mask(m, 0.5, 3, kept);
    const std::vector<float> cut = logits_with(model.get(), toks, &half, err);
    ASSERT_FALSE(cut.empty()) << GetParam() << ": " << err;
    EXPECT_GT(max_abs_diff(cut, full), 1e-3) << GetParam() << ": zeroing half the channels changed nothing";
}

INSTANTIATE_TEST_SUITE_P(EveryArch, MaskWidthZoo, ::testing::ValuesIn(reap_test::zoo_names()),
                         [](const ::testing::TestParamInfo<std::string> & i) {
                             std::string n = i.param;
                             for (char & c : n) if (c == '-') c = '_';
                             return n;
                         });

TEST(MaskWidth, BadWidthMasksRefused) {
    std::string err;
    const std::string model_file = reap_test::zoo_model("qwen3moe", err);
    ASSERT_FALSE(model_file.empty()) << err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(model_file, m, err)) << err;
    std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> kept;
    reap::expert_mask good = width_mask(m, 0.25, 5, kept);
    auto refused = [&](std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> k, const std::string & needle) {
        reap::expert_mask x = good;
        EXPECT_FALSE(reap::set_width_mask(x, good.n_ff, k, err)) << needle;
        EXPECT_NE(err.find(needle), std::string::npos) << err;
    };
    auto k = kept;
    k[0].second[1].push_back(k[0].second[1][0]);
    refused(k, "expert 1: channel " + std::to_string(kept[0].second[1][0]) + " listed twice");
    k = kept;
    k[0].second[2].push_back(good.n_ff);
    refused(k, "channel " + std::to_string(good.n_ff) + " out of range");
    k = kept;
    k[0].second[0].clear();
    refused(k, "expert 0 keeps no channel");
    k = kept;
    k[0].second.pop_back();
    refused(k, "experts' channels, expected");
    k = kept;
    k.push_back(k[0]);
    refused(k, "is given twice");
    // a width the model's experts do not have: the hook refuses the node, check() says so
    reap::expert_mask wrong = good;
    auto k2 = kept;
    ASSERT_TRUE(reap::set_width_mask(wrong, good.n_ff + 8, k2, err)) << err;
    reap_test::model_ptr model = reap_test::load_model(model_file);
    std::vector<llama_token> toks = reap_test::tokenize(model.get(), "width masks name what they cannot mask");
    EXPECT_TRUE(logits_with(model.get(), toks, &wrong, err).empty());
    EXPECT_NE(err.find("cannot mask its channels"), std::string::npos) << err;
}

// reap eval --mask with a width plan: the trained model (f32 everywhere, so
// reap prune's requantisation of down to f32 is exact: the kept columns'
// values are copied) and zoo deepseek2 (f16 down, requantised to f16: exact
// too; shared experts, which the cut keeps whole by writing
// expert_shared_count = S/K) masked by a plan that keeps a random half of the
// experts, in unsorted order, each with a random half of its channels, vs
// the file reap prune writes from the same plan; and zoo llama4, whose one
// shared expert is cut with the routed ones (the mask zeroes its removed
// channels too). Same model up to float
// summation order: KLD <= 1e-5, top-1 >= 99.9%, PPL ratio within 1e-4 (the
// bounds of MaskEqualsPrune), while the cut costs something.
class MaskWidthPlan : public ::testing::TestWithParam<std::string> {};

TEST_P(MaskWidthPlan, EqualsThePrunedFile) {
    const std::string name = GetParam();
    std::string err;
    const std::string model = model_path(name, err);
    ASSERT_FALSE(model.empty()) << err;
    if (name == "trained" && !reap_test::file_exists(model)) GTEST_SKIP() << "no " << model << " (make model)";
    reap::gguf::model m;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::gguf::open_model(model, m, err) && reap::model_layout(m, lay, err)) << err;
    const int64_t n_ff = reap::facts_of(lay, m).n_ff_exp;
    ASSERT_GT(n_ff, 0) << name << ": " << reap::facts_of(lay, m).width_refusal;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 20261202, p, err)) << err;
    const bool shared_cut = reap::facts_of(lay, m).shared_cut;   // llama4: its shared expert is cut (and masked) too
    EXPECT_EQ(shared_cut, name == "llama4");
    prune_test::random_width(p, n_ff, n_ff / 2, 7, shared_cut);
    const std::string dir = prune_test::scratch("mask-width-plan-" + name);
    const std::string plan_path = dir + "/plan.json", cut = dir + "/cut.gguf";
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, plan_path, cut, written, err)) << err;
    const std::string text = write_text(dir + "/text.txt", reap_test::calibration_text());

    std::vector<reap::eval_report> rs;
    ASSERT_TRUE(reap::run_eval_candidates(options(model, text), {{cut, false}, {plan_path, true}}, rs, err)) << err;
    ASSERT_EQ(rs.size(), 2u);
    const reap::eval_metrics pruned = rs[0].overall, masked = rs[1].overall;
    EXPECT_TRUE(rs[1].masked);
    EXPECT_GT(pruned.kld_mean, 1e-3) << "the cut changed too little for the comparison to mean anything";
    EXPECT_NEAR(masked.kld_mean, pruned.kld_mean, 1e-5 + 1e-3 * pruned.kld_mean);

    reap::eval_options o = options(model, text);
    o.base_mask_path = plan_path;
    ASSERT_TRUE(reap::run_eval_candidates(o, {{cut, false}}, rs, err)) << err;
    const reap::eval_metrics d = rs[0].overall;
    EXPECT_LE(d.kld_mean, 1e-5);
    EXPECT_GE(d.argmax_agree, 0.999);
    EXPECT_NEAR(d.ppl_ratio, 1.0, 1e-4);
    std::printf("%s width plan (%lld of %lld experts, %lld of %lld channels): cut KLD %.3e | masked vs pruned (%llu tokens): "
                "KLD %.2e top-1 %.3f%% PPL ratio %.7f\n",
                name.c_str(), (long long) p.n_keep, (long long) p.n_expert, (long long) (n_ff / 2), (long long) n_ff,
                pruned.kld_mean, (unsigned long long) d.n_tokens, d.kld_mean, 100 * d.argmax_agree, d.ppl_ratio);
}

INSTANTIATE_TEST_SUITE_P(TrainedAndShared, MaskWidthPlan,
                         ::testing::Values(std::string("trained"), std::string("deepseek2"), std::string("llama4")),
                         [](const ::testing::TestParamInfo<std::string> & i) { return i.param; });

TEST(Mask, BadPlansRefusedAsPruneRefusesThem) {
    std::string err;
    const std::string qwen = reap_test::zoo_model("qwen3moe", err);
    ASSERT_FALSE(qwen.empty()) << err;
    const std::string ds = reap_test::zoo_model("deepseek2", err);
    ASSERT_FALSE(ds.empty()) << err;
    reap::gguf::model mq, md;
    ASSERT_TRUE(reap::gguf::open_model(qwen, mq, err)) << err;
    ASSERT_TRUE(reap::gguf::open_model(ds, md, err)) << err;
    const std::string dir = prune_test::scratch("mask-bad");
    const std::string text = write_text(dir + "/text.txt", long_text());

    reap::plan other;  // made for deepseek2, used on qwen3moe
    ASSERT_TRUE(prune_test::random_plan(md, prune_test::half_keep(md), 1, other, err)) << err;
    reap::plan too_few;  // fewer than n_expert_used
    ASSERT_TRUE(prune_test::random_plan(mq, prune_test::half_keep(mq), 2, too_few, err)) << err;
    too_few.n_keep = too_few.n_expert_used - 1;
    for (auto & l : too_few.layers) l.keep.resize((size_t) too_few.n_keep);
    reap::plan uneven;  // deepseek2: one group keeps more than another
    ASSERT_TRUE(prune_test::random_plan(md, prune_test::half_keep(md), 3, uneven, err)) << err;
    {
        // move the first kept expert of group 1 into group 0
        auto & keep = uneven.layers[0].keep;
        reap::moe::layout lay;
        ASSERT_TRUE(reap::model_layout(md, lay, err)) << err;
        ASSERT_GT(lay.router.n_group, 1) << "the deepseek2 zoo model should have a group-limited router";
        const int64_t per_group = uneven.n_expert / lay.router.n_group;
        for (int64_t e = 0; e < per_group; ++e) {
            if (std::find(keep.begin(), keep.end(), e) == keep.end()) {
                keep[keep.size() - 1] = e;
                break;
            }
        }
    }
    struct bad { std::string name, model; reap::plan p; };
    for (const bad & b : {bad{"other-model", qwen, other}, bad{"too-few", qwen, too_few}, bad{"uneven-groups", ds, uneven}}) {
        const std::string plan_path = dir + "/" + b.name + ".json";
        ASSERT_TRUE(reap::write_plan(b.p, plan_path, true, err)) << err;
        std::string prune_out, eval_out;
        const int prune_rc = prune_test::run(prune_test::quote(prune_test::env_or("REAP_BIN", "")) + " prune -m " +
                                             prune_test::quote(b.model) + " --plan " + prune_test::quote(plan_path) +
                                             " -o " + prune_test::quote(dir + "/out.gguf") + " --force",
                                             prune_out);
        const int eval_rc = prune_test::run(prune_test::quote(prune_test::env_or("REAP_BIN", "")) + " eval -m " +
                                            prune_test::quote(b.model) + " --mask " + prune_test::quote(plan_path) +
                                            " -f " + prune_test::quote(text) + " -c 128", eval_out);
        EXPECT_NE(prune_rc, 0) << b.name << ": " << prune_out;
        EXPECT_NE(eval_rc, 0) << b.name << ": " << eval_out;
        // prune says "PLAN does not fit MODEL: <reason>"; eval must give the same reason
        const size_t at = prune_out.find(" does not fit ");
        ASSERT_NE(at, std::string::npos) << prune_out;
        const size_t colon = prune_out.find(": ", at);
        ASSERT_NE(colon, std::string::npos) << prune_out;
        std::string reason = prune_out.substr(colon + 2);
        reason = reason.substr(0, reason.find('\n'));
        EXPECT_NE(eval_out.find(reason), std::string::npos) << b.name << ": eval said\n" << eval_out << "prune said\n" << prune_out;
    }
}

} // namespace

// test_llama_prune.cpp: pruned models in the pinned llama.cpp.
//   * every zoo model pruned at ~50% with an unsorted keep order loads and decodes;
//   * output expert i equals source expert keep[i] in every sliced tensor, checked
//     with ggml's own GGUF reader (gguf.h), independently of reap's reader/slicer;
//   * behaviour: on a short prompt, prune exactly the experts the prompt never
//     routes to (found with the eval callback, logits for every token). Where
//     pruning leaves the gate weights unchanged (sigmoid; softmax with top-k
//     renormalisation; softmax over the selected k) the logits equal the
//     source's within 1e-5 relative and every token is routed to the same
//     source experts. For qwen2moe (softmax over all experts, no
//     renormalisation) the expectation is written down in the test below;
//   * the same on the project's trained model (models/reap-moe-tiny.gguf) when present;
//   * a split input pruned to a split output loads and gives the logits of the
//     unsplit output;
//   * quantised models (llama-quantize Q4_K_M, IQ2_XXS with an imatrix, Q8_0) prune, verify and decode.
#include "llama_test_util.h"
#include "prune_test_util.h"

#include "gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

namespace g = reap::gguf;
using reap_test::context_ptr;
using reap_test::model_ptr;

namespace {

// The behaviour test's prompt: short, so that pruning leaves something out, and
// so that every matmul takes llama.cpp's per-row CPU path. (Measured on a
// 9-token prompt: gpt-oss pruned 8 -> 7 experts routes every token to the
// same source experts in every layer, yet its logits differ by 2e-3 relative:
// the router matmul with 7 instead of 8 rows takes a tiled GEMM whose rounding
// differs in the last bit (first MoE output: 1.7e-7 relative), and the
// quantised activations of the MXFP4 experts turn that into a whole Q8 step.
// That is kernel arithmetic, not slicing: reversing all experts is exact.)
// REAP_TEST_PRUNE_PROMPT / REAP_TEST_PRUNE_ONLY=<zoo name> override it for experiments.
const char * k_prompt = "Hi";
const char * k_long_prompt = "The quick brown fox jumps over the lazy dog. int main() { return 0; }";

std::string zoo_path(const std::string & name, std::string & err) {
    const std::string dir = prune_test::zoo_dir("prune-zoo", err);
    return dir.empty() ? "" : dir + "/" + name + ".gguf";
}

// Routing record plus the selection scores the group-limited router uses.
struct router_probe {
    reap_test::topk_collector topk;
    // layer -> per token, the selection scores of every expert
    std::map<int, std::vector<std::vector<float>>> probs, probs_biased;

    static bool callback(ggml_tensor * t, bool ask, void * user) {
        auto * self = static_cast<router_probe *>(user);
        if (reap_test::topk_collector::callback(t, ask, &self->topk)) return true;
        static const char p1[] = "ffn_moe_probs-", p2[] = "ffn_moe_probs_biased-";
        std::map<int, std::vector<std::vector<float>>> * dst = nullptr;
        int il = -1;
        if (!strncmp(t->name, p2, sizeof(p2) - 1)) {
            dst = &self->probs_biased;
            il = atoi(t->name + sizeof(p2) - 1);
        } else if (!strncmp(t->name, p1, sizeof(p1) - 1)) {
            dst = &self->probs;
            il = atoi(t->name + sizeof(p1) - 1);
        }
        if (!dst) return false;
        // exactly "<prefix><layer>": views of these nodes ("... (reshaped)") have other shapes
        const char * num = strchr(t->name, '-') + 1;
        if (!strncmp(t->name, p2, sizeof(p2) - 1)) num = t->name + sizeof(p2) - 1;
        while (*num >= '0' && *num <= '9') ++num;
        if (*num != '\0') return false;
        if (ask) return true;
        std::vector<float> row(size_t(t->ne[0]));
        for (int64_t j = 0; j < t->ne[1]; ++j) {
            ggml_backend_tensor_get(t, row.data(), size_t(j * t->nb[1]), row.size() * sizeof(float));
            (*dst)[il].push_back(row);
        }
        return true;
    }
};

struct run_result {
    std::vector<float> logits;
    router_probe       probe;
    int                n_tokens = 0;
};

// Loads `path`, decodes `prompt` with logits for every token.
bool run_model(const std::string & path, const char * prompt, run_result & r, std::string & err) {
    model_ptr model = reap_test::load_model(path);
    if (!model) {
        err = "llama.cpp could not load " + path;
        return false;
    }
    context_ptr ctx = reap_test::new_context(model.get(), 128, router_probe::callback, &r.probe);
    if (!ctx) {
        err = "no context for " + path;
        return false;
    }
    const auto toks = reap_test::tokenize(model.get(), prompt);
    r.n_tokens = int(toks.size());
    if (reap_test::decode_all(ctx.get(), toks) != 0) {
        err = "decode failed for " + path;
        return false;
    }
    r.logits = reap_test::get_logits(ctx.get(), model.get(), r.n_tokens);
    if (r.logits.empty() || !reap_test::all_finite(r.logits)) {
        err = "missing or non-finite logits from " + path;
        return false;
    }
    return true;
}

// max |a - b| / max |a|
double rel_diff(const std::vector<float> & a, const std::vector<float> & b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        num = std::max(num, double(std::fabs(a[i] - b[i])));
        den = std::max(den, double(std::fabs(a[i])));
    }
    return den > 0 ? num / den : num;
}

// ---- ggml's gguf.h as the independent reader ------------------------------------

struct ggml_file {
    gguf_context * ctx = nullptr;
    ggml_context * meta = nullptr;
    std::vector<uint8_t> bytes;
    ~ggml_file() {
        if (ctx) gguf_free(ctx);
        if (meta) ggml_free(meta);
    }
    bool open(const std::string & path) {
        gguf_init_params ip = {/*no_alloc =*/ true, /*ctx =*/ &meta};
        ctx = gguf_init_from_file(path.c_str(), ip);
        bytes = prune_test::read_all(path);
        return ctx != nullptr;
    }
    // data bytes of tensor `name` (empty when absent)
    std::vector<uint8_t> data(const std::string & name, ggml_tensor ** t_out = nullptr) const {
        const int64_t id = gguf_find_tensor(ctx, name.c_str());
        if (id < 0) return {};
        ggml_tensor * t = ggml_get_tensor(meta, name.c_str());
        if (t_out) *t_out = t;
        const size_t off = gguf_get_data_offset(ctx) + gguf_get_tensor_offset(ctx, id);
        const size_t n = gguf_get_tensor_size(ctx, id);
        if (off + n > bytes.size()) return {};
        return std::vector<uint8_t>(bytes.begin() + long(off), bytes.begin() + long(off + n));
    }
};

// The expert axis of a tensor by its name alone (DESIGN.md's table), -1 if none.
int expert_axis_by_name(const std::string & name) {
    auto has = [&](const char * s) { return name.find(s) != std::string::npos; };
    if (has("_shexp")) return -1;
    if (has("_exps.weight")) return 2;
    if (has("_exps.bias") || has("ffn_gate_inp.weight")) return 1;
    if (has("ffn_gate_inp.bias") || has("exp_probs_b.bias")) return 0;
    return -1;
}

// Checks with ggml's reader that `out` is `src` pruned by `p`: every sliced
// tensor expert by expert in plan order, every other tensor unchanged, and
// expert_count == n_keep. Returns the number of sliced tensors checked.
int check_with_ggml(const std::string & src, const std::string & out, const reap::plan & p) {
    ggml_file a, b;
    EXPECT_TRUE(a.open(src)) << src;
    EXPECT_TRUE(b.open(out)) << out;
    if (!a.ctx || !b.ctx) return 0;
    const std::string arch = gguf_get_val_str(a.ctx, gguf_find_key(a.ctx, "general.architecture"));
    const int64_t kc = gguf_find_key(b.ctx, (arch + ".expert_count").c_str());
    EXPECT_GE(kc, 0);
    if (kc >= 0) EXPECT_EQ(int64_t(gguf_get_val_u32(b.ctx, kc)), p.n_keep);
    EXPECT_EQ(gguf_get_n_tensors(a.ctx), gguf_get_n_tensors(b.ctx));
    int sliced = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(a.ctx); ++i) {
        const std::string name = gguf_get_tensor_name(a.ctx, i);
        ggml_tensor * ta = nullptr, * tb = nullptr;
        const auto da = a.data(name, &ta);
        const auto db = b.data(name, &tb);
        EXPECT_TRUE(ta && tb) << name;
        if (!ta || !tb) continue;
        EXPECT_EQ(ta->type, tb->type) << name;
        const int axis = expert_axis_by_name(name);
        if (axis < 0) {
            EXPECT_TRUE(da == db) << name << " changed";
            continue;
        }
        EXPECT_EQ(ta->ne[axis], p.n_expert) << name;
        EXPECT_EQ(tb->ne[axis], p.n_keep) << name;
        const auto * pl = p.find_layer(atoi(name.c_str() + 4));
        EXPECT_NE(pl, nullptr) << name;
        if (!pl || ta->ne[axis] != p.n_expert) continue;
        const size_t S = da.size() / size_t(p.n_expert);
        EXPECT_EQ(db.size(), S * size_t(p.n_keep)) << name;
        if (db.size() != S * size_t(p.n_keep)) continue;
        for (size_t k = 0; k < pl->keep.size(); ++k) {
            EXPECT_EQ(0, memcmp(db.data() + k * S, da.data() + size_t(pl->keep[k]) * S, S))
                << name << ": output expert " << k << " is not source expert " << pl->keep[k];
        }
        ++sliced;
    }
    return sliced;
}

} // namespace

// Every zoo model at ~50%, unsorted: verify passes, ggml's reader sees the
// right bytes, llama.cpp loads and decodes it; the kept-id metadata
// (reap.source.expert_ids.L) is the plan's, single and split.
TEST(LlamaPrune, ZooHalfLoadsDecodesAndBytesMatch) {
    std::string err;
    if (prune_test::zoo_dir("prune-zoo", err).empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("llama-prune-zoo");
    for (const std::string & name : prune_test::zoo_names()) {
        SCOPED_TRACE(name);
        const std::string src = zoo_path(name, err);
        g::model m;
        ASSERT_TRUE(g::open_model(src, m, err)) << err;
        reap::plan p;
        ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 17, p, err)) << err;
        const std::string out = dir + "/" + name + ".gguf", plan_path = dir + "/" + name + ".json";
        std::vector<std::string> written;
        ASSERT_TRUE(prune_test::prune_to(m, p, plan_path, out, written, err)) << err;
        ASSERT_TRUE(prune_test::verify(m, p, plan_path, out, err)) << err;
        EXPECT_GE(check_with_ggml(src, out, p), 2 * int(p.layers.size()));
        run_result r;
        ASSERT_TRUE(run_model(out, k_long_prompt, r, err)) << err;
        // the pruned model routes only to its n_keep experts
        for (const auto & kv : r.probe.topk.routed) {
            for (const auto & row : kv.second) {
                for (int32_t e : row) ASSERT_LT(e, p.n_keep);
            }
        }
        EXPECT_EQ(r.probe.topk.routed.size(), p.layers.size());
        // the file says which source experts it kept, as the plan lists them (read by ggml's
        // reader), split too (in the first shard); llama.cpp loads the split set
        std::map<int, std::vector<int64_t>> want;
        for (const reap::plan_layer & pl : p.layers) want[pl.layer] = pl.keep;
        EXPECT_EQ(reap_test::ggml_kept_ids(out), want);
        std::vector<std::string> shards;
        ASSERT_TRUE(prune_test::prune_to(m, p, plan_path, dir + "/" + name + "-split.gguf", shards, err, true, 0, 4)) << err;
        ASSERT_GT(shards.size(), 1u);
        EXPECT_EQ(reap_test::ggml_kept_ids(shards[0]), want);
        EXPECT_NE(reap_test::load_model(shards[0]), nullptr) << "llama.cpp does not load the split set";
    }
}

// Prunes from `src` exactly the experts `prompt` never routes to (padded to
// a uniform count, unsorted order), then compares the pruned model with the
// source on the same prompt (see the file comment for what is expected).
void prune_unrouted_and_compare(const std::string & src, const std::string & name, const std::string & dir,
                                const char * default_prompt) {
    std::string err;
    g::model m;
    ASSERT_TRUE(g::open_model(src, m, err)) << err;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::model_layout(m, lay, err)) << err;
    if (!prune_test::env_or("REAP_TEST_PRUNE_ONLY", "").empty() && prune_test::env_or("REAP_TEST_PRUNE_ONLY", "") != name) return;
    // group-limited routers need the best two of every selected group as
    // well: only a one-token prompt (BOS) leaves something to prune in the
    // zoo's 4 groups of 4 experts
    const std::string prompt_s = prune_test::env_or("REAP_TEST_PRUNE_PROMPT", lay.router.n_group > 1 ? "" : default_prompt);
    const char * prompt = prompt_s.c_str();
    run_result base;
    ASSERT_TRUE(run_model(src, prompt, base, err)) << err;

    // what each MoE layer needs: the routed experts, and for group-limited
    // routers the best two of each selected group (they decide which groups win)
    const int64_t G = lay.router.n_group > 1 ? lay.router.n_group : 1;
    const int64_t per_src = lay.n_expert / G;
    std::map<int, std::set<int64_t>> need;
    for (int layer : lay.moe_layers) {
        ASSERT_TRUE(base.probe.topk.routed.count(layer)) << "no routing record for layer " << layer;
        for (const auto & row : base.probe.topk.routed[layer]) need[layer].insert(row.begin(), row.end());
        if (G > 1) {
            const auto & sel = base.probe.probs_biased.count(layer) ? base.probe.probs_biased[layer] : base.probe.probs[layer];
            ASSERT_FALSE(sel.empty()) << "no selection scores for layer " << layer;
            // llama.cpp scores a group by the sum of its best two experts and
            // keeps the n_group_used best groups. Keeping the best two of every
            // selected group leaves the selected groups' scores unchanged;
            // pruning can only lower the others' scores: the same groups win.
            for (const auto & row : sel) {
                std::vector<std::pair<float, int64_t>> scores;
                std::vector<std::pair<int64_t, int64_t>> best2;
                for (int64_t gi = 0; gi < G; ++gi) {
                    std::vector<int64_t> ids;
                    for (int64_t e = gi * per_src; e < (gi + 1) * per_src; ++e) ids.push_back(e);
                    std::partial_sort(ids.begin(), ids.begin() + 2, ids.end(),
                                      [&](int64_t x, int64_t y) { return row[size_t(x)] > row[size_t(y)]; });
                    scores.push_back({row[size_t(ids[0])] + row[size_t(ids[1])], gi});
                    best2.push_back({ids[0], ids[1]});
                }
                std::sort(scores.begin(), scores.end(), [](auto & x, auto & y) { return x.first > y.first; });
                for (int64_t k = 0; k < lay.router.n_group_used; ++k) {
                    const auto & b = best2[size_t(scores[size_t(k)].second)];
                    need[layer].insert(b.first);
                    need[layer].insert(b.second);
                }
            }
        }
    }
    // uniform keep count: the largest need (per group for grouped routers), padded
    int64_t per_out = 0;
    for (auto & kv : need) {
        std::vector<int64_t> in_group(size_t(G), 0);
        for (int64_t e : kv.second) in_group[size_t(e / per_src)]++;
        for (int64_t c : in_group) per_out = std::max(per_out, c);
    }
    if (G > 1) per_out = std::max<int64_t>(per_out, 2);
    int64_t n_keep = per_out * G;
    n_keep = std::max(n_keep, lay.n_expert_used);
    if (G > 1 && lay.router.n_group_used > 0) {
        while ((n_keep / G) * lay.router.n_group_used < lay.n_expert_used) n_keep += G;
    }
    EXPECT_LT(n_keep, lay.n_expert) << "the prompt needs every expert: nothing would be pruned";
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, n_keep, 1, p, err)) << err;
    std::mt19937 rng(42);
    for (auto & pl : p.layers) {
        pl.keep.clear();
        const int64_t per = n_keep / G;
        for (int64_t gi = 0; gi < G; ++gi) {
            std::vector<int64_t> kept, rest;
            for (int64_t e = gi * per_src; e < (gi + 1) * per_src; ++e) {
                (need[pl.layer].count(e) ? kept : rest).push_back(e);
            }
            std::shuffle(rest.begin(), rest.end(), rng);
            for (size_t i = 0; int64_t(kept.size()) < per; ++i) kept.push_back(rest[i]);
            std::shuffle(kept.begin(), kept.end(), rng);   // an unsorted output order
            pl.keep.insert(pl.keep.end(), kept.begin(), kept.end());
        }
    }
    const std::string out = dir + "/" + name + ".gguf", plan_path = dir + "/" + name + ".json";
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, plan_path, out, written, err)) << err;
    ASSERT_TRUE(prune_test::verify(m, p, plan_path, out, err)) << err;
    run_result pruned;
    ASSERT_TRUE(run_model(out, prompt, pruned, err)) << err;
    ASSERT_EQ(pruned.n_tokens, base.n_tokens);
    const double rd = rel_diff(base.logits, pruned.logits);
    printf("[ %-14s] %d tokens, keep %" PRId64 " of %" PRId64 " (%s%s), logits rel diff %.3g\n", name.c_str(),
           base.n_tokens, n_keep, lay.n_expert, reap::moe::gating_name(lay.router.gating),
           lay.router.weights_norm ? ", renormalised" : "", rd);

    // routing, mapped back through the plan: source expert ids of each token
    auto mapped = [&](int layer, const std::vector<int32_t> & row) {
        std::set<int64_t> s;
        for (int32_t e : row) s.insert(p.find_layer(layer)->keep[size_t(e)]);
        return s;
    };
    auto same_routing = [&](int layer) {
        const auto & a = base.probe.topk.routed[layer];
        const auto & b = pruned.probe.topk.routed[layer];
        if (a.size() != b.size()) return false;
        for (size_t t = 0; t < a.size(); ++t) {
            if (std::set<int64_t>(a[t].begin(), a[t].end()) != mapped(layer, b[t])) return false;
        }
        return true;
    };
    // the first MoE layer sees identical input in both models: identical routing for every arch
    EXPECT_TRUE(same_routing(lay.moe_layers.front())) << "layer " << lay.moe_layers.front();

    // a permutation of all experts (reversed order) removes nothing: identical logits for every router
    {
        reap::plan perm = p;
        perm.n_keep = lay.n_expert;
        for (auto & pl : perm.layers) {
            pl.keep.clear();
            for (int64_t gi = 0; gi < G; ++gi) {   // groups in order, reversed inside each
                for (int64_t e = (gi + 1) * per_src - 1; e >= gi * per_src; --e) pl.keep.push_back(e);
            }
        }
        const std::string out2 = dir + "/" + name + ".perm.gguf";
        ASSERT_TRUE(prune_test::prune_to(m, perm, dir + "/" + name + ".perm.json", out2, written, err)) << err;
        run_result r2;
        ASSERT_TRUE(run_model(out2, prompt, r2, err)) << err;
        const double rd2 = rel_diff(base.logits, r2.logits);
        printf("[ %-14s] all %" PRId64 " experts in reversed order: logits rel diff %.3g\n", name.c_str(), lay.n_expert, rd2);
        EXPECT_LE(rd2, 1e-5);
    }
    if (!lay.router.weights_change_when_pruned) {
        EXPECT_LE(rd, 1e-5) << "gate weights do not depend on the pruned experts: logits must not change";
        for (int layer : lay.moe_layers) EXPECT_TRUE(same_routing(layer)) << "layer " << layer;
    } else {
        // qwen2moe: softmax over all experts, no renormalisation. The selected
        // experts are the same (softmax is monotonic and every routed expert is
        // kept) but each weight p_e = exp(z_e) / sum_j exp(z_j) grows by the
        // factor sum_all / sum_kept > 1 because the denominator loses the pruned
        // experts' terms. Expected: identical routing in the first MoE layer
        // (checked above), logits that differ measurably, and identical logits
        // when nothing is removed (a permutation of all experts, above).
        ASSERT_LT(n_keep, lay.n_expert) << "the prompt routed to every expert: nothing pruned";
        EXPECT_GT(rd, 1e-4) << "removing experts must change the weights of a softmax router without renormalisation";
    }
}

TEST(LlamaPrune, PruneUnroutedExpertsKeepsLogits) {
    std::string err;
    if (prune_test::zoo_dir("prune-zoo", err).empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("llama-prune-behaviour");
    for (const std::string & name : prune_test::zoo_names()) {
        SCOPED_TRACE(name);
        prune_unrouted_and_compare(zoo_path(name, err), name, dir, k_prompt);
    }
}

// The same on the project's trained model (models/reap-moe-tiny.gguf, qwen3moe,
// 32 experts top-4, F32), where routing is learnt rather than random.
TEST(LlamaPrune, TrainedModelPruneUnroutedKeepsLogits) {
    const std::string src = prune_test::env_or("REAP_SOURCE_DIR", ".") + "/models/reap-moe-tiny.gguf";
    if (!prune_test::exists(src)) GTEST_SKIP() << "no trained model at " << src;
    const std::string dir = prune_test::scratch("llama-prune-trained");
    prune_unrouted_and_compare(src, "reap-moe-tiny", dir, "int main");
}

// A split input (llama-gguf-split's naming, written by reap's writer) pruned
// to a split output loads in llama.cpp and gives the unsplit output's logits.
TEST(LlamaPrune, SplitRoundTripLoads) {
    std::string err;
    const std::string src = zoo_path("qwen3moe", err);
    if (src.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("llama-prune-split");
    g::model whole;
    ASSERT_TRUE(g::open_model(src, whole, err)) << err;
    g::write_options wo;
    wo.sync = false;
    wo.split_max_tensors = 12;
    std::vector<std::string> in_files;
    ASSERT_TRUE(g::write_output(g::spec_from_model(whole), wo, dir + "/in.gguf", in_files, err)) << err;
    g::model m;
    ASSERT_TRUE(g::open_model(in_files[0], m, err)) << err;
    ASSERT_GT(m.shards.size(), 1u);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 8, 5, p, err)) << err;
    std::vector<std::string> out_files, one;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/p.json", dir + "/out.gguf", out_files, err, true, 120000)) << err;
    ASSERT_GT(out_files.size(), 1u);
    ASSERT_TRUE(prune_test::verify(m, p, dir + "/p.json", out_files[0], err)) << err;
    ASSERT_TRUE(prune_test::prune_to(whole, p, dir + "/p.json", dir + "/one.gguf", one, err)) << err;
    run_result a, b;
    ASSERT_TRUE(run_model(out_files[0], k_long_prompt, a, err)) << err;
    ASSERT_TRUE(run_model(one[0], k_long_prompt, b, err)) << err;
    EXPECT_EQ(a.logits, b.logits);
    // llama-gguf-split --merge accepts our split output too
    const std::string split_bin = reap_test::llama_bin_dir() + "/llama-gguf-split";
    if (prune_test::exists(split_bin)) {
        std::string log;
        ASSERT_EQ(prune_test::run(prune_test::quote(split_bin) + " --merge " + prune_test::quote(out_files[0]) + " " +
                                      prune_test::quote(dir + "/merged.gguf"), log), 0) << log;
        run_result c;
        ASSERT_TRUE(run_model(dir + "/merged.gguf", k_long_prompt, c, err)) << err;
        EXPECT_EQ(a.logits, c.logits);
    }
}

// Quantised with llama.cpp's own llama-quantize: pruning slices the blocks,
// verify passes, ggml's reader sees the right bytes, the model decodes.
TEST(LlamaPrune, QuantisedModels) {
    if (!reap_test::has_llama_tools()) GTEST_SKIP() << "llama-quantize not built in " << reap_test::llama_bin_dir();
    const std::string dir = prune_test::scratch("llama-prune-quant");
    for (const auto & nt : std::vector<std::pair<std::string, std::string>>{{"qwen3moe-q256", "Q4_K_M"}, {"qwen3moe-q256", "IQ2_XXS"}, {"deepseek2", "Q8_0"}}) {
        SCOPED_TRACE(nt.first + " " + nt.second);
        std::string err;
        const std::string src = reap_test::zoo_quantized(nt.first, nt.second, err);
        ASSERT_FALSE(src.empty()) << err;
        g::model m;
        ASSERT_TRUE(g::open_model(src, m, err)) << err;
        reap::plan p;
        ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 23, p, err)) << err;
        const std::string out = dir + "/" + nt.first + "-" + nt.second + ".gguf";
        std::vector<std::string> written;
        ASSERT_TRUE(prune_test::prune_to(m, p, out + ".json", out, written, err)) << err;
        ASSERT_TRUE(prune_test::verify(m, p, out + ".json", out, err)) << err;
        EXPECT_GE(check_with_ggml(src, out, p), 2);
        run_result r;
        ASSERT_TRUE(run_model(out, k_long_prompt, r, err)) << err;
    }
}

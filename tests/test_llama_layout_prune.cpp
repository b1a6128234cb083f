// test_llama_layout_prune.cpp: proves the MoE layout table (src/moe/layout.h)
// against llama.cpp itself, on every zoo model. A reference pruner, written here
// in a few lines on top of the table and reap::gguf's writer, cuts every tensor
// the table marks as carrying the expert axis, and llama.cpp runs the result:
//   * keeping ALL experts in a shuffled order must give the same logits as the
//     original, and routing that is the original's renumbered. A tensor the table
//     missed or sliced along the wrong axis (router rows, exp_probs_b, per-expert
//     biases, slabs) breaks one of the two; a wrongly ordered router still gives
//     fluent text, so only a comparison like this catches it.
//   * keeping half the experts must load and decode, route only to kept ids, and,
//     in the first MoE layer (whose input is untouched by pruning), keep every
//     originally selected expert that survived, renumbered, ahead of newcomers.
// The project's real slicer lives in src/prune; this one exists to test the table.
#include "llama_test_util.h"

#include "gguf/gguf.h"
#include "moe/layout.h"
#include "moe/layout_gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

using namespace reap_test;

namespace {

const char * k_prompt =
    "Pruning experts: the router's rows, the selection bias and every slab must move together. "
    "int f(int x) { return x * 2; }";

// Writes `dst`: `src` with every expert-axis tensor cut to `keep` (output expert i =
// source expert keep[i]) and <arch>.expert_count set to keep.size().
// `unsliced` (for the sensitivity test) names one tensor copied as it is instead.
bool prune_ref(const std::string & src, const std::vector<int64_t> & keep, const std::string & dst,
               reap::moe::layout & l, std::string & err, const std::string & unsliced = "") {
    reap::gguf::model m;
    if (!reap::gguf::open_model(src, m, err) || !reap::moe::layout_of(m, l, err)) {
        return false;
    }
    reap::gguf::output_spec spec = reap::gguf::spec_from_model(m);
    spec.kvs.set_u32(reap::moe::kv_key(l.arch, "expert_count"), (uint32_t) keep.size());
    if (spec.tensors.size() != m.tensors.size()) {
        err = "spec_from_model changed the tensor count";
        return false;
    }
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const reap::moe::tensor_role & r = l.roles[i];
        if (r.slice == reap::moe::slice_kind::none || m.tensors[i].name == unsliced) {
            continue;
        }
        const reap::gguf::tensor_info & t = m.tensors[i];
        reap::gguf::output_tensor & o = spec.tensors[i];
        if (o.name != t.name) {
            err = "spec order differs at " + t.name;
            return false;
        }
        o.pieces.clear();
        for (int64_t e : keep) {
            uint64_t off = 0, size = 0;
            if (!reap::moe::expert_range(r, l.n_expert, e, off, size)) {
                err = "expert " + std::to_string(e) + " out of range for " + t.name;
                return false;
            }
            o.pieces.push_back({m.path_of(t), t.file_offset + off, size});
        }
        o.ne[r.expert_dim] = (int64_t) keep.size();
    }
    reap::gguf::write_options wo;
    wo.force = true;
    wo.sync = false;
    std::vector<std::string> written;
    return reap::gguf::write_output(spec, wo, dst, written, err);
}

// A seeded shuffle of 0..n-1; with groups, experts only move inside their group
// (group-limited routing scores whole groups, so groups must stay intact).
std::vector<int64_t> shuffled(int64_t n, int64_t n_group, uint32_t seed) {
    std::vector<int64_t> keep(n);
    std::iota(keep.begin(), keep.end(), 0);
    std::mt19937 rng(seed);
    const int64_t g = n_group > 1 ? n_group : 1;
    const int64_t per = n / g;
    for (int64_t i = 0; i < g; ++i) {
        std::shuffle(keep.begin() + i * per, keep.begin() + (i + 1) * per, rng);
    }
    return keep;
}

// The same renumbering in every MoE layer of `l`.
std::map<int, std::vector<int32_t>> renumbering(const reap::moe::layout & l, const std::vector<int64_t> & keep) {
    std::map<int, std::vector<int32_t>> m;
    for (int il : l.moe_layers) m[il] = inverse_keep(keep, l.n_expert);
    return m;
}

bool run(const std::string & path, prompt_run & out, std::string & err) {
    return run_prompt(path, k_prompt, out, err);
}

class LayoutPrune : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutPrune, AllExpertsShuffledIsTheSameModel) {
    std::string err;
    const std::string src = zoo_model(GetParam(), err);
    ASSERT_FALSE(src.empty()) << err;

    // the layout first, to know n_expert and the groups
    reap::gguf::model m;
    reap::moe::layout l;
    ASSERT_TRUE(reap::gguf::open_model(src, m, err) && reap::moe::layout_of(m, l, err)) << err;
    const std::vector<int64_t> keep = shuffled(l.n_expert, l.router.n_group, 1234);
    std::vector<int64_t> identity(l.n_expert);
    std::iota(identity.begin(), identity.end(), 0);
    ASSERT_NE(keep, identity);

    const std::string dst = test_tmp_dir() + "/layout-prune-" + GetParam() + "-shuffled.gguf";
    ASSERT_TRUE(prune_ref(src, keep, dst, l, err)) << err;

    prompt_run a, b;
    ASSERT_TRUE(run(src, a, err)) << err;
    ASSERT_TRUE(run(dst, b, err)) << err;
    ASSERT_EQ(a.logits.size(), b.logits.size());

    std::string why;
    EXPECT_TRUE(same_model(a, b, renumbering(l, keep), why)) << GetParam() << ": " << why;
    if (std::getenv("REAP_TEST_VERBOSE")) {
        fprintf(stderr, "%s: %s\n", GetParam().c_str(), why.c_str());
    }
}

TEST_P(LayoutPrune, HalfTheExpertsRoutesToTheKeptOnes) {
    std::string err;
    const std::string src = zoo_model(GetParam(), err);
    ASSERT_FALSE(src.empty()) << err;

    reap::gguf::model m;
    reap::moe::layout l;
    ASSERT_TRUE(reap::gguf::open_model(src, m, err) && reap::moe::layout_of(m, l, err)) << err;
    // every other expert: with groups of an even size this keeps the same count per group
    std::vector<int64_t> keep;
    for (int64_t e = 1; e < l.n_expert; e += 2) {
        keep.push_back(e);
    }
    ASSERT_GE((int64_t) keep.size(), l.n_expert_used);
    const std::vector<int32_t> new_id = inverse_keep(keep, l.n_expert);

    const std::string dst = test_tmp_dir() + "/layout-prune-" + GetParam() + "-half.gguf";
    reap::moe::layout l_src;
    ASSERT_TRUE(prune_ref(src, keep, dst, l_src, err)) << err;

    // the output classifies with n_keep experts and the same MoE blocks
    reap::gguf::model m2;
    reap::moe::layout l2;
    ASSERT_TRUE(reap::gguf::open_model(dst, m2, err) && reap::moe::layout_of(m2, l2, err)) << err;
    EXPECT_EQ(l2.n_expert, (int64_t) keep.size());
    EXPECT_EQ(l2.moe_layers, l.moe_layers);

    prompt_run a, b;
    ASSERT_TRUE(run(src, a, err)) << err;
    ASSERT_TRUE(run(dst, b, err)) << err;
    EXPECT_TRUE(all_finite(b.logits));
    ASSERT_EQ(a.routed.size(), b.routed.size());
    for (const auto & [il, rows] : b.routed) {
        for (const auto & row : rows) {
            for (int32_t e : row) {
                ASSERT_GE(e, 0);
                ASSERT_LT(e, (int32_t) keep.size()) << "layer " << il;
            }
        }
    }

    // first MoE layer: same input, same scores for the survivors. Every expert the
    // original picked and that survived must still be picked, ahead of any newcomer.
    // (Group-limited routing rescores whole groups from their two best members, so
    // the survivors' group choice may change: skipped there.)
    if (l.router.n_group > 1) {
        return;
    }
    const int il = l.moe_layers.front();
    const auto & rows_a = a.routed.at(il);
    const auto & rows_b = b.routed.at(il);
    ASSERT_EQ(rows_a.size(), rows_b.size());
    int checked = 0;
    for (size_t t = 0; t < rows_a.size(); ++t) {
        std::vector<int32_t> survivors;
        for (int32_t e : rows_a[t]) {
            if (new_id[e] >= 0) {
                survivors.push_back(new_id[e]);
            }
        }
        const std::vector<int32_t> head(rows_b[t].begin(), rows_b[t].begin() + survivors.size());
        EXPECT_EQ(head, survivors) << GetParam() << ": layer " << il << " token " << t;
        checked += (int) survivors.size();
    }
    EXPECT_GT(checked, 0);
}

// The comparison above is sharp enough: leaving any single expert-axis tensor in
// source order (router rows, router bias, selection bias, one per-expert bias, one
// slab) is detected.
TEST(LayoutPruneSensitivity, OneTensorLeftUnpermutedIsCaught) {
    const std::map<std::string, std::vector<std::string>> cases = {
        {"gpt-oss",   {"blk.1.ffn_down_exps.bias", "blk.0.ffn_gate_inp.bias", "blk.0.ffn_up_exps.weight"}},
        {"deepseek2", {"blk.2.exp_probs_b.bias"}},
        {"kimi-k3",   {"blk.1.ffn_gate_inp.weight", "blk.3.ffn_down_exps.weight"}},
    };
    for (const auto & [name, tensors] : cases) {
        std::string err;
        const std::string src = zoo_model(name, err);
        ASSERT_FALSE(src.empty()) << err;
        reap::gguf::model m;
        reap::moe::layout l;
        ASSERT_TRUE(reap::gguf::open_model(src, m, err) && reap::moe::layout_of(m, l, err)) << err;
        const std::vector<int64_t> keep = shuffled(l.n_expert, l.router.n_group, 99);
        prompt_run a;
        ASSERT_TRUE(run(src, a, err)) << err;
        for (const std::string & tensor : tensors) {
            SCOPED_TRACE(name + " " + tensor);
            const std::string dst = test_tmp_dir() + "/layout-prune-" + name + "-broken.gguf";
            ASSERT_TRUE(prune_ref(src, keep, dst, l, err, tensor)) << err;
            prompt_run b;
            ASSERT_TRUE(run(dst, b, err)) << err;
            std::string why;
            EXPECT_FALSE(same_model(a, b, renumbering(l, keep), why)) << "not detected: " << why;
            if (std::getenv("REAP_TEST_VERBOSE")) {
                fprintf(stderr, "%s %s: %s\n", name.c_str(), tensor.c_str(), why.c_str());
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Zoo, LayoutPrune, ::testing::ValuesIn(zoo_names()),
                         [](const ::testing::TestParamInfo<std::string> & info) {
                             std::string n = info.param;
                             for (char & c : n) {
                                 if (!isalnum((unsigned char) c)) {
                                     c = '_';
                                 }
                             }
                             return n;
                         });

}  // namespace

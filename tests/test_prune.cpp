// Tests of the slicer and the auditor (src/prune/prune.h), in-process and
// without llama.cpp: every zoo model pruned with an unsorted keep order
// verifies; identity plans without the stamp reproduce the source byte for
// byte; quantised slabs; split sets in and out; damage (a flipped slab byte,
// swapped router rows, a stale expert_count, a stale SHA256SUMS) makes verify
// fail naming it. The `reap prune` / `reap verify` commands themselves:
// test_cli_prune.cpp.
#include "gguf_test_util.h"
#include "moe/census.h"
#include "prune_test_util.h"
#include "prune_zoo_fixture.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

namespace g = reap::gguf;
using prune_test::exists;
using prune_test::quote;
using prune_test::read_all;
using prune_test::write_all;

namespace {

using prune_test::open;
using prune_test::zoo_or_skip;

const g::tensor_info * find(const g::model & m, const std::string & name) { return m.find_tensor(name); }

} // namespace

// Every zoo model at ~50% with a shuffled keep order: the output verifies,
// shapes carry n_keep, expert_count is n_keep, provenance is recorded.
TEST(PruneZoo, HalfUnsortedVerifies) {
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-zoo-half");
    for (const std::string & name : prune_test::zoo_names()) {
        SCOPED_TRACE(name);
        const g::model m = open(zoo + "/" + name + ".gguf");
        reap::plan p;
        ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 11, p, err)) << err;
        bool unsorted = false;
        for (const auto & l : p.layers) unsorted |= !std::is_sorted(l.keep.begin(), l.keep.end());
        EXPECT_TRUE(unsorted);
        std::vector<std::string> written;
        const std::string out = dir + "/" + name + ".gguf", plan_path = dir + "/" + name + ".plan.json";
        ASSERT_TRUE(prune_test::prune_to(m, p, plan_path, out, written, err)) << err;
        ASSERT_TRUE(prune_test::verify(m, p, plan_path, out, err)) << err;

        const g::model o = open(out);
        reap::moe::layout lay;
        ASSERT_TRUE(reap::model_layout(m, lay, err)) << err;
        uint32_t count = 0;
        ASSERT_TRUE(o.kvs.get_u32(lay.arch + ".expert_count", count, err)) << err;
        EXPECT_EQ(count, uint32_t(p.n_keep));
        std::string sha;
        ASSERT_TRUE(o.kvs.get_string(reap::prune::k_key_plan_sha256, sha, err)) << err;
        std::string want;
        ASSERT_TRUE(reap::plan_file_sha256(plan_path, want, err));
        EXPECT_EQ(sha, want);
        uint32_t src_count = 0;
        ASSERT_TRUE(o.kvs.get_u32(reap::prune::k_key_source_expert_count, src_count, err)) << err;
        EXPECT_EQ(int64_t(src_count), lay.n_expert);
        size_t n_sliced = 0;
        for (size_t i = 0; i < m.tensors.size(); ++i) {
            const auto & role = lay.roles[i];
            if (role.slice == reap::moe::slice_kind::none) {
                EXPECT_EQ(o.tensors[i].nbytes, m.tensors[i].nbytes) << m.tensors[i].name;
                continue;
            }
            ++n_sliced;
            EXPECT_EQ(o.tensors[i].ne[role.expert_dim], p.n_keep) << m.tensors[i].name;
            EXPECT_EQ(o.tensors[i].nbytes, role.expert_bytes * uint64_t(p.n_keep)) << m.tensors[i].name;
        }
        EXPECT_GE(n_sliced, 2 * lay.moe_layers.size());
        // the reloaded layout agrees: an output is itself a valid model for the table
        reap::moe::layout lay_out;
        ASSERT_TRUE(reap::model_layout(o, lay_out, err)) << err;
        EXPECT_EQ(lay_out.n_expert, p.n_keep);
        EXPECT_EQ(lay_out.moe_layers, lay.moe_layers);
    }
}

// Output expert i is source expert keep[i] in every sliced tensor, checked
// here by reading the raw bytes with the expert axis taken from the tensor
// names and shapes (not the layout table).
TEST(PruneZoo, SlabsFollowPlanOrderByName) {
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-zoo-order");
    for (const std::string & name : {std::string("gpt-oss"), std::string("deepseek2"), std::string("qwen3moe")}) {
        SCOPED_TRACE(name);
        const g::model m = open(zoo + "/" + name + ".gguf");
        reap::plan p;
        ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 3, p, err)) << err;
        std::vector<std::string> written;
        const std::string out = dir + "/" + name + ".gguf";
        ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/" + name + ".json", out, written, err)) << err;
        const g::model o = open(out);
        int checked = 0;
        for (const auto & t : m.tensors) {
            const auto has = [&](const char * s) { return t.name.find(s) != std::string::npos; };
            int axis = -1;
            if (has("_exps.weight")) axis = 2;
            else if (has("_exps.bias") || has("ffn_gate_inp.weight")) axis = 1;
            else if (has("ffn_gate_inp.bias") || has("exp_probs_b.bias")) axis = 0;
            if (has("_shexp")) axis = -1;
            std::vector<uint8_t> a, b;
            ASSERT_TRUE(g::read_tensor(m, t.name, a, err)) << err;
            ASSERT_TRUE(g::read_tensor(o, t.name, b, err)) << err;
            if (axis < 0) {
                EXPECT_EQ(a, b) << t.name;
                continue;
            }
            const int layer = std::atoi(t.name.c_str() + 4);
            const auto * pl = p.find_layer(layer);
            ASSERT_NE(pl, nullptr) << t.name;
            const uint64_t S = a.size() / uint64_t(m.tensors.size() ? t.ne[axis] : 1);
            ASSERT_EQ(b.size(), S * pl->keep.size()) << t.name;
            for (size_t k = 0; k < pl->keep.size(); ++k) {
                ASSERT_EQ(0, memcmp(b.data() + k * S, a.data() + uint64_t(pl->keep[k]) * S, S))
                    << t.name << ": output expert " << k << " != source expert " << pl->keep[k];
            }
            ++checked;
        }
        EXPECT_GT(checked, 0);
    }
}

// An identity plan with the stamp off reproduces every zoo model byte for byte.
TEST(PruneZoo, IdentityNoStampIsByteIdentical) {
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-zoo-identity");
    for (const std::string & name : prune_test::zoo_names()) {
        SCOPED_TRACE(name);
        const std::string src = zoo + "/" + name + ".gguf";
        const g::model m = open(src);
        reap::plan p;
        ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 1, p, err)) << err;
        p.n_keep = p.n_expert;
        for (auto & l : p.layers) {
            l.keep.clear();
            for (int64_t e = 0; e < p.n_expert; ++e) l.keep.push_back(e);
        }
        std::vector<std::string> written;
        const std::string out = dir + "/" + name + ".gguf";
        ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/" + name + ".json", out, written, err, /*stamp=*/false)) << err;
        EXPECT_TRUE(read_all(src) == read_all(out)) << "identity output differs from " << src;
        EXPECT_TRUE(prune_test::verify(m, p, dir + "/" + name + ".json", out, err)) << err;
    }
}

// Quantised slabs (Q4_K, MXFP4, BF16 experts; Q8_0/Q6_K/F16 elsewhere): bytes
// are sliced per expert whatever the block type.
TEST(PruneQuant, MixedTypes) {
    const std::string dir = prune_test::scratch("prune-quant");
    gguf_test::model_options mo;
    mo.n_expert = 8;
    mo.n_layer = 1;   // block 0 only: every qwen3moe block must be MoE
    gguf_test::write_model(dir + "/src.gguf", mo);
    const g::model m = open(dir + "/src.gguf");
    std::string err;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::model_layout(m, lay, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 3, 5, p, err)) << err;
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/p.json", dir + "/out.gguf", written, err)) << err;
    ASSERT_TRUE(prune_test::verify(m, p, dir + "/p.json", dir + "/out.gguf", err)) << err;
    const g::model o = open(dir + "/out.gguf");
    for (const char * n : {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight"}) {
        const auto * s = find(m, n);
        const auto * t = find(o, n);
        ASSERT_TRUE(s && t) << n;
        EXPECT_EQ(t->type, s->type);
        EXPECT_EQ(t->nbytes * 8, s->nbytes * 3) << n;
    }
}

// A tensor whose shape mentions n_expert that the layout table does not know
// is an error, not a silent copy.
TEST(PruneQuant, UnknownExpertShapedTensorIsAnError) {
    const std::string dir = prune_test::scratch("prune-unknown");
    gguf_test::model_options mo;
    mo.n_expert = 8;
    mo.n_layer = 1;
    g::output_spec spec = gguf_test::make_model_spec(mo);
    g::output_tensor t;
    t.name = "blk.0.ffn_mystery.weight";
    t.n_dims = 2;
    t.ne[0] = 64;
    t.ne[1] = 8;
    t.type = g::tensor_type::F32;
    t.memory = std::make_shared<std::vector<uint8_t>>(64 * 8 * 4, 0);
    spec.tensors.push_back(t);
    std::vector<std::string> written;
    std::string err;
    g::write_options wo;
    wo.sync = false;
    ASSERT_TRUE(g::write_output(spec, wo, dir + "/src.gguf", written, err)) << err;
    const g::model m = open(dir + "/src.gguf");
    reap::plan p;
    p.arch = "qwen3moe";
    p.n_layer = 1;
    p.n_expert = 8;
    p.n_expert_used = 2;
    p.n_keep = 4;
    p.layers = {{0, {0, 1, 2, 3}}};
    reap::prune::prune_options po;
    po.stamp = false;
    g::output_spec out;
    EXPECT_FALSE(reap::prune::make_pruned_spec(m, p, po, out, err));
    EXPECT_NE(err.find("blk.0.ffn_mystery.weight"), std::string::npos) << err;
}

// A split input pruned to a split output verifies; SHA256SUMS lists every shard.
TEST(PruneSplit, SplitInSplitOut) {
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-split");
    const g::model whole = open(zoo + "/qwen3moe.gguf");
    g::write_options wo;
    wo.sync = false;
    wo.split_max_tensors = 15;
    std::vector<std::string> in_files;
    ASSERT_TRUE(g::write_output(g::spec_from_model(whole), wo, dir + "/in.gguf", in_files, err)) << err;
    ASSERT_EQ(in_files.size(), 3u);
    const g::model m = open(in_files[0]);
    ASSERT_EQ(m.shards.size(), 3u);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 8, 9, p, err)) << err;
    std::vector<std::string> out_files;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/p.json", dir + "/out.gguf", out_files, err, true, 100000)) << err;
    ASSERT_GE(out_files.size(), 3u);
    EXPECT_NE(out_files[0].find("out-00001-of-0000"), std::string::npos) << out_files[0];
    ASSERT_TRUE(prune_test::verify(m, p, dir + "/p.json", out_files[0], err)) << err;
    // the same plan on the unsplit source gives the same tensors
    ASSERT_TRUE(prune_test::verify(whole, p, dir + "/p.json", out_files[0], err)) << err;
    std::vector<std::pair<std::string, std::string>> sums;
    ASSERT_TRUE(reap::prune::read_sha256sums(dir + "/SHA256SUMS", sums, err)) << err;
    size_t listed = 0;
    for (const auto & f : out_files) {
        for (const auto & s : sums) listed += dir + "/" + s.first == f;
    }
    EXPECT_EQ(listed, out_files.size());
}

namespace {

// A pruned qwen3moe in a fresh directory, for the damage tests.
struct damaged_fixture {
    g::model    src;
    reap::plan  plan;
    std::string dir, out, plan_path;
};

bool make_fixture(const std::string & name, damaged_fixture & f, std::string & err) {
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) return false;
    f.dir = prune_test::scratch(name);
    if (!g::open_model(zoo + "/qwen3moe.gguf", f.src, err)) return false;
    if (!prune_test::random_plan(f.src, 8, 21, f.plan, err)) return false;
    f.out = f.dir + "/out.gguf";
    f.plan_path = f.dir + "/p.json";
    std::vector<std::string> written;
    return prune_test::prune_to(f.src, f.plan, f.plan_path, f.out, written, err);
}

// Verify must fail with a message containing every needle.
void expect_verify_fails(const damaged_fixture & f, std::vector<std::string> needles, bool check_sums = true) {
    reap::prune::verify_options vo;
    vo.check_sums = check_sums;
    std::string err;
    ASSERT_TRUE(reap::plan_file_sha256(f.plan_path, vo.plan_sha256, err));
    reap::prune::verify_report rep;
    EXPECT_FALSE(reap::prune::verify_pruned(f.src, f.plan, f.out, vo, rep, err));
    for (const auto & n : needles) EXPECT_NE(err.find(n), std::string::npos) << "message: " << err << "\nexpected: " << n;
}

// f's build written with `edit` applied to its header first (a damaged build;
// SHA256SUMS updated, so that only the edit differs).
void write_edited(const damaged_fixture & f, const std::function<void(g::output_spec &)> & edit) {
    std::string err;
    reap::prune::prune_options po;
    ASSERT_TRUE(reap::plan_file_sha256(f.plan_path, po.plan_sha256, err));
    g::output_spec spec;
    ASSERT_TRUE(reap::prune::make_pruned_spec(f.src, f.plan, po, spec, err)) << err;
    edit(spec);
    g::write_options wo;
    wo.force = true;
    wo.sync = false;
    std::vector<std::string> written;
    ASSERT_TRUE(g::write_output(spec, wo, f.out, written, err)) << err;
    ASSERT_TRUE(reap::prune::update_sha256sums(written, reap::prune::sums_path_for(f.out), err)) << err;
}

} // namespace

TEST(PruneDamage, FlippedSlabByte) {
    damaged_fixture f;
    std::string err;
    if (!make_fixture("prune-damage-flip", f, err)) GTEST_SKIP() << err;
    const g::model o = open(f.out);
    const auto * t = find(o, "blk.1.ffn_up_exps.weight");
    ASSERT_NE(t, nullptr);
    std::vector<uint8_t> bytes = read_all(f.out);
    const uint64_t S = t->nbytes / uint64_t(f.plan.n_keep);
    bytes[t->file_offset + 5 * S + 17] ^= 0x40;   // output expert 5, byte 17
    write_all(f.out, bytes);
    const int64_t src_e = f.plan.find_layer(1)->keep[5];
    expect_verify_fails(f, {"blk.1.ffn_up_exps.weight", "output expert 5", "(source expert " + std::to_string(src_e) + ")",
                            "byte 17"});
}

TEST(PruneDamage, SwappedRouterRows) {
    damaged_fixture f;
    std::string err;
    if (!make_fixture("prune-damage-router", f, err)) GTEST_SKIP() << err;
    const g::model o = open(f.out);
    const auto * t = find(o, "blk.2.ffn_gate_inp.weight");
    ASSERT_NE(t, nullptr);
    std::vector<uint8_t> bytes = read_all(f.out);
    const uint64_t row = t->nbytes / uint64_t(f.plan.n_keep);
    std::swap_ranges(bytes.begin() + long(t->file_offset + 2 * row), bytes.begin() + long(t->file_offset + 3 * row),
                     bytes.begin() + long(t->file_offset + 3 * row));
    write_all(f.out, bytes);
    expect_verify_fails(f, {"blk.2.ffn_gate_inp.weight", "output expert 2"});
}

TEST(PruneDamage, StaleExpertCount) {
    damaged_fixture f;
    std::string err;
    if (!make_fixture("prune-damage-count", f, err)) GTEST_SKIP() << err;
    // the same output, but expert_count left at the source's value
    ASSERT_NO_FATAL_FAILURE(write_edited(f, [&](g::output_spec & spec) {
        spec.kvs.set_u32("qwen3moe.expert_count", uint32_t(f.plan.n_expert));
    }));
    expect_verify_fails(f, {"qwen3moe.expert_count", "n_keep"});
}

// The kept-id record of a layer that lists other experts than the plan kept
// (two ids swapped, the slabs untouched), or an id the source never had:
// verify names the key; inspect's census refuses the file, naming the key.
TEST(PruneDamage, KeptIdsThatAreNotThePlans) {
    damaged_fixture f;
    std::string err;
    if (!make_fixture("prune-damage-kept-ids", f, err)) GTEST_SKIP() << err;
    const reap::plan_layer & first = f.plan.layers.at(0);
    const std::string key = "reap.source.expert_ids." + std::to_string(first.layer);
    auto write_with = [&](const std::vector<int32_t> & ids) {
        write_edited(f, [&](g::output_spec & spec) {
            ASSERT_TRUE(spec.kvs.has(key)) << "prune records no " << key;
            spec.kvs.set_i32_array(key, ids);
        });
    };
    std::vector<int32_t> swapped(first.keep.begin(), first.keep.end());
    std::swap(swapped[0], swapped[1]);
    ASSERT_NO_FATAL_FAILURE(write_with(swapped));
    expect_verify_fails(f, {key, "kept experts"});

    std::vector<int32_t> foreign = swapped;
    foreign[0] = (int32_t) f.plan.n_expert;   // one past the source's last expert
    ASSERT_NO_FATAL_FAILURE(write_with(foreign));
    g::model out = open(f.out);
    reap::moe::census c;
    EXPECT_FALSE(reap::moe::take_census(out, {}, c, err));
    EXPECT_NE(err.find(key), std::string::npos) << err;
}

TEST(PruneDamage, StaleSumsWrongPlanChangedKv) {
    damaged_fixture f;
    std::string err;
    if (!make_fixture("prune-damage-misc", f, err)) GTEST_SKIP() << err;
    // SHA256SUMS that does not match the file
    std::vector<uint8_t> sums = read_all(f.dir + "/SHA256SUMS");
    sums[0] = sums[0] == '0' ? '1' : '0';
    write_all(f.dir + "/SHA256SUMS", sums);
    expect_verify_fails(f, {"SHA256SUMS", "out.gguf"});
    expect_verify_fails(f, {}, true);
    {
        reap::prune::verify_options vo;
        vo.check_sums = false;
        ASSERT_TRUE(reap::plan_file_sha256(f.plan_path, vo.plan_sha256, err));
        reap::prune::verify_report rep;
        EXPECT_TRUE(reap::prune::verify_pruned(f.src, f.plan, f.out, vo, rep, err)) << err;
    }
    ::unlink((f.dir + "/SHA256SUMS").c_str());
    expect_verify_fails(f, {"SHA256SUMS"});
    // another plan (different order): the bytes no longer match, and the stamp names the plan
    reap::plan other = f.plan;
    std::swap(other.layers[0].keep[0], other.layers[0].keep[1]);
    damaged_fixture g2 = f;
    g2.plan = other;
    g2.plan_path = f.dir + "/other.json";
    ASSERT_TRUE(reap::write_plan(other, g2.plan_path, true, err));
    expect_verify_fails(g2, {"reap.plan.sha256"}, false);
    // a KV changed in the output
    {
        reap::prune::prune_options po;
        ASSERT_TRUE(reap::plan_file_sha256(f.plan_path, po.plan_sha256, err));
        g::output_spec spec;
        ASSERT_TRUE(reap::prune::make_pruned_spec(f.src, f.plan, po, spec, err)) << err;
        spec.kvs.set_string("general.name", "something else");
        g::write_options wo;
        wo.force = true;
        wo.sync = false;
        std::vector<std::string> written;
        ASSERT_TRUE(g::write_output(spec, wo, f.out, written, err)) << err;
        expect_verify_fails(f, {"general.name"}, false);
    }
    // the source itself is not a pruned output
    damaged_fixture g3 = f;
    g3.out = f.src.shards[0].path;
    expect_verify_fails(g3, {"source"}, false);
}

// Tests of the commands as library calls (core only, in-process: no reap
// binary, no llama.cpp): prune (prune/run.h), plan (plan/choose.h) and
// compare (plan/compare.h), each checked against something computed here
// independently: the pruned file's expert slabs against the source file's
// bytes (both read back with the GGUF reader), the plan's keep-set against a
// ranking computed here from the archive, its predicted size against the
// file the prune stage then writes, and the comparison against overlaps and
// saliency shares counted here by hand.
#include "gguf_test_util.h"
#include "plan/choose.h"
#include "plan/compare.h"
#include "prune/run.h"
#include "saliency_test_util.h"
#include "util/file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <random>
#include <set>

namespace g = reap::gguf;
namespace pl = reap::planner;
namespace s = reap::saliency;
using reap::util::error_kind;

namespace {

constexpr uint32_t k_experts = 8;          // the test model's experts per MoE layer
const std::vector<int> k_moe_layers = {0, 1, 2};

// gguf_test_util.h's model with k_experts experts, block 1 made MoE too (its
// dense FFN replaced by block 0's expert tensors, with other bytes), so that
// every block is MoE as qwen3moe requires; written into `dir`.
std::string write_test_model(const std::string & dir) {
    gguf_test::model_options o;
    o.n_expert = k_experts;
    g::output_spec spec = gguf_test::make_model_spec(o);
    std::vector<g::output_tensor> block1;
    std::mt19937 rng(99);
    for (const auto & t : spec.tensors) {
        if (t.name.rfind("blk.0.ffn_", 0) != 0) continue;
        g::output_tensor c = t;
        c.name = "blk.1." + t.name.substr(6);
        c.memory = gguf_test::random_bytes(rng, t.memory->size());
        block1.push_back(std::move(c));
    }
    spec.tensors.erase(std::remove_if(spec.tensors.begin(), spec.tensors.end(),
                                      [](const g::output_tensor & t) { return t.name == "blk.1.ffn_up.weight"; }),
                       spec.tensors.end());
    spec.tensors.insert(spec.tensors.end(), block1.begin(), block1.end());
    const std::string path = dir + "/src.gguf";
    g::write_options wo;
    wo.sync = false;
    std::vector<std::string> written;
    std::string err;
    EXPECT_TRUE(g::write_output(spec, wo, path, written, err)) << err;
    return path;
}

// A plan for the test model with the model's fingerprint: keeps[i] for MoE layer i.
reap::plan hand_plan(const g::model & m, int64_t n_keep, const std::vector<std::vector<int64_t>> & keeps) {
    reap::plan p;
    p.arch = "qwen3moe";
    p.n_layer = 3;
    p.n_expert = k_experts;
    p.n_expert_used = 2;
    p.n_keep = n_keep;
    std::string err;
    EXPECT_TRUE(reap::stamp_plan_model(p, m, err)) << err;  // header fingerprint and router identity, as `reap plan` writes
    for (size_t i = 0; i < keeps.size(); ++i) p.layers.push_back({k_moe_layers[i], keeps[i]});
    return p;
}

// A simulated archive with the fingerprint of `m`, written to `path`.
std::string write_test_archive(const g::model & m, const std::string & path, s::archive & a) {
    s::fingerprint fp;
    std::string err;
    EXPECT_TRUE(s::model_fingerprint(m, fp, err)) << err;
    a = saliency_test::make_archive({"code", "en"}, fp);
    EXPECT_TRUE(s::write_archive(a, path, err, true)) << err;
    return path;
}

// REAP's score of one expert over every domain of the archive: Σ reap_sum / Σ count.
double reap_score(const s::archive & a, int layer, int64_t e) {
    double num = 0, den = 0;
    for (const auto & d : a.domains) {
        num += d.reap_sum[a.index(layer, (int) e)];
        den += d.count[a.index(layer, (int) e)];
    }
    return den > 0 ? num / den : 0.0;
}

// The n best experts of a layer by that score (ties to the lower id), ascending.
std::vector<int64_t> top_by_score(const s::archive & a, int layer, int64_t n) {
    std::vector<int64_t> ids(a.model.n_expert);
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) { return reap_score(a, layer, x) > reap_score(a, layer, y); });
    ids.resize((size_t) n);
    std::sort(ids.begin(), ids.end());
    return ids;
}

// Σ_kept score / Σ_all score of one layer.
double share_of(const s::archive & a, int layer, const std::vector<int64_t> & keep) {
    double kept = 0, all = 0;
    for (int64_t e = 0; e < (int64_t) a.model.n_expert; ++e) all += reap_score(a, layer, e);
    for (int64_t e : keep) kept += reap_score(a, layer, e);
    return kept / all;
}

uint64_t file_size(const std::string & path) { return gguf_test::apparent_size(path); }

TEST(PruneLibrary, KeptSlabsAreTheSourceBytesInPlanOrder) {
    const std::string dir = gguf_test::scratch_dir("command-lib-prune");
    const std::string src_path = write_test_model(dir);
    std::string err;
    g::model src;
    ASSERT_TRUE(g::open_model(src_path, src, err)) << err;
    // unsorted keep lists: output expert i is source expert keep[i]
    const std::vector<std::vector<int64_t>> keeps = {{6, 1, 3, 4}, {0, 7, 5, 2}, {2, 3, 4, 5}};
    ASSERT_TRUE(reap::write_plan(hand_plan(src, 4, keeps), dir + "/plan.json", true, err)) << err;

    reap::prune::prune_request req;
    req.model = src_path;
    req.plan = dir + "/plan.json";
    req.output = dir + "/out.gguf";
    req.sync = false;
    req.version = "test";
    reap::util::error e;
    reap::prune::prune_job job;
    ASSERT_TRUE(reap::prune::prepare_prune(req, job, e)) << e.message;
    EXPECT_TRUE(job.warning.empty()) << job.warning;
    EXPECT_EQ(job.n_sliced, 12u);   // per MoE layer: router rows and the three slabs
    ASSERT_TRUE(reap::prune::prepare_imatrix(job, e)) << e.message;
    EXPECT_FALSE(gguf_test::exists(req.output));   // nothing is written before write_prune
    reap::prune::prune_written w;
    ASSERT_TRUE(reap::prune::write_prune(job, w, e)) << e.message;
    ASSERT_EQ(w.files, std::vector<std::string>{req.output});
    EXPECT_EQ(file_size(req.output), job.out_bytes);

    g::model out;
    ASSERT_TRUE(g::open_model(req.output, out, err)) << err;
    uint32_t n_expert = 0;
    ASSERT_TRUE(out.kvs.get_u32("qwen3moe.expert_count", n_expert, err)) << err;
    EXPECT_EQ(n_expert, 4u);
    const std::vector<uint8_t> sb = gguf_test::read_all(src_path), ob = gguf_test::read_all(req.output);
    ASSERT_EQ(out.tensors.size(), src.tensors.size());
    size_t n_cut = 0;
    for (const g::tensor_info & st : src.tensors) {
        const g::tensor_info * ot = out.find_tensor(st.name);
        ASSERT_NE(ot, nullptr) << st.name;
        const bool cut = st.name.find("_exps") != std::string::npos || st.name.find("ffn_gate_inp") != std::string::npos;
        if (!cut) {
            ASSERT_EQ(ot->nbytes, st.nbytes) << st.name;
            EXPECT_TRUE(std::equal(sb.begin() + st.file_offset, sb.begin() + st.file_offset + st.nbytes, ob.begin() + ot->file_offset))
                << st.name;
            continue;
        }
        ++n_cut;
        const std::vector<int64_t> & keep = keeps[size_t(st.name[4] - '0')];   // "blk.L."
        const uint64_t slab = st.nbytes / k_experts;   // the expert axis is the outermost
        ASSERT_EQ(ot->nbytes, slab * keep.size()) << st.name;
        for (size_t i = 0; i < keep.size(); ++i) {
            const auto from = sb.begin() + st.file_offset + keep[i] * slab;
            EXPECT_TRUE(std::equal(from, from + slab, ob.begin() + ot->file_offset + i * slab))
                << st.name << ": output expert " << i << " is not source expert " << keep[i];
        }
    }
    EXPECT_EQ(n_cut, 12u);
    // SHA256SUMS beside the output names it
    std::string sums;
    ASSERT_TRUE(reap::util::read_file(dir + "/SHA256SUMS", "sums", sums, err)) << err;
    EXPECT_NE(sums.find("  out.gguf\n"), std::string::npos) << sums;
}

TEST(PruneLibrary, DryRunWritesNothingAndRefusalsCarryTheirKind) {
    const std::string dir = gguf_test::scratch_dir("command-lib-prune-refusals");
    const std::string src_path = write_test_model(dir);
    std::string err;
    g::model src;
    ASSERT_TRUE(g::open_model(src_path, src, err)) << err;
    ASSERT_TRUE(reap::write_plan(hand_plan(src, 2, {{0, 1}, {2, 3}, {4, 5}}), dir + "/plan.json", true, err)) << err;
    reap::prune::prune_request req;
    req.model = src_path;
    req.plan = dir + "/plan.json";
    req.output = dir + "/out.gguf";
    req.sync = false;
    req.split_max_tensors = 10;   // the model's 24 tensors in three shards
    req.dry_run = true;
    const auto before = gguf_test::list_dir(dir);
    reap::util::error e;
    {
        reap::prune::prune_job job;
        ASSERT_TRUE(reap::prune::prepare_prune(req, job, e)) << e.message;
        EXPECT_EQ(job.shards.size(), (src.tensors.size() + 9) / 10);
        EXPECT_EQ(gguf_test::list_dir(dir), before);   // a prepared job has written nothing
    }
    // the output rule: the plan, SHA256SUMS and the source are never outputs
    for (const std::string & bad : {req.plan, dir + "/SHA256SUMS", src_path}) {
        reap::prune::prune_request r = req;
        r.output = bad;
        r.split_max_tensors = 0;
        reap::prune::prune_job job;
        EXPECT_FALSE(reap::prune::prepare_prune(r, job, e)) << bad;
        EXPECT_EQ(e.kind, error_kind::output) << bad << ": " << e.message;
        EXPECT_NE(e.message.find("refusing"), std::string::npos) << e.message;
    }
    // a plan that leaves out one of the model's MoE layers
    ASSERT_TRUE(reap::write_plan(hand_plan(src, 2, {{0, 1}, {2, 3}}), dir + "/short.json", true, err)) << err;
    reap::prune::prune_request r = req;
    r.plan = dir + "/short.json";
    reap::prune::prune_job job;
    EXPECT_FALSE(reap::prune::prepare_prune(r, job, e));
    EXPECT_EQ(e.kind, error_kind::input) << e.message;
    EXPECT_NE(e.message.find("does not fit"), std::string::npos) << e.message;
}

TEST(PlanLibrary, KeepSetIsTheTopScoredAndTheSizeIsThePrunedFiles) {
    const std::string dir = gguf_test::scratch_dir("command-lib-plan");
    const std::string model_path = write_test_model(dir);
    std::string err;
    g::model m;
    ASSERT_TRUE(g::open_model(model_path, m, err)) << err;
    s::archive a;
    pl::plan_request req;
    req.saliency = write_test_archive(m, dir + "/sal.gguf", a);
    req.model = model_path;
    req.output = dir + "/plan.json";
    req.rank.how = pl::method::reap;
    req.method_given = true;
    req.rank.protect_super = false;   // the order is then the score alone
    req.version = "test";
    for (const bool by_ratio : {false, true}) {
        req.keep = by_ratio ? -1 : 3;
        req.ratio = by_ratio ? 0.5 : -1;   // 8 - round(0.5 * 8) = 4
        const int64_t n = by_ratio ? 4 : 3;
        pl::plan_choice c;
        reap::util::error e;
        ASSERT_TRUE(pl::choose_plan(req, c, e)) << e.message;
        ASSERT_EQ(c.n_keep, n);
        ASSERT_EQ(c.p.layers.size(), 3u);
        for (const auto & l : c.p.layers) EXPECT_EQ(l.keep, top_by_score(a, l.layer, n)) << "layer " << l.layer;
        ASSERT_EQ(c.rc.layers.size(), 3u);
        for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(c.rc.layers[i].share, share_of(a, (int) i, top_by_score(a, (int) i, n)), 1e-12);
        EXPECT_EQ(c.p.model_sha256, reap::model_header_sha256(m));
        EXPECT_EQ(c.p.provenance["predicted_bytes"].get<uint64_t>(), c.bytes);
        EXPECT_FALSE(gguf_test::exists(req.output));   // choose_plan writes nothing

        // the predicted size is what the prune stage writes for the plan, stamped
        ASSERT_TRUE(reap::write_plan(c.p, req.output, true, err)) << err;
        reap::prune::prune_request pr;
        pr.model = model_path;
        pr.plan = req.output;
        pr.output = dir + "/pruned.gguf";
        pr.force = true;
        pr.sync = false;
        pr.version = "test";
        reap::prune::prune_job job;
        reap::prune::prune_written w;
        ASSERT_TRUE(reap::prune::prepare_prune(pr, job, e) && reap::prune::write_prune(job, w, e)) << e.message;
        EXPECT_EQ(file_size(pr.output), c.bytes);
        ASSERT_EQ(::unlink(req.output.c_str()), 0);
    }
    // N out of range: a usage error; an existing output without force: an output error
    req.ratio = -1;
    req.keep = 1;   // below n_expert_used
    pl::plan_choice c;
    reap::util::error e;
    EXPECT_FALSE(pl::choose_plan(req, c, e));
    EXPECT_EQ(e.kind, error_kind::usage) << e.message;
    req.keep = 4;
    gguf_test::write_all(req.output, {'{', '}'});
    pl::plan_choice c2;
    EXPECT_FALSE(pl::choose_plan(req, c2, e));
    EXPECT_EQ(e.kind, error_kind::output) << e.message;
}

TEST(CompareLibrary, OverlapAndSharesAsCountedByHand) {
    const std::string dir = gguf_test::scratch_dir("command-lib-compare");
    const std::string model_path = write_test_model(dir);
    std::string err;
    g::model m;
    ASSERT_TRUE(g::open_model(model_path, m, err)) << err;
    s::archive a;
    const std::string sal = write_test_archive(m, dir + "/sal.gguf", a);
    const std::vector<std::vector<int64_t>> ka = {{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 2, 4, 6}},
                                            kb = {{1, 2, 3, 5, 6}, {0, 4, 5, 6, 7}, {1, 3, 5, 6, 7}};
    ASSERT_TRUE(reap::write_plan(hand_plan(m, 4, ka), dir + "/a.json", true, err)) << err;
    ASSERT_TRUE(reap::write_plan(hand_plan(m, 5, kb), dir + "/b.json", true, err)) << err;

    pl::compare_request req;
    req.plan_a = dir + "/a.json";
    req.plan_b = dir + "/b.json";
    pl::plan_comparison c;
    reap::util::error e;
    ASSERT_TRUE(pl::compare_plan_files(req, c, e)) << e.message;
    EXPECT_FALSE(c.have_saliency);
    EXPECT_FALSE(c.receipts_a.has_margin);   // hand-made plans record no receipts
    ASSERT_EQ(c.overlap.layers.size(), 3u);
    double sum_shared = 0, sum_jaccard = 0;
    for (size_t i = 0; i < 3; ++i) {
        std::vector<int64_t> both, either;
        std::set_intersection(ka[i].begin(), ka[i].end(), kb[i].begin(), kb[i].end(), std::back_inserter(both));
        std::set_union(ka[i].begin(), ka[i].end(), kb[i].begin(), kb[i].end(), std::back_inserter(either));
        EXPECT_EQ(c.overlap.layers[i].shared, (int64_t) both.size());
        EXPECT_EQ(c.overlap.layers[i].union_size, (int64_t) either.size());
        EXPECT_DOUBLE_EQ(c.overlap.layers[i].jaccard, double(both.size()) / double(either.size()));
        sum_shared += double(both.size());
        sum_jaccard += double(both.size()) / double(either.size());
    }
    EXPECT_DOUBLE_EQ(c.overlap.mean_shared, sum_shared / 3);   // (3 + 4 + 1) / 3
    EXPECT_NEAR(c.overlap.mean_jaccard, sum_jaccard / 3, 1e-15);   // (0.5 + 0.8 + 0.125) / 3

    req.saliency = sal;
    req.rank.how = pl::method::reap;
    req.method_given = true;
    pl::plan_comparison cs;
    ASSERT_TRUE(pl::compare_plan_files(req, cs, e)) << e.message;
    ASSERT_TRUE(cs.have_saliency);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_NEAR(cs.share_a.share[i], share_of(a, k_moe_layers[i], ka[i]), 1e-12);
        EXPECT_NEAR(cs.share_b.share[i], share_of(a, k_moe_layers[i], kb[i]), 1e-12);
        EXPECT_NEAR(cs.oracle_a.share[i], share_of(a, k_moe_layers[i], top_by_score(a, k_moe_layers[i], 4)), 1e-12);
        EXPECT_NEAR(cs.oracle_b.share[i], share_of(a, k_moe_layers[i], top_by_score(a, k_moe_layers[i], 5)), 1e-12);
    }
    EXPECT_TRUE(cs.receipts_a.has_margin && cs.receipts_b.has_dead);

    // a plan of another model: an input error naming both plans
    reap::plan other = hand_plan(m, 4, ka);
    other.n_expert = 16;
    ASSERT_TRUE(reap::write_plan(other, dir + "/other.json", true, err)) << err;
    req.plan_b = dir + "/other.json";
    pl::plan_comparison co;
    EXPECT_FALSE(pl::compare_plan_files(req, co, e));
    EXPECT_EQ(e.kind, error_kind::input) << e.message;
    EXPECT_NE(e.message.find(" vs "), std::string::npos) << e.message;
}

} // namespace

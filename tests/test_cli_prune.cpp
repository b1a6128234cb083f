// CLI tests of `reap prune` and `reap verify` (the binary named by $REAP_BIN;
// skipped when it is not built): the refusals, the dry run and the messages,
// exit statuses, a split output that verifies, an identity plan without the
// stamp that reproduces the source, and inspect's predicted size against the
// file prune writes. The slicer and the auditor as a library: test_prune.cpp.
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

} // namespace

// ---- the commands ------------------------------------------------------------------

namespace {

using gguf_test::reap_bin;

int run_reap(const std::string & args, std::string & out) { return prune_test::run(quote(reap_bin()) + " " + args, out); }

} // namespace

TEST(PruneCli, PruneVerifyRefusalsDryRun) {
    if (reap_bin().empty() || !exists(reap_bin())) GTEST_SKIP() << "REAP_BIN not built";
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-cli");
    const std::string src = zoo + "/deepseek2.gguf";
    const g::model m = open(src);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 8, 2, p, err)) << err;
    ASSERT_TRUE(reap::write_plan(p, dir + "/p.json", true, err)) << err;
    const std::string out = dir + "/out.gguf";
    std::string log;

    // dry run: prints the file and its size, writes nothing
    ASSERT_EQ(run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " -o " + quote(out) + " --dry-run", log), 0) << log;
    EXPECT_NE(log.find("out.gguf"), std::string::npos) << log;
    EXPECT_NE(log.find("bytes"), std::string::npos) << log;
    EXPECT_FALSE(exists(out));
    EXPECT_FALSE(exists(dir + "/SHA256SUMS"));

    ASSERT_EQ(run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " -o " + quote(out), log), 0) << log;
    ASSERT_TRUE(exists(out));
    ASSERT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " " + quote(out), log), 0) << log;
    EXPECT_NE(log.find("OK"), std::string::npos) << log;
    // --sums naming a folder is a usage error (2), not an output that differs (1)
    EXPECT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " " + quote(out) + " --sums " +
                       quote(dir), log), 2) << log;
    EXPECT_NE(log.find("not a regular file"), std::string::npos) << log;
    std::string sha_log;
    if (prune_test::run("command -v sha256sum", sha_log) == 0) {
        EXPECT_EQ(prune_test::run("cd " + quote(dir) + " && sha256sum -c SHA256SUMS", sha_log), 0) << sha_log;
    }
    // the dry run's predicted size is the real size
    {
        std::string dry;
        run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " -o " + quote(out) + " --dry-run", dry);
        EXPECT_NE(dry.find(std::to_string(read_all(out).size()) + " bytes"), std::string::npos) << dry;
        EXPECT_NE(dry.find("exists"), std::string::npos) << dry;
    }
    // existing output: refused without --force, replaced with it
    EXPECT_NE(run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " -o " + quote(out), log), 0);
    EXPECT_NE(log.find("exists"), std::string::npos) << log;
    EXPECT_EQ(run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " -o " + quote(out) + " --force", log), 0) << log;
    // never over the input, even with --force (also through a hard link)
    const std::string src_copy = dir + "/src.gguf";
    write_all(src_copy, read_all(src));
    const std::string link = dir + "/link.gguf";
    ASSERT_EQ(::link(src_copy.c_str(), link.c_str()), 0);
    const auto before = read_all(src_copy);
    EXPECT_NE(run_reap("prune -m " + quote(src_copy) + " --plan " + quote(dir + "/p.json") + " -o " + quote(link) + " --force", log), 0);
    EXPECT_TRUE(read_all(src_copy) == before);
    // a plan that does not fit: the message names the layer and the problem
    reap::plan bad = p;
    bad.layers[1].keep[0] = bad.layers[1].keep[0] < 4 ? 4 : 0;   // breaks group order
    ASSERT_TRUE(reap::write_plan(bad, dir + "/bad.json", true, err));
    EXPECT_NE(run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/bad.json") + " -o " + quote(dir + "/bad.gguf"), log), 0);
    EXPECT_NE(log.find("layer " + std::to_string(bad.layers[1].layer)), std::string::npos) << log;
    EXPECT_FALSE(exists(dir + "/bad.gguf"));
    // verify with a plan that does not fit the model cannot check (exit 2) ...
    EXPECT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(dir + "/bad.json") + " " + quote(out), log), 2);
    EXPECT_NE(log.find("layer " + std::to_string(bad.layers[1].layer)), std::string::npos) << log;
    // ... with another valid plan it finds the output is not that pruning (exit 1) and names the difference
    reap::plan other;
    ASSERT_TRUE(prune_test::random_plan(m, 8, 3, other, err)) << err;
    ASSERT_TRUE(reap::write_plan(other, dir + "/other.json", true, err));
    EXPECT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(dir + "/other.json") + " " + quote(out), log), 1);
    EXPECT_NE(log.find("FAILED"), std::string::npos) << log;
    // usage errors
    EXPECT_NE(run_reap("prune -m " + quote(src), log), 0);
    EXPECT_NE(log.find("no plan given"), std::string::npos) << log;
    EXPECT_EQ(run_reap("prune --help", log), 0);
    EXPECT_NE(log.find("--split-max-size"), std::string::npos);
    EXPECT_EQ(run_reap("verify --help", log), 0);
}

TEST(PruneCli, SplitOutputAndNoStampIdentity) {
    if (reap_bin().empty() || !exists(reap_bin())) GTEST_SKIP() << "REAP_BIN not built";
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-cli-split");
    const std::string src = zoo + "/gpt-oss.gguf";
    const g::model m = open(src);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 4, 4, p, err)) << err;
    ASSERT_TRUE(reap::write_plan(p, dir + "/p.json", true, err)) << err;
    std::string log;
    ASSERT_EQ(run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " -o " + quote(dir + "/out.gguf") +
                   " --split-max-tensors 10", log), 0) << log;
    ASSERT_TRUE(exists(dir + "/out-00001-of-00005.gguf")) << log;
    ASSERT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(dir + "/p.json") + " " + quote(dir + "/out-00001-of-00005.gguf"), log), 0) << log;
    EXPECT_NE(log.find("5 file(s)"), std::string::npos) << log;
    // identity, no stamp: cmp-identical
    for (auto & l : p.layers) {
        l.keep.clear();
        for (int64_t e = 0; e < p.n_expert; ++e) l.keep.push_back(e);
    }
    p.n_keep = p.n_expert;
    ASSERT_TRUE(reap::write_plan(p, dir + "/id.json", true, err)) << err;
    ASSERT_EQ(run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/id.json") + " -o " + quote(dir + "/id.gguf") + " --no-stamp", log), 0) << log;
    EXPECT_EQ(prune_test::run("cmp " + quote(src) + " " + quote(dir + "/id.gguf"), log), 0) << log;
}

// `reap inspect --keep N` predicts, for every model the tests have (the zoo and
// the project's trained model), the exact size of the file `reap prune` then
// writes for a plan keeping N experts per MoE layer: inspect sizes by the
// layout table the slicer cuts by. Every size inspect lists that a plan may
// keep is checked against a real prune.
TEST(PruneCli, InspectPredictsThePrunedSize) {
    if (reap_bin().empty() || !exists(reap_bin())) GTEST_SKIP() << "REAP_BIN not built";
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-cli-inspect");
    std::vector<std::string> models;
    for (const std::string & name : prune_test::zoo_names()) models.push_back(zoo + "/" + name + ".gguf");
    const std::string trained = prune_test::env_or("REAP_SOURCE_DIR", ".") + "/models/reap-moe-tiny.gguf";
    ASSERT_TRUE(exists(trained)) << trained;
    models.push_back(trained);
    for (const std::string & src : models) {
        SCOPED_TRACE(src);
        const g::model m = open(src);
        const int64_t half = prune_test::half_keep(m);
        ASSERT_GT(half, 0);
        std::string log;
        ASSERT_EQ(run_reap("inspect " + quote(src) + " --json --keep " + std::to_string(half), log), 0) << log;
        const nlohmann::json j = nlohmann::json::parse(log);
        size_t n_checked = 0;
        bool half_checked = false;
        for (const auto & ks : j.at("keep_sizes")) {
            const int64_t k = ks.at("n_keep").get<int64_t>();
            reap::plan p;
            ASSERT_TRUE(prune_test::random_plan(m, k, 3, p, err)) << err;
            if (!reap::validate_plan(p, m, err)) continue;   // a keep count no plan may have (below n_expert_used, groups)
            const std::string tag = std::to_string(k);
            ASSERT_TRUE(reap::write_plan(p, dir + "/p" + tag + ".json", true, err)) << err;
            const std::string out = dir + "/out" + tag + ".gguf";
            ASSERT_EQ(run_reap("prune -m " + quote(src) + " --plan " + quote(dir + "/p" + tag + ".json") + " -o " + quote(out) +
                               " --no-sums --force", log), 0) << log;
            EXPECT_EQ(ks.at("file_bytes").get<uint64_t>(), read_all(out).size()) << "keep " << k;
            ::unlink(out.c_str());
            ++n_checked;
            half_checked = half_checked || k == half;
        }
        EXPECT_TRUE(half_checked) << "keep " << half;
        EXPECT_GE(n_checked, 1u);
    }
}

// A width plan through the commands: prune with --down-type writes the cut,
// verify accepts it and reports the requantised down tensors apart; the
// refusals of --down-type say why.
// Makes `p` a width plan of the zoo's qwen3moe (expert_feed_forward_length
// 32) that keeps every channel of every kept expert: a width plan whose down
// tensors are requantised, nothing else cut.
void keep_every_channel(reap::plan & p) {
    p.width_n_ff = 32;
    p.width_keep = 32;
    for (auto & l : p.layers) {
        l.channels.assign(l.keep.size(), {});
        for (auto & ch : l.channels) for (int64_t c = 0; c < 32; ++c) ch.push_back(c);
    }
}

TEST(PruneCli, WidthPlanDownType) {
    if (reap_bin().empty() || !exists(reap_bin())) GTEST_SKIP() << "REAP_BIN not built";
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-cli-width");
    const std::string src = zoo + "/qwen3moe.gguf";
    const g::model m = open(src);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 8, 4, p, err)) << err;
    const std::string expert_only = dir + "/experts.json";
    ASSERT_TRUE(reap::write_plan(p, expert_only, true, err)) << err;
    keep_every_channel(p);   // in blocks of 32 for q8_0
    const std::string plan = dir + "/width.json";
    ASSERT_TRUE(reap::write_plan(p, plan, true, err)) << err;
    const std::string out = dir + "/out.gguf";
    std::string log;
    const std::string base = "prune -m " + quote(src) + " -o " + quote(out) + " --plan ";
    EXPECT_EQ(run_reap(base + quote(plan) + " --down-type q9_9", log), 2) << log;
    EXPECT_NE(log.find("--down-type: unknown type 'q9_9'"), std::string::npos) << log;
    EXPECT_EQ(run_reap(base + quote(expert_only) + " --down-type q8_0", log), 2) << log;
    EXPECT_NE(log.find("keeps every channel (no width)"), std::string::npos) << log;
    EXPECT_EQ(run_reap(base + quote(plan) + " --down-type q4_K", log), 2) << log;
    EXPECT_NE(log.find("width 32 is not a multiple of 256, the block size of q4_K"), std::string::npos) << log;
    EXPECT_FALSE(exists(out));

    // the dry run sizes the cut from the down type and shape, requantising nothing; its size is the file's
    std::string dry;
    ASSERT_EQ(run_reap(base + quote(plan) + " --down-type q8_0 --dry-run", dry), 0) << dry;
    EXPECT_FALSE(exists(out));
    ASSERT_EQ(run_reap(base + quote(plan) + " --down-type q8_0", log), 0) << log;
    EXPECT_NE(dry.find(out + "  " + std::to_string(read_all(out).size()) + " bytes"), std::string::npos) << dry;
    ASSERT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(plan) + " " + quote(out), log), 0) << log;
    EXPECT_NE(log.find("width cut: 3 down tensors"), std::string::npos) << log;
    const g::model o = open(out);
    for (const auto & t : o.tensors) {
        if (t.name.find("ffn_down_exps") != std::string::npos) EXPECT_EQ(t.type, g::tensor_type::Q8_0) << t.name;
    }

    // a split output: every shard verifies, the requantised tensors wherever they fall
    const std::string split = dir + "/split.gguf";
    const std::string split_cmd = base.substr(0, base.find(" -o ")) + " -o " + quote(split) + " --plan " + quote(plan) +
                                  " --down-type q8_0 --split-max-tensors 7";
    ASSERT_EQ(run_reap(split_cmd + " --dry-run", dry), 0) << dry;
    ASSERT_EQ(run_reap(split_cmd, log), 0) << log;
    const std::string first = dir + "/split-00001-of-" + [&] {
        for (const auto & f : gguf_test::list_dir(dir)) if (f.rfind("split-00001-of-", 0) == 0) return f.substr(15, 5);
        return std::string("?????");
    }() + ".gguf";
    ASSERT_TRUE(exists(first)) << log;
    EXPECT_GT(open(first).shards.size(), 1u);
    for (const auto & sh : open(first).shards) {   // each shard as the dry run predicted it
        EXPECT_NE(dry.find(sh.path + "  " + std::to_string(read_all(sh.path).size()) + " bytes"), std::string::npos) << sh.path << "\n" << dry;
    }
    ASSERT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(plan) + " " + quote(first), log), 0) << log;
    EXPECT_NE(log.find("width cut: 3 down tensors"), std::string::npos) << log;
}

// A width plan sized for a requantised down projection (provenance.down_type,
// as reap plan --width K --down-type T records it) is pruned with that type
// when prune is not told one, refused with another, and verify holds the build
// to the plan's predicted size. Before, prune wrote down in its own type, over
// the budget the plan was sized for, and verify said OK (issue 37, item 7).
TEST(PruneCli, APlanSizedForADownTypeIsPrunedWithIt) {
    if (reap_bin().empty() || !exists(reap_bin())) GTEST_SKIP() << "REAP_BIN not built";
    std::string err;
    const std::string zoo = zoo_or_skip(err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-cli-sized-down");
    const std::string src = zoo + "/qwen3moe.gguf";
    const g::model m = open(src);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 8, 4, p, err)) << err;
    keep_every_channel(p);
    // the size of the q8_0 build, measured: a plan without the type, pruned with --down-type q8_0
    const std::string p0 = dir + "/w0.json", ref = dir + "/ref.gguf";
    ASSERT_TRUE(reap::write_plan(p, p0, true, err)) << err;
    std::string log;
    ASSERT_EQ(run_reap("prune -m " + quote(src) + " --plan " + quote(p0) + " -o " + quote(ref) + " --down-type q8_0", log), 0) << log;
    const uint64_t q8_bytes = read_all(ref).size();
    ASSERT_NE(q8_bytes, 0u);

    ASSERT_TRUE(reap::stamp_plan_model(p, m, err)) << err;   // the plan is this model's, as reap plan writes it
    p.provenance["down_type"] = "q8_0";
    p.provenance["predicted_bytes"] = q8_bytes;
    p.provenance["predicted_shards"] = 1;
    p.provenance["request"] = {{"budget", "1G"}, {"stamp", true}};
    const std::string p1 = dir + "/w1.json", out = dir + "/out.gguf";
    ASSERT_TRUE(reap::write_plan(p, p1, true, err)) << err;
    const std::string base = "prune -m " + quote(src) + " --plan " + quote(p1) + " -o " + quote(out);
    EXPECT_EQ(run_reap(base + " --down-type f16", log), 2) << log;
    EXPECT_NE(log.find("was sized for down type q8_0"), std::string::npos) << log;
    EXPECT_FALSE(exists(out));
    ASSERT_EQ(run_reap(base, log), 0) << log;
    EXPECT_EQ(read_all(out).size(), q8_bytes) << "the build is the size the plan predicted";
    for (const auto & t : open(out).tensors) {
        if (t.name.find("ffn_down_exps") != std::string::npos) EXPECT_EQ(t.type, g::tensor_type::Q8_0) << t.name;
    }
    EXPECT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(p1) + " " + quote(out), log), 0) << log;

    // a plan whose prediction the build does not meet: verify says it differs (exit 1), naming both sizes
    p.provenance["predicted_bytes"] = q8_bytes + 32;
    const std::string p2 = dir + "/w2.json", out2 = dir + "/out2.gguf";
    ASSERT_TRUE(reap::write_plan(p, p2, true, err)) << err;
    ASSERT_EQ(run_reap("prune -m " + quote(src) + " --plan " + quote(p2) + " -o " + quote(out2), log), 0) << log;
    EXPECT_EQ(run_reap("verify -m " + quote(src) + " --plan " + quote(p2) + " " + quote(out2), log), 1) << log;
    EXPECT_NE(log.find("predicted " + std::to_string(q8_bytes + 32)), std::string::npos) << log;
}

// End-to-end tests of `reap plan`, `reap merge` and `reap compare` (the binary
// named by $REAP_BIN; skipped when it is not built) on zoo models with
// synthetic saliency archives written by reap::saliency: the written plan
// equals the reference top-N; --budget predicts the exact size of the file
// `reap prune` then writes (unsplit and split) and the next allowed N would
// not fit; groups, super experts and never-routed experts end to end; every
// invalid request ends with a clear message and exit status 2.
#include "plan/planners.h"
#include "prune_test_util.h"
#include "saliency_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace g = reap::gguf;
namespace s = reap::saliency;
namespace pl = reap::planner;
using prune_test::quote;

namespace {

bool have_reap() { return prune_test::exists(gguf_test::reap_bin()); }

int run_reap(const std::string & args, std::string & out) {
    return prune_test::run(quote(gguf_test::reap_bin()) + " " + args, out);
}

nlohmann::json read_json(const std::string & path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f);
}

struct fixture {
    std::string zoo, dir;
    std::string model(const std::string & name) const { return zoo + "/" + name + ".gguf"; }
};

// The zoo (once) and a fresh scratch dir; skips the test when either is unavailable.
bool setup(const std::string & name, fixture & fx, std::string & why) {
    if (!have_reap()) {
        why = "reap binary not built ($REAP_BIN)";
        return false;
    }
    fx.zoo = prune_test::zoo_dir("plan_cli_zoo", why);
    if (fx.zoo.empty()) return false;
    fx.dir = prune_test::scratch(name);
    return true;
}

// A synthetic archive measured "on" `model` (its real fingerprint), written to `path`.
s::archive archive_for(const std::string & model, const std::string & path, const std::vector<std::string> & domains,
                       uint32_t seed = 7) {
    g::model m;
    std::string err;
    EXPECT_TRUE(g::open_model(model, m, err)) << err;
    s::fingerprint fp;
    EXPECT_TRUE(s::model_fingerprint(m, fp, err)) << err;
    s::archive a = s::make_archive(fp, s::metric_set::reap);
    for (const auto & d : domains) {
        saliency_test::sim_options o;
        o.seed = seed++;
        saliency_test::simulate_domain(a, d, o);
    }
    EXPECT_TRUE(s::write_archive(a, path, err, true)) << err;
    return a;
}

std::vector<int64_t> topn(const s::archive & a, int layer, int64_t n, int64_t groups = 1) {
    const int64_t E = a.model.n_expert, per = E / groups;
    std::vector<double> cnt(E, 0), rs(E, 0);
    for (const auto & d : a.domains) {
        for (int64_t e = 0; e < E; ++e) {
            cnt[e] += d.count[a.index(layer, (int) e)];
            rs[e] += d.reap_sum[a.index(layer, (int) e)];
        }
    }
    std::vector<int64_t> keep;
    for (int64_t gi = 0; gi < groups; ++gi) {
        std::vector<int64_t> ids;
        for (int64_t e = gi * per; e < (gi + 1) * per; ++e) ids.push_back(e);
        auto sc = [&](int64_t e) { return cnt[e] > 0 ? rs[e] / cnt[e] : 0.0; };
        std::sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) { return sc(x) != sc(y) ? sc(x) > sc(y) : x < y; });
        keep.insert(keep.end(), ids.begin(), ids.begin() + n / groups);
    }
    std::sort(keep.begin(), keep.end());
    return keep;
}

// The file's length from stat (0 when missing): reading it whole only to count it cost
// PlanCli.BudgetPredictsThePrunedFileExactly a read of every pruned file under ASan.
uint64_t file_size(const std::string & p) { return gguf_test::apparent_size(p); }

}  // namespace

TEST(PlanCli, KeepWritesTheReferenceTopN) {
    fixture fx;
    std::string why, out;
    if (!setup("plan_cli_keep", fx, why)) GTEST_SKIP() << why;
    const std::string sal = fx.dir + "/sal.gguf", plan = fx.dir + "/plan.json";
    const s::archive a = archive_for(fx.model("qwen3moe"), sal, {"code", "en"});
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(fx.model("qwen3moe")) + " --keep 6 --no-protect-super -o " + quote(plan), out), 0) << out;
    const nlohmann::json j = read_json(plan);
    EXPECT_EQ(j["format"], "reap-plan");
    EXPECT_EQ(j["n_keep"], 6);
    ASSERT_EQ(j["layers"].size(), 3u);
    for (const auto & l : j["layers"]) EXPECT_EQ(l["keep"].get<std::vector<int64_t>>(), topn(a, l["layer"], 6)) << l.dump();
    EXPECT_EQ(j["provenance"]["method"], "reap");
    EXPECT_EQ(j["provenance"]["request"]["keep"], 6);
    EXPECT_EQ(j["provenance"]["saliency"]["sha256"].get<std::string>().size(), 64u);
    EXPECT_NE(out.find("saliency retained"), std::string::npos) << out;
    // --ratio 0.625 removes 10 of 16 -> the same plan's keep lists
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(fx.model("qwen3moe")) + " --ratio 0.625 --no-protect-super -o " + quote(fx.dir + "/r.json"), out), 0) << out;
    EXPECT_EQ(read_json(fx.dir + "/r.json")["layers"], j["layers"]);
    // refuses to overwrite without --force
    EXPECT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(fx.model("qwen3moe")) + " --keep 6 -o " + quote(plan), out), 2);
    EXPECT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(fx.model("qwen3moe")) + " --keep 6 --force -o " + quote(plan), out), 0) << out;
    // the plan prunes and verifies
    ASSERT_EQ(run_reap("prune -m " + quote(fx.model("qwen3moe")) + " --plan " + quote(plan) + " -o " + quote(fx.dir + "/out.gguf"), out), 0) << out;
    ASSERT_EQ(run_reap("verify -m " + quote(fx.model("qwen3moe")) + " --plan " + quote(plan) + " " + quote(fx.dir + "/out.gguf"), out), 0) << out;
}

TEST(PlanCli, BudgetPredictsThePrunedFileExactly) {
    fixture fx;
    std::string why, out;
    if (!setup("plan_cli_budget", fx, why)) GTEST_SKIP() << why;
    for (const std::string name : {"qwen3moe", "deepseek2"}) {
        // 0.15MiB: binary unit and a fraction, read alike by plan and prune
        for (const std::string split : {std::string(), std::string(" --split-max-size 100K"), std::string(" --split-max-size 0.15MiB")}) {
            const std::string model = fx.model(name), sal = fx.dir + "/" + name + ".sal.gguf";
            archive_for(model, sal, {"code"});
            // sizes at every allowed N from --dry-run --keep of each
            const std::string p1 = fx.dir + "/" + name + ".k.json";
            std::vector<std::pair<int64_t, uint64_t>> sizes;
            for (int64_t n = 1; n <= 16; ++n) {
                if (run_reap("plan " + quote(sal) + " -m " + quote(model) + " --keep " + std::to_string(n) + split + " --force -o " + quote(p1), out) == 0) {
                    sizes.push_back({n, read_json(p1)["provenance"]["predicted_bytes"].get<uint64_t>()});
                }
            }
            ASSERT_GE(sizes.size(), 3u) << name;
            for (size_t i = 1; i < sizes.size(); ++i) ASSERT_LT(sizes[i - 1].second, sizes[i].second);
            const size_t mid = sizes.size() / 2;
            // budgets: exactly the size at mid, and one byte less
            for (int delta : {0, -1}) {
                const uint64_t budget = sizes[mid].second + delta;
                const int64_t want = delta == 0 ? sizes[mid].first : sizes[mid - 1].first;
                const uint64_t want_bytes = delta == 0 ? sizes[mid].second : sizes[mid - 1].second;
                const std::string plan = fx.dir + "/" + name + ".b.json", pruned = fx.dir + "/" + name + ".pruned.gguf";
                ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(model) + " --budget " + std::to_string(budget) + split + " --force -o " + quote(plan), out), 0) << out;
                const nlohmann::json j = read_json(plan);
                EXPECT_EQ(j["n_keep"].get<int64_t>(), want) << name << split << " budget " << budget << "\n" << out;
                EXPECT_EQ(j["provenance"]["predicted_bytes"].get<uint64_t>(), want_bytes);
                ASSERT_EQ(run_reap("prune -m " + quote(model) + " --plan " + quote(plan) + " -o " + quote(pruned) + split + " --force", out), 0) << out;
                uint64_t total = 0;
                if (split.empty()) {
                    total = file_size(pruned);
                } else {
                    std::string prefix = pruned.substr(0, pruned.size() - 5);
                    for (uint32_t k = 0; k < 100; ++k) {
                        const uint32_t n_sh = j["provenance"]["predicted_shards"].get<uint32_t>();
                        if (k >= n_sh) break;
                        total += file_size(g::split_path(prefix, k, n_sh));
                    }
                    EXPECT_GT(j["provenance"]["predicted_shards"].get<uint32_t>(), 1u);
                }
                EXPECT_EQ(total, want_bytes) << name << split;
                EXPECT_LE(total, budget);
                // the next allowed N would exceed the budget
                const size_t idx = delta == 0 ? mid : mid - 1;
                ASSERT_LT(idx + 1, sizes.size());
                EXPECT_GT(sizes[idx + 1].second, budget);
            }
            // --dry-run prints the table and writes nothing
            const std::string dry = fx.dir + "/dry.json";
            ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(model) + " --budget " + std::to_string(sizes[mid].second) + split + " --dry-run -o " + quote(dry), out), 0) << out;
            EXPECT_NE(out.find("<- chosen"), std::string::npos) << out;
            EXPECT_NE(out.find("saliency retained"), std::string::npos) << out;
            EXPECT_FALSE(prune_test::exists(dry));
            // below the smallest size
            EXPECT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(model) + " --budget " + std::to_string(sizes[0].second - 1) + split + " -o " + quote(dry), out), 2);
            EXPECT_NE(out.find("below the smallest prunable size"), std::string::npos) << out;
        }
    }
}

TEST(PlanCli, GroupsSuperExpertsNeverRouted) {
    fixture fx;
    std::string why, out;
    if (!setup("plan_cli_groups", fx, why)) GTEST_SKIP() << why;
    const std::string model = fx.model("deepseek2"), sal = fx.dir + "/sal.gguf", plan = fx.dir + "/plan.json";
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(model, m, err)) << err;
    s::fingerprint fp;
    ASSERT_TRUE(s::model_fingerprint(m, fp, err)) << err;
    s::archive a = s::make_archive(fp, s::metric_set::reap);
    saliency_test::sim_options so;
    so.never_routed = {3, 9};
    saliency_test::simulate_domain(a, "code", so);
    // an outlier in expert 9 of layer 2 is impossible (never routed); put it in expert 5 of layer 1
    a.domains[0].max_norm[a.index(1, 5)] = 500.0;
    ASSERT_TRUE(s::write_archive(a, sal, err, true)) << err;

    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(model) + " --keep 8 -o " + quote(plan), out), 0) << out;
    EXPECT_NE(out.find("4 expert groups"), std::string::npos) << out;
    EXPECT_NE(out.find("protected): 1, 1 kept (max_norm, x the layer's median max_norm, share of the layer's score): blk.1 e5 (500, "), std::string::npos) << out;
    // the archive's only domain is the plan's: never routed = dead
    EXPECT_NE(out.find("dead experts (no token routed in any domain): 4 in 2 of 2 layers (2 per layer), 4 pruned: "
                       "blk.1 e3, blk.1 e9, blk.2 e3, blk.2 e9"), std::string::npos) << out;
    const nlohmann::json j = read_json(plan);
    for (const auto & l : j["layers"]) {
        const auto keep = l["keep"].get<std::vector<int64_t>>();
        std::vector<int> per(4, 0);
        for (int64_t e : keep) per[e / 4]++;
        EXPECT_EQ(per, (std::vector<int>{2, 2, 2, 2}));
        EXPECT_FALSE(std::count(keep.begin(), keep.end(), 3));
        EXPECT_FALSE(std::count(keep.begin(), keep.end(), 9));
        if (l["layer"] == 1) EXPECT_TRUE(std::count(keep.begin(), keep.end(), 5));
    }
    EXPECT_EQ(j["provenance"]["super_experts"].size(), 1u);
    EXPECT_EQ(j["provenance"]["never_routed"].size(), 4u);
    EXPECT_EQ(j["provenance"]["dead_experts"]["instances"], nlohmann::json({"blk.1 e3", "blk.1 e9", "blk.2 e3", "blk.2 e9"}));
    EXPECT_EQ(j["provenance"]["dead_experts"]["kept"], 0);
    EXPECT_EQ(j["provenance"]["super_experts"][0]["kept"], true);
    // without protection: the reference top-2 per group
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(model) + " --keep 8 --no-protect-super --force -o " + quote(plan), out), 0) << out;
    // (the plan is held in a variable: a range-for over a member of a temporary
    // would read freed memory, which the sanitizer build caught)
    const nlohmann::json unprotected = read_json(plan);
    for (const auto & l : unprotected["layers"]) EXPECT_EQ(l["keep"].get<std::vector<int64_t>>(), topn(a, l["layer"], 8, 4));
    // group errors
    EXPECT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(model) + " --keep 10 -o " + quote(plan + "x"), out), 2);
    EXPECT_NE(out.find("multiple of the 4 expert groups"), std::string::npos) << out;
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(model) + " --ratio 0.3 --force -o " + quote(plan), out), 0) << out;
    EXPECT_NE(out.find("rounded down to 8"), std::string::npos) << out;
}

TEST(PlanCli, InvalidRequestsFailClearly) {
    fixture fx;
    std::string why, out;
    if (!setup("plan_cli_errors", fx, why)) GTEST_SKIP() << why;
    const std::string model = fx.model("qwen3moe"), sal = fx.dir + "/sal.gguf", p = " -o " + quote(fx.dir + "/p.json");
    archive_for(model, sal, {"code", "en"});
    const std::string base = "plan " + quote(sal) + " -m " + quote(model);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {base + " --keep 3" + p, "below n_expert_used 4"},
        {base + " --keep 17" + p, "out of range [4, 16]"},
        {base + " --keep 0" + p, "not a positive integer"},
        {base + " --ratio 1" + p, "not a number in [0, 1)"},
        {base + " --ratio 0.9" + p, "below n_expert_used"},
        {base + " --budget 1K" + p, "below the smallest prunable size"},
        {base + " --budget 12XB" + p, "unknown unit"},
        {base + p, "say how many experts to keep"},
        {base + " --keep 8 --ratio 0.5" + p, "only one of --keep, --ratio and --budget"},
        {base + " --keep 8 --domains code,fr" + p, "unknown domain 'fr'"},
        {base + " --keep 8 --method energy" + p, "--method energy ranks by the imatrix's energy_sum, which only archives from reap imatrix hold"},
        {base + " --keep 8 --method best" + p, "unknown method 'best'"},
        // an archive from before squared output norms (version 1 here) cannot rank by MSAN, nor any by AIMER
        {base + " --keep 8 --method msan" + p, "which archives record from version 4 on"},
        {base + " --keep 8 --method aimer" + p, "make its archive with reap score"},
        {base + " --keep 8 --consensus max" + p, "sum or minrank"},
        {base + " --keep 8", "no output given"},
        {"plan " + quote(sal) + " -m " + quote(fx.model("deepseek2")) + " --keep 8" + p, "saliency archive is for another model"},
        {"plan " + quote(fx.dir + "/absent.gguf") + " -m " + quote(model) + " --keep 8" + p, "cannot read saliency archive"},
        {"plan " + quote(model) + " -m " + quote(model) + " --keep 8" + p, "not a saliency archive"},
    };
    for (const auto & [args, needle] : cases) {
        EXPECT_EQ(run_reap(args, out), 2) << args << "\n" << out;
        EXPECT_NE(out.find(needle), std::string::npos) << args << "\n" << out;
        EXPECT_EQ(out.find("Segmentation"), std::string::npos);
    }
    EXPECT_FALSE(prune_test::exists(fx.dir + "/p.json"));
    // same arch and shape, other router weights: the fingerprint catches it
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(model, m, err)) << err;
    s::fingerprint fp;
    ASSERT_TRUE(s::model_fingerprint(m, fp, err)) << err;
    fp.router_sha256 = std::string(64, 'f');
    s::archive other = s::make_archive(fp, s::metric_set::reap);
    saliency_test::simulate_domain(other, "code", {});
    ASSERT_TRUE(s::write_archive(other, fx.dir + "/other.gguf", err, true)) << err;
    EXPECT_EQ(run_reap("plan " + quote(fx.dir + "/other.gguf") + " -m " + quote(model) + " --keep 8" + p, out), 2);
    EXPECT_NE(out.find("router weights differ"), std::string::npos) << out;
    ASSERT_EQ(run_reap("plan --help", out), 0);
    for (const char * m2 : {"reap", "man", "msan", "aimer", "frequency", "gate", "ean", "energy", "random", "minrank", "GiB", "decimal"}) {
        EXPECT_NE(out.find(m2), std::string::npos) << m2;
    }
}

TEST(PlanCli, MergeAndCompare) {
    fixture fx;
    std::string why, out;
    if (!setup("plan_cli_merge", fx, why)) GTEST_SKIP() << why;
    const std::string model = fx.model("qwen3moe");
    const std::string a1 = fx.dir + "/a.gguf", a2 = fx.dir + "/b.gguf", merged = fx.dir + "/m.gguf";
    const s::archive x = archive_for(model, a1, {"code", "en"}, 7);
    const s::archive y = archive_for(model, a2, {"en", "ja"}, 20);
    ASSERT_EQ(run_reap("merge " + quote(a1) + " " + quote(a2) + " -o " + quote(merged), out), 0) << out;
    s::archive mm;
    std::string err;
    ASSERT_TRUE(s::read_archive(merged, mm, err)) << err;
    ASSERT_EQ(mm.domains.size(), 3u);
    const s::domain_stats & en = *mm.find_domain("en");
    for (size_t i = 0; i < mm.n_cells(); ++i) {
        EXPECT_EQ(en.count[i], x.find_domain("en")->count[i] + y.find_domain("en")->count[i]);
        EXPECT_EQ(en.reap_sum[i], x.find_domain("en")->reap_sum[i] + y.find_domain("en")->reap_sum[i]);
        EXPECT_EQ(en.max_norm[i], std::max(x.find_domain("en")->max_norm[i], y.find_domain("en")->max_norm[i]));
    }
    EXPECT_EQ(mm.find_domain("ja")->gate_sum, y.find_domain("ja")->gate_sum);
    EXPECT_TRUE(s::check_count_invariant(mm, err)) << err;
    EXPECT_TRUE(mm.provenance.has("reap.saliency.merge.inputs"));
    // refusals: existing output, an input as output, another model, a damaged archive, one input
    EXPECT_EQ(run_reap("merge " + quote(a1) + " " + quote(a2) + " -o " + quote(merged), out), 2);
    EXPECT_EQ(run_reap("merge " + quote(a1) + " " + quote(a2) + " -o " + quote(a1), out), 2);
    EXPECT_NE(out.find("over the input"), std::string::npos) << out;
    archive_for(fx.model("deepseek2"), fx.dir + "/ds.gguf", {"code"});
    EXPECT_EQ(run_reap("merge " + quote(a1) + " " + quote(fx.dir + "/ds.gguf") + " -o " + quote(fx.dir + "/x.gguf"), out), 2);
    EXPECT_NE(out.find("different models"), std::string::npos) << out;
    std::vector<uint8_t> bytes = prune_test::read_all(a2);
    bytes.resize(bytes.size() - 64);
    prune_test::write_all(fx.dir + "/trunc.gguf", bytes);
    EXPECT_EQ(run_reap("merge " + quote(a1) + " " + quote(fx.dir + "/trunc.gguf") + " -o " + quote(fx.dir + "/x.gguf"), out), 2);
    EXPECT_NE(out.find("trunc.gguf"), std::string::npos) << out;
    EXPECT_EQ(run_reap("merge " + quote(a1) + " -o " + quote(fx.dir + "/x.gguf"), out), 2);
    EXPECT_FALSE(prune_test::exists(fx.dir + "/x.gguf"));

    // compare: a plan with itself, and reap vs frequency with the archive
    const std::string pa = fx.dir + "/pa.json", pb = fx.dir + "/pb.json";
    ASSERT_EQ(run_reap("plan " + quote(merged) + " -m " + quote(model) + " --keep 8 --no-protect-super -o " + quote(pa), out), 0) << out;
    ASSERT_EQ(run_reap("plan " + quote(merged) + " -m " + quote(model) + " --keep 6 --method frequency --domains ja -o " + quote(pb), out), 0) << out;
    ASSERT_EQ(run_reap("compare " + quote(pa) + " " + quote(pa) + " --json", out), 0) << out;
    nlohmann::json j = nlohmann::json::parse(out);
    EXPECT_EQ(j["mean_jaccard"], 1.0);
    ASSERT_EQ(run_reap("compare " + quote(pa) + " " + quote(pb) + " --saliency " + quote(merged) + " --json", out), 0) << out;
    j = nlohmann::json::parse(out);
    const nlohmann::json ja = read_json(pa), jb = read_json(pb);
    for (size_t i = 0; i < j["layers"].size(); ++i) {
        const auto ka = ja["layers"][i]["keep"].get<std::vector<int64_t>>(), kb = jb["layers"][i]["keep"].get<std::vector<int64_t>>();
        std::vector<int64_t> inter;
        std::set_intersection(ka.begin(), ka.end(), kb.begin(), kb.end(), std::back_inserter(inter));
        EXPECT_EQ(j["layers"][i]["shared"], inter.size());
        EXPECT_DOUBLE_EQ(j["layers"][i]["jaccard"].get<double>(), double(inter.size()) / double(14 - inter.size()));
    }
    // plan A is the reap top-8 over all domains: it is its own oracle
    EXPECT_NEAR(j["saliency"]["ratio_a"].get<double>(), 1.0, 1e-12);
    EXPECT_LE(j["saliency"]["ratio_b"].get<double>(), 1.0 + 1e-12);
    EXPECT_NEAR(j["saliency"]["share_a"].get<double>(), ja["provenance"]["saliency_retained"]["mean"].get<double>(), 1e-12);
    ASSERT_EQ(run_reap("compare " + quote(pa) + " " + quote(pb) + " --saliency " + quote(merged), out), 0) << out;
    EXPECT_NE(out.find("oracle"), std::string::npos) << out;
    EXPECT_EQ(run_reap("compare " + quote(pa) + " " + quote(pb) + " --saliency " + quote(fx.dir + "/ds.gguf"), out), 2);
    EXPECT_NE(out.find("another model"), std::string::npos) << out;
    EXPECT_EQ(run_reap("compare " + quote(pa), out), 2);
    EXPECT_NE(out.find("exactly two plans"), std::string::npos) << out;
}

// reap plan --width: the model's width facts and K's block size are checked
// first, each refusal saying why; an archive without channel scores is
// refused by name, the message saying how to make one.
TEST(PlanCli, WidthRefusals) {
    fixture fx;
    std::string why, out;
    if (!setup("plan_cli_width", fx, why)) GTEST_SKIP() << why;
    const std::string plan = fx.dir + "/plan.json";
    const std::string q = fx.model("qwen3moe"), sal = fx.dir + "/sal.gguf";
    archive_for(q, sal, {"code"});
    const std::string base = "plan " + quote(sal) + " -m " + quote(q) + " -o " + quote(plan);
    EXPECT_EQ(run_reap(base + " --width 16", out), 2) << out;
    EXPECT_NE(out.find("--width 16: " + sal + " has no channel scores"), std::string::npos) << out;
    EXPECT_NE(out.find("reap calibrate --width-saliency"), std::string::npos) << out;
    EXPECT_EQ(run_reap(base + " --keep 8 --width 16", out), 2) << out;
    EXPECT_NE(out.find("has no channel scores"), std::string::npos) << out;
    EXPECT_EQ(run_reap(base + " --keep 8 --width 33", out), 2) << out;
    EXPECT_NE(out.find("width 33 out of range [1, 32]"), std::string::npos) << out;
    EXPECT_EQ(run_reap(base + " --width 16 --down-type q8_0", out), 2) << out;
    EXPECT_NE(out.find("width 16 is not a multiple of 32, the block size of q8_0"), std::string::npos) << out;
    EXPECT_FALSE(prune_test::exists(plan));

    // deepseek2 sizes its shared experts n_ff x expert_shared_count (make_zoo.py: 32 x 1), kept whole as
    // 32/K of width K: K must divide 32, checked before the archive
    const std::string d = fx.model("deepseek2"), dsal = fx.dir + "/dsal.gguf";
    archive_for(d, dsal, {"code"});
    EXPECT_EQ(run_reap("plan " + quote(dsal) + " -m " + quote(d) + " --width 24 -o " + quote(plan), out), 2) << out;
    EXPECT_NE(out.find("--width 24: width 24 does not divide 32, the shared experts' width"), std::string::npos) << out;
    EXPECT_NE(out.find("widths that fit: 1, 2, 4, 8, 16, 32"), std::string::npos) << out;
    EXPECT_EQ(run_reap("plan " + quote(dsal) + " -m " + quote(d) + " --width 16 -o " + quote(plan), out), 2) << out;
    EXPECT_NE(out.find("--width 16: " + dsal + " has no channel scores"), std::string::npos) << out;   // 16 passed
    // llama4's one shared expert is n_ff wide with no key of its own: cut with the routed experts, ranked
    // by the archive's shared-expert statistics; an archive with channel scores but none of those is
    // refused, saying how to make one
    const std::string l4 = fx.model("llama4"), lsal = fx.dir + "/lsal.gguf";
    s::archive la = archive_for(l4, lsal, {"code"});
    saliency_test::add_channels(la, 32);
    std::string err;
    ASSERT_TRUE(s::write_archive(la, lsal, err, true)) << err;
    EXPECT_EQ(run_reap("plan " + quote(lsal) + " -m " + quote(l4) + " --width 16 -o " + quote(plan), out), 2) << out;
    EXPECT_NE(out.find("--width 16: " + lsal + " has no channel scores of the shared expert (the input of ffn_down_shexp)"),
              std::string::npos) << out;
    EXPECT_NE(out.find("reap calibrate --width-saliency"), std::string::npos) << out;
    EXPECT_FALSE(prune_test::exists(plan));
}

namespace {

// The K channels of expert (layer, expert) with the highest score summed
// over `domains` of statistic `metric`, ascending; ties to the lower channel.
// Computed here from the archive's raw arrays, independently of the planner.
std::vector<int64_t> top_channels_ref(const s::archive & a, const std::vector<std::string> & domains,
                                      const std::string & metric, int layer, int64_t expert, int64_t K) {
    const int64_t n_ff = a.n_ff;
    std::vector<double> sum(size_t(n_ff), 0.0);
    for (const auto & d : a.domains) {
        if (std::find(domains.begin(), domains.end(), d.name) == domains.end()) continue;
        const std::vector<double> & v = metric == "ch_reap" ? d.ch_reap : d.ch_energy;
        for (int64_t c = 0; c < n_ff; ++c) sum[size_t(c)] += v[(size_t(layer) * a.model.n_expert + size_t(expert)) * size_t(n_ff) + size_t(c)];
    }
    std::vector<std::pair<double, int64_t>> byscore;
    for (int64_t c = 0; c < n_ff; ++c) byscore.push_back({-sum[size_t(c)], c});
    std::sort(byscore.begin(), byscore.end());
    std::vector<int64_t> keep;
    for (int64_t j = 0; j < K; ++j) keep.push_back(byscore[size_t(j)].second);
    std::sort(keep.begin(), keep.end());
    return keep;
}

// The channel ids of a version 3 bitmap (hex, byte b = channels 8b..8b+7,
// bit j = channel 8b+j), read here from the format's rule in plan.h.
std::vector<int64_t> bitmap_channels(const std::string & hex) {
    std::vector<int64_t> out;
    for (size_t b = 0; 2 * b + 1 < hex.size(); ++b) {
        const int byte = std::stoi(hex.substr(2 * b, 2), nullptr, 16);
        for (int j = 0; j < 8; ++j)
            if (byte & (1 << j)) out.push_back(int64_t(8 * b) + j);
    }
    return out;
}

// Every layer of plan `j`: each kept expert's channels are the reference top-K.
void expect_reference_channels(const nlohmann::json & j, const s::archive & a, const std::vector<std::string> & domains,
                               const std::string & metric, int64_t K) {
    ASSERT_EQ(j["width"]["keep"], K);
    ASSERT_EQ(j["width"]["n_ff"], int64_t(a.n_ff));
    for (const auto & l : j["layers"]) {
        const auto keep = l["keep"].get<std::vector<int64_t>>();
        std::vector<std::vector<int64_t>> channels;
        for (const auto & hex : l["channel_bitmaps"]) channels.push_back(bitmap_channels(hex.get<std::string>()));
        ASSERT_EQ(channels.size(), keep.size()) << l.dump();
        for (size_t i = 0; i < keep.size(); ++i) {
            EXPECT_EQ(channels[i], top_channels_ref(a, domains, metric, l["layer"], keep[i], K))
                << "layer " << l["layer"] << " expert " << keep[i] << " (" << metric << ")";
        }
    }
}

}  // namespace

// llama4: plan --width also keeps the K shared-expert channels with the
// largest sh_reap summed over the plan's domains (the reference computed here
// from the archive's raw arrays) as "shared_channel_bitmap" in every layer;
// the plan prunes to the size it predicted and verify audits the cut.
TEST(PlanCli, WidthCutsLlama4SharedExpert) {
    fixture fx;
    std::string why, out, err;
    if (!setup("plan_cli_width_llama4", fx, why)) GTEST_SKIP() << why;
    const std::string l4 = fx.model("llama4"), lsal = fx.dir + "/lsal.gguf", plan = fx.dir + "/plan.json";
    s::archive a = archive_for(l4, lsal, {"code", "en"});
    saliency_test::add_channels(a, 32);
    saliency_test::add_shared_channels(a);
    ASSERT_TRUE(s::write_archive(a, lsal, err, true)) << err;
    ASSERT_EQ(run_reap("plan " + quote(lsal) + " -m " + quote(l4) + " --keep 4 --width 16 --domains en -o " + quote(plan), out), 0)
        << out;
    EXPECT_NE(out.find("width: the shared expert keeps 16 of its 32 channels too"), std::string::npos) << out;
    const nlohmann::json j = read_json(plan);
    ASSERT_EQ(j["layers"].size(), a.model.moe_layers.size());
    for (const auto & l : j["layers"]) {
        const int layer = l["layer"];
        std::vector<std::pair<double, int64_t>> by;
        for (int64_t c = 0; c < 32; ++c) by.push_back({-a.find_domain("en")->sh_reap[a.shared_channel_index(layer, c)], c});
        std::sort(by.begin(), by.end());
        std::vector<int64_t> want;
        for (int64_t k = 0; k < 16; ++k) want.push_back(by[size_t(k)].second);
        std::sort(want.begin(), want.end());
        ASSERT_TRUE(l.contains("shared_channel_bitmap")) << l.dump();
        EXPECT_EQ(bitmap_channels(l["shared_channel_bitmap"].get<std::string>()), want) << "layer " << layer;
    }
    const std::string cut = fx.dir + "/cut.gguf";
    ASSERT_EQ(run_reap("prune -m " + quote(l4) + " --plan " + quote(plan) + " -o " + quote(cut), out), 0) << out;
    EXPECT_EQ(j["provenance"]["predicted_bytes"].get<uint64_t>(), file_size(cut));
    ASSERT_EQ(run_reap("verify -m " + quote(l4) + " --plan " + quote(plan) + " " + quote(cut), out), 0) << out;
}

// reap plan --width K ranks each kept expert's channels by the archive's
// channel scores: ch_reap summed over the plan's domains by default, ch_energy
// with --channel-score energy (and by default for imatrix archives); the
// result equals the top-K the test computes from the archive's raw arrays,
// and the plan prunes and verifies. An archive measured at another width,
// or without ch_reap when it is asked for, is refused by name.
TEST(PlanCli, WidthRanksChannelsByTheArchive) {
    fixture fx;
    std::string why, out;
    if (!setup("plan_cli_width_scores", fx, why)) GTEST_SKIP() << why;
    const std::string q = fx.model("qwen3moe"), sal = fx.dir + "/sal.gguf", plan = fx.dir + "/plan.json";
    s::archive a = archive_for(q, sal, {"code", "en"});
    saliency_test::add_channels(a, 32);
    std::string err;
    ASSERT_TRUE(s::write_archive(a, sal, err, true)) << err;
    const std::string base = "plan " + quote(sal) + " -m " + quote(q) + " --no-protect-super ";

    ASSERT_EQ(run_reap(base + "--keep 8 --width 16 -o " + quote(plan), out), 0) << out;
    EXPECT_NE(out.find("width: every kept expert keeps 16 of its 32 channels (ranked by channel score reap)"), std::string::npos) << out;
    nlohmann::json j = read_json(plan);
    EXPECT_EQ(j["version"], 3);
    for (const auto & l : j["layers"]) EXPECT_EQ(l["keep"].get<std::vector<int64_t>>(), topn(a, l["layer"], 8)) << l.dump();
    expect_reference_channels(j, a, {"code", "en"}, "ch_reap", 16);
    EXPECT_EQ(j["provenance"]["channel_score"], "reap");

    // energy over one domain; --width alone keeps every expert
    ASSERT_EQ(run_reap(base + "--width 8 --channel-score energy --domains en -o " + quote(fx.dir + "/e.json"), out), 0) << out;
    j = read_json(fx.dir + "/e.json");
    EXPECT_EQ(j["n_keep"], 16);
    expect_reference_channels(j, a, {"en"}, "ch_energy", 8);
    EXPECT_EQ(j["provenance"]["channel_score"], "energy");

    // the plan prunes to the size it predicted, and verify audits the cut; so with --down-type
    ASSERT_EQ(run_reap("prune -m " + quote(q) + " --plan " + quote(plan) + " -o " + quote(fx.dir + "/out.gguf"), out), 0) << out;
    ASSERT_EQ(run_reap("verify -m " + quote(q) + " --plan " + quote(plan) + " " + quote(fx.dir + "/out.gguf"), out), 0) << out;
    EXPECT_EQ(read_json(plan)["provenance"]["predicted_bytes"].get<uint64_t>(), file_size(fx.dir + "/out.gguf"));
    const std::string fplan = fx.dir + "/f32.json", fout = fx.dir + "/f32.gguf";
    ASSERT_EQ(run_reap(base + "--keep 8 --width 16 --down-type f32 -o " + quote(fplan), out), 0) << out;
    ASSERT_EQ(run_reap("prune -m " + quote(q) + " --plan " + quote(fplan) + " --down-type f32 -o " + quote(fout), out), 0) << out;
    EXPECT_EQ(read_json(fplan)["provenance"]["predicted_bytes"].get<uint64_t>(), file_size(fout));
    EXPECT_NE(read_json(fplan)["provenance"]["predicted_bytes"], read_json(plan)["provenance"]["predicted_bytes"]);
    EXPECT_EQ(read_json(fplan)["provenance"]["down_type"], "f32");
    // --budget sizes width-cut files: that file's size fits N = 8, a byte less only N = 7
    const uint64_t f32_bytes = file_size(fout);
    ASSERT_EQ(run_reap(base + "--budget " + std::to_string(f32_bytes) + " --width 16 --down-type f32 --json --dry-run", out), 0) << out;
    EXPECT_EQ(nlohmann::json::parse(out)["n_keep"], 8) << out;
    ASSERT_EQ(run_reap(base + "--budget " + std::to_string(f32_bytes - 1) + " --width 16 --down-type f32 --json --dry-run", out), 0) << out;
    EXPECT_EQ(nlohmann::json::parse(out)["n_keep"], 7) << out;

    // refusals: an unknown score, channel scores of another width, ch_reap asked of an energy archive
    EXPECT_EQ(run_reap(base + "--keep 8 --width 16 --channel-score norm -o " + quote(fx.dir + "/x.json"), out), 2) << out;
    EXPECT_NE(out.find("--channel-score: unknown score 'norm' (reap, energy)"), std::string::npos) << out;
    s::archive wide = a;
    saliency_test::add_channels(wide, 64);
    const std::string wsal = fx.dir + "/wide.gguf";
    ASSERT_TRUE(s::write_archive(wide, wsal, err, true)) << err;
    EXPECT_EQ(run_reap("plan " + quote(wsal) + " -m " + quote(q) + " --keep 8 --width 16 -o " + quote(fx.dir + "/x.json"), out), 2) << out;
    EXPECT_NE(out.find(wsal + " holds channel scores of experts 64 channels wide; the model's have 32"), std::string::npos) << out;

    s::archive en = s::make_archive(a.model, s::metric_set::energy);
    saliency_test::sim_options o;
    saliency_test::simulate_domain(en, "code", o);
    saliency_test::add_channels(en, 32);
    const std::string esal = fx.dir + "/energy.gguf";
    ASSERT_TRUE(s::write_archive(en, esal, err, true)) << err;
    const std::string ebase = "plan " + quote(esal) + " -m " + quote(q) + " --keep 8 --width 16 ";
    EXPECT_EQ(run_reap(ebase + "--channel-score reap -o " + quote(fx.dir + "/x.json"), out), 2) << out;
    EXPECT_NE(out.find("holds channel energies only"), std::string::npos) << out;
    EXPECT_FALSE(prune_test::exists(fx.dir + "/x.json"));
    ASSERT_EQ(run_reap(ebase + "-o " + quote(fx.dir + "/en.json"), out), 0) << out;
    expect_reference_channels(read_json(fx.dir + "/en.json"), en, {"code"}, "ch_energy", 16);
}

// compare of a width plan: the channels each plan keeps are compared over the
// experts both keep, so two plans of the same experts cut to different
// channels do not compare as identical (issue 37, item 11). The channel
// Jaccard is counted here from the plans' own channel lists.
TEST(PlanCli, CompareWeighsTheChannelsOfWidthPlans) {
    fixture fx;
    std::string why, out;
    if (!setup("plan_cli_compare_width", fx, why)) GTEST_SKIP() << why;
    const std::string model = fx.model("qwen3moe");
    g::model m;
    ASSERT_TRUE(g::open_model(model, m, why)) << why;
    reap::plan uncut;
    ASSERT_TRUE(prune_test::random_plan(m, 6, 5, uncut, why)) << why;
    const int64_t n_ff = 32;   // qwen3moe's expert_feed_forward_length in the zoo
    auto cut = [&](int64_t first) {   // channels first..first+15 of every kept expert
        reap::plan p = uncut;
        p.width_n_ff = n_ff;
        p.width_keep = 16;
        for (auto & l : p.layers) {
            l.channels.assign(l.keep.size(), {});
            for (auto & ch : l.channels) for (int64_t c = first; c < first + 16; ++c) ch.push_back(c);
        }
        return p;
    };
    const std::string pu = fx.dir + "/uncut.json", p0 = fx.dir + "/low.json", p8 = fx.dir + "/mid.json";
    ASSERT_TRUE(reap::write_plan(uncut, pu, true, why) && reap::write_plan(cut(0), p0, true, why) && reap::write_plan(cut(8), p8, true, why)) << why;
    auto channel_jaccard = [&](const std::string & a, const std::string & b, nlohmann::json & j) {
        if (run_reap("compare " + quote(a) + " " + quote(b) + " --json", out) != 0) return false;
        j = nlohmann::json::parse(out);
        return true;
    };
    nlohmann::json j;
    ASSERT_TRUE(channel_jaccard(p0, pu, j)) << out;
    EXPECT_DOUBLE_EQ(j["mean_jaccard"].get<double>(), 1.0) << "the same experts";
    ASSERT_TRUE(j.contains("width")) << j.dump(1);
    EXPECT_DOUBLE_EQ(j["width"]["mean_channel_jaccard"].get<double>(), 16.0 / 32.0);
    EXPECT_EQ(j["width"]["keep_a"], 16);
    EXPECT_EQ(j["width"]["keep_b"], 32);
    ASSERT_TRUE(channel_jaccard(p0, p8, j)) << out;
    EXPECT_DOUBLE_EQ(j["width"]["mean_channel_jaccard"].get<double>(), 8.0 / 24.0);   // |0..15 and 8..23| / |0..23|
    EXPECT_EQ(j["width"]["experts"].get<size_t>(), uncut.layers.size() * 6);
    ASSERT_EQ(run_reap("compare " + quote(p0) + " " + quote(p8), out), 0) << out;
    EXPECT_NE(out.find("channel Jaccard 0.333"), std::string::npos) << out;
    ASSERT_TRUE(channel_jaccard(pu, pu, j)) << out;
    EXPECT_FALSE(j.contains("width")) << "two uncut plans: no width to compare";
    // issue 49 item 8: with an archive, the saliency kept is of whole experts; for a
    // width plan the report says the removed channels are not in it (before: the
    // same figure for 16 of 32 channels and for every channel, without a word)
    const std::string sal = fx.dir + "/sal.gguf";
    archive_for(model, sal, {"en"});
    ASSERT_EQ(run_reap("compare " + quote(p0) + " " + quote(pu) + " --saliency " + quote(sal), out), 0) << out;
    EXPECT_NE(out.find("the channels a width cut removes are not counted; A cuts channels, B does not"), std::string::npos) << out;
    ASSERT_EQ(run_reap("compare " + quote(p0) + " " + quote(pu) + " --saliency " + quote(sal) + " --json", out), 0) << out;
    EXPECT_EQ(nlohmann::json::parse(out)["saliency"]["channels_counted"], false);
    ASSERT_EQ(run_reap("compare " + quote(pu) + " " + quote(pu) + " --saliency " + quote(sal), out), 0) << out;
    EXPECT_EQ(out.find("not counted"), std::string::npos) << "uncut plans: the shares are whole";
}

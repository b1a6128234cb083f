// CLI tests of `reap inspect` (the binary named by $REAP_BIN, else the reap
// beside this test binary; skipped when it is not built): the human report and
// --help work, and bad input (a missing file, no model, a keep count out of
// range, an unknown option, a damaged file) ends with a clear message and exit
// status 2; --json prints the census the library takes (moe/census.h, checked
// against the file's own bytes by test_gguf_inspect.cpp), whole, with the
// fused-kernel note added.
#include "cli/commands.h"   // REAP_VERSION, which inspect sizes a stamped prune with
#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "moe/census.h"
#include "saliency/archive.h"
#include "saliency_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sys/wait.h>

using namespace gguf_test;

namespace {

struct run_result {
    int         status = -1;
    std::string out;   // stdout and stderr together
};

run_result run_reap(const std::string & args) {
    run_result r;
    const std::string cmd = "'" + reap_bin() + "' " + args + " 2>&1";
    FILE * p = popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

bool have_reap() { return exists(reap_bin()); }

} // namespace

TEST(Inspect, CliJsonIsTheLibrarysCensus) {
    if (!have_reap()) GTEST_SKIP() << "reap binary not built ($REAP_BIN)";
    const std::string dir = scratch_dir("inspect_cli_json");
    const std::string model = dir + "/model.gguf";
    write_model(model);
    const run_result r = run_reap("inspect '" + model + "' --json --keep 3");
    ASSERT_EQ(r.status, 0) << r.out;
    nlohmann::json printed = nlohmann::json::parse(r.out);
    ASSERT_TRUE(printed.contains("fused_topk_moe")) << r.out;
    printed.erase("fused_topk_moe");

    reap::gguf::model m;
    std::string err;
    ASSERT_TRUE(reap::gguf::open_model(model, m, err)) << err;
    reap::moe::census c;
    ASSERT_TRUE(reap::moe::take_census(m, {3}, c, err, {true, std::string(64, '0'), REAP_VERSION, ""})) << err;
    EXPECT_EQ(printed, nlohmann::json::parse(reap::moe::census_json(c)));
}

TEST(Inspect, HumanReportHelpAndErrors) {
    if (!have_reap()) GTEST_SKIP() << "reap binary not built ($REAP_BIN)";
    const std::string dir = scratch_dir("inspect_human");
    const std::string model = dir + "/model.gguf";
    write_model(model);

    run_result r = run_reap("inspect '" + model + "'");
    ASSERT_EQ(r.status, 0) << r.out;
    for (const char * part : {"qwen3moe", "MoE blocks       2 [0,2]", "4 routed, 2 used", "q4_K", "expert pool",
                              "read per decoded token"}) {
        EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
    }
    r = run_reap("inspect --help");
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("usage: reap inspect"), std::string::npos) << r.out;

    r = run_reap("inspect '" + dir + "/missing.gguf'");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.out.find("missing.gguf: cannot open"), std::string::npos) << r.out;
    r = run_reap("inspect");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.out.find("no model given"), std::string::npos) << r.out;
    r = run_reap("inspect '" + model + "' --keep 0");
    EXPECT_EQ(r.status, 2);
    r = run_reap("inspect '" + model + "' --keep 9");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.out.find("--keep 9 is outside 1..4"), std::string::npos) << r.out;
    r = run_reap("inspect '" + model + "' --frobnicate");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.out.find("unknown option --frobnicate"), std::string::npos) << r.out;

    // A damaged file: the reader's message, exit 2.
    std::vector<uint8_t> bytes = read_all(model);
    bytes.resize(bytes.size() / 2);
    write_all(dir + "/cut.gguf", bytes);
    r = run_reap("inspect '" + dir + "/cut.gguf'");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.out.find("ends past end of file"), std::string::npos) << r.out;
}

// An archive is not a model: inspect says what it holds instead of a census
// with no architecture (it printed "arch (none)", 0 experts). Checked against
// the archive the test wrote: the model it is of, the metric set and the
// statistics, each domain's tokens, which plan methods it serves (an archive
// without squared norms does not serve msan; a weights archive only aimer),
// and its provenance; --json carries the same.
TEST(CliInspect, ASaliencyArchiveIsDescribedNotCensused) {
    namespace s = reap::saliency;
    const std::string dir = scratch_dir("inspect-archive");
    s::archive a = saliency_test::make_archive({"en", "code"}, saliency_test::make_fingerprint(5, 16, 4, {1, 2, 4}, "glm4moe"),
                                               s::metric_set::reap, 1234);
    a.provenance.set_string("reap.saliency.corpus", "calib.jsonl");
    std::string err;
    ASSERT_TRUE(s::write_archive(a, dir + "/a.gguf", err, true)) << err;
    run_result r = run_reap("inspect '" + dir + "/a.gguf'");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(r.out.find("arch             (none)"), std::string::npos) << r.out;
    for (const std::string & line : {std::string("metric set       reap\n"),
                                     std::string("of the model     glm4moe, 5 blocks, 3 MoE blocks [1,2,4], 16 experts (4 used per token)\n"),
                                     std::string("domains          2, 2,468 tokens in all"), std::string("  en             1,234 tokens"),
                                     std::string("per channel      none"), std::string("reap.saliency.corpus"),
                                     std::string("calib.jsonl")}) {
        EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
    }
    EXPECT_NE(r.out.find("plan methods     reap, man, "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("; not msan, aimer"), std::string::npos) << "no squared norms, no weights: " << r.out;

    r = run_reap("inspect --json '" + dir + "/a.gguf'");
    ASSERT_EQ(r.status, 0) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_EQ(j["model"]["arch"], "glm4moe");
    EXPECT_EQ(j["model"]["moe_layers"], nlohmann::json::array({1, 2, 4}));
    ASSERT_EQ(j["domains"].size(), 2u);
    EXPECT_EQ(j["domains"][1]["name"], "code");
    EXPECT_EQ(j["domains"][1]["n_tokens"], 1234);
    EXPECT_EQ(j["provenance"]["reap.saliency.corpus"], "calib.jsonl");

    // a weights archive (reap score's): aimer only
    s::archive w = s::make_archive(saliency_test::make_fingerprint(), s::metric_set::weights);
    s::domain_stats & d = w.add_domain("weights");
    for (int l : w.model.moe_layers) {
        for (uint32_t e = 0; e < w.model.n_expert; ++e) d.aimer[w.index(l, (int) e)] = 0.75;
    }
    ASSERT_TRUE(s::write_archive(w, dir + "/w.gguf", err, true)) << err;
    r = run_reap("inspect '" + dir + "/w.gguf'");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("metric set       weights (reap score: from the weights, no calibration)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("plan methods     aimer, random; not reap, "), std::string::npos) << r.out;
}

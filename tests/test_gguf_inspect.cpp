// Tests of `reap inspect` (the binary named by $REAP_BIN, else the reap beside
// this test binary; skipped when it is not built, e.g. in the sanitizer build
// of the core tests): --json agrees with the library census on a single file
// and on a split set, the human report and --help work, and bad input ends
// with a clear message and exit status 2.
#include "gguf/census.h"
#include "gguf_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sys/wait.h>

namespace g = reap::gguf;
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

TEST(Inspect, JsonMatchesTheLibraryCensusOnSingleAndSplitFiles) {
    if (!have_reap()) GTEST_SKIP() << "reap binary not built ($REAP_BIN)";
    const std::string dir = scratch_dir("inspect_json");
    const std::string single = dir + "/model.gguf";
    write_model(single);
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(single, m, err)) << err;
    g::census c;
    ASSERT_TRUE(g::take_census(m, {3}, c, err)) << err;

    const run_result r = run_reap("inspect '" + single + "' --json --keep 3");
    ASSERT_EQ(r.status, 0) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j, nlohmann::json::parse(g::census_json(c)));
    for (const char * key : {"arch", "n_layer", "moe_layers", "n_expert", "n_expert_used", "n_expert_groups",
                             "expert_pool_bytes", "dense_bytes", "file_bytes", "n_shards",
                             "decode_bytes_per_token", "types"}) {
        EXPECT_TRUE(j.contains(key)) << key;
    }
    EXPECT_EQ(j["moe_layers"], nlohmann::json::array({0, 2}));
    EXPECT_EQ(j["types"]["mxfp4"]["count"], 2);

    // The split set: the same census but for shards and file bytes.
    g::write_options wo;
    wo.sync = false;
    wo.split_max_tensors = 6;
    std::vector<std::string> shards;
    ASSERT_TRUE(g::write_output(g::spec_from_model(m), wo, dir + "/split.gguf", shards, err)) << err;
    const run_result rs = run_reap("inspect '" + shards[0] + "' --json --keep 3");
    ASSERT_EQ(rs.status, 0) << rs.out;
    nlohmann::json js = nlohmann::json::parse(rs.out);
    EXPECT_EQ(js["n_shards"], shards.size());
    uint64_t total = 0;
    for (const std::string & s : shards) total += read_all(s).size();
    EXPECT_EQ(js["file_bytes"], total);
    js["n_shards"] = 1;
    js["file_bytes"] = j["file_bytes"];
    EXPECT_EQ(js, j);
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

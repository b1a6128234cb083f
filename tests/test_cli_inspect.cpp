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

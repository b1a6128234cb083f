// Several machines through llama.cpp's RPC backend, on loopback: two
// ggml-rpc-server processes hold the trained model's layers (-ngl 99 --rpc
// A,B) and reap runs as it would across hosts. `reap calibrate --rpc` must
// write the archive a local run writes (counts exactly, sums within 1e-9
// relative), and `reap eval --rpc` with a mask must give the local numbers.
// The mask is the strongest check here: the router nodes it rewrites live in
// the RPC servers' memory, so they are reached only through the backend
// tensor API, never a host pointer, which is what a GPU build needs too.
#include "llama_test_util.h"
#include "prune_test_util.h"
#include "saliency/archive.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

using namespace reap_test;

namespace {

// A port nobody listens on now (the kernel's pick for an ephemeral bind).
int free_port() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof(a);
    int port = -1;
    if (::bind(s, (sockaddr *) &a, sizeof(a)) == 0 && ::getsockname(s, (sockaddr *) &a, &len) == 0) port = ntohs(a.sin_port);
    ::close(s);
    return port;
}

bool accepts(int port) {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t) port);
    const bool ok = ::connect(s, (sockaddr *) &a, sizeof(a)) == 0;
    ::close(s);
    return ok;
}

// A ggml-rpc-server on 127.0.0.1:port for the life of the object.
struct rpc_server {
    pid_t pid = -1;
    int   port = -1;
    explicit rpc_server(const std::string & log) {
        port = free_port();
        const std::string bin = llama_bin_dir() + "/ggml-rpc-server";
        pid = ::fork();
        if (pid == 0) {
            FILE * f = std::freopen(log.c_str(), "w", stderr);
            (void) f;
            const std::string p = std::to_string(port);
            ::execl(bin.c_str(), bin.c_str(), "-H", "127.0.0.1", "-p", p.c_str(), "-t", "1", (char *) nullptr);
            ::_exit(127);
        }
        for (int i = 0; i < 200 && !accepts(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ~rpc_server() {
        if (pid > 0) {
            ::kill(pid, SIGTERM);
            ::waitpid(pid, nullptr, 0);
        }
    }
    std::string endpoint() const { return "127.0.0.1:" + std::to_string(port); }
};

std::string text_of(const std::string & path) {
    const auto v = prune_test::read_all(path);
    return std::string(v.begin(), v.end());
}

} // namespace

TEST(Rpc, CalibrateAndMaskedEvalAcrossTwoServers) {
    const std::string dir = prune_test::scratch("rpc");
    rpc_server a(dir + "/rpc-a.log"), b(dir + "/rpc-b.log");
    ASSERT_TRUE(accepts(a.port)) << "ggml-rpc-server did not start: " << text_of(dir + "/rpc-a.log");
    ASSERT_TRUE(accepts(b.port)) << "ggml-rpc-server did not start: " << text_of(dir + "/rpc-b.log");
    const std::string rpc = " --rpc " + a.endpoint() + "," + b.endpoint() + " -ngl 99";

    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    std::string err, out;
    const std::string corpus = dir + "/corpus.jsonl";
    ASSERT_TRUE(corpus_subset("calib", corpus, {"en", "ja"}, 1500, err)) << err;

    // calibrate: local and across the two servers
    const std::string base_cmd = shell_quote(reap_bin()) + " calibrate -m " + shell_quote(model) + " --corpus " +
                                 shell_quote(corpus) + " -c 128 -t 2 --no-progress --force -o ";
    ASSERT_EQ(run_cmd(base_cmd + shell_quote(dir + "/local.gguf"), out), 0) << out;
    ASSERT_EQ(run_cmd(base_cmd + shell_quote(dir + "/rpc.gguf") + rpc, out), 0) << out;
    reap::saliency::archive local, remote;
    ASSERT_TRUE(reap::saliency::read_archive(dir + "/local.gguf", local, err)) << err;
    ASSERT_TRUE(reap::saliency::read_archive(dir + "/rpc.gguf", remote, err)) << err;
    ASSERT_EQ(local.domains.size(), remote.domains.size());
    for (size_t d = 0; d < local.domains.size(); ++d) {
        const auto & x = local.domains[d], & y = remote.domains[d];
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.n_tokens, y.n_tokens);
        EXPECT_EQ(x.count, y.count) << x.name;
        for (size_t i = 0; i < x.reap_sum.size(); ++i) {
            EXPECT_NEAR(x.reap_sum[i], y.reap_sum[i], 1e-9 * std::max(1.0, std::fabs(x.reap_sum[i]))) << x.name << " " << i;
        }
    }

    // eval with a mask (a random half cut): local and across the two servers
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(model, m, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 99, p, err)) << err;
    const std::string plan = dir + "/plan.json";
    ASSERT_TRUE(reap::write_plan(p, plan, true, err)) << err;
    const std::string text = dir + "/text.txt";
    std::ofstream(text) << calibration_text() << calibration_text();
    const std::string eval_cmd = shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " --mask " + shell_quote(plan) +
                                 " -f " + shell_quote(text) + " -c 128 -t 2 --json";
    ASSERT_EQ(run_cmd(eval_cmd + " 2>/dev/null", out), 0) << out;
    const nlohmann::json l = nlohmann::json::parse(out);
    ASSERT_EQ(run_cmd(eval_cmd + rpc + " 2>/dev/null", out), 0) << out;
    const nlohmann::json r = nlohmann::json::parse(out);
    EXPECT_GT(l.at("kld_mean").get<double>(), 1e-3) << "the cut should cost something";
    // the graph split across backends need not compute in the same order as
    // one local backend: the scores agree to float rounding (kld_p99 differed
    // by 1.3e-6 relative with ggml built for AVX2, 2026-12-02; under 1e-6 with
    // ggml built natively before)
    for (const char * k : {"ppl_base", "ppl_pruned", "kld_mean", "kld_p99", "argmax_agree"}) {
        EXPECT_NEAR(l.at(k).get<double>(), r.at(k).get<double>(), 1e-5 * std::max(1.0, std::fabs(l.at(k).get<double>()))) << k;
    }
    EXPECT_EQ(l.at("n_tokens"), r.at("n_tokens"));
}

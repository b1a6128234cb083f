// One memory budget, two ways to spend it (issue 26 items 1-2, issue 23 item 8),
// end to end through the CLI on reap-moe-wide (models/README.md: F16, 256-wide
// rows, so llama-quantize applies real k-quants, no fallback):
//   * the committed model is the one models/README.md describes (size, SHA-256);
//   * its Q6_K and Q4_K_M copies (made here by llama-quantize; ggml's reader
//     confirms every expert tensor is q6_K / q4_K) are the same model: a plan
//     made on the F16 file prunes the Q6_K copy without a warning; a copy with
//     other router weights (same header) is refused by eval --mask as by prune;
//   * `reap sweep -m Q6_K -m Q4_K_M --reference F16 --kld-base REF.kld` at two
//     budgets gives, for every source and budget, the numbers that `reap eval
//     --kld-base REF.kld -p` gives on the file `reap prune` writes from that
//     point's plan and source: KLD mean within 1e-5, top-1 within 0.1%; the
//     predicted size is the written file's, and the frontier names the best
//     source of each budget;
//   * another model, as a source or as the reference, is refused naming what
//     differs: another arch (the zoo's qwen2moe), another expert count (a
//     pruned copy), another vocabulary (token_embd one row longer), other
//     weights of the same shape (one router byte changed).
// The budgets cut both sources (N < 16) to experts counts that are not all
// multiples of 4: there the pruned router's matmul and softmax take other ggml
// kernels than the masked 16-expert one, which moved KLD by up to 1e-4 before
// the mask recomputed the kept columns (src/llama/mask.cpp); now they agree to
// the bit on the CPU.
#include "llama_test_util.h"

#include "util/sha256.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

using namespace reap_test;

namespace {

std::string slurp(const std::string & path) {
    const std::vector<uint8_t> b = gguf_test::read_all(path);
    return std::string(b.begin(), b.end());
}

uint64_t file_size(const std::string & path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 ? (uint64_t) st.st_size : 0;
}

// The size and SHA-256 models/README.md states for reap-moe-wide.gguf (its
// table row "| file | ... `BYTES` bytes, SHA-256 `HEX` |"); empty when absent.
std::pair<std::string, std::string> documented_wide_file() {
    std::ifstream in(source_dir() + "/models/README.md");
    std::string line;
    bool in_wide = false;
    while (std::getline(in, line)) {
        if (line.rfind("# reap-moe-wide", 0) == 0) in_wide = true;
        if (!in_wide || line.rfind("| file |", 0) != 0) continue;
        auto quoted_before = [&](const std::string & what) {
            const size_t at = line.find(what);
            const size_t close = at == std::string::npos ? at : line.rfind('`', at);
            const size_t open = close == std::string::npos || close == 0 ? std::string::npos : line.rfind('`', close - 1);
            return open == std::string::npos ? std::string() : line.substr(open + 1, close - open - 1);
        };
        const size_t sha = line.find("SHA-256 `");
        return {quoted_before(" bytes"), sha == std::string::npos ? std::string() : line.substr(sha + 9, 64)};
    }
    return {};
}

// Every expert tensor's ggml type in a GGUF file, by ggml's own reader.
std::set<std::string> expert_types(const std::string & path) {
    std::set<std::string> types;
    for_each_ggml_tensor(path, [&](const char * name, const ggml_tensor * t) {
        if (std::string(name).find("_exps.") != std::string::npos) types.insert(ggml_type_name(t->type));
    });
    return types;
}

} // namespace

TEST(Frontier, TwoQuantisationsAgainstOneReference) {
    if (!has_llama_tools()) GTEST_SKIP() << "llama-quantize is not built";
    const std::string dir = test_tmp_dir() + "/frontier";
    ::mkdir(dir.c_str(), 0755);
    const std::string ref = source_dir() + "/models/reap-moe-wide.gguf";
    const std::string reap = shell_quote(reap_bin());
    std::string err, out;
    // the committed file is the one models/README.md documents
    const auto [doc_bytes, doc_sha] = documented_wide_file();
    std::string sha;
    ASSERT_TRUE(reap::util::sha256_file(ref, sha, err)) << err;
    EXPECT_EQ(doc_sha, sha) << "models/README.md's SHA-256 of reap-moe-wide.gguf";
    EXPECT_EQ(doc_bytes, std::to_string(file_size(ref))) << "models/README.md's size of reap-moe-wide.gguf";

    const std::string calib = dir + "/calib.jsonl", text = dir + "/heldout.txt", sal = dir + "/saliency.gguf";
    ASSERT_TRUE(corpus_subset("calib", calib, {"en", "code"}, 3000, err)) << err;
    ASSERT_TRUE(heldout_text(text, 1500, err)) << err;
    // One thread for every run (llama-quantize's last argument too): the same files and
    // numbers as with two, at a fraction of the CPU time on a busy machine, where a
    // second ggml thread spins waiting for the first. -np 1: a 256-token window a
    // decode attends over 256 cells, not many windows' 4096.
    ASSERT_EQ(run_cmd(reap + " calibrate -m " + shell_quote(ref) + " --corpus " + shell_quote(calib) + " -o " + shell_quote(sal) +
                      " -c 256 -np 1 -t 1 --force --no-progress", out), 0) << out;
    std::vector<std::string> sources;
    for (const char * type : {"Q6_K", "Q4_K_M"}) {
        const std::string q = dir + "/wide-" + type + ".gguf";
        ASSERT_TRUE(run_to_file(shell_quote(llama_bin_dir() + "/llama-quantize") + " " + shell_quote(ref) + " @OUT@ " + type + " 1", q, err))
            << err;
        sources.push_back(q);
    }
    const std::string q6 = sources[0], q4 = sources[1];
    // real k-quants: no expert tensor fell back to another type
    EXPECT_EQ(expert_types(q6), std::set<std::string>({"q6_K"}));
    const std::set<std::string> q4_types = expert_types(q4);
    EXPECT_TRUE(q4_types.count("q4_K"));
    for (const std::string & t : q4_types) EXPECT_TRUE(t == "q4_K" || t == "q6_K") << t;

    // Identity: a plan of the F16 file prunes its Q6_K copy, no warning; a copy with other routers is refused by eval --mask.
    const std::string plan = dir + "/keep10.json";
    ASSERT_EQ(run_cmd(reap + " plan " + shell_quote(sal) + " -m " + shell_quote(ref) + " --keep 10 --force -o " + shell_quote(plan), out), 0) << out;
    ASSERT_EQ(run_cmd(reap + " prune -m " + shell_quote(q6) + " --plan " + shell_quote(plan) + " --force -o " +
                      shell_quote(dir + "/q6-keep10.gguf"), out), 0) << out;
    EXPECT_EQ(out.find("warning"), std::string::npos) << out;
    const std::string other = dir + "/other-router.gguf";
    ASSERT_TRUE(gguf_test::write_with_other_router(ref, other, err)) << err;
    for (const std::string & how : {" --mask " + shell_quote(plan), " --base-mask " + shell_quote(plan) + " -p " + shell_quote(other)}) {
        EXPECT_EQ(run_cmd(reap + " eval -m " + shell_quote(other) + how + " -f " + shell_quote(text) + " -c 128 --chunks 2 -t 1", out), 2)
            << how << "\n" << out;
        EXPECT_NE(out.find("was made for another model: router weights differ"), std::string::npos) << out;
    }

    // The sweep: two sources, two budgets (each source at a budget gets the N its own quantisation fits).
    const uint64_t b1 = file_size(q6) * 63 / 100, b2 = file_size(q4) * 6 / 10;
    const std::string kld = dir + "/ref.kld", json = dir + "/sweep.json", plans = dir + "/plans";
    ::unlink(kld.c_str());
    const std::string sweep = reap + " sweep " + shell_quote(sal) + " -m " + shell_quote(q6) + " -m " + shell_quote(q4) + " -f " +
                              shell_quote(text) + " -c 128 -t 1 --budgets " + std::to_string(b1) + "," + std::to_string(b2);
    ASSERT_EQ(run_cmd(sweep + " --reference " + shell_quote(ref) + " --kld-base " + shell_quote(kld) + " -o " + shell_quote(json) +
                      " --plans-dir " + shell_quote(plans) + " --force -q", out), 0) << out;
    EXPECT_NE(out.find(" wins with N = "), std::string::npos) << out;
    const nlohmann::json sw = nlohmann::json::parse(slurp(json));
    ASSERT_EQ(sw.at("version"), 3);
    EXPECT_EQ(sw.at("reference").at("model"), ref);
    ASSERT_EQ(sw.at("sources").size(), 2u);
    ASSERT_EQ(sw.at("frontier").size(), 2u);
    std::map<std::string, double> best_kld;   // request -> the lowest KLD mean of any source
    std::set<int64_t> cuts;                    // every point's N
    for (size_t s = 0; s < 2; ++s) {
        const auto & src = sw["sources"][s];
        EXPECT_EQ(src.at("path"), sources[s]);
        ASSERT_EQ(src.at("points").size(), 2u);
        for (const auto & pt : src["points"]) {
            const std::string what = sources[s] + " at " + pt.at("request").dump();
            SCOPED_TRACE(what);
            const std::string req = pt["request"].at("budget").get<std::string>();
            EXPECT_LE(pt.at("predicted_bytes").get<uint64_t>(), std::stoull(req));
            const double k = pt.at("overall").at("kld_mean").get<double>();
            cuts.insert(pt.at("n_keep").get<int64_t>());
            best_kld[req] = best_kld.count(req) ? std::min(best_kld[req], k) : k;
            // the real thing: prune that source with that point's plan, eval the file against the reference's KLD file
            const std::string cut = dir + "/cut.gguf";
            ASSERT_EQ(run_cmd(reap + " prune -m " + shell_quote(sources[s]) + " --plan " + shell_quote(pt.at("plan").get<std::string>()) +
                              " --force -o " + shell_quote(cut), out), 0) << out;
            EXPECT_EQ(out.find("warning"), std::string::npos) << out;
            EXPECT_EQ(file_size(cut), pt.at("predicted_bytes").get<uint64_t>());
            ASSERT_EQ(run_cmd(reap + " eval --kld-base " + shell_quote(kld) + " -p " + shell_quote(cut) + " -t 1 --json 2>/dev/null", out), 0)
                << out;
            const nlohmann::json ev = nlohmann::json::parse(out);
            EXPECT_EQ(ev.at("n_tokens").get<size_t>(), pt["overall"].at("n_tokens").get<size_t>());
            EXPECT_NEAR(ev.at("kld_mean").get<double>(), k, 1e-5);
            EXPECT_NEAR(ev.at("argmax_agree").get<double>(), pt["overall"].at("argmax_agree").get<double>(), 1e-3);
        }
    }
    // every point is a cut, and not every N a multiple of 4 (see the top of the file)
    ASSERT_FALSE(cuts.empty());
    EXPECT_LT(*cuts.rbegin(), 16);
    EXPECT_TRUE(std::any_of(cuts.begin(), cuts.end(), [](int64_t n) { return n % 4 != 0; }));
    // the frontier: per budget the source with the lowest KLD, and its margin over the other
    for (const auto & e : sw["frontier"]) {
        const std::string req = e.at("request").at("budget").get<std::string>();
        EXPECT_DOUBLE_EQ(e.at("best").at("kld_mean").get<double>(), best_kld.at(req));
        EXPECT_GE(e.at("kld_margin").get<double>(), 0.0);
        EXPECT_NE(e.at("best").at("source"), e.at("runner_up").at("source"));
    }
    // the chart: one line per source, the budgets as vertical lines
    const std::string svg = slurp(dir + "/sweep.svg");
    EXPECT_NE(svg.find("wide-Q6_K.gguf"), std::string::npos);
    EXPECT_NE(svg.find("wide-Q4_K_M.gguf"), std::string::npos);
    EXPECT_NE(svg.find("budget " + std::to_string(b1)), std::string::npos);
    EXPECT_NE(svg.find("best per request"), std::string::npos);

    // Another model, as a source or as the reference, is refused with the reason, before any scoring: the
    // source's saliency fingerprint is checked first (arch, blocks, experts, routers), then its identity
    // (moe/identity.h, which adds the vocabulary); the reference's identity.
    std::string zoo_err;
    const std::string other_arch = zoo_model("qwen2moe", zoo_err);
    ASSERT_FALSE(other_arch.empty()) << zoo_err;
    const std::string other_vocab = dir + "/other-vocab.gguf";
    ASSERT_TRUE(gguf_test::write_with_one_more_token_row(ref, other_vocab, err)) << err;
    const std::string fewer_experts = dir + "/q6-keep10.gguf";   // the Q6_K copy pruned above: 10 experts
    struct other_model { std::string path, as_source, as_reference; };
    for (const other_model & o : std::vector<other_model>{
             {other, "router weights differ", "router weights differ: sha256"},
             {other_arch, "saliency archive is for another model: arch 'qwen3moe' (archive) vs 'qwen2moe' (model)",
              "arch 'qwen3moe' (" + q6 + ") vs 'qwen2moe' (" + other_arch + ")"},
             {fewer_experts, "n_expert 16 (archive) vs 10 (model)", "expert count 16 (" + q6 + ") vs 10 (" + fewer_experts + ")"},
             {other_vocab, "source '" + other_vocab + "' is not the model of -m '" + q6 + "': vocabulary size 259 (" + q6 + ") vs 260 (" +
                               other_vocab + ")",
              "vocabulary size 259 (" + q6 + ") vs 260 (" + other_vocab + ")"}}) {
        SCOPED_TRACE(o.path);
        EXPECT_EQ(run_cmd(sweep + " -m " + shell_quote(o.path) + " --kld-base " + shell_quote(kld) + " -q", out), 2) << out;
        EXPECT_NE(out.find(o.as_source), std::string::npos) << out;
        EXPECT_EQ(run_cmd(sweep + " --reference " + shell_quote(o.path) + " -q", out), 2) << out;
        EXPECT_NE(out.find("--reference '" + o.path + "' is not the model of -m '" + q6 + "': " + o.as_reference), std::string::npos) << out;
    }
    // a source given twice
    EXPECT_EQ(run_cmd(sweep + " -m " + shell_quote(q6) + " --kld-base " + shell_quote(kld) + " -q", out), 2) << out;
    EXPECT_NE(out.find("give each source once"), std::string::npos) << out;
    // several sources and no reference: a usage error
    EXPECT_EQ(run_cmd(sweep + " -q", out), 2) << out;
    EXPECT_NE(out.find("--reference"), std::string::npos) << out;
}

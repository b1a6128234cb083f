// reap fit across source quantisations: reap-moe-wide (F16, 16 experts of
// width 256, top-2) as the reference, its Q8_0, Q6_K, Q4_K_M and IQ4_XS copies
// (made here by llama-quantize) as the sources, at budgets of 4, 6 and 8 MB.
// Each claim against something fit did not compute:
//   * the full grid, built here without fit's space: for every source, every K
//     that `reap plan --width K` accepts on a 32-channel grid (the down type's
//     block decides which) and the full width, every N that reap plan accepts
//     (n_expert_used up to all), each planned by reap plan and, when its
//     predicted file fits the largest budget, scored by `reap eval --mask`
//     against the same reference rows;
//   * per budget: the written build's KLD (reap eval -p, and llama-perplexity
//     --kl-divergence for one) within 2% (or 1e-4) of the best of the grid
//     points that fit, with at most a third of their passes; fit's count of
//     the full grid equal to the grid counted here; the build verifies.
#include "llama_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>

using namespace reap_test;

namespace {

nlohmann::json read_json(const std::string & path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, false);
}

struct grid_point {
    std::string source;   // the source's path
    int64_t     width = 0, n_keep = 0;
    uint64_t    bytes = 0;
    double      kld = INFINITY;
};

const char * k_types[] = {"Q8_0", "Q6_K", "Q4_K_M", "IQ4_XS"};
const uint64_t k_budgets[] = {4000000, 6000000, 8000000};

} // namespace

TEST(FitWide, WinnerAcrossSourcesWidthsAndCountsIsWithinTwoPercentOfTheFullGrid) {
    const std::string dir = test_tmp_dir() + "/fit-wide", reap = shell_quote(reap_bin());
    const std::string ref = source_dir() + "/models/reap-moe-wide.gguf";
    std::string out, err;
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(dir) + " && mkdir -p " + shell_quote(dir), out), 0) << out;
    const std::string calib = dir + "/calib.jsonl", text = dir + "/heldout.txt";
    ASSERT_TRUE(corpus_subset("calib", calib, {"en", "code"}, 3000, err) && heldout_text(text, 1200, err)) << err << " (run `make corpus`)";
    std::vector<std::string> sources;
    for (const char * type : k_types) {
        sources.push_back(dir + "/wide-" + type + ".gguf");
        ASSERT_EQ(run_cmd(shell_quote(llama_bin_dir() + "/llama-quantize") + " " + shell_quote(ref) + " " + shell_quote(sources.back()) +
                          " " + type + " 1", out), 0) << out;
    }

    // fit at each budget: the first calibrates and writes the reference's rows, the others reuse both
    std::string fit_sources;
    for (const std::string & s : sources) fit_sources += " -m " + shell_quote(s);
    const std::string first = dir + "/fit-" + std::to_string(k_budgets[0]);
    const std::string sal = first + "/saliency.gguf", kld = first + "/reference.kld";
    std::map<uint64_t, nlohmann::json> fits;
    for (uint64_t budget : k_budgets) {
        const std::string d = dir + "/fit-" + std::to_string(budget);
        const std::string inputs = budget == k_budgets[0] ? " --corpus " + shell_quote(calib) + " --reference " + shell_quote(ref)
                                                          : " --saliency " + shell_quote(sal) + " --kld-base " + shell_quote(kld) +
                                                                " --reference " + shell_quote(ref);
        ASSERT_EQ(run_cmd(reap + " fit" + fit_sources + inputs + " -f " + shell_quote(text) + " --budget " + std::to_string(budget) +
                          " -o " + shell_quote(d) + " -c 128 -t 1 -q", out), 0) << out;
        EXPECT_NE(out.find("candidates scored"), std::string::npos) << out;
        fits[budget] = read_json(d + "/fit.json");
        ASSERT_TRUE(fits[budget].is_object()) << d;
    }

    // the full grid, planned and scored here
    std::vector<grid_point> grid;
    const uint64_t largest = k_budgets[2];
    for (const std::string & s : sources) {
        std::string masks;
        std::map<std::string, size_t> mine;   // plan path -> grid index
        for (int64_t K = 32; K <= 256; K += 32) {
            for (int64_t N = 16; N >= 1; --N) {
                const std::string p = dir + "/grid-" + std::to_string(&s - &sources[0]) +
                                      "-K" + std::to_string(K) + "-N" + std::to_string(N) + ".json";
                const std::string width = K < 256 ? " --width " + std::to_string(K) : "";
                if (run_cmd(reap + " plan " + shell_quote(sal) + " -m " + shell_quote(s) + width + " --keep " + std::to_string(N) +
                            " -o " + shell_quote(p), out) != 0) {
                    // this K is off the block grid (N = 16), or N is below what a token
                    // uses; any other refusal would shrink the grid without a word
                    if (N == 16) EXPECT_NE(out.find("--width"), std::string::npos) << "only a width may be refused: " << out;
                    else EXPECT_NE(out.find("is below n_expert_used"), std::string::npos) << "K " << K << " N " << N << ": " << out;
                    break;
                }
                const nlohmann::json pj = read_json(p);
                grid_point g{s, K, N, pj["provenance"]["predicted_bytes"].get<uint64_t>()};
                if (g.bytes > largest) continue;
                masks += " --mask " + shell_quote(p);
                mine[p] = grid.size();
                grid.push_back(g);
            }
        }
        if (mine.empty()) continue;
        const std::string e = dir + "/grid-eval-" + std::to_string(&s - &sources[0]) + ".json";
        ASSERT_EQ(run_cmd(reap + " eval -m " + shell_quote(s) + " --kld-base " + shell_quote(kld) + masks + " -t 1 -q --json > " +
                          shell_quote(e), out), 0) << out;
        const nlohmann::json ej = read_json(e);
        ASSERT_EQ(ej["masked"].size(), mine.size()) << e;
        for (const auto & [key, m] : ej["masked"].items()) {
            ASSERT_TRUE(mine.count(key)) << key;
            grid[mine[key]].kld = m["kld_mean"].get<double>();
        }
    }

    for (uint64_t budget : k_budgets) {
        SCOPED_TRACE("budget " + std::to_string(budget));
        const nlohmann::json & fit = fits[budget];
        const grid_point * best = nullptr;
        size_t n_fit = 0;
        for (const grid_point & g : grid) {
            if (g.bytes > budget) continue;
            ++n_fit;
            if (!best || g.kld < best->kld) best = &g;
        }
        ASSERT_NE(best, nullptr);
        const std::string d = dir + "/fit-" + std::to_string(budget), build = fit["build"]["file"];
        ASSERT_EQ(run_cmd(reap + " eval -p " + shell_quote(build) + " --kld-base " + shell_quote(kld) + " -t 1 -q --json > " +
                          shell_quote(d + "/check-eval.json"), out), 0) << out;
        const double file_kld = read_json(d + "/check-eval.json")["kld_mean"].get<double>();
        EXPECT_LE(file_kld, std::max(best->kld * 1.02, best->kld + 1e-4))
            << "grid best: " << best->source << " K " << best->width << " N " << best->n_keep << " KLD " << best->kld;
        EXPECT_NEAR(file_kld, fit["build"]["kld_mean"].get<double>(), 1e-9);
        EXPECT_EQ(fit["passes"]["full_grid"].get<size_t>(), n_fit) << "fit's count of the full grid";
        const size_t scored = fit["passes"]["scored"].get<size_t>();
        EXPECT_LE(3 * scored, n_fit) << "scored " << scored << " of " << n_fit;
        const std::string winner_source = fit["candidates"][fit["winner"].get<size_t>()]["source"];
        EXPECT_EQ(run_cmd(reap + " verify -m " + shell_quote(winner_source) + " --plan " +
                          shell_quote(fit["build"]["plan"].get<std::string>()) + " " + shell_quote(build), out), 0) << out;
        if (budget == k_budgets[1]) {
            std::string lp;
            ASSERT_EQ(run_llama_perplexity("-m " + shell_quote(build) + " -t 1 --kl-divergence --kl-divergence-base " + shell_quote(kld),
                                           "Same top p", lp), 0) << lp;
            EXPECT_NEAR(find_number(lp, "Mean    KLD:"), file_kld, 1e-5 + 2e-3 * file_kld) << lp;
        }
    }
}

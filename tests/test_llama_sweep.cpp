// `reap sweep` end to end on the project's trained model, through the CLI:
// calibrate on a slice of the calib split, sweep three sizes over a slice of
// the held-out split, and check the sweep against the real thing: the plans
// it writes are nested (checked here), the predicted size of a point is the
// size of the file `reap prune` then writes from its plan, and `reap eval -p`
// of that file gives the point's numbers (perplexity within 1e-4 relative,
// mean KLD within 1e-5, top-1 within 0.1%, overall and per domain). The chart
// is an SVG with one line per domain and the overall one in each panel.
#include "llama_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

using namespace reap_test;

namespace {


std::string slurp(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void expect_same_numbers(const nlohmann::json & sweep, const nlohmann::json & eval, const std::string & what) {
    EXPECT_EQ(sweep.at("n_tokens").get<size_t>(), eval.at("n_tokens").get<size_t>()) << what;
    EXPECT_NEAR(sweep.at("ppl_pruned").get<double>() / eval.at("ppl_pruned").get<double>(), 1.0, 1e-4) << what;
    EXPECT_NEAR(sweep.at("kld_mean").get<double>(), eval.at("kld_mean").get<double>(), 1e-5) << what;
    EXPECT_NEAR(sweep.at("argmax_agree").get<double>(), eval.at("argmax_agree").get<double>(), 1e-3) << what;
    EXPECT_DOUBLE_EQ(sweep.at("ppl_base").get<double>(), eval.at("ppl_base").get<double>()) << what;
}

} // namespace

TEST(Sweep, TrainedModelMatchesRealPrunes) {
    const std::string dir = test_tmp_dir() + "/sweep";
    ::mkdir(dir.c_str(), 0755);
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    std::string err, out;
    const std::string calib = dir + "/calib.jsonl", heldout = dir + "/heldout.jsonl";
    ASSERT_TRUE(corpus_subset("calib", calib, {}, 3000, err)) << err;
    ASSERT_TRUE(corpus_subset("heldout", heldout, {"en", "ja", "code"}, 2500, err)) << err;
    const std::string sal = dir + "/saliency.gguf";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate -m " + shell_quote(model) + " --corpus " + shell_quote(calib) +
                      " -o " + shell_quote(sal) + " -c 256 -t 2 --force --no-progress", out), 0) << out;

    const std::string json = dir + "/sweep.json", plans = dir + "/plans";
    ::mkdir(plans.c_str(), 0755);
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " +
                      shell_quote(heldout) + " --keep 8,24,16 -c 128 -t 2 -o " + shell_quote(json) + " --plans-dir " +
                      shell_quote(plans) + " --force", out), 0) << out;
    EXPECT_NE(out.find("KLD mean"), std::string::npos) << out;
    const nlohmann::json sw = nlohmann::json::parse(slurp(json));
    ASSERT_EQ(sw.at("format"), "reap-sweep");
    const auto & pts = sw.at("points");
    ASSERT_EQ(pts.size(), 3u);
    EXPECT_EQ(pts[0].at("n_keep"), 24);
    EXPECT_EQ(pts[1].at("n_keep"), 16);
    EXPECT_EQ(pts[2].at("n_keep"), 8);
    // cutting more costs more
    EXPECT_GT(pts[2].at("overall").at("kld_mean").get<double>(), pts[0].at("overall").at("kld_mean").get<double>());
    EXPECT_GT(pts[0].at("overall").at("kld_mean").get<double>(), 0.0);

    // nested plans, read back from the files
    std::vector<nlohmann::json> plan_docs;
    for (const auto & p : pts) plan_docs.push_back(nlohmann::json::parse(slurp(p.at("plan").get<std::string>())));
    for (size_t i = 1; i < plan_docs.size(); ++i) {
        const auto & small = plan_docs[i].at("layers"), & big = plan_docs[i - 1].at("layers");
        ASSERT_EQ(small.size(), big.size());
        for (size_t l = 0; l < small.size(); ++l) {
            const auto bk = big[l].at("keep").get<std::vector<int64_t>>();
            const std::set<int64_t> bigset(bk.begin(), bk.end());
            for (int64_t e : small[l].at("keep").get<std::vector<int64_t>>()) {
                EXPECT_TRUE(bigset.count(e)) << "layer " << small[l].at("layer") << " expert " << e;
            }
        }
    }

    // the middle point against the file reap prune writes from its plan
    const auto & mid = pts[1];
    const std::string cut = dir + "/cut16.gguf";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " prune -m " + shell_quote(model) + " --plan " +
                      shell_quote(mid.at("plan").get<std::string>()) + " -o " + shell_quote(cut) + " --force", out), 0) << out;
    struct stat st;
    ASSERT_EQ(::stat(cut.c_str(), &st), 0);
    EXPECT_EQ((uint64_t) st.st_size, mid.at("predicted_bytes").get<uint64_t>());
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " -p " + shell_quote(cut) + " -f " +
                      shell_quote(heldout) + " -c 128 -t 2 --json 2>/dev/null", out), 0) << out;
    const nlohmann::json ev = nlohmann::json::parse(out);
    expect_same_numbers(mid.at("overall"), ev, "overall");
    for (const std::string d : {"en", "ja", "code"}) {
        expect_same_numbers(mid.at("domains").at(d), ev.at("domains").at(d), d);
    }

    // the chart: two panels of (3 domains + overall + file size) lines
    const std::string svg = slurp(dir + "/sweep.svg");
    ASSERT_EQ(svg.rfind("<svg", 0), 0u) << "no chart at " << dir << "/sweep.svg";
    size_t lines = 0;
    for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
    EXPECT_EQ(lines, 10u);

    // a size the model cannot run is refused before anything runs
    EXPECT_NE(run_cmd(shell_quote(reap_bin()) + " sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " +
                      shell_quote(heldout) + " --keep 16,2", out), 0);
    EXPECT_NE(out.find("--keep 2"), std::string::npos) << out;
}

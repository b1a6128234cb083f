// `reap sweep` end to end on the project's trained model, through the CLI:
// calibrate on a slice of the calib split, sweep three sizes over a slice of
// the held-out split, and check the sweep against the real thing: the plans
// it writes are nested (checked here), the predicted size of a point is the
// size of the file `reap prune` then writes from its plan, and `reap eval -p`
// of that file gives the point's numbers (perplexity within 1e-4 relative,
// mean KLD within 1e-5, top-1 within 0.1%, overall and per domain). The chart
// is an SVG with one line per domain and the overall one in each panel.
// With --needle and --generate, each size's needle cells, decoded texts and
// generated tokens are those of `reap eval --mask keep-N.json`, and the
// numbers it prints and records per size are the ones this file recomputes
// from the JSON's texts, tokens and expected values; --seed draws the
// needles' values (recomputed here), and `reap report --sweep` shows each
// size's behaviour numbers as masked estimates, outside Verified.
#include "behaviour_test_rules.h"
#include "llama_test_util.h"

#include "llama/sweep.h"

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

std::string slurp_sha256(const std::string & path) {
    std::string out;
    return run_cmd("sha256sum " + shell_quote(path), out) == 0 ? out.substr(0, 64) : out;
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
    // -t 1 throughout: the same archive and numbers as with two threads, at a fraction
    // of the CPU time on a busy machine, where a second ggml thread spins waiting.
    // -np 1: one 256-token window a decode attends over 256 cells, not 16 windows'
    // 4096 (3.4 against 5.0 CPU-s here); the sweep and the eval share the archive
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate -m " + shell_quote(model) + " --corpus " + shell_quote(calib) +
                      " -o " + shell_quote(sal) + " -c 256 -np 1 -t 1 --force --no-progress", out), 0) << out;

    const std::string json = dir + "/sweep.json", plans = dir + "/plans";
    ::mkdir(plans.c_str(), 0755);
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " +
                      shell_quote(heldout) + " --keep 8,24,16 -c 128 -t 1 -o " + shell_quote(json) + " --plans-dir " +
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
                      shell_quote(heldout) + " -c 128 -t 1 --json 2>/dev/null", out), 0) << out;
    const nlohmann::json ev = nlohmann::json::parse(out);
    expect_same_numbers(mid.at("overall"), ev, "overall");
    // the sweep records the -b/-ub its scoring passes ran at: those eval chose for the same text and memory
    EXPECT_GT(sw.at("input").at("n_ubatch").get<int>(), 0);
    EXPECT_EQ(sw.at("input").at("n_batch"), ev.at("n_batch"));
    EXPECT_EQ(sw.at("input").at("n_ubatch"), ev.at("n_ubatch"));
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

// Issue 27, item 4: `reap sweep --widths` scores width cuts by masks. A row
// of a count x width sweep (N = 16, K = 64 of 128 channels, ranked by the
// archive's ch_reap from calibrate --width-saliency) equals reap eval -p of
// the file reap prune writes from the row's plan (the tolerances of
// TrainedModelMatchesRealPrunes; the trained model's down is f32, so the
// requantisation is a copy), and its predicted size is that file's size.
TEST(Sweep, WidthRowEqualsEvalOfThePrunedFile) {
    const std::string dir = test_tmp_dir() + "/sweep-width";
    ::mkdir(dir.c_str(), 0755);
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    std::string err, out;
    const std::string calib = dir + "/calib.jsonl", heldout = dir + "/heldout.jsonl";
    ASSERT_TRUE(corpus_subset("calib", calib, {}, 400, err)) << err;
    ASSERT_TRUE(corpus_subset("heldout", heldout, {"en", "code"}, 1000, err)) << err;
    const std::string sal = dir + "/saliency.gguf";
    // -np 1 and -t 1 as in TrainedModelMatchesRealPrunes (why there)
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate -m " + shell_quote(model) + " --corpus " + shell_quote(calib) +
                      " -o " + shell_quote(sal) + " -c 256 -np 1 -t 1 --force --no-progress --width-saliency", out), 0) << out;

    const std::string json = dir + "/sweep.json", plans = dir + "/plans";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " +
                      shell_quote(heldout) + " --keep 16 --widths 64,128 -c 128 -t 1 -o " + shell_quote(json) + " --plans-dir " +
                      shell_quote(plans) + " --force", out), 0) << out;
    EXPECT_NE(out.find("width"), std::string::npos) << out;
    const nlohmann::json sw = nlohmann::json::parse(slurp(json));
    const auto & pts = sw.at("points");
    ASSERT_EQ(pts.size(), 2u);
    EXPECT_EQ(pts[0].at("n_keep"), 16);   // the full width first
    EXPECT_FALSE(pts[0].contains("width"));
    EXPECT_EQ(pts[1].at("n_keep"), 16);
    EXPECT_EQ(pts[1].at("width"), 64);
    EXPECT_LT(pts[1].at("predicted_bytes").get<uint64_t>(), pts[0].at("predicted_bytes").get<uint64_t>());
    EXPECT_GT(pts[1].at("overall").at("kld_mean").get<double>(), pts[0].at("overall").at("kld_mean").get<double>());
    const nlohmann::json plan = nlohmann::json::parse(slurp(pts[1].at("plan").get<std::string>()));
    EXPECT_EQ(plan.at("width").at("keep"), 64);
    EXPECT_EQ(plan.at("provenance").at("channel_score"), "reap");

    const std::string cut = dir + "/cut16w64.gguf";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " prune -m " + shell_quote(model) + " --plan " +
                      shell_quote(pts[1].at("plan").get<std::string>()) + " -o " + shell_quote(cut) + " --force", out), 0) << out;
    struct stat st;
    ASSERT_EQ(::stat(cut.c_str(), &st), 0);
    EXPECT_EQ((uint64_t) st.st_size, pts[1].at("predicted_bytes").get<uint64_t>());
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " -p " + shell_quote(cut) + " -f " +
                      shell_quote(heldout) + " -c 128 -t 1 --json 2>/dev/null", out), 0) << out;
    const nlohmann::json ev = nlohmann::json::parse(out);
    expect_same_numbers(pts[1].at("overall"), ev, "overall");
    for (const std::string d : {"en", "code"}) expect_same_numbers(pts[1].at("domains").at(d), ev.at("domains").at(d), d);

    // the chart: KLD and top-1 against file size, one line per width
    const std::string svg = slurp(dir + "/sweep.svg");
    size_t lines = 0;
    for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
    EXPECT_EQ(lines, 4u);
    // refused before anything runs: a K the model cannot take, and widths with behaviour
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " +
                      shell_quote(heldout) + " --widths 129", out), 2) << out;
    EXPECT_NE(out.find("--widths: width 129 out of range [1, 128]"), std::string::npos) << out;
}

namespace {

// The sweep's behaviour row of a size, as this test recomputes it from the JSON.
std::string behaviour_row(const std::string & n, const nlohmann::json & sw, size_t m) {
    using namespace behaviour_test;
    const auto & cells = sw.at("needle").at("cells");
    size_t n_exact = 0;
    for (const auto & c : cells) n_exact += exact(c.at("models")[m].at("text"), c.at("value"));
    const auto & g = sw.at("generate");
    const gen_row r = recompute(g.at("models")[m].at("outputs"), g.at("models")[0].at("outputs"), "", g.at("loop_span"), g.at("loop_repeats"));
    char buf[160];
    snprintf(buf, sizeof buf, "  %6s %9s %7.1f%% %7.1f%% %10.4f %9.2f", n.c_str(),
             (std::to_string(n_exact) + "/" + std::to_string(cells.size())).c_str(), 100 * r.loop, 100 * r.ended, r.d4, r.agree);
    return buf;
}

// The behaviour cells `reap report --sweep` writes after a size's KLD columns,
// recomputed from the sweep JSON: needle n/m | loop | ended | distinct-4 | agree.
std::string card_behaviour_cells(const nlohmann::json & sw, size_t m) {
    const auto & cells = sw.at("needle").at("cells");
    size_t n_exact = 0;
    for (const auto & c : cells) n_exact += behaviour_test::exact(c.at("models")[m].at("text"), c.at("value"));
    const auto & g = sw.at("generate");
    const behaviour_test::gen_row r =
        behaviour_test::recompute(g.at("models")[m].at("outputs"), g.at("models")[0].at("outputs"), "", g.at("loop_span"), g.at("loop_repeats"));
    char buf[160];
    snprintf(buf, sizeof buf, " %zu/%zu | %.1f%% | %.1f%% | %.4f | %.1f |", n_exact, cells.size(), 100 * r.loop, 100 * r.ended, r.d4, r.agree);
    return buf;
}

// The section of a markdown card that starts at `heading` (up to the next "## ").
std::string card_section(const std::string & md, const std::string & heading) {
    const size_t b = md.find(heading);
    if (b == std::string::npos) return "";
    const size_t e = md.find("\n## ", b + heading.size());
    return md.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

} // namespace

// Issue 25, item 3: `reap sweep --needle --generate` measures each size as
// `reap eval --mask` measures its plan: the same cells and values, the same
// decoded texts, the same generated tokens; the base runs once. Every number
// printed and recorded per size is recomputed here from the JSON.
TEST(Sweep, NeedleAndGenerateEqualEvalMask) {
    const std::string dir = test_tmp_dir() + "/sweep-behaviour";
    ::mkdir(dir.c_str(), 0755);
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    std::string err, out;
    const std::string calib = dir + "/calib.jsonl", heldout = dir + "/heldout.jsonl", prompts = dir + "/prompts.jsonl";
    ASSERT_TRUE(corpus_subset("calib", calib, {}, 2000, err)) << err;
    ASSERT_TRUE(corpus_subset("heldout", heldout, {"en"}, 2500, err)) << err;
    std::ofstream(prompts) << behaviour_test::prompts_from(source_dir() + "/data/corpus/heldout.jsonl");
    const std::string sal = dir + "/saliency.gguf";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate -m " + shell_quote(model) + " --corpus " + shell_quote(calib) +
                      " -o " + shell_quote(sal) + " -c 256 -t 1 --force --no-progress", out), 0) << out;
    const std::string behaviour = " --needle --needle-lengths 64,128 --needle-depths 0.2,0.8 --generate " + shell_quote(prompts) +
                                  " --max-new 32 --seed 5 -t 1";
    const std::string json = dir + "/sweep.json", plans = dir + "/plans";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " + shell_quote(heldout) +
                      " --keep 16,8 -c 128 -o " + shell_quote(json) + " --plans-dir " + shell_quote(plans) + behaviour + " --force 2>/dev/null",
                      out), 0) << out;
    const nlohmann::json sw = nlohmann::json::parse(slurp(json));
    const auto & nd = sw.at("needle"), & gd = sw.at("generate");
    ASSERT_EQ(nd.at("cells").size(), 4u);
    ASSERT_EQ(nd.at("exact").size(), 3u);   // the base once, then each size
    ASSERT_EQ(gd.at("models").size(), 3u);
    EXPECT_EQ(gd.at("models")[0].at("name"), "base");
    const auto & pts = sw.at("points");
    ASSERT_EQ(pts.size(), 2u);
    EXPECT_NE(out.find(behaviour_row("base", sw, 0)), std::string::npos) << behaviour_row("base", sw, 0) << "\n" << out;
    for (size_t i = 0; i < pts.size(); ++i) {
        const int n = pts[i].at("n_keep");
        const size_t m = i + 1;
        ASSERT_EQ(gd.at("models")[m].at("name"), "keep " + std::to_string(n));
        EXPECT_NE(out.find(behaviour_row(std::to_string(n), sw, m)), std::string::npos) << behaviour_row(std::to_string(n), sw, m) << "\n" << out;
        // the point's own numbers, against the sections' texts and tokens
        size_t n_exact = 0;
        for (const auto & c : nd.at("cells")) n_exact += behaviour_test::exact(c.at("models")[m].at("text"), c.at("value"));
        EXPECT_EQ(pts[i].at("needle").at("n_exact").get<size_t>(), n_exact);
        EXPECT_EQ(pts[i].at("needle").at("n_cells").get<size_t>(), 4u);
        const behaviour_test::gen_row r = behaviour_test::recompute(gd.at("models")[m].at("outputs"), gd.at("models")[0].at("outputs"), "", 8, 3);
        EXPECT_NEAR(pts[i].at("generate").at("loop_rate").get<double>(), r.loop, 1e-12);
        EXPECT_NEAR(pts[i].at("generate").at("termination_rate").get<double>(), r.ended, 1e-12);
        EXPECT_NEAR(pts[i].at("generate").at("distinct_4").get<double>(), r.d4, 1e-12);
        EXPECT_NEAR(pts[i].at("generate").at("mean_agreement").get<double>(), r.agree, 1e-12);
        // the mask it measured is the plan --plans-dir wrote
        EXPECT_EQ(gd.at("measured").at("candidates")[i].at("plan_sha256"), slurp_sha256(pts[i].at("plan")));
    }

    // the smaller size against reap eval --mask of its plan file
    const std::string plan8 = pts[1].at("plan");
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " --mask " + shell_quote(plan8) + " -f " +
                      shell_quote(heldout) + behaviour + " --json 2>/dev/null", out), 0) << out;
    const nlohmann::json ev = nlohmann::json::parse(out);
    ASSERT_EQ(ev.at("needle").at("cells").size(), nd.at("cells").size());
    for (size_t c = 0; c < nd.at("cells").size(); ++c) {
        const auto & a = nd.at("cells")[c], & b = ev.at("needle").at("cells")[c];
        for (const char * k : {"length", "depth", "trial", "value", "insert_at", "prompt_tokens"}) EXPECT_EQ(a.at(k), b.at(k)) << k << " of cell " << c;
        EXPECT_EQ(a.at("models")[0].at("text"), b.at("models")[0].at("text")) << "base, cell " << c;
        EXPECT_EQ(a.at("models")[2].at("text"), b.at("models")[1].at("text")) << "keep 8, cell " << c;
    }
    const auto & eo = ev.at("generate").at("models");
    ASSERT_EQ(eo.size(), 2u);
    for (size_t m : {0, 1}) {
        const auto & a = gd.at("models")[m == 0 ? 0 : 2].at("outputs"), & b = eo[m].at("outputs");
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].at("tokens"), b[i].at("tokens")) << "model " << m << " prompt " << i;
            EXPECT_EQ(a[i].at("text"), b[i].at("text")) << "model " << m << " prompt " << i;
            EXPECT_EQ(a[i].at("terminated"), b[i].at("terminated")) << "model " << m << " prompt " << i;
        }
    }
    // the cut writes something else than the base (a mask that did nothing would not)
    size_t differ = 0;
    for (size_t i = 0; i < eo[0].at("outputs").size(); ++i) differ += eo[0].at("outputs")[i].at("tokens") != eo[1].at("outputs")[i].at("tokens");
    EXPECT_GT(differ, 0u);

    // --seed (the ranking's seed, shared) drew the needles: recorded, and every value is the rule's
    EXPECT_EQ(nd.at("seed").get<uint64_t>(), 5u);
    for (size_t c = 0; c < nd.at("cells").size(); ++c) EXPECT_EQ(nd.at("cells")[c].at("value"), behaviour_test::needle_value(5, c)) << "cell " << c;
    // and --help says so on --seed's own row
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " sweep --help", out), 0) << out;
    const size_t seed_row = out.find("\n  --seed S");
    ASSERT_NE(seed_row, std::string::npos) << out;
    const std::string row = out.substr(seed_row, out.find("\n  --", seed_row + 1) - seed_row);
    EXPECT_NE(row.find("--needle"), std::string::npos) << row;
    EXPECT_NE(row.find("--temp"), std::string::npos) << row;

    // reap report --sweep on the keep-8 build: each size's row carries its behaviour numbers,
    // as recomputed here, under the masked-estimate rule and not under Verified
    const std::string build = dir + "/keep8.gguf", card = dir + "/card";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " prune -m " + shell_quote(model) + " --plan " + shell_quote(plan8) + " -o " +
                      shell_quote(build) + " --force", out), 0) << out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " report -m " + shell_quote(model) + " --plan " + shell_quote(plan8) + " " + shell_quote(build) +
                      " --saliency " + shell_quote(sal) + " --sweep " + shell_quote(json) + " -o " + shell_quote(card) + " --force", out), 0) << out;
    const std::string md = slurp(card + "/README.md");
    const std::string sizes = card_section(md, "## Other sizes");
    ASSERT_FALSE(sizes.empty()) << md;
    EXPECT_NE(sizes.find("| needle (masked) | loop (masked) | ended (masked) | distinct-4 (masked) | agree (masked) |"), std::string::npos) << sizes;
    for (size_t i = 0; i < pts.size(); ++i) {
        const std::string n = std::to_string(pts[i].at("n_keep").get<int>()) + (i == 1 ? " (this N)" : "");
        const size_t at = sizes.find("\n| " + n + " |");
        ASSERT_NE(at, std::string::npos) << n << "\n" << sizes;
        const std::string line = sizes.substr(at + 1, sizes.find('\n', at + 1) - at - 1);
        const std::string cells = card_behaviour_cells(sw, i + 1);
        EXPECT_EQ(line.substr(line.size() - std::min(line.size(), cells.size())), cells) << line;
    }
    const std::string base = card_behaviour_cells(sw, 0);
    const size_t slash = base.find('/');
    EXPECT_NE(sizes.find("**masked estimates**"), std::string::npos) << sizes;
    EXPECT_NE(sizes.find("The source: needle " + base.substr(1, base.find(' ', slash) - 1) + " exact"), std::string::npos) << sizes;
    const std::string verified = card_section(md, "## Verified");
    EXPECT_EQ(verified.find("needle"), std::string::npos) << verified;
    EXPECT_EQ(verified.find("loop"), std::string::npos) << verified;
}

namespace {

// A record of several sources at two budgets, as the sweep fills it.
reap::sweep_record two_budget_record(const std::vector<std::string> & paths) {
    reap::sweep_record s;
    s.model.arch = "qwen3moe";
    s.model.n_expert = 16;
    s.model.n_expert_used = 2;
    s.reference.model = "ref.gguf";
    s.saliency.file = "sal.gguf";
    s.saliency.method = "reap";
    s.input.file = "heldout.txt";
    s.input.n_windows = 31;
    s.input.n_ctx = 128;
    for (size_t i = 0; i < paths.size(); ++i) {
        reap::sweep_source src;
        src.path = paths[i];
        for (const char * budget : {"7031304", "900000000"}) {
            reap::sweep_record_point q;
            q.request_kind = "budget";
            q.request_text = budget;
            q.n_keep = budget[0] == '7' ? 9 + (int64_t) i : 16;
            q.predicted_bytes = 6000000 + 1000000 * i;
            q.overall.kld_mean = 0.5 / (double) (i + 1);
            q.overall.argmax_agree = 0.6 + 0.01 * (double) i;
            src.points.push_back(q);
        }
        s.sources.push_back(src);
    }
    s.frontier = reap::sweep_frontier(s.sources);
    return s;
}

// The table print_sweep_sources writes: its lines.
std::vector<std::string> printed_lines(const reap::sweep_record & s) {
    char * buf = nullptr;
    size_t len = 0;
    FILE * f = open_memstream(&buf, &len);
    reap::print_sweep_sources(f, s);
    std::fclose(f);
    std::vector<std::string> lines;
    std::istringstream in(std::string(buf, len));
    std::free(buf);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

// Every row of the table (the lines after the header up to the blank line)
// has each column where the header has it: the request and the source start
// under their titles, N, the file size, KLD and top-1 end under theirs.
void expect_aligned(const std::vector<std::string> & lines, const std::vector<std::string> & shown) {
    size_t h = 0;
    while (h < lines.size() && lines[h].find("  request ") != 0) ++h;
    ASSERT_LT(h, lines.size()) << "no table header";
    const std::string & head = lines[h];
    const size_t source_at = head.find("source"), n_end = head.find(" N ") + 2;
    const size_t size_end = head.find("file size") + 9, kld_end = head.find("KLD mean") + 8, top1_end = head.find("top-1") + 5;
    size_t rows = 0;
    for (size_t i = h + 1; i < lines.size() && !lines[i].empty(); ++i, ++rows) {
        const std::string & row = lines[i];
        SCOPED_TRACE(row);
        EXPECT_EQ(row.find("budget "), 2u);
        const std::string & label = shown[rows % shown.size()];
        EXPECT_EQ(row.find(label + " "), source_at);
        std::istringstream cols(row.substr(source_at + label.size()));
        std::string n, size_a, size_b, size_c, size_d, kld, top1;
        cols >> n >> size_a >> size_b >> size_c >> size_d >> kld >> top1;   // "6.00 MB (5.72 MiB)" is four words
        EXPECT_EQ(row.find(" " + n + " ", source_at + label.size()) + 1 + n.size(), n_end);
        EXPECT_EQ(row.find(size_d, source_at + label.size()) + size_d.size(), size_end);
        EXPECT_EQ(row.rfind(kld) + kld.size(), kld_end);
        EXPECT_EQ(row.size(), top1_end);
        EXPECT_EQ(top1.back(), '%');
    }
    EXPECT_EQ(rows, 2 * shown.size());
}

} // namespace

// The several-source table stays aligned whatever the paths: long paths with
// distinct file names are shown by file name (each path listed once above),
// paths that share a file name in full; columns pad from their widest entry.
TEST(SweepTable, ColumnsAlignWithLongSourcePaths) {
    const std::vector<std::string> long_paths = {
        "out/a-very-long-directory-name/of/the/quantised/sources/reap-moe-wide-Q8_0.gguf",
        "out/a-very-long-directory-name/of/the/quantised/sources/reap-moe-wide-IQ4_XS.gguf", "Q6_K.gguf"};
    const std::vector<std::string> lines = printed_lines(two_budget_record(long_paths));
    expect_aligned(lines, {"reap-moe-wide-Q8_0.gguf", "reap-moe-wide-IQ4_XS.gguf", "Q6_K.gguf"});
    const std::string all = [&] { std::string a; for (const auto & l : lines) a += l + "\n"; return a; }();
    EXPECT_NE(all.find("  source reap-moe-wide-Q8_0.gguf: " + long_paths[0] + "\n"), std::string::npos) << all;
    EXPECT_EQ(all.find("  source Q6_K.gguf:"), std::string::npos) << all;   // shown as given: nothing to list
    EXPECT_NE(all.find("budget 7031304: Q6_K.gguf wins with N = 11 "), std::string::npos) << all;
    EXPECT_NE(all.find(" over reap-moe-wide-IQ4_XS.gguf (N = 10)"), std::string::npos) << all;

    const std::vector<std::string> same_name = {"first/run/of/the/quantiser/Q4_K_M.gguf", "second/Q4_K_M.gguf"};
    expect_aligned(printed_lines(two_budget_record(same_name)), same_name);

    // two sources that score alike (byte-identical copies): a tie, not a win
    // "by 0.000000 nats" (issue 37, item 14)
    reap::sweep_record tie = two_budget_record({"a/Q8_0.gguf", "b/Q8_0-copy.gguf"});
    for (auto & q : tie.sources[1].points) {
        q.n_keep = tie.sources[0].points[&q - &tie.sources[1].points[0]].n_keep;
        q.predicted_bytes = tie.sources[0].points[&q - &tie.sources[1].points[0]].predicted_bytes;
        q.overall = tie.sources[0].points[&q - &tie.sources[1].points[0]].overall;
    }
    tie.frontier = reap::sweep_frontier(tie.sources);
    std::string printed;
    for (const auto & l : printed_lines(tie)) printed += l + "\n";
    EXPECT_EQ(printed.find("by 0.000000 nats"), std::string::npos) << printed;
    EXPECT_NE(printed.find("tied with"), std::string::npos) << printed;
}

// Two outputs of one run that resolve to the same file, or a folder holding a
// journal that is not reap's, are refused before any work: a plan of --plans-dir over the sweep's JSON (-o d/keep-4.json
// --plans-dir d), directly or through a link to the JSON's name; nothing is
// written. Before, the plan replaced the JSON, "wrote d/keep-4.json" was
// printed twice and the exit status was 0 (issue 37, item 1).
TEST(SweepOutputs, APlanOverTheJsonIsRefusedBeforeScoring) {
    const std::string dir = test_tmp_dir() + "/sweep-outputs", reap = shell_quote(reap_bin());
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    std::string err, out;
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(dir) + " && mkdir -p " + shell_quote(dir + "/d") + " " + shell_quote(dir + "/e"), out), 0);
    const std::string calib = dir + "/calib.jsonl", text = dir + "/heldout.txt", sal = dir + "/saliency.gguf";
    ASSERT_TRUE(corpus_subset("calib", calib, {"en"}, 1500, err) && heldout_text(text, 600, err)) << err;
    ASSERT_EQ(run_cmd(reap + " calibrate -m " + shell_quote(model) + " --corpus " + shell_quote(calib) + " -o " + shell_quote(sal) +
                      " -c 128 -t 1 --no-progress", out), 0) << out;
    const std::string sweep = reap + " sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " + shell_quote(text) +
                              " --keep 4 -c 128 -t 1 -q";
    // the JSON's name is the plan's
    EXPECT_EQ(run_cmd(sweep + " -o " + shell_quote(dir + "/d/keep-4.json") + " --plans-dir " + shell_quote(dir + "/d"), out), 2) << out;
    EXPECT_NE(out.find("refusing to write"), std::string::npos) << out;
    EXPECT_EQ(out.find("KLD"), std::string::npos) << "refused after scoring: " << out;
    EXPECT_FALSE(file_exists(dir + "/d/keep-4.json"));
    // the chart's name is the plan's
    EXPECT_EQ(run_cmd(sweep + " -o " + shell_quote(dir + "/d/s.json") + " --plot " + shell_quote(dir + "/d/keep-4.json") +
                      " --plans-dir " + shell_quote(dir + "/d"), out), 2) << out;
    EXPECT_NE(out.find("refusing to write"), std::string::npos) << out;
    // the plans' folder is a link to the JSON's
    ASSERT_EQ(::symlink((dir + "/e").c_str(), (dir + "/link").c_str()), 0);
    EXPECT_EQ(run_cmd(sweep + " -o " + shell_quote(dir + "/e/keep-4.json") + " --plans-dir " + shell_quote(dir + "/link"), out), 2) << out;
    EXPECT_NE(out.find("refusing to write"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/e/keep-4.json"));
    EXPECT_FALSE(file_exists(dir + "/d/s.json"));

    // a journal that is not reap's in the plans' folder (it names a file of
    // another folder): refused before the scoring too (issue 37, item 12)
    ASSERT_EQ(run_cmd("mkdir -p " + shell_quote(dir + "/f") + " " + shell_quote(dir + "/victims"), out), 0);
    std::string journal = "reap-journal 1";
    journal.push_back('\0');
    for (const std::string & e : {dir + "/victims/.v.txt.reap-tmp.1.abcdef", dir + "/victims/v.txt"}) {
        journal += e;
        journal.push_back('\0');
    }
    std::ofstream(dir + "/f/.x.json.reap-journal", std::ios::binary) << journal;
    EXPECT_EQ(run_cmd(sweep + " -o " + shell_quote(dir + "/s2.json") + " --plans-dir " + shell_quote(dir + "/f"), out), 2) << out;
    EXPECT_NE(out.find("a journal names only files of its own folder"), std::string::npos) << out;
    EXPECT_EQ(out.find("KLD"), std::string::npos) << "refused after scoring: " << out;
    EXPECT_FALSE(file_exists(dir + "/s2.json"));

    // several sources on a domain-tagged corpus: said as it is (before, the
    // message was about a --kld-base that was never given; issue 37, item 14)
    ASSERT_EQ(run_cmd("cp " + shell_quote(model) + " " + shell_quote(dir + "/copy.gguf"), out), 0);
    EXPECT_EQ(run_cmd(reap + " sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -m " + shell_quote(dir + "/copy.gguf") +
                      " --reference " + shell_quote(model) + " -f " + shell_quote(calib) + " --keep 4 -c 128 -t 1 -q", out), 2) << out;
    EXPECT_NE(out.find("is a domain-tagged corpus"), std::string::npos) << out;
    EXPECT_EQ(out.find("--kld-base works"), std::string::npos) << out;
}

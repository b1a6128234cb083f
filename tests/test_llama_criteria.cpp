// The criteria beyond REAP (issue 53), end to end through the CLI:
//   * `reap score` (AIMER from the weights alone) against an independent
//     computation: tools/aimer_reference.py dequantises the same file with
//     gguf-py (not ggml) and takes mean|w| / rms(w) in numpy float64; the
//     scores agree to 1e-6 relative and `reap plan --method aimer` keeps what
//     the reference's order keeps, for F32, F16, BF16, Q8_0, Q4_K, IQ4_XS and
//     a split set (reap-moe-wide), and other layouts of the arch zoo;
//   * what `reap score` refuses (a file with no routed experts, an existing
//     output) and what the planner refuses (aimer on a calibration archive,
//     a calibration method on a weights archive, man on an imatrix archive),
//     each exit 2 with nothing written;
//   * `reap sweep --methods`: each method's point equals `reap eval --mask`
//     of that method's plan, one base pass for all of them.
// MAN and MSAN against the reference forward: test_llama_calibrate.cpp
// (Calibrate.TrainedModelMatchesReferenceForward).
#include "llama_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

using namespace reap_test;

namespace {

std::string slurp(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string reap_cmd(const std::string & args) { return shell_quote(reap_bin()) + " " + args; }

// The reference's scores of `model` (aimer_reference.py), or an empty object with `err` set.
nlohmann::json reference_scores(const std::string & model, const std::string & out_json, std::string & err) {
    std::string out;
    const std::string cmd = shell_quote(python()) + " " + shell_quote(source_dir() + "/tools/aimer_reference.py") + " " +
                            shell_quote(model) + " --out " + shell_quote(out_json);
    if (run_cmd(cmd, out) != 0) {
        err = cmd + ": " + out;
        return {};
    }
    return nlohmann::json::parse(slurp(out_json));
}

// The scores reap score wrote (weights.aimer, [n_expert, n_layer]), read from
// the archive's bytes by gguf-py rather than by the project's own reader.
nlohmann::json archive_scores(const std::string & archive, const std::string & out_json, std::string & err) {
    const std::string script =
        "import sys, json, os\n"
        "sys.path.insert(0, os.path.join(sys.argv[1], 'third_party', 'llama.cpp', 'gguf-py'))\n"
        "import gguf, numpy as np\n"
        "r = gguf.GGUFReader(sys.argv[2])\n"
        "t = [x for x in r.tensors if x.name == 'weights.aimer'][0]\n"
        "n_expert = int(t.shape[0])\n"
        "v = np.asarray(t.data, dtype=np.float64).reshape(-1, n_expert)\n"
        "json.dump({'n_expert': n_expert, 'rows': v.tolist()}, open(sys.argv[3], 'w'))\n";
    const std::string py = out_json + ".py";
    std::ofstream(py) << script;
    std::string out;
    if (run_cmd(shell_quote(python()) + " " + shell_quote(py) + " " + shell_quote(source_dir()) + " " + shell_quote(archive) + " " +
                    shell_quote(out_json), out) != 0) {
        err = out;
        return {};
    }
    return nlohmann::json::parse(slurp(out_json));
}

// Scores `model` with reap score and with the reference; the scores agree to
// 1e-6 relative and the aimer plan at n_keep keeps the reference's lowest n_keep
// (of each of n_group groups, n_keep / n_group, for a group-limited router).
void expect_score_equals_reference(const std::string & model, const std::string & dir, const std::string & tag, int n_keep,
                                   int n_group = 1) {
    std::string err, out;
    const std::string scores = dir + "/" + tag + ".scores.gguf";
    ASSERT_EQ(run_cmd(reap_cmd("score -m " + shell_quote(model) + " -o " + shell_quote(scores) + " --force -q"), out), 0) << tag << ": " << out;
    const nlohmann::json ref = reference_scores(model, dir + "/" + tag + ".ref.json", err);
    ASSERT_FALSE(ref.is_null()) << err;
    const nlohmann::json ours = archive_scores(scores, dir + "/" + tag + ".ours.json", err);
    ASSERT_FALSE(ours.is_null()) << err;
    const int64_t E = ref.at("n_expert").get<int64_t>();
    ASSERT_EQ(ours.at("n_expert").get<int64_t>(), E);
    double worst = 0;
    size_t layers = 0;
    for (const auto & [layer, row] : ref.at("layers").items()) {
        const auto & mine = ours.at("rows").at((size_t) std::stoi(layer));
        for (int64_t e = 0; e < E; ++e) {
            const double r = row.at(e).get<double>(), m = mine.at(e).get<double>();
            worst = std::max(worst, std::fabs(m - r) / std::fabs(r));
        }
        ++layers;
    }
    EXPECT_GT(layers, 0u) << tag;
    EXPECT_LE(worst, 1e-6) << tag << ": largest relative difference from the reference";
    printf("%s: %zu layers, largest relative difference %.2e\n", tag.c_str(), layers, worst);

    // the plan keeps the reference's lowest n_keep per layer
    const std::string plan = dir + "/" + tag + ".plan.json";
    ASSERT_EQ(run_cmd(reap_cmd("plan " + shell_quote(scores) + " -m " + shell_quote(model) + " --keep " + std::to_string(n_keep) +
                               " -o " + shell_quote(plan) + " --force"), out), 0) << tag << ": " << out;
    const nlohmann::json p = nlohmann::json::parse(slurp(plan));
    EXPECT_EQ(p.at("provenance").at("method"), "aimer") << tag;
    for (const auto & l : p.at("layers")) {
        auto keep = l.at("keep").get<std::vector<int64_t>>();
        auto order = ref.at("keep_order").at(std::to_string(l.at("layer").get<int>())).get<std::vector<int64_t>>();
        std::vector<int64_t> want;
        std::vector<int> taken(n_group, 0);
        const int64_t per_group = E / n_group;
        for (int64_t e : order) {   // ascending AIMER: the first of each group until it has its share
            if (taken[e / per_group] < n_keep / n_group) {
                ++taken[e / per_group];
                want.push_back(e);
            }
        }
        std::sort(want.begin(), want.end());
        EXPECT_EQ(keep, want) << tag << " layer " << l.at("layer");
    }
}

}  // namespace

// reap-moe-wide's 256-wide rows take llama-quantize's k- and i-quants without
// fallback (checked here from the file's types): F32, its own F16, BF16, Q8_0,
// Q4_K_M (q4_K) and IQ4_XS copies, and a split set of the Q4_K_M copy.
TEST(Score, AimerEqualsAnIndependentDequantisation) {
    if (!has_llama_tools()) GTEST_SKIP() << "llama-quantize / llama-imatrix not built";
    const std::string dir = test_tmp_dir() + "/score";
    ::mkdir(dir.c_str(), 0755);
    std::string err, out;
    const std::string wide = source_dir() + "/models/reap-moe-wide.gguf";
    expect_score_equals_reference(wide, dir, "F16", 6);
    struct cse { const char * type, * ggml_name; };
    for (const cse & c : {cse{"F32", "f32"}, cse{"BF16", "bf16"}, cse{"Q8_0", "q8_0"}, cse{"Q4_K_M", "q4_K"}, cse{"IQ4_XS", "iq4_xs"}}) {
        const std::string q = dir + "/wide-" + c.type + ".gguf";
        ASSERT_TRUE(run_to_file(shell_quote(llama_bin_dir() + "/llama-quantize") + " " + shell_quote(wide) + " @OUT@ " + c.type + " 1", q, err))
            << err;
        ASSERT_EQ(run_cmd(reap_cmd("inspect " + shell_quote(q)), out), 0) << out;
        EXPECT_NE(out.find("\n" + std::string(c.ggml_name) + " "), std::string::npos) << c.type << ": no " << c.ggml_name << " tensors\n" << out;
        expect_score_equals_reference(q, dir, c.type, 6);
    }
    // a split set, read as one model: the same scores as the file it was split from
    const std::string prefix = dir + "/split";
    run_cmd("rm -f " + shell_quote(prefix) + "-0000*", out);
    ASSERT_EQ(run_cmd(shell_quote(llama_bin_dir() + "/llama-gguf-split") + " --split --split-max-tensors 12 " +
                          shell_quote(dir + "/wide-Q4_K_M.gguf") + " " + shell_quote(prefix), out), 0) << out;
    std::string first;
    ASSERT_EQ(run_cmd("ls " + shell_quote(prefix) + "-00001-of-*.gguf", first), 0) << first;
    first = first.substr(0, first.find('\n'));
    EXPECT_EQ(first.find("-of-00001"), std::string::npos) << "not split: " << first;
    expect_score_equals_reference(first, dir, "split", 6);
    const nlohmann::json a = archive_scores(dir + "/split.scores.gguf", dir + "/split.cmp.json", err);
    const nlohmann::json b = archive_scores(dir + "/Q4_K_M.scores.gguf", dir + "/q4.cmp.json", err);
    EXPECT_EQ(a.at("rows"), b.at("rows"));
}

// The arch zoo's other layouts agree too: deepseek2's group-limited router (the
// plan keeps each group's share), gpt-oss's MXFP4 slabs (their biases are not
// weights), llama4's, glm4moe's and qwen2moe's shared experts (not scored),
// kimi-k3's latent experts, and gate and up fused in one ffn_gate_up_exps.
TEST(Score, OtherLayoutsEqualTheReference) {
    const std::string dir = test_tmp_dir() + "/score-zoo";
    ::mkdir(dir.c_str(), 0755);
    struct cse { const char * arch; int n_keep, n_group; };
    for (const cse & c : {cse{"deepseek2", 8, 4}, cse{"glm4moe", 4, 1}, cse{"gpt-oss", 4, 1}, cse{"kimi-k3", 4, 1}, cse{"llama4", 4, 1},
                          cse{"qwen2moe", 4, 1}, cse{"qwen3moe-fused", 4, 1}}) {
        std::string err;
        const std::string m = zoo_model(c.arch, err);
        ASSERT_FALSE(m.empty()) << c.arch << ": " << err;
        expect_score_equals_reference(m, dir, c.arch, c.n_keep, c.n_group);
    }
}

TEST(Score, RefusesWhatItCannotScore) {
    const std::string dir = test_tmp_dir() + "/score-bad";
    ::mkdir(dir.c_str(), 0755);
    std::string err, out;
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    const std::string scores = dir + "/scores.gguf";
    ::unlink(scores.c_str());
    // a GGUF with no routed experts: a saliency archive is one
    ASSERT_EQ(run_cmd(reap_cmd("score -m " + shell_quote(model) + " -o " + shell_quote(scores) + " -q"), out), 0) << out;
    const std::string again = dir + "/again.gguf";
    ::unlink(again.c_str());
    EXPECT_EQ(run_cmd(reap_cmd("score -m " + shell_quote(scores) + " -o " + shell_quote(again)), out), 2) << out;
    EXPECT_NE(out.find("no routed experts"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(again));
    // a llama model without experts (llama.cpp's vocabulary file of one)
    const std::string dense = source_dir() + "/third_party/llama.cpp/models/ggml-vocab-llama-spm.gguf";
    EXPECT_EQ(run_cmd(reap_cmd("score -m " + shell_quote(dense) + " -o " + shell_quote(again)), out), 2) << out;
    EXPECT_NE(out.find("not a Mixture-of-Experts model"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(again));
    // a slab of a type ggml does not have (type 4, removed), patched into a copy with gguf-py
    const std::string bad = dir + "/bad-type.gguf";
    ASSERT_EQ(run_cmd("cp " + shell_quote(model) + " " + shell_quote(bad), out), 0) << out;
    const std::string patch = "import sys, os\nsys.path.insert(0, os.path.join(sys.argv[1], 'third_party', 'llama.cpp', 'gguf-py'))\n"
                              "import gguf\nr = gguf.GGUFReader(sys.argv[2], 'r+')\n"
                              "t = [x for x in r.tensors if x.name == 'blk.0.ffn_up_exps.weight'][0]\nt.field.parts[-2][0] = 4\n";
    std::ofstream(dir + "/patch.py") << patch;
    ASSERT_EQ(run_cmd(shell_quote(python()) + " " + shell_quote(dir + "/patch.py") + " " + shell_quote(source_dir()) + " " + shell_quote(bad), out), 0)
        << out;
    EXPECT_EQ(run_cmd(reap_cmd("score -m " + shell_quote(bad) + " -o " + shell_quote(again)), out), 2) << out;
    EXPECT_NE(out.find("'blk.0.ffn_up_exps.weight': unknown or removed ggml type 4"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(again));
    // an existing output without --force
    const std::string before = slurp(scores);
    EXPECT_EQ(run_cmd(reap_cmd("score -m " + shell_quote(model) + " -o " + shell_quote(scores)), out), 2) << out;
    EXPECT_NE(out.find("exists"), std::string::npos) << out;
    EXPECT_EQ(slurp(scores), before);

    // the planner: each method with the archive that holds its statistic
    const std::string calib = dir + "/calib.jsonl", sal = dir + "/saliency.gguf", plan = dir + "/plan.json";
    ASSERT_TRUE(corpus_subset("calib", calib, {}, 1500, err)) << err;
    ASSERT_EQ(run_cmd(reap_cmd("calibrate -m " + shell_quote(model) + " --corpus " + shell_quote(calib) + " -o " + shell_quote(sal) +
                               " -c 256 -np 1 -t 1 --force --no-progress"), out), 0) << out;
    struct cse { std::string archive, method, said; };
    for (const cse & c : {cse{sal, "aimer", "make its archive with reap score"}, cse{scores, "reap", "use --method aimer or random"},
                          cse{scores, "msan", "use --method aimer or random"}}) {
        ::unlink(plan.c_str());
        EXPECT_EQ(run_cmd(reap_cmd("plan " + shell_quote(c.archive) + " -m " + shell_quote(model) + " --keep 16 --method " + c.method +
                                   " -o " + shell_quote(plan)), out), 2) << c.method << ": " << out;
        EXPECT_NE(out.find(c.said), std::string::npos) << c.method << ": " << out;
        EXPECT_FALSE(file_exists(plan)) << c.method;
    }
    // msan and man from this calibration plan, and plan differently from reap
    std::vector<std::vector<int64_t>> first_layer;
    for (const char * m : {"reap", "man", "msan", "aimer"}) {
        const std::string p = dir + "/" + m + ".json";
        ASSERT_EQ(run_cmd(reap_cmd("plan " + shell_quote(std::string(m) == "aimer" ? scores : sal) + " -m " + shell_quote(model) +
                                   " --keep 16 --method " + m + " -o " + shell_quote(p) + " --force"), out), 0) << m << ": " << out;
        first_layer.push_back(nlohmann::json::parse(slurp(p)).at("layers").at(0).at("keep").get<std::vector<int64_t>>());
    }
    EXPECT_NE(first_layer[0], first_layer[3]) << "reap and aimer keep the same experts";
    EXPECT_NE(first_layer[1], first_layer[3]) << "man and aimer keep the same experts";
}

// reap sweep --methods: every method's plans from the archive that holds its
// statistic, all scored against one base pass; each point equals reap eval
// --mask of its plan.
TEST(Sweep, SeveralMethodsEqualEvalMaskOfEachPlan) {
    const std::string dir = test_tmp_dir() + "/sweep-methods";
    ::mkdir(dir.c_str(), 0755);
    std::string err, out;
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    const std::string calib = dir + "/calib.jsonl", heldout = dir + "/heldout.txt", sal = dir + "/saliency.gguf",
                      scores = dir + "/scores.gguf";
    ASSERT_TRUE(corpus_subset("calib", calib, {}, 2000, err)) << err;
    ASSERT_TRUE(heldout_text(heldout, 3000, err)) << err;
    ASSERT_EQ(run_cmd(reap_cmd("calibrate -m " + shell_quote(model) + " --corpus " + shell_quote(calib) + " -o " + shell_quote(sal) +
                               " -c 256 -np 1 -t 1 --force --no-progress"), out), 0) << out;
    ASSERT_EQ(run_cmd(reap_cmd("score -m " + shell_quote(model) + " -o " + shell_quote(scores) + " --force -q"), out), 0) << out;
    const std::string json = dir + "/sweep.json", plans = dir + "/plans";
    ASSERT_EQ(run_cmd(reap_cmd("sweep " + shell_quote(sal) + " " + shell_quote(scores) + " -m " + shell_quote(model) + " -f " +
                               shell_quote(heldout) + " --keep 20,12 --methods reap,man,msan,aimer,frequency -c 128 -t 1 -o " +
                               shell_quote(json) + " --plans-dir " + shell_quote(plans) + " --force"), out), 0) << out;
    EXPECT_NE(out.find("method "), std::string::npos) << out;
    const nlohmann::json sw = nlohmann::json::parse(slurp(json));
    const auto & pts = sw.at("points");
    ASSERT_EQ(pts.size(), 10u);
    std::map<std::string, int> per_method;
    for (const auto & pt : pts) ++per_method[pt.at("method").get<std::string>()];
    EXPECT_EQ(per_method, (std::map<std::string, int>{{"aimer", 2}, {"frequency", 2}, {"man", 2}, {"msan", 2}, {"reap", 2}}));
    // each method's N = 12 point against reap eval --mask of its plan (the plan names its archive)
    for (const auto & pt : pts) {
        if (pt.at("n_keep") != 12) continue;
        const std::string m = pt.at("method"), plan = pt.at("plan");
        EXPECT_EQ(plan, plans + "/" + m + "-keep-12.json");
        const nlohmann::json pj = nlohmann::json::parse(slurp(plan));
        EXPECT_EQ(pj.at("provenance").at("method"), m);
        ASSERT_EQ(run_cmd(reap_cmd("eval -m " + shell_quote(model) + " --mask " + shell_quote(plan) + " -f " + shell_quote(heldout) +
                                   " -c 128 -t 1 --json 2>/dev/null"), out), 0) << out;
        const nlohmann::json ev = nlohmann::json::parse(out);
        EXPECT_NEAR(pt.at("overall").at("kld_mean").get<double>(), ev.at("kld_mean").get<double>(), 1e-9) << m;
        EXPECT_NEAR(pt.at("overall").at("argmax_agree").get<double>(), ev.at("argmax_agree").get<double>(), 1e-9) << m;
    }
    EXPECT_EQ(sw.at("saliency").at("second_file"), scores);
    // the card of the aimer cut takes the sweep's aimer points as its own (the archive is the sweep's second)
    const std::string cut = dir + "/aimer-12.gguf", card = dir + "/card";
    ASSERT_EQ(run_cmd(reap_cmd("prune -m " + shell_quote(model) + " --plan " + shell_quote(plans + "/aimer-keep-12.json") + " -o " +
                               shell_quote(cut) + " --force"), out), 0) << out;
    ASSERT_EQ(run_cmd(reap_cmd("report -m " + shell_quote(model) + " --plan " + shell_quote(plans + "/aimer-keep-12.json") + " " +
                               shell_quote(cut) + " --saliency " + shell_quote(scores) + " --sweep " + shell_quote(json) + " -o " +
                               shell_quote(card) + " --force"), out), 0) << out;
    const std::string text = slurp(card + "/README.md");
    EXPECT_NE(text.find("Calibration-free"), std::string::npos) << text;
    EXPECT_EQ(text.find("planned from another archive"), std::string::npos) << text;
    EXPECT_EQ(text.find("ranked experts by"), std::string::npos) << text;
    // the chart has one line per method in each of its two panels
    const std::string svg = slurp(dir + "/sweep.svg");
    size_t lines = 0;
    for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
    EXPECT_EQ(lines, 10u);
    // the record reads back (report --sweep reads it) and --methods with --method is refused
    EXPECT_EQ(run_cmd(reap_cmd("sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " + shell_quote(heldout) +
                               " --keep 12 --methods reap,man --method reap"), out), 2) << out;
    EXPECT_NE(out.find("do not go together"), std::string::npos) << out;
    // aimer without a weights archive is refused before any pass, naming why
    EXPECT_EQ(run_cmd(reap_cmd("sweep " + shell_quote(sal) + " -m " + shell_quote(model) + " -f " + shell_quote(heldout) +
                               " --keep 12 --methods reap,aimer -o " + shell_quote(dir + "/no.json")), out), 2) << out;
    EXPECT_NE(out.find("reap score"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/no.json"));
}

// reap eval's llama.cpp runtime flags go to llama.cpp's own parser and reach
// the model and context: -ot / -ctk / -ctv / -fa are accepted and change what
// runs (a q8_0 KV cache gives another base perplexity than the f16 default),
// llama.cpp's own errors name a bad value, and a flag neither reap nor
// llama.cpp knows is refused by llama.cpp's parser, which names it. The JSON
// names what was measured (reap report's receipts): the text by its sha256,
// the pruned model by its files; the base by its fingerprint, a masked base
// as such, and a plan made for another model is refused as prune refuses it.
#include "llama_test_util.h"

#include "formats/eval_file.h"
#include "gguf/gguf.h"
#include "plan/plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>
#include <random>
#include <sys/stat.h>

using namespace reap_test;

namespace {

std::string eval_cmd(const std::string & text, const std::string & flags) {
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    return shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " -p " + shell_quote(model) + " -f " +
           shell_quote(text) + " -c 128 --chunks 4 -t 2 --json " + flags;
}

} // namespace

TEST(EvalCli, LlamaRuntimeFlagsReachLlama) {
    const std::string text = test_tmp_dir() + "/eval-cli.txt";
    std::ofstream(text) << calibration_text() << calibration_text();
    std::string out;
    ASSERT_EQ(run_cmd(eval_cmd(text, "2>/dev/null"), out), 0) << out;
    const nlohmann::json f16 = nlohmann::json::parse(out);
    const double ppl_f16 = f16.at("ppl_base").get<double>();
    // the receipt names what it measured: the text by its sha256 (as sha256sum computes
    // it), the pruned side by its file, size and the hash a SHA256SUMS beside it lists (none here)
    std::string sum;
    ASSERT_EQ(run_cmd("sha256sum " + shell_quote(text), sum), 0) << sum;
    EXPECT_EQ(f16.at("input").at("file"), text);
    EXPECT_EQ(f16.at("input").at("sha256"), sum.substr(0, 64));
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    ASSERT_EQ(f16.at("candidate_files").size(), 1u) << f16.dump();
    EXPECT_EQ(f16["candidate_files"][0].at("file"), "reap-moe-tiny.gguf");
    std::ifstream mf(model, std::ios::binary | std::ios::ate);
    EXPECT_EQ(f16["candidate_files"][0].at("bytes").get<uint64_t>(), (uint64_t) mf.tellg());
    EXPECT_TRUE(f16["candidate_files"][0].at("sha256").is_null());
    // a masked candidate is named by its plan file's sha256 (an identity plan: keeps every expert)
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " inspect --json " + shell_quote(model), out), 0) << out;
    const nlohmann::json census = nlohmann::json::parse(out);
    nlohmann::json plan = {{"format", "reap-plan"}, {"version", 1},
                           {"model", {{"arch", census["arch"]}, {"n_layer", census["n_layer"]}, {"n_expert", census["n_expert"]},
                                      {"n_expert_used", census["n_expert_used"]}}},
                           {"n_keep", census["n_expert"]}, {"layers", nlohmann::json::array()}};
    std::vector<int> all(census["n_expert"].get<int>());
    for (size_t e = 0; e < all.size(); ++e) all[e] = (int) e;
    for (const auto & l : census["moe_layers"]) plan["layers"].push_back({{"layer", l}, {"keep", all}});
    const std::string plan_path = test_tmp_dir() + "/eval-cli-identity-plan.json";
    std::ofstream(plan_path) << plan.dump();
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " --mask " + shell_quote(plan_path) + " -f " +
                          shell_quote(text) + " -c 128 --chunks 2 -t 2 --json 2>/dev/null", out), 0) << out;
    const nlohmann::json mj = nlohmann::json::parse(out);
    ASSERT_EQ(run_cmd("sha256sum " + shell_quote(plan_path), sum), 0) << sum;
    EXPECT_EQ(mj.at("masked"), true) << mj.dump();
    EXPECT_EQ(mj.at("candidate_sha256"), sum.substr(0, 64));
    EXPECT_FALSE(mj.contains("candidate_files"));
    ASSERT_EQ(run_cmd(eval_cmd(text, "-ot 'ffn_.*_exps=CPU' -ctk q8_0 -ctv q8_0 -fa on 2>/dev/null"), out), 0) << out;
    const nlohmann::json q8 = nlohmann::json::parse(out);
    EXPECT_NE(q8.at("ppl_base").get<double>(), ppl_f16) << "-ctk q8_0 did not change the KV cache";
    EXPECT_EQ(q8.at("kld_mean").get<double>(), 0.0);  // the same model on both sides

    EXPECT_NE(run_cmd(eval_cmd(text, "-ctk q9_9"), out), 0);
    EXPECT_NE(out.find("Unsupported cache type: q9_9"), std::string::npos) << out;
    EXPECT_NE(run_cmd(eval_cmd(text, "-ot 'exps=NOPE'"), out), 0);
    EXPECT_NE(out.find("unknown buffer type"), std::string::npos) << out;
    EXPECT_NE(run_cmd(eval_cmd(text, "--no-such-flag"), out), 0);
    EXPECT_NE(out.find("invalid argument: --no-such-flag"), std::string::npos) << out;  // llama.cpp's words
    EXPECT_NE(out.find("llama.cpp did not accept"), std::string::npos) << out;
    EXPECT_NE(run_cmd(eval_cmd(text, "-ctk"), out), 0);
    EXPECT_NE(out.find("-ctk needs a value"), std::string::npos) << out;
}

// A zoo model whose expert slabs (96 MiB) dwarf everything else, pruned to half
// its experts. reap eval -m BASE -p PRUNED runs the base, keeps its rows on
// disk, frees it, then loads the pruned model: its peak RSS must stay below
// llama-perplexity's on the base alone (the same text and -c, so the same
// buffers) plus a quarter of the pruned file, where both models resident would
// add all of it.
TEST(EvalCli, OneModelResidentAtATime) {
    std::string err;
    const std::string base = zoo_model("qwen3moe-wide", err);
    ASSERT_FALSE(base.empty()) << err;
    const std::string dir = test_tmp_dir() + "/eval-one-resident";
    ::mkdir(dir.c_str(), 0755);
    const std::string text = dir + "/text.txt";
    std::ofstream(text) << calibration_text() << calibration_text();

    // Half of the 64 experts of both MoE layers, in a shuffled order.
    std::mt19937 rng(5);
    nlohmann::json layers = nlohmann::json::array();
    for (int layer = 0; layer < 2; ++layer) {
        std::vector<int> ids(64);
        for (int e = 0; e < 64; ++e) ids[e] = e;
        std::shuffle(ids.begin(), ids.end(), rng);
        ids.resize(32);
        layers.push_back({{"layer", layer}, {"keep", ids}});
    }
    const nlohmann::json plan = {{"format", "reap-plan"}, {"version", 1},
                                 {"model", {{"arch", "qwen3moe"}, {"n_layer", 2}, {"n_expert", 64}, {"n_expert_used", 2}}},
                                 {"n_keep", 32}, {"layers", layers}};
    std::ofstream(dir + "/plan.json") << plan.dump();
    const std::string pruned = dir + "/pruned.gguf";
    std::string out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " prune -m " + shell_quote(base) + " --plan " + shell_quote(dir + "/plan.json") +
                      " -o " + shell_quote(pruned) + " --force 2>&1", out), 0) << out;
    struct stat st;
    ASSERT_EQ(::stat(pruned.c_str(), &st), 0);
    const long pruned_kib = (long) (st.st_size >> 10);

    int status = -1;
    const long rss_ppl = gguf_test::run_peak_rss_kib({llama_bin_dir() + "/llama-perplexity", "-m", base, "-f", text, "-c", "128",
                                                      "-b", "128", "--chunks", "4", "-t", "2"}, dir + "/ppl.log", status);
    ASSERT_EQ(status, 0) << "llama-perplexity failed: see " << dir << "/ppl.log";
    const long rss_eval = gguf_test::run_peak_rss_kib({reap_bin(), "eval", "-m", base, "-p", pruned, "-f", text, "-c", "128",
                                                       "-b", "128", "--chunks", "4", "-t", "2", "--json", "-q"}, dir + "/eval.log", status);
    ASSERT_EQ(status, 0);
    printf("peak RSS: llama-perplexity on the base %ld KiB; reap eval base + pruned %ld KiB; pruned file %ld KiB\n",
           rss_ppl, rss_eval, pruned_kib);
    RecordProperty("eval_pair_peak_rss_kib", std::to_string(rss_eval));
    RecordProperty("perplexity_base_peak_rss_kib", std::to_string(rss_ppl));
    EXPECT_LT(rss_eval, rss_ppl + pruned_kib / 4);
}

// Issue 23, items 2-4: a claim names what it measured. The JSON records the
// base (its fingerprint, as prune checks plans against it) and says when the
// base itself was masked (--base-mask, with the hash of the plan bytes read);
// a --mask or --base-mask plan made for another model (a copy of the base
// with another general.name) is refused with prune's words. Against the
// binary before this change the plans of another model ran (exit 0) and the
// JSON had no "base" or "reference".
TEST(EvalCli, ClaimsNameTheBaseAndTheMask) {
    const std::string dir = test_tmp_dir() + "/eval-claims";
    ::mkdir(dir.c_str(), 0755);
    const std::string text = dir + "/text.txt";
    std::ofstream(text) << calibration_text() << calibration_text();
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    std::string err, out, sum;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(model, m, err)) << err;
    const std::string model_sha = reap::model_header_sha256(m);
    // another model of the same shape
    const std::string other = dir + "/other.gguf";
    {
        reap::gguf::output_spec spec = reap::gguf::spec_from_model(m);
        spec.kvs.set_string("general.name", "another model of the same shape");
        reap::gguf::write_options wo;
        wo.force = true;
        wo.sync = false;
        std::vector<std::string> written;
        ASSERT_TRUE(reap::gguf::write_output(spec, wo, other, written, err)) << err;
    }
    // a plan for the model keeping its first half of experts, with the model's fingerprint
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " inspect --json " + shell_quote(model), out), 0) << out;
    const nlohmann::json census = nlohmann::json::parse(out);
    const int n_keep = census["n_expert"].get<int>() / 2;
    nlohmann::json plan = {{"format", "reap-plan"}, {"version", 1},
                           {"model", {{"arch", census["arch"]}, {"n_layer", census["n_layer"]}, {"n_expert", census["n_expert"]},
                                      {"n_expert_used", census["n_expert_used"]}, {"header_sha256", model_sha}}},
                           {"n_keep", n_keep}, {"layers", nlohmann::json::array()}};
    std::vector<int> half(n_keep);
    for (int e = 0; e < n_keep; ++e) half[e] = e;
    for (const auto & l : census["moe_layers"]) plan["layers"].push_back({{"layer", l}, {"keep", half}});
    const std::string plan_path = dir + "/half.json";
    std::ofstream(plan_path) << plan.dump(1);
    ASSERT_EQ(run_cmd("sha256sum " + shell_quote(plan_path), sum), 0) << sum;
    const std::string plan_sha = sum.substr(0, 64);
    const std::string tail = " -f " + shell_quote(text) + " -c 128 --chunks 2 -t 2 --json";

    // another model's plan: refused for --mask and --base-mask
    for (const std::string & how : {" --mask " + shell_quote(plan_path), " --base-mask " + shell_quote(plan_path) + " -p " + shell_quote(other)}) {
        EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(other) + how + tail, out), 2) << how << "\n" << out;
        EXPECT_NE(out.find("was made for another model"), std::string::npos) << out;
    }
    // a masked base: said so, with the plan's hash, and the base's fingerprint
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " --base-mask " + shell_quote(plan_path) + " -p " +
                          shell_quote(model) + tail + " 2>/dev/null", out), 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out);
    EXPECT_EQ(j.at("reference"), "masked_base") << j.dump();
    EXPECT_EQ(j.at("base_mask"), plan_path);
    EXPECT_EQ(j.at("base_mask_sha256"), plan_sha);
    EXPECT_EQ(j.at("base").at("file"), model);
    EXPECT_EQ(j.at("base").at("header_sha256"), model_sha);
    // ... and reads back through the format module (a file: the module's JSON type is the core's)
    std::ofstream(dir + "/masked-base.json") << out;
    reap::eval_document doc;
    ASSERT_TRUE(reap::read_eval_document(dir + "/masked-base.json", doc, err)) << err;
    ASSERT_EQ(doc.entries.size(), 1u);
    EXPECT_TRUE(doc.entries[0].report.base_masked());
    // the mask of the right model runs, named by the hash of the plan's bytes
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " --mask " + shell_quote(plan_path) + tail + " 2>/dev/null", out), 0) << out;
    const nlohmann::json mj = nlohmann::json::parse(out);
    EXPECT_EQ(mj.at("candidate_sha256"), plan_sha);
    EXPECT_EQ(mj.at("reference"), "base");
    EXPECT_EQ(mj.at("base").at("header_sha256"), model_sha);
    // a plan without a fingerprint runs, with prune's warning (in the JSON; on stderr without --json)
    plan["model"].erase("header_sha256");
    std::ofstream(dir + "/old.json") << plan.dump();
    const std::string old_cmd = shell_quote(reap_bin()) + " eval -m " + shell_quote(other) + " --mask " + shell_quote(dir + "/old.json") +
                                " -f " + shell_quote(text) + " -c 128 --chunks 2 -t 2";
    ASSERT_EQ(run_cmd(old_cmd + " --json 2>/dev/null", out), 0) << out;
    const nlohmann::json oj = nlohmann::json::parse(out);
    ASSERT_EQ(oj.at("warnings").size(), 1u) << oj.dump();
    EXPECT_NE(oj["warnings"][0].get<std::string>().find("records no model fingerprint"), std::string::npos) << oj.dump();
    ASSERT_EQ(run_cmd(old_cmd + " -q", out), 0) << out;
    EXPECT_NE(out.find("reap eval: warning: "), std::string::npos) << out;
    EXPECT_NE(out.find("records no model fingerprint"), std::string::npos) << out;
}

namespace {

// Starts `reap eval ARGS` with stdout to `out` and llama.cpp's log (--verbose)
// to `log`; returns its pid.
pid_t spawn_eval(const std::string & args, const std::string & out, const std::string & log) {
    const pid_t pid = fork();
    if (pid == 0) {
        const std::string cmd = "exec " + shell_quote(reap_bin()) + " eval " + args + " --verbose > " + shell_quote(out) + " 2> " + shell_quote(log);
        execl("/bin/sh", "sh", "-c", cmd.c_str(), (char *) nullptr);
        _exit(127);
    }
    return pid;
}

// Waits until `log` shows llama.cpp loading a model (the plans and the files'
// identities are taken before that), at most 60 s.
bool wait_for_model_load(const std::string & log) {
    for (int i = 0; i < 6000; ++i) {
        std::ifstream f(log);
        std::stringstream ss;
        ss << f.rdbuf();
        if (ss.str().find("llama_model_loader: ") != std::string::npos) return true;
        ::usleep(10000);
    }
    return false;
}

} // namespace

// Issue 23, item 4: eval names what it loaded, not what is at the path after
// the run. A --mask plan replaced while the run is going is named by the
// hash of the bytes that were parsed; a pruned file replaced while the run
// is going is refused (its numbers would not be of the file it names).
// Against the binary before this change the replaced plan's hash was
// recorded, and the replaced pruned file's numbers were reported (exit 0).
TEST(EvalCli, NamesWhatItLoadedNotWhatIsThereAfter) {
    const std::string dir = test_tmp_dir() + "/eval-loaded";
    ::mkdir(dir.c_str(), 0755);
    const std::string text = dir + "/text.txt";
    {
        std::ofstream t(text);
        for (int i = 0; i < 4; ++i) t << calibration_text();
    }
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    std::string out, sum;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " inspect --json " + shell_quote(model), out), 0) << out;
    const nlohmann::json census = nlohmann::json::parse(out);
    auto plan_keeping = [&](int n_keep, const std::string & path) {
        nlohmann::json plan = {{"format", "reap-plan"}, {"version", 1},
                               {"model", {{"arch", census["arch"]}, {"n_layer", census["n_layer"]}, {"n_expert", census["n_expert"]},
                                          {"n_expert_used", census["n_expert_used"]}}},
                               {"n_keep", n_keep}, {"layers", nlohmann::json::array()}};
        std::vector<int> keep(n_keep);
        for (int e = 0; e < n_keep; ++e) keep[e] = e;
        for (const auto & l : census["moe_layers"]) plan["layers"].push_back({{"layer", l}, {"keep", keep}});
        std::ofstream(path) << plan.dump();
    };
    const std::string plan = dir + "/plan.json", next = dir + "/next.json";
    plan_keeping(census["n_expert"].get<int>() * 3 / 4, plan);
    plan_keeping(census["n_expert"].get<int>() / 2, next);
    ASSERT_EQ(run_cmd("sha256sum " + shell_quote(plan), sum), 0) << sum;
    const std::string parsed_sha = sum.substr(0, 64);
    const std::string tail = " -f " + shell_quote(text) + " -c 128 -t 2 --json";

    // the plan: replaced once the base model loads (after it was read); no log
    // of an earlier run may be taken for this run's
    ::unlink((dir + "/mask.log").c_str());
    ::unlink((dir + "/pruned.log").c_str());
    const pid_t pid = spawn_eval("-m " + shell_quote(model) + " --mask " + shell_quote(plan) + tail, dir + "/mask.json", dir + "/mask.log");
    ASSERT_TRUE(wait_for_model_load(dir + "/mask.log"));
    ASSERT_EQ(::rename(next.c_str(), plan.c_str()), 0);
    EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0) << "the run ended before the plan was replaced: the test proves nothing";
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "see " << dir << "/mask.log";
    std::ifstream jf(dir + "/mask.json");
    const nlohmann::json j = nlohmann::json::parse(jf);
    EXPECT_EQ(j.at("candidate_sha256"), parsed_sha);

    // a pruned file (here the model itself, copied): replaced while the base runs
    const std::string cut = dir + "/cut.gguf", other = dir + "/other.gguf";
    ASSERT_EQ(run_cmd("cp " + shell_quote(model) + " " + shell_quote(cut) + " && cp " + shell_quote(model) + " " + shell_quote(other), out), 0) << out;
    const pid_t p2 = spawn_eval("-m " + shell_quote(model) + " -p " + shell_quote(cut) + tail, dir + "/pruned.json", dir + "/pruned.log");
    ASSERT_TRUE(wait_for_model_load(dir + "/pruned.log"));
    ASSERT_EQ(::rename(other.c_str(), cut.c_str()), 0);
    EXPECT_EQ(::waitpid(p2, nullptr, WNOHANG), 0) << "the run ended before the file was replaced: the test proves nothing";
    ASSERT_EQ(::waitpid(p2, &status, 0), p2);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << "see " << dir << "/pruned.log";
    std::ifstream lf(dir + "/pruned.log");
    std::stringstream log;
    log << lf.rdbuf();
    EXPECT_NE(log.str().find("changed while it was being evaluated"), std::string::npos) << log.str().substr(log.str().size() > 2000 ? log.str().size() - 2000 : 0);
}

// What SHA256SUMS lists is claimed only for the bytes it describes: a pruned
// file whose bytes are not the listed ones (replaced before the eval, its
// SHA256SUMS left as it was) is recorded under the sha256 of the bytes the
// eval measured, with a warning, so that reap report cannot match it to the
// build the SHA256SUMS describes; the file with the listed bytes is recorded
// under the listed hash. Before, the listed hash was recorded either way
// (issue 37, item 4).
namespace {

// DIR/text.txt (the calibration text), DIR/plan.json (the first half of the
// experts of reap-moe-tiny in every MoE layer) and its build DIR/build/cut.gguf.
void half_cut_of_tiny(const std::string & dir) {
    std::string out;
    ASSERT_EQ(run_cmd("rm -rf " + shell_quote(dir) + " && mkdir -p " + shell_quote(dir + "/build"), out), 0) << out;
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    std::ofstream(dir + "/text.txt") << calibration_text();
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " inspect --json " + shell_quote(model), out), 0) << out;
    const nlohmann::json census = nlohmann::json::parse(out);
    nlohmann::json plan = {{"format", "reap-plan"}, {"version", 1},
                           {"model", {{"arch", census["arch"]}, {"n_layer", census["n_layer"]}, {"n_expert", census["n_expert"]},
                                      {"n_expert_used", census["n_expert_used"]}}},
                           {"n_keep", census["n_expert"].get<int>() / 2}, {"layers", nlohmann::json::array()}};
    std::vector<int> keep(census["n_expert"].get<int>() / 2);
    for (size_t e = 0; e < keep.size(); ++e) keep[e] = (int) e;
    for (const auto & l : census["moe_layers"]) plan["layers"].push_back({{"layer", l}, {"keep", keep}});
    std::ofstream(dir + "/plan.json") << plan.dump();
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " prune -m " + shell_quote(model) + " --plan " + shell_quote(dir + "/plan.json") +
                      " -o " + shell_quote(dir + "/build/cut.gguf"), out), 0) << out;
}

std::string sha256sum_of(const std::string & path) {
    std::string s;
    return run_cmd("sha256sum " + shell_quote(path), s) == 0 ? s.substr(0, 64) : std::string("?");
}

} // namespace

TEST(EvalCli, RecordsTheHashOfTheBytesItMeasured) {
    const std::string dir = test_tmp_dir() + "/eval-hash";
    std::string out;
    ASSERT_NO_FATAL_FAILURE(half_cut_of_tiny(dir));
    const std::string text = dir + "/text.txt", model = source_dir() + "/models/reap-moe-tiny.gguf";
    const std::string cut = dir + "/build/cut.gguf", other = dir + "/other.gguf";
    auto sha = sha256sum_of;
    auto recorded = [&](std::string & log) {
        // (a group: run_cmd's own 2>&1 is the group's, the eval's stderr goes to the log)
        if (run_cmd("{ " + shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " -p " + shell_quote(cut) + " -f " + shell_quote(text) +
                    " -c 128 -t 1 --json 2> " + shell_quote(dir + "/log") + " > " + shell_quote(dir + "/eval.json") + "; }", out) != 0) {
            return std::string("(eval failed)");
        }
        std::ifstream lf(dir + "/log");
        std::stringstream ss;
        ss << lf.rdbuf();
        log = ss.str();
        std::ifstream jf(dir + "/eval.json");
        return nlohmann::json::parse(jf).at("candidate_files").at(0).at("sha256").get<std::string>();
    };
    const std::string listed = sha(cut);
    std::string log;
    EXPECT_EQ(recorded(log), listed) << "the listed bytes: the listed hash";
    EXPECT_EQ(log.find("is not the file its SHA256SUMS lists"), std::string::npos) << log;
    // the same name, other bytes (the whole model), the SHA256SUMS as it was
    ASSERT_EQ(run_cmd("cp " + shell_quote(model) + " " + shell_quote(other) + " && mv " + shell_quote(other) + " " + shell_quote(cut), out), 0);
    const std::string actual = sha(cut);
    ASSERT_NE(actual, listed);
    EXPECT_EQ(recorded(log), actual) << "other bytes: their own hash, not the listed one";
    EXPECT_NE(log.find("is not the file its SHA256SUMS lists"), std::string::npos) << log;
}

// The base's bytes are hashed and recorded (base.files_sha256, what sha256sum
// prints), and report holds an eval's base to the source by them: a model of
// the source's header, size and routers whose expert weights differ (one
// byte of blk.0's ffn_up_exps) is another model, and an eval against it is
// not counted; the eval against the source itself is. Before, only the header
// and routers were compared and both evals went under Verified (issue 37 item 3).
TEST(EvalCli, AnEvalAgainstOtherWeightsOfTheSourcesShapeIsNotCounted) {
    const std::string dir = test_tmp_dir() + "/eval-other-weights";
    std::string out, err;
    ASSERT_NO_FATAL_FAILURE(half_cut_of_tiny(dir));
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf", other = dir + "/other.gguf";
    ASSERT_TRUE(gguf_test::write_with_edited_tensor(model, other, "blk.0.ffn_up_exps",
                                                    [](reap::gguf::output_tensor &, std::vector<uint8_t> & b) { b[0] ^= 1; }, err)) << err;
    struct stat a {}, b {};
    ASSERT_EQ(::stat(model.c_str(), &a), 0);
    ASSERT_EQ(::stat(other.c_str(), &b), 0);
    ASSERT_EQ(a.st_size, b.st_size) << "the other model must have the source's size";
    nlohmann::json base[2];
    const std::string bases[2] = {model, other};
    for (int i = 0; i < 2; ++i) {
        const std::string json = dir + "/eval-" + std::to_string(i) + ".json";
        ASSERT_EQ(run_cmd("{ " + shell_quote(reap_bin()) + " eval -m " + shell_quote(bases[i]) + " -p " + shell_quote(dir + "/build/cut.gguf") +
                              " -f " + shell_quote(dir + "/text.txt") + " -c 128 --chunks 2 -t 2 --json > " + shell_quote(json) + "; }", out), 0) << out;
        std::ifstream f(json);
        base[i] = nlohmann::json::parse(f).at("base");
        EXPECT_EQ(base[i].at("files_sha256").get<std::string>(), sha256sum_of(bases[i]));
    }
    // what the header and router checks see is the same for both
    EXPECT_EQ(base[0].at("header_sha256"), base[1].at("header_sha256"));
    EXPECT_EQ(base[0].at("router_sha256"), base[1].at("router_sha256"));
    EXPECT_EQ(base[0].at("bytes"), base[1].at("bytes"));
    auto card = [&](int i) {
        const std::string card_dir = dir + "/card-" + std::to_string(i);
        EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " report -m " + shell_quote(model) + " --plan " + shell_quote(dir + "/plan.json") + " " +
                              shell_quote(dir + "/build/cut.gguf") + " --eval " + shell_quote(dir + "/eval-" + std::to_string(i) + ".json") +
                              " -o " + shell_quote(card_dir), out), 0) << out;
        std::ifstream f(card_dir + "/README.md");
        std::stringstream ss;
        ss << f.rdbuf();
        const std::string text = ss.str();
        const size_t v = text.find("## Verified\n"), n = text.find("## Not verified\n");
        return std::make_pair(text.substr(v, n - v), text.substr(n));
    };
    const auto [ver0, nver0] = card(0);
    EXPECT_NE(ver0.find("**Eval `eval-0.json`**: measured on this build's files"), std::string::npos) << ver0;
    EXPECT_NE(ver0.find("KLD mean"), std::string::npos) << ver0;
    const auto [ver1, nver1] = card(1);
    EXPECT_EQ(ver1.find("eval-1.json"), std::string::npos) << ver1;
    EXPECT_NE(nver1.find("the same header and size as the source, other bytes (sha256 " + sha256sum_of(other).substr(0, 12)),
              std::string::npos) << nver1;
}

// A KLD base file names no model (llama-perplexity's format): reap eval writes
// a receipt beside the ones it makes (FILE.reap-receipt.json: the file's
// sha256, the base's identity and bytes' hash), and an eval reading the file
// names the receipt's base, once the file's bytes match it. Rows written from
// a model of the source's shape with other weights are that model's (report:
// not counted); rows without a receipt, or with another file's receipt, are
// nobody's (not counted, a warning). Before, a read-mode eval named -m as its
// base whatever wrote the rows, and went under Verified (issue 37 item 3).
TEST(EvalCli, AKldBaseFileNamesItsModelByItsReceipt) {
    const std::string dir = test_tmp_dir() + "/eval-kld-receipt";
    std::string out, err;
    ASSERT_NO_FATAL_FAILURE(half_cut_of_tiny(dir));
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf", other = dir + "/other.gguf";
    ASSERT_TRUE(gguf_test::write_with_edited_tensor(model, other, "blk.0.ffn_up_exps",
                                                    [](reap::gguf::output_tensor &, std::vector<uint8_t> & b) { b[0] ^= 1; }, err)) << err;
    const std::string text = dir + "/text.txt", cut = dir + "/build/cut.gguf";
    auto write_kld = [&](const std::string & base, const std::string & kld) {
        return run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(base) + " -f " + shell_quote(text) + " -c 128 --chunks 2 -t 2 --kld-base " +
                           shell_quote(kld), out);
    };
    ASSERT_EQ(write_kld(model, dir + "/src.kld"), 0) << out;
    ASSERT_EQ(write_kld(other, dir + "/other.kld"), 0) << out;
    {
        std::ifstream f(dir + "/src.kld.reap-receipt.json");
        const nlohmann::json r = nlohmann::json::parse(f);
        EXPECT_EQ(r.at("kld_base").at("sha256").get<std::string>(), sha256sum_of(dir + "/src.kld"));
        EXPECT_EQ(r.at("base").at("files_sha256").get<std::string>(), sha256sum_of(model));
    }
    // an eval reading a KLD base file, with -m the source; then its card
    auto read_eval = [&](const std::string & kld, const std::string & json, std::string & log) {
        EXPECT_EQ(run_cmd("{ " + shell_quote(reap_bin()) + " eval -m " + shell_quote(model) + " -p " + shell_quote(cut) + " --kld-base " +
                              shell_quote(kld) + " -t 2 --json > " + shell_quote(json) + " 2> " + shell_quote(json + ".log") + "; }", out), 0) << out;
        std::ifstream lf(json + ".log");
        std::stringstream ss;
        ss << lf.rdbuf();
        log = ss.str();
        std::ifstream f(json);
        return nlohmann::json::parse(f);
    };
    auto verified = [&](const std::string & json) {
        const std::string card_dir = json + ".card";
        EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " report -m " + shell_quote(model) + " --plan " + shell_quote(dir + "/plan.json") + " " +
                              shell_quote(cut) + " --eval " + shell_quote(json) + " -o " + shell_quote(card_dir), out), 0) << out;
        std::ifstream f(card_dir + "/README.md");
        std::stringstream ss;
        ss << f.rdbuf();
        const std::string text = ss.str();
        const size_t v = text.find("## Verified\n"), n = text.find("## Not verified\n");
        return text.substr(v, n - v).find("KLD mean") != std::string::npos;
    };
    std::string log;
    nlohmann::json j = read_eval(dir + "/src.kld", dir + "/e-src.json", log);
    EXPECT_EQ(j.at("kld_base").get<std::string>(), "read");
    EXPECT_EQ(j.at("base").at("files_sha256").get<std::string>(), sha256sum_of(model));
    EXPECT_TRUE(verified(dir + "/e-src.json"));
    j = read_eval(dir + "/other.kld", dir + "/e-other.json", log);
    EXPECT_EQ(j.at("base").at("files_sha256").get<std::string>(), sha256sum_of(other)) << "the rows' model, not -m";
    EXPECT_FALSE(verified(dir + "/e-other.json"));
    // the source's receipt beside other rows (the source's file with its last record's byte changed)
    ASSERT_EQ(run_cmd("cp " + shell_quote(dir + "/src.kld") + " " + shell_quote(dir + "/swapped.kld") + " && cp " +
                          shell_quote(dir + "/src.kld.reap-receipt.json") + " " + shell_quote(dir + "/swapped.kld.reap-receipt.json"), out), 0);
    {
        std::fstream f(dir + "/swapped.kld", std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(-1, std::ios::end);
        const char c = (char) (f.get() ^ 1);
        f.seekp(-1, std::ios::end);
        f.put(c);
    }
    j = read_eval(dir + "/swapped.kld", dir + "/e-swapped.json", log);
    EXPECT_NE(j.at("warnings").dump().find("is not the file its receipt describes"), std::string::npos) << j.dump();
    EXPECT_FALSE(j.contains("base")) << j.dump();
    EXPECT_FALSE(verified(dir + "/e-swapped.json"));
    // no receipt (as llama-perplexity writes the file)
    ASSERT_EQ(::unlink((dir + "/src.kld.reap-receipt.json").c_str()), 0);
    j = read_eval(dir + "/src.kld", dir + "/e-bare.json", log);
    EXPECT_NE(j.at("warnings").dump().find("has no receipt"), std::string::npos) << j.dump();
    EXPECT_FALSE(verified(dir + "/e-bare.json"));
}

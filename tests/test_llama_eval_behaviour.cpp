// reap eval --needle and --generate, end to end through the binary on the
// project's trained model:
//   * a cut (a random 75% plan) run as a mask and as the file `reap prune`
//     writes from the plan gives the same cells, the same decoded text and the
//     same generated tokens, output for output;
//   * every number of the printed tables (marks, n/m exact, loop rate,
//     termination, distinct-4, mean length, agreement) is recomputed here from
//     the --json texts, tokens and expected values with this file's own rules,
//     and the printed table must equal it;
//   * the chat-template path (the trained model has ChatML) and the completion
//     path (the same model with tokenizer.chat_template removed by the GGUF
//     writer) both run; an -f shorter than a length is an error naming it;
//   * sampled generation (--temp, --seed) is reproducible by its seed.
#include "behaviour_test_rules.h"
#include "llama_test_util.h"
#include "prune_test_util.h"

#include "gguf/gguf.h"
#include "plan/plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace {

using nlohmann::json;
using namespace behaviour_test;
using reap_test::run_cmd;
using reap_test::shell_quote;

std::string trained() { return reap_test::source_dir() + "/models/reap-moe-tiny.gguf"; }

bool write_file(const std::string & path, const std::string & s) {
    std::ofstream f(path, std::ios::binary);
    f << s;
    return (bool) f;
}

// A haystack of English man-page text and prompts of three domains (text) and one chat turn.
bool make_inputs(const std::string & dir, std::string & err) {
    std::ifstream in(reap_test::source_dir() + "/data/corpus/heldout.jsonl");
    if (!in) {
        err = "no data/corpus/heldout.jsonl: run `make corpus`";
        return false;
    }
    std::string hay, line;
    while (std::getline(in, line)) {
        const json j = json::parse(line);
        if (j.at("domain") == "en" && hay.size() < 4000) hay += j.at("text").get<std::string>();
    }
    return write_file(dir + "/hay.txt", hay) &&
           write_file(dir + "/prompts.jsonl", prompts_from(reap_test::source_dir() + "/data/corpus/heldout.jsonl"));
}

std::string gen_line(const std::string & name, const gen_row & g) {
    char buf[256];
    snprintf(buf, sizeof buf, "%-16s %7zu %7.1f%% %7.1f%% %10.4f %9.2f %9.2f", name.c_str(), g.n, 100 * g.loop,
             100 * g.ended, g.d4, g.len, g.agree);
    return buf;
}

std::vector<std::string> lines_of(const std::string & s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
}

bool has_line(const std::vector<std::string> & lines, const std::string & want) {
    return std::find(lines.begin(), lines.end(), want) != lines.end();
}

// The printed tables against the numbers recomputed from the JSON.
void expect_tables_from_json(const json & doc, const std::string & table) {
    const auto lines = lines_of(table);
    const json & nd = doc.at("needle");
    const size_t n_models = nd.at("exact").size();
    std::vector<size_t> n_exact(n_models, 0);
    for (const auto & cell : nd.at("cells")) {
        char head[128];
        snprintf(head, sizeof head, "%-8d %-6.2f %-5d %-9s", cell.at("length").get<int>(), cell.at("depth").get<double>(),
                 cell.at("trial").get<int>(), cell.at("value").get<std::string>().c_str());
        std::string row = head;
        ASSERT_EQ(cell.at("models").size(), n_models);
        for (size_t m = 0; m < n_models; ++m) {
            const bool ok = exact(cell.at("models")[m].at("text"), cell.at("value"));
            EXPECT_EQ(ok, cell.at("models")[m].at("match").get<bool>()) << cell.dump();
            n_exact[m] += ok;
            char mark[16];
            snprintf(mark, sizeof mark, " %6s", ok ? "ok" : "x");
            row += mark;
        }
        EXPECT_TRUE(has_line(lines, row)) << "no row '" << row << "' in\n" << table;
    }
    std::string exact_row;
    char buf[64];
    snprintf(buf, sizeof buf, "%-31s", "exact");
    exact_row = buf;
    for (size_t m = 0; m < n_models; ++m) {
        snprintf(buf, sizeof buf, " %6s", (std::to_string(n_exact[m]) + "/" + std::to_string(nd.at("cells").size())).c_str());
        exact_row += buf;
    }
    EXPECT_TRUE(has_line(lines, exact_row)) << "no row '" << exact_row << "' in\n" << table;

    const json & gd = doc.at("generate");
    const size_t k = gd.at("loop_span"), r = gd.at("loop_repeats");
    EXPECT_GE(k, 2u);
    EXPECT_GE(r, 2u);
    const json & base = gd.at("models")[0].at("outputs");
    for (const auto & m : gd.at("models")) {
        const auto at = std::find(lines.begin(), lines.end(),
                                  "== " + std::string(m.at("masked").get<bool>() ? "masked by " : "") + m.at("name").get<std::string>());
        ASSERT_NE(at, lines.end()) << m.at("name") << " has no block in\n" << table;
        std::set<std::string> domains;
        for (const auto & o : m.at("outputs")) domains.insert(o.at("domain"));
        for (const auto & d : domains) {
            const std::string want = gen_line(d, recompute(m.at("outputs"), base, d, k, r));
            EXPECT_TRUE(std::find(at, lines.end(), want) != lines.end()) << "no row '" << want << "' in\n" << table;
        }
        const std::string overall = gen_line("overall", recompute(m.at("outputs"), base, "", k, r));
        EXPECT_TRUE(std::find(at, lines.end(), overall) != lines.end()) << "no row '" << overall << "' in\n" << table;
    }
}

// Masked and pruned runs of one cut: the same answers and the same outputs.
void expect_mask_equals_file(const json & doc, size_t masked, size_t pruned) {
    for (const auto & cell : doc.at("needle").at("cells")) {
        const auto & ms = cell.at("models");
        ASSERT_TRUE(ms[masked].at("masked").get<bool>());
        ASSERT_FALSE(ms[pruned].at("masked").get<bool>());
        EXPECT_EQ(ms[masked].at("text"), ms[pruned].at("text")) << cell.dump();
        EXPECT_EQ(ms[masked].at("match"), ms[pruned].at("match")) << cell.dump();
    }
    const auto & gm = doc.at("generate").at("models");
    const auto & a = gm[masked].at("outputs"), & b = gm[pruned].at("outputs");
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].at("tokens"), b[i].at("tokens")) << "prompt " << i;
        EXPECT_EQ(a[i].at("text"), b[i].at("text")) << "prompt " << i;
        EXPECT_EQ(a[i].at("terminated"), b[i].at("terminated")) << "prompt " << i;
    }
}

std::string sha256sum(const std::string & path) {
    std::string out;
    return run_cmd("sha256sum " + shell_quote(path), out) == 0 ? out.substr(0, 64) : out;
}

uint64_t size_of(const std::string & path) { return (uint64_t) std::ifstream(path, std::ios::binary | std::ios::ate).tellg(); }

// What a section says it measured (issue 25, item 3), against sha256sum and
// the files' sizes: the input's bytes, the base, the plan masked, the pruned
// file by the hash prune listed in SHA256SUMS.
void expect_receipts(const json & section, const std::string & input, const std::string & model, const std::string & plan,
                     const std::string & cut) {
    const json & m = section.at("measured");
    EXPECT_EQ(m.at("input").at("file"), input);
    EXPECT_EQ(m.at("input").at("sha256"), sha256sum(input));
    EXPECT_EQ(m.at("base").at("file"), model);
    EXPECT_EQ(m.at("base").at("bytes").get<uint64_t>(), size_of(model));
    EXPECT_EQ(m.at("base").at("header_sha256").get<std::string>().size(), 64u);
    EXPECT_TRUE(m.at("base_mask").is_null());
    ASSERT_EQ(m.at("candidates").size(), 2u);
    const json & mask = m.at("candidates")[0], & file = m.at("candidates")[1];
    EXPECT_EQ(mask.at("name"), plan);
    EXPECT_TRUE(mask.at("masked").get<bool>());
    EXPECT_EQ(mask.at("plan_sha256"), sha256sum(plan));
    EXPECT_EQ(mask.at("plan_bytes").get<uint64_t>(), size_of(plan));
    EXPECT_EQ(file.at("name"), cut);
    EXPECT_FALSE(file.at("masked").get<bool>());
    ASSERT_EQ(file.at("files").size(), 1u);
    EXPECT_EQ(file.at("files")[0].at("file"), "cut.gguf");
    EXPECT_EQ(file.at("files")[0].at("bytes").get<uint64_t>(), size_of(cut));
    EXPECT_EQ(file.at("files")[0].at("sha256"), sha256sum(cut));
}

// One model (with or without its chat template): cut it, run the mask and
// the file, check them against each other and the tables against the JSON.
void run_case(const std::string & model, const std::string & dir, bool expect_chat, json & doc_out) {
    std::string err, out;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(model, m, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 8, 20261202, p, err)) << err;   // keep 8 of 32: a cut that shows
    const std::string plan = dir + "/plan.json", cut = dir + "/cut.gguf";
    ASSERT_TRUE(reap::write_plan(p, plan, true, err)) << err;
    ASSERT_EQ(run_cmd(shell_quote(reap_test::reap_bin()) + " prune -m " + shell_quote(model) + " --plan " +
                      shell_quote(plan) + " -o " + shell_quote(cut) + " --force", out), 0) << out;
    const std::string cmd = shell_quote(reap_test::reap_bin()) + " eval -m " + shell_quote(model) + " --mask " +
                            shell_quote(plan) + " -p " + shell_quote(cut) + " --needle -f " + shell_quote(dir + "/hay.txt") +
                            " --needle-lengths 64,128 --needle-depths 0.2,0.8 --needles 2 --seed 7 --generate " +
                            shell_quote(dir + "/prompts.jsonl") + " --max-new 48 -t 1";
    ASSERT_EQ(run_cmd(cmd + " --json 2>/dev/null", out), 0) << out;
    const json doc = json::parse(out);
    ASSERT_EQ(doc.at("needle").at("chat").get<bool>(), expect_chat);
    ASSERT_EQ(doc.at("needle").at("cells").size(), 8u);  // 2 lengths x 2 depths x 2 needles
    EXPECT_EQ(doc.at("needle").at("seed"), 7);
    for (const auto & cell : doc.at("needle").at("cells")) {
        // the prompt holds the haystack's L tokens, the needle and the question
        EXPECT_GT(cell.at("prompt_tokens").get<int>(), cell.at("length").get<int>() + 20);
        EXPECT_LE(cell.at("insert_at").get<int>(), cell.at("length").get<int>());
    }
    EXPECT_EQ(doc.at("format"), "reap-behaviour");
    expect_receipts(doc.at("needle"), dir + "/hay.txt", model, plan, cut);
    expect_receipts(doc.at("generate"), dir + "/prompts.jsonl", model, plan, cut);
    EXPECT_EQ(doc.at("generate").at("seed"), 7);
    EXPECT_EQ(doc.at("generate").at("loop_span"), 8);
    EXPECT_EQ(doc.at("generate").at("loop_repeats"), 3);
    ASSERT_EQ(doc.at("generate").at("models").size(), 3u);
    EXPECT_EQ(doc.at("generate").at("models")[0].at("name"), "base");
    expect_mask_equals_file(doc, 1, 2);
    // the cut changes what the model writes (a mask that did nothing would not)
    const auto & gm = doc.at("generate").at("models");
    size_t differ = 0;
    for (size_t i = 0; i < gm[0].at("outputs").size(); ++i) differ += gm[0].at("outputs")[i].at("tokens") != gm[1].at("outputs")[i].at("tokens");
    EXPECT_GT(differ, 0u) << "the 75% cut generated what the base did for every prompt";

    ASSERT_EQ(run_cmd(cmd + " 2>/dev/null", out), 0) << out;
    expect_tables_from_json(doc, out);
    doc_out = doc;
}

} // namespace

TEST(EvalBehaviour, ChatTemplateModelMaskEqualsFileAndTablesFromJson) {
    const std::string dir = prune_test::scratch("behaviour-chat");
    std::string err;
    ASSERT_TRUE(make_inputs(dir, err)) << err;
    json greedy;
    ASSERT_NO_FATAL_FAILURE(run_case(trained(), dir, true, greedy));

    // sampled, seeded: the same seed draws the same tokens again, another seed others, and
    // not the greedy ones. (A mask and its file are not compared here: their logits agree
    // to rounding, which a draw can tell apart; greedy decoding is the comparison above.)
    std::string out;
    const std::string sample = shell_quote(reap_test::reap_bin()) + " eval -m " + shell_quote(trained()) + " --generate " +
                               shell_quote(dir + "/prompts.jsonl") + " --max-new 48 --temp 0.8 -t 1 --json 2>/dev/null --seed ";
    ASSERT_EQ(run_cmd(sample + "3", out), 0) << out;
    const json sampled = json::parse(out);
    ASSERT_EQ(run_cmd(sample + "3", out), 0) << out;
    const json again = json::parse(out);
    ASSERT_EQ(run_cmd(sample + "4", out), 0) << out;
    const json other = json::parse(out);
    EXPECT_FALSE(sampled.contains("needle"));
    EXPECT_DOUBLE_EQ(sampled.at("generate").at("temperature").get<double>(), 0.8);
    EXPECT_EQ(sampled.at("generate").at("seed"), 3);
    const auto & s3 = sampled.at("generate").at("models")[0].at("outputs");
    EXPECT_EQ(s3, again.at("generate").at("models")[0].at("outputs"));
    EXPECT_NE(s3, other.at("generate").at("models")[0].at("outputs"));
    size_t differ = 0;
    for (size_t i = 0; i < s3.size(); ++i) {
        differ += s3[i].at("tokens") != greedy.at("generate").at("models")[0].at("outputs")[i].at("tokens");
    }
    EXPECT_GT(differ, 0u) << "sampling at T 0.8 gave the greedy output for every prompt";
}

TEST(EvalBehaviour, CompletionFormWithoutTemplate) {
    const std::string dir = prune_test::scratch("behaviour-plain");
    std::string err;
    ASSERT_TRUE(make_inputs(dir, err)) << err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(trained(), m, err)) << err;
    reap::gguf::output_spec spec = reap::gguf::spec_from_model(m);
    ASSERT_TRUE(spec.kvs.remove("tokenizer.chat_template"));
    const std::string plain = dir + "/no-template.gguf";
    std::vector<std::string> written;
    reap::gguf::write_options wo;
    wo.force = true;
    ASSERT_TRUE(reap::gguf::write_output(spec, wo, plain, written, err)) << err;
    // the chat prompt cannot be rendered without a template: prompts of text only
    std::ifstream in(dir + "/prompts.jsonl");
    std::string kept, line;
    while (std::getline(in, line)) {
        if (line.find("\"messages\"") == std::string::npos) kept += line + "\n";
    }
    ASSERT_TRUE(write_file(dir + "/prompts.jsonl", kept));
    json doc;
    run_case(plain, dir, false, doc);
}

TEST(EvalBehaviour, HaystackShorterThanALengthIsNamed) {
    const std::string dir = prune_test::scratch("behaviour-short");
    ASSERT_TRUE(write_file(dir + "/short.txt", "Only a few words. Not a haystack.\n"));
    std::string out;
    const int rc = run_cmd(shell_quote(reap_test::reap_bin()) + " eval -m " + shell_quote(trained()) +
                           " --needle -f " + shell_quote(dir + "/short.txt") + " --needle-lengths 16,4096 -t 1", out);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("needle length 4096"), std::string::npos) << out;
    EXPECT_EQ(out.find("needle length 16:"), std::string::npos) << out;
}

// Issue 25, item 4: long needle / generate runs draw eval's progress line
// (tokens, rate, ETA) on a terminal's stderr, naming the model it is on; not
// with -q, and never on stdout with --json.
TEST(EvalBehaviour, ProgressLineOnATerminalNotWithQuiet) {
    const std::string dir = prune_test::scratch("behaviour-progress");
    std::string err, out;
    ASSERT_TRUE(make_inputs(dir, err)) << err;
    if (run_cmd("script -qec true /dev/null", out) != 0) GTEST_SKIP() << "no script(1) to give the run a terminal";
    const std::string run = shell_quote(reap_test::reap_bin()) + " eval -m " + shell_quote(trained()) + " --needle -f " +
                            shell_quote(dir + "/hay.txt") + " --needle-lengths 64 --generate " + shell_quote(dir + "/prompts.jsonl") +
                            " --max-new 8 -t 1";
    // stderr on the terminal script(1) makes, stdout to a file
    ASSERT_EQ(run_cmd("script -qec " + shell_quote(run + " --json > " + shell_quote(dir + "/out.json")) + " /dev/null", out), 0) << out;
    EXPECT_NE(out.find("--needle, base: "), std::string::npos) << out;
    EXPECT_NE(out.find("--generate, base: "), std::string::npos) << out;
    EXPECT_NE(out.find("ETA"), std::string::npos) << out;
    std::ifstream j(dir + "/out.json");
    std::stringstream doc;
    doc << j.rdbuf();
    EXPECT_EQ(doc.str().find("ETA"), std::string::npos);
    EXPECT_TRUE(json::accept(doc.str())) << doc.str();
    ASSERT_EQ(run_cmd("script -qec " + shell_quote(run + " -q --json > /dev/null") + " /dev/null", out), 0) << out;
    EXPECT_EQ(out.find("ETA"), std::string::npos) << out;
}

// A run past the model's trained context is refused before anything is
// allocated: --max-new 2147483647 (before, the KV cache grew until the process
// was killed), and a needle length past it (before, run without a word; issue
// 37, item 10). The trained context of the project's models is 256.
TEST(EvalBehaviour, PastTheTrainedContextIsRefused) {
    const std::string dir = prune_test::scratch("behaviour-context");
    std::string hay;
    for (int i = 0; i < 200; ++i) hay += "The river runs past the old mill and on to the sea. ";
    ASSERT_TRUE(write_file(dir + "/hay.txt", hay));
    ASSERT_TRUE(write_file(dir + "/prompts.jsonl", "{\"domain\": \"en\", \"text\": \"Tell me about the river.\"}\n"));
    const std::string reap = shell_quote(reap_test::reap_bin()) + " eval -m " + shell_quote(trained()) + " -p " + shell_quote(trained());
    for (const std::string & args : {" --generate " + shell_quote(dir + "/prompts.jsonl") + " --max-new 2147483647",
                                     " --needle -f " + shell_quote(dir + "/hay.txt") + " --needle-lengths 64,1000"}) {
        SCOPED_TRACE(args);
        std::string out;
        EXPECT_EQ(run_cmd("timeout 120 " + reap + args + " -t 1 -q", out), 2) << out;
        EXPECT_NE(out.find("past the model's trained context of 256"), std::string::npos) << out;
    }
    std::string out;   // within it, the same runs go through
    EXPECT_EQ(run_cmd(reap + " --generate " + shell_quote(dir + "/prompts.jsonl") + " --max-new 16 -t 1 -q", out), 0) << out;
}

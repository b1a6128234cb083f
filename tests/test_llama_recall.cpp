// The retrieval-capable test model, models/reap-moe-recall.gguf (issue 25,
// item 4; models/README.md), through reap eval --needle at its trained
// context (the default lengths 64 and 128, depths 0.15 / 0.5 / 0.85; the
// model has no chat template, so the question is the completion form, the
// needle's lead-in repeated after the haystack):
//   * the base answers at least 90% of the cells exactly, counted here from
//     the --json decoded texts and expected values, not from reap's counters;
//   * a 75% cut (a random plan keeping 2 of 8 experts per layer) loses cells,
//     so the grid tells a damaged model from a whole one;
//   * the cut run as a mask and as the file reap prune writes from the plan
//     gives the same decoded text in every cell;
//   * retrieval holds off its training text (issue 39): haystacks of each
//     corpus domain's held-out samples alone, and of two texts outside the
//     corpus (the GPL-3 and Apache-2.0 licences Debian ships in
//     /usr/share/common-licenses), 16 needles a cell, 96 cells each (twice
//     the 8, so that one cell more or less is 1%): the base answers
//     at least 90% of every one exactly.
#include "behaviour_test_rules.h"
#include "llama_test_util.h"
#include "prune_test_util.h"

#include "gguf/gguf.h"
#include "plan/plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace {

using nlohmann::json;
using reap_test::run_cmd;
using reap_test::shell_quote;

std::string recall_model() { return reap_test::source_dir() + "/models/reap-moe-recall.gguf"; }

} // namespace

TEST(RecallModel, BaseRetrievesACutLosesCellsMaskEqualsFile) {
    const std::string dir = prune_test::scratch("recall-needle");
    const std::string model = recall_model(), heldout = reap_test::source_dir() + "/data/corpus/heldout.jsonl";
    std::string err, out;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(model, m, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 2, 20261202, p, err)) << err;   // keep 2 of 8: a 75% cut
    const std::string plan = dir + "/plan.json", cut = dir + "/cut.gguf";
    ASSERT_TRUE(reap::write_plan(p, plan, true, err)) << err;
    ASSERT_EQ(run_cmd(shell_quote(reap_test::reap_bin()) + " prune -m " + shell_quote(model) + " --plan " + shell_quote(plan) +
                      " -o " + shell_quote(cut) + " --force", out), 0) << out;
    ASSERT_EQ(run_cmd(shell_quote(reap_test::reap_bin()) + " eval -m " + shell_quote(model) + " --mask " + shell_quote(plan) + " -p " +
                      shell_quote(cut) + " --needle -f " + shell_quote(heldout) + " --needles 4 --seed 11 -t 2 --json 2>/dev/null", out), 0) << out;
    const json doc = json::parse(out);
    const json & nd = doc.at("needle");
    EXPECT_FALSE(nd.at("chat").get<bool>()) << "the model has no chat template: the completion form";
    const json & cells = nd.at("cells");
    ASSERT_EQ(cells.size(), 24u);   // lengths 64, 128 (the trained context 256 halved and down) x 3 depths x 4 needles
    std::set<int> lengths;
    size_t base = 0, masked = 0, pruned = 0;
    for (const auto & c : cells) {
        lengths.insert(c.at("length").get<int>());
        const json & ms = c.at("models");
        ASSERT_EQ(ms.size(), 3u);
        const std::string value = c.at("value");
        base += behaviour_test::exact(ms[0].at("text"), value);
        masked += behaviour_test::exact(ms[1].at("text"), value);
        pruned += behaviour_test::exact(ms[2].at("text"), value);
        ASSERT_TRUE(ms[1].at("masked").get<bool>());
        ASSERT_FALSE(ms[2].at("masked").get<bool>());
        EXPECT_EQ(ms[1].at("text"), ms[2].at("text")) << "mask and file differ: " << c.dump();
    }
    EXPECT_EQ(lengths, (std::set<int>{64, 128}));
    EXPECT_GE(base * 10, cells.size() * 9) << "the base retrieved " << base << " of " << cells.size();
    EXPECT_LT(masked, base) << "the 75% cut lost no cell";
    EXPECT_EQ(masked, pruned);
}

namespace {

// The held-out samples of one corpus domain, joined by blank lines as reap eval
// joins a corpus's samples for a haystack.
std::string domain_text(const std::string & heldout, const std::string & domain, const std::string & path) {
    std::ifstream in(heldout);
    std::string line, text;
    while (std::getline(in, line)) {
        const json j = json::parse(line);
        if (j.at("domain") != domain) continue;
        if (!text.empty()) text += "\n\n";
        text += j.at("text").get<std::string>();
    }
    std::ofstream(path, std::ios::binary) << text;
    return text;
}

}  // namespace

TEST(RecallModel, RetrievesInEveryDomainAndInTextOutsideTheCorpus) {
    const std::string dir = prune_test::scratch("recall-domains");
    const std::string model = recall_model(), heldout = reap_test::source_dir() + "/data/corpus/heldout.jsonl";
    std::vector<std::pair<std::string, std::string>> haystacks;   // name, file
    for (const char * d : {"en", "code", "ja", "zh", "de", "fr"}) {
        const std::string path = dir + "/" + d + ".txt";
        ASSERT_GT(domain_text(heldout, d, path).size(), 10000u) << d << ": too little held-out text in " << heldout;
        haystacks.push_back({d, path});
    }
    for (const char * licence : {"GPL-3", "Apache-2.0"}) {   // Debian's base-files: on every Debian system
        const std::string path = std::string("/usr/share/common-licenses/") + licence;
        ASSERT_TRUE(reap_test::file_exists(path)) << path;
        haystacks.push_back({licence, path});
    }
    std::string out;
    for (const auto & [name, path] : haystacks) {
        ASSERT_EQ(run_cmd(shell_quote(reap_test::reap_bin()) + " eval -m " + shell_quote(model) + " -p " + shell_quote(model) +
                          " --needle -f " + shell_quote(path) + " --needles 16 --needle-lengths 64,128 --seed 0 -t 2 --json 2>/dev/null",
                          out), 0) << name << ": " << out;
        const json cells = json::parse(out).at("needle").at("cells");
        ASSERT_EQ(cells.size(), 96u) << name;
        size_t base = 0;
        for (const auto & c : cells) base += behaviour_test::exact(c.at("models")[0].at("text"), c.at("value"));
        printf("recall model, %s haystacks: %zu of 96 exact\n", name.c_str(), base);
        EXPECT_GE(base * 10, 96u * 9) << name << ": " << base << " of 96";
    }
}

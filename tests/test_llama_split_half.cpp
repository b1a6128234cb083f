// The split-half study on the project's own model, through the reap CLI:
//   reap calibrate --shard 0/2 and --shard 1/2 over the same corpus, a plan per
//   domain from each half, reap compare. Two random halves of one domain must
//   choose clearly more similar experts than two different languages do: that
//   is what makes a domain-calibrated cut meaningful. Also checks the shards are
//   disjoint and complete: merge(half 0, half 1) has the whole run's counts.
#include "llama_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>

using namespace reap_test;

namespace {

// The first samples of each wanted domain of the calib split, about `bytes` each.
bool make_corpus(const std::string & out, const std::vector<std::string> & domains, size_t bytes, std::string & err) {
    std::ifstream in(source_dir() + "/data/corpus/calib.jsonl");
    if (!in) {
        err = "no data/corpus/calib.jsonl: run `make corpus`";
        return false;
    }
    std::map<std::string, size_t> used;
    std::ofstream o(out);
    std::string line;
    while (std::getline(in, line)) {
        const nlohmann::json j = nlohmann::json::parse(line);
        const std::string d = j.at("domain");
        if (std::find(domains.begin(), domains.end(), d) == domains.end() || used[d] >= bytes) {
            continue;
        }
        used[d] += j.at("text").get<std::string>().size();
        o << line << "\n";
    }
    return true;
}

double mean_jaccard(const std::string & a, const std::string & b) {
    std::string out;
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " compare " + shell_quote(a) + " " + shell_quote(b) + " --json 2>/dev/null", out), 0) << out;
    return nlohmann::json::parse(out).at("mean_jaccard").get<double>();
}

} // namespace

TEST(SplitHalf, HalvesOfOneDomainAgreeMoreThanTwoLanguages) {
    const std::string dir = test_tmp_dir() + "/split-half";
    ::mkdir(dir.c_str(), 0755);
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    const std::string corpus = dir + "/corpus.jsonl";
    std::string err, out;
    ASSERT_TRUE(make_corpus(corpus, {"en", "ja"}, 12000, err)) << err;

    const std::string run = shell_quote(reap_bin()) + " calibrate -m " + shell_quote(model) + " --corpus " + shell_quote(corpus) +
                            " -c 256 --no-progress --force";
    for (int h = 0; h < 2; ++h) {
        const std::string o = dir + "/half" + std::to_string(h) + ".gguf";
        ASSERT_EQ(run_cmd(run + " --shard " + std::to_string(h) + "/2 -o " + shell_quote(o), out), 0) << out;
    }
    ASSERT_EQ(run_cmd(run + " -o " + shell_quote(dir + "/whole.gguf"), out), 0) << out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " merge " + shell_quote(dir + "/half0.gguf") + " " + shell_quote(dir + "/half1.gguf") +
                      " -o " + shell_quote(dir + "/merged.gguf") + " --force", out), 0) << out;

    // The shards split the samples: merged counts equal the whole run's, exactly.
    std::string whole_counts, merged_counts;
    ASSERT_EQ(run_cmd(shell_quote(python()) + " -c " + shell_quote(
        "import sys; sys.path.insert(0, '" + source_dir() + "/third_party/llama.cpp/gguf-py'); import gguf\n"
        "for p in sys.argv[1:]:\n"
        "    r = gguf.GGUFReader(p)\n"
        "    print(p.split('/')[-1], [(t.name, int(t.data.sum())) for t in r.tensors if t.name.endswith('.count')])\n") +
        " " + shell_quote(dir + "/whole.gguf") + " " + shell_quote(dir + "/merged.gguf"), out), 0) << out;
    const size_t nl = out.find('\n');
    ASSERT_NE(nl, std::string::npos) << out;
    whole_counts  = out.substr(out.find(' ') + 1, nl - out.find(' ') - 1);
    merged_counts = out.substr(out.find(' ', nl) + 1);
    merged_counts.erase(merged_counts.find_last_not_of('\n') + 1);
    EXPECT_EQ(whole_counts, merged_counts);

    for (int h = 0; h < 2; ++h) {
        for (const char * d : {"en", "ja"}) {
            const std::string half = dir + "/half" + std::to_string(h) + ".gguf";
            const std::string plan = dir + "/plan-" + d + "-" + std::to_string(h) + ".json";
            ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " plan " + shell_quote(half) + " -m " + shell_quote(model) +
                              " --keep 16 --domains " + d + " --force -o " + shell_quote(plan), out), 0) << out;
        }
    }
    const double en_halves = mean_jaccard(dir + "/plan-en-0.json", dir + "/plan-en-1.json");
    const double ja_halves = mean_jaccard(dir + "/plan-ja-0.json", dir + "/plan-ja-1.json");
    const double en_vs_ja  = 0.5 * (mean_jaccard(dir + "/plan-en-0.json", dir + "/plan-ja-1.json") +
                                    mean_jaccard(dir + "/plan-en-1.json", dir + "/plan-ja-0.json"));
    std::printf("mean Jaccard of 16-of-32 keep-lists: en halves %.3f, ja halves %.3f, en vs ja %.3f\n",
                en_halves, ja_halves, en_vs_ja);
    EXPECT_GT(en_halves, en_vs_ja + 0.15);
    EXPECT_GT(ja_halves, en_vs_ja + 0.15);
}

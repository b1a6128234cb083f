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
#include <cmath>
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

// The F64 tensors of a saliency archive, by name, read with ggml's gguf reader.
std::map<std::string, std::vector<double>> archive_tensors(const std::string & path) {
    std::map<std::string, std::vector<double>> out;
    const bool read = for_each_ggml_tensor(path, [&](const char * name, const ggml_tensor * t) {
        EXPECT_EQ(t->type, GGML_TYPE_F64) << name;
        const double * v = (const double *) t->data;
        out[name].assign(v, v + ggml_nelements(t));
    });
    EXPECT_TRUE(read) << "ggml cannot read " << path;
    return out;
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
                            " -c 256 -np 1 -t 1 --no-progress --force";
    // -np 1: one window a decode, so each window's arithmetic is the same in a shard and in
    // the whole, and the merge equals the whole to double rounding (packed, a window shares
    // its decode with others that differ between the runs: equal to F32 precision only,
    // tests/archive_compare.h). -t 1: the same archive, byte for byte, as with two threads
    // (cmp'd), for a fraction of the CPU time on a busy machine, where a second thread
    // spins while it waits for the first (the test: 77 CPU-s with two, 8.9 with one, load 7)
    for (int h = 0; h < 2; ++h) {
        const std::string o = dir + "/half" + std::to_string(h) + ".gguf";
        ASSERT_EQ(run_cmd(run + " --shard " + std::to_string(h) + "/2 -o " + shell_quote(o), out), 0) << out;
    }
    ASSERT_EQ(run_cmd(run + " -o " + shell_quote(dir + "/whole.gguf"), out), 0) << out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " merge " + shell_quote(dir + "/half0.gguf") + " " + shell_quote(dir + "/half1.gguf") +
                      " -o " + shell_quote(dir + "/merged.gguf") + " --force", out), 0) << out;

    // Per expert: merged = joint run (counts exactly, sums within rounding: the
    // joint run adds the same windows in another order); the halves differ.
    const auto whole  = archive_tensors(dir + "/whole.gguf");
    const auto merged = archive_tensors(dir + "/merged.gguf");
    const auto half0  = archive_tensors(dir + "/half0.gguf");
    const auto half1  = archive_tensors(dir + "/half1.gguf");
    for (const char * d : {"en", "ja"}) {
        SCOPED_TRACE(d);
        const std::string count = std::string(d) + ".count";
        ASSERT_TRUE(whole.count(count) && merged.count(count) && half0.count(count) && half1.count(count));
        const std::vector<double> & w = whole.at(count), & m = merged.at(count), & a = half0.at(count), & b = half1.at(count);
        ASSERT_EQ(m.size(), w.size());
        ASSERT_EQ(a.size(), w.size());
        ASSERT_EQ(b.size(), w.size());
        size_t differ = 0, not_twice_a = 0, not_twice_b = 0, routed = 0;
        for (size_t i = 0; i < w.size(); ++i) {
            EXPECT_EQ(m[i], w[i]) << count << "[" << i << "] (layer " << i / 32 << ", expert " << i % 32 << ")";
            differ += a[i] != b[i];
            not_twice_a += 2 * a[i] != w[i];
            not_twice_b += 2 * b[i] != w[i];
            routed += w[i] > 0;
        }
        // what makes the equality above mean something: many experts were
        // routed to, and the halves routed differently, so neither half twice
        // (nor cells added in the wrong place) gives the joint counts
        EXPECT_GT(routed, 32u);
        EXPECT_GT(differ, 16u);
        EXPECT_GT(not_twice_a, 16u);
        EXPECT_GT(not_twice_b, 16u);
        for (const char * metric : {"gate_sum", "reap_sum", "ean_sum", "max_norm"}) {
            const std::string name = std::string(d) + "." + metric;
            ASSERT_TRUE(whole.count(name) && merged.count(name)) << name;
            const std::vector<double> & ws = whole.at(name), & ms = merged.at(name);
            ASSERT_EQ(ms.size(), ws.size()) << name;
            for (size_t i = 0; i < ws.size(); ++i) {
                EXPECT_NEAR(ms[i], ws[i], 1e-9 * std::fabs(ws[i]) + 1e-12) << name << "[" << i << "]";
            }
        }
    }

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

// Checks of the corpus tools/build_corpus.py builds (data/corpus, made by
// `make corpus` before the tests run): the contract of DESIGN.md's corpus
// format, splits by source file (no file in two splits), every domain in every
// split, plain text rather than roff, and a manifest whose hashes match the files.
#include "util/sha256.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {

std::string corpus_dir() {
    const char * s = std::getenv("REAP_SOURCE_DIR");
    return std::string(s && *s ? s : REAP_SOURCE_DIR) + "/data/corpus";
}

const std::set<std::string> k_domains = {"en", "code", "ja", "zh", "de", "fr"};

struct split_view {
    std::map<std::string, size_t> samples_per_domain;
    std::set<std::string>          sources;
    size_t                         samples = 0;
    size_t                         roff_samples = 0;
};

split_view read_split(const std::string & split) {
    split_view v;
    std::ifstream in(corpus_dir() + "/" + split + ".jsonl");
    EXPECT_TRUE(in.good()) << "no " << corpus_dir() << "/" << split << ".jsonl: run `make corpus`";
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) {
        ++n;
        const nlohmann::json j = nlohmann::json::parse(line);
        const std::string domain = j.at("domain");
        const std::string text   = j.at("text");
        EXPECT_TRUE(k_domains.count(domain)) << split << ":" << n << ": domain " << domain;
        EXPECT_GE(text.size(), 32u) << split << ":" << n;
        EXPECT_LE(text.size(), 2048u) << split << ":" << n;
        // man pages rendered to text: no roff left, except in the few pages
        // that document roff itself (man-pages(7) quotes "\fB...\fP")
        if (domain != "code") {
            v.roff_samples += text.find("\\fB") != std::string::npos || text.rfind(".TH ", 0) == 0;
        }
        ++v.samples_per_domain[domain];
        ++v.samples;
        v.sources.insert(domain + ":" + j.at("source").get<std::string>());
    }
    EXPECT_LT(v.roff_samples * 1000, v.samples) << split << ": " << v.roff_samples << " samples still hold roff markup";
    return v;
}

} // namespace

TEST(Corpus, SplitsAreDisjointBySourceAndCoverEveryDomain) {
    std::map<std::string, split_view> splits;
    for (const char * s : {"train", "calib", "heldout"}) {
        splits[s] = read_split(s);
        for (const std::string & d : k_domains) {
            EXPECT_GT(splits[s].samples_per_domain[d], 0u) << s << " has no " << d << " sample";
        }
    }
    for (const auto & [a, va] : splits) {
        for (const auto & [b, vb] : splits) {
            if (a >= b) continue;
            for (const std::string & src : va.sources) {
                EXPECT_FALSE(vb.sources.count(src)) << src << " is in both " << a << " and " << b;
            }
        }
    }
    // Held-out and calibration are small slices; training is most of it.
    EXPECT_GT(splits["train"].sources.size(), 5 * splits["heldout"].sources.size());
}

TEST(Corpus, ManifestHashesMatchTheFiles) {
    std::ifstream in(corpus_dir() + "/manifest.json");
    ASSERT_TRUE(in.good()) << "run `make corpus`";
    const nlohmann::json m = nlohmann::json::parse(in);
    for (const char * s : {"train", "calib", "heldout"}) {
        std::string digest, err;
        ASSERT_TRUE(reap::util::sha256_file(corpus_dir() + "/" + s + ".jsonl", digest, err)) << err;
        EXPECT_EQ(m.at("sha256").at(s).get<std::string>(), digest) << s;
    }
    for (const char * p : {"manpages", "manpages-ja", "manpages-zh", "manpages-de", "manpages-fr", "libc6-dev", "libpython3.11-stdlib"}) {
        EXPECT_TRUE(m.at("packages").contains(p)) << "manifest lacks the version of " << p;
    }
}

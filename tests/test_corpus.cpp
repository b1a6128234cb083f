// Checks of the corpus tools/build_corpus.py builds (data/corpus, made by
// `make corpus` before the tests run): the contract of DESIGN.md's corpus
// format, splits by source file (no file in two splits) and by content (hardly
// a sample text in two splits), every sample in the split that the documented
// rule (a SHA-256 of domain and path) gives its source, recomputed here, every
// domain in every split, plain text rather than roff; and a manifest whose
// hashes (recomputed here with OpenSSL directly, not reap's helper) and
// per-domain counts match the files.
#include "corpus/corpus_line.h"

#include <openssl/evp.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <set>
#include <string>

namespace {

std::string corpus_dir() {
    const char * s = std::getenv("REAP_SOURCE_DIR");
    return std::string(s && *s ? s : REAP_SOURCE_DIR) + "/data/corpus";
}

const std::set<std::string> k_domains = {"en", "code", "ja", "zh", "de", "fr"};

// SHA-256 of `data` with OpenSSL's one-shot digest.
std::string sha256(const std::string & data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr) != 1) return "";
    return std::string((const char *) md, n);
}

std::string hex(const std::string & bytes) {
    static const char * digits = "0123456789abcdef";
    std::string s;
    for (unsigned char c : bytes) {
        s += digits[c >> 4];
        s += digits[c & 15];
    }
    return s;
}

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The split DESIGN.md's rule gives a source file: the first 8 bytes of
// SHA-256("split" NUL domain NUL path), big-endian, over 2^64: heldout below
// 0.05, calib below 0.10, train above (zh_CN and zh_TW pages count as one).
std::string split_by_rule(const std::string & domain, const std::string & source) {
    static const std::regex zh("/zh_(CN|TW)/");
    const std::string path = std::regex_replace(source, zh, "/zh/");
    const std::string h = sha256(std::string("split") + '\0' + domain + '\0' + path);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | (unsigned char) h[(size_t) i];
    const double u = (double) v / 18446744073709551616.0;
    return u < 0.05 ? "heldout" : u < 0.10 ? "calib" : "train";
}

struct split_view {
    std::map<std::string, size_t> samples_per_domain;
    std::map<std::string, size_t> bytes_per_domain;
    std::set<std::string>          text_hashes;     // SHA-256 of every sample's text
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
        v.bytes_per_domain[domain] += text.size();
        ++v.samples;
        const std::string source = j.at("source");
        v.sources.insert(domain + ":" + source);
        v.text_hashes.insert(sha256(text));
        EXPECT_EQ(split_by_rule(domain, source), split) << split << ":" << n << ": " << domain << " " << source;
    }
    EXPECT_LT(v.roff_samples * 1000, v.samples) << split << ": " << v.roff_samples << " samples still hold roff markup";
    return v;
}

} // namespace

TEST(Corpus, SplitsFollowTheRuleAreDisjointAndCoverEveryDomain) {
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
            // By content: only text that man pages repeat verbatim (translators'
            // license and bug-report footers, one page installed under several
            // names) may recur across splits; the builder splits by path, so
            // those few are known leaks (4 + 4 samples today), bounded here at
            // 2% of the smaller split so that a real leak cannot hide.
            size_t shared = 0;
            for (const std::string & h : va.text_hashes) shared += vb.text_hashes.count(h);
            EXPECT_LE(shared * 50, std::min(va.samples, vb.samples))
                << shared << " sample texts are in both " << a << " and " << b;
        }
    }
    // Held-out and calibration are small slices; training is most of it.
    EXPECT_GT(splits["train"].sources.size(), 5 * splits["heldout"].sources.size());
}

TEST(Corpus, ManifestMatchesTheFiles) {
    std::ifstream in(corpus_dir() + "/manifest.json");
    ASSERT_TRUE(in.good()) << "run `make corpus`";
    const nlohmann::json m = nlohmann::json::parse(in);
    for (const char * s : {"train", "calib", "heldout"}) {
        const std::string bytes = read_file(corpus_dir() + "/" + s + ".jsonl");
        ASSERT_FALSE(bytes.empty()) << s;
        EXPECT_EQ(m.at("sha256").at(s).get<std::string>(), hex(sha256(bytes))) << s;
        // the per-domain counts, recounted from the file
        const split_view v = read_split(s);
        for (const std::string & d : k_domains) {
            EXPECT_EQ(m.at("domains").at(d).at(s).at("samples").get<size_t>(), v.samples_per_domain.count(d) ? v.samples_per_domain.at(d) : 0)
                << d << " " << s;
            EXPECT_EQ(m.at("domains").at(d).at(s).at("bytes").get<size_t>(), v.bytes_per_domain.count(d) ? v.bytes_per_domain.at(d) : 0)
                << d << " " << s;
        }
    }
    for (const char * p : {"manpages", "manpages-ja", "manpages-zh", "manpages-de", "manpages-fr", "libc6-dev", "libpython3.11-stdlib"}) {
        EXPECT_TRUE(m.at("packages").contains(p)) << "manifest lacks the version of " << p;
    }
}

// A corpus line is parsed as JSON once, and what is wrong is said: a line whose
// bytes are not UTF-8 names the ill-formed byte (it used to read "not a JSON
// object", which sent people looking for a missing brace), a JSON value that is
// no object says so, and a good line parses.
TEST(CorpusLine, SaysWhatIsWrongWithALine) {
    reap::corpus_line line;
    bool blank = false;
    std::string err;
    EXPECT_FALSE(reap::parse_corpus_line("{\"domain\": \"en\", \"text\": \"abc \xff def\"}", "c.jsonl:3", line, blank, err));
    EXPECT_NE(err.find("c.jsonl:3"), std::string::npos) << err;
    EXPECT_NE(err.find("UTF-8"), std::string::npos) << err;
    EXPECT_FALSE(reap::parse_corpus_line("[1, 2]", "c.jsonl:4", line, blank, err));
    EXPECT_NE(err.find("not a JSON object"), std::string::npos) << err;
    EXPECT_FALSE(reap::parse_corpus_line("{\"domain\": \"en\", \"text\": ", "c.jsonl:5", line, blank, err));
    EXPECT_NE(err.find("not valid JSON"), std::string::npos) << err;
    // a domain is shown everywhere: a control character in it (here an escape that clears a terminal) is refused
    EXPECT_FALSE(reap::parse_corpus_line("{\"domain\": \"e\\u001b[2Jn\", \"text\": \"abc\"}", "c.jsonl:7", line, blank, err));
    EXPECT_NE(err.find("control character"), std::string::npos) << err;
    EXPECT_EQ(err.find('\x1b'), std::string::npos) << "the message itself carries the escape";
    ASSERT_TRUE(reap::parse_corpus_line("{\"domain\": \"en\", \"text\": \"abc\"}", "c.jsonl:6", line, blank, err)) << err;
    EXPECT_FALSE(blank);
}

// A number too large for a double is nlohmann's out_of_range (406), not a
// parse_error: it escaped parse_corpus_line as an exception and `reap
// calibrate` aborted (exit 134; found by fuzz_corpus, the lines kept in
// fuzz/regressions/corpus/). It is a bad line like any other, named by its
// line and the column where the number ends; the JSONL-or-text guess says
// "not a corpus" without throwing.
TEST(CorpusLine, ANumberTooLargeForADoubleIsABadLine) {
    for (const char * text : {"44444444444444444444444444444444444444e4444444444e44{",
                              "{\"domain\":\"en\",\"text\":\"x\",\"n\":1e99999}"}) {
        SCOPED_TRACE(text);
        reap::corpus_line line;
        bool blank = true;
        std::string err;
        EXPECT_FALSE(reap::parse_corpus_line(text, "corpus.jsonl:7", line, blank, err));
        EXPECT_FALSE(blank);
        EXPECT_EQ(err.rfind("corpus.jsonl:7: not valid JSON at column ", 0), 0u) << err;
        EXPECT_NE(err.find("number overflow"), std::string::npos) << err;
        EXPECT_FALSE(reap::looks_like_jsonl_corpus("corpus.txt", std::string(text) + "\n{\"domain\":\"en\",\"text\":\"x\"}\n"));
    }
    reap::corpus_line line;
    bool blank = false;
    std::string err;
    EXPECT_FALSE(reap::parse_corpus_line("{\"domain\":\"en\",\"text\":\"x\",\"n\":1e99999}", "c.jsonl:2", line, blank, err));
    EXPECT_NE(err.find("c.jsonl:2: not valid JSON at column 37: number overflow parsing '1e99999'"), std::string::npos) << err;
}

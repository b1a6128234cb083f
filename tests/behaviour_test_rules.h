// The rules of reap eval --needle / --generate written again, independently
// of src/metrics, for the tests that recompute every printed number from the
// --json texts, tokens and expected values (test_llama_eval_behaviour.cpp,
// test_llama_sweep.cpp; test_report.cpp for the demo's section of
// docs/results.md).
#pragma once

#include <nlohmann/json.hpp>

#include <cctype>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace behaviour_test {

using nlohmann::json;

inline std::string trim(const std::string & s) {
    size_t b = 0, e = s.size();
    while (b < e && isspace((unsigned char) s[b])) ++b;
    while (e > b && isspace((unsigned char) s[e - 1])) --e;
    return s.substr(b, e - b);
}

// The value of needle cell `index` under `seed`: three capitals, '-', four
// digits, drawn from a 64-bit Mersenne twister seeded with
// seed ^ (0x9E3779B97F4A7C15 * (index + 1)) (the documented rule of --seed).
inline std::string needle_value(uint64_t seed, uint64_t index) {
    std::mt19937_64 g(seed ^ (0x9E3779B97F4A7C15ull * (index + 1)));
    std::string v;
    for (int i = 0; i < 3; ++i) v.push_back((char) ('A' + g() % 26));
    v.push_back('-');
    for (int i = 0; i < 4; ++i) v.push_back((char) ('0' + g() % 10));
    return v;
}

inline bool exact(const std::string & text, const std::string & value) {
    const std::string t = trim(text);
    return t == value || t == value + ".";
}

// the last r copies of a p-token block are equal, for some p >= k
inline bool loops(const std::vector<int> & t, size_t k, size_t r) {
    for (size_t p = k; p * r <= t.size(); ++p) {
        const std::vector<int> last(t.end() - p, t.end());
        bool all = true;
        for (size_t c = 2; c <= r && all; ++c) all = std::vector<int>(t.end() - c * p, t.end() - (c - 1) * p) == last;
        if (all) return true;
    }
    return false;
}

struct gen_row {
    size_t n = 0;
    double loop = 0, ended = 0, d4 = 0, len = 0, agree = 0;
};

inline gen_row recompute(const json & outs, const json & base, const std::string & domain, size_t k, size_t r) {
    gen_row g;
    std::set<std::vector<int>> grams;
    size_t n_grams = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
        if (!domain.empty() && outs[i].at("domain") != domain) continue;
        const auto t = outs[i].at("tokens").get<std::vector<int>>();
        const auto b = base[i].at("tokens").get<std::vector<int>>();
        ++g.n;
        g.loop += loops(t, k, r);
        g.ended += outs[i].at("terminated").get<bool>();
        g.len += t.size();
        size_t a = 0;
        while (a < t.size() && a < b.size() && t[a] == b[a]) ++a;
        g.agree += a;
        for (size_t j = 0; j + 4 <= t.size(); ++j, ++n_grams) grams.insert({t[j], t[j + 1], t[j + 2], t[j + 3]});
    }
    g.d4 = n_grams ? (double) grams.size() / n_grams : 0;
    if (g.n) {
        g.loop /= g.n;
        g.ended /= g.n;
        g.len /= g.n;
        g.agree /= g.n;
    }
    return g;
}

// Prompts of three domains (the first 120 characters of three samples over
// 300 of each of en, code, ja in `heldout`, a corpus) and one chat turn, as JSONL.
inline std::string prompts_from(const std::string & heldout) {
    std::ifstream in(heldout);
    std::string prompts, line;
    std::map<std::string, int> per;
    while (std::getline(in, line)) {
        const json j = json::parse(line);
        const std::string d = j.at("domain"), t = j.at("text");
        if ((d == "en" || d == "code" || d == "ja") && t.size() > 300 && per[d] < 3) {
            ++per[d];
            prompts += json{{"domain", d}, {"text", t.substr(0, 120)}}.dump() + "\n";
        }
    }
    return prompts + json{{"domain", "chat"}, {"messages", {{{"role", "user"}, {"content", "What does ls do?"}}}}}.dump() + "\n";
}

} // namespace behaviour_test

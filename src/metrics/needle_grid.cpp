// The core rules of the needle grid (needle_grid.h).
#include "metrics/needle_grid.h"

#include <cmath>
#include <random>

namespace reap {

const char * const k_needle_lead     = "The secret code is";
const char * const k_needle_question = "What is the secret code? Answer with the code only.";
const std::vector<double> k_default_needle_depths = {0.15, 0.5, 0.85};

std::string needle_value(uint64_t seed, uint64_t index) {
    std::mt19937_64 rng(seed ^ (0x9E3779B97F4A7C15ull * (index + 1)));
    std::string v;
    for (int i = 0; i < 3; ++i) v += (char) ('A' + rng() % 26);
    v += '-';
    for (int i = 0; i < 4; ++i) v += (char) ('0' + rng() % 10);
    return v;
}

namespace {

bool ends_sentence(const std::string & piece) {
    size_t e = piece.size();
    while (e > 0 && piece[e - 1] == ' ') --e;
    if (e == 0) return false;
    const char c = piece[e - 1];
    return c == '.' || c == '!' || c == '?' || c == '\n';
}

} // namespace

size_t needle_boundary(const std::vector<std::string> & pieces, double depth) {
    const size_t n = pieces.size();
    const double target = depth * (double) n;
    size_t best = 0;
    double best_dist = target;
    for (size_t i = 1; i <= n; ++i) {
        if (i < n && !ends_sentence(pieces[i - 1])) continue;
        const double d = std::fabs((double) i - target);
        if (d < best_dist) {
            best = i;
            best_dist = d;
        }
    }
    return best;
}

bool needle_matches(const std::string & decoded, const std::string & value) {
    const char * ws = " \t\r\n";
    const size_t b = decoded.find_first_not_of(ws);
    if (b == std::string::npos) return false;
    const size_t e = decoded.find_last_not_of(ws);
    const std::string t = decoded.substr(b, e - b + 1);
    return t == value || t == value + ".";
}

std::vector<int> default_needle_lengths(int n_ctx_train) {
    std::vector<int> out;
    for (int l = 64; l <= n_ctx_train / 2 && l > 0; l *= 2) out.push_back(l);
    if (out.size() > 5) out.erase(out.begin(), out.end() - 5);
    return out;
}

size_t needle_model::n_exact() const {
    size_t n = 0;
    for (const auto & a : answers) n += a.match;
    return n;
}

std::vector<needle_cell> needle_cells(const std::vector<int> & lengths, const std::vector<double> & depths,
                                      int needles, uint64_t seed) {
    std::vector<needle_cell> cells;
    for (int l : lengths) {
        for (double d : depths) {
            for (int k = 0; k < needles; ++k) {
                needle_cell c;
                c.length = l;
                c.depth  = d;
                c.trial  = k;
                c.value  = needle_value(seed, cells.size());
                cells.push_back(c);
            }
        }
    }
    return cells;
}


nlohmann::ordered_json needle_report_to_json(const needle_report & r) {
    nlohmann::ordered_json j;
    j["seed"] = r.seed;
    j["chat"] = r.chat;
    j["haystack"] = r.haystack_path;
    j["cells"] = nlohmann::ordered_json::array();
    for (size_t c = 0; c < r.cells.size(); ++c) {
        const needle_cell & cell = r.cells[c];
        nlohmann::ordered_json jc = {{"length", cell.length}, {"depth", cell.depth}, {"trial", cell.trial},
                                     {"value", cell.value}, {"insert_at", cell.insert_at},
                                     {"prompt_tokens", cell.n_prompt}, {"answer_tokens", cell.n_answer},
                                     {"models", nlohmann::ordered_json::array()}};
        for (const auto & m : r.models) {
            if (c >= m.answers.size()) continue;
            jc["models"].push_back({{"name", m.name}, {"masked", m.masked}, {"text", m.answers[c].text},
                                    {"match", m.answers[c].match}});
        }
        j["cells"].push_back(jc);
    }
    j["exact"] = nlohmann::ordered_json::array();
    for (const auto & m : r.models) {
        j["exact"].push_back({{"name", m.name}, {"masked", m.masked}, {"n_exact", m.n_exact()}, {"n_cells", r.cells.size()}});
    }
    return j;
}

void needle_report_print(FILE * out, const needle_report & r) {
    fprintf(out, "needle grid: %zu cells, seed %llu, question %s\n\n", r.cells.size(), (unsigned long long) r.seed,
            r.chat ? "as a user turn (chat template)" : "as a completion (no chat template)");
    fprintf(out, "%-8s %-6s %-5s %-9s", "length", "depth", "trial", "value");
    for (size_t m = 0; m < r.models.size(); ++m) fprintf(out, " %6s", m == 0 ? "base" : ("#" + std::to_string(m)).c_str());
    fprintf(out, "\n");
    for (size_t c = 0; c < r.cells.size(); ++c) {
        const needle_cell & cell = r.cells[c];
        fprintf(out, "%-8d %-6.2f %-5d %-9s", cell.length, cell.depth, cell.trial, cell.value.c_str());
        for (const auto & m : r.models) fprintf(out, " %6s", c < m.answers.size() && m.answers[c].match ? "ok" : "x");
        fprintf(out, "\n");
    }
    fprintf(out, "%-31s", "exact");
    for (const auto & m : r.models) {
        const std::string nm = std::to_string(m.n_exact()) + "/" + std::to_string(r.cells.size());
        fprintf(out, " %6s", nm.c_str());
    }
    fprintf(out, "\n");
    for (size_t m = 1; m < r.models.size(); ++m) {
        fprintf(out, "  #%zu: %s%s\n", m, r.models[m].masked ? "masked by " : "", r.models[m].name.c_str());
    }
}

} // namespace reap

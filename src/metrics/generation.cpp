// The free-generation rules of generation.h: loops, termination, distinct-4,
// agreement with the base.
#include "metrics/generation.h"

#include <set>

namespace reap {

bool ends_in_loop(const std::vector<int32_t> & t, int k, int r) {
    const size_t n = t.size();
    if (k < 1 || r < 2) return false;
    for (size_t p = (size_t) k; p * (size_t) r <= n; ++p) {
        bool periodic = true;
        for (size_t i = n - p * (size_t) r + p; i < n && periodic; ++i) periodic = t[i] == t[i - p];
        if (periodic) return true;
    }
    return false;
}

size_t leading_agreement(const std::vector<int32_t> & a, const std::vector<int32_t> & b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

generation_stats generation_stats_of(const std::vector<const generation_output *> & outputs,
                                     const std::vector<const generation_output *> & base) {
    generation_stats s;
    s.n_outputs = outputs.size();
    if (outputs.empty()) return s;
    std::set<std::vector<int32_t>> grams;
    size_t n_grams = 0, loops = 0, ended = 0, tokens = 0, agree = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
        const auto & t = outputs[i]->tokens;
        loops += ends_in_loop(t);
        ended += outputs[i]->terminated;
        tokens += t.size();
        if (i < base.size()) agree += leading_agreement(t, base[i]->tokens);
        for (size_t j = 0; j + 4 <= t.size(); ++j) {
            grams.insert(std::vector<int32_t>(t.begin() + j, t.begin() + j + 4));
            ++n_grams;
        }
    }
    const double n = (double) outputs.size();
    s.loop_rate        = loops / n;
    s.termination_rate = ended / n;
    s.distinct_4       = n_grams ? (double) grams.size() / n_grams : 0;
    s.mean_length      = tokens / n;
    s.mean_agreement   = agree / n;
    return s;
}


generation_stats generation_report::stats(size_t m, int domain) const {
    std::vector<const generation_output *> outs, base;
    for (size_t i = 0; i < prompt_domain.size(); ++i) {
        if (domain >= 0 && prompt_domain[i] != domain) continue;
        if (i < models[m].outputs.size()) outs.push_back(&models[m].outputs[i]);
        if (i < models[0].outputs.size()) base.push_back(&models[0].outputs[i]);
    }
    return generation_stats_of(outs, base);
}

namespace {

nlohmann::ordered_json stats_json(const generation_stats & s) {
    return {{"outputs", s.n_outputs},          {"loop_rate", s.loop_rate},   {"termination_rate", s.termination_rate},
            {"distinct_4", s.distinct_4},      {"mean_length", s.mean_length}, {"mean_agreement", s.mean_agreement}};
}

} // namespace

nlohmann::ordered_json generation_report_to_json(const generation_report & r) {
    nlohmann::ordered_json j;
    j["prompts"] = r.prompts_path;
    j["max_new"] = r.max_new;
    j["temperature"] = r.temperature;
    j["seed"] = r.seed;
    j["loop_span"] = k_loop_span;
    j["loop_repeats"] = k_loop_repeats;
    j["models"] = nlohmann::ordered_json::array();
    for (size_t m = 0; m < r.models.size(); ++m) {
        const generation_model & gm = r.models[m];
        nlohmann::ordered_json jm;
        jm["name"] = gm.name;
        jm["masked"] = gm.masked;
        jm["outputs"] = nlohmann::ordered_json::array();
        for (size_t i = 0; i < gm.outputs.size() && i < r.prompt_domain.size(); ++i) {
            jm["outputs"].push_back({{"domain", r.domains[r.prompt_domain[i]]},
                                     {"line", r.prompt_line[i]},
                                     {"tokens", gm.outputs[i].tokens},
                                     {"text", i < gm.texts.size() ? gm.texts[i] : ""},
                                     {"terminated", gm.outputs[i].terminated}});
        }
        jm["domains"] = nlohmann::ordered_json::object();
        for (size_t d = 0; d < r.domains.size(); ++d) jm["domains"][r.domains[d]] = stats_json(r.stats(m, (int) d));
        jm["overall"] = stats_json(r.stats(m, -1));
        j["models"].push_back(jm);
    }
    return j;
}

void generation_report_print(FILE * out, const generation_report & r) {
    char how[64] = "greedy";
    if (r.temperature > 0) snprintf(how, sizeof how, "sampled at T %.2f, seed %llu", r.temperature, (unsigned long long) r.seed);
    fprintf(out, "free generation: %zu prompts, %s, at most %d new tokens; a loop is a span of >= %d tokens "
            "repeated >= %d times at the end\n", r.prompt_domain.size(), how, r.max_new, k_loop_span, k_loop_repeats);
    for (size_t m = 0; m < r.models.size(); ++m) {
        const generation_model & gm = r.models[m];
        fprintf(out, "\n== %s%s\n", gm.masked ? "masked by " : "", gm.name.c_str());
        fprintf(out, "%-16s %7s %8s %8s %10s %9s %9s\n", "", "outputs", "loop", "ended", "distinct-4", "mean len",
                "agree");
        auto row = [&](const std::string & name, const generation_stats & s) {
            fprintf(out, "%-16s %7zu %7.1f%% %7.1f%% %10.4f %9.2f %9.2f\n", name.c_str(), s.n_outputs, 100.0 * s.loop_rate,
                    100.0 * s.termination_rate, s.distinct_4, s.mean_length, s.mean_agreement);
        };
        for (size_t d = 0; d < r.domains.size(); ++d) row(r.domains[d], r.stats(m, (int) d));
        row("overall", r.stats(m, -1));
    }
}

} // namespace reap

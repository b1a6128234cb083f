// What free generation shows that next-token KLD does not (reap eval
// --generate): per output whether it ends inside a loop, whether it
// terminated, its length; per set of outputs distinct-4 and how many leading
// tokens agree with the base's output for the same prompt. Token ids only, no
// llama.cpp, so the rules are tested in the core.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace reap {

// An output ends inside a loop when its last r x p tokens are periodic with a
// period p >= k (every token equals the one p before it): a span of at least k
// tokens repeated at least r times back to back, the last copy possibly cut
// short by the token cap. A shorter span repeated is caught through a multiple
// of its length (k spaces repeated is a period-k run as well).
// k = 8, r = 3: a repeated word, or a run of one character under 24 tokens
// (indentation, a rule line in a man page), is ordinary text and does not
// count; a phrase or line said three times in a row, the runaway pattern of a
// damaged model, does.
constexpr int k_loop_span    = 8;
constexpr int k_loop_repeats = 3;
bool ends_in_loop(const std::vector<int32_t> & tokens, int k = k_loop_span, int r = k_loop_repeats);

// The length of the common prefix of a and b.
size_t leading_agreement(const std::vector<int32_t> & a, const std::vector<int32_t> & b);

// One generated continuation: the tokens before any end-of-generation token,
// and whether one ended it before the cap.
struct generation_output {
    std::vector<int32_t> tokens;
    bool                 terminated = false;
};

// Numbers over a set of outputs (one domain of one model).
struct generation_stats {
    size_t n_outputs        = 0;
    double loop_rate        = 0;  // share of outputs that end inside a loop (ends_in_loop)
    double termination_rate = 0;  // share that emitted an end-of-generation token before the cap
    double distinct_4       = 0;  // distinct token 4-grams / all 4-grams (within outputs), 0 when none
    double mean_length      = 0;  // mean tokens per output (the end token not counted)
    double mean_agreement   = 0;  // mean leading tokens that agree with the base's output for the same prompt
};

// outputs[i] and base[i] answer the same prompt (base may be the outputs themselves).
generation_stats generation_stats_of(const std::vector<const generation_output *> & outputs,
                                     const std::vector<const generation_output *> & base);

struct generation_model {
    std::string                    name;   // "base", a pruned file, or a plan
    bool                           masked = false;
    std::vector<generation_output> outputs;  // [prompt]
    std::vector<std::string>       texts;    // [prompt] the outputs' text
};

struct generation_report {
    std::string                   prompts_path;
    int                           max_new = 0;
    double                        temperature = 0;  // 0: greedy
    uint64_t                      seed = 0;         // of the draws when sampled
    std::vector<std::string>      domains;        // first-seen order
    std::vector<int>              prompt_domain;  // [prompt] index into domains
    std::vector<size_t>           prompt_line;    // [prompt] line in the file (0: plain text)
    std::vector<generation_model> models;         // [0] is the base

    // Model m's numbers over one domain (-1: every prompt), agreement against the base.
    generation_stats stats(size_t m, int domain) const;
};

// {"prompts", "max_new", "temperature", "seed", "loop_span", "loop_repeats", "models": [{"name", "masked",
//  "outputs": [{"domain", "line", "tokens", "text", "terminated"}],
//  "domains": {"D": {stats}}, "overall": {stats}}]}
nlohmann::ordered_json generation_report_to_json(const generation_report & r);

// A table per model: a row per domain and overall.
void generation_report_print(FILE * out, const generation_report & r);

} // namespace reap

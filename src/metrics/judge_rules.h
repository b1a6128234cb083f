// reap judge without a model: which answers are compared, the judge's prompts,
// how two verdicts in swapped order make an outcome, the rubric file, the
// statistics and the judge file (what `reap judge -o` writes and
// `reap report --judge` reads).
//
// Pairing: two answers files (gen_tasks.h) of the same task file (its sha256),
// the same task ids and samples in the same order; anything else is refused
// naming the first mismatch. Every (task, sample) pair is judged twice: A shown
// first, then B shown first. The judge's verdict is one of two labels, "first"
// or "second", read from the judge deterministically (its scores of the labels'
// first tokens after the prompt: what grammar-constrained greedy output picks),
// never parsed from free text. Outcome from A's side: a win when A is chosen in
// both orders, a loss when B is, a tie when the verdict followed the position
// (first both times, or second both times). The position rate is the share of
// all verdicts that chose "first": near 0.5 for a judge that reads the answers,
// 1.0 for one that always picks what it is shown first.
//
// Rubric (--rubric FILE, JSON): {"scale": [LOW, HIGH] (integers, 2..10 points),
// "instructions": "..."}; each answer is also scored alone, the score the
// label among LOW..HIGH the judge scores highest.
#pragma once

#include "metrics/gen_tasks.h"
#include "metrics/task_stats.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace reap {

constexpr const char * k_judge_first = "first";
constexpr const char * k_judge_second = "second";

struct judge_rubric {
    std::string path, sha256, instructions;
    int         low = 1, high = 5;
};
bool read_judge_rubric(const std::string & path, judge_rubric & out, std::string & err);

// The answers A and B hold for the same tasks, or the first mismatch.
bool check_answer_pair(const answers_doc & a, const std::string & name_a, const answers_doc & b, const std::string & name_b,
                       std::string & err);

// The judge's chat messages (JSON array of {"role", "content"}).
nlohmann::json pairwise_messages(const std::string & task, const std::string & first, const std::string & second);
nlohmann::json rubric_messages(const judge_rubric & r, const std::string & task, const std::string & answer);

enum class judge_outcome { a_wins, b_wins, tie };
judge_outcome outcome_of(bool ab_chose_first, bool ba_chose_first);

struct judge_pair {
    std::string id;
    int         sample = 0;
    int         ab = -1, ba = -1;        // the verdicts: 0 = first, 1 = second; -1 = no verdict (a failed reply)
    int         score_a = 0, score_b = 0;   // rubric scores (0: none)
};

struct judge_result {
    std::string a_path, a_sha256, a_model, b_path, b_sha256, b_model;
    std::string tasks_path, tasks_sha256;
    std::string judge_kind;          // "gguf" or "url"
    std::string judge_name;          // the file, or the endpoint's model name
    std::string judge_detail;        // the file's header sha256, or the URL
    judge_rubric rubric;             // path "" = none
    std::vector<judge_pair> pairs;
    uint64_t    failures = 0;        // replies that gave no verdict (endpoint: refused, malformed, missing)

    // The counts from A's side over pairs with both verdicts.
    struct summary_t {
        uint64_t wins = 0, losses = 0, ties = 0, judged = 0, verdicts_first = 0, verdicts = 0;
        double position_first_rate() const { return verdicts ? (double) verdicts_first / (double) verdicts : 0; }
    };
    summary_t summary() const;
};

// The mean of a build's rubric scores and its 95% normal interval (empty when none).
struct score_mean {
    uint64_t n = 0;
    double   mean = 0, low = 0, high = 0;
};
score_mean rubric_mean(const std::vector<judge_pair> & pairs, bool of_a);

nlohmann::ordered_json judge_result_to_json(const judge_result & r);
bool judge_result_from_json(const nlohmann::json & j, const std::string & name, judge_result & out, std::string & err);
bool read_judge_result(const std::string & path, judge_result & out, std::string & err);

void judge_result_print(FILE * out, const judge_result & r);

} // namespace reap

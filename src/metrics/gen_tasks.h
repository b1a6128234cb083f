// Generative tasks without a model: the task file, the checkers of an answer,
// and the typed answers file that `reap eval --tasks` writes per model and
// `reap judge` reads.
//
// Task file (JSONL, one task a line):
//   {"id": "q1", "prompt": "..." | "messages": [{"role", "content"}, ...],
//    "answer": {"exact": "S"} | {"regex": "R"} | {"number": X, "tol": T},
//    "max_tokens": N}                                   (max_tokens optional)
// Checkers, on the answer text (the end-of-generation token not included):
//   exact   the text, leading and trailing whitespace trimmed, is S;
//   regex   R (ECMAScript) matches somewhere in the text;
//   number  the last number in the text (optional sign, digits, optional
//           fraction and exponent; thousands separators not read) is within
//           T of X.
// Every line is checked before any model loads: JSON, a unique non-empty id,
// exactly one of prompt and messages, exactly one answer rule, a regex that
// compiles (at most 256 characters), finite numbers, max_tokens within 1..1,048,576.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace reap {

struct answer_rule {
    enum kind_t { exact, regex, number } kind = exact;
    std::string text;            // exact: S; regex: R as written
    double      value = 0, tol = 0;
    std::regex  re;              // regex, compiled
};

struct gen_task {
    std::string              id;
    std::string              prompt;     // "" when messages are given
    nlohmann::json           messages;   // null when prompt is given
    answer_rule              answer;
    int                      max_tokens = 0;   // 0: the run's --max-new
    size_t                   line = 0;         // 1-based line of the file
};

// Reads the JSONL task file (at most 256 MiB); every line checked as above.
bool read_gen_tasks(const std::string & path, std::vector<gen_task> & out, std::string & err);
bool parse_gen_tasks(const std::string & text, const std::string & name, std::vector<gen_task> & out, std::string & err);

// Whether `text` passes the rule.
bool answer_passes(const answer_rule & rule, const std::string & text);

// The rule as JSON, as the task file writes it.
nlohmann::json answer_rule_json(const answer_rule & rule);

// One answer of one model.
struct gen_answer {
    std::string id;
    int         sample = 0;        // 0..samples-1
    std::string text;
    int         n_tokens = 0;      // tokens written (the end-of-generation token not counted)
    int         cap = 0;           // the cap it ran under
    bool        hit_cap = false;   // it wrote `cap` tokens without ending
    bool        pass = false;
    // --recheck-cap: the same prompt and draw again at a larger cap (only answers that hit the cap)
    bool        rechecked = false;
    std::string recheck_text;
    int         recheck_cap = 0, recheck_tokens = 0;
    bool        recheck_hit_cap = false, recheck_pass = false;
};

// The settings every answer of a run was made with.
struct gen_settings {
    double   temperature = 0;    // 0: greedy
    double   top_p = 1;
    uint64_t seed = 0;           // task i, sample k draws from a stream seeded with seed + i * samples + k
    int      samples = 1;
    int      max_new = 0;        // the cap of a task without max_tokens
    int      recheck_cap = 0;    // 0: no recheck
};

// A model's answers file: {"format": "reap-answers", "version": 1,
// "tasks": {"path", "sha256"}, "model": {"name", "masked", "base", "base_sha256",
// "plan_sha256"}, "settings": {...}, "answers": [...], "summary": {...}}.
// The summary (passes, cap hits, recheck) is recomputed on reading and must agree.
struct answers_doc {
    std::string  tasks_path, tasks_sha256;
    std::string  model_name;          // "base", a -p file, a --mask plan
    bool         masked = false;
    std::string  base_path, base_sha256, plan_sha256;   // what ran (plan_sha256: a mask's)
    gen_settings settings;
    std::vector<gen_answer> answers;  // task-major: task 0's samples, then task 1's, ...
    std::vector<std::string> prompts; // per task, the prompt as the model saw it (rendered)
    // what the run measured (formats/behaviour_file.h's receipts, as JSON: the
    // task file's hash, the base, every candidate's plan or files' hashes) and
    // which of its models this document is (0 the base, i the i-th candidate)
    nlohmann::json measured;
    int            model_index = 0;
    size_t n_pass() const;
    size_t n_cap_hits() const;
    size_t n_rechecked_finished() const;   // hit the cap, then finished under the recheck's
};

nlohmann::ordered_json answers_doc_to_json(const answers_doc & d);
bool answers_doc_from_json(const nlohmann::json & j, const std::string & name, answers_doc & out, std::string & err);
bool read_answers_doc(const std::string & path, answers_doc & out, std::string & err);

} // namespace reap

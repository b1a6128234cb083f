// reap judge, in-process: a judge model (any GGUF with a chat template) run
// through the pinned llama.cpp compares two builds' answers (metrics/judge_rules.h:
// the pairing, the prompts, the outcome of a swapped pair). A verdict is the
// label whose first token the judge scores highest right after its prompt
// (rendered through its own chat template with the generation prompt): exactly
// what grammar-constrained greedy output of one of the labels would begin with,
// read from the logits, never parsed from free text. The labels' first tokens
// must differ in the judge's vocabulary (checked before any decode), as must
// the rubric's digits. Every prompt is rendered, tokenized and checked against
// the judge's trained context before the first decode.
#pragma once

#include "llama/eval.h"
#include "metrics/judge_rules.h"

#include <string>

namespace reap {

struct judge_options {
    std::string  a_path, b_path;       // the two answers files
    std::string  judge_path;           // --judge JUDGE.gguf
    std::string  rubric_path;          // --rubric (optional)
    std::string  log_path;             // the request log (JSONL): prompts and the labels' scores
    eval_runtime rt;
    bool         verbose = false;
    bool         progress = false;
};

// Reads and pairs the answers files and the rubric (everything a judge run
// needs before a model loads); fills the result's receipts.
bool prepare_judge(const std::string & a_path, const std::string & b_path, const std::string & rubric_path, answers_doc & a,
                   answers_doc & b, judge_result & r, std::string & err);

bool run_judge(const judge_options & opt, judge_result & out, std::string & err);

} // namespace reap

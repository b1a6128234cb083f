// reap judge: a judge model compares two builds' answers (metrics/judge_rules.h:
// the pairing, the prompts, the outcome of a swapped pair), either in-process or
// through an OpenAI-compatible chat-completions endpoint such as llama-server.
//
// A verdict is read deterministically, never parsed from free text:
//   in-process (--judge JUDGE.gguf): the prompt rendered through the judge's own
//     chat template with its generation prompt, one decode; the verdict is the
//     label owning the highest-scored token among the tokens whose text is a
//     non-empty prefix of a label: exactly the first step of grammar-constrained
//     greedy output of the labels;
//   endpoint (--judge-url http://HOST:PORT/v1): the messages with a grammar that
//     allows only the labels (llama-server's "grammar"), temperature 0 and one
//     token; the reply must be a non-empty prefix of exactly one label. A reply
//     that is refused (HTTP error), malformed, empty or not such a prefix, or
//     none at all (timeout, connection lost) is a counted failure with its
//     reason, after a bounded number of retries for the transient ones.
// Every request and its reply go to the request log (JUDGE.requests.jsonl),
// which is also the run's journal: a run that stopped (a failure, a kill) is
// resumed by the same command, and what the log already holds is not asked
// again. The log's first line names the run (both answers files' sha256, the
// judge, the rubric's sha256); a log of another run is refused.
#pragma once

#include "llama/eval.h"
#include "metrics/judge_rules.h"

#include <string>

namespace reap {

struct judge_options {
    std::string  a_path, b_path;       // the two answers files
    std::string  judge_path;           // --judge JUDGE.gguf
    std::string  judge_url;            // --judge-url http://HOST:PORT/v1
    std::string  judge_model;          // --judge-model NAME (the endpoint's "model")
    std::string  rubric_path;          // --rubric (optional)
    int          samples = 0;          // --samples K: judge the first K answers of each task (0 = every one)
    std::string  log_path;             // the request log and journal (JSONL)
    bool         fresh = false;        // --force: an existing log is started over, not resumed
    int          timeout_s = 120;      // --timeout: per request (endpoint)
    int          retries = 2;          // --retries: more attempts of a transient failure (endpoint)
    eval_runtime rt;
    bool         verbose = false;
    bool         progress = false;
};

// Reads and pairs the answers files and the rubric (everything a judge run
// needs before a model loads); fills the result's receipts.
bool prepare_judge(const std::string & a_path, const std::string & b_path, const std::string & rubric_path, int samples, answers_doc & a,
                   answers_doc & b, judge_result & r, std::string & err);

// Judges every pair (and rubric score). False with err for what stops the run
// before or between requests (a bad input, an unreachable endpoint, a decode
// that failed); failed replies do not stop it: out.failures counts them and
// their pairs keep -1 verdicts (the log lets a rerun ask them again).
bool run_judge(const judge_options & opt, judge_result & out, std::string & err);

} // namespace reap

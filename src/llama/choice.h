// reap eval --multiple-choice / --hellaswag / --winogrande: multiple-choice
// task accuracy on the base and every candidate (pruned files and masks, one
// model resident, as eval scores them), each task scored as llama-perplexity
// scores it, so that a pruned file's accuracy equals stock llama-perplexity's
// on the same file and data, and a mask's equals its file's, task for task.
//
// The rule (tools/perplexity/perplexity.cpp of the pinned llama.cpp): every
// choice is tokenized whole (choice_tasks.h says which string), with BOS as the
// vocabulary asks; the tokens all choices share form the common prefix, decoded
// once for all of the task's sequences; a choice's score is the mean
// log-probability of its tokens after the prefix (winogrande: of the tokens
// after the choice word, when both choices leave more than 3 tokens); the pick
// is the first highest score. The context is laid out as llama-perplexity's:
// n_seq = max(4, -np) sequences in one unified KV cache of n_seq x -c cells
// (-c default 512), as many whole tasks a decode as fit (multiple-choice and
// hellaswag: at most 32 tasks, winogrande 128, and n_seq sequences), -b (default
// 2048) tokens a llama_decode, -ub default 512. In the streamed regime (a model
// larger than memory) every decode reads the expert pool: a larger -np and -c
// pack more tasks a decode, so fewer decodes read it; the picks do not change
// (each sequence attends only to itself).
//
// Everything that can be checked before a decode is: the task file (its
// format, every count, label and offset), the plans and pruned vocabularies
// (visit_models), and each task's tokens against the context (a task longer
// than n_seq x -c, or with more choices than n_seq, is refused naming it).
#pragma once

#include "formats/task_file.h"
#include "llama/eval.h"
#include "metrics/choice_tasks.h"

#include <string>
#include <vector>

namespace reap {

struct choice_options {
    std::string   base_path;
    std::string   base_mask_path;   // --base-mask: the base runs masked
    std::string   tasks_path;       // the task file
    choice_format format = choice_format::multiple_choice;
    size_t        limit = 0;        // --tasks-limit (0 = every task)
    eval_runtime  rt;
    bool          verbose = false;
    bool          progress = false;
};

// The default --tasks-limit of a format, llama-perplexity's: 400 for
// hellaswag (its --hellaswag-tasks), every task (0) otherwise.
size_t default_tasks_limit(choice_format f);

// Scores the selected tasks on the base and every candidate; out.measured: the
// task file's hash and the models' receipts (formats/behaviour_file.h).
bool run_choice(const choice_options & opt, const std::vector<eval_candidate> & cands, choice_section & out, std::string & err);

} // namespace reap

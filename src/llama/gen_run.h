// reap eval --tasks FILE: generative tasks with checkers on the base and every
// candidate (pruned files and masks, one model resident, as eval scores them).
// Every task's prompt (a plain prompt with BOS as the vocabulary asks, or
// chat messages rendered through the model's own template with its
// generation prompt) is answered `samples` times, greedy (--temp 0) or drawn
// (temperature, then top-p, seeded per task and sample: the same draws for
// every model), up to the task's max_tokens or --max-new, or an
// end-of-generation token. An answer that writes its whole cap without
// ending hit the cap; with --recheck-cap N (N larger than the cap) exactly
// those answers are run again at N, with the same draw, and the answers file
// says which then finished. The checkers are src/metrics/gen_tasks.h's.
// Everything checkable is checked before a decode: the task file whole, every
// prompt rendered and tokenized, the longest prompt plus the largest cap
// against the model's trained context.
#pragma once

#include "llama/eval.h"
#include "metrics/gen_tasks.h"

#include <string>
#include <vector>

namespace reap {

struct gen_run_options {
    std::string  base_path;
    std::string  base_mask_path;
    std::string  tasks_path;
    gen_settings settings;
    eval_runtime rt;
    bool         verbose = false;
    bool         progress = false;
};

// One answers document per model: [0] the base, then every candidate in order.
bool run_gen_tasks(const gen_run_options & opt, const std::vector<eval_candidate> & cands, std::vector<answers_doc> & out,
                   std::string & err);

} // namespace reap

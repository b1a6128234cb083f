// The behaviour measures of one run, on the base and every candidate, each as
// reap eval runs it: the needle grid (needle.h), free generation (generate.h)
// and task accuracy (choice.h). reap eval, reap sweep and reap fit's gates all
// run them through run_behaviour, so that what a sweep's row or a gate's
// verdict measured is what `reap eval --mask` measures.
#pragma once

#include "llama/choice.h"
#include "llama/eval.h"
#include "llama/generate.h"
#include "llama/needle.h"

#include <optional>
#include <string>
#include <vector>

namespace reap {

// What to measure. The base, its mask, the runtime, the log and progress
// switches come from `eval` (share_eval_options); `seed` is the one seed of the
// needles' values and of generation's draws. A measure runs when it is set.
struct behaviour_request {
    eval_options                   eval;
    uint64_t                       seed = 0;
    std::optional<needle_options>   needle;     // its haystack_path set by the caller
    std::optional<generate_options> generate;
    std::optional<choice_options>   choice;
};

struct behaviour_result {
    std::optional<needle_section>   needle;
    std::optional<generate_section> generate;
    std::optional<choice_section>   choice;
};

// Runs what `req` asks, in the order task accuracy, needle grid, generation
// (each loads the models it runs; one model resident at a time).
bool run_behaviour(const behaviour_request & req, const std::vector<eval_candidate> & cands, behaviour_result & out,
                   std::string & err);

} // namespace reap

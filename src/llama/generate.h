// reap eval --generate: free greedy generation after every prompt of a corpus
// (text or `messages`, the latter rendered through the chat template with its
// generation prompt), greedy or sampled (seeded), on the base and every candidate (pruned files and masks,
// one model resident, as eval scores them), up to max_new tokens or an
// end-of-generation token. The numbers (loops, termination, distinct-4,
// length, agreement with the base) are src/metrics/generation.h's.
#pragma once

#include "formats/behaviour_file.h"
#include "llama/eval.h"
#include "metrics/generation.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap {

struct generate_options {
    std::string  base_path;
    std::string  base_mask_path;   // --base-mask: the base runs masked
    std::string  prompts_path;     // --generate PROMPTS
    int          max_new = 128;    // --max-new
    double       temperature = 0;  // --temp: 0 = greedy; > 0 = sampled at this temperature
    uint64_t     seed = 0;         // --seed: prompt i draws from a stream seeded with seed + i, the same for every model
    eval_runtime rt;
    bool         verbose = false;
    bool         progress = false;  // a progress line with ETA on stderr
};

// The continuations of the base and every candidate; out.measured: what was
// measured (formats/behaviour_file.h: the prompts' hash, the models and masks).
bool run_generate(const generate_options & opt, const std::vector<eval_candidate> & cands,
                  generate_section & out, std::string & err);

} // namespace reap

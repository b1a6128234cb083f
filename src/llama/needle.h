// reap eval --needle: the needle-in-a-haystack grid on the base and every
// candidate (pruned files and masks, one model resident, as eval scores them).
// Per cell a haystack of exactly `length` tokens cut from -f (plain text, or
// a corpus's samples joined by blank lines), a needle sentence with a seeded
// random value put in at `depth` at a sentence boundary, then the question:
// a user turn through the model's chat template when it has one, else the
// completion form (the needle's lead-in repeated at the end). Greedy decoding
// of the value's length in tokens (or to an end-of-generation token); exact
// match per cell. The rules without llama.cpp are src/metrics/needle_grid.h.
#pragma once

#include "formats/behaviour_file.h"
#include "llama/eval.h"
#include "metrics/needle_grid.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap {

struct needle_options {
    std::string         base_path;
    std::string         base_mask_path;   // --base-mask: the base runs masked
    std::string         haystack_path;    // -f
    std::vector<int>    lengths;          // empty: default_needle_lengths(the base's trained context)
    std::vector<double> depths;           // empty: k_default_needle_depths
    int                 needles = 1;      // trials per length x depth, each with its own value
    uint64_t            seed = 0;
    eval_runtime        rt;
    bool                verbose = false;
    bool                progress = false;     // a progress line with ETA on stderr
};

// The grid on the base and every candidate; out.measured: what was measured
// (formats/behaviour_file.h: the haystack's hash, the models and masks).
bool run_needle(const needle_options & opt, const std::vector<eval_candidate> & cands, needle_section & out,
                std::string & err);

} // namespace reap

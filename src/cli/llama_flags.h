// llama.cpp runtime flags for the commands that run models through
// src/llama/eval.h (reap eval, reap sweep): whatever a command does not take
// itself goes to llama.cpp's own argument parser (common/arg.h), exactly as
// reap calibrate hands its rest over, so -ngl, -ot, -fa, -ctk, -ctv,
// --no-mmap, --rpc, ... have llama.cpp's spelling and meaning. The eval
// fields (-c, -b, -ub, -t) are then read back from what llama.cpp parsed.
#pragma once

#include "llama/eval.h"

#include <string>
#include <vector>

namespace reap::cli {

// The usage lines of the llama.cpp flags eval and sweep document.
extern const char * const k_llama_runtime_help;

// Parses `rest` (argv[0] first, then the flags the command did not take) into
// rt: rt.llama holds everything llama.cpp parsed; n_ctx (0 when -c is absent),
// n_batch, n_ubatch and n_threads are copied into rt's own fields. `model` is
// handed to the parser as -m, which it requires (the commands load their
// models themselves). On a flag llama.cpp rejects, false with err (llama.cpp
// prints its reason first).
bool parse_llama_runtime(std::vector<char *> rest, const std::string & model, eval_runtime & rt, std::string & err);

} // namespace reap::cli

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

// How many values llama.cpp's flag `flag` takes (0, 1 or 2), or -1 when
// llama.cpp's common parser does not know it: lets a command with positional
// arguments hand a flag and its values over without guessing.
int llama_flag_values(const std::string & flag);

// Moves argv[i] (a flag the command does not take itself) and its values into
// `rest`, advancing i past them. False with err naming the flag when llama.cpp
// does not know it or its values are missing.
bool take_llama_flag(int argc, char ** argv, int & i, std::vector<char *> & rest, std::string & err);

// Parses `rest` (argv[0] first, then the flags the command did not take) into
// rt: rt.llama holds everything llama.cpp parsed; n_ctx (0 when -c is absent),
// n_batch, n_ubatch and n_threads are copied into rt's own fields. `model` is
// handed to the parser as -m, which it requires (the commands load their
// models themselves). On a flag llama.cpp rejects, false with err (llama.cpp
// prints its reason first).
bool parse_llama_runtime(std::vector<char *> rest, const std::string & model, eval_runtime & rt, std::string & err);

} // namespace reap::cli

// reap's llama.cpp runtime glue, shared by everything in src/llama/ that runs
// a model (calibrate, eval): one-time backend initialisation with a log filter
// that lets llama.cpp's log through only when asked (its errors always), and
// owning handles for models and contexts (llama.cpp's own, from llama-cpp.h).
#pragma once

#include "llama-cpp.h"

namespace reap {

using model_ptr = llama_model_ptr;    // frees with llama_model_free
using ctx_ptr   = llama_context_ptr;  // frees with llama_free

// Initialises llama.cpp's backends once per process (later calls only change
// the verbosity): installs the log filter, runs llama_backend_init() and loads
// every available ggml backend. verbose = let llama.cpp's whole log through to
// stderr; otherwise only its errors.
void runtime_init(bool verbose);

// The verbosity set by the latest runtime_init() (messages add "run with
// --verbose for llama.cpp's log" when it is off).
bool runtime_verbose();

}  // namespace reap

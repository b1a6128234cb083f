// The options of reap sweep, declared once (the table of src/cli/args.h and
// --help's prose), so that cmd_sweep.cpp only checks, calls and prints.
#pragma once

#include "cli/args.h"
#include "cli/llama_flags.h"
#include "llama/sweep.h"

#include <string>

namespace reap::cli {

struct sweep_params {
    reap::sweep_options      sw;
    std::string              output, plot;
    bool                     force = false, quiet = false;
    runtime_given given;
    int                      n_kinds = 0;
};

void declare_sweep(options & t, sweep_params & p);

} // namespace reap::cli

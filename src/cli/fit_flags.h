// The options of reap fit, declared once (the table of src/cli/args.h and
// --help's prose), so that cmd_fit.cpp only checks, calls and prints.
#pragma once

#include "cli/args.h"
#include "cli/llama_flags.h"
#include "llama/fit.h"

#include <string>

namespace reap::cli {

struct fit_params {
    reap::fit_options o;
    runtime_given     given;
    bool              quiet = false;
};

void declare_fit(options & t, fit_params & p);

} // namespace reap::cli

// The options of reap prune, declared once (the table of src/cli/args.h and
// --help's prose), so that cmd_prune.cpp only checks, calls and prints.
#pragma once

#include "cli/args.h"
#include "prune/run.h"

#include <cstdint>

namespace reap::cli {

struct prune_params {
    prune::prune_request       req;
    int64_t                    coverage_threshold = 0;   // --coverage-threshold: listed, not enforced
    bool                       json = false;
};

void declare_prune(options & t, prune_params & pp);

} // namespace reap::cli

// The options of reap eval, declared once (the table of src/cli/args.h and
// --help's prose), so that cmd_eval.cpp only checks, calls and prints.
#pragma once

#include "cli/args.h"
#include "cli/llama_flags.h"
#include "llama/eval.h"
#include "llama/generate.h"
#include "llama/needle.h"

#include <string>
#include <vector>

namespace reap::cli {

struct eval_params {
    reap::eval_options                opt;
    reap::smoke_options               smoke;
    std::vector<std::string>          pruned;  // every -p, in order
    std::vector<reap::eval_candidate> cands;   // every -p and --mask, in order
    reap::needle_options              needle;    // --needle (its -f, runtime and base from opt)
    reap::generate_options            generate;  // --generate PROMPTS
    bool json = false, quiet = false, do_smoke = false, do_needle = false;
    runtime_given given;
};

void declare_eval(options & t, eval_params & p);

} // namespace reap::cli

// The options of reap eval, declared once (the table of src/cli/args.h and
// --help's prose), so that cmd_eval.cpp only checks, calls and prints.
#pragma once

#include "cli/args.h"
#include "cli/llama_flags.h"
#include "llama/choice.h"
#include "llama/eval.h"
#include "llama/gen_run.h"
#include "llama/generate.h"
#include "llama/needle.h"

#include <functional>
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
    reap::choice_options              choice;    // --multiple-choice / --hellaswag / --winogrande FILE
    reap::gen_run_options             gen;       // --tasks FILE (generative; --temp, --max-new, --seed shared)
    std::string                       answers_dir;   // --answers-dir DIR
    const options *                   table = nullptr;   // the parsed option table (which options were given)
    bool json = false, quiet = false, do_smoke = false, do_needle = false;
    runtime_given given;
};

void declare_eval(options & t, eval_params & p);

// --multiple-choice, --hellaswag, --winogrande FILE and --tasks-limit N, as
// reap eval and reap sweep declare them (`see`: where the help explains them).
// The caller declares what --tasks-limit is for (options::for_mode) and asks
// options::given("--tasks-limit") before setting the format's default limit.
void declare_task_files(options & t, reap::choice_options & choice, const std::string & see);

// --multiple-choice, --hellaswag, --winogrande: task accuracy on the base and
// every candidate (src/llama/choice.h); --tasks FILE: generative tasks
// (src/llama/gen_run.h). The table, or --json's task file (formats/task_file.h).
// The exit status.
int run_task_modes(eval_params & p, const std::function<int(const std::string &)> & usage_error);

// --needle, --needle-lengths, --needle-depths, --needles, --generate,
// --max-new, --temp and (with_seed) --seed, as reap eval declares them; reap
// sweep declares them too (its --seed is its own). `see`: where the help
// explains them. The needle grid's options are declared for --needle, --max-new
// and --temp for --generate (or whatever `also_generates` says also uses them).
void declare_behaviour(options & t, needle_options & needle, generate_options & generate, bool & do_needle, bool with_seed,
                       const std::string & see, std::function<bool()> also_generates = nullptr);

} // namespace reap::cli

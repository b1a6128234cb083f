// llama.cpp's runtime flags, declared once for every command that runs a
// model (calibrate, eval, sweep): the usual ones are listed in the command's
// option table and handed, with any other flag llama.cpp knows, to llama.cpp's
// own argument parser (common/arg.h), so -ngl, -ot, -fa, -ctk, -ctv,
// --no-mmap, --rpc, ... have llama.cpp's spelling and meaning everywhere.
#pragma once

#include "cli/args.h"
#include "llama/eval.h"

#include <string>

namespace reap::cli {

// How many values llama.cpp's flag `flag` takes (0, 1 or 2), or -1 when
// llama.cpp's common parser does not know it.
int llama_flag_values(const std::string & flag);

// Adds the llama.cpp section to a command's table: -c (help text `ctx_help`;
// `has_ctx` records that it was given), -b, -ub, -t, -ngl, -ot, -fa, -ctk,
// -ctv, --no-mmap, --rpc (when the build has RPC), and every other flag
// llama.cpp knows, with its values.
// has_batch / has_ubatch, when given, record that -b / -ub were given (a
// command with defaults of its own for them); batch_help / ubatch_help say
// reap's defaults for -b / -ub (llama/runtime.h), never llama.cpp's.
void declare_llama_runtime(options & t, const std::string & ctx_help, bool & has_ctx, bool * has_batch,
                           bool * has_ubatch, const std::string & batch_help, const std::string & ubatch_help);

// Runs llama.cpp's parser over t.forwarded() into `params`, after checking
// that every --rpc server answers. `model`, when not empty, goes first as -m
// (the parser requires one; eval and sweep load their models themselves).
// On failure the problem is reported (llama.cpp has named a refused flag;
// an unreachable server is named here: llama.cpp's parser would connect to
// it itself and abort the process) and `status` is the exit status.
bool parse_llama_flags(options & t, const char * cmd, const std::string & model, common_params & params, int & status);

// Adds --batch-memory SIZE (a positive size, planner::parse_size) into `target`.
// --memory SIZE: what a pass's contexts may take (llama/pass_size.h); 0 = automatic.
// calibrate's --until-stable J with its target (--target-keep N | --target-ratio R).
void declare_until_stable(options & t, double & until_stable, int64_t & target_keep, double & target_ratio);
void declare_pass_memory(options & t, uint64_t & target);

void declare_batch_memory(options & t, const std::string & help, uint64_t & target);

// Which of -c, -b, -ub a command line gave (eval and sweep choose their own
// -b/-ub otherwise: settle_batches in src/llama/eval.h).
struct runtime_given {
    bool ctx = false, batch = false, ubatch = false;
};

// The llama.cpp section for eval and sweep: declare_llama_runtime with -b/-ub
// help that says what eval does with them, and --batch-memory into rt.
// windows: the command scores windows of -c tokens (--ctx-past-trained applies).
void declare_eval_runtime(options & t, const std::string & ctx_help, runtime_given & given, pass_runtime & rt, bool windows = true);

// --ctx-past-trained into `past_trained` (llama/runtime.h: settle_window).
void declare_past_trained(options & t, bool & past_trained);

// parse_llama_flags into rt.llama, then n_ctx (0 unless -c was given),
// n_batch and n_ubatch (0 unless given: automatic) and n_threads copied into
// rt's own fields.
bool parse_llama_runtime(options & t, const char * cmd, const std::string & model, const runtime_given & given,
                         pass_runtime & rt, int & status);

} // namespace reap::cli

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
void declare_llama_runtime(options & t, const std::string & ctx_help, bool & has_ctx);

// Every server named by a --rpc in `args` accepts a TCP connection (within a
// few seconds); otherwise false with err naming the first that does not.
// llama.cpp's parser connects to them itself and aborts the process when one
// is unreachable, so the commands check first and say so.
bool rpc_servers_reachable(const std::vector<char *> & args, std::string & err);

// Runs llama.cpp's parser over t.forwarded() into rt.llama, with `model` as
// its -m (the parser requires one; the commands load their models
// themselves), then copies n_ctx (0 unless -c was given), n_batch, n_ubatch
// and n_threads into rt's own fields. False when an RPC server cannot be
// reached (err says which; err is empty when llama.cpp refused the flags and
// has said why itself).
bool parse_llama_runtime(options & t, const std::string & model, bool has_ctx, eval_runtime & rt, std::string & err);

} // namespace reap::cli

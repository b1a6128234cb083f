// The llama.cpp handles every pass of reap eval opens (KLD scoring, the MTP
// draft, the smoke test, the needle grid, free generation): models loaded
// with eval's runtime flags, contexts of n_seq sequences side by side with an
// optional mask hook, and the check that a pruned model's vocabulary is the
// base's, so that each rule lives once.
#pragma once

#include "formats/behaviour_file.h"
#include "llama/eval.h"
#include "llama/mask.h"
#include "llama/runtime.h"
#include "util/sha256.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace reap {

// Size of a regular file; `what` names the file's role in messages ("base model", "input", ...).
bool file_size_of(const std::string & what, const std::string & path, uint64_t & size, std::string & err);

// Loads a model with eval's runtime flags (only its vocabulary when vocab_only); null + err otherwise.
model_ptr load_model(const std::string & what, const std::string & path, const eval_runtime & rt, bool vocab_only,
                     std::string & err);

// The parameters of such a context (-fa, -ctk, ... from llama.cpp's flags;
// n_batch and n_ubatch capped by the context).
llama_context_params context_params(const eval_runtime & rt, int n_ctx, int n_seq);

// A context for n_seq sequences of n_ctx tokens side by side (not unified), as
// llama-perplexity sets up its own for perplexity and KLD; `unified`: one KV
// cache of n_seq x n_ctx cells that every sequence draws on, as it sets up its
// task scores. With a hook, its mask applies in every decode.
ctx_ptr make_context(llama_model * model, const eval_runtime & rt, int n_ctx, int n_seq, std::string & err,
                     mask_hook * hook = nullptr, bool unified = false);

// Base and pruned must tokenize and index identically, or nothing compares.
bool check_same_vocab(const llama_model * a, const llama_model * b, const std::string & name_a,
                      const std::string & name_b, std::string & err);

// Loads a pruned model (only its vocabulary when vocab_only) and checks that
// its vocabulary is the base's; null + err otherwise.
model_ptr load_pruned(const std::string & path, const llama_model * base, const std::string & base_path,
                      const eval_runtime & rt, bool vocab_only, std::string & err);

// The identity of a pruned candidate's files, taken before it is loaded:
// each file's name, size and the hash its SHA256SUMS lists (metadata only,
// never the weights), and the stat signature unchanged_since compares, so
// the identity recorded is that of the bytes that were measured.
struct file_signature {
    std::string path;
    dev_t       dev = 0;
    ino_t       ino = 0;
    off_t       size = 0;
    int64_t     mtime_ns = 0, ctime_ns = 0;
};
bool signature_of(const std::string & path, file_signature & s, std::string & err);
bool pruned_identity(const std::string & path, std::vector<eval_report::file_id> & files, std::vector<file_signature> & sigs,
                     std::string & err);
// A file measured must be the file identified: refuse numbers of a file that
// was replaced or rewritten while the run read it.
bool unchanged_since(const std::vector<file_signature> & sigs, std::string & err);

// The base model's bytes, hashed (util::sha256_files) on a thread while the
// passes read them, so that a report can tell the source from another model
// of the same header and size; an extra read of the base when it streams
// from disk. start: the signatures of its files, then the hash begins;
// finish: the hash, once the files are unchanged since start. Files hashed
// earlier in this process whose signatures (device, inode, size, mtime and
// ctime to the nanosecond) are still those they had then are not read again:
// reap fit scores many masks of one source, each pass an eval of its own, and
// a streamed source would otherwise be read once more per pass.
struct base_bytes_hash {
    util::background_sha256     job;
    std::vector<file_signature> sigs;
    std::string                 known;   // the hash of an earlier eval in this process (start found it)
    bool start(const std::vector<std::string> & files, std::string & err);   // the base's shards, in order
    bool active() const { return job.started() || !known.empty(); }
    bool finish(std::string & hex, std::string & err);
};

// What a behaviour run (needle_options, generate_options) takes from the KLD
// eval's options: the base and its mask, the runtime, the log and progress
// switches; and the one seed.
template <class behaviour_options>
void share_eval_options(behaviour_options & o, const eval_options & e, uint64_t seed) {
    o.base_path = e.base_path;
    o.base_mask_path = e.base_mask_path;
    o.rt = e.rt;
    o.verbose = e.verbose;
    o.progress = e.progress;
    o.seed = seed;
}

// One model of a behaviour run (needle grid, free generation): index -1 is
// the base, else the candidate's index; hook is null or the mask to check
// after every decode.
using model_visit = std::function<bool(llama_model * model, mask_hook * hook, int index)>;

// Visits the base (under base_mask_path when given), then every masked
// candidate on the same loaded base, then frees the base and loads each pruned
// file in turn: one model resident, as reap eval scores them. Plans are
// checked against the base as prune checks them, and every pruned file's
// vocabulary against the base's, before the first visit. `measured` gets what
// was measured (formats/behaviour_file.h), input_path's bytes hashed: the
// receipts of every behaviour run, taken here once; a pruned file that
// changed while it was visited fails the run.
bool visit_models(const std::string & base_path, const std::string & base_mask_path, const std::string & input_path,
                  const std::vector<eval_candidate> & cands, const eval_runtime & rt, const model_visit & visit,
                  behaviour_receipts & measured, std::string & err);

// A context for decoding up to n_ctx tokens in one sequence, the prompt in
// one decode (-b at least n_ctx).
ctx_ptr continuation_context(llama_model * model, const eval_runtime & rt, int64_t n_ctx, mask_hook * hook, std::string & err);

// The continuation of `prompt` in ctx (its memory cleared first): the prompt
// in one decode, then a token a decode, up to n_max tokens or an
// end-of-generation token (kept as the last of out). Each token is the
// argmax (the first on a tie), or drawn by `sampler` when one is given.
// `what` names the run in errors; with a hook its check runs after every decode.
// With `prog`, the prompt's tokens and each decoded one count on it, and the
// decodes an end of generation spared too: prompt + n_max - 1 in all.
bool decode_continuation(llama_context * ctx, mask_hook * hook, const std::vector<int32_t> & prompt, int n_max,
                         const std::string & what, std::vector<int32_t> & out, std::string & err,
                         llama_sampler * sampler = nullptr, progress_line * prog = nullptr);

} // namespace reap

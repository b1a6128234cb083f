// reap eval, the library half: measures what pruning cost by running a base
// and a pruned model over the same tokens and comparing their next-token
// distributions (perplexity of each, KL(base || pruned) over the full
// vocabulary, top-1 agreement), overall and per corpus domain, through the
// scoring core (src/metrics: per-token metrics and the llama-perplexity KLD
// base file, `--kl-divergence-base`, which need no llama.cpp); and a
// greedy-decoding smoke test. The CLI (src/cli/cmd_eval.cpp) is a thin shell
// over run_eval() / run_smoke().
//
// Scoring follows llama.cpp's tools/perplexity for a plain text file: the text
// is tokenized once (BOS added when the vocabulary asks for it), cut into
// n_tokens / n_ctx windows of n_ctx tokens, the first token of every window is
// replaced by BOS (when the vocabulary adds BOS), and only the second half of
// each window is scored: logits at positions n_ctx/2 .. n_ctx-2 predict tokens
// n_ctx/2+1 .. n_ctx-1. A corpus (JSONL) is tokenized per sample; a sample is
// cut into windows on its own (never attending across samples), a sample
// shorter than one window is one shorter window scored the same way, and the
// remainder of a longer sample (under one window) is dropped. Corpora are read
// by corpus.h, exactly as reap calibrate reads them.
//
// Several models against one base (run_eval_candidates): the base runs once,
// its rows are kept, and each model is scored against them in turn. A model is
// a pruned file (-p) or the base itself with a plan's removed experts masked
// in its routers (--mask, virtual pruning, see mask.h): a masked run computes
// what the pruned file would, without writing it. One model is resident at a
// time: the masked passes reuse the loaded base, which is freed before the
// first pruned file loads.
#pragma once

#include "common.h"
#include "llama/runtime.h"
#include "formats/eval_file.h"
#include "metrics/kld_record.h"
#include "metrics/token_metrics.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace reap {

struct plan;

// eval's llama.cpp settings are every pass's (llama/runtime.h).
using eval_runtime = pass_runtime;


struct eval_options {
    std::string base_path;      // -m (may be empty when kld_base_path exists)
    std::string pruned_path;    // -p
    std::string input_path;     // -f: plain text, or corpus JSONL (*.jsonl or lines of {"domain":...})
    std::string kld_base_path;  // --kld-base: written when missing, read when present
    std::string base_mask_path; // --base-mask: run the base itself with this plan's experts masked
    std::string tmp_dir;        // --tmp-dir: where the base's rows are kept ("" = $TMPDIR or /tmp)
    int         max_chunks = -1;  // --chunks: at most this many windows (plain text), -1 = all
    eval_runtime rt;
    bool progress = true;       // progress line on stderr (the CLI turns it off unless stderr is a tty)
    bool verbose  = false;      // let llama.cpp's log through
};

// eval_report: formats/eval_file.h (the report and its JSON, in the core).

// One model to score against the base.
struct eval_candidate {
    std::string  path;            // a pruned GGUF (-p), or a plan file (--mask); a label with `plan`
    bool         mask = false;
    const plan * in_memory = nullptr;  // a mask from a plan not read from a file (reap sweep)
    bool masked() const { return mask; }
};

// -b and -ub. A source larger than memory is read once per ubatch, so the
// largest decode that fits is the cheapest pass. A decode's scored rows
// (positions n_ctx/2 .. n_ctx-2 of each window: about half its tokens) each
// keep n_vocab floats of logits in llama.cpp's output buffer, and the base's
// rows for them are read beside them; the context adds its KV cache and
// compute buffers. Automatic (both 0): the largest of pass_size.h's ubatch
// candidates, as whole windows (at most llama.cpp's sequences per context,
// none larger than max_tokens, the workload's tokens, needs), whose context as llama.cpp lays it out
// for the model at model_path (measured without its weights) plus those rows
// fits rt.memory (pass_memory_budget), and whose logits fit rt.batch_memory
// when that is set; -ub = -b. Given: -b = the -ub given (at least a window)
// when only -ub is, -ub = -b when only -b is, refused when the memory is known
// and they do not fit it. Unknown memory: reap's default, k_default_batch.
struct eval_sizes {
    std::string note;        // how they were chosen, for the cost line: "-b automatic: the largest that fits, needs ..."
    uint64_t    needed = 0;  // bytes a pass needs at the sizes chosen (0: not measured)
};
bool size_eval_batches(eval_runtime & rt, const std::string & model_path, int n_ctx, int64_t n_vocab, int64_t max_tokens,
                       eval_sizes & out, std::string & err);

// The rule without measuring: -b = the -ub given, else the largest multiple of
// n_ctx up to k_default_batch whose logits fit rt.batch_memory when set; -ub = -b.
void settle_batches(eval_runtime & rt, int n_ctx, int64_t n_vocab);

// Runs the whole evaluation. Errors come back as false + a message that names
// the problem; nothing here exits the process.
bool run_eval(const eval_options & opt, eval_report & report, std::string & err);

// Every candidate against one base, the base run once. Without --kld-base
// the base's exact log-softmax rows (4 x n_vocab + 4 bytes per scored token)
// go to an unlinked temp file in opt.tmp_dir, checked for space up front;
// masked candidates then run on the loaded base, the base is freed, and the
// pruned files are loaded and scored one at a time. With --kld-base every
// candidate is scored through the file (written first when missing). Plans
// are checked against the base with reap prune's rules, and pruned
// vocabularies against the base's, before anything runs. reports[i] belongs
// to cands[i]; the numbers of a candidate do not depend on the others.
bool run_eval_candidates(const eval_options & opt, const std::vector<eval_candidate> & cands,
                         std::vector<eval_report> & reports, std::string & err);

// Several pruned models against one base (`-p A.gguf -p B.gguf ...`; the
// paths must differ; opt.pruned_path is ignored). reports[i] is pruned_paths[i]'s
// report, with the same numbers as run_eval() with that one -p gives, bit for bit
// (run_eval_candidates with pruned candidates).
bool run_eval_multi(const eval_options & opt, const std::vector<std::string> & pruned_paths,
                    std::vector<eval_report> & reports, std::string & err);

struct smoke_options {
    std::string  base_path;
    std::string  pruned_path;
    std::string  prompt;
    int          n_predict = 12;
    eval_runtime rt;
    bool         verbose = false;
};

struct smoke_report {
    std::vector<int32_t> base_tokens, pruned_tokens;  // the generated continuations
    std::string          base_text, pruned_text;
    int                  n_agree = 0;  // length of the common prefix of the continuations
};

// Greedy-decodes n_predict tokens from both models after the same prompt.
bool run_smoke(const smoke_options & opt, smoke_report & report, std::string & err);

// Metrics and report as JSON text (one object; formats/eval_file.h).
std::string eval_report_json(const eval_report & report);
// Any mix of candidates: {"pruned": {"<path>": ...}, "masked": {"<plan>": ...}}
// (a key only when it has entries), each in the order given.
std::string eval_candidates_json(const std::vector<eval_candidate> & cands, const std::vector<eval_report> & reports);
std::string smoke_report_json(const smoke_report & report);
// Human-readable table.
void eval_report_print(FILE * out, const eval_report & report);

} // namespace reap

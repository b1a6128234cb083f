// reap calibrate, the library half: runs a MoE model in llama.cpp over a
// calibration corpus and records, per domain, layer and routed expert, what
// REAP needs (see src/saliency/archive.h for the archive it fills):
//   count      tokens routed to the expert
//   gate_sum   Σ g            g = the gate weight llama.cpp actually applies
//   reap_sum   Σ g · ‖f‖₂     f = the expert's output (ffn_down, bias included)
//   ean_sum    Σ ‖f‖₂
//   ean_sq_sum Σ ‖f‖₂²         (MSAN; MAN is ean_sum / count)
//   max_norm   max ‖f‖₂
// and, with width_saliency, per channel c of the input a of the expert's down
// projection: ch_energy Σ a_c², ch_reap Σ g·|a_c|·‖W_down[:,c]‖ (one node more
// per layer: ffn_moe_down's input; src/llama/calibrate_width.h).
//
// How: the scheduler's eval callback (llama_context_params.cb_eval). Its ask
// phase asks for exactly three nodes per MoE layer of build_moe_ffn
// (llama.cpp src/llama-graph.cpp):
//   ffn_moe_topk-L       the routed expert ids ([n_expert_used, n_tokens], a
//                        strided view into the argsort: read row by row)
//   <weights>-L          the last node of the gate-weight chain, i.e. the weights
//                        multiplied into the outputs: ffn_moe_weights, then
//                        _softmax (gpt-oss), _norm (renormalised top-k), _scaled
//                        (expert_weights_scale) when the arch adds them
//   <down>-L             the expert outputs before weighting: ffn_moe_down, or
//                        ffn_moe_down_scaled / ffn_moe_down_biased where the arch
//                        has per-expert down scales / biases (gpt-oss)
// Which of those names a model's graph has is found once, by a probe that reads
// the node names of the graph llama.cpp reserves for a two-token ubatch on the
// model's header (nothing decoded, no weight read); an MoE layer (from the GGUF
// layout) that lacks any of the three is an error naming the layer and the node,
// never a silent gap. Data are copied to host only when the tensor's buffer is
// not host memory.
//
// llama4 applies the gate weights to the expert INPUT (weight_before_ffn); the
// down node then holds f(g·x), the contribution actually added. For such archs
// reap_sum and ean_sum both accumulate ‖f(g·x)‖₂ (recorded in the archive as
// reap.saliency.weights_before_ffn = true). kimi-k3's routed experts run in its
// latent space: ‖f‖ is the latent output, before ffn_routed_up.
//
// Why these nodes: tests/test_llama_archs.cpp checks, on every MoE arch the
// pinned llama.cpp writes, that per token Σ_k g_k·f_k over the selected experts
// (g, f read from the two nodes named above, as calibrate picks them) equals
// build_moe_ffn's output node ffn_moe_out: whatever the router does before
// (sigmoid with selection bias, group-limited routing, renormalisation,
// scaling) is inside g, so g is the weight the arch really applies. What the
// arch does after ffn_moe_out (the shared expert added, kimi-k3's routed norm
// and ffn_routed_up) is outside the sum and not part of an expert's score.
//
// MTP blocks (<arch>.nextn_predict_layers = N > 0: the last N blocks, with
// their own routed experts, which llama.cpp's main graph never runs): the model
// is loaded with load_mtp and an MTP context runs beside the main one with the
// same callback (src/llama/mtp.h). After each decode of the main context the
// MTP context decodes the same positions, position p with the token x_p and the
// main context's nextn embedding h_{p-1} (zeros at a window's first position),
// which is what llama.cpp's own MTP draft driver feeds it over a prompt. So an
// MTP block is measured like any other MoE block: every token of every window
// routes top-k there too (the count invariant holds for it), and plans include
// it. tests/test_llama_mtp.cpp checks the counts against llama.cpp's driver.
//
// Tokens: every sample is its own sequence (no sample attends to another); a
// sample longer than the window (-c) is cut into consecutive windows, the last
// one shorter. A plain text file instead follows llama-imatrix's convention
// (one token stream, windows of exactly -c tokens, the first token of each
// replaced by BOS when the vocabulary adds one, the remainder dropped), so that
// its counts can be compared with llama-imatrix's.
//
// Packing. A source larger than memory streams from disk, and every ubatch
// reads nearly the whole expert pool, so the number of ubatches is the cost.
// Windows are therefore packed: up to n_seq windows of one domain go into one
// llama_decode, each its own sequence (memory cleared between decodes), until
// the decode holds -b tokens (llama-perplexity packs its chunks the same way).
// Windows of one length (plain text) get a KV stream each, as llama-perplexity
// lays them out; windows of several lengths share one unified cache, which
// llama.cpp splits in batch order, so a ubatch holds -ub tokens whatever the
// sample lengths.
// Windows are decoded domain by domain (corpus order within a domain), so that
// every row of a decode belongs to one domain whatever order llama.cpp gives
// the rows in; the one-window-at-a-time run (n_seq = 1) takes the same order,
// so both add the same tokens' values in the same order, and their archives
// differ only by what llama.cpp's arithmetic gives for a row in a bigger batch.
// A window longer than -b is decoded alone, -b tokens at a time.
//
// Rows and the vocabulary. Calibration needs every MoE layer, the last one
// included, to run on every token, not the logits. Most of llama.cpp's graphs
// narrow to the output rows (inp_out_ids) before the last layer's FFN; some
// only after the last layer (kimi-k3), and the archs with an MTP path narrow
// after it when nextn embeddings are requested unmasked. The probe's graph, a
// two-token ubatch with one output row, finds which (the node shapes tell):
//   one_output      every MoE layer sees every row anyway: one output row per
//                   decode (llama.cpp keeps n_vocab floats per output row)
//   nextn_unmasked  the same once llama_set_embeddings_nextn(unmasked) is on
//                   (n_embd floats per row more, not n_vocab)
//   every_row       neither: every row must be an output, and llama.cpp then
//                   keeps n_vocab floats per row twice (its output buffer, and
//                   the output head's share of the compute buffer): -b/-ub are
//                   lowered so that this stays within batch_memory.
// An MTP context (below) keeps every row as an output; its decodes are sliced
// to batch_memory instead (each slice reads only the MTP blocks' experts).
//
// Accumulation is in double, in token order; a checkpoint stores the exact
// accumulators and the next window, so a resumed run writes the same archive,
// byte for byte, as an uninterrupted one.
//
// Errors are values (false + message); nothing here exits.
#pragma once

#include "llama/runtime.h"
#include "plan/stability.h"
#include "saliency/archive.h"
#include "util/memory.h"

#include "common.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace reap {

// How a decode's rows are made to reach every MoE layer (see above).
enum class row_mode { one_output, nextn_unmasked, every_row };
const char * row_mode_name(row_mode m);

struct calibrate_options {
    std::string model_path;    // -m
    std::string corpus_path;   // --corpus: JSONL corpus or plain text
    std::string out_path;      // -o: the saliency archive

    // llama.cpp runtime settings (llama/runtime.h), as common/arg.h parses them
    // (-c -b -ub -t -ngl -ot -fa --no-mmap --rpc -ctk -ctv ...; rt.llama's
    // model.path is ignored, model_path is used). rt.n_ctx is the window (0 =
    // rt.window() of the model's trained context; past it: refused unless rt.past_trained). rt.n_batch, rt.n_ubatch: 0 = automatic (with -ub: the
    // larger of -ub, k_default_batch and the window; alone: the largest that fits
    // rt.memory). rt.batch_memory: the vocabulary-sized rows of a decode (0 =
    // k_default_batch_memory). Threads: rt.threads(), rt.threads_batch().
    pass_runtime rt;
    int n_seq = 0;               // -np: windows per decode at most; 0 = automatic (see run_calibrate)

    int64_t  max_tokens            = 0;  // --max-tokens: stop after this many tokens in all (0 = no cap)
    int64_t  max_tokens_per_domain = 0;  // --max-tokens-per-domain (0 = no cap)
    uint32_t shard_index = 0;            // --shard i/n
    uint32_t shard_count = 1;

    int64_t     checkpoint_every = 0;    // --checkpoint-every N windows (0 = only on interrupt)
    std::string checkpoint_path;         // "" = <out_path>.checkpoint
    bool        resume = false;          // --resume: continue from the checkpoint
    bool        force  = false;          // replace an existing output

    // --until-stable J: stop once the keep-list for the target (--target-keep N, or
    // --target-ratio R) has held at an overlap >= J for two checkpoints in a row
    // (plan/stability.h). Each domain's windows are then taken in a fixed
    // pseudo-random order (a corpus is written document after document, so a prefix
    // in corpus order is a few documents, not a sample; the archive of a run to the
    // end holds the same tokens, summed in another order), the domains' decodes are
    // interleaved, so that every stretch of the run holds each domain in its share,
    // and the stability checkpoints fall every checkpoint_every windows (default: a
    // twentieth of the run), counted from the start, so a resumed run checks at the
    // same places. 0 = off. A target without it: the same order, checkpoints and
    // stability lines (and curve), and the run goes to the end: a user can stop it
    // by hand (Ctrl-C) once the lines say enough, and --resume later.
    double  until_stable = 0;
    int64_t target_keep  = 0;    // N kept per layer; 0 = from target_ratio
    double  target_ratio = -1;   // fraction of the routed experts removed (plan --ratio); < 0 = unset

    bool width_saliency = false;   // --width-saliency: per-channel ch_energy / ch_reap too (calibrate_width.h)
    bool collect = true;      // false: the same decodes without the callback (benchmark baseline), nothing written
    bool dry_run = false;     // --dry-run: the windows, decodes and sizes chosen and the cost model printed; no decode, nothing written
    bool progress = true;     // progress line on stderr
    bool verbose  = false;    // let llama.cpp's log through

    // Polled after every window; when it becomes true the run stops, writes a
    // checkpoint and returns true with report.interrupted set (the CLI's
    // SIGINT handler sets it).
    const std::atomic<bool> * stop = nullptr;

    // Test hook (the CLI sets it from $REAP_CALIBRATE_PAUSE_AFTER): after the
    // decode that reaches this many windows of this invocation, say "paused after N windows" on stderr
    // and wait (at most 60 s) for *stop, so that a test can interrupt the run
    // at a known window instead of racing it. 0 = off.
    int64_t pause_after_windows = 0;
};

struct calibrate_report {
    size_t  n_samples = 0;        // samples calibrated on (after sharding and the caps)
    size_t  n_samples_total = 0;  // samples in the corpus file
    size_t  n_windows = 0;        // windows in the run (after caps)
    size_t  n_windows_done = 0;   // windows decoded by this invocation
    int64_t n_tokens = 0;         // tokens in the run (after caps)
    std::vector<std::pair<std::string, int64_t>> domain_tokens;  // per domain, in archive order
    double  seconds = 0;          // decode wall time of this invocation
    double  tokens_per_second = 0;
    bool    interrupted = false;
    bool    resumed = false;
    std::string checkpoint_written;   // path, when a checkpoint was left behind
    std::string weights_node;         // e.g. "ffn_moe_weights_norm" (first MoE layer)
    std::string down_node;            // e.g. "ffn_moe_down_biased"
    bool    weights_before_ffn = false;
    std::vector<int> mtp_layers;      // MTP blocks measured in llama.cpp's MTP context (see above)

    // how the run was decoded
    row_mode rows = row_mode::every_row;
    int      n_batch = 0, n_ubatch = 0, n_seq = 0;   // effective -b, -ub, windows per decode (the most any decode has)
    bool     kv_unified = false;                     // one KV cache for a decode's windows (else a stream each)
    bool     batch_capped = false;                   // -b/-ub lowered for batch_memory (every_row)
    std::string size_note;                           // how -ub was chosen and what it needs (the cost text prints it)
    uint64_t memory_needed = 0, memory_budget = 0;   // the contexts' bytes at -b/-ub, and what they may take (0: unknown)
    bool     shuffled = false;                       // each domain's windows in the stability order (a target)
    bool     interleaved = false;                    // domains' decodes interleaved (a target)
    std::vector<planner::stability_point> stability; // --until-stable: a point per stability checkpoint
    bool     stopped_stable = false;                 // stopped early: the keep-list held
    size_t   n_decodes = 0;                          // llama_decode calls of the run (main context)
    size_t   n_ubatches = 0;                         // ubatches of the run (main context, as llama.cpp splits them)
    uint64_t expert_pool_bytes = 0;                  // routed-expert bytes of the model
};

// Runs the whole calibration and writes the archive to opt.out_path (unless
// opt.collect is false). `out` receives the archive. Before decoding it prints
// the cost model on stderr (tokens, ubatches, expert bytes per ubatch) and,
// when the model is larger than the memory available, the bytes it expects to
// read from disk.
bool run_calibrate(const calibrate_options & opt, saliency::archive & out, calibrate_report & report, std::string & err);

// The cost model run_calibrate prints before it decodes: one line (tokens,
// windows, decodes, -b/-ub, ubatches, expert bytes per ubatch), and a second
// when the model's bytes exceed the memory available (`mem`): it will stream
// from disk, about expert pool x ubatches read.
std::string calibrate_cost_text(const calibrate_report & r, size_t n_windows, size_t n_decodes, uint64_t model_bytes,
                                const std::optional<util::memory_limit> & mem);

// The provenance string of the options that determine the result (window,
// the decodes as run_calibrate chose them: order, row mode, -b, -ub, windows
// per decode; KV cache types, flash attention, caps, shard, corpus kind), as
// JSON. A checkpoint is resumed only under the same string.
std::string calibrate_options_json(const calibrate_options & opt, int n_ctx, bool plain_text, const calibrate_report & decodes);

// What `reap calibrate` prints after a run that was not interrupted (calibrate_print.cpp):
// the forward-only timing line, or the tokens, nodes, decodes, MTP blocks, per-domain
// tokens and the file written.
void print_calibrate_result(FILE * out, const calibrate_options & opt, const calibrate_report & rep);

}  // namespace reap

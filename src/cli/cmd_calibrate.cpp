// reap calibrate: the command-line shell over src/llama/calibrate.h. Takes its
// own flags out of argv and hands the rest to llama.cpp's own argument parser
// (common/arg.h), so every llama.cpp runtime flag works with its usual
// spelling. Installs a SIGINT handler that lets the current window finish and
// writes a checkpoint. Errors go to stderr with exit status 2 (130 when
// interrupted; the checkpoint is kept).
#include "cli/args.h"
#include "cli/llama_flags.h"
#include "llama/calibrate.h"
#include "llama/pass_size.h"
#include "util/stop_request.h"

#include "llama.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace {

// The command's options, parsed and printed from one table; llama.cpp's
// runtime flags are handed on to its own parser (forwarded()). `has_ctx`
// tells whether -c was given.
void declare_calibrate_options(reap::cli::options & t, reap::calibrate_options & opt, reap::cli::runtime_given & given) {
    t.about(
        "Runs the model in llama.cpp over a calibration corpus and writes a saliency archive\n"
        "(general.type = reap.saliency) with, per domain, layer and expert: routed-token count,\n"
        "Σ gate weight, Σ gate·‖expert output‖₂ (REAP), Σ ‖expert output‖₂ (EAN) and the max\n"
        "output norm. It reads llama.cpp's graph through the eval callback: per MoE layer only\n"
        "ffn_moe_topk, the gate weights actually applied and the expert outputs.\n"
        "\n"
        "Corpus: JSONL, one sample a line, {\"domain\": D, \"text\": ...} or {\"domain\": D,\n"
        "\"messages\": [...]} (rendered through the model's chat template, reasoning_content\n"
        "included); a line without a domain, or with both or neither of text and messages, is\n"
        "an error naming file:line. Every sample is its own sequence; samples longer than -c\n"
        "are cut into windows of -c tokens, the last one shorter (none of a sample is dropped).\n"
        "Any other file is plain text, read as llama-imatrix reads -f:\n"
        "one token stream cut into windows of exactly -c tokens (BOS first), the remainder\n"
        "dropped, one domain named after the file; its counts equal llama-imatrix's.\n"
        "\n"
        "Cost: a model larger than memory streams from disk, and every ubatch reads nearly the\n"
        "whole expert pool, so bytes read ≈ expert pool × ubatches. calibrate therefore packs\n"
        "windows: up to -np windows of one domain share a decode, each its own sequence, so a\n"
        "ubatch holds -ub tokens whatever the sample lengths. Without -b/-ub it takes the largest\n"
        "ubatch (" + std::to_string(reap::k_max_auto_ubatch) + " down to 512) whose KV cache, compute and CPU work buffers and\n"
        "logits, as llama.cpp and ggml lay them out for this model, fit --memory (a -b/-ub given\n"
        "that cannot fit is refused).\n"
        "It prints this cost model, and warns when the model is larger than memory (--rpc adds hosts).\n"
        "\n"
        "Memory that grows with the vocabulary: every MoE layer must see every token. Where\n"
        "llama.cpp's graph narrows to the output rows only after the last layer (kimi-k3,\n"
        "gpt-oss), or after it once nextn embeddings are asked for unmasked (the archs with an\n"
        "MTP path: deepseek2, glm4moe, ...), a decode has one output row and the\n"
        "vocabulary costs n_vocab × 4 bytes × windows per decode. Elsewhere (qwen3moe, mixtral,\n"
        "...) every row must be an output, and llama.cpp keeps n_vocab × 4 bytes per row twice\n"
        "(its output buffer, the output head's compute): -b/-ub are then lowered to fit\n"
        "--batch-memory, and it says so. A probe decode of two tokens finds which, per model.\n"
        "MTP blocks run in a second context whose rows are all outputs: its decodes are cut\n"
        "into slices that fit --batch-memory (each slice reads only the MTP blocks' experts).\n");
    t.section("options:");
    t.text("-m, --model", "FILE", "the model (first shard of a split model is fine)", opt.model_path);
    t.text("--corpus", "FILE", "corpus JSONL, or a plain text file", opt.corpus_path);
    t.text("-o, --output", "FILE", "the saliency archive to write", opt.out_path);
    t.integer("--max-tokens", "N", "stop after N tokens in all (corpus order; 0 = all)", 0, INT64_MAX, opt.max_tokens);
    t.integer("--max-tokens-per-domain", "N", "at most N tokens of each domain (0 = all)", 0, INT64_MAX,
              opt.max_tokens_per_domain);
    t.custom("--shard", "i/n",
             "only the samples whose hash is i mod n (0 <= i < n): disjoint shards for split-half studies or for "
             "calibrating on several machines; `reap merge` of all n shards = the whole corpus",
             [&opt](const std::string & v, std::string & err) {
                 return reap::cli::parse_part_of("--shard", v, opt.shard_index, opt.shard_count, err);
             });
    t.integer("-np, --parallel", "N",
              "windows per decode at most (default 0: automatic, as many as -b holds, up to 64, or one per 64 "
              "tokens of -b past 4096, within llama.cpp's " + std::to_string(llama_max_parallel_sequences()) +
              " sequences; full windows only for recurrent/hybrid models); 1 = one window per decode",
              0, (int64_t) llama_max_parallel_sequences(), opt.n_seq);
    reap::cli::declare_batch_memory(t,
                                    "what the vocabulary-sized rows of a decode may take (default " + std::to_string(reap::k_default_batch_memory >> 30) + "GiB; see above): "
                                    "lowers -b/-ub only where every row must be an output",
                                    opt.rt.batch_memory);
    reap::cli::declare_pass_memory(t, opt.rt.memory);
    reap::cli::declare_until_stable(t, opt.until_stable, opt.target_keep, opt.target_ratio);
    t.integer("--checkpoint-every", "N", "write a checkpoint every N windows (default 0: only on Ctrl-C; written at "
              "the end of the decode that reaches N)", 0, INT64_MAX, opt.checkpoint_every);
    t.text("--checkpoint", "FILE", "checkpoint path (default OUTPUT.checkpoint)", opt.checkpoint_path);
    t.flag("--resume", "continue from the checkpoint; the result is identical to an uninterrupted run's", opt.resume);
    t.flag("--force", "replace an existing output", opt.force);
    t.flag("--width-saliency", "also per channel of every expert (ch_energy Σa², ch_reap Σg·|a|·‖W_down[:,c]‖, a = the "
           "down projection's input): one node more per layer, archive version 2; on llama4 the shared expert's "
           "too (sh_energy, sh_reap: one node more, version 3)", opt.width_saliency);
    t.flag("--forward-only", "run the same decodes without reading the graph and write nothing (the baseline of "
           "bench/calibrate_vs_forward.sh)", opt.collect, false);
    t.flag("--dry-run", "read the corpus, choose -b/-ub and the decodes, print the cost model, and stop: no decode, "
           "no output (-o not needed)", opt.dry_run);
    t.flag("--no-progress", "no progress line", opt.progress, false);
    t.flag("--verbose", "show llama.cpp's log", opt.verbose);
    t.help_row();
    t.prose("Ctrl-C finishes the current decode, writes the checkpoint and exits with status 130; --resume continues.\n");
    reap::cli::declare_past_trained(t, opt.rt.past_trained);
    reap::cli::declare_llama_runtime(t, "window size in tokens (default " + std::to_string(reap::k_default_window) + ", or the model's trained context when shorter)", given.ctx, &given.batch, &given.ubatch,
                                     "tokens per decode (default: automatic, see above)", "tokens per ubatch (default: -b)");
    t.exit_note(reap::cli::exit_interrupted, "interrupted by Ctrl-C (SIGINT); the checkpoint is written");
    t.require(opt.model_path, "no model (-m)")
     .require(opt.corpus_path, "no corpus (--corpus)");
}

std::atomic<bool> g_stop{false};

} // namespace

int cmd_calibrate(int argc, char ** argv) {
    reap::calibrate_options opt;
    opt.progress = isatty(2);
    reap::cli::runtime_given given;
    reap::cli::options t("calibrate",
                         "usage: reap calibrate -m MODEL.gguf --corpus CORPUS.jsonl -o SALIENCY.gguf [options] [llama.cpp flags]");
    declare_calibrate_options(t, opt, given);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    if (opt.collect && !opt.dry_run && opt.out_path.empty()) return t.usage_error("no output (-o)");

    if (!reap::cli::parse_llama_runtime(t, "calibrate", opt.model_path, given, opt.rt, status)) return status;
    opt.stop = &g_stop;
    if (const char * s = std::getenv("REAP_CALIBRATE_PAUSE_AFTER")) opt.pause_after_windows = std::atoll(s);   // test hook
    reap::util::install_stop_on_sigint(&g_stop, "\nreap calibrate: interrupted; finishing this decode and writing a "
                                                "checkpoint (Ctrl-C again to abort)\n");

    reap::saliency::archive arch;
    reap::calibrate_report rep;
    std::string err;
    const bool ok = reap::run_calibrate(opt, arch, rep, err);
    reap::util::restore_default_sigint();
    if (!ok) return reap::cli::fail("calibrate", err);
    if (opt.dry_run) return 0;   // the cost model is on stderr
    if (rep.interrupted && opt.collect) {   // forward-only writes no checkpoint
        fprintf(stderr, "reap calibrate: interrupted after %zu windows; checkpoint %s (rerun with --resume)\n",
                rep.n_windows_done, rep.checkpoint_written.c_str());
        return reap::cli::exit_interrupted;
    }
    reap::print_calibrate_result(stdout, opt, rep);
    return 0;
}

// reap calibrate: the command-line shell over src/llama/calibrate.h. Takes its
// own flags out of argv and hands the rest to llama.cpp's own argument parser
// (common/arg.h), so every llama.cpp runtime flag works with its usual
// spelling. Installs a SIGINT handler that lets the current window finish and
// writes a checkpoint. Errors go to stderr with exit status 1 (130 when
// interrupted; the checkpoint is kept).
#include "cli/args.h"
#include "llama/calibrate.h"

#include "arg.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

const char * USAGE =
    "usage: reap calibrate -m MODEL.gguf --corpus CORPUS.jsonl -o SALIENCY.gguf [options] [llama.cpp flags]\n"
    "\n"
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
    "options:\n"
    "  -m, --model FILE            the model (first shard of a split model is fine)\n"
    "  --corpus FILE               corpus JSONL, or a plain text file\n"
    "  -o, --output FILE           the saliency archive to write\n"
    "  --max-tokens N              stop after N tokens in all (corpus order; 0 = all)\n"
    "  --max-tokens-per-domain N   at most N tokens of each domain (0 = all)\n"
    "  --shard i/n                 only the samples whose hash is i mod n (0 <= i < n): disjoint\n"
    "                              shards for split-half studies or for calibrating on several\n"
    "                              machines; `reap merge` of all n shards = the whole corpus\n"
    "  --checkpoint-every N        write a checkpoint every N windows (default 0: only on Ctrl-C)\n"
    "  --checkpoint FILE           checkpoint path (default OUTPUT.checkpoint)\n"
    "  --resume                    continue from the checkpoint; the result is identical to an\n"
    "                              uninterrupted run's\n"
    "  --force                     replace an existing output\n"
    "  --forward-only              run the same decodes without reading the graph and write\n"
    "                              nothing (the baseline of bench/calibrate_vs_forward.sh)\n"
    "  --no-progress               no progress line\n"
    "  --verbose                   show llama.cpp's log\n"
    "\n"
    "Ctrl-C finishes the current window, writes the checkpoint and exits with status 130;\n"
    "rerun with --resume to continue.\n"
    "\n"
    "llama.cpp flags (any flag of llama.cpp's common parser is accepted; the usual ones):\n"
    "  -c, --ctx-size N            window size in tokens (default 512)\n"
    "  -b, --batch-size N          logical batch (default 2048, capped at -c)\n"
    "  -ub, --ubatch-size N        physical batch (default 512)\n"
    "  -t, --threads N             CPU threads (default: physical cores)\n"
    "  -ngl, --n-gpu-layers N      layers to offload to the GPU\n"
    "  -ot, --override-tensor PATTERN=BUFTYPE,...   e.g. -ot exps=CPU to keep experts in RAM\n"
    "  -fa, --flash-attn on|off|auto\n"
    "  -ctk, --cache-type-k TYPE   K cache type (default f16; f32 for exact comparisons)\n"
    "  -ctv, --cache-type-v TYPE   V cache type\n"
    "  --no-mmap                   read the model into memory\n"
    "  --rpc HOST:PORT,...         llama.cpp RPC servers (models that span machines)\n";

std::atomic<bool> g_stop{false};

extern "C" void on_sigint(int) {
    if (g_stop.load()) {
        std::signal(SIGINT, SIG_DFL);
        std::raise(SIGINT);
        return;
    }
    g_stop.store(true);
    const char msg[] = "\nreap calibrate: interrupted; finishing this window and writing a checkpoint (Ctrl-C again to abort)\n";
    ssize_t r = write(2, msg, sizeof(msg) - 1);
    (void) r;
}

bool parse_i64(const char * s, int64_t & out) {
    char * end = nullptr;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0) return false;
    out = v;
    return true;
}

int usage_error(const std::string & msg) { return reap::cli::usage_error_full("calibrate", msg, USAGE); }

} // namespace

int cmd_calibrate(int argc, char ** argv) {
    reap::calibrate_options opt;
    opt.progress = isatty(2);
    std::vector<char *> rest = {argv[0]};
    bool has_ctx = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](const char * what) -> const char * {
            if (i + 1 >= argc) return nullptr;
            (void) what;
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            fputs(USAGE, stdout);
            return 0;
        } else if (a == "-m" || a == "--model" || a == "--corpus" || a == "-o" || a == "--output" ||
                   a == "--checkpoint" || a == "--shard" || a == "--max-tokens" || a == "--max-tokens-per-domain" ||
                   a == "--checkpoint-every") {
            const char * v = value(a.c_str());
            if (!v) return usage_error(a + " needs a value");
            if (a == "-m" || a == "--model") {
                opt.model_path = v;  // llama.cpp's parser wants it too
                rest.push_back(argv[i - 1]);
                rest.push_back(argv[i]);
            }
            else if (a == "--corpus") opt.corpus_path = v;
            else if (a == "-o" || a == "--output") opt.out_path = v;
            else if (a == "--checkpoint") opt.checkpoint_path = v;
            else if (a == "--shard") {
                unsigned i0 = 0, n0 = 0;
                char tail = 0;
                if (sscanf(v, "%u/%u%c", &i0, &n0, &tail) != 2 || n0 == 0 || i0 >= n0) {
                    return usage_error(std::string("--shard wants i/n with 0 <= i < n, got '") + v + "'");
                }
                opt.shard_index = i0;
                opt.shard_count = n0;
            } else {
                int64_t n = 0;
                if (!parse_i64(v, n)) return usage_error(a + " wants a non-negative integer, got '" + v + "'");
                if (a == "--max-tokens") opt.max_tokens = n;
                else if (a == "--max-tokens-per-domain") opt.max_tokens_per_domain = n;
                else opt.checkpoint_every = n;
            }
        } else if (a == "--resume") {
            opt.resume = true;
        } else if (a == "--force") {
            opt.force = true;
        } else if (a == "--forward-only") {
            opt.collect = false;
        } else if (a == "--no-progress") {
            opt.progress = false;
        } else if (a == "--verbose") {
            opt.verbose = true;
        } else {
            if (a == "-c" || a == "--ctx-size") has_ctx = true;
            rest.push_back(argv[i]);
        }
    }
    if (opt.model_path.empty()) return usage_error("no model (-m)");
    if (opt.corpus_path.empty()) return usage_error("no corpus (--corpus)");
    if (opt.collect && opt.out_path.empty()) return usage_error("no output (-o)");

    if (!common_params_parse((int) rest.size(), rest.data(), opt.llama, LLAMA_EXAMPLE_COMMON)) {
        fprintf(stderr, "reap calibrate: llama.cpp did not accept the flags above (reap calibrate --help)\n");
        return 1;
    }
    if (!has_ctx && opt.llama.n_ctx == 0) opt.llama.n_ctx = 512;
    opt.stop = &g_stop;
    if (const char * s = std::getenv("REAP_CALIBRATE_PAUSE_AFTER")) opt.pause_after_windows = std::atoll(s);   // test hook
    std::signal(SIGINT, on_sigint);

    reap::saliency::archive arch;
    reap::calibrate_report rep;
    std::string err;
    const bool ok = reap::run_calibrate(opt, arch, rep, err);
    std::signal(SIGINT, SIG_DFL);
    if (!ok) return reap::cli::fail("calibrate", err);
    if (!opt.collect) {
        printf("forward-only: %lld tokens (%zu windows) in %.3f s, %.1f tok/s\n", (long long) rep.n_tokens,
               rep.n_windows, rep.seconds, rep.tokens_per_second);
        return 0;
    }
    if (rep.interrupted) {
        fprintf(stderr, "reap calibrate: interrupted after %zu windows; checkpoint %s (rerun with --resume)\n",
                rep.n_windows_done, rep.checkpoint_written.c_str());
        return 130;
    }
    printf("calibrated %lld tokens (%zu windows, %zu of %zu samples%s) in %.3f s, %.1f tok/s%s\n",
           (long long) rep.n_tokens, rep.n_windows, rep.n_samples, rep.n_samples_total,
           opt.shard_count > 1 ? (", shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count)).c_str() : "",
           rep.seconds, rep.tokens_per_second, rep.resumed ? " (resumed)" : "");
    printf("nodes: ffn_moe_topk, %s, %s%s\n", rep.weights_node.c_str(), rep.down_node.c_str(),
           rep.weights_before_ffn ? " (gate applied before the experts)" : "");
    for (const auto & d : rep.domain_tokens) {
        printf("  %-16s %lld tokens\n", d.first.c_str(), (long long) d.second);
    }
    printf("wrote %s\n", opt.out_path.c_str());
    return 0;
}

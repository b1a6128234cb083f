// reap eval: the command-line shell over src/llama/eval.h. Parses flags
// (llama.cpp spellings for the runtime ones), runs the evaluation or the smoke
// test, prints a table or one JSON object on stdout. Errors go to stderr with
// exit status 1; usage errors also print the usage.
#include "cli/args.h"
#include "cli/llama_flags.h"
#include "llama/eval.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

const char * USAGE =
    "usage: reap eval -m BASE.gguf (-p PRUNED.gguf | --mask PLAN.json) ... -f TEXT_OR_CORPUS [options]\n"
    "       reap eval -m BASE.gguf -p PRUNED.gguf --smoke [-n N] --prompt TEXT\n"
    "\n"
    "Runs both models over the same tokens and reports perplexity of each and their\n"
    "ratio, KL(base || pruned) of the next-token distributions over the full vocabulary\n"
    "(mean, median, p99, max) and top-1 agreement. Windows of -c tokens; the second\n"
    "half of each window is scored, as llama-perplexity does, so the base PPL equals\n"
    "llama-perplexity's on the same file and -c (and -b). Without --kld-base KLD uses\n"
    "full-precision log-probabilities (with one -p both models are loaded at once).\n"
    "\n"
    "A -f ending in .jsonl (or whose first line is {\"domain\": ..., \"text\"|\"messages\": ...})\n"
    "is a corpus, read as reap calibrate reads it (`messages` go through the model's chat\n"
    "template; a line without a domain, or with both or neither of text and messages, is\n"
    "an error): every sample is windowed on its own (a sample shorter than -c is one\n"
    "shorter window, longer ones lose their remainder; samples under 3 tokens are skipped\n"
    "as too short), and the report is per domain and overall.\n"
    "A plain text needs at least -c tokens (llama-perplexity asks for 2 x -c).\n"
    "\n"
    "Virtual pruning: --mask PLAN.json scores a plan without writing the pruned file. The\n"
    "base model runs with the plan's removed experts made unselectable in every MoE\n"
    "layer's router (-inf on the router logits and on the selection score, after any\n"
    "exp_probs_b bias and before group scoring and top-k), which computes what the model\n"
    "reap prune writes from that plan would compute. The plan must fit the base exactly\n"
    "as reap prune requires. --base-mask PLAN masks the base itself: with -p PRUNED made\n"
    "from the same plan, KLD ~ 0 shows the two agree.\n"
    "\n"
    "Several -p / --mask: the base runs once; each model is scored against it with the\n"
    "same numbers as separate runs. One model is resident at a time: masks run on the\n"
    "loaded base, which is then freed before each pruned file loads in turn. The base's\n"
    "log-softmax rows wait in an unlinked temp file in --tmp-dir: scored tokens x\n"
    "(4 x n_vocab + 4) bytes (259-token vocabulary: ~1 KiB per token; 163,840: 640 KiB\n"
    "per token, 10k tokens ~ 6.5 GB); a run needing more than the disk has is refused\n"
    "up front. Output: a table per model under a \"== PATH\" line, or with --json one\n"
    "object {\"pruned\": {\"PATH\": ...}, \"masked\": {\"PLAN\": ...}} in the order given\n"
    "(a single -p or --mask prints its object alone).\n"
    "\n"
    "options:\n"
    "  -m, --model FILE         base model\n"
    "  -p, --pruned FILE        pruned model (same vocabulary); repeat for several\n"
    "  --mask PLAN.json         the base with this plan's removed experts masked; repeat for several\n"
    "  --base-mask PLAN.json    mask the base itself (compare a masked base with -p, or with --mask)\n"
    "  --tmp-dir DIR            where the base's rows wait (default $TMPDIR or /tmp)\n"
    "  -f, --file FILE          plain text or corpus JSONL\n"
    "  --kld-base FILE          llama-perplexity --kl-divergence-base file: if FILE is missing,\n"
    "                           run the base over -f and write it (then free the base before\n"
    "                           loading the pruned model; without -p only the file is written);\n"
    "                           if it exists, use it instead of running the base (-m may be\n"
    "                           omitted; -f, if given, must give the file's tokens). Plain text only.\n"
    "                           KLD against the file uses its 16-bit log-probs, like llama-perplexity.\n"
    "                           With several -p each is scored through the file in turn.\n"
    "  --chunks N               score at most N windows (plain text)\n"
    "  --json                   print one JSON object instead of the table (see several -p)\n"
    "  -q, --quiet              no progress line (it only shows when stderr is a terminal)\n"
    "  --verbose                show llama.cpp's log\n"
    "  --smoke                  greedy-decode both models after --prompt and report how many\n"
    "                           leading tokens agree (one -p)\n"
    "  -n, --n-predict N        tokens to generate with --smoke (default 12)\n"
    "  --prompt TEXT            prompt for --smoke\n"
    "\n";

std::string usage_text() { return std::string(USAGE) + reap::cli::k_llama_runtime_help; }

bool parse_int(const char * s, int & out) {
    char * end = nullptr;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT32_MIN || v > INT32_MAX) return false;
    out = (int) v;
    return true;
}

const char * k_usage_line = "usage: reap eval -m BASE.gguf (-p PRUNED.gguf | --mask PLAN.json) ... -f TEXT_OR_CORPUS [options]";

int usage_error(const std::string & msg) { return reap::cli::usage_error_full("eval", msg, usage_text().c_str()); }

} // namespace

int cmd_eval(int argc, char ** argv) {
    reap::eval_options  opt;
    reap::smoke_options smoke;
    std::vector<std::string> pruned;  // every -p, in order
    std::vector<reap::eval_candidate> cands;  // every -p and --mask, in order
    std::vector<char *> rest = {argv[0]};     // the flags for llama.cpp's parser
    std::string err;
    bool json = false, quiet = false, do_smoke = false;

    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](std::string & out) {
            if (i + 1 >= argc) return false;
            out = argv[++i];
            return true;
        };
        auto int_value = [&](int & out) {
            return i + 1 < argc && parse_int(argv[++i], out);
        };
        std::string s;
        if (a == "-h" || a == "--help") {
            fputs(usage_text().c_str(), stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            if (!value(opt.base_path)) return usage_error(a + " needs a file");
        } else if (a == "-p" || a == "--pruned") {
            if (!value(s)) return usage_error(a + " needs a file");
            pruned.push_back(s);
            cands.push_back({s, false});
        } else if (a == "--mask") {
            if (!value(s)) return usage_error(a + " needs a plan");
            cands.push_back({s, true});
        } else if (a == "--base-mask") {
            if (!value(opt.base_mask_path)) return usage_error(a + " needs a plan");
        } else if (a == "--tmp-dir") {
            if (!value(opt.tmp_dir)) return usage_error(a + " needs a directory");
        } else if (a == "-f" || a == "--file") {
            if (!value(opt.input_path)) return usage_error(a + " needs a file");
        } else if (a == "--kld-base") {
            if (!value(opt.kld_base_path)) return usage_error(a + " needs a file");
        } else if (a == "--chunks") {
            if (!int_value(opt.max_chunks) || opt.max_chunks < 1) return usage_error(a + " needs a positive number");
        } else if (a == "--json") {
            json = true;
        } else if (a == "-q" || a == "--quiet") {
            quiet = true;
        } else if (a == "--verbose" || a == "-v") {
            opt.verbose = true;
        } else if (a == "--smoke") {
            do_smoke = true;
        } else if (a == "-n" || a == "--n-predict") {
            if (!int_value(smoke.n_predict) || smoke.n_predict < 1) return usage_error(a + " needs a positive number");
        } else if (a == "--prompt") {
            if (!value(smoke.prompt)) return usage_error(a + " needs text");
        } else {
            if (!reap::cli::take_llama_flag(argc, argv, i, rest, err)) return reap::cli::usage_error("eval", err, k_usage_line);
        }
    }
    if (!reap::cli::parse_llama_runtime(rest, opt.base_path, opt.rt, err)) return reap::cli::usage_error("eval", err, k_usage_line);
    // JSON goes to stdout, so a progress line on a terminal's stderr does not disturb it.
    opt.progress = !quiet && isatty(fileno(stderr));

    if (pruned.size() == 1) opt.pruned_path = pruned[0];

    if (do_smoke) {
        if (pruned.size() > 1 || cands.size() != pruned.size()) return usage_error("--smoke takes one -p (and no --mask)");
        smoke.base_path   = opt.base_path;
        smoke.pruned_path = opt.pruned_path;
        smoke.rt          = opt.rt;
        smoke.verbose     = opt.verbose;
        if (smoke.rt.n_ctx == 0) smoke.rt.n_ctx = 512;
        reap::smoke_report r;
        if (!reap::run_smoke(smoke, r, err)) return reap::cli::fail("eval", err);
        if (json) {
            printf("%s\n", reap::smoke_report_json(r).c_str());
        } else {
            printf("prompt: %s\n", smoke.prompt.c_str());
            printf("base:   %s\n", r.base_text.c_str());
            printf("pruned: %s\n", r.pruned_text.c_str());
            printf("leading tokens that agree: %d of %zu\n", r.n_agree, r.base_tokens.size());
        }
        return 0;
    }

    if (opt.input_path.empty() && opt.kld_base_path.empty()) {
        return usage_error("no input: give -f TEXT_OR_CORPUS");
    }
    std::vector<reap::eval_report> rs;
    if (!reap::run_eval_candidates(opt, cands, rs, err)) return reap::cli::fail("eval", err);
    if (rs.size() == 1) {
        if (json) {
            printf("%s\n", reap::eval_report_json(rs[0]).c_str());
        } else {
            reap::eval_report_print(stdout, rs[0]);
        }
        return 0;
    }
    if (json) {
        printf("%s\n", reap::eval_candidates_json(cands, rs).c_str());
    } else {
        for (size_t i = 0; i < rs.size(); ++i) {
            printf("%s== %s%s\n", i ? "\n" : "", cands[i].masked() ? "masked by " : "", cands[i].path.c_str());
            reap::eval_report_print(stdout, rs[i]);
        }
    }
    return 0;
}

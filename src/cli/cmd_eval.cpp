// reap eval: the command-line shell over src/llama/eval.h. Its options come
// from one table (src/cli/args.h); llama.cpp's runtime flags go to llama.cpp's
// own parser (src/cli/llama_flags.h). Runs the evaluation or the smoke test,
// prints a table or one JSON object on stdout. Errors go to stderr with exit
// status 2.
#include "cli/args.h"
#include "cli/llama_flags.h"
#include "llama/eval.h"
#include "util/file.h"

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

struct eval_params {
    reap::eval_options                opt;
    reap::smoke_options               smoke;
    std::vector<std::string>          pruned;  // every -p, in order
    std::vector<reap::eval_candidate> cands;   // every -p and --mask, in order
    bool json = false, quiet = false, do_smoke = false;
    reap::cli::runtime_given given;
};

void declare(reap::cli::options & t, eval_params & p) {
    t.about(
    "Runs both models over the same tokens and reports perplexity of each and their\n"
    "ratio, KL(base || pruned) of the next-token distributions over the full vocabulary\n"
    "(mean, median, p99, max) and top-1 agreement. Windows of -c tokens; the second\n"
    "half of each window is scored, as llama-perplexity does, so the base PPL equals\n"
    "llama-perplexity's on the same file and -c (and -b). Without --kld-base KLD uses\n"
    "full-precision log-probabilities.\n"
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
    "MTP blocks (<arch>.nextn_predict_layers > 0): the MTP draft's greedy acceptance for\n"
    "base and pruned, over the scored positions p: the share where the MTP head's argmax\n"
    "for (h_{p-1}, x_p) equals the same model's own argmax at p (\"mtp_draft\" in --json).\n"
    "--mask and --base-mask mask the MTP blocks too; not for a base read from --kld-base.\n"
    "\n"
    );
    t.section("options:");
    t.text("-m, --model", "FILE", "base model", p.opt.base_path);
    t.custom("-p, --pruned", "FILE", "pruned model (same vocabulary); repeat for several",
             [&p](const std::string & v, std::string &) {
                 p.pruned.push_back(v);
                 p.cands.push_back({v, false});
                 return true;
             });
    t.custom("--mask", "PLAN.json", "the base with this plan's removed experts masked; repeat for several",
             [&p](const std::string & v, std::string &) {
                 p.cands.push_back({v, true});
                 return true;
             });
    // one base, one mask: a second --base-mask is refused rather than silently winning
    t.custom("--base-mask", "PLAN.json", "mask the base itself (compare a masked base with -p, or with --mask); once",
             [&p](const std::string & v, std::string & err) {
                 if (!p.opt.base_mask_path.empty()) {
                     err = "--base-mask given twice (" + p.opt.base_mask_path + ", " + v + "): the base is masked by one plan";
                     return false;
                 }
                 p.opt.base_mask_path = v;
                 return true;
             });
    t.text("--tmp-dir", "DIR", "where the base's rows wait (default $TMPDIR or /tmp)", p.opt.tmp_dir);
    t.text("-f, --file", "FILE", "plain text or corpus JSONL", p.opt.input_path);
    t.text("--kld-base", "FILE",
           "llama-perplexity --kl-divergence-base file: if FILE is missing, run the base over -f and write it "
           "(without -p only the file is written); if it exists, use it instead of running the base (-m may be "
           "omitted; -f, if given, must give the file's tokens). Plain text only. KLD against the file uses its "
           "16-bit log-probs, like llama-perplexity. With several -p each is scored through the file in turn.",
           p.opt.kld_base_path);
    t.integer("--chunks", "N", "score at most N windows (plain text)", 1, INT32_MAX, p.opt.max_chunks);
    t.flag("--json", "print one JSON object instead of the table (see several -p)", p.json);
    t.flag("-q, --quiet", "no progress line (it only shows when stderr is a terminal)", p.quiet);
    t.flag("--verbose", "show llama.cpp's log", p.opt.verbose);
    t.flag("--smoke", "greedy-decode both models after --prompt and report how many leading tokens agree (one -p)",
           p.do_smoke);
    t.integer("-n, --n-predict", "N", "tokens to generate with --smoke (default 12)", 1, INT32_MAX, p.smoke.n_predict);
    t.text("--prompt", "TEXT", "prompt for --smoke", p.smoke.prompt);
    t.help_row();
    reap::cli::declare_eval_runtime(t, "window size (default 512, or the --kld-base file's)", p.given, p.opt.rt);
}

} // namespace

int cmd_eval(int argc, char ** argv) {
    eval_params p;
    reap::cli::options t("eval",
                         "usage: reap eval -m BASE.gguf (-p PRUNED.gguf | --mask PLAN.json) ... -f TEXT_OR_CORPUS [options]\n"
                         "       reap eval -m BASE.gguf -p PRUNED.gguf --smoke [-n N] --prompt TEXT");
    declare(t, p);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    if (!reap::cli::parse_llama_runtime(t, "eval", p.opt.base_path, p.given, p.opt.rt, status)) return status;
    reap::eval_options &               opt = p.opt;
    reap::smoke_options &              smoke = p.smoke;
    const std::vector<std::string> &   pruned = p.pruned;
    const std::vector<reap::eval_candidate> & cands = p.cands;
    const bool json = p.json, quiet = p.quiet, do_smoke = p.do_smoke;
    std::string err;
    auto usage_error = [&t](const std::string & msg) { return t.usage_error(msg); };
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
    if (!opt.kld_base_path.empty()) {   // the output rule (util/file.h): the base file it may write is no input
        std::vector<std::pair<std::string, std::string>> inputs = {
            {"model", opt.base_path}, {"input", opt.input_path}, {"mask", opt.base_mask_path}};
        for (const auto & pp : pruned) inputs.emplace_back("pruned model", pp);
        if (!reap::util::check_not_input(opt.kld_base_path, inputs, err)) return reap::cli::fail("eval", err);
    }
    std::vector<reap::eval_report> rs;
    if (!reap::run_eval_candidates(opt, cands, rs, err)) return reap::cli::fail("eval", err);
    std::set<std::string> warned;   // with --json the JSON's "warnings" say it (stdout stays one document)
    for (const auto & r : json ? std::vector<reap::eval_report>() : rs) {
        for (const auto & w : r.warnings) {
            if (warned.insert(w).second) fprintf(stderr, "reap eval: warning: %s\n", w.c_str());
        }
    }
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

// reap eval: the command-line shell over src/llama/eval.h. Its options come
// from one table (src/cli/args.h); llama.cpp's runtime flags go to llama.cpp's
// own parser (src/cli/llama_flags.h); the table is src/cli/eval_flags.cpp.
// Runs the evaluation, the smoke test, or the needle grid and free generation
// (src/llama/needle.h, generate.h); prints a table or one JSON object on stdout. Errors go to stderr with exit
// status 2.
#include "cli/eval_flags.h"
#include "formats/kld_receipt.h"
#include "llama/behaviour_run.h"
#include "llama/eval_models.h"
#include "util/file.h"
#include "util/json.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using reap::cli::eval_params;

// --smoke: both models' greedy continuations of one prompt.
int run_smoke(eval_params & p, const std::function<int(const std::string &)> & usage_error) {
    reap::smoke_options & smoke = p.smoke;
    if (p.pruned.size() > 1 || p.cands.size() != p.pruned.size()) return usage_error("--smoke takes one -p (and no --mask)");
    smoke.base_path   = p.opt.base_path;
    smoke.pruned_path = p.opt.pruned_path;
    smoke.rt          = p.opt.rt;
    smoke.verbose     = p.opt.verbose;
    reap::smoke_report r;
    std::string err;
    if (!reap::run_smoke(smoke, r, err)) return reap::cli::fail("eval", err);
    if (p.json) {
        printf("%s\n", reap::smoke_report_json(r).c_str());
    } else {
        printf("prompt: %s\n", smoke.prompt.c_str());
        printf("base:   %s\n", r.base_text.c_str());
        printf("pruned: %s\n", r.pruned_text.c_str());
        printf("leading tokens that agree: %d of %zu\n", r.n_agree, r.base_tokens.size());
    }
    return 0;
}

// --needle and --generate: behaviour on the base and every candidate.
int run_behaviour(eval_params & p, const std::function<int(const std::string &)> & usage_error) {
    if (!p.opt.kld_base_path.empty()) return usage_error("--needle and --generate decode the models: no --kld-base");
    std::string err;
    reap::behaviour_request req;
    req.eval = p.opt;
    req.seed = p.needle.seed;   // one --seed
    if (p.do_needle) {
        req.needle = p.needle;
        req.needle->haystack_path = p.opt.input_path;
    }
    if (!p.generate.prompts_path.empty()) req.generate = p.generate;
    reap::behaviour_result r;
    if (!reap::run_behaviour(req, p.cands, r, err)) return reap::cli::fail("eval", err);
    reap::behaviour_document doc;
    doc.needle = std::move(r.needle);
    doc.generate = std::move(r.generate);
    if (p.json) {
        printf("%s\n", reap::util::json_text(reap::behaviour_document_to_json(doc), 2).c_str());
        return 0;
    }
    if (doc.needle) reap::needle_report_print(stdout, doc.needle->report);
    if (doc.needle && doc.generate) printf("\n");
    if (doc.generate) reap::generation_report_print(stdout, doc.generate->report);
    return 0;
}

} // namespace

int cmd_eval(int argc, char ** argv) {
    eval_params p;
    reap::cli::options t("eval",
                         "usage: reap eval -m BASE.gguf (-p PRUNED.gguf | --mask PLAN.json) ... -f TEXT_OR_CORPUS [options]\n"
                         "       reap eval -m BASE.gguf -p PRUNED.gguf --smoke [-n N] --prompt TEXT\n"
                         "       reap eval -m BASE.gguf (-p PRUNED.gguf | --mask PLAN.json)... [--needle -f HAYSTACK] [--generate PROMPTS]\n"
                         "       reap eval -m BASE.gguf (-p PRUNED.gguf | --mask PLAN.json)... (--multiple-choice | --hellaswag | --winogrande) FILE\n"
                         "       reap eval -m BASE.gguf (-p PRUNED.gguf | --mask PLAN.json)... --tasks TASKS.jsonl [--samples K] [--answers-dir DIR]");
    reap::cli::declare_eval(t, p);
    int status = 0;
    // an option llama.cpp refuses is named before a missing -f / -m (the required values)
    if (!t.parse(argc, argv, status, false)) return status;
    if (!reap::cli::parse_llama_runtime(t, "eval", p.opt.base_path, p.given, p.opt.rt, status)) return status;
    if (!t.check_required(status)) return status;
    reap::eval_options &               opt = p.opt;
    const std::vector<std::string> &   pruned = p.pruned;
    const std::vector<reap::eval_candidate> & cands = p.cands;
    const bool json = p.json;
    std::string err;
    auto usage_error = [&t](const std::string & msg) { return t.usage_error(msg); };
    p.table = &t;
    // JSON goes to stdout, so a progress line on a terminal's stderr does not disturb it.
    opt.progress = !p.quiet && isatty(fileno(stderr));

    if (!p.choice.tasks_path.empty() || !p.gen.tasks_path.empty()) return reap::cli::run_task_modes(p, usage_error);
    if (pruned.size() == 1) opt.pruned_path = pruned[0];
    if (p.do_smoke) return run_smoke(p, usage_error);
    if (p.do_needle || !p.generate.prompts_path.empty()) return run_behaviour(p, usage_error);

    if (!opt.kld_base_path.empty()) {   // the output rule (util/file.h): the base file it may write is no input
        std::vector<std::pair<std::string, std::string>> inputs = {
            {"model", opt.base_path}, {"input", opt.input_path}, {"mask", opt.base_mask_path}};
        for (const auto & pp : pruned) inputs.emplace_back("pruned model", pp);
        if (!reap::util::check_not_input(opt.kld_base_path, inputs, err) ||
            !reap::util::check_not_input(reap::kld_receipt_path(opt.kld_base_path), inputs, err)) {
            return reap::cli::fail("eval", err);
        }
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

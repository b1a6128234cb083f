// reap report: the model card of a pruned build (DIR/README.md and its
// figures), written and checked from the receipts by reap::report (src/report).
// Exit 0 with the card written; 1 when the build fails the audit (no card);
// 2 for usage errors and inputs that cannot be read or do not belong together.
#include "cli/args.h"
#include "cli/commands.h"
#include "report/report.h"

#include <cstdio>
#include <string>

namespace {

void declare_report_options(reap::cli::options & t, reap::report::report_options & p) {
    t.about(
        "Writes DIR/README.md, the model card of BUILD (a pruned model, or the first shard\n"
        "of a split set), and its figures DIR/figures/*.svg, from the receipts only:\n"
        "  * Hugging Face front matter (base_model, license: FILL_IN when the source GGUF\n"
        "    does not say; library_name gguf; tags moe, expert-pruning, reap, the arch,\n"
        "    the tensor types; pipeline_tag);\n"
        "  * the census of SOURCE and BUILD side by side, from the files;\n"
        "  * the method from the plan's provenance and the archive (--saliency): criterion,\n"
        "    domains and tokens, keep rule, super experts, dead experts, saliency kept\n"
        "    overall and per domain; figures: saliency heatmap, retention curve, expert\n"
        "    usage per domain, and KLD against N with --sweep (a sweep with width cuts:\n"
        "    a row per N and width, KLD and top-1 against file size, one line per width);\n"
        "  * Verified: the byte audit of `reap verify`, re-run here (a build that fails it\n"
        "    gets no card: exit 1), SHA256SUMS, and the eval tables of --eval files that\n"
        "    measured this build (matched by the hashes of its files, or the plan's hash\n"
        "    for a masked eval), and task accuracy (--tasks: accuracy with its interval, the\n"
        "    flips against the source and McNemar's p) of files that measured this build;\n"
        "  * Not verified: what is missing or does not hold (no eval: quality unmeasured;\n"
        "    an eval of another file; domains evaluated but not calibrated: pruned blind;\n"
        "    eval corpus = calibration corpus: flatters the cut; ...);\n"
        "  * how to run it with llama.cpp, the hardware arithmetic, SHA256SUMS.\n"
        "The figures are written first, README.md last, each atomically. No file of the\n"
        "card is ever one of the inputs (checked by inode, --force or not); one that\n"
        "exists is replaced only with --force.\n");
    t.section("options:");
    t.text("-m, --model", "SOURCE.gguf", "the source model (first shard of a split set)", p.source);
    t.text("--plan", "PLAN.json", "the plan BUILD was pruned with", p.plan);
    t.text("--saliency", "S.gguf", "the saliency archive the plan was made from", p.saliency);
    t.texts("--eval", "EVAL.json", "a `reap eval --json` report (repeatable)", p.evals);
    t.text("--sweep", "SWEEP.json", "a `reap sweep -o` report", p.sweep);
    t.custom("--tasks", "TASKS.json", "a `reap eval --multiple-choice/--hellaswag/--winogrande --json` file (repeatable; read as --eval)",
             [&p](const std::string & v, std::string &) {
                 p.evals.push_back(v);
                 return true;
             });
    t.text("--imatrix", "IMATRIX", "the imatrix reap prune was given (a width cut whose down type is an IQ type is audited with it)",
           p.imatrix);
    t.text("--judge", "JUDGE.json", "a `reap judge -o` result: the pairwise comparison, under Not verified with its scope", p.judge);
    t.text("-o, --output", "DIR", "where README.md and figures/ go (created if missing)", p.out_dir);
    t.flag("--force", "replace existing files of the card (DIR/README.md, DIR/figures/*.svg; never an input)", p.force);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (!p.pruned.empty()) {
            err = "more than one build given ('" + p.pruned + "' and '" + a + "')";
            return false;
        }
        p.pruned = a;
        return true;
    });
    t.exit_note(reap::cli::exit_differs, "BUILD is not SOURCE pruned by PLAN (the audit of reap verify fails): no card is written");
    t.require(p.source, "no source model given (-m SOURCE.gguf)")
     .require(p.plan, "no plan given (--plan PLAN.json)")
     .require(p.pruned, "no build given (BUILD.gguf)")
     .require(p.out_dir, "no output directory given (-o DIR)");
}

} // namespace

int cmd_report(int argc, char ** argv) {
    reap::report::report_options params;
    params.tool_version = REAP_VERSION;
    reap::cli::options t("report",
                         "usage: reap report -m SOURCE.gguf --plan PLAN.json BUILD.gguf [--saliency S.gguf] [--eval EVAL.json ...] "
                         "[--sweep SWEEP.json] -o DIR");
    declare_report_options(t, params);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    reap::report::report_result res;
    std::string err;
    if (!reap::report::write_report(params, res, err)) {
        if (res.differs) {
            fprintf(stderr, "reap report: FAILED: %s\n", err.c_str());
            return reap::cli::exit_differs;
        }
        return reap::cli::fail("report", err);
    }
    printf("reap report: wrote %s\n", (params.out_dir + "/README.md").c_str());
    printf("  verified: %zu item(s); not verified: %zu item(s)\n", res.verified.size(), res.not_verified.size());
    for (const auto & w : res.written) {
        if (w != params.out_dir + "/README.md") printf("  figure: %s\n", w.c_str());
    }
    return 0;
}

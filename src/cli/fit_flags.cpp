// The options of reap fit (fit_flags.h): the table and --help's prose.
#include "cli/fit_flags.h"

#include "cli/eval_flags.h"
#include "cli/plan_flags.h"
#include "util/strings.h"

#include <cstdlib>

namespace reap::cli {

namespace {

// --axes experts,width,sources: the axes the search may move along.
bool parse_axes(const std::string & v, reap::fit_options & o, std::string & err) {
    o.axis_experts = o.axis_width = o.axis_sources = false;
    size_t start = 0;
    while (start <= v.size()) {
        const size_t end = std::min(v.find(',', start), v.size());
        const std::string a = v.substr(start, end - start);
        if (a == "experts") o.axis_experts = true;
        else if (a == "width") o.axis_width = true;
        else if (a == "sources") o.axis_sources = true;
        else {
            err = "--axes: unknown axis '" + a + "' (experts, width or sources)";
            return false;
        }
        start = end + 1;
    }
    if (!o.axis_experts && !o.axis_width) {
        err = "--axes: give experts or width (or both): sources alone cannot cut anything";
        return false;
    }
    return true;
}

} // namespace

void declare_fit(options & t, fit_params & p) {
    t.about(
    "From a memory budget to the best verified build, in one command: calibrates, scores\n"
    "candidate cuts by masking, prunes the winner, verifies it byte for byte, evaluates the\n"
    "written file and writes its card. Everything goes into -o DIR:\n"
    "  saliency.gguf, reference.kld   the archive and the reference's rows (once)\n"
    "  plan.json, build/              the winner's plan, its files and SHA256SUMS\n"
    "  eval.json, fit.json            the file's eval; the search (every candidate and score)\n"
    "  card/README.md, card/figures/  the model card, with a section on the search\n"
    "  fit-journal.json               what is done: a killed fit, run again, resumes there\n"
    "\n"
    "The space: every source quantisation (-m, repeatable) x channel width K (multiples of the\n"
    "down type's block up to the experts' width) x expert count N, where for each (source, K)\n"
    "only the largest N whose file, exactly as reap prune writes it, fits --budget is a\n"
    "candidate. Every candidate is scored by one masked pass over -f (plain text) against the\n"
    "reference's rows (--reference, else the first -m): KLD mean, lower is better.\n"
    "\n"
    "The search does not score the whole grid. Along each source's line (K ascending) it\n"
    "scores the two ends and the middle, then the middle of every gap between scored points\n"
    "that could still beat the best by more than the noise: KLD along a line is taken to be\n"
    "convex, so the chords through the scored points beside a gap bound what it can hold,\n"
    "and a gap bounded at or above (best - noise) is skipped. The noise is the split-half\n"
    "disagreement of the best's lead over the runner-up: the difference measured on the first\n"
    "and on the second half of the windows, |d1 - d2| / 2. --max-passes N stops it sooner.\n"
    "Before the search it prints the space and the cost model; a line per pass with the ETA.\n"
    "\n"
    "Gates (--needle, --generate PROMPTS, a task file: --multiple-choice / --hellaswag / --winogrande\n"
    "FILE): the best scored candidates, --gate-top at a time in\n"
    "KLD order, run by mask through reap eval's needle grid (haystack -f) and free generation;\n"
    "the first that keeps the reference's exact cells (less --needle-slack), its loop rate (+\n"
    "--gate-slack) and its termination rate (- --gate-slack) wins; the others are listed with why.\n"
    "\n"
    "The winner's written file is evaluated against the reference again; if its KLD and its\n"
    "mask's differ by more than 5% (or 1e-4), fit stops with both numbers.\n"
    "\n");
    t.section("inputs:");
    t.texts("-m, --model", "SOURCE.gguf", "a source quantisation of the model (repeat for several; the first shard of a split set)",
            p.o.sources);
    t.text("--reference", "REF.gguf", "the model every candidate is scored against (default: the first -m)", p.o.reference);
    t.text("--kld-base", "REF.kld", "the reference's rows (read when it exists; else written there from --reference)", p.o.kld_base);
    t.text("--corpus", "CALIB.jsonl", "calibration corpus (reap calibrate's), run on the reference or the first -m", p.o.corpus);
    t.text("--saliency", "SALIENCY.gguf", "an archive of this model instead of calibrating (it needs channel scores for the width axis)",
           p.o.saliency);
    t.text("-f, --file", "HELDOUT", "held-out plain text every candidate is scored on", p.o.heldout);
    t.custom("--budget", "SIZE", "the most bytes the build's files may take (400G decimal, 300GiB binary)",
             [&p](const std::string & v, std::string & err) {
                 p.o.budget_text = v;
                 return reap::planner::parse_size(v, p.o.budget, err);
             });
    t.text("--imatrix", "IN", "the model's llama-imatrix file: prune writes its slice for the build beside it (as reap prune "
           "--imatrix), verify checks it", p.o.imatrix);
    t.text("-o, --output", "DIR", "where everything goes (created when missing; rerun with the same DIR to resume)", p.o.out_dir);
    t.section("search:");
    t.custom("--axes", "A,B,...", "what the search may vary: experts, width, sources (default: all three)",
             [&p](const std::string & v, std::string & err) { return parse_axes(v, p.o, err); });
    t.text("--down-type", "T", "width cuts: the type down is requantised to (default: its own; its block sets the K grid); an importance-matrix type "
           "(iq2_xxs, iq2_xs, iq1_s, iq1_m) needs --imatrix, and its cuts are written and measured, not masked", p.o.down_type);
    t.integer("--max-passes", "N", "score at most N candidates (default: until nothing left can beat the best)", 1, INT32_MAX,
              p.o.max_passes);
    t.flag("--dry-run", "print the space and the cost model, score nothing (without an archive yet: only what calibration will read)",
           p.o.dry_run);
    t.section("gates (run by mask on the best scored candidates before anything is written):");
    reap::cli::declare_behaviour(t, p.o.needle, p.o.generate, p.o.gate_needle, false,
                                 "a gate: the winner keeps the reference's exact cells less --needle-slack");
    declare_task_files(t, p.o.tasks, "a gate: the winner's accuracy is at least the reference's less "
                       "--task-slack and not worse by McNemar's exact test at 5%, on the same tasks");
    t.custom("--task-slack", "R", "a task file: the accuracy the winner may lose against the reference (default 0.02)",
             [&p](const std::string & v, std::string & err) { return parse_number("--task-slack", v, 0, 1, p.o.task_slack, err); });
    t.integer("--needle-slack", "N", "exact needle cells the winner may lose against the reference (default 0)", 0, INT32_MAX,
              p.o.needle_slack);
    t.custom("--gate-slack", "R", "--generate: the loop rate may rise, the termination rate fall, by R (default 0.05)",
             [&p](const std::string & v, std::string & err) { return parse_number("--gate-slack", v, 0, 1, p.o.gate_slack, err); });
    t.integer("--gate-top", "N", "candidates gated a round, best KLD first; when none passes, the next N (default 3)", 1, INT32_MAX,
              p.o.gate_top);
    // a gate option without its gate is refused whatever its value (its default too)
    t.for_mode({"--needle-slack"}, "the needle gate", "--needle", [&p] { return p.o.gate_needle; });
    t.for_mode({"--gate-slack"}, "the generation gate", "--generate PROMPTS", [&p] { return !p.o.generate.prompts_path.empty(); });
    t.for_mode({"--gate-top"}, "the gates", "--needle, --generate PROMPTS or a task file",
               [&p] { return p.o.gate_needle || !p.o.generate.prompts_path.empty() || !p.o.tasks.tasks_path.empty(); });
    t.for_mode({"--tasks-limit", "--task-slack"}, "the task gate", "--multiple-choice, --hellaswag or --winogrande",
               [&p] { return !p.o.tasks.tasks_path.empty(); });
    reap::cli::declare_ranking(t, p.o.rank, p.o.method_given);
    reap::cli::declare_methods(t, p.o.methods,
                               "the criterion as an axis: each method's plan at the budget (the first source, every channel) is "
                               "scored by mask before the search, and the lowest KLD ranks the search and names the build's "
                               "criterion (DIR/methods.json; aimer ranks with DIR/scores.gguf, reap score of the calibrated model)");
    t.excludes("--methods", "--method", "--methods chooses the method by measurement");
    t.section("other options:");
    t.flag("-q, --quiet", "no progress line", p.quiet);
    t.flag("--verbose", "show llama.cpp's log", p.o.verbose);
    t.help_row();
    reap::cli::declare_eval_runtime(t, "window size (default " + std::to_string(reap::k_default_window) + ", or the model's trained context when shorter)", p.given, p.o.rt);
    t.exit_note(1, "checked and it does not hold: the build does not verify, its file's KLD is not its mask's, or no candidate "
                   "passes the gates");
    t.require(p.o.sources, "no source given (-m SOURCE.gguf)")
     .require(p.o.heldout, "no held-out text given (-f HELDOUT)")
     .require(p.o.budget_text, "no budget given (--budget SIZE)")
     .require(p.o.out_dir, "no output folder given (-o DIR)");
}

} // namespace reap::cli

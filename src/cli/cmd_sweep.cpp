// reap sweep: how much each cut size costs, without writing a single pruned
// model. Parses the options (src/cli/sweep_flags.cpp), calls the sweep (src/llama/sweep.h: plans every
// size from one ranking, scores each by masking), prints its table and
// publishes the plans, the chart and the JSON (formats/sweep_file.h) through
// planner::publish_sweep_files (plan/sweep.h).
#include "cli/commands.h"
#include "cli/eval_flags.h"
#include "cli/sweep_flags.h"
#include "plan/sweep.h"
#include "util/file.h"
#include "util/path.h"
#include "util/recovery.h"

#include <cstdio>
#include <set>
#include <string>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

int cmd_sweep(int argc, char ** argv) {
    reap::cli::sweep_params p;
    reap::cli::options t("sweep",
                         "usage: reap sweep SALIENCY.gguf -m BASE.gguf [-m Q2.gguf ...] [--reference REF.gguf | --kld-base REF.kld]\n"
                         "                  -f TEXT (--keep N,... | --ratios R,... | --budgets SIZE,...) [--widths K,...] [-o SWEEP.json] [options]");
    reap::cli::declare_sweep(t, p);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    std::string err;
    if (p.n_kinds > 1 || (p.n_kinds == 0 && p.sw.widths.empty())) {
        return t.usage_error(p.n_kinds == 0 ? "say which sizes: --keep N,N,..., --ratios R,R,..., --budgets SIZE,... or --widths K,..."
                                            : "give one of --keep, --ratios and --budgets, once");
    }
    if (p.sw.widths.empty() && (!p.sw.down_type.empty() || p.sw.channel_score_given)) {
        return t.usage_error(std::string(p.sw.down_type.empty() ? "--channel-score" : "--down-type") + " is for width cuts: give --widths K,...");
    }
    if (!t.given("--tasks-limit")) p.sw.choice.limit = reap::default_tasks_limit(p.sw.choice.format);
    if (!reap::cli::parse_llama_runtime(t, "sweep", p.sw.eval.base_path, p.given, p.sw.eval.rt, status)) return status;
    p.sw.eval.progress = !p.quiet && isatty(fileno(stderr));
    p.sw.tool_version = REAP_VERSION;
    if (p.plot.empty() && !p.output.empty()) p.plot = reap::util::beside(p.output, reap::util::stem_of(p.output) + ".svg");
    auto fail = [](const std::string & msg) { return reap::cli::fail("sweep", msg); };
    // the output rule (util/file.h): no output is an input, nor the other output
    std::vector<std::pair<std::string, std::string>> inputs = {{"model", p.sw.eval.base_path}, {"saliency archive", p.sw.saliency},
        {"input", p.sw.eval.input_path}, {"reference", p.sw.reference}, {"KLD base", p.sw.kld_base},
        {"prompts", p.sw.generate.prompts_path}};
    for (const std::string & m : p.sw.more_sources) inputs.push_back({"source", m});
    for (const std::string * out : {&p.output, &p.plot}) {
        if (!out->empty() && !reap::util::check_output(*out, inputs, p.force, err)) return fail(err);
    }
    if (!p.output.empty() && reap::util::same_entry(p.output, p.plot)) return fail("--plot is the output '" + p.output + "'");

    reap::sweep_result r;
    if (!reap::plan_sweep_points(p.sw, r, err)) return fail(err);
    // where the plans go, before the scoring: not an input, not the JSON or the chart, not each other
    std::vector<std::pair<std::string, std::string>> outputs = {{"output", p.output}, {"chart (--plot)", p.plot}};
    for (const auto & f : reap::sweep_output_files(p.sw, r, "", "")) {
        if (!reap::util::check_output(f.first, inputs, p.force, err) || !reap::util::check_not_input(f.first, outputs, err)) {
            return fail(err + " (give --plans-dir another folder, or -o another name)");
        }
        outputs.push_back({"plan", f.first});
    }
    // a killed run's journal where the outputs go is completed now, and one
    // that is not reap's refused now: before the scoring, not after it
    std::set<std::string> dirs;
    for (const auto & o : outputs) {
        if (!o.second.empty()) dirs.insert(reap::util::dir_of(o.second));
    }
    for (const std::string & d : dirs) {
        struct stat st;
        if (::stat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && reap::util::recover_dir(d, err) < 0) return fail(err);
    }
    if (!reap::score_sweep(p.sw, r, err)) return fail(err);
    reap::print_sweep(stdout, p.sw, r);
    const auto files = reap::sweep_output_files(p.sw, r, p.plot, p.output);
    if (!reap::planner::publish_sweep_files(p.sw.plans_dir, files, err)) return fail(err);
    for (size_t i = 0; i < files.size(); ++i) printf("%s  wrote %s\n", i ? "" : "\n", files[i].first.c_str());
    return 0;
}

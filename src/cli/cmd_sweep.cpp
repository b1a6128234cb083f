// reap sweep: how much each cut size costs, without writing a single pruned
// model. Parses the options (src/cli/sweep_flags.cpp), calls the sweep (src/llama/sweep.h: plans every
// size from one ranking, scores each by masking, publishes the plans, the
// chart and the JSON: run_sweep) and prints its table.
#include "cli/commands.h"
#include "cli/eval_flags.h"
#include "cli/sweep_flags.h"
#include "util/path.h"

#include <cstdio>
#include <string>
#include <vector>
#include <unistd.h>

int cmd_sweep(int argc, char ** argv) {
    reap::cli::sweep_params p;
    reap::cli::options t("sweep",
                         "usage: reap sweep SALIENCY.gguf [SCORES.gguf] -m BASE.gguf [-m Q2.gguf ...] [--reference REF.gguf | --kld-base REF.kld]\n"
                         "                  -f TEXT (--keep N,... | --ratios R,... | --budgets SIZE,...) [--widths K,... | --methods M,...]\n"
                         "                  [-o SWEEP.json] [options]");
    reap::cli::declare_sweep(t, p);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    std::string err;
    if (p.n_kinds > 1 || (p.n_kinds == 0 && p.sw.widths.empty())) {
        return t.usage_error(p.n_kinds == 0 ? "say which sizes: --keep N,N,..., --ratios R,R,..., --budgets SIZE,... or --widths K,..."
                                            : "give one of --keep, --ratios and --budgets, once");
    }
    if (!p.sw.second_saliency.empty() && p.sw.methods.empty()) {
        return t.usage_error("a second saliency archive is for --methods (each method ranks with the archive that holds its statistic)");
    }
    if (!t.given("--tasks-limit")) p.sw.choice.limit = reap::default_tasks_limit(p.sw.choice.format);
    if (!reap::cli::parse_llama_runtime(t, "sweep", p.sw.eval.base_path, p.given, p.sw.eval.rt, status)) return status;
    p.sw.eval.progress = !p.quiet && isatty(fileno(stderr));
    p.sw.tool_version = REAP_VERSION;
    if (p.plot.empty() && !p.output.empty()) p.plot = reap::util::beside(p.output, reap::util::stem_of(p.output) + ".svg");
    reap::sweep_request q{p.sw, p.output, p.plot, p.force};
    reap::sweep_result r;
    std::vector<std::string> written;
    if (!reap::run_sweep(q, r, written, err)) return reap::cli::fail("sweep", err);
    // the table before the files' names; the files were published whole
    reap::print_sweep(stdout, q.sw, r);
    for (size_t i = 0; i < written.size(); ++i) printf("%s  wrote %s\n", i ? "" : "\n", written[i].c_str());
    return 0;
}

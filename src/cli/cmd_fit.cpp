// reap fit: from a memory budget to the best verified build. Parses the options
// (src/cli/fit_flags.cpp), runs the fit (src/llama/fit.h: calibrate, the search,
// prune, verify, eval, card) and prints its result.
#include "cli/commands.h"
#include "cli/eval_flags.h"
#include "cli/fit_flags.h"
#include "llama/fit.h"

#include <cstdio>
#include <unistd.h>

int cmd_fit(int argc, char ** argv) {
    reap::cli::fit_params p;
    reap::cli::options t("fit",
                         "usage: reap fit -m SOURCE.gguf [-m SOURCE2.gguf ...] [--reference REF.gguf | --kld-base REF.kld]\n"
                         "                (--corpus CALIB.jsonl | --saliency SALIENCY.gguf) -f HELDOUT --budget SIZE -o DIR [options]");
    reap::cli::declare_fit(t, p);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    if (p.o.corpus.empty() == p.o.saliency.empty()) {
        return t.usage_error(p.o.corpus.empty() ? "give --corpus CALIB.jsonl to calibrate on (or --saliency SALIENCY.gguf)"
                                                : "give --corpus or --saliency, not both");
    }
    if (!t.given("--tasks-limit")) p.o.tasks.limit = reap::default_tasks_limit(p.o.tasks.format);
    if (!reap::cli::parse_llama_runtime(t, "fit", p.o.sources[0], p.given, p.o.rt, status)) return status;
    p.o.progress = !p.quiet && isatty(fileno(stderr));
    p.o.tool_version = REAP_VERSION;
    reap::fit_result r;
    std::string err;
    if (!reap::run_fit(p.o, r, stdout, err)) {
        fflush(stdout);
        const int status = reap::cli::fail("fit", err);
        return r.differs ? reap::cli::exit_differs : status;
    }
    if (!p.o.dry_run) reap::print_fit_result(stdout, p.o, r);
    return 0;
}

// reap prune: write the pruned copy of a MoE GGUF model that a plan describes.
// Parses the options into a reap::prune::prune_request and runs the library's
// stages (prune/run.h: check, imatrix, write), printing between them.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/prune_flags.h"
#include "prune/run.h"
#include "util/json.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int cmd_prune(int argc, char ** argv) {
    reap::cli::prune_params params;
    reap::prune::prune_request & req = params.req;
    reap::cli::options t("prune", "usage: reap prune -m MODEL.gguf --plan PLAN.json -o OUT.gguf [options]");
    reap::cli::declare_prune(t, params);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    if (const char * v = getenv("REAP_NO_COPY_FILE_RANGE"); v && *v && strcmp(v, "0") != 0) req.copy_file_range = false;
    req.version = REAP_VERSION;
    FILE * txt = params.json ? stderr : stdout;
    auto fail = [](const reap::util::error & e) { return reap::cli::fail("prune", e); };
    auto finish = [&](const reap::prune::prune_job & job, const std::vector<std::string> * files, int status) {
        if (!params.json) return status;
        const auto doc = reap::prune::prune_json(job, params.coverage_threshold, files, status);
        printf("%s\n", reap::util::json_text(doc, 1).c_str());
        return status;
    };
    reap::util::error err;
    reap::prune::prune_job job;
    const bool prepared = reap::prune::prepare_prune(req, job, err);   // a warning comes before a later failure
    if (!job.warning.empty()) fprintf(stderr, "reap prune: warning: %s\n", job.warning.c_str());
    if (!prepared) return fail(err);
    reap::prune::print_prune_summary(txt, job);
    if (!reap::prune::prepare_imatrix(job, err)) return fail(err);
    if (job.has_imatrix()) reap::prune::print_coverage(txt, job.islice.coverage, params.coverage_threshold);
    if (!job.below_required.empty()) {
        reap::prune::print_below_required(stderr, job);
        return finish(job, nullptr, reap::cli::exit_differs);
    }
    if (req.dry_run) {
        reap::prune::print_dry_run(txt, job);
        std::vector<std::string> paths;
        for (const auto & sh : job.shards) paths.push_back(sh.path);
        return finish(job, &paths, 0);
    }
    reap::prune::prune_written written;
    if (!reap::prune::write_prune(job, written, err)) return fail(err);
    reap::prune::print_written(txt, job, written);
    return finish(job, &written.files, 0);
}

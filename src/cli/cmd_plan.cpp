// reap plan: turn a saliency archive into a keep-list per MoE layer for a
// model (--keep N, --ratio R or --budget SIZE), print what it keeps and
// write the plan JSON with its receipts. Parses the options into a
// reap::planner::plan_request, calls choose_plan (plan/choose.h: ranking,
// N, sizing, provenance, receipts), prints and writes the plan.
#include "cli/args.h"
#include "cli/plan_flags.h"
#include "cli/commands.h"
#include "plan/choose.h"
#include "util/json.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

namespace pl = reap::planner;

struct plan_params {
    pl::plan_request req;
    bool             json = false;
};

// The command's options, parsed and printed from one table. `n_how` counts
// --keep, --ratio and --budget (exactly one is wanted).
void declare_plan_options(reap::cli::options & t, plan_params & pp, int & n_how) {
    pl::plan_request & p = pp.req;
    t.about(
        "Chooses which routed experts each MoE layer of MODEL keeps, from a saliency\n"
        "archive (reap calibrate, reap imatrix, reap merge) measured on that model, and\n"
        "writes the plan that reap prune executes. Every MoE layer keeps the same count N.\n");
    t.section("how many (exactly one):");
    t.custom("--keep", "N", "keep N experts per layer (n_expert_used <= N <= n_expert)",
             [&p, &n_how](const std::string & v, std::string & err) {
                 ++n_how;
                 return reap::cli::parse_integer("--keep", v, 1, INT64_MAX, p.keep, err);
             });
    t.custom("--ratio", "R",
             "remove the fraction R of the routed experts: N = n_expert - round(R * n_expert) (0 <= R < 1; with "
             "expert groups, N is rounded down to a multiple of the group count)",
             [&p, &n_how](const std::string & v, std::string & err) {
                 ++n_how;
                 char * end = nullptr;
                 p.ratio = strtod(v.c_str(), &end);
                 if (v.empty() || *end || !(p.ratio >= 0.0 && p.ratio < 1.0)) {
                     err = "--ratio: '" + v + "' is not a number in [0, 1) (the fraction of routed experts removed)";
                     return false;
                 }
                 return true;
             });
    t.custom("--budget", "SIZE",
             "the largest allowed N whose pruned file fits SIZE bytes. The size is exact: the bytes reap prune will "
             "write (headers, padding and provenance keys included; the sum of all shards with --split-max-size / "
             "--split-max-tensors). SIZE is a number with an optional unit: K/KB, M/MB, G/GB, T/TB are DECIMAL (10^3 "
             ".. 10^12, as disk vendors and gguf-split count), KiB/MiB/GiB/TiB are BINARY (2^10 .. 2^40); no unit = "
             "bytes; decimals allowed (512G, 277.5GB, 300GiB).",
             [&p, &n_how](const std::string & v, std::string & err) {
                 ++n_how;
                 if (!pl::parse_size(v, p.budget, err)) {
                     err = "--budget: " + err;
                     return false;
                 }
                 p.budget_text = v;
                 return true;
             });

    t.integer("--multiple-of", "K", "only an N that is a multiple of K (with --ratio: rounded down to one; with "
              "--budget: the largest such N that fits)", 1, INT64_MAX, p.counts.multiple_of);
    t.flag("--fused-kernel",
           "only an N that llama.cpp's fused CUDA top-k MoE kernel takes (read from the llama.cpp source built "
           "against: " + pl::fused_counts_text() + "; other counts run the unfused path); rounds as --multiple-of",
           p.counts.fused);

    reap::cli::declare_ranking(t, p.rank, p.method_given);
    reap::cli::declare_width(t, p.width, p.down_type);
    reap::cli::declare_channel_score(t, p.channel_by, p.channel_score_given);

    t.section("other options:");
    t.text("-m, --model", "MODEL.gguf",
           "the model the plan is for (first shard of a split set ok); the archive must come from it (same router weights)",
           p.model);
    t.text("-o, --output", "PLAN.json", "where to write the plan", p.output);
    reap::cli::declare_split_max_size(t, p.split_max_bytes);
    t.integer("--split-max-tensors", "N", "likewise", 1, INT64_MAX, p.split_max_tensors);
    t.flag("--no-stamp", "size as reap prune --no-stamp will write", p.stamp, false);
    t.flag("--dry-run",
           "print the table N -> exact size -> saliency retained and the chosen N; write nothing (-o not needed)",
           p.dry_run);
    t.flag("--force", "replace an existing PLAN.json", p.force);
    t.flag("--json",
           "print the plan as one JSON object (the document written to -o, with the receipts in its provenance; "
           "plus \"output\" and, with --dry-run or --budget, \"size_table\") instead of the report",
           pp.json);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (!p.saliency.empty()) {
            err = "unexpected argument '" + a + "' (one saliency archive; reap merge combines several)";
            return false;
        }
        p.saliency = a;
        return true;
    });
    t.require(p.saliency, "no saliency archive given")
     .require(p.model, "no model given (-m MODEL.gguf)");
}

} // namespace

int cmd_plan(int argc, char ** argv) {
    plan_params params;
    const pl::plan_request & req = params.req;
    int n_how = 0;
    reap::cli::options t("plan",
                         "usage: reap plan SALIENCY.gguf -m MODEL.gguf (--keep N | --ratio R | --budget SIZE) [options] -o PLAN.json");
    declare_plan_options(t, params, n_how);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    if (n_how != 1 && !(n_how == 0 && req.width > 0)) {
        return t.usage_error(n_how == 0 ? "say how many experts to keep: --keep N, --ratio R or --budget SIZE (or --width K)"
                                        : "give only one of --keep, --ratio and --budget");
    }
    if (req.output.empty() && !req.dry_run) return t.usage_error("no output given (-o PLAN.json)");
    params.req.version = REAP_VERSION;
    auto fail = [](const std::string & msg) { return reap::cli::fail("plan", msg); };
    reap::util::error err;
    pl::plan_choice c;
    if (!pl::choose_plan(req, c, err)) return fail(err.message);
    std::string werr;
    if (params.json) {
        const nlohmann::json j = pl::plan_choice_json(req, c);
        if (!req.dry_run && !reap::write_plan(c.p, req.output, req.force, werr)) return fail(werr);
        printf("%s\n", reap::util::json_text(j, 2).c_str());
        return 0;
    }
    pl::print_plan_report(stdout, req, c);
    if (req.dry_run) {
        printf("dry run: no plan written\n");
        return 0;
    }
    if (!reap::write_plan(c.p, req.output, req.force, werr)) return fail(werr);
    printf("  wrote %s (full receipts in its provenance)\n", req.output.c_str());
    return 0;
}

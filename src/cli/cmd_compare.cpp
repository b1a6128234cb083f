// reap compare: how much two plans agree (shared experts and Jaccard overlap
// per layer), and, given a saliency archive, how much of the saliency each
// keeps compared with the best possible keep-list of the same size; and the
// two plans' receipts side by side. Parses the options, calls
// reap::planner::compare_plan_files (plan/compare.h) and prints.
#include "cli/args.h"
#include "cli/commands.h"
#include "plan/compare.h"
#include "util/json.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

namespace pl = reap::planner;

struct compare_params {
    std::vector<std::string> plans;
    std::string              saliency;
    pl::rank_options         rank;
    bool                     method_given = false;
    bool                     json = false;
};

// The command's options, parsed and printed from one table.
void declare_compare_options(reap::cli::options & t, compare_params & p) {
    t.about(
        "Compares two plans for the same model. Per MoE layer: the experts both keep\n"
        "(shared) and the Jaccard overlap |A and B| / |A or B|; then the means over layers.\n"
        "The plans may keep different counts. A report, not a test: plans that differ\n"
        "still exit 0.\n"
        "\n"
        "Width plans (either cuts its experts to K channels): also the channels kept per\n"
        "expert by each, and their channel Jaccard, the mean over the experts both keep (an\n"
        "uncut plan keeps every channel): the same experts cut to other channels differ.\n"
        "\n"
        "With --saliency, also the share of the total saliency each plan keeps per layer\n"
        "(the method's score summed over the kept experts / over all experts; mean over\n"
        "layers) and its ratio to the oracle: the best share any keep-list of the same\n"
        "size could have (the top-N experts by that score, no group constraint).\n"
        "\n"
        "Receipts side by side: the safety margin (the best rank, 1 = most salient, that\n"
        "any pruned expert holds in any domain; the minimum and the median over layers),\n"
        "saliency retained, dead experts and super experts kept. With --saliency they are\n"
        "computed for both plans from the archive (its --domains and --method); without,\n"
        "they are read from each plan's provenance (plans written before reap recorded\n"
        "them show '-'). More than 12 layers are summarised on the terminal (min, median,\n"
        "max, the least overlapping layers); --json has every layer.\n");
    t.section("options:");
    t.text("--saliency", "S.gguf", "saliency archive of the plans' model", p.saliency);
    t.custom("--domains", "a,b", "domains of the archive to score over (summed; default all)",
             [&p](const std::string & v, std::string & err) {
                 p.rank.domains = reap::cli::split_list(v);
                 if (p.rank.domains.empty()) {
                     err = "--domains: empty list";
                     return false;
                 }
                 return true;
             });
    t.custom("--method", "M", "score: " + pl::method_names_text(false) + " (default: reap for calibrate archives, energy for imatrix archives, aimer for weights archives)",
             [&p](const std::string & v, std::string & err) {
                 if (!pl::parse_method(v, p.rank.how) || p.rank.how == pl::method::random) {
                     err = "--method: '" + v + "' is not one of " + pl::method_names_text(false);
                     return false;
                 }
                 p.method_given = true;
                 return true;
             });
    t.flag("--json", "print one JSON object instead of the table", p.json);
    t.for_mode({"--domains", "--method"}, "the saliency comparison", "--saliency SALIENCY.gguf", [&p] { return !p.saliency.empty(); });
    t.help_row();
    t.positional([&p](const std::string & a, std::string &) {
        p.plans.push_back(a);
        return true;
    });
}

} // namespace

int cmd_compare(int argc, char ** argv) {
    compare_params p;
    reap::cli::options t("compare",
                         "usage: reap compare PLAN_A.json PLAN_B.json [--saliency SALIENCY.gguf [--domains a,b] [--method M]] [--json]");
    declare_compare_options(t, p);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    if (p.plans.size() != 2) return t.usage_error("give exactly two plans (got " + std::to_string(p.plans.size()) + ")");
    pl::compare_request req;
    req.plan_a = p.plans[0];
    req.plan_b = p.plans[1];
    req.saliency = p.saliency;
    req.rank = p.rank;
    req.method_given = p.method_given;
    reap::util::error err;
    pl::plan_comparison c;
    if (!pl::compare_plan_files(req, c, err)) return reap::cli::fail("compare", err);
    if (p.json) printf("%s\n", reap::util::json_text(pl::comparison_json(req, c), 2).c_str());
    else pl::print_comparison(stdout, req, c);
    return 0;
}

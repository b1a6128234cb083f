// reap compare: how much two plans agree (shared experts and Jaccard overlap
// per layer), and, given a saliency archive, how much of the saliency each
// keeps compared with the best possible keep-list of the same size. A thin
// layer over reap::planner::compare_plans / rank_experts / plan_share.
#include "cli/args.h"
#include "cli/commands.h"
#include "plan/plan.h"
#include "plan/planners.h"
#include "saliency/archive.h"
#include "util/json.h"

#include <nlohmann/json.hpp>

#include <cinttypes>
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
    bool                     domains_given = false;
    bool                     json = false;
};

// The command's options, parsed and printed from one table.
void declare(reap::cli::options & t, compare_params & p) {
    t.about(
        "Compares two plans for the same model. Per MoE layer: the experts both keep\n"
        "(shared) and the Jaccard overlap |A and B| / |A or B|; then the means over layers.\n"
        "The plans may keep different counts. A report, not a test: plans that differ\n"
        "still exit 0.\n"
        "\n"
        "With --saliency, also the share of the total saliency each plan keeps per layer\n"
        "(the method's score summed over the kept experts / over all experts; mean over\n"
        "layers) and its ratio to the oracle: the best share any keep-list of the same\n"
        "size could have (the top-N experts by that score, no group constraint).\n");
    t.section("options:");
    t.text("--saliency", "S.gguf", "saliency archive of the plans' model", p.saliency);
    t.custom("--domains", "a,b", "domains of the archive to score over (summed; default all)",
             [&p](const std::string & v, std::string & err) {
                 p.rank.domains = reap::cli::split_list(v);
                 if (p.rank.domains.empty()) {
                     err = "--domains: empty list";
                     return false;
                 }
                 p.domains_given = true;
                 return true;
             });
    t.custom("--method", "M", "score: reap (default for calibrate archives), frequency, gate, ean, energy (default for imatrix archives)",
             [&p](const std::string & v, std::string & err) {
                 if (!pl::parse_method(v, p.rank.how) || p.rank.how == pl::method::random) {
                     err = "--method: '" + v + "' is not one of reap, frequency, gate, ean, energy";
                     return false;
                 }
                 p.method_given = true;
                 return true;
             });
    t.flag("--json", "print one JSON object instead of the table", p.json);
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
    declare(t, p);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    if (p.plans.size() != 2) return t.usage_error("give exactly two plans (got " + std::to_string(p.plans.size()) + ")");
    if (p.saliency.empty() && (p.domains_given || p.method_given)) return t.usage_error("--domains and --method need --saliency");
    auto fail = [](const std::string & msg) { return reap::cli::fail("compare", msg); };
    const std::vector<std::string> & plans = p.plans;
    const std::string & saliency_path = p.saliency;
    pl::rank_options & ro = p.rank;
    const bool method_given = p.method_given, json = p.json;

    std::string err;
    reap::plan a, b;
    if (!reap::read_plan(plans[0], a, err) || !reap::read_plan(plans[1], b, err)) return fail(err);
    pl::plan_overlap ov;
    if (!pl::compare_plans(a, b, ov, err)) return fail(plans[0] + " vs " + plans[1] + ": " + err);

    bool have_sal = false;
    pl::ranking rk;
    pl::share_report sa, sb, oa, ob;
    if (!saliency_path.empty()) {
        reap::saliency::archive arch;
        if (!reap::saliency::read_archive(saliency_path, arch, err)) return fail(err);
        if (!pl::plan_matches_archive(a, arch, err)) return fail(plans[0] + ": " + err);
        if (!method_given) ro.how = pl::default_method(arch.metrics);
        ro.protect_super = false;
        if (!pl::rank_experts(arch, 1, ro, rk, err)) return fail(err);
        sa = pl::plan_share(rk, a);
        sb = pl::plan_share(rk, b);
        oa = pl::oracle_share(rk, a.n_keep);
        ob = pl::oracle_share(rk, b.n_keep);
        have_sal = true;
    }
    auto ratio = [](double x, double o) { return o > 0 ? x / o : 1.0; };

    if (json) {
        nlohmann::json j;
        j["a"] = {{"plan", plans[0]}, {"n_keep", a.n_keep}};
        j["b"] = {{"plan", plans[1]}, {"n_keep", b.n_keep}};
        nlohmann::json layers = nlohmann::json::array();
        for (size_t i = 0; i < ov.layers.size(); ++i) {
            const auto & l = ov.layers[i];
            nlohmann::json e = {{"layer", l.layer}, {"shared", l.shared}, {"union", l.union_size}, {"jaccard", l.jaccard}};
            if (have_sal) {
                e["share_a"] = sa.share[i];
                e["share_b"] = sb.share[i];
                e["oracle_a"] = oa.share[i];
                e["oracle_b"] = ob.share[i];
            }
            layers.push_back(e);
        }
        j["layers"] = layers;
        j["mean_shared"] = ov.mean_shared;
        j["mean_jaccard"] = ov.mean_jaccard;
        if (have_sal) {
            j["saliency"] = {{"file", saliency_path}, {"method", pl::method_name(ro.how)}, {"domains", rk.domains},
                             {"share_a", sa.mean}, {"share_b", sb.mean}, {"oracle_a", oa.mean}, {"oracle_b", ob.mean},
                             {"ratio_a", ratio(sa.mean, oa.mean)}, {"ratio_b", ratio(sb.mean, ob.mean)}};
        }
        printf("%s\n", reap::util::json_text(j, 2).c_str());
        return 0;
    }

    printf("A: %s (keep %" PRId64 ")\nB: %s (keep %" PRId64 ")\n", plans[0].c_str(), a.n_keep, plans[1].c_str(), b.n_keep);
    if (have_sal) {
        std::string doms;
        for (size_t i = 0; i < rk.domains.size(); ++i) doms += (i ? "," : "") + rk.domains[i];
        printf("saliency: %s, method %s, domains %s\n", saliency_path.c_str(), pl::method_name(ro.how), doms.c_str());
        printf("%6s %7s %8s  %8s %8s %8s %8s\n", "layer", "shared", "jaccard", "share A", "oracle A", "share B", "oracle B");
    } else {
        printf("%6s %7s %8s\n", "layer", "shared", "jaccard");
    }
    for (size_t i = 0; i < ov.layers.size(); ++i) {
        const auto & l = ov.layers[i];
        printf("%6d %7" PRId64 " %8.3f", l.layer, l.shared, l.jaccard);
        if (have_sal) {
            printf("  %7.2f%% %7.2f%% %7.2f%% %7.2f%%", 100 * sa.share[i], 100 * oa.share[i], 100 * sb.share[i], 100 * ob.share[i]);
        }
        printf("\n");
    }
    printf("mean: %.2f shared, Jaccard %.3f\n", ov.mean_shared, ov.mean_jaccard);
    if (have_sal) {
        printf("saliency kept: A %.2f%% (%.3f of the top-%" PRId64 " oracle's %.2f%%), B %.2f%% (%.3f of the top-%" PRId64 " oracle's %.2f%%)\n",
               100 * sa.mean, ratio(sa.mean, oa.mean), a.n_keep, 100 * oa.mean, 100 * sb.mean, ratio(sb.mean, ob.mean), b.n_keep,
               100 * ob.mean);
    }
    return 0;
}

// reap compare: how much two plans agree (shared experts and Jaccard overlap
// per layer), and, given a saliency archive, how much of the saliency each
// keeps compared with the best possible keep-list of the same size; and the
// two plans' receipts side by side (safety margin, saliency retained per
// domain, dead and super experts kept: recomputed from the archive when one is
// given, else as each plan recorded them). A thin layer over
// reap::planner::compare_plans / rank_experts / plan_share / plan_receipts.
#include "cli/args.h"
#include "cli/commands.h"
#include "plan/plan.h"
#include "plan/planners.h"
#include "plan/receipts.h"
#include "saliency/archive.h"
#include "util/strings.h"
#include "util/summary.h"
#include "util/json.h"

#include <nlohmann/json.hpp>

#include <cinttypes>
#include <algorithm>
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


// One plan's receipts, summarised for the side-by-side table and --json.
struct receipt_column {
    bool        have_margin = false, margin_null = false;
    int64_t     margin = 0;
    double      margin_median = 0;
    bool        have_share = false;
    double      share = 0, share_min = 0;
    bool        have_dead = false, have_super = false;
    int64_t     dead = 0, dead_kept = 0, super = 0, super_kept = 0;
    std::vector<std::pair<int64_t, double>> per_domain;   // margin (0: none) and mean share, per archive domain
};

receipt_column column_of(const pl::receipts & rc) {
    receipt_column c;
    const pl::margin_summary m = pl::summarize_margin(rc);
    c.have_margin = true;
    c.margin_null = m.n_layers == 0;
    c.margin = m.min;
    c.margin_median = m.median;
    const reap::util::summary sh = pl::summarize_share(rc);
    c.have_share = true;
    c.share = sh.mean;
    c.share_min = sh.min;
    c.have_dead = c.have_super = true;
    c.dead = (int64_t) rc.dead.size();
    for (bool k : rc.dead_kept) c.dead_kept += k ? 1 : 0;
    c.super = (int64_t) rc.super.size();
    for (bool k : rc.super_kept) c.super_kept += k ? 1 : 0;
    for (size_t d = 0; d < rc.domains.size(); ++d) {
        c.per_domain.push_back({pl::summarize_margin(rc, (int) d).min, pl::summarize_share(rc, (int) d).mean});
    }
    return c;
}

receipt_column column_of(const pl::recorded_receipts & r) {
    receipt_column c;
    c.have_margin = r.has_margin;
    c.margin_null = r.margin_null;
    c.margin = r.margin;
    c.margin_median = r.margin_median;
    c.have_share = r.has_share;
    c.share = r.share_mean;
    c.have_dead = r.has_dead;
    c.dead = r.dead;
    c.dead_kept = r.dead_kept;
    c.have_super = r.has_super;
    c.super = r.super;
    c.super_kept = r.super_kept;
    return c;
}

nlohmann::json column_json(const receipt_column & c, const std::vector<std::string> & domains) {
    nlohmann::json j = nlohmann::json::object();
    const nlohmann::json null(nullptr);
    j["safety_margin"] = c.have_margin && !c.margin_null ? nlohmann::json(c.margin) : null;
    j["safety_margin_median"] = c.have_margin && !c.margin_null ? nlohmann::json(c.margin_median) : null;
    j["saliency_retained"] = c.have_share ? nlohmann::json(c.share) : null;
    j["dead_experts"] = c.have_dead ? nlohmann::json(c.dead) : null;
    j["dead_experts_kept"] = c.have_dead ? nlohmann::json(c.dead_kept) : null;
    j["super_experts"] = c.have_super ? nlohmann::json(c.super) : null;
    j["super_experts_kept"] = c.have_super ? nlohmann::json(c.super_kept) : null;
    if (!c.per_domain.empty()) {
        nlohmann::json pd = nlohmann::json::array();
        for (size_t d = 0; d < c.per_domain.size(); ++d) {
            pd.push_back({{"domain", domains[d]}, {"safety_margin", c.per_domain[d].first > 0 ? nlohmann::json(c.per_domain[d].first) : null},
                          {"saliency_retained", c.per_domain[d].second}});
        }
        j["per_domain"] = pd;
    }
    return j;
}

std::string cell_margin(const receipt_column & c) {
    if (!c.have_margin) return "-";
    if (c.margin_null) return "none";
    char buf[64];
    snprintf(buf, sizeof(buf), "%" PRId64 " (median %g)", c.margin, c.margin_median);
    return buf;
}

std::string cell_pct(bool have, double x) {
    if (!have) return "-";
    char buf[32];
    snprintf(buf, sizeof(buf), "%.2f%%", 100.0 * x);
    return buf;
}

std::string cell_of(bool have, int64_t kept, int64_t n) {
    return have ? std::to_string(kept) + " of " + std::to_string(n) : "-";
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
    // receipts: from the archive when given (the same scoring for both), else as recorded
    receipt_column ca, cb;
    if (have_sal) {
        pl::receipts ra, rb;
        if (!pl::plan_receipts(rk, a, ra, err)) return fail(plans[0] + ": " + err);
        if (!pl::plan_receipts(rk, b, rb, err)) return fail(plans[1] + ": " + err);
        ca = column_of(ra);
        cb = column_of(rb);
    } else {
        ca = column_of(pl::recorded_of(a));
        cb = column_of(pl::recorded_of(b));
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
        j["receipts"] = {{"source", have_sal ? "saliency" : "plans"}, {"a", column_json(ca, rk.archive_domains)},
                         {"b", column_json(cb, rk.archive_domains)}};
        printf("%s\n", reap::util::json_text(j, 2).c_str());
        return 0;
    }

    printf("A: %s (keep %" PRId64 ")\nB: %s (keep %" PRId64 ")\n", plans[0].c_str(), a.n_keep, plans[1].c_str(), b.n_keep);
    std::string doms;
    for (size_t i = 0; i < rk.domains.size(); ++i) doms += (i ? "," : "") + rk.domains[i];
    if (have_sal) printf("saliency: %s, method %s, domains %s\n", saliency_path.c_str(), pl::method_name(ro.how), doms.c_str());
    if (ov.layers.size() <= reap::util::k_list_full) {
        if (have_sal) printf("%6s %7s %8s  %8s %8s %8s %8s\n", "layer", "shared", "jaccard", "share A", "oracle A", "share B", "oracle B");
        else printf("%6s %7s %8s\n", "layer", "shared", "jaccard");
        for (size_t i = 0; i < ov.layers.size(); ++i) {
            const auto & l = ov.layers[i];
            printf("%6d %7" PRId64 " %8.3f", l.layer, l.shared, l.jaccard);
            if (have_sal) {
                printf("  %7.2f%% %7.2f%% %7.2f%% %7.2f%%", 100 * sa.share[i], 100 * oa.share[i], 100 * sb.share[i], 100 * ob.share[i]);
            }
            printf("\n");
        }
    } else {
        // summarised: the spread over layers and the layers that agree least (--json has all)
        std::vector<double> shared, jac;
        std::vector<size_t> idx;
        for (size_t i = 0; i < ov.layers.size(); ++i) {
            shared.push_back((double) ov.layers[i].shared);
            jac.push_back(ov.layers[i].jaccard);
            idx.push_back(i);
        }
        std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return jac[x] < jac[y]; });
        std::vector<std::string> least;
        for (size_t i : idx) {
            char buf[48];
            snprintf(buf, sizeof(buf), "L%d %.3f", ov.layers[i].layer, jac[i]);
            least.push_back(buf);
        }
        least.resize(std::min(least.size(), reap::util::k_list_first));
        printf("%zu MoE layers (per layer: --json)\n", ov.layers.size());
        printf("  shared: %s; Jaccard: %s\n", reap::util::min_median_max(reap::util::summarize(shared)).c_str(),
               reap::util::min_median_max(reap::util::summarize(jac), "%.3f").c_str());
        printf("  least overlap: %s\n", reap::util::join(least).c_str());
        if (have_sal) {
            auto pct = [](const pl::share_report & r) {
                reap::util::summary x = reap::util::summarize(r.share);
                x.min *= 100, x.median *= 100, x.max *= 100;
                return reap::util::min_median_max(x, "%.2f%%");
            };
            printf("  share A: %s\n  share B: %s\n", pct(sa).c_str(), pct(sb).c_str());
        }
    }
    printf("mean: %.2f shared, Jaccard %.3f\n", ov.mean_shared, ov.mean_jaccard);
    if (have_sal) {
        printf("saliency kept: A %.2f%% (%.3f of the top-%" PRId64 " oracle's %.2f%%), B %.2f%% (%.3f of the top-%" PRId64 " oracle's %.2f%%)\n",
               100 * sa.mean, ratio(sa.mean, oa.mean), a.n_keep, 100 * oa.mean, 100 * sb.mean, ratio(sb.mean, ob.mean), b.n_keep,
               100 * ob.mean);
    }

    // receipts side by side
    printf("receipts (%s; rank 1 = most salient):\n",
           have_sal ? ("from the archive, " + std::string(pl::method_name(ro.how)) + " score within each domain").c_str()
                    : "as recorded in each plan; '-': not recorded");
    printf("  %-44s %-24s %s\n", "", "A", "B");
    printf("  %-44s %-24s %s\n", "safety margin (best rank of a pruned expert)", cell_margin(ca).c_str(), cell_margin(cb).c_str());
    if (have_sal) {
        std::vector<std::string> rows;
        for (size_t d = 0; d < rk.archive_domains.size() && d < reap::util::k_list_full; ++d) {
            auto m = [&](const receipt_column & c) {
                const auto & x = c.per_domain[d];
                return (x.first > 0 ? std::to_string(x.first) : std::string("-")) + ", kept " + cell_pct(true, x.second);
            };
            printf("    %-42s %-24s %s\n", (rk.archive_domains[d] + (rk.in_plan[d] ? "" : " [not scored on]")).c_str(),
                   m(ca).c_str(), m(cb).c_str());
        }
        if (rk.archive_domains.size() > reap::util::k_list_full) {
            printf("    ... (+%zu more domains: --json)\n", rk.archive_domains.size() - reap::util::k_list_full);
        }
    }
    printf("  %-44s %-24s %s\n", "saliency retained (mean over layers)", cell_pct(ca.have_share, ca.share).c_str(),
           cell_pct(cb.have_share, cb.share).c_str());
    printf("  %-44s %-24s %s\n", "dead experts kept", cell_of(ca.have_dead, ca.dead_kept, ca.dead).c_str(),
           cell_of(cb.have_dead, cb.dead_kept, cb.dead).c_str());
    printf("  %-44s %-24s %s\n", "super experts kept", cell_of(ca.have_super, ca.super_kept, ca.super).c_str(),
           cell_of(cb.have_super, cb.super_kept, cb.super).c_str());
    return 0;
}

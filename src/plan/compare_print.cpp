// What reap compare prints (compare.h): the --json object, and the table of
// overlap, saliency kept and receipts side by side.
#include "plan/compare.h"

#include "util/strings.h"
#include "util/summary.h"

#include <algorithm>
#include <cinttypes>

namespace reap::planner {

namespace {

nlohmann::json column_json(const receipt_column & c, const std::vector<std::string> & domains) {
    nlohmann::json j = nlohmann::json::object();
    const nlohmann::json null(nullptr);
    j["safety_margin"] = c.has_margin && !c.margin_null ? nlohmann::json(c.margin) : null;
    j["safety_margin_median"] = c.has_margin && !c.margin_null ? nlohmann::json(c.margin_median) : null;
    j["saliency_retained"] = c.has_share ? nlohmann::json(c.share_mean) : null;
    j["dead_experts"] = c.has_dead ? nlohmann::json(c.dead) : null;
    j["dead_experts_kept"] = c.has_dead ? nlohmann::json(c.dead_kept) : null;
    j["super_experts"] = c.has_super ? nlohmann::json(c.super) : null;
    j["super_experts_kept"] = c.has_super ? nlohmann::json(c.super_kept) : null;
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
    if (!c.has_margin) return "-";
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

// Whether either plan cuts the experts' channels (the saliency shares do not see that).
bool width_cut(const plan_comparison & c) {
    return c.width.compared && (c.width.keep_a < c.width.n_ff || c.width.keep_b < c.width.n_ff);
}

// The overlap per layer (up to util::k_list_full layers, else the spread and
// the layers that agree least), the means and the saliency kept.
void print_overlap(FILE * out, const compare_request & req, const plan_comparison & c) {
    const plan_overlap & ov = c.overlap;
    const bool have_sal = c.have_saliency;
    const share_report & sa = c.share_a, & sb = c.share_b, & oa = c.oracle_a, & ob = c.oracle_b;
    fprintf(out, "A: %s (keep %" PRId64 ")\nB: %s (keep %" PRId64 ")\n", req.plan_a.c_str(), c.a.n_keep, req.plan_b.c_str(), c.b.n_keep);
    std::string doms;
    for (size_t i = 0; i < c.rank.domains.size(); ++i) doms += (i ? "," : "") + c.rank.domains[i];
    if (have_sal) fprintf(out, "saliency: %s, method %s, domains %s\n", req.saliency.c_str(), method_name(c.rank.opts.how), doms.c_str());
    if (ov.layers.size() <= util::k_list_full) {
        if (have_sal) fprintf(out, "%6s %7s %8s  %8s %8s %8s %8s\n", "layer", "shared", "jaccard", "share A", "oracle A", "share B", "oracle B");
        else fprintf(out, "%6s %7s %8s\n", "layer", "shared", "jaccard");
        for (size_t i = 0; i < ov.layers.size(); ++i) {
            const auto & l = ov.layers[i];
            fprintf(out, "%6d %7" PRId64 " %8.3f", l.layer, l.shared, l.jaccard);
            if (have_sal) {
                fprintf(out, "  %7.2f%% %7.2f%% %7.2f%% %7.2f%%", 100 * sa.share[i], 100 * oa.share[i], 100 * sb.share[i], 100 * ob.share[i]);
            }
            fprintf(out, "\n");
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
        least.resize(std::min(least.size(), util::k_list_first));
        fprintf(out, "%zu MoE layers (per layer: --json)\n", ov.layers.size());
        fprintf(out, "  shared: %s; Jaccard: %s\n", util::min_median_max(util::summarize(shared)).c_str(),
                util::min_median_max(util::summarize(jac), "%.3f").c_str());
        fprintf(out, "  least overlap: %s\n", util::join(least).c_str());
        if (have_sal) {
            auto pct = [](const share_report & r) {
                util::summary x = util::summarize(r.share);
                x.min *= 100, x.median *= 100, x.max *= 100;
                return util::min_median_max(x, "%.2f%%");
            };
            fprintf(out, "  share A: %s\n  share B: %s\n", pct(sa).c_str(), pct(sb).c_str());
        }
    }
    fprintf(out, "mean: %.2f shared, Jaccard %.3f\n", ov.mean_shared, ov.mean_jaccard);
    if (c.width.compared) {
        fprintf(out, "width: A keeps %" PRId64 " of %" PRId64 " channels per expert, B %" PRId64 "; channel Jaccard %.3f (mean over the %zu "
                "experts both keep)\n", c.width.keep_a, c.width.n_ff, c.width.keep_b, c.width.mean_jaccard, c.width.experts);
    }
    if (have_sal) {
        fprintf(out, "saliency kept: A %.2f%% (%.3f of the top-%" PRId64 " oracle's %.2f%%), B %.2f%% (%.3f of the top-%" PRId64 " oracle's %.2f%%)\n",
                100 * sa.mean, oracle_ratio(sa.mean, oa.mean), c.a.n_keep, 100 * oa.mean, 100 * sb.mean, oracle_ratio(sb.mean, ob.mean),
                c.b.n_keep, 100 * ob.mean);
        if (width_cut(c)) {
            fprintf(out, "  (of the experts' saliency only: the archive scores whole experts, so the channels a width cut removes "
                    "are not counted; %s)\n", c.width.keep_a < c.width.n_ff && c.width.keep_b < c.width.n_ff ? "both plans cut channels"
                                                : c.width.keep_a < c.width.n_ff ? "A cuts channels, B does not" : "B cuts channels, A does not");
        }
    }
}

// The receipts of both plans side by side.
void print_receipt_columns(FILE * out, const plan_comparison & c) {
    const receipt_column & ca = c.receipts_a, & cb = c.receipts_b;
    const ranking & rk = c.rank;
    const bool have_sal = c.have_saliency;
    fprintf(out, "receipts (%s; rank 1 = most salient):\n",
            have_sal ? ("from the archive, " + std::string(method_name(rk.opts.how)) + " score within each domain").c_str()
                     : "as recorded in each plan; '-': not recorded");
    fprintf(out, "  %-44s %-24s %s\n", "", "A", "B");
    fprintf(out, "  %-44s %-24s %s\n", "safety margin (best rank of a pruned expert)", cell_margin(ca).c_str(), cell_margin(cb).c_str());
    if (have_sal) {
        for (size_t d = 0; d < rk.archive_domains.size() && d < util::k_list_full; ++d) {
            auto m = [&](const receipt_column & col) {
                const auto & x = col.per_domain[d];
                return (x.first > 0 ? std::to_string(x.first) : std::string("-")) + ", kept " + cell_pct(true, x.second);
            };
            fprintf(out, "    %-42s %-24s %s\n", (rk.archive_domains[d] + (rk.in_plan[d] ? "" : " [not scored on]")).c_str(),
                    m(ca).c_str(), m(cb).c_str());
        }
        if (rk.archive_domains.size() > util::k_list_full) {
            fprintf(out, "    ... (+%zu more domains: --json)\n", rk.archive_domains.size() - util::k_list_full);
        }
    }
    fprintf(out, "  %-44s %-24s %s\n", "saliency retained (mean over layers)", cell_pct(ca.has_share, ca.share_mean).c_str(),
            cell_pct(cb.has_share, cb.share_mean).c_str());
    fprintf(out, "  %-44s %-24s %s\n", "dead experts kept", cell_of(ca.has_dead, ca.dead_kept, ca.dead).c_str(),
            cell_of(cb.has_dead, cb.dead_kept, cb.dead).c_str());
    fprintf(out, "  %-44s %-24s %s\n", "super experts kept", cell_of(ca.has_super, ca.super_kept, ca.super).c_str(),
            cell_of(cb.has_super, cb.super_kept, cb.super).c_str());
}

} // namespace

nlohmann::json comparison_json(const compare_request & req, const plan_comparison & c) {
    const bool have_sal = c.have_saliency;
    nlohmann::json j;
    j["a"] = {{"plan", req.plan_a}, {"n_keep", c.a.n_keep}};
    j["b"] = {{"plan", req.plan_b}, {"n_keep", c.b.n_keep}};
    nlohmann::json layers = nlohmann::json::array();
    for (size_t i = 0; i < c.overlap.layers.size(); ++i) {
        const auto & l = c.overlap.layers[i];
        nlohmann::json e = {{"layer", l.layer}, {"shared", l.shared}, {"union", l.union_size}, {"jaccard", l.jaccard}};
        if (have_sal) {
            e["share_a"] = c.share_a.share[i];
            e["share_b"] = c.share_b.share[i];
            e["oracle_a"] = c.oracle_a.share[i];
            e["oracle_b"] = c.oracle_b.share[i];
        }
        layers.push_back(e);
    }
    j["layers"] = layers;
    j["mean_shared"] = c.overlap.mean_shared;
    j["mean_jaccard"] = c.overlap.mean_jaccard;
    if (c.width.compared) {
        j["width"] = {{"n_ff", c.width.n_ff}, {"keep_a", c.width.keep_a}, {"keep_b", c.width.keep_b}, {"experts", c.width.experts},
                      {"mean_channel_jaccard", c.width.mean_jaccard}};
    }
    if (have_sal) {
        j["saliency"] = {{"file", req.saliency}, {"method", method_name(c.rank.opts.how)}, {"domains", c.rank.domains},
                         {"share_a", c.share_a.mean}, {"share_b", c.share_b.mean}, {"oracle_a", c.oracle_a.mean},
                         {"oracle_b", c.oracle_b.mean}, {"ratio_a", oracle_ratio(c.share_a.mean, c.oracle_a.mean)},
                         {"ratio_b", oracle_ratio(c.share_b.mean, c.oracle_b.mean)},
                         {"channels_counted", false}};   // the shares weigh whole experts (a width cut's channels are not in them)
    }
    j["receipts"] = {{"source", have_sal ? "saliency" : "plans"}, {"a", column_json(c.receipts_a, c.rank.archive_domains)},
                     {"b", column_json(c.receipts_b, c.rank.archive_domains)}};
    return j;
}

void print_comparison(FILE * out, const compare_request & req, const plan_comparison & c) {
    print_overlap(out, req, c);
    print_receipt_columns(out, c);
}

} // namespace reap::planner

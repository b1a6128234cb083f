// reap plan receipts (see receipts.h): safety margin, saliency retained per
// domain, dead experts and super experts kept, from a ranking and a plan.
#include "plan/receipts.h"

#include <algorithm>
#include <set>

namespace reap::planner {

std::string expert_name(int layer, int64_t expert) {
    return "blk." + std::to_string(layer) + " e" + std::to_string(expert);
}

bool plan_receipts(const ranking & r, const plan & p, receipts & out, std::string & err) {
    receipts rc;
    rc.method = method_name(r.share_method);
    rc.n_expert = r.n_expert;
    rc.domains = r.archive_domains;
    rc.in_plan = r.in_plan;
    const size_t D = rc.domains.size();
    if (p.layers.size() != r.layers.size()) {
        err = "the plan lists " + std::to_string(p.layers.size()) + " MoE layers, the saliency archive " + std::to_string(r.layers.size());
        return false;
    }
    std::set<std::pair<int, int64_t>> kept;
    for (size_t li = 0; li < p.layers.size(); ++li) {
        const plan_layer & pl = p.layers[li];
        const layer_ranking & lr = r.layers[li];
        if (pl.layer != lr.layer) {
            err = "the plan's MoE layer " + std::to_string(pl.layer) + " is layer " + std::to_string(lr.layer) + " in the saliency archive";
            return false;
        }
        std::vector<bool> keep(r.n_expert, false);
        for (int64_t e : pl.keep) {
            if (e < 0 || e >= r.n_expert) {
                err = "layer " + std::to_string(pl.layer) + ": expert " + std::to_string(e) + " out of range [0, " + std::to_string(r.n_expert) + ")";
                return false;
            }
            keep[e] = true;
            kept.insert({pl.layer, e});
        }
        layer_receipt lt;
        lt.layer = pl.layer;
        lt.margin_by_domain.assign(D, 0);
        for (int64_t e = 0; e < r.n_expert; ++e) {
            if (keep[e]) continue;
            ++lt.n_pruned;
            for (size_t d = 0; d < D; ++d) {
                if (lr.domain_rank[d].empty()) continue;   // the domain routed nothing here
                const int64_t rank = lr.domain_rank[d][e];
                if (lt.margin_by_domain[d] == 0 || rank < lt.margin_by_domain[d]) lt.margin_by_domain[d] = rank;
                // ties between domains go to the first; between experts, to the lower id (scan order)
                if (rc.in_plan[d] && (lt.margin == 0 || rank < lt.margin)) {
                    lt.margin = rank;
                    lt.margin_expert = e;
                    lt.margin_domain = (int) d;
                }
            }
        }
        lt.share = saliency_share(lr.score, pl.keep);
        for (size_t d = 0; d < D; ++d) lt.share_by_domain.push_back(saliency_share(lr.domain_score[d], pl.keep));
        rc.layers.push_back(std::move(lt));
    }
    for (const expert_ref & x : r.dead) {
        rc.dead.push_back(x);
        rc.dead_kept.push_back(kept.count({x.layer, x.expert}) > 0);
    }
    for (const expert_ref & x : r.super_candidates) {
        rc.super.push_back(x);
        rc.super_kept.push_back(kept.count({x.layer, x.expert}) > 0);
    }
    out = std::move(rc);
    return true;
}

margin_summary summarize_margin(const receipts & rc, int domain) {
    margin_summary m;
    std::vector<double> v;
    for (const layer_receipt & l : rc.layers) {
        const int64_t x = domain < 0 ? l.margin : l.margin_by_domain[(size_t) domain];
        if (x == 0) continue;
        v.push_back(double(x));
        if (m.layer < 0 || x < m.min) {
            m.min = x;
            m.layer = l.layer;
            m.expert = domain < 0 ? l.margin_expert : -1;
            m.domain = domain < 0 ? rc.domains[(size_t) l.margin_domain] : rc.domains[(size_t) domain];
        }
    }
    const util::summary s = util::summarize(v);
    m.n_layers = s.count;
    m.median = s.median;
    return m;
}

util::summary summarize_share(const receipts & rc, int domain) {
    std::vector<double> v;
    for (const layer_receipt & l : rc.layers) v.push_back(domain < 0 ? l.share : l.share_by_domain[(size_t) domain]);
    return util::summarize(v);
}

namespace {

nlohmann::json rank_or_null(int64_t x) { return x > 0 ? nlohmann::json(x) : nlohmann::json(nullptr); }

nlohmann::json share_stats(const util::summary & s) {
    return {{"mean", s.mean}, {"min", s.min}, {"median", s.median}, {"max", s.max}};
}

}  // namespace

nlohmann::json receipts_json(const receipts & rc) {
    nlohmann::json out = nlohmann::json::object();
    std::vector<std::string> plan_domains;
    for (size_t d = 0; d < rc.domains.size(); ++d) {
        if (rc.in_plan[d]) plan_domains.push_back(rc.domains[d]);
    }

    // safety margin
    const margin_summary ms = summarize_margin(rc);
    nlohmann::json sm = {{"method", rc.method}, {"domains", plan_domains}, {"n_expert", rc.n_expert},
                         {"min", rank_or_null(ms.min)}, {"median", ms.n_layers ? nlohmann::json(ms.median) : nlohmann::json(nullptr)}};
    if (ms.min > 0) sm["worst"] = {{"layer", ms.layer}, {"expert", ms.expert}, {"domain", ms.domain}, {"rank", ms.min}};
    nlohmann::json per = nlohmann::json::array();
    for (const layer_receipt & l : rc.layers) {
        nlohmann::json e = {{"layer", l.layer}, {"rank", rank_or_null(l.margin)}};
        if (l.margin > 0) {
            e["expert"] = l.margin_expert;
            e["domain"] = rc.domains[(size_t) l.margin_domain];
        }
        per.push_back(e);
    }
    sm["per_layer"] = per;
    nlohmann::json pd = nlohmann::json::array();
    for (size_t d = 0; d < rc.domains.size(); ++d) {
        const margin_summary m = summarize_margin(rc, (int) d);
        nlohmann::json ranks = nlohmann::json::array();
        for (const layer_receipt & l : rc.layers) ranks.push_back(rank_or_null(l.margin_by_domain[d]));
        pd.push_back({{"domain", rc.domains[d]}, {"in_plan", (bool) rc.in_plan[d]}, {"min", rank_or_null(m.min)},
                      {"median", m.n_layers ? nlohmann::json(m.median) : nlohmann::json(nullptr)}, {"per_layer", ranks}});
    }
    sm["per_domain"] = pd;
    out["safety_margin"] = sm;

    // saliency retained (mean and per_layer as plans have always recorded them)
    nlohmann::json sr = share_stats(summarize_share(rc));
    sr["method"] = rc.method;
    nlohmann::json pls = nlohmann::json::array();
    for (const layer_receipt & l : rc.layers) pls.push_back({{"layer", l.layer}, {"share", l.share}});
    sr["per_layer"] = pls;
    nlohmann::json sd = nlohmann::json::array();
    for (size_t d = 0; d < rc.domains.size(); ++d) {
        nlohmann::json e = share_stats(summarize_share(rc, (int) d));
        e["domain"] = rc.domains[d];
        e["in_plan"] = (bool) rc.in_plan[d];
        nlohmann::json v = nlohmann::json::array();
        for (const layer_receipt & l : rc.layers) v.push_back(l.share_by_domain[d]);
        e["per_layer"] = v;
        sd.push_back(e);
    }
    sr["per_domain"] = sd;
    out["saliency_retained"] = sr;

    // dead experts
    nlohmann::json inst = nlohmann::json::array(), kept_inst = nlohmann::json::array();
    std::set<int> dead_layers;
    int64_t n_kept = 0;
    for (size_t i = 0; i < rc.dead.size(); ++i) {
        inst.push_back(expert_name(rc.dead[i].layer, rc.dead[i].expert));
        dead_layers.insert(rc.dead[i].layer);
        if (rc.dead_kept[i]) {
            ++n_kept;
            kept_inst.push_back(expert_name(rc.dead[i].layer, rc.dead[i].expert));
        }
    }
    out["dead_experts"] = {{"count", rc.dead.size()}, {"layers", dead_layers.size()}, {"pruned", (int64_t) rc.dead.size() - n_kept},
                           {"kept", n_kept}, {"instances", inst}, {"kept_instances", kept_inst}};

    // super experts (the entries plans have always had, and what the card quotes)
    nlohmann::json sup = nlohmann::json::array();
    for (size_t i = 0; i < rc.super.size(); ++i) {
        const expert_ref & x = rc.super[i];
        sup.push_back({{"layer", x.layer}, {"expert", x.expert}, {"max_norm", x.value}, {"max_norm_ratio", x.norm_ratio},
                       {"score_share", x.score_share}, {"kept", (bool) rc.super_kept[i]}});
    }
    out["super_experts"] = sup;
    return out;
}

} // namespace reap::planner

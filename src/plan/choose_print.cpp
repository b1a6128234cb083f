// What reap plan prints (choose.h): the report (model, archive, size table,
// N, file size, fused-kernel note, receipts) and the --json document.
#include "plan/choose.h"
#include "plan/provenance.h"
#include "plan/stability.h"

#include "util/number_format.h"
#include "util/summary.h"

#include <cinttypes>
#include <map>

namespace reap::planner {

namespace {

// A size-table row over the --budget (none without one).
bool over_budget(const plan_request & req, const size_point & pt) { return !req.budget_text.empty() && pt.bytes > req.budget; }

std::string percent(double x) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.2f%%", 100.0 * x);
    return buf;
}

// The receipts block: safety margin, saliency retained, dead and super
// experts, every long list summarised (util/summary.h); the full data are in
// the plan's provenance and in --json.
void print_receipts(FILE * out, const receipts & rc, const ranking & rk, bool protect_super) {
    namespace u = util;
    const bool all_domains = rk.domains.size() == rk.archive_domains.size();
    fprintf(out, "  receipts (%s score within each domain; rank 1 = most salient):\n", rc.method.c_str());
    const margin_summary ms = summarize_margin(rc);
    if (ms.n_layers == 0) {
        fprintf(out, "    safety margin: none (no expert is pruned)\n");
    } else {
        fprintf(out, "    safety margin: no pruned expert ranks better than %" PRId64 " of %" PRId64 " in any %sdomain, in any layer "
                "(median layer: %g; %s, rank %" PRId64 " in %s)\n",
                ms.min, rc.n_expert, all_domains ? "" : "chosen ", ms.median, expert_name(ms.layer, ms.expert).c_str(), ms.min,
                ms.domain.c_str());
        std::vector<std::string> per;
        for (size_t d = 0; d < rc.domains.size(); ++d) {
            const margin_summary m = summarize_margin(rc, (int) d);
            char buf[160];
            if (m.n_layers == 0) snprintf(buf, sizeof(buf), "%s -", rc.domains[d].c_str());
            else snprintf(buf, sizeof(buf), "%s %" PRId64 " (median %g)", rc.domains[d].c_str(), m.min, m.median);
            per.push_back(std::string(buf) + (rc.in_plan[d] ? "" : " [not planned on]"));
        }
        fprintf(out, "      per domain: %s\n", u::first_few(per).c_str());
    }
    const u::summary sh = summarize_share(rc);
    if (rc.layers.size() <= u::k_list_full) {
        std::string per;
        for (const auto & l : rc.layers) per += " L" + std::to_string(l.layer) + " " + percent(l.share);
        fprintf(out, "    saliency retained: mean %s;%s\n", percent(sh.mean).c_str(), per.c_str());
    } else {
        fprintf(out, "    saliency retained: mean %s over %zu layers (%s)\n", percent(sh.mean).c_str(), sh.count,
                u::min_median_max({sh.count, 100 * sh.min, 100 * sh.median, 100 * sh.max, 0}, "%.2f%%").c_str());
    }
    std::vector<std::string> per;
    for (size_t d = 0; d < rc.domains.size(); ++d) {
        const u::summary x = summarize_share(rc, (int) d);
        per.push_back(rc.domains[d] + " " + percent(x.mean) + " (min " + percent(x.min) + ")" + (rc.in_plan[d] ? "" : " [not planned on]"));
    }
    fprintf(out, "      per domain (mean over layers): %s\n", u::first_few(per).c_str());

    // dead experts: count, layers, count per layer, the first few
    if (rc.dead.empty()) {
        fprintf(out, "    dead experts (no token routed in any domain): none\n");
    } else {
        std::map<int, int> per_layer;
        std::vector<std::string> names;
        size_t kept = 0;
        for (size_t i = 0; i < rc.dead.size(); ++i) {
            per_layer[rc.dead[i].layer]++;
            names.push_back(expert_name(rc.dead[i].layer, rc.dead[i].expert));
            kept += rc.dead_kept[i] ? 1 : 0;
        }
        std::vector<double> counts;
        for (const auto & [l, n] : per_layer) counts.push_back(n);
        const u::summary c = u::summarize(counts);
        char range[64];
        if (c.min == c.max) snprintf(range, sizeof(range), "%g per layer", c.min);
        else snprintf(range, sizeof(range), "%g..%g per layer, median %g", c.min, c.max, c.median);
        fprintf(out, "    dead experts (no token routed in any domain): %zu in %zu of %zu layers (%s), %zu pruned%s: %s\n",
                rc.dead.size(), per_layer.size(), rc.layers.size(), range, rc.dead.size() - kept,
                kept ? (", " + std::to_string(kept) + " KEPT").c_str() : "", u::first_few(names).c_str());
    }
    if (rk.super_threshold <= 0) {
        fprintf(out, "    super experts: not detectable (no max_norm in this archive)\n");
    } else if (rc.super.empty()) {
        fprintf(out, "    super experts (max_norm > %.4g): none\n", rk.super_threshold);
    } else {
        std::vector<std::string> names;
        size_t kept = 0;
        for (size_t i = 0; i < rc.super.size(); ++i) {
            const auto & x = rc.super[i];
            char buf[200];
            snprintf(buf, sizeof(buf), "%s (%.4g, %.1fx, %.1f%%%s)", expert_name(x.layer, x.expert).c_str(), x.value,
                     x.norm_ratio, 100.0 * x.score_share, rc.super_kept[i] ? "" : ", PRUNED");
            names.push_back(buf);
            kept += rc.super_kept[i] ? 1 : 0;
        }
        fprintf(out, "    super experts (max_norm > %.4g, %s): %zu, %zu kept (max_norm, x the layer's median max_norm, share of the "
                "layer's score): %s\n",
                rk.super_threshold,
                protect_super ? "protected" : "NOT protected: --no-protect-super", rc.super.size(), kept, u::first_few(names).c_str());
    }
    if (!all_domains) {
        std::vector<std::string> names;
        for (const auto & x : rk.never_routed) names.push_back(expert_name(x.layer, x.expert));
        if (names.empty()) fprintf(out, "    never routed in the chosen domains (removed first): none\n");
        else fprintf(out, "    never routed in the chosen domains (removed first): %zu: %s\n", names.size(), u::first_few(names).c_str());
    }
}

// Whether llama.cpp's fused CUDA top-k MoE kernel takes the model's count and the chosen N.
void print_fused_note(FILE * out, int64_t n_expert, int64_t n_keep) {
    const bool takes_source = fused_kernel_takes(n_expert), takes_n = fused_kernel_takes(n_keep);
    if (takes_source && takes_n) return;
    fprintf(out, "  fused top-k MoE kernel (llama.cpp CUDA; takes %s):", fused_counts_text().c_str());
    if (!takes_source) fprintf(out, " the model's %" PRId64 " experts are not one of them;", n_expert);
    fprintf(out, " N = %" PRId64 " %s\n", n_keep,
            takes_n ? "is" : "is not: the pruned model routes through the unfused path (--fused-kernel picks one)");
}

} // namespace

void print_plan_report(FILE * out, const plan_request & req, const plan_choice & c) {
    const moe::layout & lay = c.rm.layout;
    const ranking & rk = c.rm.rank;
    const uint64_t src_bytes = c.rm.model.file_bytes();
    fprintf(out, "reap plan: %s (%s, %zu MoE layers, %" PRId64 " experts, top-%" PRId64 "%s)\n", req.model.c_str(), lay.arch.c_str(),
            lay.moe_layers.size(), lay.n_expert, lay.n_expert_used,
            c.rm.facts.n_group > 1 ? (", " + std::to_string(c.rm.facts.n_group) + " expert groups").c_str() : "");
    std::string doms;
    for (size_t i = 0; i < rk.domains.size(); ++i) doms += (i ? "," : "") + rk.domains[i];
    fprintf(out, "  saliency %s: method %s, domains %s%s\n", req.saliency.c_str(), method_name(rk.opts.how), doms.c_str(),
            rk.opts.cons == consensus::minrank ? ", consensus minrank" : "");
    if (!c.note.empty()) fprintf(out, "  note: %s\n", c.note.c_str());
    if (!c.table.empty()) {
        fprintf(out, "  %8s  %20s  %-28s %7s  %s\n", "N", "bytes", "size", "shards", "saliency retained   [fused: llama.cpp's fused top-k MoE kernel takes N]");
        for (const auto & pt : c.table) {
            fprintf(out, "  %8" PRId64 "  %20" PRIu64 "  %-28s %7u  %6.2f%%%s%s%s\n", pt.n_keep, pt.bytes, util::format_size(pt.bytes).c_str(),
                    pt.n_shards, 100.0 * pt.share, fused_kernel_takes(pt.n_keep) ? "  [fused]" : "",
                    pt.n_keep == c.n_keep ? "  <- chosen" : "", over_budget(req, pt) ? "  (over budget)" : "");
        }
    }
    plan_provenance pv;
    std::string why;
    if (!read_plan_provenance(c.p.provenance, "(the plan made)", pv, why)) fprintf(out, "  warning: %s\n", why.c_str());
    if (!pv.super_not_kept.empty()) {
        std::vector<std::string> names;
        for (const auto & x : pv.super_not_kept) names.push_back(expert_name(x.layer, x.expert));
        fprintf(out, "  warning: %zu protected super expert(s) do not fit in N = %" PRId64 " (more in a layer or group than it keeps): %s\n",
                names.size(), c.n_keep, util::first_few(names).c_str());
    }
    fprintf(out, "  keep %" PRId64 " of %" PRId64 " experts per layer (%.1f%% removed)\n", c.n_keep, lay.n_expert,
            100.0 * double(lay.n_expert - c.n_keep) / double(lay.n_expert));
    if (c.p.has_width()) {
        const std::string down = pv.down_type.empty() ? "its own type" : pv.down_type;
        fprintf(out, "  width: every kept expert keeps %" PRId64 " of its %" PRId64 " channels (ranked by channel score %s); down "
                     "requantised to %s\n", c.p.width_keep, c.p.width_n_ff, pv.channel_score.empty() ? "?" : pv.channel_score.c_str(),
                down.c_str());
        if (c.p.cuts_shared_expert()) {   // llama4: cut with them (plan.h)
            fprintf(out, "  width: the shared expert keeps %" PRId64 " of its %" PRId64 " channels too (its own channel scores)\n",
                    c.p.width_keep, c.p.width_n_ff);
        }
        if (pv.width_rerank) {
            fprintf(out, "  rerank: Spearman(full-width saliency, saliency on the kept channels) of the kept experts, "
                         "per layer: min %.4f, median %.4f over %zu layers\n",
                    pv.width_rerank->min, pv.width_rerank->median, (size_t) pv.width_rerank->n_defined);
        }
    }
    fprintf(out, "  pruned file: %" PRIu64 " bytes, %s%s (source %s)\n", c.bytes, util::format_size(c.bytes).c_str(),
            c.n_shards > 1 ? (" in " + std::to_string(c.n_shards) + " shards").c_str() : "", util::format_size(src_bytes).c_str());
    if (!req.budget_text.empty()) fprintf(out, "  budget %s = %" PRIu64 " bytes\n", req.budget_text.c_str(), req.budget);
    print_fused_note(out, lay.n_expert, c.n_keep);
    print_receipts(out, c.rc, rk, rk.opts.protect_super);
    std::string text, e;
    if (c.rm.archive.provenance.get_string(k_key_stability, text, e)) {   // calibrate --until-stable
        stability_curve curve;
        if (parse_stability_curve(text, curve, e)) fputs(curve_table(curve).c_str(), out);
        else fprintf(out, "  warning: %s\n", e.c_str());
    }
}

nlohmann::json plan_choice_json(const plan_request & req, const plan_choice & c) {
    nlohmann::json j = plan_to_json(c.p);
    j["output"] = req.dry_run ? nlohmann::json(nullptr) : nlohmann::json(req.output);
    if (!c.table.empty()) {
        nlohmann::json t = nlohmann::json::array();
        for (const auto & pt : c.table) {
            t.push_back({{"n_keep", pt.n_keep}, {"bytes", pt.bytes}, {"shards", pt.n_shards}, {"saliency_retained", pt.share},
                         {"over_budget", over_budget(req, pt)}});
        }
        j["size_table"] = t;
    }
    return j;
}

} // namespace reap::planner

// The card's figures, drawn from the facts report.cpp gathered (report_facts.h).
#include "report/report_facts.h"
#include "report/sweep_chart.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace reap::report::detail {

util::heatmap heatmap_of(const saliency_facts & s, const plan & p) {
    util::heatmap h;
    h.title = "Saliency per expert (" + std::string(pl::method_name(s.rank.share_method)) + "), each layer sorted";
    h.x_label = "experts of the layer, most salient first";
    h.y_label = "MoE layer";
    h.value_label = "colour: share of the layer's saliency (sqrt scale)";
    h.marked_label = "kept";
    h.unmarked_label = "removed";
    h.n_cols = (size_t) s.rank.n_expert;
    for (const auto & lr : s.rank.layers) {
        const plan_layer * pl_layer = p.find_layer(lr.layer);
        const double total = std::accumulate(lr.score.begin(), lr.score.end(), 0.0);
        std::vector<int64_t> ids(lr.score.size());
        std::iota(ids.begin(), ids.end(), 0);
        std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return lr.score[a] > lr.score[b]; });
        h.row_labels.push_back(std::to_string(lr.layer));
        for (int64_t e : ids) {
            h.values.push_back(total > 0 ? lr.score[e] / total : 0.0);
            const bool kept = pl_layer && std::count(pl_layer->keep.begin(), pl_layer->keep.end(), e);
            h.marked.push_back(kept ? 1 : 0);
        }
    }
    return h;
}

util::chart retention_chart(const saliency_facts & s, const plan & p, double plan_share) {
    util::chart c;
    c.title = "Saliency kept against experts kept (" + std::string(pl::method_name(s.rank.share_method)) + ")";
    c.x_label = "experts kept per MoE layer (N)";
    c.x_descending = true;
    util::chart_panel panel;
    panel.y_label = "saliency share kept (%, mean over MoE layers)";
    util::chart_series share{"saliency kept", {}, {}};
    share.bold = true;
    std::vector<uint64_t> bytes;
    for (const auto & pt : s.curve) {
        share.x.push_back((double) pt.n_keep);
        share.y.push_back(100.0 * pt.share);
        bytes.push_back(pt.bytes);
    }
    panel.series = {share, util::size_series(share.x, bytes, panel)};
    c.panels.push_back(panel);
    c.marks.push_back({(double) p.n_keep, "this build: N = " + std::to_string(p.n_keep) + ", " + pct(plan_share)});
    return c;
}

util::chart usage_chart(const saliency_facts & s, const plan & p) {
    util::chart c;
    c.title = "Routed tokens that land on kept experts, per calibration domain";
    c.x_label = "MoE layer";
    c.x_integer = true;
    util::chart_panel panel;
    panel.y_label = "routed tokens on kept experts (%)";
    std::vector<double> xs;
    for (const auto & l : p.layers) xs.push_back((double) l.layer);
    for (size_t d = 0; d < s.a.domains.size(); ++d) {
        util::chart_series sr{s.a.domains[d].name, xs, {}};
        for (double v : s.usage[d]) sr.y.push_back(100.0 * v);
        panel.series.push_back(sr);
    }
    c.panels.push_back(panel);
    return c;
}

// Tokens spent against the keep-list's stability (calibrate --until-stable):
// the mix's overlap with the previous checkpoint's plan and with half the
// tokens', the lowest domain's with half, and the threshold.
util::chart stability_chart(const pl::stability_curve & sc) {
    util::chart c;
    c.title = "Tokens spent vs keep-list stability (" + std::to_string(sc.n_keep) + " kept per layer)";
    c.x_label = "calibration tokens";
    util::chart_panel panel;
    panel.y_label = "keep-list overlap (mean Jaccard)";
    util::chart_series prev{"mix vs previous", {}, {}}, half{"mix vs half the tokens", {}, {}},
        dom{"lowest domain vs half", {}, {}}, line{"threshold J", {}, {}};
    half.bold = true;
    dom.dashed = line.dashed = true;
    const auto y = [](double v) { return v < 0 ? NAN : v; };
    for (const auto & pt : sc.points) {
        const double x = (double) pt.tokens;
        prev.x.push_back(x), prev.y.push_back(y(pt.jaccard_prev));
        half.x.push_back(x), half.y.push_back(y(pt.jaccard_half));
        dom.x.push_back(x), dom.y.push_back(y(pt.domain_half));
        line.x.push_back(x), line.y.push_back(sc.threshold);
    }
    panel.series = {half, prev, dom, line};
    c.panels.push_back(panel);
    const bool held = sc.points.size() >= 2 && sc.points.back().stable && sc.points[sc.points.size() - 2].stable;
    if (held) c.marks.push_back({(double) sc.points.back().tokens, "stopped: held"});
    return c;
}

// The sweep's chart (sweep_chart.h) from a SWEEP.json, KLD only, this build's N
// marked when the sweep ranked as this build's plan did. A sweep with width
// cuts: KLD and top-1 against file size, one line per width, this build's
// point marked when it is one of them.
util::chart sweep_kld_chart(const sweep_facts & sw, const plan & p) {
    if (sw.widths) {
        const sweep_record_point * mine = nullptr;
        for (const auto & pt : sw.s.points) {
            if (is_this_point(sw, p, pt)) mine = &pt;
        }
        util::chart c = sweep_width_chart(sw.s, mine, "this build: N = " + std::to_string(p.n_keep) +
                                                          (sw.this_width > 0 ? ", width " + std::to_string(sw.this_width) : ""));
        c.title = "Cost of count and width cuts against file size (sweep, by masking)";
        return c;
    }
    sweep_chart_input in = sweep_chart_input_of(sw.s);
    in.title = "KL divergence from the source at each size (sweep, by masking)";
    in.top1_panel = false;
    // (a width-cut build is no point of a count-only curve)
    if (sw.same_method && sw.this_width == 0) in.marks.push_back({(double) p.n_keep, "this build: N = " + std::to_string(p.n_keep)});
    return sweep_chart(in);
}

}  // namespace reap::report::detail

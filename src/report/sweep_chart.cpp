// The one builder of a sweep's chart (see sweep_chart.h).
#include "report/sweep_chart.h"

#include "plan/sweep.h"
#include "util/number_format.h"
#include "util/path.h"
#include "util/strings.h"

#include <algorithm>
#include <functional>

namespace reap::report {

util::chart sweep_chart(const sweep_chart_input & in) {
    util::chart c;
    c.title = in.title;
    c.x_label = "experts kept per MoE layer (N)";
    c.x_descending = true;
    c.marks = in.marks;
    util::chart_panel kld, top1;
    kld.y_label = "KL divergence from the base (nats/token, mean)";
    top1.y_label = "top-1 agreement with the base (%)";
    std::vector<double> xs;
    std::vector<uint64_t> bytes;
    for (const sweep_chart_point & pt : in.points) {
        xs.push_back((double) pt.n_keep);
        bytes.push_back(pt.bytes);
    }
    // per domain (thin), then overall (bold)
    auto add = [&](const std::string & name, bool bold, auto cost_of) {
        util::chart_series k{name, xs, {}}, t{name, xs, {}};
        k.bold = t.bold = bold;
        for (const sweep_chart_point & pt : in.points) {
            const sweep_chart_cost cost = cost_of(pt);
            k.y.push_back(cost.kld_mean);
            t.y.push_back(100 * cost.top1);
        }
        kld.series.push_back(k);
        top1.series.push_back(t);
    };
    for (size_t d = 0; d < in.domains.size(); ++d) {
        add(in.domains[d], false, [d](const sweep_chart_point & pt) {
            return d < pt.domains.size() ? pt.domains[d] : sweep_chart_cost{};
        });
    }
    add("overall", true, [](const sweep_chart_point & pt) { return pt.overall; });
    kld.series.push_back(util::size_series(xs, bytes, kld));
    c.panels.push_back(kld);
    if (in.top1_panel) {
        top1.series.push_back(util::size_series(xs, bytes, top1));
        c.panels.push_back(top1);
    }
    return c;
}

util::chart sweep_frontier_chart(const sweep_record & s) {
    util::chart c;
    c.title = s.model.arch + ": KLD against file size, " + std::to_string(s.sources.size()) + " sources (" + s.saliency.method + ")";
    uint64_t largest = 1;
    for (const auto & src : s.sources) {
        for (const auto & pt : src.points) largest = std::max(largest, pt.predicted_bytes);
    }
    const util::size_unit unit = util::decimal_unit(largest);
    c.x_label = std::string("pruned file size (") + unit.name + ")";
    util::chart_panel kld;
    kld.y_label = "KL divergence from the reference (nats/token, mean)";
    for (const auto & src : s.sources) {
        util::chart_series line{util::base_name(src.path), {}, {}};
        for (const auto & pt : src.points) {
            line.x.push_back((double) pt.predicted_bytes / unit.bytes);
            line.y.push_back(pt.overall.kld_mean);
        }
        kld.series.push_back(line);
    }
    util::chart_series best{"best per request", {}, {}};
    best.bold = true;
    best.dashed = true;
    for (const auto & e : s.frontier) {
        best.x.push_back((double) e.best.bytes / unit.bytes);
        best.y.push_back(e.best.kld_mean);
        std::vector<planner::size_request> budget;
        std::string err;
        if (e.request_kind == "budget" && planner::parse_size_requests(planner::size_kind::budget, e.request_text, budget, err)) {
            c.marks.push_back({(double) budget[0].budget / unit.bytes, "budget " + e.request_text});
        }
    }
    kld.series.push_back(best);
    c.panels.push_back(kld);
    return c;
}

namespace {

// Two panels, KLD mean and top-1 agreement (overall), one line per group of
// points: the points `in_line(pt, i)` takes for line i, at x = `x_of(pt)`.
void add_line_panels(util::chart & c, const sweep_record & s, const std::vector<std::string> & names,
                     const std::function<bool(const sweep_record_point &, size_t)> & in_line,
                     const std::function<double(const sweep_record_point &)> & x_of) {
    util::chart_panel kld, top1;
    kld.y_label = "KL divergence from the base (nats/token, mean)";
    top1.y_label = "top-1 agreement with the base (%)";
    for (size_t i = 0; i < names.size(); ++i) {
        util::chart_series k{names[i], {}, {}}, t{names[i], {}, {}};
        for (const auto & pt : s.points) {
            if (!in_line(pt, i)) continue;
            k.x.push_back(x_of(pt));
            t.x.push_back(x_of(pt));
            k.y.push_back(pt.overall.kld_mean);
            t.y.push_back(100 * pt.overall.argmax_agree);
        }
        kld.series.push_back(k);
        top1.series.push_back(t);
    }
    c.panels.push_back(kld);
    c.panels.push_back(top1);
}

}  // namespace

util::chart sweep_width_chart(const sweep_record & s, const sweep_record_point * mark, const std::string & mark_label) {
    util::chart c;
    c.title = s.model.arch + ": cost of count and width cuts against file size (" + s.saliency.method + ")";
    uint64_t largest = 1;
    for (const auto & pt : s.points) largest = std::max(largest, pt.predicted_bytes);
    const util::size_unit unit = util::decimal_unit(largest);
    c.x_label = std::string("pruned file size (") + unit.name + ")";
    std::vector<int64_t> widths;   // in the record's order: the full width first, then K descending
    for (const auto & pt : s.points) {
        if (std::find(widths.begin(), widths.end(), pt.width) == widths.end()) widths.push_back(pt.width);
    }
    std::vector<std::string> names;
    for (int64_t w : widths) names.push_back(w > 0 ? "width " + std::to_string(w) : "all channels");
    add_line_panels(c, s, names, [&](const sweep_record_point & pt, size_t i) { return pt.width == widths[i]; },
                    [&](const sweep_record_point & pt) { return (double) pt.predicted_bytes / unit.bytes; });
    if (mark) c.marks.push_back({(double) mark->predicted_bytes / unit.bytes, mark_label});
    return c;
}

util::chart sweep_method_chart(const sweep_record & s) {
    util::chart c;
    c.title = s.model.arch + ": cost of each cut by criterion (" + util::join(s.saliency.domains, ",") + ")";
    c.x_label = "experts kept per MoE layer";
    c.x_integer = true;
    const std::vector<std::string> methods = sweep_methods(s);
    add_line_panels(c, s, methods, [&](const sweep_record_point & pt, size_t i) { return pt.method == methods[i]; },
                    [](const sweep_record_point & pt) { return (double) pt.n_keep; });
    return c;
}

sweep_chart_input sweep_chart_input_of(const sweep_record & s) {
    sweep_chart_input in;
    if (!s.points.empty()) {
        for (const auto & d : s.points[0].domains) in.domains.push_back(d.first);
    }
    for (const auto & pt : s.points) {
        sweep_chart_point q;
        q.n_keep = pt.n_keep;
        q.bytes = pt.predicted_bytes;
        q.overall = {pt.overall.kld_mean, pt.overall.argmax_agree};
        for (const auto & d : pt.domains) {
            q.domains.push_back(d.second.n_tokens ? sweep_chart_cost{d.second.kld_mean, d.second.argmax_agree} : sweep_chart_cost{});
        }
        in.points.push_back(q);
    }
    return in;
}

} // namespace reap::report

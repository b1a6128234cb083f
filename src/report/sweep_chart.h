// The chart of a sweep: the cost of each cut (KL divergence from the base and,
// optionally, top-1 agreement) against the experts kept per MoE layer, per
// domain (thin lines) and overall (bold), with the pruned file's size on a
// second axis. `reap sweep --plot` and the model card's sweep-kld.svg are both
// drawn by sweep_chart() from the sweep record (sweep_chart_input_of); each
// caller sets only the title, the panels and its marks.
#pragma once

#include "formats/sweep_file.h"
#include "util/svg_chart.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace reap::report {

// What one sweep point measured for one domain or overall; NAN: not measured.
struct sweep_chart_cost {
    double kld_mean = NAN;   // nats/token
    double top1 = NAN;       // argmax agreement with the base, 0..1
};

struct sweep_chart_point {
    int64_t                       n_keep = 0;
    uint64_t                      bytes = 0;   // the pruned file's size
    sweep_chart_cost              overall;
    std::vector<sweep_chart_cost> domains;     // in the order of sweep_chart_input::domains
};

struct sweep_chart_input {
    std::string                    title;
    std::vector<std::string>       domains;
    std::vector<sweep_chart_point> points;
    bool                           top1_panel = true;   // a second panel of top-1 agreement
    std::vector<util::chart_mark>  marks;               // e.g. the N of a build
};

util::chart sweep_chart(const sweep_chart_input & in);

// The frontier of a several-source sweep (sweep_file.h, version 3): KLD mean
// against the file's size, one line per source (one colour each), each
// budget a vertical line, and the best point of every request marked (a
// series of its own, "best per request").
util::chart sweep_frontier_chart(const sweep_record & s);

// A sweep with width cuts (reap sweep --widths): KLD mean and top-1
// agreement (overall) against the file's size, one line per width (the full
// width "all channels", then each K), points in N order along each line;
// `mark` (one of s.points, optional) a vertical line at its size, `mark_label`.
util::chart sweep_width_chart(const sweep_record & s, const sweep_record_point * mark = nullptr, const std::string & mark_label = "");

// A sweep of several methods (reap sweep --methods): KLD mean and top-1
// agreement (overall) against the experts kept per layer, one line per method.
util::chart sweep_method_chart(const sweep_record & s);

// The points and domains of a sweep record (a domain without tokens at a
// point is not measured there); title, panel and marks are the caller's.
sweep_chart_input sweep_chart_input_of(const sweep_record & s);

} // namespace reap::report

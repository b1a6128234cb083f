// What reap report gathers about a build before it writes the card, and the
// figures drawn from it: report.cpp gathers the facts and writes the text,
// report_figures.cpp draws the figures. Internal to src/report/ (report.h is
// the module's interface).
#pragma once

#include "formats/sweep_file.h"
#include "gguf/gguf.h"
#include "moe/census.h"
#include "plan/plan.h"
#include "plan/planners.h"
#include "plan/receipts.h"
#include "plan/stability.h"
#include "saliency/archive.h"
#include "util/svg_chart.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace reap::report::detail {

namespace pl = reap::planner;

struct model_facts {
    std::string      path;
    gguf::model      m;
    moe::census      c;
    uint64_t         n_params = 0;
};

struct saliency_facts {
    bool                     have = false;
    std::string              path, sha256;
    saliency::archive        a;
    pl::ranking              rank;               // the plan's method and domains
    pl::share_report         share;              // the plan's keep lists under that ranking
    pl::receipts             receipts;           // the plan's, as `reap plan` records them
    std::vector<std::pair<std::string, double>> share_by_domain;
    std::vector<pl::size_point> curve;           // N -> share, bytes
    std::vector<std::vector<double>> usage;      // [domain][moe layer]: share of routed tokens on kept experts
    std::string              corpus_name, corpus_sha256, tool;
    std::string              invariant;          // "" or the count invariant's message
    std::optional<pl::stability_curve> stability;   // calibrate --until-stable's curve, when recorded
};

struct sweep_facts {
    bool         have = false;
    std::string  path;
    sweep_record s;            // points largest n_keep first
    bool         same_method = true;   // ranked as this build's plan was
    // several sources (sweep version 3): the one this build was cut from (its
    // identity, moe/identity.h, and file size: quantisations of one model share
    // the identity) and this build's point in it; -1 when none
    int          this_source = -1;
    int64_t      this_n_keep = -1;
    // width cuts (reap sweep --widths): the source's expert width, and the
    // width this build keeps (0: every channel)
    bool         widths = false;
    int64_t      n_ff = 0, this_width = 0;
};

// The width a plan cuts its experts to; 0 when it keeps every channel (no
// width, or K equal to the experts' width).
int64_t cut_width(const plan & p);

// Whether sweep point `pt` is this build's cut: the plan's method, N and width.
bool is_this_point(const sweep_facts & sw, const plan & p, const sweep_record_point & pt);

// "12.3%" of a share (0..1).
std::string pct(double v, int decimals = 1);

// ---- figures (report_figures.cpp) ----

// The saliency of every expert, each layer sorted, kept ones marked.
util::heatmap heatmap_of(const saliency_facts & s, const plan & p);
// Saliency kept against N, with the file size; this build marked.
util::chart retention_chart(const saliency_facts & s, const plan & p, double plan_share);
// Per calibration domain and layer: routed tokens on kept experts.
util::chart usage_chart(const saliency_facts & s, const plan & p);
// Tokens spent against the keep-list's stability (calibrate --until-stable).
util::chart stability_chart(const pl::stability_curve & sc);
// The sweep's KLD chart, this build's point marked where it is one.
util::chart sweep_kld_chart(const sweep_facts & sw, const plan & p);

}  // namespace reap::report::detail

// What reap report gathers about a build before it writes the card, and the
// figures and text drawn from it: report.cpp gathers and checks the facts,
// report_figures.cpp draws the figures, report_text.cpp writes the card's text. Internal to src/report/ (report.h is
// the module's interface).
#pragma once

#include "formats/eval_file.h"
#include "formats/sweep_file.h"
#include "gguf/gguf.h"
#include "moe/census.h"
#include "plan/plan.h"
#include "plan/planners.h"
#include "plan/receipts.h"
#include "plan/provenance.h"
#include "plan/stability.h"
#include "prune/verify_run.h"
#include "report/report.h"
#include "saliency/archive.h"
#include "util/sha256.h"
#include "util/svg_chart.h"

#include <cstdint>
#include <map>
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

// ---- eval receipts and the card ----

enum class eval_match { hashes, mask_plan, path_only, other, unidentified };

struct eval_entry {
    std::string json_file;     // the --eval file
    eval_match  match = eval_match::unidentified;
    std::string why;           // for other / unidentified
    eval_report r;             // what it says it measured, and the numbers
};

// What the report knows of this build, to match an eval against.
struct build_identity {
    std::string                        source_sha256;   // plan::model_header_sha256 of the source
    std::string                        source_router_sha256;   // moe::identity_of's router hash of the source
    std::map<std::string, std::string> sums;            // the build's files and their SHA256SUMS hashes
    std::string                        plan_sha256, pruned_path, plan_path;
    // the source's files and their bytes' hash (util::sha256_files), hashed
    // only when an eval's base claims to be the source: same size, a hash recorded
    std::vector<std::string>           source_files;
    uint64_t                           source_bytes = 0;
    mutable std::string                source_files_sha256, source_hash_error;

    const std::string & source_hash() const {
        if (source_files_sha256.empty() && source_hash_error.empty() &&
            !util::sha256_files(source_files, source_files_sha256, source_hash_error)) {
            source_files_sha256.clear();
        }
        return source_files_sha256;
    }
};

// Everything the card is written from, filled stage by stage by write_report.
struct card {
    card(const report_options & o, std::vector<std::string> & v, std::vector<std::string> & u)
        : opt(o), verified(v), unverified(u) {}
    const report_options &   opt;
    std::vector<std::string> & verified;
    std::vector<std::string> & unverified;
    std::string              readme, fig_dir;
    model_facts              src, cut;
    plan                     p;
    pl::plan_provenance      prov;
    prune::verify_report     vr;
    build_identity           build;
    std::vector<std::pair<std::string, std::string>> sums_lines;   // (hash, file) of the build
    saliency_facts           sal;
    std::vector<eval_entry>  evals;          // the ones measured on this build
    size_t                   n_behaviour = 0;   // needle / generate sections counted for this build (files or mask)
    size_t                   n_tasks = 0;       // task (multiple-choice) files read
    sweep_facts              sw;
    std::vector<std::string> notes;          // method caveats
};

// printf of one number; Markdown inline code that text from inputs cannot break out of.
std::string fmt(const char * f, double v);
std::string code(const std::string & s);

// ---- the card's text (report_text.cpp), section by section ----

std::string front_matter_and_census(const card & c);
std::string method_section(const card & c);
std::string verified_sections(const card & c);
std::string sweep_section(const card & c);
std::string running_sections(const card & c);

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

// reap compare as a library call (compare.h): two plans read and compared,
// scored with an archive when one is given, and their receipts side by side.
#include "plan/compare.h"
#include "plan/provenance.h"

#include "saliency/archive.h"

#include <algorithm>
#include <iterator>

namespace reap::planner {

using util::error_kind;
using util::fail_with;

receipt_column column_of(const receipts & rc) {
    receipt_column c;
    const margin_summary m = summarize_margin(rc);
    c.has_margin = true;
    c.margin_null = m.n_layers == 0;
    c.margin = m.min;
    c.margin_median = m.median;
    const util::summary sh = summarize_share(rc);
    c.has_share = true;
    c.share_mean = sh.mean;
    c.share_min = sh.min;
    c.has_dead = c.has_super = true;
    c.dead = (int64_t) rc.dead.size();
    for (bool k : rc.dead_kept) c.dead_kept += k ? 1 : 0;
    c.super = (int64_t) rc.super.size();
    for (bool k : rc.super_kept) c.super_kept += k ? 1 : 0;
    for (size_t d = 0; d < rc.domains.size(); ++d) {
        c.per_domain.push_back({summarize_margin(rc, (int) d).min, summarize_share(rc, (int) d).mean});
    }
    return c;
}

receipt_column column_of(const recorded_receipts & r) {
    receipt_column c;
    static_cast<recorded_receipts &>(c) = r;   // a plan records the totals only
    return c;
}

double oracle_ratio(double share, double oracle) { return oracle > 0 ? share / oracle : 1.0; }

namespace {

// With an archive: the ranking, the shares against the oracle, and both
// plans' receipts from the same scoring.
bool score_with_archive(const compare_request & req, plan_comparison & c, util::error & err) {
    std::string msg;
    saliency::archive arch;
    if (!saliency::read_archive(req.saliency, arch, msg)) return fail_with(err, error_kind::input, msg);
    if (!plan_matches_archive(c.a, arch, msg)) return fail_with(err, error_kind::input, req.plan_a + ": " + msg);
    rank_options ro = req.rank;
    if (!req.method_given) ro.how = default_method(arch.metrics);
    ro.protect_super = false;
    if (!rank_experts(arch, 1, ro, c.rank, msg)) return fail_with(err, error_kind::input, msg);
    c.share_a = plan_share(c.rank, c.a);
    c.share_b = plan_share(c.rank, c.b);
    c.oracle_a = oracle_share(c.rank, c.a.n_keep);
    c.oracle_b = oracle_share(c.rank, c.b.n_keep);
    c.have_saliency = true;
    receipts ra, rb;
    if (!plan_receipts(c.rank, c.a, ra, msg)) return fail_with(err, error_kind::input, req.plan_a + ": " + msg);
    if (!plan_receipts(c.rank, c.b, rb, msg)) return fail_with(err, error_kind::input, req.plan_b + ": " + msg);
    c.receipts_a = column_of(ra);
    c.receipts_b = column_of(rb);
    return true;
}

// The channels of both plans for every expert both keep (compare_plans has
// checked that the layers line up).
bool compare_widths(const plan & a, const plan & b, width_overlap & w, std::string & err) {
    w = width_overlap();
    if (!a.has_width() && !b.has_width()) return true;
    w.compared = true;
    w.n_ff = a.has_width() ? a.width_n_ff : b.width_n_ff;
    if (a.has_width() && b.has_width() && a.width_n_ff != b.width_n_ff) {
        err = "the plans cut experts of different widths (" + std::to_string(a.width_n_ff) + " and " + std::to_string(b.width_n_ff) + ")";
        return false;
    }
    w.keep_a = a.has_width() ? a.width_keep : w.n_ff;
    w.keep_b = b.has_width() ? b.width_keep : w.n_ff;
    std::vector<int64_t> all(w.n_ff);
    for (int64_t c = 0; c < w.n_ff; ++c) all[c] = c;
    double sum = 0;
    for (size_t l = 0; l < a.layers.size() && l < b.layers.size(); ++l) {
        const plan_layer & la = a.layers[l], & lb = b.layers[l];
        for (size_t i = 0; i < la.keep.size(); ++i) {
            const auto j = std::find(lb.keep.begin(), lb.keep.end(), la.keep[i]);
            if (j == lb.keep.end()) continue;
            const std::vector<int64_t> & ca = a.has_width() ? la.channels[i] : all;
            const std::vector<int64_t> & cb = b.has_width() ? lb.channels[(size_t) (j - lb.keep.begin())] : all;
            std::vector<int64_t> both;
            std::set_intersection(ca.begin(), ca.end(), cb.begin(), cb.end(), std::back_inserter(both));
            sum += (double) both.size() / (double) (ca.size() + cb.size() - both.size());
            ++w.experts;
        }
    }
    w.mean_jaccard = w.experts ? sum / (double) w.experts : 1;
    return true;
}

} // namespace

bool compare_plan_files(const compare_request & req, plan_comparison & c, util::error & err) {
    std::string msg;
    if (!read_plan(req.plan_a, c.a, msg) || !read_plan(req.plan_b, c.b, msg)) return fail_with(err, error_kind::input, msg);
    if (!compare_plans(c.a, c.b, c.overlap, msg) || !compare_widths(c.a, c.b, c.width, msg)) {
        return fail_with(err, error_kind::input, req.plan_a + " vs " + req.plan_b + ": " + msg);
    }
    if (!req.saliency.empty()) return score_with_archive(req, c, err);
    // receipts as each plan recorded them
    plan_provenance pa, pb;
    if (!read_plan_provenance(c.a.provenance, req.plan_a, pa, msg) || !read_plan_provenance(c.b.provenance, req.plan_b, pb, msg)) {
        return fail_with(err, error_kind::input, msg);
    }
    c.receipts_a = column_of(pa.receipts);
    c.receipts_b = column_of(pb.receipts);
    return true;
}

} // namespace reap::planner

// reap sweep, the planning half (see sweep.h): sizes to nested plans from one
// ranking, and the model + archive setup that reap plan shares.
#include "plan/sweep.h"
#include "plan/plan.h"
#include "saliency/archive.h"
#include "plan/provenance.h"
#include "plan/receipts.h"
#include "plan/width_rerank.h"
#include "util/disk.h"
#include "util/publish.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <set>

namespace reap::planner {

bool open_ranked_model(const std::string & model_path, const std::string & saliency_path, rank_options ro,
                       bool method_given, ranked_model & out, std::string & err) {
    if (!gguf::open_model(model_path, out.model, err)) return false;
    return rank_opened_model(model_path, saliency_path, ro, method_given, out, err);
}

bool rank_opened_model(const std::string & model_path, const std::string & saliency_path, rank_options ro,
                       bool method_given, ranked_model & out, std::string & err) {
    if (!model_layout(out.model, out.layout, err)) {
        err = model_path + ": " + err;
        return false;
    }
    out.facts = facts_of(out.layout);
    if (!moe::identity_of(out.model, out.identity, err)) {
        err = model_path + ": " + err;
        return false;
    }
    const saliency::fingerprint fp = saliency::fingerprint_of(out.identity);
    if (!saliency::read_archive(saliency_path, out.archive, err)) return false;
    if (!saliency::fingerprints_match(out.archive.model, fp, err)) {
        err = saliency_path + " vs " + model_path + ": " + err;
        return false;
    }
    if (!method_given) ro.how = default_method(out.archive.metrics);
    return rank_experts(out.archive, out.facts.n_group, ro, out.rank, err);
}

bool setup_width(const ranked_model & rm, const std::string & saliency_name, const std::string & down_type,
                 std::optional<channel_score> by, const std::vector<int64_t> & widths, const std::string & flag,
                 width_setup & out, util::error & err) {
    using util::error_kind;
    width_setup w;
    w.facts = facts_of(rm.layout, rm.model);
    if (!w.facts.width_refusal.empty()) return util::fail_with(err, error_kind::usage, flag + ": " + w.facts.width_refusal);
    if (!down_type.empty()) {
        const gguf::type_info * ti = gguf::find_type(down_type);
        if (!ti) return util::fail_with(err, error_kind::usage, "--down-type: unknown type '" + down_type + "'");
        w.facts.down_block = ti->block_size;
        w.facts.down_type_name = ti->name;
        w.cut.down_type = ti->type;
    }
    for (int64_t K : widths) {
        const std::string why = width_refusal(K, w.facts);
        if (!why.empty()) return util::fail_with(err, error_kind::usage, flag + ": " + why);
    }
    w.cut.n_ff = w.facts.n_ff_exp;
    w.by = by ? *by : default_channel_score(rm.archive.metrics);
    std::string msg;
    if (!archive_channel_scores(rm.archive, saliency_name, rm.rank.opts.domains, w.by, w.facts.n_ff_exp, w.scores, msg)) {
        return util::fail_with(err, error_kind::input, flag + ": " + msg);
    }
    if (w.facts.shared_cut && !archive_shared_channel_scores(rm.archive, saliency_name, rm.rank.opts.domains, w.by,
                                                             w.facts.n_ff_exp, w.shared_scores, msg)) {
        return util::fail_with(err, error_kind::input, flag + ": " + msg);
    }
    out = std::move(w);
    return true;
}

bool cut_plan_width(const width_setup & w, int64_t K, plan & p, std::string & err) {
    if (!add_width(p, w.facts.n_ff_exp, K, w.scores, err, w.shared_scores)) return false;
    if (!validate_plan(p, w.facts, err)) return false;
    const gguf::type_info * down = w.cut.down_type ? gguf::find_type(uint32_t(*w.cut.down_type)) : nullptr;
    // the rerank statistic (width_rerank.h), a receipt of the cut
    width_rerank rr;
    if (!rerank_of(p, w.scores, rr, err)) return false;
    // the size predicted is that of prune --down-type with the type it records
    record_width(p, channel_score_name(w.by), w.cut.down_type ? (down ? down->name : "?") : "", rr);
    return true;
}

bool parse_size_requests(size_kind kind, const std::string & list, std::vector<size_request> & out, std::string & err) {
    out.clear();
    const char * opt = kind == size_kind::keep ? "--keep" : kind == size_kind::ratio ? "--ratios" : "--budgets";
    size_t start = 0;
    std::set<std::string> seen;
    while (start <= list.size()) {
        const size_t comma = list.find(',', start);
        const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        start = comma == std::string::npos ? list.size() + 1 : comma + 1;
        if (item.empty()) {
            err = std::string(opt) + ": empty item in '" + list + "'";
            return false;
        }
        if (!seen.insert(item).second) {
            err = std::string(opt) + ": '" + item + "' is given twice";
            return false;
        }
        size_request r;
        r.kind = kind;
        r.text = item;
        char * end = nullptr;
        if (kind == size_kind::keep) {
            errno = 0;
            const long long v = strtoll(item.c_str(), &end, 10);
            if (errno || end == item.c_str() || *end || v < 1) {
                err = std::string(opt) + ": '" + item + "' is not a positive integer";
                return false;
            }
            r.keep = v;
        } else if (kind == size_kind::ratio) {
            const double v = strtod(item.c_str(), &end);
            if (end == item.c_str() || *end || !std::isfinite(v) || v < 0 || v >= 1) {
                err = std::string(opt) + ": '" + item + "' is not a fraction in [0, 1)";
                return false;
            }
            r.ratio = v;
        } else {
            if (!parse_size(item, r.budget, err)) {
                err = std::string(opt) + ": " + err;
                return false;
            }
        }
        out.push_back(r);
    }
    return true;
}

bool plans_nested(const plan & smaller, const plan & larger, std::string & why) {
    for (const plan_layer & s : smaller.layers) {
        const plan_layer * l = larger.find_layer(s.layer);
        if (!l) {
            why = "layer " + std::to_string(s.layer) + " is missing from the larger plan";
            return false;
        }
        const std::set<int64_t> big(l->keep.begin(), l->keep.end());
        for (int64_t e : s.keep) {
            if (!big.count(e)) {
                why = "layer " + std::to_string(s.layer) + ": expert " + std::to_string(e) + " is kept at N = " +
                      std::to_string(smaller.n_keep) + " but not at N = " + std::to_string(larger.n_keep);
                return false;
            }
        }
    }
    return true;
}

bool plan_sweep(const ranked_model & rm, const size_context & sctx, const std::vector<size_request> & reqs,
                std::vector<sweep_point> & out, std::string & err) {
    out.clear();
    for (const size_request & r : reqs) {
        sweep_point pt;
        pt.req = r;
        if (r.kind == size_kind::keep) {
            if (!keep_allowed(rm.facts, r.keep, err)) {
                err = "--keep " + r.text + ": " + err;
                return false;
            }
            pt.n_keep = r.keep;
        } else if (r.kind == size_kind::ratio) {
            if (!keep_from_ratio(r.ratio, rm.facts, pt.n_keep, pt.note, err)) {
                err = "--ratios " + r.text + ": " + err;
                return false;
            }
        } else {
            std::vector<size_point> table;
            if (!fit_budget(rm.rank, rm.facts, sctx, r.budget, false, pt.n_keep, table, err)) {
                err = "--budgets " + r.text + ": " + err;
                return false;
            }
        }
        for (const sweep_point & o : out) {
            if (o.n_keep == pt.n_keep) {
                err = "'" + o.req.text + "' and '" + r.text + "' both come to N = " + std::to_string(pt.n_keep) +
                      " experts kept: give each size once";
                return false;
            }
        }
        if (!make_plan(rm.rank, rm.facts, pt.n_keep, pt.p, err)) return false;
        if (!pruned_bytes(sctx, pt.p, pt.bytes, pt.n_shards, err)) return false;
        pt.share = plan_share(rm.rank, pt.p).mean;
        receipts rc;
        if (!plan_receipts(rm.rank, pt.p, rc, err)) return false;
        const margin_summary ms = summarize_margin(rc);
        pt.margin = ms.min;
        pt.margin_median = ms.median;
        out.push_back(std::move(pt));
    }
    std::sort(out.begin(), out.end(), [](const sweep_point & a, const sweep_point & b) { return a.n_keep > b.n_keep; });
    for (size_t i = 1; i < out.size(); ++i) {
        std::string why;
        if (!plans_nested(out[i].p, out[i - 1].p, why)) {
            err = "internal error: the sweep's plans are not nested: " + why;
            return false;
        }
    }
    return true;
}

bool plan_width_sweep(const ranked_model & rm, const size_context & sctx, const std::vector<size_request> & reqs,
                      const std::vector<int64_t> & widths, const width_setup & w, std::vector<sweep_point> & out,
                      std::string & err) {
    out.clear();
    std::set<int64_t> seen;
    for (int64_t K : widths) {
        const std::string flag = "--widths " + std::to_string(K);
        if (!seen.insert(K).second) {
            err = flag + " is given twice";
            return false;
        }
        const bool full = K == w.facts.n_ff_exp;
        size_context cut = sctx;
        cut.width = w.cut;
        cut.width.keep = full ? 0 : K;
        std::vector<sweep_point> pts;
        if (!plan_sweep(rm, cut, reqs, pts, err)) return false;
        for (sweep_point & pt : pts) {
            if (!full) {
                if (!cut_plan_width(w, K, pt.p, err)) return false;
                pt.width = K;
            }
            out.push_back(std::move(pt));
        }
    }
    // the full width (0) first, then K descending; N descending within a K
    std::stable_sort(out.begin(), out.end(), [](const sweep_point & a, const sweep_point & b) {
        const int64_t ka = a.width == 0 ? INT64_MAX : a.width, kb = b.width == 0 ? INT64_MAX : b.width;
        return ka != kb ? ka > kb : a.n_keep > b.n_keep;
    });
    return true;
}

bool publish_sweep_files(const std::string & plans_dir, const std::vector<std::pair<std::string, std::string>> & files,
                         std::string & err) {
    bool made_dir = false;
    if (!plans_dir.empty()) {
        made_dir = util::current_disk().mkdir(plans_dir, 0755);
        if (!made_dir && errno != EEXIST) {
            err = "cannot create --plans-dir '" + plans_dir + "': " + strerror(errno);
            return false;
        }
    }
    if (!util::write_files_durably(files, err)) {
        if (made_dir) util::remove_made_dir(plans_dir);
        return false;
    }
    return true;
}

bool plan_source_points(const source_plans_request & o, const ranked_model & rm, const std::string & archive_sha,
                        std::vector<sweep_point> & points, std::string & err) {
    size_context sctx;
    sctx.model = &rm.model;
    sctx.layout = &rm.layout;
    sctx.prune.version = o.tool_version;
    sctx.prune.plan_sha256 = std::string(64, '0');  // the real hash has the same length
    sctx.write.split_max_bytes = o.split_max_bytes;
    if (o.widths.empty()) {
        if (!plan_sweep(rm, sctx, o.sizes, points, err)) return false;
    } else {
        width_setup w;
        util::error e;
        if (!setup_width(rm, o.saliency, o.down_type, o.channel_by, o.widths, "--widths", w, e)) {
            err = e.message;
            return false;
        }
        sctx.width.down_type = w.cut.down_type;
        std::vector<size_request> sizes = o.sizes;   // --widths alone: every expert kept
        if (sizes.empty()) sizes.push_back({size_kind::keep, std::to_string(rm.facts.n_expert), rm.facts.n_expert});
        if (!plan_width_sweep(rm, sctx, sizes, o.widths, w, points, err)) return false;
    }
    plan stamp;   // the model's fingerprint, read once for every plan
    stamp_plan_model(stamp, rm.model, rm.identity);
    for (auto & pt : points) {
        pt.p.model_sha256 = stamp.model_sha256;
        pt.p.router_sha256 = stamp.router_sha256;
        pt.p.n_vocab = stamp.n_vocab;
        plan_origin origin;
        origin.tool = "reap sweep";
        origin.saliency_path = o.saliency;
        origin.saliency_sha256 = archive_sha;
        origin.metric_set = saliency::metric_set_name(rm.archive.metrics);
        origin.request.size = pt.req;
        origin.request.split_max_bytes = o.split_max_bytes;
        origin.predicted_bytes = pt.bytes;
        origin.predicted_shards = pt.n_shards;
        record_origin(pt.p, origin, o.tool_version.c_str());
    }
    return true;
}

} // namespace reap::planner

// A plan's provenance (provenance.h): the one writer of what plan and sweep
// record in it (origin, ranking, receipts, width cut), and the one checked
// reader of everything reap reads back from it.
#include "plan/provenance.h"

#include "util/json_fields.h"

#include <cmath>

namespace reap::planner {

using nlohmann::json;

namespace {

// The plan's provenance as an object to write fields into (a plan made in
// memory may have none yet).
json & provenance_object(plan & p) {
    if (!p.provenance.is_object()) p.provenance = json::object();
    return p.provenance;
}

} // namespace

void record_origin(plan & p, const plan_origin & o, const char * version) {
    json & prov = provenance_object(p);
    prov["tool"] = o.tool + " " + version;
    prov["saliency"] = {{"file", o.saliency_path}, {"sha256", o.saliency_sha256}, {"metric_set", o.metric_set}};
    const origin_request & r = o.request;
    json req = json::object();
    switch (r.size.kind) {
        case size_kind::keep: req["keep"] = r.size.keep; break;
        case size_kind::ratio: req["ratio"] = r.size.ratio; break;
        case size_kind::budget:
            req["budget"] = r.size.text;
            req["budget_bytes"] = r.size.budget;
            break;
    }
    if (r.split_max_bytes) req["split_max_bytes"] = r.split_max_bytes;
    if (r.split_max_tensors) req["split_max_tensors"] = r.split_max_tensors;
    req["stamp"] = r.stamp;
    if (r.multiple_of > 0) req["multiple_of"] = r.multiple_of;
    if (r.fused_kernel) req["fused_kernel"] = true;
    prov["request"] = req;
    prov["predicted_bytes"] = o.predicted_bytes;
    prov["predicted_shards"] = o.predicted_shards;
}

void record_ranking(plan & p, const ranking & r, const std::vector<expert_ref> & super_not_kept) {
    json & prov = provenance_object(p);
    prov["method"] = method_name(r.opts.how);
    prov["method_description"] = method_description(r.opts.how);
    prov["domains"] = r.domains;
    prov["consensus"] = r.opts.cons == consensus::minrank ? "minrank" : "sum";
    if (r.opts.how == method::random) {
        prov["seed"] = r.opts.seed;
        prov["share_method"] = method_name(r.share_method);
    }
    prov["protect_super"] = r.opts.protect_super;
    prov["super_threshold"] = r.super_threshold;
    auto refs = [](const std::vector<expert_ref> & v, bool with_value) {
        json j = json::array();
        for (const auto & x : v) {
            json e = {{"layer", x.layer}, {"expert", x.expert}};
            if (with_value) e["max_norm"] = x.value;
            j.push_back(e);
        }
        return j;
    };
    if (!super_not_kept.empty()) prov["super_experts_not_kept"] = refs(super_not_kept, true);
    prov["never_routed"] = refs(r.never_routed, false);
}

void record_receipts(plan & p, const receipts & rc) {
    provenance_object(p).update(receipts_json(rc));
}

void record_width(plan & p, const std::string & channel_score, const std::string & down_type, const width_rerank & rr) {
    json & prov = provenance_object(p);
    prov["channel_score"] = channel_score;
    if (!down_type.empty()) prov["down_type"] = down_type;
    json per_layer = json::array();
    for (double v : rr.spearman) per_layer.push_back(std::isnan(v) ? json() : json(v));
    prov["width_rerank"] = {{"statistic", "spearman(full-width saliency, saliency on the kept channels), per layer, kept experts"},
                            {"layers", rr.layers},
                            {"spearman", per_layer},
                            {"n_defined", rr.n_defined},
                            {"min", rr.n_defined ? json(rr.min) : json()},
                            {"median", rr.n_defined ? json(rr.median) : json()}};
}

namespace {

bool origin_fields(util::json_fields & f, plan_provenance & out) {
    if (f.has("saliency") && !f.child("saliency").opt_sha256("sha256", out.saliency_sha256)) return false;
    uint64_t v = 0;
    if (f.has("predicted_bytes")) {
        if (!f.u64("predicted_bytes", v)) return false;
        out.predicted_bytes = v;
    }
    if (f.has("predicted_shards")) {
        if (!f.u64("predicted_shards", v, UINT32_MAX)) return false;
        out.predicted_shards = v;
    }
    std::vector<std::pair<std::string, const json *>> req;
    if (!f.members("request", req)) return false;
    for (const auto & [key, value] : req) {
        if (key != "stamp") out.request.push_back({key, value->is_string() ? value->get<std::string>() : value->dump()});
    }
    if (f.has("request")) {
        util::json_fields r = f.child("request");
        if (r.has("stamp")) {
            bool stamp = true;
            if (!r.boolean("stamp", stamp)) return false;
            out.stamp = stamp;
        }
    }
    return true;
}

// An expert named by its layer and id, as the ranking's lists write it.
bool expert_entry(util::json_fields & f, const json & v, const char * key, bool with_norm, expert_ref & out) {
    util::json_fields e = f.nested(v, key);
    int64_t layer = 0;
    if (!e.i64("layer", layer, 0, INT32_MAX) || !e.i64("expert", out.expert, 0, INT64_MAX)) return false;
    out.layer = (int) layer;
    return !with_norm || e.opt_num("max_norm", out.value, 0, HUGE_VAL);
}

bool ranking_fields(util::json_fields & f, plan_provenance & out) {
    std::string consensus = "sum";
    if (!f.opt_str("method", out.method) || !f.opt_str("method_description", out.method_description) ||
        !f.opt_strings("domains", out.domains) || !f.opt_str("consensus", consensus)) {
        return false;
    }
    if (consensus != "sum" && consensus != "minrank") return f.fail("consensus", "must be \"sum\" or \"minrank\", not \"" + consensus + "\"");
    out.minrank = consensus == "minrank";
    if (f.has("seed")) {
        uint64_t seed = 0;
        if (!f.u64("seed", seed)) return false;
        out.seed = seed;
    }
    if (f.has("protect_super")) {
        bool protect = true;
        if (!f.boolean("protect_super", protect)) return false;
        out.protect_super = protect;
    }
    std::vector<const json *> dropped;
    if (!f.elements("super_experts_not_kept", dropped)) return false;
    for (const json * x : dropped) {
        expert_ref e;
        if (!expert_entry(f, *x, "super_experts_not_kept", true, e)) return false;
        out.super_not_kept.push_back(e);
    }
    return true;
}

bool width_fields(util::json_fields & f, plan_provenance & out) {
    if (!f.opt_str("channel_score", out.channel_score) || !f.opt_str("down_type", out.down_type)) return false;
    if (!f.has("width_rerank")) return true;
    util::json_fields r = f.child("width_rerank");
    plan_provenance::rerank_summary rr;
    if (!r.u64("n_defined", rr.n_defined)) return false;
    if (rr.n_defined == 0) return true;   // min and median are null: no layer defined the statistic
    if (!r.num("min", rr.min, -1, 1) || !r.num("median", rr.median, -1, 1)) return false;
    out.width_rerank = rr;
    return true;
}

// The receipts' totals: absent in plans made before them (and super experts
// without "kept" in plans made before that), a wrong type an error.
bool receipt_fields(util::json_fields & f, recorded_receipts & out) {
    if (f.has("safety_margin")) {
        util::json_fields m = f.child("safety_margin");
        const auto mn = m.object().find("min");
        if (mn != m.object().end() && mn->is_null()) {
            out.has_margin = out.margin_null = true;
        } else if (m.has("min")) {
            if (!m.i64("min", out.margin, 0, INT64_MAX) || !m.num("median", out.margin_median, 0, HUGE_VAL)) return false;
            out.has_margin = true;
        }
    }
    if (f.has("saliency_retained")) {
        util::json_fields r = f.child("saliency_retained");
        out.has_share = r.has("mean");
        if (!r.opt_num("mean", out.share_mean, 0, 1)) return false;
    }
    if (f.has("dead_experts")) {
        util::json_fields d = f.child("dead_experts");
        if (!d.i64("count", out.dead, 0, INT64_MAX) || !d.i64("kept", out.dead_kept, 0, out.dead)) return false;
        out.has_dead = true;
    }
    std::vector<const json *> super;
    if (!f.elements("super_experts", super)) return false;
    int64_t kept = 0;
    bool all_say = f.has("super_experts");
    for (const json * x : super) {
        util::json_fields e = f.nested(*x, "super_experts");
        if (!e.has("kept")) {
            all_say = false;   // a plan made before "kept" was recorded
            continue;
        }
        bool k = false;
        if (!e.boolean("kept", k)) return false;
        kept += k;
    }
    if (all_say) {
        out.has_super = true;
        out.super = (int64_t) super.size();
        out.super_kept = kept;
    }
    return true;
}

} // namespace

bool read_plan_provenance(const json & prov, const std::string & name, plan_provenance & out, std::string & err) {
    out = plan_provenance();
    if (prov.is_null()) return true;
    util::json_fields f(prov, "plan '" + name + "'", "provenance");
    if (!prov.is_object()) {
        f.fail("", "must be an object");
    } else if (origin_fields(f, out) && ranking_fields(f, out) && width_fields(f, out)) {
        receipt_fields(f, out.receipts);
    }
    if (!f.ok()) {
        err = f.error();
        return false;
    }
    return true;
}

} // namespace reap::planner

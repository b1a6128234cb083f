// A plan's provenance (provenance.h): the one writer of what plan and sweep
// record about a plan's origin, and the checked reader the model card uses.
#include "plan/provenance.h"

#include "util/json_fields.h"

namespace reap::planner {

using nlohmann::json;

void record_origin(plan & p, const plan_origin & o, const char * version) {
    json & prov = p.provenance;
    if (!prov.is_object()) prov = json::object();
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

namespace {

bool card_fields(util::json_fields & f, card_provenance & out) {
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
    if (f.has("saliency") && !f.child("saliency").opt_sha256("sha256", out.saliency_sha256)) return false;
    if (f.has("saliency_retained") && !f.child("saliency_retained").opt_num("mean", out.saliency_retained_mean, 0, 1)) return false;
    std::vector<std::pair<std::string, const json *>> req;
    if (!f.members("request", req)) return false;
    for (const auto & [key, v] : req) {
        if (key != "stamp") out.request.push_back({key, v->is_string() ? v->get<std::string>() : v->dump()});
    }
    return true;
}

} // namespace

bool read_size_provenance(const json & prov, const std::string & name, size_provenance & out, std::string & err) {
    out = size_provenance();
    util::json_fields f(prov, "plan '" + name + "'", "provenance");
    uint64_t v = 0;
    bool ok = f.opt_str("down_type", out.down_type);
    if (ok && f.has("predicted_bytes") && (ok = f.u64("predicted_bytes", v))) out.predicted_bytes = v;
    if (ok && f.has("predicted_shards") && (ok = f.u64("predicted_shards", v, UINT32_MAX))) out.predicted_shards = v;
    if (!ok) {
        err = f.error();
        return false;
    }
    if (f.has("request")) {
        util::json_fields r = f.child("request");
        bool stamp = true;
        if (r.has("stamp") && !r.boolean("stamp", stamp)) {
            err = r.error();
            return false;
        }
        if (r.has("stamp")) out.stamp = stamp;
    }
    return true;
}

bool read_card_provenance(const json & prov, const std::string & name, card_provenance & out, std::string & err) {
    out = card_provenance();
    util::json_fields f(prov, "plan '" + name + "'", "provenance");
    if (!card_fields(f, out)) {
        err = f.error();
        return false;
    }
    return true;
}

} // namespace reap::planner

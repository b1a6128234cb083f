// The sweep format (sweep_file.h): the one writer and the one checked reader
// of what `reap sweep -o` writes.
#include "formats/sweep_file.h"

#include "plan/planners.h"
#include "util/json_fields.h"
#include "util/text_escape.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <set>
#include <tuple>

namespace reap {

namespace {

using ojson = nlohmann::ordered_json;
using util::json_fields;

constexpr uint64_t k_max_sweep_bytes = 256ull << 20;
constexpr int64_t  k_max_sweep_experts = 1 << 24;
constexpr int64_t  k_max_shards = 99999;   // gguf-split's %05d
constexpr int64_t  k_max_sweep_width = 1 << 24;  // channels per expert

ojson optional_rate(const std::optional<double> & v) { return v ? ojson(*v) : ojson(nullptr); }

// A rate of version 1 (-1: not measured) or 2 (null).
bool read_rate(json_fields & f, const char * key, int version, std::optional<double> & out) {
    if (!f.has(key)) return f.ok();
    double v = 0;
    if (!f.num(key, v, version == 1 ? -1 : 0, 1)) return false;
    if (v >= 0) out = v;
    return true;
}

bool point_from_json(json_fields & q, const sweep_record & s, sweep_record_point & pt) {
    int64_t shards = 1;
    if (!q.i64("n_keep", pt.n_keep, 1, s.model.n_expert) || !q.u64("predicted_bytes", pt.predicted_bytes) ||
        !q.i64("predicted_shards", shards, 1, k_max_shards) || !q.num("removed_fraction", pt.removed_fraction, 0, 1) ||
        !q.num("saliency_share", pt.saliency_share, 0, 1) || !q.opt_i64("safety_margin", pt.safety_margin, 1, s.model.n_expert) ||
        !q.opt_num("safety_margin_median", pt.safety_margin_median, 1, (double) s.model.n_expert) || !q.opt_str("plan", pt.plan) ||
        !q.opt_i64("width", pt.width, 1, k_max_sweep_width) || !q.opt_str("method", pt.method)) {
        return false;
    }
    planner::method how;
    if (q.has("method") && !planner::parse_method(pt.method, how)) {
        return q.fail("method", "\"" + util::terminal_text(pt.method) + "\" is not a method reap plans with");
    }
    pt.predicted_shards = (uint32_t) shards;
    std::vector<std::pair<std::string, const nlohmann::json *>> req;
    if (!q.members("request", req)) return false;
    if (req.size() != 1 || (req[0].first != "keep" && req[0].first != "ratio" && req[0].first != "budget") || !req[0].second->is_string()) {
        return q.fail("request", "must be one of {\"keep\"|\"ratio\"|\"budget\": \"AS GIVEN\"}");
    }
    pt.request_kind = req[0].first;
    pt.request_text = req[0].second->get<std::string>();
    bool scored = false;
    if (!eval_metrics_from_json(q, "overall", pt.overall, scored)) return false;
    if (!scored) return q.fail("overall", "has no pruned-side numbers: a sweep point is always scored");
    if (!domain_metrics_from_json(q, pt.overall, pt.domains)) return false;
    return read_rate(q, "mtp_acceptance", s.version, pt.mtp_acceptance);
}

bool header_from_json(json_fields & f, sweep_record & s) {
    json_fields m = f.child("model");
    if (!f.ok() || !m.str("path", s.model.path) || !m.str("arch", s.model.arch) ||
        !m.i64("n_expert", s.model.n_expert, 1, k_max_sweep_experts) || !m.i64("n_expert_used", s.model.n_expert_used, 1, s.model.n_expert) ||
        !m.u64("moe_layers", s.model.moe_layers, 1u << 20) || !m.u64("file_bytes", s.model.file_bytes)) {
        return false;
    }
    if (s.version >= 2 ? !m.sha256("header_sha256", s.model.header_sha256) : !m.opt_sha256("header_sha256", s.model.header_sha256)) return false;
    json_fields sal = f.child("saliency");
    planner::method how;
    if (!f.ok() || !sal.str("file", s.saliency.file) || !sal.sha256("sha256", s.saliency.sha256) || !sal.str("method", s.saliency.method) ||
        !sal.opt_strings("domains", s.saliency.domains)) {
        return false;
    }
    if (!planner::parse_method(s.saliency.method, how)) return sal.fail("method", "\"" + s.saliency.method + "\" is not a method reap plans with");
    if (sal.has("second_file") && (!sal.str("second_file", s.saliency.second_file) || !sal.sha256("second_sha256", s.saliency.second_sha256))) {
        return false;
    }
    json_fields in = f.child("input");
    return f.ok() && in.str("file", s.input.file) && in.opt_i64("n_ctx", s.input.n_ctx, 0, INT32_MAX) &&
           in.opt_i64("n_batch", s.input.n_batch, 0, INT32_MAX) && in.opt_i64("n_ubatch", s.input.n_ubatch, 0, INT32_MAX) &&
           in.opt_u64("n_windows", s.input.n_windows) && in.opt_boolean("corpus", s.input.corpus) && f.opt_str("tool", s.tool);
}

// The "points" array of `f` (each (method, n_keep, width) once).
bool point_list_from_json(json_fields & f, const sweep_record & s, std::vector<sweep_record_point> & out) {
    std::vector<const nlohmann::json *> pts;
    if (!f.elements("points", pts)) return false;
    if (!f.has("points")) return f.fail("points", "is missing");
    std::set<std::tuple<std::string, int64_t, int64_t>> seen;
    for (size_t i = 0; i < pts.size(); ++i) {
        json_fields q = f.nested(*pts[i], "points[" + std::to_string(i) + "]");
        sweep_record_point pt;
        if (!point_from_json(q, s, pt)) return false;
        if (!seen.insert({pt.method, pt.n_keep, pt.width}).second) {
            return q.fail("n_keep", "= " + std::to_string(pt.n_keep) + (pt.width ? " at width " + std::to_string(pt.width) : "") +
                                        (pt.method.empty() ? "" : " by " + pt.method) + " is scored twice");
        }
        if (i > 0 && pt.method.empty() != out.front().method.empty()) {
            return q.fail("method", "is given for some points and not others: a sweep of several methods names every point's");
        }
        out.push_back(pt);
    }
    return true;
}

// Version 3: the reference, the sources and the frontier (recomputed from the
// sources; a file whose frontier says otherwise is refused).
bool sources_from_json(json_fields & f, sweep_record & out) {
    json_fields ref = f.child("reference");
    if (!f.ok() || !ref.opt_str("model", out.reference.model) || !ref.opt_str("kld_base", out.reference.kld_base)) return false;
    if (out.reference.model.empty() && out.reference.kld_base.empty()) return ref.fail("model", "and kld_base are both missing");
    std::vector<const nlohmann::json *> srcs;
    if (!f.elements("sources", srcs)) return false;
    if (srcs.empty()) return f.fail("sources", "is missing or empty");
    for (size_t i = 0; i < srcs.size(); ++i) {
        json_fields q = f.nested(*srcs[i], "sources[" + std::to_string(i) + "]");
        sweep_source src;
        if (!q.str("path", src.path) || !q.sha256("header_sha256", src.header_sha256) || !q.sha256("router_sha256", src.router_sha256) ||
            !q.u64("file_bytes", src.file_bytes) || !point_list_from_json(q, out, src.points)) {
            return false;
        }
        out.sources.push_back(std::move(src));
    }
    out.frontier = sweep_frontier(out.sources);
    std::vector<const nlohmann::json *> fr;
    if (!f.elements("frontier", fr)) return false;
    if (fr.size() != out.frontier.size()) {
        return f.fail("frontier", "has " + std::to_string(fr.size()) + " entries, the sources give " + std::to_string(out.frontier.size()));
    }
    for (size_t i = 0; i < fr.size(); ++i) {
        json_fields q = f.nested(*fr[i], "frontier[" + std::to_string(i) + "]");
        json_fields best = q.child("best");
        std::string path;
        int64_t n_keep = 0;
        if (!q.ok() || !best.str("source", path) || !best.i64("n_keep", n_keep, 1, out.model.n_expert)) return false;
        const sweep_frontier_point & want = out.frontier[i].best;
        if (path != out.sources[want.source].path || n_keep != want.n_keep) {
            return best.fail("source", "'" + path + "' N = " + std::to_string(n_keep) + " is not the best point of the sources ('" +
                                           out.sources[want.source].path + "' N = " + std::to_string(want.n_keep) + ")");
        }
    }
    return true;
}

bool behaviour_from_json(json_fields & f, sweep_record & s);

// Width cuts come from one source scored by KLD (`reap sweep --widths` refuses
// the rest): the frontier of several sources compares them per request, not
// per (request, width), and the behaviour sections name their models "keep N"
// only, so either with a width point would be read as another point's.
bool widths_representable(json_fields & f, const sweep_record & s) {
    bool widths = sweep_has_widths(s);
    for (const auto & src : s.sources) {
        for (const auto & pt : src.points) widths = widths || pt.width > 0;
    }
    if (sweep_has_methods(s)) {
        if (widths) return f.fail("points", "hold width cuts and methods: reap sweep --methods cuts experts only");
        if (!s.sources.empty()) return f.fail("sources", "are beside methods: reap sweep --methods scores one source");
        if (s.needle || s.generate || s.choice) {
            return f.fail("points", "name methods beside a behaviour section, whose models are named \"keep N\" only");
        }
    }
    if (!widths) return true;
    if (!s.sources.empty()) {
        return f.fail("sources", "hold width cuts: a sweep of several sources compares them per request, not per width "
                                 "(reap sweep --widths scores one source)");
    }
    if (s.needle || s.generate) {
        return f.fail(s.needle ? "needle" : "generate", "is beside width cuts: its models are named \"keep N\" only, so a "
                                                        "width cut's numbers cannot be told from the full width's");
    }
    return true;
}

// Everything after "format": the version, the header, the points, the sources (version 3).
bool points_from_json(json_fields & f, sweep_record & out) {
    int64_t version = 0;
    if (!f.i64("version", version, 1, k_sweep_version)) return false;
    out.version = (int) version;
    if (!header_from_json(f, out) || !read_rate(f, "mtp_base_acceptance", out.version, out.mtp_base_acceptance)) return false;
    if (!point_list_from_json(f, out, out.points) || !behaviour_from_json(f, out)) return false;
    if (out.version >= 3 && !sources_from_json(f, out)) return false;
    return widths_representable(f, out);
}

ojson point_to_json(const sweep_record_point & pt, bool mtp) {
    ojson q;
    q["n_keep"]               = pt.n_keep;
    if (pt.width > 0) q["width"] = pt.width;
    if (!pt.method.empty()) q["method"] = pt.method;
    q["request"]              = {{pt.request_kind, pt.request_text}};
    q["removed_fraction"]     = pt.removed_fraction;
    q["predicted_bytes"]      = pt.predicted_bytes;
    q["predicted_shards"]     = pt.predicted_shards;
    q["saliency_share"]       = pt.saliency_share;
    q["safety_margin"]        = pt.safety_margin > 0 ? ojson(pt.safety_margin) : ojson(nullptr);
    q["safety_margin_median"] = pt.safety_margin > 0 ? ojson(pt.safety_margin_median) : ojson(nullptr);
    if (!pt.plan.empty()) q["plan"] = pt.plan;
    q["overall"]              = eval_metrics_json(pt.overall);
    ojson d = ojson::object();
    for (const auto & [name, m] : pt.domains) d[name] = eval_metrics_json(m, m.n_tokens > 0);
    q["domains"] = d;
    if (mtp) q["mtp_acceptance"] = optional_rate(pt.mtp_acceptance);
    return q;
}

// A point's behaviour numbers (sweep_behaviour_of), as the point repeats them.
void point_behaviour_json(const sweep_record & s, const sweep_record_point & pt, ojson & q) {
    const sweep_point_behaviour b = sweep_behaviour_of(s, pt.n_keep);
    if (b.needle_model) q["needle"] = {{"n_exact", b.n_exact}, {"n_cells", b.n_cells}};
    if (b.generate_model) {
        const generation_stats & g = b.generation;
        q["generate"] = {{"loop_rate", g.loop_rate}, {"termination_rate", g.termination_rate}, {"distinct_4", g.distinct_4},
                         {"mean_length", g.mean_length}, {"mean_agreement", g.mean_agreement}};
    }
}

// The sections of a behaviour sweep: a model "keep N" for every point, and
// what each point states equal to what its model's texts and tokens give.
bool behaviour_from_json(json_fields & f, sweep_record & s) {
    if (f.has("choice")) {
        json_fields c = f.child("choice");
        std::string e;
        if (!f.ok()) return false;
        if (!choice_section_from_json(c, s.choice.emplace(), e)) return f.fail("choice", e);
        for (size_t i = 0; i < s.points.size(); ++i) {
            const std::string name = sweep_point_name(s.points[i].n_keep);
            bool found = false;
            for (const auto & m : s.choice->report.models) found = found || (m.masked && m.name == name);
            if (!found) return f.fail("choice", "has no model '" + name + "' for the sweep's point " + std::to_string(i));
        }
    }
    if (f.has("needle")) {
        json_fields n = f.child("needle");
        if (!f.ok() || !needle_section_from_json(n, s.needle.emplace())) return false;
    }
    if (f.has("generate")) {
        json_fields g = f.child("generate");
        if (!f.ok() || !generate_section_from_json(g, s.generate.emplace())) return false;
    }
    std::vector<const nlohmann::json *> pts;
    if (!f.elements("points", pts)) return false;
    for (size_t i = 0; i < s.points.size() && i < pts.size(); ++i) {
        json_fields q = f.nested(*pts[i], "points[" + std::to_string(i) + "]");
        const sweep_point_behaviour b = sweep_behaviour_of(s, s.points[i].n_keep);
        const std::string name = sweep_point_name(s.points[i].n_keep);
        if ((s.needle && !b.needle_model) || (s.generate && !b.generate_model)) {
            return q.fail("n_keep", "has no model '" + name + "' in the sweep's " + (s.needle && !b.needle_model ? "needle" : "generate") + " section");
        }
        if (b.needle_model) {
            json_fields n = q.child("needle");
            uint64_t exact = 0, cells = 0;
            if (!q.ok() || !n.u64("n_exact", exact) || !n.u64("n_cells", cells)) return false;
            if (exact != b.n_exact || cells != b.n_cells) {
                return n.fail("n_exact", "says " + std::to_string(exact) + "/" + std::to_string(cells) + "; the needle section's answers for '" +
                                             name + "' give " + std::to_string(b.n_exact) + "/" + std::to_string(b.n_cells));
            }
        }
        if (b.generate_model) {
            json_fields g = q.child("generate");
            const generation_stats & w = b.generation;
            const std::pair<const char *, double> stated[] = {{"loop_rate", w.loop_rate}, {"termination_rate", w.termination_rate},
                {"distinct_4", w.distinct_4}, {"mean_length", w.mean_length}, {"mean_agreement", w.mean_agreement}};
            for (const auto & [key, want] : stated) {
                double v = 0;
                if (!q.ok() || !g.num(key, v, 0, 1e12)) return false;
                if (std::fabs(v - want) > 1e-9 * std::max(1.0, want)) {
                    return g.fail(key, "is " + std::to_string(v) + "; the generate section's outputs for '" + name + "' give " + std::to_string(want));
                }
            }
        }
    }
    return true;
}

ojson point_list_json(const std::vector<sweep_record_point> & pts, bool mtp) {
    ojson a = ojson::array();
    for (const auto & pt : pts) a.push_back(point_to_json(pt, mtp));
    return a;
}

// Better in the frontier's order: lower KLD mean, then higher top-1, then fewer bytes.
bool better(const sweep_frontier_point & a, const sweep_frontier_point & b) {
    if (a.kld_mean != b.kld_mean) return a.kld_mean < b.kld_mean;
    if (a.top1 != b.top1) return a.top1 > b.top1;
    return a.bytes < b.bytes;
}

ojson frontier_point_json(const std::vector<sweep_source> & sources, const sweep_frontier_point & p) {
    return {{"source", sources[p.source].path}, {"n_keep", p.n_keep}, {"bytes", p.bytes}, {"kld_mean", p.kld_mean}, {"top1", p.top1}};
}

} // namespace

ojson sweep_to_json(const sweep_record & s) {
    ojson j;
    j["format"]  = k_sweep_format;
    j["version"] = k_sweep_version_one_source;
    j["tool"]    = s.tool;
    j["model"]   = {{"path", s.model.path}, {"arch", s.model.arch}, {"header_sha256", s.model.header_sha256},
                    {"n_expert", s.model.n_expert}, {"n_expert_used", s.model.n_expert_used},
                    {"moe_layers", s.model.moe_layers}, {"file_bytes", s.model.file_bytes}};
    j["saliency"] = {{"file", s.saliency.file}, {"sha256", s.saliency.sha256}, {"method", s.saliency.method},
                     {"domains", s.saliency.domains}};
    if (!s.saliency.second_file.empty()) {
        j["saliency"]["second_file"] = s.saliency.second_file;
        j["saliency"]["second_sha256"] = s.saliency.second_sha256;
    }
    j["input"]   = {{"file", s.input.file},         {"n_ctx", s.input.n_ctx},         {"n_batch", s.input.n_batch},
                   {"n_ubatch", s.input.n_ubatch}, {"n_windows", s.input.n_windows}, {"corpus", s.input.corpus}};
    if (s.mtp_base_acceptance) j["mtp_base_acceptance"] = *s.mtp_base_acceptance;
    j["points"] = point_list_json(s.points, s.mtp_base_acceptance.has_value());
    for (size_t i = 0; i < s.points.size(); ++i) point_behaviour_json(s, s.points[i], j["points"][i]);
    if (s.needle) j["needle"] = needle_section_json(*s.needle);
    if (s.generate) j["generate"] = generate_section_json(*s.generate);
    if (s.choice) j["choice"] = choice_section_to_json(*s.choice);
    if (s.sources.empty()) return j;
    j["version"] = k_sweep_version;
    j["reference"] = {{"model", s.reference.model}, {"kld_base", s.reference.kld_base}};
    ojson sources = ojson::array();
    for (const auto & src : s.sources) {
        sources.push_back({{"path", src.path}, {"header_sha256", src.header_sha256}, {"router_sha256", src.router_sha256},
                           {"file_bytes", src.file_bytes}, {"points", point_list_json(src.points, s.mtp_base_acceptance.has_value())}});
    }
    j["sources"] = sources;
    ojson frontier = ojson::array();
    for (const auto & e : sweep_frontier(s.sources)) {
        ojson q;
        q["request"] = {{e.request_kind, e.request_text}};
        q["best"] = frontier_point_json(s.sources, e.best);
        q["runner_up"] = e.runner_up ? frontier_point_json(s.sources, *e.runner_up) : ojson(nullptr);
        q["kld_margin"] = e.runner_up ? ojson(e.runner_up->kld_mean - e.best.kld_mean) : ojson(nullptr);
        q["top1_margin"] = e.runner_up ? ojson(e.best.top1 - e.runner_up->top1) : ojson(nullptr);
        frontier.push_back(q);
    }
    j["frontier"] = frontier;
    return j;
}

std::string sweep_point_name(int64_t n_keep, int64_t width, const std::string & method) {
    return (method.empty() ? "" : method + " ") + "keep " + std::to_string(n_keep) + (width > 0 ? " width " + std::to_string(width) : "");
}

bool sweep_has_methods(const sweep_record & s) { return !s.points.empty() && !s.points.front().method.empty(); }

std::vector<std::string> sweep_methods(const sweep_record & s) {
    std::vector<std::string> v;
    for (const auto & pt : s.points) {
        if (!pt.method.empty() && std::find(v.begin(), v.end(), pt.method) == v.end()) v.push_back(pt.method);
    }
    return v;
}

bool sweep_has_widths(const sweep_record & s) {
    for (const auto & pt : s.points) {
        if (pt.width > 0) return true;
    }
    return false;
}

sweep_point_behaviour sweep_behaviour_of(const sweep_record & s, int64_t n_keep) {
    sweep_point_behaviour b;
    const std::string name = sweep_point_name(n_keep);
    if (s.needle) {
        const auto & ms = s.needle->report.models;
        for (size_t m = 1; m < ms.size() && !b.needle_model; ++m) {
            if (ms[m].name != name) continue;
            b.needle_model = m;
            b.n_exact = ms[m].n_exact();
            b.n_cells = s.needle->report.cells.size();
        }
    }
    if (s.generate) {
        const auto & ms = s.generate->report.models;
        for (size_t m = 1; m < ms.size() && !b.generate_model; ++m) {
            if (ms[m].name != name) continue;
            b.generate_model = m;
            b.generation = s.generate->report.stats(m, -1);
        }
    }
    return b;
}

std::vector<sweep_frontier_entry> sweep_frontier(const std::vector<sweep_source> & sources) {
    std::vector<sweep_frontier_entry> out;
    if (sources.empty()) return out;
    for (const sweep_record_point & req : sources[0].points) {
        sweep_frontier_entry e;
        e.request_kind = req.request_kind;
        e.request_text = req.request_text;
        std::vector<sweep_frontier_point> cands;
        for (size_t i = 0; i < sources.size(); ++i) {
            for (const sweep_record_point & pt : sources[i].points) {
                if (pt.request_kind != req.request_kind || pt.request_text != req.request_text) continue;
                cands.push_back({i, pt.n_keep, pt.predicted_bytes, pt.overall.kld_mean, pt.overall.argmax_agree});
                break;
            }
        }
        std::stable_sort(cands.begin(), cands.end(), better);
        e.best = cands[0];
        if (cands.size() > 1) e.runner_up = cands[1];
        out.push_back(e);
    }
    return out;
}

bool sweep_from_json(const nlohmann::json & j, const std::string & name, sweep_record & out, std::string & err) {
    out = sweep_record();
    json_fields f(j, "sweep '" + name + "'");
    int64_t version = 0;   // points_from_json reads it into out
    if (!f.header(k_sweep_format, "a reap sweep", k_sweep_version, version) || !points_from_json(f, out)) {
        err = f.error();
        return false;
    }
    return true;
}

bool read_sweep(const std::string & path, sweep_record & out, std::string & err) {
    nlohmann::json j;
    return util::read_json_file(path, "sweep", k_max_sweep_bytes, j, err) && sweep_from_json(j, path, out, err);
}

} // namespace reap

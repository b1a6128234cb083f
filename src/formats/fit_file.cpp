// reap fit's gates.json and fit.json, typed. See fit_file.h.
#include "formats/fit_file.h"

#include "plan/planners.h"
#include "util/json.h"
#include "util/json_fields.h"

#include <cmath>
#include <set>

namespace reap {

using json = nlohmann::json;
using util::json_fields;

namespace {

// Far above any fit's: a space of thousands of candidates is a few MB.
constexpr uint64_t k_max_fit_file_bytes = 64ull << 20;

bool measure_from(json_fields & f, fit_gate_measure & m) {
    uint64_t exact = 0, cells = 0;
    if (!f.u64("needle_exact", exact) || !f.u64("needle_cells", cells) || !f.num("loop_rate", m.loop_rate, 0, 1) ||
        !f.num("termination_rate", m.termination_rate, 0, 1)) {
        return false;
    }
    if (exact > cells) return f.fail("needle_exact", "= " + std::to_string(exact) + " is more than needle_cells " + std::to_string(cells));
    m.n_exact = (size_t) exact;
    m.n_cells = (size_t) cells;
    std::vector<const json *> flags;
    if (!f.elements("task_correct", flags)) return false;
    for (size_t i = 0; i < flags.size(); ++i) {
        if (!flags[i]->is_number_unsigned() || flags[i]->get<uint64_t>() > 1) {
            return f.fail("task_correct", "[" + std::to_string(i) + "] = " + flags[i]->dump() + " is not 0 or 1");
        }
        m.task_correct.push_back((uint8_t) flags[i]->get<uint64_t>());
    }
    double accuracy = m.task_accuracy();
    if (!f.opt_num("task_accuracy", accuracy, 0, 1)) return false;
    if (std::fabs(accuracy - m.task_accuracy()) > 1e-12) {
        return f.fail("task_accuracy", "does not follow from task_correct (" + std::to_string(m.task_accuracy()) + ")");
    }
    return true;
}

bool candidate_index(json_fields & f, const char * key, size_t n_candidates, size_t & out) {
    uint64_t v = 0;
    if (!f.u64(key, v)) return false;
    if (v >= n_candidates) {
        return f.fail(key, "= " + std::to_string(v) + " names no candidate (" + std::to_string(n_candidates) + " in the space)");
    }
    out = (size_t) v;
    return true;
}

// A verdict: its measures, the candidate it is of, and why it failed.
bool verdict_from(json_fields & v, size_t n_candidates, bool has_passed, fit_gate_verdict & g) {
    if (!candidate_index(v, "candidate", n_candidates, g.candidate) || !measure_from(v, g.m)) return false;
    if (!v.opt_str("why", g.why)) return false;
    g.pass = g.why.empty();
    bool passed = g.pass;
    if (has_passed && !v.boolean("passed", passed)) return false;
    if (passed != g.pass) return v.fail("passed", passed ? "is true, but it has a why" : "is false, but it has no why");
    return true;
}

bool verdicts_from(json_fields & f, const char * key, size_t n_candidates, bool has_passed, std::vector<fit_gate_verdict> & out) {
    std::vector<const json *> items;
    if (!f.elements(key, items)) return false;
    for (size_t i = 0; i < items.size(); ++i) {
        json_fields v = f.nested(*items[i], std::string(key) + "[" + std::to_string(i) + "]");
        fit_gate_verdict g;
        if (!verdict_from(v, n_candidates, has_passed, g)) return false;
        out.push_back(g);
    }
    return true;
}

json verdict_json(const fit_gate_verdict & g, bool with_passed) {
    json v = fit_gate_measure_json(g.m);
    v["candidate"] = g.candidate;
    if (with_passed) {
        v["passed"] = g.pass;
        if (!g.pass) v["why"] = g.why;
    } else {
        v["why"] = g.why;
    }
    return v;
}

bool read_doc(const std::string & path, const char * what, json & doc, std::string & err) {
    return util::read_json_file(path, what, k_max_fit_file_bytes, doc, err);
}

json score_json(const planner::fit_score & sc) {
    return {{"kld_mean", sc.kld}, {"kld_halves", {sc.kld_half[0], sc.kld_half[1]}}, {"top1", sc.top1}};
}

bool score_from(json_fields & c, planner::fit_score & sc) {
    std::vector<const json *> halves;
    if (!c.num("kld_mean", sc.kld, -1e-6, 1e9) || !c.num("top1", sc.top1, 0, 1) || !c.elements("kld_halves", halves)) return false;
    if (halves.size() != 2 || !halves[0]->is_number() || !halves[1]->is_number()) return c.fail("kld_halves", "must be two numbers");
    sc.kld_half[0] = halves[0]->get<double>();
    sc.kld_half[1] = halves[1]->get<double>();
    return true;
}

bool candidates_from(json_fields & f, fit_record & r) {
    std::vector<const json *> items;
    if (!f.elements("candidates", items)) return false;
    for (size_t i = 0; i < items.size(); ++i) {
        json_fields c = f.nested(*items[i], "candidates[" + std::to_string(i) + "]");
        fit_record_candidate x;
        if (!c.str("source", x.source) || !c.i64("n_keep", x.n_keep, 1, INT64_MAX) || !c.i64("width", x.width, 1, INT64_MAX) ||
            !c.u64("bytes", x.bytes)) {
            return false;
        }
        std::string from = "mask";
        if (!c.opt_str("scored_from", from)) return false;
        if (from != "mask" && from != "file") return c.fail("scored_from", "= '" + from + "' is neither 'mask' nor 'file'");
        x.written = from == "file";
        if (c.has("kld_mean")) {
            planner::fit_score sc;
            if (!score_from(c, sc)) return false;
            x.score = sc;
        }
        r.candidates.push_back(std::move(x));
    }
    std::vector<const json *> excluded;
    if (!f.elements("excluded_by_budget", excluded)) return false;
    for (size_t i = 0; i < excluded.size(); ++i) {
        json_fields e = f.nested(*excluded[i], "excluded_by_budget[" + std::to_string(i) + "]");
        fit_record_excluded x;
        if (!e.str("source", x.source) || !e.i64("width", x.width, 1, INT64_MAX) || !e.str("why", x.why)) return false;
        r.excluded.push_back(std::move(x));
    }
    return true;
}

bool gates_from(json_fields & f, size_t n, fit_record & r) {
    if (!f.has("gates")) return true;
    json_fields g = f.child("gates");
    fit_record_gates x;
    json_fields ref = g.child("reference");
    if (!g.str("settings", x.settings) || !measure_from(ref, x.reference) || !verdicts_from(g, "verdicts", n, true, x.verdicts)) {
        return false;
    }
    if (g.has("best_by_kld")) {
        size_t b = 0;
        if (!candidate_index(g, "best_by_kld", n, b)) return false;
        x.best_by_kld = b;
    }
    r.gates = std::move(x);
    return true;
}

json methods_json(const fit_methods_doc & d) {
    json scores = json::array();
    for (const fit_method_score & m : d.scores) {
        json e = {{"method", m.method}, {"archive", m.archive}, {"n_keep", m.n_keep}, {"bytes", m.bytes}};
        e.update(score_json(m.score));
        scores.push_back(e);
    }
    json j = {{"scores", scores}, {"chosen", d.chosen}, {"noise", d.noise}};
    if (d.runner_up) j["runner_up"] = *d.runner_up;
    return j;
}

bool methods_from(json_fields & f, fit_methods_doc & out) {
    std::vector<const json *> items;
    if (!f.elements("scores", items)) return false;
    if (items.empty()) return f.fail("scores", "is empty");
    std::set<std::string> seen;
    for (size_t i = 0; i < items.size(); ++i) {
        json_fields c = f.nested(*items[i], "scores[" + std::to_string(i) + "]");
        fit_method_score m;
        planner::method how;
        if (!c.str("method", m.method) || !c.str("archive", m.archive) || !c.i64("n_keep", m.n_keep, 1, INT64_MAX) ||
            !c.u64("bytes", m.bytes) || !score_from(c, m.score)) {
            return false;
        }
        if (!planner::parse_method(m.method, how)) return c.fail("method", "'" + m.method + "' is not a method reap plans with");
        if (!seen.insert(m.method).second) return c.fail("method", "'" + m.method + "' is listed twice");
        out.scores.push_back(std::move(m));
    }
    int64_t chosen = 0, runner = 0;
    if (!f.i64("chosen", chosen, 0, (int64_t) items.size() - 1) || !f.num("noise", out.noise, 0, 1e9)) return false;
    out.chosen = (size_t) chosen;
    if (f.has("runner_up")) {
        if (!f.i64("runner_up", runner, 0, (int64_t) items.size() - 1)) return false;
        out.runner_up = (size_t) runner;
    }
    return true;
}

} // namespace

std::string fit_methods_text(const fit_methods_doc & d) {
    json j = {{"format", k_fit_methods_format}, {"version", k_fit_methods_version}};
    j.update(methods_json(d));
    return util::json_text(j, 2) + "\n";
}

bool read_fit_methods(const std::string & path, fit_methods_doc & out, std::string & err) {
    out = fit_methods_doc();
    json doc;
    if (!read_doc(path, "fit methods file", doc, err)) return false;
    json_fields f(doc, "fit methods file '" + path + "'");
    int64_t version = 0;
    if (!f.header(k_fit_methods_format, "reap fit's methods file", k_fit_methods_version, version) || !methods_from(f, out)) {
        err = f.error();
        return false;
    }
    return true;
}

double fit_gate_measure::task_accuracy() const {
    size_t n = 0;
    for (uint8_t c : task_correct) n += c;
    return task_correct.empty() ? 0 : (double) n / (double) task_correct.size();
}

json fit_gate_measure_json(const fit_gate_measure & m) {
    json j = {{"needle_exact", m.n_exact}, {"needle_cells", m.n_cells}, {"loop_rate", m.loop_rate},
              {"termination_rate", m.termination_rate}};
    if (!m.task_correct.empty()) j["task_accuracy"] = m.task_accuracy(), j["task_correct"] = m.task_correct;
    return j;
}

std::string fit_gates_text(const fit_gates_doc & d) {
    json j = {{"format", k_fit_gates_format}, {"version", k_fit_gates_version}, {"base", fit_gate_measure_json(d.base)}};
    json vs = json::array();
    for (const fit_gate_verdict & g : d.verdicts) vs.push_back(verdict_json(g, false));
    j["verdicts"] = vs;
    return util::json_text(j, 2) + "\n";
}

bool read_fit_gates(const std::string & path, size_t n_candidates, fit_gates_doc & out, std::string & err) {
    out = fit_gates_doc();
    json doc;
    if (!read_doc(path, "fit gates file", doc, err)) return false;
    json_fields f(doc, "fit gates file '" + path + "'");
    int64_t version = 0;
    json_fields base = f.child("base");
    if (!f.header(k_fit_gates_format, "reap fit's gates file", k_fit_gates_version, version) || !measure_from(base, out.base) ||
        !verdicts_from(f, "verdicts", n_candidates, false, out.verdicts)) {
        err = f.error();
        return false;
    }
    return true;
}

std::string fit_record_text(const fit_record & r) {
    json j = {{"format", k_fit_record_format}, {"version", k_fit_record_version}, {"tool", r.tool}};
    j["budget"] = {{"text", r.budget_text}, {"bytes", r.budget}};
    j["sources"] = r.sources;
    j["reference"] = r.reference;
    j["heldout"] = r.heldout;
    j["saliency"] = {{"file", r.saliency_file}, {"sha256", r.saliency_sha256}};
    json cands = json::array();
    for (const fit_record_candidate & c : r.candidates) {
        json e = {{"source", c.source}, {"n_keep", c.n_keep}, {"width", c.width}, {"bytes", c.bytes}};
        if (c.score) e.update(score_json(*c.score));
        if (c.score && c.written) e["scored_from"] = "file";
        cands.push_back(e);
    }
    j["candidates"] = cands;
    json ex = json::array();
    for (const fit_record_excluded & x : r.excluded) ex.push_back({{"source", x.source}, {"width", x.width}, {"why", x.why}});
    j["excluded_by_budget"] = ex;
    j["passes"] = {{"scored", r.passes_scored}, {"full_grid", r.full_grid}, {"space", r.candidates.size()}, {"reference", 1}};
    j["stop_reason"] = r.stop_reason;
    j["noise"] = r.noise;
    j["winner"] = r.winner;
    if (r.runner_up) j["runner_up"] = *r.runner_up;
    if (r.gates) {
        json v = json::array();
        for (const fit_gate_verdict & g : r.gates->verdicts) v.push_back(verdict_json(g, true));
        j["gates"] = {{"settings", r.gates->settings}, {"reference", fit_gate_measure_json(r.gates->reference)}, {"verdicts", v}};
        if (r.gates->best_by_kld) j["gates"]["best_by_kld"] = *r.gates->best_by_kld;
    }
    if (r.methods) j["methods"] = methods_json(*r.methods);
    j["build"] = {{"plan", r.build.plan}, {"file", r.build.file}, {"bytes", r.build.bytes}, {"eval", r.build.eval},
                  {"kld_mean", r.build.kld_mean}, {"top1", r.build.top1}, {"card", r.build.card}};
    return util::json_text(j, 2) + "\n";
}

bool read_fit_record(const std::string & path, fit_record & out, std::string & err) {
    out = fit_record();
    json doc;
    if (!read_doc(path, "fit record", doc, err)) return false;
    json_fields f(doc, "fit record '" + path + "'");
    int64_t version = 0;
    json_fields budget = f.child("budget"), sal = f.child("saliency"), passes = f.child("passes"), build = f.child("build");
    uint64_t space = 0, reference_passes = 0;
    bool ok = f.header(k_fit_record_format, "reap fit's record", k_fit_record_version, version) && f.str("tool", out.tool) &&
              budget.str("text", out.budget_text) && budget.u64("bytes", out.budget) && f.opt_strings("sources", out.sources) &&
              f.str("reference", out.reference) && f.str("heldout", out.heldout) && sal.str("file", out.saliency_file) &&
              sal.sha256("sha256", out.saliency_sha256) && candidates_from(f, out) && passes.u64("scored", out.passes_scored) &&
              passes.u64("full_grid", out.full_grid) && passes.u64("space", space) && passes.u64("reference", reference_passes, 1) &&
              f.str("stop_reason", out.stop_reason) && f.num("noise", out.noise, 0, 1e9);
    const size_t n = out.candidates.size();
    ok = ok && candidate_index(f, "winner", n, out.winner) && gates_from(f, n, out) && build.str("plan", out.build.plan) &&
         build.str("file", out.build.file) && build.u64("bytes", out.build.bytes) && build.str("eval", out.build.eval) &&
         build.num("kld_mean", out.build.kld_mean, -1e-6, 1e9) && build.num("top1", out.build.top1, 0, 1) && build.str("card", out.build.card);
    if (ok && f.has("runner_up")) {
        size_t r = 0;
        ok = candidate_index(f, "runner_up", n, r);
        out.runner_up = r;
    }
    if (ok && f.has("methods")) {
        json_fields m = f.child("methods");
        out.methods.emplace();
        ok = f.ok() && methods_from(m, *out.methods);
    }
    if (ok && out.sources.empty()) ok = f.fail("sources", "is empty");
    if (ok && space != n) ok = passes.fail("space", "= " + std::to_string(space) + ", but there are " + std::to_string(n) + " candidates");
    if (ok && !out.candidates[out.winner].score) ok = f.fail("winner", "names a candidate the search did not score");
    if (!ok) err = f.error();
    return ok;
}

} // namespace reap

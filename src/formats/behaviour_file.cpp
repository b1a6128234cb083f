// The behaviour format (behaviour_file.h): the one writer and the one checked
// reader of what `reap eval --needle / --generate --json` writes.
#include "formats/behaviour_file.h"

#include <cmath>
#include <map>

namespace reap {

namespace {

using ojson = nlohmann::ordered_json;
using util::json_fields;

constexpr uint64_t k_max_behaviour_bytes = 256ull << 20;

ojson receipts_json(const behaviour_receipts & m) {
    ojson j;
    j["input"] = {{"file", m.input_path}, {"sha256", m.input_sha256}};
    j["base"] = {{"file", m.base_path}, {"bytes", m.base_bytes}, {"header_sha256", m.base_sha256}};
    if (!m.base_files_sha256.empty()) j["base"]["files_sha256"] = m.base_files_sha256;
    j["base_mask"] = m.base_mask.empty() ? ojson(nullptr)
                                         : ojson{{"file", m.base_mask}, {"bytes", m.base_mask_bytes}, {"sha256", m.base_mask_sha256}};
    j["candidates"] = ojson::array();
    for (const auto & c : m.candidates) {
        ojson jc = {{"name", c.name}, {"masked", c.masked}};
        if (c.masked) {
            jc["plan_bytes"] = c.plan_bytes;
            jc["plan_sha256"] = c.plan_sha256;
        } else {
            jc["files"] = file_ids_json(c.files);
        }
        j["candidates"].push_back(jc);
    }
    return j;
}

// "measured" of a section (absent: an older file, nothing recorded).
bool receipts_from_json(json_fields & f, behaviour_receipts & m) {
    if (!f.has("measured")) return f.ok();
    json_fields j = f.child("measured");
    json_fields in = j.child("input");
    json_fields base = j.child("base");
    if (!j.ok() || !in.str("file", m.input_path) || !in.sha256("sha256", m.input_sha256) || !base.str("file", m.base_path) ||
        !base.u64("bytes", m.base_bytes) || !base.sha256("header_sha256", m.base_sha256) ||
        !base.opt_sha256("files_sha256", m.base_files_sha256)) {
        return false;
    }
    if (j.has("base_mask")) {
        json_fields bm = j.child("base_mask");
        if (!bm.str("file", m.base_mask) || !bm.u64("bytes", m.base_mask_bytes) || !bm.sha256("sha256", m.base_mask_sha256)) return false;
    }
    std::vector<const nlohmann::json *> cands;
    if (!j.elements("candidates", cands)) return false;
    for (size_t i = 0; i < cands.size(); ++i) {
        json_fields c = j.nested(*cands[i], "candidates[" + std::to_string(i) + "]");
        behaviour_receipts::candidate bc;
        if (!c.str("name", bc.name) || !c.boolean("masked", bc.masked)) return false;
        if (bc.masked ? !c.u64("plan_bytes", bc.plan_bytes) || !c.sha256("plan_sha256", bc.plan_sha256)
                      : !file_ids_from_json(c, "files", bc.files)) {
            return false;
        }
        if (!bc.masked && bc.files.empty()) return c.fail("files", "is missing or empty: a pruned model has at least one file");
        m.candidates.push_back(std::move(bc));
    }
    return true;
}

// The receipts name the report's models, in order.
bool receipts_name_models(json_fields & f, const behaviour_receipts & m, const std::vector<std::pair<std::string, bool>> & models) {
    if (!m.recorded()) return true;
    if (m.candidates.size() + 1 != models.size()) {
        return f.fail("measured.candidates", "names " + std::to_string(m.candidates.size()) + " models, the report has " +
                                                 std::to_string(models.size() ? models.size() - 1 : 0) + " besides the base");
    }
    for (size_t i = 0; i < m.candidates.size(); ++i) {
        if (m.candidates[i].name != models[i + 1].first || m.candidates[i].masked != models[i + 1].second) {
            return f.fail("measured.candidates", "[" + std::to_string(i) + "] is '" + m.candidates[i].name + "', the report's model " +
                                                     std::to_string(i + 1) + " is '" + models[i + 1].first + "'");
        }
    }
    return true;
}

// A decoded token id: an integer that fits int32.
bool token_list(json_fields & f, const char * key, std::vector<int32_t> & out) {
    std::vector<const nlohmann::json *> toks;
    if (!f.elements(key, toks)) return false;
    if (!f.has(key)) return f.fail(key, "is missing");
    for (const auto * t : toks) {
        if (!t->is_number_integer() || t->get<int64_t>() < 0 || t->get<int64_t>() > INT32_MAX) {
            return f.fail(key, "holds " + t->dump() + ", not a token id");
        }
        out.push_back((int32_t) t->get<int64_t>());
    }
    return true;
}

// A statistic the file states against the one recomputed from its tokens.
bool same_stat(json_fields & s, const char * key, double want) {
    double v = 0;
    if (!s.num(key, v, 0, 1e12)) return false;
    if (std::fabs(v - want) > 1e-9 * std::max(1.0, std::fabs(want))) {
        return s.fail(key, "is " + std::to_string(v) + "; its outputs give " + std::to_string(want));
    }
    return true;
}

bool stats_match(json_fields & s, const generation_stats & g) {
    uint64_t n = 0;
    if (!s.u64("outputs", n)) return false;
    if (n != g.n_outputs) return s.fail("outputs", "is " + std::to_string(n) + "; there are " + std::to_string(g.n_outputs));
    return same_stat(s, "loop_rate", g.loop_rate) && same_stat(s, "termination_rate", g.termination_rate) &&
           same_stat(s, "distinct_4", g.distinct_4) && same_stat(s, "mean_length", g.mean_length) &&
           same_stat(s, "mean_agreement", g.mean_agreement);
}

bool cell_from_json(json_fields & c, needle_cell & cell, std::vector<std::pair<std::string, bool>> & names,
                    std::vector<needle_model> & models) {
    int64_t length = 0, trial = 0, answer = 0;
    uint64_t at = 0, prompt = 0;
    if (!c.i64("length", length, 1, INT32_MAX) || !c.num("depth", cell.depth, 0, 1) || !c.i64("trial", trial, 0, INT32_MAX) ||
        !c.str("value", cell.value) || !c.u64("insert_at", at, (uint64_t) length) || !c.u64("prompt_tokens", prompt) ||
        !c.i64("answer_tokens", answer, 0, INT32_MAX)) {
        return false;
    }
    cell.length = (int) length;
    cell.trial = (int) trial;
    cell.insert_at = at;
    cell.n_prompt = prompt;
    cell.n_answer = (int) answer;
    std::vector<const nlohmann::json *> ms;
    if (!c.elements("models", ms)) return false;
    if (ms.empty()) return c.fail("models", "is missing or empty");
    const bool first = names.empty();
    if (!first && ms.size() != names.size()) {
        return c.fail("models", "has " + std::to_string(ms.size()) + " answers, the first cell " + std::to_string(names.size()));
    }
    if (first) models.resize(ms.size());
    for (size_t m = 0; m < ms.size(); ++m) {
        json_fields a = c.nested(*ms[m], "models[" + std::to_string(m) + "]");
        std::string name;
        bool masked = false, match = false;
        needle_answer ans;
        if (!a.str("name", name) || !a.boolean("masked", masked) || !a.str("text", ans.text) || !a.boolean("match", match)) return false;
        if (first) names.push_back({name, masked});
        if (names[m] != std::make_pair(name, masked)) return a.fail("name", "'" + name + "' is not the first cell's model " + std::to_string(m));
        ans.match = needle_matches(ans.text, cell.value);
        if (ans.match != match) {
            return a.fail("match", std::string("says ") + (match ? "true" : "false") + " but the text answers the value " +
                                       (ans.match ? "exactly" : "otherwise"));
        }
        models[m].answers.push_back(ans);
    }
    return true;
}

bool exact_matches(json_fields & f, const needle_report & r) {
    std::vector<const nlohmann::json *> ex;
    if (!f.elements("exact", ex)) return false;
    if (ex.size() != r.models.size()) return f.fail("exact", "has " + std::to_string(ex.size()) + " entries for " + std::to_string(r.models.size()) + " models");
    for (size_t m = 0; m < ex.size(); ++m) {
        json_fields e = f.nested(*ex[m], "exact[" + std::to_string(m) + "]");
        uint64_t n = 0, cells = 0;
        if (!e.u64("n_exact", n) || !e.u64("n_cells", cells)) return false;
        if (n != r.models[m].n_exact() || cells != r.cells.size()) {
            return e.fail("n_exact", "says " + std::to_string(n) + "/" + std::to_string(cells) + "; its answers give " +
                                         std::to_string(r.models[m].n_exact()) + "/" + std::to_string(r.cells.size()));
        }
    }
    return true;
}

bool output_from_json(json_fields & o, generation_report & r, bool first, size_t i, std::map<std::string, int> & domain_of,
                      generation_output & out, std::string & text) {
    std::string domain;
    uint64_t line = 0;
    if (!o.str("domain", domain) || !o.u64("line", line) || !token_list(o, "tokens", out.tokens) || !o.str("text", text) ||
        !o.boolean("terminated", out.terminated)) {
        return false;
    }
    if (out.tokens.size() > (size_t) r.max_new) return o.fail("tokens", "holds more than max_new (" + std::to_string(r.max_new) + ") tokens");
    if (first) {
        auto it = domain_of.emplace(domain, (int) r.domains.size()).first;
        if (it->second == (int) r.domains.size()) r.domains.push_back(domain);
        r.prompt_domain.push_back(it->second);
        r.prompt_line.push_back(line);
        return true;
    }
    if (i >= r.prompt_domain.size() || r.domains[r.prompt_domain[i]] != domain || r.prompt_line[i] != line) {
        return o.fail("domain", "and line are not those of the base's output " + std::to_string(i));
    }
    return true;
}

} // namespace

ojson behaviour_receipts_json(const behaviour_receipts & m) { return receipts_json(m); }
bool  behaviour_receipts_from_json(json_fields & f, behaviour_receipts & m) { return receipts_from_json(f, m); }

ojson needle_section_json(const needle_section & s) {
    ojson j = needle_report_to_json(s.report);
    j["measured"] = receipts_json(s.measured);
    return j;
}

ojson generate_section_json(const generate_section & s) {
    ojson j = generation_report_to_json(s.report);
    j["measured"] = receipts_json(s.measured);
    return j;
}

ojson behaviour_document_to_json(const behaviour_document & d) {
    ojson j;
    j["format"] = k_behaviour_format;
    j["version"] = k_behaviour_version;
    if (d.needle) j["needle"] = needle_section_json(*d.needle);
    if (d.generate) j["generate"] = generate_section_json(*d.generate);
    return j;
}

bool needle_section_from_json(json_fields & f, needle_section & out) {
    needle_report & r = out.report;
    if (!f.u64("seed", r.seed) || !f.boolean("chat", r.chat) || !f.str("haystack", r.haystack_path)) return false;
    std::vector<const nlohmann::json *> cells;
    if (!f.elements("cells", cells)) return false;
    if (cells.empty()) return f.fail("cells", "is missing or empty");
    std::vector<std::pair<std::string, bool>> names;
    for (size_t i = 0; i < cells.size(); ++i) {
        json_fields c = f.nested(*cells[i], "cells[" + std::to_string(i) + "]");
        needle_cell cell;
        if (!cell_from_json(c, cell, names, r.models)) return false;
        r.cells.push_back(cell);
    }
    for (size_t m = 0; m < names.size(); ++m) {
        r.models[m].name = names[m].first;
        r.models[m].masked = names[m].second;
    }
    if (names[0].second) return f.fail("cells[0].models[0]", "is masked: the first model is the base");
    return exact_matches(f, r) && receipts_from_json(f, out.measured) && receipts_name_models(f, out.measured, names);
}

bool generate_section_from_json(json_fields & f, generate_section & out) {
    generation_report & r = out.report;
    int64_t max_new = 0, k = 0, reps = 0;
    if (!f.str("prompts", r.prompts_path) || !f.i64("max_new", max_new, 1, INT32_MAX) || !f.num("temperature", r.temperature, 0, 100) ||
        !f.u64("seed", r.seed) || !f.i64("loop_span", k, 1, INT32_MAX) || !f.i64("loop_repeats", reps, 2, INT32_MAX)) {
        return false;
    }
    if (k != k_loop_span || reps != k_loop_repeats) {
        return f.fail("loop_span", "and loop_repeats are " + std::to_string(k) + " and " + std::to_string(reps) + "; this reap's loop rule is " +
                                       std::to_string(k_loop_span) + " and " + std::to_string(k_loop_repeats));
    }
    r.max_new = (int) max_new;
    std::vector<const nlohmann::json *> models;
    if (!f.elements("models", models)) return false;
    if (models.empty()) return f.fail("models", "is missing or empty");
    std::map<std::string, int> domain_of;
    std::vector<std::pair<std::string, bool>> names;
    for (size_t m = 0; m < models.size(); ++m) {
        json_fields jm = f.nested(*models[m], "models[" + std::to_string(m) + "]");
        generation_model gm;
        if (!jm.str("name", gm.name) || !jm.boolean("masked", gm.masked)) return false;
        if (m == 0 && gm.masked) return jm.fail("masked", "is true: the first model is the base");
        std::vector<const nlohmann::json *> outs;
        if (!jm.elements("outputs", outs)) return false;
        if (outs.empty()) return jm.fail("outputs", "is missing or empty");
        if (m > 0 && outs.size() != r.prompt_domain.size()) {
            return jm.fail("outputs", "has " + std::to_string(outs.size()) + " outputs, the base " + std::to_string(r.prompt_domain.size()));
        }
        for (size_t i = 0; i < outs.size(); ++i) {
            json_fields o = jm.nested(*outs[i], "outputs[" + std::to_string(i) + "]");
            generation_output go;
            std::string text;
            if (!output_from_json(o, r, m == 0, i, domain_of, go, text)) return false;
            gm.outputs.push_back(std::move(go));
            gm.texts.push_back(std::move(text));
        }
        names.push_back({gm.name, gm.masked});
        r.models.push_back(std::move(gm));
    }
    // the statistics it states, against those of its tokens
    for (size_t m = 0; m < models.size(); ++m) {
        json_fields jm = f.nested(*models[m], "models[" + std::to_string(m) + "]");
        json_fields overall = jm.child("overall");
        if (!jm.ok() || !stats_match(overall, r.stats(m, -1))) return false;
        for (size_t d = 0; d < r.domains.size(); ++d) {
            json_fields doms = jm.child("domains");
            if (!jm.ok()) return false;
            json_fields s = doms.child(r.domains[d].c_str());
            if (!doms.ok() || !stats_match(s, r.stats(m, (int) d))) return false;
        }
    }
    return receipts_from_json(f, out.measured) && receipts_name_models(f, out.measured, names);
}

bool is_behaviour_document(const nlohmann::json & j) {
    if (!j.is_object()) return false;
    const auto fmt = j.find("format");
    if (fmt != j.end()) return fmt->is_string() && fmt->get<std::string>() == k_behaviour_format;
    return j.contains("needle") || j.contains("generate");
}

bool behaviour_document_from_json(const nlohmann::json & j, const std::string & name, behaviour_document & out, std::string & err) {
    out = behaviour_document();
    json_fields f(j, "behaviour eval '" + name + "'");
    int64_t version = 0;   // files written before the format was named
    if (f.has("format") && !f.header(k_behaviour_format, "a reap behaviour eval", k_behaviour_version, version)) {
        err = f.error();
        return false;
    }
    out.version = (int) version;
    if (!f.has("needle") && !f.has("generate")) {
        err = "behaviour eval '" + name + "' holds neither \"needle\" nor \"generate\"";
        return false;
    }
    if (f.has("needle")) {
        json_fields s = f.child("needle");
        out.needle.emplace();
        if (!f.ok() || !needle_section_from_json(s, *out.needle)) {
            err = f.error();
            return false;
        }
    }
    if (f.has("generate")) {
        json_fields s = f.child("generate");
        out.generate.emplace();
        if (!f.ok() || !generate_section_from_json(s, *out.generate)) {
            err = f.error();
            return false;
        }
    }
    return true;
}

bool read_behaviour_document(const std::string & path, behaviour_document & out, std::string & err) {
    nlohmann::json j;
    return util::read_json_file(path, "behaviour eval", k_max_behaviour_bytes, j, err) &&
           behaviour_document_from_json(j, path, out, err);
}

} // namespace reap

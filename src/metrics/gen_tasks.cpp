// Generative tasks (gen_tasks.h): the task file, the checkers and the answers file.
#include "metrics/gen_tasks.h"

#include "util/file.h"
#include "util/json.h"
#include "util/json_fields.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include <sys/stat.h>

namespace reap {

namespace {

constexpr uint64_t k_max_task_bytes = 256ull << 20;
constexpr int64_t  k_max_tokens = 1 << 20;
constexpr size_t   k_max_regex = 256;

using ojson = nlohmann::ordered_json;

bool rule_from_json(const nlohmann::json & a, const std::string & what, answer_rule & r, std::string & err) {
    if (!a.is_object() || a.size() != (a.contains("tol") ? 2u : 1u)) {
        err = what + ": \"answer\" must be one of {\"exact\": S}, {\"regex\": R}, {\"number\": X, \"tol\": T}";
        return false;
    }
    if (a.contains("exact") && a["exact"].is_string()) {
        r.kind = answer_rule::exact;
        r.text = a["exact"].get<std::string>();
        return true;
    }
    if (a.contains("regex") && a["regex"].is_string()) {
        r.kind = answer_rule::regex;
        r.text = a["regex"].get<std::string>();
        // std::regex compiles and matches by recursion: a bounded pattern keeps a
        // hostile task file from exhausting the stack
        if (r.text.size() > k_max_regex) {
            err = what + ": the regex is " + std::to_string(r.text.size()) + " characters (at most " + std::to_string(k_max_regex) + ")";
            return false;
        }
        try {
            r.re = std::regex(r.text, std::regex::ECMAScript);
        } catch (const std::regex_error & e) {
            err = what + ": the regex '" + r.text + "' does not compile (" + e.what() + ")";
            return false;
        }
        return true;
    }
    if (a.contains("number") && a["number"].is_number() && a.contains("tol") && a["tol"].is_number()) {
        r.kind = answer_rule::number;
        r.value = a["number"].get<double>();
        r.tol = a["tol"].get<double>();
        if (!std::isfinite(r.value) || !std::isfinite(r.tol) || r.tol < 0) {
            err = what + ": \"number\" and \"tol\" must be finite, tol at least 0";
            return false;
        }
        return true;
    }
    err = what + ": \"answer\" must be one of {\"exact\": S}, {\"regex\": R}, {\"number\": X, \"tol\": T}";
    return false;
}

std::string trimmed(const std::string & s) {
    const size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

} // namespace

bool parse_gen_tasks(const std::string & text, const std::string & name, std::vector<gen_task> & out, std::string & err) {
    out.clear();
    std::istringstream in(text);
    std::set<std::string> ids;
    size_t n = 0;
    for (std::string line; std::getline(in, line);) {
        ++n;
        if (trimmed(line).empty()) continue;
        const std::string what = name + ": line " + std::to_string(n);
        nlohmann::json j;
        std::string e;
        if (!util::parse_json_text(line, what, j, e)) {
            err = e;
            return false;
        }
        if (!j.is_object()) {
            err = what + ": not a JSON object";
            return false;
        }
        gen_task t;
        t.line = n;
        if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty()) {
            err = what + ": no \"id\" (a non-empty string)";
            return false;
        }
        t.id = j["id"].get<std::string>();
        if (!ids.insert(t.id).second) {
            err = what + ": the id '" + t.id + "' is given twice";
            return false;
        }
        const bool has_prompt = j.contains("prompt"), has_messages = j.contains("messages");
        if (has_prompt == has_messages) {
            err = what + " (task '" + t.id + "'): give exactly one of \"prompt\" and \"messages\"";
            return false;
        }
        if (has_prompt) {
            if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty()) {
                err = what + " (task '" + t.id + "'): \"prompt\" must be a non-empty string";
                return false;
            }
            t.prompt = j["prompt"].get<std::string>();
        } else {
            const auto & m = j["messages"];
            bool ok = m.is_array() && !m.empty();
            for (const auto & x : ok ? m : nlohmann::json::array()) {
                ok = ok && x.is_object() && x.contains("role") && x["role"].is_string() && x.contains("content") && x["content"].is_string();
            }
            if (!ok) {
                err = what + " (task '" + t.id + "'): \"messages\" must be a non-empty array of {\"role\", \"content\"} strings";
                return false;
            }
            t.messages = m;
        }
        if (!j.contains("answer") || !rule_from_json(j["answer"], what + " (task '" + t.id + "')", t.answer, err)) {
            if (err.empty()) err = what + " (task '" + t.id + "'): no \"answer\"";
            return false;
        }
        if (j.contains("max_tokens")) {
            const auto & mt = j["max_tokens"];
            if (!mt.is_number_integer() || mt.get<int64_t>() < 1 || mt.get<int64_t>() > k_max_tokens) {
                err = what + " (task '" + t.id + "'): \"max_tokens\" must be an integer within 1.." + std::to_string(k_max_tokens);
                return false;
            }
            t.max_tokens = (int) mt.get<int64_t>();
        }
        out.push_back(std::move(t));
    }
    if (out.empty()) {
        err = name + ": no tasks";
        return false;
    }
    return true;
}

bool read_gen_tasks(const std::string & path, std::vector<gen_task> & out, std::string & err) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && (uint64_t) st.st_size > k_max_task_bytes) {
        err = "task file '" + path + "' is larger than 256 MiB";
        return false;
    }
    std::string text;
    if (!util::read_file(path, "task file", text, err)) return false;
    return parse_gen_tasks(text, path, out, err);
}

bool answer_passes(const answer_rule & rule, const std::string & text) {
    switch (rule.kind) {
        case answer_rule::exact: return trimmed(text) == rule.text;
        case answer_rule::regex: return std::regex_search(text, rule.re);
        case answer_rule::number: {
            static const std::regex number(R"([-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)");
            std::string last;
            for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it) last = it->str();
            if (last.empty()) return false;
            const double v = std::strtod(last.c_str(), nullptr);
            return std::isfinite(v) && std::fabs(v - rule.value) <= rule.tol;
        }
    }
    return false;
}

nlohmann::json answer_rule_json(const answer_rule & r) {
    switch (r.kind) {
        case answer_rule::exact: return {{"exact", r.text}};
        case answer_rule::regex: return {{"regex", r.text}};
        case answer_rule::number: return {{"number", r.value}, {"tol", r.tol}};
    }
    return nullptr;
}

size_t answers_doc::n_pass() const {
    size_t n = 0;
    for (const auto & a : answers) n += a.pass;
    return n;
}

size_t answers_doc::n_cap_hits() const {
    size_t n = 0;
    for (const auto & a : answers) n += a.hit_cap;
    return n;
}

size_t answers_doc::n_rechecked_finished() const {
    size_t n = 0;
    for (const auto & a : answers) n += a.rechecked && !a.recheck_hit_cap;
    return n;
}

ojson answers_doc_to_json(const answers_doc & d) {
    ojson j;
    j["format"] = "reap-answers";
    j["version"] = 1;
    j["tasks"] = {{"path", d.tasks_path}, {"sha256", d.tasks_sha256}};
    j["model"] = {{"name", d.model_name}, {"masked", d.masked}, {"base", d.base_path}, {"base_sha256", d.base_sha256},
                  {"plan_sha256", d.plan_sha256}};
    const gen_settings & s = d.settings;
    j["settings"] = {{"temperature", s.temperature}, {"top_p", s.top_p}, {"seed", s.seed}, {"samples", s.samples},
                     {"max_new", s.max_new}, {"recheck_cap", s.recheck_cap}};
    j["prompts"] = d.prompts;
    if (!d.measured.is_null()) j["measured"] = d.measured, j["model_index"] = d.model_index;
    j["answers"] = ojson::array();
    for (const auto & a : d.answers) {
        ojson ja = {{"id", a.id}, {"sample", a.sample}, {"text", a.text}, {"n_tokens", a.n_tokens}, {"cap", a.cap},
                    {"hit_cap", a.hit_cap}, {"pass", a.pass}};
        if (a.rechecked) {
            ja["recheck"] = {{"cap", a.recheck_cap}, {"text", a.recheck_text}, {"n_tokens", a.recheck_tokens},
                             {"hit_cap", a.recheck_hit_cap}, {"pass", a.recheck_pass}};
        }
        j["answers"].push_back(ja);
    }
    j["summary"] = {{"answers", d.answers.size()}, {"pass", d.n_pass()}, {"cap_hits", d.n_cap_hits()},
                    {"rechecked_finished", d.n_rechecked_finished()}};
    return j;
}

bool answers_doc_from_json(const nlohmann::json & j, const std::string & name, answers_doc & out, std::string & err) {
    out = answers_doc();
    util::json_fields f(j, "answers file '" + name + "'");
    int64_t version = 0;
    if (!f.header("reap-answers", "a reap answers file", 1, version)) {
        err = f.error();
        return false;
    }
    util::json_fields t = f.child("tasks"), m = f.child("model"), s = f.child("settings"), sum = f.child("summary");
    int64_t samples = 0, max_new = 0, recheck = 0;
    bool ok = f.ok() && t.str("path", out.tasks_path) && t.sha256("sha256", out.tasks_sha256) && m.str("name", out.model_name) &&
              m.boolean("masked", out.masked) && m.str("base", out.base_path) && m.str("base_sha256", out.base_sha256) &&
              m.str("plan_sha256", out.plan_sha256) && s.num("temperature", out.settings.temperature, 0, 100) &&
              s.num("top_p", out.settings.top_p, 0, 1) && s.u64("seed", out.settings.seed) && s.i64("samples", samples, 1, 1 << 16) &&
              s.i64("max_new", max_new, 1, k_max_tokens) && s.i64("recheck_cap", recheck, 0, k_max_tokens) &&
              f.opt_strings("prompts", out.prompts);
    out.settings.samples = (int) samples, out.settings.max_new = (int) max_new, out.settings.recheck_cap = (int) recheck;
    if (ok && f.has("measured")) {
        int64_t idx = 0;
        ok = j["measured"].is_object() && f.i64("model_index", idx, 0, 1 << 16);
        if (ok) out.measured = j["measured"], out.model_index = (int) idx;
        else if (f.ok()) ok = f.fail("measured", "is not an object");
    }
    std::vector<const nlohmann::json *> items;
    if (ok) ok = f.elements("answers", items);
    for (size_t i = 0; ok && i < items.size(); ++i) {
        util::json_fields a = f.nested(*items[i], "answers[" + std::to_string(i) + "]");
        gen_answer g;
        int64_t sample = 0, n_tok = 0, cap = 0;
        ok = a.str("id", g.id) && a.i64("sample", sample, 0, samples - 1) && a.str("text", g.text) &&
             a.i64("n_tokens", n_tok, 0, k_max_tokens) && a.i64("cap", cap, 1, k_max_tokens) && a.boolean("hit_cap", g.hit_cap) &&
             a.boolean("pass", g.pass);
        g.sample = (int) sample, g.n_tokens = (int) n_tok, g.cap = (int) cap;
        if (ok && g.hit_cap != (g.n_tokens >= g.cap)) ok = a.fail("hit_cap", "does not follow from n_tokens and cap");
        if (ok && a.has("recheck")) {
            util::json_fields r = a.child("recheck");
            int64_t rc = 0, rt = 0;
            ok = a.ok() && r.i64("cap", rc, 1, k_max_tokens) && r.str("text", g.recheck_text) && r.i64("n_tokens", rt, 0, k_max_tokens) &&
                 r.boolean("hit_cap", g.recheck_hit_cap) && r.boolean("pass", g.recheck_pass);
            g.rechecked = true, g.recheck_cap = (int) rc, g.recheck_tokens = (int) rt;
        }
        out.answers.push_back(std::move(g));
    }
    uint64_t n_ans = 0, n_pass = 0, n_cap = 0, n_fin = 0;
    if (ok) ok = sum.u64("answers", n_ans) && sum.u64("pass", n_pass) && sum.u64("cap_hits", n_cap) && sum.u64("rechecked_finished", n_fin);
    if (ok && (n_ans != out.answers.size() || n_pass != out.n_pass() || n_cap != out.n_cap_hits() || n_fin != out.n_rechecked_finished())) {
        ok = sum.fail("pass", "the summary is not what the answers give");
    }
    if (!ok) {
        err = f.error();   // the readers of its parts share the first problem with it
        if (err.empty()) err = "answers file '" + name + "': malformed";
        return false;
    }
    return true;
}

bool read_answers_doc(const std::string & path, answers_doc & out, std::string & err) {
    nlohmann::json j;
    if (!util::read_json_file(path, "answers file", k_max_task_bytes, j, err)) return false;
    return answers_doc_from_json(j, path, out, err);
}

} // namespace reap

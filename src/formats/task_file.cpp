// The task-evidence format (task_file.h): its one writer, its checked reader
// and eval's table.
#include "formats/task_file.h"

#include "util/json.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace reap {

namespace {

using ojson = nlohmann::ordered_json;
using util::json_fields;

constexpr uint64_t k_max_task_doc_bytes = 256ull << 20;
constexpr uint64_t k_max_tasks = 1ull << 30;

bool known_task_format(const std::string & s) {
    return s == "multiple-choice" || s == "hellaswag" || s == "winogrande";
}

// A number the file states must be the one its flags give (to the printed precision).
bool states(json_fields & f, const char * key, double want) {
    double v = 0;
    if (!f.num(key, v, -1e300, 1e300)) return false;
    if (std::fabs(v - want) > 1e-9 * std::max(1.0, std::fabs(want))) {
        return f.fail(key, "is " + std::to_string(v) + ", but the per-task flags give " + std::to_string(want));
    }
    return true;
}

bool model_from_json(json_fields & m, size_t index, size_t n_tasks, const choice_report & r, choice_model_result & out) {
    if (!m.str("name", out.name) || !m.boolean("masked", out.masked)) return false;
    if (index == 0 && out.masked) return m.fail("masked", "is true: the first model is the base");
    std::vector<const nlohmann::json *> p, c;
    if (!m.elements("picked", p) || !m.elements("correct", c)) return false;
    if (p.size() != n_tasks || c.size() != n_tasks) {
        return m.fail("picked", "and correct have " + std::to_string(p.size()) + " and " + std::to_string(c.size()) +
                                    " entries for " + std::to_string(n_tasks) + " tasks");
    }
    for (size_t t = 0; t < n_tasks; ++t) {
        if (!p[t]->is_number_unsigned() || p[t]->get<uint64_t>() > 99) return m.fail("picked", "[" + std::to_string(t) + "] is not a choice 0..99");
        if (!c[t]->is_number_unsigned() || c[t]->get<uint64_t>() > 1) return m.fail("correct", "[" + std::to_string(t) + "] is not 0 or 1");
        out.picked.push_back((uint16_t) p[t]->get<uint64_t>());
        out.correct.push_back((uint8_t) c[t]->get<uint64_t>());
    }
    uint64_t n_correct = 0;
    if (!m.u64("n_correct", n_correct, k_max_tasks)) return false;
    if (n_correct != out.n_correct()) {
        return m.fail("n_correct", "is " + std::to_string(n_correct) + ", the per-task flags give " + std::to_string(out.n_correct()));
    }
    const interval ci = out.ci95();
    std::vector<const nlohmann::json *> cij;
    if (!states(m, "accuracy", out.accuracy()) || !m.elements("ci95", cij)) return false;
    if (cij.size() != 2 || !cij[0]->is_number() || !cij[1]->is_number() || std::fabs(cij[0]->get<double>() - ci.low) > 1e-9 ||
        std::fabs(cij[1]->get<double>() - ci.high) > 1e-9) {
        return m.fail("ci95", "is not the Wilson interval of its flags");
    }
    if (index == 0) return true;
    json_fields pj = m.child("paired");
    if (!m.ok()) return false;
    uint64_t rw = 0, wr = 0;
    if (!pj.u64("right_to_wrong", rw, k_max_tasks) || !pj.u64("wrong_to_right", wr, k_max_tasks)) return false;
    const paired_result want = paired_against(r.models[0].correct, out.correct);
    if (rw != want.right_to_wrong || wr != want.wrong_to_right) return pj.fail("right_to_wrong", "and wrong_to_right are not the flags' flips");
    return states(pj, "p_value", want.p_value);
}

} // namespace

uint64_t choice_model_result::n_correct() const {
    uint64_t n = 0;
    for (uint8_t c : correct) n += c;
    return n;
}

double choice_model_result::accuracy() const { return correct.empty() ? 0 : (double) n_correct() / (double) correct.size(); }

interval choice_model_result::ci95() const { return wilson_interval(n_correct(), correct.size()); }

nlohmann::ordered_json choice_section_to_json(const choice_section & sec) {
    const choice_report & r = sec.report;
    ojson c;
    c["task_format"] = r.task_format;
    c["data"] = {{"path", r.data_path}, {"sha256", r.data_sha256}, {"n_tasks", r.data_tasks}};
    c["limit"] = r.limit;
    c["tasks"] = r.tasks;
    c["settings"] = {{"n_ctx", r.n_ctx}, {"n_seq", r.n_seq}, {"n_batch", r.n_batch}, {"n_ubatch", r.n_ubatch}};
    c["models"] = ojson::array();
    for (size_t m = 0; m < r.models.size(); ++m) {
        const choice_model_result & mr = r.models[m];
        const interval ci = mr.ci95();
        ojson jm = {{"name", mr.name}, {"masked", mr.masked}, {"n_correct", mr.n_correct()}, {"accuracy", mr.accuracy()},
                    {"ci95", {ci.low, ci.high}}};
        if (m > 0) {
            const paired_result p = r.paired(m);
            jm["paired"] = {{"right_to_wrong", p.right_to_wrong}, {"wrong_to_right", p.wrong_to_right}, {"p_value", p.p_value}};
        }
        jm["picked"] = mr.picked;
        jm["correct"] = mr.correct;
        c["models"].push_back(jm);
    }
    if (sec.measured.recorded()) c["measured"] = behaviour_receipts_json(sec.measured);
    return c;
}

nlohmann::ordered_json task_document_to_json(const task_document & d) {
    ojson j;
    j["format"] = k_task_file_format;
    j["version"] = k_task_file_version;
    if (d.choice) j["choice"] = choice_section_to_json(*d.choice);
    if (!d.generate.empty()) {
        j["generate"] = ojson::array();
        for (const auto & a : d.generate) j["generate"].push_back(answers_doc_to_json(a));
    }
    return j;
}

bool choice_section_from_json(json_fields & c, choice_section & s, std::string & err) {
    choice_report & r = s.report;
    json_fields data = c.child("data");
    json_fields set = c.child("settings");
    int64_t n_ctx = 0, n_seq = 0, n_batch = 0, n_ubatch = 0;
    bool ok = c.ok() && c.str("task_format", r.task_format) && data.str("path", r.data_path) &&
              data.sha256("sha256", r.data_sha256) && data.u64("n_tasks", r.data_tasks, k_max_tasks) && c.u64("limit", r.limit) &&
              set.i64("n_ctx", n_ctx, 1, INT32_MAX) && set.i64("n_seq", n_seq, 1, INT32_MAX) &&
              set.i64("n_batch", n_batch, 1, INT32_MAX) && set.i64("n_ubatch", n_ubatch, 1, INT32_MAX);
    if (ok && !known_task_format(r.task_format)) ok = c.fail("task_format", "is '" + r.task_format + "'");
    std::vector<const nlohmann::json *> tasks, models;
    if (ok) ok = c.elements("tasks", tasks) && c.elements("models", models);
    if (ok && (tasks.empty() || tasks.size() > r.data_tasks)) ok = c.fail("tasks", "lists " + std::to_string(tasks.size()) + " tasks of " + std::to_string(r.data_tasks));
    for (size_t t = 0; ok && t < tasks.size(); ++t) {
        if (!tasks[t]->is_number_unsigned() || tasks[t]->get<uint64_t>() >= r.data_tasks) {
            ok = c.fail("tasks", "[" + std::to_string(t) + "] is not a task of the file");
        } else {
            r.tasks.push_back((uint32_t) tasks[t]->get<uint64_t>());
        }
    }
    if (ok && models.empty()) ok = c.fail("models", "is empty: the base comes first");
    r.n_ctx = (int) n_ctx, r.n_seq = (int) n_seq, r.n_batch = (int) n_batch, r.n_ubatch = (int) n_ubatch;
    for (size_t m = 0; ok && m < models.size(); ++m) {
        json_fields jm = c.nested(*models[m], "models[" + std::to_string(m) + "]");
        r.models.emplace_back();
        ok = model_from_json(jm, m, r.tasks.size(), r, r.models.back());
        if (!ok) err = jm.error();
    }
    if (ok) ok = behaviour_receipts_from_json(c, s.measured);
    if (ok && s.measured.recorded() && s.measured.input_sha256 != r.data_sha256) ok = c.fail("measured", "names another task file than data");
    if (!ok && err.empty()) err = c.error();   // its parts' readers share the first problem with it
    return ok;
}

bool task_document_from_json(const nlohmann::json & j, const std::string & name, task_document & out, std::string & err) {
    out = task_document();
    err.clear();
    json_fields f(j, "task file '" + name + "'");
    int64_t version = 0;
    if (!f.header(k_task_file_format, "a reap task file", k_task_file_version, version)) {
        err = f.error();
        return false;
    }
    if (f.has("generate")) {
        if (!j["generate"].is_array() || j["generate"].empty()) {
            err = "task file '" + name + "': generate is not a list of answers documents";
            return false;
        }
        for (size_t i = 0; i < j["generate"].size(); ++i) {
            out.generate.emplace_back();
            if (!answers_doc_from_json(j["generate"][i], name + ": generate[" + std::to_string(i) + "]", out.generate.back(), err)) return false;
        }
        if (out.generate[0].masked || out.generate[0].model_name != "base") {
            err = "task file '" + name + "': generate[0] is not the base";
            return false;
        }
    }
    if (!f.has("choice")) return true;
    json_fields c = f.child("choice");
    if (!f.ok()) {
        err = f.error();
        return false;
    }
    return choice_section_from_json(c, out.choice.emplace(), err);
}

bool read_task_document(const std::string & path, task_document & out, std::string & err) {
    nlohmann::json j;
    if (!util::read_json_file(path, "task file", k_max_task_doc_bytes, j, err)) return false;
    return task_document_from_json(j, path, out, err);
}

void choice_report_print(FILE * out, const choice_report & r) {
    fprintf(out, "%s: %zu tasks of %" PRIu64 " in %s%s\n", r.task_format.c_str(), r.tasks.size(), r.data_tasks, r.data_path.c_str(),
            r.limit ? (" (--tasks-limit " + std::to_string(r.limit) + ")").c_str() : "");
    fprintf(out, "%-40s %9s  %-17s %6s  %14s %9s\n", "model", "accuracy", "95% interval", "right", "right->wrong/", "McNemar p");
    fprintf(out, "%-40s %9s  %-17s %6s  %14s %9s\n", "", "", "", "", "wrong->right", "");
    for (size_t m = 0; m < r.models.size(); ++m) {
        const choice_model_result & mr = r.models[m];
        const interval ci = mr.ci95();
        const std::string label = (mr.masked ? "masked by " : "") + mr.name;
        char ci_text[64];
        snprintf(ci_text, sizeof ci_text, "[%.2f, %.2f]%%", 100 * ci.low, 100 * ci.high);
        fprintf(out, "%-40s %8.2f%%  %-17s %6" PRIu64, label.c_str(), 100 * mr.accuracy(), ci_text, mr.n_correct());
        if (m == 0) {
            fprintf(out, "  %14s %9s\n", "(base)", "");
        } else {
            const paired_result p = r.paired(m);
            char flips[48];
            snprintf(flips, sizeof flips, "%" PRIu64 "/%" PRIu64, p.right_to_wrong, p.wrong_to_right);
            fprintf(out, "  %14s %9.3g\n", flips, p.p_value);
        }
    }
}

} // namespace reap

// reap fit's journal (fit_journal.h): the inputs' fingerprint, the stages
// done and every score, read back on a rerun.
#include "formats/fit_journal.h"

#include "gguf/gguf.h"
#include "moe/identity.h"
#include "plan/plan.h"
#include "util/json.h"
#include "util/json_fields.h"
#include "util/publish.h"
#include "util/sha256.h"

#include <sys/stat.h>

namespace reap {

namespace {

using json = nlohmann::json;

constexpr const char * k_journal_format = "reap-fit-journal";
constexpr int          k_journal_version = 1;
constexpr uint64_t     k_max_journal_bytes = 64ull << 20;

bool model_fingerprint(const std::string & path, json & out, std::string & err) {
    gguf::model m;
    moe::model_identity id;
    if (!gguf::open_model(path, m, err)) return false;
    if (!moe::identity_of(m, id, err)) {
        err = path + ": " + err;
        return false;
    }
    out = {{"path", path}, {"header_sha256", model_header_sha256(m)}, {"router_sha256", id.router_sha256},
           {"bytes", m.file_bytes()}};
    // Every file's identity and last change: a source rewritten with the same
    // header, routers and size (other weights) is a changed input, and the
    // scores of its earlier run must not mix with new ones. Hashing the bytes
    // would read a model larger than memory once more on every run; a file
    // whose modification time changed is refused instead (touching an
    // unchanged file refuses too: the message names it).
    json files = json::array();
    for (const auto & sh : m.shards) {
        struct stat st;
        if (::stat(sh.path.c_str(), &st) != 0) {
            err = "cannot stat '" + sh.path + "'";
            return false;
        }
        files.push_back({{"inode", (uint64_t) st.st_ino}, {"bytes", (uint64_t) st.st_size},
                         {"mtime_ns", (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec}});
    }
    out["files"] = files;
    return true;
}

bool file_sha(const std::string & path, json & out, std::string & err) {
    std::string hex;
    if (!util::sha256_file(path, hex, err)) return false;
    out = {{"path", path}, {"sha256", hex}};
    return true;
}

// The first key at which two fingerprints differ, as a path ("sources[1].router_sha256").
std::string first_difference(const json & a, const json & b, const std::string & at) {
    // a number read back from the file may be unsigned where the fresh one is signed
    if (a.type() != b.type() && !(a.is_number() && b.is_number())) return at.empty() ? "(top level)" : at;
    if (a.is_object()) {
        for (auto it = a.begin(); it != a.end(); ++it) {
            const std::string where = at.empty() ? it.key() : at + "." + it.key();
            if (!b.contains(it.key())) return where;
            const std::string d = first_difference(*it, b.at(it.key()), where);
            if (!d.empty()) return d;
        }
        for (auto it = b.begin(); it != b.end(); ++it) {
            if (!a.contains(it.key())) return at.empty() ? it.key() : at + "." + it.key();
        }
        return "";
    }
    if (a.is_array()) {
        if (a.size() != b.size()) return at + " (" + std::to_string(a.size()) + " entries, now " + std::to_string(b.size()) + ")";
        for (size_t i = 0; i < a.size(); ++i) {
            const std::string d = first_difference(a[i], b[i], at + "[" + std::to_string(i) + "]");
            if (!d.empty()) return d;
        }
        return "";
    }
    return a == b ? "" : at;
}

bool read_scores(util::json_fields & f, fit_journal & j) {
    std::vector<const json *> items;
    if (!f.elements("scores", items)) return false;
    for (size_t i = 0; i < items.size(); ++i) {
        util::json_fields s = f.nested(*items[i], "scores[" + std::to_string(i) + "]");
        uint64_t source = 0;
        int64_t  width = 0, n_keep = 0;
        planner::fit_score sc;
        if (!s.u64("source", source, 1u << 20) || !s.i64("width", width, 1, INT64_MAX) || !s.i64("n_keep", n_keep, 1, INT64_MAX) ||
            !s.num("kld", sc.kld, -1e-6, 1e9) || !s.num("kld_half_1", sc.kld_half[0], -1e-6, 1e9) ||
            !s.num("kld_half_2", sc.kld_half[1], -1e-6, 1e9) || !s.num("top1", sc.top1, 0, 1)) {
            return false;
        }
        j.scores[{(size_t) source, width, n_keep}] = sc;
    }
    return true;
}

// A file input whose content changed under the same path, between the
// fingerprints `was` and `now`: its key path, else "".
std::string content_changed(const json & was, const json & now) {
    const auto same_path_other_bytes = [](const json & a, const json & b) {
        return a.is_object() && b.is_object() && a.contains("path") && b.contains("path") && a["path"] == b["path"] && a != b;
    };
    for (const char * key : {"reference", "kld_base", "corpus", "saliency", "heldout", "gate_prompts", "gate_tasks", "imatrix"}) {
        if (was.contains(key) && now.contains(key) && same_path_other_bytes(was[key], now[key])) {
            return key + ("." + first_difference(was[key], now[key], ""));
        }
    }
    if (was.contains("sources") && now.contains("sources") && was["sources"].is_array() && now["sources"].is_array()) {
        for (const json & a : was["sources"]) {
            for (size_t i = 0; i < now["sources"].size(); ++i) {
                if (same_path_other_bytes(a, now["sources"][i])) {
                    return "sources[" + std::to_string(i) + "]." + first_difference(a, now["sources"][i], "");
                }
            }
        }
    }
    return "";
}

// What each stage's result depends on, as paths into the fingerprint; a stage
// not listed depends on everything.
const std::vector<std::string> k_calibrate_inputs = {"/sources/0", "/reference", "/corpus", "/saliency", "/window", "/axes/width"};
const std::vector<std::string> k_reference_inputs = {"/sources/0", "/reference", "/heldout", "/kld_base", "/window"};
// scored_from_files: the imatrix written candidates were quantised with (absent when none are)
const std::vector<std::string> k_score_inputs = {"/sources", "/method", "/domains", "/down_type", "/scored_from_files"};

// A fingerprint value without the files' "path" keys: what a stage computed
// depends on the files' bytes (their hashes, a model's identity), not on the
// name they were given by (the same corpus by another path keeps its archive).
json without_paths(json v) {
    if (v.is_object()) v.erase("path");
    if (v.is_object() || v.is_array()) {
        for (auto & x : v) x = without_paths(x);   // an object's values, an array's elements
    }
    return v;
}

bool any_differs(const json & was, const json & now, const std::vector<std::string> & paths) {
    for (const std::string & p : paths) {
        const json::json_pointer ptr(p);
        const json a = was.contains(ptr) ? was.at(ptr) : json(), b = now.contains(ptr) ? now.at(ptr) : json();
        if (without_paths(a) != without_paths(b)) return true;
    }
    return false;
}

// Drops from j what the change from `was` to `now` invalidates, and says what
// stays in j.carried.
void keep_what_still_holds(const json & was, const json & now, fit_journal & j) {
    const bool calibrate_holds = !any_differs(was, now, k_calibrate_inputs);
    const bool reference_holds = !any_differs(was, now, k_reference_inputs);
    const bool scores_hold = calibrate_holds && reference_holds && !any_differs(was, now, k_score_inputs);
    std::vector<std::string> kept, dropped;
    for (auto it = j.stages.begin(); it != j.stages.end();) {
        const bool holds = it->first == "calibrate" ? calibrate_holds : it->first == "reference" ? reference_holds : false;
        (holds ? kept : dropped).push_back(it->first);
        it = holds ? std::next(it) : j.stages.erase(it);
    }
    if (!j.scores.empty()) {
        (scores_hold ? kept : dropped).push_back(std::to_string(j.scores.size()) + " scores");
        if (!scores_hold) j.scores.clear();
    }
    const auto list = [](const std::vector<std::string> & v) {
        std::string s;
        for (const auto & x : v) s += (s.empty() ? "" : ", ") + x;
        return s.empty() ? std::string("nothing") : s;
    };
    // name what changed in the bytes or options first; a path alone when nothing else did
    std::string what = first_difference(without_paths(was), without_paths(now), "");
    if (what.empty()) what = first_difference(was, now, "");
    j.carried = what + " differs from the journal's run: kept " + list(kept) + "; done again: " + list(dropped);
}

bool fingerprint(const fit_inputs & o, json & out, std::string & err) {
    out = json::object();
    json sources = json::array();
    for (const std::string & s : o.sources) {
        json m;
        if (!model_fingerprint(s, m, err)) return false;
        sources.push_back(m);
    }
    out["sources"] = sources;
    if (!o.reference.empty() && !model_fingerprint(o.reference, out["reference"], err)) return false;
    struct stat st;
    if (!o.kld_base.empty() && ::stat(o.kld_base.c_str(), &st) == 0 && !file_sha(o.kld_base, out["kld_base"], err)) return false;
    if (!o.corpus.empty() && !file_sha(o.corpus, out["corpus"], err)) return false;
    if (!o.saliency.empty() && !file_sha(o.saliency, out["saliency"], err)) return false;
    if (!file_sha(o.heldout, out["heldout"], err)) return false;
    out["budget"] = o.budget;
    out["axes"] = {{"experts", o.axis_experts}, {"width", o.axis_width}, {"sources", o.axis_sources}};
    out["method"] = o.method;
    out["domains"] = o.domains;
    out["down_type"] = o.down_type;
    out["gates"] = o.gates;
    if (!o.gate_prompts.empty() && !file_sha(o.gate_prompts, out["gate_prompts"], err)) return false;
    if (!o.gate_tasks.empty() && !file_sha(o.gate_tasks, out["gate_tasks"], err)) return false;
    if (!o.imatrix.empty() && !file_sha(o.imatrix, out["imatrix"], err)) return false;
    if (o.written_candidates) out["scored_from_files"] = {{"imatrix", out.value("imatrix", json())}};
    out["window"] = o.window;
    return true;
}

} // namespace

bool open_fit_journal(const std::string & dir, const fit_inputs & in, fit_journal & j, bool & resumed, std::string & err) {
    j = fit_journal();
    j.path = dir + "/fit-journal.json";
    json inputs;
    if (!fingerprint(in, inputs, err)) return false;
    j.inputs = util::json_text(inputs);
    j.kld_base_given = inputs.contains("kld_base");
    struct stat st;
    resumed = ::stat(j.path.c_str(), &st) == 0;
    if (!resumed) return true;
    json doc;
    if (!util::read_json_file(j.path, "fit journal", k_max_journal_bytes, doc, err)) return false;
    util::json_fields f(doc, "fit journal '" + j.path + "'");
    int64_t version = 0;
    if (!f.header(k_journal_format, "a reap fit journal", k_journal_version, version)) {
        err = f.error();
        return false;
    }
    const bool readable = doc.contains("inputs") && doc["inputs"].is_object();
    const bool other_inputs = !readable || doc["inputs"] != inputs;
    const std::string changed = !readable ? "inputs" : other_inputs ? content_changed(doc["inputs"], inputs) : "";
    if (!changed.empty()) {
        err = "'" + dir + "' holds a fit of other inputs (" + changed + " differs from this run's; fit-journal.json): "
              "give another -o DIR, or remove that folder to start again";
        return false;
    }
    std::vector<std::pair<std::string, const json *>> stages;
    if (!f.members("stages", stages)) {
        err = f.error();
        return false;
    }
    for (const auto & [name, v] : stages) {
        if (!v->is_string()) {
            err = "fit journal '" + j.path + "': stages." + name + " is not a string";
            return false;
        }
        j.stages[name] = v->get<std::string>();
    }
    if (!read_scores(f, j)) {
        err = f.error();
        return false;
    }
    if (other_inputs) keep_what_still_holds(doc["inputs"], inputs, j);
    return true;
}

bool save_fit_journal(const fit_journal & j, std::string & err) {
    json doc = {{"format", k_journal_format}, {"version", k_journal_version}};
    std::string e;
    if (!util::parse_json_text(j.inputs, "fit inputs", doc["inputs"], e)) {
        err = "fit journal '" + j.path + "': " + e;   // cannot happen: the text is ours
        return false;
    }
    doc["stages"] = json::object();
    for (const auto & [name, sha] : j.stages) doc["stages"][name] = sha;
    doc["scores"] = json::array();
    for (const auto & [key, sc] : j.scores) {
        doc["scores"].push_back({{"source", std::get<0>(key)}, {"width", std::get<1>(key)}, {"n_keep", std::get<2>(key)},
                                 {"kld", sc.kld}, {"kld_half_1", sc.kld_half[0]}, {"kld_half_2", sc.kld_half[1]}, {"top1", sc.top1}});
    }
    return util::write_file_durably(j.path, util::json_text(doc, 1) + "\n", err);
}

bool fit_file_exists(const std::string & path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

bool fit_stage_holds(const fit_journal & j, const std::string & stage, const std::string & path) {
    if (!j.done(stage) || !fit_file_exists(path)) return false;
    std::string hex, e;
    return util::sha256_file(path, hex, e) && hex == j.stages.at(stage);
}

bool fit_mark_stage(fit_journal & j, const std::string & stage, const std::string & path, std::string & err) {
    std::string hex;
    if (!path.empty() && !util::sha256_file(path, hex, err)) return false;
    j.stages[stage] = hex;
    return save_fit_journal(j, err);
}

} // namespace reap

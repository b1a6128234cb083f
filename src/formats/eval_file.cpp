// The eval report format (eval_file.h): the one writer and the one checked
// reader of what `reap eval --json` writes.
#include "formats/eval_file.h"

#include "util/json_fields.h"

#include <cfloat>
#include <cmath>
#include <cstdio>

namespace reap {

namespace {

using ojson = nlohmann::ordered_json;
using util::json_fields;

constexpr uint64_t k_max_eval_bytes = 256ull << 20;
constexpr uint64_t k_max_count = 1ull << 53;     // exact in a JSON number
constexpr double   k_kld_tolerance = -1e-3;      // rounding of a KL sum in float
constexpr double   k_min_perplexity = 1 - 1e-6;  // exp(mean NLL), NLL >= 0 up to float rounding
constexpr double   k_ratio_tolerance = 1e-9;     // relative: the ratio is written with every digit
constexpr int64_t  k_max_mtp_blocks = 1 << 20;

ojson nullable(bool have, double v) { return have ? ojson(v) : ojson(nullptr); }

// A report's fields, without "format" and "version" (stamped adds them).
ojson report_body(const eval_report & r) {
    ojson j = eval_metrics_json(r.overall, r.pruned_scored);
    ojson d = ojson::object();
    for (const auto & [name, m] : r.domains) d[name] = eval_metrics_json(m, m.n_tokens > 0);
    j["domains"]           = d;
    j["n_ctx"]             = r.n_ctx;
    j["n_batch"]           = r.n_batch;
    j["n_ubatch"]          = r.n_ubatch;
    j["n_windows"]         = r.n_windows;
    j["corpus"]            = r.corpus;
    j["n_samples"]         = r.n_samples;
    j["n_samples_skipped"] = r.n_samples_skipped;
    j["kld_base"]          = r.kld_base_mode;
    if (!r.base_path.empty()) {
        j["base"] = {{"file", r.base_path}, {"header_sha256", r.base_sha256}};
        if (r.base_bytes) j["base"]["bytes"] = r.base_bytes;
        if (!r.base_router_sha256.empty()) j["base"]["router_sha256"] = r.base_router_sha256;
        if (!r.base_files_sha256.empty()) j["base"]["files_sha256"] = r.base_files_sha256;
    }
    j["reference"] = r.base_masked() ? "masked_base" : "base";
    if (!r.candidate.empty()) {
        j["candidate"] = r.candidate;
        j["masked"]    = r.masked;
    }
    if (!r.base_mask.empty()) {
        j["base_mask"] = r.base_mask;
        if (!r.base_mask_sha256.empty()) j["base_mask_sha256"] = r.base_mask_sha256;
    }
    if (!r.input_path.empty()) j["input"] = {{"file", r.input_path}, {"sha256", r.input_sha256}};
    if (!r.candidate_files.empty()) j["candidate_files"] = file_ids_json(r.candidate_files);
    if (!r.candidate_sha256.empty()) j["candidate_sha256"] = r.candidate_sha256;
    if (!r.warnings.empty()) j["warnings"] = r.warnings;
    if (r.mtp_blocks > 0) {
        using acceptance = std::optional<eval_report::mtp_acceptance>;
        auto rate = [](const acceptance & a) { return nullable(a && a->positions > 0, a ? a->rate() : 0); };
        auto accepted = [](const acceptance & a) { return a ? ojson(a->accepted) : ojson(nullptr); };
        ojson m;
        m["blocks"]            = r.mtp_blocks;
        m["positions"]         = r.mtp_base ? r.mtp_base->positions : r.mtp_pruned ? r.mtp_pruned->positions : 0;
        m["base_accepted"]     = accepted(r.mtp_base);
        m["pruned_accepted"]   = accepted(r.mtp_pruned);
        m["base_acceptance"]   = rate(r.mtp_base);
        m["pruned_acceptance"] = rate(r.mtp_pruned);
        if (!r.mtp_note.empty()) m["note"] = r.mtp_note;
        j["mtp_draft"] = m;
    }
    return j;
}

ojson stamped(ojson body) {
    ojson j;
    j["format"]  = k_eval_format;
    j["version"] = k_eval_version;
    for (auto it = body.begin(); it != body.end(); ++it) j[it.key()] = it.value();
    return j;
}

bool mtp_from_json(json_fields & f, eval_report & r) {
    if (!f.has("mtp_draft")) return f.ok();
    json_fields m = f.child("mtp_draft");
    int64_t blocks = 0;
    uint64_t positions = 0;
    if (!m.i64("blocks", blocks, 1, k_max_mtp_blocks) || !m.u64("positions", positions, k_max_count)) return false;
    r.mtp_blocks = (int) blocks;
    for (const char * side : {"base_accepted", "pruned_accepted"}) {
        if (!m.has(side)) continue;
        uint64_t a = 0;
        if (!m.u64(side, a, positions)) return false;
        (std::string(side) == "base_accepted" ? r.mtp_base : r.mtp_pruned) = eval_report::mtp_acceptance{(int64_t) positions, (int64_t) a};
    }
    double rate = 0;
    return m.opt_num("base_acceptance", rate, 0, 1) && m.opt_num("pruned_acceptance", rate, 0, 1) && m.opt_str("note", r.mtp_note);
}

bool identity_from_json(json_fields & f, eval_report & r) {
    if (f.has("base")) {
        json_fields b = f.child("base");
        if (!b.str("file", r.base_path) || !b.sha256("header_sha256", r.base_sha256) || !b.opt_u64("bytes", r.base_bytes) ||
            !b.opt_sha256("router_sha256", r.base_router_sha256) || !b.opt_sha256("files_sha256", r.base_files_sha256)) {
            return false;
        }
    }
    if (!f.opt_str("candidate", r.candidate) || !f.opt_boolean("masked", r.masked) || !f.opt_str("base_mask", r.base_mask) ||
        !f.opt_sha256("base_mask_sha256", r.base_mask_sha256) || !f.opt_sha256("candidate_sha256", r.candidate_sha256) ||
        !f.opt_strings("warnings", r.warnings)) {
        return false;
    }
    std::string reference = r.base_masked() ? "masked_base" : "base";   // version 1: said by base_mask alone
    if (!f.opt_str("reference", reference)) return false;
    if (reference != "base" && reference != "masked_base") return f.fail("reference", "must be \"base\" or \"masked_base\", not \"" + reference + "\"");
    if ((reference == "masked_base") != r.base_masked()) {
        return f.fail("reference", "says \"" + reference + "\" but base_mask is " + (r.base_masked() ? "set" : "absent"));
    }
    if (f.has("input")) {
        json_fields in = f.child("input");
        if (!in.str("file", r.input_path) || !in.sha256("sha256", r.input_sha256)) return false;
    }
    return file_ids_from_json(f, "candidate_files", r.candidate_files);
}

bool report_from_json(json_fields & f, eval_report & r) {
    if (!eval_metrics_from_json(f, "", r.overall, r.pruned_scored)) return false;
    if (!domain_metrics_from_json(f, r.overall, r.domains)) return false;
    int64_t n = 0;
    if (!f.opt_i64("n_ctx", n, 0, INT32_MAX)) return false;
    r.n_ctx = (int) n;
    n = 0;
    if (!f.opt_i64("n_batch", n, 0, INT32_MAX)) return false;
    r.n_batch = (int) n;
    n = 0;
    if (!f.opt_i64("n_ubatch", n, 0, INT32_MAX)) return false;
    r.n_ubatch = (int) n;
    uint64_t u[3] = {0, 0, 0};
    if (!f.opt_u64("n_windows", u[0], k_max_count) || !f.opt_u64("n_samples", u[1], k_max_count) ||
        !f.opt_u64("n_samples_skipped", u[2], k_max_count) || !f.opt_boolean("corpus", r.corpus) ||
        !f.opt_str("kld_base", r.kld_base_mode)) {
        return false;
    }
    r.n_windows = u[0];
    r.n_samples = u[1];
    r.n_samples_skipped = u[2];
    if (r.kld_base_mode != "none" && r.kld_base_mode != "written" && r.kld_base_mode != "read") {
        return f.fail("kld_base", "must be \"none\", \"written\" or \"read\", not \"" + r.kld_base_mode + "\"");
    }
    return identity_from_json(f, r) && mtp_from_json(f, r);
}

} // namespace

ojson eval_metrics_json(const eval_metrics & m, bool have_pruned) {
    ojson j;
    j["ppl_base"]     = m.ppl_base;
    j["ppl_pruned"]   = nullable(have_pruned, m.ppl_pruned);
    j["ppl_ratio"]    = nullable(have_pruned, m.ppl_ratio);
    j["kld_mean"]     = nullable(have_pruned, m.kld_mean);
    j["kld_median"]   = nullable(have_pruned, m.kld_median);
    j["kld_p99"]      = nullable(have_pruned, m.kld_p99);
    j["kld_max"]      = nullable(have_pruned, m.kld_max);
    j["argmax_agree"] = nullable(have_pruned, m.argmax_agree);
    j["n_tokens"]     = m.n_tokens;
    return j;
}

bool eval_metrics_from_json(json_fields & outer, const char * key, eval_metrics & m, bool & scored) {
    json_fields f = *key ? outer.child(key) : outer;
    uint64_t n = 0;
    if (!f.u64("n_tokens", n, k_max_count) || !f.num("ppl_base", m.ppl_base, 0, DBL_MAX)) return false;
    m.n_tokens = (size_t) n;
    scored = f.has("kld_mean");
    struct field { const char * key; double * v; double lo, hi; };
    const field pruned[] = {{"ppl_pruned", &m.ppl_pruned, 0, DBL_MAX},     {"ppl_ratio", &m.ppl_ratio, 0, DBL_MAX},
                            {"kld_mean", &m.kld_mean, k_kld_tolerance, DBL_MAX}, {"kld_median", &m.kld_median, k_kld_tolerance, DBL_MAX},
                            {"kld_p99", &m.kld_p99, k_kld_tolerance, DBL_MAX},   {"kld_max", &m.kld_max, k_kld_tolerance, DBL_MAX},
                            {"argmax_agree", &m.argmax_agree, 0, 1}};
    for (const auto & p : pruned) {
        if (!scored) {
            if (f.has(p.key)) return f.fail(p.key, "is set but kld_mean is null (a pruned side is all or nothing)");
            continue;
        }
        if (!f.num(p.key, *p.v, p.lo, p.hi)) return false;
    }
    if (scored && m.n_tokens == 0) return f.fail("n_tokens", "is 0 but the pruned side has numbers");
    // the relations between the fields, as reap eval computes them: a
    // perplexity is exp(mean NLL) with NLL >= 0, the ratio is their quotient,
    // the median and the 99th percentile lie between the sorted values' ends
    if (m.n_tokens > 0 && m.ppl_base < k_min_perplexity) {
        return f.fail("ppl_base", "is below 1 over " + std::to_string(m.n_tokens) + " tokens: a perplexity is at least 1");
    }
    if (!scored) return true;
    if (m.ppl_pruned < k_min_perplexity) {
        return f.fail("ppl_pruned", "is below 1 over " + std::to_string(m.n_tokens) + " tokens: a perplexity is at least 1");
    }
    const double ratio = m.ppl_pruned / m.ppl_base;
    if (!(std::fabs(m.ppl_ratio - ratio) <= k_ratio_tolerance * ratio)) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "is %.6g but ppl_pruned / ppl_base is %.6g: not numbers reap eval computes", m.ppl_ratio, ratio);
        return f.fail("ppl_ratio", msg);
    }
    if (!(m.kld_median <= m.kld_max && m.kld_mean <= m.kld_max - k_kld_tolerance)) {
        return f.fail("kld_max", "is below the mean or median: not numbers reap eval computes");
    }
    if (!(m.kld_median <= m.kld_p99 - k_kld_tolerance && m.kld_p99 <= m.kld_max - k_kld_tolerance)) {
        return f.fail("kld_p99", "is not between kld_median and kld_max: not numbers reap eval computes");
    }
    return true;
}

// The overall row of a per-domain report is its domains' rows taken together:
// its tokens their sum, its means (KLD, top-1 agreement, log-perplexities)
// their token-weighted means. A file whose overall row says otherwise states
// numbers no eval computed (a card would show them under Verified).
bool overall_follows_domains(json_fields & f, const eval_metrics & overall, const std::vector<std::pair<std::string, eval_metrics>> & doms) {
    double n = 0, kld = 0, agree = 0, lb = 0, lp = 0;
    for (const auto & [name, m] : doms) {
        if (m.n_tokens == 0) continue;
        n += (double) m.n_tokens;
        kld += (double) m.n_tokens * m.kld_mean;
        agree += (double) m.n_tokens * m.argmax_agree;
        lb += (double) m.n_tokens * std::log(m.ppl_base);
        lp += (double) m.n_tokens * std::log(m.ppl_pruned);
    }
    if ((size_t) n != overall.n_tokens) {
        return f.fail("n_tokens", "is " + std::to_string(overall.n_tokens) + " but the domains hold " + std::to_string((size_t) n) +
                                      ": each scored token is in one domain");
    }
    if (n == 0) return true;
    const auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-4 * std::max(std::fabs(a), std::fabs(b)) + 1e-9; };
    const std::pair<const char *, std::pair<double, double>> checks[] = {
        {"kld_mean", {overall.kld_mean, kld / n}},
        {"argmax_agree", {overall.argmax_agree, agree / n}},
        {"ppl_base", {std::log(overall.ppl_base), lb / n}},
        {"ppl_pruned", {std::log(overall.ppl_pruned), lp / n}},
    };
    for (const auto & [key, v] : checks) {
        if (!near(v.first, v.second)) {
            char msg[200];
            std::snprintf(msg, sizeof msg, "of the whole does not follow from the domains' rows (token-weighted: %.6g, the file says %.6g)",
                          std::string(key).rfind("ppl", 0) == 0 ? std::exp(v.second) : v.second,
                          std::string(key).rfind("ppl", 0) == 0 ? std::exp(v.first) : v.first);
            return f.fail(key, msg);
        }
    }
    return true;
}

bool domain_metrics_from_json(json_fields & f, const eval_metrics & overall, std::vector<std::pair<std::string, eval_metrics>> & out) {
    std::vector<std::pair<std::string, const nlohmann::json *>> doms;
    if (!f.members("domains", doms)) return false;
    size_t sum = 0;
    for (const auto & [name, v] : doms) {
        json_fields d = f.nested(*v, "domains.\"" + name + "\"");
        eval_metrics m;
        bool scored = false;
        if (!eval_metrics_from_json(d, "", m, scored)) return false;
        if (scored != (m.n_tokens > 0)) return d.fail("", "has a pruned side exactly when it has tokens; this one does not");
        sum += m.n_tokens;   // each at most k_max_count: no overflow for any count of domains a file can hold
        if (sum > overall.n_tokens) {
            return f.fail("domains", "count " + std::to_string(sum) + " tokens (up to \"" + name + "\"), more than the " +
                                         std::to_string(overall.n_tokens) + " of n_tokens: each token is in one domain");
        }
        out.push_back({name, m});
    }
    return out.empty() || overall_follows_domains(f, overall, out);
}

ojson eval_report_to_json(const eval_report & r) { return stamped(report_body(r)); }

ojson eval_document_to_json(const eval_document & d) {
    ojson pruned = ojson::object(), masked = ojson::object();
    // each report stamped too: an entry reads the same as that report run alone
    for (const auto & e : d.entries) (e.masked ? masked : pruned)[e.key] = stamped(report_body(e.report));
    ojson j;
    j["format"]  = k_eval_format;
    j["version"] = k_eval_version;
    if (!pruned.empty()) j["pruned"] = pruned;
    if (!masked.empty()) j["masked"] = masked;
    return j;
}

bool eval_document_from_json(const nlohmann::json & j, const std::string & name, eval_document & out, std::string & err) {
    out = eval_document();
    json_fields f(j, "eval '" + name + "'");
    int64_t version = 1;   // files written before the format was named
    if (f.has("format") && !f.header(k_eval_format, "a reap eval report", k_eval_version, version)) {
        err = f.error();
        return false;
    }
    out.version = (int) version;
    if (f.has("kld_mean") || f.has("ppl_base")) {
        // one report (its "masked" is a flag, not the map of several)
        out.single = true;
        eval_entry_in_file e;
        if (!report_from_json(f, e.report)) {
            err = f.error();
            return false;
        }
        e.key = e.report.candidate;
        e.masked = e.report.masked;
        out.entries.push_back(e);
        return true;
    }
    if (!f.has("pruned") && !f.has("masked")) {
        err = "eval '" + name + "' is not a reap eval report (no kld_mean, no \"pruned\" or \"masked\")";
        return false;
    }
    for (const char * k : {"pruned", "masked"}) {
        std::vector<std::pair<std::string, const nlohmann::json *>> reps;
        if (!f.members(k, reps)) break;
        for (const auto & [key, v] : reps) {
            json_fields r = f.nested(*v, std::string(k) + ".\"" + key + "\"");
            eval_entry_in_file e;
            e.key = key;
            e.masked = std::string(k) == "masked";
            std::string entry_format = k_eval_format;
            int64_t entry_version = out.version;
            if (!r.opt_str("format", entry_format) || !r.opt_i64("version", entry_version, 1, k_eval_version)) break;
            if (entry_format != k_eval_format) {
                r.fail("format", "is \"" + entry_format + "\", not \"" + k_eval_format + "\"");
                break;
            }
            if (!report_from_json(r, e.report)) break;
            if (e.report.masked != e.masked && !e.report.candidate.empty()) {
                r.fail("masked", std::string("is ") + (e.report.masked ? "true" : "false") + " under \"" + k + "\"");
                break;
            }
            e.report.masked = e.masked;
            out.entries.push_back(e);
        }
    }
    if (!f.ok()) {
        err = f.error();
        return false;
    }
    return true;
}

bool read_eval_document(const std::string & path, eval_document & out, std::string & err) {
    nlohmann::json j;
    return util::read_json_file(path, "eval", k_max_eval_bytes, j, err) && eval_document_from_json(j, path, out, err);
}

ojson file_ids_json(const std::vector<eval_report::file_id> & files) {
    ojson a = ojson::array();
    for (const auto & f : files) {
        a.push_back({{"file", f.name}, {"bytes", f.bytes}, {"sha256", f.listed_sha256.empty() ? ojson(nullptr) : ojson(f.listed_sha256)}});
    }
    return a;
}

bool file_ids_from_json(util::json_fields & f, const char * key, std::vector<eval_report::file_id> & out) {
    std::vector<const nlohmann::json *> files;
    if (!f.elements(key, files)) return false;
    for (size_t i = 0; i < files.size(); ++i) {
        json_fields cf = f.nested(*files[i], std::string(key) + "[" + std::to_string(i) + "]");
        eval_report::file_id id;
        if (!cf.str("file", id.name) || !cf.u64("bytes", id.bytes) || !cf.opt_sha256("sha256", id.listed_sha256)) return false;
        out.push_back(id);
    }
    return true;
}

} // namespace reap

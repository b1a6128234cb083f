// The model card of a pruned build (see report.h): gathers the receipts,
// checks them, and writes README.md and its figures.
#include "report/report.h"
#include "report/sweep_chart.h"

#include "gguf/gguf.h"
#include "moe/census.h"
#include "plan/planners.h"
#include "plan/plan.h"
#include "plan/receipts.h"
#include "prune/prune.h"
#include "saliency/archive.h"
#include "util/file.h"
#include "util/number_format.h"
#include "util/path.h"
#include "util/sha256.h"
#include "util/strings.h"
#include "util/svg_chart.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

namespace reap::report {

namespace {

namespace pl = reap::planner;
using json = nlohmann::json;

// ---- small formatting -----------------------------------------------------------------------

std::string fmt(const char * f, double v) {
    char buf[64];
    snprintf(buf, sizeof(buf), f, v);
    return buf;
}

std::string pct(double v, int decimals = 1) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*f%%", decimals, 100.0 * v);
    return buf;
}

// Markdown inline code with backticks that cannot break out.
std::string code(const std::string & s) {
    std::string t = s;
    std::replace(t.begin(), t.end(), '`', '\'');
    return "`" + t + "`";
}

// A YAML scalar, double-quoted.
std::string yaml_str(const std::string & s) {
    std::string r = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') r += '\\';
        if (c == '\n') { r += "\\n"; continue; }
        r += c;
    }
    return r + "\"";
}

// ---- reading JSON receipts --------------------------------------------------------------------

bool read_json(const std::string & path, const char * what, json & out, std::string & err) {
    std::string text;
    if (!util::read_file(path, what, text, err)) return false;
    out = json::parse(text, nullptr, false);
    if (out.is_discarded()) {
        err = std::string(what) + " '" + path + "' is not JSON";
        return false;
    }
    return true;
}

std::string str_at(const json & j, const char * key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

double num_at(const json & j, const char * key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

// ---- eval receipts --------------------------------------------------------------------------

struct metrics {
    double   ppl_ratio = NAN, kld_mean = NAN, kld_median = NAN, kld_p99 = NAN, top1 = NAN;
    uint64_t n_tokens = 0;
};

metrics metrics_of(const json & j) {
    metrics m;
    m.ppl_ratio  = num_at(j, "ppl_ratio");
    m.kld_mean   = num_at(j, "kld_mean");
    m.kld_median = num_at(j, "kld_median");
    m.kld_p99    = num_at(j, "kld_p99");
    m.top1       = num_at(j, "argmax_agree");
    const double n = num_at(j, "n_tokens");
    m.n_tokens = std::isfinite(n) && n >= 0 ? (uint64_t) n : 0;
    return m;
}

enum class eval_match { hashes, mask_plan, path_only, other, unidentified };

struct eval_entry {
    std::string json_file;     // the --eval file
    std::string candidate;     // what it says it measured
    bool        masked = false;
    eval_match  match = eval_match::unidentified;
    std::string why;           // for other / unidentified
    std::string input_file, input_sha256;
    metrics     overall;
    std::vector<std::pair<std::string, metrics>> domains;
    bool        corpus = false;
};

// The reports of one eval JSON: a single report (`reap eval --json` with one
// model) or {"pruned": {PATH: report}, "masked": {PLAN: report}}.
bool eval_reports(const std::string & path, const json & j, std::vector<std::pair<std::string, const json *>> & out,
                  std::vector<bool> & masked, std::string & err) {
    if (!j.is_object()) {
        err = "eval '" + path + "' is not a JSON object";
        return false;
    }
    if (j.contains("kld_mean")) {
        // one report (its "masked" is a flag, not the map of several)
        out.push_back({str_at(j, "candidate"), &j});
        masked.push_back(j.contains("masked") && j["masked"].is_boolean() && j["masked"].get<bool>());
    } else if (j.contains("pruned") || j.contains("masked")) {
        for (const char * k : {"pruned", "masked"}) {
            if (!j.contains(k)) continue;
            if (!j[k].is_object()) {
                err = "eval '" + path + "': \"" + k + "\" is not an object";
                return false;
            }
            for (auto it = j[k].begin(); it != j[k].end(); ++it) {
                out.push_back({it.key(), &it.value()});
                masked.push_back(std::string(k) == "masked");
            }
        }
    } else {
        err = "eval '" + path + "' is not a reap eval report (no kld_mean, no \"pruned\" or \"masked\")";
        return false;
    }
    return true;
}

// Matches one report against the build: by the hashes of its files, by the
// plan's hash for a mask, by the path as the last resort (older eval files).
void match_eval(const json & r, bool masked, const std::string & candidate, const std::map<std::string, std::string> & build_sums,
                const std::string & plan_sha, const std::string & pruned_path, const std::string & plan_path, eval_entry & e) {
    e.candidate = candidate;
    e.masked = masked;
    if (masked) {
        const std::string h = str_at(r, "candidate_sha256");
        if (!h.empty()) {
            e.match = h == plan_sha ? eval_match::mask_plan : eval_match::other;
            if (e.match == eval_match::other) e.why = "it masked another plan (sha256 " + h.substr(0, 12) + "…, this plan's is " + plan_sha.substr(0, 12) + "…)";
        } else if (!candidate.empty() && util::same_file(candidate, plan_path)) {
            e.match = eval_match::path_only;
        } else {
            e.match = eval_match::unidentified;
            e.why = "it records no hash of the plan it masked" + (candidate.empty() ? std::string() : " (" + candidate + ")");
        }
        return;
    }
    if (r.contains("candidate_files") && r["candidate_files"].is_array() && !r["candidate_files"].empty()) {
        std::set<std::string> seen;
        for (const auto & f : r["candidate_files"]) {
            const std::string name = str_at(f, "file"), h = str_at(f, "sha256");
            seen.insert(name);
            const auto it = build_sums.find(name);
            if (h.empty()) {
                e.match = eval_match::unidentified;
                e.why = "no SHA256SUMS listed a hash for '" + name + "' when it was measured";
                return;
            }
            if (it == build_sums.end() || it->second != h) {
                e.match = eval_match::other;
                e.why = "it measured '" + name + "' with sha256 " + h.substr(0, 12) + "…, which is not a file of this build";
                return;
            }
        }
        if (seen.size() != build_sums.size()) {
            e.match = eval_match::other;
            e.why = "it measured " + std::to_string(seen.size()) + " file(s); this build has " + std::to_string(build_sums.size());
            return;
        }
        e.match = eval_match::hashes;
        return;
    }
    if (!candidate.empty() && util::same_file(candidate, pruned_path)) {
        e.match = eval_match::path_only;
        return;
    }
    e.match = candidate.empty() ? eval_match::unidentified : eval_match::other;
    e.why = candidate.empty() ? "it does not say which file it measured"
                              : "it measured '" + candidate + "', which is not this build, and records no hashes";
}

// ---- everything the card says -----------------------------------------------------------------

struct model_facts {
    std::string      path;
    gguf::model      m;
    moe::census      c;
    uint64_t         n_params = 0;
};

bool open_facts(const std::string & path, model_facts & f, std::string & err) {
    f.path = path;
    if (!gguf::open_model(path, f.m, err)) return false;
    if (!moe::take_census(f.m, {}, f.c, err)) {
        err = path + ": " + err;
        return false;
    }
    for (const auto & t : f.m.tensors) f.n_params += t.n_elements();
    return true;
}

struct saliency_facts {
    bool                     have = false;
    std::string              path, sha256;
    saliency::archive        a;
    pl::ranking              rank;               // the plan's method and domains
    pl::share_report         share;              // the plan's keep lists under that ranking
    pl::receipts             receipts;           // the plan's, as `reap plan` records them
    std::vector<std::pair<std::string, double>> share_by_domain;
    std::vector<pl::size_point> curve;           // N -> share, bytes
    std::vector<std::vector<double>> usage;      // [domain][moe layer]: share of routed tokens on kept experts
    std::string              corpus_name, corpus_sha256, tool;
    std::string              invariant;          // "" or the count invariant's message
};

// The plan's ranking options from its provenance (what `reap plan` records).
pl::rank_options rank_options_of(const plan & p, const saliency::archive & a, std::vector<std::string> & notes) {
    pl::rank_options o;
    o.how = pl::default_method(a.metrics);
    const json & pv = p.provenance;
    const std::string m = str_at(pv, "method");
    if (m.empty() || !pl::parse_method(m, o.how)) {
        notes.push_back("The plan does not record a known method; the saliency figures score with the archive's default (" +
                        std::string(pl::method_name(o.how)) + ").");
        o.how = pl::default_method(a.metrics);
    }
    if (pv.contains("domains") && pv["domains"].is_array()) {
        for (const auto & d : pv["domains"]) {
            if (d.is_string()) o.domains.push_back(d.get<std::string>());
        }
    }
    if (str_at(pv, "consensus") == "minrank") o.cons = pl::consensus::minrank;
    if (pv.contains("seed") && pv["seed"].is_number_unsigned()) o.seed = pv["seed"].get<uint64_t>();
    if (pv.contains("protect_super") && pv["protect_super"].is_boolean()) o.protect_super = pv["protect_super"].get<bool>();
    return o;
}

bool gather_saliency(const report_options & opt, const plan & p, const model_facts & src, saliency_facts & s,
                     std::vector<std::string> & notes, std::string & err) {
    s.path = opt.saliency;
    if (!util::sha256_file(s.path, s.sha256, err)) return false;
    if (!saliency::read_archive(s.path, s.a, err)) return false;
    saliency::fingerprint fp;
    if (!saliency::model_fingerprint(src.m, fp, err)) return false;
    if (!saliency::fingerprints_match(s.a.model, fp, err)) {
        err = s.path + ": " + err;
        return false;
    }
    const std::string planned = p.provenance.contains("saliency") ? str_at(p.provenance["saliency"], "sha256") : "";
    if (!planned.empty() && planned != s.sha256) {
        err = "saliency archive '" + s.path + "' is not the one the plan was made from (the plan records sha256 " + planned +
              ", the file's is " + s.sha256 + ")";
        return false;
    }
    if (planned.empty()) notes.push_back("The plan does not record which archive it was made from; the method figures assume it was " + code(util::base_name(s.path)) + ".");
    std::string why;
    if (!saliency::check_count_invariant(s.a, why, 1e-9)) s.invariant = why;
    s.a.provenance.get_string_or(saliency::k_key_corpus_sha256, "", s.corpus_sha256, why);
    s.a.provenance.get_string_or("reap.saliency.corpus", "", s.corpus_name, why);
    s.a.provenance.get_string_or(saliency::k_key_tool, "", s.tool, why);

    moe::layout lay;
    if (!model_layout(src.m, lay, err)) return false;
    const int64_t n_group = lay.router.n_group > 1 ? lay.router.n_group : 1;
    const pl::rank_options ro = rank_options_of(p, s.a, notes);
    if (!pl::rank_experts(s.a, n_group, ro, s.rank, err)) {
        err = s.path + ": " + err;
        return false;
    }
    s.share = pl::plan_share(s.rank, p);
    // the plan's receipts under the same ranking: each domain's own saliency kept, and the safety margin
    if (!pl::plan_receipts(s.rank, p, s.receipts, err)) {
        err = s.path + ": " + err;
        return false;
    }
    for (size_t d = 0; d < s.a.domains.size(); ++d)
        s.share_by_domain.push_back({s.a.domains[d].name, pl::summarize_share(s.receipts, (int) d).mean});
    // expert usage: the share of each domain's routed tokens that went to kept experts
    for (const auto & d : s.a.domains) {
        std::vector<double> row;
        for (const auto & pl_layer : p.layers) {
            double all = 0, kept = 0;
            for (int64_t e = 0; e < p.n_expert; ++e) all += d.count[s.a.index(pl_layer.layer, (int) e)];
            for (int64_t e : pl_layer.keep) kept += d.count[s.a.index(pl_layer.layer, (int) e)];
            row.push_back(all > 0 ? kept / all : NAN);
        }
        s.usage.push_back(row);
    }
    // the retention curve: every size `reap plan` would allow (up to ~40), sized as prune writes them
    pl::size_context ctx;
    ctx.model = &src.m;
    ctx.layout = &lay;
    ctx.prune.plan_sha256 = std::string(64, '0');   // a placeholder: the sizes do not depend on it
    ctx.prune.version = opt.tool_version;
    const plan_model_facts facts = facts_of(lay);
    if (!pl::size_table(s.rank, facts, ctx, p.n_keep, s.curve, err)) return false;
    s.have = true;
    return true;
}

struct sweep_facts {
    bool        have = false;
    std::string path, saliency_sha256, method, input_file;
    std::vector<std::string> domains;
    struct point {
        int64_t  n_keep = 0;
        uint64_t bytes = 0;
        double   share = NAN;
        metrics  overall;
        std::vector<std::pair<std::string, metrics>> domains;
    };
    std::vector<point> points;
};

bool gather_sweep(const std::string & path, const model_facts & src, sweep_facts & s, std::string & err) {
    json j;
    if (!read_json(path, "sweep", j, err)) return false;
    if (str_at(j, "format") != "reap-sweep" || !j.contains("points") || !j["points"].is_array()) {
        err = "sweep '" + path + "' is not a reap sweep (format \"reap-sweep\" with \"points\")";
        return false;
    }
    s.path = path;
    const json & mdl = j.contains("model") ? j["model"] : json::object();
    if (str_at(mdl, "arch") != src.c.arch || num_at(mdl, "n_expert") != (double) src.c.n_expert) {
        err = "sweep '" + path + "' is for another model (" + str_at(mdl, "arch") + ", " + fmt("%.0f", num_at(mdl, "n_expert")) +
              " experts; the source is " + src.c.arch + ", " + std::to_string(src.c.n_expert) + ")";
        return false;
    }
    const json & sal = j.contains("saliency") ? j["saliency"] : json::object();
    s.saliency_sha256 = str_at(sal, "sha256");
    s.method = str_at(sal, "method");
    if (sal.contains("domains") && sal["domains"].is_array()) {
        for (const auto & d : sal["domains"]) if (d.is_string()) s.domains.push_back(d.get<std::string>());
    }
    if (j.contains("input")) s.input_file = str_at(j["input"], "file");
    for (const auto & q : j["points"]) {
        sweep_facts::point pt;
        const double n = num_at(q, "n_keep"), b = num_at(q, "predicted_bytes");
        if (!(n >= 1 && n <= (double) src.c.n_expert) || !(b >= 0)) {
            err = "sweep '" + path + "': a point without a valid n_keep / predicted_bytes";
            return false;
        }
        pt.n_keep = (int64_t) n;
        pt.bytes = (uint64_t) b;
        pt.share = num_at(q, "saliency_share");
        if (q.contains("overall")) pt.overall = metrics_of(q["overall"]);
        if (q.contains("domains") && q["domains"].is_object()) {
            for (auto it = q["domains"].begin(); it != q["domains"].end(); ++it) pt.domains.push_back({it.key(), metrics_of(it.value())});
        }
        s.points.push_back(pt);
    }
    std::sort(s.points.begin(), s.points.end(), [](const auto & a, const auto & b) { return a.n_keep > b.n_keep; });
    s.have = !s.points.empty();
    return true;
}

// ---- figures ----------------------------------------------------------------------------------

util::heatmap heatmap_of(const saliency_facts & s, const plan & p) {
    util::heatmap h;
    h.title = "Saliency per expert (" + std::string(pl::method_name(s.rank.share_method)) + "), each layer sorted";
    h.x_label = "experts of the layer, most salient first";
    h.y_label = "MoE layer";
    h.value_label = "colour: share of the layer's saliency (sqrt scale)";
    h.marked_label = "kept";
    h.unmarked_label = "removed";
    h.n_cols = (size_t) s.rank.n_expert;
    for (const auto & lr : s.rank.layers) {
        const plan_layer * pl_layer = p.find_layer(lr.layer);
        const double total = std::accumulate(lr.score.begin(), lr.score.end(), 0.0);
        std::vector<int64_t> ids(lr.score.size());
        std::iota(ids.begin(), ids.end(), 0);
        std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return lr.score[a] > lr.score[b]; });
        h.row_labels.push_back(std::to_string(lr.layer));
        for (int64_t e : ids) {
            h.values.push_back(total > 0 ? lr.score[e] / total : 0.0);
            const bool kept = pl_layer && std::count(pl_layer->keep.begin(), pl_layer->keep.end(), e);
            h.marked.push_back(kept ? 1 : 0);
        }
    }
    return h;
}

util::chart retention_chart(const saliency_facts & s, const plan & p, double plan_share) {
    util::chart c;
    c.title = "Saliency kept against experts kept (" + std::string(pl::method_name(s.rank.share_method)) + ")";
    c.x_label = "experts kept per MoE layer (N)";
    c.x_descending = true;
    util::chart_panel panel;
    panel.y_label = "saliency share kept (%, mean over MoE layers)";
    util::chart_series share{"saliency kept", {}, {}};
    share.bold = true;
    std::vector<uint64_t> bytes;
    for (const auto & pt : s.curve) {
        share.x.push_back((double) pt.n_keep);
        share.y.push_back(100.0 * pt.share);
        bytes.push_back(pt.bytes);
    }
    panel.series = {share, util::size_series(share.x, bytes, panel)};
    c.panels.push_back(panel);
    c.marks.push_back({(double) p.n_keep, "this build: N = " + std::to_string(p.n_keep) + ", " + pct(plan_share)});
    return c;
}

util::chart usage_chart(const saliency_facts & s, const plan & p) {
    util::chart c;
    c.title = "Routed tokens that land on kept experts, per calibration domain";
    c.x_label = "MoE layer";
    c.x_integer = true;
    util::chart_panel panel;
    panel.y_label = "routed tokens on kept experts (%)";
    std::vector<double> xs;
    for (const auto & l : p.layers) xs.push_back((double) l.layer);
    for (size_t d = 0; d < s.a.domains.size(); ++d) {
        util::chart_series sr{s.a.domains[d].name, xs, {}};
        for (double v : s.usage[d]) sr.y.push_back(100.0 * v);
        panel.series.push_back(sr);
    }
    c.panels.push_back(panel);
    return c;
}

// The sweep's chart (sweep_chart.h) from a SWEEP.json, KLD only, this build's N marked.
util::chart sweep_kld_chart(const sweep_facts & s, const plan & p) {
    sweep_chart_input in;
    in.title = "KL divergence from the source at each size (sweep, by masking)";
    in.top1_panel = false;
    in.marks.push_back({(double) p.n_keep, "this build: N = " + std::to_string(p.n_keep)});
    if (!s.points.empty()) {
        for (const auto & d : s.points[0].domains) in.domains.push_back(d.first);
    }
    for (const auto & pt : s.points) {
        sweep_chart_point q;
        q.n_keep = pt.n_keep;
        q.bytes = pt.bytes;
        q.overall = {pt.overall.kld_mean, pt.overall.top1};
        for (const auto & d : pt.domains) q.domains.push_back({d.second.kld_mean, d.second.top1});
        in.points.push_back(q);
    }
    return sweep_chart(in);
}

// ---- the card -----------------------------------------------------------------------------------

std::string eval_table(const eval_entry & e) {
    std::string o = "| domain | tokens | KLD mean | KLD median | KLD p99 | top-1 agreement | PPL ratio |\n|---|---:|---:|---:|---:|---:|---:|\n";
    auto row = [&](const std::string & name, const metrics & m) {
        o += "| " + name + " | " + util::group_digits(m.n_tokens) + " | " + fmt("%.4f", m.kld_mean) + " | " + fmt("%.4f", m.kld_median) +
             " | " + fmt("%.4f", m.kld_p99) + " | " + pct(m.top1, 2) + " | " + fmt("%.4f", m.ppl_ratio) + " |\n";
    };
    for (const auto & [name, m] : e.domains) {
        if (m.n_tokens) row(name, m);
    }
    row("**all**", e.overall);
    return o;
}

// A census row: label, source value, build value.
void census_row(std::string & o, const std::string & label, const std::string & a, const std::string & b) {
    o += "| " + label + " | " + a + " | " + b + " |\n";
}

std::string types_of(const moe::census & c) {
    std::vector<std::string> v;
    for (const auto & [name, tc] : c.types) v.push_back(name + " ×" + std::to_string(tc.count));
    return util::join(v, ", ");
}

// The Hugging Face repo id of the source, when its GGUF says where it came from.
std::string hf_repo_of(const gguf::model & m) {
    std::string err;
    for (const char * key : {"general.base_model.0.repo_url", "general.source.repo_url", "general.repo_url"}) {
        std::string url;
        if (!m.kvs.get_string_or(key, "", url, err) || url.empty()) continue;
        const std::string pre = "https://huggingface.co/";
        if (util::starts_with(url, pre.c_str())) {
            std::string id = url.substr(pre.size());
            while (!id.empty() && id.back() == '/') id.pop_back();
            if (std::count(id.begin(), id.end(), '/') == 1) return id;
        }
    }
    return "";
}

// Ensures DIR (and DIR/figures) exist; `made`: this call created it.
bool make_dir(const std::string & dir, bool & made, std::string & err) {
    made = util::current_disk().mkdir(dir, 0755);
    if (!made && errno != EEXIST) {
        err = "cannot create '" + dir + "': " + strerror(errno);
        return false;
    }
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        err = "'" + dir + "' is not a directory";
        return false;
    }
    return true;
}

// Every file the report reads, as (what, path) for the output rule: the
// source and the build (each shard of either, once opened: `src`, `cut`), the
// plan, the build's SHA256SUMS, the archive, the evals and the sweep.
std::vector<std::pair<std::string, std::string>> inputs_of(const report_options & opt, const model_facts * src,
                                                           const model_facts * cut) {
    std::vector<std::pair<std::string, std::string>> in = {
        {"source model", opt.source}, {"plan", opt.plan}, {"build", opt.pruned},
        {"build's checksum file", util::sums_path_for(opt.pruned)}, {"saliency archive", opt.saliency},
        {"sweep", opt.sweep}};
    for (const auto & e : opt.evals) in.emplace_back("eval", e);
    if (src) for (const auto & sh : src->m.shards) in.emplace_back("source model file", sh.path);
    if (cut) for (const auto & sh : cut->m.shards) in.emplace_back("build file", sh.path);
    return in;
}

// The output rule (util::check_output) for every file the report publishes:
// none is an input (by inode: links and other spellings count), with or
// without --force; none that exists is replaced without --force.
bool check_outputs(const std::vector<std::string> & files, const std::vector<std::pair<std::string, std::string>> & inputs,
                   bool force, std::string & err) {
    for (const auto & f : files) {
        if (!util::check_output(f, inputs, force, err)) return false;
    }
    return true;
}

} // namespace

bool write_report(const report_options & opt, report_result & out, std::string & err) {
    out = report_result{};
    if (opt.source.empty() || opt.plan.empty() || opt.pruned.empty() || opt.out_dir.empty()) {
        err = "report needs the source, the plan, the build and the output directory";
        return false;
    }
    const std::string readme = opt.out_dir + "/README.md";
    const std::string fig_dir = opt.out_dir + "/figures";
    // what this run may publish, checked before any work (again before writing,
    // with the shards of the two models and the figures actually drawn)
    {
        std::vector<std::string> may_write = {readme};
        if (!opt.saliency.empty()) {
            for (const char * f : {"saliency-heatmap.svg", "retention.svg", "domain-usage.svg"}) may_write.push_back(fig_dir + "/" + f);
        }
        if (!opt.sweep.empty()) may_write.push_back(fig_dir + "/sweep-kld.svg");
        if (!check_outputs(may_write, inputs_of(opt, nullptr, nullptr), opt.force, err)) return false;
    }
    std::vector<std::string> notes;   // method caveats
    std::vector<std::string> & verified = out.verified;
    std::vector<std::string> & unverified = out.not_verified;

    // ---- the build: re-audited here, or no card ----
    model_facts src, cut;
    if (!open_facts(opt.source, src, err)) return false;
    plan p;
    if (!read_plan(opt.plan, p, err)) return false;
    std::string plan_sha;
    if (!plan_file_sha256(opt.plan, plan_sha, err)) return false;
    prune::verify_options vo;
    vo.plan_sha256 = plan_sha;
    prune::verify_report vr;
    if (!prune::verify_pruned(src.m, p, opt.pruned, vo, vr, err)) {
        out.differs = vr.differs;
        if (vr.differs) err = "the build failed verification, no card written: " + opt.pruned + ": " + err;
        return false;
    }
    if (!open_facts(opt.pruned, cut, err)) return false;
    // the build's files with the hashes verify just checked
    std::map<std::string, std::string> build_sums;
    std::vector<std::pair<std::string, std::string>> sums_lines;
    {
        std::vector<std::pair<std::string, std::string>> entries;
        if (!util::read_sha256sums(util::sums_path_for(opt.pruned), entries, err)) return false;
        for (const auto & sh : cut.m.shards) {
            const std::string name = util::base_name(sh.path);
            for (const auto & [n, h] : entries) {
                if (n == name) {
                    build_sums[name] = h;
                    sums_lines.push_back({h, name});
                }
            }
        }
        if (build_sums.size() != cut.m.shards.size()) {
            err = "SHA256SUMS beside '" + opt.pruned + "' does not list every file of the build";
            return false;
        }
    }
    verified.push_back("**The build is the source cut by the plan, byte for byte.** `reap verify`'s audit, re-run by this report: " +
                       std::to_string(vr.n_shards) + " file(s), " + util::group_digits(vr.n_tensors) + " tensors (" + util::group_digits(vr.n_sliced) +
                       " sliced along the expert axis), " + util::group_digits(vr.bytes_compared) + " bytes compared with the source, " +
                       util::group_digits(vr.n_kvs) + " metadata keys; provenance " + (vr.stamped ? "stamped (reap.plan.sha256 = this plan's hash)" : "not stamped") + ".");
    verified.push_back("**SHA256SUMS holds**: " + std::to_string(vr.n_sums_checked) + " file(s) re-hashed and equal to the list below.");
    if (!vr.stamped) unverified.push_back("The build carries no `reap.*` stamp: nothing inside the files names the plan they were cut by (the audit above ties them to this plan).");

    // ---- method ----
    saliency_facts sal;
    if (!opt.saliency.empty()) {
        if (!gather_saliency(opt, p, src, sal, notes, err)) return false;
        if (!sal.invariant.empty()) unverified.push_back("The archive's token counts are not those of a complete calibration: " + sal.invariant + ".");
    } else {
        unverified.push_back("No saliency archive was given: the calibration corpus, its domains and token counts, and the saliency kept per domain are not shown; the method section repeats what the plan records.");
    }
    const double share_recorded = p.provenance.contains("saliency_retained") ? num_at(p.provenance["saliency_retained"], "mean") : NAN;
    if (sal.have && std::isfinite(share_recorded) && std::fabs(share_recorded - sal.share.mean) > 1e-9) {
        unverified.push_back("The plan records a saliency share of " + pct(share_recorded, 3) + "; recomputed from the archive it is " + pct(sal.share.mean, 3) + ".");
    }
    std::vector<std::string> plan_domains;
    if (p.provenance.contains("domains") && p.provenance["domains"].is_array()) {
        for (const auto & d : p.provenance["domains"]) if (d.is_string()) plan_domains.push_back(d.get<std::string>());
    }
    std::set<std::string> calib_domains;
    for (const auto & d : sal.a.domains) calib_domains.insert(d.name);

    // ---- evals ----
    std::vector<eval_entry> evals;   // the ones measured on this build
    for (const auto & path : opt.evals) {
        json j;
        if (!read_json(path, "eval", j, err)) return false;
        std::vector<std::pair<std::string, const json *>> reps;
        std::vector<bool> masked;
        if (!eval_reports(path, j, reps, masked, err)) return false;
        bool found = false;
        std::vector<std::string> whys;
        for (size_t i = 0; i < reps.size(); ++i) {
            eval_entry e;
            e.json_file = path;
            match_eval(*reps[i].second, masked[i], reps[i].first, build_sums, plan_sha, opt.pruned, opt.plan, e);
            if (e.match == eval_match::other || e.match == eval_match::unidentified) {
                whys.push_back(e.why);
                continue;
            }
            const json & r = *reps[i].second;
            e.overall = metrics_of(r);
            e.corpus = r.contains("corpus") && r["corpus"].is_boolean() && r["corpus"].get<bool>();
            if (r.contains("domains") && r["domains"].is_object()) {
                for (auto it = r["domains"].begin(); it != r["domains"].end(); ++it) e.domains.push_back({it.key(), metrics_of(it.value())});
            }
            if (r.contains("input")) {
                e.input_file = str_at(r["input"], "file");
                e.input_sha256 = str_at(r["input"], "sha256");
            }
            if (!std::isfinite(e.overall.kld_mean)) {
                whys.push_back("it holds no pruned-model numbers (a base-only run)");
                continue;
            }
            evals.push_back(e);
            found = true;
        }
        if (!found) {
            unverified.push_back("**Eval " + code(util::base_name(path)) + " is not counted: it is not a measurement of this build** (" +
                                 util::join(whys, "; ") + "). Its numbers are not shown.");
        }
    }
    if (evals.empty()) {
        unverified.push_back("**Quality unmeasured.** No eval of this build was given: nothing here says what the cut costs (run `reap eval -m SOURCE -p BUILD -f HELDOUT --json` and pass it with `--eval`).");
    }
    for (const auto & e : evals) {
        std::string what = e.masked ? "the plan's experts masked in the source (virtual pruning; the plan file's sha256 matches)" : "this build's files";
        if (e.match == eval_match::path_only) what = e.masked ? "the plan at the same path" : "the file at this build's path";
        verified.push_back("**Eval " + code(util::base_name(e.json_file)) + "**: measured on " + what + ", " +
                           (e.input_file.empty() ? std::string("on a corpus it does not name") : "on " + code(util::base_name(e.input_file))) + ", " +
                           util::group_digits(e.overall.n_tokens) + " tokens (table below).");
        if (e.match == eval_match::path_only) {
            unverified.push_back("Eval " + code(util::base_name(e.json_file)) + " records no hashes of what it measured; it is matched to this build by its path only (re-run it with this version of `reap eval` to tie it to the files).");
        }
        // overlap with the calibration corpus
        if (e.input_sha256.empty()) {
            unverified.push_back("Eval " + code(util::base_name(e.json_file)) + " does not record its corpus's hash: whether it overlaps the calibration corpus is unknown.");
        } else if (!sal.have) {
            unverified.push_back("Without the saliency archive, whether eval " + code(util::base_name(e.json_file)) + "'s corpus overlaps the calibration corpus is unknown.");
        } else if (sal.corpus_sha256.empty()) {
            unverified.push_back("The archive does not record its corpus's hash (an imatrix import?): whether the eval corpus overlaps it is unknown.");
        } else if (sal.corpus_sha256 == e.input_sha256) {
            unverified.push_back("**The eval corpus is the calibration corpus** (same sha256): eval " + code(util::base_name(e.json_file)) +
                                 " measures the cut on the text it was chosen on, which flatters the cut. Measure on held-out text.");
        } else {
            verified.push_back("Eval " + code(util::base_name(e.json_file)) + "'s corpus is not the calibration corpus file (the sha256 differ).");
            unverified.push_back("The eval and calibration corpora are different files; whether they share samples was not checked.");
        }
        // domains measured but not calibrated on, or not scored by the plan
        for (const auto & [name, m] : e.domains) {
            if (!m.n_tokens) continue;
            if (sal.have && !calib_domains.count(name)) {
                unverified.push_back("**Pruned blind for " + code(name) + "**: the eval has it, the calibration corpus does not; the cut chose experts without seeing it (KLD " + fmt("%.4f", m.kld_mean) + ").");
            } else if (!plan_domains.empty() && std::find(plan_domains.begin(), plan_domains.end(), name) == plan_domains.end()) {
                unverified.push_back("**Pruned blind for " + code(name) + "**: calibrated, but the plan scored only " + util::join(plan_domains, ", ") + ".");
            }
        }
        if (sal.have) {
            for (const auto & d : sal.a.domains) {
                const bool measured = std::any_of(e.domains.begin(), e.domains.end(), [&](const auto & x) { return x.first == d.name && x.second.n_tokens; });
                if (!measured) unverified.push_back("Calibrated on " + code(d.name) + " but eval " + code(util::base_name(e.json_file)) + " does not measure it.");
            }
        }
    }
    sweep_facts sw;
    if (!opt.sweep.empty()) {
        if (!gather_sweep(opt.sweep, src, sw, err)) return false;
        const std::string planned = p.provenance.contains("saliency") ? str_at(p.provenance["saliency"], "sha256") : "";
        if (!planned.empty() && sw.saliency_sha256 != planned) {
            unverified.push_back("The sweep was planned from another archive than this build's plan (sha256 " + sw.saliency_sha256.substr(0, 12) + "…): its curve is about other keep lists.");
        }
    } else {
        unverified.push_back("No sweep was given: other sizes were not scored, so nothing here says whether a smaller or larger cut would serve better.");
    }
    unverified.push_back("Task accuracy (benchmarks), long-context behaviour, tool use and safety behaviour: not measured by reap; KLD, top-1 agreement and perplexity are next-token measures against the source.");

    // ---- figures ----
    std::vector<std::pair<std::string, std::string>> figures;   // file name, svg
    if (sal.have) {
        figures.push_back({"saliency-heatmap.svg", util::render_heatmap_svg(heatmap_of(sal, p))});
        figures.push_back({"retention.svg", util::render_svg(retention_chart(sal, p, sal.share.mean))});
        figures.push_back({"domain-usage.svg", util::render_svg(usage_chart(sal, p))});
    }
    if (sw.have) figures.push_back({"sweep-kld.svg", util::render_svg(sweep_kld_chart(sw, p))});

    // ---- the text ----
    std::string name;
    src.m.kvs.get_string_or("general.name", "", name, err);
    if (name.empty()) name = util::stem_of(opt.source);
    const std::string repo = hf_repo_of(src.m);
    std::string license;
    src.m.kvs.get_string_or("general.license", "", license, err);
    const double removed = 1.0 - (double) p.n_keep / (double) p.n_expert;
    std::string o;
    o += "---\n";
    o += "base_model: " + (repo.empty() ? std::string(k_fill_in) + "  # the Hugging Face id of the source model (org/name); its GGUF does not say" : repo) + "\n";
    o += "license: " + (license.empty() ? std::string(k_fill_in) + "  # the source model's licence; its GGUF does not say" : yaml_str(license)) + "\n";
    o += "library_name: gguf\n";
    o += "pipeline_tag: text-generation\n";
    o += "tags:\n  - moe\n  - expert-pruning\n  - reap\n  - gguf\n  - " + yaml_str(cut.c.arch) + "\n";
    for (const auto & [t, tc] : cut.c.types) o += "  - " + yaml_str(t) + "\n";
    o += "---\n\n";
    o += "# " + name + ": " + std::to_string(p.n_keep) + " of " + std::to_string(p.n_expert) + " experts per MoE layer\n\n";
    o += "> Fields marked `" + std::string(k_fill_in) + "` could not be known from the files: fill them in before publishing.\n";
    o += "> Everything else on this card was written by `reap report` from the files and receipts named in it.\n\n";
    o += "An expert-pruned build of " + code(util::base_name(opt.source)) + " (" + cut.c.arch + "): " + pct(removed) +
         " of the routed experts removed from each of its " + std::to_string(p.layers.size()) + " MoE layers, every other weight unchanged and byte-identical. " +
         util::format_size(src.c.file_bytes) + " → " + util::format_size(cut.c.file_bytes) + ".\n\n";

    o += "## Source vs build\n\nFrom the files themselves (`reap inspect`).\n\n| | source | this build |\n|---|---:|---:|\n";
    census_row(o, "architecture", src.c.arch, cut.c.arch);
    census_row(o, "blocks (MoE)", std::to_string(src.c.n_layer) + " (" + std::to_string(src.c.moe_layers.size()) + ")",
               std::to_string(cut.c.n_layer) + " (" + std::to_string(cut.c.moe_layers.size()) + ")");
    census_row(o, "routed experts per MoE layer", std::to_string(src.c.n_expert), std::to_string(cut.c.n_expert));
    census_row(o, "experts used per token", std::to_string(src.c.n_expert_used), std::to_string(cut.c.n_expert_used));
    census_row(o, "shared experts", std::to_string(src.c.n_expert_shared), std::to_string(cut.c.n_expert_shared));
    if (src.c.n_expert_groups > 1) census_row(o, "expert groups (used)", std::to_string(src.c.n_expert_groups) + " (" + std::to_string(src.c.n_expert_groups_used) + ")", std::to_string(cut.c.n_expert_groups) + " (" + std::to_string(cut.c.n_expert_groups_used) + ")");
    census_row(o, "parameters", util::group_digits(src.n_params), util::group_digits(cut.n_params));
    census_row(o, "tensors", util::group_digits(src.c.n_tensors), util::group_digits(cut.c.n_tensors));
    census_row(o, "files", std::to_string(src.c.n_shards), std::to_string(cut.c.n_shards));
    census_row(o, "file bytes", util::format_size(src.c.file_bytes), util::format_size(cut.c.file_bytes));
    census_row(o, "routed-expert pool", util::format_size(src.c.expert_pool_bytes), util::format_size(cut.c.expert_pool_bytes));
    census_row(o, "dense (everything else)", util::format_size(src.c.dense_bytes), util::format_size(cut.c.dense_bytes));
    census_row(o, "one expert in one layer", util::format_size(src.c.expert_bytes_per_layer), util::format_size(cut.c.expert_bytes_per_layer));
    census_row(o, "bytes read per decoded token", util::format_size(src.c.decode_bytes_per_token), util::format_size(cut.c.decode_bytes_per_token));
    census_row(o, "tensor types", types_of(src.c), types_of(cut.c));
    o += "\n";

    o += "## Method\n\n";
    const std::string method = str_at(p.provenance, "method");
    o += "* **Criterion**: " + (method.empty() ? std::string("not recorded in the plan") : code(method) + (str_at(p.provenance, "method_description").empty() ? "" : ": " + str_at(p.provenance, "method_description"))) + ".\n";
    o += "* **Keep rule**: the " + std::to_string(p.n_keep) + " highest-ranked experts of every MoE layer" +
         (src.c.n_expert_groups > 1 ? ", the same count in every expert group" : "") +
         (str_at(p.provenance, "consensus") == "minrank" ? ", ranked by their best rank in any domain (consensus minrank)" : "") + ".";
    if (p.provenance.contains("request") && p.provenance["request"].is_object()) {
        std::vector<std::string> req;
        for (auto it = p.provenance["request"].begin(); it != p.provenance["request"].end(); ++it) {
            if (it.key() == "stamp") continue;
            req.push_back(it.key() + " " + (it.value().is_string() ? it.value().get<std::string>() : it.value().dump()));
        }
        if (!req.empty()) o += " Requested as " + code(util::join(req, ", ")) + ".";
    }
    o += "\n";
    if (sal.have) {
        o += "* **Calibration**: " + (sal.corpus_name.empty() ? std::string("corpus not named in the archive") : code(sal.corpus_name)) +
             (sal.corpus_sha256.empty() ? "" : " (sha256 " + code(sal.corpus_sha256.substr(0, 16) + "…") + ")") + ", by " +
             (sal.tool.empty() ? std::string("an unrecorded tool") : code(sal.tool)) + ". Domains and tokens:\n\n";
        o += "  | domain | tokens | scored by the plan | saliency kept |\n  |---|---:|:---:|---:|\n";
        for (size_t i = 0; i < sal.a.domains.size(); ++i) {
            const auto & d = sal.a.domains[i];
            const bool scored = std::find(sal.rank.domains.begin(), sal.rank.domains.end(), d.name) != sal.rank.domains.end();
            o += "  | " + d.name + " | " + util::group_digits((uint64_t) d.n_tokens) + " | " + (scored ? "yes" : "no") + " | " + pct(sal.share_by_domain[i].second) + " |\n";
        }
        o += "\n* **Saliency kept**: " + pct(sal.share.mean) + " of the " + std::string(pl::method_name(sal.rank.share_method)) +
             " saliency over the plan's domains (mean over MoE layers; per layer " +
             pct(*std::min_element(sal.share.share.begin(), sal.share.share.end())) + " to " +
             pct(*std::max_element(sal.share.share.begin(), sal.share.share.end())) + "); per domain in the table above, each domain's own saliency on the same keep lists.\n";
        const pl::margin_summary ms = pl::summarize_margin(sal.receipts);
        if (ms.min > 0)
            o += "* **Safety margin**: no pruned expert ranks better than " + std::to_string(ms.min) + " of " + std::to_string(p.n_expert) +
                 " in any of the plan's domains, in any MoE layer (median layer: " + fmt("%.0f", ms.median) + "; the closest call: layer " +
                 std::to_string(ms.layer) + " expert " + std::to_string(ms.expert) + " in " + ms.domain + ").\n";
        // super experts and dead experts
        std::vector<std::string> supers;
        for (const auto & x : sal.rank.super_candidates) {
            const plan_layer * l = p.find_layer(x.layer);
            const bool kept = l && std::count(l->keep.begin(), l->keep.end(), x.expert);
            supers.push_back("layer " + std::to_string(x.layer) + " expert " + std::to_string(x.expert) + " (max ‖out‖ " + fmt("%.4g", x.value) + (kept ? ", kept" : ", **not kept**") + ")");
        }
        o += "* **Super experts** (max output norm above " + fmt("%.4g", sal.rank.super_threshold) + "): " +
             (supers.empty() ? std::string("none") : util::join(supers, "; ")) + (sal.rank.opts.protect_super ? "; protected by the plan" : "; the plan did not protect them") + ".\n";
        size_t dead_dropped = 0, dead_kept = 0;
        for (const auto & x : sal.rank.never_routed) {
            const plan_layer * l = p.find_layer(x.layer);
            (l && std::count(l->keep.begin(), l->keep.end(), x.expert) ? dead_kept : dead_dropped)++;
        }
        o += "* **Dead experts** (never routed to in the plan's domains): " + std::to_string(sal.rank.never_routed.size()) +
             ", of which " + std::to_string(dead_dropped) + " dropped and " + std::to_string(dead_kept) + " kept.\n";
        o += "\n![Saliency heatmap](figures/saliency-heatmap.svg)\n\n![Retention curve](figures/retention.svg)\n\n![Expert usage per domain](figures/domain-usage.svg)\n\n";
    } else {
        if (!plan_domains.empty()) o += "* **Domains scored** (from the plan): " + util::join(plan_domains, ", ") + ".\n";
        if (std::isfinite(share_recorded)) o += "* **Saliency kept** (as the plan records it): " + pct(share_recorded) + ".\n";
        o += "\n";
    }
    for (const auto & n : notes) o += "_" + n + "_\n\n";

    o += "## Verified\n\n";
    for (const auto & v : verified) o += "* " + v + "\n";
    o += "\n";
    for (const auto & e : evals) {
        o += "**" + code(util::base_name(e.json_file)) + "**" + (e.input_file.empty() ? "" : " on " + code(util::base_name(e.input_file))) +
             (e.input_sha256.empty() ? "" : " (sha256 " + code(e.input_sha256.substr(0, 16) + "…") + ")") +
             ": KL divergence of this build from the source, per token over the full vocabulary; top-1 agreement with the source; perplexity ratio (build / source).\n\n" +
             eval_table(e) + "\n";
    }
    o += "## Not verified\n\n";
    for (const auto & v : unverified) o += "* " + v + "\n";
    o += "\n";

    if (sw.have) {
        o += "## Other sizes\n\nFrom the sweep " + code(util::base_name(sw.path)) + " (every size scored by masking its removed experts in the source" +
             (sw.input_file.empty() ? "" : ", on " + code(util::base_name(sw.input_file))) + "; its plans are the sweep's own, not written or audited here):\n\n| N | file bytes | saliency kept | KLD mean | top-1 | PPL ratio |\n|---:|---:|---:|---:|---:|---:|\n";
        for (const auto & pt : sw.points) {
            o += "| " + std::to_string(pt.n_keep) + (pt.n_keep == p.n_keep ? " (this N)" : "") + " | " + util::format_size(pt.bytes) + " | " +
                 (std::isfinite(pt.share) ? pct(pt.share) : "–") + " | " + fmt("%.4f", pt.overall.kld_mean) + " | " + pct(pt.overall.top1, 2) +
                 " | " + fmt("%.4f", pt.overall.ppl_ratio) + " |\n";
        }
        o += "\n![KLD against N](figures/sweep-kld.svg)\n\n";
    }

    const std::string first = util::base_name(cut.m.shards[0].path);
    o += "## How to run\n\nWith llama.cpp (any build that runs " + code(cut.c.arch) + "), pointing `-m` at the first file";
    o += cut.c.n_shards > 1 ? " (the other " + std::to_string(cut.c.n_shards - 1) + " are found beside it):\n\n" : ":\n\n";
    o += "```\nllama-server -m " + first + " -c 8192 -ngl 99\nllama-cli    -m " + first + " -cnv\n```\n\n";
    o += "The router picks " + std::to_string(cut.c.n_expert_used) + " of the " + std::to_string(cut.c.n_expert) +
         " remaining experts per token, as the source picked " + std::to_string(src.c.n_expert_used) + " of " + std::to_string(src.c.n_expert) +
         "; no flag is needed for that. `-c`, `-ngl` and offloading (`-ot \"ffn_.*_exps=CPU\"`) are yours to choose.\n\n";

    o += "## Hardware\n\n";
    o += "* **Resident weights**: " + util::format_size(cut.c.file_bytes) + " (the files; the source needs " + util::format_size(src.c.file_bytes) +
         "). Add the KV cache for your context length and llama.cpp's compute buffers.\n";
    o += "* **Read per decoded token**: " + util::format_size(cut.c.decode_bytes_per_token) + " (the dense weights plus " + std::to_string(cut.c.n_expert_used) +
         " experts of every MoE layer; the source reads " + util::format_size(src.c.decode_bytes_per_token) +
         ": pruning shrinks what must be resident, not what a token reads).\n";
    o += "* **Decode speed bound** = memory bandwidth / bytes per token: ";
    {
        std::vector<std::string> v;
        for (double bw : {100e9, 400e9, 1000e9}) {
            const double rate = bw / (double) std::max<uint64_t>(1, cut.c.decode_bytes_per_token);
            v.push_back(fmt("%.0f GB/s", bw / 1e9) + " → " + (rate >= 100 ? util::group_digits((uint64_t) rate) : fmt("%.3g", rate)) + " tokens/s");
        }
        o += util::join(v, ", ") + " (an upper bound: compute, attention over the context and the KV cache come on top).\n\n";
    }

    o += "## SHA256SUMS\n\nChecked by this report against the files (`sha256sum -c SHA256SUMS`):\n\n```\n";
    for (const auto & [h, n] : sums_lines) o += h + "  " + n + "\n";
    o += "```\n\n";
    o += "Plan: " + code(util::base_name(opt.plan)) + " (sha256 " + code(plan_sha) + ")" +
         (sal.have ? "; saliency archive: " + code(util::base_name(sal.path)) + " (sha256 " + code(sal.sha256) + ")" : "") + ".\n\n";
    o += "---\n_Written by `reap report`" + (opt.tool_version.empty() ? std::string() : " " + opt.tool_version) + " (reap.cpp)._\n";

    // ---- write: every file complete before any appears (a disk that fills part
    // way leaves no half card), the figures published first, the card last (it
    // names them); the directories this run made go again when it fails ----
    bool made_out = false, made_fig = false;
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto & [file, svg] : figures) files.push_back({fig_dir + "/" + file, svg});
    files.push_back({readme, o});
    {
        std::vector<std::string> paths;
        for (const auto & f : files) paths.push_back(f.first);
        if (!check_outputs(paths, inputs_of(opt, &src, &cut), opt.force, err)) return false;
    }
    if (!make_dir(opt.out_dir, made_out, err)) return false;
    if (!make_dir(fig_dir, made_fig, err) || !util::write_files_durably(files, err, opt.sync)) {
        if (made_fig) util::remove_made_dir(fig_dir);
        if (made_out) util::remove_made_dir(opt.out_dir);
        return false;
    }
    for (const auto & f : files) out.written.push_back(f.first);
    return true;
}

} // namespace reap::report

// The model card of a pruned build (see report.h): gathers the receipts,
// checks them, and writes README.md and its figures.
#include "report/report.h"
#include "report/report_facts.h"
#include "report/sweep_chart.h"
#include "plan/stability.h"

#include "formats/behaviour_file.h"
#include "formats/eval_file.h"
#include "formats/sweep_file.h"

#include "gguf/gguf.h"
#include "moe/census.h"
#include "moe/identity.h"
#include "moe/width.h"
#include "plan/planners.h"
#include "plan/plan.h"
#include "plan/provenance.h"
#include "plan/receipts.h"
#include "prune/prune.h"
#include "prune/verify_run.h"
#include "saliency/archive.h"
#include "util/file.h"
#include "util/number_format.h"
#include "util/path.h"
#include "util/sha256.h"
#include "util/strings.h"
#include "util/svg_chart.h"
#include "util/text_escape.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

namespace reap::report {

namespace detail {

std::string pct(double v, int decimals) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%.*f%%", decimals, 100.0 * v);
    return buf;
}

int64_t cut_width(const plan & p) { return p.has_width() && p.width_keep < p.width_n_ff ? p.width_keep : 0; }

bool is_this_point(const sweep_facts & sw, const plan & p, const sweep_record_point & pt) {
    return sw.same_method && pt.n_keep == p.n_keep && pt.width == sw.this_width;
}

}  // namespace detail

namespace {

using namespace detail;

// ---- small formatting -----------------------------------------------------------------------

std::string fmt(const char * f, double v) {
    char buf[64];
    snprintf(buf, sizeof(buf), f, v);
    return buf;
}

// Markdown inline code that text from inputs cannot break out of: one
// printable line, no backtick, and a table's pipe escaped (GFM reads \| in a
// code span inside a table as |).
std::string code(const std::string & s) {
    std::string t;
    for (char ch : util::terminal_text(s)) {
        if (ch == '`') t += '\'';
        else if (ch == '|') t += "\\|";
        else t += ch;
    }
    return "`" + t + "`";
}

// A YAML scalar, double-quoted.
std::string yaml_str(const std::string & s) {
    std::string r = "\"";
    for (char c : util::printable_utf8(s)) {
        if (c == '"' || c == '\\') r += '\\';
        if (c == '\n') { r += "\\n"; continue; }
        r += c;
    }
    return r + "\"";
}


// ---- eval receipts --------------------------------------------------------------------------

enum class eval_match { hashes, mask_plan, path_only, other, unidentified };

struct eval_entry {
    std::string json_file;     // the --eval file
    eval_match  match = eval_match::unidentified;
    std::string why;           // for other / unidentified
    eval_report r;             // what it says it measured, and the numbers
};

// What the report knows of this build, to match an eval against.
struct build_identity {
    std::string                        source_sha256;   // plan::model_header_sha256 of the source
    std::string                        source_router_sha256;   // moe::identity_of's router hash of the source
    std::map<std::string, std::string> sums;            // the build's files and their SHA256SUMS hashes
    std::string                        plan_sha256, pruned_path, plan_path;
    // the source's files and their bytes' hash (util::sha256_files), hashed
    // only when an eval's base claims to be the source: same size, a hash recorded
    std::vector<std::string>           source_files;
    uint64_t                           source_bytes = 0;
    mutable std::string                source_files_sha256, source_hash_error;

    const std::string & source_hash() const {
        if (source_files_sha256.empty() && source_hash_error.empty() &&
            !util::sha256_files(source_files, source_files_sha256, source_hash_error)) {
            source_files_sha256.clear();
        }
        return source_files_sha256;
    }
};

// The reference of a report: the source itself, not a masked base or another model.
bool reference_is_source(const eval_report & r, const build_identity & b, eval_entry & e) {
    if (r.kld_base_mode == "read" && r.base_sha256.empty()) {
        e.match = eval_match::other;
        e.why = "its base's rows were read from a KLD base file that carries no receipt of the model that wrote them (or is not "
                "the file its receipt describes): a comparison with an unknown model";
        return false;
    }
    if (r.base_masked()) {
        e.match = eval_match::other;
        e.why = "it compares with the source masked by " + code(util::base_name(r.base_mask)) +
                " (`--base-mask`), not with the source: a measurement of a masked base, not of this build's quality";
        return false;
    }
    if (!r.base_router_sha256.empty() && r.base_router_sha256 != b.source_router_sha256) {
        e.match = eval_match::other;
        e.why = "it was measured against another base model: the same header, other router weights (router sha256 " +
                r.base_router_sha256.substr(0, 12) + "…; this source's is " + b.source_router_sha256.substr(0, 12) + "…)";
        return false;
    }
    // a base of the source's size that records its bytes' hash claims to be
    // the source file: its bytes must be the source's (any weight, not only
    // the routers, can differ under the same header)
    if (!r.base_files_sha256.empty() && r.base_bytes == b.source_bytes && r.base_files_sha256 != b.source_hash()) {
        e.match = eval_match::other;
        e.why = b.source_hash().empty()
                    ? "the source's files could not be hashed to compare with its base (" + b.source_hash_error + ")"
                    : "it was measured against another model: the same header and size as the source, other bytes (sha256 " +
                          r.base_files_sha256.substr(0, 12) + "…; this source's is " + b.source_hash().substr(0, 12) + "…)";
        return false;
    }
    if (!r.base_sha256.empty() && r.base_sha256 != b.source_sha256) {
        e.match = eval_match::other;
        e.why = "it was measured against another base model (header sha256 " + r.base_sha256.substr(0, 12) + "…; this source's is " +
                b.source_sha256.substr(0, 12) + "…)";
        return false;
    }
    return true;
}

// Matches one report against the build: the base first (reference_is_source),
// then by the hashes of its files, by the plan's hash for a mask, by the path
// as the last resort (older eval files).
void match_eval(const eval_report & r, const build_identity & b, eval_entry & e) {
    e.r = r;
    if (!reference_is_source(r, b, e)) return;
    const std::string & candidate = r.candidate;
    if (r.masked) {
        const std::string & h = r.candidate_sha256;
        if (!h.empty()) {
            e.match = h == b.plan_sha256 ? eval_match::mask_plan : eval_match::other;
            if (e.match == eval_match::other) e.why = "it masked another plan (sha256 " + h.substr(0, 12) + "…, this plan's is " + b.plan_sha256.substr(0, 12) + "…)";
        } else if (!candidate.empty() && util::same_file(candidate, b.plan_path)) {
            e.match = eval_match::path_only;
        } else {
            e.match = eval_match::unidentified;
            e.why = "it records no hash of the plan it masked" + (candidate.empty() ? std::string() : " (" + candidate + ")");
        }
        return;
    }
    if (!r.candidate_files.empty()) {
        std::set<std::string> seen;
        for (const auto & f : r.candidate_files) {
            seen.insert(f.name);
            const auto it = b.sums.find(f.name);
            if (f.listed_sha256.empty()) {
                e.match = eval_match::unidentified;
                e.why = "no SHA256SUMS listed a hash for '" + f.name + "' when it was measured";
                return;
            }
            if (it == b.sums.end() || it->second != f.listed_sha256) {
                e.match = eval_match::other;
                e.why = "it measured '" + f.name + "' with sha256 " + f.listed_sha256.substr(0, 12) + "…, which is not a file of this build";
                return;
            }
        }
        if (seen.size() != b.sums.size()) {
            e.match = eval_match::other;
            e.why = "it measured " + std::to_string(seen.size()) + " file(s); this build has " + std::to_string(b.sums.size());
            return;
        }
        e.match = eval_match::hashes;
        return;
    }
    if (!candidate.empty() && util::same_file(candidate, b.pruned_path)) {
        e.match = eval_match::path_only;
        return;
    }
    e.match = candidate.empty() ? eval_match::unidentified : eval_match::other;
    e.why = candidate.empty() ? "it does not say which file it measured"
                              : "it measured '" + candidate + "', which is not this build, and records no hashes";
}


// ---- everything the card says -----------------------------------------------------------------

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


// The plan's ranking options from its provenance (what `reap plan` records).
pl::rank_options rank_options_of(const pl::card_provenance & pv, const saliency::archive & a, std::vector<std::string> & notes) {
    pl::rank_options o;
    o.how = pl::default_method(a.metrics);
    if (pv.method.empty() || !pl::parse_method(pv.method, o.how)) {
        notes.push_back("The plan does not record a known method; the saliency figures score with the archive's default (" +
                        std::string(pl::method_name(o.how)) + ").");
        o.how = pl::default_method(a.metrics);
    }
    o.domains = pv.domains;
    if (pv.minrank) o.cons = pl::consensus::minrank;
    if (pv.seed) o.seed = *pv.seed;
    if (pv.protect_super) o.protect_super = *pv.protect_super;
    return o;
}

bool gather_saliency(const report_options & opt, const plan & p, const pl::card_provenance & pv, const model_facts & src, saliency_facts & s,
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
    const std::string & planned = pv.saliency_sha256;
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
    const pl::rank_options ro = rank_options_of(pv, s.a, notes);
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
    std::string curve_text;
    if (s.a.provenance.get_string(pl::k_key_stability, curve_text, why)) {   // calibrate --until-stable
        pl::stability_curve sc;
        if (!pl::parse_stability_curve(curve_text, sc, err)) {
            err = s.path + ": " + err;
            return false;
        }
        s.stability = sc;
    }
    s.have = true;
    return true;
}

// A sweep's width points must be cuts of the source's experts: an arch whose
// experts cannot be cut in width has none, and a width is below the experts'
// own (a point keeping every channel has no "width", as reap sweep writes it).
bool check_sweep_widths(const std::string & path, const model_facts & src, sweep_facts & sw, std::string & err) {
    sw.widths = sweep_has_widths(sw.s);
    if (!sw.widths) return true;
    moe::layout lay;
    moe::expert_width w;
    if (!model_layout(src.m, lay, err) || !moe::expert_width_of(src.m, lay, w, err)) return false;
    if (!w.refusal.empty()) {
        err = "sweep '" + path + "' has width cuts, but the source's experts cannot be cut in width: " + w.refusal;
        return false;
    }
    sw.n_ff = w.n_ff;
    for (const auto & pt : sw.s.points) {
        if (pt.width >= w.n_ff) {
            err = "sweep '" + path + "': the point N = " + std::to_string(pt.n_keep) + " at width " + std::to_string(pt.width) +
                  " is no width cut: the source's experts have " + std::to_string(w.n_ff) + " channels (a point that keeps "
                  "every channel has no \"width\")";
            return false;
        }
    }
    return true;
}

// Reads the sweep and checks it is of this source: the same model (its
// fingerprint, when the sweep records one) and shape; another model's is refused.
bool gather_sweep(const std::string & path, const model_facts & src, const std::string & source_sha256, sweep_facts & sw,
                  std::string & err) {
    sweep_record & s = sw.s;
    if (!read_sweep(path, s, err)) return false;
    sw.path = path;
    if (s.model.arch != src.c.arch || s.model.n_expert != src.c.n_expert) {
        err = "sweep '" + path + "' is for another model (" + s.model.arch + ", " + std::to_string(s.model.n_expert) +
              " experts; the source is " + src.c.arch + ", " + std::to_string(src.c.n_expert) + ")";
        return false;
    }
    if (!s.model.header_sha256.empty() && s.model.header_sha256 != source_sha256) {
        err = "sweep '" + path + "' measured another model (header sha256 " + s.model.header_sha256 + "; the source's is " + source_sha256 + ")";
        return false;
    }
    if (!check_sweep_widths(path, src, sw, err)) return false;
    // the order reap sweep scores in: the full width first, then each K descending; N descending within a width
    std::stable_sort(s.points.begin(), s.points.end(), [](const auto & a, const auto & b) {
        const int64_t wa = a.width > 0 ? a.width : INT64_MAX, wb = b.width > 0 ? b.width : INT64_MAX;
        return wa != wb ? wa > wb : a.n_keep > b.n_keep;
    });
    sw.have = !s.points.empty();
    return true;
}


// ---- the card -----------------------------------------------------------------------------------

std::string eval_table(const eval_entry & e) {
    std::string o = "| domain | tokens | KLD mean | KLD median | KLD p99 | top-1 agreement | PPL ratio |\n|---|---:|---:|---:|---:|---:|---:|\n";
    auto row = [&](const std::string & name, const eval_metrics & m) {
        o += "| " + name + " | " + util::group_digits(m.n_tokens) + " | " + fmt("%.4f", m.kld_mean) + " | " + fmt("%.4f", m.kld_median) +
             " | " + fmt("%.4f", m.kld_p99) + " | " + pct(m.argmax_agree, 2) + " | " + fmt("%.4f", m.ppl_ratio) + " |\n";
    };
    for (const auto & [name, m] : e.r.domains) {
        if (m.n_tokens) row(util::markdown_text(name), m);   // a domain's name is data
    }
    row("**all**", e.r.overall);
    return o;
}

// A census row: label, source value, build value.
void census_row(std::string & o, const std::string & label, const std::string & a, const std::string & b) {
    o += "| " + label + " | " + util::markdown_text(a) + " | " + util::markdown_text(b) + " |\n";
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
            // an org/name as the Hub spells one, nothing else: the id goes into
            // the front matter unquoted, and a newline there would add keys
            const bool plain = std::all_of(id.begin(), id.end(), [](char ch) {
                return std::isalnum((unsigned char) ch) || ch == '-' || ch == '_' || ch == '.' || ch == '/';
            });
            if (plain && std::count(id.begin(), id.end(), '/') == 1 && id.front() != '/' && id.back() != '/') return id;
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


// ---- the card, stage by stage ---------------------------------------------------------------------

// Everything the card is written from, filled stage by stage by write_report.
struct card {
    card(const report_options & o, std::vector<std::string> & v, std::vector<std::string> & u)
        : opt(o), verified(v), unverified(u) {}
    const report_options &   opt;
    std::vector<std::string> & verified;
    std::vector<std::string> & unverified;
    std::string              readme, fig_dir;
    model_facts              src, cut;
    plan                     p;
    pl::card_provenance      prov;
    prune::verify_report     vr;
    build_identity           build;
    std::vector<std::pair<std::string, std::string>> sums_lines;   // (hash, file) of the build
    saliency_facts           sal;
    std::vector<eval_entry>  evals;          // the ones measured on this build
    size_t                   n_behaviour = 0;   // needle / generate sections counted for this build (files or mask)
    sweep_facts              sw;
    std::vector<std::string> notes;          // method caveats
};

// The build: re-audited here, or no card; then the build's files with the hashes verify just checked.
bool audit_build(card & c, bool & differs, std::string & err) {
    const report_options & opt = c.opt;
    if (!open_facts(opt.source, c.src, err)) return false;
    std::string & plan_sha = c.build.plan_sha256;
    if (!read_plan(opt.plan, c.p, plan_sha, err) || !pl::read_card_provenance(c.p.provenance, opt.plan, c.prov, err)) return false;
    // the audit of reap verify itself (prune/verify_run.h), folder lock included
    prune::verify_request vreq;
    vreq.model = opt.source;
    vreq.plan = opt.plan;
    vreq.output = opt.pruned;
    prune::verify_run_result vres;
    util::error verr;
    const bool verified = prune::run_verify(vreq, vres, verr);
    c.vr = vres.report;
    if (!verified) {
        differs = c.vr.differs;
        err = c.vr.differs ? "the build failed verification, no card written: " + opt.pruned + ": " + verr.message : verr.message;
        return false;
    }
    if (!open_facts(opt.pruned, c.cut, err)) return false;
    c.build.source_sha256 = model_header_sha256(c.src.m);
    moe::model_identity source_id;
    if (!moe::identity_of(c.src.m, source_id, err)) return false;
    c.build.source_router_sha256 = source_id.router_sha256;
    for (const auto & sh : c.src.m.shards) c.build.source_files.push_back(sh.path);
    c.build.source_bytes = c.src.m.file_bytes();
    c.build.pruned_path = opt.pruned;
    c.build.plan_path = opt.plan;
    std::vector<std::pair<std::string, std::string>> entries;
    if (!util::read_sha256sums(util::sums_path_for(opt.pruned), entries, err)) return false;
    for (const auto & sh : c.cut.m.shards) {
        const std::string name = util::base_name(sh.path);
        for (const auto & [n, h] : entries) {
            if (n == name) {
                c.build.sums[name] = h;
                c.sums_lines.push_back({h, name});
            }
        }
    }
    if (c.build.sums.size() != c.cut.m.shards.size()) {
        err = "SHA256SUMS beside '" + opt.pruned + "' does not list every file of the build";
        return false;
    }
    const prune::verify_report & vr = c.vr;
    const bool width = vr.n_requantised > 0;   // a width cut: down tensors requantised, the rest byte for byte
    c.verified.push_back(std::string(width ? "**The build is the source cut by the plan: byte for byte, except the requantised down projections.**"
                                           : "**The build is the source cut by the plan, byte for byte.**") +
                         " `reap verify`'s audit, re-run by this report: " +
                         std::to_string(vr.n_shards) + " file(s), " + util::group_digits(vr.n_tensors) + " tensors (" + util::group_digits(vr.n_sliced) +
                         " sliced along the expert axis), " + util::group_digits(vr.bytes_compared) + " bytes compared with the source, " +
                         util::group_digits(vr.n_kvs) + " metadata keys; provenance " + (vr.stamped ? "stamped (reap.plan.sha256 = this plan's hash)" : "not stamped") + ".");
    if (width) {
        const bool shared = c.p.cuts_shared_expert();   // llama4's shared expert too
        c.verified.push_back("**Width cut**: every kept expert" + std::string(shared ? " and the shared expert" : "") + " keeps " +
                             std::to_string(c.p.width_keep) + " of its " +
                             std::to_string(c.p.width_n_ff) + " channels; gate/up rows are among the bytes compared above, and the " +
                             util::group_digits(vr.n_requantised) + " requantised down tensors (" + util::group_digits(vr.bytes_requantised) +
                             " bytes) equal a fresh requantisation (ggml) of the source's kept columns.");
    }
    c.verified.push_back("**SHA256SUMS holds**: " + std::to_string(vr.n_sums_checked) + " file(s) re-hashed and equal to the list below.");
    if (!vr.stamped) c.unverified.push_back("The build carries no `reap.*` stamp: nothing inside the files names the plan they were cut by (the audit above ties them to this plan).");
    return true;
}

bool gather_method(card & c, std::string & err) {
    if (!c.opt.saliency.empty()) {
        if (!gather_saliency(c.opt, c.p, c.prov, c.src, c.sal, c.notes, err)) return false;
        if (!c.sal.invariant.empty()) c.unverified.push_back("The archive's token counts are not those of a complete calibration: " + c.sal.invariant + ".");
    } else {
        c.unverified.push_back("No saliency archive was given: the calibration corpus, its domains and token counts, and the saliency kept per domain are not shown; the method section repeats what the plan records.");
    }
    const double recorded = c.prov.saliency_retained_mean;
    if (c.sal.have && recorded >= 0 && std::fabs(recorded - c.sal.share.mean) > 1e-9) {
        c.unverified.push_back("The plan records a saliency share of " + pct(recorded, 3) + "; recomputed from the archive it is " + pct(c.sal.share.mean, 3) + ".");
    }
    return true;
}

// ---- behaviour evals (reap eval --needle / --generate) ---------------------------------------

constexpr uint64_t k_max_eval_file_bytes = 256ull << 20;   // as formats/ reads eval files

// Candidate i (0-based, after the base) of a behaviour section as an eval
// report's receipts, so that match_eval decides it by the KLD evals' one rule.
eval_report behaviour_identity(const behaviour_receipts & m, const std::string & name, bool masked, size_t i) {
    eval_report r;
    r.candidate = name;
    r.masked = masked;
    r.base_path = m.base_path;
    r.base_sha256 = m.base_sha256;
    r.base_bytes = m.base_bytes;
    r.base_files_sha256 = m.base_files_sha256;
    r.base_mask = m.base_mask;
    r.base_mask_sha256 = m.base_mask_sha256;
    r.input_path = m.input_path;
    r.input_sha256 = m.input_sha256;
    if (i < m.candidates.size()) {
        r.candidate_sha256 = m.candidates[i].plan_sha256;
        r.candidate_files = m.candidates[i].files;
    }
    return r;
}

std::string input_named(const behaviour_receipts & m, const std::string & path) {
    const std::string & p = m.input_path.empty() ? path : m.input_path;
    return code(util::base_name(p)) + (m.input_sha256.empty() ? "" : " (sha256 " + code(m.input_sha256.substr(0, 16) + "…") + ")");
}

// What the needle grid of model m found, against the source's.
std::string needle_claim(const needle_section & s, size_t m) {
    const needle_report & r = s.report;
    std::set<int> lengths;
    std::set<double> depths;
    int needles = 0;
    for (const auto & cell : r.cells) {
        lengths.insert(cell.length);
        depths.insert(cell.depth);
        needles = std::max(needles, cell.trial + 1);
    }
    std::vector<std::string> ls, ds;
    for (int l : lengths) ls.push_back(std::to_string(l));
    for (double d : depths) ds.push_back(fmt("%g", d));
    const std::string n = std::to_string(r.cells.size());
    return "needle in a haystack of " + input_named(s.measured, r.haystack_path) + ", " + n + " cells (lengths " + util::join(ls, ", ") +
           " tokens x depths " + util::join(ds, ", ") + ", " + std::to_string(needles) + " value(s) each, seed " + std::to_string(r.seed) +
           ", the question " + (r.chat ? "as a chat turn" : "as a completion") + "): **" + std::to_string(r.models[m].n_exact()) + "/" + n +
           " exact**, the source " + std::to_string(r.models[0].n_exact()) + "/" + n + ".";
}

// What free generation of model m showed, against the source's.
std::string generate_claim(const generate_section & s, size_t m) {
    const generation_report & r = s.report;
    const generation_stats a = r.stats(m, -1), b = r.stats(0, -1);
    auto pair = [](const std::string & what, const std::string & x, const std::string & y) { return what + " " + x + " (source " + y + ")"; };
    return "free generation after " + std::to_string(r.prompt_domain.size()) + " prompts of " + input_named(s.measured, r.prompts_path) +
           ", at most " + std::to_string(r.max_new) + " new tokens, " +
           (r.temperature > 0 ? fmt("sampled at T %.2f", r.temperature) + ", seed " + std::to_string(r.seed) : std::string("greedy")) + ": " +
           pair("loop rate", pct(a.loop_rate), pct(b.loop_rate)) + " (a span of >= " + std::to_string(k_loop_span) + " tokens repeated >= " +
           std::to_string(k_loop_repeats) + " times at the end), " + pair("termination rate", pct(a.termination_rate), pct(b.termination_rate)) +
           ", " + pair("distinct-4", fmt("%.4f", a.distinct_4), fmt("%.4f", b.distinct_4)) + ", " +
           pair("mean length", fmt("%.1f", a.mean_length), fmt("%.1f", b.mean_length)) + "; on average the first " +
           fmt("%.1f", a.mean_agreement) + " tokens agree with the source's output.";
}

// One section's models against the build: the build's files go under
// Verified, a mask of this plan is a masked estimate (Not verified), a match
// by path alone is shown as such; models of something else are not counted.
void judge_behaviour(card & c, const std::string & path, const char * title, const behaviour_receipts & measured,
                     const std::vector<std::pair<std::string, bool>> & models, const std::function<std::string(size_t)> & claim) {
    const std::string file = code(util::base_name(path));
    std::vector<std::string> whys;
    bool counted = false;
    for (size_t m = 1; m < models.size(); ++m) {
        eval_entry e;
        match_eval(behaviour_identity(measured, models[m].first, models[m].second, m - 1), c.build, e);
        if (e.match == eval_match::other || e.match == eval_match::unidentified) {
            whys.push_back(e.why);
            continue;
        }
        counted = true;
        ++c.n_behaviour;
        if (e.match == eval_match::hashes) {
            c.verified.push_back("**" + std::string(title) + " " + file + "**: measured on this build's files, " + claim(m));
        } else if (e.match == eval_match::mask_plan) {
            c.unverified.push_back("**" + std::string(title) + " " + file + ", a masked estimate**: measured on the source with this plan's experts masked "
                                   "(the plan file's sha256 matches), not on this build's files: " + claim(m));
        } else {
            c.unverified.push_back("**" + std::string(title) + " " + file + "**, matched to this build by its path only (it records no hashes of what it measured): " + claim(m));
        }
    }
    if (!counted) {
        c.unverified.push_back("**" + std::string(title) + " " + file + " is not counted: it is not a measurement of this build** (" +
                               (whys.empty() ? std::string("it measured the source alone") : util::join(whys, "; ")) + "). Its numbers are not shown.");
    }
}

void gather_behaviour(card & c, const std::string & path, const behaviour_document & d) {
    if (d.needle) {
        std::vector<std::pair<std::string, bool>> models;
        for (const auto & m : d.needle->report.models) models.push_back({m.name, m.masked});
        judge_behaviour(c, path, "Needle grid", d.needle->measured, models, [&](size_t m) { return needle_claim(*d.needle, m); });
    }
    if (d.generate) {
        std::vector<std::pair<std::string, bool>> models;
        for (const auto & m : d.generate->report.models) models.push_back({m.name, m.masked});
        judge_behaviour(c, path, "Free generation", d.generate->measured, models, [&](size_t m) { return generate_claim(*d.generate, m); });
    }
}

// Every --eval file, each report matched against the build; what does not
// measure this build is listed as not counted, with the reason.
bool gather_evals(card & c, std::string & err) {
    for (const auto & path : c.opt.evals) {
        nlohmann::json j;
        if (!util::read_json_file(path, "eval", k_max_eval_file_bytes, j, err)) return false;
        if (is_behaviour_document(j)) {
            behaviour_document d;
            if (!behaviour_document_from_json(j, path, d, err)) return false;
            gather_behaviour(c, path, d);
            continue;
        }
        eval_document doc;
        if (!eval_document_from_json(j, path, doc, err)) return false;
        bool found = false;
        std::vector<std::string> whys;
        for (const auto & entry : doc.entries) {
            eval_entry e;
            e.json_file = path;
            match_eval(entry.report, c.build, e);
            if (e.match == eval_match::other || e.match == eval_match::unidentified) {
                whys.push_back(e.why);
                continue;
            }
            if (!e.r.pruned_scored) {
                whys.push_back("it holds no pruned-model numbers (a base-only run)");
                continue;
            }
            c.evals.push_back(e);
            found = true;
        }
        if (!found) {
            c.unverified.push_back("**Eval " + code(util::base_name(path)) + " is not counted: it is not a measurement of this build** (" +
                                   util::join(whys, "; ") + "). Its numbers are not shown.");
        }
    }
    if (c.evals.empty()) {
        c.unverified.push_back(std::string(c.n_behaviour ? "**Next-token quality unmeasured.** No KLD eval of this build was given: nothing here says what the cut costs per token"
                                                         : "**Quality unmeasured.** No eval of this build was given: nothing here says what the cut costs") +
                               " (run `reap eval -m SOURCE -p BUILD -f HELDOUT --json` and pass it with `--eval`).");
    } else if (std::all_of(c.evals.begin(), c.evals.end(), [](const eval_entry & e) { return e.r.masked; })) {
        c.unverified.push_back("**This build's files are unmeasured.** Every KLD eval given masked the plan in the source: an estimate of the cut, "
                               "not a measurement of these files (run `reap eval -m SOURCE -p BUILD -f HELDOUT --json` and pass it with `--eval`).");
    }
    return true;
}

// What each counted eval does and does not establish.
void judge_evals(card & c) {
    std::set<std::string> calib_domains;
    for (const auto & d : c.sal.a.domains) calib_domains.insert(d.name);
    const std::vector<std::string> & plan_domains = c.prov.domains;
    for (const auto & e : c.evals) {
        const std::string file = code(util::base_name(e.json_file));
        const std::string on = (e.r.input_path.empty() ? std::string("on a corpus it does not name") : "on " + code(util::base_name(e.r.input_path))) +
                               ", " + util::group_digits(e.r.overall.n_tokens) + " tokens (table below).";
        if (e.r.masked) {
            // the rule judge_behaviour applies: a mask is an estimate of the
            // build, never the build's own measurement
            c.unverified.push_back("**Eval " + file + ", a masked estimate**: measured on the source with " +
                                   (e.match == eval_match::path_only ? std::string("the experts of the plan at this plan's path masked")
                                                                     : std::string("this plan's experts masked (the plan file's sha256 matches)")) +
                                   ", not on this build's files, " + on);
        } else {
            c.verified.push_back("**Eval " + file + "**: measured on " +
                                 (e.match == eval_match::path_only ? "the file at this build's path" : "this build's files") + ", " + on);
        }
        if (e.match == eval_match::path_only) {
            c.unverified.push_back("Eval " + file + " records no hashes of what it measured; it is matched to this build by its path only (re-run it with this version of `reap eval` to tie it to the files).");
        }
        if (e.r.base_sha256.empty()) {
            c.unverified.push_back("Eval " + file + " does not record which base model it compared with (written by an older `reap eval`): that it is this source is assumed, not checked.");
        } else if (e.r.base_files_sha256.empty() && (e.r.base_bytes == 0 || e.r.base_bytes == c.build.source_bytes)) {
            c.unverified.push_back("Eval " + file + " does not record the hash of its base's bytes (written by an older `reap eval`): that its base is "
                                   "this source, and not another model of the same header and size, is assumed.");
        }
        // overlap with the calibration corpus
        if (e.r.input_sha256.empty()) {
            c.unverified.push_back("Eval " + file + " does not record its corpus's hash: whether it overlaps the calibration corpus is unknown.");
        } else if (!c.sal.have) {
            c.unverified.push_back("Without the saliency archive, whether eval " + file + "'s corpus overlaps the calibration corpus is unknown.");
        } else if (c.sal.corpus_sha256.empty()) {
            c.unverified.push_back("The archive does not record its corpus's hash (an imatrix import?): whether the eval corpus overlaps it is unknown.");
        } else if (c.sal.corpus_sha256 == e.r.input_sha256) {
            c.unverified.push_back("**The eval corpus is the calibration corpus** (same sha256): eval " + file +
                                   " measures the cut on the text it was chosen on, which flatters the cut. Measure on held-out text.");
        } else {
            // a mask's facts stay with the estimate, outside Verified
            (e.r.masked ? c.unverified : c.verified).push_back("Eval " + file + "'s corpus is not the calibration corpus file (the sha256 differ).");
            c.unverified.push_back("The eval and calibration corpora are different files; whether they share samples was not checked.");
        }
        // domains measured but not calibrated on, or not scored by the plan
        for (const auto & [name, m] : e.r.domains) {
            if (!m.n_tokens) continue;
            if (c.sal.have && !calib_domains.count(name)) {
                c.unverified.push_back("**Pruned blind for " + code(name) + "**: the eval has it, the calibration corpus does not; the cut chose experts without seeing it (KLD " + fmt("%.4f", m.kld_mean) + ").");
            } else if (!plan_domains.empty() && std::find(plan_domains.begin(), plan_domains.end(), name) == plan_domains.end()) {
                c.unverified.push_back("**Pruned blind for " + code(name) + "**: calibrated, but the plan scored only " + util::markdown_text(util::join(plan_domains, ", ")) + ".");
            }
        }
        if (c.sal.have) {
            for (const auto & d : c.sal.a.domains) {
                const bool measured = std::any_of(e.r.domains.begin(), e.r.domains.end(), [&](const auto & x) { return x.first == d.name && x.second.n_tokens; });
                if (!measured) c.unverified.push_back("Calibrated on " + code(d.name) + " but eval " + file + " does not measure it.");
            }
        }
    }
}

bool gather_sweep_stage(card & c, std::string & err) {
    if (c.opt.sweep.empty()) {
        c.unverified.push_back("No sweep was given: other sizes were not scored, so nothing here says whether a smaller or larger cut would serve better.");
        return true;
    }
    sweep_facts & sw = c.sw;
    if (!gather_sweep(c.opt.sweep, c.src, c.build.source_sha256, sw, err)) return false;
    const std::string sweep_file = code(util::base_name(sw.path));
    if (sw.s.model.header_sha256.empty()) {
        c.unverified.push_back("The sweep " + sweep_file + " does not record which model it measured (written by an older `reap sweep`): that it is this source is assumed from its architecture and expert count.");
    }
    const std::string & planned = c.prov.saliency_sha256;
    if (!planned.empty() && sw.s.saliency.sha256 != planned) {
        c.unverified.push_back("The sweep was planned from another archive than this build's plan (sha256 " + sw.s.saliency.sha256.substr(0, 12) + "…): its curve is about other keep lists.");
    }
    sw.same_method = sw.s.saliency.method == c.prov.method;
    sw.this_width = cut_width(c.p);
    if (!sw.s.sources.empty()) {
        moe::model_identity id;
        if (!moe::identity_of(c.src.m, id, err)) return false;
        for (size_t i = 0; i < sw.s.sources.size(); ++i) {
            const sweep_source & src = sw.s.sources[i];
            if (src.router_sha256 != id.router_sha256 || src.file_bytes != c.src.c.file_bytes) continue;
            sw.this_source = (int) i;
            for (const auto & pt : src.points) {
                if (is_this_point(sw, c.p, pt)) sw.this_n_keep = pt.n_keep;
            }
        }
    }
    if (!sw.same_method) {
        c.unverified.push_back("**The sweep " + sweep_file + " ranked experts by " + code(sw.s.saliency.method) + "**, this build's plan by " +
                               (c.prov.method.empty() ? std::string("a method it does not record") : code(c.prov.method)) +
                               ": its points are cuts of another method, none of them this build's.");
    }
    return true;
}

// ---- the text ----

// What the cut did besides removing experts, as the card's first sentence
// says it: a count cut leaves every other weight byte-identical; a width cut
// keeps rows of gate/up and requantises down (and, where the arch sizes it
// with the routed width, cuts the shared expert the same way).
std::string what_else_changed(const plan & p) {
    const int64_t width = cut_width(p);
    if (!width) return "every other weight unchanged and byte-identical.";
    const bool shared_cut = p.cuts_shared_expert();
    return "and every kept expert" + std::string(shared_cut ? " and the shared expert" : "") + " cut to " + std::to_string(width) +
           " of its " + std::to_string(p.width_n_ff) + " intermediate channels: the gate and up rows of the kept channels byte-identical, "
           "the down projections requantised from the kept columns; every other weight unchanged and byte-identical.";
}

// The card's shared-experts cell of the build: a width cut of an arch that
// sizes its shared experts as n_ff x count keeps their weights whole and
// writes the count S/K (moe/width.h), so a count that changed says why.
std::string shared_experts_of_cut(const card & c) {
    const moe::census & src = c.src.c, & cut = c.cut.c;
    std::string v = std::to_string(cut.n_expert_shared);
    if (cut.n_expert_shared == src.n_expert_shared || !cut_width(c.p) || cut.expert_ff_length == 0) return v;
    const uint64_t shared_width = (uint64_t) cut.n_expert_shared * cut.expert_ff_length;
    return v + " (the same " + std::to_string(shared_width) + " shared channels, counted in experts of " +
           std::to_string(cut.expert_ff_length) + ")";
}

std::string front_matter_and_census(const card & c) {
    const model_facts & src = c.src, & cut = c.cut;
    const plan & p = c.p;
    std::string name, license, ignored;
    src.m.kvs.get_string_or("general.name", "", name, ignored);
    if (name.empty()) name = util::stem_of(c.opt.source);
    const std::string repo = hf_repo_of(src.m);
    src.m.kvs.get_string_or("general.license", "", license, ignored);
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
    const int64_t width = cut_width(p);
    o += "# " + util::markdown_text(name) + ": " + std::to_string(p.n_keep) + " of " + std::to_string(p.n_expert) + " experts per MoE layer" +
         (width ? ", " + std::to_string(width) + " of " + std::to_string(p.width_n_ff) + " channels each" : "") + "\n\n";
    o += "> Fields marked `" + std::string(k_fill_in) + "` could not be known from the files: fill them in before publishing.\n";
    o += "> Everything else on this card was written by `reap report` from the files and receipts named in it.\n\n";
    o += "An expert-pruned build of " + code(util::base_name(c.opt.source)) + " (" + util::markdown_text(cut.c.arch) + "): " + pct(removed) +
         " of the routed experts removed from each of its " + std::to_string(p.layers.size()) + " MoE layers, " + what_else_changed(p) + " " +
         util::format_size(src.c.file_bytes) + " → " + util::format_size(cut.c.file_bytes) + ".\n\n";
    o += "## Source vs build\n\nFrom the files themselves (`reap inspect`).\n\n| | source | this build |\n|---|---:|---:|\n";
    census_row(o, "architecture", src.c.arch, cut.c.arch);
    census_row(o, "blocks (MoE)", std::to_string(src.c.n_layer) + " (" + std::to_string(src.c.moe_layers.size()) + ")",
               std::to_string(cut.c.n_layer) + " (" + std::to_string(cut.c.moe_layers.size()) + ")");
    census_row(o, "routed experts per MoE layer", std::to_string(src.c.n_expert), std::to_string(cut.c.n_expert));
    census_row(o, "experts used per token", std::to_string(src.c.n_expert_used), std::to_string(cut.c.n_expert_used));
    census_row(o, "shared experts", std::to_string(src.c.n_expert_shared), shared_experts_of_cut(c));
    if (width) census_row(o, "channels per expert", std::to_string(src.c.expert_ff_length), std::to_string(cut.c.expert_ff_length));
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
    return o;
}

std::string method_section(const card & c) {
    const plan & p = c.p;
    const pl::card_provenance & pv = c.prov;
    const saliency_facts & sal = c.sal;
    std::string o = "## Method\n\n";
    o += "* **Criterion**: " + (pv.method.empty() ? std::string("not recorded in the plan") : code(pv.method) + (pv.method_description.empty() ? "" : ": " + pv.method_description)) + ".\n";
    o += "* **Keep rule**: the " + std::to_string(p.n_keep) + " highest-ranked experts of every MoE layer" +
         (c.src.c.n_expert_groups > 1 ? ", the same count in every expert group" : "") +
         (pv.minrank ? ", ranked by their best rank in any domain (consensus minrank)" : "") + ".";
    std::vector<std::string> req;
    for (const auto & [k, v] : pv.request) req.push_back(k + " " + v);
    if (!req.empty()) o += " Requested as " + code(util::join(req, ", ")) + ".";
    o += "\n";
    if (sal.have) {
        o += "* **Calibration**: " + (sal.corpus_name.empty() ? std::string("corpus not named in the archive") : code(sal.corpus_name)) +
             (sal.corpus_sha256.empty() ? "" : " (sha256 " + code(sal.corpus_sha256.substr(0, 16) + "…") + ")") + ", by " +
             (sal.tool.empty() ? std::string("an unrecorded tool") : code(sal.tool)) + ". Domains and tokens:\n\n";
        o += "  | domain | tokens | scored by the plan | saliency kept |\n  |---|---:|:---:|---:|\n";
        for (size_t i = 0; i < sal.a.domains.size(); ++i) {
            const auto & d = sal.a.domains[i];
            const bool scored = std::find(sal.rank.domains.begin(), sal.rank.domains.end(), d.name) != sal.rank.domains.end();
            o += "  | " + util::markdown_text(d.name) + " | " + util::group_digits((uint64_t) d.n_tokens) + " | " + (scored ? "yes" : "no") + " | " + pct(sal.share_by_domain[i].second) + " |\n";
        }
        o += "\n* **Saliency kept**: " + pct(sal.share.mean) + " of the " + std::string(pl::method_name(sal.rank.share_method)) +
             " saliency over the plan's domains (mean over MoE layers; per layer " +
             pct(*std::min_element(sal.share.share.begin(), sal.share.share.end())) + " to " +
             pct(*std::max_element(sal.share.share.begin(), sal.share.share.end())) + "); per domain in the table above, each domain's own saliency on the same keep lists.\n";
        const pl::margin_summary ms = pl::summarize_margin(sal.receipts);
        if (ms.min > 0)
            o += "* **Safety margin**: no pruned expert ranks better than " + std::to_string(ms.min) + " of " + std::to_string(p.n_expert) +
                 " in any of the plan's domains, in any MoE layer (median layer: " + fmt("%.0f", ms.median) + "; the closest call: layer " +
                 std::to_string(ms.layer) + " expert " + std::to_string(ms.expert) + " in " + util::markdown_text(ms.domain) + ").\n";
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
        if (sal.stability && !sal.stability->points.empty()) {
            const auto & sc = *sal.stability;
            const auto & last = sc.points.back();
            const bool held = sc.points.size() >= 2 && last.stable && sc.points[sc.points.size() - 2].stable;
            o += "* **How many tokens were enough** (`reap calibrate --until-stable " + fmt("%.3g", sc.threshold) + "`, " +
                 std::to_string(sc.n_keep) + " kept per layer): " +
                 (held ? "the keep-list held at an overlap of at least " + fmt("%.3g", sc.threshold) +
                             " for two checkpoints in a row, and calibration stopped at " + util::group_digits(last.tokens) + " tokens."
                       : "the keep-list had not held at an overlap of " + fmt("%.3g", sc.threshold) + " when the corpus ended (" +
                             util::group_digits(last.tokens) + " tokens at the last checkpoint).") + "\n\n" +
                 "![Tokens spent vs keep-list stability](figures/calibration-stability.svg)\n\n";
        }
    } else {
        if (!pv.domains.empty()) o += "* **Domains scored** (from the plan): " + util::markdown_text(util::join(pv.domains, ", ")) + ".\n";
        if (pv.saliency_retained_mean >= 0) o += "* **Saliency kept** (as the plan records it): " + pct(pv.saliency_retained_mean) + ".\n";
        o += "\n";
    }
    for (const auto & n : c.notes) o += "_" + n + "_\n\n";
    return o;
}


// What an eval's numbers are against: the source file, or another file of the
// same model (its header fingerprint is the source's at every quantisation:
// reap fit scores against a reference such as the F16 file) named as such.
std::string measured_against(const card & c, const eval_report & r) {
    // a mask measures the source with the plan's experts masked, not this build
    const std::string what = r.masked ? "the source with this plan's experts masked" : "this build";
    const std::string short_what = r.masked ? "masked" : "build";
    if (r.base_bytes == 0 || r.base_bytes == c.src.m.file_bytes()) {
        return ": KL divergence of " + what + " from the source, per token over the full vocabulary; top-1 agreement with the source; "
               "perplexity ratio (" + short_what + " / source).\n\n";
    }
    const std::string ref = code(util::base_name(r.base_path));
    return ": KL divergence of " + what + " from " + ref + ", per token over the full vocabulary; top-1 agreement with it; perplexity ratio " +
           "(" + short_what + " / " + ref + "). " + ref + " is the eval's reference: the same model as the source by its fingerprint (header and "
           "router weights), another file of it (" + util::group_digits((int64_t) r.base_bytes) + " bytes" +
           (r.base_files_sha256.empty() ? "" : ", sha256 " + code(r.base_files_sha256)) + "; the source has " +
           util::group_digits((int64_t) c.src.m.file_bytes()) + "), such as a higher-precision quantisation.\n\n";
}

std::string verified_sections(const card & c) {
    std::string o = "## Verified\n\n";
    for (const auto & v : c.verified) o += "* " + v + "\n";
    o += "\n";
    // the tables of this build's evals under Verified, those of masks (estimates) under Not verified
    auto tables = [&](bool masked) {
        for (const auto & e : c.evals) {
            if (e.r.masked != masked) continue;
            o += "**" + code(util::base_name(e.json_file)) + "**" + (masked ? " (a masked estimate)" : "") +
                 (e.r.input_path.empty() ? "" : " on " + code(util::base_name(e.r.input_path))) +
                 (e.r.input_sha256.empty() ? "" : " (sha256 " + code(e.r.input_sha256.substr(0, 16) + "…") + ")") +
                 measured_against(c, e.r) + eval_table(e) + "\n";
        }
    };
    tables(false);
    o += "## Not verified\n\n";
    for (const auto & v : c.unverified) o += "* " + v + "\n";
    o += "\n";
    tables(true);
    return o;
}

// The behaviour cells of one sweep row (needle n/m; loop, ended, distinct-4,
// agreement), "-" where that part did not run for the model.
std::string sweep_behaviour_cells(const sweep_record & s, std::optional<size_t> needle_n_exact, const generation_stats * g) {
    std::string o;
    if (s.needle) o += " " + (needle_n_exact ? std::to_string(*needle_n_exact) + "/" + std::to_string(s.needle->report.cells.size()) : std::string("-")) + " |";
    if (s.generate) {
        if (g) o += " " + pct(g->loop_rate) + " | " + pct(g->termination_rate) + " | " + fmt("%.4f", g->distinct_4) + " | " + fmt("%.1f", g->mean_agreement) + " |";
        else o += " - | - | - | - |";
    }
    return o;
}

// What the sweep's behaviour columns are: masked estimates of each size, never
// this build's measurement (the rule judge_behaviour applies to a masked eval).
std::string sweep_behaviour_note(const sweep_record & s) {
    std::string o = "The behaviour columns are **masked estimates**: each size was measured on the source with that size's removed experts "
                    "masked (as `reap eval --mask` measures a plan), not on a pruned file, so none of them is this build's own measurement "
                    "(that is an eval of this build's files, `reap eval -p` with `--needle` / `--generate`, given with `--eval`). The source:";
    if (s.needle) {
        const needle_report & r = s.needle->report;
        o += " needle " + std::to_string(r.models[0].n_exact()) + "/" + std::to_string(r.cells.size()) + " exact (" + std::to_string(r.cells.size()) +
             " cells over " + code(util::base_name(r.haystack_path)) + ", seed " + std::to_string(r.seed) + ", the question " +
             (r.chat ? "as a chat turn" : "as a completion") + ")" + (s.generate ? ";" : ".");
    }
    if (s.generate) {
        const generation_report & r = s.generate->report;
        const generation_stats b = r.stats(0, -1);
        o += " loop rate " + pct(b.loop_rate) + ", ended " + pct(b.termination_rate) + ", distinct-4 " + fmt("%.4f", b.distinct_4) +
             " (free generation after " + std::to_string(r.prompt_domain.size()) + " prompts of " + code(util::base_name(r.prompts_path)) +
             ", at most " + std::to_string(r.max_new) + " new tokens). Loop: the output ends in a span of >= " + std::to_string(k_loop_span) +
             " tokens said >= " + std::to_string(k_loop_repeats) + " times; ended: an end-of-generation token before the cap; agree: the mean "
             "number of leading tokens equal to the source's output.";
    }
    return o + "\n";
}

std::string sweep_section(const card & c) {
    const sweep_facts & sw = c.sw;
    if (!sw.have) return "";
    const bool behaviour = sw.s.needle || sw.s.generate;
    std::string o = "## Other sizes\n\nFrom the sweep " + code(util::base_name(sw.path)) + " (every size scored by masking its removed experts" +
                    (sw.widths ? " and, in a width cut, zeroing each kept expert's removed channels before its down projection," : "") +
                    " in the source" + (sw.s.input.file.empty() ? "" : ", on " + code(util::base_name(sw.s.input.file))) +
                    (sw.same_method ? "" : ", ranked by " + code(sw.s.saliency.method) + ", not this build's method") +
                    "; its plans are the sweep's own, not written or audited here):\n\n| N |" + (sw.widths ? " width |" : "") +
                    " file bytes | saliency kept | KLD mean | top-1 | PPL ratio |";
    std::string rule = std::string("\n|---:|") + (sw.widths ? "---:|" : "") + "---:|---:|---:|---:|---:|";
    if (sw.s.needle) {
        o += " needle (masked) |";
        rule += "---:|";
    }
    if (sw.s.generate) {
        o += " loop (masked) | ended (masked) | distinct-4 (masked) | agree (masked) |";
        rule += "---:|---:|---:|---:|";
    }
    o += rule + "\n";
    for (const auto & pt : sw.s.points) {
        const bool mine = is_this_point(sw, c.p, pt);
        o += "| " + std::to_string(pt.n_keep) + (mine ? (sw.widths ? " (this build)" : " (this N)") : "") + " | " +
             (!sw.widths ? "" : (pt.width > 0 ? std::to_string(pt.width) : "all (" + std::to_string(sw.n_ff) + ")") + " | ") +
             util::format_size(pt.predicted_bytes) + " | " +
             pct(pt.saliency_share) + " | " + fmt("%.4f", pt.overall.kld_mean) + " | " + pct(pt.overall.argmax_agree, 2) +
             " | " + fmt("%.4f", pt.overall.ppl_ratio) + " |";
        if (behaviour) {
            const sweep_point_behaviour b = sweep_behaviour_of(sw.s, pt.n_keep);
            o += sweep_behaviour_cells(sw.s, b.needle_model ? std::optional<size_t>(b.n_exact) : std::nullopt,
                                       b.generate_model ? &b.generation : nullptr);
        }
        o += "\n";
    }
    if (behaviour) o += "\n" + sweep_behaviour_note(sw.s);
    if (sw.widths) {
        o += "\nWidth: the intermediate channels every kept expert keeps, of its " + std::to_string(sw.n_ff) +
             ", chosen by the sweep's channel scores. A width cut's file bytes are those of the file `reap prune` writes, its down "
             "projections requantised; its scores leave that requantisation out.\n\n![KLD and top-1 against file size, one line per "
             "width](figures/sweep-kld.svg)\n\n";
    } else {
        o += "\n![KLD against N](figures/sweep-kld.svg)\n\n";
    }
    if (sw.s.sources.empty()) return o;
    const std::string against = sw.s.reference.model.empty() ? "the KLD base file " + code(util::base_name(sw.s.reference.kld_base))
                                                             : code(util::base_name(sw.s.reference.model));
    o += "### Which quantisation to cut\n\nThe sweep scored " + std::to_string(sw.s.sources.size()) +
         " quantisations of this model (the same router weights), each cut to each request from the one ranking, against " + against +
         ". Per request, the best source and its lead over the next:\n\n"
         "| request | best source | N | file bytes | KLD mean | top-1 | next best | KLD lead | top-1 lead |\n"
         "|---|---|---:|---:|---:|---:|---|---:|---:|\n";
    for (const sweep_frontier_entry & e : sw.s.frontier) {
        const bool mine = (int) e.best.source == sw.this_source && e.best.n_keep == sw.this_n_keep;
        o += "| " + util::markdown_text(e.request_kind + " " + e.request_text) + " | " + code(util::base_name(sw.s.sources[e.best.source].path)) +
             (mine ? " (this build)" : "") + " | " + std::to_string(e.best.n_keep) + " | " + util::format_size(e.best.bytes) + " | " +
             fmt("%.4f", e.best.kld_mean) + " | " + pct(e.best.top1, 2) + " | " +
             (e.runner_up ? code(util::base_name(sw.s.sources[e.runner_up->source].path)) + " (N " + std::to_string(e.runner_up->n_keep) +
                                ") | " + fmt("%.4f", e.runner_up->kld_mean - e.best.kld_mean) + " | " +
                                fmt("%+.2f", 100 * (e.best.top1 - e.runner_up->top1)) + " pts"
                          : std::string("- | - | -")) +
             " |\n";
    }
    if (sw.this_source < 0) {
        o += "\nThis build's source is none of the sweep's sources (matched by router weights and file size).\n";
    } else {
        o += "\nThis build is " + code(util::base_name(sw.s.sources[(size_t) sw.this_source].path)) +
             (sw.this_n_keep > 0 ? " at N = " + std::to_string(sw.this_n_keep) + ", a point of the sweep"
                                 : ", but its N = " + std::to_string(c.p.n_keep) + " is none of the sweep's points" +
                                       (sw.same_method ? "" : " (the sweep ranked by another method)")) +
             ".\n";
    }
    return o + "\n![KLD against file size, one line per source](figures/sweep-frontier.svg)\n\n";
}

std::string running_sections(const card & c) {
    const model_facts & src = c.src, & cut = c.cut;
    const report_options & opt = c.opt;
    std::string o;
    const std::string first = util::base_name(cut.m.shards[0].path);
    o += "## How to run\n\nWith llama.cpp (any build that runs " + code(cut.c.arch) + "), pointing `-m` at the first file";
    o += cut.c.n_shards > 1 ? " (the other " + std::to_string(cut.c.n_shards - 1) + " are found beside it):\n\n" : ":\n\n";
    // a file name is one shell word here, whatever it holds
    const std::string word = util::shell_word(first);
    o += "```\nllama-server -m " + word + " -c 8192 -ngl 99\nllama-cli    -m " + word + " -cnv\n```\n\n";
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
    // as sha256sum writes it, escapes and all; a byte a page cannot show
    // (a control, a byte that is not UTF-8) is shown as U+FFFD, and said
    bool shown_exactly = true;
    for (const auto & [h, n] : c.sums_lines) {
        const std::string line = util::sums_line(h, n);
        shown_exactly = shown_exactly && util::printable_utf8(line) == line;
        o += util::printable_utf8(line);
    }
    o += "```\n\n";
    if (!shown_exactly) {
        o += "A file name holds bytes this page cannot show (shown as \xEF\xBF\xBD): check with the SHA256SUMS file beside the build, "
             "not with a copy of these lines.\n\n";
    }
    o += "Plan: " + code(util::base_name(opt.plan)) + " (sha256 " + code(c.build.plan_sha256) + ")" +
         (c.sal.have ? "; saliency archive: " + code(util::base_name(c.sal.path)) + " (sha256 " + code(c.sal.sha256) + ")" : "") + ".\n\n";
    o += "---\n_Written by `reap report`" + (opt.tool_version.empty() ? std::string() : " " + opt.tool_version) + " (reap.cpp)._\n";
    return o;
}

// Every file complete before any appears (a disk that fills part way leaves
// no half card), the figures published first, the card last (it names them);
// the directories this run made go again when it fails.
bool publish_card(const card & c, const std::vector<std::pair<std::string, std::string>> & figures, const std::string & text,
                  report_result & out, std::string & err) {
    const report_options & opt = c.opt;
    bool made_out = false, made_fig = false;
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto & [file, svg] : figures) files.push_back({c.fig_dir + "/" + file, svg});
    files.push_back({c.readme, text});
    std::vector<std::string> paths;
    for (const auto & f : files) paths.push_back(f.first);
    if (!check_outputs(paths, inputs_of(opt, &c.src, &c.cut), opt.force, err)) return false;
    if (!make_dir(opt.out_dir, made_out, err)) return false;
    if (!make_dir(c.fig_dir, made_fig, err) || !util::write_files_durably(files, err, opt.sync)) {
        if (made_fig) util::remove_made_dir(c.fig_dir);
        if (made_out) util::remove_made_dir(opt.out_dir);
        return false;
    }
    for (const auto & f : files) out.written.push_back(f.first);
    return true;
}

} // namespace

bool write_report(const report_options & opt, report_result & out, std::string & err) {
    out = report_result{};
    if (opt.source.empty() || opt.plan.empty() || opt.pruned.empty() || opt.out_dir.empty()) {
        err = "report needs the source, the plan, the build and the output directory";
        return false;
    }
    card c(opt, out.verified, out.not_verified);
    c.readme = opt.out_dir + "/README.md";
    c.fig_dir = opt.out_dir + "/figures";
    // what this run may publish, checked before any work (again before writing,
    // with the shards of the two models and the figures actually drawn)
    std::vector<std::string> may_write = {c.readme};
    if (!opt.saliency.empty()) {
        for (const char * f : {"saliency-heatmap.svg", "retention.svg", "domain-usage.svg", "calibration-stability.svg"}) {
            may_write.push_back(c.fig_dir + "/" + f);
        }
    }
    if (!opt.sweep.empty()) {
        for (const char * f : {"sweep-kld.svg", "sweep-frontier.svg"}) may_write.push_back(c.fig_dir + "/" + f);
    }
    for (const auto & f : opt.extra_figures) may_write.push_back(c.fig_dir + "/" + f.first);
    if (!check_outputs(may_write, inputs_of(opt, nullptr, nullptr), opt.force, err)) return false;

    if (!audit_build(c, out.differs, err) || !gather_method(c, err) || !gather_evals(c, err)) return false;
    judge_evals(c);
    if (!gather_sweep_stage(c, err)) return false;
    c.unverified.push_back(c.n_behaviour ? "Task accuracy (benchmarks), tool use and safety behaviour: not measured by reap; KLD, top-1 agreement and perplexity are next-token measures against the source, the needle grid and free generation the behaviours named above."
                                         : "Task accuracy (benchmarks), long-context behaviour, tool use and safety behaviour: not measured by reap; KLD, top-1 agreement and perplexity are next-token measures against the source.");

    std::vector<std::pair<std::string, std::string>> figures;   // file name, svg
    if (c.sal.have) {
        figures.push_back({"saliency-heatmap.svg", util::render_heatmap_svg(heatmap_of(c.sal, c.p))});
        figures.push_back({"retention.svg", util::render_svg(retention_chart(c.sal, c.p, c.sal.share.mean))});
        figures.push_back({"domain-usage.svg", util::render_svg(usage_chart(c.sal, c.p))});
        if (c.sal.stability && !c.sal.stability->points.empty()) {
            figures.push_back({"calibration-stability.svg", util::render_svg(stability_chart(*c.sal.stability))});
        }
    }
    if (c.sw.have) figures.push_back({"sweep-kld.svg", util::render_svg(sweep_kld_chart(c.sw, c.p))});
    if (c.sw.have && !c.sw.s.sources.empty()) figures.push_back({"sweep-frontier.svg", util::render_svg(sweep_frontier_chart(c.sw.s))});
    for (const auto & f : opt.extra_figures) figures.push_back(f);
    const std::string text = front_matter_and_census(c) + method_section(c) + verified_sections(c) + sweep_section(c) +
                             opt.extra_section + running_sections(c);
    return publish_card(c, figures, text, out, err);
}

} // namespace reap::report

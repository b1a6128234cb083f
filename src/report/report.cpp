// The model card of a pruned build (see report.h): gathers the receipts and
// checks them (the build re-audited, every eval, sweep and behaviour file
// matched to it), then publishes README.md and its figures, which
// report_text.cpp and report_figures.cpp write from those facts.
#include "report/report.h"
#include "report/report_facts.h"
#include "report/sweep_chart.h"
#include "plan/stability.h"

#include "formats/behaviour_file.h"
#include "formats/eval_file.h"
#include "formats/sweep_file.h"
#include "formats/task_file.h"
#include "metrics/gen_tasks.h"
#include "metrics/judge_rules.h"

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

}  // namespace detail

namespace {

using namespace detail;

// ---- small formatting -----------------------------------------------------------------------


// ---- eval receipts --------------------------------------------------------------------------

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
pl::rank_options rank_options_of(const pl::plan_provenance & pv, const saliency::archive & a, std::vector<std::string> & notes) {
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

bool gather_saliency(const report_options & opt, const plan & p, const pl::plan_provenance & pv, const model_facts & src, saliency_facts & s,
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
    // (a weights archive saw no token: none)
    for (const auto & d : s.a.domains) {
        if (d.count.empty()) {
            s.usage.emplace_back(p.layers.size(), NAN);
            continue;
        }
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
        {"sweep", opt.sweep}, {"judge result", opt.judge}, {"imatrix", opt.imatrix}};
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

// The build: re-audited here, or no card; then the build's files with the hashes verify just checked.
bool audit_build(card & c, bool & differs, std::string & err) {
    const report_options & opt = c.opt;
    if (!open_facts(opt.source, c.src, err)) return false;
    std::string & plan_sha = c.build.plan_sha256;
    if (!read_plan(opt.plan, c.p, plan_sha, err) || !pl::read_plan_provenance(c.p.provenance, opt.plan, c.prov, err)) return false;
    // the audit of reap verify itself (prune/verify_run.h), folder lock included
    prune::verify_request vreq;
    vreq.model = opt.source;
    vreq.plan = opt.plan;
    vreq.output = opt.pruned;
    vreq.imatrix = opt.imatrix;   // a width cut requantised to an IQ type is audited with the imatrix it was made with
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
    const double recorded = c.prov.receipts.share_mean;
    if (c.sal.have && c.prov.receipts.has_share && std::fabs(recorded - c.sal.share.mean) > 1e-9) {
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

// What multiple-choice tasks showed for model m, against the source on the same tasks.
std::string choice_claim(const choice_section & s, size_t m) {
    const choice_report & r = s.report;
    const choice_model_result & mr = r.models[m], & base = r.models[0];
    const interval ci = mr.ci95(), bci = base.ci95();
    const paired_result p = r.paired(m);
    return r.task_format + " tasks of " + input_named(s.measured, r.data_path) + " (" + std::to_string(r.tasks.size()) + " of " +
           std::to_string(r.data_tasks) + " tasks" + (r.limit ? ", --tasks-limit " + std::to_string(r.limit) : std::string()) +
           ", scored as llama-perplexity scores them, -c " + std::to_string(r.n_ctx) + ", " + std::to_string(r.n_seq) +
           " sequences): **accuracy " + fmt("%.2f", 100 * mr.accuracy()) + "%** (95% interval " + fmt("%.2f", 100 * ci.low) + "-" +
           fmt("%.2f", 100 * ci.high) + "%), the source " + fmt("%.2f", 100 * base.accuracy()) + "% (" + fmt("%.2f", 100 * bci.low) + "-" +
           fmt("%.2f", 100 * bci.high) + "%); task for task against the source " + std::to_string(p.right_to_wrong) + " right -> wrong, " +
           std::to_string(p.wrong_to_right) + " wrong -> right, McNemar's exact p = " + fmt("%.3g", p.p_value) +
           (p.p_value < 0.05 ? " (more than chance would move)" : " (within what chance moves)") + ".";
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

// What generative tasks showed for model m: its pass rate, cap hits and
// recheck, against the source's; the settings; one attempt's caveat.
std::string generate_claim(const std::vector<answers_doc> & docs, size_t m) {
    const answers_doc & d = docs[m], & base = docs[0];
    const gen_settings & s = d.settings;
    const interval ci = wilson_interval(d.n_pass(), d.answers.size()), bci = wilson_interval(base.n_pass(), base.answers.size());
    const double rate = d.answers.empty() ? 0 : (double) d.n_pass() / (double) d.answers.size();
    const double brate = base.answers.empty() ? 0 : (double) base.n_pass() / (double) base.answers.size();
    std::string text = std::to_string(d.prompts.size()) + " generative tasks of " + code(util::base_name(d.tasks_path)) + " (sha256 " +
                       code(d.tasks_sha256.substr(0, 16)) + "…), " + std::to_string(s.samples) + " answer(s) each, " +
                       (s.temperature > 0 ? "sampled at --temp " + fmt("%g", s.temperature) + ", --top-p " + fmt("%g", s.top_p) + ", --seed " +
                                                std::to_string(s.seed)
                                          : std::string("greedy")) +
                       ", --max-new " + std::to_string(s.max_new) + ": **pass rate " + fmt("%.1f", 100 * rate) + "%** (95% interval " +
                       fmt("%.1f", 100 * ci.low) + "-" + fmt("%.1f", 100 * ci.high) + "%), the source " + fmt("%.1f", 100 * brate) + "% (" +
                       fmt("%.1f", 100 * bci.low) + "-" + fmt("%.1f", 100 * bci.high) + "%); " + std::to_string(d.n_cap_hits()) + " of " +
                       std::to_string(d.answers.size()) + " answers hit their cap (the source " + std::to_string(base.n_cap_hits()) + ")";
    if (s.recheck_cap > 0) {
        text += "; rechecked at " + std::to_string(s.recheck_cap) + " tokens: " + std::to_string(d.n_rechecked_finished()) + " then finished, " +
                std::to_string(d.n_cap_hits() - d.n_rechecked_finished()) + " hit it again";
    }
    if (s.samples == 1 && s.temperature > 0) text += ". One sampled attempt a task: these rates carry real variance";
    return text + ".";
}

// A generative task file (reap eval --tasks --json): every model's answers
// document, the run's receipts in each; counted like a behaviour section.
bool gather_generate(card & c, const std::string & path, const std::vector<answers_doc> & docs, std::string & err) {
    behaviour_receipts measured;
    if (!docs[0].measured.is_null()) {
        const nlohmann::json holder = {{"measured", docs[0].measured}};   // json_fields reads it in place
        util::json_fields f(holder, "task file '" + path + "'");
        if (!behaviour_receipts_from_json(f, measured)) {
            err = f.error();
            return false;
        }
    }
    std::vector<std::pair<std::string, bool>> models;
    for (const auto & d : docs) models.push_back({d.model_name, d.masked});
    judge_behaviour(c, path, "Generative tasks", measured, models, [&](size_t m) { return generate_claim(docs, m); });
    return true;
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
        if (j.is_object() && j.contains("format") && j["format"] == k_task_file_format) {
            task_document d;
            if (!task_document_from_json(j, path, d, err)) return false;
            if (!d.choice && !d.generate.empty()) {
                if (!gather_generate(c, path, d.generate, err)) return false;
                ++c.n_tasks;
                continue;
            }
            if (!d.choice) {
                err = "task file '" + path + "' holds no task section";
                return false;
            }
            std::vector<std::pair<std::string, bool>> models;
            for (const auto & m : d.choice->report.models) models.push_back({m.name, m.masked});
            judge_behaviour(c, path, "Tasks", d.choice->measured, models, [&](size_t m) { return choice_claim(*d.choice, m); });
            ++c.n_tasks;
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
    // a sweep of several methods (reap sweep --methods): the card shows the points of this build's method
    if (sweep_has_methods(sw.s) && !c.prov.method.empty()) {
        std::vector<sweep_record_point> mine;
        for (const auto & pt : sw.s.points) {
            if (pt.method == c.prov.method) mine.push_back(pt);
        }
        if (!mine.empty()) {
            sw.s.points = std::move(mine);
            sw.s.saliency.method = c.prov.method;
            for (auto & pt : sw.s.points) pt.method.clear();
        }
    }
    const std::string & planned = c.prov.saliency_sha256;
    if (!planned.empty() && sw.s.saliency.sha256 != planned && sw.s.saliency.second_sha256 != planned) {
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

// --judge: a pairwise judge's comparison of two builds' answers. A judge's
// opinion, not a measurement of this build's files: always under Not verified,
// with the judge, the rubric, the counts, the position rate and its scope.
bool gather_judge(card & c, std::string & err) {
    if (c.opt.judge.empty()) return true;
    judge_result r;
    if (!read_judge_result(c.opt.judge, r, err)) return false;
    const auto s = r.summary();
    std::string line = "**Pairwise judge " + code(util::base_name(c.opt.judge)) + "**: " + code(r.a_model) + " (A) against " + code(r.b_model) +
                       " (B) on the tasks of " + code(util::base_name(r.tasks_path)) + " (sha256 " + code(r.tasks_sha256.substr(0, 16)) +
                       "…), judged by " + code(util::base_name(r.judge_name)) + (r.judge_kind == "gguf" ? " (header sha256 " : " (") +
                       code(r.judge_detail.substr(0, 16)) + "), each pair in both orders: A " + std::to_string(s.wins) + " wins, " +
                       std::to_string(s.losses) + " losses, " + std::to_string(s.ties) + " ties of " + std::to_string(s.judged) +
                       " pairs; the judge chose the answer shown first in " + fmt("%.1f", 100 * s.position_first_rate()) + "% of " +
                       std::to_string(s.verdicts) + " verdicts";
    if (r.failures) line += "; " + std::to_string(r.failures) + " replies gave no verdict";
    if (!r.rubric.path.empty()) {
        const score_mean a = rubric_mean(r.pairs, true), b = rubric_mean(r.pairs, false);
        line += "; rubric " + code(util::base_name(r.rubric.path)) + " (sha256 " + code(r.rubric.sha256.substr(0, 16)) + "…, " +
                std::to_string(r.rubric.low) + "-" + std::to_string(r.rubric.high) + "): A " + fmt("%.2f", a.mean) + " (" + fmt("%.2f", a.low) +
                "-" + fmt("%.2f", a.high) + "), B " + fmt("%.2f", b.mean) + " (" + fmt("%.2f", b.low) + "-" + fmt("%.2f", b.high) + ")";
    }
    line += ". These numbers compare these two builds under this judge only.";
    c.unverified.push_back(line);
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
    if (!gather_judge(c, err)) return false;
    if (c.n_tasks == 0) c.unverified.push_back(c.n_behaviour ? "Task accuracy (benchmarks), tool use and safety behaviour: not measured by reap; KLD, top-1 agreement and perplexity are next-token measures against the source, the needle grid and free generation the behaviours named above."
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

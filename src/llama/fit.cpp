// reap fit, the library half (see fit.h): calibrate, the reference's rows,
// the space, the search, then the build of the winner; each stage journalled.
#include "llama/fit.h"

#include "llama/calibrate.h"
#include "formats/fit_journal.h"
#include "formats/kld_receipt.h"
#include "corpus/corpus_line.h"
#include "gguf/gguf.h"
#include "moe/identity.h"
#include "util/json.h"
#include "llama/fit_stages.h"
#include "llama/sweep.h"
#include "metrics/kld_record.h"
#include "moe/census.h"
#include "moe/layout_gguf.h"
#include "moe/pruned.h"
#include "moe/width.h"
#include "plan/provenance.h"
#include "prune/imatrix_slice.h"
#include "prune/prune.h"
#include "prune/run.h"
#include "prune/width.h"
#include "saliency/archive.h"
#include "util/disk.h"
#include "util/number_format.h"
#include "util/output_rule.h"
#include "util/path.h"
#include "util/sha256.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sys/stat.h>

namespace reap {

namespace pl = reap::planner;

namespace {

// --down-type as prune takes it (unset: each down tensor's own type).
prune::width_options fit_width_options(const fit_options & o) {
    prune::width_options w;
    if (const gguf::type_info * t = o.down_type.empty() ? nullptr : gguf::find_type(o.down_type)) w.down_type = t->type;
    return w;
}

} // namespace

bool fit_cut_needs_importance(const fit_options & o, const gguf::model & m, const moe::layout & lay) {
    if (!o.axis_width) return false;
    moe::expert_width ew;
    std::string err;
    if (!moe::expert_width_of(m, lay, ew, err) || !ew.refusal.empty()) return false;
    const gguf::type_info * t = o.down_type.empty() ? nullptr : gguf::find_type(o.down_type);
    const int64_t block = t ? t->block_size : ew.down_block;
    const prune::width_options w = fit_width_options(o);
    // a grid without a K below the full width cuts nothing
    return block > 0 && block < ew.n_ff && prune::cut_down_needing_importance(m, lay, w) != nullptr;
}

namespace {

// calibrate: DIR/saliency.gguf over --corpus, on the reference when given
// (else the first source); with the channel scores the width axis needs.
bool calibrate_stage(const fit_options & o, fit_journal & j, std::string & saliency, FILE * out, std::string & err) {
    if (!o.saliency.empty()) {
        saliency = o.saliency;
        return true;
    }
    saliency = o.out_dir + "/saliency.gguf";
    if (fit_stage_holds(j, "calibrate", saliency)) {
        fprintf(out, "reap fit: calibrate: done earlier (%s)\n", saliency.c_str());
        return true;
    }
    calibrate_options c;
    c.model_path = o.reference.empty() ? o.sources[0] : o.reference;
    c.corpus_path = o.corpus;
    c.out_path = saliency;
    c.rt = o.rt;
    c.width_saliency = o.axis_width;
    c.force = true;   // DIR is fit's: an archive without its journal line is from a killed run
    c.checkpoint_every = 64;
    c.resume = fit_file_exists(saliency + ".checkpoint");
    c.progress = o.progress;
    c.verbose = o.verbose;
    fprintf(out, "reap fit: calibrate %s over %s%s\n", c.model_path.c_str(), o.corpus.c_str(), c.resume ? " (resumed)" : "");
    saliency::archive arch;
    calibrate_report rep;
    if (!run_calibrate(c, arch, rep, err)) return false;
    if (rep.interrupted) {
        err = "calibration interrupted; its checkpoint is kept: run the same command again to resume";
        return false;
    }
    return fit_mark_stage(j, "calibrate", saliency, err);
}

// The reference's rows: --kld-base when it exists, else written once into
// DIR/reference.kld (or --kld-base) from --reference, or from the first source.
bool reference_stage(const fit_options & o, fit_journal & j, std::string & kld, FILE * out, std::string & err) {
    kld = o.kld_base.empty() ? o.out_dir + "/reference.kld" : o.kld_base;
    if (!o.kld_base.empty() && j.kld_base_given) return true;   // given, existing: read only
    if (fit_stage_holds(j, "reference", kld)) {
        fprintf(out, "reap fit: reference rows: done earlier (%s)\n", kld.c_str());
        return true;
    }
    if (fit_file_exists(kld) && !util::current_disk().unlink(kld)) {   // a killed run's (published whole, not journalled)
        err = "cannot remove '" + kld + "': " + strerror(errno);
        return false;
    }
    const eval_options e = fit_eval_options(o, o.reference.empty() ? o.sources[0] : o.reference, o.heldout, kld);
    fprintf(out, "reap fit: reference rows of %s over %s -> %s (pass 0)\n", e.base_path.c_str(), o.heldout.c_str(), kld.c_str());
    std::vector<eval_report> none;
    if (!run_eval_candidates(e, {}, none, err)) return false;
    return fit_mark_stage(j, "reference", kld, err);
}

// The widths of one source's line: every multiple of the down type's block up
// to the experts' width (with the width axis), else the full width only.
bool line_widths(const fit_options & o, const pl::ranked_model & rm, const std::string & saliency, std::vector<int64_t> & widths,
                 std::string & err) {
    const int64_t n_ff = facts_of(rm.layout, rm.model).n_ff_exp;
    widths = {n_ff};
    if (!o.axis_width) return true;
    pl::width_setup w;
    util::error e;
    if (!pl::setup_width(rm, saliency, o.down_type, std::nullopt, {n_ff}, "the width axis", w, e)) {
        err = e.message + " (leave the width out: --axes experts,sources)";
        return false;
    }
    const int64_t blk = std::max<int64_t>(1, w.facts.down_block);
    widths.clear();
    for (int64_t k = blk; k < n_ff; k += blk) widths.push_back(k);
    widths.push_back(n_ff);
    return true;
}

// The space: for every source and K, the largest N whose file fits (or every
// expert, without the experts axis), planned as reap sweep plans.
bool build_space(const fit_options & o, const std::string & saliency, fit_result & r, FILE * out, std::string & err) {
    std::string & archive_sha = r.archive_sha256;
    if (!util::sha256_file(saliency, archive_sha, err)) return false;
    r.saliency_path = saliency;
    const size_t n_sources = o.axis_sources ? o.sources.size() : 1;
    for (size_t s = 0; s < n_sources; ++s) {
        pl::ranked_model rm;
        if (!pl::open_ranked_model(o.sources[s], saliency, o.rank, o.method_given, rm, err)) return false;
        std::vector<int64_t> widths;
        if (!line_widths(o, rm, saliency, widths, err)) return false;
        r.metric_set = saliency::metric_set_name(rm.archive.metrics);
        moe::census cen;
        if (!moe::take_census(rm.model, {}, cen, err)) return false;
        r.pool_bytes.push_back(cen.expert_pool_bytes);
        r.lines.emplace_back();
        const bool written = fit_cut_needs_importance(o, rm.model, rm.layout);   // for every K below the full width
        for (int64_t K : widths) {
            pl::source_plans_request so;
            so.saliency = saliency;
            so.tool_version = o.tool_version;
            so.down_type = o.down_type;
            if (o.axis_width) so.widths = {K};
            if (o.axis_experts) {
                so.sizes.push_back({pl::size_kind::budget, o.budget_text, 0, 0, o.budget});
            } else {
                so.sizes.push_back({pl::size_kind::keep, std::to_string(rm.layout.n_expert), rm.layout.n_expert, 0, 0});
            }
            std::vector<pl::sweep_point> pts;
            std::string why;
            if (!pl::plan_source_points(so, rm, archive_sha, pts, why) || pts.empty()) {
                r.excluded.push_back({o.sources[s], K, why.empty() ? "no plan" : why});
                continue;
            }
            if (pts[0].bytes > o.budget) {
                r.excluded.push_back({o.sources[s], K, "every expert kept: " + std::to_string(pts[0].bytes) + " bytes, over the budget"});
                continue;
            }
            fit_candidate c;
            c.point = {s, K, pts[0].n_keep, pts[0].bytes};
            r.full_grid += o.axis_experts ? (size_t) std::max<int64_t>(1, pts[0].n_keep - std::max<int64_t>(1, rm.layout.n_expert_used) + 1) : 1;
            c.source_path = o.sources[s];
            c.p = std::move(pts[0].p);
            c.written = written && K < widths.back();
            r.lines.back().push_back(r.space.size());
            r.space.push_back(std::move(c));
        }
    }
    r.scores.assign(r.space.size(), std::nullopt);
    print_fit_space(out, o, r);
    return true;
}

} // namespace

eval_options fit_eval_options(const fit_options & o, const std::string & base, const std::string & input, const std::string & kld) {
    eval_options e;
    e.base_path = base;
    e.input_path = input;
    e.kld_base_path = kld;
    e.rt = o.rt;
    if (!kld.empty() && fit_file_exists(kld)) e.rt.n_ctx = 0;   // the rows file's window
    e.progress = o.progress;
    e.verbose = o.verbose;
    return e;
}

namespace {

// One masked pass: candidate i of its source against the reference's rows
// (or its written file's, when a mask does not stand for it).
bool score_candidate(const fit_options & o, const std::string & kld, const fit_candidate & c, pl::fit_score & sc, FILE * out,
                     std::string & err) {
    if (c.written) return score_written_candidate(o, kld, c, sc, out, err);
    const eval_options e = fit_eval_options(o, c.source_path, o.heldout, kld);
    std::vector<eval_report> reps;
    const std::string label = util::base_name(c.source_path) + " N=" + std::to_string(c.point.n_keep) + " K=" + std::to_string(c.point.width);
    if (!run_eval_candidates(e, {{label, true, &c.p}}, reps, err)) return false;
    sc.kld = reps[0].overall.kld_mean;
    sc.kld_half[0] = reps[0].kld_half[0];
    sc.kld_half[1] = reps[0].kld_half[1];
    sc.top1 = reps[0].overall.argmax_agree;
    return true;
}

// The search: fit_search's picks, one masked pass each, every score journalled
// at once; scores of an earlier run are read back, never measured again.
bool search_stage(const fit_options & o, fit_journal & j, const std::string & kld, fit_result & r, FILE * out, std::string & err) {
    std::vector<pl::fit_point> pts;
    for (const fit_candidate & c : r.space) pts.push_back(c.point);
    pl::fit_search s(pts, r.lines, o.max_passes);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::vector<size_t> next = s.next(); !next.empty(); next = s.next()) {
        for (size_t i : next) {
            const fit_candidate & c = r.space[i];
            const fit_key key{c.point.source, c.point.width, c.point.n_keep};
            pl::fit_score sc;
            if (auto it = j.scores.find(key); it != j.scores.end()) {
                sc = it->second;
                ++r.passes_resumed;
            } else {
                if (!score_candidate(o, kld, c, sc, out, err)) return false;
                j.scores[key] = sc;
                if (!save_fit_journal(j, err)) return false;
                ++r.passes_this_run;
            }
            s.record(i, sc);
            r.scores[i] = sc;
            const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            print_fit_pass(out, r, i, fit_passes_left_estimate(s), elapsed);
        }
    }
    r.stop_reason = s.stop_reason();
    r.noise = s.noise();
    r.winner = s.best();
    r.runner_up = s.runner_up();
    if (!r.winner) {
        err = "no candidate fits --budget " + o.budget_text + (r.excluded.empty() ? "" : " (" + r.excluded[0].why + ")");
        return false;
    }
    return true;
}

// What fit writes in DIR: these files, and whatever lies in these folders.
constexpr const char * k_fit_files[] = {"fit-journal.json", "saliency.gguf", "saliency.gguf.checkpoint", "reference.kld",
                                        "gates.json",       "plan.json",     "eval.json",                "fit.json"};
constexpr const char * k_fit_folders[] = {"build", "card", "measure"};

// Whether `path` (existing) lies inside the folder `dir` (existing), links resolved.
bool lies_inside(const std::string & path, const std::string & dir) {
    char * rp = ::realpath(path.c_str(), nullptr);
    char * rd = ::realpath(dir.c_str(), nullptr);
    const bool inside = rp && rd && std::string(rp).rfind(std::string(rd) + "/", 0) == 0;
    free(rp);
    free(rd);
    return inside;
}

// The output rule for DIR, before anything is read or written: DIR is a folder
// (or does not exist yet); no input is one of fit's outputs, by path or through
// a link, nor lies in a folder fit fills; and a DIR without fit's journal holds
// nothing fit would write (a user's plan.json, card, ... are never replaced).
// A DIR with a journal is checked by open_fit_journal: the same files, or refused.
bool check_fit_dir(const fit_options & o, std::string & err) {
    const std::string & dir = o.out_dir;
    struct stat st;
    const bool exists = ::stat(dir.c_str(), &st) == 0;
    if (exists && !S_ISDIR(st.st_mode)) {
        err = "-o " + dir + ": it exists and is not a folder (fit writes a folder: give a new or empty one)";
        return false;
    }
    std::vector<std::pair<std::string, std::string>> inputs;
    for (const std::string & s : o.sources) inputs.push_back({"source model", s});
    inputs.push_back({"reference model", o.reference});
    inputs.push_back({"calibration corpus", o.corpus});
    inputs.push_back({"saliency archive", o.saliency});
    inputs.push_back({"held-out text", o.heldout});
    inputs.push_back({"imatrix", o.imatrix});
    inputs.push_back({"generation prompts", o.generate.prompts_path});
    inputs.push_back({"task file", o.tasks.tasks_path});
    const bool kld_base_read = !o.kld_base.empty() && ::stat(o.kld_base.c_str(), &st) == 0;
    if (kld_base_read) inputs.push_back({"KLD base file", o.kld_base});
    std::vector<std::string> outputs;
    for (const char * name : k_fit_files) {
        const std::string n = name;
        if (n == "reference.kld" && !o.kld_base.empty()) continue;                          // --kld-base is used instead
        if ((n == "saliency.gguf" || n == "saliency.gguf.checkpoint") && !o.saliency.empty()) continue;   // not calibrated
        outputs.push_back(dir + "/" + n);
    }
    if (!o.kld_base.empty() && !kld_base_read) outputs.push_back(o.kld_base);   // written there
    for (const std::string & out : outputs) {
        if (!util::check_not_input(out, inputs, err)) {
            err += ": fit would write there; move the input out of " + dir + " or give another -o DIR";
            return false;
        }
    }
    if (!exists) return true;
    for (const auto & [what, path] : inputs) {
        if (path.empty() || ::stat(path.c_str(), &st) != 0) continue;
        for (const char * folder : k_fit_folders) {
            const std::string f = dir + "/" + folder;
            if (fit_file_exists(f) && lies_inside(path, f)) {
                err = "the " + what + " '" + path + "' lies in " + f + ", which fit fills: move it out or give another -o DIR";
                return false;
            }
        }
    }
    if (fit_file_exists(dir + "/fit-journal.json")) return true;
    std::vector<std::string> names(std::begin(k_fit_files), std::end(k_fit_files));
    names.insert(names.end(), std::begin(k_fit_folders), std::end(k_fit_folders));
    for (const std::string & n : names) {
        const std::string path = dir + "/" + n;
        if (::lstat(path.c_str(), &st) == 0 && !(kld_base_read && util::same_entry(path, o.kld_base)) &&
            !(!o.saliency.empty() && util::same_entry(path, o.saliency))) {
            err = "'" + dir + "' holds " + n + ", which fit writes, and no fit journal (fit-journal.json): it is not a fit's "
                  "folder; give a new or empty -o DIR (nothing was written)";
            return false;
        }
    }
    return true;
}

// A model's header and identity (arch, blocks, experts, vocabulary, routers); the message names the file.
bool open_identity(const std::string & path, gguf::model & m, moe::model_identity & id, std::string & err) {
    if (!gguf::open_model(path, m, err)) return false;
    if (!moe::identity_of(m, id, err)) {
        err = path + ": " + err;
        return false;
    }
    return true;
}

// An existing --kld-base is what fit's claims rest on ("scored against the
// rows of REF"): its receipt (written by reap eval beside it) must name the
// model fit calls its reference (--reference, else the first source) by header
// and routers, and describe the file's size. Rows of another model, or of no
// recorded model (a file without its receipt), are refused before any work.
bool check_kld_base_model(const fit_options & o, std::string & err) {
    struct stat st;
    if (o.kld_base.empty() || ::stat(o.kld_base.c_str(), &st) != 0) return true;
    const std::string ref = o.reference.empty() ? o.sources[0] : o.reference;
    kld_base_receipt rc;
    bool found = false;
    if (!read_kld_receipt_of(o.kld_base, found, rc, err)) return false;
    if (!found) {
        err = "--kld-base " + o.kld_base + " has no receipt (" + kld_receipt_path(o.kld_base) + ", which reap eval writes beside the "
              "rows it makes): which model wrote these rows is not recorded, and fit would claim they are " + ref +
              "'s; let fit write them (--reference REF.gguf, without --kld-base)";
        return false;
    }
    if (rc.bytes != (uint64_t) st.st_size) {
        err = "--kld-base " + o.kld_base + " is " + std::to_string(st.st_size) + " bytes, its receipt describes " +
              std::to_string(rc.bytes) + ": not the file the receipt was written for";
        return false;
    }
    gguf::model m;
    moe::model_identity id;
    if (!open_identity(ref, m, id, err)) return false;
    if (rc.base_sha256 != model_header_sha256(m) || rc.base_router_sha256 != id.router_sha256) {
        err = "--kld-base " + o.kld_base + " holds the rows of " + rc.base_path + " (header sha256 " + rc.base_sha256.substr(0, 16) +
              "…), not of fit's reference " + ref + " (" + model_header_sha256(m).substr(0, 16) + "…)" +
              (o.reference.empty() ? ": give that model as --reference, or rows of " + ref : "");
        return false;
    }
    if (!rc.base_mask.empty()) {
        err = "--kld-base " + o.kld_base + " holds the rows of " + rc.base_path + " masked by " + rc.base_mask +
              ", not of the whole reference";
        return false;
    }
    return true;
}

// The domains a corpus holds (a scan of its lines, no tokenizing).
bool corpus_domains(const std::string & path, std::set<std::string> & out, std::string & err) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        err = "cannot open the corpus '" + path + "'";
        return false;
    }
    size_t n = 0;
    for (std::string line; std::getline(in, line);) {
        corpus_line c;
        bool blank = false;
        if (!parse_corpus_line(line, path + ": line " + std::to_string(++n) + ": ", c, blank, err)) return false;
        if (!blank) out.insert(c.domain);
    }
    return true;
}

// A budget no build can meet, from the headers, before calibration: the
// smallest file keeps the experts a token uses in every layer (a lower bound:
// group-limited routers keep more) and, with the width axis, the narrowest
// channel width the space holds (one block of the down type); sized exactly as
// prune would write it (moe::pruned_bytes: only N, K and the down type decide
// it, not which experts or channels).
bool check_budget(const fit_options & o, std::string & err) {
    uint64_t smallest = UINT64_MAX;
    std::string which;
    const size_t n_sources = o.axis_sources ? o.sources.size() : 1;
    for (size_t s = 0; s < n_sources; ++s) {
        gguf::model m;
        moe::model_identity id;
        moe::layout lay;
        if (!open_identity(o.sources[s], m, id, err) || !moe::layout_of(m, lay, err, moe::describe_options())) return false;
        const int64_t n = o.axis_experts ? std::max<int64_t>(1, id.n_expert_used) : id.n_expert;
        moe::width_cut cut;
        if (o.axis_width) {
            moe::expert_width w;
            if (!moe::expert_width_of(m, lay, w, err)) return false;
            int64_t block = w.down_block;
            if (const gguf::type_info * ti = o.down_type.empty() ? nullptr : gguf::find_type(o.down_type)) {
                block = ti->block_size;
                cut.down_type = ti->type;
            }
            if (w.refusal.empty() && block > 0 && block < w.n_ff) cut.n_ff = w.n_ff, cut.keep = block;
        }
        moe::stamp_options stamp;
        stamp.plan_sha256 = std::string(64, '0');   // the real hash has the same length
        stamp.version = o.tool_version;
        uint64_t bytes = 0;
        uint32_t n_shards = 0;
        if (!moe::pruned_bytes(m, lay, n, stamp, {}, bytes, n_shards, err, cut)) return false;
        if (bytes < smallest) {
            smallest = bytes;
            which = o.sources[s] + " keeping " + std::to_string(n) + " experts a layer" +
                    (cut.keep > 0 ? " of " + std::to_string(cut.keep) + " channels" : "");
        }
    }
    if (smallest != UINT64_MAX && smallest > o.budget) {
        err = "--budget " + o.budget_text + " fits no build: the smallest, " + which + ", is " + std::to_string(smallest) + " bytes (" +
              util::format_size(smallest) + ")" + (o.axis_experts ? "" : "; the experts axis is off") + ": give a larger budget" +
              (o.axis_width ? "" : ", or cut channels too (--axes with width)");
        return false;
    }
    return true;
}

// The width axis of every source, from its header: its K grid (a model that
// cannot be cut, or a down type whose block does not divide the experts'
// width, was found only after calibration). Width cuts whose down projection
// requantises to an importance-matrix type (--down-type iq2_xxs, or a
// source's own): a mask does not model that, so the search writes those
// candidates and scores their files (issue 49 item 10). They need --imatrix,
// checked against each such source now (every expert kept), and the gates,
// which run candidates by mask, are refused.
bool check_width_axis(const fit_options & o, bool & any_written, std::string & err) {
    any_written = false;
    if (!o.axis_width) return true;
    const gguf::type_info * down = o.down_type.empty() ? nullptr : gguf::find_type(o.down_type);
    const size_t n_sources = o.axis_sources ? o.sources.size() : 1;   // the sources the space takes
    for (size_t s = 0; s < n_sources; ++s) {
        const std::string & src = o.sources[s];
        gguf::model m;
        moe::layout lay;
        if (!gguf::open_model(src, m, err) || !model_layout(m, lay, err)) return false;   // the layout the space plans with
        plan_model_facts facts = facts_of(lay, m);
        if (down) facts.down_block = down->block_size, facts.down_type_name = down->name;
        const std::string why = facts.width_refusal.empty() ? width_refusal(facts.n_ff_exp, facts) : facts.width_refusal;
        if (!why.empty()) {   // line_widths' message, before the first decode
            err = "the width axis: " + why + " (leave the width out: --axes experts,sources)";
            return false;
        }
        if (!fit_cut_needs_importance(o, m, lay)) continue;
        any_written = true;
        const std::string what = o.down_type.empty() ? "-m " + src + "'s own down type" : "--down-type " + o.down_type;
        if (o.imatrix.empty()) {
            err = what + " needs an importance matrix to requantise the cut down projection: give the model's llama-imatrix "
                  "file with --imatrix (or leave the width out: --axes experts,sources)";
            return false;
        }
        if (!fit_gates_fingerprint(o).empty()) {
            err = "the gates run candidates by mask, and a mask does not model down requantised as " + what +
                  " asks (an importance-matrix type): leave the gates out, give another --down-type, or leave the width out";
            return false;
        }
        plan every;   // every expert of every MoE layer: the entries the cuts will need
        every.arch = lay.arch;
        every.n_layer = lay.n_layer;
        every.n_expert = every.n_keep = lay.n_expert;
        every.n_expert_used = lay.n_expert_used;
        for (int l : lay.moe_layers) {
            plan_layer pl;
            pl.layer = l;
            for (int64_t e = 0; e < lay.n_expert; ++e) pl.keep.push_back(e);
            every.layers.push_back(std::move(pl));
        }
        prune::imatrix_slice slice;
        if (!prune::prepare_imatrix_slice(o.imatrix, m, lay, every, slice, err) ||
            !prune::check_shared_down_entry(o.imatrix, slice.file, m, lay, fit_width_options(o), err)) {
            err = "--imatrix: " + err;
            return false;
        }
    }
    return true;
}

// What can be checked from the headers, the options and the archive's (or the
// corpus's) domain list, before the first decode: at a large model's size a
// typo found after calibration costs a day. `written_candidates`: whether the
// search will score some candidates from their written files (check_width_axis).
// The sources and the reference must
// be one model (arch, blocks, experts, vocabulary); --down-type a ggml type;
// --domains the archive's (or the corpus's); the gates' lengths within the
// reference's trained context.
bool check_fit_inputs(const fit_options & o, bool & written_candidates, std::string & err) {
    // without the width axis no candidate cuts channels: prune would refuse the type after the whole search
    if (!o.down_type.empty() && !o.axis_width) {
        err = "--down-type is for the width axis: give --axes with width (no candidate cuts channels, so none requantises down)";
        return false;
    }
    const gguf::type_info * down = o.down_type.empty() ? nullptr : gguf::find_type(o.down_type);
    if (!o.down_type.empty() && !down) {
        err = "--down-type: unknown type '" + o.down_type + "'";
        return false;
    }
    if (!check_width_axis(o, written_candidates, err)) return false;
    std::vector<std::string> models = o.sources;
    if (!o.reference.empty()) models.push_back(o.reference);
    moe::model_identity first;
    uint32_t trained = 0;
    for (size_t i = 0; i < models.size(); ++i) {
        gguf::model m;
        moe::model_identity id;
        if (!open_identity(models[i], m, id, err)) return false;
        if (i == 0) {
            first = id;
            trained = (uint32_t) moe::trained_context(m);
            continue;
        }
        if (id.arch != first.arch || id.n_layer != first.n_layer || id.n_expert != first.n_expert || id.n_vocab != first.n_vocab) {
            err = (i + 1 == models.size() && !o.reference.empty() ? "--reference " : "-m ") + models[i] + " is another model than " +
                  models[0] + " (" + id.arch + ", " + std::to_string(id.n_layer) + " blocks, " + std::to_string(id.n_expert) +
                  " experts, " + std::to_string(id.n_vocab) + " tokens against " + first.arch + ", " + std::to_string(first.n_layer) +
                  ", " + std::to_string(first.n_expert) + ", " + std::to_string(first.n_vocab) + ")";
            return false;
        }
    }
    if (!check_budget(o, err)) return false;
    {   // every pass's window: -c, or an existing --kld-base file's (the scores run at it)
        pass_runtime rt = o.rt;
        kld_base_header h;
        const bool rows = !o.kld_base.empty() && fit_file_exists(o.kld_base);
        if (rows && !kld_base_read_header(o.kld_base, h, err)) return false;
        if (rows) rt.n_ctx = h.n_ctx;
        if (!settle_window(rt, trained, models[0], err)) {
            if (rows) err = "--kld-base " + o.kld_base + " holds windows of " + std::to_string(h.n_ctx) + " tokens: " + err;
            return false;
        }
    }
    if (trained > 0 && o.gate_needle) {
        for (int l : o.needle.lengths) {
            if ((uint32_t) l >= trained) {
                err = "--needle-lengths " + std::to_string(l) + " is past the model's trained context of " + std::to_string(trained);
                return false;
            }
        }
    }
    if (trained > 0 && !o.generate.prompts_path.empty() && (uint32_t) o.generate.max_new >= trained) {
        err = "--max-new " + std::to_string(o.generate.max_new) + " is past the model's trained context of " + std::to_string(trained);
        return false;
    }
    if (o.rank.domains.empty()) return true;
    std::set<std::string> known;
    if (!o.saliency.empty()) {
        saliency::archive a;
        if (!saliency::read_archive(o.saliency, a, err)) return false;
        for (const auto & d : a.domains) known.insert(d.name);
    } else if (!corpus_domains(o.corpus, known, err)) {
        return false;
    }
    for (const std::string & d : o.rank.domains) {
        if (!known.count(d)) {
            std::string list;
            for (const auto & k : known) list += (list.empty() ? "" : ", ") + k;
            err = "--domains: '" + d + "' is not a domain of " + (o.saliency.empty() ? "the corpus" : "the archive") + " (" + list + ")";
            return false;
        }
    }
    return true;
}

} // namespace

bool run_fit(const fit_options & o, fit_result & r, FILE * out, std::string & err) {
    if (o.sources.empty() || o.heldout.empty() || o.out_dir.empty() || o.budget == 0 || (o.corpus.empty() && o.saliency.empty())) {
        err = "fit needs -m SOURCE, -f HELDOUT, --budget SIZE, -o DIR and --corpus CALIB (or --saliency)";
        return false;
    }
    bool written_candidates = false;
    if (!check_fit_dir(o, err) || !check_kld_base_model(o, err) || !check_fit_inputs(o, written_candidates, err)) return false;
    if (!o.dry_run && !util::current_disk().mkdir(o.out_dir, 0755) && errno != EEXIST) {
        err = "cannot create '" + o.out_dir + "': " + strerror(errno);
        return false;
    }
    fit_inputs in;
    in.sources = o.sources;
    in.reference = o.reference;
    in.kld_base = o.kld_base;
    in.corpus = o.corpus;
    in.saliency = o.saliency;
    in.heldout = o.heldout;
    in.budget = o.budget;
    in.axis_experts = o.axis_experts;
    in.axis_width = o.axis_width;
    in.axis_sources = o.axis_sources;
    in.method = o.method_given ? planner::method_name(o.rank.how) : "archive default";
    if (!o.methods.empty()) {
        in.method = "methods";
        for (planner::method m : o.methods) in.method += std::string(" ") + planner::method_name(m);
    }
    in.domains = o.rank.domains;
    in.down_type = o.down_type;
    in.gates = fit_gates_fingerprint(o);
    in.gate_prompts = o.generate.prompts_path;
    in.gate_tasks = o.tasks.tasks_path;
    in.imatrix = o.imatrix;
    in.written_candidates = written_candidates;
    {
        gguf::model m;
        if (!gguf::open_model(o.sources[0], m, err)) return false;
        in.window = o.rt.window(moe::trained_context(m));
    }
    fit_journal j;
    bool resumed = false;
    if (!open_fit_journal(o.out_dir, in, j, resumed, err)) return false;
    if (resumed && !j.carried.empty()) {
        fprintf(out, "reap fit: %s: %s\n", j.path.c_str(), j.carried.c_str());
        if (!o.dry_run && !save_fit_journal(j, err)) return false;
    }
    if (resumed) fprintf(out, "reap fit: resuming %s (%zu scores, %zu stages done)\n", j.path.c_str(), j.scores.size(), j.stages.size());
    else if (!o.dry_run && !save_fit_journal(j, err)) return false;
    std::string saliency, kld;
    if (o.dry_run && o.saliency.empty() && !fit_stage_holds(j, "calibrate", o.out_dir + "/saliency.gguf")) {
        fprintf(out, "reap fit: --dry-run: the space needs the archive; calibrate would run first over %s\n", o.corpus.c_str());
        print_fit_cost(out, o, r);
        return true;
    }
    if (!calibrate_stage(o, j, saliency, out, err)) return false;
    if (o.dry_run) {
        if (!o.methods.empty()) fprintf(out, "reap fit: --dry-run: each of the %zu methods is scored at the budget first (a pass each); "
                                             "the space below ranks by the archive's default\n", o.methods.size());
        if (!build_space(o, saliency, r, out, err)) return false;
        print_fit_cost(out, o, r);
        return true;
    }
    // --methods: the criterion is chosen by measurement before the space is planned
    fit_options c;
    const bool rows_first = !o.methods.empty();
    if (rows_first && !reference_stage(o, j, kld, out, err)) return false;
    if (!method_stage(o, j, kld, c, saliency, r, out, err) || !build_space(c, saliency, r, out, err)) return false;
    if ((!rows_first && !reference_stage(c, j, kld, out, err)) || !search_stage(c, j, kld, r, out, err) || !gate_stage(c, j, r, out, err)) {
        return false;
    }
    r.kld_path = kld;
    return build_winner(c, j, saliency, kld, r, out, err);
}

} // namespace reap

// reap fit, the build of the winner (fit_stages.h): its plan, reap prune's
// stages, reap verify's audit, reap eval of the written file against the
// reference, the agreement of file and mask, then reap report's card with the
// search as a section and DIR/fit.json. Each stage is journalled; a rerun
// skips what still holds.
#include "llama/fit_stages.h"

#include "gguf/gguf.h"
#include "plan/provenance.h"
#include "prune/prune.h"
#include "prune/run.h"
#include "prune/verify_run.h"
#include "report/report.h"
#include "util/disk.h"
#include "util/json.h"
#include "util/path.h"
#include "util/publish.h"
#include "util/sha256.h"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>

namespace reap {

bool fit_prune(const fit_options & o, const std::string & source, const std::string & plan_path, bool cuts_width,
               const std::string & output, bool durable, fit_pruned & written, std::string & err) {
    prune::prune_request req;
    req.model = source;
    req.plan = plan_path;
    req.output = output;
    req.force = true;   // fit's own folders: a file there without its journal line is a killed run's
    req.sync = durable;
    req.sums = durable;
    // a plan that keeps every channel requantises nothing: prune refuses a down type for it
    req.down_type = cuts_width ? o.down_type : "";
    req.imatrix = o.imatrix;
    req.version = o.tool_version;
    prune::prune_job job;
    prune::prune_written w;
    util::error e;
    if (!prune::prepare_prune(req, job, e) || !prune::write_prune(job, w, e)) {
        err = "prune: " + e.message;
        return false;
    }
    written.files = w.files;
    written.imatrix = job.imatrix_out;
    return true;
}

namespace {

// Files removed, and then their folder when it is empty, on every way out of
// a scope (an eval that fails or is interrupted too). Best effort: what stays
// is scratch that the next run replaces.
struct scratch_files {
    std::vector<std::string> paths;
    std::string              dir;
    ~scratch_files() {
        for (const std::string & p : paths) {
            if (!p.empty()) util::current_disk().unlink(p);
        }
        util::current_disk().rmdir(dir);
    }
};

} // namespace

bool score_written_candidate(const fit_options & o, const std::string & kld, const fit_candidate & c, planner::fit_score & sc,
                             FILE * out, std::string & err) {
    const std::string dir = o.out_dir + "/measure", plan_path = dir + "/plan.json", model = dir + "/candidate.gguf";
    if (!util::current_disk().mkdir(dir, 0755) && errno != EEXIST) {
        err = "cannot create '" + dir + "': " + strerror(errno);
        return false;
    }
    // the score is journalled, the file is not kept (the build writes the winner again)
    scratch_files scratch{{plan_path, model}, dir};
    fprintf(out, "reap fit: writing %s N=%" PRId64 " K=%" PRId64 " to measure it (down requantised to %s, which a mask does not model)\n",
            util::base_name(c.source_path).c_str(), c.point.n_keep, c.point.width,
            o.down_type.empty() ? "its own importance-matrix type" : o.down_type.c_str());
    fit_pruned written;
    if (!util::write_file_durably(plan_path, plan_text(c.p), err) ||
        !fit_prune(o, c.source_path, plan_path, true, model, false, written, err)) {
        return false;
    }
    scratch.paths.insert(scratch.paths.end(), written.files.begin(), written.files.end());
    scratch.paths.push_back(written.imatrix);
    const eval_options e = fit_eval_options(o, o.reference.empty() ? o.sources[0] : o.reference, o.heldout, kld);
    std::vector<eval_report> reps;
    if (!run_eval_candidates(e, {{written.files.empty() ? model : written.files[0], false, nullptr}}, reps, err)) return false;
    sc.kld = reps[0].overall.kld_mean;
    sc.kld_half[0] = reps[0].kld_half[0];
    sc.kld_half[1] = reps[0].kld_half[1];
    sc.top1 = reps[0].overall.argmax_agree;
    return true;
}

namespace {

// DIR/plan.json: the winner's plan, its origin reap fit's.
bool write_plan_stage(const fit_options & o, fit_journal & j, fit_result & r, std::string & err) {
    r.plan_path = o.out_dir + "/plan.json";
    if (fit_stage_holds(j, "plan", r.plan_path)) return true;
    fit_candidate & w = r.space[*r.winner];
    planner::plan_origin origin;
    origin.tool = "reap fit";
    origin.saliency_path = r.saliency_path;
    origin.saliency_sha256 = r.archive_sha256;
    origin.metric_set = r.metric_set;
    origin.request.size = {planner::size_kind::budget, o.budget_text, 0, 0, o.budget};
    origin.predicted_bytes = w.point.bytes;
    planner::record_origin(w.p, origin, o.tool_version.c_str());
    return util::write_file_durably(r.plan_path, plan_text(w.p), err) && fit_mark_stage(j, "plan", r.plan_path, err);
}

// DIR/build/STEM-fit.gguf and its SHA256SUMS, as reap prune writes them.
bool prune_stage(const fit_options & o, fit_journal & j, fit_result & r, FILE * out, std::string & err) {
    const fit_candidate & w = r.space[*r.winner];
    const std::string dir = o.out_dir + "/build";
    r.build_path = dir + "/" + util::stem_of(w.source_path) + "-fit.gguf";
    const std::string sums = dir + "/SHA256SUMS";
    if (fit_stage_holds(j, "prune", sums)) {
        fprintf(out, "reap fit: prune: done earlier (%s)\n", r.build_path.c_str());
        return true;
    }
    if (!util::current_disk().mkdir(dir, 0755) && errno != EEXIST) {
        err = "cannot create '" + dir + "': " + strerror(errno);
        return false;
    }
    fprintf(out, "reap fit: prune %s by %s -> %s\n", w.source_path.c_str(), r.plan_path.c_str(), r.build_path.c_str());
    fit_pruned written;
    if (!fit_prune(o, w.source_path, r.plan_path, w.p.has_width(), r.build_path, true, written, err)) return false;
    if (!written.files.empty()) r.build_path = written.files[0];
    return fit_mark_stage(j, "prune", sums, err);
}

// reap verify's audit of the build (prune/verify_run.h), SHA256SUMS included.
bool verify_stage(const fit_options & o, fit_journal & j, fit_result & r, FILE * out, std::string & err) {
    const std::string sums = util::sums_path_for(r.build_path);
    if (fit_stage_holds(j, "verify", sums)) return true;
    prune::verify_request req;
    req.model = r.space[*r.winner].source_path;
    req.plan = r.plan_path;
    req.output = r.build_path;
    req.imatrix = o.imatrix;
    prune::verify_run_result res;
    util::error e;
    if (!prune::run_verify(req, res, e)) {
        err = (res.report.differs ? "the build does not verify: " : "cannot verify the build: ") + e.message;
        r.differs = res.report.differs;
        return false;
    }
    const prune::verify_report & rep = res.report;
    fprintf(out, "reap fit: verify: OK, %" PRIu64 " tensors (%" PRIu64 " sliced, %" PRIu64 " requantised), %" PRIu64 " bytes compared\n",
            rep.n_tensors, rep.n_sliced, rep.n_requantised, rep.bytes_compared);
    (void) o;
    return fit_mark_stage(j, "verify", sums, err);
}

// reap eval of the written file against the reference's rows (DIR/eval.json),
// and the agreement of the file's KLD with its mask's.
bool eval_stage(const fit_options & o, fit_journal & j, fit_result & r, FILE * out, std::string & err) {
    r.eval_path = o.out_dir + "/eval.json";
    eval_report rep;
    if (fit_stage_holds(j, "eval", r.eval_path)) {
        eval_document doc;
        if (!read_eval_document(r.eval_path, doc, err)) return false;
        if (doc.entries.size() != 1) {
            err = "'" + r.eval_path + "' holds " + std::to_string(doc.entries.size()) + " reports, not the build's one";
            return false;
        }
        rep = doc.entries[0].report;
    } else {
        const eval_options e = fit_eval_options(o, o.reference.empty() ? o.sources[0] : o.reference, o.heldout, r.kld_path);
        const std::vector<eval_candidate> cands = {{r.build_path, false, nullptr}};
        std::vector<eval_report> reps;
        fprintf(out, "reap fit: eval %s against the reference's rows\n", r.build_path.c_str());
        if (!run_eval_candidates(e, cands, reps, err)) return false;
        if (!util::write_file_durably(r.eval_path, eval_candidates_json(cands, reps) + "\n", err) ||
            !fit_mark_stage(j, "eval", r.eval_path, err)) {
            return false;
        }
        rep = reps[0];
    }
    r.file_kld = rep.overall.kld_mean;
    r.file_top1 = rep.overall.argmax_agree;
    for (const auto & f : rep.candidate_files) r.file_bytes += f.bytes;
    const double mask = r.scores[*r.winner]->kld;
    if (std::fabs(r.file_kld - mask) > std::max(k_fit_mask_file_abs, k_fit_mask_file_rel * mask)) {
        char buf[320];
        const bool written = r.space[*r.winner].written;
        snprintf(buf, sizeof(buf), "the written build scores KLD %.6f, its %s scored %.6f: more apart than %.0f%% (or %.0e): "
                 "%s; nothing more is written", r.file_kld, written ? "measured candidate file" : "mask", mask,
                 100 * k_fit_mask_file_rel, k_fit_mask_file_abs,
                 written ? "the same plan wrote another file" : "the mask does not stand for the file");
        err = buf;
        r.differs = true;
        return false;
    }
    return true;
}

// reap report's card (DIR/card) with the search as a section, and DIR/fit.json.
bool card_stage(const fit_options & o, fit_journal & j, fit_result & r, FILE * out, std::string & err) {
    r.card_dir = o.out_dir + "/card";
    r.fit_json = o.out_dir + "/fit.json";
    report::report_options ro;
    ro.source = r.space[*r.winner].source_path;
    ro.plan = r.plan_path;
    ro.pruned = r.build_path;
    ro.saliency = r.saliency_path;
    ro.evals = {r.eval_path};
    ro.imatrix = o.imatrix;   // the audit of an IQ down type needs the imatrix prune was given
    ro.out_dir = r.card_dir;
    ro.force = true;   // the card of this DIR: fit's own
    ro.tool_version = o.tool_version;
    ro.extra_section = fit_card_section(o, r);
    ro.extra_figures = {{"fit-search.svg", fit_card_figure(r)}};
    report::report_result rr;
    if (!report::write_report(ro, rr, err)) {
        r.differs = rr.differs;   // the card's audit found the build is not the source cut by the plan: exit 1, as verify's
        return false;
    }
    fprintf(out, "reap fit: card %s/README.md\n", r.card_dir.c_str());
    return util::write_file_durably(r.fit_json, fit_record_text(make_fit_record(o, r)), err) &&
           fit_mark_stage(j, "card", r.fit_json, err);
}

} // namespace

bool build_winner(const fit_options & o, fit_journal & j, const std::string & saliency, const std::string & kld, fit_result & r,
                  FILE * out, std::string & err) {
    (void) saliency;
    (void) kld;
    return write_plan_stage(o, j, r, err) && prune_stage(o, j, r, out, err) && verify_stage(o, j, r, out, err) &&
           eval_stage(o, j, r, out, err) && card_stage(o, j, r, out, err);
}

} // namespace reap

// reap fit --methods: the criterion as an axis of the search. Before the
// search, each method's plan at the budget (the first source, every channel
// kept) is scored by mask against the reference's rows; the method of the
// lowest KLD ranks the whole search, and the card names it with every score.
// The calibration serves every method that needs one; aimer ranks with
// DIR/scores.gguf, reap score's weights archive of the calibrated model (one
// read of its expert pool, no tokens). Both the scores file and the method
// scores (DIR/methods.json) are journalled: a resumed fit redoes neither.
#include "llama/fit_stages.h"

#include "llama/eval.h"
#include "plan/sweep.h"
#include "saliency/archive.h"
#include "saliency/weight_scores.h"
#include "util/path.h"
#include "util/publish.h"
#include "util/sha256.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>

namespace reap {

namespace pl = reap::planner;

namespace {

// DIR/scores.gguf: AIMER of the calibrated model's experts (reap score), once.
bool weights_stage(const fit_options & o, fit_journal & j, std::string & path, FILE * out, std::string & err) {
    path = o.out_dir + "/scores.gguf";
    if (fit_stage_holds(j, "score", path)) {
        fprintf(out, "reap fit: score: done earlier (%s)\n", path.c_str());
        return true;
    }
    const std::string model = o.reference.empty() ? o.sources[0] : o.reference;
    fprintf(out, "reap fit: score %s's weights (AIMER, no tokens) -> %s\n", model.c_str(), path.c_str());
    gguf::model m;
    saliency::archive a;
    saliency::weight_score_report rep;
    if (!gguf::open_model(model, m, err) || !saliency::score_weights(m, {}, a, rep, err)) {
        err = model + ": " + err;
        return false;
    }
    a.provenance.set_string("reap.saliency.score_tool", "reap fit " + o.tool_version);
    return saliency::write_archive(a, path, err, /*force=*/true) && fit_mark_stage(j, "score", path, err);
}

// One method's plan at the budget on the first source, scored by mask.
bool score_method(const fit_options & o, pl::method m, const std::string & archive, const std::string & kld, fit_method_score & s,
                  std::string & err) {
    pl::rank_options ro = o.rank;
    ro.how = m;
    pl::ranked_model rm;
    std::string sha;
    if (!pl::open_ranked_model(o.sources[0], archive, ro, true, rm, err) || !util::sha256_file(archive, sha, err)) return false;
    pl::source_plans_request req;
    req.saliency = archive;
    req.tool_version = o.tool_version;
    req.sizes.push_back({pl::size_kind::budget, o.budget_text, 0, 0, o.budget});
    std::vector<pl::sweep_point> pts;
    if (!pl::plan_source_points(req, rm, sha, pts, err)) return false;
    if (pts.empty()) {
        err = "--methods " + std::string(pl::method_name(m)) + ": no plan at the budget";
        return false;
    }
    const eval_options e = fit_eval_options(o, o.sources[0], o.heldout, kld);
    std::vector<eval_report> reps;
    const std::string label = std::string(pl::method_name(m)) + " N=" + std::to_string(pts[0].n_keep);
    if (!run_eval_candidates(e, {{label, true, &pts[0].p}}, reps, err)) return false;
    s.method = pl::method_name(m);
    s.archive = archive;
    s.n_keep = pts[0].n_keep;
    s.bytes = pts[0].bytes;
    s.score = {reps[0].overall.kld_mean, {reps[0].kld_half[0], reps[0].kld_half[1]}, reps[0].overall.argmax_agree};
    return true;
}

// The lowest KLD (ties to the earlier method), the runner-up and the
// split-half noise of their difference (fit_search's rule).
void choose(fit_methods_doc & d) {
    d.chosen = 0;
    for (size_t i = 1; i < d.scores.size(); ++i) {
        if (d.scores[i].score.kld < d.scores[d.chosen].score.kld) d.chosen = i;
    }
    d.runner_up.reset();
    for (size_t i = 0; i < d.scores.size(); ++i) {
        if (i != d.chosen && (!d.runner_up || d.scores[i].score.kld < d.scores[*d.runner_up].score.kld)) d.runner_up = i;
    }
    d.noise = 0;
    if (d.runner_up) {
        const pl::fit_score & b = d.scores[d.chosen].score, & r = d.scores[*d.runner_up].score;
        d.noise = std::fabs((r.kld_half[0] - b.kld_half[0]) - (r.kld_half[1] - b.kld_half[1])) / 2;
    }
}

}  // namespace

bool method_stage(const fit_options & o, fit_journal & j, const std::string & kld, fit_options & chosen, std::string & saliency,
                  fit_result & r, FILE * out, std::string & err) {
    chosen = o;
    if (o.methods.empty()) return true;
    saliency::archive calib;
    if (!saliency::read_archive(saliency, calib, err)) return false;
    // each method's archive, decided once: the calibration where it holds the
    // method's statistic, else the weights archive (reap score of the model)
    std::string weights;
    saliency::archive scores;
    const bool aimer = std::find(o.methods.begin(), o.methods.end(), pl::method::aimer) != o.methods.end();
    if (aimer && calib.metrics != saliency::metric_set::weights &&
        (!weights_stage(o, j, weights, out, err) || !saliency::read_archive(weights, scores, err))) {
        return false;
    }
    std::vector<std::string> archive_of;
    for (pl::method m : o.methods) {
        std::string why, why_weights;
        if (pl::method_fits(m, calib, why)) {
            archive_of.push_back(saliency);
        } else if (!weights.empty() && pl::method_fits(m, scores, why_weights)) {
            archive_of.push_back(weights);
        } else {
            err = saliency + ": " + why;
            return false;
        }
    }
    const std::string path = o.out_dir + "/methods.json";
    fit_methods_doc d;
    if (fit_stage_holds(j, "methods", path)) {
        fprintf(out, "reap fit: methods: done earlier (%s)\n", path.c_str());
        if (!read_fit_methods(path, d, err)) return false;
    } else {
        for (size_t i = 0; i < o.methods.size(); ++i) {
            const pl::method m = o.methods[i];
            fit_method_score s;
            fprintf(out, "reap fit: method %s at the budget\n", pl::method_name(m));
            if (!score_method(o, m, archive_of[i], kld, s, err)) return false;
            fprintf(out, "  %-10s N %4" PRId64 "  KLD %.6f (halves %.6f %.6f) top-1 %.3f%%\n", s.method.c_str(), s.n_keep, s.score.kld,
                    s.score.kld_half[0], s.score.kld_half[1], 100 * s.score.top1);
            d.scores.push_back(std::move(s));
        }
        choose(d);
        if (!util::write_file_durably(path, fit_methods_text(d), err) || !fit_mark_stage(j, "methods", path, err)) return false;
    }
    if (d.scores.size() != o.methods.size()) {
        err = path + " holds " + std::to_string(d.scores.size()) + " methods, this run asks " + std::to_string(o.methods.size());
        return false;
    }
    const fit_method_score & best = d.scores[d.chosen];
    pl::parse_method(best.method, chosen.rank.how);
    chosen.method_given = true;
    chosen.methods.clear();
    saliency = best.archive;
    if (d.runner_up) {
        const double gap = d.scores[*d.runner_up].score.kld - best.score.kld;
        fprintf(out, "reap fit: method %s ranks the search: KLD %.6f, %.6f below %s%s\n", best.method.c_str(), best.score.kld, gap,
                d.scores[*d.runner_up].method.c_str(), gap > d.noise ? "" : " (within the split-half noise: the text does not tell them apart)");
    }
    r.methods = std::move(d);
    return true;
}

}  // namespace reap

// reap sweep, the library half (see sweep.h): plan every size, score every
// plan by masking, and describe the result as the sweep record and a table.
#include "llama/sweep.h"

#include "plan/provenance.h"
#include "report/sweep_chart.h"
#include "saliency/archive.h"
#include "util/number_format.h"
#include "util/sha256.h"
#include "util/strings.h"

#include <cinttypes>

namespace reap {

namespace pl = reap::planner;

namespace {

const char * kind_name(pl::size_kind k) {
    return k == pl::size_kind::keep ? "keep" : k == pl::size_kind::ratio ? "ratio" : "budget";
}

// The plans of every size, each with the provenance reap plan records.
bool plan_points(const sweep_options & o, sweep_result & r, const std::string & archive_sha, std::string & err) {
    pl::size_context sctx;
    sctx.model = &r.rm.model;
    sctx.layout = &r.rm.layout;
    sctx.prune.version = o.tool_version;
    sctx.prune.plan_sha256 = std::string(64, '0');  // the real hash has the same length
    sctx.write.split_max_bytes = o.split_max_bytes;
    if (!pl::plan_sweep(r.rm, sctx, o.sizes, r.points, err)) return false;
    const std::string model_sha = model_header_sha256(r.rm.model);
    for (auto & pt : r.points) {
        pt.p.model_sha256 = model_sha;
        pl::plan_origin origin;
        origin.tool = "reap sweep";
        origin.saliency_path = o.saliency;
        origin.saliency_sha256 = archive_sha;
        origin.metric_set = saliency::metric_set_name(r.rm.archive.metrics);
        origin.request.size = pt.req;
        origin.request.split_max_bytes = o.split_max_bytes;
        origin.predicted_bytes = pt.bytes;
        origin.predicted_shards = pt.n_shards;
        pl::record_origin(pt.p, origin, o.tool_version.c_str());
    }
    return true;
}

void fill_record(const sweep_options & o, const std::string & archive_sha, sweep_result & r) {
    sweep_record & s = r.record;
    const moe::layout & lay = r.rm.layout;
    const std::vector<eval_report> & reps = r.reports;
    s.tool = "reap sweep " + o.tool_version;
    s.model.path = o.eval.base_path;
    s.model.arch = lay.arch;
    s.model.header_sha256 = model_header_sha256(r.rm.model);
    s.model.n_expert = lay.n_expert;
    s.model.n_expert_used = lay.n_expert_used;
    s.model.moe_layers = lay.moe_layers.size();
    s.model.file_bytes = r.rm.model.file_bytes();
    s.saliency.file = o.saliency;
    s.saliency.sha256 = archive_sha;
    s.saliency.method = pl::method_name(r.rm.rank.opts.how);
    s.saliency.domains = r.rm.rank.domains;
    s.input.file = o.eval.input_path;
    s.input.n_ctx = reps.empty() ? 0 : reps[0].n_ctx;
    s.input.n_windows = reps.empty() ? 0 : reps[0].n_windows;
    s.input.corpus = !reps.empty() && reps[0].corpus;
    // a model with MTP blocks: each cut's MTP draft acceptance (every cut is a mask of the base: measured whenever the base's is)
    const bool mtp = !reps.empty() && reps[0].mtp_blocks > 0 && reps[0].mtp_base;
    if (mtp) s.mtp_base_acceptance = reps[0].mtp_base->rate();
    for (size_t i = 0; i < r.points.size() && i < reps.size(); ++i) {
        const pl::sweep_point & pt = r.points[i];
        sweep_record_point q;
        q.n_keep = pt.n_keep;
        q.request_kind = kind_name(pt.req.kind);
        q.request_text = pt.req.text;
        q.removed_fraction = (double) (lay.n_expert - pt.n_keep) / (double) lay.n_expert;
        q.predicted_bytes = pt.bytes;
        q.predicted_shards = pt.n_shards;
        q.saliency_share = pt.share;
        q.safety_margin = pt.margin;
        q.safety_margin_median = pt.margin_median;
        if (!o.plans_dir.empty()) q.plan = sweep_plan_path(o.plans_dir, pt.n_keep);
        q.overall = reps[i].overall;
        q.domains = reps[i].domains;
        if (mtp && reps[i].mtp_pruned) q.mtp_acceptance = reps[i].mtp_pruned->rate();
        s.points.push_back(q);
    }
}

} // namespace

std::string sweep_plan_path(const std::string & plans_dir, int64_t n_keep) {
    return plans_dir + "/keep-" + std::to_string(n_keep) + ".json";
}

bool plan_sweep_points(const sweep_options & o, sweep_result & r, std::string & err) {
    if (!pl::open_ranked_model(o.eval.base_path, o.saliency, o.rank, o.method_given, r.rm, err)) return false;
    return util::sha256_file(o.saliency, r.archive_sha256, err) && plan_points(o, r, r.archive_sha256, err);
}

bool score_sweep(const sweep_options & o, sweep_result & r, std::string & err) {
    std::vector<eval_candidate> cands;
    for (const auto & pt : r.points) {
        eval_candidate c;
        c.path = "keep " + std::to_string(pt.n_keep);
        c.mask = true;
        c.in_memory = &pt.p;
        cands.push_back(c);
    }
    if (!run_eval_candidates(o.eval, cands, r.reports, err)) return false;
    fill_record(o, r.archive_sha256, r);
    return true;
}

util::chart sweep_result_chart(const sweep_result & r) {
    report::sweep_chart_input in = report::sweep_chart_input_of(r.record);
    in.title = r.record.model.arch + ": cost of each cut (" + r.record.saliency.method + ", " + util::join(r.record.saliency.domains, ",") + ")";
    return report::sweep_chart(in);
}

void print_sweep(FILE * out, const sweep_options & o, const sweep_result & r) {
    const sweep_record & s = r.record;
    const eval_report * first = r.reports.empty() ? nullptr : &r.reports[0];
    fprintf(out, "reap sweep: %s (%s, %" PRIu64 " MoE layers, %" PRId64 " experts, top-%" PRId64 "), %s source\n", s.model.path.c_str(),
            s.model.arch.c_str(), s.model.moe_layers, s.model.n_expert, s.model.n_expert_used, util::format_size(s.model.file_bytes).c_str());
    fprintf(out, "  saliency %s: method %s, domains %s; scored on %s: %zu tokens in %zu windows, base PPL %.4f\n\n", o.saliency.c_str(),
            s.saliency.method.c_str(), util::join(s.saliency.domains, ",").c_str(), s.input.file.c_str(), first ? first->overall.n_tokens : 0,
            first ? first->n_windows : 0, first ? first->overall.ppl_base : 0.0);
    fprintf(out, "  %6s %8s %22s %9s %7s %10s %10s %10s %8s %10s\n", "N", "removed", "predicted size", "saliency", "margin", "KLD mean",
            "median", "p99", "top-1", "PPL ratio");
    for (const auto & q : s.points) {
        const eval_metrics & m = q.overall;
        const std::string margin = q.safety_margin > 0 ? std::to_string(q.safety_margin) : "-";
        fprintf(out, "  %6" PRId64 " %7.1f%% %22s %8.2f%% %7s %10.6f %10.6f %10.6f %7.3f%% %10.5f\n", q.n_keep, 100.0 * q.removed_fraction,
                util::format_size(q.predicted_bytes).c_str(), 100.0 * q.saliency_share, margin.c_str(), m.kld_mean, m.kld_median, m.kld_p99,
                100.0 * m.argmax_agree, m.ppl_ratio);
    }
    fprintf(out, "  (margin: the best rank, 1 = most salient, any removed expert holds in any domain, in any layer; each\n"
                 "   plan's receipts in full: --plans-dir)\n");
    if (!s.points.empty() && !s.points[0].domains.empty()) {
        fprintf(out, "\n  per domain: KLD mean / top-1\n  %6s", "N");
        for (const auto & d : s.points[0].domains) fprintf(out, " %20s", d.first.c_str());
        fprintf(out, "\n");
        for (const auto & q : s.points) {
            fprintf(out, "  %6" PRId64, q.n_keep);
            for (const auto & d : q.domains) fprintf(out, "   %9.5f /%6.2f%%", d.second.kld_mean, 100.0 * d.second.argmax_agree);
            fprintf(out, "\n");
        }
    }
    for (const auto & pt : r.points) {
        if (!pt.note.empty()) fprintf(out, "  note (N = %" PRId64 "): %s\n", pt.n_keep, pt.note.c_str());
    }
    if (s.mtp_base_acceptance) {
        fprintf(out, "\n  MTP draft acceptance (greedy, first draft token): base %.3f%%", 100.0 * *s.mtp_base_acceptance);
        for (const auto & q : s.points) fprintf(out, ", N=%" PRId64 " %.3f%%", q.n_keep, q.mtp_acceptance ? 100.0 * *q.mtp_acceptance : -100.0);
        fprintf(out, "\n");
    }
}

} // namespace reap

// reap plan as a library call (choose.h): the inputs opened and ranked, N
// chosen from --keep / --ratio / --budget, the plan made, sized and given its
// provenance and receipts.
#include "plan/choose.h"
#include "plan/provenance.h"
#include "plan/width_planner.h"

#include "util/file.h"
#include "util/sha256.h"

namespace reap::planner {

using util::error_kind;
using util::fail_with;

namespace {

// The model, the output rule for -o, the archive and the ranking.
bool open_inputs(const plan_request & req, ranked_model & rm, util::error & err) {
    std::string msg;
    if (!gguf::open_model(req.model, rm.model, msg)) return fail_with(err, error_kind::input, msg);
    if (!req.output.empty()) {   // the output rule (util/file.h)
        std::vector<std::pair<std::string, std::string>> inputs = {{"saliency archive", req.saliency}};
        for (const auto & sh : rm.model.shards) inputs.emplace_back("model file", sh.path);
        if (!util::check_output(req.output, inputs, req.force, msg)) return fail_with(err, error_kind::output, msg);
    }
    if (!rank_opened_model(req.model, req.saliency, req.rank, req.method_given, rm, msg)) {
        return fail_with(err, error_kind::input, msg);
    }
    return true;
}

// What reap prune will write, for sizing: its stamp and its split.
size_context sizing_of(const plan_request & req, const ranked_model & rm) {
    size_context sctx;
    sctx.model = &rm.model;
    sctx.layout = &rm.layout;
    sctx.prune.stamp = req.stamp;
    sctx.prune.version = req.version;
    sctx.prune.plan_sha256 = std::string(64, '0');   // the real hash has the same length
    sctx.write.split_max_bytes = req.split_max_bytes;
    sctx.write.split_max_tensors = req.split_max_tensors;
    return sctx;
}

// N from --keep, --ratio or --budget, narrowed by the count rule; the size
// table with --budget or --dry-run.
bool choose_n(const plan_request & req, const size_context & sctx, plan_choice & c, util::error & err) {
    const plan_model_facts & facts = c.rm.facts;
    const count_rule & rule = req.counts;
    std::string msg;
    if (req.keep < 0 && req.ratio < 0 && req.budget_text.empty() && req.width > 0) {
        c.n_keep = facts.n_expert;   // --width alone: every expert, each cut in width
    } else if (req.keep >= 0) {
        if (!keep_allowed(facts, req.keep, msg)) return fail_with(err, error_kind::usage, "--keep " + std::to_string(req.keep) + ": " + msg);
        if (rule.any() && !rule.allows(req.keep)) {
            return fail_with(err, error_kind::usage, "--keep " + std::to_string(req.keep) + " is not " + rule.describe());
        }
        c.n_keep = req.keep;
    } else if (req.ratio >= 0) {
        if (!keep_from_ratio(req.ratio, facts, c.n_keep, c.note, msg)) return fail_with(err, error_kind::usage, msg);
        if (rule.any() && !rule.allows(c.n_keep)) {
            const int64_t was = c.n_keep;
            if (!largest_allowed(facts, rule, was, c.n_keep, msg)) return fail_with(err, error_kind::usage, "--ratio: " + msg);
            c.note += (c.note.empty() ? "" : "; ") + std::string("N = ") + std::to_string(was) + " rounded down to " +
                      std::to_string(c.n_keep) + ", " + rule.describe();
        }
    } else {
        const bool fits = rule.any() ? fit_budget_rule(c.rm.rank, facts, sctx, req.budget, rule, req.dry_run, c.n_keep, c.table, msg)
                                     : fit_budget(c.rm.rank, facts, sctx, req.budget, req.dry_run, c.n_keep, c.table, msg);
        if (!fits) return fail_with(err, error_kind::usage, "--budget " + req.budget_text + ": " + msg);
    }
    if (req.dry_run && c.table.empty()) {
        // the table around the chosen N, for --keep / --ratio too
        const bool ok = rule.any() ? size_table_rule(c.rm.rank, facts, sctx, c.n_keep, rule, c.table, msg)
                                   : size_table(c.rm.rank, facts, sctx, c.n_keep, c.table, msg);
        if (!ok) return fail_with(err, error_kind::input, msg);
    }
    return true;
}

// --width K: the model's experts can be cut to K (width facts, K against the
// down type's blocks), and the archive ranks channels (sweep.h, setup_width).
bool check_width(const plan_request & req, const ranked_model & rm, width_setup & w, util::error & err) {
    if (req.width <= 0) return true;
    std::optional<channel_score> by;
    if (req.channel_score_given) by = req.channel_by;
    return setup_width(rm, req.saliency, req.down_type, by, {req.width}, "--width " + std::to_string(req.width), w, err);
}

} // namespace

bool choose_plan(const plan_request & req, plan_choice & c, util::error & err) {
    if (!open_inputs(req, c.rm, err)) return false;
    width_setup w;
    if (!check_width(req, c.rm, w, err)) return false;
    size_context sctx = sizing_of(req, c.rm);
    if (req.width > 0) {   // every size, --budget's search included, is that of the width-cut file
        sctx.width = w.cut;
        sctx.width.keep = req.width;
    }
    if (!choose_n(req, sctx, c, err)) return false;
    std::string msg;
    if (!make_plan(c.rm.rank, c.rm.facts, c.n_keep, c.p, msg)) return fail_with(err, error_kind::input, msg);
    if (req.width > 0 && !cut_plan_width(w, req.width, c.p, msg)) return fail_with(err, error_kind::input, msg);
    stamp_plan_model(c.p, c.rm.model, c.rm.identity);
    if (!pruned_bytes(sctx, c.p, c.bytes, c.n_shards, msg)) return fail_with(err, error_kind::input, msg);
    if (!add_plan_provenance(req, c.rm.archive, c.bytes, c.n_shards, c.p, msg)) return fail_with(err, error_kind::input, msg);
    if (!plan_receipts(c.rm.rank, c.p, c.rc, msg)) return fail_with(err, error_kind::input, msg);
    return true;
}

// Plan provenance: what the request was, through the one writer plan and sweep
// share (provenance.h, record_origin).
bool add_plan_provenance(const plan_request & req, const saliency::archive & arch, uint64_t bytes, uint32_t n_shards,
                         plan & p, std::string & err) {
    plan_origin o;
    o.tool = "reap plan";
    o.saliency_path = req.saliency;
    if (!util::sha256_file(req.saliency, o.saliency_sha256, err)) return false;
    o.metric_set = saliency::metric_set_name(arch.metrics);
    if (req.keep >= 0) o.request.size = {size_kind::keep, std::to_string(req.keep), req.keep};
    if (req.ratio >= 0) o.request.size = {size_kind::ratio, "", 0, req.ratio};
    if (!req.budget_text.empty()) o.request.size = {size_kind::budget, req.budget_text, 0, 0, req.budget};
    o.request.split_max_bytes   = req.split_max_bytes;
    o.request.split_max_tensors = req.split_max_tensors;
    o.request.stamp             = req.stamp;
    o.request.multiple_of       = req.counts.multiple_of;
    o.request.fused_kernel      = req.counts.fused;
    o.predicted_bytes  = bytes;
    o.predicted_shards = n_shards;
    record_origin(p, o, req.version.c_str());
    return true;
}

} // namespace reap::planner

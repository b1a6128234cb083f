// The stages of reap prune as a library (run.h): check everything, decide
// every path, then write the model, its SHA256SUMS lines and the sliced
// imatrix so that they appear together.
#include "prune/run.h"

#include "moe/width.h"
#include "plan/provenance.h"
#include "prune/prune.h"
#include "util/file.h"
#include "util/path.h"

#include <algorithm>

namespace reap::prune {

using util::error_kind;
using util::fail_with;

namespace {

// Width plans: the down tensors are requantised while the output is laid out,
// so the imatrix (sliced to the kept channels) is read before that, and a
// down type that needs one without --imatrix is a usage error naming it.
bool read_width_importance(prune_job & job, util::error & err) {
    const prune_request & req = job.req;
    if (req.imatrix.empty()) {
        const gguf::tensor_info * t = cut_down_needing_importance(job.model, job.lay, job.width);
        if (!t) return true;
        const gguf::tensor_type type = width_down_type(*t, job.width);
        return fail_with(err, error_kind::usage,
                         std::string(req.down_type.empty() ? "'" + t->name + "' is " : "--down-type ") + gguf::type_name(type) +
                             ": quantising the cut down tensors to " + gguf::type_name(type) +
                             " needs an importance matrix: give the source model's llama-imatrix file with --imatrix");
    }
    std::string msg;
    if (!prepare_imatrix_slice(req.imatrix, job.model, job.lay, job.p, job.islice, msg)) {
        return fail_with(err, error_kind::input, msg);
    }
    const imatrix_slice & s = job.islice;
    if (!check_shared_down_entry(req.imatrix, s.file, job.model, job.lay, job.width, msg)) return fail_with(err, error_kind::input, msg);
    job.width.importance = [&s](const std::string & down, size_t k, std::vector<float> & w, std::string & e) {
        return kept_importance(s, down, k, w, e);
    };
    return true;
}

// The model, the plan, and the plan checked against the model.
bool read_inputs(prune_job & job, util::error & err) {
    std::string msg;
    if (!gguf::open_model(job.req.model, job.model, msg)) return fail_with(err, error_kind::input, msg);
    if (!read_plan(job.req.plan, job.p, msg)) return fail_with(err, error_kind::input, msg);
    // a width plan sized for a requantised down projection is pruned with that
    // type: its predicted size (the budget it was planned for) assumes it
    planner::plan_provenance sized;
    if (!planner::read_plan_provenance(job.p.provenance, job.req.plan, sized, msg)) return fail_with(err, error_kind::input, msg);
    if (!sized.down_type.empty()) {
        const gguf::type_info * want = gguf::find_type(sized.down_type);
        if (!want) return fail_with(err, error_kind::input, job.req.plan + ": provenance.down_type: unknown type '" + sized.down_type + "'");
        if (job.req.down_type.empty()) {
            job.req.down_type = want->name;
        } else if (gguf::find_type(job.req.down_type) != want) {
            return fail_with(err, error_kind::usage, "--down-type " + job.req.down_type + ", but " + job.req.plan + " was sized for down " +
                                                         "type " + want->name + " (its predicted size assumes it): leave --down-type out, "
                                                         "or plan again with --down-type " + job.req.down_type);
        }
    }
    const prune_request & req = job.req;
    if (!model_layout(job.model, job.lay, msg)) return fail_with(err, error_kind::input, req.model + ": " + msg);
    if (!req.down_type.empty()) {
        const gguf::type_info * ti = gguf::find_type(req.down_type);
        if (!ti) return fail_with(err, error_kind::usage, "--down-type: unknown type '" + req.down_type + "'");
        if (!job.p.has_width()) {
            return fail_with(err, error_kind::usage, "--down-type: " + req.plan + " keeps every channel (no width): nothing is requantised");
        }
        job.width.down_type = ti->type;
    }
    if (!validate_plan(job.p, prune_facts(job.model, job.lay, job.p, job.width), msg)) {
        return fail_with(err, error_kind::input, req.plan + " does not fit " + req.model + ": " + msg);
    }
    if (!check_plan_model(job.p, job.model, req.allow_other_model, req.plan, req.model, job.warning, job.other_model, msg)) {
        return fail_with(err, error_kind::input, msg);
    }
    return job.p.has_width() ? read_width_importance(job, err) : true;
}

// The output spec and where each shard goes.
bool lay_out_output(prune_job & job, util::error & err) {
    const prune_request & req = job.req;
    std::string msg;
    prune_options popts;
    popts.stamp = req.stamp;
    if (job.other_model) popts.other_model = job.p.model_sha256.empty() ? job.p.router_sha256 : job.p.model_sha256;
    popts.version = req.version;
    if (req.stamp && !plan_file_sha256(req.plan, popts.plan_sha256, msg)) return fail_with(err, error_kind::input, msg);
    if (!make_pruned_spec(job.model, job.lay, job.p, popts, job.width, job.spec, msg)) return fail_with(err, error_kind::input, msg);
    job.wopts.force = req.force;
    job.wopts.sync = req.sync;
    job.wopts.split_max_bytes = req.split_max_bytes;
    job.wopts.split_max_tensors = req.split_max_tensors;
    job.wopts.copy_file_range = req.copy_file_range;
    if (!gguf::layout_output(job.spec, job.wopts, req.output, job.shards, msg)) return fail_with(err, error_kind::output, msg);
    for (const auto & r : job.lay.roles) job.n_sliced += r.slice != moe::slice_kind::none;
    for (const auto & sh : job.shards) job.out_bytes += sh.file_bytes;
    return true;
}

// The output rule (util/file.h): no output (shard or SHA256SUMS) is an input
// (the imatrix included), nor another output.
bool check_outputs(prune_job & job, util::error & err) {
    const prune_request & req = job.req;
    std::string msg;
    job.inputs = {{"plan", req.plan}};
    for (const auto & sh : job.model.shards) job.inputs.emplace_back("model file", sh.path);
    if (!req.imatrix.empty()) job.inputs.emplace_back("imatrix", req.imatrix);
    job.sums_path = sums_path_for(job.shards[0].path);
    for (const auto & sh : job.shards) {
        if (!util::check_not_input(sh.path, job.inputs, msg)) return fail_with(err, error_kind::output, msg);
        // SHA256SUMS is the folder's checksum file (updated by every prune into
        // it, --no-sums or not): a model by that name would be rewritten as one
        if (util::base_name(sh.path) == util::base_name(job.sums_path)) {
            return fail_with(err, error_kind::output,
                             "refusing to write the model as " + sh.path +
                                 ": SHA256SUMS is the name of the checksum file of its folder (choose another output name)");
        }
    }
    if (req.sums && !util::check_not_input(job.sums_path, job.inputs, msg)) return fail_with(err, error_kind::output, msg);
    if (req.sums) job.wopts.sums_path = job.sums_path;
    return true;
}

} // namespace

bool prepare_prune(const prune_request & req, prune_job & job, util::error & err) {
    job.req = req;
    job.started = std::chrono::steady_clock::now();
    return read_inputs(job, err) && lay_out_output(job, err) && check_outputs(job, err);
}

// The sliced imatrix: checked, and its coverage judged, before anything is written.
bool prepare_imatrix(prune_job & job, util::error & err) {
    const prune_request & req = job.req;
    if (req.imatrix.empty()) return true;
    std::string msg;
    // (a width plan's slice was read with the inputs: its down importance is needed to lay out the output)
    if (job.islice.source_path.empty() && !prepare_imatrix_slice(req.imatrix, job.model, job.lay, job.p, job.islice, msg)) {
        return fail_with(err, error_kind::input, msg);
    }
    job.imatrix_out = req.imatrix_out.empty() ? default_imatrix_out(req.output, job.islice.file.legacy) : req.imatrix_out;
    // the output rule: not an input (the imatrix itself included), nor another output
    auto imatrix_inputs = job.inputs;
    for (const auto & sh : job.shards) imatrix_inputs.emplace_back("model output", sh.path);
    // the folder's checksum file is the run's own bookkeeping, --no-sums or not: never the slice's name
    imatrix_inputs.emplace_back("checksum file", job.sums_path);
    if (util::base_name(job.imatrix_out) == util::base_name(job.sums_path)) {
        return fail_with(err, error_kind::output, "refusing to write the sliced imatrix as " + job.imatrix_out +
                                                      ": SHA256SUMS is the name of a folder's checksum file (give --imatrix-out another name)");
    }
    // (a dry run writes nothing, so an existing file is only reported)
    if (!util::check_output(job.imatrix_out, imatrix_inputs, req.force || req.dry_run, msg)) {
        return fail_with(err, error_kind::output, msg);
    }
    if (!job.islice.coverage.counts_known && req.require_coverage > 1) {
        return fail_with(err, error_kind::usage,
                         "--require-coverage " + std::to_string(req.require_coverage) + ": " + req.imatrix +
                             " is in the legacy format, which records no per-expert counts (only whether an expert saw "
                             "any token): at most 1 can be checked");
    }
    if (req.require_coverage > 0) job.below_required = job.islice.coverage.below(req.require_coverage);
    return true;
}

bool write_prune(prune_job & job, prune_written & out, util::error & err) {
    std::string msg;
    // The sliced imatrix is written first but not published: it appears with the
    // model and its SHA256SUMS lines in one journal, in whatever folder it
    // goes, and a write that fails (a full disk) leaves neither. A killed
    // earlier run's journal is completed first, before this run's imatrix
    // clears that run's temps (the journal may name one of them).
    std::vector<util::durable_file> imatrix_staged;
    std::vector<std::string> imatrix_sha256;   // listed in SHA256SUMS when beside the model
    if (!job.imatrix_out.empty()) {
        // the model folder's journal names it (in another folder: a declared output)
        util::declare_output_elsewhere(job.imatrix_out);
        if (util::recover_dir(util::dir_of(job.shards[0].path), msg) < 0) return fail_with(err, error_kind::output, msg);
        if (!write_imatrix_slice(job.islice, job.imatrix_out, job.req.force, job.req.sync, msg, &imatrix_staged,
                                 &imatrix_sha256)) {
            return fail_with(err, error_kind::output, msg);
        }
        for (auto & f : imatrix_staged) job.wopts.publish_with.push_back(&f);
        job.wopts.publish_with_sha256 = imatrix_sha256;
    }
    // the shards, their SHA256SUMS lines and the imatrix appear together (hashed as written)
    out.files.clear();
    const bool ok = gguf::write_output(job.spec, job.wopts, job.req.output, out.files, msg);
    job.wopts.publish_with.clear();   // the staged files end here
    job.wopts.publish_with_sha256.clear();
    if (!ok) return fail_with(err, error_kind::output, msg);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - job.started).count();
    return true;
}

} // namespace reap::prune

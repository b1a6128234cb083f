// reap verify as one library call (verify_run.h): the plan against the source,
// the imatrix slice, the folder's shared lock, then verify_pruned.
#include "prune/verify_run.h"

#include "gguf/gguf.h"
#include "plan/plan.h"
#include "plan/provenance.h"
#include "prune/imatrix_slice.h"
#include "util/path.h"
#include "util/publish.h"

namespace reap::prune {

using util::error_kind;
using util::fail_with;

namespace {

// The plan's prediction holds for the build it describes: the same shard count
// and reap.* keys as the plan was sized with (a width plan pruned with another
// down type than it was sized for is over or under its budget: not the build).
bool check_predicted_size(const plan & p, const verify_request & req, verify_report & report, util::error & err) {
    planner::plan_provenance sized;
    std::string msg;
    if (!planner::read_plan_provenance(p.provenance, req.plan, sized, msg)) return fail_with(err, error_kind::input, msg);
    if (!sized.predicted_bytes || sized.predicted_shards.value_or(1) != report.n_shards || !report.stamped || !sized.stamp.value_or(true)) {
        return true;
    }
    gguf::model out;
    if (!gguf::open_model(req.output, out, msg)) return fail_with(err, error_kind::input, msg);
    if (out.file_bytes() != *sized.predicted_bytes) {
        report.differs = true;
        return fail_with(err, error_kind::input,
                         req.output + " is " + std::to_string(out.file_bytes()) + " bytes; " + req.plan + " predicted " +
                             std::to_string(*sized.predicted_bytes) +
                             (sized.down_type.empty() ? std::string() : " with down requantised to " + sized.down_type) +
                             ": not the build the plan was sized for");
    }
    return true;
}

} // namespace

bool run_verify(const verify_request & req, verify_run_result & out, util::error & err) {
    out = verify_run_result{};
    std::string msg;
    gguf::model model;
    plan p;
    if (!gguf::open_model(req.model, model, msg) || !read_plan(req.plan, p, out.plan_sha256, msg) ||
        !check_plan_model(p, model, req.allow_other_model, req.plan, req.model, out.warning, msg)) {
        return fail_with(err, error_kind::input, msg);
    }
    verify_options v;
    v.check_sums = req.check_sums;
    v.sums_path = req.sums;
    v.plan_sha256 = out.plan_sha256;
    imatrix_slice islice;
    if (!req.imatrix.empty()) {
        // (the plan is checked against the model before the slice reads its keep lists)
        moe::layout lay;
        if (!model_layout(model, lay, msg)) return fail_with(err, error_kind::input, msg);
        plan_model_facts facts = p.has_width() ? facts_of(lay, model) : facts_of(lay);
        facts.down_block = 1;   // as verify_pruned: the output's down type is checked tensor by tensor
        if (!validate_plan(p, facts, msg) || !prepare_imatrix_slice(req.imatrix, model, lay, p, islice, msg)) {
            return fail_with(err, error_kind::input, msg);
        }
        v.importance = [&islice](const std::string & down, size_t k, std::vector<float> & w, std::string & e) {
            return kept_importance(islice, down, k, w, e);
        };
    }
    // a whole set: no publish into OUT's folder while it is read
    util::dir_lock reading;
    auto waiting = [&req](const std::string & dir) {
        if (req.on_wait) req.on_wait(dir);
    };
    if (!reading.lock_shared(util::dir_of(req.output), req.publish_wait_s, msg, waiting)) return fail_with(err, error_kind::input, msg);
    if (!verify_pruned(model, p, req.output, v, out.report, msg)) return fail_with(err, error_kind::input, msg);
    // (a plan used for another model, or one without a fingerprint, predicted another file)
    return out.warning.empty() ? check_predicted_size(p, req, out.report, err) : true;
}

} // namespace reap::prune

// The behaviour measures of one run (see behaviour_run.h).
#include "llama/behaviour_run.h"

#include "llama/eval_models.h"

namespace reap {

bool run_behaviour(const behaviour_request & req, const std::vector<eval_candidate> & cands, behaviour_result & out,
                   std::string & err) {
    out = behaviour_result();
    if (req.choice) {
        choice_options c = *req.choice;
        c.base_path = req.eval.base_path;
        c.base_mask_path = req.eval.base_mask_path;
        c.rt = req.eval.rt;
        c.verbose = req.eval.verbose;
        c.progress = req.eval.progress;
        if (!run_choice(c, cands, out.choice.emplace(), err)) return false;
    }
    if (req.needle) {
        needle_options n = *req.needle;
        share_eval_options(n, req.eval, req.seed);
        if (!run_needle(n, cands, out.needle.emplace(), err)) return false;
    }
    if (req.generate) {
        generate_options g = *req.generate;
        share_eval_options(g, req.eval, req.seed);
        if (!run_generate(g, cands, out.generate.emplace(), err)) return false;
    }
    return true;
}

} // namespace reap

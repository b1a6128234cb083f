// reap eval's task modes (eval_flags.h: run_choice_tasks): the checks of the
// options that go with them, the run, and its table or JSON.
#include "cli/eval_flags.h"
#include "util/json.h"

#include <cstdio>

namespace reap::cli {

int run_choice_tasks(eval_params & p, const std::function<int(const std::string &)> & usage_error) {
    const char * flag = reap::choice_format_flag(p.choice.format);
    if (!p.opt.kld_base_path.empty()) return usage_error(std::string(flag) + " scores the models on tasks: no --kld-base");
    if (!p.opt.input_path.empty()) return usage_error(std::string(flag) + " reads its tasks from its own FILE: no -f");
    if (p.do_needle || !p.generate.prompts_path.empty()) {
        return usage_error(std::string(flag) + " runs alone: give --needle / --generate in another run");
    }
    reap::choice_options & o = p.choice;
    if (!p.tasks_limit_given) o.limit = reap::default_tasks_limit(o.format);
    o.base_path = p.opt.base_path;
    o.base_mask_path = p.opt.base_mask_path;
    o.rt = p.opt.rt;
    o.verbose = p.opt.verbose;
    o.progress = p.opt.progress;
    reap::task_document doc;
    std::string err;
    if (!reap::run_choice(o, p.cands, doc.choice.emplace(), err)) return fail("eval", err);
    if (p.json) {
        printf("%s\n", reap::util::json_text(reap::task_document_to_json(doc), 1).c_str());
    } else {
        reap::choice_report_print(stdout, doc.choice->report);
    }
    return 0;
}

} // namespace reap::cli

// reap eval's task modes (eval_flags.h: run_task_modes): the checks of the
// options that go with them, the run, and its table, JSON or answers files.
#include "cli/eval_flags.h"
#include "util/file.h"
#include "util/json.h"
#include "util/output_rule.h"
#include "util/path.h"
#include "util/publish.h"

#include <cinttypes>
#include <cstdio>
#include <sys/stat.h>

namespace reap::cli {

namespace {

// What a task run takes from eval's own options: the base, its mask, the runtime, the log and progress switches.
template <class task_options> void share_run(task_options & o, const eval_params & p) {
    o.base_path = p.opt.base_path;
    o.base_mask_path = p.opt.base_mask_path;
    o.rt = p.opt.rt;
    o.verbose = p.opt.verbose;
    o.progress = p.opt.progress;
}

int run_choice(eval_params & p) {
    reap::choice_options & o = p.choice;
    if (!p.table->given("--tasks-limit")) o.limit = reap::default_tasks_limit(o.format);
    share_run(o, p);
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

// DIR/NAME.json for each model's answers: base.json, then 1-NAME.json, ... (the candidate's file name).
std::vector<std::string> answers_paths(const std::string & dir, const std::vector<reap::answers_doc> & docs) {
    std::vector<std::string> paths;
    for (size_t m = 0; m < docs.size(); ++m) {
        paths.push_back(dir + "/" + (m == 0 ? std::string("base") : std::to_string(m) + "-" + reap::util::base_name(docs[m].model_name)) +
                        ".answers.json");
    }
    return paths;
}

void print_generate(const std::vector<reap::answers_doc> & docs) {
    const reap::gen_settings & s = docs[0].settings;
    printf("tasks: %s, %zu answers a model (%d a task); %s, --max-new %d%s\n", docs[0].tasks_path.c_str(), docs[0].answers.size(),
           s.samples, s.temperature > 0 ? ("--temp " + std::to_string(s.temperature) + " --top-p " + std::to_string(s.top_p) +
                                           " --seed " + std::to_string(s.seed)).c_str() : "greedy",
           s.max_new, s.recheck_cap ? (", --recheck-cap " + std::to_string(s.recheck_cap)).c_str() : "");
    printf("%-40s %9s  %-17s %9s  %s\n", "model", "pass", "95% interval", "cap hits", "recheck: finished/still at cap");
    for (const auto & d : docs) {
        const reap::interval ci = reap::wilson_interval(d.n_pass(), d.answers.size());
        char ci_text[64];
        snprintf(ci_text, sizeof ci_text, "[%.2f, %.2f]%%", 100 * ci.low, 100 * ci.high);
        const double rate = d.answers.empty() ? 0 : (double) d.n_pass() / (double) d.answers.size();
        printf("%-40s %8.2f%%  %-17s %9zu", ((d.masked ? "masked by " : "") + d.model_name).c_str(), 100 * rate, ci_text, d.n_cap_hits());
        if (s.recheck_cap) printf("  %zu/%zu", d.n_rechecked_finished(), d.n_cap_hits() - d.n_rechecked_finished());
        printf("\n");
    }
    if (s.samples == 1 && s.temperature > 0) printf("one sampled attempt a task: these rates carry real variance (give --samples K)\n");
}

int run_generate_tasks(eval_params & p) {
    reap::gen_run_options & o = p.gen;
    o.settings.temperature = p.generate.temperature;
    o.settings.max_new = p.generate.max_new;
    o.settings.seed = p.needle.seed;
    share_run(o, p);
    std::string err;
    std::vector<std::string> paths;
    if (!p.answers_dir.empty()) {   // the output rule, before any model loads
        std::vector<reap::answers_doc> names(p.cands.size() + 1);
        for (size_t i = 0; i < p.cands.size(); ++i) names[i + 1].model_name = p.cands[i].path;
        paths = answers_paths(p.answers_dir, names);
        std::vector<std::pair<std::string, std::string>> inputs = {{"model", o.base_path}, {"tasks", o.tasks_path}, {"mask", o.base_mask_path}};
        for (const auto & c : p.cands) inputs.emplace_back(c.masked() ? "plan" : "pruned model", c.path);
        for (const auto & path : paths) {
            if (!reap::util::check_output(path, inputs, false, err)) return fail("eval", err);
        }
    }
    std::vector<reap::answers_doc> docs;
    if (!reap::run_gen_tasks(o, p.cands, docs, err)) return fail("eval", err);
    if (!paths.empty()) {
        ::mkdir(p.answers_dir.c_str(), 0755);
        for (size_t m = 0; m < docs.size(); ++m) {
            if (!reap::util::write_file_durably(paths[m], reap::util::json_text(reap::answers_doc_to_json(docs[m]), 1) + "\n", err)) {
                return fail("eval", err);
            }
        }
    }
    if (p.json) {
        reap::task_document doc;
        doc.generate = docs;
        printf("%s\n", reap::util::json_text(reap::task_document_to_json(doc), 1).c_str());
    } else {
        print_generate(docs);
        for (const auto & path : paths) printf("answers: %s\n", path.c_str());
    }
    return 0;
}

} // namespace

int run_task_modes(eval_params & p, const std::function<int(const std::string &)> & usage_error) {
    if (!p.choice.tasks_path.empty() && !p.gen.tasks_path.empty()) {
        return usage_error("one task mode a run: a multiple-choice file or --tasks");
    }
    const std::string flag = !p.gen.tasks_path.empty() ? "--tasks" : reap::choice_format_flag(p.choice.format);
    if (!p.opt.kld_base_path.empty()) return usage_error(flag + " scores the models on tasks: no --kld-base");
    if (!p.opt.input_path.empty()) return usage_error(flag + " reads its tasks from its own FILE: no -f");
    if (!p.generate.prompts_path.empty()) return usage_error(flag + " runs alone: give --generate in another run");
    return p.gen.tasks_path.empty() ? run_choice(p) : run_generate_tasks(p);
}

} // namespace reap::cli

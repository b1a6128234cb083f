// Fuzzes the readers of task evidence, each a file a user hands to reap: the
// three multiple-choice formats of llama-perplexity (binary, HellaSwag text,
// Winogrande CSV), the generative task file (JSONL, its checkers), and the
// JSON documents reap writes and reads back (reap-tasks, reap-answers,
// reap-judge). A file a reader accepts must hold what its contract promises
// (at least two choices a task, one of them right; a rule per task).
#include "formats/task_file.h"
#include "metrics/choice_tasks.h"
#include "metrics/gen_tasks.h"
#include "metrics/judge_rules.h"
#include "util/json.h"

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string bytes((const char *) data, size);
    std::string err;
    for (reap::choice_format f : {reap::choice_format::multiple_choice, reap::choice_format::hellaswag, reap::choice_format::winogrande}) {
        reap::choice_set s;
        err.clear();
        if (!reap::parse_choice_set(f, bytes, "fuzz", s, err)) {
            if (err.empty()) abort();   // a refusal names what is wrong
            continue;
        }
        for (const auto & t : s.tasks) {
            bool any = false;
            for (uint8_t c : t.correct) any = any || c;
            if (t.texts.size() < 2 || t.texts.size() != t.correct.size() || !any ||
                (f == reap::choice_format::winogrande && t.prefixes.size() != 2)) {
                fprintf(stderr, "a task the reader accepted breaks its contract\n");
                abort();
            }
        }
        if (reap::select_choice_tasks(s, 3).size() != std::min<size_t>(3, s.tasks.size()) && f != reap::choice_format::hellaswag) abort();
    }
    std::vector<reap::gen_task> tasks;
    if (reap::parse_gen_tasks(bytes, "fuzz", tasks, err)) {
        for (const auto & t : tasks) {
            if (t.id.empty() || (t.prompt.empty() == t.messages.is_null())) abort();
            (void) reap::answer_passes(t.answer, bytes.substr(0, 64));
        }
    }
    nlohmann::json j;
    if (reap::util::parse_json_text(bytes, "fuzz", j, err)) {
        reap::task_document d;
        reap::answers_doc a;
        reap::judge_result r;
        (void) reap::task_document_from_json(j, "fuzz", d, err);
        (void) reap::answers_doc_from_json(j, "fuzz", a, err);
        if (reap::judge_result_from_json(j, "fuzz", r, err)) (void) r.summary();
    }
    return 0;
}

// The task-evidence format: what `reap eval --multiple-choice / --hellaswag /
// --winogrande --json` writes and what `reap report --tasks` reads; one struct
// and its JSON both ways, in the core (no llama.cpp).
//
// A document is {"format": "reap-tasks", "version": 1, "choice": SECTION}.
// SECTION:
//   "task_format": "multiple-choice" | "hellaswag" | "winogrande",
//   "data": {"path", "sha256", "n_tasks"}   the task file and how many tasks it holds,
//   "limit": --tasks-limit (0 = every task), "tasks": the file indices scored, in order,
//   "settings": {"n_ctx", "n_seq", "n_batch", "n_ubatch"} (n_ctx: per sequence),
//   "models": [base, candidates...], each {"name", "masked", "picked": [choice per task],
//             "correct": [0|1 per task], "n_correct", "accuracy", "ci95": [low, high],
//             and for candidates "paired": {"right_to_wrong", "wrong_to_right", "p_value"}},
//   "measured": the receipts of behaviour_file.h (the data file's sha256 as "input").
// Reading checks every field and recomputes n_correct, accuracy, the interval
// and the paired test from the per-task flags; a file stating other numbers is
// refused.
#pragma once

#include "formats/behaviour_file.h"
#include "metrics/gen_tasks.h"
#include "metrics/task_stats.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reap {

constexpr const char * k_task_file_format  = "reap-tasks";
constexpr int          k_task_file_version = 1;

struct choice_model_result {
    std::string          name;       // "base", a -p file, a --mask plan
    bool                 masked = false;
    std::vector<uint16_t> picked;    // per task scored, the choice picked
    std::vector<uint8_t> correct;    // per task scored, 1 when the pick is right
    uint64_t n_correct() const;
    double   accuracy() const;
    interval ci95() const;
};

struct choice_report {
    std::string              task_format;          // choice_format_name
    std::string              data_path, data_sha256;
    uint64_t                 data_tasks = 0;       // tasks in the file
    uint64_t                 limit = 0;            // --tasks-limit (0 = all)
    std::vector<uint32_t>    tasks;                // file indices scored, in order
    int                      n_ctx = 0, n_seq = 0, n_batch = 0, n_ubatch = 0;
    std::vector<choice_model_result> models;       // [0] = the base
    // the candidate m (>= 1) against the base, task for task
    paired_result paired(size_t m) const { return paired_against(models[0].correct, models[m].correct); }
};

struct choice_section {
    behaviour_receipts measured;
    choice_report      report;
};

struct task_document {
    std::optional<choice_section> choice;
    std::vector<answers_doc>      generate;   // reap eval --tasks --json: every model's answers, the base first
};

// One section as JSON (what task_document_to_json writes under "choice", and
// reap sweep's file under its own "choice"), and read back from `c`.
nlohmann::ordered_json choice_section_to_json(const choice_section & s);
bool choice_section_from_json(util::json_fields & c, choice_section & out, std::string & err);

nlohmann::ordered_json task_document_to_json(const task_document & d);
bool task_document_from_json(const nlohmann::json & j, const std::string & name, task_document & out, std::string & err);
// Reads the file at `path` (at most 256 MiB) and parses it.
bool read_task_document(const std::string & path, task_document & out, std::string & err);

// The table eval prints: a row per model (accuracy, 95% interval, tasks) and,
// for candidates, the paired flips and McNemar's p against the base.
void choice_report_print(FILE * out, const choice_report & r);

} // namespace reap

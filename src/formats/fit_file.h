// reap fit's two files of its own besides the journal: DIR/gates.json, the
// gates' measures (journalled: a resumed fit reads them back), and
// DIR/fit.json, the record of the search (inputs, the space, every score, the
// winner, the gates and the build). Both are typed here, written and read
// through json_fields with a size cap, the file and field named on error.
// Core: no libllama.
#pragma once

#include "plan/fit_search.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reap {

constexpr const char * k_fit_gates_format = "reap-fit-gates";
constexpr int          k_fit_gates_version = 1;
constexpr const char * k_fit_record_format = "reap-fit";
constexpr int          k_fit_record_version = 1;

// What a gate measured on one model: exact needle cells, generation rates.
struct fit_gate_measure {
    size_t n_exact = 0, n_cells = 0;               // --needle
    double loop_rate = 0, termination_rate = 0;    // --generate
    std::vector<uint8_t> task_correct;             // a task file: per task scored, 1 when right (empty: no task gate)
    double task_accuracy() const;
};

// A gated candidate: its measures against the reference's, passed or why not.
struct fit_gate_verdict {
    size_t           candidate = 0;   // index into the space
    fit_gate_measure m;
    bool             pass = false;
    std::string      why;             // "" when it passed
};

// One gate's measures as JSON: gates.json and fit.json write them alike.
nlohmann::json fit_gate_measure_json(const fit_gate_measure & m);

// DIR/gates.json: the reference's measures and each gated candidate's verdict.
struct fit_gates_doc {
    fit_gate_measure              base;
    std::vector<fit_gate_verdict> verdicts;
};

std::string fit_gates_text(const fit_gates_doc & d);
// Every field checked; a verdict's candidate must be below n_candidates.
bool read_fit_gates(const std::string & path, size_t n_candidates, fit_gates_doc & out, std::string & err);

// DIR/methods.json (reap fit --methods, journalled): each criterion's plan at
// the budget on the first source, scored by mask against the reference, and
// the one chosen (the lowest KLD).
constexpr const char * k_fit_methods_format = "reap-fit-methods";
constexpr int          k_fit_methods_version = 1;

struct fit_method_score {
    std::string        method;     // planner::method_name
    std::string        archive;    // the archive it ranked with
    int64_t            n_keep = 0;
    uint64_t           bytes = 0;
    planner::fit_score score;
};

struct fit_methods_doc {
    std::vector<fit_method_score> scores;   // in the order of --methods
    size_t                        chosen = 0;
    std::optional<size_t>         runner_up;
    double                        noise = 0;   // fit_search's split-half rule over the chosen and the runner-up
};

std::string fit_methods_text(const fit_methods_doc & d);
// Every field checked; each method known and listed once, chosen and runner-up in range.
bool read_fit_methods(const std::string & path, fit_methods_doc & out, std::string & err);

// DIR/fit.json.
struct fit_record_candidate {
    std::string                      source;
    int64_t                          n_keep = 0, width = 0;
    uint64_t                         bytes = 0;
    std::optional<planner::fit_score> score;   // scored by the search
    // "scored_from": "file" when its written file was scored (a width cut to
    // an importance-matrix down type, which a mask does not model); absent: by mask
    bool                             written = false;
};

struct fit_record_excluded {
    std::string source;
    int64_t     width = 0;
    std::string why;
};

struct fit_record_gates {
    std::string                   settings;
    fit_gate_measure              reference;
    std::vector<fit_gate_verdict> verdicts;
    std::optional<size_t>         best_by_kld;   // the best by KLD, when a gate moved the choice
};

struct fit_record_build {
    std::string plan, file, eval, card;
    uint64_t    bytes = 0;
    double      kld_mean = 0, top1 = 0;
};

struct fit_record {
    std::string                       tool;
    std::string                       budget_text;
    uint64_t                          budget = 0;
    std::vector<std::string>          sources;
    std::string                       reference, heldout;
    std::string                       saliency_file, saliency_sha256;
    std::vector<fit_record_candidate> candidates;
    std::vector<fit_record_excluded>  excluded;
    uint64_t                          passes_scored = 0, full_grid = 0;
    std::string                       stop_reason;
    double                            noise = 0;
    size_t                            winner = 0;
    std::optional<size_t>             runner_up;
    std::optional<fit_record_gates>   gates;
    std::optional<fit_methods_doc>    methods;   // --methods: the criteria scored and the one chosen
    fit_record_build                  build;
};

std::string fit_record_text(const fit_record & r);
// Every field checked; the winner, the runner-up and every verdict name a
// candidate, the winner a scored one.
bool read_fit_record(const std::string & path, fit_record & out, std::string & err);

} // namespace reap

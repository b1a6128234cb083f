// reap fit's journal: DIR/fit-journal.json, what a fit has done so far, so
// that a killed fit run again with the same command redoes nothing. It holds
// the fingerprint of the inputs (a fit over other inputs is refused, naming
// what changed), the stages done with the hashes of what they wrote, and every
// candidate's score. It is written whole (temp file, fsync, rename) after each
// stage and each score, so it is always the last complete state.
#pragma once

#include "plan/fit_search.h"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace reap {

// What a fit's result depends on, as fit_options gives it (the journal lives in
// the core, free of libllama; llama/fit.cpp fills this).
struct fit_inputs {
    std::vector<std::string> sources;
    std::string              reference, kld_base, corpus, saliency, heldout;   // "" = not given
    uint64_t                 budget = 0;
    bool                     axis_experts = true, axis_width = true, axis_sources = true;
    std::string              method;                                          // its name, or "archive default"
    std::vector<std::string> domains;
    std::string              down_type;
    std::string              gates;          // the gate settings as text ("" = no gates)
    std::string              gate_prompts;   // --generate PROMPTS (hashed; "" = none)
    std::string              gate_tasks;     // the task gate's file (hashed; "" = none)
    std::string              imatrix;        // --imatrix (hashed; "" = none)
    // Some candidates are scored from their written files (down requantised
    // to an importance-matrix type, with the imatrix): their scores depend on
    // the imatrix, and none of a run that scored them by mask holds.
    bool                     written_candidates = false;
    int                      window = 0;     // the passes' window (-c settled on the model)
};

// A candidate's key in the journal: (source index, K, N).
using fit_key = std::tuple<size_t, int64_t, int64_t>;

struct fit_journal {
    std::string                          path;
    std::string                          inputs;    // the fingerprint of the inputs, as JSON text
    bool                                 kld_base_given = false;   // --kld-base existed when fingerprinted: read only
    std::map<std::string, std::string>   stages;    // stage -> the sha256 of what it wrote ("" = none)
    std::map<fit_key, planner::fit_score> scores;
    std::string                          carried;   // a resume over other options: what was kept and what goes (else "")

    bool done(const std::string & stage) const { return stages.count(stage) > 0; }
};

// Opens DIR's journal over the fingerprint of `in`: each source's (and the
// reference's) path, header and router hashes and size; the sha256 of the
// corpus (or the given archive), the held-out text and a given, existing KLD
// base file; the budget, axes, method, domains, down type and window. A new
// journal when there is none; else it is read (every field checked). A file
// whose content changed under the same path is refused, naming it (scores of
// two contents would mix). Other changes (another budget, down type, gate,
// file given, ...) keep each stage and score whose own inputs are unchanged
// (calibration: the calibrated model, corpus or archive, window and whether
// channels are measured; the reference's rows: its model, held-out text, rows
// file and window; scores: both of those and the sources, method, domains and
// down type) and drop the rest, saying so in j.carried: a run refused after
// calibration resumes it when the corrected command is given.
bool open_fit_journal(const std::string & dir, const fit_inputs & in, fit_journal & j, bool & resumed, std::string & err);

// Writes the journal whole, durably.
bool save_fit_journal(const fit_journal & j, std::string & err);

bool fit_file_exists(const std::string & path);
// The stage is in the journal and `path`, what it wrote, still has the sha256
// recorded then (a small file that stands for the stage's output: the build's
// SHA256SUMS rather than its shards).
bool fit_stage_holds(const fit_journal & j, const std::string & stage, const std::string & path);
// Records the stage with the sha256 of `path` ("" = nothing to check) and saves.
bool fit_mark_stage(fit_journal & j, const std::string & stage, const std::string & path, std::string & err);

} // namespace reap

// reap fit's stages after the search, and what it prints: the build of the
// winner (fit_build.cpp) and the lines, tables, record and card section
// (fit_print.cpp). Internal to src/llama/fit*.cpp; fit.h is the interface.
#pragma once

#include "llama/fit.h"
#include "formats/fit_journal.h"
#include "gguf/gguf.h"
#include "moe/layout.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace reap {

// The tolerance between a candidate's masked KLD and its written file's:
// what the mask leaves out is the down projection's requantisation of a width
// cut and the order of the sums; more than this is a fault, not noise.
constexpr double k_fit_mask_file_rel = 0.05;
constexpr double k_fit_mask_file_abs = 1e-4;

// The options of every eval pass fit runs on `base` (the reference's rows, the
// scores, the build's eval, the gates): fit's runtime, progress and log;
// `input` the held-out text ("" for the gates), `kld` the rows file ("" none).
// The window is the rows file's when it exists (eval settles it).
eval_options fit_eval_options(const fit_options & o, const std::string & base, const std::string & input, const std::string & kld);

// The space: lines, candidates, what the budget excluded; before the search.
void print_fit_space(FILE * out, const fit_options & o, const fit_result & r);
// The cost model: passes in the full grid and planned, tokens and ubatches a
// pass, expert bytes a ubatch reads, bytes read a pass when a source streams.
void print_fit_cost(FILE * out, const fit_options & o, const fit_result & r);
// One scored candidate, with the progress of the whole search and its ETA.
void print_fit_pass(FILE * out, const fit_result & r, size_t i, size_t left, double elapsed_s);
// About how many more passes the search will take (an estimate for the ETA).
size_t fit_passes_left_estimate(const planner::fit_search & s);

// DIR/fit.json (formats/fit_file.h): the inputs, the space, every score, the winner and the build.
fit_record make_fit_record(const fit_options & o, const fit_result & r);
// The card's section on the search (Markdown, every input text escaped) and
// its figure (KLD against K, one line per source).
std::string fit_card_section(const fit_options & o, const fit_result & r);
std::string fit_card_figure(const fit_result & r);
// The card's table of the methods scored by --methods ("" without).
std::string fit_card_methods(const fit_result & r);
// The card's table of the gates ("" without gates).
std::string fit_card_gates(const fit_options & o, const fit_result & r);

// The gates (fit_gates.cpp): with --needle or --generate, the best scored
// candidates by mask, until one keeps what the reference does; it becomes
// r.winner (r.best_by_kld: the one it replaced). Journalled as DIR/gates.json.
bool gate_stage(const fit_options & o, fit_journal & j, fit_result & r, FILE * out, std::string & err);
// The gate settings as the journal's fingerprint holds them ("" = no gates).
std::string fit_gates_fingerprint(const fit_options & o);

// --methods (fit_methods.cpp): the weights archive when aimer is among them
// (DIR/scores.gguf), each method's plan at the budget scored by mask against
// the reference's rows `kld`, the lowest KLD chosen (DIR/methods.json,
// journalled). `chosen` gets o with that method (method_given) and
// `saliency` the archive it ranks with; r.methods the scores.
bool method_stage(const fit_options & o, fit_journal & j, const std::string & kld, fit_options & chosen, std::string & saliency,
                  fit_result & r, FILE * out, std::string & err);

// Whether fit's width axis cuts `m` (classified as `lay`: its K grid has a K
// below the full width) and a cut requantises a down tensor to a type that
// needs an importance matrix (fit's --down-type, else the tensor's own): such
// candidates are written and measured, not masked.
bool fit_cut_needs_importance(const fit_options & o, const gguf::model & m, const moe::layout & lay);

// reap prune's stages on `source` by the plan file `plan_path` into `output`
// with fit's imatrix, and its down type when the plan `cuts_width` (the
// build's, and a written candidate's);
// `durable`: fsynced, with SHA256SUMS (the build), else scratch.
struct fit_pruned {
    std::vector<std::string> files;     // the model's files, in shard order
    std::string              imatrix;   // the sliced imatrix beside them ("" = none)
};
bool fit_prune(const fit_options & o, const std::string & source, const std::string & plan_path, bool cuts_width,
               const std::string & output, bool durable, fit_pruned & written, std::string & err);

// A candidate that a mask does not stand for (fit_candidate::written): written
// to DIR/measure, its file scored against the reference's rows `kld`, then
// removed (the score is journalled).
bool score_written_candidate(const fit_options & o, const std::string & kld, const fit_candidate & c, planner::fit_score & sc,
                             FILE * out, std::string & err);

// The build: plan, prune, verify, eval of the file, the agreement check,
// the card and fit.json; each stage journalled, none redone.
bool build_winner(const fit_options & o, fit_journal & j, const std::string & saliency, const std::string & kld, fit_result & r,
                  FILE * out, std::string & err);

} // namespace reap

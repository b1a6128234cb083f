// reap report, as a library: the model card of a pruned build, written from
// its receipts, never from what someone says about it.
//
// Inputs: the source model, the plan, the pruned build (first shard of a split
// set), and optionally the saliency archive the plan was made from, eval JSON
// files (`reap eval --json`) and a sweep JSON (`reap sweep -o`). The card is
// DIR/README.md (Hugging Face front matter, the census of source and build,
// the method, what was verified, what was not, how to run it, the hardware
// arithmetic, SHA256SUMS) and its figures DIR/figures/*.svg (util/svg_chart).
//
// What counts as verified is only what a receipt proves, checked here:
//   * the build is the source cut by the plan: verify_pruned (the audit of
//     `reap verify`) is re-run, SHA256SUMS included; a build that fails it gets
//     no card at all (report_result::differs);
//   * an eval counts for this build only when the eval JSON names its files by
//     the hashes SHA256SUMS lists for them (or, for a masked eval, the plan
//     file's hash); an eval of another file, or one that does not say what it
//     measured, is listed under "Not verified", never as verified; so is an
//     eval against a masked base (--base-mask) or against another base model
//     (the base fingerprint it records is not the source's);
//   * a sweep of another model (its recorded fingerprint) is refused; one
//     ranked by another method than the plan's is shown as such, its points
//     never "this N";
//   * eval and sweep files are read through src/formats/ (every field type-
//     and range-checked: impossible values are refused, naming the field);
//   * the overlap of eval and calibration corpora is the comparison of the two
//     files' hashes (the archive's reap.saliency.corpus_sha256, the eval's input).
// What cannot be known from the files (the Hugging Face id of the source, the
// licence) is left for the user with the marker k_fill_in, never invented.
//
// Core library: no llama.cpp dependency (it reads GGUF files, plans,
// archives and JSON). Errors are values.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace reap::report {

// The marker of a field the user must fill in.
constexpr const char * k_fill_in = "FILL_IN";

struct report_options {
    std::string              source;     // -m: the source model (first shard of a split set)
    std::string              plan;       // --plan
    std::string              pruned;     // the build (first shard of a split set)
    std::string              saliency;   // --saliency ("" = none)
    std::vector<std::string> evals;      // --eval, any number
    std::string              sweep;      // --sweep ("" = none)
    std::string              judge;      // --judge: a reap judge result ("" = none)
    std::string              imatrix;    // --imatrix: the source imatrix prune was given (width cuts to IQ down types)
    std::string              out_dir;    // -o DIR (created when missing)
    bool                     force = false;   // replace existing files of the card (never an input)
    bool                     sync = true;     // fsync outputs (off in tests)
    std::string              tool_version;    // written in the card's footer
    // A section another command adds (reap fit: how the build was chosen),
    // Markdown whose input texts that command has escaped, placed after the
    // sweep's; and its figures as (file name, SVG), written to DIR/figures.
    std::string              extra_section;
    std::vector<std::pair<std::string, std::string>> extra_figures;
};

struct report_result {
    // The build failed the audit (a byte, shape, KV or SHA256SUMS differs):
    // nothing was written; `err` names the first difference.
    bool                     differs = false;
    std::vector<std::string> written;        // README.md and the figures, as written
    std::vector<std::string> verified;       // the card's "Verified" items, one line each
    std::vector<std::string> not_verified;   // the card's "Not verified" items
};

// Builds and writes the card. False with `err` when an input cannot be read
// or is malformed, the archive or sweep is not for this model or plan, a file
// of the card would be one of the inputs (util::check_output, --force or not)
// or exists without `force`, the output cannot be written, or the build fails
// the audit (`out.differs`).
bool write_report(const report_options & opt, report_result & out, std::string & err);

} // namespace reap::report

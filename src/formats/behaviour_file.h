// The behaviour format: what `reap eval --needle / --generate --json` writes
// (src/cli/cmd_eval.cpp), what `reap sweep -o` embeds for the same runs
// (formats/sweep_file.h) and what `reap report --eval` reads, one struct and
// its JSON both ways, in the core (no llama.cpp).
//
// A document is {"format": "reap-behaviour", "version": 1, "needle": SECTION,
// "generate": SECTION} (either section may be missing). A section is the
// report of metrics/needle_grid.h or metrics/generation.h (their JSON, every
// decoded text and token kept) plus "measured": what was measured, recorded
// the way the KLD eval records it (eval_file.h), so that a claim names its
// object:
//   * "input": the haystack (-f) or the prompts (--generate) by path and the
//     sha256 of the file's bytes;
//   * "base": the base model by path, size and fingerprint (header_sha256,
//     plan::model_header_sha256); "base_mask": the --base-mask plan by path,
//     size and the sha256 of its bytes, or null;
//   * "candidates": every other model in the report's order: a mask by its
//     plan's path, size and sha256 (a sweep's plans: of the text --plans-dir
//     writes), a pruned file by each of its files' name, size and the hash its
//     SHA256SUMS listed.
// The seed is the section's own "seed"; the loop rule's k and r are the
// generate section's "loop_span" and "loop_repeats".
//
// Reading: every field is type- and range-checked (a message names it); the
// numbers a section states (a cell's "match", "n_exact", the generation
// statistics) are recomputed from the decoded texts, expected values and
// tokens with the core's rules, and a file that states other numbers is
// refused. Files written before the format had a name (no "format", a
// "needle" or "generate" key, no "measured") still read, with empty receipts.
#pragma once

#include "formats/eval_file.h"
#include "metrics/generation.h"
#include "metrics/needle_grid.h"
#include "util/json_fields.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reap {

constexpr const char * k_behaviour_format  = "reap-behaviour";
constexpr int          k_behaviour_version = 1;

// What one behaviour run measured (above).
struct behaviour_receipts {
    std::string input_path, input_sha256;   // "" when not recorded (an older file)
    std::string base_path, base_sha256;
    uint64_t    base_bytes = 0;             // every file of the base model
    std::string base_files_sha256;          // util::sha256_files of them ("" in older files)
    std::string base_mask, base_mask_sha256;
    uint64_t    base_mask_bytes = 0;
    struct candidate {
        std::string                       name;    // the report's model name: a -p file, a --mask plan, "keep N"
        bool                              masked = false;
        uint64_t                          plan_bytes = 0;   // a mask
        std::string                       plan_sha256;
        std::vector<eval_report::file_id> files;            // a pruned file
    };
    std::vector<candidate> candidates;   // models[1..] of the section's report, in order
    bool recorded() const { return !base_sha256.empty(); }
};

struct needle_section {
    behaviour_receipts measured;
    needle_report      report;
};

struct generate_section {
    behaviour_receipts measured;
    generation_report  report;
};

struct behaviour_document {
    int                             version = k_behaviour_version;   // 0: written before the format had a name
    std::optional<needle_section>   needle;
    std::optional<generate_section> generate;
};

// "measured" as JSON, and read back from a section `f` (absent: nothing
// recorded); the task-evidence format (task_file.h) records the same receipts.
nlohmann::ordered_json behaviour_receipts_json(const behaviour_receipts & m);
bool behaviour_receipts_from_json(util::json_fields & f, behaviour_receipts & m);

// A section as JSON: the report's own JSON with "measured" added.
nlohmann::ordered_json needle_section_json(const needle_section & s);
nlohmann::ordered_json generate_section_json(const generate_section & s);
nlohmann::ordered_json behaviour_document_to_json(const behaviour_document & d);

// Reads the section object `f` (json_fields.h) as written above.
bool needle_section_from_json(util::json_fields & f, needle_section & out);
bool generate_section_from_json(util::json_fields & f, generate_section & out);

// Whether `j` is a behaviour document (its format, or an unnamed one with a
// "needle" or "generate" key), not an eval document (eval_file.h).
bool is_behaviour_document(const nlohmann::json & j);
// Parses and checks a document; `name` stands for it in messages.
bool behaviour_document_from_json(const nlohmann::json & j, const std::string & name, behaviour_document & out,
                                  std::string & err);
// Reads the file at `path` (at most 256 MiB) and parses it.
bool read_behaviour_document(const std::string & path, behaviour_document & out, std::string & err);

} // namespace reap

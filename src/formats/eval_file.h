// The eval report format: what `reap eval --json` writes (src/llama/eval.cpp)
// and `reap report --eval` reads (src/report/report.cpp), one struct and its
// JSON both ways, in the core (no llama.cpp).
//
// A document is one report (`reap eval --json` with one model) or several:
// {"format", "version", "pruned": {PATH: report}, "masked": {PLAN: report}},
// each report with its own "format" and "version" (the same object a run of
// that model alone writes).
// A report holds the metrics (eval_metrics keys; the pruned side null when
// nothing was scored), per corpus domain too, how it ran, and what it
// measured, so a claim names its object:
//   * "base": the base model's file and its fingerprint (header_sha256, the
//     plan::model_header_sha256 that prune checks plans against);
//   * "base_mask" / "base_mask_sha256": the base was itself masked by this plan
//     ("reference": "masked_base"): the numbers compare the candidate with a
//     masked base, not with the base, and say nothing of a build's quality;
//   * "candidate_sha256": for a mask, the hash of the plan bytes eval parsed;
//     "candidate_files": for a pruned file, each file with its size and the
//     hash its SHA256SUMS listed when it was opened (the files were checked
//     unchanged after scoring).
//
// Versions: 1 is what reap eval wrote before the format was named (no
// "format", no base identity); 2 adds "format", "version", "base",
// "base_mask_sha256" and "reference". Both read. Every field read is
// type- and range-checked; a message names the field.
#pragma once

#include "metrics/token_metrics.h"
#include "util/json_fields.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reap {

constexpr const char * k_eval_format  = "reap-eval";
constexpr int          k_eval_version = 2;

struct eval_report {
    int          n_batch = 0, n_ubatch = 0;   // -b, -ub as run (settle_batches)
    eval_metrics overall;
    std::vector<std::pair<std::string, eval_metrics>> domains;  // corpus only, in first-seen order (read back: name order)
    bool        pruned_scored = false;  // false for a run that only wrote a base file (no -p)
    bool        corpus    = false;
    int         n_ctx     = 0;
    size_t      n_windows = 0;
    size_t      n_samples = 0;          // corpus samples read
    size_t      n_samples_skipped = 0;  // too short to score a single token
    std::string kld_base_mode = "none"; // "none" (exact base rows, exact KLD), "written", "read"
    // With a base file the base distribution is llama-perplexity's 16-bit
    // compressed form and KLD skips base log-probs <= -16, exactly as
    // llama-perplexity --kl-divergence does; without one it is exact.
    std::string candidate;              // the -p file or --mask plan scored
    bool        masked = false;         // candidate is a --mask plan
    std::string base_mask;              // --base-mask plan, if any: the reference is a masked base
    std::string base_mask_sha256;       // ... the hash of the plan bytes parsed
    // The base model: its path and fingerprint (model_header_sha256); both ""
    // when the base came from a --kld-base file alone (and in version-1 files).
    std::string base_path, base_sha256;
    // ... and its files' bytes (0: not recorded, files written before it was):
    // the header fingerprint is one model's at every quantisation, its bytes
    // tell the source file from another quantisation of it
    uint64_t    base_bytes = 0;
    // ... and the SHA-256 of its routers (moe/identity.h; "" in files written
    // before it was recorded): a model of the same header and size with other
    // router weights is another model
    std::string base_router_sha256;
    std::string base_files_sha256;   // util::sha256_files of the base's files as measured ("" in older files)
    // What was measured, for receipts (`reap report` matches an eval to a build
    // by these, not by path): the -f file and its sha256; for a pruned file each
    // of its files with its size and, when SHA256SUMS beside it lists one, the
    // sha256 of its bytes as hashed by the eval (the listed hash only when the
    // bytes have it; "" when none is listed); for a mask the sha256 of the plan
    // bytes that were parsed.
    std::string input_path, input_sha256;
    struct file_id {
        std::string name;
        uint64_t    bytes = 0;
        std::string listed_sha256;
    };
    std::vector<file_id> candidate_files;
    std::string          candidate_sha256;

    // MTP draft acceptance, for models with MTP blocks (src/llama/mtp.h): over
    // the scored positions p, the share where the MTP head's argmax for
    // (h_{p-1}, x_p) equals the same model's own argmax at p, the token its
    // verification would sample greedily: the greedy acceptance rate of the first
    // draft token, with the text as the accepted prefix (with several chained
    // MTP heads, the first head's, which drafts the first token). Measured for the
    // base (masked by --base-mask when given; not when its rows come from an
    // existing --kld-base file), for a pruned file (-p) and for a --mask candidate
    // (the base with the plan's experts masked in the trunk and the MTP blocks).
    // Not measured: empty, and mtp_note says why.
    struct mtp_acceptance {
        int64_t positions = 0, accepted = 0;
        double  rate() const { return positions > 0 ? (double) accepted / (double) positions : -1; }
    };
    int                           mtp_blocks = 0;   // MTP blocks in the base or pruned file (0: none, nothing below)
    std::optional<mtp_acceptance> mtp_base, mtp_pruned;
    std::string                   mtp_note;
    // What the run could not check (a plan without a model fingerprint).
    std::vector<std::string>      warnings;
    // Mean KLD over the scored tokens of the first and of the second half of
    // the windows (window order): how much the mean moves with the text it is
    // measured on (reap fit's noise estimate). In memory only, not in the JSON.
    double                        kld_half[2] = {0, 0};

    // The reference was the base masked by a plan, not the base.
    bool base_masked() const { return !base_mask.empty(); }
};

// One report of a document, under the key it was written with.
struct eval_entry_in_file {
    std::string key;        // the -p path or --mask plan (the report's "candidate" for a single report)
    bool        masked = false;
    eval_report report;
};

struct eval_document {
    int                             version = k_eval_version;
    bool                            single = false;   // one report at the top level
    std::vector<eval_entry_in_file> entries;
};

// One set of metrics as a JSON object (the keys of eval_metrics; the pruned
// side null when !have_pruned), as every eval and sweep report writes it.
nlohmann::ordered_json eval_metrics_json(const eval_metrics & m, bool have_pruned = true);
// Reads what eval_metrics_json wrote at `key` of `f` (json_fields.h):
// ppl_base >= 0, ppl_* and the ratio >= 0 or null, KLD >= 0 (a rounding
// tolerance below), argmax_agree in [0, 1], n_tokens a count; `scored` false
// when the pruned side is null (then every pruned field must be null).
// Also the relations between them: perplexities >= 1 where there are tokens,
// the ratio their quotient, median <= p99 <= max.
bool eval_metrics_from_json(util::json_fields & f, const char * key, eval_metrics & m, bool & scored);
// The "domains" object of `f` (eval reports, sweep points): each read as
// above, scored exactly when it has tokens, their tokens adding up to at most
// `overall`'s (each token is in one domain).
bool domain_metrics_from_json(util::json_fields & f, const eval_metrics & overall, std::vector<std::pair<std::string, eval_metrics>> & out);

// A single report as a document (format, version and the report's fields).
nlohmann::ordered_json eval_report_to_json(const eval_report & r);
// Several: {"format", "version", "pruned": {...}, "masked": {...}} (a key only
// when it has entries), each in the order given.
nlohmann::ordered_json eval_document_to_json(const eval_document & d);

// A measured file list ({"file", "bytes", "sha256" or null} each), as
// "candidate_files" holds it; the reader takes the array at `key` (absent: none).
nlohmann::ordered_json file_ids_json(const std::vector<eval_report::file_id> & files);
bool file_ids_from_json(util::json_fields & f, const char * key, std::vector<eval_report::file_id> & out);

// Parses and checks a document; `name` stands for it in messages.
bool eval_document_from_json(const nlohmann::json & j, const std::string & name, eval_document & out, std::string & err);
// Reads the file at `path` (at most 256 MiB) and parses it.
bool read_eval_document(const std::string & path, eval_document & out, std::string & err);

} // namespace reap

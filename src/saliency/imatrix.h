// reap::saliency imatrix import: turns llama.cpp importance-matrix files
// (llama-imatrix output) into a saliency archive of metric set "energy":
// per domain, MoE layer and expert,
//   count       tokens routed to the expert: the `.counts` of blk.L.ffn_down_exps
//   energy_sum  Σ ‖h‖₂² over those tokens, h = the input of ffn_down_exps:
//               the sum of the expert's row of `blk.L.ffn_down_exps.weight.in_sum2`
// One file is one domain (named by --domain NAME=FILE, else the file's stem);
// files naming the same domain are summed.
//
// Formats read (no llama.cpp code; every count, length and size is checked
// against the bytes present before use, and messages name file and entry):
//   GGUF (llama-imatrix's default): general.type "imatrix"; per weight tensor W,
//     F32 tensors `W.in_sum2` [n_values, n_mat] (Σ x² per input channel and
//     matrix) and `W.counts` [1, n_mat] (rows seen per matrix); KVs
//     imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size.
//   legacy .dat: int32 n_entries; per entry int32 len, name[len], int32 ncall,
//     int32 nval, float[nval] (per channel (Σx²/count)·ncall; a matrix that saw
//     no rows holds ncall in every channel); then optionally int32 chunk count,
//     int32 len, dataset name[len]. Per-expert counts are NOT in this format:
//     an expert whose values are all exactly ncall is reported as unused
//     (count 0), every other expert gets count = ncall and energy_sum = Σ values,
//     so energy_sum / count is still its mean ‖h‖² per routed token; the archive
//     records reap.saliency.imatrix.legacy_counts = true. Legacy files need -m
//     (they do not record the number of experts).
//
// With a model (-m), the file must belong to it: every entry must name one of
// the model's tensors with matching shape (expert entries: n_mat = n_expert,
// n_values = the weight's ne[0]) and every MoE layer must have its
// ffn_down_exps entry; the archive then carries the model's fingerprint.
// Without one, the fingerprint is inferred (arch "unknown", n_expert_used 0).
//
// Errors are values; nothing here exits. No llama.cpp dependency.
#pragma once

#include "gguf/gguf.h"
#include "saliency/archive.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace reap::saliency {

struct imatrix_entry {
    std::vector<float>  sums;     // n_mat * n_values, matrix-major
    std::vector<double> counts;   // n_mat values (GGUF), or one value = ncall (legacy)
    int64_t             n_mat = 1;     // GGUF: counts.size(); legacy: unknown (1) until split by the caller
    int64_t             ncall = 0;     // legacy only
};

struct imatrix_file {
    std::string                          path;
    bool                                 legacy = false;
    std::vector<std::string>             datasets;
    int64_t                              chunk_count = 0;   // 0 = absent
    int64_t                              chunk_size  = 0;   // 0 = absent (always for legacy)
    std::map<std::string, imatrix_entry> entries;           // by weight tensor name
};

// Reads an imatrix file, GGUF or legacy (told apart by the GGUF magic).
bool read_imatrix(const std::string & path, imatrix_file & out, std::string & err);
// Parses a legacy .dat image; `name` stands in for the path in messages.
bool parse_imatrix_legacy(const uint8_t * data, size_t size, const std::string & name, imatrix_file & out,
                          std::string & err);

// One input: "NAME=FILE" or "FILE" (domain = the file's stem).
struct imatrix_input {
    std::string domain;
    std::string path;
};
bool parse_imatrix_input(const std::string & arg, bool named, imatrix_input & out, std::string & err);

struct imatrix_domain_report {
    std::string domain;
    std::string path;
    bool        legacy = false;
    int64_t     n_tokens = 0;
    // per MoE layer, the experts that saw no token: (layer, expert ids)
    std::vector<std::pair<int, std::vector<int>>> unused;
    size_t      n_unused = 0;
};

// Builds the archive from the inputs. `model` may be nullptr (no -m).
bool import_imatrix(const std::vector<imatrix_input> & inputs, const gguf::model * model, archive & out,
                    std::vector<imatrix_domain_report> & reports, std::string & err);

}  // namespace reap::saliency

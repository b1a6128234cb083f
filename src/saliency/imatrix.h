// reap::saliency imatrix import: turns llama.cpp importance-matrix files
// (llama-imatrix output) into a saliency archive of metric set "energy":
// per domain, MoE layer and expert,
//   count       tokens routed to the expert: the `.counts` of blk.L.ffn_down_exps
//   energy_sum  Σ ‖h‖₂² over those tokens, h = the input of ffn_down_exps:
//               the sum of the expert's row of `blk.L.ffn_down_exps.weight.in_sum2`
// and, when asked (channels, reap imatrix --width-saliency), per channel c of
// that input: ch_energy = the expert's row of in_sum2 itself, value by value
// (archive version 2, n_ff_exp = the entry's values per expert). For a model
// whose one shared expert is cut with the routed experts (-m given and
// moe::expert_width::shared_cut: llama4), also sh_energy = the in_sum2 of
// blk.L.ffn_down_shexp.weight (one matrix of n_ff_exp values, Σ h_c² over every
// token; a legacy file's values, Σ h_c² / rows × ncall, in the same channel
// order) per MoE layer (archive version 3); a file without that entry for a MoE
// layer is an error, since the width cut of such a model needs it. Without -m
// the shared expert's entries are not read (the archive, arch "unknown", is of
// no use to plan).
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

// One entry, as read. Only what import uses is kept: the shape, the counts and,
// for blk.N.ffn_down_exps.weight entries, the per-matrix reductions of their
// values (read in bounded chunks); the other entries' values are never read,
// so memory does not grow with the file (a K3-sized file is GBs of gate/up
// values nobody uses).
struct imatrix_entry {
    int64_t             n_values = 0;  // values in the entry, all matrices together
    std::vector<double> counts;        // n_mat values (GGUF), or one value = ncall (legacy)
    int64_t             n_mat = 1;     // GGUF: counts.size(); legacy: the split asked of the reader (else 1)
    int64_t             ncall = 0;     // legacy only
    uint64_t            values_offset = 0;  // legacy only: file offset of the entry's first value
    // down_exps entries only (empty otherwise, and for a legacy entry whose
    // values do not split into the asked number of matrices): per matrix, the
    // sum of its values in file order (as double), and whether every value
    // equals ncall (legacy placeholders of a matrix that saw no rows).
    std::vector<double>  mat_sum;
    std::vector<uint8_t> mat_all_ncall;
    // down_exps (and ffn_down_shexp) entries read with keep_values: every value, in file order (as double)
    std::vector<double>  values;
};

struct imatrix_file {
    std::string                          path;
    bool                                 legacy = false;
    std::vector<std::string>             datasets;
    int64_t                              chunk_count = 0;   // 0 = absent
    int64_t                              chunk_size  = 0;   // 0 = absent (always for legacy)
    std::map<std::string, imatrix_entry> entries;           // by weight tensor name
    std::vector<std::string>             order;             // entry names in file order (legacy; GGUF: by name)
    uint64_t                             trailer_offset = 0;// legacy only: where the entries end (chunk count, dataset follow)
};

// Reads an imatrix file, GGUF or legacy (told apart by the GGUF magic), entry
// by entry with reads of bounded size. A legacy file does not record how its
// down_exps values split into experts: `legacy_split` (the model's expert
// count; 0: unknown) says so, and without it no reduction is made. The values
// that are read (down_exps ones) must be finite and non-negative.
// keep_values: the down_exps entries' values are kept too (imatrix_entry::values).
bool read_imatrix(const std::string & path, imatrix_file & out, std::string & err, int64_t legacy_split = 0,
                  bool keep_values = false);
// Parses a legacy .dat image; `name` stands in for the path in messages.
bool parse_imatrix_legacy(const uint8_t * data, size_t size, const std::string & name, imatrix_file & out,
                          std::string & err, int64_t legacy_split = 0, bool keep_values = false);

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

// Builds the archive from the inputs, one file at a time. `model` may be nullptr (no -m).
// channels: the archive gets ch_energy too (every file's down_exps entries must
// then have the same values per expert: n_ff_exp).
bool import_imatrix(const std::vector<imatrix_input> & inputs, const gguf::model * model, archive & out,
                    std::vector<imatrix_domain_report> & reports, std::string & err, bool channels = false);

}  // namespace reap::saliency

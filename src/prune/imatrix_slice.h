// reap prune --imatrix: the importance matrix of the pruned model, sliced from
// the source model's (llama-imatrix output, GGUF or legacy .dat), and the
// coverage receipt of the kept experts.
//
// Slicing: every entry whose weight tensor carries the expert axis (asked of
// the moe layout table: tensor_kind::expert_weight, the ffn_*_exps slabs) is
// cut to the plan's keep list of its layer, output matrix i = source matrix
// keep[i]:
//   GGUF    `W.in_sum2` [n_values, n_expert] -> [n_values, n_keep] and
//           `W.counts` [1, n_expert] -> [1, n_keep], bytes copied as they are;
//   legacy  the entry's n_expert * ne0 values -> n_keep * ne0 (nval updated,
//           ncall kept: the format has one call count per entry, derived by
//           llama-imatrix from the largest expert count, which the file does
//           not hold; llama-quantize divides every value by it, so a kept
//           expert's weights are what the source file gave it).
// Width plans (plan.h "width") also cut channels inside the kept experts:
// a down entry (ffn_down_exps: one value per intermediate channel, the input
// of the down projection) keeps, for output expert i, the values of source
// expert keep[i] at the plan's channels[i], in that order
//   GGUF    `W.in_sum2` -> [K, n_keep] (values copied as they are), counts as above;
//   legacy  n_keep * K values (nval updated);
// gate/up entries are per d_model input channel: cut along the experts only.
// A shared expert cut with the routed ones (llama4, moe::width_cuts_shared)
// has its down entry (ffn_down_shexp: one matrix) cut to the layer's
// shared_channels the same way, its gate/up entries copied.
// Every other entry (the router's too: an entry is per input channel, and the
// router's expert axis is its output rows), every KV and the legacy trailer (chunk count, dataset)
// are copied unchanged, in the source's order. The output is written through
// util::durable_file (GGUF: gguf::write_output) and never over an input.
//
// Refused, with the reason: an entry that names no tensor of the model or does
// not fit its shape (an imatrix of another model), an entry for a per-expert
// tensor that is not a weight matrix, no per-expert entry at all, or an MoE
// layer whose expert weights are not all present (a layer with none is allowed
// only when it is one of the nextn blocks llama.cpp does not run).
//
// Coverage: per MoE layer, the activation count of each kept expert = the
// smallest count that expert has in the layer's expert entries (GGUF .counts:
// tokens routed to it). Legacy files hold no per-expert counts: only whether
// an expert saw any token (its down_exps values are llama-imatrix's
// placeholder, ncall in every channel, when it saw none), so min/mean/max are
// unknown and a required coverage above 1 cannot be checked.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "gguf/gguf.h"
#include "moe/layout.h"
#include "plan/plan.h"
#include "prune/width.h"
#include "saliency/imatrix.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace reap::prune {

// One MoE layer's kept experts.
struct layer_coverage {
    int                  layer = -1;
    std::vector<int64_t> keep;     // the plan's keep list (source ids, output order)
    bool                 has_entries = true;  // false: a nextn block with no entries (left out of the stats)
    std::vector<int64_t> counts;   // per output expert i (source expert keep[i]); -1 = has data, count unknown (legacy)
    int64_t              min = 0, max = 0;
    double               mean = 0, median = 0;
};

struct coverage_receipt {
    bool                        counts_known = true;  // false for a legacy input
    int64_t                     n_keep = 0;
    std::vector<layer_coverage> layers;
    // over every kept expert of every layer with entries (counts_known only)
    int64_t                     min = 0, max = 0;
    double                      mean = 0, median = 0;
    // kept experts with a count <= threshold / < required: (layer, output index)
    struct expert_ref { int layer; int64_t index, source, count; };
    std::vector<expert_ref> at_most(int64_t threshold) const;
    std::vector<expert_ref> below(int64_t required) const;
};

// A checked slice, ready to be written.
struct imatrix_slice {
    std::string             source_path;
    int64_t                 n_expert = 0;   // the source model's
    saliency::imatrix_file  file;        // the source, as read (entries, order, offsets)
    std::vector<std::string> sliced;     // entry names cut along the expert axis
    // per sliced entry: the keep list of its layer, and (width plans, down
    // entries only; else nullptr) the channel lists of its layer
    std::vector<const std::vector<int64_t> *> keep;
    std::vector<const std::vector<std::vector<int64_t>> *> channels;
    // per sliced entry: its matrices (n_expert; 1 for a shared expert's down
    // entry cut in width, whose keep list is {0} and channel list the layer's
    // shared channels, held in shared_lists)
    std::vector<int64_t> n_mat;
    std::deque<std::vector<std::vector<int64_t>>> shared_lists;
    gguf::model             gguf_source;  // the source opened as GGUF (not legacy): where values are read
    coverage_receipt        coverage;
};

// Reads the imatrix at `path`, checks it against the source model (layout
// `lay`) and the plan (already validated against the model), and computes the
// coverage of the kept experts.
bool prepare_imatrix_slice(const std::string & path, const gguf::model & model, const moe::layout & lay,
                           const plan & p, imatrix_slice & out, std::string & err);

// A model whose one shared expert is cut with the routed ones (llama4,
// moe::width_cuts_shared) requantises its down projection (ffn_down_shexp)
// too, and a shared entry is no expert entry, so prepare_imatrix_slice does
// not ask for it: where the cut's type for that tensor (`w`) needs an
// importance matrix, the imatrix `file` (read from `path`) must have its entry.
bool check_shared_down_entry(const std::string & path, const saliency::imatrix_file & file, const gguf::model & model,
                             const moe::layout & lay, const width_options & w, std::string & err);

// The importance llama-quantize would give output expert `k` of down entry
// `name` (one of `sliced`) in the width-cut model: the source's values of
// expert keep[k] at channels[k], normalised as llama-quantize normalises
// them (GGUF: in_sum2 / count, all 1 for an expert that saw no token;
// legacy: value / ncall, as they are when ncall is 0). K values, read from
// the source file, each checked finite and >= 0.
bool kept_importance(const imatrix_slice & s, const std::string & name, size_t k, std::vector<float> & out,
                     std::string & err);

// The default output beside the pruned model: OUT.gguf -> OUT.imatrix.gguf
// (legacy input: OUT.imatrix.dat).
std::string default_imatrix_out(const std::string & model_out, bool legacy);

// Writes the sliced imatrix to `path` (same format as the source). Refuses an
// existing file unless `force`, and always the source itself. With `stage`
// the file is finished but not published: it is moved into *stage for the
// caller to publish together with the pruned model, and its SHA-256 (hashed
// as written) is appended to *stage_sha256 when given (for SHA256SUMS).
bool write_imatrix_slice(const imatrix_slice & s, const std::string & path, bool force, bool sync,
                         std::string & err, std::vector<util::durable_file> * stage = nullptr,
                         std::vector<std::string> * stage_sha256 = nullptr);

// The receipt as JSON: totals, every layer's counts, the experts at or below `threshold`.
nlohmann::json coverage_json(const coverage_receipt & c, int64_t threshold);

}  // namespace reap::prune

// reap prune with a width plan: cut every kept expert to the plan's K
// intermediate channels (plan.h "width").
//
//   * ffn_gate_exps / ffn_up_exps (.weight, and .bias where present) keep the
//     rows of the kept channels: byte pieces of the source, no requantisation
//     (a row is whole quantisation blocks, ne[0] being the model width);
//   * ffn_down_exps.weight loses columns inside its rows, so its rows are
//     requantised: each kept expert's slab is dequantised with ggml's own
//     to_float, the kept columns gathered in ascending order, and the result
//     quantised with ggml_quantize_chunk to the source type or the requested
//     down type; a type that needs an importance matrix (needs_importance:
//     iq2_xxs, iq2_xs, iq1_s, iq1_m) takes each kept expert's from
//     width_options::importance (the source imatrix sliced to the kept
//     channels, prune/imatrix_slice.h kept_importance) and is refused, naming
//     the type, without one; other types are quantised without one, as before;
//   * a shared expert cut with the routed ones (llama4: moe::width_cuts_shared)
//     is cut the same way to the layer's shared_channels: rows of
//     ffn_gate_shexp / ffn_up_shexp, ffn_down_shexp requantised as above
//     (the same type rule, importance from the imatrix's ffn_down_shexp entry);
//   * <arch>.expert_feed_forward_length becomes K (its value type kept) and,
//     stamped, reap.width.source_length records the source's width.
// Everything else is what make_pruned_spec made of it (expert slicing).
//
// Links ggml-base (its (de)quantisation functions), never libllama.
#pragma once

#include "gguf/gguf.h"
#include "moe/layout.h"
#include "moe/pruned.h"
#include "plan/plan.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace reap::prune {

// Stamped into width-pruned files: the experts' width in the source (u32; moe/pruned.h).
using moe::k_key_width_source_length;

// The importance matrix of output expert `k` of down tensor `down` (source
// name) in the width-cut model: K values, one per kept channel, in the plan's
// order. False with `err` when it cannot be had.
using down_importance = std::function<bool(const std::string & down, size_t k, std::vector<float> & w, std::string & err)>;

struct width_options {
    // the type ffn_down_exps is requantised to; unset: each tensor's own type
    std::optional<gguf::tensor_type> down_type;
    // where a type that needs an importance matrix gets it (unset: such types are refused)
    down_importance importance;
};

// Whether quantising to `type` needs an importance matrix: ggml's
// ggml_quantize_requires_imatrix (iq2_xxs, iq2_xs, iq1_s) and iq1_m, which
// llama-quantize requires one for too.
bool needs_importance(gguf::tensor_type type);

// Why rows of `n_per_row` values cannot be quantised to `type` by this cut
// ("" when they can): a type ggml cannot quantise from floats, one that needs
// an importance matrix when `have_importance` is false, or a row length not a
// multiple of its block size.
std::string requantise_refusal(gguf::tensor_type type, int64_t n_per_row, bool have_importance = false);

// One kept expert's down slab: source expert `e` of down tensor `t` (ne =
// [n_ff, n_embd, n_expert]) dequantised, columns `channels` (ascending)
// kept, quantised to `out_type`; `out` receives n_embd rows of
// row_size(out_type, channels.size()) bytes. `dequantised` (optional)
// receives the kept values as floats, row-major [n_embd][K]. `importance`
// (K values) is given to ggml_quantize_chunk when `out_type` needs one
// (needs_importance) and ignored otherwise; such a type without it is refused.
bool requantise_down_expert(const gguf::model & m, const gguf::tensor_info & t, int64_t e,
                            const std::vector<int64_t> & channels, gguf::tensor_type out_type, std::vector<uint8_t> & out,
                            std::string & err, const std::vector<float> * importance = nullptr,
                            std::vector<float> * dequantised = nullptr);

// What requantise_down_expert checks of down tensor `t` before reading a
// byte, for K kept channels quantised to `out_type`: a type it can make
// (requantise_refusal), a source type ggml dequantises, and data that is
// n_expert slabs of n_rows whole rows. False with `err` naming the tensor.
bool check_down_cut(const gguf::tensor_info & t, int64_t K, gguf::tensor_type out_type, bool have_importance, std::string & err);

// The matrices of one tensor a width cut touches, in output order: layer
// `pl`'s kept experts (output k = source expert keep[k], channels[k]) or, for
// a shared expert's tensor (`shared`), its one matrix (source 0,
// shared_channels). What the slicer writes and reap verify audits.
struct width_matrices {
    const plan_layer * pl = nullptr;
    bool               shared = false;
    size_t  size() const { return shared ? 1 : pl->keep.size(); }
    int64_t source(size_t k) const { return shared ? 0 : pl->keep[k]; }
    const std::vector<int64_t> & channels(size_t k) const { return shared ? pl->shared_channels : pl->channels[k]; }
};

// Applies the width cut of plan `p` (validated, has_width()) to `spec`, the
// expert-sliced output of `m` (make_pruned_spec): shapes, pieces, the width
// KV and, with `stamp`, reap.width.source_length. The down tensors are
// checked here (check_down_cut) and requantised only when the spec is written
// (gguf::output_tensor::produce, one tensor at a time): the spec refers to
// `m`, `p` and `o.importance`'s data until then, and laying it out (a dry
// run's sizes) requantises nothing.
bool apply_width(const gguf::model & m, const moe::layout & lay, const plan & p, const width_options & o, bool stamp,
                 gguf::output_spec & spec, std::string & err);

// The type the down tensor `t` has in the width-cut output.
gguf::tensor_type width_down_type(const gguf::tensor_info & t, const width_options & o);

// The first down tensor of `m` (classified as `lay`) that a width cut
// requantises to a type that needs an importance matrix, with `o`'s down type
// (unset: each tensor's own), or nullptr: what needs --imatrix, and what a
// mask does not model (reap fit writes such candidates to measure them).
const gguf::tensor_info * cut_down_needing_importance(const gguf::model & m, const moe::layout & lay, const width_options & o);

}  // namespace reap::prune

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
//     down type (types that need an importance matrix are refused naming it);
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
#include <optional>
#include <string>
#include <vector>

namespace reap::prune {

// Stamped into width-pruned files: the experts' width in the source (u32; moe/pruned.h).
using moe::k_key_width_source_length;

struct width_options {
    // the type ffn_down_exps is requantised to; unset: each tensor's own type
    std::optional<gguf::tensor_type> down_type;
};

// Why rows of `n_per_row` values cannot be quantised to `type` by this cut
// ("" when they can): a type ggml cannot quantise from floats, one that needs
// an importance matrix, or a row length not a multiple of its block size.
std::string requantise_refusal(gguf::tensor_type type, int64_t n_per_row);

// One kept expert's down slab: source expert `e` of down tensor `t` (ne =
// [n_ff, n_embd, n_expert]) dequantised, columns `channels` (ascending)
// kept, quantised to `out_type`; `out` receives n_embd rows of
// row_size(out_type, channels.size()) bytes. `dequantised` (optional)
// receives the kept values as floats, row-major [n_embd][K].
bool requantise_down_expert(const gguf::model & m, const gguf::tensor_info & t, int64_t e,
                            const std::vector<int64_t> & channels, gguf::tensor_type out_type, std::vector<uint8_t> & out,
                            std::string & err, std::vector<float> * dequantised = nullptr);

// Applies the width cut of plan `p` (validated, has_width()) to `spec`, the
// expert-sliced output of `m` (make_pruned_spec): shapes, pieces, the
// requantised down data, the width KV and, with `stamp`, reap.width.source_length.
bool apply_width(const gguf::model & m, const moe::layout & lay, const plan & p, const width_options & o, bool stamp,
                 gguf::output_spec & spec, std::string & err);

// The type the down tensor `t` has in the width-cut output.
gguf::tensor_type width_down_type(const gguf::tensor_info & t, const width_options & o);

}  // namespace reap::prune

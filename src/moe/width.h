// reap::moe width — whether the experts of a model can be cut in width (fewer
// intermediate channels per expert), and the facts a width cut needs: the
// experts' intermediate width and the quantisation block of their down
// projections.
//
// A width cut keeps, per expert, K of its n_ff intermediate channels: rows of
// ffn_gate_exps / ffn_up_exps (and elements of their biases), columns of
// ffn_down_exps. It needs experts that are three separate projections
// gate/up/down whose width is the model's one <arch>.expert_feed_forward_length;
// every other layout is refused with the reason (fused ffn_gate_up_exps, no
// gate, no width key, a per-layer width array, widths that disagree), and so
// are models with shared experts whose width llama.cpp derives from the same
// key (deepseek2, glm4moe, llama4, kimi-k3, ...: only archs whose loader reads
// <arch>.expert_shared_feed_forward_length, with the key in the file, keep
// their shared experts' shape when the key changes).
//
// Core library: no llama.cpp / ggml dependency.
#pragma once

#include "gguf/gguf.h"
#include "moe/layout.h"

#include <cstdint>
#include <string>

namespace reap::moe {

struct expert_width {
    int64_t          n_ff = 0;          // <arch>.expert_feed_forward_length (0 when refused)
    int64_t          down_block = 1;    // the largest block size among the ffn_down_exps types
    gguf::tensor_type down_type = gguf::tensor_type::F32;  // the type with that block size (for messages)
    std::string      refusal;           // why the model cannot be cut in width; "" when it can
};

// The width facts of model `m` classified as `lay` (moe::layout_of). A model
// that cannot be cut in width is no error: `out.refusal` says why. False (with
// `err`) only for a key of the wrong type.
bool expert_width_of(const gguf::model & m, const layout & lay, expert_width & out, std::string & err);

// The KV key of the experts' width: "<arch>.expert_feed_forward_length".
std::string expert_width_key(const std::string & arch);

// Whether the tensor named `base` ("ffn_gate_exps", ...) with suffix "weight"
// or "bias" keeps rows (gate, up) in a width cut; down's weight loses
// columns; everything else is unchanged.
bool width_keeps_rows(const std::string & name);
bool width_cuts_columns(const std::string & name);

}  // namespace reap::moe

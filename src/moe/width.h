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
// gate, no width key, a per-layer width array, widths that disagree).
//
// Shared experts, where the model has them, keep their bytes and shape; what
// llama.cpp expects of their shape depends on the arch's loader (pinned
// v0.4.0, src/models/*.cpp):
//   * qwen2moe, qwen3next, ... read <arch>.expert_shared_feed_forward_length:
//     allowed when the file has that key (the cut leaves it alone);
//   * deepseek2, glm4moe, dots1, minimax-m3, kimi-k3 size them S = n_ff x
//     <arch>.expert_shared_count (kimi-k3: a count of 0 counts as 1) and
//     compute them as one FFN over the concatenated shared weights, so S
//     channels are S/K "shared experts" of width K exactly: a cut to K writes
//     expert_shared_count = S/K and K must divide S (shared_width_refusal);
//   * llama4 sizes its one shared expert n_ff with no key of its own, so a
//     cut to K cuts it to K too (expert_width::shared_cut): it keeps the
//     plan's shared channels (plan_layer::shared_channels), rows of
//     ffn_gate_shexp / ffn_up_shexp and columns of ffn_down_shexp,
//     requantised as ffn_down_exps is (whose blocks then bound K as well).
//     Its tensors must be the three 2-D weights of width n_ff in every MoE
//     layer, as the loader creates them;
//   * every other arch with shared experts is unchecked: refused.
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
    int64_t          down_block = 1;    // the largest block size among the ffn_down_exps (and cut ffn_down_shexp) types
    gguf::tensor_type down_type = gguf::tensor_type::F32;  // the type with that block size (for messages)
    std::string      refusal;           // why the model cannot be cut in width; "" when it can
    // S, the width of the shared experts llama.cpp sizes as n_ff x
    // <arch>.expert_shared_count (0: the model has none such); a cut to K
    // writes expert_shared_count = S/K
    int64_t          shared_width = 0;
    // The model's one shared expert is n_ff wide by its loader's rule with no
    // key of its own (llama4): a cut to K cuts it to K as well, keeping the
    // plan's plan_layer::shared_channels (rows of ffn_gate/up_shexp, columns of
    // ffn_down_shexp, requantised as ffn_down_exps is).
    bool             shared_cut = false;
};

// The width facts of model `m` classified as `lay` (moe::layout_of). A model
// that cannot be cut in width is no error: `out.refusal` says why. False (with
// `err`) only for a key of the wrong type.
bool expert_width_of(const gguf::model & m, const layout & lay, expert_width & out, std::string & err);

// Whether a width cut of `m` cuts its shared expert too: expert_width_of's
// shared_cut (false where the model cannot be cut or its key is malformed).
bool width_cuts_shared(const gguf::model & m, const layout & lay);

// The KV key of the experts' width: "<arch>.expert_feed_forward_length".
std::string expert_width_key(const std::string & arch);
// The KV key of the shared experts' count: "<arch>.expert_shared_count".
std::string expert_shared_count_key(const std::string & arch);

// Why width K cannot keep shared experts of width `shared_width` (S, see
// expert_width) whole, "" when it can (S = 0, or K divides S). The message
// names S and the widths that would work: those up to n_ff that divide S and
// are multiples of `block` (the down projections' block size).
std::string shared_width_refusal(int64_t shared_width, int64_t n_ff, int64_t block, int64_t k);

// Whether tensor `name` ("blk.L.<base>.<suffix>") keeps rows in a width cut:
// ffn_gate_exps / ffn_up_exps weights and biases and, when the model's shared
// expert is cut with them (`shared_cut`, expert_width::shared_cut: llama4),
// ffn_gate_shexp / ffn_up_shexp weights; whether it loses columns:
// ffn_down_exps's weight and, with `shared_cut`, ffn_down_shexp's.
// Everything else is unchanged. The one rule of which tensors a cut touches.
bool width_keeps_rows(const std::string & name, bool shared_cut);
bool width_cuts_columns(const std::string & name, bool shared_cut);
// Whether `name` is a shared-expert tensor ("..._shexp"): one matrix, where
// the routed ones hold one per expert.
bool width_is_shared(const std::string & name);
// The dimension of a tensor a width cut touches (width_keeps_rows /
// width_cuts_columns) that holds its channels: 1 for a gate/up weight
// ([n_embd, n_ff, ...]), 0 for down's weight ([n_ff, n_embd, ...]) and the
// gate/up biases ([n_ff, n_expert]).
int width_channel_dim(const std::string & name);

}  // namespace reap::moe

// Width saliency for reap calibrate --width-saliency: what calibrate needs to
// score every intermediate channel of every routed expert (the input of the
// expert's down projection; see src/saliency/archive.h, ch_energy / ch_reap).
//
//   ch_energy[l, e, c] += a_c²                      per token routed to e
//   ch_reap[l, e, c]   += g · |a_c| · ‖W_down[:,c]‖₂
//
// a is the row of the input of ffn_down_exps for that (token, slot), read
// where llama-imatrix reads it: the src[1] of the MUL_MAT_ID node
// ffn_moe_down-L, whose rows are ordered [n_ff, n_expert_used, n_tokens] like
// ffn_moe_topk. ‖W_down[:,c]‖₂ is channel c's column of the expert's down
// matrix (ne0 = n_ff is the input axis, so a column runs over the rows),
// dequantised with ggml's own type traits from the GGUF bytes, times |s_e|
// where the arch has a per-expert down scale (blk.L.ffn_down_exps.scale):
// |a_c|·‖s_e·W[:,c]‖ is the norm of channel c's contribution to the expert's
// output, as reap_sum uses ‖f‖. For weights-before-ffn archs (llama4) g is
// already inside a, and ch_reap takes |a_c|·‖W[:,c]‖ (as reap_sum takes ‖f‖).
//
// The shared expert (a model whose shared expert is cut with the routed ones,
// moe::expert_width::shared_cut: llama4) is measured the same way over every
// token, gate 1 (archive.h, sh_energy / sh_reap):
//
//   sh_energy[l, c] += h_c²          sh_reap[l, c] += |h_c| · ‖W_down_shexp[:,c]‖₂
//
// h is the src[1] of the MUL_MAT node whose src[0] is blk.L.ffn_down_shexp.weight
// (found by its weight, as llama-imatrix finds it, whatever the graph names the
// node), rows [n_ff, n_tokens].
//
// Errors are values (false + message naming the layer and tensor).
#pragma once

#include "gguf/gguf.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

struct ggml_tensor;

namespace reap {

// Per MoE layer and expert, ‖s_e·W_down[:,c]‖₂ for every channel c, at
// index (l * n_expert + e) * n_ff + c (rows of other layers 0); n_ff is the
// down tensors' ne[0], which must be the same in every MoE layer. Reads each
// expert slab once, a row at a time.
bool down_column_norms(const gguf::model & m, const std::vector<int> & moe_layers, int64_t n_layer, int64_t n_expert,
                       std::vector<double> & norms, int64_t & n_ff, std::string & err);

// Per MoE layer, ‖W_down_shexp[:,c]‖₂ of blk.L.ffn_down_shexp.weight ([n_ff,
// n_embd], n_ff the routed experts' width) at index l * n_ff + c (other layers 0).
bool shared_down_column_norms(const gguf::model & m, const std::vector<int> & moe_layers, int64_t n_layer, int64_t n_ff,
                              std::vector<double> & norms, std::string & err);

// The input of the shared expert's down projection, MUL_MAT node t with src[0]
// `weight`, checked: F32 [n_ff, n_tok], rows of contiguous floats.
bool shared_down_input_of(const ggml_tensor * t, const char * weight, int64_t n_ff, int64_t n_tok, const ggml_tensor *& input,
                          std::string & err);

// The input of the down projection a MUL_MAT_ID node ffn_moe_down-L reads,
// checked: F32, [n_ff, n_used or 1, n_tok], rows contiguous. `what` names the
// node in messages.
bool down_input_of(const ggml_tensor * down, int64_t n_ff, int64_t n_used, int64_t n_tok, const ggml_tensor *& input,
                   std::string & err);

// Adds one routed (token, slot)'s row `a` of n_ff values to an expert's
// channel accumulators: energy[c] += a_c², reap[c] += g·|a_c|·norm[c].
inline void add_channel_row(const float * a, int64_t n_ff, double g, const double * norm, double * energy, double * reap) {
    for (int64_t c = 0; c < n_ff; ++c) {
        const double x = a[c];
        energy[c] += x * x;
        reap[c] += g * std::abs(x) * norm[c];
    }
}

}  // namespace reap

// Reading build_moe_ffn's nodes (llama.cpp src/llama-graph.cpp) in an eval
// callback, shared by calibrate (src/llama/calibrate.cpp) and the width mask
// (src/llama/mask.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct ggml_tensor;

namespace reap {

// The routed expert ids of ffn_moe_topk-L: n_used per token, token by token,
// into `ids` (n_tok * n_used). The node is a strided view into the full argsort
// (nb[1] = n_expert * 4), read row by row, through the backend tensor API when
// its buffer is not host memory. Checks the type (I32), the shape [n_used,
// n_tok] and every id against n_expert; the message names the node.
bool read_routed_ids(const ggml_tensor * t, int64_t n_used, int64_t n_expert, std::vector<int32_t> & ids, int64_t & n_tok,
                     std::string & err);

// Whether a node base name ("ffn_moe_swiglu") is one of build_moe_ffn's
// activations of the experts' gate/up outputs (the input of the down
// projection, or, for a clamped SwiGLU, a factor of it).
bool is_moe_activation(const std::string & base);

// The layer L when t is a matrix product (MUL_MAT) whose src[0] is
// blk.L.ffn_down_shexp.weight (the shared expert's down projection), else -1.
// A weight the scheduler copied to another backend ("<backend>#<name>#<n>")
// counts by its name, as llama-imatrix reads it.
int shared_down_layer(const ggml_tensor * t);

}  // namespace reap

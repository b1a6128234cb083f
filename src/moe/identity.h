// Which model a GGUF file is, beyond its header: the one rule that plans,
// prune, eval and sweep use to tell "the same model" (at any quantisation,
// split or not) from "another model of the same shape".
//
// The identity is arch, block count, routed expert count, vocabulary size and
// the SHA-256 of the router weights (blk.L.ffn_gate_inp.weight, the bytes as
// the file holds them, in ascending L). The routers are the weights that
// matter for a plan (they decide which experts a token uses, and a plan is a
// choice among them) and they are the same in every quantisation of one
// model: llama-quantize never quantises them (the pinned llama.cpp's
// src/llama-quant.cpp, tensor_allows_quantization: `quantize &=
// name.find("ffn_gate_inp.weight") == std::string::npos`), so an F32, F16,
// Q8_0 or Q4_0 copy carries the same router bytes. They are small (n_expert x
// n_embd per MoE layer: about 0.1% of a large MoE), so hashing them is cheap
// next to the work of any command that uses it. Another fine-tune or another
// training run of the same shape has other routers.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "gguf/gguf.h"
#include "moe/layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap::moe {

struct model_identity {
    std::string arch;
    int64_t     n_layer = 0;   // <arch>.block_count
    int64_t     n_expert = 0;  // routed experts per MoE layer
    int64_t     n_vocab = 0;   // rows of token_embd.weight (0: the model has none)
    std::string router_sha256; // 64 hex digits
    // Not compared (they follow from the above for one model), for callers
    // that describe the model (the saliency fingerprint):
    int64_t          n_expert_used = 0;  // the largest of a per-layer array
    std::vector<int> moe_layers;         // the blocks with a router, ascending
};

// The SHA-256 of the routers of the blocks `lay` places (ascending block),
// read from the file in 1 MiB pieces (memory does not grow with the model).
// `layers` gets the blocks, ascending. Fails naming the tensor when a router
// lies outside [0, n_layer) or cannot be read.
// The context the model was trained at (<arch>.context_length), 0 when the
// header does not say: the longest window a pass should run on it.
int64_t trained_context(const gguf::model & m);

bool router_sha256(const gguf::model & m, const layout & lay, int64_t n_layer, std::vector<int> & layers, std::string & hex,
                   std::string & err);

// The identity of a model (read_moe_kv reads the keys, layout_of with
// describe_options places its experts and routers). Fails, naming the key or
// tensor, when it is not an MoE model the layout table can place.
bool identity_of(const gguf::model & m, model_identity & out, std::string & err);

// "" when `a` and `b` are the same model, else what differs with both values,
// each followed by its name: "router weights differ (sha256 0123456789abcdef...
// (plan.json) vs fedcba9876543210... (model.gguf))".
std::string identity_difference(const model_identity & a, const std::string & a_name, const model_identity & b,
                                const std::string & b_name);

} // namespace reap::moe

// reap::moe layout — which tensors of a Mixture-of-Experts GGUF carry the expert
// axis, along which dimension, and what the router of each architecture does.
//
// The slicer, the auditor, the census and the planner ask this table, never the
// tensor names directly, so that an architecture that adds a per-expert tensor
// is handled in one place. The table follows the pinned llama.cpp (v0.4.0):
// src/llama-arch.cpp (tensor names), src/llama-model.cpp and src/models/*.cpp
// (shapes given to create_tensor, hparams read per arch) and build_moe_ffn in
// src/llama-graph.cpp (routing).
//
// The rule, precisely:
//   * In GGUF the expert index is always the OUTERMOST non-trivial dimension of
//     a per-expert tensor, so expert e is bytes [e*S, (e+1)*S) of the tensor's
//     data, S = nbytes / n_expert, whatever the (block-quantised) type.
//   * Per-expert tensors are recognised by name and their shape is checked:
//       ffn_{gate,up,down,gate_up}_exps.weight        slab     ne[2] = n_expert
//       ffn_{gate,up,down,gate_up}_exps.bias          bias     ne[1] = n_expert (gpt-oss)
//       ffn_{gate,up,down,gate_up}_exps.{scale,input_scale}  ne[0] = n_expert (NVFP4 / gemma4 scales)
//       ffn_gate_inp.weight                           router   ne[1] = n_expert (rows)
//       ffn_gate_inp.bias                             router bias      ne[0] (gpt-oss)
//       exp_probs_b.bias, exp_probs_b_vl.bias         selection bias   ne[0] (DeepSeek-V3 family, kimi, glm;
//       exp_probs_b                                   hy_v3 writes it without the .bias suffix)
//     A wrong shape for one of these names is an error.
//   * Shared experts (*_shexp*, including qwen2moe's ffn_gate_inp_shexp) and the
//     dense parts of an MoE block (kimi-k3's ffn_routed_{down,up,norm}, nemotron's
//     ffn_latent_*, gemma4's ffn_gate_inp.scale, norms, attention, ...) are copied.
//   * Names llama.cpp gives to per-expert data that this table cannot slice
//     (deepseek4's ffn_gate_tid2eid holds expert ids, grovemoe's *_chexps are chunk
//     experts weighted by the router probability of expert e / experts_per_group,
//     which a renumbering cut moves to other experts; legacy per-expert ffn_gate.E tensors) are errors.
//   * Any other tensor with a dimension equal to n_expert is an error unless its
//     base name is one llama.cpp uses for a dense tensor (so attn_sinks of
//     n_head == n_expert heads is fine, an unknown "ffn_foo" of n_expert rows is not).
//   * A block is an MoE layer when it holds a router or an expert slab; it must then
//     hold both. Where the architecture fixes which blocks are MoE
//     (leading_dense_block_count, interleave_moe_layer_step), the tensors must agree.
//
// No llama.cpp / ggml dependency: plain C++17, plain structs, errors as values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reap::moe {

// One tensor as the GGUF header describes it (shape in ggml order: ne[0] innermost).
struct tensor_desc {
    std::string name;
    int         n_dims = 0;
    int64_t     ne[4]  = {1, 1, 1, 1};
    uint32_t    type   = 0;     // ggml type id (only carried through; slicing is byte-based)
    uint64_t    nbytes = 0;
};

// How a tensor is cut when experts are removed.
enum class slice_kind {
    none,           // copied unchanged
    expert_slab,    // 3-D expert weights: ne[2] = n_expert
    expert_rows,    // 2-D, ne[1] = n_expert: router weight, per-expert biases
    expert_vector,  // 1-D, ne[0] = n_expert: router bias, selection bias, per-expert scales
};

// What a tensor is, for reports and for the planner.
enum class tensor_kind {
    other,          // not part of an MoE FFN (attention, norms, embeddings, dense FFN, ...)
    expert_weight,  // ffn_*_exps.weight
    expert_bias,    // ffn_*_exps.bias
    expert_scale,   // ffn_*_exps.scale / .input_scale
    router_weight,  // ffn_gate_inp.weight
    router_bias,    // ffn_gate_inp.bias
    selection_bias, // exp_probs_b.bias, exp_probs_b_vl.bias
    shared_expert,  // *_shexp*: untouched
    moe_dense,      // other non-per-expert parts of an MoE FFN (latent projections, router input scale)
};

struct tensor_role {
    int         layer = -1;            // block index from "blk.N.", -1 for global tensors
    tensor_kind kind  = tensor_kind::other;
    slice_kind  slice = slice_kind::none;
    int         expert_dim = -1;       // index into ne of the expert axis, -1 when not sliced
    uint64_t    expert_bytes = 0;      // bytes of one expert (nbytes / n_expert) when sliced
};

// llama.cpp's llama_expert_gating_func_type, as stored in <arch>.expert_gating_func.
enum class gating_func : int {
    unknown        = 0,  // NONE in llama.cpp: absent and no arch default
    softmax        = 1,  // softmax over all experts, then top-k
    sigmoid        = 2,  // per-expert sigmoid
    softmax_weight = 3,  // top-k on logits, softmax over the k selected (gpt-oss)
    sqrt_softplus  = 4,
};
const char * gating_name(gating_func g);

// The MoE keys of a model's metadata (<arch>.<suffix>); unset = absent in the file.
// Fill from whatever GGUF reader you have; kv_key() spells the full key.
struct moe_kv {
    std::optional<int64_t> block_count;               // block_count
    std::optional<int64_t> expert_count;              // expert_count
    std::optional<int64_t> expert_used_count;         // expert_used_count (largest element if a per-layer array)
    std::optional<int64_t> expert_shared_count;       // expert_shared_count
    std::optional<int64_t> expert_group_count;        // expert_group_count
    std::optional<int64_t> expert_group_used_count;   // expert_group_used_count
    std::optional<int64_t> expert_gating_func;        // expert_gating_func
    std::optional<bool>    expert_weights_norm;       // expert_weights_norm
    std::optional<double>  expert_weights_scale;      // expert_weights_scale
    std::optional<int64_t> leading_dense_block_count; // leading_dense_block_count
    std::optional<int64_t> interleave_moe_layer_step; // interleave_moe_layer_step
    std::optional<int64_t> nextn_predict_layers;      // nextn_predict_layers
};
// "<arch>.<suffix>", e.g. kv_key("qwen3moe", "expert_count").
std::string kv_key(const std::string & arch, const char * suffix);

// What the router of a model does, as llama.cpp runs it (arch table + KV values).
struct router_facts {
    bool        known_arch = false;     // the arch is in this table
    gating_func gating = gating_func::unknown;
    bool        weights_norm = false;   // top-k weights renormalised to sum 1
    double      weights_scale = 1.0;    // applied after (0 and 1 mean none)
    int64_t     n_group = 0;            // expert_group_count (>1: group-limited routing)
    int64_t     n_group_used = 0;       // expert_group_used_count
    int64_t     n_expert_shared = 0;    // expert_shared_count, or 1 when shared-expert tensors exist without the key
    bool        selection_bias = false; // exp_probs_b tensors present
    bool        router_bias = false;    // ffn_gate_inp.bias present
    bool        weight_before_ffn = false;  // llama4: the weights scale the expert input
    // true when removing experts changes the weights of the experts that stay selected
    // (softmax over all experts without renormalisation): compare-with-original tests need it
    bool        weights_change_when_pruned = false;
};

// The classified model.
struct layout {
    std::string              arch;
    int64_t                  n_layer = 0;   // blocks: <arch>.block_count, else the highest block index + 1
    int64_t                  n_mtp = 0;     // MTP blocks: <arch>.nextn_predict_layers, clamped to 0..n_layer
    int64_t                  n_expert = 0;
    int64_t                  n_expert_used = 0;
    std::vector<tensor_role> roles;       // one per input tensor, same order
    std::vector<int>         moe_layers;  // ascending block indices (MTP blocks included)
    router_facts             router;

    // Whether block l is an MTP (nextn) block: one of the last n_mtp blocks.
    // llama.cpp runs them only in an MTP context (LLAMA_CONTEXT_TYPE_MTP), never
    // in the main graph, so llama-imatrix and the main forward pass never see them.
    bool is_mtp(int64_t l) const { return n_mtp > 0 && l >= n_layer - n_mtp && l < n_layer; }
};

// The number of blocks of a model: <arch>.block_count when the KV has it, else
// the highest block index among `tensors` + 1 (0 when no tensor is in a block).
int64_t n_layer_of(const moe_kv & kv, const std::vector<tensor_desc> & tensors);

// Whether `name` is a routed-expert weight ("blk.L.ffn_{gate,up,down,gate_up}_exps.weight");
// if so, its block index and base name ("ffn_down_exps", ...) are set.
bool parse_expert_weight(const std::string & name, int & layer, std::string & base);

// The block index L when `name` is a shared expert's down projection weight
// ("blk.L.ffn_down_shexp.weight"), else -1.
int shared_down_weight_layer(const std::string & name);

struct classify_options {
    // classify archs missing from the table with the name rules alone
    // (router facts then have known_arch = false). Off by default: a new arch is
    // exactly where unknown per-expert tensors appear.
    bool allow_unknown_arch = false;
    // check that the MoE blocks are the ones the arch fixes (leading_dense_block_count,
    // interleave_moe_layer_step, every block). Pruning needs it; describing a model
    // (inspect's census, the saliency fingerprint) takes the blocks the tensors show.
    bool check_block_rule = true;
};

// The options for describing a model rather than pruning it: unknown archs by
// the name rules alone, MoE blocks as the tensors show them. The expert axis is
// decided exactly as for pruning.
classify_options describe_options();

// Classifies every tensor. Fails, naming the tensor or layer, when: n_expert is
// missing or < 1; an MoE block lies outside block_count; a per-expert name has the wrong shape or a size not divisible by
// n_expert; a tensor has per-expert data this table cannot slice; an unknown tensor
// has a dimension equal to n_expert; an MoE block lacks its router or slabs; the
// MoE blocks disagree with leading_dense_block_count / interleave_moe_layer_step;
// or the arch is unknown (unless allowed).
bool classify(const std::string & arch, const moe_kv & kv, const std::vector<tensor_desc> & tensors,
              layout & out, std::string & err, const classify_options & opt = {});

// Router facts from the arch table and the KV values alone (no tensors: the
// tensor-derived fields stay false).
router_facts router_facts_for(const std::string & arch, const moe_kv & kv);

// Whether `arch` is in the table.
bool is_known_arch(const std::string & arch);

// Byte range of expert e inside a sliced tensor: [offset, offset + size).
// False when the role is not sliced or e is out of range.
bool expert_range(const tensor_role & role, int64_t n_expert, int64_t e, uint64_t & offset, uint64_t & size);

// The shape after keeping n_keep experts (the expert dim set to n_keep; others unchanged).
void pruned_shape(const tensor_desc & t, const tensor_role & role, int64_t n_keep, int64_t ne_out[4]);

const char * slice_name(slice_kind k);
const char * kind_name(tensor_kind k);

}  // namespace reap::moe

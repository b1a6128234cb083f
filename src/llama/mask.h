// Virtual pruning: runs a model in llama.cpp as if a plan's removed experts
// were gone, without writing a pruned file. reap eval --mask and reap sweep
// score cuts this way.
//
// How: the scheduler's eval callback asks for the router nodes of every MoE
// layer of build_moe_ffn (llama.cpp src/llama-graph.cpp) and, right after each
// is computed and before anything reads it, writes -inf into the removed
// experts' columns through the backend tensor API (ggml_backend_tensor_get /
// _set, so the data may live on any backend: CPU, CUDA, RPC, ...):
//
//   ffn_moe_logits-L        the router's logits. Everything else the router
//                           computes derives from them: softmax gives the
//                           removed experts 0 and a denominator over the kept
//                           ones only (what the pruned model's shorter softmax
//                           gives: qwen2moe's unnormalised weights too), sigmoid
//                           and sqrt-softplus give 0, a router bias keeps -inf.
//   ffn_moe_probs-L         the probabilities (for softmax-after-selection
//                           archs, gpt-oss, this is the logits tensor itself):
//                           -inf makes a removed expert lose every comparison,
//                           even against a kept expert whose probability
//                           underflowed to 0. Only selected experts' entries are
//                           ever read as weights, so the kept weights are
//                           untouched (and renormalisation runs over them).
//   ffn_moe_probs_biased-L  the selection score with exp_probs_b added
//                           (DeepSeek-V3 family, glm4moe, kimi): without this a
//                           removed expert's 0 + bias could still be chosen.
//                           Group-limited routers score each group by its best
//                           two from this tensor, so a group's score is computed
//                           over its kept experts only, exactly as the pruned
//                           model's renumbered groups give.
// llama4 selects on the logits (its sigmoid weights come after top-k): the
// first line covers it. Every node is masked where the graph has it; an MoE
// layer of the plan whose graph has neither ffn_moe_logits nor ffn_moe_probs
// is an error naming the layer, never an unmasked layer.
//
// On the CPU (nodes in host memory) the kept columns of ffn_moe_logits (an F32
// router matmul) and of ffn_moe_probs (a plain softmax of those logits) are
// then recomputed by the same ggml ops on the kept rows alone: what the pruned
// file's narrower router computes, bit for bit (mask.cpp says why the -inf
// mask alone rounds differently).
//
// The plan must fit the model exactly as reap prune requires (validate_plan),
// so a masked run and the pruned file select among the same experts.
//
// Width (virtual width pruning, set_width_mask): every expert keeps only some
// of its intermediate channels. The hook then also reads ffn_moe_topk-L (which
// expert each (token, slot) row went to) and, right after build_moe_ffn's
// activation of the gate/up outputs is computed (ffn_moe_swiglu-L, _geglu,
// _swiglu_oai, ... : the input of the down projection), zeroes each row's
// channels that its expert removes, before ffn_moe_down reads it: what a
// model whose down projection lacks those columns (and gate/up those rows)
// computes, down's requantisation aside. A clamped SwiGLU's factors are
// zeroed too (0 stays 0 through the clamp and the product). When ffn_moe_down-L
// is computed the hook checks that its input is the node it zeroed; a layer
// of the width mask without that is an error naming the layer.
//
// llama4's shared expert, cut with the routed ones (a width plan's
// shared_channels, set_width_shared): its FFN is build_ffn with the shexp
// tensors, whose activation (ffn_swiglu-L, or build_ffn's other activation
// names) is the input of the ffn_down_shexp matmul, named ffn_moe_shexp-L.
// The hook zeroes the removed shared channels of every token's row of that
// activation and, at ffn_moe_shexp-L, checks that the matmul reads
// ffn_down_shexp.weight times the node it zeroed; a layer whose graph does
// not show that is an error naming the layer.
#pragma once

#include "gguf/gguf.h"
#include "plan/plan.h"

#include <cstdint>
#include <string>
#include <vector>

struct ggml_tensor;

namespace reap {

// The experts a plan removes, per block of the model.
struct expert_mask {
    std::string                       name;        // the plan's path, for messages and reports
    int64_t                           n_expert = 0;
    int64_t                           n_keep = 0;
    std::vector<std::vector<uint8_t>> removed;     // [block][expert] = 1 when removed; empty for non-MoE blocks
    std::vector<int>                  moe_layers;  // the plan's layers that run in the main graph, ascending
                                                   // (MTP / nextn blocks carry experts but run only in an
                                                   // MTP context: masked there, never required here)
    std::vector<int>                  mtp_layers;  // the plan's MTP blocks, ascending (src/llama/mtp.h)
    std::string                       plan_sha256; // load_mask: SHA-256 of the plan bytes parsed
    std::string                       warning;     // the plan records no model fingerprint
    // width: channels per expert (0 = no width mask) and, per block, a bitmap of the removed
    // channels: n_expert rows of words_per_expert() words, bit c % 64 of word c / 64 of row e set
    // when expert e removes channel c (bits past n_ff clear); empty = the block keeps every channel.
    // A bit per channel because it is held while the model runs: at Kimi-K3 size (92 MoE layers x
    // 896 experts x 3,072 channels) that is 32 MB, where a byte or an id per channel was GBs.
    int64_t                            n_ff = 0;
    std::vector<std::vector<uint64_t>> removed_channels;
    size_t words_per_expert() const { return (size_t) ((n_ff + 63) / 64); }
    // the shared expert cut with the routed ones (llama4): per block, a bitmap of the channels it
    // removes (words_per_expert() words, same bit order); empty = the block's shared expert is whole
    std::vector<std::vector<uint64_t>> removed_shared_channels;
    bool has_shared_width(int block) const {
        return n_ff > 0 && block >= 0 && (size_t) block < removed_shared_channels.size() &&
               !removed_shared_channels[(size_t) block].empty();
    }
    bool has_width(int block) const {
        return n_ff > 0 && block >= 0 && (size_t) block < removed_channels.size() && !removed_channels[(size_t) block].empty();
    }
    // Whether expert e of block `block` (has_width) removes channel c (in [0, n_ff)).
    bool channel_removed(int block, int64_t e, int64_t c) const {
        const uint64_t * row = removed_channels[(size_t) block].data() + (size_t) e * words_per_expert();
        return (row[c / 64] >> (c % 64)) & 1;
    }
};

// Gives block `block` of `m` (an MoE block of the mask; m.n_ff set, >= 1) its
// width mask: expert experts[i] keeps channels[i] (in [0, n_ff), unique, at
// least one), every expert not listed keeps every channel (a removed expert
// is never routed to). Each block once. The message names the block, expert
// and channel; on failure `m` is partly set (discard it).
bool set_width_block(expert_mask & m, int block, const std::vector<int64_t> & experts,
                     const std::vector<std::vector<int64_t>> & channels, std::string & err);

// Gives block `block` of `m` (an MoE block of the mask; m.n_ff set) a mask of
// its shared expert's channels: it keeps `channels` (in [0, n_ff), unique, at
// least one), the others are zeroed. Each block once; the message names the
// block and channel.
bool set_width_shared(expert_mask & m, int block, const std::vector<int64_t> & channels, std::string & err);

// Gives `m` a width mask: n_ff channels per expert, and for each block of
// `kept` (block -> per expert, the channels it keeps) the other channels
// removed. Every block must be one of m's MoE blocks with exactly n_expert
// lists; channels in [0, n_ff), unique, at least one per expert. The message
// names the block, expert and channel; `m` is changed only on success.
bool set_width_mask(expert_mask & m, int64_t n_ff, const std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> & kept,
                    std::string & err);

// The mask of plan `p`, already checked against the model whose layout is
// `lay` (lay.is_mtp says which of the plan's blocks are MTP blocks). A width
// plan's mask also removes channels (set_width_mask): each kept source
// expert keep[i] keeps channels[i]; removed experts keep every channel (they
// are never routed to); a shared expert cut with them keeps the layer's
// shared_channels (set_width_shared). False with `err` only when the width mask is refused.
bool mask_of_plan(const plan & p, const std::string & name, const moe::layout & lay, expert_mask & out, std::string & err);

// Reads the plan at `path` once and checks it against `model` with the rules
// of reap prune (the same messages): made for this model (its fingerprint,
// plan_model_mismatch: another model's plan is refused, one without a
// fingerprint accepted with out.warning) and fitting its layout; a width
// plan's width as prune --down-type f32 takes it (the model's width, an arch
// whose experts can be cut; any K: the mask has no down type's blocks, prune's
// --down-type chooses them). The mask on
// success, with the hash of the bytes that were parsed. `model_name` names
// the model in messages.
bool load_mask(const std::string & path, const gguf::model & model, const std::string & model_name, expert_mask & out,
               std::string & err);
// The same for a plan in memory; `name` stands for it in messages.
bool mask_from_plan(const plan & p, const std::string & name, const gguf::model & model, const std::string & model_name,
                    expert_mask & out, std::string & err);

// The eval callback that applies a mask. Set `active` (nullptr = run the model
// as it is) and pass mask_hook::callback with the hook as user data in
// llama_context_params.cb_eval. After each llama_decode, check() reports a
// node that could not be masked or (when the decode had output rows) an MoE
// layer of the mask whose router the graph did not show, and resets the
// per-decode record. (A decode without outputs skips the last layer's FFN:
// llama.cpp computes it for output rows only.)
struct mask_hook {
    const expert_mask * active = nullptr;
    bool mtp_context = false;   // the hook of an MTP context: check() requires the MTP blocks' routers instead
    int n_threads = 1;          // for the router recomputed on the CPU (the context's batch threads)

    static bool callback(ggml_tensor * t, bool ask, void * user);

    bool check(bool had_outputs, std::string & err);

  private:
    bool mask_router(ggml_tensor * t, int which, int layer);
    bool width_node(ggml_tensor * t, bool ask);   // width masks: topk, activations, down
    bool shared_width_node(ggml_tensor * t, bool ask);   // the shared expert's activation and down (llama4)
    // the pruned model's router on the CPU, bit for bit (mask.cpp says why)
    void narrow_router_logits(const ggml_tensor * t, int layer);
    void narrow_router_softmax(const ggml_tensor * t, int layer);
    void scatter_kept(const float * narrow, int layer);

    std::vector<uint8_t> seen_;     // [block]: a router node was masked in this decode
    std::vector<uint8_t> width_seen_;  // [block]: the down projection's input was zeroed in this decode
    std::vector<float>   row_buf_;  // host copy of one node
    std::vector<float>   narrow_logits_;  // the kept columns of the last logits node recomputed, row after row
    const ggml_tensor *  narrow_logits_of_ = nullptr;
    int                  narrow_logits_layer_ = -1;
    std::vector<int32_t> ids_;      // width: the routed experts of the current layer's ubatch
    int64_t              ids_tok_ = 0, ids_layer_ = -1;
    const ggml_tensor *  zeroed_ = nullptr;   // width: the last activation node zeroed
    const ggml_tensor *  shared_zeroed_ = nullptr;   // width: the last shared-expert activation zeroed
    std::vector<uint8_t> shared_seen_;   // [block]: the shared expert's down input was zeroed in this decode
    std::string          error_;    // first problem in this decode
};

} // namespace reap

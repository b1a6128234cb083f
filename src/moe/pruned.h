// The shape of a pruned model: what `reap prune` writes when it keeps n_keep
// experts in every MoE layer, short of which experts. One rule for the
// output's header (tensor shapes, <arch>.expert_count, the provenance stamp)
// and so for its exact size, used by the slicer (prune::make_pruned_spec
// fills in the kept experts' bytes), the budget planner (plan --budget) and
// the census (inspect's sizes at keep counts). It sits below plan and prune
// so that neither includes the other for it.
//
// The size of a pruned file depends only on n_keep (and a width cut's K and
// down type), never on which experts or channels are kept: every sliced
// tensor keeps n_keep experts of expert_bytes each; with a width cut, gate/up
// keep K rows and down K columns per expert, down requantised (prune/width.h)
// to whole blocks of its type.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "gguf/gguf.h"
#include "moe/layout.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace reap::moe {

// Provenance keys written into pruned models (unless the stamp is off).
constexpr const char * k_key_plan_sha256         = "reap.plan.sha256";          // string
constexpr const char * k_key_source_expert_count = "reap.source.expert_count";  // u32
constexpr const char * k_key_version             = "reap.version";              // string
// Only when pruned with --allow-other-model: the model fingerprint the plan
// recorded, which is not the source's (plan::model_header_sha256).
constexpr const char * k_key_plan_other_model    = "reap.plan.other_model";     // string

// Per MoE layer L, "reap.source.expert_ids.L" (i32 array, n_keep long): the
// source's expert ids the file keeps, in the order of its expert axis, so that
// a reader maps experts back without the plan (prune writes the plan's keep
// lists; pruned_header writes 0..n_keep-1 there, which sizes the same).
constexpr const char * k_key_source_expert_ids   = "reap.source.expert_ids.";   // + block index
std::string source_expert_ids_key(int layer);
// Stamped into width-cut files: the experts' width in the source (u32).
constexpr const char * k_key_width_source_length = "reap.width.source_length";

// Every reap.source.expert_ids.L of `kvs`, checked as a hostile file's: L a
// block below n_layer, each list n_keep distinct ids below n_source. out:
// layer -> ids (empty when the file has none: pruned by an older reap).
bool read_kept_ids(const gguf::kv_store & kvs, int64_t n_layer, uint64_t n_source, uint64_t n_keep,
                   std::map<int64_t, std::vector<int64_t>> & out, std::string & err);

struct stamp_options {
    bool        stamp = true;       // append the reap.* provenance keys
    std::string plan_sha256;        // value of reap.plan.sha256 (the plan file's hash); required when stamp.
                                    // To predict sizes before the plan file exists, any 64-character
                                    // placeholder gives the same layout.
    std::string version;            // value of reap.version (empty: key omitted)
    std::string other_model;        // value of reap.plan.other_model (empty: key omitted)
};

// Sets <arch>.expert_count in `kvs` to n_keep, keeping the value type the
// store already has for it. Fails when the key is missing or not an integer.
bool set_expert_count(gguf::kv_store & kvs, const std::string & arch, int64_t n_keep, std::string & err);
// The same rule for any scalar integer key (the width cut's expert_feed_forward_length).
bool set_integer_kv(gguf::kv_store & kvs, const std::string & key, int64_t v, std::string & err);

// A width cut of every kept expert (plan.h "width"): K of the source's n_ff
// channels, ffn_down_exps requantised to `down_type` (unset: each down tensor
// keeps its type). keep = 0: no cut.
struct width_cut {
    int64_t                          n_ff = 0;
    int64_t                          keep = 0;
    std::optional<gguf::tensor_type> down_type;
};

// The KVs a width cut to K of `m` changes, set in `kvs`: <arch>.expert_feed_forward_length
// becomes K and, where the shared experts are sized n_ff x
// <arch>.expert_shared_count (moe/width.h: deepseek2, glm4moe, ...), that
// count becomes S/K so that their untouched tensors keep the shape llama.cpp
// expects (value types kept). Fails when K does not divide S. The one rule
// for the slicer (width_header) and reap verify's expected KVs.
bool width_kvs(const gguf::model & m, const layout & lay, int64_t k, gguf::kv_store & kvs, std::string & err);

// Reshapes `spec`, the pruned header of `m` (pruned_header), for width cut
// `w`: ffn_gate_exps / ffn_up_exps weights (ne[1]) and biases (ne[0]) and
// ffn_down_exps weights (ne[0]) become K wide, down takes its output type
// (and so the shared expert's ffn_{gate,up,down}_shexp where the cut takes
// it too: moe::width_cuts_shared, llama4),
// the KVs change as width_kvs says and, with `stamp`,
// k_key_width_source_length records n_ff. Data pieces are the
// caller's (prune::apply_width). Fails, naming the tensor, when one is not
// n_ff wide where the cut takes channels, or when K is outside 1..n_ff.
bool width_header(const gguf::model & m, const layout & lay, const width_cut & w, bool stamp, gguf::output_spec & spec,
                  std::string & err);

// The output of pruning `m` (classified as `lay`, roles in the order of
// m.tensors) to n_keep experts per MoE layer, without the expert bytes:
// tensors keep their order, names and types; every tensor the layout slices
// has n_keep on its expert axis and no pieces (the caller supplies
// n_keep x expert_bytes of data); every other tensor is copied whole. KVs keep
// their order (split.* dropped: the writer adds them when splitting),
// <arch>.expert_count becomes n_keep, and with the stamp on the provenance
// keys are set. Fails when n_keep is outside 1..n_expert, the layout does not
// belong to `m`, or the stamp lacks its 64-character plan hash.
bool pruned_header(const gguf::model & m, const layout & lay, int64_t n_keep, const stamp_options & stamp,
                   gguf::output_spec & out, std::string & err);

// Exactly the files `reap prune` writes for any plan keeping n_keep experts
// per MoE layer of `m` (cut to width `width` when width.keep > 0), written
// with `wo` (split options) to `target`: shard paths and exact file sizes
// (gguf::layout_output of the pruned header with the expert bytes accounted
// for).
bool pruned_files(const gguf::model & m, const layout & lay, int64_t n_keep, const stamp_options & stamp,
                  const gguf::write_options & wo, const std::string & target, std::vector<gguf::shard_layout> & shards,
                  std::string & err, const width_cut & width = {});

// The sum of pruned_files' sizes and the number of files.
bool pruned_bytes(const gguf::model & m, const layout & lay, int64_t n_keep, const stamp_options & stamp,
                  const gguf::write_options & wo, uint64_t & bytes, uint32_t & n_files, std::string & err,
                  const width_cut & width = {});

} // namespace reap::moe

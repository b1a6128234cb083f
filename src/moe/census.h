// The census of a MoE GGUF model, as `reap inspect` prints it: architecture,
// which blocks are MoE, expert counts, bytes by ggml type, the routed-expert
// pool against the dense rest, what a decode step reads, and the exact file
// size the model would have at a few expert keep counts.
//
// Which tensors carry the expert axis, which blocks are MoE and how the MoE
// keys are read (expert_used_count may be a per-layer array) is the layout
// table's rule (moe::layout_of with describe_options(): an arch missing from
// the table is described by the name rules alone); the sizes at a keep count
// are moe::pruned_files', the rule `reap prune` writes by.
#pragma once

#include "gguf/gguf.h"
#include "moe/pruned.h"

#include <map>
#include <string>
#include <vector>

namespace reap::moe {

struct type_count {
    uint64_t count = 0;
    uint64_t bytes = 0;
};

struct keep_size {
    uint32_t n_keep = 0;
    uint64_t file_bytes = 0;          // exact size of the pruned single-file output
    uint64_t expert_pool_bytes = 0;
};

struct census {
    std::string arch;
    uint32_t    n_layer = 0;               // moe::n_layer_of: <arch>.block_count, else the highest block index + 1
    std::vector<uint32_t> moe_layers;      // the layout's MoE blocks (router and expert slabs)
    std::vector<uint32_t> mtp_layers;      // those of them that are MTP blocks (the last
                                           // <arch>.nextn_predict_layers; llama.cpp runs them in its MTP context only)
    uint32_t    n_expert = 0;              // <arch>.expert_count (0 when absent: no MoE census)
    uint32_t    n_expert_used = 0;         // <arch>.expert_used_count (largest element of a per-layer array)
    uint32_t    n_expert_groups = 0;       // <arch>.expert_group_count (0 when absent)
    uint32_t    n_expert_groups_used = 0;  // <arch>.expert_group_used_count
    uint32_t    n_expert_shared = 0;       // <arch>.expert_shared_count
    uint32_t    n_shexp_tensors = 0;       // shared-expert tensors (*_shexp*)
    uint32_t    expert_ff_length = 0;      // <arch>.expert_feed_forward_length (0 when absent)
    uint64_t    n_tensors = 0;
    std::map<std::string, type_count> types;   // ggml type name -> count, bytes
    uint64_t    tensor_bytes = 0;          // all tensor data
    uint64_t    expert_pool_bytes = 0;     // routed-expert tensors: ffn_*_exps weights, biases, scales
    uint64_t    expert_bytes_per_layer = 0;// pool bytes of one expert in one MoE layer (max over layers)
    uint64_t    dense_bytes = 0;           // tensor_bytes - expert_pool_bytes
    uint64_t    file_bytes = 0;            // sum of the shard file sizes
    uint32_t    n_shards = 1;
    uint64_t    decode_bytes_per_token = 0;// dense + n_expert_used experts of every MoE layer
    std::vector<keep_size> keep_sizes;     // ascending n_keep
    // A file reap pruned (its reap.* stamp): the source's expert count, the
    // plan's hash, and per MoE layer the source expert ids kept, in the order
    // of the file's expert axis (empty for files pruned before reap wrote them).
    uint32_t    source_expert_count = 0;   // reap.source.expert_count (0: not a reap-pruned file)
    std::string plan_sha256;               // reap.plan.sha256
    std::map<uint32_t, std::vector<int64_t>> kept_ids;   // reap.source.expert_ids.L
};

// Takes the census of `m`. `extra_keeps` are keep counts to size besides
// 75%, 50% and 25% of n_expert (values outside 1..n_expert are rejected).
// The size at a keep count is that of the single file `reap prune` writes for
// any plan keeping that many experts per MoE layer, with `stamp` as prune
// runs (the default, no stamp, is `reap prune --no-stamp`). Fails with the
// layout table's message when the model has experts the table cannot place.
bool take_census(const gguf::model & m, const std::vector<uint32_t> & extra_keeps, census & out, std::string & err,
                 const stamp_options & stamp = stamp_options{false, "", "", ""});

// The census as one JSON object (keys as in the struct; "types" maps type name
// to {count, bytes}; "keep_sizes" is a list of {n_keep, file_bytes, expert_pool_bytes}).
std::string census_json(const census & c, int indent = 2);

} // namespace reap::moe

// The census of a MoE GGUF model (see census.h): read from the tensor names
// and the <arch>.* keys, with sizes at keep counts computed by the writer's
// own layout_output() so that they match what a prune would write.
#include "gguf/census.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

namespace reap::gguf {

long block_index(const std::string & name, size_t & dot) {
    if (name.compare(0, 4, "blk.") != 0) return -1;
    size_t i = 4;
    long n = 0;
    if (i >= name.size() || !isdigit((unsigned char) name[i])) return -1;
    while (i < name.size() && isdigit((unsigned char) name[i])) {
        n = n * 10 + (name[i] - '0');
        if (n > 1000000) return -1;
        ++i;
    }
    if (i >= name.size() || name[i] != '.') return -1;
    dot = i;
    return n;
}

namespace {

// The block index of "blk.N.something", or -1.
long block_of(const std::string & name) {
    size_t dot = 0;
    return block_index(name, dot);
}

bool contains(const std::string & s, const char * part) { return s.find(part) != std::string::npos; }

bool ends_with(const std::string & s, const std::string & suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Which dim of tensor `t` is the expert axis for the census' size estimate, or -1 if none.
int expert_axis(const tensor_info & t) {
    if (contains(t.name, "_exps")) return (int) t.n_dims - 1;
    if (ends_with(t.name, "ffn_gate_inp.weight")) return 1;
    if (ends_with(t.name, "ffn_gate_inp.bias") || ends_with(t.name, "exp_probs_b.bias")) return 0;
    return -1;
}

bool optional_u32(const kv_store & kvs, const std::string & key, uint32_t & out, std::string & err) {
    return kvs.get_u32_or(key, 0, out, err);
}

} // namespace

bool take_census(const model & m, const std::vector<uint32_t> & extra_keeps, census & c, std::string & err) {
    c = census{};
    if (!m.kvs.get_string_or(k_key_architecture, "", c.arch, err)) return false;
    const std::string a = c.arch + ".";
    if (!optional_u32(m.kvs, a + "block_count", c.n_layer, err) ||
        !optional_u32(m.kvs, a + "expert_count", c.n_expert, err) ||
        !optional_u32(m.kvs, a + "expert_used_count", c.n_expert_used, err) ||
        !optional_u32(m.kvs, a + "expert_group_count", c.n_expert_groups, err) ||
        !optional_u32(m.kvs, a + "expert_group_used_count", c.n_expert_groups_used, err) ||
        !optional_u32(m.kvs, a + "expert_shared_count", c.n_expert_shared, err) ||
        !optional_u32(m.kvs, a + "expert_feed_forward_length", c.expert_ff_length, err)) {
        return false;
    }
    c.n_shards = (uint32_t) m.shards.size();
    c.file_bytes = m.file_bytes();
    c.n_tensors = m.tensors.size();

    std::set<uint32_t> moe;
    std::map<long, uint64_t> pool_per_layer;
    long max_block = -1;
    for (const tensor_info & t : m.tensors) {
        type_count & tc = c.types[type_name(t.type)];
        tc.count++;
        tc.bytes += t.nbytes;
        c.tensor_bytes += t.nbytes;
        const long blk = block_of(t.name);
        max_block = std::max(max_block, blk);
        const bool exps = contains(t.name, "_exps");
        if (exps) {
            c.expert_pool_bytes += t.nbytes;
            if (blk >= 0) pool_per_layer[blk] += t.nbytes;
        }
        if (contains(t.name, "_shexp")) c.n_shexp_tensors++;
        if (blk >= 0 && (exps || contains(t.name, "ffn_gate_inp"))) moe.insert((uint32_t) blk);
    }
    if (c.n_layer == 0 && max_block >= 0) c.n_layer = (uint32_t) max_block + 1;
    c.moe_layers.assign(moe.begin(), moe.end());
    c.dense_bytes = c.tensor_bytes - c.expert_pool_bytes;
    c.decode_bytes_per_token = c.dense_bytes;
    if (c.n_expert > 0) {
        for (const auto & [blk, bytes] : pool_per_layer) {
            const uint64_t per_expert = bytes / c.n_expert;
            c.expert_bytes_per_layer = std::max(c.expert_bytes_per_layer, per_expert);
            c.decode_bytes_per_token += per_expert * std::min(c.n_expert_used, c.n_expert);
        }
    } else {
        c.decode_bytes_per_token += c.expert_pool_bytes;
    }

    // Exact single-file sizes at a few keep counts.
    std::set<uint32_t> keeps;
    for (uint32_t k : extra_keeps) {
        if (k < 1 || k > c.n_expert) {
            err = "--keep " + std::to_string(k) + " is outside 1.." + std::to_string(c.n_expert) +
                  (c.n_expert == 0 ? " (the model has no expert_count)" : "");
            return false;
        }
        keeps.insert(k);
    }
    if (c.n_expert > 0) {
        for (double f : {0.75, 0.5, 0.25}) {
            keeps.insert(std::max<uint32_t>(1, (uint32_t) std::lround(f * c.n_expert)));
        }
    }
    const output_spec base = spec_from_model(m);
    for (uint32_t k : keeps) {
        output_spec spec = base;
        spec.kvs.set_u32(a + "expert_count", k);
        keep_size ks;
        ks.n_keep = k;
        for (size_t i = 0; i < spec.tensors.size(); ++i) {
            const tensor_info & src = m.tensors[i];
            const int axis = expert_axis(src);
            if (axis < 0) continue;
            output_tensor & t = spec.tensors[i];
            if (t.ne[axis] != (int64_t) c.n_expert) {
                err = "tensor '" + src.name + "' " + src.shape_string() + ": expected " + std::to_string(c.n_expert) +
                      " experts along dim " + std::to_string(axis);
                return false;
            }
            t.ne[axis] = k;
            uint64_t nbytes = 0;
            if (!tensor_nbytes(t.type, t.n_dims, t.ne, nbytes, err, "tensor '" + t.name + "'")) return false;
            // Only the layout is computed: one piece of the right length stands for the kept slabs.
            t.pieces.assign(1, data_piece{m.path_of(src), src.file_offset, nbytes});
            if (nbytes == 0) t.pieces.clear();
            if (contains(t.name, "_exps")) ks.expert_pool_bytes += nbytes;
        }
        std::vector<shard_layout> layout;
        if (!layout_output(spec, write_options{}, "census.gguf", layout, err)) return false;
        ks.file_bytes = layout[0].file_bytes;
        c.keep_sizes.push_back(ks);
    }
    return true;
}

std::string census_json(const census & c, int indent) {
    nlohmann::ordered_json j;
    j["arch"] = c.arch;
    j["n_layer"] = c.n_layer;
    j["moe_layers"] = c.moe_layers;
    j["n_expert"] = c.n_expert;
    j["n_expert_used"] = c.n_expert_used;
    j["n_expert_groups"] = c.n_expert_groups;
    j["n_expert_groups_used"] = c.n_expert_groups_used;
    j["n_expert_shared"] = c.n_expert_shared;
    j["n_shexp_tensors"] = c.n_shexp_tensors;
    j["expert_ff_length"] = c.expert_ff_length;
    j["n_tensors"] = c.n_tensors;
    j["tensor_bytes"] = c.tensor_bytes;
    j["expert_pool_bytes"] = c.expert_pool_bytes;
    j["expert_bytes_per_layer"] = c.expert_bytes_per_layer;
    j["dense_bytes"] = c.dense_bytes;
    j["file_bytes"] = c.file_bytes;
    j["n_shards"] = c.n_shards;
    j["decode_bytes_per_token"] = c.decode_bytes_per_token;
    nlohmann::ordered_json types = nlohmann::ordered_json::object();
    for (const auto & [name, tc] : c.types) types[name] = {{"count", tc.count}, {"bytes", tc.bytes}};
    j["types"] = types;
    nlohmann::ordered_json keeps = nlohmann::ordered_json::array();
    for (const keep_size & k : c.keep_sizes) {
        keeps.push_back({{"n_keep", k.n_keep}, {"file_bytes", k.file_bytes}, {"expert_pool_bytes", k.expert_pool_bytes}});
    }
    j["keep_sizes"] = keeps;
    return j.dump(indent);
}

} // namespace reap::gguf

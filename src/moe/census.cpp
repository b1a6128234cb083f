// The census of a MoE GGUF model (see census.h): the MoE keys and the expert
// axis as the layout table reads them, sizes at keep counts as a prune would
// write them (moe::pruned_files).
#include "moe/census.h"

#include "moe/layout_gguf.h"
#include "util/json.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

namespace reap::moe {

namespace {

// A count from the MoE keys as a census field (absent: 0).
bool census_count(const std::optional<int64_t> & v, const std::string & key, uint32_t & out, std::string & err) {
    out = 0;
    if (!v) return true;
    if (*v < 0 || *v > int64_t(UINT32_MAX)) {
        err = "key '" + key + "' = " + std::to_string(*v) + " is not a count";
        return false;
    }
    out = uint32_t(*v);
    return true;
}

bool is_pool(tensor_kind k) {
    return k == tensor_kind::expert_weight || k == tensor_kind::expert_bias || k == tensor_kind::expert_scale;
}

// The reap.* stamp of a pruned file: each kept-id list checked against the
// file's expert count and the source's (a hostile file names what is wrong).
bool read_stamp(const gguf::model & m, census & c, std::string & err) {
    if (!m.kvs.has(k_key_source_expert_count)) return true;
    uint64_t n_source = 0;
    if (!m.kvs.get_u64(k_key_source_expert_count, n_source, err)) return false;
    if (n_source == 0 || n_source < c.n_expert || n_source > UINT32_MAX) {
        err = std::string("KV '") + k_key_source_expert_count + "' is " + std::to_string(n_source) +
              ", not a source of the file's " + std::to_string(c.n_expert) + " experts";
        return false;
    }
    c.source_expert_count = (uint32_t) n_source;
    if (!m.kvs.get_string_or(k_key_plan_sha256, "", c.plan_sha256, err)) return false;
    std::map<int64_t, std::vector<int64_t>> kept;
    if (!read_kept_ids(m.kvs, c.n_layer, n_source, c.n_expert, kept, err)) return false;
    for (auto & [layer, ids] : kept) c.kept_ids[(uint32_t) layer] = std::move(ids);
    return true;
}

} // namespace

bool take_census(const gguf::model & m, const std::vector<uint32_t> & extra_keeps, census & c, std::string & err,
                 const stamp_options & stamp) {
    c = census{};
    if (!m.kvs.get_string_or(gguf::k_key_architecture, "", c.arch, err)) return false;
    moe_kv kv;
    if (!read_moe_kv(m.kvs, c.arch, kv, err)) return false;
    auto count = [&](const std::optional<int64_t> & v, const char * suffix, uint32_t & out) {
        return census_count(v, kv_key(c.arch, suffix), out, err);
    };
    if (!count(n_layer_of(kv, tensor_descs(m)), "block_count", c.n_layer) ||
        !count(kv.expert_count, "expert_count", c.n_expert) ||
        !count(kv.expert_used_count, "expert_used_count", c.n_expert_used) ||
        !count(kv.expert_group_count, "expert_group_count", c.n_expert_groups) ||
        !count(kv.expert_group_used_count, "expert_group_used_count", c.n_expert_groups_used) ||
        !count(kv.expert_shared_count, "expert_shared_count", c.n_expert_shared) ||
        !m.kvs.get_u32_or(kv_key(c.arch, "expert_feed_forward_length"), 0, c.expert_ff_length, err)) {
        return false;
    }
    if (!read_stamp(m, c, err)) return false;
    c.n_shards = (uint32_t) m.shards.size();
    c.file_bytes = m.file_bytes();
    c.n_tensors = m.tensors.size();

    // The expert axis, as the slicer sees it; a model without experts has none.
    layout lay;
    const bool is_moe = c.n_expert > 0;
    if (is_moe && !layout_of(m, lay, err, describe_options())) return false;

    std::map<int, uint64_t> pool_per_layer;
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const gguf::tensor_info & t = m.tensors[i];
        type_count & tc = c.types[gguf::type_name(t.type)];
        tc.count++;
        tc.bytes += t.nbytes;
        c.tensor_bytes += t.nbytes;
        if (!is_moe) continue;
        const tensor_role & role = lay.roles[i];
        if (is_pool(role.kind)) {
            c.expert_pool_bytes += t.nbytes;
            pool_per_layer[role.layer] += t.nbytes;
        }
        if (role.kind == tensor_kind::shared_expert) c.n_shexp_tensors++;
    }
    c.moe_layers.assign(lay.moe_layers.begin(), lay.moe_layers.end());
    for (uint32_t l : c.moe_layers) {
        if (lay.is_mtp(l)) c.mtp_layers.push_back(l);
    }
    c.dense_bytes = c.tensor_bytes - c.expert_pool_bytes;
    c.decode_bytes_per_token = c.dense_bytes;
    for (const auto & [blk, bytes] : pool_per_layer) {
        const uint64_t per_expert = bytes / c.n_expert;
        c.expert_bytes_per_layer = std::max(c.expert_bytes_per_layer, per_expert);
        c.decode_bytes_per_token += per_expert * std::min(c.n_expert_used, c.n_expert);
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
    for (uint32_t k : keeps) {
        keep_size ks;
        ks.n_keep = k;
        std::vector<gguf::shard_layout> files;
        if (!pruned_files(m, lay, k, stamp, gguf::write_options{}, "census.gguf", files, err)) return false;
        ks.file_bytes = files[0].file_bytes;
        for (const tensor_role & role : lay.roles) {
            if (is_pool(role.kind)) ks.expert_pool_bytes += role.expert_bytes * k;
        }
        c.keep_sizes.push_back(ks);
    }
    return true;
}

std::string census_json(const census & c, int indent) {
    // the scalars, in the order --json prints them
    nlohmann::ordered_json j = {
        {"arch", c.arch}, {"n_layer", c.n_layer}, {"moe_layers", c.moe_layers}, {"mtp_layers", c.mtp_layers},
        {"n_expert", c.n_expert}, {"n_expert_used", c.n_expert_used}, {"n_expert_groups", c.n_expert_groups},
        {"n_expert_groups_used", c.n_expert_groups_used}, {"n_expert_shared", c.n_expert_shared},
        {"n_shexp_tensors", c.n_shexp_tensors}, {"expert_ff_length", c.expert_ff_length}, {"n_tensors", c.n_tensors},
        {"tensor_bytes", c.tensor_bytes}, {"expert_pool_bytes", c.expert_pool_bytes},
        {"expert_bytes_per_layer", c.expert_bytes_per_layer}, {"dense_bytes", c.dense_bytes},
        {"file_bytes", c.file_bytes}, {"n_shards", c.n_shards}, {"decode_bytes_per_token", c.decode_bytes_per_token}};
    nlohmann::ordered_json types = nlohmann::ordered_json::object();
    for (const auto & [name, tc] : c.types) types[name] = {{"count", tc.count}, {"bytes", tc.bytes}};
    j["types"] = types;
    nlohmann::ordered_json keeps = nlohmann::ordered_json::array();
    for (const keep_size & k : c.keep_sizes) {
        keeps.push_back({{"n_keep", k.n_keep}, {"file_bytes", k.file_bytes}, {"expert_pool_bytes", k.expert_pool_bytes}});
    }
    j["keep_sizes"] = keeps;
    if (c.source_expert_count > 0) {
        nlohmann::ordered_json kept = nlohmann::ordered_json::object();
        for (const auto & [layer, ids] : c.kept_ids) kept[std::to_string(layer)] = ids;
        j["pruned"] = {{"source_expert_count", c.source_expert_count}, {"plan_sha256", c.plan_sha256}, {"kept_ids", kept}};
    }
    return reap::util::json_text(j, indent);
}

} // namespace reap::moe

// Reads what the MoE layout table needs from an open GGUF model (see layout_gguf.h).
#include "moe/layout_gguf.h"

#include <algorithm>

namespace reap::moe {

bool read_moe_kv(const reap::gguf::kv_store & kvs, const std::string & arch, moe_kv & out, std::string & err) {
    out = moe_kv{};
    auto get_int = [&](const char * suffix, std::optional<int64_t> & dst) {
        const std::string key = kv_key(arch, suffix);
        if (!kvs.has(key)) {
            return true;
        }
        int64_t v = 0;
        std::string e1;
        if (kvs.get_i64(key, v, e1)) {
            dst = v;
            return true;
        }
        // per-layer arrays (llama.cpp's get_key_or_arr): the largest entry, as
        // llama.cpp validates n_expert_used_max (dense layers may hold 0)
        std::vector<int64_t> arr;
        std::string e2;
        if (kvs.get_i64_array(key, arr, e2) && !arr.empty()) {
            dst = *std::max_element(arr.begin(), arr.end());
            return true;
        }
        err = e1;
        return false;
    };
    if (!get_int("block_count", out.block_count) || !get_int("expert_count", out.expert_count) ||
        !get_int("expert_used_count", out.expert_used_count) ||
        !get_int("expert_shared_count", out.expert_shared_count) ||
        !get_int("expert_group_count", out.expert_group_count) ||
        !get_int("expert_group_used_count", out.expert_group_used_count) ||
        !get_int("expert_gating_func", out.expert_gating_func) ||
        !get_int("leading_dense_block_count", out.leading_dense_block_count) ||
        !get_int("interleave_moe_layer_step", out.interleave_moe_layer_step) ||
        !get_int("nextn_predict_layers", out.nextn_predict_layers)) {
        return false;
    }
    const std::string norm_key = kv_key(arch, "expert_weights_norm");
    if (kvs.has(norm_key)) {
        bool b = false;
        if (!kvs.get_bool(norm_key, b, err)) {
            return false;
        }
        out.expert_weights_norm = b;
    }
    const std::string scale_key = kv_key(arch, "expert_weights_scale");
    if (kvs.has(scale_key)) {
        double f = 0;
        if (!kvs.get_f64(scale_key, f, err)) {
            return false;
        }
        out.expert_weights_scale = f;
    }
    return true;
}

std::vector<tensor_desc> tensor_descs(const reap::gguf::model & m) {
    std::vector<tensor_desc> out;
    out.reserve(m.tensors.size());
    for (const auto & t : m.tensors) {
        tensor_desc d;
        d.name = t.name;
        d.n_dims = (int) t.n_dims;
        for (int i = 0; i < 4; ++i) {
            d.ne[i] = t.ne[i];
        }
        d.type = (uint32_t) t.type;
        d.nbytes = t.nbytes;
        out.push_back(std::move(d));
    }
    return out;
}

bool layout_of(const reap::gguf::model & m, layout & out, std::string & err, const classify_options & opt) {
    std::string arch;
    if (!m.kvs.get_string("general.architecture", arch, err)) {
        return false;
    }
    moe_kv kv;
    if (!read_moe_kv(m.kvs, arch, kv, err)) {
        return false;
    }
    return classify(arch, kv, tensor_descs(m), out, err, opt);
}

}  // namespace reap::moe

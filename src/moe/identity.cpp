// Model identity (see identity.h): arch, shape, vocabulary and the hash of
// the router bytes, and the one comparison every command uses.
#include "moe/identity.h"

#include "moe/layout_gguf.h"
#include "util/sha256.h"

#include <algorithm>
#include <map>

namespace reap::moe {

bool router_sha256(const gguf::model & m, const layout & lay, int64_t n_layer, std::vector<int> & layers, std::string & hex,
                   std::string & err) {
    std::map<int, const gguf::tensor_info *> routers;
    for (size_t i = 0; i < m.tensors.size() && i < lay.roles.size(); ++i) {
        const tensor_role & r = lay.roles[i];
        if (r.kind != tensor_kind::router_weight) continue;
        if (r.layer < 0 || r.layer >= n_layer) {
            err = "tensor '" + m.tensors[i].name + "': block " + std::to_string(r.layer) + " is outside block_count " +
                  std::to_string(n_layer);
            return false;
        }
        routers[r.layer] = &m.tensors[i];
    }
    util::sha256_stream h;
    std::vector<uint8_t> buf(1 << 20);
    layers.clear();
    for (const auto & [l, t] : routers) {
        layers.push_back(l);
        for (uint64_t off = 0; off < t->nbytes; off += buf.size()) {
            const uint64_t n = std::min<uint64_t>(buf.size(), t->nbytes - off);
            if (!gguf::read_tensor_bytes(m, *t, off, n, buf.data(), err)) return false;
            h.update(buf.data(), n);
        }
    }
    hex = h.hex();
    return true;
}

int64_t trained_context(const gguf::model & m) {
    std::string arch, e;
    uint32_t n = 0;
    if (!m.kvs.get_string(gguf::k_key_architecture, arch, e) || !m.kvs.get_u32_or(arch + ".context_length", 0, n, e)) return 0;
    return n;
}

bool identity_of(const gguf::model & m, model_identity & out, std::string & err) {
    model_identity id;
    if (!m.kvs.get_string(gguf::k_key_architecture, id.arch, err)) return false;
    const std::string & a = id.arch;
    // the MoE keys as the layout table reads them (expert_used_count may be a per-layer array)
    moe_kv kv;
    if (!read_moe_kv(m.kvs, a, kv, err)) return false;
    if (!kv.block_count) {
        err = "model has no '" + kv_key(a, "block_count") + "'";
        return false;
    }
    if (!kv.expert_count || *kv.expert_count < 1) {
        err = "model has no '" + kv_key(a, "expert_count") + "' >= 1: not a Mixture-of-Experts model";
        return false;
    }
    if (*kv.block_count < 0 || *kv.block_count > int64_t(UINT32_MAX) || *kv.expert_count > int64_t(UINT32_MAX)) {
        err = "model has '" + kv_key(a, "block_count") + "' = " + std::to_string(*kv.block_count) + ", '" +
              kv_key(a, "expert_count") + "' = " + std::to_string(*kv.expert_count) + ": out of range";
        return false;
    }
    id.n_layer = *kv.block_count;
    // the MoE blocks and their routers, as the layout table places them
    layout lay;
    if (!layout_of(m, lay, err, describe_options())) return false;
    id.n_expert = lay.n_expert;
    id.n_expert_used = lay.n_expert_used;
    for (const gguf::tensor_info & t : m.tensors) {
        if (t.name == "token_embd.weight" && t.n_dims >= 2) id.n_vocab = t.ne[1];
    }
    if (!router_sha256(m, lay, id.n_layer, id.moe_layers, id.router_sha256, err)) return false;
    out = std::move(id);
    return true;
}

std::string identity_difference(const model_identity & a, const std::string & a_name, const model_identity & b,
                                const std::string & b_name) {
    auto both = [&](const std::string & what, const std::string & x, const std::string & y) {
        return what + " " + x + " (" + a_name + ") vs " + y + " (" + b_name + ")";
    };
    if (a.arch != b.arch) return both("arch", "'" + a.arch + "'", "'" + b.arch + "'");
    if (a.n_layer != b.n_layer) return both("block count", std::to_string(a.n_layer), std::to_string(b.n_layer));
    if (a.n_expert != b.n_expert) return both("expert count", std::to_string(a.n_expert), std::to_string(b.n_expert));
    if (a.n_vocab != b.n_vocab) return both("vocabulary size", std::to_string(a.n_vocab), std::to_string(b.n_vocab));
    if (a.router_sha256 != b.router_sha256) {
        return both("router weights differ: sha256", a.router_sha256.substr(0, 16) + "...", b.router_sha256.substr(0, 16) + "...");
    }
    return "";
}

} // namespace reap::moe

// The width facts of a model (see width.h): its experts' intermediate width and
// the block size a width cut of their down projections must respect.
#include "moe/width.h"

#include "util/path.h"

#include <map>

namespace reap::moe {

std::string expert_width_key(const std::string & arch) {
    return kv_key(arch, "expert_feed_forward_length");
}

namespace {

// "blk.L.<base>.<suffix>" split into base and suffix ("" when not a block tensor).
bool split_block_name(const std::string & name, std::string & base, std::string & suffix) {
    size_t dot = 0;
    if (gguf::block_index(name, dot) < 0) return false;
    const std::string rest = name.substr(dot + 1);
    const size_t last = rest.rfind('.');
    if (last == std::string::npos) return false;
    base = rest.substr(0, last);
    suffix = rest.substr(last + 1);
    return true;
}

// Archs whose llama.cpp loader (pinned v0.4.0, src/models/*.cpp) reads the
// shared experts' width from <arch>.expert_shared_feed_forward_length. Every
// other arch with shared experts sizes them from expert_feed_forward_length
// (deepseek2, glm4moe, kimi-k3, dots1, minimax-m3: n_ff_exp * n_expert_shared;
// llama4: n_ff_exp), so cutting the routed experts' width would change the
// shape llama.cpp expects of the untouched shared experts.
const char * const k_shared_width_archs[] = {
    "qwen2moe", "qwen3next", "qwen35moe", "qwen4exp", "bailingmoe2", "bailingmoe3", "hunyuan-moe", "hy_v3",
    "nemotron_h", "granite", "granitemoe",
};

// Why the shared experts of `m` stop a width cut, "" when they do not.
std::string shared_expert_refusal(const gguf::model & m, const std::string & arch) {
    const gguf::tensor_info * shexp = nullptr;
    for (const gguf::tensor_info & t : m.tensors) {
        if (t.name.find("_shexp") != std::string::npos) {
            shexp = &t;
            break;
        }
    }
    if (!shexp) return "";
    bool reads_key = false;
    for (const char * a : k_shared_width_archs) reads_key = reads_key || arch == a;
    const std::string key = kv_key(arch, "expert_shared_feed_forward_length");
    if (!reads_key) {
        return "the model has shared experts (" + shexp->name + ") and llama.cpp's " + arch +
               " loader derives their width from " + expert_width_key(arch) +
               ": cutting the routed experts' width would break loading";
    }
    if (!m.kvs.has(key)) {
        return "the model has shared experts (" + shexp->name + ") but no " + key + ", so llama.cpp derives their width from " +
               expert_width_key(arch) + ": cutting the routed experts' width would break loading";
    }
    return "";
}

} // namespace

bool width_keeps_rows(const std::string & name) {
    std::string base, suffix;
    if (!split_block_name(name, base, suffix)) return false;
    return (base == "ffn_gate_exps" || base == "ffn_up_exps") && (suffix == "weight" || suffix == "bias");
}

bool width_cuts_columns(const std::string & name) {
    std::string base, suffix;
    if (!split_block_name(name, base, suffix)) return false;
    return base == "ffn_down_exps" && suffix == "weight";
}

bool expert_width_of(const gguf::model & m, const layout & lay, expert_width & out, std::string & err) {
    out = expert_width{};
    auto refuse = [&](const std::string & why) {
        out.n_ff = 0;
        out.refusal = why;
        return true;
    };
    const std::string key = expert_width_key(lay.arch);
    const gguf::kv * kv = m.kvs.find(key);
    if (!kv) return refuse("the model has no " + key + " (its experts' width is not a key a width cut could change)");
    if (kv->type == gguf::value_type::ARRAY) {
        return refuse(key + " is a per-layer array; a width cut writes one width for every expert");
    }
    int64_t n_ff = 0;
    if (!m.kvs.get_i64(key, n_ff, err)) return false;
    if (n_ff < 1) return refuse(key + " = " + std::to_string(n_ff) + " is not a width");

    // every MoE layer: separate gate, up and down slabs of width n_ff
    std::map<std::string, const gguf::tensor_info *> by_name;
    for (const gguf::tensor_info & t : m.tensors) by_name[t.name] = &t;
    bool have_down = false;
    for (int layer : lay.moe_layers) {
        const std::string blk = "blk." + std::to_string(layer) + ".";
        if (by_name.count(blk + "ffn_gate_up_exps.weight")) {
            return refuse(blk + "ffn_gate_up_exps.weight fuses gate and up: width cuts take experts with separate "
                          "ffn_gate_exps, ffn_up_exps and ffn_down_exps only");
        }
        for (const char * base : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
            auto it = by_name.find(blk + base + ".weight");
            if (it == by_name.end()) {
                return refuse("layer " + std::to_string(layer) + " has no " + base +
                              ".weight: width cuts take experts with separate ffn_gate_exps, ffn_up_exps and "
                              "ffn_down_exps only");
            }
            const gguf::tensor_info & t = *it->second;
            const bool down = std::string(base) == "ffn_down_exps";
            const int64_t width = down ? t.ne[0] : t.ne[1];
            if (width != n_ff) {
                return refuse(t.name + " " + t.shape_string() + " has width " + std::to_string(width) + ", " + key +
                              " is " + std::to_string(n_ff));
            }
            if (down) {
                const gguf::type_info * ti = gguf::find_type((uint32_t) t.type);
                if (!ti) return refuse(t.name + " has an unknown type " + std::to_string((uint32_t) t.type));
                if (!have_down || ti->block_size > out.down_block) {
                    out.down_block = ti->block_size;
                    out.down_type = t.type;
                    have_down = true;
                }
            }
        }
        for (const char * base : {"ffn_gate_exps", "ffn_up_exps"}) {
            auto it = by_name.find(blk + base + ".bias");
            if (it != by_name.end() && it->second->ne[0] != n_ff) {
                return refuse(it->first + " " + it->second->shape_string() + " does not have " + std::to_string(n_ff) +
                              " elements per expert");
            }
        }
    }
    const std::string shared = shared_expert_refusal(m, lay.arch);
    if (!shared.empty()) return refuse(shared);
    out.n_ff = n_ff;
    return true;
}

}  // namespace reap::moe

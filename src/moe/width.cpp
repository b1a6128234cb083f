// The width facts of a model (see width.h): its experts' intermediate width and
// the block size a width cut of their down projections must respect.
#include "moe/width.h"

#include "util/path.h"

#include <algorithm>
#include <map>
#include <vector>

namespace reap::moe {

std::string expert_width_key(const std::string & arch) {
    return kv_key(arch, "expert_feed_forward_length");
}

std::string expert_shared_count_key(const std::string & arch) {
    return kv_key(arch, "expert_shared_count");
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
// shared experts' width from <arch>.expert_shared_feed_forward_length.
const char * const k_shared_width_archs[] = {
    "qwen2moe", "qwen3next", "qwen35moe", "qwen4exp", "bailingmoe2", "bailingmoe3", "hunyuan-moe", "hy_v3",
    "nemotron_h", "granite", "granitemoe",
};
// Archs whose loader sizes the shared experts n_ff_exp x n_expert_shared
// (their ffn_{gate,up,down}_shexp) and whose graph runs them as one FFN:
// n_expert_shared is used nowhere else (grep of src/models/<arch>.cpp and
// src/llama-*.cpp: the loader, a log line, the model saver). kimi-k3 counts
// 0 as 1.
const char * const k_shared_count_archs[] = {"deepseek2", "glm4moe", "dots1", "minimax-m3", "kimi-k3"};

template <size_t N>
bool listed(const char * const (&list)[N], const std::string & arch) {
    for (const char * a : list) {
        if (arch == a) return true;
    }
    return false;
}

// The shared experts of a count arch: S = n_ff x count, checked against
// every shared-expert tensor's shape. `refusal` says why they cannot be kept
// whole; false (with `err`) only for a count key of the wrong type.
bool shared_count_width(const gguf::model & m, const std::string & arch, int64_t n_ff, int64_t & S, std::string & refusal,
                        std::string & err) {
    const std::string key = expert_shared_count_key(arch);
    if (!m.kvs.has(key)) {
        refusal = "the model has shared experts but no " + key + ", which llama.cpp's " + arch + " loader requires";
        return true;
    }
    int64_t count = 0;
    if (!m.kvs.get_i64(key, count, err)) return false;
    if (count == 0 && arch == "kimi-k3") count = 1;
    if (count < 1 || count > (int64_t(1) << 40) / n_ff) {
        refusal = key + " = " + std::to_string(count) + " does not count the model's shared experts";
        return true;
    }
    S = n_ff * count;
    for (const gguf::tensor_info & t : m.tensors) {
        if (t.name.find("_shexp") == std::string::npos) continue;
        std::string base, suffix;
        if (!split_block_name(t.name, base, suffix) || suffix != "weight" ||
            (base != "ffn_gate_shexp" && base != "ffn_up_shexp" && base != "ffn_down_shexp") || t.n_dims != 2) {
            refusal = "the model has shared-expert tensor " + t.name + " " + t.shape_string() + ", which llama.cpp's " +
                      arch + " loader does not size from " + key;
            return true;
        }
        const int64_t width = base == "ffn_down_shexp" ? t.ne[0] : t.ne[1];
        if (width != S) {
            refusal = t.name + " " + t.shape_string() + " is " + std::to_string(width) + " channels wide, not " +
                      expert_width_key(arch) + " x " + key + " = " + std::to_string(S) + " as llama.cpp's loader expects";
            S = 0;
            return true;
        }
    }
    return true;
}

// llama4's one shared expert per MoE layer, sized n_ff by its loader with no
// key of its own: every _shexp tensor is one of blk.L.ffn_{gate,up,down}_shexp.weight
// of an MoE layer L, 2-D and n_ff wide, and every MoE layer has all three (what
// the loader creates). `refusal` says what does not fit.
void shared_cut_shapes(const gguf::model & m, const layout & lay, int64_t n_ff, std::string & refusal) {
    const char * const bases[] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"};
    std::map<std::string, const gguf::tensor_info *> shexp;
    for (const gguf::tensor_info & t : m.tensors) {
        if (t.name.find("_shexp") == std::string::npos) continue;
        std::string base, suffix;
        const bool known = split_block_name(t.name, base, suffix) && suffix == "weight" &&
                           (base == bases[0] || base == bases[1] || base == bases[2]);
        size_t dot = 0;
        const int64_t layer = known ? gguf::block_index(t.name, dot) : -1;
        if (!known || !std::binary_search(lay.moe_layers.begin(), lay.moe_layers.end(), int(layer))) {
            refusal = "the model has shared-expert tensor " + t.name + ", which llama.cpp's llama4 loader does not create";
            return;
        }
        const int64_t width = base == "ffn_down_shexp" ? t.ne[0] : t.ne[1];
        if (t.n_dims != 2 || width != n_ff) {
            refusal = t.name + " " + t.shape_string() + " is not the 2-D shared expert " + std::to_string(n_ff) +
                      " channels wide (" + expert_width_key(lay.arch) + ") that llama.cpp's llama4 loader expects";
            return;
        }
        shexp[t.name] = &t;
    }
    for (int layer : lay.moe_layers) {
        for (const char * base : bases) {
            const std::string name = "blk." + std::to_string(layer) + "." + base + ".weight";
            if (!shexp.count(name)) {
                refusal = "layer " + std::to_string(layer) + " has no " + name + " (llama.cpp's llama4 loader requires "
                          "the shared expert's gate, up and down in every MoE layer)";
                return;
            }
        }
    }
}

// Why the shared experts of `m` stop a width cut ("" when they do not) and,
// for a count arch, their width S (else 0); `cut`: they are cut with the
// routed experts (llama4). False only as shared_count_width.
bool shared_experts_of(const gguf::model & m, const layout & lay, int64_t n_ff, int64_t & S, bool & cut,
                       std::string & refusal, std::string & err) {
    S = 0;
    cut = false;
    refusal.clear();
    const std::string & arch = lay.arch;
    const gguf::tensor_info * shexp = nullptr;
    for (const gguf::tensor_info & t : m.tensors) {
        if (t.name.find("_shexp") != std::string::npos) {
            shexp = &t;
            break;
        }
    }
    if (!shexp) return true;
    if (listed(k_shared_count_archs, arch)) return shared_count_width(m, arch, n_ff, S, refusal, err);
    const std::string key = kv_key(arch, "expert_shared_feed_forward_length");
    if (arch == "llama4") {
        shared_cut_shapes(m, lay, n_ff, refusal);
        cut = refusal.empty();
    } else if (!listed(k_shared_width_archs, arch)) {
        refusal = "the model has shared experts (" + shexp->name + ") and llama.cpp's " + arch +
                  " loader derives their width from " + expert_width_key(arch) +
                  ": cutting the routed experts' width would break loading";
    } else if (!m.kvs.has(key)) {
        refusal = "the model has shared experts (" + shexp->name + ") but no " + key + ", so llama.cpp derives their width from " +
                  expert_width_key(arch) + ": cutting the routed experts' width would break loading";
    }
    return true;
}

} // namespace

bool width_keeps_rows(const std::string & name, bool shared_cut) {
    std::string base, suffix;
    if (!split_block_name(name, base, suffix)) return false;
    if (base == "ffn_gate_exps" || base == "ffn_up_exps") return suffix == "weight" || suffix == "bias";
    return shared_cut && (base == "ffn_gate_shexp" || base == "ffn_up_shexp") && suffix == "weight";
}

bool width_cuts_columns(const std::string & name, bool shared_cut) {
    std::string base, suffix;
    if (!split_block_name(name, base, suffix)) return false;
    return suffix == "weight" && (base == "ffn_down_exps" || (shared_cut && base == "ffn_down_shexp"));
}

bool width_is_shared(const std::string & name) {
    std::string base, suffix;
    return split_block_name(name, base, suffix) && base.size() > 6 && base.compare(base.size() - 6, 6, "_shexp") == 0;
}

int width_channel_dim(const std::string & name) {
    std::string base, suffix;
    if (!split_block_name(name, base, suffix)) return 0;
    return suffix == "weight" && base.rfind("ffn_down", 0) != 0 ? 1 : 0;
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
    std::string shared;
    int64_t S = 0;
    bool cut = false;
    if (!shared_experts_of(m, lay, n_ff, S, cut, shared, err)) return false;
    if (!shared.empty()) return refuse(shared);
    if (cut) {   // ffn_down_shexp is requantised as ffn_down_exps: its blocks bound K too
        for (int layer : lay.moe_layers) {
            const gguf::tensor_info & t = *by_name.at("blk." + std::to_string(layer) + ".ffn_down_shexp.weight");
            const gguf::type_info * ti = gguf::find_type((uint32_t) t.type);
            if (!ti) return refuse(t.name + " has an unknown type " + std::to_string((uint32_t) t.type));
            if (ti->block_size > out.down_block) {
                out.down_block = ti->block_size;
                out.down_type = t.type;
            }
        }
    }
    out.n_ff = n_ff;
    out.shared_width = S;
    out.shared_cut = cut;
    return true;
}

bool width_cuts_shared(const gguf::model & m, const layout & lay) {
    expert_width w;
    std::string err;
    return expert_width_of(m, lay, w, err) && w.shared_cut;
}

std::string shared_width_refusal(int64_t shared_width, int64_t n_ff, int64_t block, int64_t k) {
    if (shared_width <= 0 || (k > 0 && shared_width % k == 0)) return "";
    // the widths that would work: divisors of S up to n_ff, in whole blocks
    std::vector<int64_t> fit;
    for (int64_t d = 1; d <= shared_width / d; ++d) {
        if (shared_width % d != 0) continue;
        for (int64_t w : {d, shared_width / d}) {
            if (w <= n_ff && w % std::max<int64_t>(block, 1) == 0) fit.push_back(w);
        }
    }
    std::sort(fit.begin(), fit.end());
    fit.erase(std::unique(fit.begin(), fit.end()), fit.end());
    std::string list;
    const size_t shown = std::min<size_t>(fit.size(), 16);
    for (size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + std::to_string(fit[i]);
    if (fit.size() > shown) list += " (and " + std::to_string(fit.size() - shown) + " more)";
    return "width " + std::to_string(k) + " does not divide " + std::to_string(shared_width) +
           ", the shared experts' width: they are kept whole as " + std::to_string(shared_width) +
           "/K shared experts of width K, so K must divide it; " +
           (fit.empty() ? std::string("no width up to ") + std::to_string(n_ff) + " does in whole blocks of " + std::to_string(block)
                        : "widths that fit: " + list);
}

}  // namespace reap::moe

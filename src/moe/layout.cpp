// The MoE layout table (see layout.h for the rules). Facts come from the pinned
// llama.cpp: tensor names from src/llama-arch.cpp, shapes from the create_tensor
// calls in src/models/*.cpp and src/llama-model.cpp (the generic per-expert
// ".scale"/".input_scale" pass), routing from the build_moe_ffn calls.
#include "moe/layout.h"

#include "util/path.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace reap::moe {

namespace {

// ---- arch table ------------------------------------------------------------------

enum class norm_src { fixed_false, fixed_true, from_kv };
enum class layer_rule {
    unchecked,      // MoE blocks detected from tensors only
    all,            // every block is MoE
    leading_dense,  // blocks < leading_dense_block_count are dense, the rest MoE
    interleave,     // block i is MoE iff (i + 1) % interleave_moe_layer_step == 0
};

struct arch_entry {
    const char * name;
    gating_func  gating;          // fixed gating, or unknown = read <arch>.expert_gating_func
    gating_func  gating_default;  // when read from KV and absent (llama.cpp's per-arch default)
    norm_src     norm;
    bool         weight_before_ffn;
    layer_rule   layers;
};

// Archs checked against their llama.cpp sources. The first seven are in the test zoo
// (tools/make_zoo.py) and run in llama.cpp in test_llama_zoo.
const arch_entry k_archs[] = {
    // name          gating (fixed)               default if from KV          norm                   w_before  layers
    {"qwen3moe",     gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::all},
    {"qwen2moe",     gating_func::softmax,        gating_func::unknown,       norm_src::fixed_false, false, layer_rule::all},
    {"deepseek2",    gating_func::unknown,        gating_func::softmax,       norm_src::from_kv,     false, layer_rule::leading_dense},
    {"gpt-oss",      gating_func::softmax_weight, gating_func::unknown,       norm_src::fixed_false, false, layer_rule::all},
    {"glm4moe",      gating_func::unknown,        gating_func::sigmoid,       norm_src::from_kv,     false, layer_rule::leading_dense},
    {"llama4",       gating_func::sigmoid,        gating_func::unknown,       norm_src::fixed_false, true,  layer_rule::interleave},
    {"kimi-k3",      gating_func::unknown,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::leading_dense},
    // read from the sources only (no zoo model yet)
    {"llama",        gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"qwen3vlmoe",   gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"qwen3next",    gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"qwen35moe",    gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"olmoe",        gating_func::softmax,        gating_func::unknown,       norm_src::fixed_false, false, layer_rule::unchecked},
    {"deepseek",     gating_func::softmax,        gating_func::unknown,       norm_src::fixed_false, false, layer_rule::unchecked},
    {"dbrx",         gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"grok",         gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"arctic",       gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"ernie4_5-moe", gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"mimo2",        gating_func::sigmoid,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"minimax-m2",   gating_func::unknown,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"kimi-linear",  gating_func::unknown,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"dots1",        gating_func::unknown,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::unchecked},
    {"bailingmoe2",  gating_func::unknown,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::unchecked},
    {"deepseek32",   gating_func::unknown,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::unchecked},
    // the MoE archs of tests/make_arch_models.cpp (test_llama_archs runs each in llama.cpp)
    {"minicpm",      gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},  // granite graph
    {"granite",      gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"granitemoe",   gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},  // granite graph
    {"mistral3",     gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"phimoe",       gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},  // phi3 graph
    {"qwen4exp",     gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"rnd1",         gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"llada-moe",    gating_func::softmax,        gating_func::unknown,       norm_src::fixed_false, false, layer_rule::unchecked},
    {"grovemoe",     gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"minimax-01",   gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"hunyuan-moe",  gating_func::softmax,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"bailingmoe",   gating_func::softmax,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::unchecked},
    {"smallthinker", gating_func::unknown,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},
    {"lfm2moe",      gating_func::unknown,        gating_func::unknown,       norm_src::fixed_true,  false, layer_rule::unchecked},  // lfm2 graph
    {"minimax-m3",   gating_func::unknown,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::unchecked},
    {"bailingmoe3",  gating_func::unknown,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::unchecked},
    {"deepseek4",    gating_func::unknown,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::unchecked},
    {"hy_v3",        gating_func::unknown,        gating_func::sigmoid,       norm_src::from_kv,     false, layer_rule::unchecked},
    {"glm-dsa",      gating_func::unknown,        gating_func::sigmoid,       norm_src::from_kv,     false, layer_rule::unchecked},
    {"nemotron_h",   gating_func::sigmoid,        gating_func::unknown,       norm_src::from_kv,     false, layer_rule::unchecked},  // per-layer expert_used_count
    {"mistral4",     gating_func::unknown,        gating_func::softmax,       norm_src::from_kv,     false, layer_rule::leading_dense},  // deepseek2 model
    // llama.cpp loads expert tensors for refact but its graph runs a dense FFN only
    // (build_ffn on the absent dense weights): no routing to describe
    {"refact",       gating_func::unknown,        gating_func::unknown,       norm_src::fixed_false, false, layer_rule::unchecked},
};

const arch_entry * find_arch(const std::string & arch) {
    for (const auto & a : k_archs) {
        if (arch == a.name) {
            return &a;
        }
    }
    return nullptr;
}

// ---- names -----------------------------------------------------------------------

// Base names (between "blk.N." and ".weight"/".bias"/...) that llama.cpp gives to
// dense tensors, per src/llama-arch.cpp. A dim that happens to equal n_expert in one
// of these is a coincidence (n_head, a rank, ...), not an expert axis.
const char * const k_dense_block_names[] = {
    "altup_correct_coef", "altup_correct_scale", "altup_predict_coef", "altup_router", "altup_router_norm",
    "attn_compressor_ape", "attn_compressor_gate", "attn_compressor_kv", "attn_compressor_norm",
    "attn_conv_base", "attn_conv_proj", "attn_gate", "attn_k", "attn_k_b", "attn_k_norm", "attn_kv",
    "attn_kv_a_mqa", "attn_kv_a_norm", "attn_kv_b", "attn_norm", "attn_norm_2", "attn_output", "attn_output_a",
    "attn_output_b", "attn_output_norm", "attn_q", "attn_q_a", "attn_q_a_norm", "attn_q_b", "attn_q_norm",
    "attn_qkv", "attn_res_score", "attn_rot_embd", "attn_sinks", "attn_sub_norm", "attn_v", "attn_v_b",
    "channel_mix_key", "channel_mix_lerp_k", "channel_mix_lerp_r", "channel_mix_receptance", "channel_mix_value",
    "ffn.act", "ffn_conv_base", "ffn_conv_proj", "ffn_down", "ffn_gate", "ffn_up", "ffn_norm", "ffn_norm_exps",
    "ffn_res_score", "ffn_sub_norm", "hc_attn_base", "hc_attn_down", "hc_attn_fn", "hc_attn_inject",
    "hc_attn_norm", "hc_attn_scale", "hc_attn_up", "hc_ffn_base", "hc_ffn_down", "hc_ffn_fn", "hc_ffn_inject",
    "hc_ffn_norm", "hc_ffn_scale", "hc_ffn_up", "indexer.attn_k", "indexer.attn_q_b", "indexer.k_norm",
    "indexer.k_proj", "indexer.proj", "indexer.q_norm", "indexer.q_proj", "indexer_compressor_ape",
    "indexer_compressor_gate", "indexer_compressor_kv", "indexer_compressor_norm", "inp_gate", "laurel_l",
    "laurel_post_norm", "laurel_r", "layer_output_norm", "layer_output_scale", "nextn.eh_proj",
    "nextn.embed_tokens", "nextn.enorm", "nextn.hnorm", "nextn.shared_head_head", "nextn.shared_head_norm",
    "ple_conv1d", "ple_key", "ple_norm_conv", "ple_norm_key", "ple_norm_query", "ple_value",
    "post_attention_norm", "post_ffw_norm", "post_ffw_norm_1", "post_ffw_norm_2", "post_norm", "pre_ffw_norm_2",
    "proj", "rope_freqs", "shortconv.conv", "shortconv.in_proj", "shortconv.out_proj", "ssm_a", "ssm_alpha",
    "ssm_b_norm", "ssm_ba", "ssm_beta", "ssm_c_norm", "ssm_conv1d", "ssm_conv1d_k", "ssm_conv1d_q",
    "ssm_conv1d_v", "ssm_d", "ssm_dt", "ssm_dt_norm", "ssm_f_a", "ssm_f_b", "ssm_g", "ssm_g_a", "ssm_g_b",
    "ssm_in", "ssm_norm", "ssm_out", "ssm_x", "time_mix_a0", "time_mix_a1", "time_mix_a2", "time_mix_decay",
    "time_mix_decay_w1", "time_mix_decay_w2", "time_mix_first", "time_mix_g1", "time_mix_g2", "time_mix_gate",
    "time_mix_k_a", "time_mix_k_k", "time_mix_key", "time_mix_lerp_fused", "time_mix_lerp_g",
    "time_mix_lerp_k", "time_mix_lerp_r", "time_mix_lerp_v", "time_mix_lerp_w", "time_mix_lerp_x",
    "time_mix_ln", "time_mix_output", "time_mix_r_k", "time_mix_receptance", "time_mix_v0", "time_mix_v1",
    "time_mix_v2", "time_mix_value", "time_mix_w0", "time_mix_w1", "time_mix_w2", "vis_attn_output",
    "vis_attn_qkv", "vis_down", "vis_gate", "vis_up",
};

// Dense parts of an MoE FFN that are not per expert.
const char * const k_moe_dense_names[] = {
    "ffn_routed_down", "ffn_routed_up", "ffn_routed_norm",   // kimi-k3 latent MoE
    "ffn_latent_down", "ffn_latent_up",                      // nemotron-h latent MoE
};

// Global (non-block) tensors, per src/llama-arch.cpp.
const char * const k_dense_global_names[] = {
    "token_embd", "token_embd_norm", "token_types", "position_embd", "output", "output_norm", "rope_freqs",
    "rope_factors_long", "rope_factors_short", "output_res_score", "output_hc_base", "output_hc_down",
    "output_hc_fn", "output_hc_norm", "output_hc_scale", "output_hc_up", "per_layer_token_embd",
    "per_layer_model_proj", "per_layer_proj_norm", "altup_proj", "altup_unembd_proj", "cls", "cls.output",
    "cls.norm", "enc.output_norm", "dec.output_norm", "dense_2", "dense_3", "conv1d", "fc", "d2t",
    "markov_w1", "markov_w2", "conf_proj", "masked_embd_centroids", "masked_embd_ordering",
    "nextn.pre_projection", "nextn.post_projection", "selector_predecessor", "selector_successor",
    "selector_hidden",
};

bool in_list(const std::string & s, const char * const * list, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (s == list[i]) {
            return true;
        }
    }
    return false;
}
template <size_t N>
bool in_list(const std::string & s, const char * const (&list)[N]) {
    return in_list(s, list, N);
}

using util::ends_with;
using util::starts_with;

struct parsed_name {
    int         layer = -1;   // from "blk.N."
    std::string base;         // e.g. "ffn_gate_exps", "nextn.eh_proj", "ssm_a"
    std::string suffix;       // "weight", "bias", "scale", "input_scale" or ""
};

parsed_name parse_name(const std::string & name) {
    parsed_name p;
    std::string rest = name;
    if (starts_with(name, "blk.")) {
        size_t i = 4;
        int64_t layer = 0;
        while (i < name.size() && name[i] >= '0' && name[i] <= '9' && layer < 1000000) {
            layer = layer * 10 + (name[i] - '0');
            ++i;
        }
        if (i > 4 && i < name.size() && name[i] == '.') {
            p.layer = (int) layer;
            rest = name.substr(i + 1);
        }
    }
    static const char * const suffixes[] = {"weight", "bias", "scale", "input_scale"};
    const size_t dot = rest.rfind('.');
    if (dot != std::string::npos && in_list(rest.substr(dot + 1), suffixes)) {
        p.base   = rest.substr(0, dot);
        p.suffix = rest.substr(dot + 1);
    } else {
        p.base = rest;
    }
    return p;
}

bool is_exps_base(const std::string & b) {
    return b == "ffn_gate_exps" || b == "ffn_up_exps" || b == "ffn_down_exps" || b == "ffn_gate_up_exps";
}

// "ffn_gate.7" etc.: llama.cpp's legacy one-tensor-per-expert layout
bool is_legacy_expert_base(const std::string & b) {
    for (const char * p : {"ffn_gate.", "ffn_up.", "ffn_down."}) {
        if (starts_with(b, p) && b.size() > std::strlen(p)) {
            const std::string tail = b.substr(std::strlen(p));
            if (std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; })) {
                return true;
            }
        }
    }
    return false;
}

std::string shape_str(const tensor_desc & t) {
    std::string s = "[";
    for (int d = 0; d < std::max(t.n_dims, 1) && d < 4; ++d) {
        s += (d ? ", " : "") + std::to_string(t.ne[d]);
    }
    return s + "]";
}

// Checks that dimension `dim` of t is the expert axis: ne[dim] == n_expert and
// every dimension above it is 1 (so each expert is one contiguous run of bytes).
bool check_expert_dim(const tensor_desc & t, int dim, int64_t n_expert, const char * what, std::string & err) {
    bool ok = t.n_dims > dim && t.ne[dim] == n_expert;
    for (int d = dim + 1; d < 4 && ok; ++d) {
        ok = t.ne[d] == 1;
    }
    if (!ok) {
        err = "tensor '" + t.name + "' (" + what + ") has shape " + shape_str(t) + ", expected n_expert = " +
              std::to_string(n_expert) + " in ne[" + std::to_string(dim) + "] as its outermost dimension";
        return false;
    }
    if (t.nbytes % (uint64_t) n_expert != 0) {
        err = "tensor '" + t.name + "' has " + std::to_string(t.nbytes) + " bytes, not divisible by n_expert = " +
              std::to_string(n_expert);
        return false;
    }
    return true;
}

bool has_dim_equal(const tensor_desc & t, int64_t n) {
    for (int d = 0; d < t.n_dims && d < 4; ++d) {
        if (t.ne[d] == n) {
            return true;
        }
    }
    return false;
}

// Classifies one tensor by name and shape. Returns false with err on a problem.
bool classify_one(const tensor_desc & t, int64_t n_expert, tensor_role & r, std::string & err) {
    const parsed_name p = parse_name(t.name);
    r = tensor_role{};
    r.layer = p.layer;

    if (t.n_dims < 1 || t.n_dims > 4) {
        err = "tensor '" + t.name + "' has " + std::to_string(t.n_dims) + " dimensions";
        return false;
    }

    auto sliced = [&](tensor_kind kind, slice_kind slice, int dim, const char * what) {
        if (!check_expert_dim(t, dim, n_expert, what, err)) {
            return false;
        }
        r.kind = kind;
        r.slice = slice;
        r.expert_dim = dim;
        r.expert_bytes = t.nbytes / (uint64_t) n_expert;
        return true;
    };

    if (p.layer >= 0) {
        const std::string & b = p.base;
        if (is_exps_base(b)) {
            if (p.suffix == "weight") {
                return sliced(tensor_kind::expert_weight, slice_kind::expert_slab, 2, "expert slab");
            }
            if (p.suffix == "bias") {
                return sliced(tensor_kind::expert_bias, slice_kind::expert_rows, 1, "per-expert bias");
            }
            if (p.suffix == "scale" || p.suffix == "input_scale") {
                return sliced(tensor_kind::expert_scale, slice_kind::expert_vector, 0, "per-expert scale");
            }
            err = "tensor '" + t.name + "': per-expert tensor of unknown kind";
            return false;
        }
        if (b == "ffn_gate_inp") {
            if (p.suffix == "weight") {
                return sliced(tensor_kind::router_weight, slice_kind::expert_rows, 1, "router");
            }
            if (p.suffix == "bias") {
                return sliced(tensor_kind::router_bias, slice_kind::expert_vector, 0, "router bias");
            }
            if (p.suffix == "scale") {
                // gemma4: a per-channel scale of the router input, [n_embd]
                r.kind = tensor_kind::moe_dense;
                return true;
            }
            err = "tensor '" + t.name + "': router tensor of unknown kind";
            return false;
        }
        // ".bias" in most archs; hy_v3 names it without a suffix
        if ((b == "exp_probs_b" || b == "exp_probs_b_vl") && (p.suffix == "bias" || p.suffix.empty())) {
            return sliced(tensor_kind::selection_bias, slice_kind::expert_vector, 0, "expert selection bias");
        }
        if (b.find("_shexp") != std::string::npos) {
            r.kind = tensor_kind::shared_expert;
            return true;
        }
        if (b == "ffn_gate_tid2eid") {
            err = "tensor '" + t.name + "' maps token ids to expert ids (hash routing); pruning it would need "
                  "renumbering its values, which is not supported";
            return false;
        }
        if (ends_with(b, "_chexps")) {
            // llama.cpp's grovemoe graph (build_moe_ffn, second pass) sends every token to
            // chunk expert e / experts_per_group of each selected expert e and weights it
            // by the router probability of expert e / experts_per_group: renumbering the
            // experts moves those weights to other experts, whatever the cut keeps.
            err = "tensor '" + t.name + "' holds grovemoe chunk experts: llama.cpp routes every token to "
                  "chunk expert e / experts_per_group of each expert e it selects, weighted by the router "
                  "probability of expert e / experts_per_group, so any cut (which renumbers the experts) "
                  "changes those weights; reap refuses grovemoe rather than write a model that computes "
                  "something else";
            return false;
        }
        if (is_legacy_expert_base(b)) {
            err = "tensor '" + t.name + "' is a per-expert tensor in the legacy one-tensor-per-expert layout; "
                  "convert the model with a current llama.cpp (stacked *_exps tensors) first";
            return false;
        }
        if (in_list(b, k_moe_dense_names)) {
            r.kind = tensor_kind::moe_dense;
            return true;
        }
        if (in_list(b, k_dense_block_names)) {
            return true;
        }
    } else if (in_list(p.base, k_dense_global_names)) {
        return true;
    }

    // not a name we know: fine unless its shape mentions n_expert
    if (has_dim_equal(t, n_expert)) {
        err = "tensor '" + t.name + "' has shape " + shape_str(t) + " with a dimension equal to n_expert = " +
              std::to_string(n_expert) + ", and the layout table does not know it; refusing to copy it unsliced";
        return false;
    }
    return true;
}

}  // namespace

// ---- public --------------------------------------------------------------------------

const char * gating_name(gating_func g) {
    switch (g) {
        case gating_func::softmax:        return "softmax";
        case gating_func::sigmoid:        return "sigmoid";
        case gating_func::softmax_weight: return "softmax_weight";
        case gating_func::sqrt_softplus:  return "sqrt_softplus";
        default:                          return "unknown";
    }
}

const char * slice_name(slice_kind k) {
    switch (k) {
        case slice_kind::expert_slab:   return "expert_slab";
        case slice_kind::expert_rows:   return "expert_rows";
        case slice_kind::expert_vector: return "expert_vector";
        default:                        return "none";
    }
}

const char * kind_name(tensor_kind k) {
    switch (k) {
        case tensor_kind::expert_weight:  return "expert_weight";
        case tensor_kind::expert_bias:    return "expert_bias";
        case tensor_kind::expert_scale:   return "expert_scale";
        case tensor_kind::router_weight:  return "router_weight";
        case tensor_kind::router_bias:    return "router_bias";
        case tensor_kind::selection_bias: return "selection_bias";
        case tensor_kind::shared_expert:  return "shared_expert";
        case tensor_kind::moe_dense:      return "moe_dense";
        default:                          return "other";
    }
}

std::string kv_key(const std::string & arch, const char * suffix) {
    return arch + "." + suffix;
}

int64_t n_layer_of(const moe_kv & kv, const std::vector<tensor_desc> & tensors) {
    if (kv.block_count) return *kv.block_count;
    int64_t highest = -1;
    for (const tensor_desc & t : tensors) highest = std::max<int64_t>(highest, parse_name(t.name).layer);
    return highest + 1;
}

bool parse_expert_weight(const std::string & name, int & layer, std::string & base) {
    parsed_name p = parse_name(name);
    if (p.layer < 0 || p.suffix != "weight" || !is_exps_base(p.base)) return false;
    layer = p.layer;
    base = std::move(p.base);
    return true;
}

int shared_down_weight_layer(const std::string & name) {
    const parsed_name p = parse_name(name);
    return p.layer >= 0 && p.base == "ffn_down_shexp" && p.suffix == "weight" ? p.layer : -1;
}

bool is_known_arch(const std::string & arch) {
    return find_arch(arch) != nullptr;
}

router_facts router_facts_for(const std::string & arch, const moe_kv & kv) {
    router_facts f;
    const arch_entry * a = find_arch(arch);
    f.known_arch = a != nullptr;

    gating_func g = gating_func::unknown;
    if (a && a->gating != gating_func::unknown) {
        g = a->gating;  // fixed by the arch's graph, whatever the KV says
    } else if (kv.expert_gating_func && *kv.expert_gating_func >= 1 && *kv.expert_gating_func <= 4) {
        g = (gating_func) *kv.expert_gating_func;
    } else if (a) {
        g = a->gating_default;
    }
    f.gating = g;

    if (a && a->norm == norm_src::fixed_true) {
        f.weights_norm = true;
    } else if (a && a->norm == norm_src::fixed_false) {
        f.weights_norm = false;
    } else {
        f.weights_norm = kv.expert_weights_norm.value_or(false);
    }
    const double scale = kv.expert_weights_scale.value_or(0.0);
    f.weights_scale = scale == 0.0 ? 1.0 : scale;  // build_moe_ffn skips 0 and 1
    f.n_group = kv.expert_group_count.value_or(0);
    f.n_group_used = kv.expert_group_used_count.value_or(0);
    f.n_expert_shared = kv.expert_shared_count.value_or(0);
    f.weight_before_ffn = a && a->weight_before_ffn;
    // only a softmax over all experts without renormalisation moves the weights of the
    // experts that stay; an unknown gating is treated as if it did
    f.weights_change_when_pruned = (g == gating_func::softmax && !f.weights_norm) || g == gating_func::unknown;
    return f;
}

bool expert_range(const tensor_role & role, int64_t n_expert, int64_t e, uint64_t & offset, uint64_t & size) {
    if (role.slice == slice_kind::none || e < 0 || e >= n_expert) {
        return false;
    }
    offset = (uint64_t) e * role.expert_bytes;
    size = role.expert_bytes;
    return true;
}

void pruned_shape(const tensor_desc & t, const tensor_role & role, int64_t n_keep, int64_t ne_out[4]) {
    for (int d = 0; d < 4; ++d) {
        ne_out[d] = t.ne[d];
    }
    if (role.slice != slice_kind::none && role.expert_dim >= 0 && role.expert_dim < 4) {
        ne_out[role.expert_dim] = n_keep;
    }
}

namespace {

// The expert, layer and group counts from the KVs, each checked.
bool read_counts(const std::string & arch, const moe_kv & kv, const std::vector<tensor_desc> & tensors,
                 layout & out, std::string & err) {
    if (!kv.expert_count || *kv.expert_count < 1) {
        err = "'" + kv_key(arch, "expert_count") + "' is missing or < 1: not a Mixture-of-Experts model";
        return false;
    }
    const int64_t n_expert = *kv.expert_count;
    out.n_expert = n_expert;
    out.n_layer = n_layer_of(kv, tensors);
    out.n_mtp = std::clamp<int64_t>(kv.nextn_predict_layers.value_or(0), 0, std::max<int64_t>(0, out.n_layer));
    out.n_expert_used = kv.expert_used_count.value_or(0);
    if (out.n_expert_used < 1 || out.n_expert_used > n_expert) {
        err = "'" + kv_key(arch, "expert_used_count") + "' = " + std::to_string(out.n_expert_used) +
              " is not in 1.." + std::to_string(n_expert);
        return false;
    }
    const int64_t n_group = kv.expert_group_count.value_or(0);
    if (n_group > 1) {
        const int64_t used = kv.expert_group_used_count.value_or(0);
        if (n_expert % n_group != 0 || used < 1 || used >= n_group) {
            err = "group-limited routing with " + kv_key(arch, "expert_group_count") + " = " +
                  std::to_string(n_group) + ", " + kv_key(arch, "expert_group_used_count") + " = " +
                  std::to_string(used) + " does not fit " + std::to_string(n_expert) + " experts";
            return false;
        }
    }
    return true;
}

// Which MoE parts one block has.
struct block_parts {
    bool router = false, down = false, up = false, any_slab = false, any_expert = false, any = false;
    std::string first_expert_tensor;
};

// What the tensors say, block by block, and the router extras seen anywhere.
struct tensor_census {
    std::map<int, block_parts> blocks;
    bool has_shexp = false, has_sel_bias = false, has_router_bias = false;
};

// Classifies every tensor into out.roles and tallies its block's parts.
bool classify_tensors(const std::vector<tensor_desc> & tensors, layout & out, tensor_census & census,
                      std::string & err) {
    out.roles.resize(tensors.size());
    std::set<std::string> seen;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const tensor_desc & t = tensors[i];
        if (!seen.insert(t.name).second) {
            err = "tensor '" + t.name + "' appears twice";
            return false;
        }
        tensor_role & r = out.roles[i];
        if (!classify_one(t, out.n_expert, r, err)) {
            return false;
        }
        if (r.layer < 0) {
            if (r.slice != slice_kind::none) {
                err = "tensor '" + t.name + "' has an expert axis but belongs to no block";
                return false;
            }
            continue;
        }
        block_parts & bp = census.blocks[r.layer];
        bp.any = true;
        const parsed_name p = parse_name(t.name);
        switch (r.kind) {
            case tensor_kind::router_weight: bp.router = true; break;
            case tensor_kind::expert_weight:
                bp.any_slab = true;
                bp.down = bp.down || p.base == "ffn_down_exps";
                bp.up = bp.up || p.base == "ffn_up_exps" || p.base == "ffn_gate_up_exps";
                break;
            case tensor_kind::shared_expert:  census.has_shexp = true; break;
            case tensor_kind::selection_bias: census.has_sel_bias = true; break;
            case tensor_kind::router_bias:    census.has_router_bias = true; break;
            default: break;
        }
        if (r.slice != slice_kind::none) {
            bp.any_expert = true;
            if (bp.first_expert_tensor.empty()) {
                bp.first_expert_tensor = t.name;
            }
        }
    }
    return true;
}

// The MoE blocks (a router with down and up slabs) into out.moe_layers.
bool find_moe_layers(const std::string & arch, const tensor_census & census, layout & out, std::string & err) {
    for (const auto & [il, bp] : census.blocks) {
        const std::string blk = "block " + std::to_string(il);
        if (!bp.router && !bp.any_slab) {
            if (bp.any_expert) {
                err = "tensor '" + bp.first_expert_tensor + "' is per-expert but " + blk +
                      " has neither a router nor expert slabs";
                return false;
            }
            continue;
        }
        if (!bp.router) {
            err = blk + " has expert slabs but no router 'blk." + std::to_string(il) + ".ffn_gate_inp.weight'";
            return false;
        }
        if (!bp.down || !bp.up) {
            err = blk + " has a router but is missing 'ffn_down_exps' or 'ffn_up_exps'/'ffn_gate_up_exps'";
            return false;
        }
        out.moe_layers.push_back(il);
    }
    if (out.moe_layers.empty()) {
        err = "no MoE block found (no blk.N.ffn_gate_inp.weight with expert slabs)";
        return false;
    }
    if (out.moe_layers.back() >= out.n_layer) {
        err = "MoE block " + std::to_string(out.moe_layers.back()) + " is outside " + kv_key(arch, "block_count") +
              " = " + std::to_string(out.n_layer);
        return false;
    }
    return true;
}

// The blocks the arch says are MoE must be the ones the tensors say.
bool check_block_rule(const arch_entry & a, const moe_kv & kv, const tensor_census & census, const layout & out,
                      std::string & err) {
    const std::set<int> moe(out.moe_layers.begin(), out.moe_layers.end());
    for (const auto & [il, bp] : census.blocks) {
        if (!bp.any) {
            continue;
        }
        bool want = moe.count(il) > 0;
        const char * why = nullptr;
        switch (a.layers) {
            case layer_rule::all:
                want = true;
                why = "every block of this arch is MoE";
                break;
            case layer_rule::leading_dense:
                want = il >= kv.leading_dense_block_count.value_or(0);
                why = "leading_dense_block_count";
                break;
            case layer_rule::interleave: {
                const int64_t step = kv.interleave_moe_layer_step.value_or(0);
                want = step > 0 && (il + 1) % step == 0;
                why = "interleave_moe_layer_step";
            } break;
            case layer_rule::unchecked: break;
        }
        if (want != (moe.count(il) > 0)) {
            err = "block " + std::to_string(il) + (want ? " should be MoE" : " should be dense") + " (" + why +
                  ") but its tensors say otherwise";
            return false;
        }
    }
    return true;
}

bool classify_impl(const std::string & arch, const moe_kv & kv, const std::vector<tensor_desc> & tensors,
                   layout & out, std::string & err, const classify_options & opt) {
    out = layout{};
    out.arch = arch;
    const arch_entry * a = find_arch(arch);
    if (!a && !opt.allow_unknown_arch) {
        err = "architecture '" + arch + "' is not in the MoE layout table (src/moe/layout.cpp); "
              "its per-expert tensors are unverified";
        return false;
    }
    if (!read_counts(arch, kv, tensors, out, err)) return false;
    tensor_census census;
    if (!classify_tensors(tensors, out, census, err)) return false;
    if (!find_moe_layers(arch, census, out, err)) return false;
    if (a && opt.check_block_rule && !check_block_rule(*a, kv, census, out, err)) return false;

    out.router = router_facts_for(arch, kv);
    out.router.selection_bias = census.has_sel_bias;
    out.router.router_bias = census.has_router_bias;
    if (out.router.n_expert_shared == 0 && census.has_shexp) {
        out.router.n_expert_shared = 1;
    }
    return true;
}

}  // namespace

classify_options describe_options() {
    classify_options o;
    o.allow_unknown_arch = true;
    o.check_block_rule = false;
    return o;
}

bool classify(const std::string & arch, const moe_kv & kv, const std::vector<tensor_desc> & tensors,
              layout & out, std::string & err, const classify_options & opt) {
    return classify_impl(arch, kv, tensors, out, err, opt);
}

}  // namespace reap::moe

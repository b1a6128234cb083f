// test_moe_layout.cpp: the MoE layout table (src/moe/layout.h). Tensor lists
// with the shapes llama.cpp's load_arch_tensors gives every zoo arch (qwen3moe,
// qwen2moe, deepseek2, gpt-oss, glm4moe, llama4, kimi-k3) are classified and the
// expert axis of each tensor checked; then the error rules (unknown tensors with
// an n_expert dim, wrong shapes, unsliceable per-expert data, block rules) and
// the per-arch router facts. Last, the real zoo files (tools/make_zoo.py) are read
// with reap::gguf (moe/layout_gguf.h) and classified, so the lists here cannot drift from the models
// that llama.cpp actually loads (test_llama_zoo).
#include "moe/layout.h"

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "moe/layout_gguf.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

using namespace reap::moe;

namespace {

constexpr uint32_t T_F32 = 0, T_F16 = 1, T_Q4_K = 12, T_MXFP4 = 39;

uint64_t nbytes_of(uint32_t type, const int64_t ne[4]) {
    const uint64_t n = (uint64_t) ne[0] * ne[1] * ne[2] * ne[3];
    switch (type) {
        case T_F32:   return n * 4;
        case T_F16:   return n * 2;
        case T_Q4_K:  return n / 256 * 144;
        case T_MXFP4: return n / 32 * 17;
        default:      return 0;
    }
}

// A tensor list built the way llama-model.cpp names and shapes them.
struct model_spec {
    std::string arch;
    moe_kv kv;
    std::vector<tensor_desc> t;

    void add(const std::string & name, std::initializer_list<int64_t> ne, uint32_t type = T_F16) {
        tensor_desc d;
        d.name = name;
        d.n_dims = (int) ne.size();
        int i = 0;
        for (int64_t x : ne) {
            d.ne[i++] = x;
        }
        d.type = type;
        d.nbytes = nbytes_of(type, d.ne);
        t.push_back(d);
    }
    std::string b(int il, const char * rest) const { return "blk." + std::to_string(il) + "." + rest; }

    void globals(int64_t n_embd, int64_t n_vocab = 267) {
        add("token_embd.weight", {n_embd, n_vocab});
        add("output_norm.weight", {n_embd}, T_F32);
        add("output.weight", {n_embd, n_vocab});
    }
    void gqa(int il, int64_t n_embd, int64_t n_head, int64_t n_kv, int64_t hd) {
        add(b(il, "attn_norm.weight"), {n_embd}, T_F32);
        add(b(il, "attn_q.weight"), {n_embd, n_head * hd});
        add(b(il, "attn_k.weight"), {n_embd, n_kv * hd});
        add(b(il, "attn_v.weight"), {n_embd, n_kv * hd});
        add(b(il, "attn_output.weight"), {n_head * hd, n_embd});
    }
    void slabs(int il, int64_t n_in, int64_t n_ff, int64_t n_expert, uint32_t type = T_F16) {
        add(b(il, "ffn_gate_exps.weight"), {n_in, n_ff, n_expert}, type);
        add(b(il, "ffn_up_exps.weight"), {n_in, n_ff, n_expert}, type);
        add(b(il, "ffn_down_exps.weight"), {n_ff, n_in, n_expert}, type);
    }
    void router(int il, int64_t n_embd, int64_t n_expert) {
        add(b(il, "ffn_gate_inp.weight"), {n_embd, n_expert}, T_F32);
    }
    void shexp(int il, int64_t n_embd, int64_t n_ff) {
        add(b(il, "ffn_gate_shexp.weight"), {n_embd, n_ff});
        add(b(il, "ffn_up_shexp.weight"), {n_embd, n_ff});
        add(b(il, "ffn_down_shexp.weight"), {n_ff, n_embd});
    }
    void dense(int il, int64_t n_embd, int64_t n_ff) {
        add(b(il, "ffn_gate.weight"), {n_embd, n_ff});
        add(b(il, "ffn_up.weight"), {n_embd, n_ff});
        add(b(il, "ffn_down.weight"), {n_ff, n_embd});
    }
    void set_counts(int64_t n_layer, int64_t n_expert, int64_t n_used) {
        kv.block_count = n_layer;
        kv.expert_count = n_expert;
        kv.expert_used_count = n_used;
    }
    const tensor_desc * find(const std::string & name) const {
        for (const auto & d : t) {
            if (d.name == name) {
                return &d;
            }
        }
        return nullptr;
    }
};

model_spec qwen3moe(int64_t n_embd = 64, int64_t n_expert = 16) {
    model_spec m{"qwen3moe", {}, {}};
    m.set_counts(3, n_expert, 4);
    m.globals(n_embd);
    for (int il = 0; il < 3; ++il) {
        m.gqa(il, n_embd, 4, 2, 16);
        m.add(m.b(il, "attn_q_norm.weight"), {16}, T_F32);
        m.add(m.b(il, "attn_k_norm.weight"), {16}, T_F32);
        m.add(m.b(il, "ffn_norm.weight"), {n_embd}, T_F32);
        m.router(il, n_embd, n_expert);
        m.slabs(il, n_embd, 32, n_expert);
    }
    return m;
}

model_spec qwen2moe() {
    model_spec m{"qwen2moe", {}, {}};
    m.set_counts(2, 8, 2);
    m.globals(64);
    for (int il = 0; il < 2; ++il) {
        m.gqa(il, 64, 4, 2, 16);
        m.add(m.b(il, "attn_q.bias"), {64}, T_F32);
        m.add(m.b(il, "attn_k.bias"), {32}, T_F32);
        m.add(m.b(il, "attn_v.bias"), {32}, T_F32);
        m.add(m.b(il, "ffn_norm.weight"), {64}, T_F32);
        m.router(il, 64, 8);
        m.slabs(il, 64, 32, 8);
        m.add(m.b(il, "ffn_gate_inp_shexp.weight"), {64}, T_F32);
        m.shexp(il, 64, 64);
    }
    return m;
}

void mla(model_spec & m, int il, int64_t n_embd, int64_t n_head, int64_t q_lora, bool out_gate) {
    const int64_t kv_lora = 32, nope = 16, rope = 8, v = 16;
    if (q_lora) {
        m.add(m.b(il, "attn_q_a_norm.weight"), {q_lora}, T_F32);
        m.add(m.b(il, "attn_q_a.weight"), {n_embd, q_lora});
        m.add(m.b(il, "attn_q_b.weight"), {q_lora, n_head * (nope + rope)});
    } else {
        m.add(m.b(il, "attn_q.weight"), {n_embd, n_head * (nope + rope)});
    }
    m.add(m.b(il, "attn_kv_a_norm.weight"), {kv_lora}, T_F32);
    m.add(m.b(il, "attn_kv_a_mqa.weight"), {n_embd, kv_lora + rope});
    m.add(m.b(il, "attn_k_b.weight"), {nope, kv_lora, n_head});
    m.add(m.b(il, "attn_v_b.weight"), {kv_lora, v, n_head});
    if (out_gate) {
        m.add(m.b(il, "attn_gate.weight"), {n_embd, n_head * v});
    }
    m.add(m.b(il, "attn_output.weight"), {n_head * v, n_embd});
}

model_spec deepseek2() {
    model_spec m{"deepseek2", {}, {}};
    m.set_counts(3, 16, 4);
    m.kv.leading_dense_block_count = 1;
    m.kv.expert_shared_count = 1;
    m.kv.expert_weights_scale = 2.5;
    m.kv.expert_weights_norm = true;
    m.kv.expert_gating_func = 2;
    m.kv.expert_group_count = 4;
    m.kv.expert_group_used_count = 2;
    m.globals(64);
    for (int il = 0; il < 3; ++il) {
        m.add(m.b(il, "attn_norm.weight"), {64}, T_F32);
        mla(m, il, 64, 4, 32, false);
        m.add(m.b(il, "ffn_norm.weight"), {64}, T_F32);
        if (il == 0) {
            m.dense(il, 64, 256);
            continue;
        }
        m.router(il, 64, 16);
        m.add(m.b(il, "exp_probs_b.bias"), {16}, T_F32);
        m.slabs(il, 64, 32, 16);
        m.shexp(il, 64, 32);
    }
    return m;
}

model_spec gpt_oss() {
    model_spec m{"gpt-oss", {}, {}};
    m.set_counts(2, 8, 2);
    m.globals(64);
    for (int il = 0; il < 2; ++il) {
        m.gqa(il, 64, 4, 2, 16);
        m.add(m.b(il, "post_attention_norm.weight"), {64}, T_F32);
        m.add(m.b(il, "attn_output.bias"), {64}, T_F32);
        m.add(m.b(il, "attn_sinks.weight"), {4}, T_F32);
        m.router(il, 64, 8);
        m.add(m.b(il, "ffn_gate_inp.bias"), {8}, T_F32);
        m.slabs(il, 64, 32, 8, T_MXFP4);
        m.add(m.b(il, "ffn_gate_exps.bias"), {32, 8}, T_F32);
        m.add(m.b(il, "ffn_up_exps.bias"), {32, 8}, T_F32);
        m.add(m.b(il, "ffn_down_exps.bias"), {64, 8}, T_F32);
    }
    return m;
}

model_spec glm4moe() {
    model_spec m{"glm4moe", {}, {}};
    m.set_counts(3, 16, 4);
    m.kv.leading_dense_block_count = 1;
    m.kv.expert_shared_count = 1;
    m.kv.expert_weights_norm = true;
    m.kv.expert_gating_func = 2;
    m.globals(64);
    for (int il = 0; il < 3; ++il) {
        m.gqa(il, 64, 4, 2, 16);
        m.add(m.b(il, "post_attention_norm.weight"), {64}, T_F32);
        if (il == 0) {
            m.dense(il, 64, 256);
            continue;
        }
        m.router(il, 64, 16);
        m.add(m.b(il, "exp_probs_b.bias"), {16}, T_F32);
        m.slabs(il, 64, 32, 16);
        m.shexp(il, 64, 32);
    }
    return m;
}

model_spec llama4() {
    model_spec m{"llama4", {}, {}};
    m.set_counts(4, 8, 2);
    m.kv.interleave_moe_layer_step = 2;
    m.globals(64);
    for (int il = 0; il < 4; ++il) {
        m.gqa(il, 64, 4, 2, 16);
        m.add(m.b(il, "ffn_norm.weight"), {64}, T_F32);
        if ((il + 1) % 2 != 0) {
            m.dense(il, 64, 128);
            continue;
        }
        m.router(il, 64, 8);
        m.slabs(il, 64, 32, 8);
        m.shexp(il, 64, 32);
    }
    return m;
}

model_spec kimi_k3() {
    model_spec m{"kimi-k3", {}, {}};
    const int64_t n_embd = 64, n_head = 4, hd = 16, d_inner = n_head * hd, latent = 32, n_expert = 16;
    m.set_counts(4, n_expert, 4);
    m.kv.leading_dense_block_count = 1;
    m.kv.expert_shared_count = 1;
    m.kv.expert_weights_scale = 2.5;
    m.kv.expert_weights_norm = true;
    m.kv.expert_gating_func = 2;
    m.globals(n_embd);
    m.add("output_res_score.weight", {n_embd}, T_F32);
    for (int il = 0; il < 4; ++il) {
        m.add(m.b(il, "attn_norm.weight"), {n_embd}, T_F32);
        m.add(m.b(il, "ffn_norm.weight"), {n_embd}, T_F32);
        m.add(m.b(il, "attn_res_score.weight"), {n_embd}, T_F32);
        m.add(m.b(il, "ffn_res_score.weight"), {n_embd}, T_F32);
        if (il < 3) {  // KDA
            for (const char * x : {"q", "k", "v"}) {
                m.add(m.b(il, (std::string("ssm_conv1d_") + x + ".weight").c_str()), {4, 1, d_inner, 1}, T_F32);
                m.add(m.b(il, (std::string("attn_") + x + ".weight").c_str()), {n_embd, d_inner});
            }
            m.add(m.b(il, "ssm_f_a.weight"), {n_embd, hd});
            m.add(m.b(il, "ssm_f_b.weight"), {hd, d_inner});
            m.add(m.b(il, "ssm_beta.weight"), {n_embd, n_head});
            m.add(m.b(il, "ssm_a"), {n_head}, T_F32);
            m.add(m.b(il, "ssm_dt.bias"), {d_inner}, T_F32);
            m.add(m.b(il, "ssm_g.weight"), {n_embd, d_inner});
            m.add(m.b(il, "ssm_norm.weight"), {hd}, T_F32);
            m.add(m.b(il, "attn_output.weight"), {d_inner, n_embd});
        } else {
            mla(m, il, n_embd, n_head, 0, true);
        }
        if (il == 0) {
            m.dense(il, n_embd, 128);
            continue;
        }
        m.router(il, n_embd, n_expert);
        m.add(m.b(il, "exp_probs_b.bias"), {n_expert}, T_F32);
        m.slabs(il, latent, 32, n_expert, T_MXFP4);
        m.add(m.b(il, "ffn_routed_down.weight"), {n_embd, latent});
        m.add(m.b(il, "ffn_routed_up.weight"), {latent, n_embd});
        m.add(m.b(il, "ffn_routed_norm.weight"), {latent}, T_F32);
        m.shexp(il, n_embd, 32);
    }
    return m;
}

layout classify_ok(const model_spec & m) {
    layout l;
    std::string err;
    EXPECT_TRUE(classify(m.arch, m.kv, m.t, l, err)) << m.arch << ": " << err;
    return l;
}

std::string classify_err(const model_spec & m, const classify_options & opt = {}) {
    layout l;
    std::string err;
    EXPECT_FALSE(classify(m.arch, m.kv, m.t, l, err, opt)) << m.arch << ": expected an error";
    return err;
}

const tensor_role & role_of(const model_spec & m, const layout & l, const std::string & name) {
    for (size_t i = 0; i < m.t.size(); ++i) {
        if (m.t[i].name == name) {
            return l.roles[i];
        }
    }
    static tensor_role none;
    ADD_FAILURE() << "no tensor " << name;
    return none;
}

// Names of the sliced tensors of block il, mapped to their expert dim.
std::map<std::string, int> sliced_in_block(const model_spec & m, const layout & l, int il) {
    std::map<std::string, int> out;
    const std::string pre = "blk." + std::to_string(il) + ".";
    for (size_t i = 0; i < m.t.size(); ++i) {
        if (l.roles[i].slice != slice_kind::none && m.t[i].name.rfind(pre, 0) == 0) {
            out[m.t[i].name.substr(pre.size())] = l.roles[i].expert_dim;
        }
    }
    return out;
}

// ---- every zoo arch ------------------------------------------------------------------

TEST(MoeLayout, Qwen3Moe) {
    const model_spec m = qwen3moe();
    const layout l = classify_ok(m);
    EXPECT_EQ(l.moe_layers, (std::vector<int>{0, 1, 2}));
    const std::map<std::string, int> want = {{"ffn_gate_exps.weight", 2}, {"ffn_up_exps.weight", 2},
                                             {"ffn_down_exps.weight", 2}, {"ffn_gate_inp.weight", 1}};
    for (int il : l.moe_layers) {
        EXPECT_EQ(sliced_in_block(m, l, il), want) << "block " << il;
    }
    EXPECT_EQ(role_of(m, l, "blk.1.attn_q_norm.weight").kind, tensor_kind::other);
    EXPECT_EQ(role_of(m, l, "token_embd.weight").layer, -1);
    EXPECT_EQ(l.router.gating, gating_func::softmax);
    EXPECT_TRUE(l.router.weights_norm);
    EXPECT_FALSE(l.router.weights_change_when_pruned);
    EXPECT_EQ(l.router.n_expert_shared, 0);
}

TEST(MoeLayout, Qwen2MoeSharedExpertUntouched) {
    const model_spec m = qwen2moe();
    const layout l = classify_ok(m);
    EXPECT_EQ(l.moe_layers, (std::vector<int>{0, 1}));
    EXPECT_EQ(sliced_in_block(m, l, 0).size(), 4u);
    for (const char * n : {"blk.0.ffn_gate_inp_shexp.weight", "blk.0.ffn_up_shexp.weight", "blk.1.ffn_down_shexp.weight"}) {
        EXPECT_EQ(role_of(m, l, n).kind, tensor_kind::shared_expert) << n;
        EXPECT_EQ(role_of(m, l, n).slice, slice_kind::none) << n;
    }
    EXPECT_EQ(l.router.gating, gating_func::softmax);
    EXPECT_FALSE(l.router.weights_norm);
    // softmax without renormalisation: the weights of kept experts move when others go
    EXPECT_TRUE(l.router.weights_change_when_pruned);
    EXPECT_EQ(l.router.n_expert_shared, 1);
}

TEST(MoeLayout, DeepSeek2GroupLimited) {
    const model_spec m = deepseek2();
    const layout l = classify_ok(m);
    EXPECT_EQ(l.moe_layers, (std::vector<int>{1, 2}));
    const std::map<std::string, int> want = {{"ffn_gate_exps.weight", 2}, {"ffn_up_exps.weight", 2},
                                             {"ffn_down_exps.weight", 2}, {"ffn_gate_inp.weight", 1},
                                             {"exp_probs_b.bias", 0}};
    EXPECT_EQ(sliced_in_block(m, l, 1), want);
    EXPECT_TRUE(sliced_in_block(m, l, 0).empty());
    // attn_k_b is 3-D with ne[2] = n_head: a dense tensor, not a slab
    EXPECT_EQ(role_of(m, l, "blk.1.attn_k_b.weight").slice, slice_kind::none);
    EXPECT_EQ(role_of(m, l, "blk.1.exp_probs_b.bias").kind, tensor_kind::selection_bias);
    EXPECT_EQ(l.router.gating, gating_func::sigmoid);
    EXPECT_TRUE(l.router.weights_norm);
    EXPECT_DOUBLE_EQ(l.router.weights_scale, 2.5);
    EXPECT_EQ(l.router.n_group, 4);
    EXPECT_EQ(l.router.n_group_used, 2);
    EXPECT_EQ(l.router.n_expert_shared, 1);
    EXPECT_TRUE(l.router.selection_bias);
    EXPECT_FALSE(l.router.weights_change_when_pruned);
}

TEST(MoeLayout, GptOssBiasesAndMxfp4) {
    const model_spec m = gpt_oss();
    const layout l = classify_ok(m);
    EXPECT_EQ(l.moe_layers, (std::vector<int>{0, 1}));
    const std::map<std::string, int> want = {
        {"ffn_gate_exps.weight", 2}, {"ffn_up_exps.weight", 2}, {"ffn_down_exps.weight", 2},
        {"ffn_gate_exps.bias", 1},   {"ffn_up_exps.bias", 1},   {"ffn_down_exps.bias", 1},
        {"ffn_gate_inp.weight", 1},  {"ffn_gate_inp.bias", 0}};
    EXPECT_EQ(sliced_in_block(m, l, 1), want);
    EXPECT_EQ(role_of(m, l, "blk.0.ffn_down_exps.bias").kind, tensor_kind::expert_bias);
    EXPECT_EQ(role_of(m, l, "blk.0.ffn_gate_inp.bias").kind, tensor_kind::router_bias);
    // MXFP4 slab: 8 experts of 32x64 -> 64 blocks of 17 bytes each
    const tensor_role & r = role_of(m, l, "blk.0.ffn_gate_exps.weight");
    EXPECT_EQ(r.expert_bytes, 64u * 17u);
    uint64_t off = 0, size = 0;
    ASSERT_TRUE(expert_range(r, l.n_expert, 3, off, size));
    EXPECT_EQ(off, 3u * 64u * 17u);
    EXPECT_EQ(size, 64u * 17u);
    EXPECT_FALSE(expert_range(r, l.n_expert, 8, off, size));
    EXPECT_EQ(l.router.gating, gating_func::softmax_weight);
    EXPECT_FALSE(l.router.weights_change_when_pruned);
    EXPECT_TRUE(l.router.router_bias);
}

TEST(MoeLayout, Glm4Moe) {
    const model_spec m = glm4moe();
    const layout l = classify_ok(m);
    EXPECT_EQ(l.moe_layers, (std::vector<int>{1, 2}));
    EXPECT_EQ(sliced_in_block(m, l, 2).size(), 5u);
    EXPECT_EQ(l.router.gating, gating_func::sigmoid);
    EXPECT_TRUE(l.router.weights_norm);
    EXPECT_TRUE(l.router.selection_bias);

    // glm4moe defaults to sigmoid when expert_gating_func is absent (as llama.cpp does)
    model_spec m2 = m;
    m2.kv.expert_gating_func.reset();
    EXPECT_EQ(classify_ok(m2).router.gating, gating_func::sigmoid);
}

TEST(MoeLayout, Llama4Interleaved) {
    const model_spec m = llama4();
    const layout l = classify_ok(m);
    EXPECT_EQ(l.moe_layers, (std::vector<int>{1, 3}));
    EXPECT_EQ(l.router.gating, gating_func::sigmoid);
    EXPECT_FALSE(l.router.weights_norm);
    EXPECT_TRUE(l.router.weight_before_ffn);
    EXPECT_FALSE(l.router.weights_change_when_pruned);
}

TEST(MoeLayout, KimiK3LatentMoe) {
    const model_spec m = kimi_k3();
    const layout l = classify_ok(m);
    EXPECT_EQ(l.moe_layers, (std::vector<int>{1, 2, 3}));
    const std::map<std::string, int> want = {{"ffn_gate_exps.weight", 2}, {"ffn_up_exps.weight", 2},
                                             {"ffn_down_exps.weight", 2}, {"ffn_gate_inp.weight", 1},
                                             {"exp_probs_b.bias", 0}};
    for (int il : l.moe_layers) {
        EXPECT_EQ(sliced_in_block(m, l, il), want) << "block " << il;
    }
    for (const char * n : {"blk.1.ffn_routed_down.weight", "blk.1.ffn_routed_up.weight", "blk.1.ffn_routed_norm.weight"}) {
        EXPECT_EQ(role_of(m, l, n).kind, tensor_kind::moe_dense) << n;
        EXPECT_EQ(role_of(m, l, n).slice, slice_kind::none) << n;
    }
    EXPECT_EQ(role_of(m, l, "blk.2.ssm_a").kind, tensor_kind::other);
    EXPECT_EQ(role_of(m, l, "blk.1.ssm_conv1d_q.weight").slice, slice_kind::none);  // 4-D, dense
    EXPECT_EQ(role_of(m, l, "output_res_score.weight").layer, -1);
    EXPECT_EQ(l.router.gating, gating_func::sigmoid);
    EXPECT_TRUE(l.router.weights_norm);
    EXPECT_DOUBLE_EQ(l.router.weights_scale, 2.5);
    EXPECT_EQ(l.router.n_expert_shared, 1);
    EXPECT_TRUE(l.router.selection_bias);

    // kimi-k3 has no default gating: without the key the router is unknown, and
    // treated as if pruning moved the weights
    model_spec m2 = m;
    m2.kv.expert_gating_func.reset();
    const layout l2 = classify_ok(m2);
    EXPECT_EQ(l2.router.gating, gating_func::unknown);
    EXPECT_TRUE(l2.router.weights_change_when_pruned);
}

TEST(MoeLayout, KnownArchsIncludeTheZoo) {
    for (const char * a : {"qwen3moe", "qwen2moe", "deepseek2", "gpt-oss", "glm4moe", "llama4", "kimi-k3"}) {
        EXPECT_TRUE(is_known_arch(a)) << a;
    }
    EXPECT_FALSE(is_known_arch("not-an-arch"));
    EXPECT_EQ(kv_key("kimi-k3", "expert_count"), "kimi-k3.expert_count");
}

// ---- coincidences and errors -----------------------------------------------------------

// Dense tensors whose dims happen to equal n_expert are copied, not errors.
TEST(MoeLayout, CoincidentalDimsOfKnownDenseTensors) {
    model_spec m = gpt_oss();
    // n_head = 8 heads == n_expert: attn_sinks has ne[0] == n_expert
    for (auto & d : m.t) {
        if (d.name.find("attn_sinks") != std::string::npos) {
            d.ne[0] = 8;
            d.nbytes = 32;
        }
    }
    const layout l = classify_ok(m);
    EXPECT_EQ(role_of(m, l, "blk.0.attn_sinks.weight").slice, slice_kind::none);

    // qwen3moe with n_embd == n_expert == 64: every norm and projection has a dim
    // equal to n_expert, and the router is [64, 64]
    const model_spec q = qwen3moe(64, 64);
    const layout lq = classify_ok(q);
    EXPECT_EQ(role_of(q, lq, "blk.0.ffn_norm.weight").slice, slice_kind::none);
    EXPECT_EQ(role_of(q, lq, "blk.0.attn_q.weight").slice, slice_kind::none);
    EXPECT_EQ(role_of(q, lq, "output_norm.weight").slice, slice_kind::none);
    EXPECT_EQ(role_of(q, lq, "blk.0.ffn_gate_inp.weight").expert_dim, 1);
}

TEST(MoeLayout, UnknownTensorWithExpertDimIsAnError) {
    model_spec m = qwen3moe();
    m.add("blk.1.ffn_mystery.weight", {64, 16});  // 16 == n_expert
    const std::string err = classify_err(m);
    EXPECT_NE(err.find("blk.1.ffn_mystery.weight"), std::string::npos) << err;
    EXPECT_NE(err.find("n_expert"), std::string::npos) << err;

    // the same name without an n_expert dim is copied
    model_spec ok = qwen3moe();
    ok.add("blk.1.ffn_mystery.weight", {64, 24});
    const layout l = classify_ok(ok);
    EXPECT_EQ(role_of(ok, l, "blk.1.ffn_mystery.weight").kind, tensor_kind::other);

    // a global unknown tensor of n_expert rows too
    model_spec g = qwen3moe();
    g.add("expert_table.weight", {16});
    EXPECT_NE(classify_err(g).find("expert_table.weight"), std::string::npos);
}

TEST(MoeLayout, WrongShapesOfExpertTensors) {
    {
        model_spec m = qwen3moe();
        for (auto & d : m.t) {
            if (d.name == "blk.2.ffn_gate_inp.weight") {
                d.ne[1] = 15;
            }
        }
        EXPECT_NE(classify_err(m).find("blk.2.ffn_gate_inp.weight"), std::string::npos);
    }
    {
        model_spec m = qwen3moe();
        for (auto & d : m.t) {
            if (d.name == "blk.0.ffn_up_exps.weight") {
                d.n_dims = 2;
                d.ne[2] = 1;
            }
        }
        EXPECT_NE(classify_err(m).find("blk.0.ffn_up_exps.weight"), std::string::npos);
    }
    {
        model_spec m = deepseek2();
        for (auto & d : m.t) {
            if (d.name == "blk.1.exp_probs_b.bias") {
                d.ne[0] = 8;
            }
        }
        EXPECT_NE(classify_err(m).find("blk.1.exp_probs_b.bias"), std::string::npos);
    }
    {
        // bytes not divisible into n_expert slabs
        model_spec m = qwen3moe();
        for (auto & d : m.t) {
            if (d.name == "blk.1.ffn_down_exps.weight") {
                d.nbytes += 1;
            }
        }
        const std::string err = classify_err(m);
        EXPECT_NE(err.find("not divisible"), std::string::npos) << err;
        EXPECT_NE(err.find("blk.1.ffn_down_exps.weight"), std::string::npos) << err;
    }
    {
        // a 4-D slab with a trailing 1 is fine (expert dim still ne[2])
        model_spec m = qwen3moe();
        for (auto & d : m.t) {
            if (d.name == "blk.0.ffn_up_exps.weight") {
                d.n_dims = 4;
            }
        }
        const layout l = classify_ok(m);
        EXPECT_EQ(role_of(m, l, "blk.0.ffn_up_exps.weight").expert_dim, 2);
    }
}

TEST(MoeLayout, PerExpertScales) {
    model_spec m = qwen3moe();
    m.add("blk.0.ffn_down_exps.scale", {16}, T_F32);
    m.add("blk.0.ffn_up_exps.input_scale", {16}, T_F32);
    const layout l = classify_ok(m);
    EXPECT_EQ(role_of(m, l, "blk.0.ffn_down_exps.scale").kind, tensor_kind::expert_scale);
    EXPECT_EQ(role_of(m, l, "blk.0.ffn_down_exps.scale").expert_dim, 0);
    EXPECT_EQ(role_of(m, l, "blk.0.ffn_down_exps.scale").expert_bytes, 4u);
    EXPECT_EQ(role_of(m, l, "blk.0.ffn_up_exps.input_scale").slice, slice_kind::expert_vector);

    // gemma4's ffn_gate_inp.scale is per channel of the router input, even when n_embd == n_expert
    model_spec g = qwen3moe(64, 64);
    g.arch = "gemma4";
    g.add("blk.0.ffn_gate_inp.scale", {64}, T_F32);
    classify_options opt;
    opt.allow_unknown_arch = true;
    layout lg;
    std::string err;
    ASSERT_TRUE(classify(g.arch, g.kv, g.t, lg, err, opt)) << err;
    EXPECT_EQ(role_of(g, lg, "blk.0.ffn_gate_inp.scale").kind, tensor_kind::moe_dense);
    EXPECT_FALSE(lg.router.known_arch);
}

TEST(MoeLayout, UnsliceablePerExpertData) {
    {
        model_spec m = qwen3moe();
        m.add("blk.0.ffn_gate_tid2eid.weight", {4, 267}, 26 /* I32 */);
        EXPECT_NE(classify_err(m).find("ffn_gate_tid2eid"), std::string::npos);
    }
    {
        model_spec m = qwen3moe();
        m.add("blk.0.ffn_up_chexps.weight", {64, 32, 4});
        EXPECT_NE(classify_err(m).find("ffn_up_chexps"), std::string::npos);
    }
    {
        model_spec m = qwen3moe();
        m.add("blk.0.ffn_gate.3.weight", {64, 32});
        EXPECT_NE(classify_err(m).find("legacy"), std::string::npos);
    }
}

TEST(MoeLayout, BlockRules) {
    {
        // router without slabs
        model_spec m = qwen3moe();
        std::vector<tensor_desc> keep;
        for (const auto & d : m.t) {
            if (d.name.rfind("blk.1.ffn_", 0) != 0 || d.name == "blk.1.ffn_gate_inp.weight" || d.name == "blk.1.ffn_norm.weight") {
                keep.push_back(d);
            }
        }
        m.t = keep;
        EXPECT_NE(classify_err(m).find("block 1"), std::string::npos);
    }
    {
        // slabs without router
        model_spec m = qwen3moe();
        std::vector<tensor_desc> keep;
        for (const auto & d : m.t) {
            if (d.name != "blk.2.ffn_gate_inp.weight") {
                keep.push_back(d);
            }
        }
        m.t = keep;
        EXPECT_NE(classify_err(m).find("blk.2.ffn_gate_inp.weight"), std::string::npos);
    }
    {
        // exp_probs_b in a dense block
        model_spec m = deepseek2();
        m.add("blk.0.exp_probs_b.bias", {16}, T_F32);
        EXPECT_NE(classify_err(m).find("blk.0.exp_probs_b.bias"), std::string::npos);
    }
    {
        // leading_dense_block_count says 2 dense blocks, the tensors say 1
        model_spec m = deepseek2();
        m.kv.leading_dense_block_count = 2;
        EXPECT_NE(classify_err(m).find("block 1 should be dense"), std::string::npos);
    }
    {
        model_spec m = llama4();
        m.kv.interleave_moe_layer_step = 1;
        EXPECT_NE(classify_err(m).find("interleave_moe_layer_step"), std::string::npos);
    }
    {
        // qwen3moe: every block is MoE
        model_spec m = qwen3moe();
        std::vector<tensor_desc> keep;
        for (const auto & d : m.t) {
            if (d.name.rfind("blk.0.ffn_", 0) != 0 || d.name == "blk.0.ffn_norm.weight") {
                keep.push_back(d);
            }
        }
        m.t = keep;
        m.add("blk.0.ffn_gate.weight", {64, 128});
        m.add("blk.0.ffn_up.weight", {64, 128});
        m.add("blk.0.ffn_down.weight", {128, 64});
        EXPECT_NE(classify_err(m).find("block 0 should be MoE"), std::string::npos);
    }
}

TEST(MoeLayout, MetadataErrors) {
    {
        model_spec m = qwen3moe();
        m.arch = "brand-new-moe";
        EXPECT_NE(classify_err(m).find("brand-new-moe"), std::string::npos);
        classify_options opt;
        opt.allow_unknown_arch = true;
        layout l;
        std::string err;
        EXPECT_TRUE(classify(m.arch, m.kv, m.t, l, err, opt)) << err;
        EXPECT_FALSE(l.router.known_arch);
        EXPECT_EQ(l.moe_layers.size(), 3u);
    }
    {
        model_spec m = qwen3moe();
        m.kv.expert_count.reset();
        EXPECT_NE(classify_err(m).find("qwen3moe.expert_count"), std::string::npos);
    }
    {
        model_spec m = qwen3moe();
        m.kv.expert_used_count = 17;
        EXPECT_NE(classify_err(m).find("expert_used_count"), std::string::npos);
    }
    {
        model_spec m = deepseek2();
        m.kv.expert_group_count = 5;  // 16 experts do not split into 5 groups
        EXPECT_NE(classify_err(m).find("expert_group_count"), std::string::npos);
    }
    {
        model_spec m = qwen3moe();
        m.t.push_back(m.t[4]);
        EXPECT_NE(classify_err(m).find("twice"), std::string::npos);
    }
}

TEST(MoeLayout, PrunedShape) {
    const model_spec m = deepseek2();
    layout l;
    std::string err;
    ASSERT_TRUE(classify(m.arch, m.kv, m.t, l, err, describe_options())) << err;
    EXPECT_EQ(l.moe_layers, (std::vector<int>{1, 2}));
    const std::vector<tensor_role> & roles = l.roles;
    ASSERT_EQ(roles.size(), m.t.size());
    for (size_t i = 0; i < m.t.size(); ++i) {
        int64_t ne[4];
        pruned_shape(m.t[i], roles[i], 6, ne);
        if (m.t[i].name == "blk.1.ffn_down_exps.weight") {
            EXPECT_EQ(ne[0], 32);
            EXPECT_EQ(ne[1], 64);
            EXPECT_EQ(ne[2], 6);
        } else if (m.t[i].name == "blk.1.ffn_gate_inp.weight") {
            EXPECT_EQ(ne[0], 64);
            EXPECT_EQ(ne[1], 6);
        } else if (m.t[i].name == "blk.1.exp_probs_b.bias") {
            EXPECT_EQ(ne[0], 6);
        } else if (roles[i].slice == slice_kind::none) {
            for (int d = 0; d < 4; ++d) {
                EXPECT_EQ(ne[d], m.t[i].ne[d]) << m.t[i].name;
            }
        }
    }
}

// Quantised slabs: expert e is a contiguous run whatever the block type.
TEST(MoeLayout, QuantisedSlabBytes) {
    model_spec m{"qwen3moe", {}, {}};
    m.set_counts(1, 8, 2);
    m.globals(256);
    m.router(0, 256, 8);
    m.slabs(0, 256, 512, 8, T_Q4_K);
    const layout l = classify_ok(m);
    const tensor_role & r = role_of(m, l, "blk.0.ffn_down_exps.weight");
    // one expert: 256 rows of 512 -> 256 * 2 Q4_K blocks of 144 bytes
    EXPECT_EQ(r.expert_bytes, 256u * 2u * 144u);
    EXPECT_EQ(r.expert_bytes * 8, m.find("blk.0.ffn_down_exps.weight")->nbytes);
}

// ---- the real zoo files ------------------------------------------------------------------

using gguf_test::env_or;

TEST(MoeLayoutZoo, ClassifiesEveryZooModel) {
    const std::string src = env_or("REAP_SOURCE_DIR", REAP_SOURCE_DIR);
    const std::string tmp = env_or("REAP_TEST_TMP", "test-tmp");
    ::mkdir(tmp.c_str(), 0755);
    const std::string dir = tmp + "/zoo-layout";
    const std::string py = env_or("REAP_PYTHON", "/usr/bin/python3");
    const std::string cmd = "'" + py + "' '" + src + "/tools/make_zoo.py' --out '" + dir + "' > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
        GTEST_SKIP() << "could not run tools/make_zoo.py (needs python3 with numpy; set REAP_PYTHON): " << cmd;
    }
    const std::map<std::string, gating_func> want_gating = {
        {"qwen3moe", gating_func::softmax}, {"qwen2moe", gating_func::softmax},
        {"deepseek2", gating_func::sigmoid}, {"gpt-oss", gating_func::softmax_weight},
        {"glm4moe", gating_func::sigmoid}, {"llama4", gating_func::sigmoid},
        {"kimi-k3", gating_func::sigmoid}, {"qwen3moe-q256", gating_func::softmax}};
    for (const auto & [name, gating] : want_gating) {
        SCOPED_TRACE(name);
        reap::gguf::model gm;
        std::string err;
        ASSERT_TRUE(reap::gguf::open_model(dir + "/" + name + ".gguf", gm, err)) << err;
        layout l;
        ASSERT_TRUE(layout_of(gm, l, err)) << err;
        const std::vector<tensor_desc> tensors = tensor_descs(gm);

        std::ifstream jf(dir + "/" + name + ".json");
        const nlohmann::json facts = nlohmann::json::parse(jf, nullptr, false);
        ASSERT_FALSE(facts.is_discarded());
        EXPECT_EQ(l.moe_layers, facts["moe_layers"].get<std::vector<int>>());
        EXPECT_EQ(l.n_expert, facts["n_expert"].get<int64_t>());
        EXPECT_EQ(l.router.gating, gating);
        EXPECT_EQ(l.router.weights_norm, facts["weights_norm"].get<bool>());
        EXPECT_EQ(l.router.n_expert_shared, facts["n_expert_shared"].get<int64_t>());
        EXPECT_EQ(l.router.n_group, facts["expert_group_count"].get<int64_t>());
        EXPECT_EQ(l.router.weight_before_ffn, facts["weight_before_ffn"].get<bool>());

        // every MoE layer has its slabs and router sliced; every sliced tensor splits evenly
        for (int il : l.moe_layers) {
            int n_slab = 0, n_router = 0;
            for (size_t i = 0; i < tensors.size(); ++i) {
                const tensor_role & r = l.roles[i];
                if (r.layer != il) {
                    continue;
                }
                n_slab += r.kind == tensor_kind::expert_weight;
                n_router += r.kind == tensor_kind::router_weight;
                if (r.slice != slice_kind::none) {
                    EXPECT_EQ(r.expert_bytes * (uint64_t) l.n_expert, tensors[i].nbytes) << tensors[i].name;
                }
            }
            EXPECT_EQ(n_slab, 3) << "block " << il;
            EXPECT_EQ(n_router, 1) << "block " << il;
        }
    }
}

}  // namespace

// The layout knows its blocks and which of them are MTP (nextn) blocks: the last
// nextn_predict_layers of block_count; without block_count the tensors say.
TEST(MoeLayout, BlocksAndMtpBlocks) {
    std::string err;
    model_spec m = glm4moe();   // blocks 0..2, 0 dense
    layout l;
    ASSERT_TRUE(classify(m.arch, m.kv, m.t, l, err)) << err;
    EXPECT_EQ(l.n_layer, 3);
    EXPECT_EQ(l.n_mtp, 0);
    for (int b = -1; b <= 3; ++b) EXPECT_FALSE(l.is_mtp(b)) << b;

    m.kv.nextn_predict_layers = 1;
    ASSERT_TRUE(classify(m.arch, m.kv, m.t, l, err)) << err;
    EXPECT_EQ(l.n_mtp, 1);
    EXPECT_FALSE(l.is_mtp(1));
    EXPECT_TRUE(l.is_mtp(2));
    EXPECT_FALSE(l.is_mtp(3));   // past the last block

    m.kv.nextn_predict_layers = 2;
    ASSERT_TRUE(classify(m.arch, m.kv, m.t, l, err)) << err;
    EXPECT_FALSE(l.is_mtp(0));
    EXPECT_TRUE(l.is_mtp(1));
    EXPECT_TRUE(l.is_mtp(2));

    m.kv.nextn_predict_layers = 9;   // more than there are blocks: every block
    ASSERT_TRUE(classify(m.arch, m.kv, m.t, l, err)) << err;
    EXPECT_EQ(l.n_mtp, 3);
    EXPECT_TRUE(l.is_mtp(0));

    // no block_count: the highest block index + 1
    m.kv.nextn_predict_layers.reset();
    m.kv.block_count.reset();
    ASSERT_TRUE(classify(m.arch, m.kv, m.t, l, err)) << err;
    EXPECT_EQ(l.n_layer, 3);
    EXPECT_EQ(n_layer_of(m.kv, m.t), 3);
    m.kv.block_count = 7;   // a larger block_count is taken as it is
    EXPECT_EQ(n_layer_of(m.kv, m.t), 7);

    // an MoE block outside block_count
    m.kv.block_count = 2;
    EXPECT_NE(classify_err(m).find("MoE block 2 is outside glm4moe.block_count = 2"), std::string::npos)
        << classify_err(m);
}

TEST(MoeLayout, ParseExpertWeight) {
    int layer = -1;
    std::string base;
    ASSERT_TRUE(parse_expert_weight("blk.12.ffn_down_exps.weight", layer, base));
    EXPECT_EQ(layer, 12);
    EXPECT_EQ(base, "ffn_down_exps");
    ASSERT_TRUE(parse_expert_weight("blk.0.ffn_gate_up_exps.weight", layer, base));
    EXPECT_EQ(base, "ffn_gate_up_exps");
    for (const char * not_one : {"blk.3.ffn_down_exps.bias", "blk.3.ffn_down_shexp.weight", "ffn_down_exps.weight",
                                 "blk.3.ffn_down_chexps.weight", "blk.3.ffn_gate_inp.weight", "blk.x.ffn_up_exps.weight"}) {
        EXPECT_FALSE(parse_expert_weight(not_one, layer, base)) << not_one;
    }
}

// The shared expert's down weight by name (calibrate and imatrix find its input by it).
TEST(LayoutNames, SharedDownWeightLayer) {
    EXPECT_EQ(shared_down_weight_layer("blk.3.ffn_down_shexp.weight"), 3);
    EXPECT_EQ(shared_down_weight_layer("blk.47.ffn_down_shexp.weight"), 47);
    for (const char * not_one : {"blk.3.ffn_down_shexp.bias", "blk.3.ffn_down_exps.weight", "ffn_down_shexp.weight",
                                 "blk.3.ffn_up_shexp.weight", "blk.x.ffn_down_shexp.weight", "blk.3.ffn_down_shexp",
                                 "blk.3.ffn_down_shexp.weight.in_sum2"}) {
        EXPECT_EQ(shared_down_weight_layer(not_one), -1) << not_one;
    }
}

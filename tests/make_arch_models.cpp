// make_arch_models: writes a small random Mixture-of-Experts GGUF for an
// architecture of the pinned llama.cpp, through llama.cpp's own model builder
// (llama_model_init_from_user: llama.cpp creates every tensor the arch asks for,
// with the shapes its loader wants) and its saver (llama_model_save_to_file).
// The files are independent of reap's layout table: llama.cpp decides which
// tensors exist and where the expert axis lies; test_llama_archs checks reap
// against them.
//
// llama.cpp's tests/test-llama-archs.cpp writes such files too (its -o mode),
// with 2 experts, top-1 and no tokenizer. This program writes the same set of
// MoE archs with 16 experts, top-2, four blocks (several MoE blocks wherever the
// arch allows) and a byte-level BPE vocabulary, so that text can be calibrated.
//
//   make_arch_models --list                      the MoE archs it writes, one a line,
//                                                then "skip ARCH: reason" lines
//   make_arch_models --list-mtp                  the archs it writes with --variant mtp
//   make_arch_models --arch NAME --out FILE [--variant V]
//       V = used-array   <arch>.expert_used_count written as a per-layer array
//                        (0 in dense blocks), as some converters write it
//       V = mtp          one more block, an MTP (next-token prediction) block:
//                        <arch>.nextn_predict_layers = 1, the block's nextn.*
//                        tensors and its own routed experts (llama.cpp runs it
//                        only in an MTP context); for the archs in k_mtp_archs
//       V = mtp2         the same with two MTP blocks (chained heads; of those
//                        archs only hy_v3's graph runs more than one)
//
// Exit 0 with FILE complete (written to a temp name, then renamed), 1 otherwise.
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

// llama.cpp internals: the arch list and key names (the saver's own API)
#include "llama-arch.h"
#include "llama-model-saver.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

// ---- which archs ------------------------------------------------------------------

// The archs whose llama.cpp graph has a routed MoE FFN and that llama.cpp's own
// arch test writes as MoE models (it writes every arch it marks MoE-capable,
// except those below).
const llm_arch k_moe_archs[] = {
    LLM_ARCH_LLAMA, LLM_ARCH_REFACT, LLM_ARCH_MINICPM, LLM_ARCH_GRANITE, LLM_ARCH_GRANITE_MOE, LLM_ARCH_MISTRAL3,
    LLM_ARCH_LLAMA4, LLM_ARCH_GROK, LLM_ARCH_QWEN2MOE, LLM_ARCH_QWEN3MOE, LLM_ARCH_QWEN3NEXT, LLM_ARCH_QWEN3VLMOE,
    LLM_ARCH_QWEN35MOE, LLM_ARCH_QWEN4EXP, LLM_ARCH_PHIMOE, LLM_ARCH_DBRX, LLM_ARCH_OLMOE, LLM_ARCH_ARCTIC,
    LLM_ARCH_DEEPSEEK, LLM_ARCH_DEEPSEEK2, LLM_ARCH_DEEPSEEK32, LLM_ARCH_DEEPSEEK4, LLM_ARCH_GLM4_MOE,
    LLM_ARCH_GLM_DSA, LLM_ARCH_BAILINGMOE, LLM_ARCH_BAILINGMOE2, LLM_ARCH_BAILINGMOE3, LLM_ARCH_DOTS1,
    LLM_ARCH_ERNIE4_5_MOE, LLM_ARCH_HUNYUAN_MOE, LLM_ARCH_HY_V3, LLM_ARCH_OPENAI_MOE,
    LLM_ARCH_LFM2MOE, LLM_ARCH_SMALLTHINKER, LLM_ARCH_LLADA_MOE, LLM_ARCH_GROVEMOE, LLM_ARCH_MINIMAX_01,
    LLM_ARCH_MINIMAX_M2, LLM_ARCH_MINIMAX_M3, LLM_ARCH_RND1, LLM_ARCH_KIMI_LINEAR,
    LLM_ARCH_KIMI_K3, LLM_ARCH_MISTRAL4,
};

// Archs written only as a variant (--variant), not in --list: nemotron_h is the
// arch whose graph reads a per-layer expert_used_count.
const llm_arch k_variant_archs[] = {LLM_ARCH_NEMOTRON_H};

// Archs written with --variant mtp: llama.cpp's graph for them has an MTP
// (DECODER_MTP) path whose block routes through build_moe_ffn. Not here, with
// the reason: qwen3next, qwen35moe and bailingmoe3 (llama.cpp's saver writes per-layer
// arrays for the trunk blocks only, n_layer(), and its loader then wants one
// value per block, MTP blocks included: "wrong array length"); nemotron_h_moe,
// step35, mimo2 (not in the saver's MoE set above).
const llm_arch k_mtp_archs[] = {LLM_ARCH_GLM4_MOE, LLM_ARCH_DEEPSEEK2, LLM_ARCH_HY_V3, LLM_ARCH_GLM_DSA,
                                LLM_ARCH_DEEPSEEK32};

struct skipped {
    llm_arch    arch;
    const char * why;
};
// MoE archs llama.cpp does not write, with its stated reason.
const skipped k_skipped[] = {
    {LLM_ARCH_COHERE2MOE,  "llama.cpp's saver does not support it (llama_model_saver_supports_arch)"},
    {LLM_ARCH_EXAONE_MOE,  "llama.cpp's saver does not support it (llama_model_saver_supports_arch)"},
    {LLM_ARCH_AFMOE,       "llama.cpp's saver does not support it (llama_model_saver_supports_arch)"},
    {LLM_ARCH_MIMO2,       "llama.cpp's saver does not support it (llama_model_saver_supports_arch)"},
    {LLM_ARCH_STEP35,      "llama.cpp's saver does not support it (llama_model_saver_supports_arch)"},
    {LLM_ARCH_MELLUM,      "llama.cpp's saver does not support it (llama_model_saver_supports_arch)"},
    {LLM_ARCH_LAGUNA,      "llama.cpp's saver does not support it (llama_model_saver_supports_arch)"},
    {LLM_ARCH_DOTS3NOTE,   "llama.cpp's saver does not support it (SWA pattern with MLA, a TODO there)"},
    {LLM_ARCH_LLAMA_EMBED, "llama.cpp's arch test marks it unsupported (embedding models give inconsistent results)"},
    {LLM_ARCH_ERNIE4_5,    "dense: llama.cpp's arch test writes it as MoE, but the arch loads no expert tensors (the MoE one is ernie4_5-moe)"},
    {LLM_ARCH_PADDLEOCR,   "dense: llama.cpp's arch test writes it as MoE, but it loads ernie4_5's tensors, with experts only for ernie4_5-moe"},
    {LLM_ARCH_GEMMA4,      "llama.cpp's arch test does not write it (ISWA KV cache needs more fixture parameters)"},
};

// ---- per-arch geometry --------------------------------------------------------------

struct geometry {
    uint32_t n_embd = 256, n_head = 2, n_head_kv = 2, n_ff = 64, n_layer = 4;
    uint32_t n_ff_exp = 64;
    uint32_t n_nextn = 0;         // MTP blocks after the n_layer trunk blocks (--variant mtp)
    bool     mla = false;         // DeepSeek-style multi-head latent attention keys
    bool     hybrid = false;      // per-layer head counts, block 1 recurrent (0 heads)
};

bool one_of(llm_arch a, std::initializer_list<llm_arch> l) {
    for (llm_arch x : l) {
        if (a == x) return true;
    }
    return false;
}

geometry geometry_of(llm_arch a) {
    geometry g;
    if (one_of(a, {LLM_ARCH_DEEPSEEK2, LLM_ARCH_DEEPSEEK32, LLM_ARCH_GLM_DSA, LLM_ARCH_KIMI_LINEAR,
                   LLM_ARCH_BAILINGMOE3, LLM_ARCH_KIMI_K3, LLM_ARCH_MISTRAL4})) {
        g.n_embd = 128;
        g.n_head = g.n_head_kv = 1;
        g.n_ff = 64;
        g.mla = true;
    } else if (a == LLM_ARCH_DEEPSEEK4) {
        g.n_embd = 256;   // 4 heads of 64
        g.n_head = 4;
        g.n_head_kv = 1;
        g.n_ff = 128;
    }
    g.hybrid = one_of(a, {LLM_ARCH_LFM2MOE, LLM_ARCH_KIMI_LINEAR, LLM_ARCH_BAILINGMOE3, LLM_ARCH_KIMI_K3,
                          LLM_ARCH_GRANITE_HYBRID, LLM_ARCH_NEMOTRON_H, LLM_ARCH_NEMOTRON_H_MOE});
    return g;
}

// ---- vocabulary ---------------------------------------------------------------------

// GPT-2's byte-level alphabet: every byte has a printable stand-in (printable
// Latin-1 bytes stand for themselves, the rest map to U+0100 onwards), so any
// text tokenizes to byte tokens. Then a few merges and three control tokens.
std::string utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += char(cp);
    } else {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    }
    return s;
}

struct vocab {
    std::vector<std::string> tokens;
    std::vector<int32_t>     types;
    std::vector<std::string> merges;
    uint32_t bos = 0, eos = 0, pad = 0;
};

vocab byte_vocab() {
    vocab v;
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        v.tokens.push_back(utf8(printable ? b : next++));
        v.types.push_back(LLAMA_TOKEN_TYPE_NORMAL);
    }
    const std::string space = utf8(0x100 + 32);   // the stand-in for ' ' (the 33rd unprintable byte)
    for (const auto & [a, b] : std::vector<std::pair<std::string, std::string>>{
             {space, "t"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {space, "a"}}) {
        v.merges.push_back(a + " " + b);
        v.tokens.push_back(a + b);
        v.types.push_back(LLAMA_TOKEN_TYPE_NORMAL);
    }
    v.bos = (uint32_t) v.tokens.size();
    for (const char * s : {"<|bos|>", "<|eos|>", "<|pad|>"}) {
        v.tokens.push_back(s);
        v.types.push_back(LLAMA_TOKEN_TYPE_CONTROL);
    }
    v.eos = v.bos + 1;
    v.pad = v.bos + 2;
    return v;
}

// ---- metadata -----------------------------------------------------------------------

void write_metadata(llm_arch arch, const geometry & g, const vocab & voc, gguf_context * ctx) {
    llama_model_saver s(arch, ctx);
    const uint32_t L = g.n_layer + g.n_nextn;   // block_count counts the MTP blocks too
    const uint32_t head_dim = g.n_embd / g.n_head;
    auto per_layer = [&](std::function<uint32_t(uint32_t)> f) {
        std::vector<uint32_t> v(L);
        for (uint32_t il = 0; il < L; ++il) v[il] = f(il);
        return v;
    };

    s.add_kv(LLM_KV_GENERAL_ARCHITECTURE, llm_arch_name(arch));
    s.add_kv(LLM_KV_VOCAB_SIZE, (uint32_t) voc.tokens.size());
    s.add_kv(LLM_KV_CONTEXT_LENGTH, uint32_t(256));
    s.add_kv(LLM_KV_EMBEDDING_LENGTH, g.n_embd);
    s.add_kv(LLM_KV_FEATURES_LENGTH, g.n_embd);
    s.add_kv(LLM_KV_BLOCK_COUNT, L);
    if (g.n_nextn > 0) s.add_kv(LLM_KV_NEXTN_PREDICT_LAYERS, g.n_nextn);
    s.add_kv(LLM_KV_LEADING_DENSE_BLOCK_COUNT, uint32_t(1));
    if (arch == LLM_ARCH_NEMOTRON_H || arch == LLM_ARCH_NEMOTRON_H_MOE) {
        // block 0 attention, 1 recurrent, 2.. MoE FFN
        s.add_kv(LLM_KV_FEED_FORWARD_LENGTH, per_layer([&](uint32_t il) { return il <= 1 ? 0u : g.n_ff; }));
    } else {
        s.add_kv(LLM_KV_FEED_FORWARD_LENGTH, g.n_ff);
    }
    if (g.hybrid) {
        const auto heads = per_layer([&](uint32_t il) { return il == 1 ? 0u : g.n_head; });
        s.add_kv(LLM_KV_ATTENTION_HEAD_COUNT, heads);
        s.add_kv(LLM_KV_ATTENTION_HEAD_COUNT_KV, heads);
    } else {
        s.add_kv(LLM_KV_ATTENTION_HEAD_COUNT, g.n_head);
        s.add_kv(LLM_KV_ATTENTION_HEAD_COUNT_KV, g.n_head_kv);
    }
    s.add_kv(LLM_KV_USE_PARALLEL_RESIDUAL, false);
    s.add_kv(LLM_KV_LOGIT_SCALE, 1.0f);
    s.add_kv(LLM_KV_FULL_ATTENTION_INTERVAL, uint32_t(2));
    s.add_kv(LLM_KV_ATTENTION_MAX_ALIBI_BIAS, 8.0f);
    s.add_kv(LLM_KV_ATTENTION_CLAMP_KQV, 1.0f);
    s.add_kv(LLM_KV_ATTENTION_LAYERNORM_EPS, 1e-5f);
    s.add_kv(LLM_KV_ATTENTION_LAYERNORM_RMS_EPS, 1e-5f);
    s.add_kv(LLM_KV_ATTENTION_GROUPNORM_EPS, 1e-5f);
    s.add_kv(LLM_KV_ATTENTION_GROUPNORM_GROUPS, uint32_t(8));
    s.add_kv(LLM_KV_ATTENTION_SLIDING_WINDOW, uint32_t(32));
    s.add_kv(LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN, uint32_t(2));
    s.add_kv(LLM_KV_ATTENTION_Q_LORA_RANK, arch == LLM_ARCH_DEEPSEEK4 ? uint32_t(64) : uint32_t(512));
    s.add_kv(LLM_KV_ATTENTION_KV_LORA_RANK, uint32_t(512));
    s.add_kv(LLM_KV_ATTENTION_RELATIVE_BUCKETS_COUNT, uint32_t(8));
    if (g.mla) {
        s.add_kv(LLM_KV_ATTENTION_KEY_LENGTH, uint32_t(576));
        s.add_kv(LLM_KV_ATTENTION_VALUE_LENGTH, uint32_t(512));
        s.add_kv(LLM_KV_ATTENTION_KEY_LENGTH_MLA, uint32_t(192));
        s.add_kv(LLM_KV_ATTENTION_VALUE_LENGTH_MLA, uint32_t(128));
        s.add_kv(LLM_KV_ROPE_DIMENSION_COUNT, uint32_t(64));
    } else if (arch == LLM_ARCH_DEEPSEEK4) {
        s.add_kv(LLM_KV_ATTENTION_KEY_LENGTH, head_dim);
        s.add_kv(LLM_KV_ATTENTION_VALUE_LENGTH, head_dim);
        s.add_kv(LLM_KV_ROPE_DIMENSION_COUNT, head_dim / 2);
    } else if (arch == LLM_ARCH_MINIMAX_M3) {
        s.add_kv(LLM_KV_ROPE_DIMENSION_COUNT, uint32_t(64));   // at most the indexer key length
    }
    // (not with MTP blocks: glm4moe with rope sections is the vision variant, M-RoPE, and
    // llama.cpp's MTP graph ropes without sections, which ggml aborts on; GLM-4.5 has none)
    if (g.n_nextn == 0 || arch != LLM_ARCH_GLM4_MOE) {
        s.add_kv(LLM_KV_ROPE_DIMENSION_SECTIONS, std::vector<uint32_t>(4, head_dim / 4));
    }
    s.add_kv(LLM_KV_ATTENTION_INDEXER_HEAD_COUNT, arch == LLM_ARCH_MINIMAX_M3 ? g.n_head : uint32_t(8));
    s.add_kv(LLM_KV_ATTENTION_INDEXER_KEY_LENGTH, arch == LLM_ARCH_QWEN4EXP ? head_dim : uint32_t(128));
    s.add_kv(LLM_KV_ATTENTION_INDEXER_TOP_K, uint32_t(8));
    s.add_kv(LLM_KV_ATTENTION_INDEXER_BLOCK_SIZE, uint32_t(4));
    s.add_kv(LLM_KV_ATTENTION_INDEXER_LOCAL_BLOCKS, uint32_t(1));

    if (arch == LLM_ARCH_QWEN4EXP) {
        // hyper-connections, compressed attention on every block, per-layer n-gram embeddings
        const uint32_t ngram = 3, heads_per_ngram = 2, ple_heads = (ngram - 1) * heads_per_ngram;
        s.add_kv(LLM_KV_HYPER_CONNECTION_COUNT, uint32_t(4));
        s.add_kv(LLM_KV_HYPER_CONNECTION_LOW_RANK, uint32_t(8));
        s.add_kv(LLM_KV_ATTENTION_COMPRESS_RATIOS, std::vector<uint32_t>(L, 4));
        std::vector<uint64_t> offsets(ple_heads), sizes(ple_heads, voc.tokens.size());
        for (uint32_t h = 0; h < ple_heads; ++h) offsets[h] = uint64_t(h) * voc.tokens.size();
        s.add_kv(LLM_KV_PLE_LAYERS, std::vector<uint32_t>{0});
        s.add_kv(LLM_KV_PLE_NGRAM_SIZE, ngram);
        s.add_kv(LLM_KV_PLE_HEADS_PER_NGRAM, heads_per_ngram);
        s.add_kv(LLM_KV_PLE_CONV_KERNEL, uint32_t(4));
        s.add_kv(LLM_KV_PLE_EOS_TOKEN_ID, voc.eos);
        s.add_kv(LLM_KV_EMBEDDING_LENGTH_PER_LAYER, g.n_embd / ple_heads);
        s.add_kv(LLM_KV_PLE_LAYER_MULTIPLIERS, std::vector<uint64_t>{1, 3, 5});
        s.add_kv(LLM_KV_PLE_HEAD_OFFSETS, offsets);
        s.add_kv(LLM_KV_PLE_HEAD_VOCAB_SIZES, sizes);
    }
    if (arch == LLM_ARCH_DEEPSEEK4) {
        s.add_kv(LLM_KV_ATTENTION_OUTPUT_GROUP_COUNT, g.n_head);
        s.add_kv(LLM_KV_ATTENTION_OUTPUT_LORA_RANK, uint32_t(32));
        s.add_kv(LLM_KV_ATTENTION_COMPRESS_RATIOS, per_layer([](uint32_t il) { return il < 2 ? 0u : (il == 2 ? 4u : 128u); }));
        s.add_kv(LLM_KV_ATTENTION_COMPRESS_ROPE_FREQ_BASE, 160000.0f);
        s.add_kv(LLM_KV_HYPER_CONNECTION_COUNT, uint32_t(4));
        s.add_kv(LLM_KV_HYPER_CONNECTION_SINKHORN_ITERATIONS, uint32_t(2));
        s.add_kv(LLM_KV_HYPER_CONNECTION_EPSILON, 1.0e-6f);
        s.add_kv(LLM_KV_HASH_LAYER_COUNT, uint32_t(0));
        s.add_kv(LLM_KV_SWIGLU_CLAMP_EXP, 10.0f);
        s.add_kv(LLM_KV_EXPERT_WEIGHTS_SCALE, 1.0f);
        s.add_kv(LLM_KV_EXPERT_WEIGHTS_NORM, true);
    }
    if (arch == LLM_ARCH_BAILINGMOE3) {
        s.add_kv(LLM_KV_SWIGLU_CLAMP_EXP, std::vector<float>(L, 4.0f));
        s.add_kv(LLM_KV_SWIGLU_CLAMP_SHEXP, std::vector<float>(L, 5.0f));
    }

    // the MoE
    s.add_kv(LLM_KV_EXPERT_FEED_FORWARD_LENGTH, g.n_ff_exp);
    s.add_kv(LLM_KV_EXPERT_SHARED_FEED_FORWARD_LENGTH, g.n_ff_exp / 2);
    s.add_kv(LLM_KV_EXPERT_CHUNK_FEED_FORWARD_LENGTH, g.n_ff_exp / 2);
    s.add_kv(LLM_KV_EXPERT_LATENT_LENGTH, g.n_ff_exp);
    // llama4 needs step 2 (its no-rope layer step is fixed at 4); ernie4_5-moe creates experts in every
    // block past the leading dense ones but runs them only where the step says
    s.add_kv(LLM_KV_INTERLEAVE_MOE_LAYER_STEP, arch == LLM_ARCH_ERNIE4_5_MOE ? uint32_t(1) : uint32_t(2));
    s.add_kv(LLM_KV_EXPERT_COUNT, uint32_t(16));
    s.add_kv(LLM_KV_EXPERT_USED_COUNT, uint32_t(2));
    s.add_kv(LLM_KV_EXPERT_SHARED_COUNT, uint32_t(1));
    s.add_kv(LLM_KV_EXPERT_GATING_FUNC, arch == LLM_ARCH_DEEPSEEK4 ? uint32_t(4) : uint32_t(2));
    s.add_kv(LLM_KV_EXPERT_GROUP_SCALE, 1.0f);
    s.add_kv(LLM_KV_EXPERTS_PER_GROUP, uint32_t(2));

    // recurrent and other block kinds some archs mix in
    const bool qwen_linear = one_of(arch, {LLM_ARCH_QWEN3NEXT, LLM_ARCH_QWEN35MOE, LLM_ARCH_QWEN4EXP});
    s.add_kv(LLM_KV_SSM_INNER_SIZE, qwen_linear ? uint32_t(256) : 2 * g.n_embd);
    s.add_kv(LLM_KV_SSM_CONV_KERNEL, uint32_t(4));
    s.add_kv(LLM_KV_SSM_STATE_SIZE, uint32_t(128));
    s.add_kv(LLM_KV_SSM_TIME_STEP_RANK, g.n_head);
    s.add_kv(LLM_KV_SSM_GROUP_COUNT, uint32_t(2));
    s.add_kv(LLM_KV_KDA_HEAD_DIM, uint32_t(128));
    s.add_kv(LLM_KV_KDA_SAFE_GATE, true);
    s.add_kv(LLM_KV_KDA_GATE_LOWER_BOUND, -5.0f);
    s.add_kv(LLM_KV_WKV_HEAD_SIZE, head_dim);
    s.add_kv(LLM_KV_SHORTCONV_L_CACHE, uint32_t(3));
    s.add_kv(LLM_KV_RESIDUAL_SCALE, 1.0f);
    s.add_kv(LLM_KV_ATTN_RES_BLOCK_SIZE, uint32_t(12));
    s.add_kv(LLM_KV_ACTIVATION_SITU_BETA, 4.0f);
    s.add_kv(LLM_KV_ACTIVATION_SITU_LINEAR_BETA, 25.0f);
    s.add_kv(LLM_KV_XIELU_ALPHA_N, 1.0f);
    s.add_kv(LLM_KV_XIELU_ALPHA_P, 1.0f);
    s.add_kv(LLM_KV_XIELU_BETA, 1.0f);
    s.add_kv(LLM_KV_XIELU_EPS, 1.0e-7f);

    // the tokenizer
    s.add_kv(LLM_KV_TOKENIZER_MODEL, "gpt2");
    s.add_kv(LLM_KV_TOKENIZER_PRE, "default");
    s.add_kv(LLM_KV_TOKENIZER_LIST, voc.tokens);
    gguf_set_arr_data(ctx, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, voc.types.data(), voc.types.size());
    s.add_kv(LLM_KV_TOKENIZER_MERGES, voc.merges);
    s.add_kv(LLM_KV_TOKENIZER_BOS_ID, voc.bos);
    s.add_kv(LLM_KV_TOKENIZER_EOS_ID, voc.eos);
    s.add_kv(LLM_KV_TOKENIZER_PAD_ID, voc.pad);
    s.add_kv(LLM_KV_TOKENIZER_ADD_BOS, true);
    s.add_kv(LLM_KV_TOKENIZER_ADD_EOS, false);
}

// ---- tensor data --------------------------------------------------------------------

// Seeded by the tensor's name, so a file is a function of its arch alone.
// Matrices get a unit-variance scale per input (routers then pick clearly
// different experts per token); norm weights sit near 1; recurrent-state and
// other 1-D parameters stay small, as llama.cpp's own fixture keeps them.
void fill_tensor(ggml_tensor * t, void *) {
    const std::string name = t->name;
    uint64_t seed = 1469598103934665603ull;
    for (char c : name) seed = (seed ^ (unsigned char) c) * 1099511628211ull;
    std::mt19937_64 rng(seed);
    const int64_t n = ggml_nelements(t);
    const bool is_norm = name.find("norm") != std::string::npos && ggml_n_dims(t) == 1;
    const bool recurrent = name.find(".ssm_") != std::string::npos || name.find("time_mix") != std::string::npos ||
                           name.find("shortconv") != std::string::npos;
    const bool matrix = ggml_n_dims(t) >= 2 && !recurrent;
    const double sd = matrix ? 1.0 / std::sqrt((double) t->ne[0]) : (is_norm ? 0.05 : 0.01);
    std::normal_distribution<float> nd(0.0f, (float) sd);
    std::vector<float> v(n);
    for (auto & x : v) x = nd(rng) + (is_norm ? 1.0f : 0.0f);
    if (t->type == GGML_TYPE_F32) {
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    } else if (t->type == GGML_TYPE_F16) {
        std::vector<ggml_fp16_t> h(n);
        for (int64_t i = 0; i < n; ++i) h[i] = ggml_fp32_to_fp16(v[i]);
        ggml_backend_tensor_set(t, h.data(), 0, ggml_nbytes(t));
    } else {
        std::fprintf(stderr, "make_arch_models: tensor %s has type %s, expected F32 or F16\n", t->name,
                     ggml_type_name(t->type));
        std::abort();
    }
}

// Rewrites <arch>.expert_used_count of `path` as a per-layer array: 0 in the
// blocks without a router (dense), the scalar value elsewhere.
bool used_count_as_array(const std::string & path, const std::string & arch, std::string & err) {
    ggml_context * data = nullptr;
    gguf_init_params ip = {/*no_alloc =*/ false, &data};
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    if (!g) {
        err = "cannot reopen " + path;
        return false;
    }
    const std::string key = arch + ".expert_used_count", blocks_key = arch + ".block_count";
    const int64_t k = gguf_find_key(g, key.c_str()), kb = gguf_find_key(g, blocks_key.c_str());
    if (k < 0 || kb < 0) {
        err = "no " + key + " or " + blocks_key + " in " + path;
        gguf_free(g);
        ggml_free(data);
        return false;
    }
    const uint32_t used = gguf_get_val_u32(g, k), n_layer = gguf_get_val_u32(g, kb);
    std::vector<uint32_t> arr(n_layer);
    for (uint32_t il = 0; il < n_layer; ++il) {
        const std::string router = "blk." + std::to_string(il) + ".ffn_gate_inp.weight";
        arr[il] = gguf_find_tensor(g, router.c_str()) >= 0 ? used : 0;
    }
    // a fresh context: every KV of the file, the key replaced, the tensors with their loaded data
    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, g);
    gguf_set_arr_data(out, key.c_str(), GGUF_TYPE_UINT32, arr.data(), arr.size());
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        gguf_add_tensor(out, ggml_get_tensor(data, gguf_get_tensor_name(g, i)));
    }
    const bool ok = gguf_write_to_file(out, path.c_str(), false);
    gguf_free(out);
    gguf_free(g);
    ggml_free(data);
    if (!ok) err = "cannot write " + path;
    return ok;
}

bool quiet = true;

int write_model(const std::string & arch_name, const std::string & out, const std::string & variant) {
    const llm_arch arch = llm_arch_from_string(arch_name);
    bool listed = false;
    for (llm_arch a : k_moe_archs) listed = listed || a == arch;
    for (llm_arch a : k_variant_archs) listed = listed || (a == arch && !variant.empty());
    bool mtp_arch = false;
    for (llm_arch a : k_mtp_archs) mtp_arch = mtp_arch || a == arch;
    if (!listed) {
        std::fprintf(stderr, "make_arch_models: '%s' is not one of the MoE archs this program writes (--list)\n",
                     arch_name.c_str());
        return 1;
    }
    if (!variant.empty() && variant != "used-array" && variant != "mtp" && variant != "mtp2") {
        std::fprintf(stderr, "make_arch_models: unknown --variant '%s'\n", variant.c_str());
        return 1;
    }
    if ((variant == "mtp" || variant == "mtp2") && !mtp_arch) {
        std::fprintf(stderr, "make_arch_models: --variant mtp is not written for %s (k_mtp_archs)\n",
                     arch_name.c_str());
        return 1;
    }
    geometry g = geometry_of(arch);
    if (variant == "mtp") g.n_nextn = 1;
    if (variant == "mtp2") g.n_nextn = 2;
    const vocab voc = byte_vocab();
    gguf_context * meta = gguf_init_empty();
    write_metadata(arch, g, voc, meta);

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mtp = g.n_nextn > 0;   // else llama.cpp skips the MTP blocks' tensors and the saver leaves them out
    mp.progress_callback = [](float, void *) { return true; };
    llama_model * model = llama_model_init_from_user(meta, fill_tensor, nullptr, mp);
    gguf_free(meta);
    if (!model) {
        std::fprintf(stderr, "make_arch_models: llama.cpp could not build a %s model from the metadata\n",
                     arch_name.c_str());
        return 1;
    }
    const std::string tmp = out + ".tmp";
    llama_model_save_to_file(model, tmp.c_str());
    llama_model_free(model);
    std::string err;
    if (variant == "used-array" && !used_count_as_array(tmp, arch_name, err)) {
        std::fprintf(stderr, "make_arch_models: %s\n", err.c_str());
        std::remove(tmp.c_str());
        return 1;
    }
    if (std::rename(tmp.c_str(), out.c_str()) != 0) {
        std::fprintf(stderr, "make_arch_models: cannot rename %s to %s\n", tmp.c_str(), out.c_str());
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string arch, out, variant;
    bool list = false, list_mtp = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--list") {
            list = true;
        } else if (a == "--list-mtp") {
            list_mtp = true;
        } else if ((a == "--arch" || a == "--out" || a == "--variant") && i + 1 < argc) {
            (a == "--arch" ? arch : a == "--out" ? out : variant) = argv[++i];
        } else if (a == "--verbose") {
            quiet = false;
        } else {
            std::fprintf(stderr, "usage: make_arch_models --list | --list-mtp | --arch NAME --out FILE [--variant used-array|mtp|mtp2]\n");
            return 1;
        }
    }
    if (quiet) {
        llama_log_set([](ggml_log_level level, const char * text, void *) {
            if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
        }, nullptr);
    }
    llama_backend_init();
    if (list) {
        for (llm_arch a : k_moe_archs) {
            if (llama_model_saver_supports_arch(a)) {
                std::printf("%s\n", llm_arch_name(a));
            } else {
                std::printf("skip %s: llama.cpp's saver does not support it\n", llm_arch_name(a));
            }
        }
        for (const skipped & s : k_skipped) std::printf("skip %s: %s\n", llm_arch_name(s.arch), s.why);
        return 0;
    }
    if (list_mtp) {
        for (llm_arch a : k_mtp_archs) std::printf("%s\n", llm_arch_name(a));
        return 0;
    }
    if (arch.empty() || out.empty()) {
        std::fprintf(stderr, "make_arch_models: --arch and --out are required\n");
        return 1;
    }
    const int rc = write_model(arch, out, variant);
    llama_backend_free();
    return rc;
}

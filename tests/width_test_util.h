// width_test_util.h: the checks of a width-cut file against its source that
// test_prune_width.cpp (reap's slicer, in process) and
// test_llama_width_prune.cpp (the cut loaded in llama.cpp) share, from ggml's
// own gguf reader: gate/up rows byte for byte, down the kept columns
// requantised by ggml here, shared experts untouched and their count (llama4:
// its shared expert cut with the routed ones, checked as they are).
#pragma once

#include "moe/width.h"
#include "plan/plan.h"

#include <ggml.h>
#include <gguf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace width_test {

// A tensor as ggml's gguf reader loads it.
struct loaded {
    ggml_type            type = GGML_TYPE_F32;
    int64_t              ne[4] = {1, 1, 1, 1};
    std::vector<uint8_t> data;
};

inline std::map<std::string, loaded> load_with_ggml(const std::string & path) {
    std::map<std::string, loaded> out;
    ggml_context * ctx = nullptr;
    gguf_init_params ip = {/*no_alloc =*/ false, /*ctx =*/ &ctx};
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    if (!g) return out;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const ggml_tensor * t = ggml_get_tensor(ctx, gguf_get_tensor_name(g, i));
        loaded & l = out[t->name];
        l.type = t->type;
        for (int d = 0; d < 4; ++d) l.ne[d] = t->ne[d];
        const uint8_t * p = (const uint8_t *) t->data;
        l.data.assign(p, p + ggml_nbytes(t));
    }
    gguf_free(g);
    ggml_free(ctx);
    return out;
}

inline int64_t gguf_int(const std::string & path, const std::string & key) {
    gguf_init_params ip = {/*no_alloc =*/ true, /*ctx =*/ nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    if (!g) return -1;
    const int64_t id = gguf_find_key(g, key.c_str());
    int64_t v = -1;
    if (id >= 0 && gguf_get_kv_type(g, id) == GGUF_TYPE_UINT32) v = gguf_get_val_u32(g, id);
    gguf_free(g);
    return v;
}

// The test's own requantisation of one kept expert's down slab (ggml row by row).
inline std::vector<uint8_t> expected_down(const loaded & src, int64_t e, const std::vector<int64_t> & ch, ggml_type out_type) {
    const int64_t n_ff = src.ne[0], rows = src.ne[1];
    const size_t row_bytes = ggml_row_size(src.type, n_ff);
    std::vector<float> full(static_cast<size_t>(n_ff)), kept(static_cast<size_t>(rows) * ch.size());
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t * p = src.data.data() + (size_t(e * rows + r)) * row_bytes;
        if (src.type == GGML_TYPE_F32) memcpy(full.data(), p, row_bytes);
        else ggml_get_type_traits(src.type)->to_float(p, full.data(), n_ff);
        for (size_t j = 0; j < ch.size(); ++j) kept[size_t(r) * ch.size() + j] = full[size_t(ch[j])];
    }
    std::vector<uint8_t> q(ggml_row_size(out_type, int64_t(ch.size())) * size_t(rows));
    ggml_quantize_chunk(out_type, kept.data(), q.data(), 0, rows, int64_t(ch.size()), nullptr);
    return q;
}

// Checks `out` against `src` for plan `p` tensor by tensor, from ggml's reading of both files.
inline void expect_width_cut(const std::string & src_path, const std::string & out_path, const reap::plan & p, ggml_type down_type) {
    const auto src = load_with_ggml(src_path), out = load_with_ggml(out_path);
    ASSERT_FALSE(src.empty());
    ASSERT_EQ(src.size(), out.size());
    const int64_t K = p.width_keep, n_ff = p.width_n_ff;
    // a plan for a model whose shared expert is cut too (llama4) lists its channels in every layer
    const bool shared_cut = !p.layers.empty() && !p.layers[0].shared_channels.empty();
    int n_checked = 0, n_shared = 0;
    for (const auto & [name, s] : src) {
        const loaded & o = out.at(name);
        const bool rows = reap::moe::width_keeps_rows(name, shared_cut), down = reap::moe::width_cuts_columns(name, shared_cut);
        if (!rows && !down) continue;
        SCOPED_TRACE(name);
        size_t dot = 0;
        const reap::plan_layer * pl = p.find_layer(int(reap::gguf::block_index(name, dot)));
        ASSERT_NE(pl, nullptr);
        // the shared expert: one matrix (source 0) keeping the layer's shared channels
        const bool shared = name.find("_shexp.") != std::string::npos;
        const size_t n_out = shared ? 1 : pl->keep.size();
        auto source = [&](size_t k) { return shared ? int64_t(0) : pl->keep[k]; };
        auto channels = [&](size_t k) -> const std::vector<int64_t> & { return shared ? pl->shared_channels : pl->channels[k]; };
        n_shared += shared;
        const bool bias = s.ne[2] == 1 && !down && !shared;
        const int64_t n_expert = shared ? 1 : bias ? s.ne[1] : s.ne[2];
        if (down) {
            ASSERT_EQ(o.type, down_type);
            ASSERT_EQ(o.ne[0], K);
            ASSERT_EQ(o.ne[2], int64_t(n_out));
            const size_t per_out = o.data.size() / n_out;
            for (size_t k = 0; k < n_out; ++k) {
                const std::vector<uint8_t> want = expected_down(s, source(k), channels(k), down_type);
                ASSERT_EQ(want.size(), per_out);
                EXPECT_EQ(0, memcmp(want.data(), o.data.data() + k * per_out, per_out)) << "output expert " << k;
            }
        } else {
            ASSERT_EQ(o.type, s.type);
            ASSERT_EQ(bias ? o.ne[0] : o.ne[1], K);
            const size_t row = s.data.size() / size_t(n_expert * n_ff);
            for (size_t k = 0; k < n_out; ++k) {
                for (int64_t j = 0; j < K; ++j) {
                    const size_t at_s = (size_t(source(k)) * size_t(n_ff) + size_t(channels(k)[size_t(j)])) * row;
                    const size_t at_o = (k * size_t(K) + size_t(j)) * row;
                    ASSERT_EQ(0, memcmp(s.data.data() + at_s, o.data.data() + at_o, row)) << "expert " << k << " row " << j;
                }
            }
        }
        ++n_checked;
    }
    EXPECT_GT(n_checked, 0);
    if (shared_cut) EXPECT_EQ(n_shared, 3 * int(p.layers.size())) << "gate, up and down of every layer's shared expert";
}

// Shared experts (deepseek2, glm4moe, kimi-k3 in the zoo): llama.cpp sizes
// them n_ff x <arch>.expert_shared_count, so a cut to K must write the count
// S/K, S read here from the source's ffn_gate_shexp (ne[1]), and leave every
// shared-expert tensor byte-identical. Models without them: the count, if
// any, is unchanged.
inline void expect_shared_kept(const std::string & src_path, const std::string & out_path, const std::string & arch, int64_t K) {
    const auto src = load_with_ggml(src_path), out = load_with_ggml(out_path);
    if (arch == "llama4") {   // its one shared expert is cut with the routed ones (expect_width_cut audits it): K wide
        int n = 0;
        for (const auto & [name, o] : out) {
            if (name.find("_shexp.") == std::string::npos) continue;
            EXPECT_EQ(name.find("ffn_down_shexp") != std::string::npos ? o.ne[0] : o.ne[1], K) << name;
            ++n;
        }
        EXPECT_GE(n, 3);
        return;
    }
    int64_t S = 0;
    int n_shared = 0;
    for (const auto & [name, s] : src) {
        if (name.find("_shexp") == std::string::npos) continue;
        SCOPED_TRACE(name);
        if (name.find("ffn_gate_shexp.weight") != std::string::npos) S = s.ne[1];
        const loaded & o = out.at(name);
        EXPECT_EQ(o.type, s.type);
        for (int d = 0; d < 4; ++d) EXPECT_EQ(o.ne[d], s.ne[d]);
        EXPECT_TRUE(o.data == s.data) << "shared-expert bytes changed";
        ++n_shared;
    }
    const std::string key = arch + ".expert_shared_count";
    if (S == 0 || arch == "qwen2moe") {   // qwen2moe's loader reads their width from its own key
        EXPECT_EQ(gguf_int(out_path, key), gguf_int(src_path, key));
        return;
    }
    ASSERT_EQ(S % K, 0);
    EXPECT_EQ(gguf_int(out_path, key), S / K);
    EXPECT_GE(n_shared, 3);
}

}  // namespace width_test

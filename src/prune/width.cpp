// The width cut of width.h: row pieces for gate/up, ggml requantisation for down.
#include "prune/width.h"

#include "moe/pruned.h"
#include "moe/width.h"

#include <ggml.h>

#include <cstring>
#include <memory>

namespace reap::prune {

namespace {

// Byte pieces of rows `rows` (ascending) of `row_bytes` each, starting at
// `base` in `path`; consecutive rows become one piece.
void add_row_pieces(std::vector<gguf::data_piece> & pieces, const std::string & path, uint64_t base, uint64_t row_bytes,
                    const std::vector<int64_t> & rows) {
    for (int64_t r : rows) {
        const uint64_t off = base + uint64_t(r) * row_bytes;
        if (!pieces.empty() && pieces.back().path == path && pieces.back().offset + pieces.back().length == off) {
            pieces.back().length += row_bytes;
        } else {
            pieces.push_back({path, off, row_bytes});
        }
    }
}

} // namespace

bool needs_importance(gguf::tensor_type type) {
    return ggml_quantize_requires_imatrix(ggml_type(type)) || type == gguf::tensor_type::IQ1_M;
}

std::string requantise_refusal(gguf::tensor_type type, int64_t n_per_row, bool have_importance) {
    using tt = gguf::tensor_type;
    const gguf::type_info * ti = gguf::find_type(uint32_t(type));
    const std::string name = ti ? ti->name : std::to_string(uint32_t(type));
    // the cases of ggml_quantize_chunk's switch in the pinned ggml (ggml.c)
    static const tt k_quantisable[] = {tt::Q1_0, tt::Q2_0, tt::Q4_0, tt::Q4_1, tt::Q5_0, tt::Q5_1, tt::Q8_0,
                                       tt::MXFP4, tt::NVFP4, tt::Q2_K, tt::Q3_K, tt::Q4_K, tt::Q5_K, tt::Q6_K,
                                       tt::TQ1_0, tt::TQ2_0, tt::IQ2_XXS, tt::IQ2_XS, tt::IQ3_XXS, tt::IQ3_S,
                                       tt::IQ2_S, tt::IQ1_S, tt::IQ1_M, tt::IQ4_NL, tt::IQ4_XS, tt::F16, tt::BF16, tt::F32};
    bool quantisable = false;
    for (tt q : k_quantisable) quantisable = quantisable || (ti && q == type);
    if (!quantisable) return "ggml cannot quantise to " + name + " from floats";
    if (needs_importance(type) && !have_importance) {
        return "quantising to " + name + " needs an importance matrix: give the source model's llama-imatrix file (--imatrix)";
    }
    if (n_per_row % ti->block_size != 0) {
        return "rows of " + std::to_string(n_per_row) + " values are not whole blocks of " + name + " (" +
               std::to_string(ti->block_size) + " values)";
    }
    return "";
}

gguf::tensor_type width_down_type(const gguf::tensor_info & t, const width_options & o) {
    return o.down_type ? *o.down_type : t.type;
}

const gguf::tensor_info * cut_down_needing_importance(const gguf::model & m, const moe::layout & lay, const width_options & o) {
    const bool shared_cut = moe::width_cuts_shared(m, lay);
    for (const gguf::tensor_info & t : m.tensors) {
        if (moe::width_cuts_columns(t.name, shared_cut) && needs_importance(width_down_type(t, o))) return &t;
    }
    return nullptr;
}

bool check_down_cut(const gguf::tensor_info & t, int64_t K, gguf::tensor_type out_type, bool have_importance, std::string & err) {
    const std::string who = "tensor '" + t.name + "'";
    const int64_t n_ff = t.ne[0], n_rows = t.ne[1], n_expert = t.ne[2];
    if (K < 1 || n_rows < 1 || n_expert < 1) {
        err = who + " " + t.shape_string() + ": no expert rows to cut to " + std::to_string(K) + " channels";
        return false;
    }
    const std::string why = requantise_refusal(out_type, K, have_importance);
    if (!why.empty()) {
        err = who + ": " + why;
        return false;
    }
    const ggml_type src_type = ggml_type(t.type);
    if (t.type != gguf::tensor_type::F32 && !ggml_get_type_traits(src_type)->to_float) {
        err = who + ": ggml cannot dequantise its type " + gguf::type_name(t.type);
        return false;
    }
    const uint64_t slab = t.nbytes / uint64_t(n_expert);
    const uint64_t row_bytes = slab / uint64_t(n_rows);
    if (row_bytes * uint64_t(n_rows) * uint64_t(n_expert) != t.nbytes || row_bytes != ggml_row_size(src_type, n_ff)) {
        err = who + " " + t.shape_string() + ": " + std::to_string(t.nbytes) + " bytes are not " + std::to_string(n_expert) +
              " experts of " + std::to_string(n_rows) + " rows of " + std::to_string(n_ff) + " " + gguf::type_name(t.type);
        return false;
    }
    return true;
}

bool requantise_down_expert(const gguf::model & m, const gguf::tensor_info & t, int64_t e,
                            const std::vector<int64_t> & channels, gguf::tensor_type out_type, std::vector<uint8_t> & out,
                            std::string & err, const std::vector<float> * importance, std::vector<float> * dequantised) {
    const std::string who = "tensor '" + t.name + "'";
    const int64_t n_ff = t.ne[0], n_rows = t.ne[1], n_expert = t.ne[2];
    const int64_t K = int64_t(channels.size());
    if (e < 0 || e >= n_expert) {
        err = who + ": no expert " + std::to_string(e) + " of " + std::to_string(n_expert) + " to cut to " + std::to_string(K);
        return false;
    }
    if (!check_down_cut(t, K, out_type, importance != nullptr, err)) return false;
    const ggml_type src_type = ggml_type(t.type);
    const auto * traits = ggml_get_type_traits(src_type);
    const uint64_t slab = t.nbytes / uint64_t(n_expert);
    const uint64_t row_bytes = slab / uint64_t(n_rows);
    std::vector<uint8_t> src(slab);
    if (!gguf::read_tensor_bytes(m, t, uint64_t(e) * slab, slab, src.data(), err)) return false;
    std::vector<float> row(size_t(n_ff), 0.0f);
    std::vector<float> kept(size_t(n_rows * K));
    for (int64_t r = 0; r < n_rows; ++r) {
        const uint8_t * p = src.data() + uint64_t(r) * row_bytes;
        if (t.type == gguf::tensor_type::F32) {
            memcpy(row.data(), p, size_t(n_ff) * sizeof(float));
        } else {
            traits->to_float(p, row.data(), n_ff);
        }
        for (int64_t j = 0; j < K; ++j) {
            const int64_t c = channels[size_t(j)];
            if (c < 0 || c >= n_ff) {
                err = who + ": channel " + std::to_string(c) + " out of range [0, " + std::to_string(n_ff) + ")";
                return false;
            }
            kept[size_t(r * K + j)] = row[size_t(c)];
        }
    }
    const size_t out_row = ggml_row_size(ggml_type(out_type), K);
    out.assign(out_row * size_t(n_rows), 0);
    const float * w = nullptr;
    if (needs_importance(out_type)) {
        if (int64_t(importance->size()) != K) {
            err = who + ": an importance matrix of " + std::to_string(importance->size()) + " values for " + std::to_string(K) +
                  " kept channels";
            return false;
        }
        w = importance->data();
    }
    const size_t n = ggml_quantize_chunk(ggml_type(out_type), kept.data(), out.data(), 0, n_rows, K, w);
    if (n != out.size()) {
        err = who + ": ggml quantised " + std::to_string(n) + " bytes, " + std::to_string(out.size()) + " expected";
        return false;
    }
    if (dequantised) *dequantised = std::move(kept);
    return true;
}

bool apply_width(const gguf::model & m, const moe::layout & lay, const plan & p, const width_options & o, bool stamp,
                 gguf::output_spec & spec, std::string & err) {
    const int64_t n_ff = p.width_n_ff;
    // shapes, down's type, the width KV and the stamp: the header rule plan --budget sizes with too
    if (!moe::width_header(m, lay, {n_ff, p.width_keep, o.down_type}, stamp, spec, err)) return false;
    const bool shared_cut = moe::width_cuts_shared(m, lay);
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const gguf::tensor_info & t = m.tensors[i];
        const bool rows = moe::width_keeps_rows(t.name, shared_cut), cols = moe::width_cuts_columns(t.name, shared_cut);
        if (!rows && !cols) continue;
        const std::string who = "tensor '" + t.name + "'";
        const plan_layer * pl = p.find_layer(lay.roles[i].layer);
        // a shared expert is one matrix (keep "expert" 0) with the layer's shared channels
        const bool shared = moe::width_is_shared(t.name);
        if (!pl || pl->channels.size() != pl->keep.size() || (shared && int64_t(pl->shared_channels.size()) != p.width_keep)) {
            err = who + ": its layer has no " + (shared ? "shared-expert channels" : "channel lists") + " in the plan";
            return false;
        }
        const width_matrices mats{pl, shared};
        gguf::output_tensor & out = spec.tensors[i];
        if (cols) {
            // checked now, requantised when written (its size is known from type and shape: a dry run makes none of it)
            const gguf::tensor_type type = width_down_type(t, o);
            const bool weighted = needs_importance(type) && o.importance;
            if (!check_down_cut(t, p.width_keep, type, weighted, err)) return false;
            out.pieces.clear();
            out.memory.reset();
            out.produce = [&m, &t, mats, type,
                           importance = weighted ? o.importance : down_importance()](std::vector<uint8_t> & data, std::string & e) {
                data.clear();
                std::vector<uint8_t> one;
                std::vector<float> w;
                for (size_t k = 0; k < mats.size(); ++k) {
                    if (importance && !importance(t.name, k, w, e)) return false;
                    if (!requantise_down_expert(m, t, mats.source(k), mats.channels(k), type, one, e, importance ? &w : nullptr)) {
                        return false;
                    }
                    data.insert(data.end(), one.begin(), one.end());
                }
                return true;
            };
            continue;
        }
        // gate / up: rows (weight: ne[1]) or elements (bias: ne[0]) of the kept channels
        const bool bias = moe::width_channel_dim(t.name) == 0;
        const int64_t n_mat = shared ? 1 : lay.n_expert;
        const uint64_t per_expert = t.nbytes / uint64_t(n_mat);
        const uint64_t row_bytes = per_expert / uint64_t(n_ff);
        if (row_bytes * uint64_t(n_ff) * uint64_t(n_mat) != t.nbytes ||
            (bias && gguf::find_type(uint32_t(t.type))->block_size != 1)) {
            err = who + " " + t.shape_string() + " does not hold " + std::to_string(n_ff) + " whole rows per " +
                  (shared ? "matrix" : "expert");
            return false;
        }
        out.pieces.clear();
        out.memory.reset();
        for (size_t k = 0; k < mats.size(); ++k) {
            add_row_pieces(out.pieces, m.path_of(t), t.file_offset + uint64_t(mats.source(k)) * per_expert, row_bytes,
                           mats.channels(k));
        }
    }
    return true;
}

}  // namespace reap::prune

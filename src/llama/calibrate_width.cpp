// reap calibrate --width-saliency: the down projections' column norms (from
// the GGUF bytes, dequantised by ggml) and the check of the node whose input
// calibrate reads per channel. See calibrate_width.h.
#include "llama/calibrate_width.h"

#include "ggml.h"

#include <cmath>
#include <cstring>

namespace reap {

namespace {

// The per-expert down scales of layer l (blk.L.ffn_down_exps.scale, F32 [n_expert]), or all 1.
bool down_scales(const gguf::model & m, int l, int64_t n_expert, std::vector<float> & s, std::string & err) {
    s.assign((size_t) n_expert, 1.0f);
    const std::string name = "blk." + std::to_string(l) + ".ffn_down_exps.scale";
    const gguf::tensor_info * t = m.find_tensor(name);
    if (!t) return true;
    if (t->type != gguf::tensor_type::F32 || t->n_elements() != (uint64_t) n_expert) {
        err = "tensor '" + name + "' has type " + gguf::type_name(t->type) + " and shape " + t->shape_string() +
              ", expected f32 with one scale per expert (" + std::to_string(n_expert) + ")";
        return false;
    }
    return gguf::read_tensor_bytes(m, *t, 0, t->nbytes, s.data(), err);
}

// Whether ggml can turn `type` into floats (F32 as it is, others through their traits).
bool dequantisable(gguf::tensor_type type) {
    const ggml_type_traits * tr = ggml_get_type_traits((ggml_type) type);
    return (ggml_type) type == GGML_TYPE_F32 || (tr && tr->to_float);
}

// Σ over the rows of slab `slab` of down tensor t (n_ff values a row, ne[1] rows a
// slab) of each column's square: sq[c] = ‖W[:,c]‖². The caller checked the type
// (dequantisable) and that the slabs are whole rows.
bool column_squares(const gguf::model & m, const gguf::tensor_info & t, int64_t n_ff, int64_t slab, std::vector<double> & sq,
                    std::string & err) {
    const ggml_type type = (ggml_type) t.type;
    const ggml_type_traits * tr = ggml_get_type_traits(type);
    const size_t row_bytes = ggml_row_size(type, n_ff);
    std::vector<uint8_t> row(row_bytes);
    std::vector<float> vals((size_t) n_ff);
    sq.assign((size_t) n_ff, 0.0);
    for (int64_t r = 0; r < t.ne[1]; ++r) {
        const uint64_t off = ((uint64_t) slab * (uint64_t) t.ne[1] + (uint64_t) r) * row_bytes;
        if (!gguf::read_tensor_bytes(m, t, off, row_bytes, row.data(), err)) return false;
        if (type == GGML_TYPE_F32) {
            memcpy(vals.data(), row.data(), row_bytes);
        } else {
            tr->to_float(row.data(), vals.data(), n_ff);
        }
        for (int64_t c = 0; c < n_ff; ++c) sq[(size_t) c] += (double) vals[(size_t) c] * vals[(size_t) c];
    }
    return true;
}

// The column norms of down tensor t (`name`), n_slabs slabs of ne[1] rows of
// n_ff values: out[slab * n_ff + c] = |scale[slab]| * ‖W_slab[:,c]‖ (scale
// all 1 when empty). Checks that ggml can dequantise its type, that the
// slabs are whole rows and that every norm is finite; `per_expert` names
// the slab in that message (routed experts).
bool slab_column_norms(const gguf::model & m, const gguf::tensor_info & t, const std::string & name, int64_t n_ff,
                       int64_t n_slabs, const std::vector<float> & scale, bool per_expert, double * out, std::string & err) {
    if (!dequantisable(t.type)) {
        err = "--width-saliency: tensor '" + name + "' has type " + gguf::type_name(t.type) + ", which ggml cannot dequantise";
        return false;
    }
    if ((uint64_t) ggml_row_size((ggml_type) t.type, n_ff) * (uint64_t) t.ne[1] * (uint64_t) n_slabs != t.nbytes) {
        err = "--width-saliency: tensor '" + name + "' has " + std::to_string(t.nbytes) + " bytes, not a whole number of rows";
        return false;
    }
    std::vector<double> sq;
    for (int64_t e = 0; e < n_slabs; ++e) {
        if (!column_squares(m, t, n_ff, e, sq, err)) return false;
        const double s = scale.empty() ? 1.0 : std::fabs((double) scale[(size_t) e]);
        for (int64_t c = 0; c < n_ff; ++c) {
            double & o = out[(size_t) e * (size_t) n_ff + (size_t) c];
            o = s * std::sqrt(sq[(size_t) c]);
            if (!std::isfinite(o)) {
                err = "--width-saliency: tensor '" + name + "'" + (per_expert ? " expert " + std::to_string(e) : std::string()) +
                      " channel " + std::to_string(c) + ": the column norm is not finite";
                return false;
            }
        }
    }
    return true;
}

}  // namespace

bool down_column_norms(const gguf::model & m, const std::vector<int> & moe_layers, int64_t n_layer, int64_t n_expert,
                       std::vector<double> & norms, int64_t & n_ff, std::string & err) {
    n_ff = 0;
    norms.clear();
    std::vector<float> scale;
    for (int l : moe_layers) {
        const std::string name = "blk." + std::to_string(l) + ".ffn_down_exps.weight";
        const gguf::tensor_info * t = m.find_tensor(name);
        if (!t) {
            err = "--width-saliency: MoE layer " + std::to_string(l) + " has no tensor '" + name +
                  "' (only archs whose experts have a down projection have channel saliency)";
            return false;
        }
        if (t->n_dims != 3 || t->ne[2] != n_expert || t->ne[0] < 1 || t->ne[1] < 1) {
            err = "--width-saliency: tensor '" + name + "' has shape " + t->shape_string() + ", expected [n_ff, n_embd, " +
                  std::to_string(n_expert) + "]";
            return false;
        }
        if (n_ff == 0) {
            n_ff = t->ne[0];
            if ((uint64_t) n_layer * (uint64_t) n_expert * (uint64_t) n_ff > (1ull << 31)) {
                err = "--width-saliency: " + std::to_string(n_layer) + " layers x " + std::to_string(n_expert) + " experts x " +
                      std::to_string(n_ff) + " channels is too many values";
                return false;
            }
            norms.assign((size_t) (n_layer * n_expert * n_ff), 0.0);
        } else if (t->ne[0] != n_ff) {
            err = "--width-saliency: tensor '" + name + "' has " + std::to_string(t->ne[0]) + " channels, an earlier MoE layer " +
                  std::to_string(n_ff) + ": an archive holds one expert width";
            return false;
        }
        if (!dequantisable(t->type)) {   // named before a problem with the scales
            err = "--width-saliency: tensor '" + name + "' has type " + gguf::type_name(t->type) + ", which ggml cannot dequantise";
            return false;
        }
        if (!down_scales(m, l, n_expert, scale, err)) return false;
        double * out = norms.data() + (size_t) l * (size_t) n_expert * (size_t) n_ff;
        if (!slab_column_norms(m, *t, name, n_ff, n_expert, scale, true, out, err)) return false;
    }
    return true;
}

bool shared_down_column_norms(const gguf::model & m, const std::vector<int> & moe_layers, int64_t n_layer, int64_t n_ff,
                              std::vector<double> & norms, std::string & err) {
    norms.assign((size_t) (n_layer * n_ff), 0.0);   // n_layer x n_ff <= down_column_norms' bounded count
    for (int l : moe_layers) {
        const std::string name = "blk." + std::to_string(l) + ".ffn_down_shexp.weight";
        const gguf::tensor_info * t = m.find_tensor(name);
        if (!t) {
            err = "--width-saliency: MoE layer " + std::to_string(l) + " has no tensor '" + name +
                  "', but the model's shared expert is cut with the routed experts";
            return false;
        }
        if (t->n_dims != 2 || t->ne[0] != n_ff || t->ne[1] < 1) {
            err = "--width-saliency: tensor '" + name + "' has shape " + t->shape_string() + ", expected [" +
                  std::to_string(n_ff) + ", n_embd] (the shared expert is as wide as the routed experts)";
            return false;
        }
        if (!slab_column_norms(m, *t, name, n_ff, 1, {}, false, norms.data() + (size_t) l * (size_t) n_ff, err)) return false;
    }
    return true;
}

bool shared_down_input_of(const ggml_tensor * t, const char * weight, int64_t n_ff, int64_t n_tok, const ggml_tensor *& input,
                          std::string & err) {
    const std::string what = std::string("node '") + t->name + "' (the product with " + weight + ")";
    const ggml_tensor * a = t->src[1];
    if (t->op != GGML_OP_MUL_MAT || !a) {
        err = what + " is " + ggml_op_name(t->op) + ", not a matrix product: cannot read its input per channel";
        return false;
    }
    if (a->type != GGML_TYPE_F32 || a->ne[0] != n_ff || a->ne[1] != n_tok || a->ne[2] != 1 || a->ne[3] != 1 ||
        a->nb[0] != sizeof(float)) {
        err = what + ": its input has type " + ggml_type_name(a->type) + " and shape [" + std::to_string(a->ne[0]) + ", " +
              std::to_string(a->ne[1]) + ", " + std::to_string(a->ne[2]) + ", " + std::to_string(a->ne[3]) +
              "], expected f32 [" + std::to_string(n_ff) + ", " + std::to_string(n_tok) +
              "] (the tokens the layer's routing saw)";
        return false;
    }
    input = a;
    return true;
}

bool down_input_of(const ggml_tensor * down, int64_t n_ff, int64_t n_used, int64_t n_tok, const ggml_tensor *& input,
                   std::string & err) {
    const std::string what = std::string("node '") + down->name + "'";
    if (down->op != GGML_OP_MUL_MAT_ID || !down->src[0] || !down->src[1]) {
        err = what + " is " + ggml_op_name(down->op) + ", not the experts' MUL_MAT_ID: cannot read its input per channel";
        return false;
    }
    const ggml_tensor * a = down->src[1];
    if (a->type != GGML_TYPE_F32 || a->ne[0] != n_ff || (a->ne[1] != n_used && a->ne[1] != 1) || a->ne[2] != n_tok ||
        a->ne[3] != 1 || a->nb[0] != sizeof(float)) {
        err = what + ": its input has type " + ggml_type_name(a->type) + " and shape [" + std::to_string(a->ne[0]) + ", " +
              std::to_string(a->ne[1]) + ", " + std::to_string(a->ne[2]) + ", " + std::to_string(a->ne[3]) +
              "], expected f32 [" + std::to_string(n_ff) + ", " + std::to_string(n_used) + ", " + std::to_string(n_tok) + "]";
        return false;
    }
    input = a;
    return true;
}

}  // namespace reap

// Virtual pruning (see mask.h): the plan-to-mask step and the eval callback
// that writes -inf into the removed experts' router columns.
#include "llama/mask.h"
#include "llama/moe_nodes.h"
#include "prune/prune.h"
#include "prune/width.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

namespace reap {

namespace {

// The router nodes masked, by their name before "-L" (see mask.h for why each).
constexpr const char * k_router_nodes[] = {"ffn_moe_logits", "ffn_moe_probs", "ffn_moe_probs_biased"};

// "ffn_moe_probs-12" -> (1, 12): index into k_router_nodes and block; false
// for any other name.
bool router_node(const char * name, int & which, int & layer) {
    const char * dash = strrchr(name, '-');
    if (!dash || dash == name || dash[1] == '\0') return false;
    const size_t base_len = (size_t) (dash - name);
    for (int i = 0; i < (int) (sizeof(k_router_nodes) / sizeof(k_router_nodes[0])); ++i) {
        if (strlen(k_router_nodes[i]) == base_len && strncmp(name, k_router_nodes[i], base_len) == 0) {
            char * end = nullptr;
            const long l = strtol(dash + 1, &end, 10);
            if (*end != '\0' || l < 0 || l > (1 << 20)) return false;
            which = i;
            layer = (int) l;
            return true;
        }
    }
    return false;
}

// "ffn_swiglu-3" -> ("ffn_swiglu", 3); false for a name without "-<layer>".
bool layer_node(const char * name, std::string & base, int & layer) {
    const char * dash = strrchr(name, '-');
    if (!dash || dash == name || dash[1] == '\0') return false;
    char * end = nullptr;
    const long l = strtol(dash + 1, &end, 10);
    if (*end != '\0' || l < 0 || l > (1 << 20)) return false;
    base.assign(name, (size_t) (dash - name));
    layer = (int) l;
    return true;
}

// "ffn_moe_swiglu-3" -> ("ffn_moe_swiglu", 3); false for a name without "-<layer>".
bool moe_node(const char * name, std::string & base, int & layer) {
    return strncmp(name, "ffn_moe_", 8) == 0 && layer_node(name, base, layer);
}

// One matrix's bitmap of removed channels (`words` words, n_ff channels):
// every channel but `kept` (in [0, n_ff), unique, at least one). `where`
// names the matrix in messages.
bool removed_row(uint64_t * row, size_t words, int64_t n_ff, const std::vector<int64_t> & kept, const std::string & where,
                 std::string & err) {
    if (kept.empty()) { err = where + " keeps no channel"; return false; }
    std::fill(row, row + words, ~uint64_t(0));   // every channel removed, then the kept ones cleared
    if (n_ff % 64) row[words - 1] = (uint64_t(1) << (n_ff % 64)) - 1;
    for (int64_t c : kept) {
        if (c < 0 || c >= n_ff || !((row[c / 64] >> (c % 64)) & 1)) {
            err = where + ": channel " + std::to_string(c) +
                  (c < 0 || c >= n_ff ? " out of range [0, " + std::to_string(n_ff) + ")" : std::string(" listed twice"));
            return false;
        }
        row[c / 64] &= ~(uint64_t(1) << (c % 64));
    }
    return true;
}

// build_ffn's activations (llama.cpp src/llama-graph.cpp), the input of its
// down projection: where a shared expert's removed channels are zeroed.
bool is_ffn_activation(const std::string & base) {
    static const char * const k_names[] = {"ffn_swiglu", "ffn_swiglu_limited", "ffn_geglu", "ffn_reglu", "ffn_gate_par"};
    for (const char * n : k_names) {
        if (base == n) return true;
    }
    return false;
}

} // namespace

bool set_width_block(expert_mask & m, int block, const std::vector<int64_t> & experts,
                     const std::vector<std::vector<int64_t>> & channels, std::string & err) {
    const std::string where = "width mask: block " + std::to_string(block);
    if (m.n_ff < 1) { err = "width mask: " + std::to_string(m.n_ff) + " channels per expert"; return false; }
    const bool moe = block >= 0 && (size_t) block < m.removed.size() && !m.removed[(size_t) block].empty();
    if (!moe) { err = where + " is not an MoE block of the mask"; return false; }
    if (experts.size() != channels.size()) {
        err = where + ": " + std::to_string(channels.size()) + " channel lists for " + std::to_string(experts.size()) + " experts";
        return false;
    }
    m.removed_channels.resize(m.removed.size());
    if (!m.removed_channels[(size_t) block].empty()) { err = where + " is given twice"; return false; }
    const size_t words = m.words_per_expert();
    const int64_t n_ff = m.n_ff;
    std::vector<uint64_t> bits((size_t) m.n_expert * words, 0);   // experts not listed: every channel kept
    for (size_t i = 0; i < experts.size(); ++i) {
        const int64_t e = experts[i];
        if (e < 0 || e >= m.n_expert) { err = where + ": expert " + std::to_string(e) + " out of range"; return false; }
        uint64_t * row = bits.data() + (size_t) e * words;
        if (std::any_of(row, row + words, [](uint64_t w) { return w != 0; })) {
            err = where + ": expert " + std::to_string(e) + " listed twice";
            return false;
        }
        if (!removed_row(row, words, n_ff, channels[i], where + " expert " + std::to_string(e), err)) return false;
    }
    m.removed_channels[(size_t) block] = std::move(bits);
    return true;
}

bool set_width_shared(expert_mask & m, int block, const std::vector<int64_t> & channels, std::string & err) {
    const std::string where = "width mask: block " + std::to_string(block) + " shared expert";
    if (m.n_ff < 1) { err = "width mask: " + std::to_string(m.n_ff) + " channels per expert"; return false; }
    const bool moe = block >= 0 && (size_t) block < m.removed.size() && !m.removed[(size_t) block].empty();
    if (!moe) { err = "width mask: block " + std::to_string(block) + " is not an MoE block of the mask"; return false; }
    m.removed_shared_channels.resize(m.removed.size());
    if (!m.removed_shared_channels[(size_t) block].empty()) { err = where + " is given twice"; return false; }
    std::vector<uint64_t> bits(m.words_per_expert(), 0);
    if (!removed_row(bits.data(), bits.size(), m.n_ff, channels, where, err)) return false;
    m.removed_shared_channels[(size_t) block] = std::move(bits);
    return true;
}

bool set_width_mask(expert_mask & m, int64_t n_ff, const std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> & kept,
                    std::string & err) {
    if (n_ff < 1) {
        err = "width mask: " + std::to_string(n_ff) + " channels per expert";
        return false;
    }
    expert_mask t = m;   // set whole or not at all
    t.n_ff = n_ff;
    t.removed_channels.assign(t.removed.size(), {});
    std::vector<int64_t> every((size_t) std::max<int64_t>(t.n_expert, 0));
    for (size_t e = 0; e < every.size(); ++e) every[e] = (int64_t) e;
    for (const auto & [block, experts] : kept) {
        if ((int64_t) experts.size() != t.n_expert) {
            err = "width mask: block " + std::to_string(block) + ": " + std::to_string(experts.size()) + " experts' channels, expected " +
                  std::to_string(t.n_expert);
            return false;
        }
        if (!set_width_block(t, block, every, experts, err)) return false;
    }
    m = std::move(t);
    return true;
}

bool mask_of_plan(const plan & p, const std::string & name, const moe::layout & lay, expert_mask & out, std::string & err) {
    expert_mask m;
    m.name     = name;
    m.n_expert = p.n_expert;
    m.n_keep   = p.n_keep;
    m.removed.assign((size_t) p.n_layer, {});
    if (p.has_width()) m.n_ff = p.width_n_ff;
    for (const plan_layer & pl : p.layers) {
        std::vector<uint8_t> & r = m.removed[(size_t) pl.layer];
        r.assign((size_t) p.n_expert, 1);
        for (int64_t e : pl.keep) r[(size_t) e] = 0;
        (lay.is_mtp(pl.layer) ? m.mtp_layers : m.moe_layers).push_back(pl.layer);
        // a width plan: each kept source expert keep[i] keeps channels[i], one bit per channel
        if (p.has_width() && (!set_width_block(m, pl.layer, pl.keep, pl.channels, err) ||
                              (!pl.shared_channels.empty() && !set_width_shared(m, pl.layer, pl.shared_channels, err)))) {
            err = name + ": " + err;
            return false;
        }
    }
    out = std::move(m);
    return true;
}

bool mask_from_plan(const plan & p, const std::string & name, const gguf::model & model, const std::string & model_name,
                    expert_mask & out, std::string & err) {
    std::string warning, other;
    if (!plan_model_mismatch(p, model, name, model_name, other, warning, err)) return false;
    if (!other.empty()) {
        err = other + ": a measurement under it would not be of " + model_name;
        return false;
    }
    moe::layout lay;
    if (!model_layout(model, lay, err)) return false;
    prune::width_options any_width;   // the mask takes any K: as prune --down-type f32 would
    any_width.down_type = gguf::tensor_type::F32;
    if (!validate_plan(p, prune::prune_facts(model, lay, p, any_width), err)) {
        err = name + " does not fit the model: " + err;
        return false;
    }
    if (!mask_of_plan(p, name, lay, out, err)) return false;
    out.warning = warning;
    return true;
}

bool load_mask(const std::string & path, const gguf::model & model, const std::string & model_name, expert_mask & out,
               std::string & err) {
    plan p;
    std::string sha256;
    if (!read_plan(path, p, sha256, err) || !mask_from_plan(p, path, model, model_name, out, err)) return false;
    out.plan_sha256 = sha256;
    return true;
}

bool mask_hook::callback(ggml_tensor * t, bool ask, void * user) {
    auto * self = static_cast<mask_hook *>(user);
    const expert_mask * m = self->active;
    if (!m) return ask ? false : true;
    if (m->n_ff > 0 && (self->width_node(t, ask) || self->shared_width_node(t, ask))) return true;
    int which = 0, layer = 0;
    if (!router_node(t->name, which, layer) || layer >= (int) m->removed.size() || m->removed[(size_t) layer].empty()) {
        return ask ? false : true;
    }
    if (ask) return true;
    // Computed, not yet read by the next node: mask it in place.
    if (self->error_.empty()) self->mask_router(t, which, layer);
    return true;
}

bool mask_hook::mask_router(ggml_tensor * t, int which, int layer) {
    const expert_mask * m = active;
    const std::string what = std::string("node '") + t->name + "'";
    if (t->type != GGML_TYPE_F32) {
        error_ = what + " is " + ggml_type_name(t->type) + ", expected f32: cannot mask this router";
        return false;
    }
    if (t->ne[0] != m->n_expert || t->nb[0] != sizeof(float)) {
        error_ = what + " has " + std::to_string(t->ne[0]) + " columns, expected one per expert (" +
                 std::to_string(m->n_expert) + "): cannot mask this router";
        return false;
    }
    const std::vector<uint8_t> & removed = m->removed[(size_t) layer];
    const size_t row_bytes = (size_t) m->n_expert * sizeof(float);
    auto mask_row = [&](float * row) {
        for (int64_t e = 0; e < m->n_expert; ++e) {
            if (removed[(size_t) e]) row[e] = -INFINITY;
        }
    };
    if (ggml_is_contiguous(t)) {
        // One read and one write per node: on a GPU a copy per row would cost more than the mask.
        const size_t n = ggml_nbytes(t);
        row_buf_.resize(n / sizeof(float));
        if (n > 0) {
            ggml_backend_tensor_get(t, row_buf_.data(), 0, n);
            for (size_t r = 0; r < n / row_bytes; ++r) mask_row(row_buf_.data() + r * (size_t) m->n_expert);
            if (which == 0) narrow_router_logits(t, layer);
            if (which == 1) narrow_router_softmax(t, layer);
            ggml_backend_tensor_set(t, row_buf_.data(), 0, n);
        }
    } else {
        row_buf_.resize((size_t) m->n_expert);
        for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
                for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                    const size_t off = (size_t) (i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
                    ggml_backend_tensor_get(t, row_buf_.data(), off, row_bytes);
                    mask_row(row_buf_.data());
                    ggml_backend_tensor_set(t, row_buf_.data(), off, row_bytes);
                }
            }
        }
    }
    // ffn_moe_logits or ffn_moe_probs: the router itself was masked.
    if (which <= 1) {
        if (seen_.size() < m->removed.size()) seen_.resize(m->removed.size(), 0);
        seen_[(size_t) layer] = 1;
    }
    return true;
}

// The pruned model's router, on the CPU (see mask.h): ggml's kernels choose
// their path by shape, so a router of n_keep rows does not round as the
// masked n_expert-row one does. The matmul of ffn_gate_inp takes llamafile's
// sgemm only when the rows are a multiple of 4, ggml's dot products
// otherwise; the softmax sums its exponentials in SIMD groups of 8 or 16 with
// a scalar tail. Either moves a logit or a weight in its last bit, and in a
// model whose matmuls quantise their input (q8_0 / q8_K) that can flip a
// rounding and grow through the layers: measured on reap-moe-wide's Q4_K_M
// copy, up to 1e-4 of KLD between a sweep's point and the pruned file. So on
// the CPU the kept columns are recomputed by the same ggml ops on the kept
// rows alone, which is what the pruned model runs; the removed columns stay
// -inf. Another backend's nodes are left as it computed them (its kernels are
// not these). Each op runs in its own small context: `fill` writes the inputs.
namespace {

struct cpu_op {
    ggml_context * ctx = nullptr;
    explicit cpu_op(size_t data_bytes) {
        ggml_init_params ip = {};
        ip.mem_size = data_bytes + 8 * ggml_tensor_overhead() + ggml_graph_overhead() + (1u << 16);
        ctx = ggml_init(ip);
    }
    ~cpu_op() {
        if (ctx) ggml_free(ctx);
    }
    cpu_op(const cpu_op &) = delete;
    cpu_op & operator=(const cpu_op &) = delete;
    bool run(ggml_tensor * out, int n_threads) {
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        return ggml_graph_compute_with_ctx(ctx, gf, std::max(1, n_threads)) == GGML_STATUS_SUCCESS;
    }
};

bool on_host(const ggml_tensor * t) {
    return t && t->buffer && ggml_backend_buffer_is_host(t->buffer) && ggml_is_contiguous(t) && t->type == GGML_TYPE_F32 &&
           t->ne[2] == 1 && t->ne[3] == 1;
}

} // namespace

// Writes `narrow` (n_keep values per row) into row_buf_'s kept columns.
void mask_hook::scatter_kept(const float * narrow, int layer) {
    const std::vector<uint8_t> & removed = active->removed[(size_t) layer];
    const size_t n_rows = row_buf_.size() / (size_t) active->n_expert;
    for (size_t r = 0; r < n_rows; ++r) {
        float * row = row_buf_.data() + r * (size_t) active->n_expert;
        for (int64_t e = 0; e < active->n_expert; ++e) {
            if (!removed[(size_t) e]) row[e] = *narrow++;
        }
    }
}

// ffn_moe_logits = ffn_gate_inp x input: the kept rows of ffn_gate_inp times the input.
void mask_hook::narrow_router_logits(const ggml_tensor * t, int layer) {
    narrow_logits_of_ = nullptr;
    const ggml_tensor * w = t->src[0], * x = t->src[1];
    const int64_t n_keep = active->n_keep, n_embd = w ? w->ne[0] : 0, n_rows = t->ne[1];
    if (t->op != GGML_OP_MUL_MAT || !on_host(t) || !on_host(w) || !on_host(x) || w->ne[1] != active->n_expert ||
        x->ne[0] != n_embd || x->ne[1] != n_rows || n_rows == 0) {
        return;
    }
    const size_t w_bytes = (size_t) (n_embd * n_keep) * sizeof(float), x_bytes = ggml_nbytes(x);
    const size_t out_bytes = (size_t) (n_keep * n_rows) * sizeof(float);
    cpu_op op(w_bytes + x_bytes + out_bytes + (size_t) n_threads * (size_t) (n_embd + 64) * sizeof(float));
    if (!op.ctx) return;
    ggml_tensor * wk = ggml_new_tensor_2d(op.ctx, GGML_TYPE_F32, n_embd, n_keep);
    ggml_tensor * xk = ggml_new_tensor_2d(op.ctx, GGML_TYPE_F32, n_embd, n_rows);
    const std::vector<uint8_t> & removed = active->removed[(size_t) layer];
    float * dst = (float *) wk->data;
    for (int64_t e = 0; e < active->n_expert; ++e) {
        if (removed[(size_t) e]) continue;
        std::memcpy(dst, (const char *) w->data + (size_t) e * w->nb[1], (size_t) n_embd * sizeof(float));
        dst += n_embd;
    }
    std::memcpy(xk->data, x->data, x_bytes);
    ggml_tensor * out = ggml_mul_mat(op.ctx, wk, xk);
    if (!op.run(out, n_threads)) return;
    narrow_logits_.assign((const float *) out->data, (const float *) out->data + n_keep * n_rows);
    scatter_kept(narrow_logits_.data(), layer);
    narrow_logits_of_ = t;
    narrow_logits_layer_ = layer;
}

// ffn_moe_probs = softmax(ffn_moe_logits): the softmax of the kept logits alone.
void mask_hook::narrow_router_softmax(const ggml_tensor * t, int layer) {
    float scale = 0.0f, max_bias = 1.0f;
    std::memcpy(&scale, (const float *) t->op_params + 0, sizeof(float));
    std::memcpy(&max_bias, (const float *) t->op_params + 1, sizeof(float));
    const bool plain = t->op == GGML_OP_SOFT_MAX && !t->src[1] && !t->src[2] && scale == 1.0f && max_bias == 0.0f;
    const int64_t n_keep = active->n_keep, n_rows = t->ne[1];
    if (!plain || !on_host(t) || t->src[0] != narrow_logits_of_ || narrow_logits_layer_ != layer ||
        (int64_t) narrow_logits_.size() != n_keep * n_rows) {
        return;
    }
    const size_t bytes = narrow_logits_.size() * sizeof(float);
    cpu_op op(2 * bytes + (size_t) n_threads * (size_t) (n_keep + 64) * sizeof(float));
    if (!op.ctx) return;
    ggml_tensor * logits = ggml_new_tensor_2d(op.ctx, GGML_TYPE_F32, n_keep, n_rows);
    std::memcpy(logits->data, narrow_logits_.data(), bytes);
    ggml_tensor * probs = ggml_soft_max(op.ctx, logits);
    if (!op.run(probs, n_threads)) return;
    scatter_kept((const float *) probs->data, layer);
}

// Width masks (mask.h): ffn_moe_topk-L gives each row's expert, the activation is
// zeroed where that expert removes a channel, ffn_moe_down-L must read what was
// zeroed. True when t is one of these nodes of a layer with a width mask.
bool mask_hook::width_node(ggml_tensor * t, bool ask) {
    const expert_mask * m = active;
    std::string base;
    int layer = 0;
    if (!moe_node(t->name, base, layer) || !m->has_width(layer)) return false;
    const bool topk = base == "ffn_moe_topk", act = is_moe_activation(base), down = base == "ffn_moe_down";
    if (!topk && !act && !down) return false;
    if (ask || !error_.empty()) return true;
    const std::string what = std::string("node '") + t->name + "'";
    if (topk) {
        if (!read_routed_ids(t, t->ne[0], m->n_expert, ids_, ids_tok_, error_)) return true;
        ids_layer_ = layer;
        zeroed_    = nullptr;
        return true;
    }
    if (down) {
        if (!zeroed_ || t->src[1] != zeroed_) {
            error_ = what + ": its input is not the activation node the width mask zeroed (" +
                     (zeroed_ ? std::string(zeroed_->name) : std::string("none")) +
                     "): cannot mask channels in this architecture's graph; prune the width instead";
            return true;
        }
        if (width_seen_.size() < m->removed.size()) width_seen_.resize(m->removed.size(), 0);
        width_seen_[(size_t) layer] = 1;
        return true;
    }
    const int64_t n_used = t->ne[1];
    if (t->type != GGML_TYPE_F32 || t->ne[0] != m->n_ff || t->nb[0] != sizeof(float) || ids_layer_ != layer ||
        t->ne[3] != 1 || n_used * t->ne[2] != (int64_t) ids_.size() || t->ne[2] != ids_tok_) {
        error_ = what + ": expected f32 [" + std::to_string(m->n_ff) + ", n_expert_used, n_tokens] after ffn_moe_topk-" +
                 std::to_string(layer) + " (type " + ggml_type_name(t->type) + ", " + std::to_string(t->ne[0]) + " x " +
                 std::to_string(t->ne[1]) + " x " + std::to_string(t->ne[2]) + "): cannot mask its channels";
        return true;
    }
    // one read and one write of the node's span (rows at k·nb[1] + j·nb[2], contiguous or not)
    const std::vector<uint64_t> & removed = m->removed_channels[(size_t) layer];
    const size_t words = m->words_per_expert();
    const size_t n = ggml_nbytes(t);
    row_buf_.resize((n + sizeof(float) - 1) / sizeof(float));
    ggml_backend_tensor_get(t, row_buf_.data(), 0, n);
    for (int64_t j = 0; j < t->ne[2]; ++j) {
        for (int64_t k = 0; k < n_used; ++k) {
            const uint64_t * r = removed.data() + (size_t) ids_[(size_t) (j * n_used + k)] * words;
            float * row = row_buf_.data() + (size_t) (k * t->nb[1] + j * t->nb[2]) / sizeof(float);
            for (size_t w = 0; w < words; ++w) {   // the set bits of each word: the removed channels
                for (uint64_t b = r[w]; b; b &= b - 1) row[w * 64 + (size_t) __builtin_ctzll(b)] = 0.0f;
            }
        }
    }
    ggml_backend_tensor_set(t, row_buf_.data(), 0, n);
    zeroed_ = t;
    return true;
}

// The shared expert's width mask (mask.h): build_ffn's activation of a layer
// whose shared expert is cut is zeroed in the removed channels, for every
// token; ffn_moe_shexp-L must be ffn_down_shexp.weight times that node. True
// when t is one of these nodes of such a layer.
bool mask_hook::shared_width_node(ggml_tensor * t, bool ask) {
    const expert_mask * m = active;
    std::string base;
    int layer = 0;
    if (!layer_node(t->name, base, layer) || !m->has_shared_width(layer)) return false;
    const bool act = is_ffn_activation(base), down = base == "ffn_moe_shexp";
    if (!act && !down) return false;
    if (ask || !error_.empty()) return true;
    const std::string what = std::string("node '") + t->name + "'";
    if (down) {
        if (shared_down_layer(t) != layer || !shared_zeroed_ || t->src[1] != shared_zeroed_) {
            error_ = what + ": not blk." + std::to_string(layer) +
                     ".ffn_down_shexp.weight times the shared expert's activation node the width mask zeroed (" +
                     (shared_zeroed_ ? std::string(shared_zeroed_->name) : std::string("none")) +
                     "): cannot mask the shared expert's channels in this architecture's graph; prune the width instead";
            return true;
        }
        if (shared_seen_.size() < m->removed.size()) shared_seen_.resize(m->removed.size(), 0);
        shared_seen_[(size_t) layer] = 1;
        shared_zeroed_ = nullptr;
        return true;
    }
    if (t->type != GGML_TYPE_F32 || t->ne[0] != m->n_ff || t->nb[0] != sizeof(float) || t->ne[3] != 1) {
        error_ = what + ": expected the shared expert's f32 [" + std::to_string(m->n_ff) + ", n_tokens] activation (type " +
                 ggml_type_name(t->type) + ", " + std::to_string(t->ne[0]) + " x " + std::to_string(t->ne[1]) + " x " +
                 std::to_string(t->ne[2]) + "): cannot mask its channels";
        return true;
    }
    const uint64_t * removed = m->removed_shared_channels[(size_t) layer].data();
    const size_t words = m->words_per_expert();
    const size_t n = ggml_nbytes(t);
    row_buf_.resize((n + sizeof(float) - 1) / sizeof(float));
    ggml_backend_tensor_get(t, row_buf_.data(), 0, n);
    for (int64_t j = 0; j < t->ne[2]; ++j) {
        for (int64_t i = 0; i < t->ne[1]; ++i) {
            float * row = row_buf_.data() + (size_t) (i * t->nb[1] + j * t->nb[2]) / sizeof(float);
            for (size_t w = 0; w < words; ++w) {
                for (uint64_t b = removed[w]; b; b &= b - 1) row[w * 64 + (size_t) __builtin_ctzll(b)] = 0.0f;
            }
        }
    }
    ggml_backend_tensor_set(t, row_buf_.data(), 0, n);
    shared_zeroed_ = t;
    return true;
}

bool mask_hook::check(bool had_outputs, std::string & err) {
    const std::string problem = error_;
    std::vector<uint8_t> seen, width_seen, shared_seen;
    seen.swap(seen_);
    width_seen.swap(width_seen_);
    shared_seen.swap(shared_seen_);
    error_.clear();
    zeroed_ = nullptr;
    shared_zeroed_ = nullptr;
    ids_layer_ = -1;
    narrow_logits_of_ = nullptr;   // the next decode's graph may put another node at that address
    if (!active) return true;
    if (!problem.empty()) {
        err = "mask " + active->name + ": " + problem;
        return false;
    }
    if (!had_outputs) return true;
    for (int l : mtp_context ? active->mtp_layers : active->moe_layers) {
        if ((size_t) l >= seen.size() || !seen[(size_t) l]) {
            err = "mask " + active->name + ": MoE layer " + std::to_string(l) +
                  " shows no router node (ffn_moe_logits or ffn_moe_probs) in llama.cpp's graph, so its experts "
                  "cannot be masked; prune the model instead (reap prune) and evaluate it with -p";
            return false;
        }
        if (active->has_width(l) && ((size_t) l >= width_seen.size() || !width_seen[(size_t) l])) {
            err = "mask " + active->name + ": MoE layer " + std::to_string(l) +
                  " shows no activation node feeding ffn_moe_down in llama.cpp's graph, so its channels cannot be "
                  "masked; prune the width instead";
            return false;
        }
        if (active->has_shared_width(l) && ((size_t) l >= shared_seen.size() || !shared_seen[(size_t) l])) {
            err = "mask " + active->name + ": MoE layer " + std::to_string(l) +
                  " shows no shared-expert activation feeding ffn_down_shexp (ffn_moe_shexp) in llama.cpp's graph, so "
                  "its shared channels cannot be masked; prune the width instead";
            return false;
        }
    }
    return true;
}

} // namespace reap

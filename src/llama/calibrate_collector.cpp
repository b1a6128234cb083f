// calibrate's eval callback (calibrate_collector.h): the graph nodes read and summed.
#include "llama/calibrate_collector.h"

#include "llama/calibrate_width.h"
#include "llama/moe_nodes.h"

#include "ggml-backend.h"

#include <algorithm>
#include <cmath>

namespace reap::calibrate_detail {

bool collector::on_topk(const ggml_tensor * t, int il) {
    layer_state & L = layers[il];
    std::string e;
    if (!read_routed_ids(t, n_used, n_expert, L.ids, L.n_tok, e)) {
        fail(e);
        return false;
    }
    if (il == first_trunk_layer) ++n_ubatches;
    L.have_ids = true;
    L.have_w   = false;
    L.shared_due = shared_norms != nullptr;
    L.routed_rows += L.n_tok;
    return true;
}

bool collector::on_weights(const ggml_tensor * t, int il) {
    layer_state & L = layers[il];
    if (!L.have_ids) {
        fail(std::string(t->name) + ": gate weights before the routing of the same layer");
        return false;
    }
    if (t->type != GGML_TYPE_F32 || ggml_nelements(t) != L.n_tok * n_used) {
        fail(std::string(t->name) + ": unexpected type/shape (want f32 with n_expert_used x n_tokens elements)");
        return false;
    }
    // [1, n_used, n_tok] (get_rows, scale) or [n_used, n_tok] (norm)
    size_t sk, sj;
    if (t->ne[0] == 1 && t->ne[1] == n_used && t->ne[2] == L.n_tok) {
        sk = t->nb[1]; sj = t->nb[2];
    } else if (t->ne[0] == n_used && t->ne[1] == L.n_tok) {
        sk = t->nb[0]; sj = t->nb[1];
    } else {
        fail(std::string(t->name) + ": unexpected shape");
        return false;
    }
    const uint8_t * d = host_data(t);
    L.w.resize((size_t) (L.n_tok * n_used));
    for (int64_t j = 0; j < L.n_tok; ++j) {
        for (int64_t k = 0; k < n_used; ++k) {
            memcpy(&L.w[j * n_used + k], d + j * sj + k * sk, sizeof(float));
        }
    }
    L.have_w = true;
    return true;
}

bool collector::on_down(const ggml_tensor * t, int il) {
    layer_state & L = layers[il];
    if (!L.have_ids || !L.have_w) {
        fail(std::string(t->name) + ": expert outputs before the routing and gate weights of the same layer");
        return false;
    }
    if (t->type != GGML_TYPE_F32 || t->ne[1] != n_used || t->ne[2] != L.n_tok || t->ne[3] != 1 ||
        t->nb[0] != sizeof(float)) {
        fail(std::string(t->name) + ": unexpected type/shape (want f32 [n_embd, " + std::to_string(n_used) + ", " +
             std::to_string(L.n_tok) + "])");
        return false;
    }
    const uint8_t * d = host_data(t);
    const int64_t n_embd = t->ne[0];
    saliency::domain_stats & D = *dom;
    const size_t base = (size_t) il * (size_t) n_expert;
    for (int64_t j = 0; j < L.n_tok; ++j) {
        for (int64_t k = 0; k < n_used; ++k) {
            const float * f = (const float *) (d + j * t->nb[2] + k * t->nb[1]);
            double s = 0;
            for (int64_t i = 0; i < n_embd; ++i) {
                s += (double) f[i] * (double) f[i];
            }
            const double nrm = std::sqrt(s);
            const double g   = L.w[j * n_used + k];
            const size_t c   = base + (size_t) L.ids[j * n_used + k];
            if (!std::isfinite(nrm) || !std::isfinite(g)) {
                fail(std::string(t->name) + ": non-finite expert output or gate weight");
                return false;
            }
            for (saliency::domain_stats * into : {&D, half}) {
                if (!into) continue;
                into->count[c]    += 1;
                into->gate_sum[c] += g;
                into->reap_sum[c] += weights_before_ffn ? nrm : g * nrm;
                into->ean_sum[c]  += nrm;
                into->ean_sq_sum[c] += s;
                if (nrm > into->max_norm[c]) into->max_norm[c] = nrm;
            }
        }
    }
    L.have_ids = L.have_w = false;
    return true;
}

bool collector::on_down_input(const ggml_tensor * t, int il) {
    layer_state & L = layers[il];
    if (!L.have_ids || !L.have_w) {
        fail(std::string(t->name) + ": expert inputs before the routing and gate weights of the same layer");
        return false;
    }
    const ggml_tensor * a = nullptr;
    std::string e;
    if (!down_input_of(t, n_ff, n_used, L.n_tok, a, e)) {
        fail(e);
        return false;
    }
    const uint8_t * d = host_data(a);
    saliency::domain_stats & D = *dom;
    for (int64_t j = 0; j < L.n_tok; ++j) {
        for (int64_t k = 0; k < n_used; ++k) {
            const float * row = (const float *) (d + j * a->nb[2] + (a->ne[1] == 1 ? 0 : k) * a->nb[1]);
            const size_t cell = (size_t) il * (size_t) n_expert + (size_t) L.ids[j * n_used + k];
            const double g    = weights_before_ffn ? 1.0 : (double) L.w[j * n_used + k];
            const size_t at   = cell * (size_t) n_ff;
            add_channel_row(row, n_ff, g, column_norms->data() + at, D.ch_energy.data() + at, D.ch_reap.data() + at);
        }
    }
    return true;
}

bool collector::on_shared_down_input(const ggml_tensor * t, int il) {
    layer_state & L = layers[il];
    if (L.weights_node < 0 || !L.shared_due) {
        fail(std::string(t->name) + ": the product with blk." + std::to_string(il) + ".ffn_down_shexp.weight " +
             (L.weights_node < 0 ? "in a layer without routed experts" : "before the routing of the same ubatch"));
        return false;
    }
    const ggml_tensor * a = nullptr;
    std::string e;
    const std::string weight = "blk." + std::to_string(il) + ".ffn_down_shexp.weight";
    if (!shared_down_input_of(t, weight.c_str(), n_ff, L.n_tok, a, e)) {
        fail(e);
        return false;
    }
    const uint8_t * d = host_data(a);
    saliency::domain_stats & D = *dom;
    const size_t at = (size_t) il * (size_t) n_ff;
    for (int64_t j = 0; j < L.n_tok; ++j) {
        add_channel_row((const float *) (d + j * a->nb[1]), n_ff, 1.0, shared_norms->data() + at, D.sh_energy.data() + at,
                        D.sh_reap.data() + at);
    }
    L.shared_due = false;
    L.shared_rows += L.n_tok;
    return true;
}

void collector::observe(const ggml_tensor * t) {
    std::string base;
    int il;
    if (strncmp(t->name, "ffn_moe_", 8) != 0 || !split_node_name(t->name, base, il)) return;
    if (il < 0 || il >= (int) layers.size()) return;
    layer_state & L = layers[il];
    if (base == "ffn_moe_topk") {
        L.saw_topk   = true;
        L.probe_rows = t->ne[1];
    }
    const int wp = chain_pos(k_weight_chain, std::size(k_weight_chain), base);
    if (wp >= 0) L.weights_node = std::max(L.weights_node, wp);
    const int dp = chain_pos(k_down_chain, std::size(k_down_chain), base);
    if (dp >= 0) L.down_node = std::max(L.down_node, dp);
    if (base == "ffn_moe_weighted" && L.down_node < 0) weights_before_ffn = true;
}

bool collector::callback(ggml_tensor * t, bool ask, void * user) {
    auto * self = static_cast<collector *>(user);
    if (self->shared_norms) {   // found by its weight, whatever the graph names it
        const int sl = shared_down_layer(t);
        if (sl >= 0 && sl < (int) self->layers.size()) {
            if (ask) return true;
            return self->err.empty() && self->on_shared_down_input(t, sl);
        }
    }
    if (strncmp(t->name, "ffn_moe_", 8) != 0) return ask ? false : true;
    std::string base;
    int il;
    if (!split_node_name(t->name, base, il) || il < 0 || il >= (int) self->layers.size()) return ask ? false : true;
    const layer_state & L = self->layers[il];
    if (L.weights_node < 0) return ask ? false : true;
    const bool is_topk = base == "ffn_moe_topk";
    const bool is_w    = base == k_weight_chain[L.weights_node];
    const bool is_down = base == k_down_chain[L.down_node];
    const bool is_down_in = self->n_ff > 0 && base == k_down_chain[0];   // --width-saliency: one node more
    if (ask) return is_topk || is_w || is_down || is_down_in;
    if (!self->err.empty()) return false;
    bool ok = true;
    if (is_topk) ok = self->on_topk(t, il);
    else if (is_w) ok = self->on_weights(t, il);
    if (ok && is_down_in) ok = self->on_down_input(t, il);
    if (ok && is_down) ok = self->on_down(t, il);
    return ok;  // false stops the graph; the error is reported after llama_decode
}
}  // namespace reap::calibrate_detail

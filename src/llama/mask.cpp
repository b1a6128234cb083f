// Virtual pruning (see mask.h): the plan-to-mask step and the eval callback
// that writes -inf into the removed experts' router columns.
#include "llama/mask.h"
#include "llama/moe_nodes.h"
#include "prune/prune.h"
#include "prune/width.h"

#include "ggml-backend.h"
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

// "ffn_moe_swiglu-3" -> ("ffn_moe_swiglu", 3); false for a name without "-<layer>".
bool moe_node(const char * name, std::string & base, int & layer) {
    if (strncmp(name, "ffn_moe_", 8) != 0) return false;
    const char * dash = strrchr(name, '-');
    if (!dash || dash[1] == '\0') return false;
    char * end = nullptr;
    const long l = strtol(dash + 1, &end, 10);
    if (*end != '\0' || l < 0 || l > (1 << 20)) return false;
    base.assign(name, (size_t) (dash - name));
    layer = (int) l;
    return true;
}

} // namespace

bool set_width_mask(expert_mask & m, int64_t n_ff, const std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> & kept,
                    std::string & err) {
    if (n_ff < 1) {
        err = "width mask: " + std::to_string(n_ff) + " channels per expert";
        return false;
    }
    std::vector<std::vector<uint8_t>> removed(m.removed.size());
    for (const auto & [block, experts] : kept) {
        const std::string where = "width mask: block " + std::to_string(block);
        const bool moe = block >= 0 && (size_t) block < m.removed.size() && !m.removed[(size_t) block].empty();
        if (!moe) { err = where + " is not an MoE block of the mask"; return false; }
        if ((int64_t) experts.size() != m.n_expert) {
            err = where + ": " + std::to_string(experts.size()) + " experts' channels, expected " + std::to_string(m.n_expert);
            return false;
        }
        if (!removed[(size_t) block].empty()) { err = where + " is given twice"; return false; }
        std::vector<uint8_t> & r = removed[(size_t) block];
        r.assign((size_t) (m.n_expert * n_ff), 1);
        for (int64_t e = 0; e < m.n_expert; ++e) {
            if (experts[(size_t) e].empty()) { err = where + " expert " + std::to_string(e) + " keeps no channel"; return false; }
            for (int64_t c : experts[(size_t) e]) {
                if (c < 0 || c >= n_ff || r[(size_t) (e * n_ff + c)] == 0) {
                    err = where + " expert " + std::to_string(e) + ": channel " + std::to_string(c) +
                          (c < 0 || c >= n_ff ? " out of range [0, " + std::to_string(n_ff) + ")" : std::string(" listed twice"));
                    return false;
                }
                r[(size_t) (e * n_ff + c)] = 0;
            }
        }
    }
    m.n_ff = n_ff;
    m.removed_channels = std::move(removed);
    return true;
}

bool mask_of_plan(const plan & p, const std::string & name, const moe::layout & lay, expert_mask & out, std::string & err) {
    expert_mask m;
    m.name     = name;
    m.n_expert = p.n_expert;
    m.n_keep   = p.n_keep;
    m.removed.assign((size_t) p.n_layer, {});
    std::vector<std::pair<int, std::vector<std::vector<int64_t>>>> kept;   // width plans: per block, per source expert
    std::vector<int64_t> every((size_t) std::max<int64_t>(p.width_n_ff, 0));
    for (size_t c = 0; c < every.size(); ++c) every[c] = (int64_t) c;
    for (const plan_layer & pl : p.layers) {
        std::vector<uint8_t> & r = m.removed[(size_t) pl.layer];
        r.assign((size_t) p.n_expert, 1);
        for (int64_t e : pl.keep) r[(size_t) e] = 0;
        (lay.is_mtp(pl.layer) ? m.mtp_layers : m.moe_layers).push_back(pl.layer);
        if (!p.has_width()) continue;
        std::vector<std::vector<int64_t>> per((size_t) p.n_expert, every);
        for (size_t i = 0; i < pl.keep.size() && i < pl.channels.size(); ++i) per[(size_t) pl.keep[i]] = pl.channels[i];
        kept.emplace_back(pl.layer, std::move(per));
    }
    if (p.has_width() && !set_width_mask(m, p.width_n_ff, kept, err)) {
        err = name + ": " + err;
        return false;
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
    if (m->n_ff > 0 && self->width_node(t, ask)) return true;
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
    const std::vector<uint8_t> & removed = m->removed_channels[(size_t) layer];
    const size_t n = ggml_nbytes(t);
    row_buf_.resize((n + sizeof(float) - 1) / sizeof(float));
    ggml_backend_tensor_get(t, row_buf_.data(), 0, n);
    for (int64_t j = 0; j < t->ne[2]; ++j) {
        for (int64_t k = 0; k < n_used; ++k) {
            const uint8_t * r = removed.data() + (size_t) ids_[(size_t) (j * n_used + k)] * (size_t) m->n_ff;
            float * row = row_buf_.data() + (size_t) (k * t->nb[1] + j * t->nb[2]) / sizeof(float);
            for (int64_t c = 0; c < m->n_ff; ++c) {
                if (r[c]) row[c] = 0.0f;
            }
        }
    }
    ggml_backend_tensor_set(t, row_buf_.data(), 0, n);
    zeroed_ = t;
    return true;
}

bool mask_hook::check(bool had_outputs, std::string & err) {
    const std::string problem = error_;
    std::vector<uint8_t> seen, width_seen;
    seen.swap(seen_);
    width_seen.swap(width_seen_);
    error_.clear();
    zeroed_ = nullptr;
    ids_layer_ = -1;
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
    }
    return true;
}

} // namespace reap

// Virtual pruning (see mask.h): the plan-to-mask step and the eval callback
// that writes -inf into the removed experts' router columns.
#include "llama/mask.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

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

} // namespace

expert_mask mask_of_plan(const plan & p, const std::string & name, const moe::layout & lay) {
    expert_mask m;
    m.name     = name;
    m.n_expert = p.n_expert;
    m.n_keep   = p.n_keep;
    m.removed.assign((size_t) p.n_layer, {});
    for (const plan_layer & pl : p.layers) {
        std::vector<uint8_t> & r = m.removed[(size_t) pl.layer];
        r.assign((size_t) p.n_expert, 1);
        for (int64_t e : pl.keep) r[(size_t) e] = 0;
        (lay.is_mtp(pl.layer) ? m.mtp_layers : m.moe_layers).push_back(pl.layer);
    }
    return m;
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
    if (!validate_plan(p, facts_of(lay), err)) {
        err = name + " does not fit the model: " + err;
        return false;
    }
    out = mask_of_plan(p, name, lay);
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
    int which = 0, layer = 0;
    if (!router_node(t->name, which, layer) || layer >= (int) m->removed.size() || m->removed[(size_t) layer].empty()) {
        return ask ? false : true;
    }
    if (ask) return true;

    // Computed, not yet read by the next node: mask it in place.
    if (!self->error_.empty()) return true;
    const std::string what = std::string("node '") + t->name + "'";
    if (t->type != GGML_TYPE_F32) {
        self->error_ = what + " is " + ggml_type_name(t->type) + ", expected f32: cannot mask this router";
        return true;
    }
    if (t->ne[0] != m->n_expert || t->nb[0] != sizeof(float)) {
        self->error_ = what + " has " + std::to_string(t->ne[0]) + " columns, expected one per expert (" +
                       std::to_string(m->n_expert) + "): cannot mask this router";
        return true;
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
        self->row_buf_.resize(n / sizeof(float));
        if (n > 0) {
            ggml_backend_tensor_get(t, self->row_buf_.data(), 0, n);
            for (size_t r = 0; r < n / row_bytes; ++r) mask_row(self->row_buf_.data() + r * (size_t) m->n_expert);
            ggml_backend_tensor_set(t, self->row_buf_.data(), 0, n);
        }
    } else {
        self->row_buf_.resize((size_t) m->n_expert);
        for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
                for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                    const size_t off = (size_t) (i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
                    ggml_backend_tensor_get(t, self->row_buf_.data(), off, row_bytes);
                    mask_row(self->row_buf_.data());
                    ggml_backend_tensor_set(t, self->row_buf_.data(), off, row_bytes);
                }
            }
        }
    }
    // ffn_moe_logits or ffn_moe_probs: the router itself was masked.
    if (which <= 1) {
        if (self->seen_.size() < m->removed.size()) self->seen_.resize(m->removed.size(), 0);
        self->seen_[(size_t) layer] = 1;
    }
    return true;
}

bool mask_hook::check(bool had_outputs, std::string & err) {
    const std::string problem = error_;
    std::vector<uint8_t> seen;
    seen.swap(seen_);
    error_.clear();
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
    }
    return true;
}

} // namespace reap

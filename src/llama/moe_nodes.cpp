// Reading build_moe_ffn's nodes in an eval callback (see moe_nodes.h).
#include "llama/moe_nodes.h"

#include "moe/layout.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <cstring>
#include <iterator>

namespace reap {

bool read_routed_ids(const ggml_tensor * t, int64_t n_used, int64_t n_expert, std::vector<int32_t> & ids, int64_t & n_tok,
                     std::string & err) {
    if (t->type != GGML_TYPE_I32 || t->ne[0] != n_used || t->ne[2] != 1 || t->ne[3] != 1) {
        err = std::string(t->name) + ": unexpected type/shape (want i32 [" + std::to_string(n_used) + ", n_tokens])";
        return false;
    }
    n_tok = t->ne[1];
    ids.resize((size_t) (n_tok * n_used));
    const bool is_host = t->buffer && ggml_backend_buffer_is_host(t->buffer);
    for (int64_t j = 0; j < n_tok; ++j) {
        int32_t * dst = ids.data() + j * n_used;
        if (is_host) {
            const uint8_t * row = (const uint8_t *) t->data + j * t->nb[1];
            for (int64_t k = 0; k < n_used; ++k) memcpy(dst + k, row + k * t->nb[0], sizeof(int32_t));
        } else if (t->nb[0] == sizeof(int32_t)) {
            ggml_backend_tensor_get(const_cast<ggml_tensor *>(t), dst, j * t->nb[1], n_used * sizeof(int32_t));
        } else {
            for (int64_t k = 0; k < n_used; ++k) {
                ggml_backend_tensor_get(const_cast<ggml_tensor *>(t), dst + k, j * t->nb[1] + k * t->nb[0], sizeof(int32_t));
            }
        }
    }
    for (int32_t e : ids) {
        if (e < 0 || e >= n_expert) {
            err = std::string(t->name) + ": expert id " + std::to_string(e) + " out of range";
            return false;
        }
    }
    return true;
}

bool is_moe_activation(const std::string & base) {
    static const char * const names[] = {"ffn_moe_swiglu", "ffn_moe_silu",       "ffn_moe_situ",  "ffn_moe_geglu",
                                         "ffn_moe_gelu",   "ffn_moe_swiglu_oai", "ffn_moe_reglu", "ffn_moe_relu",
                                         "ffn_moe_relu_sqr", "ffn_moe_swiglu_limited"};
    for (const char * n : names) {
        if (base == n) return true;
    }
    return false;
}

int shared_down_layer(const ggml_tensor * t) {
    if (t->op != GGML_OP_MUL_MAT || !t->src[0]) return -1;
    const char * name = t->src[0]->name;
    if (strncmp(name, "blk.", 4) != 0 && !strchr(name, '#')) return -1;   // the common case, without a string
    std::string w = name;
    if (const size_t hash = w.find('#'); hash != std::string::npos) {   // "<backend>#<name>#<n>": the name between
        w = w.substr(hash + 1);
        w = w.substr(0, w.find('#'));
    }
    return moe::shared_down_weight_layer(w);
}

}  // namespace reap

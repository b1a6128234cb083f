// calibrate's eval callback: what it reads of llama.cpp's graph (the routing,
// gate weights and expert outputs of every MoE layer, the down projection's
// input with --width-saliency) and how it sums them into a domain's
// statistics; and the probe that finds which nodes each layer's graph has.
// Used by calibrate.cpp only; see calibrate.h for what is read and why.
#pragma once

#include "saliency/archive.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace reap::calibrate_detail {

// ---- node names ----------------------------------------------------------------------

// Splits "base-L" into base and L; false when the name has no "-<digits>" suffix.
inline bool split_node_name(const char * name, std::string & base, int & layer) {
    const char * dash = strrchr(name, '-');
    if (!dash || !dash[1]) return false;
    int v = 0;
    for (const char * p = dash + 1; *p; ++p) {
        if (*p < '0' || *p > '9' || v > 1000000) return false;
        v = v * 10 + (*p - '0');
    }
    base.assign(name, dash - name);
    layer = v;
    return true;
}

// The nodes of build_moe_ffn's gate-weight chain and expert-output chain, in
// the order the graph builds them; the last one present is the one applied.
const char * const k_weight_chain[] = {"ffn_moe_weights", "ffn_moe_weights_softmax", "ffn_moe_weights_norm",
                                       "ffn_moe_weights_scaled"};
const char * const k_down_chain[]   = {"ffn_moe_down", "ffn_moe_down_scaled", "ffn_moe_down_biased"};

inline int chain_pos(const char * const * chain, size_t n, const std::string & base) {
    for (size_t i = 0; i < n; ++i) {
        if (base == chain[i]) return (int) i;
    }
    return -1;
}

// ---- the eval callback -------------------------------------------------------------

struct layer_state {
    int weights_node = -1;  // index into k_weight_chain; -1 = not an MoE layer
    int down_node    = -1;  // index into k_down_chain
    bool saw_topk    = false;
    int64_t probe_rows = 0; // probe: the rows ffn_moe_topk-L has (its shape: nothing is computed for it)
    // per ubatch
    int64_t              n_tok = -1;
    std::vector<int32_t> ids;  // n_tok * n_used
    std::vector<float>   w;    // n_tok * n_used
    bool have_ids = false, have_w = false;
    bool shared_due = false;   // the shared expert's down input of this ubatch is still to come
    // this invocation's rows: routed (ffn_moe_topk) and read at the shared down projection
    int64_t routed_rows = 0, shared_rows = 0;
};

struct collector {
    int64_t n_expert = 0, n_used = 0;
    bool    weights_before_ffn = false;
    std::vector<layer_state> layers;
    saliency::domain_stats * dom = nullptr;   // where the current decode's tokens go (one domain a decode)
    saliency::domain_stats * half = nullptr;  // and their expert statistics again: a stability target's split half (or none)
    int     first_trunk_layer = -1;           // its ffn_moe_topk counts the main context's ubatches
    size_t  n_ubatches = 0;
    std::string err;
    std::vector<uint8_t> host;   // staging for tensors not in host memory
    std::vector<double>  norms;
    // --width-saliency: channels per expert (0 = off) and ‖W_down[:,c]‖ (calibrate_width.h)
    int64_t              n_ff = 0;
    const std::vector<double> * column_norms = nullptr;
    // and ‖W_down_shexp[:,c]‖ when the shared expert is cut too (nullptr: it is not)
    const std::vector<double> * shared_norms = nullptr;

    void fail(const std::string & e) {
        if (err.empty()) err = e;
    }

    // The bytes of t as a host pointer (copied when the buffer is not host memory).
    const uint8_t * host_data(const ggml_tensor * t) {
        if (t->buffer && ggml_backend_buffer_is_host(t->buffer)) {
            return (const uint8_t *) t->data;
        }
        host.resize(ggml_nbytes(t));
        ggml_backend_tensor_get(const_cast<ggml_tensor *>(t), host.data(), 0, host.size());
        return host.data();
    }

    bool on_topk(const ggml_tensor * t, int il);
    bool on_weights(const ggml_tensor * t, int il);

    bool on_down(const ggml_tensor * t, int il);

    // --width-saliency: the input of the down projection (t = ffn_moe_down-L), per
    // channel, into the routed expert's ch_energy / ch_reap; before on_down, which
    // ends the layer's ubatch.
    bool on_down_input(const ggml_tensor * t, int il);

    // --width-saliency on a model whose shared expert is cut too: the input of its down
    // projection (t = the MUL_MAT with blk.L.ffn_down_shexp.weight), every token of the
    // layer's ubatch, gate 1, into sh_energy / sh_reap.
    bool on_shared_down_input(const ggml_tensor * t, int il);

    // probe: remember which chain nodes each layer's graph has (a node of the
    // graph llama.cpp reserves: names and shapes, nothing computed)
    void observe(const ggml_tensor * t);

    static bool callback(ggml_tensor * t, bool ask, void * user);
};

}  // namespace reap::calibrate_detail

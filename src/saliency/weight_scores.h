// reap::saliency weight scores — AIMER from a GGUF's weights alone, the
// library behind `reap score`: no corpus, no forward pass, one sequential read
// of the routed-expert pool.
//
// AIMER of routed expert e in MoE layer l: over every element w of the
// expert's slabs of ffn_gate_exps, ffn_up_exps and ffn_down_exps (or a fused
// ffn_gate_up_exps and ffn_down_exps) together, each dequantised to float by
// ggml's own type traits,
//     aimer = mean|w| / sqrt(mean w²)          (in (0, 1]; Cauchy-Schwarz)
// An all-zero expert scores 1 (it adds nothing; AIMER removes the highest
// first). Shared experts (*_shexp) are not routed and not scored. The planner
// ranks by 1 − aimer (planners.h, --method aimer).
//
// Reading: the slab tensors of every MoE layer in file order (shard, offset),
// each in chunks of whole experts (at most `chunk_bytes`), the next chunk read
// while the current one is dequantised on `n_threads` threads: memory is two
// chunks and the per-expert sums, flat in the model's size; the bytes read
// are the slabs once. Split sets are read as one model (gguf::open_model).
//
// Refused, naming the tensor: a type ggml cannot dequantise, a row that is not
// whole blocks, per-expert scale tensors (NVFP4: the scale is not in the slab),
// a non-finite weight; a model with no routed experts (dense, or not an MoE
// layout) names what it lacks. Core library (ggml-base, no libllama); errors
// are values.
#pragma once

#include "gguf/gguf.h"
#include "saliency/archive.h"

#include <cstdint>
#include <functional>
#include <string>

namespace reap::saliency {

constexpr const char * k_weights_domain = "weights";   // the one domain of a weights archive
constexpr const char * k_key_score_source = "reap.saliency.score_source";   // "weights (no calibration)"

struct weight_score_options {
    int      n_threads   = 4;
    uint64_t chunk_bytes = 64ull << 20;
    // called after each chunk with the slab bytes done and in all
    std::function<void(uint64_t done, uint64_t total)> on_progress;
};

struct weight_score_report {
    uint64_t    slab_bytes = 0;      // bytes of the routed-expert slabs read (once)
    size_t      n_tensors = 0;       // slab tensors scored
    std::string types;               // the slab types and their counts ("q8_0 x12, f16 x6")
};

// Scores every routed expert of `m` and fills `out` as a weights archive
// (metric set "weights", one domain "weights", n_tokens 0, the model's
// fingerprint, provenance tool = "reap score" and score_source).
bool score_weights(const gguf::model & m, const weight_score_options & o, archive & out, weight_score_report & rep,
                   std::string & err);

}  // namespace reap::saliency

// How large the decodes of a llama.cpp pass may be in memory. A streamed
// source is read once per ubatch, so the largest ubatch that fits is the
// cheapest pass; one that does not fit is killed with no word. Two facts
// decide it: the memory the pass may take (--memory, or what the machine has
// less a reserve, less the model's bytes when they fit in the page cache), and
// what llama.cpp reserves for a context of a given size (KV cache or recurrent
// state, compute buffers), measured by llama.cpp itself on a copy of the model
// loaded without its weights (no_alloc: only the header is read). Calibrate
// chooses -b/-ub with it and refuses a size given by hand that cannot fit,
// before any ubatch reads the model.
#pragma once

#include "llama/runtime.h"
#include "util/memory.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace reap {

// The largest ubatch the automatic choice tries: llama.cpp takes larger ones,
// but past it the compute buffers grow faster than the reads shrink matter.
constexpr int k_max_auto_ubatch = 32768;

// What a pass's contexts may take, and why.
struct memory_budget {
    bool        known = false;  // false: this machine's memory is unknown (nothing is checked)
    uint64_t    bytes = 0;
    std::string why;            // e.g. "--memory 8.00 GB", or "MemAvailable 20.0 GB less a 2.00 GB reserve, less ..."
};

// The reserve kept for everything but the pass's contexts: an eighth of the
// memory available, at most 2 GiB.
uint64_t memory_reserve(uint64_t available);

// given: --memory (0 = automatic: `avail` less memory_reserve, less the
// model's bytes when they fit in it, so the page cache keeps them; a model
// larger than that streams anyway, and its cache is not worth protecting).
memory_budget pass_memory_budget(uint64_t given, uint64_t model_bytes, const std::optional<util::memory_limit> & avail);

// Host bytes of one context as llama.cpp reserves them, plus the output rows
// (logits) llama.cpp allocates as a decode needs them, plus the CPU backend's
// work buffer, which llama.cpp's breakdown leaves out.
struct context_bytes {
    uint64_t state   = 0;   // KV cache / recurrent state
    uint64_t compute = 0;   // compute buffers (the graph of one ubatch)
    uint64_t work    = 0;   // ggml's CPU work buffer for the graph's largest op
    uint64_t output  = 0;   // logits of the output rows of one decode
    std::string refused;    // what this machine would not allocate (the context or its compute buffers), if anything
    uint64_t total() const { return state + compute + work + output; }
    bool allocatable() const { return refused.empty(); }
};
std::string describe(const context_bytes & b);   // "2.10 GB (KV 1.00 GB, compute 1.05 GB, work 90 MB, logits 50.0 MB)"

// Whether a context of these bytes can run within the budget: allocatable,
// and within its bytes when the memory is known.
bool fits(const context_bytes & b, const memory_budget & budget);
// Why a size given by hand does not: "needs X (...), more than the Y this run
// may take (why)", or what this machine would not allocate.
std::string shortfall(const context_bytes & b, const memory_budget & budget);

// Measures contexts of a model without allocating them.
class context_meter {
  public:
    // Loads the model's header only (no_alloc, no weights read), with the
    // model parameters the pass itself loads it with.
    bool open(const std::string & path, llama_model_params mp, std::string & err);
    // Host bytes of a context with these parameters and logits for
    // output_rows rows a decode; with `mtp` set, plus the MTP context the pass
    // makes beside it with those parameters (mtp.h). The work buffer is
    // measured by ggml's own planner on the ubatch graph llama.cpp reserves;
    // reserving it allocates the compute buffers (untouched, so they cost
    // address space, not memory). Where the context or that allocation is
    // refused, the size cannot run here (out.refused says what; true returned).
    bool measure(const llama_context_params & cp, int64_t output_rows, const llama_context_params * mtp,
                 context_bytes & out, std::string & err);

  private:
    model_ptr model;
};

// The ubatch sizes the automatic choice tries, largest first: powers of two
// from k_max_auto_ubatch down to 512, none larger than needed to take all
// n_tokens at once (but k_default_batch always, the size before memory was
// measured).
std::vector<int> ubatch_candidates(int64_t n_tokens);

// The largest candidate whose bytes (need(c)) fit the budget and can be
// allocated; the smallest when none does (fits = false). need returns false with err set on failure.
struct sized_choice {
    int           size = 0;
    context_bytes bytes;
    bool          fits = true;
};
bool choose_largest_fitting(const std::vector<int> & candidates, const memory_budget & budget,
                            const std::function<bool(int, context_bytes &, std::string &)> & need, sized_choice & out,
                            std::string & err);

}  // namespace reap

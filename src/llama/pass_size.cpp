// The memory a llama.cpp pass may take and what a context of a given size
// needs, measured by llama.cpp on a weightless copy of the model. See pass_size.h.
#include "llama/pass_size.h"

#include "llama/mtp.h"
#include "util/number_format.h"

#include "ggml-cpu.h"    // ggml_graph_plan: the CPU backend's work buffer for a graph
#include "llama-ext.h"   // llama.cpp's memory breakdown of a context (as its common/fit.cpp reads it), llama_graph_reserve

#include <algorithm>

namespace reap {

uint64_t memory_reserve(uint64_t available) { return std::min<uint64_t>(available / 8, 2ull << 30); }

memory_budget pass_memory_budget(uint64_t given, uint64_t model_bytes, const std::optional<util::memory_limit> & avail) {
    memory_budget b;
    if (given > 0) {
        b.known = true;
        b.bytes = given;
        b.why   = "--memory " + util::format_size(given);
        return b;
    }
    if (!avail) return b;
    const uint64_t reserve = memory_reserve(avail->bytes);
    b.known = true;
    b.bytes = avail->bytes - reserve;
    b.why   = avail->source + " " + util::format_size(avail->bytes) + " less a " + util::format_size(reserve) + " reserve";
    if (model_bytes <= b.bytes / 2) {
        // the model fits with room to spare: keep it in the page cache
        b.bytes -= model_bytes;
        b.why += ", less the model's " + util::format_size(model_bytes) + " kept in the page cache";
    } else {
        b.why += " (the model streams from disk: its cache is not kept)";
    }
    return b;
}

std::string describe(const context_bytes & c) {
    std::string s = util::format_size(c.total()) + " (KV/state " + util::format_size(c.state) + ", compute " +
                    util::format_size(c.compute);
    if (c.work > 0) s += ", work " + util::format_size(c.work);
    if (c.output > 0) s += ", logits " + util::format_size(c.output);
    s += ")";
    if (!c.allocatable()) s += ", and llama.cpp could not allocate " + c.refused;
    return s;
}

bool fits(const context_bytes & b, const memory_budget & budget) {
    return b.allocatable() && (!budget.known || b.total() <= budget.bytes);
}

std::string shortfall(const context_bytes & b, const memory_budget & budget) {
    std::string s = "needs " + describe(b);
    if (b.allocatable()) s += ", more than the " + util::format_size(budget.bytes) + " this run may take (" + budget.why + ")";
    return s;
}

bool context_meter::open(const std::string & path, llama_model_params mp, std::string & err) {
    mp.no_alloc  = true;
    mp.load_mode = LLAMA_LOAD_MODE_NONE;
    model.reset(llama_model_load_from_file(path.c_str(), mp));
    if (!model) {
        err = "llama.cpp could not load the header of '" + path + "' to measure its contexts";
        return false;
    }
    return true;
}

namespace {

// KV/state and compute bytes of ctx in host memory (llama.cpp's own breakdown;
// the model's weights are not counted: they are the page cache's).
void add_host_bytes(const llama_context * ctx, context_bytes & out) {
    for (const auto & [buft, mb] : llama_get_memory_breakdown(ctx)) {
        if (!ggml_backend_buft_is_host(buft)) continue;
        out.state += mb.context;
        out.compute += mb.compute;
    }
}

// The CPU backend allocates a work buffer beside the compute buffers, sized by
// ggml_graph_plan for the graph's largest op, and llama.cpp's breakdown does
// not count it. For a MoE ubatch it is mostly MUL_MAT_ID's: the activations
// converted to the weights' dot type and an index of the routed rows, both
// growing with n_expert_used × ubatch (168 MB at -ub 8192 for 128 experts,
// 8 used, ffn 768). Unplanned, it left a streamed model's page cache nothing.
// Compute buffers that cannot be allocated are noted in out.refused instead.
void add_cpu_work_bytes(llama_context * ctx, const llama_context_params & cp, int64_t output_rows, context_bytes & out) {
    const uint32_t n_tokens  = std::min(cp.n_ubatch, cp.n_ctx);
    const uint32_t n_outputs = (uint32_t) std::clamp<int64_t>(output_rows, 1, n_tokens);
    held_llama_errors held;   // a refused allocation is an answer here, not news
    ggml_cgraph * gf = llama_graph_reserve(ctx, n_tokens, std::max<uint32_t>(cp.n_seq_max, 1), n_outputs);
    if (!gf) {
        if (out.allocatable()) out.refused = "its compute buffers (" + util::format_size(out.compute) + ")";
        return;
    }
    const int n_threads = cp.n_threads_batch > 0 ? cp.n_threads_batch : std::max(cp.n_threads, 1);
    out.work += ggml_graph_plan(gf, n_threads, nullptr).work_size;
}

// A context on the header-only model, llama.cpp's errors held. One that
// llama.cpp will not make at this size (it returns none) cannot run here:
// out.refused says so, and a smaller size is tried; a failure at every size
// leaves the smallest, and the pass itself then says why. (The scheduler's
// graph metadata, 101 GB at -ub 32768 for Kimi-K3's shape, is allocated under
// an assertion instead: refused, llama.cpp aborts; docs/streaming.md.)
ctx_ptr new_context(llama_model * model, const llama_context_params & cp, const char * what, context_bytes & out) {
    ctx_ptr ctx;
    std::string said;
    {
        held_llama_errors held;
        ctx.reset(llama_init_from_model(model, cp));
        said = held.take();
    }
    if (!ctx) {
        out.refused = std::string(what) + " of -b " + std::to_string(cp.n_batch) + " -ub " + std::to_string(cp.n_ubatch) +
                      " (" + std::to_string(cp.n_ctx) + " cells, " + std::to_string(cp.n_seq_max) + " sequences)" +
                      (said.empty() ? "" : ": llama.cpp said: " + said);
    }
    return ctx;
}

}  // namespace

bool context_meter::measure(const llama_context_params & cp, int64_t output_rows, const llama_context_params * mtp,
                            context_bytes & out, std::string & err) {
    out = {};
    if (!model) {
        err = "no model to measure contexts on (context_meter::open first)";
        return false;
    }
    const ctx_ptr ctx = new_context(model.get(), cp, "a context", out);
    if (!ctx) return true;
    add_host_bytes(ctx.get(), out);
    add_cpu_work_bytes(ctx.get(), cp, output_rows, out);
    if (mtp) {
        const llama_context_params side_params = mtp_context_params(*mtp, ctx.get(), (int) mtp->n_seq_max);
        const ctx_ptr side = new_context(model.get(), side_params, "the MTP context", out);
        if (!side) return true;
        add_host_bytes(side.get(), out);
        // the MTP context has its own CPU backend, so its own work buffer
        add_cpu_work_bytes(side.get(), side_params, side_params.n_batch, out);
    }
    const int64_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
    out.output = (uint64_t) std::max<int64_t>(output_rows, 0) * (uint64_t) std::max<int64_t>(n_vocab, 1) * sizeof(float);
    return true;
}

std::vector<int> ubatch_candidates(int64_t n_tokens) {
    std::vector<int> out;
    for (int c = k_max_auto_ubatch; c >= 512; c /= 2) {
        // past the size that takes every token at once nothing is saved
        if (c > k_default_batch && c / 2 >= n_tokens) continue;
        out.push_back(c);
    }
    return out;
}

bool choose_largest_fitting(const std::vector<int> & candidates, const memory_budget & budget,
                            const std::function<bool(int, context_bytes &, std::string &)> & need, sized_choice & out,
                            std::string & err) {
    if (candidates.empty()) {
        err = "no ubatch size to try";
        return false;
    }
    for (int c : candidates) {
        // memory unknown: the size reap took before it measured, or the largest below it
        if (!budget.known && c > k_default_batch && c != candidates.back()) continue;
        context_bytes b;
        if (!need(c, b, err)) return false;
        out.size  = c;
        out.bytes = b;
        out.fits  = fits(b, budget);
        if (out.fits) return true;
    }
    return true;   // the smallest, which does not fit either
}

}  // namespace reap

// How large eval's decodes are (eval.h: size_eval_batches). A source larger
// than memory is read once per ubatch, so the largest decode that fits is the
// cheapest pass; what a size needs is measured by llama.cpp on the model
// loaded without its weights (pass_size.h), never guessed.
#include "llama/eval.h"
#include "llama/eval_models.h"
#include "llama/eval_windows.h"
#include "llama/pass_size.h"

#include "gguf/gguf.h"
#include "util/memory.h"
#include "util/number_format.h"

#include <algorithm>

namespace reap {

namespace {

// The eval size of an ubatch candidate: whole windows side by side, at least
// one, no more sequences than llama.cpp takes in one context.
int eval_size_of(int c, int n_ctx) {
    const int most = n_ctx * (int) std::min<size_t>(llama_max_parallel_sequences(), (size_t) (INT32_MAX / std::max(n_ctx, 1)));
    return std::min(std::max(n_ctx, c / n_ctx * n_ctx), most);
}

// The old rule where --batch-memory caps the logits of a decode: about -b/2
// scored rows of n_vocab floats, held twice (llama.cpp's output buffer and the
// output head's compute).
bool within_batch_memory(const eval_runtime & rt, int n_batch, int n_ctx, int64_t n_vocab) {
    if (rt.batch_memory == 0 || n_batch <= n_ctx) return true;
    const uint64_t row = 2ull * (uint64_t) std::max<int64_t>(n_vocab, 1) * sizeof(float);
    return (uint64_t) (n_batch / 2) * row <= rt.batch_memory;
}

}  // namespace

void settle_batches(eval_runtime & rt, int n_ctx, int64_t n_vocab) {
    if (rt.n_batch <= 0 && rt.n_ubatch > 0) rt.n_batch = std::max(rt.n_ubatch, n_ctx);
    if (rt.n_batch <= 0) {
        int n = std::max(n_ctx, k_default_batch / n_ctx * n_ctx);
        while (n > n_ctx && !within_batch_memory(rt, n, n_ctx, n_vocab)) n -= n_ctx;
        rt.n_batch = n;
    }
    if (rt.n_ubatch <= 0) rt.n_ubatch = rt.n_batch;
}

bool size_eval_batches(eval_runtime & rt, const std::string & model_path, int n_ctx, int64_t n_vocab, int64_t max_tokens,
                       eval_sizes & out, std::string & err) {
    out = eval_sizes();
    const bool given = rt.n_batch > 0 || rt.n_ubatch > 0;
    gguf::model gm;
    if (!gguf::open_model(model_path, gm, err)) return false;
    const memory_budget budget = pass_memory_budget(rt.memory, gm.file_bytes(), util::available_memory());
    context_meter meter;
    llama_model_params mp = common_model_params_to_llama(const_cast<common_params &>(rt.llama));
    mp.load_mtp = true;   // as the passes load it (eval_models.cpp): an MTP model's header lists its blocks
    if (budget.known && !meter.open(model_path, mp, err)) return false;
    // One context at a time (eval.h): its KV cache, compute buffers and the
    // logits of the scored rows, plus the base's rows read beside them.
    auto need = [&](int n_batch, int n_ubatch, context_bytes & bytes, std::string & e) {
        const int n_seq = std::max(1, n_batch / n_ctx);
        eval_runtime sized = rt;
        sized.n_batch  = n_batch;
        sized.n_ubatch = n_ubatch;
        const int64_t rows = (int64_t) n_seq * eval_detail::scored_in_window(n_ctx);
        if (!meter.measure(context_params(sized, n_ctx, n_seq), rows, nullptr, bytes, e)) return false;
        bytes.output += (uint64_t) rows * ((uint64_t) std::max<int64_t>(n_vocab, 1) * sizeof(float) + sizeof(int32_t));
        return true;
    };
    if (given) {
        settle_batches(rt, n_ctx, n_vocab);
        if (!budget.known) {
            out.note = "-b/-ub given";
            return true;
        }
        context_bytes bytes;
        if (!need(rt.n_batch, rt.n_ubatch, bytes, err)) return false;
        if (!fits(bytes, budget)) {
            err = "-b " + std::to_string(rt.n_batch) + " -ub " + std::to_string(rt.n_ubatch) + " (given) " + shortfall(bytes, budget) +
                  ": give a smaller -b/-ub, leave them out to have the largest that fits chosen, or set --memory";
            return false;
        }
        out.needed = bytes.total();
        out.note = "-b/-ub given, needs " + describe(bytes) + " of " + util::format_size(budget.bytes) + " (" + budget.why + ")";
        return true;
    }
    if (!budget.known) {
        settle_batches(rt, n_ctx, n_vocab);
        out.note = "-b automatic: the memory is unknown, reap's default";
        return true;
    }
    // no decode larger than every window at once
    const int64_t all = std::max<int64_t>(n_ctx, (std::max<int64_t>(max_tokens, 1) + n_ctx - 1) / n_ctx * n_ctx);
    std::vector<int> sizes;
    for (int c : ubatch_candidates(std::max<int64_t>(max_tokens, 1))) {
        const int s = (int) std::min<int64_t>(eval_size_of(c, n_ctx), all);
        if (within_batch_memory(rt, s, n_ctx, n_vocab) && std::find(sizes.begin(), sizes.end(), s) == sizes.end()) sizes.push_back(s);
    }
    if (sizes.empty()) sizes.push_back(n_ctx);
    sized_choice pick;
    if (!choose_largest_fitting(sizes, budget, [&](int s, context_bytes & b, std::string & e) { return need(s, s, b, e); }, pick,
                                err)) {
        return false;
    }
    rt.n_batch = rt.n_ubatch = pick.size;
    out.needed = pick.bytes.total();
    out.note = std::string(pick.fits ? "-b automatic: the largest that fits" : "-b automatic: none fits, the smallest") +
               ", needs " + describe(pick.bytes) + " of " + util::format_size(budget.bytes) + " (" + budget.why + ")" +
               (rt.batch_memory ? ", logits within --batch-memory " + util::format_size(rt.batch_memory) : "");
    return true;
}

}  // namespace reap

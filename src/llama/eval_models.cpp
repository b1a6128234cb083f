// The llama.cpp handles of reap eval's passes (eval_models.h): loading
// models, making contexts, checking vocabularies.
#include "llama/eval_models.h"

#include "gguf/gguf.h"
#include "metrics/token_metrics.h"

#include "common.h"
#include "llama.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/stat.h>

namespace reap {

// A context for n_seq windows of n_ctx tokens side by side (one KV sequence
// each, not unified), as llama-perplexity sets up its own.
llama_context_params context_params(const eval_runtime & rt, int n_ctx, int n_seq) {
    llama_context_params cp = common_context_params_to_llama(rt.llama);  // -fa, -ctk, -ctv, ...
    cp.n_ctx           = (uint32_t) n_ctx * (uint32_t) n_seq;
    cp.n_batch         = (uint32_t) std::min(rt.n_batch, (int) cp.n_ctx);
    cp.n_ubatch        = (uint32_t) std::min(rt.n_ubatch, (int) cp.n_batch);
    cp.n_seq_max       = (uint32_t) n_seq;
    cp.kv_unified      = false;
    cp.n_threads       = resolve_threads(rt.n_threads);
    cp.n_threads_batch = cp.n_threads;
    cp.no_perf = true;
    return cp;
}

// what names the file's role in messages ("base model", "input", ...).
bool file_size_of(const std::string & what, const std::string & path, uint64_t & size, std::string & err) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        err = "cannot open " + what + " '" + path + "': " + strerror(errno);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        err = what + " '" + path + "' is not a regular file";
        return false;
    }
    size = (uint64_t) st.st_size;
    return true;
}

int resolve_threads(int n) { return n > 0 ? n : std::max(1, (int) common_cpu_get_num_math()); }

// ---- llama.cpp handles ----------------------------------------------------------

model_ptr load_model(const std::string & what, const std::string & path, const eval_runtime & rt, bool vocab_only,
                     std::string & err) {
    uint64_t size = 0;
    if (!file_size_of(what, path, size, err)) {
        return nullptr;
    }
    llama_model_params mp = common_model_params_to_llama(const_cast<common_params &>(rt.llama));
    mp.vocab_only = vocab_only;
    mp.load_mtp   = true;   // MTP blocks, where a model has them: the draft acceptance runs them
    model_ptr m(llama_model_load_from_file(path.c_str(), mp));
    if (!m) {
        err = "failed to load " + what + " '" + path + "'" + (runtime_verbose() ? "" : " (run with --verbose for llama.cpp's log)");
    }
    return m;
}

ctx_ptr make_context(llama_model * model, const eval_runtime & rt, int n_ctx, int n_seq, std::string & err,
                     mask_hook * hook) {
    llama_context_params cp = context_params(rt, n_ctx, n_seq);
    if (hook) {
        cp.cb_eval           = mask_hook::callback;
        cp.cb_eval_user_data = hook;
    }
    ctx_ptr c(llama_init_from_model(model, cp));
    if (!c) {
        err = "failed to create a llama.cpp context (n_ctx " + std::to_string(n_ctx) + " x " + std::to_string(n_seq) +
              " sequences)";
    }
    return c;
}

// Base and pruned must tokenize and index identically, or nothing compares.
bool check_same_vocab(const llama_model * a, const llama_model * b, const std::string & name_a,
                      const std::string & name_b, std::string & err) {
    const llama_vocab * va = llama_model_get_vocab(a);
    const llama_vocab * vb = llama_model_get_vocab(b);
    const int na = llama_vocab_n_tokens(va), nb = llama_vocab_n_tokens(vb);
    if (na != nb) {
        err = "vocabulary mismatch: " + name_a + " has " + std::to_string(na) + " tokens, " + name_b + " has " +
              std::to_string(nb);
        return false;
    }
    for (int i = 0; i < na; ++i) {
        const char * ta = llama_vocab_get_text(va, i);
        const char * tb = llama_vocab_get_text(vb, i);
        if (strcmp(ta ? ta : "", tb ? tb : "") != 0) {
            err = "vocabulary mismatch: token " + std::to_string(i) + " is '" + (ta ? ta : "") + "' in " + name_a +
                  " but '" + (tb ? tb : "") + "' in " + name_b;
            return false;
        }
    }
    if (llama_vocab_bos(va) != llama_vocab_bos(vb) || llama_vocab_get_add_bos(va) != llama_vocab_get_add_bos(vb)) {
        err = "vocabulary mismatch: " + name_a + " and " + name_b + " differ in their BOS token or whether they add it";
        return false;
    }
    return true;
}

// Loads a pruned model (only its vocabulary when vocab_only) and checks that
// its vocabulary is the base's; null + err otherwise.
model_ptr load_pruned(const std::string & path, const llama_model * base, const std::string & base_path,
                      const eval_runtime & rt, bool vocab_only, std::string & err) {
    model_ptr m = load_model("pruned model", path, rt, vocab_only, err);
    if (m && !check_same_vocab(base, m.get(), "base '" + base_path + "'", "pruned '" + path + "'", err)) {
        m.reset();
    }
    return m;
}

bool visit_models(const std::string & base_path, const std::string & base_mask_path,
                  const std::vector<eval_candidate> & cands, const eval_runtime & rt, const model_visit & visit,
                  std::string & err) {
    gguf::model g;
    if (!gguf::open_model(base_path, g, err)) return false;
    const std::string base_name = "base '" + base_path + "'";
    expert_mask base_mask;
    if (!base_mask_path.empty() && !load_mask(base_mask_path, g, base_name, base_mask, err)) {
        err = "--base-mask " + err;
        return false;
    }
    std::vector<expert_mask> masks(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
        if (!cands[i].masked()) continue;
        if (cands[i].in_memory ? !mask_from_plan(*cands[i].in_memory, cands[i].path, g, base_name, masks[i], err)
                               : !load_mask(cands[i].path, g, base_name, masks[i], err)) {
            err = "--mask " + err;
            return false;
        }
    }
    model_ptr base = load_model("base model", base_path, rt, false, err);
    if (!base) return false;
    bool any_pruned = false;
    for (const auto & c : cands) {
        if (c.masked()) continue;
        any_pruned = true;
        if (!load_pruned(c.path, base.get(), base_path, rt, true, err)) return false;
    }
    mask_hook hook;
    hook.active = base_mask.name.empty() ? nullptr : &base_mask;
    if (!visit(base.get(), hook.active ? &hook : nullptr, -1)) return false;
    for (size_t i = 0; i < cands.size(); ++i) {
        if (!cands[i].masked()) continue;
        hook.active = &masks[i];
        if (!visit(base.get(), &hook, (int) i)) return false;
    }
    if (any_pruned) base.reset();  // one model resident
    for (size_t i = 0; i < cands.size(); ++i) {
        if (cands[i].masked()) continue;
        model_ptr m = load_model("pruned model", cands[i].path, rt, false, err);
        if (!m || !visit(m.get(), nullptr, (int) i)) return false;
    }
    return true;
}

ctx_ptr continuation_context(llama_model * model, const eval_runtime & rt_in, int n_ctx, mask_hook * hook, std::string & err) {
    eval_runtime rt = rt_in;
    rt.n_batch = std::max(rt.n_batch, n_ctx);  // the prompt goes in one decode
    rt.n_ubatch = std::min(rt.n_ubatch, rt.n_batch);
    return make_context(model, rt, n_ctx, 1, err, hook);
}

bool decode_continuation(llama_context * ctx, mask_hook * hook, const std::vector<int32_t> & prompt, int n_max,
                         const std::string & what, std::vector<int32_t> & out, std::string & err, llama_sampler * sampler) {
    out.clear();
    llama_memory_clear(llama_get_memory(ctx), true);
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    const int n_vocab = llama_vocab_n_tokens(vocab);
    std::vector<llama_token> cur(prompt.begin(), prompt.end());
    llama_batch batch = llama_batch_get_one(cur.data(), (int32_t) cur.size());
    for (int i = 0; i < n_max; ++i) {
        if (llama_decode(ctx, batch) != 0) {
            err = "llama_decode failed during " + what;
            return false;
        }
        if (hook && !hook->check(true, err)) return false;
        const llama_token t = sampler ? llama_sampler_sample(sampler, ctx, -1)
                                      : argmax_first(llama_get_logits_ith(ctx, -1), n_vocab);
        out.push_back(t);
        if (llama_vocab_is_eog(vocab, t)) break;
        cur.assign(1, t);
        batch = llama_batch_get_one(cur.data(), 1);
    }
    return true;
}

} // namespace reap

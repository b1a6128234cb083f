// The llama.cpp handles of reap eval's passes (eval_models.h): loading
// models, making contexts, checking vocabularies.
#include "llama/eval_models.h"

#include "gguf/gguf.h"
#include "metrics/token_metrics.h"
#include "plan/plan.h"
#include "util/path.h"
#include "util/sha256.h"

#include "common.h"
#include "llama.h"

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <cstring>

#include <sys/stat.h>

namespace reap {

// A context for n_seq windows of n_ctx tokens side by side (one KV sequence
// each, not unified), as llama-perplexity sets up its own.
llama_context_params context_params(const eval_runtime & rt, int n_ctx, int n_seq) {
    const uint32_t cells = (uint32_t) n_ctx * (uint32_t) n_seq;
    const uint32_t batch = (uint32_t) std::min(rt.n_batch, (int) cells);
    return pass_context_params(rt, cells, batch, (uint32_t) std::min(rt.n_ubatch, (int) batch), (uint32_t) n_seq, false);
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
                     mask_hook * hook, bool unified) {
    llama_context_params cp = context_params(rt, n_ctx, n_seq);
    cp.kv_unified = unified;
    if (hook) {
        cp.cb_eval           = mask_hook::callback;
        cp.cb_eval_user_data = hook;
        hook->n_threads      = cp.n_threads_batch;
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

bool signature_of(const std::string & path, file_signature & s, std::string & err) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        err = "cannot stat '" + path + "': " + strerror(errno);
        return false;
    }
    s.path = path;
    s.dev = st.st_dev;
    s.ino = st.st_ino;
    s.size = st.st_size;
    s.mtime_ns = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    s.ctime_ns = (int64_t) st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
    return true;
}

bool pruned_identity(const std::string & path, std::vector<eval_report::file_id> & files, std::vector<file_signature> & sigs,
                     std::string & err) {
    gguf::model m;
    if (!gguf::open_model(path, m, err)) return false;
    for (const auto & sh : m.shards) {
        file_signature sig;
        if (!signature_of(sh.path, sig, err)) return false;
        eval_report::file_id f;
        f.name = util::base_name(sh.path);
        f.bytes = (uint64_t) sig.size;
        // what SHA256SUMS lists is claimed only for the bytes it describes:
        // the file is hashed (after its signature was taken, which must hold
        // to the end of the run) and its own hash recorded when they differ
        const std::string listed = util::listed_sha256(sh.path);
        if (!listed.empty()) {
            std::string actual;
            if (!util::sha256_file(sh.path, actual, err)) return false;
            if (actual != listed) {
                fprintf(stderr, "reap eval: warning: '%s' is not the file its SHA256SUMS lists (sha256 %s, listed %s): "
                        "its numbers are recorded under its own hash\n", sh.path.c_str(), actual.c_str(), listed.c_str());
            }
            f.listed_sha256 = actual;
        }
        files.push_back(f);
        sigs.push_back(sig);
    }
    return true;
}

bool unchanged_since(const std::vector<file_signature> & sigs, std::string & err) {
    for (const auto & before : sigs) {
        file_signature now;
        if (!signature_of(before.path, now, err)) return false;
        if (now.dev != before.dev || now.ino != before.ino || now.size != before.size || now.mtime_ns != before.mtime_ns ||
            now.ctime_ns != before.ctime_ns) {
            err = "'" + before.path + "' changed while it was being evaluated: its numbers would not be of the file it names";
            return false;
        }
    }
    return true;
}

namespace {

// Base files hashed in this process, by their signatures (base_bytes_hash).
std::mutex                         hashed_mutex;
std::map<std::string, std::string> hashed;

std::string signature_key(const std::vector<file_signature> & sigs) {
    std::string key;
    for (const auto & s : sigs) {
        key += s.path + '\n' + std::to_string(s.dev) + ' ' + std::to_string(s.ino) + ' ' + std::to_string(s.size) + ' ' +
               std::to_string(s.mtime_ns) + ' ' + std::to_string(s.ctime_ns) + '\n';
    }
    return key;
}

} // namespace

bool base_bytes_hash::start(const std::vector<std::string> & files, std::string & err) {
    for (const std::string & path : files) {
        file_signature sig;
        if (!signature_of(path, sig, err)) return false;
        sigs.push_back(sig);
    }
    {
        std::lock_guard<std::mutex> lock(hashed_mutex);
        const auto it = hashed.find(signature_key(sigs));
        if (it != hashed.end()) {
            known = it->second;
            return true;
        }
    }
    job.start(files);
    return true;
}

bool base_bytes_hash::finish(std::string & hex, std::string & err) {
    if (!known.empty()) {
        hex = known;
        return unchanged_since(sigs, err);
    }
    if (!job.finish(hex, err) || !unchanged_since(sigs, err)) return false;
    std::lock_guard<std::mutex> lock(hashed_mutex);
    hashed[signature_key(sigs)] = hex;
    return true;
}

namespace {

// A plan's size on disk, for the receipts (0 when it cannot be read: the plan was parsed already).
uint64_t plan_bytes_of(const std::string & path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (uint64_t) st.st_size : 0;
}

} // namespace

bool visit_models(const std::string & base_path, const std::string & base_mask_path, const std::string & input_path,
                  const std::vector<eval_candidate> & cands, const eval_runtime & rt, const model_visit & visit,
                  behaviour_receipts & measured, std::string & err) {
    measured = behaviour_receipts();
    gguf::model g;
    if (!gguf::open_model(base_path, g, err)) return false;
    measured.base_path = base_path;
    measured.base_bytes = g.file_bytes();
    measured.base_sha256 = model_header_sha256(g);
    base_bytes_hash base_hash;
    std::vector<std::string> shards;
    for (const auto & sh : g.shards) shards.push_back(sh.path);
    if (!base_hash.start(shards, err)) return false;
    measured.input_path = input_path;
    if (!input_path.empty() && !util::sha256_file(input_path, measured.input_sha256, err)) return false;
    const std::string base_name = "base '" + base_path + "'";
    expert_mask base_mask;
    if (!base_mask_path.empty() && !load_mask(base_mask_path, g, base_name, base_mask, err)) {
        err = "--base-mask " + err;
        return false;
    }
    measured.base_mask = base_mask_path;
    measured.base_mask_sha256 = base_mask.plan_sha256;
    measured.base_mask_bytes = base_mask_path.empty() ? 0 : plan_bytes_of(base_mask_path);
    std::vector<expert_mask> masks(cands.size());
    std::vector<file_signature> sigs;
    for (size_t i = 0; i < cands.size(); ++i) {
        behaviour_receipts::candidate & id = measured.candidates.emplace_back();
        id.name = cands[i].path;
        id.masked = cands[i].masked();
        if (!cands[i].masked()) {
            if (!pruned_identity(cands[i].path, id.files, sigs, err)) return false;
            continue;
        }
        if (cands[i].in_memory ? !mask_from_plan(*cands[i].in_memory, cands[i].path, g, base_name, masks[i], err)
                               : !load_mask(cands[i].path, g, base_name, masks[i], err)) {
            err = "--mask " + err;
            return false;
        }
        if (cands[i].in_memory) {   // a sweep's plan: the text --plans-dir writes
            const std::string text = plan_text(*cands[i].in_memory);
            id.plan_bytes = text.size();
            id.plan_sha256 = util::sha256_bytes(text.data(), text.size());
        } else {
            id.plan_bytes = plan_bytes_of(cands[i].path);
            id.plan_sha256 = masks[i].plan_sha256;
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
    return unchanged_since(sigs, err) && base_hash.finish(measured.base_files_sha256, err);
}

ctx_ptr continuation_context(llama_model * model, const eval_runtime & rt_in, int64_t n_ctx, mask_hook * hook, std::string & err) {
    // past the trained context a model's positions are ones it never saw (and
    // an unbounded --max-new would size the KV cache without end): refused
    const int64_t trained = llama_model_n_ctx_train(model);
    if (trained > 0 && n_ctx > trained) {
        err = "a context of " + std::to_string(n_ctx) + " tokens is needed (the longest prompt and what may be written after it), past " +
              "the model's trained context of " + std::to_string(trained) + ": shorten the prompts, --max-new or --needle-lengths";
        return nullptr;
    }
    eval_runtime rt = rt_in;
    rt.n_batch = std::max(rt.n_batch, (int) n_ctx);  // the prompt goes in one decode
    rt.n_ubatch = std::min(rt.n_ubatch, rt.n_batch);
    return make_context(model, rt, (int) n_ctx, 1, err, hook);
}

bool decode_continuation(llama_context * ctx, mask_hook * hook, const std::vector<int32_t> & prompt, int n_max,
                         const std::string & what, std::vector<int32_t> & out, std::string & err, llama_sampler * sampler,
                         progress_line * prog) {
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
        if (prog) prog->add(batch.n_tokens);
        const llama_token t = sampler ? llama_sampler_sample(sampler, ctx, -1)
                                      : argmax_first(llama_get_logits_ith(ctx, -1), n_vocab);
        out.push_back(t);
        if (llama_vocab_is_eog(vocab, t)) {
            if (prog) prog->add(n_max - 1 - i);   // what the cap would have cost: the ETA counts on it
            break;
        }
        cur.assign(1, t);
        batch = llama_batch_get_one(cur.data(), 1);
    }
    return true;
}

} // namespace reap

// reap calibrate, the library half: corpus -> windows -> llama.cpp decodes
// with an eval callback that reads the routing, gate weights and expert
// outputs of every MoE layer -> per-domain accumulators -> saliency archive,
// with checkpoints and resume. See calibrate.h for what is read and why.
#include "llama/calibrate.h"

#include "gguf/gguf.h"
#include "llama/corpus.h"
#include "llama/mtp.h"
#include "llama/runtime.h"
#include "util/file.h"
#include "util/json.h"
#include "util/path.h"
#include "util/sha256.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

namespace reap {

namespace {

constexpr const char * k_key_next_window = "reap.saliency.checkpoint.next_window";
constexpr const char * k_key_n_windows   = "reap.saliency.checkpoint.n_windows";
constexpr const char * k_key_before_ffn  = "reap.saliency.weights_before_ffn";
constexpr const char * k_key_nodes       = "reap.saliency.calibrate.nodes";
constexpr const char * k_key_corpus      = "reap.saliency.corpus";

// ---- node names ----------------------------------------------------------------------

// Splits "base-L" into base and L; false when the name has no "-<digits>" suffix.
bool split_node_name(const char * name, std::string & base, int & layer) {
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

int chain_pos(const char * const * chain, size_t n, const std::string & base) {
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
    // per ubatch
    int64_t              n_tok = -1;
    std::vector<int32_t> ids;  // n_tok * n_used
    std::vector<float>   w;    // n_tok * n_used
    bool have_ids = false, have_w = false;
};

struct collector {
    enum class mode { probe, collect } md = mode::probe;
    int64_t n_expert = 0, n_used = 0;
    bool    weights_before_ffn = false;
    std::vector<layer_state> layers;
    saliency::domain_stats * dom = nullptr;   // where the current window's tokens go
    std::string err;
    std::vector<uint8_t> host;   // staging for tensors not in host memory
    std::vector<double>  norms;

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

    bool on_topk(const ggml_tensor * t, int il) {
        layer_state & L = layers[il];
        if (t->type != GGML_TYPE_I32 || t->ne[0] != n_used || t->ne[2] != 1 || t->ne[3] != 1) {
            fail(std::string(t->name) + ": unexpected type/shape (want i32 [" + std::to_string(n_used) + ", n_tokens])");
            return false;
        }
        L.n_tok = t->ne[1];
        L.ids.resize((size_t) (L.n_tok * n_used));
        // a strided view into the full argsort (nb[1] = n_expert * 4): row by row
        const bool is_host = t->buffer && ggml_backend_buffer_is_host(t->buffer);
        for (int64_t j = 0; j < L.n_tok; ++j) {
            int32_t * dst = L.ids.data() + j * n_used;
            if (is_host) {
                const uint8_t * row = (const uint8_t *) t->data + j * t->nb[1];
                for (int64_t k = 0; k < n_used; ++k) {
                    memcpy(dst + k, row + k * t->nb[0], sizeof(int32_t));
                }
            } else if (t->nb[0] == sizeof(int32_t)) {
                ggml_backend_tensor_get(const_cast<ggml_tensor *>(t), dst, j * t->nb[1], n_used * sizeof(int32_t));
            } else {
                for (int64_t k = 0; k < n_used; ++k) {
                    ggml_backend_tensor_get(const_cast<ggml_tensor *>(t), dst + k, j * t->nb[1] + k * t->nb[0], sizeof(int32_t));
                }
            }
        }
        for (int32_t e : L.ids) {
            if (e < 0 || e >= n_expert) {
                fail(std::string(t->name) + ": expert id " + std::to_string(e) + " out of range");
                return false;
            }
        }
        L.have_ids = true;
        L.have_w   = false;
        return true;
    }

    bool on_weights(const ggml_tensor * t, int il) {
        layer_state & L = layers[il];
        if (!L.have_ids) {
            fail(std::string(t->name) + ": gate weights before the routing of the same layer");
            return false;
        }
        if (t->type != GGML_TYPE_F32 || ggml_nelements(t) != L.n_tok * n_used) {
            fail(std::string(t->name) + ": unexpected type/shape (want f32 with n_expert_used x n_tokens elements)");
            return false;
        }
        // [1, n_used, n_tok] (get_rows, scale) or [n_used, n_tok] (norm)
        size_t sk, sj;
        if (t->ne[0] == 1 && t->ne[1] == n_used && t->ne[2] == L.n_tok) {
            sk = t->nb[1]; sj = t->nb[2];
        } else if (t->ne[0] == n_used && t->ne[1] == L.n_tok) {
            sk = t->nb[0]; sj = t->nb[1];
        } else {
            fail(std::string(t->name) + ": unexpected shape");
            return false;
        }
        const uint8_t * d = host_data(t);
        L.w.resize((size_t) (L.n_tok * n_used));
        for (int64_t j = 0; j < L.n_tok; ++j) {
            for (int64_t k = 0; k < n_used; ++k) {
                memcpy(&L.w[j * n_used + k], d + j * sj + k * sk, sizeof(float));
            }
        }
        L.have_w = true;
        return true;
    }

    bool on_down(const ggml_tensor * t, int il) {
        layer_state & L = layers[il];
        if (!L.have_ids || !L.have_w) {
            fail(std::string(t->name) + ": expert outputs before the routing and gate weights of the same layer");
            return false;
        }
        if (t->type != GGML_TYPE_F32 || t->ne[1] != n_used || t->ne[2] != L.n_tok || t->ne[3] != 1 ||
            t->nb[0] != sizeof(float)) {
            fail(std::string(t->name) + ": unexpected type/shape (want f32 [n_embd, " + std::to_string(n_used) + ", " +
                 std::to_string(L.n_tok) + "])");
            return false;
        }
        const uint8_t * d = host_data(t);
        const int64_t n_embd = t->ne[0];
        saliency::domain_stats & D = *dom;
        const size_t base = (size_t) il * (size_t) n_expert;
        for (int64_t j = 0; j < L.n_tok; ++j) {
            for (int64_t k = 0; k < n_used; ++k) {
                const float * f = (const float *) (d + j * t->nb[2] + k * t->nb[1]);
                double s = 0;
                for (int64_t i = 0; i < n_embd; ++i) {
                    s += (double) f[i] * (double) f[i];
                }
                const double nrm = std::sqrt(s);
                const double g   = L.w[j * n_used + k];
                const size_t c   = base + (size_t) L.ids[j * n_used + k];
                if (!std::isfinite(nrm) || !std::isfinite(g)) {
                    fail(std::string(t->name) + ": non-finite expert output or gate weight");
                    return false;
                }
                D.count[c]    += 1;
                D.gate_sum[c] += g;
                D.reap_sum[c] += weights_before_ffn ? nrm : g * nrm;
                D.ean_sum[c]  += nrm;
                if (nrm > D.max_norm[c]) D.max_norm[c] = nrm;
            }
        }
        L.have_ids = L.have_w = false;
        return true;
    }

    // probe: remember which chain nodes each layer's graph has; ask for nothing
    void observe(const ggml_tensor * t) {
        std::string base;
        int il;
        if (strncmp(t->name, "ffn_moe_", 8) != 0 || !split_node_name(t->name, base, il)) return;
        if (il < 0 || il >= (int) layers.size()) return;
        layer_state & L = layers[il];
        if (base == "ffn_moe_topk") L.saw_topk = true;
        const int wp = chain_pos(k_weight_chain, std::size(k_weight_chain), base);
        if (wp >= 0) L.weights_node = std::max(L.weights_node, wp);
        const int dp = chain_pos(k_down_chain, std::size(k_down_chain), base);
        if (dp >= 0) L.down_node = std::max(L.down_node, dp);
        if (base == "ffn_moe_weighted" && L.down_node < 0) weights_before_ffn = true;
    }

    static bool callback(ggml_tensor * t, bool ask, void * user) {
        auto * self = static_cast<collector *>(user);
        if (self->md == mode::probe) {
            if (ask) self->observe(t);
            return ask ? false : true;
        }
        if (strncmp(t->name, "ffn_moe_", 8) != 0) return ask ? false : true;
        std::string base;
        int il;
        if (!split_node_name(t->name, base, il) || il < 0 || il >= (int) self->layers.size()) return ask ? false : true;
        const layer_state & L = self->layers[il];
        if (L.weights_node < 0) return ask ? false : true;
        const bool is_topk = base == "ffn_moe_topk";
        const bool is_w    = base == k_weight_chain[L.weights_node];
        const bool is_down = base == k_down_chain[L.down_node];
        if (ask) return is_topk || is_w || is_down;
        if (!self->err.empty()) return false;
        bool ok = true;
        if (is_topk) ok = self->on_topk(t, il);
        else if (is_w) ok = self->on_weights(t, il);
        else if (is_down) ok = self->on_down(t, il);
        return ok;  // false stops the graph; the error is reported after llama_decode
    }
};

// ---- windows -------------------------------------------------------------------------

struct window {
    size_t  sample;
    int64_t offset;
    int     len;
    int     domain;
    bool    bos_first;   // plain text: the first token is replaced by BOS
};

using util::stem_of;

const char * kv_type_name(ggml_type t) { return ggml_type_name(t); }

}  // namespace

std::string calibrate_options_json(const calibrate_options & opt, bool plain_text) {
    nlohmann::ordered_json j;
    j["input"]                 = plain_text ? "text" : "jsonl";
    j["n_ctx"]                 = opt.llama.n_ctx > 0 ? opt.llama.n_ctx : 512;
    j["n_batch"]               = opt.llama.n_batch;
    j["n_ubatch"]              = opt.llama.n_ubatch;
    j["cache_type_k"]          = kv_type_name(opt.llama.cache_type_k);
    j["cache_type_v"]          = kv_type_name(opt.llama.cache_type_v);
    j["flash_attn"]            = llama_flash_attn_type_name(opt.llama.flash_attn_type);
    j["max_tokens"]            = opt.max_tokens;
    j["max_tokens_per_domain"] = opt.max_tokens_per_domain;
    j["shard"]                 = std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count);
    return reap::util::json_text(j);
}

bool run_calibrate(const calibrate_options & opt_in, saliency::archive & out, calibrate_report & report,
                   std::string & err) {
    calibrate_options opt = opt_in;
    report = calibrate_report();
    if (opt.llama.n_ctx <= 0) opt.llama.n_ctx = 512;
    const int n_ctx = opt.llama.n_ctx;
    if (n_ctx < 2) {
        err = "-c " + std::to_string(n_ctx) + " is too small";
        return false;
    }
    if (opt.llama.n_batch <= 0 || opt.llama.n_ubatch <= 0) {
        err = "-b and -ub must be positive";
        return false;
    }
    opt.llama.n_batch  = std::min(opt.llama.n_batch, n_ctx);
    opt.llama.n_ubatch = std::min(opt.llama.n_ubatch, opt.llama.n_batch);
    if (opt.shard_count == 0 || opt.shard_index >= opt.shard_count) {
        err = "--shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) +
              ": need 0 <= i < n";
        return false;
    }
    if (opt.max_tokens < 0 || opt.max_tokens_per_domain < 0 || opt.checkpoint_every < 0) {
        err = "--max-tokens, --max-tokens-per-domain and --checkpoint-every must not be negative";
        return false;
    }
    if (opt.collect && opt.out_path.empty()) {
        err = "no output path (-o)";
        return false;
    }
    const std::string ckpt_path = opt.checkpoint_path.empty() ? opt.out_path + ".checkpoint" : opt.checkpoint_path;
    struct stat st;
    if (opt.collect) {
        // the output rule (util/file.h): neither output is an input, nor the other output
        const std::vector<std::pair<std::string, std::string>> inputs = {{"model", opt.model_path},
                                                                          {"corpus", opt.corpus_path}};
        if (!util::check_output(opt.out_path, inputs, opt.force, err)) return false;
        std::vector<std::pair<std::string, std::string>> ck_inputs = inputs;
        ck_inputs.emplace_back("output", opt.out_path);
        if (!util::check_not_input(ckpt_path, ck_inputs, err)) {
            err += " (give another --checkpoint)";
            return false;
        }
    }
    if (opt.collect && !opt.resume && stat(ckpt_path.c_str(), &st) == 0) {
        err = "a checkpoint '" + ckpt_path + "' exists: continue it with --resume, or remove it";
        return false;
    }

    // The model as a GGUF: fingerprint (arch, experts, MoE layers, router hash).
    gguf::model gm;
    if (!gguf::open_model(opt.model_path, gm, err)) return false;
    if (opt.collect) {
        for (const gguf::file_header & sh : gm.shards) {
            if (!util::check_not_input(opt.out_path, {{"model shard", sh.path}}, err) ||
                !util::check_not_input(ckpt_path, {{"model shard", sh.path}}, err)) {
                return false;
            }
        }
    }
    saliency::fingerprint fp;
    if (!saliency::model_fingerprint(gm, fp, err)) return false;
    if (fp.n_expert_used == 0 || fp.n_expert_used > fp.n_expert) {
        err = "model '" + opt.model_path + "' has no usable expert_used_count";
        return false;
    }

    runtime_init(opt.verbose);
    llama_model_params mp = common_model_params_to_llama(opt.llama);
    mp.load_mtp = true;   // a model's MTP blocks are calibrated too (in an MTP context, below)
    model_ptr model(llama_model_load_from_file(opt.model_path.c_str(), mp));
    if (!model) {
        err = "llama.cpp failed to load '" + opt.model_path + "'" + (opt.verbose ? "" : " (run with --verbose for its log)");
        return false;
    }

    // The corpus.
    corpus_options copt;
    copt.shard_index  = opt.shard_index;
    copt.shard_count  = opt.shard_count;
    // The caps go to the reader, which tokenizes only what they let through;
    // the windows below apply them again (a no-op for JSONL, the cut for text).
    copt.max_tokens            = opt.max_tokens;
    copt.max_tokens_per_domain = opt.max_tokens_per_domain;
    copt.plain_domain = stem_of(opt.corpus_path);
    if (copt.plain_domain.empty() || copt.plain_domain.size() > saliency::k_max_domain_bytes) copt.plain_domain = "text";
    corpus cp;
    if (!read_corpus_file(opt.corpus_path, model.get(), copt, cp, err)) return false;
    if (!cp.jsonl && opt.shard_count > 1) {
        err = "--shard needs a JSONL corpus (a plain text file is one sample)";
        return false;
    }
    for (const auto & d : cp.domains) {
        if (d.size() > saliency::k_max_domain_bytes) {
            err = "domain name '" + d + "' is longer than " + std::to_string(saliency::k_max_domain_bytes) + " bytes";
            return false;
        }
    }
    std::string corpus_sha;
    if (!util::sha256_file(opt.corpus_path, corpus_sha, err)) return false;
    report.n_samples       = cp.samples.size();
    report.n_samples_total = cp.n_lines_total;

    // Windows, with the caps applied in corpus order.
    std::vector<window> windows;
    {
        std::vector<int64_t> dom_used(cp.domains.size(), 0);
        int64_t used = 0;
        auto cap = [&](int dom, int64_t len) {
            if (opt.max_tokens > 0) len = std::min(len, opt.max_tokens - used);
            if (opt.max_tokens_per_domain > 0) len = std::min(len, opt.max_tokens_per_domain - dom_used[dom]);
            return std::max<int64_t>(len, 0);
        };
        const llama_vocab * vocab = llama_model_get_vocab(model.get());
        const bool plain_bos = !cp.jsonl && llama_vocab_get_add_bos(vocab) && llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL;
        for (size_t s = 0; s < cp.samples.size(); ++s) {
            const auto & smp = cp.samples[s];
            const int64_t n = (int64_t) smp.tokens.size();
            const int64_t n_win = cp.jsonl ? (n + n_ctx - 1) / n_ctx : n / n_ctx;
            for (int64_t c = 0; c < n_win; ++c) {
                const int64_t len = cap(smp.domain, std::min<int64_t>(n_ctx, n - c * n_ctx));
                if (len == 0) continue;
                windows.push_back({s, c * n_ctx, (int) len, smp.domain, plain_bos});
                used += len;
                dom_used[smp.domain] += len;
            }
        }
        if (!cp.jsonl && windows.empty()) {
            err = "text '" + opt.corpus_path + "' tokenizes to " +
                  std::to_string(cp.samples.empty() ? 0 : cp.samples[0].tokens.size()) + " tokens: one window needs -c " +
                  std::to_string(n_ctx);
            return false;
        }
        if (windows.empty()) {
            err = "corpus '" + opt.corpus_path + "' has no tokens to calibrate on" +
                  (opt.shard_count > 1 ? " in shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) : "");
            return false;
        }
        for (const auto & w : windows) report.n_tokens += w.len;
    }
    report.n_windows = windows.size();

    // The archive: every domain of the corpus, in first-seen order.
    out = saliency::make_archive(fp, saliency::metric_set::reap);
    for (const auto & d : cp.domains) out.add_domain(d);
    const std::string options_json = calibrate_options_json(opt, !cp.jsonl);
    out.provenance.set_string(saliency::k_key_tool, std::string("reap calibrate"));
    out.provenance.set_string(saliency::k_key_corpus_sha256, corpus_sha);
    out.provenance.set_string(k_key_corpus, util::base_name(opt.corpus_path));
    out.provenance.set_string(saliency::k_key_options, options_json);

    // The context: one sequence, a window at a time, logits for every token.
    collector col;
    col.n_expert = fp.n_expert;
    col.n_used   = fp.n_expert_used;
    col.layers.resize(fp.n_layer);
    llama_context_params cparams = common_context_params_to_llama(opt.llama);
    cparams.n_ctx     = (uint32_t) n_ctx;
    cparams.n_batch   = (uint32_t) opt.llama.n_batch;
    cparams.n_ubatch  = (uint32_t) opt.llama.n_ubatch;
    cparams.n_seq_max = 1;
    cparams.n_threads = opt.llama.cpuparams.n_threads > 0 ? opt.llama.cpuparams.n_threads : (int) common_cpu_get_num_math();
    cparams.n_threads_batch = opt.llama.cpuparams_batch.n_threads > 0 ? opt.llama.cpuparams_batch.n_threads : cparams.n_threads;
    cparams.no_perf   = true;
    cparams.embeddings = false;
    cparams.cb_eval           = opt.collect ? collector::callback : nullptr;
    cparams.cb_eval_user_data = opt.collect ? &col : nullptr;
    // Every token is an output (see calibrate.h), and llama.cpp sizes both its
    // logits buffer and the output head's part of the compute buffer for a
    // whole batch: n_vocab floats per token, 2.7 GB at a 163,840-token
    // vocabulary and -b 4096. Batches of at most k_logits_budget of logits
    // bound both. An MTP context (below) keeps its own, for every row as well
    // (some archs' MTP graphs run the MoE on output rows only): then each gets half.
    // (only MTP blocks with routed experts in the file: there is nothing else to measure)
    for (int l : fp.moe_layers) {
        if (l >= (int) fp.n_layer - mtp_heads(model.get())) report.mtp_layers.push_back(l);
    }
    const bool has_mtp = !report.mtp_layers.empty();
    {
        const int64_t n_vocab = std::max<int32_t>(1, llama_vocab_n_tokens(llama_model_get_vocab(model.get())));
        const int64_t cap     = std::max<int64_t>(1, (int64_t) (k_logits_budget / (has_mtp ? 2 : 1) /
                                                                ((uint64_t) n_vocab * sizeof(float))));
        if ((int64_t) cparams.n_batch > cap) {
            fprintf(stderr, "reap calibrate: -b/-ub capped at %lld tokens: every token's logits are kept, and %lld "
                    "tokens of a %lld-token vocabulary are %.0f MiB%s\n", (long long) cap, (long long) cap,
                    (long long) n_vocab, (double) cap * n_vocab * sizeof(float) / (1 << 20),
                    has_mtp ? " (in each of the main and the MTP context)" : "");
            cparams.n_batch  = (uint32_t) cap;
            cparams.n_ubatch = std::min<uint32_t>(cparams.n_ubatch, (uint32_t) cap);
        }
    }
    ctx_ptr ctx(llama_init_from_model(model.get(), cparams));
    if (!ctx) {
        err = "failed to create a llama.cpp context (-c " + std::to_string(n_ctx) + ", -b " +
              std::to_string(cparams.n_batch) + ", -ub " + std::to_string(cparams.n_ubatch) + ")";
        return false;
    }
    // MTP blocks (calibrate.h): an MTP context over the same tokens, with the same callback.
    mtp_runner mtp;
    if (has_mtp && !mtp.init(model.get(), ctx.get(), cparams, err)) return false;
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    llama_batch batch = llama_batch_init((int32_t) cparams.n_batch, 0, 1);
    struct batch_guard { llama_batch & b; ~batch_guard() { llama_batch_free(b); } } bg{batch};

    auto decode_tokens = [&](const llama_token * toks, int n, int pos0, std::string & e) {
        batch.n_tokens = n;
        for (int k = 0; k < n; ++k) {
            batch.token[k]     = toks[k];
            batch.pos[k]       = pos0 + k;
            batch.n_seq_id[k]  = 1;
            batch.seq_id[k][0] = 0;
            batch.logits[k]    = 1;  // every token: else the last layer runs on the outputs only
        }
        const int rc = llama_decode(ctx.get(), batch);
        if (!col.err.empty()) {
            e = "calibration callback: " + col.err;
            return false;
        }
        if (rc != 0) {
            e = "llama_decode failed (" + std::to_string(rc) + ")";
            return false;
        }
        if (has_mtp) {
            // outputs on every row, as the main context's: qwen3next's and nemotron-h-moe's MTP graphs run
            // the MoE on output rows only (llama.cpp's own driver, which asks for none, routes nothing there)
            const bool ok = mtp.feed(toks, n, pos0, /*outputs=*/nullptr, /*keep_logits=*/false, e);
            if (!col.err.empty()) {
                e = "calibration callback (MTP context): " + col.err;
                return false;
            }
            if (!ok) return false;
        }
        return true;
    };
    auto clear_memory = [&]() {
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        if (has_mtp) mtp.reset();
    };

    // Probe: which build_moe_ffn nodes this model's graph has, per layer.
    saliency::domain_stats scratch;
    if (opt.collect) {
        col.md = collector::mode::probe;
        const auto & first = cp.samples[windows[0].sample].tokens[windows[0].offset];
        if (!decode_tokens(&first, 1, 0, err)) return false;
        clear_memory();
        std::vector<bool> is_moe(fp.n_layer, false);
        for (int l : fp.moe_layers) is_moe[l] = true;
        for (int l = 0; l < (int) fp.n_layer; ++l) {
            layer_state & L = col.layers[l];
            if (!is_moe[l]) {
                if (L.saw_topk) {
                    err = "llama.cpp routes experts in layer " + std::to_string(l) + ", which the GGUF layout says is dense";
                    return false;
                }
                L.weights_node = L.down_node = -1;
                continue;
            }
            const char * missing = !L.saw_topk ? "ffn_moe_topk" : L.weights_node < 0 ? "ffn_moe_weights"
                                 : L.down_node < 0 ? "ffn_moe_down" : nullptr;
            if (missing) {
                err = "arch '" + fp.arch + "': llama.cpp's graph has no node " + missing + "-" + std::to_string(l) +
                      " in MoE layer " + std::to_string(l) +
                      ": reap calibrate cannot read this architecture's routing (it reads build_moe_ffn's nodes)";
                return false;
            }
        }
        const layer_state & L0 = col.layers[fp.moe_layers.front()];
        report.weights_node       = k_weight_chain[L0.weights_node];
        report.down_node          = k_down_chain[L0.down_node];
        report.weights_before_ffn = col.weights_before_ffn;
        out.provenance.set_string(k_key_nodes, "ffn_moe_topk, " + report.weights_node + ", " + report.down_node);
        out.provenance.set_bool(k_key_before_ffn, col.weights_before_ffn);
        col.md = collector::mode::collect;
    }

    // Resume from a checkpoint.
    size_t next_window = 0;
    if (opt.collect && opt.resume) {
        saliency::archive ck;
        if (stat(ckpt_path.c_str(), &st) != 0) {
            err = "--resume: no checkpoint '" + ckpt_path + "'";
            return false;
        }
        if (!saliency::read_archive(ckpt_path, ck, err)) return false;
        if (!saliency::fingerprints_match(ck.model, fp, err)) return false;
        std::string e2, ck_sha, ck_opts;
        uint64_t ck_next = 0, ck_n = 0;
        if (!ck.provenance.get_string(saliency::k_key_corpus_sha256, ck_sha, e2) ||
            !ck.provenance.get_string(saliency::k_key_options, ck_opts, e2) ||
            !ck.provenance.get_u64(k_key_next_window, ck_next, e2) || !ck.provenance.get_u64(k_key_n_windows, ck_n, e2)) {
            err = "checkpoint '" + ckpt_path + "' is not a reap calibrate checkpoint: " + e2;
            return false;
        }
        if (ck_sha != corpus_sha) {
            err = "checkpoint '" + ckpt_path + "' was made on another corpus (sha256 " + ck_sha + ", now " + corpus_sha + ")";
            return false;
        }
        if (ck_opts != options_json) {
            err = "checkpoint '" + ckpt_path + "' was made with other options: " + ck_opts + " (now " + options_json + ")";
            return false;
        }
        if (ck_n != windows.size() || ck_next > ck_n || ck.domains.size() != out.domains.size()) {
            err = "checkpoint '" + ckpt_path + "' does not match this run's windows/domains";
            return false;
        }
        for (size_t d = 0; d < ck.domains.size(); ++d) {
            if (ck.domains[d].name != out.domains[d].name) {
                err = "checkpoint '" + ckpt_path + "' has domain '" + ck.domains[d].name + "' where this run has '" +
                      out.domains[d].name + "'";
                return false;
            }
            out.domains[d] = ck.domains[d];
        }
        next_window = (size_t) ck_next;
        report.resumed = true;
    }

    // A write that fails (a full disk) leaves the previous checkpoint as it was: say so.
    auto note_kept = [&](std::string & e) {
        struct stat ck_st;
        if (stat(ckpt_path.c_str(), &ck_st) == 0) {
            e += " (the checkpoint " + ckpt_path + " written before is kept: make room and rerun with --resume)";
        }
    };
    auto write_checkpoint = [&](size_t next, std::string & e) {
        saliency::archive ck = out;
        ck.provenance.set_u64(k_key_next_window, (uint64_t) next);
        ck.provenance.set_u64(k_key_n_windows, (uint64_t) windows.size());
        if (!saliency::write_archive(ck, ckpt_path, e, /*force=*/true)) {
            note_kept(e);
            return false;
        }
        report.checkpoint_written = ckpt_path;
        return true;
    };

    // Decode.
    int64_t tokens_before = 0;
    for (size_t w = 0; w < next_window; ++w) tokens_before += windows[w].len;
    progress_line prog;
    prog.enabled = opt.progress;
    prog.start("calibrate", report.n_tokens, tokens_before);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<llama_token> buf;
    const int n_batch = (int) cparams.n_batch;
    size_t since_ckpt = 0;
    for (size_t w = next_window; w < windows.size(); ++w) {
        const window & win = windows[w];
        col.dom = opt.collect ? &out.domains[win.domain] : &scratch;
        clear_memory();
        const auto & toks = cp.samples[win.sample].tokens;
        buf.assign(toks.begin() + win.offset, toks.begin() + win.offset + win.len);
        if (win.bos_first) buf[0] = llama_vocab_bos(vocab);
        for (int b = 0; b < win.len; b += n_batch) {
            const int n = std::min(n_batch, win.len - b);
            if (!decode_tokens(buf.data() + b, n, b, err)) {
                err = "window " + std::to_string(w) + " (" + cp.domains[win.domain] + "): " + err;
                return false;
            }
            prog.add(n);
        }
        if (opt.collect) out.domains[win.domain].n_tokens += win.len;
        ++report.n_windows_done;
        ++since_ckpt;
        if (opt.pause_after_windows > 0 && opt.stop && report.n_windows_done == (size_t) opt.pause_after_windows) {
            fprintf(stderr, "reap calibrate: paused after %zu windows\n", report.n_windows_done);
            for (int i = 0; i < 6000 && !opt.stop->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        const bool stop = opt.stop && opt.stop->load();
        if (opt.collect && w + 1 < windows.size() &&
            (stop || (opt.checkpoint_every > 0 && since_ckpt >= (size_t) opt.checkpoint_every))) {
            if (!write_checkpoint(w + 1, err)) return false;
            since_ckpt = 0;
        }
        if (stop && w + 1 < windows.size()) {
            report.interrupted = true;
            break;
        }
    }
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report.tokens_per_second = report.seconds > 0 ? prog.done_here / report.seconds : 0;
    if (prog.enabled && prog.done < prog.total) fprintf(stderr, "\n");
    for (const auto & d : out.domains) report.domain_tokens.emplace_back(d.name, d.n_tokens);
    if (!opt.collect || report.interrupted) {
        return true;
    }

    // Self-check, then write.
    if (!saliency::check_count_invariant(out, err)) {
        err = "internal check failed (please report): " + err;
        return false;
    }
    if (!saliency::write_archive(out, opt.out_path, err, opt.force)) {
        note_kept(err);
        return false;
    }
    if (stat(ckpt_path.c_str(), &st) == 0) {
        unlink(ckpt_path.c_str());
    }
    report.checkpoint_written.clear();
    return true;
}

}  // namespace reap

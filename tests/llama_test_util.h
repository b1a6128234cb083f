// llama_test_util.h: small helpers for tests that run models in llama.cpp
// (test_llama_*.cpp): find or generate the arch zoo, load a model, decode a prompt
// with logits for every token, read the logits back, and record which experts
// each MoE layer routed every token to (through the scheduler's eval callback on
// the `ffn_moe_topk-<il>` nodes, as calibration does).
//
// Header-only so that any test can include it without a CMake change. Errors are
// reported as values (empty result + message) so the caller's ASSERT names them.
#pragma once

#include "gguf_test_util.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace reap_test {

// The reap binary: one definition for every test (gguf_test_util.h).
using gguf_test::reap_bin;

using gguf_test::env_or;   // one definition for every test (gguf_test_util.h)

inline bool file_exists(const std::string & path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

inline std::string source_dir() {
#ifdef REAP_SOURCE_DIR
    return env_or("REAP_SOURCE_DIR", REAP_SOURCE_DIR);
#else
    return env_or("REAP_SOURCE_DIR", ".");
#endif
}

// Directory of the running test binary ("" if unknown). Tests are built into
// the build's bin/, next to llama.cpp's tools, so this is the fallback for both.
inline std::string self_dir() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) {
        return "";
    }
    std::string p(buf, (size_t) n);
    const size_t slash = p.rfind('/');
    return slash == std::string::npos ? "" : p.substr(0, slash);
}

// Scratch directory for generated files: $REAP_TEST_TMP (set by ctest), else
// test-tmp beside the build's bin/.
inline std::string test_tmp_dir() {
    const std::string self = self_dir();
    std::string d = env_or("REAP_TEST_TMP", self.empty() ? "test-tmp" : self + "/../test-tmp");
    ::mkdir(d.c_str(), 0755);
    return d;
}

// Where llama-quantize / llama-imatrix live: $REAP_LLAMA_BIN_DIR, else beside this binary.
inline std::string llama_bin_dir() {
    return env_or("REAP_LLAMA_BIN_DIR", self_dir());
}

// The Python that has numpy (Debian's, by default); $REAP_PYTHON overrides.
inline std::string python() {
    std::string p = env_or("REAP_PYTHON", "");
    if (!p.empty()) {
        return p;
    }
    return file_exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

// Run a shell command, capturing its combined output. Returns the exit status.
inline int run_cmd(const std::string & cmd, std::string & output) {
    output.clear();
    FILE * p = ::popen((cmd + " 2>&1").c_str(), "r");
    if (!p) {
        output = "popen failed: " + cmd;
        return -1;
    }
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) {
        output.append(buf, n);
    }
    int st = ::pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The number after `key` in `text` (NAN when `key` is absent): llama.cpp tools' reports.
inline double find_number(const std::string & text, const std::string & key) {
    const size_t at = text.find(key);
    if (at == std::string::npos) return NAN;
    return std::strtod(text.c_str() + at + key.size(), nullptr);
}

// The first CPU this process may run on (for taskset), or -1.
inline int first_allowed_cpu() {
    std::ifstream st("/proc/self/status");
    std::string line;
    while (std::getline(st, line)) {
        if (line.rfind("Cpus_allowed_list:", 0) == 0) {
            return std::atoi(line.c_str() + line.find_first_of("0123456789"));
        }
    }
    return -1;
}

// Runs llama-perplexity with ARGS until its output contains NEEDLE. Its log is
// written by a worker thread that the pinned llama.cpp leaves running at exit
// (common_log_main() is leaked on purpose, llama.cpp issue 22142); on a tiny
// model the worker lags far behind, so a successful run usually loses the tail
// of its report, the summary included. Where strace works, it holds the exiting
// thread at exit_group for half a second, which lets the worker drain the queue;
// otherwise pinning to one CPU and writing to files instead of a pipe make the
// loss rarer; retries do the rest.
inline int run_llama_perplexity(const std::string & args, const std::string & needle, std::string & out) {
    const std::string base = env_or("REAP_TEST_TMP", "test-tmp") + "/llama-perplexity-" + std::to_string(getpid());
    std::string wrap, ignored;
    if (run_cmd("strace -f -qq -o /dev/null -e trace=exit_group true", ignored) == 0) {
        wrap = "strace -f -qq -o /dev/null -e trace=exit_group -e inject=exit_group:delay_enter=500000 ";
    } else if (first_allowed_cpu() >= 0 && run_cmd("command -v taskset", ignored) == 0) {
        wrap = "taskset -c " + std::to_string(first_allowed_cpu()) + " ";
    }
    auto slurp_file = [](const std::string & path) {
        std::ifstream in(path, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    int rc = -1;
    for (int attempt = 0; attempt < 12; ++attempt) {
        rc = run_cmd(wrap + llama_bin_dir() + "/llama-perplexity " + args + " >" + base + ".out 2>" + base + ".err", ignored);
        out = slurp_file(base + ".out") + slurp_file(base + ".err");
        if (rc != 0 || out.find(needle) != std::string::npos) break;
    }
    remove((base + ".out").c_str());
    remove((base + ".err").c_str());
    return rc;
}

// Calls fn(name, tensor) for every tensor of a GGUF file, its data loaded by
// ggml's own gguf reader (the independent reference the tests compare with);
// false when ggml cannot read the file.
inline bool for_each_ggml_tensor(const std::string & path,
                                 const std::function<void(const char *, const ggml_tensor *)> & fn) {
    ggml_context * data = nullptr;
    gguf_init_params ip = {/*no_alloc =*/ false, /*ctx =*/ &data};
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    if (!g) return false;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const char * name = gguf_get_tensor_name(g, i);
        fn(name, ggml_get_tensor(data, name));
    }
    gguf_free(g);
    ggml_free(data);
    return true;
}

// The reap.source.expert_ids.L arrays of a GGUF file (its first shard), read
// by ggml's own gguf reader: layer -> ids. Empty when the file has none or
// ggml cannot read it.
inline std::map<int, std::vector<int64_t>> ggml_kept_ids(const std::string & path) {
    std::map<int, std::vector<int64_t>> out;
    gguf_init_params ip = {/*no_alloc =*/ true, /*ctx =*/ nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    if (!g) return out;
    const std::string prefix = "reap.source.expert_ids.";
    for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
        const std::string key = gguf_get_key(g, i);
        if (key.rfind(prefix, 0) != 0 || gguf_get_kv_type(g, i) != GGUF_TYPE_ARRAY ||
            gguf_get_arr_type(g, i) != GGUF_TYPE_INT32) continue;
        const auto * v = (const int32_t *) gguf_get_arr_data(g, i);
        out[std::stoi(key.substr(prefix.size()))].assign(v, v + gguf_get_arr_n(g, i));
    }
    gguf_free(g);
    return out;
}

inline std::string shell_quote(const std::string & s) {
    std::string r = "'";
    for (char c : s) {
        if (c == '\'') {
            r += "'\\''";
        } else {
            r += c;
        }
    }
    return r + "'";
}

// Path of zoo model NAME (see tools/make_zoo.py). Uses $REAP_ZOO_DIR when it holds
// the file; otherwise generates it into $REAP_TEST_TMP/zoo (deterministic, ~0.1 s).
// Returns "" and sets err on failure.
inline std::string zoo_model(const std::string & name, std::string & err) {
    const std::string pre = env_or("REAP_ZOO_DIR", "");
    if (!pre.empty() && file_exists(pre + "/" + name + ".gguf")) {
        return pre + "/" + name + ".gguf";
    }
    const std::string dir = test_tmp_dir() + "/zoo";
    const std::string path = dir + "/" + name + ".gguf";
    // made beside it and renamed into place only when its bytes are new: a
    // test reading the file (eval holds its files' signatures to the end of a
    // run) must not see another test replace it with the same bytes
    const std::string tmp = dir + ".tmp." + std::to_string(::getpid());
    const std::string cmd = shell_quote(python()) + " " + shell_quote(source_dir() + "/tools/make_zoo.py") +
                            " --out " + shell_quote(tmp) + " --arch " + shell_quote(name);
    std::string out;
    if (run_cmd(cmd, out) != 0) {
        err = "make_zoo.py failed: " + cmd + "\n" + out;
        run_cmd("rm -rf " + shell_quote(tmp), out);
        return "";
    }
    run_cmd("mkdir -p " + shell_quote(dir), out);
    for (const char * ext : { ".gguf", ".json" }) {  // the model and its facts file
        const std::string made = tmp + "/" + name + ext;
        const std::string dest = dir + "/" + name + ext;
        if (file_exists(made) && run_cmd("cmp -s " + shell_quote(made) + " " + shell_quote(dest), out) != 0) {
            ::rename(made.c_str(), dest.c_str());
        }
    }
    run_cmd("rm -rf " + shell_quote(tmp), out);
    if (!file_exists(path)) {
        err = "make_zoo.py did not write " + path;
        return "";
    }
    return path;
}

// ---- quantised zoo variants (llama.cpp's own tools) ------------------------------

// A short calibration text for llama-imatrix: a few hundred byte-level tokens.
inline std::string calibration_text() {
    std::string t;
    for (int i = 0; i < 6; ++i) {
        t += "The quick brown fox jumps over the lazy dog " + std::to_string(i) + " times. "
             "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; } "
             "Mixture-of-experts models route each token to a few experts; "
             "pruning removes the experts a workload rarely uses. 3.14159 + 2.71828 = 5.85987\n";
    }
    return t;
}

// Writes `out` via a per-process temp name and a rename, so tests running the
// same step in parallel never see a half-written file.
inline bool run_to_file(const std::string & cmd_with_out_placeholder, const std::string & out, std::string & err) {
    const std::string tmp = out + "." + std::to_string(::getpid()) + ".tmp";
    std::string cmd = cmd_with_out_placeholder;
    const size_t at = cmd.find("@OUT@");
    if (at != std::string::npos) {
        cmd.replace(at, 5, shell_quote(tmp));
    }
    std::string log;
    if (run_cmd(cmd, log) != 0 || !file_exists(tmp)) {
        err = "failed: " + cmd + "\n" + log;
        ::unlink(tmp.c_str());
        return false;
    }
    if (::rename(tmp.c_str(), out.c_str()) != 0) {
        err = "cannot rename " + tmp + " to " + out;
        return false;
    }
    return true;
}

// An imatrix (GGUF format) of zoo model `name` made by llama-imatrix over
// calibration_text(). Returns "" and sets err on failure.
inline std::string zoo_imatrix(const std::string & name, std::string & err) {
    const std::string model = zoo_model(name, err);
    if (model.empty()) {
        return "";
    }
    const std::string dir = test_tmp_dir() + "/zoo-quant";
    ::mkdir(dir.c_str(), 0755);
    const std::string text = dir + "/calib." + std::to_string(::getpid()) + ".txt";
    {
        FILE * f = std::fopen(text.c_str(), "w");
        if (!f) {
            err = "cannot write " + text;
            return "";
        }
        const std::string t = calibration_text();
        std::fwrite(t.data(), 1, t.size(), f);
        std::fclose(f);
    }
    const std::string out = dir + "/" + name + ".imatrix.gguf";
    const std::string cmd = shell_quote(llama_bin_dir() + "/llama-imatrix") + " -m " + shell_quote(model) +
                            " -f " + shell_quote(text) + " -o @OUT@ -c 64 -b 64 -ub 64 -t 2 --no-ppl";
    const bool ok = run_to_file(cmd, out, err);
    ::unlink(text.c_str());
    return ok ? out : "";
}

// Zoo model `name` quantised by llama-quantize to `type` (a llama-quantize type
// name: Q8_0, Q4_K_M, IQ2_XXS, IQ1_S, ...). IQ* types get an imatrix first, as
// llama-quantize requires. Returns "" and sets err on failure (also when the tools
// are not built: check has_llama_tools() to skip instead).
inline bool has_llama_tools() {
    return file_exists(llama_bin_dir() + "/llama-quantize") && file_exists(llama_bin_dir() + "/llama-imatrix");
}

inline std::string zoo_quantized(const std::string & name, const std::string & type, std::string & err) {
    const std::string model = zoo_model(name, err);
    if (model.empty()) {
        return "";
    }
    std::string cmd = shell_quote(llama_bin_dir() + "/llama-quantize");
    if (type.rfind("IQ", 0) == 0) {
        const std::string imatrix = zoo_imatrix(name, err);
        if (imatrix.empty()) {
            return "";
        }
        cmd += " --imatrix " + shell_quote(imatrix);
    }
    const std::string dir = test_tmp_dir() + "/zoo-quant";
    ::mkdir(dir.c_str(), 0755);
    const std::string out = dir + "/" + name + "-" + type + ".gguf";
    cmd += " " + shell_quote(model) + " @OUT@ " + type + " 2";
    return run_to_file(cmd, out, err) ? out : "";
}

// Every model the zoo generator knows, in its order.
inline std::vector<std::string> zoo_names() {
    return {"qwen3moe", "qwen2moe", "deepseek2", "gpt-oss", "glm4moe", "llama4", "kimi-k3", "qwen3moe-q256"};
}

// ---- llama.cpp -----------------------------------------------------------------

// llama.cpp logs a lot; tests stay quiet unless REAP_TEST_VERBOSE is set.
inline void quiet_logs() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (!std::getenv("REAP_TEST_VERBOSE")) {
            llama_log_set([](ggml_log_level level, const char * text, void *) {
                if (level == GGML_LOG_LEVEL_ERROR) {
                    std::fputs(text, stderr);
                }
            }, nullptr);
        }
        llama_backend_init();
    });
}

struct model_deleter   { void operator()(llama_model * m) const { llama_model_free(m); } };
struct context_deleter { void operator()(llama_context * c) const { llama_free(c); } };
using model_ptr   = std::unique_ptr<llama_model, model_deleter>;
using context_ptr = std::unique_ptr<llama_context, context_deleter>;

inline model_ptr load_model(const std::string & path) {
    quiet_logs();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mtp = true;   // MTP blocks too, where a model has them (test_llama_mtp)
    return model_ptr(llama_model_load_from_file(path.c_str(), mp));
}

// A context whose one batch holds n_ctx tokens, so a prompt decodes in one call.
// cb/user (optional) become the scheduler's eval callback. `exact` keeps
// attention in F32 (F32 KV cache, flash attention off): llama.cpp's defaults
// round attention inputs to F16, about 1e-3 on logits by themselves.
inline context_ptr new_context(llama_model * model, uint32_t n_ctx = 128,
                               ggml_backend_sched_eval_callback cb = nullptr, void * user = nullptr,
                               bool exact = false, int n_threads = 2) {
    llama_context_params cp = llama_context_default_params();
    if (exact) {
        cp.type_k          = GGML_TYPE_F32;
        cp.type_v          = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    cp.n_ctx           = n_ctx;
    cp.n_batch         = n_ctx;
    cp.n_ubatch        = n_ctx;
    cp.n_seq_max       = 1;
    cp.n_threads       = n_threads;
    cp.n_threads_batch = n_threads;
    cp.no_perf         = true;
    cp.cb_eval           = cb;
    cp.cb_eval_user_data = user;
    return context_ptr(llama_init_from_model(model, cp));
}

inline std::vector<llama_token> tokenize(const llama_model * model, const std::string & text, bool add_special = true) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    int n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_special, false);
    std::vector<llama_token> toks(n > 0 ? n : 0);
    if (n > 0) {
        llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), n, add_special, false);
    }
    return toks;
}

// Decode `tokens` as one sequence from position 0, asking for logits at every
// position (so the last layer runs on every token too). Returns llama_decode's status.
inline int decode_all(llama_context * ctx, const std::vector<llama_token> & tokens) {
    llama_batch batch = llama_batch_init((int32_t) tokens.size(), 0, 1);
    for (size_t i = 0; i < tokens.size(); ++i) {
        batch.token[i]     = tokens[i];
        batch.pos[i]       = (llama_pos) i;
        batch.n_seq_id[i]  = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i]    = 1;
    }
    batch.n_tokens = (int32_t) tokens.size();
    const int rc = llama_decode(ctx, batch);
    llama_batch_free(batch);
    return rc;
}

// Logits of the last decode, n_tokens rows of n_vocab, row-major.
inline std::vector<float> get_logits(llama_context * ctx, const llama_model * model, int n_tokens) {
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<float> out((size_t) n_tokens * n_vocab);
    for (int i = 0; i < n_tokens; ++i) {
        const float * row = llama_get_logits_ith(ctx, i);
        if (!row) {
            return {};
        }
        std::memcpy(out.data() + (size_t) i * n_vocab, row, sizeof(float) * n_vocab);
    }
    return out;
}

inline bool all_finite(const std::vector<float> & v) {
    for (float x : v) {
        if (!std::isfinite(x)) {
            return false;
        }
    }
    return true;
}

// Records, per layer, the expert ids each token was routed to, from the
// `ffn_moe_topk-<il>` nodes. Pass topk_collector::callback with the collector as
// user data to new_context(). Only those nodes are requested (the "ask" phase), so
// the graph runs as usual otherwise.
struct topk_collector {
    // layer -> rows of n_expert_used ids, one row per token, in batch order (all ubatches appended)
    std::map<int, std::vector<std::vector<int32_t>>> routed;

    void clear() { routed.clear(); }

    static bool callback(ggml_tensor * t, bool ask, void * user) {
        static const char prefix[] = "ffn_moe_topk-";
        if (std::strncmp(t->name, prefix, sizeof(prefix) - 1) != 0) {
            return false;
        }
        if (ask) {
            return true;
        }
        auto * self = static_cast<topk_collector *>(user);
        const int il = std::atoi(t->name + sizeof(prefix) - 1);
        const int64_t n_used = t->ne[0];
        const int64_t n_tok  = t->ne[1];
        // a strided view into the full argsort: read row by row (nb[1] = n_expert * 4)
        auto & rows = self->routed[il];
        std::vector<int32_t> row(n_used);
        for (int64_t j = 0; j < n_tok; ++j) {
            ggml_backend_tensor_get(t, row.data(), j * t->nb[1], n_used * sizeof(int32_t));
            rows.push_back(row);
        }
        return true;
    }
};

// ---- one prompt through a model, compared with another run -------------------------

// What one decode of a prompt gave: logits of every token, and per MoE layer
// the experts each token was routed to.
struct prompt_run {
    std::vector<float> logits;
    std::map<int, std::vector<std::vector<int32_t>>> routed;
    int n_tokens = 0;
};

// Loads `path` and decodes `prompt` (tokenized by the model) with logits for
// every token, recording the routing. False + err when any step fails.
inline bool run_prompt(const std::string & path, const std::string & prompt, prompt_run & out, std::string & err,
                       int n_threads = 2, bool exact = false) {
    model_ptr model = load_model(path);
    if (!model) {
        err = "llama.cpp could not load " + path;
        return false;
    }
    topk_collector topk;
    context_ptr ctx = new_context(model.get(), 128, topk_collector::callback, &topk, exact, n_threads);
    if (!ctx) {
        err = "no context for " + path;
        return false;
    }
    const std::vector<llama_token> toks = tokenize(model.get(), prompt);
    if (toks.empty() || toks.size() > 128 || decode_all(ctx.get(), toks) != 0) {
        err = "llama_decode failed on " + path + " (" + std::to_string(toks.size()) + " tokens)";
        return false;
    }
    out.n_tokens = (int) toks.size();
    out.logits = get_logits(ctx.get(), model.get(), out.n_tokens);
    out.routed = topk.routed;
    return !out.logits.empty();
}

// Whether b is a run of a with experts renumbered: in layer L, source expert e
// is b's expert new_id.at(L)[e]. Routing must be renumbered exactly and logits
// equal up to rounding (most archs are bit-exact; a softmax over all experts
// sums in another order and F16 activations can round the other way). `why`
// says what was measured either way.
inline bool same_model(const prompt_run & a, const prompt_run & b, const std::map<int, std::vector<int32_t>> & new_id,
                       std::string & why) {
    if (a.logits.size() != b.logits.size() || a.routed.size() != b.routed.size()) {
        why = "different shapes of results";
        return false;
    }
    double max_diff = 0, max_abs = 0, ss_diff = 0, ss = 0;
    for (size_t i = 0; i < a.logits.size(); ++i) {
        const double d = (double) a.logits[i] - b.logits[i];
        max_diff = std::max(max_diff, std::fabs(d));
        max_abs = std::max(max_abs, (double) std::fabs(a.logits[i]));
        ss_diff += d * d;
        ss += (double) a.logits[i] * a.logits[i];
    }
    const double rel_rms = ss > 0 ? std::sqrt(ss_diff / ss) : 0;
    int mismatches = 0;
    for (const auto & [il, rows] : a.routed) {
        auto it = b.routed.find(il);
        auto map = new_id.find(il);
        if (it == b.routed.end() || it->second.size() != rows.size() || map == new_id.end()) {
            why = "layer " + std::to_string(il) + " routed differently";
            return false;
        }
        for (size_t t = 0; t < rows.size(); ++t) {
            for (size_t k = 0; k < rows[t].size() && k < it->second[t].size(); ++k) {
                const int32_t e = rows[t][k];
                mismatches += e < 0 || e >= (int32_t) map->second.size() || map->second[e] != it->second[t][k];
            }
        }
    }
    why = "max |dlogit| " + std::to_string(max_diff) + " (max |logit| " + std::to_string(max_abs) +
          "), relative rms " + std::to_string(rel_rms) + ", " + std::to_string(mismatches) + " routing mismatches";
    return mismatches == 0 && rel_rms <= 1e-3 && max_diff <= 1e-2 * std::max(1.0, max_abs);
}

// new_id[old] = position of old in keep, -1 when not kept.
inline std::vector<int32_t> inverse_keep(const std::vector<int64_t> & keep, int64_t n_expert) {
    std::vector<int32_t> new_id(n_expert, -1);
    for (size_t i = 0; i < keep.size(); ++i) {
        new_id[keep[i]] = (int32_t) i;
    }
    return new_id;
}

// ---- killing a run where it holds --------------------------------------------------

// Runs `cmd` (a shell command line, its output to `log`) in a child process,
// waits (up to 10 minutes) until the log shows `marker` (a run holding there,
// e.g. $REAP_CALIBRATE_PAUSE_AFTER's "paused after N windows"), then SIGKILLs
// it. False + err when the marker never came or the child was not killed.
inline bool kill_where_it_holds(const std::string & cmd, const std::string & log, const std::string & marker, std::string & err) {
    const pid_t pid = fork();
    if (pid < 0) {
        err = "fork failed";
        return false;
    }
    if (pid == 0) {
        const std::string line = cmd + " > '" + log + "' 2>&1";
        execl("/bin/sh", "sh", "-c", line.c_str(), (char *) nullptr);
        _exit(127);
    }
    const auto log_text = [&] {
        std::ifstream f(log, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    };
    bool held = false;
    for (int i = 0; i < 60000 && !held; ++i) {
        held = log_text().find(marker) != std::string::npos;
        if (!held) usleep(10 * 1000);
    }
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!held) {
        err = "the run never showed '" + marker + "': " + log_text();
        return false;
    }
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
        err = "the run ended before it was killed: " + log_text();
        return false;
    }
    return true;
}

// ---- the project's corpus ---------------------------------------------------------

// The first samples of each wanted domain (all when empty) of a split of the
// project's corpus (data/corpus/<split>.jsonl, from `make corpus`), about
// `bytes` of text each, written to `out`. False + err when the corpus is missing.
inline bool corpus_subset(const std::string & split, const std::string & out, const std::vector<std::string> & domains,
                          size_t bytes, std::string & err) {
    const std::string src = source_dir() + "/data/corpus/" + split + ".jsonl";
    FILE * in = std::fopen(src.c_str(), "r");
    if (!in) {
        err = "no " + src + ": run `make corpus`";
        return false;
    }
    std::map<std::string, size_t> used;
    std::string kept;
    char * line = nullptr;
    size_t cap = 0;
    ssize_t n;
    while ((n = ::getline(&line, &cap, in)) > 0) {
        // {"domain": "xx", "text": "..."}: the domain is the first string value
        const std::string l(line, (size_t) n);
        const size_t k = l.find("\"domain\"");
        const size_t q1 = k == std::string::npos ? k : l.find('"', l.find(':', k) + 1);
        const size_t q2 = q1 == std::string::npos ? q1 : l.find('"', q1 + 1);
        if (q2 == std::string::npos) continue;
        const std::string d = l.substr(q1 + 1, q2 - q1 - 1);
        if ((!domains.empty() && std::find(domains.begin(), domains.end(), d) == domains.end()) || used[d] >= bytes) continue;
        used[d] += l.size();
        kept += l;
    }
    std::free(line);
    std::fclose(in);
    FILE * o = std::fopen(out.c_str(), "w");
    if (!o || std::fwrite(kept.data(), 1, kept.size(), o) != kept.size()) {
        if (o) std::fclose(o);
        err = "cannot write " + out;
        return false;
    }
    std::fclose(o);
    return true;
}

// Plain text (a KLD base file needs it): the "text" of the first samples of
// the held-out split's `domains` (en and code when empty), up to `bytes` each.
inline bool heldout_text(const std::string & out, size_t bytes, std::string & err,
                         const std::vector<std::string> & domains = {"en", "code"}) {
    const std::string jsonl = out + ".jsonl";
    if (!corpus_subset("heldout", jsonl, domains, bytes, err)) return false;
    std::ifstream in(jsonl);
    std::ofstream o(out);
    std::string line;
    while (std::getline(in, line)) o << nlohmann::json::parse(line).at("text").get<std::string>() << "\n";
    return true;
}

}  // namespace reap_test

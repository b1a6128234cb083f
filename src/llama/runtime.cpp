// reap's llama.cpp runtime glue: backend initialisation, the log filter and
// the progress line. See runtime.h.
#include "llama/runtime.h"

#include "ggml-backend.h"
#include "log.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

namespace reap {

namespace {

std::atomic<bool> g_verbose{false};
std::atomic<bool> g_hold{false};
std::mutex        g_held_mutex;
std::string       g_held;

// llama.cpp is chatty on stderr; keep only its errors unless verbose.
void log_filter(ggml_log_level level, const char * text, void *) {
    if (g_hold && level == GGML_LOG_LEVEL_ERROR) {
        std::lock_guard<std::mutex> lock(g_held_mutex);
        g_held += text;
        return;
    }
    if (g_verbose || level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

}  // namespace

void runtime_init(bool verbose) {
    static std::once_flag once;
    g_verbose = verbose;
    std::call_once(once, [] {
        llama_log_set(log_filter, nullptr);
        llama_backend_init();
        ggml_backend_load_all();
    });
    common_log_set_verbosity_thold(verbose ? LOG_DEFAULT_LLAMA : LOG_LEVEL_ERROR);
}

bool runtime_verbose() { return g_verbose; }

bool settle_window(pass_runtime & rt, int64_t n_ctx_train, const std::string & model, std::string & err) {
    const int w = rt.window(n_ctx_train);
    if (n_ctx_train > 0 && w > n_ctx_train && !rt.past_trained) {
        err = "-c " + std::to_string(w) + " is past the trained context of '" + model + "' (" + std::to_string(n_ctx_train) +
              " tokens): its windows would run positions the model never saw; give -c " + std::to_string(n_ctx_train) +
              " or less, or --ctx-past-trained to run them anyway";
        return false;
    }
    rt.n_ctx = w;
    return true;
}

int pass_runtime::threads() const { return n_threads > 0 ? n_threads : std::max(1, (int) common_cpu_get_num_math()); }

int pass_runtime::threads_batch() const { return n_threads_batch > 0 ? n_threads_batch : threads(); }

llama_context_params pass_context_params(const pass_runtime & rt, uint32_t n_ctx, uint32_t n_batch, uint32_t n_ubatch,
                                         uint32_t n_seq, bool unified) {
    llama_context_params cp = common_context_params_to_llama(rt.llama);
    cp.n_ctx           = n_ctx;
    cp.n_batch         = n_batch;
    cp.n_ubatch        = n_ubatch;
    cp.n_seq_max       = n_seq;
    cp.kv_unified      = unified;
    cp.n_threads       = rt.threads();
    cp.n_threads_batch = rt.threads_batch();
    cp.no_perf         = true;
    cp.embeddings      = false;
    return cp;
}

held_llama_errors::held_llama_errors() {
    std::lock_guard<std::mutex> lock(g_held_mutex);
    g_held.clear();
    g_hold = true;
}

held_llama_errors::~held_llama_errors() {
    g_hold = false;
    std::lock_guard<std::mutex> lock(g_held_mutex);
    g_held.clear();
}

std::string held_llama_errors::take() {
    std::lock_guard<std::mutex> lock(g_held_mutex);
    std::string s;
    s.swap(g_held);
    return s;
}

void progress_line::start(const std::string & what, int64_t n_total, int64_t already) {
    label     = what;
    total     = n_total;
    done      = already;
    done_here = 0;
    t0 = last = std::chrono::steady_clock::now();
}

void progress_line::set_steps(const std::string & what, int64_t n_total, int64_t already) {
    step_label  = what;
    steps_total = n_total;
    steps_done  = already;
}

void progress_line::add(int64_t n, int64_t steps) {
    done += n;
    done_here += n;
    steps_done += steps;
    if (!enabled) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last < std::chrono::milliseconds(500)) return;
    last = now;
    const double  s   = std::chrono::duration<double>(now - t0).count();
    const double  tps = s > 0 ? done_here / s : 0;
    const int64_t eta = tps > 0 && done < total ? (int64_t) ((total - done) / tps) : 0;
    const std::string step_text = step_label.empty() ? std::string()
        : ", " + step_label + " " + std::to_string(steps_done) + "/" + std::to_string(steps_total);
    fprintf(stderr, "\r%s: %lld/%lld tokens (%.1f%%)%s, %.0f tok/s, ETA %lld:%02lld   ", label.c_str(), (long long) done,
            (long long) total, total ? 100.0 * done / total : 100.0, step_text.c_str(), tps, (long long) (eta / 60),
            (long long) (eta % 60));
    if (done >= total) fprintf(stderr, "\n");
    fflush(stderr);
}

}  // namespace reap

// reap's llama.cpp runtime glue: backend initialisation and the log filter.
// See runtime.h.
#include "llama/runtime.h"

#include "ggml-backend.h"
#include "log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace reap {

namespace {

std::atomic<bool> g_verbose{false};

// llama.cpp is chatty on stderr; keep only its errors unless verbose.
void log_filter(ggml_log_level level, const char * text, void *) {
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

}  // namespace reap

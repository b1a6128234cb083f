// reap's llama.cpp runtime glue, shared by everything in src/llama/ that runs
// a model (calibrate, eval): one-time backend initialisation with a log filter
// that lets llama.cpp's log through only when asked (its errors always), and
// owning handles for models and contexts (llama.cpp's own, from llama-cpp.h),
// and the progress line they draw on stderr.
#pragma once

#include "common.h"
#include "llama-cpp.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace reap {

// reap's defaults for the llama.cpp passes, defined once (the commands'
// --help prints them from here): the window in tokens (-c), the tokens per
// decode (-b; -ub defaults to -b), and what the vocabulary-sized rows of one
// decode may take (--batch-memory).
constexpr int      k_default_window       = 512;
constexpr int      k_default_batch        = 4096;
constexpr uint64_t k_default_batch_memory = 1ull << 30;

// The llama.cpp settings of a pass (calibrate, eval, sweep, fit): the ones reap
// decides itself, each 0 where the pass chooses (calibrate.h, eval.h), and
// everything else as llama.cpp's common parser left it (-ngl, -ot, -fa, -ctk,
// -ctv, --no-mmap, --rpc, ...: model and context parameters come from
// common_params; its n_ctx, n_batch and n_ubatch are not read, the fields here are).
struct pass_runtime {
    int      n_ctx        = 0;    // -c: the window; 0 = k_default_window (eval: or the --kld-base file's)
    int      n_batch      = 0;    // -b: tokens per llama_decode; 0 = automatic
    int      n_ubatch     = 0;    // -ub; 0 = automatic (eval: -b)
    uint64_t memory       = 0;    // --memory: what a pass's contexts may take; 0 = automatic (pass_size.h)
    uint64_t batch_memory = 0;    // --batch-memory: a cap on a decode's vocabulary-sized rows; 0 = the pass's
                                  // default (calibrate: k_default_batch_memory; eval: none)
    bool     past_trained = false;  // --ctx-past-trained: let -c exceed the model's trained context
    int      n_threads    = -1;   // -t: threads of a one-token decode; -1 = the machine's math cores
    int      n_threads_batch = -1;  // -tb: threads of a decode of more tokens, and of reap's own
                                    // work on a pass's rows; -1 = -t
    common_params llama;

    // The settled values: every default of the window and the threads is
    // applied here and nowhere else. window(): -c, else k_default_window at
    // most the trained context (n_ctx_train; 0: not known).
    int window(int64_t n_ctx_train = 0) const {
        return n_ctx > 0 ? n_ctx : n_ctx_train > 0 && n_ctx_train < k_default_window ? (int) n_ctx_train : k_default_window;
    }
    int threads() const;
    int threads_batch() const;
};

// Settles rt.n_ctx to rt.window(n_ctx_train) for a pass on `model`, before
// its first decode. A window past the trained context is refused, naming the
// model, unless rt.past_trained: llama.cpp would run positions the model never
// saw (and a default of 512 on a model trained at 256 did so without a word).
bool settle_window(pass_runtime & rt, int64_t n_ctx_train, const std::string & model, std::string & err);

// The one maker of a pass's llama_context_params (calibrate, eval, sweep, fit,
// the needle, generation, the judge, the probe and pass sizing): llama.cpp's
// common settings (-fa, -ctk, -ctv, ...) with the pass's own sizes and the
// runtime's threads. n_ctx is the context's cells in all (a window times its
// sequences, or one unified cache).
llama_context_params pass_context_params(const pass_runtime & rt, uint32_t n_ctx, uint32_t n_batch, uint32_t n_ubatch,
                                         uint32_t n_seq, bool unified);

using model_ptr = llama_model_ptr;    // frees with llama_model_free
using ctx_ptr   = llama_context_ptr;  // frees with llama_free

// Initialises llama.cpp's backends once per process (later calls only change
// the verbosity): installs the log filter, runs llama_backend_init() and loads
// every available ggml backend. verbose = let llama.cpp's whole log through to
// stderr; otherwise only its errors.
void runtime_init(bool verbose);

// The verbosity set by the latest runtime_init() (messages add "run with
// --verbose for llama.cpp's log" when it is off).
bool runtime_verbose();

// While one lives, llama.cpp's errors are kept rather than printed (a decode
// stopped on purpose by an abort callback logs three of them); take() returns
// them, for a failure that was not the expected one. Not nested; one at a time.
class held_llama_errors {
  public:
    held_llama_errors();
    ~held_llama_errors();
    held_llama_errors(const held_llama_errors &) = delete;
    held_llama_errors & operator=(const held_llama_errors &) = delete;
    std::string take();
};

// A progress line on stderr, "LABEL: done/total tokens (p%), N tok/s, ETA m:ss"
// (with ", ubatch d/t" when steps are counted too),
// redrawn at most twice a second and ended with a newline once done reaches
// total. Draws nothing unless enabled; the counts are kept either way.
struct progress_line {
    bool        enabled = false;
    std::string label;
    int64_t     total = 0, done = 0;
    int64_t     done_here = 0;  // tokens since start() (the rate counts these only)

    // already: tokens done before this run (a resumed calibration).
    void start(const std::string & what, int64_t n_total, int64_t already = 0);
    // Counts steps (e.g. "ubatch") beside the tokens: n_total in all, already done before.
    void set_steps(const std::string & what, int64_t n_total, int64_t already = 0);
    void add(int64_t n, int64_t steps = 0);

    std::string step_label;
    int64_t     steps_total = 0, steps_done = 0;

  private:
    std::chrono::steady_clock::time_point t0, last;
};

}  // namespace reap

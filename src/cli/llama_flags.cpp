// llama.cpp runtime flags for eval and sweep (see llama_flags.h).
#include "cli/llama_flags.h"

#include "arg.h"

#include <cstring>

namespace reap::cli {

const char * const k_llama_runtime_help =
    "llama.cpp runtime (any flag of llama.cpp's common parser is accepted; the usual ones):\n"
    "  -c, --ctx-size N            window size (default 512, or the --kld-base file's)\n"
    "  -b, --batch-size N          logical batch size (default 2048); b/c windows are decoded side\n"
    "                              by side as separate sequences, as llama-perplexity does\n"
    "  -ub, --ubatch-size N        physical batch size (default 512)\n"
    "  -t, --threads N             threads (default: physical cores)\n"
    "  -ngl, --n-gpu-layers N      layers to offload to the GPU\n"
    "  -ot, --override-tensor PATTERN=BUFTYPE,...   e.g. -ot exps=CPU to keep experts in RAM\n"
    "  -fa, --flash-attn on|off|auto\n"
    "  -ctk, --cache-type-k TYPE   K cache type (default f16)\n"
    "  -ctv, --cache-type-v TYPE   V cache type\n"
    "  --no-mmap                   read the model into memory instead of mapping it\n"
    "  --rpc HOST:PORT,...         llama.cpp RPC servers (models that span machines)\n";

int llama_flag_values(const std::string & flag) {
    static common_params            params;
    static const common_params_context ctx = common_params_parser_init(params, LLAMA_EXAMPLE_COMMON);
    for (const common_arg & opt : ctx.options) {
        for (const auto * names : {&opt.args, &opt.args_neg}) {
            for (const char * name : *names) {
                if (flag == name) {
                    if (names == &opt.args_neg) return 0;
                    return opt.value_hint_2 ? 2 : opt.value_hint ? 1 : 0;
                }
            }
        }
    }
    return -1;
}

bool take_llama_flag(int argc, char ** argv, int & i, std::vector<char *> & rest, std::string & err) {
    const std::string flag = argv[i];
    const int n = llama_flag_values(flag);
    if (n < 0) {
        err = "unknown argument '" + flag + "'";
        return false;
    }
    if (i + n >= argc) {
        err = flag + " needs " + (n == 1 ? "a value" : "two values");
        return false;
    }
    for (int k = 0; k <= n; ++k) rest.push_back(argv[i + k]);
    i += n;
    return true;
}

bool parse_llama_runtime(std::vector<char *> rest, const std::string & model, eval_runtime & rt, std::string & err) {
    std::string m_flag = "-m", m_value = model.empty() ? "(none)" : model;
    rest.insert(rest.begin() + 1, {&m_flag[0], &m_value[0]});
    bool has_ctx = false;
    for (size_t i = 1; i < rest.size(); ++i) {
        if (!strcmp(rest[i], "-c") || !strcmp(rest[i], "--ctx-size")) has_ctx = true;
    }
    rest.push_back(nullptr);
    if (!common_params_parse((int) rest.size() - 1, rest.data(), rt.llama, LLAMA_EXAMPLE_COMMON)) {
        err = "llama.cpp did not accept the flags above";
        return false;
    }
    rt.n_ctx    = has_ctx ? rt.llama.n_ctx : 0;
    rt.n_batch  = rt.llama.n_batch;
    rt.n_ubatch = rt.llama.n_ubatch;
    rt.n_threads = rt.llama.cpuparams.n_threads;
    if (has_ctx && rt.n_ctx < 3) {
        err = "-c must be at least 3";
        return false;
    }
    return true;
}

} // namespace reap::cli

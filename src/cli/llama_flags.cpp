// llama.cpp's runtime flags for calibrate, eval and sweep (see llama_flags.h).
#include "cli/llama_flags.h"

#include "llama/pass_size.h"

#include "plan/planners.h"

#include "arg.h"
#include "llama.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>

namespace reap::cli {

int llama_flag_values(const std::string & flag) {
    static common_params               params;
    static const common_params_context ctx = common_params_parser_init(params, LLAMA_EXAMPLE_COMMON);
    for (const common_arg & opt : ctx.options) {
        for (const char * name : opt.args) {
            if (flag == name) return opt.value_hint_2 ? 2 : opt.value_hint ? 1 : 0;
        }
        for (const char * name : opt.args_neg) {
            if (flag == name) return 0;
        }
    }
    return -1;
}

void declare_llama_runtime(options & t, const std::string & ctx_help, bool & has_ctx, bool * has_batch,
                           bool * has_ubatch, const std::string & batch_help, const std::string & ubatch_help) {
    t.section("llama.cpp flags (handed to llama.cpp's own argument parser; the usual ones):");
    t.forward("-c, --ctx-size", "N", ctx_help, [&has_ctx](const std::string &, std::string &) {
        has_ctx = true;
        return true;
    });
    t.forward("-b, --batch-size", "N", batch_help,
              [has_batch](const std::string &, std::string &) {
                  if (has_batch) *has_batch = true;
                  return true;
              });
    t.forward("-ub, --ubatch-size", "N", ubatch_help,
              [has_ubatch](const std::string &, std::string &) {
                  if (has_ubatch) *has_ubatch = true;
                  return true;
              });
    t.forward("-t, --threads", "N", "CPU threads (default: physical cores)");
    t.forward("-ngl, --n-gpu-layers", "N", "layers to offload to the GPU");
    t.forward("-ot, --override-tensor", "PATTERN=BUFTYPE,...", "e.g. -ot exps=CPU to keep experts in RAM");
    t.forward_optional("-fa, --flash-attn", "on|off|auto",
                       {"on", "off", "auto", "1", "0", "-1", "true", "false", "enabled", "disabled"}, "on",
                       "flash attention (a bare -fa: on)");
    t.forward("-ctk, --cache-type-k", "TYPE", "K cache type (default f16; f32 for exact comparisons)");
    t.forward("-ctv, --cache-type-v", "TYPE", "V cache type");
    t.forward("--no-mmap", "", "read the model into memory instead of mapping it");
    // llama.cpp's parser knows --rpc only when it is built with RPC (GGML_RPC).
    if (llama_supports_rpc()) t.forward("--rpc", "HOST:PORT,...", "llama.cpp RPC servers (models that span machines)");
    t.forward_unknown("Any other flag is handed to llama.cpp's parser as well (llama-cli --help lists them);\n"
                      "one it does not know is an error.\n",
                      llama_flag_values);
}

namespace {

// Whether HOST:PORT accepts a TCP connection within timeout_ms.
bool tcp_reachable(const std::string & endpoint, int timeout_ms, std::string & why) {
    const size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size()) {
        why = "not HOST:PORT";
        return false;
    }
    const std::string host = endpoint.substr(0, colon), port = endpoint.substr(colon + 1);
    addrinfo hints{}, * res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
        why = gai_strerror(rc);
        return false;
    }
    bool ok = false;
    why = "no address";
    for (addrinfo * a = res; a && !ok; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) continue;
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd pfd{fd, POLLOUT, 0};
            int soerr = ETIMEDOUT;
            socklen_t len = sizeof(soerr);
            if (poll(&pfd, 1, timeout_ms) == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
            rc = soerr == 0 ? 0 : -1;
            errno = soerr;
        }
        ok = rc == 0;
        if (!ok) why = strerror(errno);
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

// Every server named by a --rpc in `args` accepts a TCP connection within a
// few seconds; otherwise false with err naming the first that does not.
bool rpc_servers_reachable(const std::vector<char *> & args, std::string & err) {
    for (size_t i = 0; i + 1 < args.size(); ++i) {
        if (strcmp(args[i], "--rpc") != 0) continue;
        const std::string list = args[i + 1];
        size_t start = 0;
        while (start <= list.size()) {
            const size_t comma = list.find(',', start);
            const std::string ep = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            start = comma == std::string::npos ? list.size() + 1 : comma + 1;
            std::string why;
            if (!ep.empty() && !tcp_reachable(ep, 5000, why)) {
                err = "--rpc: cannot reach the RPC server " + ep + " (" + why + "); is ggml-rpc-server running there?";
                return false;
            }
        }
    }
    return true;
}

} // namespace

bool parse_llama_flags(options & t, const char * cmd, const std::string & model, common_params & params, int & status) {
    std::string err;
    if (!rpc_servers_reachable(t.forwarded(), err)) {
        status = fail(cmd, err);
        return false;
    }
    std::vector<char *> args = t.forwarded();
    std::string m_flag = "-m", m_value = model;
    if (!model.empty()) args.insert(args.begin() + 1, {&m_flag[0], &m_value[0]});
    if (!common_params_parse((int) args.size(), args.data(), params, LLAMA_EXAMPLE_COMMON)) {
        status = t.forward_refused();
        return false;
    }
    return true;
}

void declare_batch_memory(options & t, const std::string & help, uint64_t & target) {
    t.custom("--batch-memory", "SIZE", help, [&target](const std::string & v, std::string & err) {
        if (!planner::parse_size(v, target, err) || target == 0) {
            if (err.empty()) err = "must be positive";
            err = "--batch-memory '" + v + "': " + err;
            return false;
        }
        return true;
    });
}

void declare_until_stable(options & t, double & until_stable, int64_t & target_keep, double & target_ratio) {
    t.custom("--until-stable", "J",
             "stop once the keep-list for the target has held: at every stability checkpoint (every "
             "--checkpoint-every windows, default a twentieth of the run) the plan of the archive so far, for the mix "
             "and each domain, is compared with the previous checkpoint's and with the one of half the tokens (mean "
             "Jaccard over layers); two checkpoints in a row at >= J stop the run. Each domain's windows are taken in "
             "a fixed shuffled order (a prefix is then a sample of the domain, not its first documents) and the "
             "domains take turns, so any stretch holds each in its share; the archive records the curve",
             [&until_stable](const std::string & v, std::string & err) {
                 return parse_number("--until-stable", v, 1e-9, 1, until_stable, err);
             });
    t.integer("--target-keep", "N", "--until-stable's target: N experts kept per layer (alone: the stability lines "
              "are printed and the run goes on; stop it by hand, --resume later)", 1, INT64_MAX, target_keep);
    t.custom("--target-ratio", "R", "--until-stable's target: the fraction R of the routed experts removed (as plan "
             "--ratio; alone: as --target-keep alone)",
             [&target_ratio](const std::string & v, std::string & err) {
                 return parse_number("--target-ratio", v, 0, 0.999999, target_ratio, err);
             });
}

void declare_pass_memory(options & t, uint64_t & target) {
    t.custom("--memory", "SIZE",
             "what the pass's contexts (KV cache, compute and CPU work buffers, logits) may take; sizes -b/-ub when they are "
             "not given (default: MemAvailable or the memory cgroup's limit, less a reserve of an eighth up to 2GiB, "
             "less the model's bytes when they fit in half the rest)",
             [&target](const std::string & v, std::string & err) {
                 if (!planner::parse_size(v, target, err) || target == 0) {
                     if (err.empty()) err = "must be positive";
                     err = "--memory '" + v + "': " + err;
                     return false;
                 }
                 return true;
             });
}

void declare_past_trained(options & t, bool & past_trained) {
    t.flag("--ctx-past-trained", "let -c (or a --kld-base file's windows) exceed the model's trained context: "
           "refused without it, since llama.cpp would run positions the model never saw", past_trained);
}

void declare_eval_runtime(options & t, const std::string & ctx_help, runtime_given & given, pass_runtime & rt, bool windows) {
    if (windows) declare_past_trained(t, rt.past_trained);
    declare_pass_memory(t, rt.memory);
    declare_batch_memory(t,
                         "a cap on the logits of one automatic decode (default: none, --memory decides): about -b/2 "
                         "scored rows of n_vocab x 4 bytes, which llama.cpp holds twice (its output buffer and the "
                         "output head's compute)",
                         rt.batch_memory);
    declare_llama_runtime(t, ctx_help, given.ctx, &given.batch, &given.ubatch,
                          "tokens per decode, windows side by side as llama-perplexity packs them (default: -ub "
                          "when given, else the largest that fits --memory, up to " + std::to_string(reap::k_max_auto_ubatch) +
                          " and at most " + std::to_string(llama_max_parallel_sequences()) + " windows, none larger than the "
                          "input needs; a size given that cannot fit is refused)",
                          "tokens per ubatch (default: -b); a model larger than memory is read once per ubatch");
}

bool parse_llama_runtime(options & t, const char * cmd, const std::string & model, const runtime_given & given,
                         pass_runtime & rt, int & status) {
    // The parser requires a model even where the command has none (--kld-base alone).
    if (!parse_llama_flags(t, cmd, model.empty() ? "(none)" : model, rt.llama, status)) return false;
    rt.n_ctx     = given.ctx ? rt.llama.n_ctx : 0;
    rt.n_batch   = given.batch ? rt.llama.n_batch : 0;    // 0: settle_batches chooses
    rt.n_ubatch  = given.ubatch ? rt.llama.n_ubatch : 0;
    rt.n_threads       = rt.llama.cpuparams.n_threads;         // common settled -1 to the math cores,
    rt.n_threads_batch = rt.llama.cpuparams_batch.n_threads;   // and -tb to -t when not given
    return true;
}

} // namespace reap::cli

// reap eval --smoke: the base and a pruned file generate from the same prompt,
// greedily, side by side (eval.h: run_smoke).
#include "llama/eval.h"
#include "llama/eval_models.h"
#include "llama/eval_windows.h"
#include "llama/runtime.h"
#include "util/json.h"

#include "common.h"
#include "llama.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace reap {

using namespace eval_detail;

bool run_smoke(const smoke_options & opt, smoke_report & report, std::string & err) {
    runtime_init(opt.verbose);
    report = smoke_report();
    if (opt.base_path.empty() || opt.pruned_path.empty()) {
        err = "--smoke needs both -m BASE.gguf and -p PRUNED.gguf";
        return false;
    }
    if (opt.prompt.empty()) {
        err = "--smoke needs --prompt TEXT";
        return false;
    }
    if (opt.n_predict < 1) {
        err = "-n must be at least 1";
        return false;
    }
    model_ptr base = load_model("base model", opt.base_path, opt.rt, false, err);
    if (!base) return false;
    model_ptr pruned = load_pruned(opt.pruned_path, base.get(), opt.base_path, opt.rt, false, err);
    if (!pruned) return false;
    const llama_vocab * vocab = llama_model_get_vocab(base.get());
    const auto prompt = common_tokenize(vocab, opt.prompt, true, true);
    if (prompt.empty()) {
        err = "the prompt tokenizes to nothing";
        return false;
    }
    const int64_t n_ctx = (int64_t) prompt.size() + opt.n_predict;

    auto generate = [&](llama_model * model, std::vector<int32_t> & out) {
        ctx_ptr ctx = continuation_context(model, opt.rt, n_ctx, nullptr, err);
        return ctx && decode_continuation(ctx.get(), nullptr, prompt, opt.n_predict, "--smoke", out, err);
    };
    if (!generate(base.get(), report.base_tokens) || !generate(pruned.get(), report.pruned_tokens)) {
        return false;
    }
    const size_t n = std::min(report.base_tokens.size(), report.pruned_tokens.size());
    while ((size_t) report.n_agree < n && report.base_tokens[report.n_agree] == report.pruned_tokens[report.n_agree]) {
        ++report.n_agree;
    }
    report.base_text   = common_detokenize(vocab, std::vector<llama_token>(report.base_tokens.begin(), report.base_tokens.end()), true);
    report.pruned_text = common_detokenize(vocab, std::vector<llama_token>(report.pruned_tokens.begin(), report.pruned_tokens.end()), true);
    return true;
}

} // namespace reap

// reap eval --generate (generate.h): the prompts read as a corpus, each
// model's greedy continuations, the report the core's rules turn into numbers.
#include "llama/generate.h"

#include "llama/corpus.h"
#include "llama/eval_models.h"

#include "common.h"
#include "llama.h"

#include <algorithm>
#include <memory>

namespace reap {

namespace {

// Prompt i's sampler (temperature, then a draw seeded with seed + i); null for greedy.
struct sampler_deleter { void operator()(llama_sampler * s) const { llama_sampler_free(s); } };
using sampler_ptr = std::unique_ptr<llama_sampler, sampler_deleter>;

sampler_ptr sampler_for(const generate_options & opt, size_t i) {
    if (opt.temperature <= 0) return nullptr;
    sampler_ptr chain(llama_sampler_chain_init(llama_sampler_chain_default_params()));
    llama_sampler_chain_add(chain.get(), llama_sampler_init_temp((float) opt.temperature));
    llama_sampler_chain_add(chain.get(), llama_sampler_init_dist((uint32_t) (opt.seed + i)));
    return chain;
}

generation_model generate_all(llama_model * model, mask_hook * hook, const corpus & prompts, const generate_options & opt,
                              progress_line & prog, bool & ok, std::string & err) {
    const int max_new = opt.max_new;
    const eval_runtime & rt = opt.rt;
    generation_model gm;
    ok = false;
    size_t longest = 0;
    for (const auto & s : prompts.samples) longest = std::max(longest, s.tokens.size());
    ctx_ptr ctx = continuation_context(model, rt, (int64_t) longest + max_new, hook, err);
    if (!ctx) return gm;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    for (size_t i = 0; i < prompts.samples.size(); ++i) {
        generation_output o;
        const sampler_ptr sampler = sampler_for(opt, i);
        if (!decode_continuation(ctx.get(), hook, prompts.samples[i].tokens, max_new, "--generate", o.tokens, err,
                                 sampler.get(), &prog)) {
            return gm;
        }
        o.terminated = !o.tokens.empty() && llama_vocab_is_eog(vocab, o.tokens.back());
        if (o.terminated) o.tokens.pop_back();
        gm.texts.push_back(common_detokenize(vocab, std::vector<llama_token>(o.tokens.begin(), o.tokens.end()), false));
        gm.outputs.push_back(std::move(o));
    }
    ok = true;
    return gm;
}

} // namespace

bool run_generate(const generate_options & opt, const std::vector<eval_candidate> & cands,
                  generate_section & out, std::string & err) {
    runtime_init(opt.verbose);
    out = generate_section();
    generation_report & report = out.report;
    progress_line prog;
    prog.enabled = opt.progress;
    if (opt.max_new < 1) {
        err = "--max-new must be at least 1";
        return false;
    }
    if (!(opt.temperature >= 0 && opt.temperature <= 100)) {
        err = "--temp must be within 0..100 (0: greedy)";
        return false;
    }
    report.prompts_path = opt.prompts_path;
    report.max_new = opt.max_new;
    report.temperature = opt.temperature;
    report.seed = opt.seed;
    corpus prompts;
    report.models.resize(cands.size() + 1);
    const model_visit visit = [&](llama_model * model, mask_hook * hook, int index) {
        if (index < 0) {
            corpus_options co;
            co.add_generation_prompt = true;
            if (!read_corpus_file(opt.prompts_path, model, co, prompts, err)) return false;
            if (prompts.samples.empty()) {
                err = "--generate '" + opt.prompts_path + "' holds no prompt";
                return false;
            }
            report.domains = prompts.domains;
            int64_t per_model = 0;
            for (const auto & s : prompts.samples) {
                report.prompt_domain.push_back(s.domain);
                report.prompt_line.push_back(s.line);
                per_model += (int64_t) s.tokens.size() + opt.max_new - 1;
            }
            prog.start("--generate", per_model * (int64_t) (cands.size() + 1));
        }
        prog.label = "--generate, " + (index < 0 ? std::string("base") : (cands[index].masked() ? "masked by " : "") + cands[index].path);
        bool ok = false;
        generation_model gm = generate_all(model, hook, prompts, opt, prog, ok, err);
        if (!ok) return false;
        gm.name = index < 0 ? "base" : cands[index].path;
        gm.masked = index >= 0 && cands[index].masked();
        report.models[index + 1] = std::move(gm);   // in the order given, though masks run first
        return true;
    };
    if (!visit_models(opt.base_path, opt.base_mask_path, opt.prompts_path, cands, opt.rt, visit, out.measured, err)) return false;
    return true;
}

} // namespace reap

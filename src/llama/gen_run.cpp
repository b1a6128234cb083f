// reap eval --tasks (gen_run.h): prompts, draws, answers and the cap recheck on every model.
#include "llama/gen_run.h"

#include "formats/behaviour_file.h"

#include "llama/corpus.h"
#include "llama/eval_models.h"

#include "common.h"
#include "llama.h"

#include <algorithm>
#include <memory>

namespace reap {

namespace {

struct sampler_deleter { void operator()(llama_sampler * s) const { llama_sampler_free(s); } };
using sampler_ptr = std::unique_ptr<llama_sampler, sampler_deleter>;

// Task i's sample k: null (greedy), or top-p then temperature then a draw seeded seed + i * samples + k.
sampler_ptr sampler_for(const gen_settings & s, size_t i, int k) {
    if (s.temperature <= 0) return nullptr;
    sampler_ptr chain(llama_sampler_chain_init(llama_sampler_chain_default_params()));
    if (s.top_p < 1) llama_sampler_chain_add(chain.get(), llama_sampler_init_top_p((float) s.top_p, 1));
    llama_sampler_chain_add(chain.get(), llama_sampler_init_temp((float) s.temperature));
    llama_sampler_chain_add(chain.get(), llama_sampler_init_dist((uint32_t) (s.seed + i * (uint64_t) s.samples + (uint64_t) k)));
    return chain;
}

// The prompts' tokens on the base's vocabulary, and each as text for the answers file (and a judge).
bool render_prompts(const llama_model * model, const std::vector<gen_task> & tasks, const std::string & name,
                    std::vector<std::vector<int32_t>> & toks, std::vector<std::string> & shown, std::string & err) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::unique_ptr<chat_renderer> chat;
    for (const gen_task & t : tasks) {
        if (t.messages.is_null()) {
            toks.push_back(common_tokenize(vocab, t.prompt, true, false));
            shown.push_back(t.prompt);
            continue;
        }
        if (!model_has_chat_template(model)) {
            err = name + ": task '" + t.id + "' (line " + std::to_string(t.line) + ") has messages, and the model has no chat template";
            return false;
        }
        if (!chat) chat = std::make_unique<chat_renderer>(model);
        std::string text, e;
        if (!chat->render(t.messages, true, text, e)) {
            err = name + ": task '" + t.id + "' (line " + std::to_string(t.line) + "): " + e;
            return false;
        }
        toks.push_back(common_tokenize(vocab, text, true, true));
        std::string plain;
        for (const auto & m : t.messages) plain += m["role"].get<std::string>() + ": " + m["content"].get<std::string>() + "\n";
        shown.push_back(plain);
    }
    return true;
}

bool answer_one(llama_context * ctx, mask_hook * hook, const std::vector<int32_t> & prompt, int cap, const gen_settings & s,
                size_t i, int k, const answer_rule & rule, std::string & text, int & n_tokens, bool & hit_cap, bool & pass,
                progress_line & prog, std::string & err) {
    const sampler_ptr sampler = sampler_for(s, i, k);
    std::vector<int32_t> toks;
    if (!decode_continuation(ctx, hook, prompt, cap, "--tasks", toks, err, sampler.get(), &prog)) return false;
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    const bool ended = !toks.empty() && llama_vocab_is_eog(vocab, toks.back());
    if (ended) toks.pop_back();
    text = common_detokenize(vocab, std::vector<llama_token>(toks.begin(), toks.end()), false);
    n_tokens = (int) toks.size();
    hit_cap = !ended && n_tokens >= cap;
    pass = answer_passes(rule, text);
    return true;
}

} // namespace

bool run_gen_tasks(const gen_run_options & opt, const std::vector<eval_candidate> & cands, std::vector<answers_doc> & out,
                   std::string & err) {
    runtime_init(opt.verbose);
    out.assign(cands.size() + 1, answers_doc());
    const gen_settings & s = opt.settings;
    if (s.samples < 1 || s.max_new < 1 || !(s.temperature >= 0 && s.temperature <= 100) || !(s.top_p > 0 && s.top_p <= 1)) {
        err = "--samples and --max-new are at least 1, --temp within 0..100, --top-p within (0, 1]";
        return false;
    }
    std::vector<gen_task> tasks;
    if (!read_gen_tasks(opt.tasks_path, tasks, err)) return false;
    int largest_cap = 0;
    for (const auto & t : tasks) largest_cap = std::max(largest_cap, t.max_tokens ? t.max_tokens : s.max_new);
    if (s.recheck_cap > 0 && s.recheck_cap <= largest_cap) {
        err = "--recheck-cap " + std::to_string(s.recheck_cap) + " is not larger than the largest cap of the tasks (" +
              std::to_string(largest_cap) + "): nothing would be rechecked";
        return false;
    }
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> shown;
    progress_line prog;
    prog.enabled = opt.progress;
    size_t longest = 0;
    const model_visit visit = [&](llama_model * model, mask_hook * hook, int index) {
        if (index < 0) {
            if (!render_prompts(model, tasks, opt.tasks_path, prompts, shown, err)) return false;
            int64_t per_model = 0;
            for (size_t i = 0; i < tasks.size(); ++i) {
                longest = std::max(longest, prompts[i].size());
                per_model += ((int64_t) prompts[i].size() + (tasks[i].max_tokens ? tasks[i].max_tokens : s.max_new)) * s.samples;
            }
            prog.start("--tasks", per_model * (int64_t) (cands.size() + 1));
        }
        answers_doc & d = out[index + 1];
        d.model_name = index < 0 ? "base" : cands[index].path;
        d.masked = index >= 0 && cands[index].masked();
        d.settings = s;
        d.prompts = shown;
        prog.label = "--tasks, " + (index < 0 ? std::string("base") : (d.masked ? "masked by " : "") + d.model_name);
        ctx_ptr ctx = continuation_context(model, opt.rt, (int64_t) longest + std::max(largest_cap, s.recheck_cap), hook, err);
        if (!ctx) return false;
        for (size_t i = 0; i < tasks.size(); ++i) {
            const int cap = tasks[i].max_tokens ? tasks[i].max_tokens : s.max_new;
            for (int k = 0; k < s.samples; ++k) {
                gen_answer a;
                a.id = tasks[i].id, a.sample = k, a.cap = cap;
                if (!answer_one(ctx.get(), hook, prompts[i], cap, s, i, k, tasks[i].answer, a.text, a.n_tokens, a.hit_cap, a.pass, prog, err)) {
                    return false;
                }
                if (a.hit_cap && s.recheck_cap > cap) {
                    a.rechecked = true, a.recheck_cap = s.recheck_cap;
                    if (!answer_one(ctx.get(), hook, prompts[i], s.recheck_cap, s, i, k, tasks[i].answer, a.recheck_text, a.recheck_tokens,
                                    a.recheck_hit_cap, a.recheck_pass, prog, err)) {
                        return false;
                    }
                }
                d.answers.push_back(std::move(a));
            }
        }
        return true;
    };
    behaviour_receipts measured;
    if (!visit_models(opt.base_path, opt.base_mask_path, opt.tasks_path, cands, opt.rt, visit, measured, err)) return false;
    for (size_t m = 0; m < out.size(); ++m) {
        out[m].tasks_path = opt.tasks_path;
        out[m].tasks_sha256 = measured.input_sha256;
        out[m].base_path = measured.base_path;
        out[m].base_sha256 = measured.base_sha256;
        out[m].plan_sha256 = m > 0 && measured.candidates[m - 1].masked ? measured.candidates[m - 1].plan_sha256 : "";
        out[m].measured = nlohmann::json::parse(behaviour_receipts_json(measured).dump());
        out[m].model_index = (int) m;
    }
    return true;
}

} // namespace reap

// reap judge, in-process (judge.h): prompts through the judge's template, one
// decode each, the verdict read from the labels' first-token logits.
#include "llama/judge.h"

#include "llama/corpus.h"
#include "llama/eval_models.h"
#include "plan/plan.h"
#include "util/json.h"
#include "util/publish.h"
#include "util/sha256.h"

#include "common.h"
#include "llama.h"

#include <algorithm>

namespace reap {

namespace {

// One prompt to the judge and where its verdict goes.
struct judge_request {
    size_t      pair = 0;
    std::string kind;               // "ab", "ba", "score_a", "score_b"
    std::vector<int32_t> tokens;
    std::string text;
};

// The first token of each label; refused when two share one.
bool label_tokens(const llama_vocab * vocab, const std::vector<std::string> & labels, std::vector<int32_t> & out, std::string & err) {
    out.clear();
    for (const auto & l : labels) {
        const auto t = common_tokenize(vocab, l, false, false);
        if (t.empty()) {
            err = "the judge's vocabulary gives no token for the label '" + l + "'";
            return false;
        }
        if (std::find(out.begin(), out.end(), t[0]) != out.end()) {
            err = "the labels '" + labels[out.size() - 1] + "' and '" + l + "' begin with the same token in the judge's vocabulary: "
                  "its verdict could not be read from one token";
            return false;
        }
        out.push_back(t[0]);
    }
    return true;
}

bool build_requests(const llama_model * model, const answers_doc & a, const answers_doc & b, const judge_result & r,
                    std::vector<judge_request> & reqs, std::string & err) {
    chat_renderer chat(model);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const size_t per_task = a.answers.size() / a.prompts.size();
    auto add = [&](size_t pair, const char * kind, const nlohmann::json & messages) {
        judge_request q;
        q.pair = pair;
        q.kind = kind;
        if (!chat.render(messages, true, q.text, err)) return false;
        q.tokens = common_tokenize(vocab, q.text, true, true);
        reqs.push_back(std::move(q));
        return true;
    };
    for (size_t i = 0; i < a.answers.size(); ++i) {
        const std::string & task = a.prompts[i / per_task];
        const std::string & ta = a.answers[i].text, & tb = b.answers[i].text;
        if (!add(i, "ab", pairwise_messages(task, ta, tb)) || !add(i, "ba", pairwise_messages(task, tb, ta))) return false;
        if (!r.rubric.path.empty() && (!add(i, "score_a", rubric_messages(r.rubric, task, ta)) ||
                                       !add(i, "score_b", rubric_messages(r.rubric, task, tb)))) {
            return false;
        }
    }
    return true;
}

} // namespace

bool prepare_judge(const std::string & a_path, const std::string & b_path, const std::string & rubric_path, answers_doc & a,
                   answers_doc & b, judge_result & r, std::string & err) {
    r = judge_result();
    if (!read_answers_doc(a_path, a, err) || !read_answers_doc(b_path, b, err)) return false;
    if (!check_answer_pair(a, a_path, b, b_path, err)) return false;
    if (!rubric_path.empty() && !read_judge_rubric(rubric_path, r.rubric, err)) return false;
    r.a_path = a_path, r.b_path = b_path, r.a_model = a.model_name, r.b_model = b.model_name;
    r.tasks_path = a.tasks_path, r.tasks_sha256 = a.tasks_sha256;
    if (!util::sha256_file(a_path, r.a_sha256, err) || !util::sha256_file(b_path, r.b_sha256, err)) return false;
    for (size_t i = 0; i < a.answers.size(); ++i) r.pairs.push_back({a.answers[i].id, a.answers[i].sample});
    return true;
}

bool run_judge(const judge_options & opt, judge_result & r, std::string & err) {
    runtime_init(opt.verbose);
    answers_doc a, b;
    if (!prepare_judge(opt.a_path, opt.b_path, opt.rubric_path, a, b, r, err)) return false;
    gguf::model g;
    if (!gguf::open_model(opt.judge_path, g, err)) return false;
    r.judge_kind = "gguf", r.judge_name = opt.judge_path, r.judge_detail = model_header_sha256(g);
    model_ptr model = load_model("judge model", opt.judge_path, opt.rt, false, err);
    if (!model) return false;
    if (!model_has_chat_template(model.get())) {
        err = "the judge '" + opt.judge_path + "' has no chat template (tokenizer.chat_template): its prompts could not be rendered";
        return false;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    std::vector<int32_t> verdict_tok, score_tok;
    std::vector<std::string> digits;
    for (int s = r.rubric.low; s <= r.rubric.high; ++s) digits.push_back(std::to_string(s));
    if (!label_tokens(vocab, {k_judge_first, k_judge_second}, verdict_tok, err)) return false;
    if (!r.rubric.path.empty() && !label_tokens(vocab, digits, score_tok, err)) return false;
    std::vector<judge_request> reqs;
    if (!build_requests(model.get(), a, b, r, reqs, err)) return false;
    size_t longest = 0;
    int64_t total = 0;
    for (const auto & q : reqs) longest = std::max(longest, q.tokens.size()), total += (int64_t) q.tokens.size();
    const int64_t trained = llama_model_n_ctx_train(model.get());
    if (trained > 0 && (int64_t) longest + 1 > trained) {
        err = "the longest judge prompt is " + std::to_string(longest) + " tokens, past the judge's trained context of " +
              std::to_string(trained) + ": shorter tasks or answers (a lower --max-new when answering), or a judge with a longer context";
        return false;
    }
    ctx_ptr ctx = continuation_context(model.get(), opt.rt, (int64_t) longest + 1, nullptr, err);
    if (!ctx) return false;
    progress_line prog;
    prog.enabled = opt.progress;
    prog.start("judge", total);
    std::string log;
    for (const auto & q : reqs) {
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        std::vector<llama_token> toks(q.tokens.begin(), q.tokens.end());
        if (llama_decode(ctx.get(), llama_batch_get_one(toks.data(), (int32_t) toks.size())) != 0) {
            err = "llama_decode failed on a judge prompt";
            return false;
        }
        prog.add((int64_t) toks.size());
        const float * logits = llama_get_logits_ith(ctx.get(), -1);
        const bool verdict = q.kind == "ab" || q.kind == "ba";
        const auto & labels = verdict ? verdict_tok : score_tok;
        size_t best = 0;
        nlohmann::ordered_json scores;
        for (size_t l = 0; l < labels.size(); ++l) {
            if (logits[labels[l]] > logits[labels[best]]) best = l;
            scores[verdict ? (l ? k_judge_second : k_judge_first) : digits[l]] = logits[labels[l]];
        }
        judge_pair & p = r.pairs[q.pair];
        if (q.kind == "ab") p.ab = (int) best;
        else if (q.kind == "ba") p.ba = (int) best;
        else if (q.kind == "score_a") p.score_a = r.rubric.low + (int) best;
        else p.score_b = r.rubric.low + (int) best;
        nlohmann::ordered_json line = {{"id", p.id}, {"sample", p.sample}, {"kind", q.kind}, {"prompt", q.text},
                                       {"reply", verdict ? (best ? k_judge_second : k_judge_first) : digits[best]}, {"logits", scores}};
        log += util::json_text(line) + "\n";
    }
    return opt.log_path.empty() || util::write_file_durably(opt.log_path, log, err);
}

} // namespace reap

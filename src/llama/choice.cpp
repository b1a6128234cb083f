// reap eval's multiple-choice tasks (choice.h): tokens, the packing of tasks
// into decodes, and the log-probabilities of each choice, on every model.
#include "llama/choice.h"

#include "llama/eval_models.h"

#include "common.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace reap {

namespace {

// llama-perplexity's -c: the cells of the tasks' unified cache, each task's
// sequences placed from position 0 (a task's length, not -c, is what meets the
// trained context)
constexpr int k_default_task_cells = 512;
constexpr int k_default_task_batch = 2048;   // llama.cpp's -b
constexpr int k_default_task_ubatch = 512;   // llama.cpp's -ub

// One task's tokens as the scorer lays them out.
struct prepared_task {
    std::vector<std::vector<llama_token>> seqs;   // per choice
    std::vector<size_t>                   n_base; // winogrande: tokens of sentence up to and with the choice
    size_t common = 0, required = 0;
};

// perplexity.cpp's log-softmax of one row at `tok` (float sum, in order).
float token_logprob(const float * logits, int n_vocab, llama_token tok) {
    float max_logit = logits[0];
    for (int j = 1; j < n_vocab; ++j) max_logit = std::max(max_logit, logits[j]);
    float sum_p = 0.f;
    for (int j = 0; j < n_vocab; ++j) sum_p += expf(logits[j] - max_logit);
    return logits[tok] - max_logit - std::log(sum_p);
}

// perplexity.cpp's softmax (float terms, double denominator), its entry `tok`, logged in float.
float first_logprob(const float * logits, int n_vocab, llama_token tok) {
    float max_logit = logits[0];
    for (int j = 0; j < n_vocab; ++j) max_logit = std::max(max_logit, logits[j]);
    double sum_exp = 0.0;
    for (int j = 0; j < n_vocab; ++j) sum_exp += expf(logits[j] - max_logit);
    const float p = (float) (expf(logits[tok] - max_logit) / sum_exp);
    return std::log(p);
}

bool prepare_tasks(const llama_vocab * vocab, const choice_set & set, const std::vector<size_t> & selected, int n_ctx_total,
                   int n_seq, const std::string & name, std::vector<prepared_task> & out, std::string & err) {
    out.clear();
    for (size_t idx : selected) {
        const choice_task & task = set.tasks[idx];
        const std::string what = name + ": task " + std::to_string(task.index);
        prepared_task p;
        size_t min_len = SIZE_MAX;
        for (const std::string & text : task.texts) {
            p.seqs.push_back(common_tokenize(vocab, text, true, false));
            min_len = std::min(min_len, p.seqs.back().size());
        }
        for (const std::string & prefix : task.prefixes) p.n_base.push_back(common_tokenize(vocab, prefix, true, false).size());
        while (p.common < min_len) {
            bool same = true;
            for (const auto & s : p.seqs) same = same && s[p.common] == p.seqs[0][p.common];
            if (!same) break;
            ++p.common;
        }
        if (p.common == 0) {
            err = what + ": its choices share no first token (no BOS and different first words): llama-perplexity's rule needs one";
            return false;
        }
        p.required = p.common;
        for (size_t s = 0; s < p.seqs.size(); ++s) {
            if (p.seqs[s].size() == p.common) {
                err = what + ": choice " + std::to_string(s) + " adds no token to what every choice shares";
                return false;
            }
            p.required += p.seqs[s].size() - p.common;
        }
        for (size_t nb : p.n_base) {
            if (nb < p.common) {
                err = what + ": the sentence up to its choice tokenizes shorter than the choices' common prefix";
                return false;
            }
        }
        if ((int) p.seqs.size() > n_seq) {
            err = what + " has " + std::to_string(p.seqs.size()) + " choices: give -np " + std::to_string(p.seqs.size()) +
                  " or more (a choice is a sequence)";
            return false;
        }
        if (p.required > (size_t) n_ctx_total) {
            err = what + " needs " + std::to_string(p.required) + " tokens, more than the context's " + std::to_string(n_ctx_total) +
                  " (-np x -c): give a larger -c";
            return false;
        }
        out.push_back(std::move(p));
    }
    return true;
}

// The score of every choice of a multiple-choice or hellaswag task, and its pick.
size_t pick_of_mean(const prepared_task & t, size_t i_logits, const float * rows, int n_vocab, bool in_double) {
    std::vector<float> fs;
    std::vector<double> ds;
    size_t li = 1;   // row 0: the last token of the common prefix
    for (const auto & seq : t.seqs) {
        const float first = first_logprob(rows + i_logits * (size_t) n_vocab, n_vocab, seq[t.common]);
        std::vector<float> rest;
        for (size_t j = t.common; j + 1 < seq.size(); ++j) rest.push_back(token_logprob(rows + (i_logits + li++) * (size_t) n_vocab, n_vocab, seq[j + 1]));
        if (in_double) ds.push_back(mean_logprob_double(first, rest));
        else fs.push_back(mean_logprob_float(first, rest));
    }
    return in_double ? pick_best(ds) : pick_best(fs);
}

// winogrande's score, perplexity.cpp's indices exactly (the second choice's
// first logit when the choice word is not skipped is seq 0's last: kept).
size_t pick_of_winogrande(const prepared_task & t, size_t i_logits, const float * rows, int n_vocab) {
    const size_t len0 = t.seqs[0].size(), len1 = t.seqs[1].size(), cp = t.common;
    const bool skip_choice = len0 - cp > 3 && len1 - cp > 3;
    float score[2];
    for (int s = 0; s < 2; ++s) {
        const size_t len = t.seqs[s].size();
        const size_t n_base = skip_choice ? t.n_base[s] : cp;
        const size_t last = len - n_base > 1 ? 1 : 0;
        size_t li = s == 0 ? n_base - cp : len0 - cp + n_base - cp;
        float sum = 0;
        for (size_t j = n_base - 1; j < len - 1 - last; ++j) {
            sum += token_logprob(rows + (i_logits + li++) * (size_t) n_vocab, n_vocab, t.seqs[s][j + 1]);
        }
        score[s] = sum / (float) (len - n_base - last);
    }
    return score[0] > score[1] ? 0 : 1;
}

// Every selected task on one model: tasks packed into decodes as llama-perplexity packs them.
bool score_model(llama_model * model, mask_hook * hook, const choice_options & opt, int n_seq, const std::vector<prepared_task> & tasks,
                 const choice_set & set, const std::vector<size_t> & selected, choice_model_result & out, progress_line & prog,
                 std::string & err) {
    const int window = opt.rt.n_ctx;
    ctx_ptr ctx = make_context(model, opt.rt, window, n_seq, err, hook, true);
    if (!ctx) return false;
    const int n_ctx = (int) llama_n_ctx(ctx.get()), n_batch = (int) llama_n_batch(ctx.get());
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    const bool wino = set.format == choice_format::winogrande;
    const int max_seq = std::min(wino ? 2 * 128 : 4 * 32, (int) llama_n_seq_max(ctx.get()));
    std::vector<size_t> i_logits(tasks.size());   // each task's first output row in its decode
    llama_batch batch = llama_batch_init(n_ctx, 0, max_seq);
    std::vector<float> rows;
    std::vector<llama_seq_id> ids;
    bool ok = true;
    for (size_t i0 = 0; ok && i0 < tasks.size();) {
        common_batch_clear(batch);
        size_t i1 = i0, n_rows = 0;
        int n_cur = 0, s0 = 0;
        while (i1 < tasks.size() && n_cur + (int) tasks[i1].required <= n_ctx && s0 + (int) tasks[i1].seqs.size() <= max_seq) {
            const prepared_task & t = tasks[i1];
            ids.clear();
            for (size_t s = 0; s < t.seqs.size(); ++s) ids.push_back(s0 + (int) s);
            for (size_t i = 0; i < t.common; ++i) common_batch_add(batch, t.seqs[0][i], (llama_pos) i, ids, false);
            batch.logits[batch.n_tokens - 1] = true;
            i_logits[i1] = n_rows++;
            for (size_t s = 0; s < t.seqs.size(); ++s) {
                for (size_t i = t.common; i < t.seqs[s].size(); ++i) {
                    const bool wanted = wino || i + 1 < t.seqs[s].size();
                    common_batch_add(batch, t.seqs[s][i], (llama_pos) i, {s0 + (int) s}, wanted);
                    n_rows += wanted;
                }
            }
            s0 += (int) t.seqs.size();
            n_cur += (int) t.required;
            ++i1;
        }
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        rows.resize(n_rows * (size_t) n_vocab);
        size_t done_rows = 0;
        for (int i = 0; ok && i < batch.n_tokens; i += n_batch) {
            const int n = std::min(n_batch, batch.n_tokens - i);
            llama_batch view = {n, batch.token + i, nullptr, batch.pos + i, batch.n_seq_id + i, batch.seq_id + i, batch.logits + i};
            if (llama_decode(ctx.get(), view) != 0) {
                err = std::string("llama_decode failed during ") + choice_format_flag(set.format);
                ok = false;
                break;
            }
            int n_out = 0;
            for (int k = 0; k < n; ++k) n_out += view.logits[k] != 0;
            if (hook && !hook->check(n_out > 0, err)) {
                ok = false;
                break;
            }
            std::memcpy(rows.data() + done_rows * n_vocab, llama_get_logits(ctx.get()), (size_t) n_out * n_vocab * sizeof(float));
            done_rows += (size_t) n_out;
            prog.add(n);
        }
        for (size_t i = i0; ok && i < i1; ++i) {
            const size_t pick = wino ? pick_of_winogrande(tasks[i], i_logits[i], rows.data(), n_vocab)
                                     : pick_of_mean(tasks[i], i_logits[i], rows.data(), n_vocab, set.format == choice_format::hellaswag);
            out.picked.push_back((uint16_t) pick);
            out.correct.push_back(set.tasks[selected[i]].correct[pick]);
        }
        i0 = i1;
    }
    llama_batch_free(batch);
    return ok;
}

} // namespace

size_t default_tasks_limit(choice_format f) { return f == choice_format::hellaswag ? 400 : 0; }

bool run_choice(const choice_options & opt_in, const std::vector<eval_candidate> & cands, choice_section & out, std::string & err) {
    runtime_init(opt_in.verbose);
    out = choice_section();
    choice_options opt = opt_in;
    if (opt.rt.n_ctx <= 0) opt.rt.n_ctx = k_default_task_cells;
    if (opt.rt.n_batch <= 0) opt.rt.n_batch = k_default_task_batch;
    if (opt.rt.n_ubatch <= 0) opt.rt.n_ubatch = k_default_task_ubatch;
    const int n_seq = std::max(4, opt.rt.llama.n_parallel);
    choice_set set;
    if (!read_choice_set(opt.format, opt.tasks_path, set, err)) return false;
    const std::vector<size_t> selected = select_choice_tasks(set, opt.limit);
    choice_report & r = out.report;
    r.task_format = choice_format_name(opt.format);
    r.data_path = opt.tasks_path;
    r.data_tasks = set.tasks.size();
    r.limit = opt.limit;
    for (size_t i : selected) r.tasks.push_back(set.tasks[i].index);
    r.n_ctx = opt.rt.n_ctx;
    r.n_seq = n_seq;
    r.n_batch = std::min(opt.rt.n_batch, opt.rt.n_ctx * n_seq);
    r.n_ubatch = std::min(opt.rt.n_ubatch, r.n_batch);
    r.models.resize(cands.size() + 1);
    std::vector<prepared_task> prepared;
    progress_line prog;
    prog.enabled = opt.progress;
    const model_visit visit = [&](llama_model * model, mask_hook * hook, int index) {
        if (index < 0) {
            if (!prepare_tasks(llama_model_get_vocab(model), set, selected, opt.rt.n_ctx * n_seq, n_seq, opt.tasks_path, prepared, err)) {
                return false;
            }
            int64_t per_model = 0;
            for (const auto & t : prepared) per_model += (int64_t) t.required;
            prog.start(choice_format_flag(opt.format), per_model * (int64_t) (cands.size() + 1));
        }
        choice_model_result & m = r.models[index + 1];
        m.name = index < 0 ? "base" : cands[index].path;
        m.masked = index >= 0 && cands[index].masked();
        prog.label = std::string(choice_format_flag(opt.format)) + ", " + (index < 0 ? std::string("base") : (m.masked ? "masked by " : "") + m.name);
        return score_model(model, hook, opt, n_seq, prepared, set, selected, m, prog, err);
    };
    if (!visit_models(opt.base_path, opt.base_mask_path, opt.tasks_path, cands, opt.rt, visit, out.measured, err)) return false;
    r.data_sha256 = out.measured.input_sha256;
    return true;
}

} // namespace reap

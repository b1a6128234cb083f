// reap eval --needle (needle.h): the haystack tokens, each cell's prompt in
// the chat or the completion form, each model's greedy answers.
#include "llama/needle.h"

#include "llama/corpus.h"
#include "llama/eval_models.h"

#include "common.h"
#include "llama.h"

#include <algorithm>
#include <cctype>

namespace reap {

namespace {

// The haystack: -f's samples, their own BOS dropped, joined by a blank line.
bool read_haystack(const std::string & path, const llama_model * model, std::vector<int32_t> & hay, std::string & err) {
    corpus c;
    if (!read_corpus_file(path, model, corpus_options(), c, err)) return false;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const llama_token bos = llama_vocab_bos(vocab);
    const auto gap = common_tokenize(vocab, "\n\n", false, false);
    for (const auto & s : c.samples) {
        auto b = s.tokens.begin();
        if (b != s.tokens.end() && *b == bos && llama_vocab_get_add_bos(vocab)) ++b;
        if (!hay.empty()) hay.insert(hay.end(), gap.begin(), gap.end());
        hay.insert(hay.end(), b, s.tokens.end());
    }
    return true;
}

// The prompt of one cell and the tokens of its answer.
struct cell_builder {
    const llama_model * model;
    const llama_vocab * vocab;
    bool                chat = false;
    std::vector<int32_t> before, after;  // around the haystack: the template's turn, or BOS

    bool init(std::string & err) {
        vocab = llama_model_get_vocab(model);
        chat = model_has_chat_template(model);
        const std::string question = std::string("\n\n") + (chat ? k_needle_question : k_needle_lead);
        if (!chat) {
            before = common_tokenize(vocab, "", true, false);   // BOS, as the vocabulary asks
            after = common_tokenize(vocab, question, false, false);
            return true;
        }
        // The turn rendered around a marker, split there: the haystack's tokens go in as they are.
        const std::string marker = "\x01reap-needle-haystack\x01";
        chat_renderer r(model);
        std::string text;
        if (!r.render(nlohmann::json::array({{{"role", "user"}, {"content", marker}}}), true, text, err)) return false;
        const size_t at = text.find(marker);
        if (at == std::string::npos) {
            err = "the chat template does not keep the user's content as written";
            return false;
        }
        before = common_tokenize(vocab, text.substr(0, at), true, true);
        after = common_tokenize(vocab, question, false, false);
        const auto tail = common_tokenize(vocab, text.substr(at + marker.size()), false, true);
        after.insert(after.end(), tail.begin(), tail.end());
        return true;
    }

    std::string piece(int32_t t) const { return common_token_to_piece(vocab, t, false); }

    std::vector<int32_t> prompt(needle_cell & cell, const std::vector<int32_t> & hay) const {
        const std::vector<int32_t> h(hay.begin(), hay.begin() + cell.length);
        std::vector<std::string> pieces;
        for (int32_t t : h) pieces.push_back(piece(t));
        cell.insert_at = needle_boundary(pieces, cell.depth);
        auto spaced = [](const std::string & p, bool at_end) {
            return p.empty() || isspace((unsigned char) (at_end ? p.back() : p.front()));
        };
        std::string sentence = std::string(k_needle_lead) + " " + cell.value + ".";
        if (cell.insert_at > 0 && !spaced(pieces[cell.insert_at - 1], true)) sentence = " " + sentence;
        if (cell.insert_at < h.size() && !spaced(pieces[cell.insert_at], false)) sentence += " ";
        const auto needle = common_tokenize(vocab, sentence, false, false);
        std::vector<int32_t> p = before;
        p.insert(p.end(), h.begin(), h.begin() + (long) cell.insert_at);
        p.insert(p.end(), needle.begin(), needle.end());
        p.insert(p.end(), h.begin() + (long) cell.insert_at, h.end());
        p.insert(p.end(), after.begin(), after.end());
        cell.n_prompt = p.size();
        cell.n_answer = (int) common_tokenize(vocab, " " + cell.value, false, false).size();
        return p;
    }
};

bool answer_all(llama_model * model, mask_hook * hook, const eval_runtime & rt,
                const std::vector<std::vector<int32_t>> & prompts, const needle_report & r, needle_model & out,
                progress_line & prog, std::string & err) {
    size_t longest = 0;
    for (size_t c = 0; c < prompts.size(); ++c) longest = std::max(longest, prompts[c].size() + r.cells[c].n_answer);
    ctx_ptr ctx = continuation_context(model, rt, (int64_t) longest, hook, err);
    if (!ctx) return false;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    for (size_t c = 0; c < prompts.size(); ++c) {
        std::vector<int32_t> toks;
        if (!decode_continuation(ctx.get(), hook, prompts[c], r.cells[c].n_answer, "--needle", toks, err, nullptr, &prog)) return false;
        if (!toks.empty() && llama_vocab_is_eog(vocab, toks.back())) toks.pop_back();
        needle_answer a;
        a.text = common_detokenize(vocab, std::vector<llama_token>(toks.begin(), toks.end()), false);
        a.match = needle_matches(a.text, r.cells[c].value);
        out.answers.push_back(a);
    }
    return true;
}

} // namespace

bool run_needle(const needle_options & opt, const std::vector<eval_candidate> & cands, needle_section & out,
                std::string & err) {
    runtime_init(opt.verbose);
    out = needle_section();
    needle_report & report = out.report;
    progress_line prog;
    prog.enabled = opt.progress;
    report.seed = opt.seed;
    report.haystack_path = opt.haystack_path;
    if (opt.needles < 1) {
        err = "--needles must be at least 1";
        return false;
    }
    for (double d : opt.depths) {
        if (!(d >= 0 && d <= 1)) {
            err = "--needle-depths: " + std::to_string(d) + " is not within 0..1";
            return false;
        }
    }
    std::vector<std::vector<int32_t>> prompts;
    report.models.resize(cands.size() + 1);
    const model_visit visit = [&](llama_model * model, mask_hook * hook, int index) {
        if (index < 0) {
            std::vector<int32_t> hay;
            if (!read_haystack(opt.haystack_path, model, hay, err)) return false;
            std::vector<int> lengths = opt.lengths;
            if (lengths.empty()) lengths = default_needle_lengths(llama_model_n_ctx_train(model));
            if (lengths.empty()) {
                err = "the base's trained context is too short for a needle grid: give --needle-lengths";
                return false;
            }
            for (int l : lengths) {
                if (l < 1 || (size_t) l > hay.size()) {
                    err = "needle length " + std::to_string(l) + ": '" + opt.haystack_path + "' gives " +
                          std::to_string(hay.size()) + " tokens of haystack" + (l < 1 ? " (a length is at least 1)" : "");
                    return false;
                }
            }
            report.cells = needle_cells(lengths, opt.depths.empty() ? k_default_needle_depths : opt.depths, opt.needles,
                                        opt.seed);
            cell_builder b{model, nullptr};
            if (!b.init(err)) return false;
            report.chat = b.chat;
            int64_t per_model = 0;
            for (auto & cell : report.cells) {
                prompts.push_back(b.prompt(cell, hay));
                per_model += (int64_t) prompts.back().size() + cell.n_answer - 1;
            }
            prog.start("--needle", per_model * (int64_t) (cands.size() + 1));
        }
        needle_model & m = report.models[index + 1];
        m.name = index < 0 ? "base" : cands[index].path;
        m.masked = index >= 0 && cands[index].masked();
        prog.label = "--needle, " + (index < 0 ? std::string("base") : (m.masked ? "masked by " : "") + m.name);
        return answer_all(model, hook, opt.rt, prompts, report, m, prog, err);
    };
    return visit_models(opt.base_path, opt.base_mask_path, opt.haystack_path, cands, opt.rt, visit, out.measured, err);
}

} // namespace reap

// reap judge (judge.h): the requests, the request log that is also the
// journal, and the two ways of asking: in-process and an endpoint.
#include "llama/judge.h"

#include "llama/corpus.h"
#include "llama/eval_models.h"
#include "plan/plan.h"
#include "util/json.h"
#include "util/sha256.h"

#include "common.h"
#include "llama.h"

#include "cpp-httplib/httplib.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

namespace reap {

namespace {

using ojson = nlohmann::ordered_json;

// One prompt to the judge and where its verdict goes.
struct judge_request {
    size_t                   pair = 0;
    std::string              kind;     // "ab", "ba", "score_a", "score_b"
    nlohmann::json           messages;
    std::vector<std::string> labels;
};

// What one request got: a label index or -1, and for the log what was sent and received.
struct judge_reply {
    int         verdict = -1;
    std::string why;        // a failure's reason
    ojson       detail;     // in-process: the labels' best logits; endpoint: the reply
    std::string prompt;     // the text the judge saw (in-process: rendered)
};

class judge_backend {
  public:
    virtual ~judge_backend() = default;
    // Everything checkable before the first request (rendering, context, reachability).
    virtual bool prepare(std::vector<judge_request> & reqs, std::string & err) = 0;
    virtual judge_reply ask(const judge_request & q, size_t index, std::string & err) = 0;
    virtual void describe(judge_result & r) const = 0;
};

// ---- in-process --------------------------------------------------------------

class local_judge : public judge_backend {
  public:
    explicit local_judge(const judge_options & o) : o_(o) {}

    bool prepare(std::vector<judge_request> & reqs, std::string & err) override {
        gguf::model g;
        if (!gguf::open_model(o_.judge_path, g, err)) return false;
        header_ = model_header_sha256(g);
        model_ = load_model("judge model", o_.judge_path, o_.rt, false, err);
        if (!model_) return false;
        if (!model_has_chat_template(model_.get())) {
            err = "the judge '" + o_.judge_path + "' has no chat template (tokenizer.chat_template): its prompts could not be rendered";
            return false;
        }
        chat_renderer chat(model_.get());
        const llama_vocab * vocab = llama_model_get_vocab(model_.get());
        size_t longest = 0;
        for (const auto & q : reqs) {
            std::string text;
            if (!chat.render(q.messages, true, text, err)) return false;
            texts_.push_back(text);
            tokens_.push_back(common_tokenize(vocab, text, true, true));
            longest = std::max(longest, tokens_.back().size());
            if (!owners_.count(q.labels) && !label_owners(vocab, q.labels, err)) return false;
        }
        const int64_t trained = llama_model_n_ctx_train(model_.get());
        if (trained > 0 && (int64_t) longest + 1 > trained) {
            err = "the longest judge prompt is " + std::to_string(longest) + " tokens, past the judge's trained context of " +
                  std::to_string(trained) + ": shorter tasks or answers (a lower --max-new when answering), or a judge with a longer context";
            return false;
        }
        ctx_ = continuation_context(model_.get(), o_.rt, (int64_t) longest + 1, nullptr, err);
        return ctx_ != nullptr;
    }

    judge_reply ask(const judge_request & q, size_t index, std::string & err) override {
        judge_reply rep;
        rep.prompt = texts_[index];
        llama_memory_clear(llama_get_memory(ctx_.get()), true);
        std::vector<llama_token> toks(tokens_[index].begin(), tokens_[index].end());
        if (llama_decode(ctx_.get(), llama_batch_get_one(toks.data(), (int32_t) toks.size())) != 0) {
            err = "llama_decode failed on a judge prompt";
            rep.why = err;
            return rep;
        }
        const float * logits = llama_get_logits_ith(ctx_.get(), -1);
        const auto & owners = owners_.at(q.labels);
        float best = -INFINITY;
        for (const auto & [tok, label] : owners) {
            if (logits[tok] > best) best = logits[tok], rep.verdict = label;
        }
        for (size_t l = 0; l < q.labels.size(); ++l) {
            float top = -INFINITY;
            for (const auto & [tok, label] : owners) {
                if (label == (int) l) top = std::max(top, logits[tok]);
            }
            rep.detail[q.labels[l]] = top;
        }
        return rep;
    }

    void describe(judge_result & r) const override {
        r.judge_kind = "gguf", r.judge_name = o_.judge_path, r.judge_detail = header_;
    }

  private:
    // Every token whose text is a non-empty prefix of a label, and its label
    // (the constrained first step); refused when a token is a prefix of two.
    bool label_owners(const llama_vocab * vocab, const std::vector<std::string> & labels, std::string & err) {
        std::vector<std::pair<llama_token, int>> own;
        const int n = llama_vocab_n_tokens(vocab);
        for (llama_token t = 0; t < n; ++t) {
            if (llama_vocab_is_control(vocab, t) || llama_vocab_is_eog(vocab, t)) continue;
            const std::string piece = common_token_to_piece(vocab, t, false);
            if (piece.empty()) continue;
            int owner = -1;
            for (size_t l = 0; l < labels.size(); ++l) {
                if (labels[l].compare(0, piece.size(), piece) == 0 && piece.size() <= labels[l].size()) {
                    if (owner >= 0) {
                        err = "the token '" + piece + "' begins both '" + labels[(size_t) owner] + "' and '" + labels[l] +
                              "' in the judge's vocabulary: its verdict could not be read from one token";
                        return false;
                    }
                    owner = (int) l;
                }
            }
            if (owner >= 0) own.push_back({t, owner});
        }
        for (size_t l = 0; l < labels.size(); ++l) {
            if (std::none_of(own.begin(), own.end(), [l](const auto & p) { return p.second == (int) l; })) {
                err = "the judge's vocabulary has no token that begins the label '" + labels[l] + "'";
                return false;
            }
        }
        owners_[labels] = std::move(own);
        return true;
    }

    const judge_options & o_;
    std::string header_;
    model_ptr model_;
    ctx_ptr ctx_;
    std::vector<std::string> texts_;
    std::vector<std::vector<int32_t>> tokens_;
    std::map<std::vector<std::string>, std::vector<std::pair<llama_token, int>>> owners_;
};

// ---- endpoint ----------------------------------------------------------------

// http://HOST:PORT/PATH -> ("http://HOST:PORT", "/PATH"); false for anything else.
bool split_url(const std::string & url, std::string & base, std::string & path, std::string & err) {
    const std::string scheme = "http://";
    if (url.compare(0, scheme.size(), scheme) != 0) {
        err = "--judge-url " + url + ": give http://HOST:PORT/v1 (this reap is built without TLS)";
        return false;
    }
    const size_t slash = url.find('/', scheme.size());
    base = url.substr(0, slash);
    path = slash == std::string::npos ? "" : url.substr(slash);
    while (!path.empty() && path.back() == '/') path.pop_back();
    if (base.size() == scheme.size()) {
        err = "--judge-url " + url + ": no host";
        return false;
    }
    return true;
}

class endpoint_judge : public judge_backend {
  public:
    explicit endpoint_judge(const judge_options & o) : o_(o) {}

    bool prepare(std::vector<judge_request> &, std::string & err) override {
        if (!split_url(o_.judge_url, base_, path_, err)) return false;
        client_ = std::make_unique<httplib::Client>(base_);
        client_->set_connection_timeout(5);
        client_->set_read_timeout(o_.timeout_s);
        client_->set_write_timeout(o_.timeout_s);
        // reachable, and what model it serves, before the first judgement
        auto res = client_->Get(path_ + "/models");
        if (!res) {
            err = "--judge-url " + o_.judge_url + ": cannot reach the endpoint (" + httplib::to_string(res.error()) + ")";
            return false;
        }
        if (res->status == 200) {
            nlohmann::json j;
            std::string e;
            if (util::parse_json_text(res->body, "models", j, e) && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
                j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
                served_ = j["data"][0]["id"].get<std::string>();
            }
        }
        return true;
    }

    judge_reply ask(const judge_request & q, size_t, std::string &) override {
        judge_reply rep;
        std::string grammar = "root ::=";
        for (size_t l = 0; l < q.labels.size(); ++l) grammar += (l ? " | \"" : " \"") + q.labels[l] + "\"";
        // cache_prompt off: llama-server would otherwise reuse the KV of the last
        // prompt's shared prefix and compute the rest in other batches
        nlohmann::json body = {{"messages", q.messages}, {"max_tokens", 1}, {"temperature", 0}, {"grammar", grammar}, {"cache_prompt", false}};
        if (!o_.judge_model.empty()) body["model"] = o_.judge_model;
        rep.prompt = q.messages.dump();
        for (int attempt = 0; attempt <= o_.retries; ++attempt) {
            if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(500 << attempt));
            auto res = client_->Post(path_ + "/chat/completions", body.dump(), "application/json");
            if (!res) {
                rep.why = "no reply (" + httplib::to_string(res.error()) + ")";
                continue;   // transient: asked again
            }
            rep.detail = {{"status", res->status}, {"body", res->body.substr(0, 2000)}};
            if (res->status >= 500) {
                rep.why = "HTTP " + std::to_string(res->status);
                continue;
            }
            if (res->status != 200) {
                rep.why = "refused: HTTP " + std::to_string(res->status);
                return rep;
            }
            read_verdict(res->body, q.labels, rep);
            return rep;
        }
        return rep;
    }

    void describe(judge_result & r) const override {
        r.judge_kind = "url";
        r.judge_name = !served_.empty() ? served_ : !o_.judge_model.empty() ? o_.judge_model : "(the endpoint names no model)";
        r.judge_detail = o_.judge_url;
    }

  private:
    static void read_verdict(const std::string & text, const std::vector<std::string> & labels, judge_reply & rep) {
        nlohmann::json j;
        std::string e;
        if (!util::parse_json_text(text, "reply", j, e) || !j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
            j["choices"].empty() || !j["choices"][0].contains("message") || !j["choices"][0]["message"].contains("content") ||
            !j["choices"][0]["message"]["content"].is_string()) {
            rep.why = "malformed reply (no choices[0].message.content)";
            return;
        }
        const std::string content = j["choices"][0]["message"]["content"].get<std::string>();
        rep.detail = {{"content", content}};
        int found = -1;
        for (size_t l = 0; l < labels.size() && !content.empty(); ++l) {
            if (labels[l].compare(0, content.size(), content) == 0 && content.size() <= labels[l].size()) {
                found = found < 0 ? (int) l : -2;
            }
        }
        if (found < 0) {
            rep.why = "not a verdict: '" + content.substr(0, 80) + "'";
            return;
        }
        rep.verdict = found;
    }

    const judge_options & o_;
    std::string base_, path_, served_;
    std::unique_ptr<httplib::Client> client_;
};

// ---- the run -----------------------------------------------------------------

std::vector<judge_request> requests_of(const answers_doc & a, const answers_doc & b, const judge_result & r, int samples) {
    std::vector<judge_request> reqs;
    const size_t per_task = a.answers.size() / a.prompts.size();
    std::vector<std::string> digits;
    for (int s = r.rubric.low; s <= r.rubric.high; ++s) digits.push_back(std::to_string(s));
    const std::vector<std::string> verdicts = {k_judge_first, k_judge_second};
    size_t pair = 0;
    for (size_t i = 0; i < a.answers.size(); ++i) {
        if (samples > 0 && a.answers[i].sample >= samples) continue;
        const std::string & task = a.prompts[i / per_task];
        const std::string & ta = a.answers[i].text, & tb = b.answers[i].text;
        reqs.push_back({pair, "ab", pairwise_messages(task, ta, tb), verdicts});
        reqs.push_back({pair, "ba", pairwise_messages(task, tb, ta), verdicts});
        if (!r.rubric.path.empty()) {
            reqs.push_back({pair, "score_a", rubric_messages(r.rubric, task, ta), digits});
            reqs.push_back({pair, "score_b", rubric_messages(r.rubric, task, tb), digits});
        }
        ++pair;
    }
    return reqs;
}

void apply(const judge_request & q, int verdict, judge_result & r) {
    judge_pair & p = r.pairs[q.pair];
    if (q.kind == "ab") p.ab = verdict;
    else if (q.kind == "ba") p.ba = verdict;
    else if (q.kind == "score_a") p.score_a = verdict < 0 ? 0 : r.rubric.low + verdict;
    else p.score_b = verdict < 0 ? 0 : r.rubric.low + verdict;
}

// The log's first line: what run it belongs to.
ojson log_header(const judge_options & o, const judge_result & r) {
    return {{"format", "reap-judge-log"}, {"version", 1}, {"a_sha256", r.a_sha256}, {"b_sha256", r.b_sha256},
            {"judge", o.judge_url.empty() ? o.judge_path : o.judge_url}, {"rubric_sha256", r.rubric.sha256}, {"samples", o.samples}};
}

// The verdicts an earlier run of the same judgement logged (key: pair, kind).
bool read_log(const judge_options & o, const judge_result & r, std::map<std::pair<size_t, std::string>, int> & done, std::string & err) {
    std::ifstream in(o.log_path);
    if (!in || o.fresh) return true;
    std::string line;
    nlohmann::json h;
    if (!std::getline(in, line) || !util::parse_json_text(line, o.log_path, h, err) || h != nlohmann::json(log_header(o, r))) {
        err = "the request log '" + o.log_path + "' belongs to another judgement (other answers, judge or rubric): "
              "give another -o, or --force to start over";
        return false;
    }
    std::map<std::pair<std::string, int>, size_t> pair_of;
    for (size_t i = 0; i < r.pairs.size(); ++i) pair_of[{r.pairs[i].id, r.pairs[i].sample}] = i;
    while (std::getline(in, line)) {
        nlohmann::json j;
        std::string e;
        if (!util::parse_json_text(line, o.log_path, j, e)) break;   // a line cut by a kill: asked again
        if (!j.contains("id") || !j.contains("sample") || !j.contains("kind") || !j.contains("verdict") || !j["verdict"].is_number_integer()) continue;
        const auto it = pair_of.find({j["id"].get<std::string>(), j["sample"].get<int>()});
        if (it == pair_of.end() || j["verdict"].get<int>() < 0) continue;
        done[{it->second, j["kind"].get<std::string>()}] = j["verdict"].get<int>();
    }
    return true;
}

} // namespace

bool prepare_judge(const std::string & a_path, const std::string & b_path, const std::string & rubric_path, int samples, answers_doc & a,
                   answers_doc & b, judge_result & r, std::string & err) {
    r = judge_result();
    if (!read_answers_doc(a_path, a, err) || !read_answers_doc(b_path, b, err)) return false;
    if (!check_answer_pair(a, a_path, b, b_path, err)) return false;
    if (!rubric_path.empty() && !read_judge_rubric(rubric_path, r.rubric, err)) return false;
    r.a_path = a_path, r.b_path = b_path, r.a_model = a.model_name, r.b_model = b.model_name;
    r.tasks_path = a.tasks_path, r.tasks_sha256 = a.tasks_sha256;
    if (!util::sha256_file(a_path, r.a_sha256, err) || !util::sha256_file(b_path, r.b_sha256, err)) return false;
    if (samples > a.settings.samples || samples > b.settings.samples) {
        err = "--samples " + std::to_string(samples) + ": the answers files hold " + std::to_string(a.settings.samples) + " and " +
              std::to_string(b.settings.samples) + " answers a task";
        return false;
    }
    for (size_t i = 0; i < a.answers.size(); ++i) {
        if (samples == 0 || a.answers[i].sample < samples) r.pairs.push_back({a.answers[i].id, a.answers[i].sample});
    }
    return true;
}

bool run_judge(const judge_options & opt, judge_result & r, std::string & err) {
    runtime_init(opt.verbose);
    answers_doc a, b;
    if (!prepare_judge(opt.a_path, opt.b_path, opt.rubric_path, opt.samples, a, b, r, err)) return false;
    std::map<std::pair<size_t, std::string>, int> done;
    if (!read_log(opt, r, done, err)) return false;
    std::vector<judge_request> reqs = requests_of(a, b, r, opt.samples);
    std::unique_ptr<judge_backend> judge;
    if (opt.judge_url.empty()) judge = std::make_unique<local_judge>(opt);
    else judge = std::make_unique<endpoint_judge>(opt);
    if (!judge->prepare(reqs, err)) return false;
    judge->describe(r);
    // the log: started over, or appended to (each line written whole and synced)
    const bool append = !done.empty() || (!opt.fresh && access(opt.log_path.c_str(), F_OK) == 0);
    const int fd = ::open(opt.log_path.c_str(), O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd < 0) {
        err = "cannot write the request log '" + opt.log_path + "'";
        return false;
    }
    auto write_line = [fd](const std::string & s) { return ::write(fd, s.data(), s.size()) == (ssize_t) s.size() && ::fsync(fd) == 0; };
    bool ok = append || write_line(util::json_text(log_header(opt, r)) + "\n");
    progress_line prog;
    prog.enabled = opt.progress;
    prog.start("judge", (int64_t) reqs.size());
    std::map<std::string, uint64_t> reasons;
    for (size_t i = 0; ok && i < reqs.size(); ++i) {
        const judge_request & q = reqs[i];
        prog.add(1);
        if (auto it = done.find({q.pair, q.kind}); it != done.end()) {
            apply(q, it->second, r);
            continue;
        }
        std::string fatal;
        const judge_reply rep = judge->ask(q, i, fatal);
        if (!fatal.empty()) {
            err = fatal;
            ok = false;
            break;
        }
        apply(q, rep.verdict, r);
        if (rep.verdict < 0) ++r.failures, ++reasons[rep.why];
        ojson line = {{"id", r.pairs[q.pair].id}, {"sample", r.pairs[q.pair].sample}, {"kind", q.kind}, {"prompt", rep.prompt},
                      {"verdict", rep.verdict}, {"reply", rep.verdict >= 0 ? ojson(q.labels[(size_t) rep.verdict]) : ojson(nullptr)},
                      {"detail", rep.detail}};
        if (rep.verdict < 0) line["failure"] = rep.why;
        ok = write_line(util::json_text(line) + "\n");
        if (!ok) err = "cannot write the request log '" + opt.log_path + "'";
    }
    ::close(fd);
    if (ok && r.failures > 0) {
        std::string why;
        for (const auto & [reason, n] : reasons) why += (why.empty() ? "" : "; ") + std::to_string(n) + " x " + reason;
        err = std::to_string(r.failures) + " of " + std::to_string(reqs.size()) + " requests got no verdict (" + why +
              "); the verdicts obtained are in " + opt.log_path + ": run the same command again to ask only the others";
        return false;
    }
    return ok;
}

} // namespace reap

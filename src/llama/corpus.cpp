// reap corpus reading: JSONL calibration corpora and plain text files,
// tokenized with a model's vocabulary (messages through its chat template).
// See corpus.h.
#include "llama/corpus.h"
#include "util/file.h"
#include "util/path.h"

#include "chat.h"
#include "common.h"
#include "llama.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <functional>
#include <map>
#include <sstream>

namespace reap {

static int domain_index(corpus & out, std::map<std::string, int> & index, const std::string & name) {
    auto it = index.find(name);
    if (it == index.end()) {
        it = index.emplace(name, (int) out.domains.size()).first;
        out.domains.push_back(name);
    }
    return it->second;
}

struct chat_renderer::impl {
    common_chat_templates_ptr tmpls;
};

chat_renderer::chat_renderer(const llama_model * model) : model_(model) {}
chat_renderer::~chat_renderer() = default;

bool chat_renderer::init(std::string & err) {
    p_ = std::make_unique<impl>();
    p_->tmpls = common_chat_templates_init(model_, "");
    if (!p_->tmpls) {
        p_.reset();
        err = "cannot initialise the model's chat template";
        return false;
    }
    return true;
}

bool chat_renderer::render(const nlohmann::json & messages, bool add_generation_prompt, std::string & out,
                           std::string & err) {
    if (!ready() && !init(err)) return false;
    try {
        common_chat_templates_inputs in;
        in.messages              = common_chat_msgs_parse_oaicompat(common_json::parse(messages.dump()));
        in.add_generation_prompt = add_generation_prompt;
        in.use_jinja             = true;
        out = common_chat_templates_apply(p_->tmpls.get(), in).prompt;
    } catch (const std::exception & e) {
        err = std::string("cannot render messages through the chat template: ") + e.what();
        return false;
    }
    return true;
}

bool model_has_chat_template(const llama_model * model) { return llama_model_chat_template(model, nullptr) != nullptr; }

// The JSONL reader over a source of lines: next(line) gives the next line
// (without its '\n') and false at the end; read_error is checked at the end.
using line_source = std::function<bool(std::string &)>;

static bool read_jsonl_lines(const std::string & path, const line_source & next, const llama_model * model,
                             const corpus_options & opt, corpus & out, std::string & err) {
    if (opt.shard_count == 0 || opt.shard_index >= opt.shard_count) {
        err = "shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) +
              " is not valid (need 0 <= i < n)";
        return false;
    }
    if (opt.max_tokens < 0 || opt.max_tokens_per_domain < 0) {
        err = "token caps must not be negative";
        return false;
    }
    out = corpus();
    out.jsonl = true;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    chat_renderer chat(model);
    std::map<std::string, int> index;
    std::vector<int64_t> dom_used;  // tokens kept per domain (for the caps)
    int64_t used = 0;
    std::string raw;
    size_t line_no = 0;
    while (next(raw)) {
        ++line_no;
        const std::string where = path + ":" + std::to_string(line_no);
        corpus_line cl;
        bool blank = false;
        if (!parse_corpus_line(raw, where, cl, blank, err)) {
            return false;
        }
        if (blank) {
            continue;
        }
        ++out.n_lines_total;
        corpus_sample s;
        s.line = line_no;
        s.hash = cl.hash;
        if (s.hash % opt.shard_count != opt.shard_index) {
            continue;
        }
        ++out.n_selected;
        s.domain = domain_index(out, index, cl.domain);
        if (dom_used.size() < out.domains.size()) dom_used.resize(out.domains.size(), 0);
        // What the caps leave for this sample (INT64_MAX: no cap).
        int64_t room = INT64_MAX;
        if (opt.max_tokens > 0) room = std::min(room, opt.max_tokens - used);
        if (opt.max_tokens_per_domain > 0) room = std::min(room, opt.max_tokens_per_domain - dom_used[s.domain]);
        if (room <= 0) {
            ++out.n_untokenized;
            continue;
        }
        if (cl.has_text) {
            s.tokens = common_tokenize(vocab, cl.text, true, false);
        } else {
            std::string rendered;
            if (!chat.ready() && !chat.init(err)) {
                err += " (needed by " + where + ")";
                return false;
            }
            if (!chat.render(cl.messages, opt.add_generation_prompt, rendered, err)) {
                err = where + ": " + err;
                return false;
            }
            // The template writes special tokens as text: parse them as such.
            s.tokens = common_tokenize(vocab, rendered, true, true);
        }
        if (s.tokens.empty()) {
            ++out.n_empty;
            continue;
        }
        if ((int64_t) s.tokens.size() > room) {
            s.tokens.resize((size_t) room);
            s.tokens.shrink_to_fit();
        }
        used += (int64_t) s.tokens.size();
        dom_used[s.domain] += (int64_t) s.tokens.size();
        out.samples.push_back(std::move(s));
    }
    return true;
}

bool read_jsonl_corpus(const std::string & path, const std::string & text, const llama_model * model,
                       const corpus_options & opt, corpus & out, std::string & err) {
    std::istringstream lines(text);
    const line_source next = [&](std::string & l) { return (bool) std::getline(lines, l); };
    return read_jsonl_lines(path, next, model, opt, out, err);
}

bool read_plain_text(const std::string & path, std::string text, const llama_model * model,
                     const corpus_options & opt, corpus & out, std::string & err) {
    (void) path;
    (void) err;
    out = corpus();
    out.jsonl = false;
    if (!text.empty() && text.back() == '\n') {
        text.pop_back();  // as llama.cpp's -f does
    }
    out.domains.push_back(opt.plain_domain);
    out.n_lines_total = 1;
    corpus_sample s;
    s.hash   = fnv1a64(text);
    s.tokens = common_tokenize(llama_model_get_vocab(model), text, true, false);
    if (s.tokens.empty()) {
        out.n_empty = 1;
    } else {
        out.samples.push_back(std::move(s));
    }
    return true;
}

// Lines of a file through stdio's getline (its buffer grows to the longest line).
struct file_lines {
    FILE *  f   = nullptr;
    char *  buf = nullptr;
    size_t  cap = 0;
    bool    failed = false;
    file_lines() = default;
    file_lines(const file_lines &) = delete;
    file_lines & operator=(const file_lines &) = delete;
    ~file_lines() { close(); }
    void close() {
        free(buf);
        buf = nullptr;
        if (f) fclose(f);
        f = nullptr;
    }
    bool next(std::string & line) {
        const ssize_t n = ::getline(&buf, &cap, f);
        if (n < 0) {
            failed = ferror(f) != 0;
            return false;
        }
        line.assign(buf, (size_t) n);
        if (!line.empty() && line.back() == '\n') line.pop_back();
        return true;
    }
};

bool read_corpus_file(const std::string & path, const llama_model * model, const corpus_options & opt,
                      corpus & out, std::string & err) {
    file_lines fl;
    const int fd = util::open_input(path, err, "corpus");   // a FIFO is refused, not waited on
    if (fd < 0) return false;
    fl.f = fdopen(fd, "rb");
    if (!fl.f) {
        ::close(fd);
        err = "cannot open corpus '" + path + "': " + strerror(errno);
        return false;
    }
    // The first non-blank line decides JSONL or plain text.
    std::string first, l;
    while (first.find_first_not_of(" \t\r\n") == std::string::npos && fl.next(l)) first = l;
    if (fl.failed) {
        err = "read error in corpus '" + path + "': " + strerror(errno);
        return false;
    }
    if (looks_like_jsonl_corpus(path, first)) {
        rewind(fl.f);
        const line_source next = [&](std::string & line) { return fl.next(line); };
        if (!read_jsonl_lines(path, next, model, opt, out, err)) return false;
        if (fl.failed) {
            err = "read error in corpus '" + path + "': " + strerror(errno);
            return false;
        }
        return true;
    }
    fl.close();
    std::string text;
    if (!util::read_file(path, "corpus", text, err)) return false;
    return read_plain_text(path, std::move(text), model, opt, out, err);
}

}  // namespace reap

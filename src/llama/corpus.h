// reap corpus reading: a calibration corpus (JSONL, one sample per line, each
// tagged with a domain; see DESIGN.md) or a plain text file, tokenized with a
// model's vocabulary. `messages` samples are rendered through the model's own
// Jinja chat template (tokenizer.chat_template, via llama.cpp's common/chat.h,
// reasoning_content included) and tokenized with special tokens parsed, since
// the template writes them as text.
//
//   {"domain": "code", "text": "..."}
//   {"domain": "ja", "messages": [{"role": "user", "content": "..."},
//                                 {"role": "assistant", "content": "...", "reasoning_content": "..."}]}
//
// Sharding: `shard i/n` keeps the samples whose hash (FNV-1a 64 of the
// sample's JSON line, surrounding whitespace and a trailing CR removed) is
// i mod n. The selection depends only on the sample's own bytes, never on
// its position, so shards of one corpus are disjoint, cover it, and stay
// stable when lines are reordered or other samples are added.
//
// Streaming: read_corpus_file() reads a JSONL corpus a line at a time and
// tokenizes a sample only while the token caps (corpus_options::max_tokens,
// max_tokens_per_domain) still let some of it through, keeping just those
// tokens; past the caps the remaining lines are still parsed (validated,
// counted, their domains listed) but not tokenized. Memory is the longest line
// plus the kept tokens, whatever the file's size. The kept tokens are exactly
// what calibrate's windows take from the whole tokenization, so the selection
// is the same as tokenizing everything and capping afterwards.
//
// Errors are values (false + a message naming file and line); nothing here exits.
#pragma once

#include "corpus/corpus_line.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct llama_model;

namespace reap {

struct corpus_sample {
    int                  domain = 0;   // index into corpus::domains
    size_t               line   = 0;   // 1-based line in the file (0 for plain text)
    uint64_t             hash   = 0;   // FNV-1a 64 of the sample's line
    std::vector<int32_t> tokens;
};

struct corpus {
    bool                       jsonl = false;   // false: a plain text file (one sample)
    std::vector<std::string>   domains;         // first-seen order (over selected samples)
    std::vector<corpus_sample> samples;         // selected samples, file order
    size_t n_lines_total = 0;  // samples in the file (before sharding)
    size_t n_empty       = 0;  // selected samples that tokenized to nothing (dropped)
    size_t n_selected    = 0;  // samples in the shard (before the caps)
    size_t n_untokenized = 0;  // selected samples not tokenized: the caps were met
};

struct corpus_options {
    uint32_t    shard_index = 0;  // keep samples with hash % shard_count == shard_index
    uint32_t    shard_count = 1;
    std::string plain_domain = "text";  // the domain of a plain text file
    // Token caps on a JSONL corpus (0: none), applied in file order as calibrate
    // applies them: a sample keeps min(its tokens, what is left of the total
    // cap, what is left of its domain's cap) tokens; a sample left with none is
    // dropped. A plain text file is one sample and is never cut here.
    int64_t max_tokens            = 0;
    int64_t max_tokens_per_domain = 0;
    // `messages` rendered with the template's generation prompt after them
    // (the samples are prompts to continue: reap eval --generate)
    bool add_generation_prompt = false;
};

// The model's own chat template (tokenizer.chat_template) through llama.cpp's
// common/chat.h, initialised once: every `messages` sample is rendered here.
class chat_renderer {
  public:
    explicit chat_renderer(const llama_model * model);
    ~chat_renderer();
    chat_renderer(const chat_renderer &) = delete;
    chat_renderer & operator=(const chat_renderer &) = delete;
    bool ready() const { return p_ != nullptr; }
    bool init(std::string & err);
    // messages: an array of {"role", "content", ...}; out: the template's text,
    // special tokens written as text (tokenize it with them parsed).
    bool render(const nlohmann::json & messages, bool add_generation_prompt, std::string & out, std::string & err);

  private:
    struct impl;
    std::unique_ptr<impl> p_;
    const llama_model *   model_;
};

// Whether the model carries a chat template.
bool model_has_chat_template(const llama_model * model);

// Reads a JSONL corpus already in memory (text = the whole file), tokenizing
// the selected samples (within the caps) with BOS added as the vocabulary asks.
bool read_jsonl_corpus(const std::string & path, const std::string & text, const llama_model * model,
                       const corpus_options & opt, corpus & out, std::string & err);

// A plain text file as one sample, tokenized the way llama.cpp's tools read
// `-f FILE`: one trailing newline dropped, BOS added as the vocabulary asks,
// special tokens not parsed.
bool read_plain_text(const std::string & path, std::string text, const llama_model * model,
                     const corpus_options & opt, corpus & out, std::string & err);

// Reads `path` and dispatches on looks_like_jsonl_corpus() (which sees only the
// first non-blank line): a JSONL corpus is streamed from the file, a plain text
// file is read whole.
bool read_corpus_file(const std::string & path, const llama_model * model, const corpus_options & opt,
                      corpus & out, std::string & err);

}  // namespace reap

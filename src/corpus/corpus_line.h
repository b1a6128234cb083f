// reap corpus lines: the JSONL calibration corpus format (see DESIGN.md), one
// sample a line, parsed and checked without a vocabulary. Tokenizing is
// llama.cpp's (src/llama/corpus.h); everything a hostile file can get wrong in
// its own bytes is decided here, in the core, where the fuzzer reaches it.
//
//   {"domain": "code", "text": "..."}
//   {"domain": "ja", "messages": [{"role": "user", "content": "..."}, ...]}
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace reap {

// FNV-1a 64 of `s` (the shard hash of a sample's line).
uint64_t fnv1a64(const std::string & s);

// Whether a file's contents are a corpus: the path ends in .jsonl, or the
// first non-blank line is a JSON object with "domain" and "text"/"messages".
bool looks_like_jsonl_corpus(const std::string & path, const std::string & text);

// One sample line, checked.
struct corpus_line {
    std::string    line;      // the line without surrounding whitespace (what the hash covers)
    uint64_t       hash = 0;  // fnv1a64(line)
    std::string    domain;    // non-empty
    bool           has_text = false;
    std::string    text;      // when has_text
    nlohmann::json messages;  // an array, when !has_text
};

// Parses one line of a JSONL corpus (without its '\n'). A blank line sets
// `blank` and returns true. Otherwise the line must be a JSON object with a
// non-empty "domain" string and exactly one of a "text" string or a
// "messages" array; on failure `err` is `where` + what is wrong.
bool parse_corpus_line(const std::string & raw, const std::string & where, corpus_line & out, bool & blank,
                       std::string & err);

}  // namespace reap

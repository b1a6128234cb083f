// The needle-in-a-haystack grid of reap eval --needle, the parts that need no
// llama.cpp: the cells (length x depth x trial), the seeded random values, the
// sentence boundary a needle goes in at, and what counts as an exact answer.
// src/llama/needle.cpp builds the prompts and decodes; these rules are tested
// in the core.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace reap {

// The needle sentence is k_needle_lead + " " + value + "."; the question asks
// for it (a user turn through a chat template) or, without a template, the
// lead-in is repeated at the end for the model to complete.
extern const char * const k_needle_lead;      // "The secret code is"
extern const char * const k_needle_question;  // the question of the chat form

// A value: three capital letters, '-', four digits ("KVX-7391"), drawn from
// the 64-bit Mersenne Twister (the same numbers on every platform).
std::string needle_value(uint64_t seed, uint64_t index);

// Where a needle goes at depth d (0..1) in a haystack of pieces.size() tokens
// (pieces: each token's text): the boundary i (the needle goes before token i,
// 0 <= i <= n) nearest to d x n among i = 0, i = n and every i whose previous
// piece ends a sentence ('.', '!', '?' or a newline, maybe followed by spaces);
// the lower one on a tie.
size_t needle_boundary(const std::vector<std::string> & pieces, double depth);

// Exact match: the decoded text, surrounding whitespace removed, is the value,
// or the value followed by '.' (the needle sentence's own end).
bool needle_matches(const std::string & decoded, const std::string & value);

// The default lengths: 64, 128, ... doubling while a length is at most half
// the trained context, the largest five of them (4K..64K for 128K).
std::vector<int> default_needle_lengths(int n_ctx_train);
extern const std::vector<double> k_default_needle_depths;  // 0.15, 0.5, 0.85

struct needle_cell {
    int         length = 0;    // haystack tokens
    double      depth  = 0;
    int         trial  = 0;    // 0 .. needles-1
    std::string value;
    size_t      insert_at = 0; // haystack token the needle goes before
    size_t      n_prompt  = 0; // tokens of the whole prompt
    int         n_answer  = 0; // tokens decoded: the value's own
};

struct needle_answer {
    std::string text;
    bool        match = false;
};

struct needle_model {
    std::string                name;    // "base", a pruned file, or a plan
    bool                       masked = false;
    std::vector<needle_answer> answers; // [cell]
    size_t n_exact() const;
};

struct needle_report {
    uint64_t                  seed = 0;
    bool                      chat = false;  // the question went through the model's chat template
    std::string               haystack_path;
    std::vector<needle_cell>  cells;
    std::vector<needle_model> models;  // [0] is the base
};

// The cells in order: length, then depth, then trial; values drawn with
// needle_value(seed, cell index).
std::vector<needle_cell> needle_cells(const std::vector<int> & lengths, const std::vector<double> & depths,
                                      int needles, uint64_t seed);


// {"seed", "chat", "haystack", "cells": [{"length", "depth", "trial", "value", "insert_at",
//  "prompt_tokens", "answer_tokens", "models": [{"name", "masked", "text", "match"}]}],
//  "exact": [{"name", "masked", "n_exact", "n_cells"}]}
nlohmann::ordered_json needle_report_to_json(const needle_report & r);

// The grid as a table: a row per cell, a column per model (a mark per cell:
// "ok" exact, "x" not), then "n/m exact" per model; the models named under it.
void needle_report_print(FILE * out, const needle_report & r);

} // namespace reap

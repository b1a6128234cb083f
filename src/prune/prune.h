// reap prune / reap verify, as a library: build the output of a pruned model
// from a source model and a plan, and audit an output against both.
//
// Pruning is byte slicing (width plans aside: their down projections are
// requantised, prune/width.h). For every tensor the moe layout table marks as
// carrying the expert axis (moe::slice_kind != none), output expert i is
// source expert keep[i]: the expert's bytes [e*S, (e+1)*S), S = nbytes /
// n_expert, are concatenated in keep order. This holds for every ggml type
// because the expert axis is the outermost dimension of the tensor (slabs:
// ne[2]; router rows and per-expert biases: ne[1]; router / selection bias and
// scales: ne[0], where S is one element). Every other tensor is copied
// unchanged, `<arch>.expert_count` becomes n_keep (keeping the value type the
// source used), and unless `stamp` is off the provenance keys below are
// appended. With stamp off, an identity plan reproduces the source file byte
// for byte.
//
// The spec refers to the source files by (path, offset, length) pieces, so
// writing it with gguf::write_output streams: memory is O(tensors x n_keep)
// piece descriptors plus the writer's fixed copy buffer, independent of the
// size of the weights.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "gguf/gguf.h"
#include "moe/pruned.h"
#include "plan/plan.h"
#include "prune/width.h"
#include "util/sha256.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace reap::prune {

// The provenance keys, the stamp options and the expert_count rule belong to
// the pruned model's header (moe/pruned.h); prune uses them under its own names.
using moe::k_key_plan_sha256;
using moe::k_key_source_expert_count;
using moe::k_key_version;
using moe::k_key_plan_other_model;
using moe::k_key_source_expert_ids;
using prune_options = moe::stamp_options;
using moe::set_expert_count;

// Builds the output of pruning `m` with `p`. Validates the plan against the
// model first (validate_plan) and classifies the tensors (moe layout table);
// either failing fails here with their message. Tensors keep their order,
// names, types; KVs keep their order (split.* keys dropped: the writer adds
// them when splitting): the header is moe::pruned_header's, the one rule
// that also sizes pruned models (moe::pruned_files) for `reap plan --budget`
// and `reap inspect`. Callers: `reap prune` (then write_output).
bool make_pruned_spec(const gguf::model & m, const plan & p, const prune_options & opts,
                      gguf::output_spec & out, std::string & err);

// Same, from a layout already classified by plan::model_layout (saves the
// classification when the caller has it; the plan is still validated).
bool make_pruned_spec(const gguf::model & m, const moe::layout & lay, const plan & p,
                      const prune_options & opts, gguf::output_spec & out, std::string & err);

// Same, for width plans with a down type (prune/width.h: gate/up rows kept
// byte for byte, down requantised; plans without a width ignore `wopts`).
struct width_options;
// The model facts a plan is validated against before pruning: facts_of(lay),
// with the width facts for width plans, the down block being that of the
// requested down type when there is one.
plan_model_facts prune_facts(const gguf::model & m, const moe::layout & lay, const plan & p, const width_options & wopts);
bool make_pruned_spec(const gguf::model & m, const moe::layout & lay, const plan & p, const prune_options & opts,
                      const width_options & wopts, gguf::output_spec & out, std::string & err);

// ---- SHA256SUMS (sha256sum -c format): util/sha256.h's, under prune's names ----
using util::read_sha256sums;
using util::update_sha256sums;
using util::sums_path_for;

// ---- audit -------------------------------------------------------------------

struct verify_options {
    // Check SHA256SUMS beside the output (its directory's SHA256SUMS, which
    // must list every shard of the output). Missing file = failure.
    bool        check_sums = true;
    std::string sums_path;          // empty: <dir of output>/SHA256SUMS
    // When the output carries reap.plan.sha256 it must equal this (the hash of
    // the plan file given to verify); empty skips that comparison.
    std::string plan_sha256;
    // Width cuts whose down type needs an importance matrix (needs_importance):
    // the one the cut used, per kept expert (prune/imatrix_slice.h
    // kept_importance of the same source imatrix). Unset: such a tensor cannot
    // be audited (an error, not a difference).
    down_importance importance;
};

struct verify_report {
    uint64_t n_tensors = 0;          // tensors compared
    uint64_t n_sliced = 0;           // of which sliced along the expert axis
    uint64_t bytes_compared = 0;     // output tensor bytes compared with the source
    uint64_t n_kvs = 0;              // KVs compared
    uint32_t n_shards = 0;           // files of the output
    bool     stamped = false;        // output carries reap.* keys
    uint64_t n_sums_checked = 0;     // SHA256SUMS lines checked
    // width plans: the down tensors that are not byte slices of the source but
    // its kept columns requantised, audited against a fresh requantisation
    // (bytes_compared counts the byte-exact parts only)
    uint64_t n_requantised = 0;
    uint64_t bytes_requantised = 0;
    // When verify_pruned fails: true when the output could be opened and is
    // not what it should be (a byte, shape or KV differs; the file is damaged,
    // truncated or not GGUF; a shard is missing; SHA256SUMS beside it is
    // missing or disagrees); false when the check could not be made (the
    // source or the plan is unusable, the output cannot be opened, an explicit
    // sums_path cannot be read, the output is a file of the source).
    bool     differs = false;
};

// Re-reads the output at `out_path` (a single file or the first shard of a
// split set) and proves that it is the pruning of `src` by `p`:
//   * the plan is valid for `src`;
//   * the output has exactly the source's tensors, in the same order, with the
//     same types, and shapes equal except the expert axis of sliced tensors,
//     which is n_keep;
//   * every byte of every tensor equals the source's: unsliced tensors whole,
//     sliced tensors expert by expert (output expert i == source expert keep[i]);
//   * the KVs equal the source's, in order, except: <arch>.expert_count is
//     n_keep, split.* keys (checked by the reader), and reap.* keys, which are
//     either all absent or exactly the provenance keys (reap.plan.sha256
//     matching opts.plan_sha256 when given, reap.source.expert_count = source
//     n_expert);
//   * SHA256SUMS lists every output file with its current hash.
// Independent of make_pruned_spec's code path: it re-derives every expected
// byte range from the layout table and the plan. Returns false at the first
// difference with a message naming it ("tensor 'blk.3.ffn_up_exps.weight':
// output expert 5 (source expert 17) differs at byte 1234 of the slab").
bool verify_pruned(const gguf::model & src, const plan & p, const std::string & out_path,
                   const verify_options & opts, verify_report & report, std::string & err);

} // namespace reap::prune

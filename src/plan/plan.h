// reap plan format: the keep-list per MoE layer that `reap plan` writes and
// `reap prune` / `reap verify` read (DESIGN.md, "Plan (JSON)").
//
//   {
//     "format": "reap-plan", "version": 1,
//     "model":  {"arch": "qwen3moe", "n_layer": 48, "n_expert": 128, "n_expert_used": 8},
//     "n_keep": 64,
//     "layers": [ {"layer": 3, "keep": [0, 5, 9, ...]}, ... ],
//     "provenance": { ... free-form ... }
//   }
//
// Version 2 adds width pruning (channels inside every expert); expert-only
// plans are still written as version 1, and every version is read:
//
//     "width": {"n_ff": 768, "keep": 512},
//     "layers": [ {"layer": 3, "keep": [0, 5, ...], "channels": [[0, 2, 3, ...], [1, 2, ...], ...]}, ... ]
//
// Version 3 (what width plans are written as) gives the same channels as one
// bitmap per kept expert, because id lists do not scale: at Kimi-K3 size (92
// MoE layers x 720 kept experts x 1536 of 3072 channels) a version 2 plan is
// 473 MB of JSON (more than the reader's 256 MiB cap) against 51 MB
// (docs/commands.md has the measurements):
//
//     "layers": [ {"layer": 3, "keep": [0, 5, ...], "channel_bitmaps": ["0f3a...", ...]}, ... ]
//
// channel_bitmaps[i] is ceil(n_ff / 8) bytes as 2 hex digits each (high
// nibble first): byte b holds channels 8b .. 8b+7, bit j (value 1 << j) set
// when channel 8b + j is kept; bits past n_ff are zero, exactly K are set.
//
// A model whose one shared expert is cut with the routed experts (llama4,
// moe::expert_width::shared_cut) also gives, in every layer object, the K
// channels of its shared expert as one bitmap of the same format:
//
//     {"layer": 3, "keep": [...], "channel_bitmaps": [...], "shared_channel_bitmap": "5a0f..."}
//
// width.n_ff is the source's <arch>.expert_feed_forward_length, width.keep
// (K) the output's: one width for every expert of the model (GGUF has one
// key). channels[i] lists the K source channels (rows of gate/up, columns of
// down) that output expert i (source expert keep[i]) keeps, ascending: the
// output's channel j of that expert is source channel channels[i][j].
//
// Output expert i of layer L is source expert layers[L].keep[i]: the order of
// `keep` is the order in the output (planners emit ascending order; any order
// is valid).
//
// Two levels of checking:
//   * parse_plan / read_plan check the document itself: every field present
//     with the right JSON type, integers in range, `layers` sorted by layer
//     without duplicates, each keep list of length n_keep with unique ids in
//     [0, n_expert). A plan that parses is internally consistent.
//   * validate_plan checks the plan against a model: same arch / n_layer /
//     n_expert / n_expert_used, exactly the model's MoE layers,
//     n_expert_used <= n_keep <= n_expert, a width plan's n_ff equal to the
//     model's expert width and K a multiple of the block size of every expert
//     down tensor's type (its columns are requantised in blocks of that
//     size), shared channels in every layer exactly when the model's shared
//     expert is cut with the routed ones (plan_model_facts::shared_cut), and for group-limited routers
//     (<arch>.expert_group_count > 1) the same number kept in every group, the
//     experts of each group kept together in group order (llama.cpp assigns
//     output expert i to group i / (n_keep / n_group)), at least 2 per group
//     (llama.cpp scores a group by its best two experts) and enough in the
//     n_group_used selected groups to pick n_expert_used experts.
// Every message names the layer (and expert) involved.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "gguf/gguf.h"
#include "moe/identity.h"
#include "moe/layout.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace reap {

constexpr const char * k_plan_format  = "reap-plan";
constexpr int          k_plan_version = 3;        // the newest version read and written (width plans)
constexpr int          k_plan_version_experts = 1;  // what plans without a width are written as

// The version 3 bitmap of a channel list (ids in [0, n_ff); others are left out).
std::string channel_bitmap(const std::vector<int64_t> & channels, int64_t n_ff);
// Reads a version 3 bitmap of n_ff channels that must keep exactly K into
// `out` (ascending ids). False, with `err` saying what is wrong (length, a
// character that is not a hex digit, a bit past n_ff, a count other than K),
// for the caller to prefix with where the string is.
bool parse_channel_bitmap(const std::string & s, int64_t n_ff, int64_t K, std::vector<int64_t> & out, std::string & err);

// One MoE layer: its block index and the source experts kept, in output order.
struct plan_layer {
    int                  layer = -1;
    std::vector<int64_t> keep;
    // Width plans only (plan::width_keep > 0): channels[i] = the source
    // channels output expert i keeps, ascending, width_keep of them. Empty
    // in plans without a width.
    std::vector<std::vector<int64_t>> channels;
    // Width plans of a model whose one shared expert is sized with the routed
    // experts' width (llama4; moe::expert_width::shared_cut): the K source
    // channels of the shared expert (ffn_{gate,up,down}_shexp) kept, ascending.
    // Empty otherwise. Version 3 writes it as "shared_channel_bitmap" (one
    // bitmap, as channel_bitmaps) in the layer's object.
    std::vector<int64_t> shared_channels;
};

struct plan {
    // "model": the header of the model the plan was made for.
    std::string arch;
    int64_t     n_layer = 0;        // <arch>.block_count
    int64_t     n_expert = 0;       // <arch>.expert_count of the source
    int64_t     n_expert_used = 0;  // <arch>.expert_used_count
    // "model.header_sha256": the fingerprint of the model the plan was made
    // for (model_header_sha256); "" in plans written before it existed.
    std::string model_sha256;
    // "model.router_sha256" and "model.n_vocab": the rest of the model's
    // identity (moe/identity.h: its router weights, the same in every
    // quantisation of it); "" and 0 in plans written before they existed.
    std::string router_sha256;
    int64_t     n_vocab = 0;

    int64_t                 n_keep = 0;   // experts kept in every MoE layer
    // "width": the source's expert intermediate width and the width every
    // kept expert is cut to (0, 0: the plan keeps every channel).
    int64_t                 width_n_ff = 0;
    int64_t                 width_keep = 0;
    std::vector<plan_layer> layers;       // ascending by layer
    nlohmann::json          provenance = nlohmann::json::object();

    // The entry for block `layer`, or nullptr.
    const plan_layer * find_layer(int layer) const;
    // Whether the plan cuts channels inside the experts.
    bool has_width() const { return width_keep > 0; }
    // Whether the width cut takes the shared expert too (llama4; validate_plan
    // requires shared channels in every layer or in none).
    bool cuts_shared_expert() const { return has_width() && !layers.empty() && !layers.front().shared_channels.empty(); }
};

// Parses a plan document. `name` stands for the source in messages (a path).
// Fails with a message naming the field (and layer) on: not JSON, a missing
// field or one of the wrong type, format != "reap-plan", an unsupported
// version, non-positive counts, n_keep > n_expert, a keep list whose length is
// not n_keep, an id out of [0, n_expert) or repeated, a layer index out of
// [0, n_layer) or repeated, layers not ascending; in a width plan (version 2
// or 3 with "width"): K out of [1, n_ff], a layer without its "channels"
// (version 2) / "channel_bitmaps" (version 3), or with the other version's
// field, or a count of lists other than n_keep; a list whose length is not K,
// a channel out of [0, n_ff), not ascending or repeated (version 2); a bitmap
// that is not a string of 2 * ceil(n_ff / 8) hex digits, sets a bit past
// n_ff or other than K bits (version 3), and so a "shared_channel_bitmap";
// "width" in a version 1 plan, channels (shared ones too) in a plan without
// "width", "shared_channel_bitmap" before version 3. Whether a model needs
// shared channels is validate_plan's. Unknown top-level keys are ignored (forward
// compatibility); "provenance" is optional (default {}).
bool parse_plan(const std::string & text, const std::string & name, plan & out, std::string & err);

// The fingerprint a plan records of its model: SHA-256 over the model's
// logical GGUF header: every KV (key, type, value bytes) and every tensor's
// name and shape, both in name order. Only the header: it is already in
// memory (nothing is read, whatever the model's size: hashing 600 GB of
// weights would take longer than the prune), it tells apart models of the same
// shape whose metadata differ (name, tokenizer, any key), and it is the same
// for a model, a re-split copy and a quantised copy of it (split.*, quantize.*,
// general.file_type, general.quantization_version and tensor types are left
// out, and llama-quantize reorders tensors), so a plan made on the F16 file
// prunes its quantised copies. Two models differing only in weight values
// share it.
std::string model_header_sha256(const gguf::model & m);

// Records in `p` which model it is for: model_header_sha256(m) and m's
// identity (moe::identity_of: router hash, vocabulary size). Every writer of
// plans calls it. Fails when the routers cannot be read.
bool stamp_plan_model(plan & p, const gguf::model & m, std::string & err);
// The same from m's identity already read (moe::identity_of), reading no tensor.
void stamp_plan_model(plan & p, const gguf::model & m, const moe::model_identity & id);

// Checks that plan `p` was made for model `m`: the same
// model_header_sha256 and the same identity (moe/identity.h: arch, blocks,
// experts, vocabulary, router weights), each where the plan records it. A
// plan without a fingerprint, or with the header one only (written before
// the identity existed), is accepted with a `warning`; another model's plan
// is refused ("... was made for another model ...", both values named) unless
// `allow_other`, when it is accepted with a `warning` and `other` set.
// `plan_name` and `model_name` name the two in messages.
bool check_plan_model(const plan & p, const gguf::model & m, bool allow_other, const std::string & plan_name,
                      const std::string & model_name, std::string & warning, std::string & err);
bool check_plan_model(const plan & p, const gguf::model & m, bool allow_other, const std::string & plan_name,
                      const std::string & model_name, std::string & warning, bool & other, std::string & err);

// The rule check_plan_model applies (prune and eval both use it): `mismatch`
// "" when `p` was made for `m` or records no (or only part of its)
// fingerprint (then `warning` says so), else the message that it was made for
// another model (for callers with no --allow-other-model). False (with `err`)
// only when m's identity cannot be read.
bool plan_model_mismatch(const plan & p, const gguf::model & m, const std::string & plan_name, const std::string & model_name,
                         std::string & mismatch, std::string & warning, std::string & err);

// Reads and parses the plan at `path` (at most 256 MiB).
bool read_plan(const std::string & path, plan & out, std::string & err);
// The same, with the SHA-256 of the bytes parsed (what a run that reads the
// plan once measured: the file may change after).
bool read_plan(const std::string & path, plan & out, std::string & sha256, std::string & err);

// The plan as a JSON document (fields in the order of the format above).
nlohmann::json plan_to_json(const plan & p);

// The plan as write_plan writes it (pretty-printed, one keep list per line).
std::string plan_text(const plan & p);

// Writes the plan to `path` (pretty-printed, one keep list per line) through
// util::durable_file (temp file beside it, fsync, rename, fsync the
// directory). Refuses to replace an existing file unless `force`.
bool write_plan(const plan & p, const std::string & path, bool force, std::string & err);

// SHA-256 (64 lowercase hex digits) of the plan file's bytes, as recorded in
// pruned models' reap.plan.sha256.
bool plan_file_sha256(const std::string & path, std::string & hex, std::string & err);

// What validate_plan needs to know about a model.
struct plan_model_facts {
    std::string      arch;
    int64_t          n_layer = 0;
    int64_t          n_expert = 0;
    int64_t          n_expert_used = 0;
    int64_t          n_group = 0;      // <arch>.expert_group_count (0/1: not group-limited)
    int64_t          n_group_used = 0; // <arch>.expert_group_used_count
    std::vector<int> moe_layers;       // ascending
    // For width plans (moe::expert_width_of): the experts' intermediate width
    // (0: the layout cannot be cut in width, `width_refusal` says why) and the
    // largest block size among the expert down tensors' types.
    int64_t          n_ff_exp = 0;
    int64_t          down_block = 1;
    std::string      down_type_name = "f32";
    std::string      width_refusal;
    // S of shared experts kept whole by their count (moe::expert_width); K must divide it
    int64_t          shared_width = 0;
    // the one shared expert is cut with the routed experts (llama4,
    // moe::expert_width::shared_cut): a width plan lists its shared_channels
    bool             shared_cut = false;
};

// Facts from a classified layout (moe::classify); the width facts stay unset.
plan_model_facts facts_of(const moe::layout & lay);
// The same with the width facts read from the model's tensors and KV.
plan_model_facts facts_of(const moe::layout & lay, const gguf::model & m);

// Why width K cannot be cut from experts whose down tensors have block size
// `block` (named by `type_name`), "" when it can: K must be a positive
// multiple of the block (the down tensor is requantised along its rows,
// whole blocks only).
std::string width_refusal(int64_t k, int64_t n_ff, int64_t block, const std::string & type_name);
// The same for a model's width facts `m` (n_ff_exp > 0), shared experts
// included (moe::shared_width_refusal): what plan --width, sweep --widths
// and validate_plan refuse.
std::string width_refusal(int64_t k, const plan_model_facts & m);

// Checks `p` against a model (see the file comment). The first problem found
// is reported, e.g. "plan: layer 7: expert 130 out of range [0, 128)" or
// "plan: layer 5 is not an MoE layer of the model (MoE layers: 1..47)" or
// "plan: layer 3: group-limited router (8 groups of 16): keeps 9 in group 0
// and 7 in group 1; every group must keep the same number".
bool validate_plan(const plan & p, const plan_model_facts & model, std::string & err);

// Classifies the tensors of a GGUF model with moe::classify (the pruning
// options). A thin wrapper over moe::layout_of (moe/layout_gguf.h).
bool model_layout(const gguf::model & m, moe::layout & out, std::string & err);

// model_layout + facts_of + validate_plan.
bool validate_plan(const plan & p, const gguf::model & m, std::string & err);

} // namespace reap

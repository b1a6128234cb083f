// reap::saliency — the saliency archive: per domain, layer and expert, the
// statistics calibration collects (or an imatrix import provides), in memory
// and as a GGUF file (general.type = "reap.saliency"; see DESIGN.md).
//
// File format (all keys prefixed "reap.saliency."):
//   general.type                = "reap.saliency"
//   reap.saliency.version       u32   4 when the archive holds squared output norms (ean_sq_sum,
//                                     reap calibrate from this version on) or is a "weights"
//                                     archive (reap score), else 3 when it holds the shared
//                                     expert's channel statistics, else 2 when it holds channel
//                                     statistics, else 1
//                                     (an archive without them is written exactly as before;
//                                     every version is read; a reader that predates version 3
//                                     refuses such a file rather than dropping what it holds)
//   reap.saliency.domains       array[string]  domain names (unique, non-empty, <= 52 bytes)
//   reap.saliency.n_tokens      array[i64]     tokens seen per domain (same order)
//   reap.saliency.metrics       string  "reap" | "energy" | "weights"  (the metric set, see below)
//   reap.saliency.model.arch          string  model fingerprint: architecture
//   reap.saliency.model.n_layer       u32     <arch>.block_count
//   reap.saliency.model.n_expert      u32     <arch>.expert_count
//   reap.saliency.model.n_expert_used u32     <arch>.expert_used_count (0 = unknown; largest of a per-layer array)
//   reap.saliency.model.moe_layers    array[i32]  MoE block indices, ascending
//   reap.saliency.model.router_sha256 string  sha256 of the router bytes ("" = unknown)
//   reap.saliency.model.n_ff_exp      u32     version 2: channels per expert (the input width of
//                                              ffn_down_exps); absent or 0 = no channel statistics
//   reap.saliency.model.shared_channels bool  version 3: true = the shared expert's channel
//                                              statistics are present (absent = none; written
//                                              only as true, and only with n_ff_exp > 0)
//   any other reap.saliency.* key      free-form provenance (corpus_sha256, options, ...)
//   per domain D, F64 tensors of shape [n_expert, n_layer] (ne0 = n_expert), element
//   (layer l, expert e) at index l * n_expert + e; rows of non-MoE layers are zero:
//     metric set "reap":   D.count D.gate_sum D.reap_sum D.ean_sum D.max_norm
//     metric set "energy": D.count D.energy_sum        (archives from imatrix files)
//     metric set "weights": D.aimer                    (reap score: from the weights alone, no
//                           tokens; exactly one domain, n_tokens 0)
//   version 4, metric set "reap": D.ean_sq_sum as well (has_sq_norms)
//   with n_ff_exp > 0 (width saliency), per domain D, F64 tensors of shape
//   [n_ff_exp, n_expert, n_layer], element (l, e, c) at (l * n_expert + e) * n_ff_exp + c:
//     metric set "reap":   D.ch_energy D.ch_reap
//     metric set "energy": D.ch_energy
//   with shared_channels (version 3), per domain D, F64 tensors of shape [n_ff_exp, n_layer],
//   element (l, c) at l * n_ff_exp + c (archive::shared_channel_index); rows of non-MoE
//   layers are zero:
//     metric set "reap":   D.sh_energy D.sh_reap
//     metric set "energy": D.sh_energy
//
// Meaning (over the tokens routed to expert e in layer l):
//   count      number of routed tokens
//   gate_sum   Σ g             (g = the gate weight actually applied)
//   reap_sum   Σ g · ‖f(x)‖₂   (f = the expert's output before weighting)
//   ean_sum    Σ ‖f(x)‖₂
//   ean_sq_sum Σ ‖f(x)‖₂²      (version 4 on; MSAN's statistic)
//   aimer      mean|w| / sqrt(mean w²) over every element of the expert's gate, up and down
//              weights together (or its fused gate_up and down), dequantised by ggml: AIMER,
//              a property of the weights, not of any token (saliency/weight_scores.h)
//   max_norm   max ‖f(x)‖₂     (super-expert detection; merged with max)
//   energy_sum Σ ‖h‖₂²         (h = input to ffn_down_exps, from imatrix)
//   ch_energy  Σ h_c²          per channel c of h (llama-imatrix's in_sum2 of ffn_down_exps)
//   ch_reap    Σ g · |h_c| · ‖W_down[:,c]‖₂   (the REAP score of one channel: the norm of
//              its contribution to the expert's output, weighted by the gate)
//   sh_energy, sh_reap  the same for the layer's one shared expert, over every token of the
//              domain (it sees them all, with gate 1): h = the input to ffn_down_shexp,
//              W_down = blk.L.ffn_down_shexp.weight. Present only for a model whose shared
//              expert is cut with the routed experts (moe::expert_width::shared_cut: llama4,
//              whose loader sizes it with expert_feed_forward_length): a width cut to K
//              keeps its K channels of highest shared saliency. reap calibrate
//              --width-saliency collects them from the shared down projection's matrix
//              product; reap imatrix --width-saliency takes sh_energy from the
//              blk.L.ffn_down_shexp.weight entries (their in_sum2, one matrix).
//
// Errors are values (bool + message naming the file, domain, tensor or
// element); nothing here exits. No llama.cpp dependency.
#pragma once

#include "gguf/gguf.h"
#include "moe/identity.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap::saliency {

constexpr const char * k_general_type      = "reap.saliency";
constexpr uint32_t     k_version_sq_norms  = 4;    // squared output norms, or a "weights" archive
constexpr uint32_t     k_version_shared    = 3;    // and the shared expert's channel statistics
constexpr uint32_t     k_version           = 2;    // channel statistics may be present
constexpr uint32_t     k_version_experts   = 1;    // written for an archive without them, read as always
constexpr size_t       k_max_domain_bytes  = 52;   // so that "D.energy_sum" / "D.ch_energy" fit GGUF's 63-byte names
// Channel statistics hold at most this many values per domain and metric.
constexpr uint64_t     k_max_channel_values = 1ull << 31;

constexpr const char * k_key_type          = "general.type";
constexpr const char * k_key_version       = "reap.saliency.version";
constexpr const char * k_key_domains       = "reap.saliency.domains";
constexpr const char * k_key_n_tokens      = "reap.saliency.n_tokens";
constexpr const char * k_key_metrics       = "reap.saliency.metrics";
constexpr const char * k_key_arch          = "reap.saliency.model.arch";
constexpr const char * k_key_n_layer       = "reap.saliency.model.n_layer";
constexpr const char * k_key_n_expert      = "reap.saliency.model.n_expert";
constexpr const char * k_key_n_expert_used = "reap.saliency.model.n_expert_used";
constexpr const char * k_key_moe_layers    = "reap.saliency.model.moe_layers";
constexpr const char * k_key_router_sha256 = "reap.saliency.model.router_sha256";
constexpr const char * k_key_n_ff          = "reap.saliency.model.n_ff_exp";
constexpr const char * k_key_shared_channels = "reap.saliency.model.shared_channels";
// Conventional provenance keys (free-form; writers may add others under reap.saliency.).
constexpr const char * k_key_corpus_sha256 = "reap.saliency.corpus_sha256";
constexpr const char * k_key_options       = "reap.saliency.options";
constexpr const char * k_key_tool          = "reap.saliency.tool";

// Which statistics an archive holds.
enum class metric_set {
    reap,    // count, gate_sum, reap_sum, ean_sum, max_norm  (reap calibrate)
    energy,  // count, energy_sum                             (reap imatrix)
    weights, // aimer                                         (reap score: no calibration)
};
const char * metric_set_name(metric_set m);          // "reap" / "energy" / "weights"
bool parse_metric_set(const std::string & s, metric_set & out);

// Which model an archive was measured on.
struct fingerprint {
    std::string      arch;
    uint32_t         n_layer = 0;
    uint32_t         n_expert = 0;
    uint32_t         n_expert_used = 0;    // 0 = unknown (e.g. an imatrix import without the model)
    std::vector<int> moe_layers;           // ascending block indices
    std::string      router_sha256;        // 64 hex digits, "" = unknown
};

// The fingerprint of a model: arch, block_count, expert_count,
// expert_used_count (the largest element of a per-layer array), the MoE blocks
// and the sha256 of the bytes of their routers (blk.L.ffn_gate_inp.weight)
// concatenated in ascending L (streamed; memory does not grow with the
// model). Keys, blocks and routers are the MoE layout table's
// (moe::layout_of with moe::describe_options()). Fails, naming the key or
// tensor, when the model is not an MoE model the table can place.
bool model_fingerprint(const gguf::model & m, fingerprint & out, std::string & err);
// The same from an identity already read (moe::identity_of), reading nothing.
fingerprint fingerprint_of(const moe::model_identity & id);

// Checks that an archive measured on `archived` may be used for a model with
// fingerprint `model`: same arch, n_layer, n_expert, MoE layers; same
// n_expert_used and router hash where both are known. The message says which
// field differs and both values ("saliency archive is for another model:
// n_expert 64 (archive) vs 128 (model)").
bool fingerprints_match(const fingerprint & archived, const fingerprint & model, std::string & err);

// The statistics of one domain. Each vector holds n_layer * n_expert values
// (index l * n_expert + e) when its metric belongs to the archive's metric
// set, and is empty otherwise.
struct domain_stats {
    std::string         name;
    int64_t             n_tokens = 0;
    std::vector<double> count;
    std::vector<double> gate_sum;
    std::vector<double> reap_sum;
    std::vector<double> ean_sum;
    std::vector<double> max_norm;
    std::vector<double> energy_sum;
    std::vector<double> ean_sq_sum;   // archive::has_sq_norms only
    std::vector<double> aimer;        // metric set "weights"
    // channel statistics (empty unless the archive's n_ff > 0): n_layer * n_expert * n_ff values
    std::vector<double> ch_energy;
    std::vector<double> ch_reap;
    // the shared expert's channel statistics (empty unless archive::has_shared_channels):
    // n_layer * n_ff values, index l * n_ff + c (archive::shared_channel_index); the
    // same meanings as ch_energy / ch_reap over every token of the domain (the shared
    // expert sees them all, with gate 1), h the input to ffn_down_shexp
    std::vector<double> sh_energy;
    std::vector<double> sh_reap;
};

// The names of the tensors of a metric set, in file order: {"count", "gate_sum", ...}.
const std::vector<std::string> & metric_names(metric_set m);
// The names of the channel tensors of a metric set: {"ch_energy", "ch_reap"} / {"ch_energy"}.
const std::vector<std::string> & channel_metric_names(metric_set m);
// The names of the shared expert's channel tensors: {"sh_energy", "sh_reap"} / {"sh_energy"}.
const std::vector<std::string> & shared_metric_names(metric_set m);
// The vector of `d` holding metric `name` ("count", ..., "ch_energy", "ch_reap", "sh_energy",
// "sh_reap"), or nullptr for an unknown name.
std::vector<double> *       metric_data(domain_stats & d, const std::string & name);
const std::vector<double> * metric_data(const domain_stats & d, const std::string & name);

// An archive in memory.
struct archive {
    fingerprint               model;
    metric_set                metrics = metric_set::reap;
    std::vector<domain_stats> domains;      // in file order
    gguf::kv_store            provenance;   // other reap.saliency.* keys, in order
    uint32_t                  n_ff = 0;     // channels per expert of the channel statistics; 0 = none
    // Whether the channel statistics include the shared expert's (D.sh_energy,
    // D.sh_reap): only with n_ff > 0, for a model whose one shared expert is
    // n_ff channels wide and must be cut with the routed experts (llama4: its
    // loader sizes ffn_*_shexp with expert_feed_forward_length).
    bool                      has_shared_channels = false;
    // Whether the "reap" statistics include ean_sq_sum (Σ‖f‖², MSAN's
    // statistic): archives of reap calibrate from version 4 on. Older
    // archives are read without it, and --method msan is refused on them.
    bool                      has_sq_norms = false;

    // The per-expert metrics this archive holds: metric_names(metrics), and
    // ean_sq_sum with has_sq_norms.
    std::vector<std::string> expert_metric_names() const;
    size_t n_cells() const { return (size_t) model.n_layer * model.n_expert; }
    size_t index(int layer, int expert) const { return (size_t) layer * model.n_expert + (size_t) expert; }
    size_t n_channel_values() const { return n_cells() * n_ff; }
    // channel c of expert e in layer l, in the channel vectors
    size_t channel_index(int layer, int expert, int64_t c) const { return index(layer, expert) * n_ff + (size_t) c; }
    // the shared expert's statistics: n_layer * n_ff values, channel c of layer l
    size_t n_shared_channel_values() const { return has_shared_channels ? (size_t) model.n_layer * n_ff : 0; }
    size_t shared_channel_index(int layer, int64_t c) const { return (size_t) layer * n_ff + (size_t) c; }

    // The domain named `name`, or nullptr.
    domain_stats *       find_domain(const std::string & name);
    const domain_stats * find_domain(const std::string & name) const;
    // The domain named `name`, appended (all metric vectors of the archive's
    // metric set zero-filled to n_cells(), its channel vectors to
    // n_channel_values() when n_ff > 0, its shared channel vectors to
    // n_shared_channel_values() when has_shared_channels) when absent. Set
    // `model`, `metrics`, `n_ff` and `has_shared_channels` first.
    domain_stats & add_domain(const std::string & name);
};

// An empty archive for a model: fingerprint set, no domains.
archive make_archive(const fingerprint & fp, metric_set metrics);

// Checks an archive's internal consistency: fingerprint sane (n_layer,
// n_expert >= 1, moe_layers ascending and < n_layer, n_expert_used <=
// n_expert), domain names unique, non-empty and <= k_max_domain_bytes,
// n_tokens >= 0, every metric vector of the set present with n_cells()
// values and no other; every value finite; count, ean_sum, max_norm and
// energy_sum >= 0 and count integral; rows of non-MoE layers zero; sums
// zero where count is zero; with n_ff > 0 the channel vectors of the set
// present with n_channel_values() values (n_cells() * n_ff <=
// k_max_channel_values), finite, ch_energy >= 0, zero in non-MoE layers and
// where count is zero; with n_ff = 0 no channel vector; with
// has_shared_channels (needs n_ff > 0) the shared vectors of the set present
// with n_shared_channel_values() values, finite, >= 0 (gate 1) and zero in
// non-MoE layers, else none. The message names the
// domain, metric and cell (and channel).
bool validate(const archive & a, std::string & err);

// The invariant of a complete calibration: for every domain and MoE layer,
// Σ_e count = n_tokens × n_expert_used (within `rel_tol` relative; skipped
// when n_expert_used is unknown). Returns false with the first violation
// named ("domain 'code' layer 3: Σ count = 4090, expected 4096 (1024 tokens × 4)").
bool check_count_invariant(const archive & a, std::string & err, double rel_tol = 0.0);

// Reads an archive (a single file; split sets are not used for archives).
// Hostile input: every key's type, every tensor's name, type (F64), shape
// and byte count are checked, and validate() runs on the result. The
// message names the file and the object. Versions 1 to 4 are read (4: with
// ean_sq_sum for metric set "reap", or metric set "weights"); channel
// tensors in a version 1 archive, or without n_ff_exp, are an error, and so
// are shared channel tensors without shared_channels (or in a version below
// 3), and version 3 without shared_channels.
bool read_archive(const std::string & path, archive & out, std::string & err);

// The GGUF spec of an archive (KVs + in-memory tensors), for writers that
// want to add to it or size it.
bool archive_spec(const archive & a, gguf::output_spec & out, std::string & err);

// Validates and writes an archive (temp file + fsync + rename through
// gguf::write_output). Refuses an existing target unless `force`. Version 4
// with squared norms or metric set "weights"; else version 1 (byte for byte
// what earlier versions wrote) without channel statistics, version 2 with
// them, version 3 with the shared expert's as well.
bool write_archive(const archive & a, const std::string & path, std::string & err, bool force = false);

// Adds `other`'s statistics into `into` (n_tokens, count and sums added,
// max_norm the max; channel statistics too): the one rule merge and domain
// sums share. Vectors of other lengths add only their common prefix.
void add_domain_stats(domain_stats & into, const domain_stats & other, metric_set ms);

// A list of layers as "[a,b,c]", for messages.
std::string layers_text(const std::vector<int> & layers);

// One domain that is the sum over `names` (all domains when empty) — the
// statistics a planner scores with. Unknown names are an error listing the
// archive's domains. max_norm is the max over the domains. Channel
// statistics (the shared expert's too) are summed too.
bool sum_domains(const archive & a, const std::vector<std::string> & names, domain_stats & out, std::string & err);

} // namespace reap::saliency

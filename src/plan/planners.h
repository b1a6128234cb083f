// reap planners: from a saliency archive to a keep-list per MoE layer, the
// library behind `reap plan` and `reap compare`.
//
// How a plan is made:
//   1. score: per MoE layer and expert, the chosen method's score over the
//      chosen domains S (sums over S, then the ratio):
//        reap       Σ reap_sum / Σ count   mean g·‖f(x)‖ over routed tokens (REAP; 0 when never routed)
//        man        Σ ean_sum / Σ count    mean ‖f(x)‖ over routed tokens, gate-free (MAN)
//        msan       Σ ean_sq_sum / Σ count mean ‖f(x)‖² over routed tokens (MSAN; version 4 archives)
//        aimer      1 − aimer              weights archives (reap score): AIMER removes the experts
//                                          whose mean|w|/rms(w) is highest, so they rank last
//        frequency  Σ count                how many tokens were routed to the expert
//        gate       Σ gate_sum             total router weight the expert received
//        ean        Σ ean_sum              total ‖f(x)‖ over routed tokens (EAN, frequency-weighted;
//                                          before version 4 of this table it was the mean, now man)
//        energy     Σ energy_sum / Σ count mean ‖h‖² of the input to ffn_down_exps (imatrix archives)
//        random     a seeded pseudo-random order (baseline); its "score", for the
//                   saliency share, is the archive's default method (reap, energy or aimer)
//      A weights archive has no token counts: no expert of it is "never routed".
//      With consensus minrank, the experts are ranked within each domain of S
//      separately (rank 0 = highest score, ties to the lower id) and ordered by
//      their best rank in any domain (ties to the lower id); the score used
//      for the saliency share is still the sum over S.
//   2. order: protected super experts first (by score, ties to the lower id),
//      then the others by score (or consensus rank, or random key), ties to
//      the lower id, and the experts never routed to in any domain of S last
//      (by id). A super expert is one whose max_norm (max over every domain of
//      the archive) is above the 99.5th percentile of the max_norms of every
//      routed expert of every MoE layer (linear interpolation; never-routed
//      experts have none) and above a tenth of the largest;
//      protection wins over never-routed.
//   3. select: the first N of the order; with a group-limited router
//      (n_group > 1), the first N / n_group of each group (group g holds the
//      experts [g·E/G, (g+1)·E/G)), so every group keeps the same count.
//      Keep-lists are ascending.
//   The saliency share of a keep-list is Σ_kept score / Σ_all score in each
//   layer; the overall share is the mean over MoE layers (layers weigh the same).
//   For the plan's receipts (receipts.h) the ranking also holds, per domain of
//   the archive, the share method's score over that domain alone and each
//   expert's rank by it, and the dead experts (never routed in any domain of
//   the archive).
//
// Sizes (--budget): the exact bytes of the files `reap prune` would write for a
// plan (headers, padding, split shards included) come from moe::pruned_bytes,
// the rule prune's own header follows; fit_budget finds the largest allowed N
// that fits.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "gguf/gguf.h"
#include "moe/layout.h"
#include "plan/plan.h"
#include "moe/pruned.h"
#include "saliency/archive.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reap::planner {

enum class method { reap, man, msan, aimer, frequency, gate, ean, energy, random };

const char * method_name(method m);
bool parse_method(const std::string & s, method & out);
// One line on what the method ranks by (for --help and reports).
const char * method_description(method m);
// The methods in --help order.
const std::vector<method> & all_methods();
// Their names joined ("reap, man, ..."), without random when `with_random` is false.
std::string method_names_text(bool with_random = true);
// Fails when the archive lacks what the method needs, saying why and what it
// can rank by ("--method msan needs squared expert output norms (ean_sq_sum),
// which archives record from version 4 on; ...: use --method reap, man, ...").
bool method_fits(method m, const saliency::archive & a, std::string & err);
// The method used when none is given (and for random's saliency share):
// reap for "reap" archives, energy for "energy" archives, aimer for "weights".
method default_method(saliency::metric_set ms);

enum class consensus { sum, minrank };

struct rank_options {
    method                   how = method::reap;
    std::vector<std::string> domains;          // empty: every domain of the archive
    consensus                cons = consensus::sum;
    uint64_t                 seed = 0;         // method::random
    bool                     protect_super = true;
    double                   super_percentile = 99.5;
    double                   super_min_fraction = 0.1;   // of the largest max_norm
};

struct expert_ref {
    int     layer = 0;
    int64_t expert = 0;
    double  value = 0;    // max_norm for super experts, 0 for never-routed
    // super experts only: max_norm / the median max_norm of the layer's routed
    // experts (0 when that median is 0), and the expert's share of the layer's
    // summed score (the saliency-share score)
    double  norm_ratio = 0;
    double  score_share = 0;
};

struct layer_ranking {
    int                  layer = 0;
    std::vector<double>  score;   // by expert id: the score the saliency share is measured in
    std::vector<int64_t> order;   // every expert id once: kept first ... removed first last
    // per domain of the archive (ranking::archive_domains order), by expert id:
    std::vector<std::vector<double>>  domain_score;   // the share method's score over that domain alone
    std::vector<std::vector<int64_t>> domain_rank;    // 1-based rank by it (ties to the lower id); empty
                                                      // when the domain routed no token in this layer
};

struct ranking {
    rank_options             opts;
    std::vector<std::string> domains;          // the domains of S, resolved
    method                   share_method = method::reap;   // whose score `score` holds
    int64_t                  n_expert = 0;
    int64_t                  n_group = 1;      // 1 when not group-limited
    std::vector<layer_ranking> layers;         // one per MoE layer, ascending
    std::vector<expert_ref>  super_experts;    // protected (empty with protect_super off)
    std::vector<expert_ref>  super_candidates; // would be protected (reported even when off)
    double                   super_threshold = 0;   // max(percentile, fraction of max); 0 when no max_norm
    std::vector<expert_ref>  never_routed;     // count 0 in every domain of S
    std::vector<std::string> archive_domains;  // every domain of the archive, in file order
    std::vector<bool>        in_plan;          // per archive domain: one of `domains`
    std::vector<expert_ref>  dead;             // count 0 in every domain of the archive
};

// Scores and orders the experts of every MoE layer of the archive. `n_group`
// is the model's expert_group_count (0 or 1: not group-limited). Fails on an
// unknown domain (listing the archive's), a method the archive cannot serve,
// n_expert not divisible by n_group.
bool rank_experts(const saliency::archive & a, int64_t n_group, const rank_options & o, ranking & out, std::string & err);

// The keep-list of one layer for n_keep (ascending), per the order and groups.
std::vector<int64_t> select_keep(const layer_ranking & lr, int64_t n_expert, int64_t n_group, int64_t n_keep);

// Σ_kept score / Σ_all score (1 when the layer's total is 0).
double saliency_share(const std::vector<double> & score, const std::vector<int64_t> & keep);

// The share kept by a plan: per plan layer (in the plan's order) and the mean.
struct share_report {
    std::vector<int>    layers;
    std::vector<double> share;
    double              mean = 0;
};
share_report plan_share(const ranking & r, const plan & p);
// The best share any keep-list of n_keep experts per layer could have (top-n
// by score, no group constraint): the oracle of `reap compare`.
share_report oracle_share(const ranking & r, int64_t n_keep);

// A plan for n_keep from the ranking: model header from `facts`, one layer
// per MoE layer, provenance with method, domains, consensus, seed, super
// experts, never-routed experts, the saliency share (per layer and mean) and
// the receipts of receipts.h (safety margin, share per domain, dead experts,
// super experts kept).
// Protected super experts that do not fit (a layer or group with more of them
// than it keeps) are listed under "super_experts_not_kept".
// The caller adds its own provenance (request, archive hash, tool version).
// Validated against `facts` (the message is validate_plan's).
// `with_receipts` false leaves the receipts out (the budget search and the
// size table, which only need the keep-lists).
bool make_plan(const ranking & r, const plan_model_facts & facts, int64_t n_keep, plan & out, std::string & err,
               bool with_receipts = true);

// Whether a plan keeping n_keep per layer is valid for the model (n_expert_used
// <= n_keep <= n_expert, group rules); `why` says why not.
bool keep_allowed(const plan_model_facts & facts, int64_t n_keep, std::string & why);
// Every allowed n_keep, ascending.
std::vector<int64_t> allowed_keeps(const plan_model_facts & facts);

// n_keep for --ratio R (fraction of routed experts removed, 0 <= R < 1):
// n_expert - round(R · n_expert), then, for group-limited routers, rounded
// down to a multiple of the group count (`note` says so). Fails when the
// result is not allowed (the message gives the allowed range).
bool keep_from_ratio(double ratio, const plan_model_facts & facts, int64_t & n_keep, std::string & note, std::string & err);

// Parses a size: a number (decimals allowed) and an optional unit. Decimal
// units K, M, G, T (= KB, MB, GB, TB: 10^3, 10^6, 10^9, 10^12, as gguf-split
// and disk vendors count) and binary units KiB, MiB, GiB, TiB (2^10 ...
// 2^40); case-insensitive; "B" or no unit = bytes. "277.5GB" = 277 500 000 000.
// Results are rounded down to whole bytes.
bool parse_size(const std::string & s, uint64_t & bytes, std::string & err);

// Sizing: what `reap prune` would write.
struct size_context {
    const gguf::model *   model = nullptr;
    const moe::layout *   layout = nullptr;
    moe::stamp_options    prune;       // stamp as prune will run (plan_sha256: any 64-hex placeholder)
    gguf::write_options   write;       // split_max_bytes / split_max_tensors as prune will run
    // Width cuts: width.down_type is the type prune --down-type will requantise
    // down to (unset: its own), for width plans and for the cut below;
    // width.keep > 0 sizes every plan without channel lists as cut to
    // width.keep of width.n_ff channels (the budget search's plans).
    moe::width_cut        width;
};
// Exact bytes of all output files for plan `p` (they depend only on its n_keep
// and, for a width plan or under ctx.width, its width and the down type).
bool pruned_bytes(const size_context & ctx, const plan & p, uint64_t & bytes, uint32_t & n_shards, std::string & err);

struct size_point {
    int64_t  n_keep = 0;
    uint64_t bytes = 0;
    uint32_t n_shards = 1;
    double   share = 0;     // mean saliency share
};

// The largest allowed n_keep whose pruned output fits `budget` bytes (sizes
// are non-decreasing in n_keep; checked at the answer and its successor).
// `table` receives the points evaluated (ascending n_keep; with `full_table`,
// up to ~40 allowed values spread over the range plus the answer and its
// neighbours). Fails when even the smallest allowed n_keep does not fit,
// naming that size and the bytes of the model outside the routed experts.
bool fit_budget(const ranking & r, const plan_model_facts & facts, const size_context & ctx, uint64_t budget,
                bool full_table, int64_t & n_keep, std::vector<size_point> & table, std::string & err);

// The size/share table without a budget: up to ~40 allowed n_keep spread over
// the range, plus `around` and its allowed neighbours (ascending n_keep).
bool size_table(const ranking & r, const plan_model_facts & facts, const size_context & ctx, int64_t around,
                std::vector<size_point> & table, std::string & err);

// ---- comparing plans -----------------------------------------------------------------

struct layer_overlap {
    int     layer = 0;
    int64_t shared = 0;      // experts kept by both
    int64_t union_size = 0;
    double  jaccard = 0;     // shared / union
};

struct plan_overlap {
    std::vector<layer_overlap> layers;
    double mean_shared = 0;
    double mean_jaccard = 0;
};

// Per-layer overlap of two plans for the same model (arch, n_layer, n_expert
// and the MoE layers must agree; n_keep may differ).
bool compare_plans(const plan & a, const plan & b, plan_overlap & out, std::string & err);

// Checks that a plan was made for the model an archive was measured on
// (arch, n_layer, n_expert, n_expert_used where known, MoE layers).
bool plan_matches_archive(const plan & p, const saliency::archive & a, std::string & err);

} // namespace reap::planner

// reap sweep, the planning half: several cut sizes from one ranking, so that
// `reap sweep` can score them all by masking (src/llama/mask.h) in one run.
//
// A sweep asks for sizes as keep counts (--keep 24,16,8), removed fractions
// (--ratios 0.25,0.5) or file budgets (--budgets 512G,400G); each becomes an
// n_keep exactly as `reap plan --keep/--ratio/--budget` would turn it, and
// a plan from the one ranking, so the plans are nested: every expert kept at a
// smaller N is kept at every larger N (checked). Each point carries the
// exact bytes `reap prune` would write, the saliency share kept and the
// safety margin (receipts.h).
//
// Also the setup that `reap plan` and `reap sweep` share: open the model,
// classify it, read the archive, check that it was measured on this model,
// rank the experts.
//
// Core library: no llama.cpp dependency. Errors are values.
#pragma once

#include "plan/planners.h"
#include "plan/width_planner.h"
#include "util/error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace reap::planner {

// A model and an archive, checked against each other, and the experts ranked.
struct ranked_model {
    gguf::model        model;
    moe::layout        layout;
    plan_model_facts   facts;
    saliency::archive  archive;
    ranking            rank;
    moe::model_identity identity;   // of `model`, read once (its routers hashed)
};

// Opens the model and the archive, checks that the archive was measured on the
// model (fingerprint), resolves the method (the archive's default when
// !method_given) and ranks. Messages name the file they are about.
bool open_ranked_model(const std::string & model_path, const std::string & saliency_path, rank_options ro,
                       bool method_given, ranked_model & out, std::string & err);
// The same for a model already opened into out.model (`reap plan` checks its
// output against the model's files in between).
bool rank_opened_model(const std::string & model_path, const std::string & saliency_path, rank_options ro,
                       bool method_given, ranked_model & out, std::string & err);

// ---- width cuts (reap plan --width, reap sweep --widths) ----

// What a width cut of rm's model needs: the model's width facts (the down
// block that of the type prune will requantise down to), that type, and the
// archive's channel scores.
struct width_setup {
    plan_model_facts facts;                     // facts_of(layout, model), down block of cut.down_type
    moe::width_cut   cut;                       // n_ff and the down type; keep 0
    channel_score    by = channel_score::reap;  // what ranks the channels
    channel_scores   scores;                    // the archive's, summed over the ranking's domains
    shared_channel_scores shared_scores;        // the same for the shared expert (facts.shared_cut only)
};

// Sets up width cuts of rm's model to each K of `widths`: `down_type` "" =
// each down tensor's own type; `by` unset = the archive's default
// (default_channel_score). Fails (usage) when the model cannot be cut in
// width, the type is unknown or a K is refused (K in [1, n_ff], a multiple
// of the down type's block; checked before the archive), and (input) when
// the archive has no usable channel scores (archive_channel_scores'
// messages, naming `saliency_name`; for a model whose shared expert is cut
// with the routed ones, llama4, also archive_shared_channel_scores'). Messages
// start with `flag` (the option
// asked, "--width 16"), --down-type's with "--down-type".
bool setup_width(const ranked_model & rm, const std::string & saliency_name, const std::string & down_type,
                 std::optional<channel_score> by, const std::vector<int64_t> & widths, const std::string & flag,
                 width_setup & out, util::error & err);

// Cuts plan `p` to width K (K < n_ff) by w's channel scores (add_width),
// checks it against w.facts and records "channel_score" in its provenance.
bool cut_plan_width(const width_setup & w, int64_t K, plan & p, std::string & err);

enum class size_kind { keep, ratio, budget };

struct size_request {
    size_kind   kind = size_kind::keep;
    std::string text;         // as given ("16", "0.5", "400G")
    int64_t     keep = 0;     // size_kind::keep
    double      ratio = 0;    // size_kind::ratio: fraction of routed experts removed, [0, 1)
    uint64_t    budget = 0;   // size_kind::budget: bytes
};

// Parses a comma list of one kind ("24,16,8", "0.25,0.5", "512G,400GiB").
// Fails on an empty list, an empty or malformed item, or a repeated item.
bool parse_size_requests(size_kind kind, const std::string & list, std::vector<size_request> & out, std::string & err);

struct sweep_point {
    size_request req;
    int64_t      n_keep = 0;
    plan         p;                // the plan for n_keep (provenance as make_plan writes it)
    uint64_t     bytes = 0;        // exact size of what `reap prune` would write
    uint32_t     n_shards = 1;
    double       share = 0;        // mean saliency share kept
    int64_t      margin = 0;       // safety margin (receipts.h): best rank of a pruned expert; 0 = none
    double       margin_median = 0;   // ... its median over layers
    std::string  note;             // e.g. rounding of a ratio to the group count
    int64_t      width = 0;        // K of a width cut (plan_width_sweep); 0: every channel kept
    std::string  method;           // reap sweep --methods: the ranking it came from ("" = the sweep's one)
};

// One point per request, sorted by n_keep, largest first. Two requests that
// come to the same n_keep are an error naming both (the sweep would score one
// cut twice). Fails with `reap plan`'s message when a size is not allowed (or
// a budget cannot be met).
bool plan_sweep(const ranked_model & rm, const size_context & sctx, const std::vector<size_request> & reqs,
                std::vector<sweep_point> & out, std::string & err);

// Width cuts and counts (reap sweep --widths): one point per (request, K)
// in `widths` (K = w.facts.n_ff_exp stands for the full width: no cut). For
// each K the requests are planned as plan_sweep plans them with every file
// sized as cut to K (so a budget finds the largest N whose width-cut file
// fits), then each plan is cut to K (cut_plan_width). Points ordered by K
// descending (the full width first), then N descending. `w` comes from
// setup_width over the same widths; a K given twice fails naming it.
bool plan_width_sweep(const ranked_model & rm, const size_context & sctx, const std::vector<size_request> & reqs,
                      const std::vector<int64_t> & widths, const width_setup & w, std::vector<sweep_point> & out,
                      std::string & err);

// What the plans of a sweep (or of fit's candidates) of one source are: the
// sizes, the widths (empty: no width cut) with their down type and channel
// score (unset: the archive's), the archive named in each plan's provenance.
struct source_plans_request {
    std::string                   saliency;          // the archive's path, as the provenance names it
    std::vector<size_request>     sizes;
    std::vector<int64_t>          widths;
    std::string                   down_type;
    std::optional<channel_score>  channel_by;
    uint64_t                      split_max_bytes = 0;
    std::string                   tool_version;
};

// The plans of every size (and width) of `req` for one source already ranked,
// each stamped with the model's fingerprint and the provenance reap plan
// records (tool "reap sweep"; `archive_sha` is the archive's sha256). reap
// sweep and reap fit plan through it.
bool plan_source_points(const source_plans_request & req, const ranked_model & rm, const std::string & archive_sha,
                        std::vector<sweep_point> & points, std::string & err);

// Whether every layer's keep set of `smaller` is inside that of `larger`
// (same model); `why` names the first layer and expert that is not.
bool plans_nested(const plan & smaller, const plan & larger, std::string & why);

// Publishes what a sweep writes, as (path, contents) in publishing order (the
// plans, then the chart and the JSON that names them; src/llama/sweep.h
// sweep_output_files): `plans_dir` ("" = no plans) is made first when missing;
// every file is complete before the first appears (util::write_files_durably:
// the files of one folder appear together, the folders in order); when that
// fails nothing new appears and a plans_dir this call made goes again.
bool publish_sweep_files(const std::string & plans_dir, const std::vector<std::pair<std::string, std::string>> & files,
                         std::string & err);

} // namespace reap::planner

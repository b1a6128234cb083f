// The sweep format: what `reap sweep -o` writes (src/llama/sweep.cpp) and
// `reap report --sweep` reads, one struct and its JSON both ways, in the core.
//
// A sweep records the model it measured (path, shape, file size and, since
// version 2, its fingerprint: plan::model_header_sha256, as prune checks
// plans), the archive and the ranking method its plans came from (a
// `--method random` sweep is a baseline, not the method of a build made with
// another), the text it scored, and one point per size: the request, the
// predicted file, the receipts and the eval metrics (eval_file.h's keys) of
// the plan masked in the base.
//
// Several sources against one reference (version 3, `reap sweep -m Q1 -m Q2
// --reference REF | --kld-base REF.kld`): the quantisations of one model, each
// planned from the one ranking and sized for its own file, all scored against
// the same reference rows. "reference" names it; "sources" holds every source
// (path, header and router fingerprints, file size, its points); "model" and
// "points" are the first source's (what a version-2 reader shows); "frontier"
// says, per request (budget, keep or ratio), which source scores best and by
// how much (sweep_frontier: the one rule; the reader recomputes it and
// refuses a file whose frontier differs).
//
// Behaviour (`reap sweep --needle` / `--generate`, one source): "needle" and
// "generate" hold the sections of formats/behaviour_file.h (the base and one
// masked model "keep N" per point, every decoded text and token, what was
// measured); each point repeats its own numbers ("needle": n_exact, n_cells;
// "generate": the overall statistics). The reader recomputes them from the
// sections and refuses a file that states others. Optional in every version.
//
// Width cuts (`reap sweep --widths`, one source): a point that cuts every
// kept expert to K channels says "width": K (absent: every channel kept);
// points are then one per (n_keep, width), in the order the sweep scored
// them. Optional in every version; refused in a file with "sources" or a
// behaviour section (the frontier and the sections know no width).
//
// Methods as an axis (`reap sweep --methods reap,man,aimer`, one source): a
// point planned by another method than the record's "saliency.method" says
// "method": NAME (every point of such a sweep says it); points are one per
// (method, n_keep), in the order the sweep scored them. Optional in every
// version; refused with "sources", a behaviour section or width cuts.
//
// Versions: 1 (no "model.header_sha256"; an MTP rate of -1 meant "not
// measured"), 2 (null for that) and 3 (sources, reference, frontier) all
// read; one source is still written as version 2. Every field read is type-
// and range-checked (a message names the field); two points of one n_keep
// (and width) are refused.
#pragma once

#include "formats/behaviour_file.h"
#include "formats/task_file.h"
#include "formats/eval_file.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reap {

constexpr const char * k_sweep_format  = "reap-sweep";
constexpr int          k_sweep_version = 3;   // the newest read; written for several sources
constexpr int          k_sweep_version_one_source = 2;

struct sweep_record_point {
    int64_t      n_keep = 0;
    int64_t      width = 0;                    // K of a width cut (reap sweep --widths); 0: every channel kept
    std::string  method;                       // reap sweep --methods: the point's ranking ("" = the record's)
    std::string  request_kind, request_text;   // "keep" / "ratio" / "budget", as given ("16", "0.5", "400G")
    double       removed_fraction = 0;
    uint64_t     predicted_bytes = 0;
    uint32_t     predicted_shards = 1;
    double       saliency_share = 0;           // [0, 1]
    int64_t      safety_margin = 0;            // 0: none (every expert kept)
    double       safety_margin_median = 0;
    std::string  plan;                         // --plans-dir file, "" when not written
    eval_metrics overall;
    std::vector<std::pair<std::string, eval_metrics>> domains;
    std::optional<double> mtp_acceptance;
};

// One source of a several-source sweep.
struct sweep_source {
    std::string                     path;
    std::string                     header_sha256, router_sha256;   // moe/identity.h
    uint64_t                        file_bytes = 0;
    std::vector<sweep_record_point> points;   // largest n_keep first
};

// One point of the frontier: what source `source` (an index into
// sweep_record::sources) scored for a request.
struct sweep_frontier_point {
    size_t   source = 0;
    int64_t  n_keep = 0;
    uint64_t bytes = 0;
    double   kld_mean = 0, top1 = 0;
};

// Per request, the best source (lowest KLD mean; ties: higher top-1, then
// fewer bytes) and the next best, when there is one.
struct sweep_frontier_entry {
    std::string                         request_kind, request_text;
    sweep_frontier_point                best;
    std::optional<sweep_frontier_point> runner_up;
};

struct sweep_record {
    int         version = k_sweep_version_one_source;
    std::string tool;
    struct {
        std::string path, arch;
        std::string header_sha256;      // "" in version 1
        int64_t     n_expert = 0, n_expert_used = 0;
        uint64_t    moe_layers = 0, file_bytes = 0;
    } model;
    struct {
        std::string              file, sha256, method;
        std::vector<std::string> domains;
        // --methods with a second archive (a weights archive for aimer): its
        // path and sha256 ("" = none); optional in every version
        std::string              second_file, second_sha256;
    } saliency;
    struct {
        std::string file;
        int64_t     n_ctx = 0;
        int64_t     n_batch = 0, n_ubatch = 0;   // -b, -ub of the scoring passes as run (0: not recorded)
        uint64_t    n_windows = 0;
        bool        corpus = false;
    } input;
    std::vector<sweep_record_point> points;     // as written: largest n_keep first
    std::optional<double>           mtp_base_acceptance;
    // version 3 (several sources): empty otherwise
    struct {
        std::string model;      // --reference REF.gguf ("" when only the KLD file was given)
        std::string kld_base;   // the KLD base file read ("" when the reference ran in this sweep)
    } reference;
    std::vector<sweep_source>         sources;
    std::vector<sweep_frontier_entry> frontier;
    // --needle / --generate (one source): models[0] the base, then "keep N"
    std::optional<needle_section>     needle;
    std::optional<generate_section>   generate;
    // --multiple-choice / --hellaswag / --winogrande (one source): models[0]
    // the base, then "keep N" (formats/task_file.h's section)
    std::optional<choice_section>     choice;
};

// A point's behaviour numbers, from the record's sections (empty where the
// sweep did not run that part): the model named "keep N" of each section.
struct sweep_point_behaviour {
    std::optional<size_t>           needle_model, generate_model;   // index into the section's models
    size_t                          n_exact = 0, n_cells = 0;
    generation_stats                generation;                     // overall, agreement against the base
};
sweep_point_behaviour sweep_behaviour_of(const sweep_record & s, int64_t n_keep);
// The name a sweep gives the mask of point n_keep in its runs ("keep N";
// a width cut: "keep N width K").
std::string sweep_point_name(int64_t n_keep, int64_t width = 0, const std::string & method = "");
// Whether the record's points name their methods (reap sweep --methods), and
// those methods in the order of the points.
bool sweep_has_methods(const sweep_record & s);
std::vector<std::string> sweep_methods(const sweep_record & s);
// Whether any point of `s` is a width cut.
bool sweep_has_widths(const sweep_record & s);

// The frontier of the sources (above): one entry per request of the first
// source, in its order, each over the sources that scored that request.
std::vector<sweep_frontier_entry> sweep_frontier(const std::vector<sweep_source> & sources);

nlohmann::ordered_json sweep_to_json(const sweep_record & s);
// Parses and checks a sweep document; `name` stands for it in messages.
bool sweep_from_json(const nlohmann::json & j, const std::string & name, sweep_record & out, std::string & err);
// Reads the file at `path` (at most 256 MiB) and parses it.
bool read_sweep(const std::string & path, sweep_record & out, std::string & err);

} // namespace reap

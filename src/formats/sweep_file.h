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
// Versions: 1 (no "model.header_sha256"; an MTP rate of -1 meant "not
// measured") and 2 (null for that) both read. Every field read is type- and
// range-checked (a message names the field); two points of one n_keep are
// refused.
#pragma once

#include "formats/eval_file.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace reap {

constexpr const char * k_sweep_format  = "reap-sweep";
constexpr int          k_sweep_version = 2;

struct sweep_record_point {
    int64_t      n_keep = 0;
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

struct sweep_record {
    int         version = k_sweep_version;
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
    } saliency;
    struct {
        std::string file;
        int64_t     n_ctx = 0;
        uint64_t    n_windows = 0;
        bool        corpus = false;
    } input;
    std::vector<sweep_record_point> points;     // as written: largest n_keep first
    std::optional<double>           mtp_base_acceptance;
};

nlohmann::ordered_json sweep_to_json(const sweep_record & s);
// Parses and checks a sweep document; `name` stands for it in messages.
bool sweep_from_json(const nlohmann::json & j, const std::string & name, sweep_record & out, std::string & err);
// Reads the file at `path` (at most 256 MiB) and parses it.
bool read_sweep(const std::string & path, sweep_record & out, std::string & err);

} // namespace reap

// reap inspect of a saliency archive (reap calibrate, imatrix, merge or score
// output): which model it is of, its metric set and statistics, its domains
// and their tokens, the plan methods it can rank by (and why not the others),
// and its provenance. Without this, inspect read an archive as a model with
// no architecture and no experts.
#include "cli/inspect_archive.h"

#include "cli/args.h"
#include "plan/planners.h"
#include "saliency/archive.h"
#include "util/json.h"
#include "util/number_format.h"

#include <cstdio>

namespace reap::cli {

bool is_saliency_archive(const gguf::model & m) {
    std::string type, err;
    return m.kvs.get_string_or(saliency::k_key_type, "", type, err) && type == saliency::k_general_type;
}

int inspect_archive(const std::string & path, bool json) {
    saliency::archive a;
    std::string err;
    if (!saliency::read_archive(path, a, err)) return fail("inspect", err);
    const saliency::fingerprint & fp = a.model;
    std::vector<std::string> serves, refused;
    for (planner::method m : planner::all_methods()) {
        std::string why;
        (planner::method_fits(m, a, why) ? serves : refused).push_back(planner::method_name(m));
    }
    int64_t tokens = 0;
    for (const saliency::domain_stats & d : a.domains) tokens += d.n_tokens;
    if (json) {
        nlohmann::json j;
        j["archive"] = path;
        j["metric_set"] = saliency::metric_set_name(a.metrics);
        j["model"] = {{"arch", fp.arch}, {"n_layer", fp.n_layer}, {"n_expert", fp.n_expert}, {"n_expert_used", fp.n_expert_used},
                      {"moe_layers", fp.moe_layers}, {"router_sha256", fp.router_sha256}};
        j["metrics"] = a.expert_metric_names();
        j["n_ff"] = a.n_ff;
        j["shared_channels"] = a.has_shared_channels;
        nlohmann::json doms = nlohmann::json::array();
        for (const saliency::domain_stats & d : a.domains) doms.push_back({{"name", d.name}, {"n_tokens", d.n_tokens}});
        j["domains"] = doms;
        j["methods"] = serves;
        j["methods_refused"] = refused;
        nlohmann::json prov = nlohmann::json::object();
        for (const gguf::kv & e : a.provenance.entries) {
            std::string text;   // a string as it is; other values as inspect prints them
            if (e.type != gguf::value_type::STRING || !a.provenance.get_string(e.key, text, err)) text = e.value_string();
            prov[e.key] = text;
        }
        j["provenance"] = prov;
        printf("%s\n", util::json_text(j, 2).c_str());
        return 0;
    }
    printf("archive          %s\n", path.c_str());
    printf("metric set       %s%s\n", saliency::metric_set_name(a.metrics),
           a.metrics == saliency::metric_set::weights ? " (reap score: from the weights, no calibration)" : "");
    const std::string used = fp.n_expert_used ? std::to_string(fp.n_expert_used) : std::string("unknown: an imatrix import without the model");
    printf("of the model     %s, %u blocks, %zu MoE blocks %s, %u experts (%s used per token)\n", fp.arch.c_str(), fp.n_layer,
           fp.moe_layers.size(), saliency::layers_text(fp.moe_layers).c_str(), fp.n_expert, used.c_str());
    printf("router sha256    %s\n", fp.router_sha256.empty() ? "(not recorded)" : fp.router_sha256.c_str());
    std::string metrics;
    for (const std::string & n : a.expert_metric_names()) metrics += (metrics.empty() ? "" : ", ") + n;
    printf("per expert       %s\n", metrics.c_str());
    if (a.n_ff > 0) {
        printf("per channel      %u channels an expert%s (width plans: reap plan --width)\n", a.n_ff,
               a.has_shared_channels ? ", and the shared expert's" : "");
    } else {
        printf("per channel      none (width plans need channel scores: reap calibrate, or reap imatrix --width-saliency)\n");
    }
    printf("domains          %zu, %s tokens in all\n", a.domains.size(), util::group_digits(tokens).c_str());
    for (const saliency::domain_stats & d : a.domains) printf("  %-14s %s tokens\n", d.name.c_str(), util::group_digits(d.n_tokens).c_str());
    std::string s, r;
    for (const std::string & n : serves) s += (s.empty() ? "" : ", ") + n;
    for (const std::string & n : refused) r += (r.empty() ? "" : ", ") + n;
    printf("plan methods     %s%s\n", s.c_str(), r.empty() ? "" : ("; not " + r + " (reap plan --method says why)").c_str());
    if (!a.provenance.entries.empty()) printf("provenance\n");
    for (const gguf::kv & e : a.provenance.entries) printf("  %-36s %s\n", e.key.c_str(), e.value_string().c_str());
    return 0;
}

} // namespace reap::cli

// What reap calibrate prints once a run completes (calibrate.h): the
// forward-only timing, or the summary of what was measured and written; the
// cost-model line it prints before the decodes, and the options JSON that
// decides whether a checkpoint resumes.
#include "llama/calibrate.h"

#include "util/json.h"
#include "util/number_format.h"

#include "ggml.h"

#include <nlohmann/json.hpp>

namespace reap {

namespace {

const char * kv_type_name(ggml_type t) { return ggml_type_name(t); }

// The options that decide the archive's bits; a checkpoint resumes only under the same.
void add_decode_options(nlohmann::ordered_json & j, const calibrate_report & r) {
    j["order"]    = r.interleaved ? "domains interleaved" : "domain";
    j["rows"]     = row_mode_name(r.rows);
    j["n_batch"]  = r.n_batch;
    j["n_ubatch"] = r.n_ubatch;
    j["n_seq"]    = r.n_seq;
    j["kv_unified"] = r.kv_unified;
}

}  // namespace

const char * row_mode_name(row_mode m) {
    switch (m) {
        case row_mode::one_output:     return "one output row";
        case row_mode::nextn_unmasked: return "one output row, unmasked nextn";
        case row_mode::every_row:      return "every row an output";
    }
    return "?";
}

std::string calibrate_cost_text(const calibrate_report & r, size_t n_windows, size_t n_decodes, uint64_t model_bytes,
                                const std::optional<util::memory_limit> & mem) {
    char line[1024];
    snprintf(line, sizeof(line),
             "reap calibrate: %s tokens, %zu windows in %zu decodes (-b %d -ub %d, at most %d windows a decode, %s): "
             "%zu ubatches, each reading up to %s of experts\n",
             util::group_digits(r.n_tokens).c_str(), n_windows, n_decodes, r.n_batch, r.n_ubatch, r.n_seq, row_mode_name(r.rows),
             r.n_ubatches, util::format_size(r.expert_pool_bytes).c_str());
    std::string out = line;
    if (!r.size_note.empty()) out += "reap calibrate: " + r.size_note + "\n";
    if (mem && model_bytes > mem->bytes) {
        snprintf(line, sizeof(line),
                 "reap calibrate: warning: the model (%s) is larger than the memory available (%s, %s): it streams "
                 "from disk, about %s read for %zu ubatches; a larger -ub reads less, and more hosts over --rpc add "
                 "memory\n",
                 util::format_size(model_bytes).c_str(), util::format_size(mem->bytes).c_str(), mem->source.c_str(),
                 util::format_size(r.expert_pool_bytes * r.n_ubatches).c_str(), r.n_ubatches);
        out += line;
    }
    return out;
}

std::string calibrate_options_json(const calibrate_options & opt, int n_ctx, bool plain_text, const calibrate_report & decodes) {
    nlohmann::ordered_json j;
    j["input"]                 = plain_text ? "text" : "jsonl";
    j["n_ctx"]                 = n_ctx;
    add_decode_options(j, decodes);
    j["cache_type_k"]          = kv_type_name(opt.rt.llama.cache_type_k);
    j["cache_type_v"]          = kv_type_name(opt.rt.llama.cache_type_v);
    j["flash_attn"]            = llama_flash_attn_type_name(opt.rt.llama.flash_attn_type);
    j["max_tokens"]            = opt.max_tokens;
    j["max_tokens_per_domain"] = opt.max_tokens_per_domain;
    j["shard"]                 = std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count);
    if (opt.width_saliency) j["width_saliency"] = true;   // (absent otherwise: older checkpoints still resume)
    if (opt.target_keep > 0 || opt.target_ratio >= 0) {   // (the same)
        j["until_stable"] = opt.until_stable;
        if (opt.target_keep > 0) j["target_keep"] = opt.target_keep;
        else j["target_ratio"] = opt.target_ratio;
        j["checkpoint_every"] = opt.checkpoint_every;
    }
    return reap::util::json_text(j);
}

void print_calibrate_result(FILE * out, const calibrate_options & opt, const calibrate_report & rep) {
    if (!opt.collect) {
        fprintf(out, "forward-only: %lld tokens (%zu windows) in %.3f s, %.1f tok/s\n", (long long) rep.n_tokens,
                rep.n_windows, rep.seconds, rep.tokens_per_second);
        return;
    }
    const std::string shard = opt.shard_count > 1
                                  ? ", shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count)
                                  : "";
    int64_t in_archive = 0;   // what the archive holds: the domains' tokens
    for (const auto & d : rep.domain_tokens) in_archive += d.second;
    if (opt.until_stable > 0 && rep.stopped_stable) {
        // stopped early: the line states the archive's tokens, the corpus's plan beside them
        fprintf(out, "calibrated %lld tokens, stopped early (--until-stable; the corpus gives %lld tokens in %zu windows, %zu of %zu "
                "samples%s) in %.3f s, %.1f tok/s%s\n", (long long) in_archive, (long long) rep.n_tokens, rep.n_windows,
                rep.n_samples, rep.n_samples_total, shard.c_str(), rep.seconds, rep.tokens_per_second, rep.resumed ? " (resumed)" : "");
    } else {
        fprintf(out, "calibrated %lld tokens (%zu windows, %zu of %zu samples%s) in %.3f s, %.1f tok/s%s\n",
                (long long) rep.n_tokens, rep.n_windows, rep.n_samples, rep.n_samples_total, shard.c_str(), rep.seconds,
                rep.tokens_per_second, rep.resumed ? " (resumed)" : "");
    }
    fprintf(out, "nodes: ffn_moe_topk, %s, %s%s\n", rep.weights_node.c_str(), rep.down_node.c_str(),
            rep.weights_before_ffn ? " (gate applied before the experts)" : "");
    fprintf(out, "decodes: %zu (-b %d -ub %d, at most %d windows a decode, %s), %zu ubatches\n", rep.n_decodes,
            rep.n_batch, rep.n_ubatch, rep.n_seq, row_mode_name(rep.rows), rep.n_ubatches);
    if (!rep.mtp_layers.empty()) {
        std::string ls;
        for (int l : rep.mtp_layers) ls += (ls.empty() ? "" : ",") + std::to_string(l);
        fprintf(out, "MTP blocks %s: measured in llama.cpp's MTP context (token x_p with the model's h_{p-1})\n",
                ls.c_str());
    }
    for (const auto & d : rep.domain_tokens) {
        fprintf(out, "  %-16s %lld tokens\n", d.first.c_str(), (long long) d.second);
    }
    if (opt.until_stable > 0 && opt.collect) {
        const int64_t done = in_archive;
        if (rep.stopped_stable) {
            fprintf(out, "stopped at %lld of %lld tokens: the keep-list held at an overlap >= %.3g for two checkpoints "
                    "in a row (the curve is in the archive; reap plan prints it)\n", (long long) done,
                    (long long) rep.n_tokens, opt.until_stable);
        } else if (rep.stability.size() >= 2 && rep.stability.back().stable && rep.stability[rep.stability.size() - 2].stable) {
            fprintf(out, "the keep-list held at an overlap >= %.3g at the last two checkpoints, as the corpus ended\n",
                    opt.until_stable);
        } else {
            fprintf(out, "the keep-list did not hold at an overlap >= %.3g for two checkpoints in a row before the "
                    "corpus ended (%zu checkpoints): more tokens may still move it\n", opt.until_stable, rep.stability.size());
        }
    }
    fprintf(out, "wrote %s\n", opt.out_path.c_str());
}

}  // namespace reap

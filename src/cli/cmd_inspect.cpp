// reap inspect: the census of a (MoE) GGUF model — architecture, MoE blocks,
// expert counts, bytes by ggml type, expert pool vs dense bytes, what a decode
// step reads, and the exact file size at a few expert keep counts. A thin
// layer over reap::moe::take_census(); --json prints the census as one object.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/inspect_archive.h"
#include "plan/kernel_counts.h"
#include "gguf/gguf.h"
#include "moe/census.h"
#include "util/json.h"
#include "util/json_fields.h"
#include "util/number_format.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

using reap::util::format_size;

struct inspect_params {
    std::string           model;
    bool                  json = false;
    std::vector<uint32_t> keeps;
};

// The command's options, parsed and printed from one table.
void declare_inspect_options(reap::cli::options & t, inspect_params & p) {
    t.about(
        "Prints the census of a GGUF model: architecture, block count, which blocks are\n"
        "MoE (a router and expert slabs), expert counts (routed, used per token, groups,\n"
        "shared), tensor count and bytes by ggml type, the routed-expert pool (the\n"
        "*_exps tensors, biases and scales included) against the dense rest, bytes per\n"
        "expert per layer, file bytes and shard count, the bytes a decode step reads\n"
        "(dense + n_expert_used experts per MoE layer), and the exact size of the file\n"
        "reap prune writes (provenance stamp included) when keeping 75%, 50% and 25%\n"
        "of the experts (and every --keep N). Which tensors carry the expert axis is\n"
        "the MoE layout table's rule, the one prune slices by.\n"
        "MODEL: a model (of a split one, its *-00001-of-0000N.gguf), or a saliency archive.\n");
    t.section("options:");
    t.flag("--json",
           "print one JSON object (keys: arch, n_layer, moe_layers, mtp_layers, n_expert, n_expert_used, n_expert_groups, "
           "expert_pool_bytes, dense_bytes, file_bytes, n_shards, decode_bytes_per_token, types, keep_sizes, ...)",
           p.json);
    t.integers("--keep", "N", "also size the model keeping N experts per MoE layer (repeatable)", 1, UINT32_MAX, p.keeps);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (!p.model.empty()) {
            err = "more than one model given ('" + p.model + "' and '" + a + "')";
            return false;
        }
        p.model = a;
        return true;
    });
    t.require(p.model, "no model given");
}

// A reap-pruned file: where it came from, and which source experts each MoE
// layer kept (the first few ids; --json lists them all).
void print_pruned_from(const reap::moe::census & c) {
    printf("pruned from      %u experts (plan sha256 %s)\n", c.source_expert_count,
           c.plan_sha256.empty() ? "(none)" : c.plan_sha256.substr(0, 16).c_str());
    if (c.kept_ids.empty()) {
        printf("kept expert ids  not recorded (pruned by a reap older than reap.source.expert_ids)\n");
        return;
    }
    printf("kept expert ids  per MoE layer, source ids in file order (reap.source.expert_ids.L; all in --json)\n");
    for (const auto & [layer, ids] : c.kept_ids) {
        std::string s;
        for (size_t i = 0; i < ids.size() && i < 16; ++i) s += (i ? "," : "") + std::to_string(ids[i]);
        if (ids.size() > 16) s += ",... (" + std::to_string(ids.size()) + ")";
        printf("  layer %-6u %s\n", layer, s.c_str());
    }
}

} // namespace

int cmd_inspect(int argc, char ** argv) {
    inspect_params params;
    reap::cli::options t("inspect", "usage: reap inspect MODEL.gguf [--json] [--keep N]...");
    declare_inspect_options(t, params);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    std::string err;
    reap::gguf::model model;
    if (!reap::gguf::open_model(params.model, model, err)) return reap::cli::fail("inspect", err);
    if (reap::cli::is_saliency_archive(model)) return reap::cli::inspect_archive(params.model, params.json);
    // sized as `reap prune` writes by default: stamped (the plan's hash has a fixed length)
    const reap::moe::stamp_options stamp{true, std::string(64, '0'), REAP_VERSION, ""};
    reap::moe::census c;
    if (!reap::moe::take_census(model, params.keeps, c, err, stamp)) return reap::cli::fail("inspect", params.model + ": " + err);
    if (params.json) {
        nlohmann::json j;   // reap's own text: not JSON would be a bug, said as an error all the same
        if (!reap::util::parse_json_text(reap::moe::census_json(c), "the census of " + params.model, j, err)) {
            return reap::cli::fail("inspect", err);
        }
        j["fused_topk_moe"] = reap::planner::fused_kernel_takes(c.n_expert);
        printf("%s\n", reap::util::json_text(j, 2).c_str());
        return 0;
    }

    printf("model            %s\n", params.model.c_str());
    printf("arch             %s\n", c.arch.empty() ? "(none)" : c.arch.c_str());
    printf("blocks           %u\n", c.n_layer);
    std::string moe;
    for (size_t i = 0; i < c.moe_layers.size(); ++i) moe += (i ? "," : "") + std::to_string(c.moe_layers[i]);
    printf("MoE blocks       %zu [%s]\n", c.moe_layers.size(), moe.c_str());
    if (!c.mtp_layers.empty()) {
        std::string mtp;
        for (size_t i = 0; i < c.mtp_layers.size(); ++i) mtp += (i ? "," : "") + std::to_string(c.mtp_layers[i]);
        printf("MTP blocks       %zu [%s] (their experts are pruned too; llama.cpp runs them in its MTP context)\n",
               c.mtp_layers.size(), mtp.c_str());
    }
    printf("experts          %u routed, %u used per token", c.n_expert, c.n_expert_used);
    if (c.n_expert_groups > 0) printf(", %u groups (%u used)", c.n_expert_groups, c.n_expert_groups_used);
    printf(", %u shared (%u _shexp tensors)\n", c.n_expert_shared, c.n_shexp_tensors);
    if (c.n_expert > 0) {
        // llama.cpp's fused CUDA top-k MoE kernel takes only some counts; others run the unfused path
        if (reap::planner::fused_kernel_takes(c.n_expert)) printf("fused top-k MoE  yes (llama.cpp's CUDA kernel takes %u)\n", c.n_expert);
        else printf("fused top-k MoE  no: llama.cpp's CUDA kernel takes only %s experts\n", reap::planner::fused_counts_text().c_str());
    }
    if (c.expert_ff_length) printf("expert ff length %u\n", c.expert_ff_length);
    if (c.source_expert_count > 0) print_pruned_from(c);
    printf("tensors          %llu in %u file%s, %s\n", (unsigned long long) c.n_tensors, c.n_shards,
           c.n_shards == 1 ? "" : "s", format_size(c.file_bytes).c_str());
    printf("\n%-10s %8s %16s\n", "type", "tensors", "bytes");
    for (const auto & [name, tc] : c.types) {
        printf("%-10s %8llu %16llu  %s\n", name.c_str(), (unsigned long long) tc.count, (unsigned long long) tc.bytes,
               format_size(tc.bytes).c_str());
    }
    auto line = [](const char * label, uint64_t v) {
        printf("%-26s %16llu  %s\n", label, (unsigned long long) v, format_size(v).c_str());
    };
    printf("\n");
    line("expert pool (*_exps)", c.expert_pool_bytes);
    line("per expert per layer", c.expert_bytes_per_layer);
    line("dense (everything else)", c.dense_bytes);
    line("file bytes", c.file_bytes);
    line("read per decoded token", c.decode_bytes_per_token);
    if (!c.keep_sizes.empty()) {
        printf("\n%-8s %16s %-24s %8s\n", "keep", "file bytes", "", "of now");
        for (const reap::moe::keep_size & k : c.keep_sizes) {
            printf("%-8u %16llu %-24s %7.1f%%%s\n", k.n_keep, (unsigned long long) k.file_bytes, format_size(k.file_bytes).c_str(),
                   c.file_bytes ? 100.0 * (double) k.file_bytes / (double) c.file_bytes : 0.0,
                   reap::planner::fused_kernel_takes(k.n_keep) ? "  [fused top-k]" : "");
        }
    }
    return 0;
}

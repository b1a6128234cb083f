// reap prune: write the pruned copy of a MoE GGUF model that a plan describes.
// A thin layer over reap::prune::make_pruned_spec (what to write) and
// reap::gguf::write_output (streaming, temp + fsync + rename, splitting), then
// SHA256SUMS beside the output.
#include "cli/args.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "plan/plan.h"
#include "plan/planners.h"
#include "prune/prune.h"
#include "util/file.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

using reap::cli::human_bytes;

struct prune_params {
    std::string model;
    std::string plan;
    std::string output;
    uint64_t    split_max_bytes = 0;
    uint64_t    split_max_tensors = 0;
    bool        stamp = true;
    bool        force = false;
    bool        dry_run = false;
    bool        sums = true;
    bool        allow_other_model = false;
};

// The command's options, parsed and printed from one table.
void declare(reap::cli::options & t, prune_params & p) {
    t.about(
        "Writes the pruned copy of MODEL that PLAN describes. In every MoE layer L,\n"
        "output expert i is source expert keep[i] of the plan's entry for L (in that\n"
        "order): the expert slabs (ffn_{gate,up,down,gate_up}_exps), per-expert biases\n"
        "and scales, the router rows (ffn_gate_inp.weight), the router bias and the\n"
        "selection bias (exp_probs_b) are cut byte for byte, so any quantisation works\n"
        "and nothing is requantised. Shared experts and every other tensor are copied\n"
        "unchanged; <arch>.expert_count becomes the plan's n_keep. A tensor whose shape\n"
        "mentions the expert count but that the layout table does not know is an error.\n"
        "\n"
        "The plan is validated against the model first (layers, ids, counts, groups).\n"
        "MODEL may be the first shard of a split set. The output appears only when\n"
        "complete (temp file, fsync, rename); it never replaces an input, nor an existing\n"
        "file without --force. Data are streamed through a fixed 1 MiB buffer and hashed\n"
        "as they pass (with --no-sums, copy_file_range): memory is bounded by the metadata\n"
        "(about 100 bytes per kept expert per sliced tensor), whatever the model's size.\n"
        "SHA256SUMS beside the output lists every file written (sha256sum -c format;\n"
        "every other line already in it is kept); the shards and SHA256SUMS appear\n"
        "together or not at all. A plan made for another model (its recorded model\n"
        "fingerprint) is refused unless --allow-other-model.\n");
    t.section("options:");
    t.text("-m, --model", "MODEL.gguf", "source model (or first shard of a split set)", p.model);
    t.text("--plan", "PLAN.json", "keep-list per MoE layer (reap plan writes one)", p.plan);
    t.text("-o, --output", "OUT.gguf", "output; with splitting, OUT-00001-of-0000N.gguf, ...", p.output);
    t.custom("--split-max-size", "SIZE",
             "split the output: shards of at most SIZE bytes of tensor data; K/M/G/T(B) are decimal (as gguf-split), "
             "KiB/MiB/GiB/TiB binary, decimals allowed (1.5G)",
             [&p](const std::string & v, std::string & err) {
                 // The same units as `reap plan --budget/--split-max-size`, so a plan's
                 // size prediction and the prune that follows read one value alike.
                 std::string perr;
                 if (!reap::planner::parse_size(v, p.split_max_bytes, perr) || p.split_max_bytes == 0) {
                     err = "--split-max-size: '" + v + "' is not a positive size (e.g. 50G, 1.5GB, 300MiB)";
                     return false;
                 }
                 return true;
             });
    t.integer("--split-max-tensors", "N", "split the output: at most N tensors per shard", 1, INT64_MAX, p.split_max_tensors);
    t.flag("--no-stamp",
           "do not record provenance (reap.plan.sha256, reap.source.expert_count, reap.version); an identity plan "
           "then reproduces the source byte for byte",
           p.stamp, false);
    t.flag("--no-sums", "do not write SHA256SUMS", p.sums, false);
    t.flag("--force", "replace existing output files (never an input)", p.force);
    t.flag("--allow-other-model",
           "use a plan made for another model (its recorded model fingerprint differs); the output records it "
           "(reap.plan.other_model)",
           p.allow_other_model);
    t.flag("--dry-run", "print what would be written and the sizes; write nothing", p.dry_run);
    t.help_row();
    t.prose("environment:\n"
            "  REAP_NO_COPY_FILE_RANGE=1   copy through the pread/write buffer only (never\n"
            "                              copy_file_range), e.g. to test that path\n");
}

} // namespace

int cmd_prune(int argc, char ** argv) {
    prune_params params;
    reap::cli::options t("prune", "usage: reap prune -m MODEL.gguf --plan PLAN.json -o OUT.gguf [options]");
    declare(t, params);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    if (params.model.empty()) return t.usage_error("no model given (-m MODEL.gguf)");
    if (params.plan.empty()) return t.usage_error("no plan given (--plan PLAN.json)");
    if (params.output.empty()) return t.usage_error("no output given (-o OUT.gguf)");
    auto fail = [](const std::string & msg) { return reap::cli::fail("prune", msg); };
    std::string err;
    const auto t0 = std::chrono::steady_clock::now();
    reap::gguf::model model;
    if (!reap::gguf::open_model(params.model, model, err)) return fail(err);
    reap::plan plan;
    if (!reap::read_plan(params.plan, plan, err)) return fail(err);
    reap::moe::layout lay;
    if (!reap::model_layout(model, lay, err)) return fail(params.model + ": " + err);
    int64_t n_layer = 0;
    if (!model.kvs.get_i64(reap::moe::kv_key(lay.arch, "block_count"), n_layer, err) ||
        !reap::validate_plan(plan, reap::facts_of(lay, n_layer), err)) {
        return fail(params.plan + " does not fit " + params.model + ": " + err);
    }
    std::string warning;
    if (!reap::check_plan_model(plan, model, params.allow_other_model, params.plan, params.model, warning, err)) {
        return fail(err);
    }
    if (!warning.empty()) fprintf(stderr, "reap prune: warning: %s\n", warning.c_str());
    reap::prune::prune_options popts;
    popts.stamp = params.stamp;
    if (params.allow_other_model && !plan.model_sha256.empty() && plan.model_sha256 != reap::model_header_sha256(model)) {
        popts.other_model = plan.model_sha256;
    }
    popts.version = REAP_VERSION;
    if (params.stamp && !reap::plan_file_sha256(params.plan, popts.plan_sha256, err)) return fail(err);
    reap::gguf::output_spec spec;
    if (!reap::prune::make_pruned_spec(model, lay, plan, popts, spec, err)) return fail(err);
    reap::gguf::write_options wopts;
    wopts.force = params.force;
    wopts.split_max_bytes = params.split_max_bytes;
    wopts.split_max_tensors = params.split_max_tensors;
    if (const char * v = getenv("REAP_NO_COPY_FILE_RANGE"); v && *v && strcmp(v, "0") != 0) wopts.copy_file_range = false;
    std::vector<reap::gguf::shard_layout> shards;
    if (!reap::gguf::layout_output(spec, wopts, params.output, shards, err)) return fail(err);
    // the output rule (util/file.h): no output (shard or SHA256SUMS) is an input
    std::vector<std::pair<std::string, std::string>> inputs = {{"plan", params.plan}};
    for (const auto & sh : model.shards) inputs.emplace_back("model file", sh.path);
    for (const auto & sh : shards) {
        if (!reap::util::check_not_input(sh.path, inputs, err)) return fail(err);
    }
    const std::string sums_path = reap::prune::sums_path_for(shards[0].path);
    if (params.sums && !reap::util::check_not_input(sums_path, inputs, err)) return fail(err);
    if (params.sums) wopts.sums_path = sums_path;
    size_t n_sliced = 0;
    for (const auto & r : lay.roles) n_sliced += r.slice != reap::moe::slice_kind::none;
    uint64_t out_bytes = 0;
    for (const auto & sh : shards) out_bytes += sh.file_bytes;

    printf("reap prune: %s (%s, %" PRId64 " experts, %zu MoE layers, %s) -> keep %" PRId64 " per layer\n",
           params.model.c_str(), lay.arch.c_str(), lay.n_expert, lay.moe_layers.size(), human_bytes(model.file_bytes()).c_str(),
           plan.n_keep);
    printf("  %zu tensors, %zu sliced along the expert axis; output %s (%.1f%% of the source)\n", spec.tensors.size(),
           n_sliced, human_bytes(out_bytes).c_str(), model.file_bytes() ? 100.0 * double(out_bytes) / double(model.file_bytes()) : 0.0);
    if (params.dry_run) {
        printf("dry run: would write\n");
        for (const auto & sh : shards) {
            struct stat st;
            const bool exists = ::stat(sh.path.c_str(), &st) == 0;
            printf("  %s  %" PRIu64 " bytes (%s), %zu tensors%s\n", sh.path.c_str(), sh.file_bytes,
                   human_bytes(sh.file_bytes).c_str(), sh.n_tensors,
                   exists ? (params.force ? "  [exists: would be replaced]" : "  [exists: would be refused without --force]") : "");
        }
        if (params.sums) printf("  %s\n", sums_path.c_str());
        return 0;
    }
    std::vector<std::string> written;
    // the shards and their SHA256SUMS lines appear together (hashed as written)
    if (!reap::gguf::write_output(spec, wopts, params.output, written, err)) return fail(err);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < written.size(); ++i) {
        printf("  wrote %s  %" PRIu64 " bytes (%s)\n", written[i].c_str(), shards[i].file_bytes,
               human_bytes(shards[i].file_bytes).c_str());
    }
    if (params.sums) printf("  wrote %s\n", sums_path.c_str());
    printf("done in %.2f s (%.1f MiB/s)\n", secs, secs > 0 ? double(out_bytes) / 1048576.0 / secs : 0.0);
    return 0;
}

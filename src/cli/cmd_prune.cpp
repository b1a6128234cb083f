// reap prune: write the pruned copy of a MoE GGUF model that a plan describes.
// A thin layer over reap::prune::make_pruned_spec (what to write) and
// reap::gguf::write_output (streaming, temp + fsync + rename, splitting), then
// SHA256SUMS beside the output.
#include "cli/args.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "plan/plan.h"
#include "plan/planners.h"
#include "prune/imatrix_slice.h"
#include "prune/prune.h"
#include "util/file.h"
#include "util/number_format.h"
#include "util/json.h"
#include "util/path.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

using reap::util::format_size;

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
    bool        json = false;
    std::string imatrix;            // --imatrix: the source model's llama-imatrix file
    std::string imatrix_out;        // --imatrix-out (default beside OUT)
    int64_t     coverage_threshold = 0;
    int64_t     require_coverage = 0;
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
           "do not record provenance (reap.plan.sha256, reap.source.expert_count, reap.version, and per MoE layer L "
           "reap.source.expert_ids.L: the source expert ids kept, in the file's order); an identity plan "
           "then reproduces the source byte for byte",
           p.stamp, false);
    t.flag("--no-sums", "do not write SHA256SUMS", p.sums, false);
    t.flag("--force", "replace existing output files (never an input)", p.force);
    t.flag("--allow-other-model",
           "use a plan made for another model (its recorded model fingerprint differs); the output records it "
           "(reap.plan.other_model)",
           p.allow_other_model);
    t.flag("--dry-run", "print what would be written and the sizes; write nothing", p.dry_run);
    t.flag("--json", "print one JSON object on stdout (outputs, imatrix coverage); the text goes to stderr", p.json);
    t.section("importance matrix (prune, then quantise):");
    t.text("--imatrix", "IMATRIX",
           "the source model's llama-imatrix file (GGUF or legacy .dat): also write the pruned model's, every "
           "ffn_*_exps entry cut to the plan's keep lists, the rest unchanged, same format; refused when it is for "
           "another model or lacks expert entries",
           p.imatrix);
    t.text("--imatrix-out", "PATH", "where the sliced imatrix goes (default: OUT.imatrix.gguf, OUT.imatrix.dat for a legacy input)",
           p.imatrix_out);
    t.integer("--coverage-threshold", "N",
              "list the kept experts whose activation count in the imatrix is at most N (default 0: those that saw "
              "no token)",
              0, INT64_MAX, p.coverage_threshold);
    t.integer("--require-coverage", "N",
              "exit 1 and write nothing when a kept expert has fewer than N activations in the imatrix (a legacy "
              "imatrix records only whether an expert saw any token: N at most 1)",
              0, INT64_MAX, p.require_coverage);
    t.help_row();
    t.exit_note(reap::cli::exit_differs, "--require-coverage: a kept expert has fewer activations than required (nothing written)");
    t.prose("environment:\n"
            "  REAP_NO_COPY_FILE_RANGE=1   copy through the pread/write buffer only (never\n"
            "                              copy_file_range), e.g. to test that path\n");
}

bool exists(const std::string & path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

// The receipt in a few lines, whatever the number of layers; --json has it all.
void print_coverage(FILE * out, const reap::prune::coverage_receipt & c, int64_t threshold) {
    size_t n_layers = 0;
    for (const auto & l : c.layers) n_layers += l.has_entries;
    fprintf(out, "  imatrix coverage of the kept experts (%zu MoE layers x %" PRId64 " kept):\n", n_layers, c.n_keep);
    if (c.counts_known) {
        std::vector<int64_t> mins;
        for (const auto & l : c.layers) if (l.has_entries) mins.push_back(l.min);
        std::sort(mins.begin(), mins.end());
        fprintf(out, "    activations per kept expert: min %s, median %s, mean %s, max %s\n", reap::util::group_digits(c.min).c_str(),
                reap::util::group_digits((int64_t) c.median).c_str(), reap::util::group_digits((int64_t) (c.mean + 0.5)).c_str(),
                reap::util::group_digits(c.max).c_str());
        if (!mins.empty()) {
            fprintf(out, "    per-layer minimum: lowest %s, median %s, highest %s\n", reap::util::group_digits(mins.front()).c_str(),
                    reap::util::group_digits(mins[mins.size() / 2]).c_str(), reap::util::group_digits(mins.back()).c_str());
        }
    } else {
        fprintf(out, "    legacy imatrix: no per-expert counts, only whether an expert saw any token\n");
    }
    for (const auto & l : c.layers) {
        if (!l.has_entries) fprintf(out, "    layer %d: no entries (a nextn block llama.cpp does not run)\n", l.layer);
    }
    const auto low = c.at_most(threshold);
    if (low.empty()) {
        fprintf(out, "    kept experts with at most %" PRId64 " activations: none\n", threshold);
        return;
    }
    std::set<int> layers;
    for (const auto & r : low) layers.insert(r.layer);
    fprintf(out, "    kept experts with at most %" PRId64 " activations: %zu in %zu layers:", threshold, low.size(), layers.size());
    for (size_t i = 0; i < low.size() && i < 6; ++i) {
        fprintf(out, " %d/%" PRId64 "(%" PRId64 ")", low[i].layer, low[i].source, low[i].count < 0 ? 1 : low[i].count);
    }
    fprintf(out, "%s  [layer/source expert(count)]\n", low.size() > 6 ? " ... (--json lists all)" : "");
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
    if (params.imatrix.empty() && (!params.imatrix_out.empty() || params.require_coverage > 0)) {
        return t.usage_error("--imatrix-out and --require-coverage need --imatrix");
    }
    FILE * txt = params.json ? stderr : stdout;
    auto fail = [](const std::string & msg) { return reap::cli::fail("prune", msg); };
    std::string err;
    const auto t0 = std::chrono::steady_clock::now();
    reap::gguf::model model;
    if (!reap::gguf::open_model(params.model, model, err)) return fail(err);
    reap::plan plan;
    if (!reap::read_plan(params.plan, plan, err)) return fail(err);
    reap::moe::layout lay;
    if (!reap::model_layout(model, lay, err)) return fail(params.model + ": " + err);
    if (!reap::validate_plan(plan, reap::facts_of(lay), err)) {
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
    // (the imatrix included), nor another output
    std::vector<std::pair<std::string, std::string>> inputs = {{"plan", params.plan}};
    for (const auto & sh : model.shards) inputs.emplace_back("model file", sh.path);
    if (!params.imatrix.empty()) inputs.emplace_back("imatrix", params.imatrix);
    const std::string sums_path = reap::prune::sums_path_for(shards[0].path);
    for (const auto & sh : shards) {
        if (!reap::util::check_not_input(sh.path, inputs, err)) return fail(err);
        // SHA256SUMS is the folder's checksum file (updated by every prune into
        // it, --no-sums or not): a model by that name would be rewritten as one
        if (reap::util::base_name(sh.path) == reap::util::base_name(sums_path)) {
            return fail("refusing to write the model as " + sh.path +
                        ": SHA256SUMS is the name of the checksum file of its folder (choose another output name)");
        }
    }
    if (params.sums && !reap::util::check_not_input(sums_path, inputs, err)) return fail(err);
    if (params.sums) wopts.sums_path = sums_path;
    size_t n_sliced = 0;
    for (const auto & r : lay.roles) n_sliced += r.slice != reap::moe::slice_kind::none;
    uint64_t out_bytes = 0;
    for (const auto & sh : shards) out_bytes += sh.file_bytes;

    fprintf(txt, "reap prune: %s (%s, %" PRId64 " experts, %zu MoE layers, %s) -> keep %" PRId64 " per layer\n",
            params.model.c_str(), lay.arch.c_str(), lay.n_expert, lay.moe_layers.size(), format_size(model.file_bytes()).c_str(),
            plan.n_keep);
    fprintf(txt, "  %zu tensors, %zu sliced along the expert axis; output %s (%.1f%% of the source)\n", spec.tensors.size(),
            n_sliced, format_size(out_bytes).c_str(), model.file_bytes() ? 100.0 * double(out_bytes) / double(model.file_bytes()) : 0.0);
    // The sliced imatrix: checked, and its coverage judged, before anything is written.
    reap::prune::imatrix_slice islice;
    std::string imatrix_out;
    int require_status = 0;
    if (!params.imatrix.empty()) {
        if (!reap::prune::prepare_imatrix_slice(params.imatrix, model, lay, plan, islice, err)) return fail(err);
        imatrix_out = params.imatrix_out.empty() ? reap::prune::default_imatrix_out(params.output, islice.file.legacy)
                                                 : params.imatrix_out;
        // the output rule: not an input (the imatrix itself included), nor another output
        auto imatrix_inputs = inputs;
        for (const auto & sh : shards) imatrix_inputs.emplace_back("model output", sh.path);
        if (params.sums) imatrix_inputs.emplace_back("checksum file", sums_path);
        // (a dry run writes nothing, so an existing file is only reported)
        if (!reap::util::check_output(imatrix_out, imatrix_inputs, params.force || params.dry_run, err)) return fail(err);
        if (!islice.coverage.counts_known && params.require_coverage > 1) {
            return fail("--require-coverage " + std::to_string(params.require_coverage) + ": " + params.imatrix +
                        " is in the legacy format, which records no per-expert counts (only whether an expert saw "
                        "any token): at most 1 can be checked");
        }
        print_coverage(txt, islice.coverage, params.coverage_threshold);
        if (params.require_coverage > 0) {
            const auto low = islice.coverage.below(params.require_coverage);
            if (!low.empty()) {
                fprintf(stderr, "reap prune: %zu kept expert(s) have fewer than %" PRId64 " activations in %s:", low.size(),
                        params.require_coverage, params.imatrix.c_str());
                for (size_t i = 0; i < low.size() && i < 8; ++i) {
                    fprintf(stderr, " layer %d expert %" PRId64 " (%" PRId64 ")", low[i].layer, low[i].source, low[i].count);
                }
                fprintf(stderr, "%s; nothing written\n", low.size() > 8 ? " ..." : "");
                require_status = reap::cli::exit_differs;
            }
        }
    }
    nlohmann::json js{{"model", params.model}, {"plan", params.plan}, {"n_keep", plan.n_keep}, {"dry_run", params.dry_run}};
    if (!params.imatrix.empty()) {
        js["imatrix"] = {{"source", params.imatrix},
                         {"output", imatrix_out},
                         {"format", islice.file.legacy ? "dat" : "gguf"},
                         {"entries", islice.file.order.size()},
                         {"sliced_entries", islice.sliced.size()}};
        js["coverage"] = reap::prune::coverage_json(islice.coverage, params.coverage_threshold);
        if (params.require_coverage > 0) {
            nlohmann::json low = nlohmann::json::array();
            for (const auto & r : islice.coverage.below(params.require_coverage)) {
                low.push_back({{"layer", r.layer}, {"index", r.index}, {"source", r.source}, {"count", r.count}});
            }
            js["coverage"]["required"] = params.require_coverage;
            js["coverage"]["below_required"] = low;
        }
    }
    auto finish = [&](int status) {
        if (params.json) {
            js["status"] = status;
            printf("%s\n", reap::util::json_text(js, 1).c_str());
        }
        return status;
    };
    if (require_status != 0) return finish(require_status);
    nlohmann::json files = nlohmann::json::array();
    if (params.dry_run) {
        fprintf(txt, "dry run: would write\n");
        for (const auto & sh : shards) {
            const bool ex = exists(sh.path);
            fprintf(txt, "  %s  %" PRIu64 " bytes (%s), %zu tensors%s\n", sh.path.c_str(), sh.file_bytes,
                    format_size(sh.file_bytes).c_str(), sh.n_tensors,
                    ex ? (params.force ? "  [exists: would be replaced]" : "  [exists: would be refused without --force]") : "");
            files.push_back({{"path", sh.path}, {"bytes", sh.file_bytes}});
        }
        if (params.sums) fprintf(txt, "  %s\n", sums_path.c_str());
        if (!imatrix_out.empty()) {
            const bool ex = exists(imatrix_out);
            fprintf(txt, "  %s (sliced imatrix, %zu of %zu entries cut)%s\n", imatrix_out.c_str(), islice.sliced.size(),
                    islice.file.order.size(),
                    ex ? (params.force ? "  [exists: would be replaced]" : "  [exists: would be refused without --force]") : "");
        }
        js["files"] = files;
        return finish(0);
    }
    std::vector<std::string> written;
    // The sliced imatrix is written first but not published: it appears with the
    // model and its SHA256SUMS lines in one journal, in whatever folder it
    // goes, and a write that fails (a full disk) leaves neither. A killed
    // earlier run's journal is completed first, before this run's imatrix
    // clears that run's temps (the journal may name one of them).
    std::vector<reap::util::durable_file> imatrix_staged;
    if (!imatrix_out.empty()) {
        // the model folder's journal names it (in another folder: a declared output)
        reap::util::declare_output_elsewhere(imatrix_out);
        if (reap::util::recover_dir(reap::util::dir_of(shards[0].path), err) < 0) return fail(err);
        if (!reap::prune::write_imatrix_slice(islice, imatrix_out, params.force, true, err, &imatrix_staged)) return fail(err);
        for (auto & f : imatrix_staged) wopts.publish_with.push_back(&f);
    }
    // the shards, their SHA256SUMS lines and the imatrix appear together (hashed as written)
    if (!reap::gguf::write_output(spec, wopts, params.output, written, err)) return fail(err);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < written.size(); ++i) {
        fprintf(txt, "  wrote %s  %" PRIu64 " bytes (%s)\n", written[i].c_str(), shards[i].file_bytes,
                format_size(shards[i].file_bytes).c_str());
        files.push_back({{"path", written[i]}, {"bytes", shards[i].file_bytes}});
    }
    if (params.sums) fprintf(txt, "  wrote %s\n", sums_path.c_str());
    if (!imatrix_out.empty()) fprintf(txt, "  wrote %s (sliced imatrix)\n", imatrix_out.c_str());
    fprintf(txt, "done in %.2f s (%.1f MiB/s)\n", secs, secs > 0 ? double(out_bytes) / 1048576.0 / secs : 0.0);
    js["files"] = files;
    return finish(0);
}

// What reap prune prints (run.h): the summary of the source and the output,
// the imatrix coverage receipt, the dry run's list, the files written, and
// the --json object.
#include "prune/run.h"

#include "util/number_format.h"
#include "util/path.h"
#include "util/recovery.h"

#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <set>

namespace reap::prune {

using util::format_size;

namespace {

bool exists(const std::string & path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

const char * exists_note(const std::string & path, bool force) {
    if (!exists(path)) return "";
    return force ? "  [exists: would be replaced]" : "  [exists: would be refused without --force]";
}

} // namespace

void print_prune_summary(FILE * out, const prune_job & job) {
    const uint64_t src_bytes = job.model.file_bytes();
    fprintf(out, "reap prune: %s (%s, %" PRId64 " experts, %zu MoE layers, %s) -> keep %" PRId64 " per layer\n",
            job.req.model.c_str(), job.lay.arch.c_str(), job.lay.n_expert, job.lay.moe_layers.size(),
            format_size(src_bytes).c_str(), job.p.n_keep);
    fprintf(out, "  %zu tensors, %zu sliced along the expert axis; output %s (%.1f%% of the source)\n", job.spec.tensors.size(),
            job.n_sliced, format_size(job.out_bytes).c_str(), src_bytes ? 100.0 * double(job.out_bytes) / double(src_bytes) : 0.0);
}

void print_coverage(FILE * out, const coverage_receipt & c, int64_t threshold) {
    size_t n_layers = 0;
    for (const auto & l : c.layers) n_layers += l.has_entries;
    fprintf(out, "  imatrix coverage of the kept experts (%zu MoE layers x %" PRId64 " kept):\n", n_layers, c.n_keep);
    if (c.counts_known) {
        std::vector<int64_t> mins;
        for (const auto & l : c.layers) if (l.has_entries) mins.push_back(l.min);
        std::sort(mins.begin(), mins.end());
        fprintf(out, "    activations per kept expert: min %s, median %s, mean %s, max %s\n", util::group_digits(c.min).c_str(),
                util::group_digits((int64_t) c.median).c_str(), util::group_digits((int64_t) (c.mean + 0.5)).c_str(),
                util::group_digits(c.max).c_str());
        if (!mins.empty()) {
            fprintf(out, "    per-layer minimum: lowest %s, median %s, highest %s\n", util::group_digits(mins.front()).c_str(),
                    util::group_digits(mins[mins.size() / 2]).c_str(), util::group_digits(mins.back()).c_str());
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

void print_below_required(FILE * out, const prune_job & job) {
    const auto & low = job.below_required;
    fprintf(out, "reap prune: %zu kept expert(s) have fewer than %" PRId64 " activations in %s:", low.size(),
            job.req.require_coverage, job.req.imatrix.c_str());
    for (size_t i = 0; i < low.size() && i < 8; ++i) {
        fprintf(out, " layer %d expert %" PRId64 " (%" PRId64 ")", low[i].layer, low[i].source, low[i].count);
    }
    fprintf(out, "%s; nothing written\n", low.size() > 8 ? " ..." : "");
}

void print_dry_run(FILE * out, const prune_job & job) {
    fprintf(out, "dry run: would write\n");
    for (const auto & sh : job.shards) {
        fprintf(out, "  %s  %" PRIu64 " bytes (%s), %zu tensors%s\n", sh.path.c_str(), sh.file_bytes,
                format_size(sh.file_bytes).c_str(), sh.n_tensors, exists_note(sh.path, job.req.force));
    }
    if (job.req.sums) fprintf(out, "  %s\n", job.sums_path.c_str());
    if (!job.imatrix_out.empty()) {
        fprintf(out, "  %s (sliced imatrix, %zu of %zu entries cut)%s\n", job.imatrix_out.c_str(), job.islice.sliced.size(),
                job.islice.file.order.size(), exists_note(job.imatrix_out, job.req.force));
    }
    // what killed runs left in the output folders, which the real run cleans first
    std::set<std::string> journals, temps;
    std::vector<std::string> outputs;
    for (const auto & sh : job.shards) outputs.push_back(sh.path);
    if (!job.imatrix_out.empty()) outputs.push_back(job.imatrix_out);
    for (const std::string & o : outputs) {
        const util::pending_cleanup c = util::cleanup_before(o);
        for (const std::string & j : c.journals) journals.insert(util::dir_of(o) + "/" + j);
        for (const std::string & t : c.temps) temps.insert(util::dir_of(o) + "/" + t);
    }
    for (const std::string & j : journals) fprintf(out, "would first complete the journal of a killed run %s\n", j.c_str());
    for (const std::string & t : temps) fprintf(out, "would first remove the stale temp file %s\n", t.c_str());
}

void print_written(FILE * out, const prune_job & job, const prune_written & w) {
    for (size_t i = 0; i < w.files.size(); ++i) {
        fprintf(out, "  wrote %s  %" PRIu64 " bytes (%s)\n", w.files[i].c_str(), job.shards[i].file_bytes,
                format_size(job.shards[i].file_bytes).c_str());
    }
    if (job.req.sums) fprintf(out, "  wrote %s\n", job.sums_path.c_str());
    if (!job.imatrix_out.empty()) fprintf(out, "  wrote %s (sliced imatrix)\n", job.imatrix_out.c_str());
    fprintf(out, "done in %.2f s (%.1f MiB/s)\n", w.seconds, w.seconds > 0 ? double(job.out_bytes) / 1048576.0 / w.seconds : 0.0);
}

nlohmann::json prune_json(const prune_job & job, int64_t threshold, const std::vector<std::string> * files, int status) {
    const prune_request & req = job.req;
    nlohmann::json js{{"model", req.model}, {"plan", req.plan}, {"n_keep", job.p.n_keep}, {"dry_run", req.dry_run}};
    if (job.has_imatrix()) {
        js["imatrix"] = {{"source", req.imatrix},
                         {"output", job.imatrix_out},
                         {"format", job.islice.file.legacy ? "dat" : "gguf"},
                         {"entries", job.islice.file.order.size()},
                         {"sliced_entries", job.islice.sliced.size()}};
        js["coverage"] = coverage_json(job.islice.coverage, threshold);
        if (req.require_coverage > 0) {
            nlohmann::json low = nlohmann::json::array();
            for (const auto & r : job.below_required) {
                low.push_back({{"layer", r.layer}, {"index", r.index}, {"source", r.source}, {"count", r.count}});
            }
            js["coverage"]["required"] = req.require_coverage;
            js["coverage"]["below_required"] = low;
        }
    }
    if (files) {
        nlohmann::json arr = nlohmann::json::array();
        for (size_t i = 0; i < files->size(); ++i) arr.push_back({{"path", (*files)[i]}, {"bytes", job.shards[i].file_bytes}});
        js["files"] = arr;
    }
    js["status"] = status;
    return js;
}

} // namespace reap::prune

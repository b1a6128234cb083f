// reap merge: sum saliency archives measured on disjoint corpus shards (or
// domains) of the same model into one archive. Options and printing over
// reap::saliency::merge_archives (saliency/merge.h), which owns the rules.
#include "cli/args.h"
#include "cli/commands.h"
#include "saliency/merge.h"

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct merge_params {
    std::vector<std::string> inputs;
    std::string              output;
    bool                     force = false;
};

// The command's options, parsed and printed from one table.
void declare_merge_options(reap::cli::options & t, merge_params & p) {
    t.about(
        "Merges saliency archives (reap calibrate / reap imatrix output) of the same model\n"
        "into one. Accumulators are plain sums, so archives of disjoint corpus shards merge\n"
        "exactly: per domain, n_tokens, count, gate_sum, reap_sum, ean_sum (or energy_sum)\n"
        "are added and max_norm takes the maximum. Domains that appear in only some inputs\n"
        "are carried over; the domain order is that of first appearance.\n"
        "\n"
        "The inputs must come from the same model (arch, layer and expert counts, MoE\n"
        "layers and the sha256 of the router weights) and hold the same metric set\n"
        "('reap' from calibrate, 'energy' from imatrix); anything else is refused with the\n"
        "field that differs. Provenance keys that agree in every input are kept; the\n"
        "output also records the sha256 of each input (reap.saliency.merge.inputs) and\n"
        "the data sha256 of every archive merged into it (reap.saliency.merge.sources).\n"
        "One calibration is counted once: the same archive given twice, a copy of it, or\n"
        "an archive together with one merged from it is refused, naming the two. One\n"
        "sample is counted once: two calibrations of the same corpus file (its sha256)\n"
        "must be disjoint shards of it (--shard i/n and j/m share samples unless i and j\n"
        "differ mod gcd(n, m)); the whole corpus and a shard of it, or two --max-tokens\n"
        "caps of one shard (prefixes of the same samples), are refused. The output records\n"
        "what each calibration covered (reap.saliency.merge.coverage: corpus sha256, i/n).\n"
        "The output is written to a temp file and renamed into place; it never replaces an\n"
        "input, nor an existing file without --force.\n");
    t.section("options:");
    t.text("-o, --output", "OUT.gguf", "the merged archive", p.output);
    t.flag("--force", "replace an existing OUT.gguf", p.force);
    t.help_row();
    t.positional([&p](const std::string & a, std::string &) {
        p.inputs.push_back(a);
        return true;
    });
    t.require(p.output, "no output given (-o OUT.gguf)");
}

} // namespace

int cmd_merge(int argc, char ** argv) {
    merge_params p;
    reap::cli::options t("merge", "usage: reap merge A.gguf B.gguf [...] -o OUT.gguf [--force]");
    declare_merge_options(t, p);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    if (p.inputs.size() < 2) return t.usage_error("give at least two archives to merge (got " + std::to_string(p.inputs.size()) + ")");
    reap::saliency::merge_request req;
    req.inputs = p.inputs;
    req.output = p.output;
    req.force = p.force;
    req.tool = std::string("reap merge ") + REAP_VERSION;
    reap::saliency::merge_result res;
    reap::util::error err;
    if (!reap::saliency::merge_archives(req, res, err)) return reap::cli::fail("merge", err);
    for (const auto & in : res.inputs) {
        printf("  %s: %s, %zu domain(s), metric set '%s'\n", in.path.c_str(), in.arch.c_str(), in.n_domains,
               reap::saliency::metric_set_name(in.metrics));
    }
    printf("reap merge: wrote %s (%zu inputs)\n", p.output.c_str(), p.inputs.size());
    for (const auto & [name, n] : res.domains) printf("  domain %-20s %" PRId64 " tokens\n", name.c_str(), n);
    if (!res.count_invariant) printf("  note: the count invariant does not hold: %s\n", res.invariant_note.c_str());
    return 0;
}

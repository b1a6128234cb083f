// reap merge: sum saliency archives measured on disjoint corpus shards (or
// domains) of the same model into one archive. A thin layer over
// reap::saliency::read_archive / merge_into / write_archive.
#include "cli/args.h"
#include "cli/commands.h"
#include "saliency/archive.h"
#include "util/file.h"
#include "util/sha256.h"

#include <algorithm>
#include <cinttypes>
#include <map>
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
        "an archive together with one merged from it is refused, naming the two.\n"
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
    const std::vector<std::string> & inputs = p.inputs;
    const std::string & output = p.output;
    auto fail = [](const std::string & msg) { return reap::cli::fail("merge", msg); };
    std::string err;
    {   // the output rule (util/file.h)
        std::vector<std::pair<std::string, std::string>> ins;
        for (const auto & in : inputs) ins.emplace_back("input", in);
        if (!reap::util::check_output(output, ins, p.force, err)) return fail(err);
    }
    reap::saliency::archive merged;
    std::vector<std::string> hashes, sources;
    std::map<std::string, size_t> holder;   // data sha256 of an archive merged in -> the input holding it
    std::vector<std::vector<std::string>> recorded(inputs.size());   // what each input says it was merged from (files)
    for (size_t i = 0; i < inputs.size(); ++i) {
        reap::saliency::archive a;
        if (!reap::saliency::read_archive(inputs[i], a, err)) return fail(err);
        std::string hex;
        if (!reap::util::sha256_file(inputs[i], hex, err)) return fail(err);
        hashes.push_back(hex);
        // one calibration counted once: the same archive twice, a copy of it, or
        // an archive merged from it beside it are refused, naming the two
        std::vector<std::string> held;
        if (!reap::saliency::merge_sources(a, held, err)) return fail(inputs[i] + ": " + err);
        for (const std::string & h : held) {
            const auto [it, fresh] = holder.emplace(h, i);
            if (!fresh) {
                return fail(inputs[it->second] + " and " + inputs[i] + " both hold the archive with data sha256 " + h.substr(0, 16) +
                            "...: merging them would count its tokens twice (give each calibration once)");
            }
            sources.push_back(h);
        }
        // archives merged before sources were recorded list their inputs' file hashes
        std::string rerr;
        a.provenance.get_string_array("reap.saliency.merge.inputs", recorded[i], rerr);
        for (size_t j = 0; j < i; ++j) {
            const bool j_in_i = std::find(recorded[i].begin(), recorded[i].end(), hashes[j]) != recorded[i].end();
            const bool i_in_j = std::find(recorded[j].begin(), recorded[j].end(), hex) != recorded[j].end();
            if (j_in_i || i_in_j) {
                return fail(inputs[j] + " and " + inputs[i] + ": " + (j_in_i ? inputs[i] : inputs[j]) + " was merged from " +
                            (j_in_i ? inputs[j] : inputs[i]) + " (file sha256 " + (j_in_i ? hashes[j] : hex).substr(0, 16) +
                            "...): merging them would count its tokens twice");
            }
        }
        printf("  %s: %s, %zu domain(s), metric set '%s'\n", inputs[i].c_str(), a.model.arch.c_str(), a.domains.size(),
               reap::saliency::metric_set_name(a.metrics));
        if (i == 0) {
            merged = std::move(a);
        } else if (!reap::saliency::merge_into(merged, a, err)) {
            return fail(inputs[0] + " and " + inputs[i] + ": " + err);
        }
    }
    merged.provenance.set_string_array("reap.saliency.merge.inputs", hashes);
    merged.provenance.set_string_array(reap::saliency::k_key_merge_sources, sources);
    merged.provenance.set_string(reap::saliency::k_key_tool, std::string("reap merge ") + REAP_VERSION);
    if (!reap::saliency::write_archive(merged, output, err, p.force)) return fail(err);
    std::string inv;
    const bool invariant = reap::saliency::check_count_invariant(merged, inv, 1e-9);
    printf("reap merge: wrote %s (%zu inputs)\n", output.c_str(), inputs.size());
    for (const auto & d : merged.domains) printf("  domain %-20s %" PRId64 " tokens\n", d.name.c_str(), d.n_tokens);
    if (!invariant) printf("  note: the count invariant does not hold: %s\n", inv.c_str());
    return 0;
}

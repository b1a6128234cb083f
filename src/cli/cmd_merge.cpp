// reap merge: sum saliency archives measured on disjoint corpus shards (or
// domains) of the same model into one archive. A thin layer over
// reap::saliency::read_archive / merge_into / write_archive.
#include "cli/args.h"
#include "cli/commands.h"
#include "saliency/archive.h"
#include "util/sha256.h"

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

namespace {

const char * k_usage_line = "usage: reap merge A.gguf B.gguf [...] -o OUT.gguf [--force]";

void print_usage(FILE * out) {
    fprintf(out,
        "%s\n"
        "\n"
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
        "output also records the sha256 of each input (reap.saliency.merge.inputs).\n"
        "The output is written to a temp file and renamed into place; it never replaces an\n"
        "input, nor an existing file without --force.\n"
        "\n"
        "options:\n"
        "  -o, --output OUT.gguf   the merged archive\n"
        "  --force                 replace an existing OUT.gguf\n"
        "  -h, --help              this help\n",
        k_usage_line);
}

} // namespace

int cmd_merge(int argc, char ** argv) {
    std::vector<std::string> inputs;
    std::string output;
    bool force = false;
    auto fail = [](const std::string & msg) { return reap::cli::fail("merge", msg); };
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            print_usage(stdout);
            return 0;
        } else if (arg == "-o" || arg == "--output") {
            if (i + 1 >= argc) {
                fprintf(stderr, "reap merge: %s needs a value\n%s\n", arg.c_str(), k_usage_line);
                return 1;
            }
            output = argv[++i];
        } else if (arg == "--force") {
            force = true;
        } else if (!arg.empty() && arg[0] == '-') {
            return reap::cli::usage_error("merge", "unknown option " + arg, k_usage_line);
        } else {
            inputs.push_back(arg);
        }
    }
    if (output.empty()) {
        fprintf(stderr, "reap merge: no output given (-o OUT.gguf)\n%s\n", k_usage_line);
        return 1;
    }
    if (inputs.size() < 2) {
        fprintf(stderr, "reap merge: give at least two archives to merge (got %zu)\n%s\n", inputs.size(), k_usage_line);
        return 1;
    }
    for (const auto & in : inputs) {
        if (reap::cli::same_file(in, output)) return fail("refusing to write " + output + " over the input " + in);
    }

    std::string err;
    reap::saliency::archive merged;
    std::vector<std::string> hashes;
    for (size_t i = 0; i < inputs.size(); ++i) {
        reap::saliency::archive a;
        if (!reap::saliency::read_archive(inputs[i], a, err)) return fail(err);
        std::string hex;
        if (!reap::util::sha256_file(inputs[i], hex, err)) return fail(err);
        hashes.push_back(hex);
        printf("  %s: %s, %zu domain(s), metric set '%s'\n", inputs[i].c_str(), a.model.arch.c_str(), a.domains.size(),
               reap::saliency::metric_set_name(a.metrics));
        if (i == 0) {
            merged = std::move(a);
        } else if (!reap::saliency::merge_into(merged, a, err)) {
            return fail(inputs[0] + " and " + inputs[i] + ": " + err);
        }
    }
    merged.provenance.set_string_array("reap.saliency.merge.inputs", hashes);
    merged.provenance.set_string(reap::saliency::k_key_tool, std::string("reap merge ") + REAP_VERSION);
    if (!reap::saliency::write_archive(merged, output, err, force)) return fail(err);
    std::string inv;
    const bool invariant = reap::saliency::check_count_invariant(merged, inv, 1e-9);
    printf("reap merge: wrote %s (%zu inputs)\n", output.c_str(), inputs.size());
    for (const auto & d : merged.domains) printf("  domain %-20s %" PRId64 " tokens\n", d.name.c_str(), d.n_tokens);
    if (!invariant) printf("  note: the count invariant does not hold: %s\n", inv.c_str());
    return 0;
}

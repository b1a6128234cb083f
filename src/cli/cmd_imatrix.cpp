// reap imatrix: the command-line shell over src/saliency/imatrix.h. Turns
// llama-imatrix files (GGUF or legacy .dat), one domain each, into a saliency
// archive of per-expert counts and ffn_down_exps input energy. Errors go to
// stderr with exit status 1.
#include "cli/args.h"
#include "gguf/gguf.h"
#include "saliency/imatrix.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

const char * USAGE =
    "usage: reap imatrix [--domain NAME=]IMATRIX ... -o SALIENCY.gguf [-m MODEL.gguf] [--force]\n"
    "\n"
    "Builds a saliency archive (metric set \"energy\") from llama.cpp importance-matrix files\n"
    "(llama-imatrix -o FILE.gguf, or the legacy .dat format). Per MoE layer and expert:\n"
    "  count       tokens routed to the expert (the .counts of blk.L.ffn_down_exps)\n"
    "  energy_sum  Σ ‖h‖² of the expert's ffn_down input over those tokens (its in_sum2 row)\n"
    "Each file is one domain, named by --domain NAME=FILE or after the file's stem; files\n"
    "with the same domain name are summed. Experts that saw no token are listed.\n"
    "\n"
    "options:\n"
    "  --domain NAME=FILE   an imatrix file and the domain it measures\n"
    "  FILE                 an imatrix file; domain = its stem (en.imatrix.gguf -> en.imatrix)\n"
    "  -o, --output FILE    the archive to write\n"
    "  -m, --model FILE     the model the files were made with: every entry must name one of\n"
    "                       its tensors with the right shape and expert count (a file from\n"
    "                       another model is rejected), and the archive carries the model's\n"
    "                       fingerprint so that plan/merge accept it. Required for .dat files.\n"
    "  --force              replace an existing output\n"
    "  -q, --quiet          do not list unused experts\n"
    "\n"
    "Legacy .dat files hold no per-expert counts: see src/saliency/imatrix.h for what is stored.\n";

int usage_error(const std::string & msg) { return reap::cli::usage_error_full("imatrix", msg, USAGE); }

} // namespace

int cmd_imatrix(int argc, char ** argv) {
    std::vector<reap::saliency::imatrix_input> inputs;
    std::string out_path, model_path, err;
    bool force = false, quiet = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            fputs(USAGE, stdout);
            return 0;
        } else if (a == "-o" || a == "--output" || a == "-m" || a == "--model" || a == "--domain") {
            if (i + 1 >= argc) return usage_error(a + " needs a value");
            const std::string v = argv[++i];
            if (a == "--domain") {
                reap::saliency::imatrix_input in;
                if (!reap::saliency::parse_imatrix_input(v, true, in, err)) return usage_error(err);
                inputs.push_back(in);
            } else if (a == "-m" || a == "--model") {
                model_path = v;
            } else {
                out_path = v;
            }
        } else if (a == "--force") {
            force = true;
        } else if (a == "-q" || a == "--quiet") {
            quiet = true;
        } else if (!a.empty() && a[0] == '-') {
            return usage_error("unknown option '" + a + "'");
        } else {
            reap::saliency::imatrix_input in;
            if (!reap::saliency::parse_imatrix_input(a, false, in, err)) return usage_error(err);
            inputs.push_back(in);
        }
    }
    if (inputs.empty()) return usage_error("no imatrix files");
    if (out_path.empty()) return usage_error("no output (-o)");

    reap::gguf::model model;
    if (!model_path.empty() && !reap::gguf::open_model(model_path, model, err)) return reap::cli::fail("imatrix", err);
    reap::saliency::archive arch;
    std::vector<reap::saliency::imatrix_domain_report> reports;
    if (!reap::saliency::import_imatrix(inputs, model_path.empty() ? nullptr : &model, arch, reports, err) ||
        !reap::saliency::write_archive(arch, out_path, err, force)) {
        return reap::cli::fail("imatrix", err);
    }
    for (const auto & r : reports) {
        printf("%-16s %s%s: %lld tokens, %zu unused expert slots\n", r.domain.c_str(), r.path.c_str(),
               r.legacy ? " (legacy: no per-expert counts)" : "", (long long) r.n_tokens, r.n_unused);
        if (!quiet) {
            for (const auto & u : r.unused) {
                printf("  layer %d: no tokens for expert%s", u.first, u.second.size() > 1 ? "s" : "");
                for (int e : u.second) printf(" %d", e);
                printf("\n");
            }
        }
    }
    if (model_path.empty()) {
        printf("note: no -m: the archive's fingerprint is inferred (arch 'unknown'); pass -m to use it with plan/merge\n");
    }
    printf("wrote %s\n", out_path.c_str());
    return 0;
}

// reap imatrix: the command-line shell over src/saliency/imatrix.h. Turns
// llama-imatrix files (GGUF or legacy .dat), one domain each, into a saliency
// archive of per-expert counts and ffn_down_exps input energy. Errors go to
// stderr with exit status 2.
#include "cli/args.h"
#include "gguf/gguf.h"
#include "saliency/imatrix.h"
#include "util/file.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

struct imatrix_params {
    std::vector<reap::saliency::imatrix_input> inputs;
    std::string                                out_path;
    std::string                                model_path;
    bool                                       force = false;
    bool                                       quiet = false;
    bool                                       channels = false;
};

// The command's options, parsed and printed from one table.
void declare_imatrix_options(reap::cli::options & t, imatrix_params & p) {
    t.about(
        "Builds a saliency archive (metric set \"energy\") from llama.cpp importance-matrix files\n"
        "(llama-imatrix -o FILE.gguf, or the legacy .dat format). Per MoE layer and expert:\n"
        "  count       tokens routed to the expert (the .counts of blk.L.ffn_down_exps)\n"
        "  energy_sum  Σ ‖h‖² of the expert's ffn_down input over those tokens (its in_sum2 row)\n"
        "Each file is one domain, named by --domain NAME=FILE or after the file's stem; files\n"
        "with the same domain name are summed. Experts that saw no token are listed.\n"
        "Legacy .dat files hold no per-expert counts: see src/saliency/imatrix.h for what is stored.\n"
        "Such an archive ranks by energy, frequency or random. What it cannot give: an imatrix\n"
        "holds the input of the down projection, not the expert's output, so REAP, MAN, MSAN and\n"
        "EAN need reap calibrate; AIMER needs no tokens at all (reap score).\n"
        "\n"
        "arguments:\n"
        "  FILE  an imatrix file; domain = its stem (en.imatrix.gguf -> en.imatrix)\n");
    t.section("options:");
    t.custom("--domain", "NAME=FILE", "an imatrix file and the domain it measures",
             [&p](const std::string & v, std::string & err) {
                 reap::saliency::imatrix_input in;
                 if (!reap::saliency::parse_imatrix_input(v, true, in, err)) return false;
                 p.inputs.push_back(in);
                 return true;
             });
    t.text("-o, --output", "FILE", "the archive to write", p.out_path);
    t.text("-m, --model", "FILE",
           "the model the files were made with: every entry must name one of its tensors with the right shape and "
           "expert count (a file from another model is rejected), and the archive carries the model's fingerprint so "
           "that plan/merge accept it. Required for .dat files.",
           p.model_path);
    t.flag("--force", "replace an existing output", p.force);
    t.flag("-q, --quiet", "do not list unused experts", p.quiet);
    t.flag("--width-saliency",
           "also per channel: ch_energy = the expert's in_sum2 row, Σ h_c² per channel of the ffn_down input "
           "(archive version 2; what reap calibrate --width-saliency records as ch_energy); with -m of a llama4 "
           "model also sh_energy from blk.L.ffn_down_shexp.weight (version 3)",
           p.channels);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        reap::saliency::imatrix_input in;
        if (!reap::saliency::parse_imatrix_input(a, false, in, err)) return false;
        p.inputs.push_back(in);
        return true;
    });
    t.require(p.inputs, "no imatrix files")
     .require(p.out_path, "no output (-o)");
}

} // namespace

int cmd_imatrix(int argc, char ** argv) {
    imatrix_params p;
    reap::cli::options t("imatrix", "usage: reap imatrix [--domain NAME=]IMATRIX ... -o SALIENCY.gguf [-m MODEL.gguf] [--force]");
    declare_imatrix_options(t, p);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    const std::vector<reap::saliency::imatrix_input> & inputs = p.inputs;
    const std::string & out_path = p.out_path;
    const std::string & model_path = p.model_path;
    const bool force = p.force, quiet = p.quiet;
    std::string err;

    reap::gguf::model model;
    if (!model_path.empty() && !reap::gguf::open_model(model_path, model, err)) return reap::cli::fail("imatrix", err);
    {   // the output rule (util/file.h)
        std::vector<std::pair<std::string, std::string>> ins;
        for (const auto & in : inputs) ins.emplace_back("imatrix", in.path);
        for (const auto & sh : model.shards) ins.emplace_back("model file", sh.path);
        if (!reap::util::check_output(out_path, ins, force, err)) return reap::cli::fail("imatrix", err);
    }
    reap::saliency::archive arch;
    std::vector<reap::saliency::imatrix_domain_report> reports;
    if (!reap::saliency::import_imatrix(inputs, model_path.empty() ? nullptr : &model, arch, reports, err, p.channels) ||
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
        printf("note: no -m: the archive's fingerprint is inferred (arch 'unknown'); pass -m to use it with plan/merge%s\n",
               p.channels ? " (and, for llama4, to import the shared expert's channel energies)" : "");
    }
    printf("wrote %s\n", out_path.c_str());
    return 0;
}

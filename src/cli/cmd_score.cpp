// reap score: a saliency archive from the weights alone (AIMER), no corpus and
// no forward pass. Options and printing over reap::saliency::score_weights
// (saliency/weight_scores.h), which owns the rule.
#include "cli/args.h"
#include "cli/commands.h"
#include "saliency/weight_scores.h"
#include "util/number_format.h"
#include "util/output_rule.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <unistd.h>

namespace {

struct score_params {
    std::string model, output;
    int64_t     threads = 0;   // 0: min(4, the machine's threads)
    bool        force = false;
    bool        quiet = false;
};

void declare_score_options(reap::cli::options & t, score_params & p) {
    t.about(
        "Scores every routed expert of a MoE GGUF from its weights alone (AIMER): for each\n"
        "expert, over every element of its gate, up and down weights together (or its fused\n"
        "gate_up and down), dequantised by ggml, mean|w| / sqrt(mean w^2). No corpus, no\n"
        "forward pass: one sequential read of the expert pool, memory flat in the model's\n"
        "size. Any type the pinned ggml dequantises, split sets as one model; shared experts\n"
        "are not routed and not scored.\n"
        "\n"
        "The output is a saliency archive of metric set 'weights' that plan, sweep, compare,\n"
        "fit and report take like any other, with --method aimer (their default for it):\n"
        "AIMER removes the experts of highest score first (they are the flattest). The\n"
        "archive records that its scores came from the weights, not from tokens, and the\n"
        "model card says the build is calibration-free: nothing was measured on text, so\n"
        "nothing says which domains the kept experts serve.\n");
    t.section("options:");
    t.text("-m, --model", "MODEL.gguf", "the model (the first shard of a split set)", p.model);
    t.text("-o, --output", "SCORES.gguf", "the weights archive to write", p.output);
    t.integer("-t, --threads", "N", "threads that dequantise (default: min(4, this machine's))", 1, 256, p.threads);
    t.flag("--force", "replace an existing SCORES.gguf", p.force);
    t.flag("-q, --quiet", "no progress line", p.quiet);
    t.help_row();
    t.require(p.model, "no model given (-m MODEL.gguf)");
    t.require(p.output, "no output given (-o SCORES.gguf)");
}

// "\rscore: 1.2 GB / 2.4 GB (50.0%), 800 MB/s, ETA 0:02" on stderr.
void print_progress(uint64_t done, uint64_t total, std::chrono::steady_clock::time_point t0) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double rate = s > 0 ? (double) done / s : 0;
    const long long eta = rate > 0 ? (long long) ((double) (total - done) / rate) : 0;
    fprintf(stderr, "\rscore: %s / %s (%.1f%%), %s/s, ETA %lld:%02lld   ", reap::util::format_size(done).c_str(),
            reap::util::format_size(total).c_str(), total ? 100.0 * (double) done / (double) total : 100.0,
            reap::util::format_size((uint64_t) rate).c_str(), eta / 60, eta % 60);
}

}  // namespace

int cmd_score(int argc, char ** argv) {
    score_params p;
    reap::cli::options t("score", "usage: reap score -m MODEL.gguf -o SCORES.gguf [-t N] [--force]");
    declare_score_options(t, p);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    std::string err;
    reap::gguf::model m;
    if (!reap::gguf::open_model(p.model, m, err)) return reap::cli::fail("score", err);
    std::vector<std::pair<std::string, std::string>> inputs;
    for (const auto & sh : m.shards) inputs.push_back({"model", sh.path});
    if (!reap::util::check_output(p.output, inputs, p.force, err)) return reap::cli::fail("score", err);

    reap::saliency::weight_score_options o;
    o.n_threads = p.threads > 0 ? (int) p.threads : (int) std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
    const auto t0 = std::chrono::steady_clock::now();
    bool printed = false;
    if (!p.quiet && isatty(fileno(stderr))) {
        o.on_progress = [t0, &printed](uint64_t done, uint64_t total) {
            print_progress(done, total, t0);
            printed = true;
        };
    }
    reap::saliency::archive a;
    reap::saliency::weight_score_report rep;
    const bool ok = reap::saliency::score_weights(m, o, a, rep, err);
    if (printed) fprintf(stderr, "\n");
    if (!ok) return reap::cli::fail("score", p.model + ": " + err);
    a.provenance.set_string("reap.saliency.score_tool", std::string("reap score ") + REAP_VERSION);
    if (!reap::saliency::write_archive(a, p.output, err, p.force)) return reap::cli::fail("score", err);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("reap score: wrote %s: AIMER of %u experts x %zu MoE layers, from %zu slab tensors (%s), %s read in %.1f s\n",
           p.output.c_str(), a.model.n_expert, a.model.moe_layers.size(), rep.n_tensors, rep.types.c_str(),
           reap::util::format_size(rep.slab_bytes).c_str(), s);
    return 0;
}

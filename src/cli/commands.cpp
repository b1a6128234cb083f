// The dispatch table: one line per subcommand. In a build without llama.cpp
// (cmake -DREAP_WITH_LLAMA=OFF) the commands that run a model are refusals here.
#include "cli/commands.h"

#include "cli/args.h"

#include <cstdio>

#ifndef REAP_WITH_LLAMA
#error "REAP_WITH_LLAMA (1 or 0) comes from CMakeLists.txt"
#endif

int cmd_inspect(int argc, char ** argv);
int cmd_imatrix(int argc, char ** argv);
int cmd_prune(int argc, char ** argv);
int cmd_verify(int argc, char ** argv);
int cmd_merge(int argc, char ** argv);
int cmd_score(int argc, char ** argv);
int cmd_plan(int argc, char ** argv);
int cmd_compare(int argc, char ** argv);
int cmd_report(int argc, char ** argv);

#if REAP_WITH_LLAMA
int cmd_calibrate(int argc, char ** argv);
int cmd_eval(int argc, char ** argv);
int cmd_sweep(int argc, char ** argv);
int cmd_fit(int argc, char ** argv);
int cmd_judge(int argc, char ** argv);
#else
// Whatever the arguments (--help too): the command is not in this build.
static int without_llama(int, char ** argv) {
    fprintf(stderr,
            "reap %s: this reap was built without llama.cpp (cmake -DREAP_WITH_LLAMA=OFF), and %s runs a model "
            "through it; build reap with -DREAP_WITH_LLAMA=ON (the default) for %s\n",
            argv[0], argv[0], argv[0]);
    return reap::cli::exit_error;
}
static int cmd_calibrate(int argc, char ** argv) { return without_llama(argc, argv); }
static int cmd_eval(int argc, char ** argv) { return without_llama(argc, argv); }
static int cmd_sweep(int argc, char ** argv) { return without_llama(argc, argv); }
static int cmd_fit(int argc, char ** argv) { return without_llama(argc, argv); }
static int cmd_judge(int argc, char ** argv) { return without_llama(argc, argv); }
#endif

namespace reap {

bool built_with_llama() { return REAP_WITH_LLAMA; }

const std::vector<command> & commands() {
    static const std::vector<command> table = {
        {"inspect", "census of a MoE GGUF model: layers, experts, bytes by type, sizes at keep counts", cmd_inspect},
        {"calibrate", "run the model over a domain-tagged corpus and record per-expert saliency (REAP, EAN, counts)", cmd_calibrate, true},
        {"imatrix", "saliency archive (per-expert counts and input energy) from llama-imatrix files", cmd_imatrix},
        {"score", "per-expert saliency from the weights alone (AIMER): no corpus, no forward pass, one read of the pool", cmd_score},
        {"merge", "sum saliency archives of disjoint corpus shards or domains of the same model into one", cmd_merge},
        {"plan", "choose the experts to keep per layer from a saliency archive (--keep, --ratio or an exact --budget)", cmd_plan},
        {"prune", "write the pruned copy of a model that a plan describes (byte slicing, any quantisation, split sets)", cmd_prune},
        {"verify", "prove byte for byte that a pruned model is the source cut by its plan; check SHA256SUMS", cmd_verify},
        {"compare", "overlap of two plans per layer, and the saliency each keeps against the top-N oracle", cmd_compare},
        {"eval", "what the cut cost: PPL, KL divergence, top-1 agreement of base vs pruned or masked (per domain)", cmd_eval, true},
        {"sweep", "score several cut sizes by masking, without writing a model: the table and chart to choose N", cmd_sweep, true},
        {"fit", "from a memory budget to the best verified build: experts, channels and source bits chosen by measurement", cmd_fit, true},
        {"judge", "a blinded, order-swapped pairwise judge of two builds' answers to the same tasks (wins, losses, ties)", cmd_judge, true},
        {"report", "the model card of a pruned build, written and checked from its receipts, with figures", cmd_report},
    };
    return table;
}

} // namespace reap

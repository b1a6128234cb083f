// The dispatch table: one line per subcommand.
#include "cli/commands.h"

int cmd_inspect(int argc, char ** argv);
int cmd_eval(int argc, char ** argv);
int cmd_prune(int argc, char ** argv);
int cmd_verify(int argc, char ** argv);

namespace reap {

const std::vector<command> & commands() {
    static const std::vector<command> table = {
        {"inspect", "census of a MoE GGUF model: layers, experts, bytes by type, sizes at keep counts", cmd_inspect},
        {"prune", "write the pruned copy of a model that a plan describes (byte slicing, any quantisation, split sets)", cmd_prune},
        {"verify", "prove byte for byte that a pruned model is the source cut by its plan; check SHA256SUMS", cmd_verify},
        {"eval", "what the cut cost: PPL, KL divergence, top-1 agreement of base vs pruned (per domain)", cmd_eval},
    };
    return table;
}

} // namespace reap

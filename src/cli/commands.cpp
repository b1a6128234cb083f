// The dispatch table: one line per subcommand.
#include "cli/commands.h"

int cmd_inspect(int argc, char ** argv);
int cmd_eval(int argc, char ** argv);

namespace reap {

const std::vector<command> & commands() {
    static const std::vector<command> table = {
        {"inspect", "census of a MoE GGUF model: layers, experts, bytes by type, sizes at keep counts", cmd_inspect},
        {"eval", "what the cut cost: PPL, KL divergence, top-1 agreement of base vs pruned (per domain)", cmd_eval},
    };
    return table;
}

} // namespace reap

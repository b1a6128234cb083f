// The dispatch table: one line per subcommand.
#include "cli/commands.h"

int cmd_inspect(int argc, char ** argv);

namespace reap {

const std::vector<command> & commands() {
    static const std::vector<command> table = {
        {"inspect", "census of a MoE GGUF model: layers, experts, bytes by type, sizes at keep counts", cmd_inspect},
    };
    return table;
}

} // namespace reap

// The table of reap subcommands. Each subcommand lives in its own file
// src/cli/cmd_<name>.cpp and exposes one entry point, int cmd_<name>(argc, argv),
// where argv[0] is the subcommand's name.
#pragma once

#include <vector>

#ifndef REAP_VERSION
#define REAP_VERSION "0.1.0"
#endif

namespace reap {

struct command {
    const char * name;
    const char * summary;
    int (*run)(int argc, char ** argv);
};

// All subcommands, in the order `reap help` lists them.
const std::vector<command> & commands();

} // namespace reap

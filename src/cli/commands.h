// The table of reap subcommands. Each subcommand lives in its own file
// src/cli/cmd_<name>.cpp and exposes one entry point, int cmd_<name>(argc, argv),
// where argv[0] is the subcommand's name. A reap built without llama.cpp
// (cmake -DREAP_WITH_LLAMA=OFF) keeps the commands that run a model in the
// table, each answering with a refusal (exit 2) instead.
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
    bool runs_model = false;  // needs llama.cpp: a refusal in a build without it
};

// Whether this reap was built with llama.cpp (cmake -DREAP_WITH_LLAMA, ON by default).
bool built_with_llama();

// All subcommands, in the order `reap help` lists them.
const std::vector<command> & commands();

} // namespace reap

// A SIGINT that asks a long run to stop cleanly instead of ending the process:
// calibrate finishes its decode and writes a checkpoint. (Every other command
// keeps interrupt.h's handlers: temps removed, exit 130.)
#pragma once

#include <atomic>

namespace reap::util {

// The first SIGINT sets *stop and writes `message` to stderr; a second ends the
// process as SIGINT does. `message` must outlive the handler.
void install_stop_on_sigint(std::atomic<bool> * stop, const char * message);

// SIGINT's default action again (after the run).
void restore_default_sigint();

} // namespace reap::util

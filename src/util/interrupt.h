// Interruption: SIGINT and SIGTERM remove the temp files of unfinished
// outputs before the process ends.
#pragma once

#include <string>

namespace reap::util {

// Every temp file a durable_file holds is registered while it exists;
// install_interrupt_handlers() makes SIGINT and SIGTERM remove them all, print
// "reap CMD: interrupted (SIGNAL); temp files removed, no output written"
// and exit 130 / 143. (calibrate keeps its own SIGINT handler: it
// checkpoints.)
void install_interrupt_handlers(const char * cmd);

// The registry of live temp files the handlers remove: durable_file registers
// its temp while it exists (a slot, or nullptr when the path is too long) and
// unregisters it once published or removed.
void * register_temp(const std::string & path);
void unregister_temp(void * slot);

} // namespace reap::util

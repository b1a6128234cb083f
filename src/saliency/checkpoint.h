// The two publishes of reap calibrate, in the core so that they can be failed
// or "crashed" at every step in-process (tests/test_publish_faults_commands.cpp):
// the checkpoint (the archive so far, and where to resume), replaced whole at
// every save, and the finished archive, after which the checkpoint goes.
// src/llama/calibrate.cpp decides when; these decide how. Both go through
// util::disk (write_archive: a durable_file; the checkpoint's removal too).
//
// Core library: no llama.cpp dependency.
#pragma once

#include "saliency/archive.h"

#include <cstdint>
#include <string>

namespace reap::saliency {

// The provenance keys a checkpoint adds to the archive so far: the first
// window not yet in it, and the run's window count (resume checks both).
inline constexpr const char * k_key_checkpoint_next_window = "reap.saliency.checkpoint.next_window";
inline constexpr const char * k_key_checkpoint_n_windows   = "reap.saliency.checkpoint.n_windows";

// Writes `so_far` with the two keys as the checkpoint at `path`, replacing the
// previous one (or nothing) whole. On failure the previous checkpoint is as it
// was, and the message says so when there is one.
bool write_checkpoint(const archive & so_far, uint64_t next_window, uint64_t n_windows, const std::string & path,
                      std::string & err);

// Publishes the finished archive at `out_path` (replacing a file there only
// with `force`), then removes the checkpoint at `checkpoint_path` if any: a
// crash in between leaves both, never neither. On failure the checkpoint stays
// (the message says so), for --resume.
bool publish_calibration(const archive & done, const std::string & out_path, bool force,
                         const std::string & checkpoint_path, std::string & err);

} // namespace reap::saliency

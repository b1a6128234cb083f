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

// ---- a stability target's split halves ----
// With --until-stable (or a target alone), each domain's decodes go in turn to
// half a and half b, and each half sums its own expert statistics (no channel
// statistics) beside the archive: two disjoint samples of the tokens so far,
// whose plans plan/stability.h compares. A checkpoint needs them to resume the
// same curve; they are written first, in a file of their own named by the
// checkpoint's next window, so that a crash between the two writes leaves the
// previous checkpoint with its own halves file.
struct split_halves {
    archive a, b;   // each with the run's domains, in its order
};

// Two empty halves shaped as `like` (its fingerprint, metric set and domains; no channel statistics).
split_halves make_split_halves(const archive & like);

// "<checkpoint_path>.halves.<next_window>"
std::string split_halves_path(const std::string & checkpoint_path, uint64_t next_window);

// Writes both halves as one archive (domains "a0".."a<D-1>", "b0"..: the
// index of the run's domain; `reap plan --domains a0,a1,...` plans a half) at
// split_halves_path, then the checkpoint's own keys say which window it was
// taken at.
bool write_split_halves(const split_halves & h, uint64_t next_window, const std::string & checkpoint_path,
                        std::string & err);

// Reads the halves written with the checkpoint at next_window, checked against
// `like` (the run's archive: fingerprint, metric set, domains).
bool read_split_halves(const std::string & checkpoint_path, uint64_t next_window, const archive & like, split_halves & out,
                       std::string & err);

// Removes the halves files of this checkpoint path but the one of keep_next_window
// (none kept: UINT64_MAX), e.g. one left by a crash after its checkpoint was replaced.
void remove_split_halves(const std::string & checkpoint_path, uint64_t keep_next_window);

} // namespace reap::saliency

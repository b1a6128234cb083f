// Whole small files: reading one into memory (corpora, imatrix files), and
// writing one durably, the step that reap's "temp file, fsync, rename" writers
// of plans and SHA256SUMS share (the callers choose the temp name, word their
// own errors and do the rename).
#pragma once

#include <string>

namespace reap::util {

// Reads the whole regular file at `path` into `out`. On failure `err` names the
// file as "<what> '<path>'": cannot open (with the reason), not a regular
// file, cannot read.
bool read_file(const std::string & path, const char * what, std::string & out, std::string & err);

enum class write_status {
    ok,
    cannot_create,   // open(O_CREAT | O_TRUNC) failed; nothing was created
    write_error,     // a write, fsync or close failed; the file exists, partly written
};

// Creates (or truncates) `path` with mode 0644, writes all of `text` (retrying
// short writes and EINTR), fsyncs and closes it. On failure errno is that of
// the failing call, for the caller's message; the caller removes the file.
write_status write_file_synced(const std::string & path, const std::string & text);

} // namespace reap::util

// File I/O helpers shared by every reader and writer of reap: reading a whole
// small file, the full pread / write loops, same-file-by-inode and the opener
// of every input. The write side lives beside it, one concern a file, and is
// included here so that a caller needs only this header:
//   util/output_rule.h  the one output rule (an output is never an input)
//   util/publish.h      durable files, journals, the folder lock
//   util/recovery.h     completing what a killed run left
//   util/interrupt.h    SIGINT / SIGTERM remove the temps
//   util/disk.h         the file-system steps a publish takes (a test can fake them)
#pragma once

#include "util/disk.h"
#include "util/interrupt.h"
#include "util/output_rule.h"
#include "util/publish.h"
#include "util/recovery.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace reap::util {

// Reads the whole regular file at `path` into `out`. On failure `err` names the
// file as "<what> '<path>'": cannot open (with the reason), not a regular
// file, cannot read.
bool read_file(const std::string & path, const char * what, std::string & out, std::string & err);

// Reads exactly n bytes at `offset` of fd (retrying short reads and EINTR).
// False on an error (errno set) or at end of file (errno left as it was).
bool pread_full(int fd, void * dst, size_t n, uint64_t offset);
// Writes exactly n bytes to fd at its position (retrying short writes and
// EINTR). False with errno set (EIO when write makes no progress).
bool write_full(int fd, const void * src, size_t n);

// Whether `a` and `b` name the same existing file (same st_dev and st_ino,
// so hard links and different spellings count); false when either is missing.
bool same_file(const std::string & a, const std::string & b);

// The names in directory `dir` ("." and ".." included), or none when it
// cannot be opened.
std::vector<std::string> list_dir(const std::string & dir);

// Opens the input `path` read-only and returns its descriptor, or -1 with
// `err` set: "PATH: cannot open: reason" / "PATH: not a regular file", or with
// `what`, "cannot open WHAT 'PATH': reason" / "WHAT 'PATH' is not a regular
// file". The one opener of every input file: it opens with O_NONBLOCK and
// checks fstat before anything reads, so a FIFO, a device or a directory is
// refused at once instead of blocking in open() or read(); the descriptor is
// then switched back to blocking reads.
int open_input(const std::string & path, std::string & err, const char * what = nullptr);

} // namespace reap::util

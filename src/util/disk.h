// The write side of the file system, as reap's publish path uses it: every
// step that changes what a folder holds (create a temp file, write it, fsync,
// close, rename, unlink, fsync a directory, make or remove a folder, open a
// folder to lock it) goes through one small interface, so that tests can put a disk
// in its place that fails (ENOSPC, EIO) or stops as a crash would at any
// chosen step, in-process. Production code uses the real one; nothing here
// reads the environment.
#pragma once

#include <cstddef>
#include <string>
#include <sys/types.h>

namespace reap::util {

// Every call returns false (or -1) with errno set on failure.
class disk {
public:
    virtual ~disk() = default;
    // mkstemp: creates a new file from `path`, whose name ends in XXXXXX (the
    // six letters are replaced in place), and returns its descriptor.
    virtual int make_temp(std::string & path) = 0;
    // Opens the folder `dir` itself (read-only) for its lock (flock on the
    // folder's own descriptor: no lock file is created in it).
    virtual int open_dir_for_lock(const std::string & dir) = 0;
    virtual bool chmod(int fd, mode_t mode) = 0;
    // Writes exactly n bytes at the descriptor's position (retrying short
    // writes and EINTR).
    virtual bool write(int fd, const void * data, size_t n) = 0;
    // The caller is about to write `fd` itself (copy_file_range, pwrite: a
    // stream of a tensor's data): one step of the publish, so that a test disk
    // can fail or stop between two of them. The real disk does nothing.
    virtual bool will_write(int fd) = 0;
    virtual bool fsync(int fd) = 0;
    virtual bool close(int fd) = 0;
    virtual bool rename(const std::string & from, const std::string & to) = 0;
    // rename that never replaces: fails with EEXIST when `to` exists
    // (renameat2 RENAME_NOREPLACE; where the file system lacks it, link then
    // unlink, which refuses an existing name as well).
    virtual bool rename_noreplace(const std::string & from, const std::string & to) = 0;
    virtual bool unlink(const std::string & path) = 0;
    // fsyncs the directory `dir` (after a rename or an unlink in it).
    virtual bool fsync_dir(const std::string & dir) = 0;
    virtual bool mkdir(const std::string & path, mode_t mode) = 0;
    virtual bool rmdir(const std::string & path) = 0;
};

// The disk of the operating system.
class real_disk : public disk {
public:
    int make_temp(std::string & path) override;
    int open_dir_for_lock(const std::string & dir) override;
    bool chmod(int fd, mode_t mode) override;
    bool write(int fd, const void * data, size_t n) override;
    bool will_write(int fd) override;
    bool fsync(int fd) override;
    bool close(int fd) override;
    bool rename(const std::string & from, const std::string & to) override;
    bool rename_noreplace(const std::string & from, const std::string & to) override;
    bool unlink(const std::string & path) override;
    bool fsync_dir(const std::string & dir) override;
    bool mkdir(const std::string & path, mode_t mode) override;
    bool rmdir(const std::string & path) override;
};

// The disk every publish goes through: the real one unless a test installed another.
disk & current_disk();

// Makes `d` the disk of every publish until the next call (nullptr: the real
// one again). For tests; not thread-safe against a publish in progress.
void use_disk(disk * d);

} // namespace reap::util

// File I/O helpers shared by every reader and writer of reap: reading a whole
// small file, the full pread / write loops, same-file-by-inode, and the one
// durable-write rule (temp file beside the target, fsync, rename, fsync the
// directory) that every output of reap goes through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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

// A file that appears under its name only when complete. Every writer of reap
// (GGUF models and archives, plans, SHA256SUMS, records) uses it:
//
//     util::durable_file out;
//     if (!out.open(target, err)) return false;   // DIR/.NAME.tmp.XXXXXX beside the target, mode 0644
//     ... out.write(data, n, err) as often as needed, or stream into out.fd()
//         (copy_file_range, pwrite: any call that writes the descriptor) ...
//     if (!out.commit(err)) return false;          // fsync, close, rename over target, fsync the directory
//
// Until commit succeeds the target is untouched (an existing one stays as it
// was); a durable_file destroyed without a successful commit, on any error
// path, or discard()ed, closes and removes its temp file. The temp file lies in
// the target's directory so that the rename is atomic (same file system).
// Files that must appear together (the shards of a split set): finish() each
// (fsync + close), then publish() each (rename + directory fsync); if one
// publish fails, the caller removes the targets already published. With
// `sync` off (tests, scratch output) nothing is fsynced.
// Refusing to replace an existing target (--force) is the caller's decision.
class durable_file {
public:
    durable_file() = default;
    ~durable_file();
    durable_file(const durable_file &) = delete;
    durable_file & operator=(const durable_file &) = delete;
    durable_file(durable_file && o) noexcept;
    durable_file & operator=(durable_file && o) noexcept;

    // Creates the temp file beside `target`. Fails ("cannot create a temp file
    // beside TARGET: reason") when the directory is missing or not writable.
    bool open(const std::string & target, std::string & err, bool sync = true);
    // The open temp file's descriptor (-1 before open and after finish).
    int fd() const { return fd_; }
    const std::string & target() const { return target_; }
    const std::string & temp_path() const { return temp_; }
    // Whether the rename over the target happened (even if the directory fsync then failed).
    bool published() const { return published_; }

    // Appends n bytes ("TARGET: write: reason" on failure).
    bool write(const void * data, size_t n, std::string & err);
    bool write(const std::string & text, std::string & err) { return write(text.data(), text.size(), err); }
    // fsync (with sync) and close the temp file.
    bool finish(std::string & err);
    // Renames the finished temp file over the target, then fsyncs the target's
    // directory (with sync) so that the new name survives a crash.
    bool publish(std::string & err);
    // finish + publish.
    bool commit(std::string & err) { return finish(err) && publish(err); }
    // Closes and removes the temp file (no-op once published).
    void discard();

private:
    std::string target_, temp_;
    int         fd_ = -1;
    bool        sync_ = true;
    bool        published_ = false;
};

// Writes `text` as the whole content of `path` through a durable_file.
bool write_file_durably(const std::string & path, const std::string & text, std::string & err, bool sync = true);

// fsyncs the directory holding `path` (after a rename or an unlink in it).
bool fsync_dir_of(const std::string & path);

} // namespace reap::util

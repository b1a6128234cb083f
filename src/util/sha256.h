// SHA-256 of files (OpenSSL EVP), and SHA256SUMS files in the format that
// `sha256sum -c` checks: one line per file, "<64 hex digits>  <name>\n",
// where <name> is the file's basename when it lies in the SUMS file's
// directory, else its path as given. SHA256SUMS is shared by every output in
// its folder: it is updated under the folder's lock (util::dir_lock), through
// a temp file and a rename, and every line it does not own (comments, other
// files, lines that are not checksums) is kept as it was, whatever its size.
#pragma once

#include "util/file.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace reap::util {

// Hashes the whole file at `path` with a fixed-size read buffer; sets `hex`
// to 64 lowercase hex digits. Fails with a message on open/read errors, or
// when `cancel` is set (checked between reads).
bool sha256_file(const std::string & path, std::string & hex, std::string & err, const std::atomic<bool> * cancel = nullptr);

// The hash of a model's files, in order: one file's sha256 (what sha256sum
// prints), or for several the sha256 of their digests, each as 64 hex digits
// and a newline (`sha256sum F1 F2 ... | cut -c1-64 | sha256sum`).
bool sha256_files(const std::vector<std::string> & paths, std::string & hex, std::string & err,
                  const std::atomic<bool> * cancel = nullptr);

// sha256_files on a thread of its own, so that hashing a model overlaps the
// passes that read it; the destructor cancels it (a run that fails first
// does not wait for a whole model to be hashed).
class background_sha256 {
public:
    background_sha256() = default;
    ~background_sha256();
    background_sha256(const background_sha256 &) = delete;
    background_sha256 & operator=(const background_sha256 &) = delete;
    void start(std::vector<std::string> paths);
    bool started() const { return thread_.joinable(); }
    bool finish(std::string & hex, std::string & err);   // waits for the hash
private:
    std::thread       thread_;
    std::atomic<bool> cancel_{false};
    bool              ok_ = false;
    std::string       hex_, err_;
};

// Hashes `size` bytes in memory (64 lowercase hex digits).
std::string sha256_bytes(const void * data, size_t size);

// SHA-256 of data as it streams past (a writer hashes what it writes, so
// that nothing is read back to be hashed).
class sha256_stream {
public:
    sha256_stream();
    ~sha256_stream();
    sha256_stream(const sha256_stream &) = delete;
    sha256_stream & operator=(const sha256_stream &) = delete;
    void update(const void * data, size_t n);
    void update_zeros(uint64_t n);   // n zero bytes (a hole of a sparse file)
    std::string hex();               // 64 lowercase hex digits; ends the stream
private:
    void * ctx_;
};

// ---- SHA256SUMS (sha256sum -c format) -------------------------------------------

// Parses a SHA256SUMS file into (name as written, lowercase hex) pairs. Lines
// that are not checksum lines (comments, blank lines, anything else) are
// skipped, as sha256sum -c does; the file may be of any size.
bool read_sha256sums(const std::string & sums_path, std::vector<std::pair<std::string, std::string>> & entries,
                     std::string & err);
// The name `file` has in the SUMS file `sums_path`: its basename when it lies
// in that directory, else its path as given.
std::string sums_name(const std::string & file, const std::string & sums_path);
// Writes the new SUMS file for (file path, hex) pairs into `out` (opened and
// finished, not published: the caller publishes it, alone or together with
// the files it lists). The caller holds the dir_lock of its directory from
// before this call until it is published. An existing SUMS file that cannot
// be read (or is not a regular file) is an error, never replaced.
bool stage_sha256sums(const std::vector<std::pair<std::string, std::string>> & files, const std::string & sums_path,
                      durable_file & out, std::string & err, bool sync = true);
// Hashes `files` and records them in `sums_path` (stage_sha256sums, published
// under the directory's lock): lines of other files already there are kept,
// lines of these files replaced.
bool update_sha256sums(const std::vector<std::string> & files, const std::string & sums_path, std::string & err);
// "<dir of path>/SHA256SUMS" (or "SHA256SUMS" for a bare file name).
std::string sums_path_for(const std::string & path);

// One checksum line (with its newline) as sha256sum writes it: "HEX  NAME", or,
// when NAME holds a backslash, newline or carriage return, "\\HEX  " and the
// name escaped, so that `sha256sum -c` reads it back.
std::string sums_line(const std::string & hex, const std::string & name);
// The hash the SHA256SUMS beside `file` lists for it (by base name), or ""
// when there is no such file, it cannot be read, or it has no line for `file`.
// Reads the list only: nothing is hashed.
std::string listed_sha256(const std::string & file);

} // namespace reap::util

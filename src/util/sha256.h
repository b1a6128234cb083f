// SHA-256 of files (OpenSSL EVP), and SHA256SUMS files in the format that
// `sha256sum -c` checks: one line per file, "<64 hex digits>  <name>\n",
// where <name> is the file's basename when it lies in the SUMS file's
// directory, else its path as given.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace reap::util {

// Hashes the whole file at `path` with a fixed-size read buffer; sets `hex`
// to 64 lowercase hex digits. Fails with a message on open/read errors.
bool sha256_file(const std::string & path, std::string & hex, std::string & err);

// Hashes `size` bytes in memory (64 lowercase hex digits).
std::string sha256_bytes(const void * data, size_t size);

// ---- SHA256SUMS (sha256sum -c format) -------------------------------------------

// Parses a SHA256SUMS file into (name as written, lowercase hex) pairs.
bool read_sha256sums(const std::string & sums_path, std::vector<std::pair<std::string, std::string>> & entries,
                     std::string & err);
// Hashes `files` and records them in `sums_path`: lines of other files already
// there are kept, lines of these files replaced. A file in the SUMS file's
// directory is named by its basename, any other by its path as given. Written
// through util::durable_file (temp, fsync, rename, fsync the directory).
bool update_sha256sums(const std::vector<std::string> & files, const std::string & sums_path, std::string & err);
// "<dir of path>/SHA256SUMS" (or "SHA256SUMS" for a bare file name).
std::string sums_path_for(const std::string & path);
// The hash the SHA256SUMS beside `file` lists for it (by base name), or ""
// when there is no such file, it cannot be read, or it has no line for `file`.
// Reads the list only: nothing is hashed.
std::string listed_sha256(const std::string & file);

} // namespace reap::util

// SHA-256 of files (OpenSSL EVP), and SHA256SUMS files in the format that
// `sha256sum -c` checks: one line per file, "<64 hex digits>  <name>\n",
// where <name> is the file's path relative to the directory of the SUMS file
// (its basename when both lie in the same directory).
#pragma once

#include <string>
#include <vector>

namespace reap::util {

// Hashes the whole file at `path` with a fixed-size read buffer; sets `hex`
// to 64 lowercase hex digits. Fails with a message on open/read errors.
bool sha256_file(const std::string & path, std::string & hex, std::string & err);

// Hashes `size` bytes in memory (64 lowercase hex digits).
std::string sha256_bytes(const void * data, size_t size);

// Writes a SHA256SUMS file at `sums_path` (temp file + rename) listing every
// path of `files`, each named relative to the SUMS file's directory when it
// lies inside it, else by its path as given.
bool write_sha256sums(const std::vector<std::string> & files, const std::string & sums_path, std::string & err);

} // namespace reap::util

// Path and name helpers shared by the whole code base (core, llama part, CLI,
// tests): one definition each of the directory and base name of a path, a
// file beside another, and prefix / suffix tests. Plain string work: nothing
// here touches the file system.
#pragma once

#include <cstring>
#include <string>

namespace reap::util {

// The directory part of `path` without the final slash: "a/b/c.gguf" -> "a/b",
// "/c.gguf" -> "/", "c.gguf" -> "." (the current directory).
inline std::string dir_of(const std::string & path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

// The last component of `path`: "a/b/c.gguf" -> "c.gguf", "c.gguf" -> "c.gguf".
inline std::string base_name(const std::string & path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// `name` resolved in the directory of `path`, spelled the way `path` is:
// ("a/b/c.gguf", "SHA256SUMS") -> "a/b/SHA256SUMS", ("c.gguf", "SHA256SUMS")
// -> "SHA256SUMS". An absolute `name` is returned as is.
inline std::string beside(const std::string & path, const std::string & name) {
    if (!name.empty() && name[0] == '/') return name;
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? name : path.substr(0, slash + 1) + name;
}

// The base name without its last extension: "a/b/code.jsonl" -> "code",
// "a/.hidden" -> ".hidden", "a/b.c.d" -> "b.c".
inline std::string stem_of(const std::string & path) {
    const std::string b = base_name(path);
    const size_t d = b.find_last_of('.');
    return (d == std::string::npos || d == 0) ? b : b.substr(0, d);
}

inline bool starts_with(const std::string & s, const char * prefix) {
    const size_t n = std::strlen(prefix);
    return s.size() >= n && s.compare(0, n, prefix) == 0;
}

inline bool ends_with(const std::string & s, const char * suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

} // namespace reap::util

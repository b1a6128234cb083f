// diskfull_test_util.h: the full disk of the disk-full tests (issue 11), shared
// by test_cli_reliability.cpp (the core commands) and test_llama_diskfull.cpp (the
// commands that run a model): a small tmpfs mounted in the test's scratch
// directory, filled to the last byte or to a chosen number of free bytes, and
// the check that a command that ran into it failed cleanly: exit 2, the reason
// in its message, nothing visible but what was there before, no temp file.
// Where no tmpfs can be mounted (not root, no CAP_SYS_ADMIN) a test fails
// saying so, unless REAP_ALLOW_NO_TMPFS=1 turns that into a loud skip.
#pragma once

#include "gguf_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace diskfull_test {

// A tmpfs mounted at `dir` while this lives.
struct tmpfs {
    std::string dir;
    bool        mounted = false;
    tmpfs() = default;
    tmpfs(const tmpfs &) = delete;
    tmpfs & operator=(const tmpfs &) = delete;
    ~tmpfs() {
        if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
    }
};

// Mounts a tmpfs of `bytes` at `dir` (created). When that is impossible the
// test fails saying why, or with REAP_ALLOW_NO_TMPFS=1 is skipped saying why;
// false then, and the caller returns.
inline bool mount_tmpfs(tmpfs & t, const std::string & dir, uint64_t bytes) {
    t.dir = dir;
    ::mkdir(dir.c_str(), 0755);
    const std::string opts = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0) {
        t.mounted = true;
        return true;
    }
    const std::string msg = "DISK-FULL TEST NOT RUN: cannot mount a tmpfs at " + dir + ": " + strerror(errno) +
                            " (needs root / CAP_SYS_ADMIN)";
    const char * allow = std::getenv("REAP_ALLOW_NO_TMPFS");
    if (allow && std::string(allow) == "1") {
        [&] { GTEST_SKIP() << msg; }();
    } else {
        ADD_FAILURE() << msg << "; set REAP_ALLOW_NO_TMPFS=1 to skip it knowingly";
    }
    return false;
}

// Free bytes of the file system holding `dir`.
inline uint64_t free_bytes(const std::string & dir) {
    struct statvfs vs;
    if (::statvfs(dir.c_str(), &vs) != 0) return 0;
    return (uint64_t) vs.f_bavail * (uint64_t) vs.f_frsize;
}

// Fills the file system of `dir` with DIR/filler until a write fails with
// ENOSPC, then gives `leave` bytes (rounded up to whole pages) back, so that
// exactly that much is free.
inline void fill(const std::string & dir, uint64_t leave = 0) {
    const std::string path = dir + "/filler";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
    std::vector<char> buf(4096, 'x');
    uint64_t size = 0;
    ssize_t n;
    while ((n = ::write(fd, buf.data(), buf.size())) > 0) size += (uint64_t) n;
    const int werr = errno;
    const uint64_t page = 4096, give = (leave + page - 1) / page * page;
    ASSERT_EQ(werr, ENOSPC) << "filling " << dir << ": " << strerror(werr);
    ASSERT_GE(size, give) << dir << " is too small to leave " << leave << " bytes free";
    ASSERT_EQ(::ftruncate(fd, (off_t) (size - give)), 0) << strerror(errno);
    ::close(fd);
    ASSERT_EQ(free_bytes(dir), give) << "free bytes of " << dir << " after filling";
}

// Hidden leftovers of reap in `dir`: temp files and journals (the lock file is not one).
inline std::vector<std::string> leftovers(const std::string & dir) {
    std::vector<std::string> r;
    for (const std::string & e : gguf_test::list_dir(dir)) {
        if (e.find(".reap-tmp.") != std::string::npos || e.find(".reap-journal") != std::string::npos) r.push_back(e);
    }
    return r;
}

// The visible (not hidden) entries of `dir`, sorted.
inline std::vector<std::string> visible(const std::string & dir) {
    std::vector<std::string> r;
    for (const std::string & e : gguf_test::list_dir(dir)) {
        if (e[0] != '.') r.push_back(e);
    }
    return r;
}

// A command that ran into the full disk failed cleanly: exit 2, `reason` in
// its output, `dir` holds what it held before (`before`, visible entries) and
// no temp file.
inline void expect_clean_failure(int status, const std::string & output, const std::string & dir,
                                 const std::vector<std::string> & before,
                                 const std::string & reason = "No space left on device") {
    EXPECT_EQ(status, 2) << output;
    EXPECT_NE(output.find(reason), std::string::npos) << "no '" << reason << "' in: " << output;
    EXPECT_EQ(visible(dir), before) << output;
    const std::vector<std::string> left = leftovers(dir);
    EXPECT_TRUE(left.empty()) << "left over: " << left.front();
}

} // namespace diskfull_test

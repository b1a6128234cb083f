// Test disks for util::disk (src/util/disk.h): a stepping_disk numbers every
// file-system step a publish takes (the real step is taken unless at_step says
// otherwise); fault_disk fails one chosen step (ENOSPC, EIO) or crashes there:
// from that step on nothing reaches the disk (a write there torn in half), so
// the files stay as a killed process would leave them while the run unwinds
// in-process. The whole-process tests' reap_killable binary
// (tests/killing_disk.cpp) uses stepping_disk too.
#pragma once

#include "util/disk.h"

#include <cerrno>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

namespace fault_test {

class stepping_disk : public reap::util::real_disk {
public:
    long steps = 0;   // steps taken so far

    int make_temp(std::string & path) override {
        if (!enter("mkstemp", path, -1)) return -1;
        return real_disk::make_temp(path);
    }
    int open_dir_for_lock(const std::string & dir) override {
        if (!enter("open-lock", dir, -1)) return -1;
        return real_disk::open_dir_for_lock(dir);
    }
    bool chmod(int fd, mode_t mode) override { return enter("chmod", "", fd) && real_disk::chmod(fd, mode); }
    bool write(int fd, const void * data, size_t n) override {
        if (!enter("write", "", fd, data, n)) return false;
        return real_disk::write(fd, data, n);
    }
    bool will_write(int fd) override { return enter("stream", "", fd); }
    bool fsync(int fd) override { return enter("fsync", "", fd) && real_disk::fsync(fd); }
    bool close(int fd) override {
        // the descriptor is released whatever the step says (as close(2) does)
        const bool ok = enter("close", "", fd);
        const int e = errno;
        const bool closed = real_disk::close(fd);
        if (!ok) errno = e;
        return ok && closed;
    }
    bool rename(const std::string & from, const std::string & to) override {
        return enter("rename", from + " -> " + to, -1) && real_disk::rename(from, to);
    }
    bool rename_noreplace(const std::string & from, const std::string & to) override {
        return enter("rename", from + " -> " + to, -1) && real_disk::rename_noreplace(from, to);
    }
    bool unlink(const std::string & path) override { return enter("unlink", path, -1) && real_disk::unlink(path); }
    bool fsync_dir(const std::string & dir) override { return enter("fsync-dir", dir, -1) && real_disk::fsync_dir(dir); }
    bool mkdir(const std::string & path, mode_t mode) override {
        return enter("mkdir", path, -1) && real_disk::mkdir(path, mode);
    }
    bool rmdir(const std::string & path) override { return enter("rmdir", path, -1) && real_disk::rmdir(path); }

protected:
    // Step number `step` (1-based) is about to be taken: true takes it, false
    // fails it (errno set). `data`, `n`: what a write step would write.
    virtual bool at_step(long step, const char * op, const std::string & what, int fd, const void * data, size_t n) = 0;

private:
    bool enter(const char * op, const std::string & what, int fd, const void * data = nullptr, size_t n = 0) {
        return at_step(++steps, op, what, fd, data, n);
    }
};

// Fails or crashes at step `at` (0: never); every other step is real.
class fault_disk : public stepping_disk {
public:
    enum class fault { none, fail, crash };
    fault mode = fault::none;
    long  at = 0;
    int   error = ENOSPC;                // errno of a failed step
    std::string failed_op;               // the op of the step that failed
    bool  crashed = false;               // the crash came: no step since reached the disk
    std::vector<std::string> trace;      // "N op what", with record_trace
    bool  record_trace = false;
    // > 0: temps are named as this process's (.NAME.reap-tmp.OWNER.XXXXXX), a
    // stand-in the test kills at the crash, so that recovery, here in the same
    // process, finds them left by a run that is gone
    long  owner_pid = 0;

    int make_temp(std::string & path) override {
        const std::string mine = ".reap-tmp." + std::to_string(::getpid()) + ".";
        const size_t at_pid = path.rfind(mine);
        if (owner_pid > 0 && at_pid != std::string::npos) {
            path.replace(at_pid, mine.size(), ".reap-tmp." + std::to_string(owner_pid) + ".");
        }
        return stepping_disk::make_temp(path);
    }

protected:
    bool at_step(long step, const char * op, const std::string & what, int fd, const void * data, size_t n) override {
        if (record_trace) trace.push_back(std::to_string(step) + " " + op + " " + what);
        if (crashed) {
            errno = EIO;
            return false;
        }
        if (step != at || mode == fault::none) return true;
        if (mode == fault::crash) {
            // a write torn by the crash: its first half reached the file
            if (data && n > 1) real_disk::write(fd, data, n / 2);
            crashed = true;
            errno = EIO;
            return false;
        }
        failed_op = op;
        errno = error;
        return false;
    }
};

} // namespace fault_test

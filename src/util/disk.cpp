// The real disk of disk.h (the system calls themselves) and the one switch a
// test uses to put another in its place.
#include "util/disk.h"

#include "util/file.h"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace reap::util {

int real_disk::make_temp(std::string & path) {
    std::vector<char> name(path.begin(), path.end());
    name.push_back('\0');
    const int fd = ::mkstemp(name.data());
    if (fd >= 0) path = name.data();
    return fd;
}

int real_disk::open_dir_for_lock(const std::string & dir) { return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }

bool real_disk::chmod(int fd, mode_t mode) { return ::fchmod(fd, mode) == 0; }

bool real_disk::write(int fd, const void * data, size_t n) { return write_full(fd, data, n); }

bool real_disk::will_write(int) { return true; }

bool real_disk::fsync(int fd) { return ::fsync(fd) == 0; }

bool real_disk::close(int fd) { return ::close(fd) == 0; }

bool real_disk::rename(const std::string & from, const std::string & to) { return ::rename(from.c_str(), to.c_str()) == 0; }

bool real_disk::rename_noreplace(const std::string & from, const std::string & to) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
    if (errno != EINVAL && errno != ENOSYS) return false;
    // no RENAME_NOREPLACE here: a hard link refuses an existing name too
    if (::link(from.c_str(), to.c_str()) != 0) return false;
    ::unlink(from.c_str());
    return true;
}

bool real_disk::unlink(const std::string & path) { return ::unlink(path.c_str()) == 0; }

bool real_disk::fsync_dir(const std::string & dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0;
    const int e = errno;
    ::close(fd);
    errno = e;
    return ok;
}

bool real_disk::mkdir(const std::string & path, mode_t mode) { return ::mkdir(path.c_str(), mode) == 0; }

bool real_disk::rmdir(const std::string & path) { return ::rmdir(path.c_str()) == 0; }

namespace {
real_disk g_real;
disk *    g_disk = &g_real;
} // namespace

disk & current_disk() { return *g_disk; }

void use_disk(disk * d) { g_disk = d ? d : &g_real; }

} // namespace reap::util

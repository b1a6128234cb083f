// The read side of file.h: whole-file reads, the full pread / write loops,
// same-file-by-inode and the opener of every input.
#include "util/file.h"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace reap::util {

bool read_file(const std::string & path, const char * what, std::string & out, std::string & err) {
    const int fd = open_input(path, err, what);
    if (fd < 0) return false;
    struct stat st;
    bool ok = ::fstat(fd, &st) == 0;
    if (ok) {
        out.assign((size_t) st.st_size, '\0');
        ok = st.st_size == 0 || pread_full(fd, &out[0], out.size(), 0);
    }
    ::close(fd);
    if (!ok) err = std::string("cannot read ") + what + " '" + path + "'";
    return ok;
}

bool pread_full(int fd, void * dst, size_t n, uint64_t offset) {
    uint8_t * p = static_cast<uint8_t *>(dst);
    while (n > 0) {
        const ssize_t got = ::pread(fd, p, n, (off_t) offset);
        if (got < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (got == 0) return false;   // unexpected end of file
        p += got;
        n -= (size_t) got;
        offset += (uint64_t) got;
    }
    return true;
}

bool write_full(int fd, const void * src, size_t n) {
    const uint8_t * p = static_cast<const uint8_t *>(src);
    while (n > 0) {
        const ssize_t put = ::write(fd, p, n);
        if (put < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (put == 0) {
            errno = EIO;
            return false;
        }
        p += put;
        n -= (size_t) put;
    }
    return true;
}

std::vector<std::string> list_dir(const std::string & dir) {
    std::vector<std::string> names;
    DIR * d = ::opendir(dir.c_str());
    if (!d) return names;
    while (const dirent * e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
    return names;
}

bool same_file(const std::string & a, const std::string & b) {
    struct stat sa, sb;
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int open_input(const std::string & path, std::string & err, const char * what) {
    const std::string who = what ? std::string(what) + " '" + path + "'" : path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        err = what ? "cannot open " + who + ": " + strerror(errno) : path + ": cannot open: " + strerror(errno);
        return -1;
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err = what ? who + " is not a regular file" : path + ": not a regular file";
        ::close(fd);
        return -1;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        err = who + ": fcntl: " + strerror(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

} // namespace reap::util

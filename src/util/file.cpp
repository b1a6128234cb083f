// The file I/O helpers of file.h: whole-file reads, full pread / write loops,
// same-file-by-inode, and the durable write (temp beside target, fsync,
// rename, fsync the directory).
#include "util/file.h"

#include "util/path.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace reap::util {

bool read_file(const std::string & path, const char * what, std::string & out, std::string & err) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        err = std::string("cannot open ") + what + " '" + path + "': " + strerror(errno);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        err = std::string(what) + " '" + path + "' is not a regular file";
        return false;
    }
    std::ifstream in(path, std::ios::binary);
    out.assign((size_t) st.st_size, '\0');
    if (!in || (st.st_size > 0 && !in.read(&out[0], (std::streamsize) st.st_size))) {
        err = std::string("cannot read ") + what + " '" + path + "'";
        return false;
    }
    return true;
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

bool same_file(const std::string & a, const std::string & b) {
    struct stat sa, sb;
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool fsync_dir_of(const std::string & path) {
    const int fd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

// ---- durable_file ------------------------------------------------------------------

durable_file::~durable_file() { discard(); }

durable_file::durable_file(durable_file && o) noexcept { *this = std::move(o); }

durable_file & durable_file::operator=(durable_file && o) noexcept {
    if (this != &o) {
        discard();
        target_ = std::move(o.target_);
        temp_ = std::move(o.temp_);
        fd_ = o.fd_;
        sync_ = o.sync_;
        published_ = o.published_;
        o.temp_.clear();
        o.fd_ = -1;
        o.published_ = false;
    }
    return *this;
}

bool durable_file::open(const std::string & target, std::string & err, bool sync) {
    discard();
    target_ = target;
    sync_ = sync;
    published_ = false;
    // hidden, unique (mkstemp) and in the target's directory: the rename stays on one file system
    std::string tmpl = dir_of(target) + "/." + base_name(target) + ".tmp.XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    const int fd = ::mkstemp(name.data());
    if (fd < 0) {
        err = "cannot create a temp file beside " + target + ": " + strerror(errno);
        return false;
    }
    fd_ = fd;
    temp_ = name.data();
    if (::fchmod(fd_, 0644) != 0) {   // mkstemp creates 0600; outputs are ordinary files
        err = target + ": chmod: " + strerror(errno);
        discard();
        return false;
    }
    return true;
}

bool durable_file::write(const void * data, size_t n, std::string & err) {
    if (fd_ < 0) {
        err = target_ + ": write: the file is not open";
        return false;
    }
    if (!write_full(fd_, data, n)) {
        err = target_ + ": write: " + strerror(errno);
        return false;
    }
    return true;
}

bool durable_file::finish(std::string & err) {
    if (fd_ < 0) {
        err = target_ + ": the file is not open";
        return false;
    }
    if (sync_ && ::fsync(fd_) != 0) {
        err = target_ + ": fsync: " + strerror(errno);
        return false;
    }
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) {
        err = target_ + ": close: " + strerror(errno);
        return false;
    }
    return true;
}

bool durable_file::publish(std::string & err) {
    if (fd_ >= 0 || temp_.empty() || published_) {
        err = target_ + ": nothing finished to publish";
        return false;
    }
    if (::rename(temp_.c_str(), target_.c_str()) != 0) {
        err = "cannot rename " + temp_ + " to " + target_ + ": " + strerror(errno);
        return false;
    }
    published_ = true;
    temp_.clear();
    if (sync_ && !fsync_dir_of(target_)) {
        err = target_ + ": fsync of its directory: " + strerror(errno);
        return false;
    }
    return true;
}

void durable_file::discard() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    if (!temp_.empty() && !published_) ::unlink(temp_.c_str());
    temp_.clear();
}

bool write_file_durably(const std::string & path, const std::string & text, std::string & err, bool sync) {
    durable_file f;
    return f.open(path, err, sync) && f.write(text, err) && f.commit(err);
}

} // namespace reap::util

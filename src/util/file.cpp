// Durable write of a small text file: see file.h.
#include "util/file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

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

write_status write_file_synced(const std::string & path, const std::string & text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return write_status::cannot_create;
    size_t done = 0;
    bool ok = true;
    while (done < text.size()) {
        const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            ok = false;
            break;
        }
        done += size_t(w);
    }
    ok = ok && ::fsync(fd) == 0;
    ok = (::close(fd) == 0) && ok;
    return ok ? write_status::ok : write_status::write_error;
}

} // namespace reap::util

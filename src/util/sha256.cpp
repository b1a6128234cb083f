// SHA-256 of files and SHA256SUMS files (see sha256.h), on OpenSSL's EVP API.
#include "util/sha256.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <openssl/evp.h>
#include <unistd.h>

namespace reap::util {

namespace {

struct md_ctx_deleter {
    void operator()(EVP_MD_CTX * c) const { EVP_MD_CTX_free(c); }
};

std::string to_hex(const unsigned char * digest, unsigned int n) {
    static const char digits[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < n; ++i) {
        hex += digits[digest[i] >> 4];
        hex += digits[digest[i] & 15];
    }
    return hex;
}

std::string dir_of(const std::string & path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

} // namespace

bool sha256_file(const std::string & path, std::string & hex, std::string & err) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err = path + ": cannot open: " + strerror(errno);
        return false;
    }
    std::unique_ptr<EVP_MD_CTX, md_ctx_deleter> ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
        ::close(fd);
        err = "OpenSSL: cannot initialise SHA-256";
        return false;
    }
    std::vector<unsigned char> buf(1 << 20);
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            err = path + ": read error: " + strerror(errno);
            ::close(fd);
            return false;
        }
        if (n == 0) break;
        EVP_DigestUpdate(ctx.get(), buf.data(), (size_t) n);
    }
    ::close(fd);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), digest, &len);
    hex = to_hex(digest, len);
    return true;
}

std::string sha256_bytes(const void * data, size_t size) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(data, size, digest, &len, EVP_sha256(), nullptr);
    return to_hex(digest, len);
}

bool write_sha256sums(const std::vector<std::string> & files, const std::string & sums_path, std::string & err) {
    const std::string base = dir_of(sums_path);
    std::string text;
    for (const std::string & f : files) {
        std::string hex;
        if (!sha256_file(f, hex, err)) return false;
        std::string name = f;
        if (!base.empty() && f.compare(0, base.size(), base) == 0) {
            name = f.substr(base.size());
        } else if (base.empty() && f.compare(0, 2, "./") == 0) {
            name = f.substr(2);
        }
        text += hex + "  " + name + "\n";
    }
    const std::string tmp = sums_path + ".tmp";
    FILE * out = fopen(tmp.c_str(), "wb");
    if (!out) {
        err = tmp + ": cannot create: " + strerror(errno);
        return false;
    }
    const bool ok = fwrite(text.data(), 1, text.size(), out) == text.size() && fflush(out) == 0 && fsync(fileno(out)) == 0;
    if (fclose(out) != 0 || !ok) {
        err = tmp + ": write error";
        ::unlink(tmp.c_str());
        return false;
    }
    if (rename(tmp.c_str(), sums_path.c_str()) != 0) {
        err = "cannot rename " + tmp + " to " + sums_path + ": " + strerror(errno);
        ::unlink(tmp.c_str());
        return false;
    }
    return true;
}

} // namespace reap::util

// SHA-256 of files and SHA256SUMS files (see sha256.h), on OpenSSL's EVP API.
#include "util/sha256.h"

#include "util/file.h"
#include "util/path.h"

#include <cerrno>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <openssl/evp.h>
#include <sys/stat.h>
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

// ---- SHA256SUMS ----------------------------------------------------------------

std::string sums_path_for(const std::string & path) { return beside(path, "SHA256SUMS"); }

std::string listed_sha256(const std::string & file) {
    std::vector<std::pair<std::string, std::string>> entries;
    std::string err;
    if (!read_sha256sums(sums_path_for(file), entries, err)) return "";
    const std::string name = base_name(file);
    for (const auto & [n, hex] : entries) {
        if (n == name) return hex;
    }
    return "";
}

bool read_sha256sums(const std::string & sums_path, std::vector<std::pair<std::string, std::string>> & entries,
                     std::string & err) {
    entries.clear();
    FILE * f = fopen(sums_path.c_str(), "rb");
    if (!f) {
        err = sums_path + ": cannot open: " + strerror(errno);
        return false;
    }
    std::string text;
    char buf[1 << 14];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0 && text.size() < (64u << 20)) text.append(buf, n);
    fclose(f);
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        // "<64 hex>  name" (text mode) or "<64 hex> *name" (binary mode)
        bool ok = line.size() > 66 && (line[64] == ' ') && (line[65] == ' ' || line[65] == '*');
        for (size_t i = 0; ok && i < 64; ++i) ok = isxdigit((unsigned char) line[i]) != 0;
        if (!ok) {
            err = sums_path + ":" + std::to_string(line_no) + ": not a sha256sum line";
            return false;
        }
        std::string hex = line.substr(0, 64);
        for (char & c : hex) c = char(tolower((unsigned char) c));
        entries.emplace_back(line.substr(66), hex);
    }
    return true;
}

bool update_sha256sums(const std::vector<std::string> & files, const std::string & sums_path, std::string & err) {
    const std::string dir = dir_of(sums_path);
    std::vector<std::pair<std::string, std::string>> entries;
    struct stat st;
    if (::stat(sums_path.c_str(), &st) == 0) {
        std::string e2;
        if (!read_sha256sums(sums_path, entries, e2)) entries.clear();   // unreadable: replaced
    }
    for (const std::string & f : files) {
        std::string hex;
        if (!sha256_file(f, hex, err)) return false;
        const std::string name = dir_of(f) == dir ? base_name(f) : f;
        bool replaced = false;
        for (auto & e : entries) {
            if (e.first == name) {
                e.second = hex;
                replaced = true;
            }
        }
        if (!replaced) entries.emplace_back(name, hex);
    }
    std::string text;
    for (const auto & e : entries) text += e.second + "  " + e.first + "\n";
    return write_file_durably(sums_path, text, err);
}

} // namespace reap::util

// SHA-256 of files and SHA256SUMS files (see sha256.h), on OpenSSL's EVP API.
#include "util/sha256.h"

#include "util/file.h"
#include "util/path.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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

bool sha256_file(const std::string & path, std::string & hex, std::string & err, const std::atomic<bool> * cancel) {
    const int fd = open_input(path, err);
    if (fd < 0) return false;
    std::unique_ptr<EVP_MD_CTX, md_ctx_deleter> ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
        ::close(fd);
        err = "OpenSSL: cannot initialise SHA-256";
        return false;
    }
    std::vector<unsigned char> buf(1 << 20);
    for (;;) {
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            err = path + ": hashing cancelled";
            ::close(fd);
            return false;
        }
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

bool sha256_files(const std::vector<std::string> & paths, std::string & hex, std::string & err, const std::atomic<bool> * cancel) {
    if (paths.size() == 1) return sha256_file(paths[0], hex, err, cancel);
    std::string digests;
    for (const std::string & p : paths) {
        std::string one;
        if (!sha256_file(p, one, err, cancel)) return false;
        digests += one + "\n";
    }
    hex = sha256_bytes(digests.data(), digests.size());
    return true;
}

background_sha256::~background_sha256() {
    cancel_ = true;
    if (thread_.joinable()) thread_.join();
}

void background_sha256::start(std::vector<std::string> paths) {
    if (thread_.joinable()) return;
    thread_ = std::thread([this, paths = std::move(paths)] { ok_ = sha256_files(paths, hex_, err_, &cancel_); });
}

bool background_sha256::finish(std::string & hex, std::string & err) {
    if (!thread_.joinable()) {
        err = "internal: a hash that was never started";
        return false;
    }
    thread_.join();
    if (!ok_) err = err_;
    else hex = hex_;
    return ok_;
}

sha256_stream::sha256_stream() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_) EVP_DigestInit_ex(static_cast<EVP_MD_CTX *>(ctx_), EVP_sha256(), nullptr);
}

sha256_stream::~sha256_stream() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx_)); }

void sha256_stream::update(const void * data, size_t n) {
    if (n > 0) EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ctx_), data, n);
}

void sha256_stream::update_zeros(uint64_t n) {
    static const unsigned char zeros[1 << 16] = {};
    while (n > 0) {
        const size_t k = (size_t) std::min<uint64_t>(n, sizeof(zeros));
        update(zeros, k);
        n -= k;
    }
}

std::string sha256_stream::hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(ctx_), digest, &len);
    return to_hex(digest, len);
}

std::string sha256_bytes(const void * data, size_t size) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(data, size, digest, &len, EVP_sha256(), nullptr);
    return to_hex(digest, len);
}

// ---- SHA256SUMS ----------------------------------------------------------------

std::string sums_path_for(const std::string & path) { return beside(path, "SHA256SUMS"); }

std::string sums_line(const std::string & hex, const std::string & name) {
    if (name.find_first_of("\\\n\r") == std::string::npos) return hex + "  " + name + "\n";
    std::string out = "\\" + hex + "  ";
    for (char c : name) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else out.push_back(c);
    }
    return out + "\n";
}

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

namespace {

// Parses one line as "<64 hex>  name" (text mode) or "<64 hex> *name" (binary
// mode), or the same after a backslash, sha256sum's mark of a name with
// escapes (\\ \n \r); false when it is not a checksum line.
bool parse_sums_line(const std::string & line, std::string & name, std::string & hex) {
    const bool escaped = !line.empty() && line[0] == '\\';
    const size_t at = escaped ? 1 : 0;
    const size_t n = !line.empty() && line.back() == '\r' ? line.size() - 1 : line.size();
    bool ok = n > at + 66 && line[at + 64] == ' ' && (line[at + 65] == ' ' || line[at + 65] == '*');
    for (size_t i = 0; ok && i < 64; ++i) ok = isxdigit((unsigned char) line[at + i]) != 0;
    if (!ok) return false;
    hex = line.substr(at, 64);
    for (char & c : hex) c = char(tolower((unsigned char) c));
    name = line.substr(at + 66, n - at - 66);
    if (!escaped) return true;
    std::string plain;
    for (size_t i = 0; i < name.size(); ++i) {
        if (name[i] != '\\') {
            plain.push_back(name[i]);
            continue;
        }
        if (++i == name.size()) return false;
        switch (name[i]) {
            case '\\': plain.push_back('\\'); break;
            case 'n':  plain.push_back('\n'); break;
            case 'r':  plain.push_back('\r'); break;
            default:   return false;
        }
    }
    name = plain;
    return true;
}


} // namespace

namespace {

// Calls `fn` with each line of `path` (without its '\n'), read through stdio
// a line at a time: memory is the longest line, whatever the file's size.
bool for_each_line(const std::string & path, const char * what, const std::function<void(const std::string &)> & fn,
                   std::string & err) {
    const int fd = open_input(path, err, what);
    if (fd < 0) return false;
    FILE * f = ::fdopen(fd, "rb");
    if (!f) {
        ::close(fd);
        err = std::string("cannot read ") + what + " '" + path + "'";
        return false;
    }
    char * buf = nullptr;
    size_t cap = 0;
    ssize_t n;
    std::string line;
    while ((n = ::getline(&buf, &cap, f)) >= 0) {
        line.assign(buf, (size_t) n);
        if (!line.empty() && line.back() == '\n') line.pop_back();
        fn(line);
    }
    const bool failed = ::ferror(f) != 0;
    ::free(buf);
    ::fclose(f);
    if (failed) err = std::string("cannot read ") + what + " '" + path + "'";
    return !failed;
}

// The rewrite of a SUMS file, a line at a time: a checksum line naming one of
// `entries` gets the new hash (a repeated one goes), every other line is kept
// verbatim; rest() appends the entries not found.
struct sums_composer {
    const std::vector<std::pair<std::string, std::string>> & entries;
    std::vector<bool> done;

    explicit sums_composer(const std::vector<std::pair<std::string, std::string>> & e) : entries(e), done(e.size(), false) {}

    // Calls emit(text) with what replaces line `l` (its new line, nothing for a
    // repeated line of ours, or `l` itself and a newline): no copy of a
    // foreign line is made, however long.
    template <class Emit> void line(const std::string & l, Emit && emit) {
        std::string name, hex;
        bool mine = false;
        if (parse_sums_line(l, name, hex)) {
            for (size_t i = 0; i < entries.size(); ++i) {
                if (entries[i].first != name) continue;
                mine = true;
                if (!done[i]) emit(sums_line(entries[i].second, name));
                done[i] = true;
            }
        }
        if (!mine) {
            emit(l);
            emit(std::string("\n"));
        }
    }
    std::string rest() {
        std::string out;
        for (size_t i = 0; i < entries.size(); ++i) {
            if (!done[i]) out += sums_line(entries[i].second, entries[i].first);
        }
        return out;
    }
};

} // namespace

bool read_sha256sums(const std::string & sums_path, std::vector<std::pair<std::string, std::string>> & entries,
                     std::string & err) {
    entries.clear();
    return for_each_line(sums_path, "SHA256SUMS", [&](const std::string & line) {
        std::string name, hex;
        if (parse_sums_line(line, name, hex)) entries.emplace_back(name, hex);
    }, err);
}

std::string sums_name(const std::string & file, const std::string & sums_path) {
    return dir_of(file) == dir_of(sums_path) ? base_name(file) : file;
}

bool stage_sha256sums(const std::vector<std::pair<std::string, std::string>> & files, const std::string & sums_path,
                      durable_file & out, std::string & err, bool sync) {
    std::vector<std::pair<std::string, std::string>> entries;
    for (const auto & [file, hex] : files) entries.emplace_back(sums_name(file, sums_path), hex);
    sums_composer c(entries);
    if (!out.open(sums_path, err, sync)) return false;
    // the old file streamed through, a line at a time: memory does not grow with it
    struct stat st;
    if (::lstat(sums_path.c_str(), &st) == 0) {
        std::string werr;
        const bool read_ok = for_each_line(sums_path, "SHA256SUMS", [&](const std::string & line) {
            c.line(line, [&](const std::string & t) {
                if (werr.empty()) out.write(t, werr);
            });
        }, err);
        if (!read_ok) {
            err += " (it is left as it is)";
            return false;
        }
        if (!werr.empty()) {
            err = werr;
            return false;
        }
    }
    return out.write(c.rest(), err) && out.finish(err);
}

bool update_sha256sums(const std::vector<std::string> & files, const std::string & sums_path, std::string & err) {
    std::vector<std::pair<std::string, std::string>> hashed;
    for (const std::string & f : files) {
        std::string hex;
        if (!sha256_file(f, hex, err)) return false;
        hashed.emplace_back(f, hex);
    }
    dir_lock lk;
    if (!lk.lock(dir_of(sums_path), err)) return false;
    durable_file out;
    return stage_sha256sums(hashed, sums_path, out, err) && out.publish(err);
}

} // namespace reap::util

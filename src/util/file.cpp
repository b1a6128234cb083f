// The file I/O helpers of file.h: whole-file reads, full pread / write loops,
// same-file-by-inode, and the durable write (temp beside target, fsync,
// rename, fsync the directory).
#include "util/file.h"

#include "util/path.h"

#include <cerrno>
#include <algorithm>
#include <map>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <dirent.h>
#include <string_view>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

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

namespace {

// The directory entry `path` names: realpath of its directory + "/" + its
// last component ("" when the directory cannot be resolved).
std::string entry_of(const std::string & path) {
    char * dir = ::realpath(dir_of(path).c_str(), nullptr);
    if (!dir) return "";
    std::string r = std::string(dir) + "/" + base_name(path);
    free(dir);
    return r;
}

} // namespace

bool same_entry(const std::string & a, const std::string & b) {
    if (a.empty() || b.empty()) return false;
    struct stat sa, sb;
    const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    const std::string x = entry_of(a), y = entry_of(b);
    return !x.empty() && x == y;
}

bool check_not_input(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                     std::string & err) {
    for (const auto & [what, path] : inputs) {
        if (same_entry(output, path)) {
            err = "refusing to write " + output + " over the " + what + " '" + path + "' (the same file)";
            return false;
        }
    }
    return true;
}

bool check_output(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                  bool force, std::string & err) {
    if (!check_not_input(output, inputs, err)) return false;
    struct stat st;
    if (::lstat(output.c_str(), &st) != 0) return true;   // nothing there yet
    if (::stat(output.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        err = output + " exists and is not a regular file";
        return false;
    }
    if (!force) {
        err = output + " exists (use --force to replace it)";
        return false;
    }
    return true;
}

bool fsync_dir_of(const std::string & path) {
    const int fd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

// ---- the registry of live temp files (for the signal handler) ------------------------
//
// A list that only grows; a slot is reused once free. The handler reads only
// slots marked live, whose path was written before they were marked.

namespace {

struct temp_slot {
    std::atomic<bool> live{false};
    char              path[4096];
    temp_slot *       next = nullptr;
};

std::atomic<temp_slot *> g_temps{nullptr};

temp_slot * register_temp(const std::string & path) {
    if (path.size() >= sizeof(temp_slot::path)) return nullptr;
    temp_slot * slot = nullptr;
    for (temp_slot * t = g_temps.load(); t; t = t->next) {
        if (!t->live.load()) {   // a free slot: marked live again only once the path is in place
            slot = t;
            break;
        }
    }
    if (!slot) {
        slot = new temp_slot();
        slot->path[0] = '\0';
        slot->next = g_temps.load();
        g_temps.store(slot);
    }
    std::memcpy(slot->path, path.c_str(), path.size() + 1);
    slot->live.store(true);
    return slot;
}

void unregister_temp(void * p) {
    if (!p) return;
    temp_slot * slot = static_cast<temp_slot *>(p);
    slot->live.store(false);
    slot->path[0] = '\0';
}

const char * g_cmd = "reap";

void on_interrupt(int sig) {
    int n = 0;
    for (temp_slot * t = g_temps.load(); t; t = t->next) {
        if (t->live.load() && ::unlink(t->path) == 0) ++n;
    }
    char msg[256];
    // async-signal-safe formatting: no printf
    std::string_view parts[] = {"\nreap ", g_cmd, ": interrupted by ", sig == SIGINT ? "SIGINT" : "SIGTERM",
                                n > 0 ? "; temp files removed, nothing published\n" : "; nothing partial left\n"};
    size_t len = 0;
    for (const auto & part : parts) {
        const size_t k = std::min(part.size(), sizeof(msg) - len);
        std::memcpy(msg + len, part.data(), k);
        len += k;
    }
    ssize_t r = ::write(2, msg, len);
    (void) r;
    ::_exit(128 + sig);
}

} // namespace

void install_interrupt_handlers(const char * cmd) {
    g_cmd = cmd;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
}

// ---- durable_file ------------------------------------------------------------------

durable_file::~durable_file() { discard(); }

durable_file::durable_file(durable_file && o) noexcept { *this = std::move(o); }

durable_file & durable_file::operator=(durable_file && o) noexcept {
    if (this != &o) {
        discard();
        target_ = std::move(o.target_);
        temp_ = std::move(o.temp_);
        slot_ = o.slot_;
        o.slot_ = nullptr;
        fd_ = o.fd_;
        sync_ = o.sync_;
        published_ = o.published_;
        o.temp_.clear();
        o.fd_ = -1;
        o.published_ = false;
    }
    return *this;
}

bool durable_file::open(const std::string & target, std::string & err, bool sync, bool staged) {
    discard();
    target_ = target;
    sync_ = sync;
    published_ = false;
    // what a killed run left for this target: its journal completed, its temp removed
    if (!prepare_output(target, err)) return false;
    // hidden, unique (mkstemp) and in the target's directory: the rename stays
    // on one file system; the name says whose it is (.NAME.reap-tmp.PID.), so
    // that the next run on NAME can remove it once PID is gone
    std::string tmpl = dir_of(target) + "/." + base_name(target) + ".reap-tmp." + std::to_string(::getpid()) +
                       (staged ? ".s.XXXXXX" : ".XXXXXX");
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    const int fd = ::mkstemp(name.data());
    if (fd < 0) {
        err = "cannot create a temp file beside " + target + ": " + strerror(errno);
        return false;
    }
    fd_ = fd;
    temp_ = name.data();
    slot_ = register_temp(temp_);
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
    fault_point();
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
    fault_point();
    if (::rename(temp_.c_str(), target_.c_str()) != 0) {
        err = "cannot rename " + temp_ + " to " + target_ + ": " + strerror(errno);
        return false;
    }
    published_ = true;
    temp_.clear();
    unregister_temp(slot_);
    slot_ = nullptr;
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
    unregister_temp(slot_);
    slot_ = nullptr;
}

// ---- fault points (test hook) ----------------------------------------------------------

void fault_point() {
    auto env_n = [](const char * name) {
        const char * v = std::getenv(name);
        return v && *v ? std::atoll(v) : 0LL;
    };
    static const long long kill_at = env_n("REAP_FAULT_KILL_AT");
    static const long long pause_at = env_n("REAP_FAULT_PAUSE_AT");
    static const bool trace = env_n("REAP_FAULT_TRACE") != 0;
    static long long n = 0;
    ++n;
    if (trace) fprintf(stderr, "reap: fault point %lld\n", n);
    if (kill_at > 0 && n == kill_at) ::kill(::getpid(), SIGKILL);
    if (pause_at > 0 && n == pause_at) {
        fprintf(stderr, "reap: paused at fault point %lld\n", n);
        for (int i = 0; i < 600; ++i) ::usleep(100000);   // at most a minute: the test signals it meanwhile
    }
}

// ---- publishing several files together --------------------------------------------------

namespace {

constexpr const char * k_journal_suffix = ".reap-journal";
constexpr const char * k_temp_marker = ".reap-tmp.";
constexpr const char * k_lock_file = "/.reap.lock";   // in every folder an output is published to

// Blocks SIGINT and SIGTERM for its lifetime (they are delivered afterwards).
struct hold_signals {
    sigset_t old;
    hold_signals() {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGINT);
        sigaddset(&s, SIGTERM);
        ::sigprocmask(SIG_BLOCK, &s, &old);
    }
    ~hold_signals() { ::sigprocmask(SIG_SETMASK, &old, nullptr); }
};

} // namespace

std::string journal_path(const std::string & target) {
    return dir_of(target) + "/." + base_name(target) + k_journal_suffix;
}

// The previous version of a set's first file, removed before the set's renames
// (publish_together, complete_journal) so that old and new files never load
// together. Absent already: nothing to do.
static bool remove_first_of_set(const std::string & target, std::string & err) {
    if (::unlink(target.c_str()) != 0 && errno != ENOENT) {
        err = "cannot remove the previous " + target + ": " + strerror(errno);
        return false;
    }
    return true;
}

bool publish_together(const std::vector<durable_file *> & files, std::string & err) {
    if (files.empty()) return true;
    if (files.size() == 1) return files[0]->publish(err);
    const std::string dir = dir_of(files[0]->target());
    std::string text = "reap-journal 1";
    text.push_back('\0');
    for (const durable_file * f : files) {
        if (f->temp_path().empty()) {
            err = f->target() + ": files published together must be finished first";
            return false;
        }
        // a file of another directory (a sliced imatrix written elsewhere) is
        // named by absolute paths (entry_of): the next run may start from anywhere
        const bool elsewhere = dir_of(f->target()) != dir;
        const std::string tmp = elsewhere ? entry_of(f->temp_path()) : base_name(f->temp_path());
        const std::string target = elsewhere ? entry_of(f->target()) : base_name(f->target());
        if (tmp.empty() || target.empty()) {
            err = "cannot resolve the directory of " + f->target() + ": " + strerror(errno);
            return false;
        }
        text += tmp;
        text.push_back('\0');
        text += target;
        text.push_back('\0');
    }
    hold_signals hold;
    dir_lock lk;
    if (!lk.lock(dir, err)) return false;
    const std::string journal = journal_path(files[0]->target());
    if (!write_file_durably(journal, text, err, files[0]->sync())) return false;
    fault_point();   // committed: from here on the next run completes the set
    // Never a loadable mix: the first file (the shard a loader opens) leaves
    // first and comes back last, so a kill between two renames leaves a set
    // without its first shard, which llama.cpp refuses, never new shards
    // beside old ones that load together.
    if (!remove_first_of_set(files[0]->target(), err)) return false;
    fault_point();
    for (size_t i = 1; i <= files.size(); ++i) {
        durable_file * f = files[i % files.size()];
        if (!f->publish(err)) {
            err += " (the journal " + journal + " stays: the next run on this output completes the set)";
            return false;
        }
        fault_point();
    }
    ::unlink(journal.c_str());
    if (files[0]->sync() && !fsync_dir_of(journal)) {
        err = dir + ": fsync: " + strerror(errno);
        return false;
    }
    return true;
}

// Locks this process holds, by directory: taking one again (a durable_file
// opened while its caller holds the lock) only counts, since flock would
// wait on its own other descriptor.
namespace {
struct held_lock {
    int fd = -1;
    int count = 0;
};
std::map<std::string, held_lock> g_held;
} // namespace

dir_lock::~dir_lock() {
    if (key_.empty()) return;
    auto it = g_held.find(key_);
    if (it != g_held.end() && --it->second.count == 0) {
        // the lock file goes with the lock (nothing of reap's stays in a
        // published folder): unlinked while held, so a waiter that then gets
        // the old file's lock sees it is no longer the folder's and retries
        ::unlink((key_ + k_lock_file).c_str());
        ::close(it->second.fd);   // closing releases the flock
        g_held.erase(it);
    }
}

bool dir_lock::lock(const std::string & dir, std::string & err) {
    char * real = ::realpath(dir.c_str(), nullptr);
    if (!real) {
        err = "cannot lock " + dir + ": " + strerror(errno);
        return false;
    }
    const std::string key = real;
    free(real);
    auto it = g_held.find(key);
    if (it != g_held.end()) {
        ++it->second.count;
        key_ = key;
        return true;
    }
    const std::string path = key + k_lock_file;
    int fd = -1;
    for (;;) {
        fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            err = "cannot create the lock file " + path + ": " + strerror(errno);
            return false;
        }
        while (::flock(fd, LOCK_EX) != 0) {
            if (errno == EINTR) continue;
            err = "cannot lock " + path + ": " + strerror(errno);
            ::close(fd);
            return false;
        }
        // held; but the holder before us unlinks the file when it is done:
        // the lock is the folder's only if the name still leads to this file
        struct stat held, named;
        if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino) {
            break;
        }
        ::close(fd);
    }
    g_held[key] = held_lock{fd, 1};
    key_ = key;
    return true;
}

namespace {

std::vector<std::string> list_dir(const std::string & dir) {
    std::vector<std::string> names;
    DIR * d = ::opendir(dir.c_str());
    if (!d) return names;
    while (const dirent * e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
    return names;
}

// The outputs this process writes outside the folder of the journal that
// publishes them (declare_output_elsewhere).
std::vector<std::string> g_declared_elsewhere;

bool declared_elsewhere(const std::string & target) {
    for (const std::string & d : g_declared_elsewhere) {
        if (same_entry(d, target)) return true;
    }
    return false;
}

bool complete_journal(const std::string & dir, const std::string & journal, std::string & err) {
    std::string text;
    if (!read_file(dir + "/" + journal, "journal", text, err)) return false;
    std::vector<std::string> parts;
    for (size_t pos = 0; pos < text.size();) {
        const size_t end = text.find('\0', pos);
        if (end == std::string::npos) break;
        parts.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    if (parts.empty() || parts[0] != "reap-journal 1" || parts.size() % 2 != 1) {
        err = dir + "/" + journal + ": not a reap journal (left as it is)";
        return false;
    }
    // An entry renames a temp of reap's over its own target, in one directory:
    // the journal's (names), or another one (absolute paths). Anything else is
    // not ours to rename: every entry is checked before the first rename.
    std::vector<std::pair<std::string, std::string>> renames;
    for (size_t i = 1; i + 1 < parts.size(); i += 2) {
        const std::string & tmp = parts[i], & target = parts[i + 1];
        const bool elsewhere = !tmp.empty() && tmp[0] == '/';
        const bool one_dir = elsewhere ? (!target.empty() && target[0] == '/' && dir_of(tmp) == dir_of(target))
                                       : (tmp.find('/') == std::string::npos && target.find('/') == std::string::npos);
        if (!one_dir || base_name(target).empty() ||
            !starts_with(base_name(tmp), ("." + base_name(target) + k_temp_marker).c_str())) {
            err = dir + "/" + journal + ": an entry that is not a reap temp file and its target in one directory (left as it is)";
            return false;
        }
        // a journal names only files of its own folder; an entry in another
        // folder is renamed only when it is an output this command declared
        // (a sliced imatrix written elsewhere), never on a journal's word alone
        if (elsewhere && !declared_elsewhere(target)) {
            err = dir + "/" + journal + ": an entry renames " + target +
                  ", a file outside this folder that this command does not write: a journal names only files of "
                  "its own folder (left as it is; rerun the interrupted command, or remove the journal)";
            return false;
        }
        renames.emplace_back(elsewhere ? tmp : dir + "/" + tmp, elsewhere ? target : dir + "/" + target);
    }
    // as publish_together does: the first file's old version goes first (if its
    // temp is still there, its rename is still to come), its new one last
    struct stat st;
    if (!renames.empty() && ::lstat(renames[0].first.c_str(), &st) == 0 && !remove_first_of_set(renames[0].second, err)) {
        return false;
    }
    if (!renames.empty()) std::rotate(renames.begin(), renames.begin() + 1, renames.end());
    for (const auto & [from, to] : renames) {
        if (::lstat(from.c_str(), &st) != 0) continue;   // renamed before the kill
        if (::rename(from.c_str(), to.c_str()) != 0) {
            err = "cannot rename " + from + " to " + to + ": " + strerror(errno);
            return false;
        }
        if (dir_of(to) != dir) fsync_dir_of(to);
    }
    fsync_dir_of(dir + "/" + journal);
    ::unlink((dir + "/" + journal).c_str());
    fsync_dir_of(dir + "/" + journal);
    return true;
}

// Whether `pid` names a process that exists (EPERM: exists, not ours).
bool alive(long pid) { return pid > 0 && (::kill((pid_t) pid, 0) == 0 || errno == EPERM); }

} // namespace

namespace {

bool is_journal(const std::string & e) { return e.size() > 1 && e[0] == '.' && ends_with(e, k_journal_suffix); }

// Whether `e` is a temp of a run that is gone (.NAME.reap-tmp.PID.XXXXXX, or
// .NAME.reap-tmp.PID.s.XXXXXX when staged) whose NAME matches `name` (or,
// with `prefix`, starts with it). With `any_name`, NAME may be anything, but
// a staged temp is never one: another folder's journal may still name it
// (only a run on its own output name, which completes that journal first,
// removes it).
bool is_stale_temp(const std::string & e, const std::string & name, bool prefix, bool any_name = false) {
    if (e.size() < 2 || e[0] != '.') return false;
    const size_t m = e.rfind(k_temp_marker);
    if (m == std::string::npos || m < 1) return false;
    const std::string owner = e.substr(1, m - 1);
    if (!any_name && !(prefix ? starts_with(owner, name.c_str()) : owner == name)) return false;
    const std::string rest = e.substr(m + std::strlen(k_temp_marker));
    const size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0) return false;
    if (any_name && rest.find('.', dot + 1) != std::string::npos) return false;   // staged
    char * endp = nullptr;
    const std::string digits = rest.substr(0, dot);
    const long pid = std::strtol(digits.c_str(), &endp, 10);
    return endp && *endp == '\0' && !alive(pid);
}

// Completes the journals in `dir` and removes the stale temps of `name` (with
// `any_name`, of every output but staged ones: is_stale_temp), under the
// directory's lock, which is taken only when there is something to do. A run
// that is publishing holds the lock from its journal to its last rename: its
// temps are never taken for a dead run's.
int clean_dir(const std::string & dir, const std::string & name, bool prefix, int & removed, std::string & err,
              bool any_name = false) {
    removed = 0;
    const bool temps = any_name || !name.empty();
    auto stale = [&](const std::string & e) { return temps && is_stale_temp(e, name, prefix, any_name); };
    bool any = false;
    for (const std::string & e : list_dir(dir)) any = any || is_journal(e) || stale(e);
    if (!any) return 0;
    dir_lock lk;
    if (!lk.lock(dir, err)) return -1;
    int n = 0;
    for (const std::string & e : list_dir(dir)) {
        if (!is_journal(e)) continue;
        if (!complete_journal(dir, e, err)) return -1;
        ++n;
    }
    for (const std::string & e : list_dir(dir)) {
        if (stale(e) && ::unlink((dir + "/" + e).c_str()) == 0) ++removed;
    }
    return n;
}

} // namespace

void declare_output_elsewhere(const std::string & path) {
    if (!path.empty()) g_declared_elsewhere.push_back(path);
}

int recover_dir(const std::string & dir, std::string & err) {
    int removed = 0;
    return clean_dir(dir, "", false, removed, err);
}

int remove_stale_temps(const std::string & dir, const std::string & name, bool prefix) {
    std::string err;
    int removed = 0;
    clean_dir(dir, name, prefix, removed, err);
    return removed;
}

bool prepare_output(const std::string & output, std::string & err) {
    // the stale temps of this output (staged ones too), then those of every
    // other output of the folder (not staged ones)
    int removed = 0;
    const std::string dir = dir_of(output);
    return clean_dir(dir, base_name(output), false, removed, err) >= 0 && clean_dir(dir, "", false, removed, err, true) >= 0;
}

bool write_file_durably(const std::string & path, const std::string & text, std::string & err, bool sync) {
    durable_file f;
    return f.open(path, err, sync) && f.write(text, err) && f.commit(err);
}

void remove_made_dir(const std::string & dir) {
    ::unlink((dir + k_lock_file).c_str());
    ::rmdir(dir.c_str());
}

bool write_files_durably(const std::vector<std::pair<std::string, std::string>> & files, std::string & err, bool sync) {
    std::vector<durable_file> out(files.size());
    for (size_t i = 0; i < files.size(); ++i) {
        if (!out[i].open(files[i].first, err, sync) || !out[i].write(files[i].second, err) || !out[i].finish(err)) {
            return false;   // every temp so far is removed by its destructor
        }
    }
    for (size_t i = 0; i < out.size();) {
        std::vector<durable_file *> group = {&out[i]};
        const std::string dir = dir_of(out[i].target());
        for (++i; i < out.size() && dir_of(out[i].target()) == dir; ++i) group.push_back(&out[i]);
        if (!publish_together(group, err)) return false;
    }
    return true;
}

} // namespace reap::util

// Publishing of publish.h: durable_file, publish_together (the journal),
// dir_lock and the helpers that write whole files through them. Every step
// that changes a folder goes through current_disk().
#include "util/publish.h"

#include "util/disk.h"
#include "util/interrupt.h"
#include "util/output_rule.h"
#include "util/path.h"
#include "util/recovery.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace reap::util {

bool fsync_dir_of(const std::string & path) { return current_disk().fsync_dir(dir_of(path)); }

// ---- durable_file ------------------------------------------------------------------

namespace {

// Why an output written without --force was not published.
std::string appeared_meanwhile(const std::string & target) {
    return target + " appeared while this run was writing it (another run's output?): it is left as it is and "
                    "nothing of this run is published (use --force to replace it)";
}

} // namespace

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
        keep_existing_ = o.keep_existing_;
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
    keep_existing_ = false;
    // what a killed run left for this target: its journal completed, its temp removed
    if (!prepare_output(target, err)) return false;
    // hidden, unique (mkstemp) and in the target's directory: the rename stays
    // on one file system; the name says whose it is (.NAME.reap-tmp.PID.), so
    // that the next run on NAME can remove it once PID is gone
    std::string tmpl = dir_of(target) + "/." + base_name(target) + ".reap-tmp." + std::to_string(::getpid()) +
                       (staged ? ".s.XXXXXX" : ".XXXXXX");
    disk & d = current_disk();
    const int fd = d.make_temp(tmpl);
    if (fd < 0) {
        err = "cannot create a temp file beside " + target + ": " + strerror(errno);
        return false;
    }
    fd_ = fd;
    temp_ = tmpl;
    slot_ = register_temp(temp_);
    if (!d.chmod(fd_, 0644)) {   // mkstemp creates 0600; outputs are ordinary files
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
    if (!current_disk().write(fd_, data, n)) {
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
    disk & d = current_disk();
    if (sync_ && !d.fsync(fd_)) {
        err = target_ + ": fsync: " + strerror(errno);
        return false;
    }
    const int fd = fd_;
    fd_ = -1;
    if (!d.close(fd)) {
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
    disk & d = current_disk();
    if (keep_existing_ ? !d.rename_noreplace(temp_, target_) : !d.rename(temp_, target_)) {
        err = keep_existing_ && errno == EEXIST ? appeared_meanwhile(target_)
                                                 : "cannot rename " + temp_ + " to " + target_ + ": " + strerror(errno);
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
    disk & d = current_disk();
    if (fd_ >= 0) {
        d.close(fd_);
        fd_ = -1;
    }
    if (!temp_.empty() && !published_) d.unlink(temp_);
    temp_.clear();
    unregister_temp(slot_);
    slot_ = nullptr;
}

void durable_file::leave_to_journal() {
    if (fd_ >= 0) {
        current_disk().close(fd_);
        fd_ = -1;
    }
    temp_.clear();
    unregister_temp(slot_);
    slot_ = nullptr;
}

// ---- publishing several files together --------------------------------------------------

namespace {

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

bool remove_first_of_set(const std::string & target, std::string & err) {
    if (!current_disk().unlink(target) && errno != ENOENT) {
        err = "cannot remove the previous " + target + ": " + strerror(errno);
        return false;
    }
    return true;
}

bool publish_together(const std::vector<durable_file *> & files, std::string & err) {
    if (files.empty()) return true;
    if (files.size() == 1) return files[0]->publish(err);
    const std::string dir = dir_of(files[0]->target());
    std::string text = k_journal_header;
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
    // every publisher into the folder holds its lock: a target checked absent
    // here stays absent until this publish is done
    for (const durable_file * f : files) {
        struct stat st;
        if (f->keeps_existing() && ::lstat(f->target().c_str(), &st) == 0) {
            err = appeared_meanwhile(f->target());
            return false;
        }
    }
    const std::string journal = journal_path(files[0]->target());
    if (!write_file_durably(journal, text, err, files[0]->sync())) return false;
    // committed: from here on the next run completes the set. Never a loadable
    // mix: the first file (the shard a loader opens) leaves first and comes
    // back last, so between two renames the set lacks it (llama.cpp refuses
    // such a set) rather than holding new shards beside old ones.
    const std::string stays = " (the journal " + journal + " stays: the next run on this output completes the set)";
    if (!remove_first_of_set(files[0]->target(), err)) {
        for (durable_file * f : files) f->leave_to_journal();
        err += stays;
        return false;
    }
    for (size_t i = 1; i <= files.size(); ++i) {
        if (!files[i % files.size()]->publish(err)) {
            // the rest are committed: their temps stay for the journal
            for (size_t j = i; j <= files.size(); ++j) files[j % files.size()]->leave_to_journal();
            err += stays;
            return false;
        }
    }
    current_disk().unlink(journal);
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
    if (shared_fd_ >= 0) ::close(shared_fd_);   // closing releases the flock
    if (key_.empty()) return;
    auto it = g_held.find(key_);
    if (it != g_held.end() && --it->second.count == 0) {
        current_disk().close(it->second.fd);
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
    const int fd = current_disk().open_dir_for_lock(key);
    if (fd < 0) {
        err = "cannot open the folder " + key + " to lock it: " + strerror(errno);
        return false;
    }
    while (::flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        err = "cannot lock the folder " + key + ": " + strerror(errno);
        current_disk().close(fd);
        return false;
    }
    g_held[key] = held_lock{fd, 1};
    key_ = key;
    return true;
}

bool dir_lock::lock_shared(const std::string & dir, double timeout_s, std::string & err,
                           const std::function<void(const std::string & dir)> & on_wait) {
    if (char * real = ::realpath(dir.c_str(), nullptr)) {
        const bool ours = g_held.count(real) != 0;   // this process publishes there: held already
        free(real);
        if (ours) return true;
    }
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return true;   // nothing there to publish into: the reader's own open says what is wrong
    const auto start = std::chrono::steady_clock::now();
    bool waited = false;
    while (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            err = "cannot lock the folder " + dir + ": " + strerror(errno);
            ::close(fd);
            return false;
        }
        const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (waited_s >= timeout_s) {
            err = dir + ": a publish there has held the folder's lock for over " + std::to_string((long) timeout_s) +
                  " s (another reap run writing into it?): try again when it is done";
            ::close(fd);
            return false;
        }
        if (!waited && on_wait) on_wait(dir);
        waited = true;
        ::usleep(20 * 1000);
    }
    shared_fd_ = fd;
    return true;
}

bool write_file_durably(const std::string & path, const std::string & text, std::string & err, bool sync) {
    durable_file f;
    return f.open(path, err, sync) && f.write(text, err) && f.commit(err);
}

void remove_made_dir(const std::string & dir) { current_disk().rmdir(dir); }

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

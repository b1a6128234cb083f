// Publishing outputs: a file appears under its name only when complete
// (durable_file), files that belong together appear together (a journal:
// publish_together), an output written without --force never replaces a file
// that appeared meanwhile (another run's), and one lock per folder orders the
// publishes into it and keeps readers (verify) from seeing half a publish
// (dir_lock). Every step that changes the folder goes through util::disk.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace reap::util {

// The names reap gives its own files in an output folder: temps
// (.NAME.reap-tmp.PID.XXXXXX) and journals (.NAME.reap-journal). The lock is
// the folder's own (flock on its descriptor): no file.
inline constexpr const char * k_temp_marker = ".reap-tmp.";
inline constexpr const char * k_journal_suffix = ".reap-journal";
// The first NUL-terminated field of every journal (then "temp", "target" pairs).
inline constexpr const char * k_journal_header = "reap-journal 1";

// A file that appears under its name only when complete. Every writer of reap
// (GGUF models and archives, plans, SHA256SUMS, records) uses it:
//
//     util::durable_file out;
//     if (!out.open(target, err)) return false;   // DIR/.NAME.reap-tmp.PID.XXXXXX beside the target, mode 0644
//     ... out.write(data, n, err) as often as needed, or stream into out.fd()
//         (copy_file_range, pwrite: any call that writes the descriptor) ...
//     if (!out.commit(err)) return false;          // fsync, close, rename over target, fsync the directory
//
// Until commit succeeds the target is untouched (an existing one stays as it
// was); a durable_file destroyed without a successful commit, on any error
// path, or discard()ed, closes and removes its temp file. The temp file lies in
// the target's directory so that the rename is atomic (same file system).
// Files that must appear together (the shards of a split set): finish() each
// (fsync + close), then publish() each (rename + directory fsync); if one
// publish fails, the caller removes the targets already published. With
// `sync` off (tests, scratch output) nothing is fsynced.
// Refusing to replace an existing target (--force) is the caller's decision,
// checked before writing (util::check_output); keep_existing() makes the
// publish refuse as well, so that a target another run published meanwhile is
// never replaced (the last step then fails: "TARGET appeared while ...").
class durable_file {
public:
    durable_file() = default;
    ~durable_file();
    durable_file(const durable_file &) = delete;
    durable_file & operator=(const durable_file &) = delete;
    durable_file(durable_file && o) noexcept;
    durable_file & operator=(durable_file && o) noexcept;

    // Creates the temp file beside `target`. Fails ("cannot create a temp file
    // beside TARGET: reason") when the directory is missing or not writable.
    // `staged`: the caller may publish it in another folder's journal (a
    // sliced imatrix beside another folder's model); its name then says so
    // (.NAME.reap-tmp.PID.s.XXXXXX), and once stale it is removed only by a
    // run on the same output name, not by every run in its folder.
    bool open(const std::string & target, std::string & err, bool sync = true, bool staged = false);
    // The open temp file's descriptor (-1 before open and after finish).
    int fd() const { return fd_; }
    const std::string & target() const { return target_; }
    const std::string & temp_path() const { return temp_; }
    bool sync() const { return sync_; }
    // Whether the rename over the target happened (even if the directory fsync then failed).
    bool published() const { return published_; }
    // The publish never replaces an existing target (an output written without
    // --force): rename without replace, and publish_together checks every
    // such target under the folder's lock before its commit point.
    void keep_existing() { keep_existing_ = true; }
    bool keeps_existing() const { return keep_existing_; }

    // Appends n bytes ("TARGET: write: reason" on failure).
    bool write(const void * data, size_t n, std::string & err);
    bool write(const std::string & text, std::string & err) { return write(text.data(), text.size(), err); }
    // fsync (with sync) and close the temp file.
    bool finish(std::string & err);
    // Renames the finished temp file over the target, then fsyncs the target's
    // directory (with sync) so that the new name survives a crash.
    bool publish(std::string & err);
    // finish + publish.
    bool commit(std::string & err) { return finish(err) && publish(err); }
    // Closes and removes the temp file (no-op once published).
    void discard();
    // Leaves the finished temp file where it is, to the journal that names it
    // (publish_together failed after its commit point): it is no longer
    // removed by this object, nor by SIGINT / SIGTERM; the next run on the
    // output renames it into place.
    void leave_to_journal();

private:
    std::string target_, temp_;
    int         fd_ = -1;
    bool        sync_ = true;
    bool        published_ = false;
    bool        keep_existing_ = false;
    void *      slot_ = nullptr;   // the temp's entry in the interrupt registry
};

// Publishes files that must appear together (the shards of a split set, an
// output and its SHA256SUMS), all finish()ed: first a journal
// DIR/.NAME.reap-journal (NAME: the first file's target) listing every
// "temp -> target" rename is written durably (temp + fsync + rename): that is
// the commit point; then every file is renamed into place and the journal
// removed. A kill before the journal leaves the previous files untouched (the
// temps are removed by the next run); a kill after it leaves a journal that
// recover_dir() completes (roll forward), so the set appears whole; so does a
// rename that fails after the journal (the temps stay for it). Never a
// loadable mix: the first file's previous version is removed first and the
// new one renamed last, so while the journal is pending the set lacks the file
// a loader opens (llama.cpp refuses it) rather than holding old and new
// shards of the same names. SIGINT and
// SIGTERM are held back while it runs. Files lie in the journal's directory (the caller holds its dir_lock) or,
// named by absolute path, elsewhere (a sliced imatrix in another folder). One file: a plain publish.
bool publish_together(const std::vector<durable_file *> & files, std::string & err);

// The previous version of a set's first file, removed right after the commit
// point (publish_together, and recovery's completion of a journal) so that
// old and new files never load together. Absent already: nothing to do.
bool remove_first_of_set(const std::string & target, std::string & err);

// The journal publish_together writes for a set whose first file is `target`:
// DIR/.NAME.reap-journal, DIR and NAME those of `target`. While it exists the
// set is committed but not all in place (the next run on the output completes it).
std::string journal_path(const std::string & target);

// The lock of a folder: flock on the folder's own descriptor, so that it
// leaves no file behind and a reader needs no write permission. Exclusive:
// every multi-file publish, SHA256SUMS update and recovery in DIR. Shared:
// a reader that must see whole sets (verify), never half a publish.
// Released when destroyed.
class dir_lock {
public:
    dir_lock() = default;
    ~dir_lock();
    dir_lock(const dir_lock &) = delete;
    dir_lock & operator=(const dir_lock &) = delete;
    // Blocks until the exclusive lock is held.
    bool lock(const std::string & dir, std::string & err);
    // Takes the shared lock, waiting at most `timeout_s` seconds for a
    // publish in progress (`on_wait` is called once when it has to wait);
    // then fails ("DIR: a publish there has held its lock for over N s"). A
    // folder that cannot be opened is not locked (true: the reader's own open
    // then says what is wrong).
    bool lock_shared(const std::string & dir, double timeout_s, std::string & err,
                     const std::function<void(const std::string & dir)> & on_wait = nullptr);
private:
    std::string key_;   // the directory, resolved; empty when not held
    int         shared_fd_ = -1;
};

// Writes `text` as the whole content of `path` through a durable_file.
bool write_file_durably(const std::string & path, const std::string & text, std::string & err, bool sync = true);

// Writes several files (path, content). All temps are finished before the
// first publish, so a failed write (a full disk) changes none of them. Each run
// of consecutive files of one directory is then published whole or not at all
// (publish_together), in order: a failure or a kill in run k leaves the runs
// before it new, the later ones old; list the file that names the others last.
bool write_files_durably(const std::vector<std::pair<std::string, std::string>> & files, std::string & err,
                         bool sync = true);

// Removes the folder `dir` that this run created for its outputs when writing
// them then failed, if it is empty.
void remove_made_dir(const std::string & dir);

// fsyncs the directory holding `path` (after a rename or an unlink in it).
bool fsync_dir_of(const std::string & path);

} // namespace reap::util

// File I/O helpers shared by every reader and writer of reap: reading a whole
// small file, the full pread / write loops, same-file-by-inode, and the one
// durable-write rule (temp file beside the target, fsync, rename, fsync the
// directory) that every output of reap goes through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace reap::util {

// Reads the whole regular file at `path` into `out`. On failure `err` names the
// file as "<what> '<path>'": cannot open (with the reason), not a regular
// file, cannot read.
bool read_file(const std::string & path, const char * what, std::string & out, std::string & err);

// Reads exactly n bytes at `offset` of fd (retrying short reads and EINTR).
// False on an error (errno set) or at end of file (errno left as it was).
bool pread_full(int fd, void * dst, size_t n, uint64_t offset);
// Writes exactly n bytes to fd at its position (retrying short writes and
// EINTR). False with errno set (EIO when write makes no progress).
bool write_full(int fd, const void * src, size_t n);

// Whether `a` and `b` name the same existing file (same st_dev and st_ino,
// so hard links and different spellings count); false when either is missing.
bool same_file(const std::string & a, const std::string & b);

// Opens the input `path` read-only and returns its descriptor, or -1 with
// `err` set: "PATH: cannot open: reason" / "PATH: not a regular file", or with
// `what`, "cannot open WHAT 'PATH': reason" / "WHAT 'PATH' is not a regular
// file". The one opener of every input file: it opens with O_NONBLOCK and
// checks fstat before anything reads, so a FIFO, a device or a directory is
// refused at once instead of blocking in open() or read(); the descriptor is
// then switched back to blocking reads.
int open_input(const std::string & path, std::string & err, const char * what = nullptr);

// ---- the output rule ----------------------------------------------------------------
//
// One rule for every path a command writes (models, shards, archives,
// checkpoints, plans, SHA256SUMS, records, charts): an output is never one of
// the command's inputs, nor another of its outputs. Two paths are the same
// when they name the same existing file (st_dev + st_ino: hard links and
// other spellings count) or, when one does not exist yet, the same directory
// entry (the directory resolved with realpath, then the name).
bool same_entry(const std::string & a, const std::string & b);

// Refuses `output` ("refusing to write OUTPUT over the WHAT 'PATH'")
// when it is the same entry as one of `inputs` (pairs of what it is, path;
// empty paths are skipped), with or without --force. Every command calls it
// for every output before it writes anything.
bool check_not_input(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                     std::string & err);

// check_not_input, then: an existing `output` is refused without `force`
// ("OUTPUT exists (use --force to replace it)") and always when it is not a
// regular file.
bool check_output(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                  bool force, std::string & err);

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
// Refusing to replace an existing target (--force) is the caller's decision.
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

private:
    std::string target_, temp_;
    int         fd_ = -1;
    bool        sync_ = true;
    bool        published_ = false;
    void *      slot_ = nullptr;   // the temp's entry in the interrupt registry
};

// Publishes files that must appear together (the shards of a split set, an
// output and its SHA256SUMS), all finish()ed: first a journal
// DIR/.NAME.reap-journal (NAME: the first file's target) listing every
// "temp -> target" rename is written durably (temp + fsync + rename): that is
// the commit point; then every file is renamed into place and the journal
// removed. A kill before the journal leaves the previous files untouched (the
// temps are removed by the next run); a kill after it leaves a journal that
// recover_dir() completes (roll forward), so the set appears whole. The first
// file's previous version is removed first and the new one renamed last, so
// that while the journal is pending the set lacks its first file (llama.cpp
// refuses to load it) rather than holding old and new shards. SIGINT and
// SIGTERM are held back while it runs. Files lie in the journal's directory (the caller holds its dir_lock) or,
// named by absolute path, elsewhere (a sliced imatrix in another folder). One file: a plain publish.
bool publish_together(const std::vector<durable_file *> & files, std::string & err);

// The journal publish_together writes for a set whose first file is `target`:
// DIR/.NAME.reap-journal, DIR and NAME those of `target`. While it exists the
// set is committed but not all in place (the next run on the output completes it).
std::string journal_path(const std::string & target);

// An exclusive lock (flock) on DIR/.reap.lock, the lock of every multi-file
// publish and SHA256SUMS update in DIR; released when destroyed.
class dir_lock {
public:
    dir_lock() = default;
    ~dir_lock();
    dir_lock(const dir_lock &) = delete;
    dir_lock & operator=(const dir_lock &) = delete;
    // Blocks until the lock is held. Fails when DIR is not writable.
    bool lock(const std::string & dir, std::string & err);
private:
    std::string key_;   // the directory, resolved; empty when not held
};

// Finishes what a killed run left in `dir`, under its dir_lock: completes
// every publish whose journal is there (renames the temps it lists that still
// exist, then removes the journal). Returns the number of journals completed,
// or -1 with `err` when a journal is not reap's: an entry that is no reap temp
// renamed over its own target, or one in another folder that is not an output
// this process declared (declare_output_elsewhere): a journal names only
// files of the folder it lives in. Such a journal is left as it is.
int recover_dir(const std::string & dir, std::string & err);

// Declares `path`, an output of this command published by the journal of
// another folder (prune's --imatrix-out beside another folder's model), so
// that recover_dir completes a killed run's journal entry for it. Call it
// before the first write.
void declare_output_elsewhere(const std::string & path);

// Removes, in `dir`, the temp files of runs that are gone (named
// .NAME.reap-tmp.PID.XXXXXX with PID not a live process) whose NAME is
// `name` or, with `prefix`, starts with `name`. Temps of live runs are left.
// Returns how many were removed.
int remove_stale_temps(const std::string & dir, const std::string & name, bool prefix = false);

// What every command does before writing `output` (after check_output):
// completes the journals of killed runs in its directory (recover_dir), then
// removes the stale temps of this output's name (remove_stale_temps), then
// those of every other output in the folder (a killed run to another name
// leaves nothing behind once anything is written there again), except staged
// temps (durable_file::open), which only a run on their own name removes.
bool prepare_output(const std::string & output, std::string & err);

// A test hook: every step of writing an output (a tensor, a finish, a
// rename, a journal) is a numbered fault point. With REAP_FAULT_KILL_AT=N in
// the environment the process SIGKILLs itself at point N; with
// REAP_FAULT_TRACE=1 each point prints "reap: fault point N" on stderr; with
// REAP_FAULT_PAUSE_AT=N it prints "reap: paused at fault point N" and waits
// (up to a minute) there. The fault-injection tests use them to kill or
// signal a run at chosen moments.
void fault_point();

// ---- interruption -------------------------------------------------------------------
//
// Every temp file a durable_file holds is registered while it exists;
// install_interrupt_handlers() makes SIGINT and SIGTERM remove them all, print
// "reap CMD: interrupted (SIGNAL); temp files removed, no output written"
// and exit 130 / 143. (calibrate keeps its own SIGINT handler: it
// checkpoints.)
void install_interrupt_handlers(const char * cmd);

// Writes `text` as the whole content of `path` through a durable_file.
bool write_file_durably(const std::string & path, const std::string & text, std::string & err, bool sync = true);

// Writes several files (path, content) so that a failed write (a full disk)
// changes none of them: every temp file is written and finished before the
// first one is published. They are then published in the order given, the
// consecutive files of one directory together (publish_together), so list
// the file that names the others (a card, a report) last.
bool write_files_durably(const std::vector<std::pair<std::string, std::string>> & files, std::string & err,
                         bool sync = true);

// Removes the folder `dir` that this run created for its outputs when writing
// them then failed: its lock file (all that a failed publish leaves there),
// then the folder itself if it is empty.
void remove_made_dir(const std::string & dir);

// fsyncs the directory holding `path` (after a rename or an unlink in it).
bool fsync_dir_of(const std::string & path);

} // namespace reap::util

// test_publish_faults.cpp: the promises of docs/reliability.md for a publish
// cut short, proved in-process at every step (no reap binary, no llama.cpp).
// Each scenario lays down a previous output, then publishes a new one through
// a fault_disk (tests/fault_disk.h):
//   * crash: from step k on nothing reaches the disk (a write there torn in
//     half), for every k, the temps named after a stand-in process killed
//     then; then what the next run does first (prepare_output / recover_dir)
//     runs; the folders must then hold
//     the previous files or the new ones, byte for byte, never a mix, and no
//     temp file or journal;
//   * fail: step k fails with ENOSPC, then with EIO, in-process; the run must
//     report it, and after recovery the same holds (a failed write or temp
//     creation leaves the previous files).
// After a crash that left a journal, the recovery itself is crashed at each of
// its steps too (the split set, the sweep), then run again: what a recovery
// that was not crashed leaves (the journal's set whole).
// Scenarios: one file (fresh and over a previous one); several files in two
// folders (a report's figures, then its card); a split model with its
// SHA256SUMS over a previous set; a model, its SHA256SUMS and a sliced
// imatrix in another folder (prune --imatrix --imatrix-out OTHER).
// And a race: another run publishes the same new output while this one writes
// it; without --force this one must not replace it (issue 23 item 12).
// The commands' own publishes, through the core function each command calls:
// sweep's plans, chart and JSON (planner::publish_sweep_files), over a
// previous sweep and into a plans folder it makes; report's figures and card
// (report::write_report, the whole library call); calibrate's checkpoint,
// replaced, and its finished archive, after which the checkpoint goes
// (saliency/checkpoint.h).
#include "fault_disk.h"
#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "plan/sweep.h"
#include "report/report.h"
#include "report_test_util.h"
#include "saliency/checkpoint.h"
#include "saliency_test_util.h"
#include "util/file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sys/stat.h>
#include <csignal>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace g = reap::gguf;
namespace u = reap::util;
using fault_test::fault_disk;

namespace {

// The files of the watched folders: "FOLDER/NAME" -> bytes (visible files
// only; reap's hidden files are leftovers).
using state = std::map<std::string, std::string>;

// One read of the whole file (every output is read after every step: a
// stream iterator's byte at a time is most of a scenario's time under ASan).
std::string read_text(const std::string & path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    const std::streamoff size = f ? (std::streamoff) f.tellg() : 0;
    std::string text(size > 0 ? (size_t) size : 0, '\0');
    f.seekg(0);
    f.read(text.data(), (std::streamsize) text.size());
    EXPECT_EQ(f.gcount(), (std::streamsize) text.size()) << "reading " << path;
    return text;
}

void write_text(const std::string & path, const std::string & text) {
    gguf_test::write_all(path, std::vector<uint8_t>(text.begin(), text.end()));
}

struct scenario {
    std::string root;                                  // a fresh scratch folder
    std::vector<std::string> folders;                  // watched, relative to root
    std::function<void(const std::string &)> make_old; // lays down the previous output (real disk)
    std::function<bool(const std::string &, std::string &)> publish;   // the run under test
    std::function<bool(const std::string &, std::string &)> recover;   // what the next run does first
    // The groups that appear one after another (their files, relative to
    // root): the state is groups [0, j) new and [j, n) old for some j. One
    // group: old or new.
    std::vector<std::vector<std::string>> groups;
    // crash the recovery too, at each of its steps, after every crash that left a journal
    bool crash_recovery = false;
    // the failures each step gets (a scenario whose steps are another's,
    // through a costlier call, may take one)
    std::vector<int> errors = {ENOSPC, EIO};
};

std::string scratch(const std::string & name) {
    struct stat st;
    const bool shm = ::stat("/dev/shm", &st) == 0 && ::access("/dev/shm", W_OK) == 0;   // fsync costs nothing there
    const std::string dir = shm ? "/dev/shm/reap-test-faults-" + name + "-" + std::to_string(::getpid())
                                : gguf_test::scratch_dir("faults-" + name);
    return dir;
}

void remove_tree(const std::string & dir) {
    for (const std::string & e : gguf_test::list_dir(dir)) {
        const std::string p = dir + "/" + e;
        struct stat st;
        if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(p);
        else ::unlink(p.c_str());
    }
    ::rmdir(dir.c_str());
}

// The visible files of the watched folders, and reap's hidden ones (temps,
// journals; the folder's lock is a flock on the folder itself, no file).
void snapshot(const scenario & sc, state & files, std::vector<std::string> & leftovers) {
    files.clear();
    leftovers.clear();
    for (const std::string & f : sc.folders) {
        for (const std::string & e : gguf_test::list_dir(sc.root + "/" + f)) {
            const std::string rel = f + "/" + e, path = sc.root + "/" + rel;
            struct stat st;
            if (::lstat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
            if (e[0] == '.') {
                leftovers.push_back(rel);
            } else {
                files[rel] = read_text(path);
            }
        }
    }
}

void reset(const scenario & sc) {
    remove_tree(sc.root);
    ::mkdir(sc.root.c_str(), 0755);
    for (const std::string & f : sc.folders) ::mkdir((sc.root + "/" + f).c_str(), 0755);
    sc.make_old(sc.root);
}

// What make_old laid down under a scenario's root (folders, files with their
// bytes and modes), taken once: each step restores it instead of making the
// previous output again (it generates models, the costliest part of a step
// under ASan).
struct tree_image {
    std::vector<std::string> dirs;   // relative to root ("/a", "/a/b"), parents first
    struct file {
        std::string rel, bytes;
        mode_t      mode;
    };
    std::vector<file> files;
};

void take_image(const std::string & root, const std::string & rel, tree_image & image) {
    for (const std::string & e : gguf_test::list_dir(root + rel)) {
        const std::string r = rel + "/" + e;
        struct stat st;
        ASSERT_EQ(::lstat((root + r).c_str(), &st), 0) << root + r;
        if (S_ISDIR(st.st_mode)) {
            image.dirs.push_back(r);
            take_image(root, r, image);
        } else {
            ASSERT_TRUE(S_ISREG(st.st_mode)) << root + r << " is neither a folder nor a file";
            image.files.push_back({r, read_text(root + r), st.st_mode & 07777});
        }
    }
}

void restore(const scenario & sc, const tree_image & image) {
    remove_tree(sc.root);
    ::mkdir(sc.root.c_str(), 0755);
    for (const std::string & d : image.dirs) ::mkdir((sc.root + d).c_str(), 0755);
    for (const tree_image::file & f : image.files) {
        write_text(sc.root + f.rel, f.bytes);
        ::chmod((sc.root + f.rel).c_str(), f.mode);
    }
}

// The states the promises allow: for each j, groups [0, j) new, the rest old.
std::vector<state> allowed_states(const scenario & sc, const state & old_files, const state & new_files) {
    std::vector<state> allowed;
    for (size_t j = 0; j <= sc.groups.size(); ++j) {
        state s = old_files;
        for (size_t gi = 0; gi < j; ++gi) {
            for (const std::string & f : sc.groups[gi]) {
                const auto it = new_files.find(f);
                if (it == new_files.end()) s.erase(f);
                else s[f] = it->second;
            }
        }
        allowed.push_back(s);
    }
    return allowed;
}

// Which allowed state `s` is (0: all old, groups.size(): all new), or -1.
int which_state(const std::vector<state> & allowed, const state & s) {
    for (size_t j = 0; j < allowed.size(); ++j) {
        if (allowed[j] == s) return (int) j;
    }
    return -1;
}

std::string describe(const state & s, const state & old_files, const state & new_files) {
    std::string r;
    for (const auto & [name, bytes] : s) {
        const auto o = old_files.find(name), n = new_files.find(name);
        const bool is_old = o != old_files.end() && o->second == bytes, is_new = n != new_files.end() && n->second == bytes;
        r += "  " + name + " (" + std::to_string(bytes.size()) + " bytes: " +
             (is_old && is_new ? "old = new" : is_old ? "old" : is_new ? "new" : "NEITHER") + ")\n";
    }
    return r;
}

struct tally {
    long steps = 0;
    long recovery_crashes = 0;         // crashes of a recovery (all left the new set once recovered)
    std::map<int, int> crash_states;   // allowed-state index -> crashes that left it
    int failed_runs = 0;
};

// Runs `body` with a disk that crashes at step k (temps named after a
// stand-in process, killed at the end: the run is gone); true when the step
// came.
bool crash_at(long k, const std::function<void()> & body) {
    char sleep_arg[] = "sleep", sixty[] = "60";
    char * argv[] = {sleep_arg, sixty, nullptr};
    pid_t owner = 0;
    if (::posix_spawnp(&owner, "sleep", nullptr, nullptr, argv, environ) != 0) {
        ADD_FAILURE() << "cannot start the stand-in process";
        return false;
    }
    fault_disk crash;
    crash.mode = fault_disk::fault::crash;
    crash.at = k;
    crash.owner_pid = owner;
    u::use_disk(&crash);
    body();
    u::use_disk(nullptr);
    ::kill(owner, SIGKILL);
    ::waitpid(owner, nullptr, 0);
    return crash.crashed;
}

// The steps `body` takes.
long count_steps(const std::function<void()> & body) {
    fault_disk counter;
    u::use_disk(&counter);
    body();
    u::use_disk(nullptr);
    return counter.steps;
}

// Runs the scenario: the clean run (counts the steps), a crash at every step,
// a failure (ENOSPC, EIO) at every step.
tally run_all(const scenario & sc) {
    tally t;
    reset(sc);
    tree_image old_tree;
    take_image(sc.root, "", old_tree);
    state old_files, new_files, crashed;
    std::vector<std::string> left;
    snapshot(sc, old_files, left);
    EXPECT_TRUE(left.empty());

    fault_disk counter;
    counter.record_trace = true;
    u::use_disk(&counter);
    std::string err;
    const bool clean_ok = sc.publish(sc.root, err);
    u::use_disk(nullptr);
    EXPECT_TRUE(clean_ok) << err;
    snapshot(sc, new_files, left);
    EXPECT_TRUE(left.empty()) << left.size() << " leftovers after a clean run, the first " << left[0];
    EXPECT_NE(old_files, new_files);
    t.steps = counter.steps;
    const std::vector<state> allowed = allowed_states(sc, old_files, new_files);
    long first_rename = t.steps + 1;   // the first step that puts a file in place
    for (long k = t.steps; k >= 1; --k) {
        if (counter.trace[k - 1].find(" rename ") != std::string::npos) first_rename = k;
    }
    EXPECT_EQ(which_state(allowed, new_files), (int) sc.groups.size()) << describe(new_files, old_files, new_files);

    auto check = [&](const std::string & what, long k) {
        std::string recover_err;
        EXPECT_TRUE(sc.recover(sc.root, recover_err)) << what << " at step " << k << ": " << recover_err;
        state now;
        snapshot(sc, now, left);
        const int j = which_state(allowed, now);
        EXPECT_GE(j, 0) << what << " at step " << k << " (" << counter.trace[k - 1] << ") left a mix:\n"
                        << describe(now, old_files, new_files);
        EXPECT_TRUE(left.empty()) << what << " at step " << k << " (" << counter.trace[k - 1] << "): "
                                  << left.size() << " leftovers after recovery, the first " << left[0];
        return j;
    };

    auto publish = [&] {
        std::string e;
        sc.publish(sc.root, e);
    };
    auto recover = [&] {
        std::string e;
        sc.recover(sc.root, e);
    };
    for (long k = 1; k <= t.steps; ++k) {
        restore(sc, old_tree);
        if (!crash_at(k, publish)) {
            ADD_FAILURE() << "the run did not stop at step " << k << " (" << counter.trace[k - 1] << ")";
            continue;
        }
        snapshot(sc, crashed, left);
        const bool journal = std::any_of(left.begin(), left.end(), [](const std::string & e) {
            return e.size() > 13 && e.compare(e.size() - 13, 13, ".reap-journal") == 0;
        });
        const int j = check("a crash", k);
        if (j >= 0) ++t.crash_states[j];
        // a journal is a commit: at least its group is new once recovered
        if (journal) EXPECT_GE(j, 1) << "a crash at step " << k << " left a journal, and the recovery rolled back";
        if (sc.crash_recovery && journal) {
            // the run that completes the journal is itself crashed, at each of
            // its steps: then run again, it must leave what it leaves uncrashed
            restore(sc, old_tree);
            crash_at(k, publish);
            const long r_steps = count_steps(recover);
            EXPECT_GT(r_steps, 0);
            for (long r = 1; r <= r_steps; ++r) {
                restore(sc, old_tree);
                if (!crash_at(k, publish) || !crash_at(r, recover)) {
                    ADD_FAILURE() << "the recovery did not stop at step " << r;
                    continue;
                }
                EXPECT_EQ(check("a crash at step " + std::to_string(r) + " of the recovery after a crash", k), j);
                ++t.recovery_crashes;
            }
        }
    }

    for (const int e : sc.errors) {
        for (long k = 1; k <= t.steps; ++k) {
            restore(sc, old_tree);
            fault_disk fail;
            fail.mode = fault_disk::fault::fail;
            fail.at = k;
            fail.error = e;
            u::use_disk(&fail);
            std::string run_err;
            const bool ok = sc.publish(sc.root, run_err);
            u::use_disk(nullptr);
            const std::string what = std::string(strerror(e)) + " on " + fail.failed_op;
            // a step whose failure the publish may ignore: removing what is
            // no longer needed (a temp, a lock file, a finished journal)
            const bool cleanup = fail.failed_op == "unlink" || fail.failed_op == "rmdir";
            if (!ok) {
                ++t.failed_runs;
                EXPECT_FALSE(run_err.empty()) << what << " at step " << k;
            }
            // a failed write, stream or temp is reported; before the first
            // rename (every file written, the journal written) it leaves the
            // previous files. After it (the journal of a later group of
            // write_files_durably, written once the earlier group is in
            // place) the earlier groups may be new: check() below allows
            // exactly the states of groups in order.
            const bool writing = fail.failed_op == "write" || fail.failed_op == "stream" || fail.failed_op == "mkstemp";
            if (writing) {
                EXPECT_FALSE(ok) << what << " at step " << k << " (" << counter.trace[k - 1] << ") was not reported";
                EXPECT_NE(run_err.find(strerror(e)), std::string::npos) << run_err;
            }
            if (writing && k < first_rename) {
                state now;
                snapshot(sc, now, left);
                EXPECT_EQ(now, old_files) << what << " at step " << k << " (" << counter.trace[k - 1]
                                          << ") changed the output:\n" << describe(now, old_files, new_files);
            }
            if (cleanup) {
                recover();
                continue;   // a temp it could not remove stays for the next run (this process is alive)
            }
            check(what, k);
        }
    }
    remove_tree(sc.root);
    return t;
}

// A small model whose tensors live in memory, named `name` (seed: its bytes).
// Made once for each (seed, name): a scenario publishes the same model at
// every step, and its tensors (shared, read-only) need not be drawn again.
g::output_spec model_spec(uint32_t seed, const std::string & name) {
    static std::map<std::pair<uint32_t, std::string>, g::output_spec> made;
    const auto key = std::make_pair(seed, name);
    auto it = made.find(key);
    if (it == made.end()) {
        gguf_test::model_options o;
        o.seed = seed;
        o.n_layer = 2;
        g::output_spec spec = gguf_test::make_model_spec(o);
        spec.kvs.set_string("general.name", name);
        it = made.emplace(key, std::move(spec)).first;
    }
    return it->second;
}

bool write_spec(const g::output_spec & spec, const std::string & path, uint64_t split_tensors, const std::string & sums,
                std::string & err, std::vector<u::durable_file> * stage = nullptr,
                std::vector<u::durable_file *> publish_with = {}) {
    g::write_options wo;
    wo.force = true;
    wo.sync = true;
    wo.split_max_tensors = split_tensors;
    wo.sums_path = sums;
    wo.stage = stage;
    wo.publish_with = std::move(publish_with);
    std::vector<std::string> written;
    return g::write_output(spec, wo, path, written, err);
}

void write_old_spec(const g::output_spec & spec, const std::string & path, uint64_t split_tensors,
                    const std::string & sums) {
    std::string err;
    ASSERT_TRUE(write_spec(spec, path, split_tensors, sums, err)) << err;
}

void report(const char * name, const tally & t) {
    std::string states;
    for (const auto & [j, n] : t.crash_states) states += " " + std::to_string(n) + " in state " + std::to_string(j) + ";";
    printf("%s: %ld steps; crashes:%s %ld crashes of the recovery after one; %d failed runs\n", name,
           t.steps, states.c_str(), t.recovery_crashes, t.failed_runs);
}

} // namespace

// One file, over a previous one and where there was none.
TEST(PublishFaults, OneFile) {
    for (const bool previous : {true, false}) {
        scenario sc;
        sc.root = scratch(previous ? "one-over" : "one-fresh");
        sc.folders = {"out"};
        sc.make_old = [previous](const std::string & root) {
            if (previous) write_text(root + "/out/plan.json", "{\"previous\": true}\n");
            write_text(root + "/out/other.txt", "another file of the folder\n");
        };
        sc.publish = [](const std::string & root, std::string & err) {
            return u::write_file_durably(root + "/out/plan.json", std::string(10000, 'n') + "\n", err);
        };
        sc.recover = [](const std::string & root, std::string & err) {
            return u::prepare_output(root + "/out/plan.json", err);
        };
        sc.groups = {{"out/plan.json"}};
        tally t = run_all(sc);
        report(previous ? "one file over a previous one" : "one file, fresh", t);
        EXPECT_GT(t.steps, 5);
        EXPECT_GT(t.crash_states[0], 0);
        EXPECT_GT(t.crash_states[1], 0);
    }
}

// Several files through write_files_durably: two figures together (a
// journal), then the card that names them; over a previous card.
TEST(PublishFaults, FilesOfTwoFoldersInOrder) {
    scenario sc;
    sc.root = scratch("card");
    sc.folders = {"card", "card/figures"};
    sc.make_old = [](const std::string & root) {
        write_text(root + "/card/README.md", "old card\n");
        write_text(root + "/card/figures/a.svg", "<svg>old a</svg>\n");
        write_text(root + "/card/figures/b.svg", "<svg>old b</svg>\n");
    };
    sc.publish = [](const std::string & root, std::string & err) {
        return u::write_files_durably({{root + "/card/figures/a.svg", "<svg>new a, longer</svg>\n"},
                                       {root + "/card/figures/b.svg", "<svg>new b, longer</svg>\n"},
                                       {root + "/card/README.md", "new card, longer\n"}},
                                      err);
    };
    sc.recover = [](const std::string & root, std::string & err) {
        return u::prepare_output(root + "/card/figures/a.svg", err) && u::prepare_output(root + "/card/README.md", err);
    };
    sc.groups = {{"card/figures/a.svg", "card/figures/b.svg"}, {"card/README.md"}};
    tally t = run_all(sc);
    report("two figures then the card", t);
    EXPECT_GT(t.crash_states[0], 0);
    EXPECT_GT(t.crash_states[1], 0);   // the figures in place, the card not yet
    EXPECT_GT(t.crash_states[2], 0);
}

// A model split in three shards with its SHA256SUMS (a foreign line in it),
// over a previous set of another model: one journal publishes the four.
TEST(PublishFaults, SplitModelWithChecksums) {
    scenario sc;
    sc.root = scratch("split");
    sc.folders = {"m"};
    sc.make_old = [](const std::string & root) {
        write_text(root + "/m/SHA256SUMS", "# kept as it is\n" + std::string(64, 'a') + "  notes.txt\n");
        write_old_spec(model_spec(1, "previous"), root + "/m/model.gguf", 6, root + "/m/SHA256SUMS");
    };
    sc.publish = [](const std::string & root, std::string & err) {
        return write_spec(model_spec(2, "new"), root + "/m/model.gguf", 6, root + "/m/SHA256SUMS", err);
    };
    sc.recover = [](const std::string & root, std::string & err) {
        return u::prepare_output(root + "/m/model-00001-of-00003.gguf", err);
    };
    sc.groups = {{"m/model-00001-of-00003.gguf", "m/model-00002-of-00003.gguf", "m/model-00003-of-00003.gguf",
                  "m/SHA256SUMS"}};
    sc.crash_recovery = true;
    tally t = run_all(sc);
    report("split model and SHA256SUMS", t);
    EXPECT_GT(t.crash_states[0], 0);
    EXPECT_GT(t.crash_states[1], 0);
    EXPECT_GT(t.recovery_crashes, 0);
}

// prune --imatrix --imatrix-out OTHER/...: the sliced imatrix is staged in
// its own folder, then published in the model folder's journal with the model
// and its SHA256SUMS. Its tensors are copied from a source file
// (copy_file_range: one step per tensor), as prune copies them.
TEST(PublishFaults, ModelWithSlicedImatrixElsewhere) {
    scenario sc;
    sc.root = scratch("imatrix");
    sc.folders = {"m", "i", "src"};
    sc.make_old = [](const std::string & root) {
        write_old_spec(model_spec(3, "previous"), root + "/m/model.gguf", 0, root + "/m/SHA256SUMS");
        write_old_spec(model_spec(4, "previous imatrix"), root + "/i/out.imatrix.gguf", 0, "");
        write_old_spec(model_spec(5, "source"), root + "/src/source.gguf", 0, "");
    };
    sc.publish = [](const std::string & root, std::string & err) {
        const std::string imatrix_out = root + "/i/out.imatrix.gguf";
        // what prune does (cmd_prune.cpp): declare, recover the model folder,
        // stage the imatrix, then write the model with it
        u::declare_output_elsewhere(imatrix_out);
        if (u::recover_dir(root + "/m", err) < 0) return false;
        g::model source;
        if (!g::open_model(root + "/src/source.gguf", source, err)) return false;
        g::output_spec slice = g::spec_from_model(source);
        slice.kvs.set_string("general.name", "new imatrix");
        std::vector<u::durable_file> staged;
        if (!write_spec(slice, imatrix_out, 0, "", err, &staged)) return false;
        std::vector<u::durable_file *> with;
        for (auto & f : staged) with.push_back(&f);
        return write_spec(model_spec(6, "new"), root + "/m/model.gguf", 0, root + "/m/SHA256SUMS", err, nullptr, with);
    };
    sc.recover = [](const std::string & root, std::string & err) {
        u::declare_output_elsewhere(root + "/i/out.imatrix.gguf");
        return u::recover_dir(root + "/m", err) >= 0 && u::prepare_output(root + "/m/model.gguf", err) &&
               u::prepare_output(root + "/i/out.imatrix.gguf", err);
    };
    sc.groups = {{"m/model.gguf", "m/SHA256SUMS", "i/out.imatrix.gguf"}};
    tally t = run_all(sc);
    report("model, SHA256SUMS and the sliced imatrix elsewhere", t);
    EXPECT_GT(t.crash_states[0], 0);
    EXPECT_GT(t.crash_states[1], 0);
}

namespace {

// A disk on which another run's file appears at `target` just before the
// first step `op` of this run: that run published the same output meanwhile.
class racing_disk : public fault_test::stepping_disk {
public:
    std::string op, target;
    bool        raced = false;

protected:
    bool at_step(long, const char * o, const std::string &, int, const void *, size_t) override {
        if (!raced && op == o) {
            raced = true;
            write_text(target, "the other run's output\n");
        }
        return true;
    }
};

} // namespace

// Two runs write one new output, without --force: the one that publishes
// second fails naming the file that appeared, which stays as it is, and
// leaves nothing of its own (no temp, no journal, no SHA256SUMS line). With
// --force it replaces it, as asked. The other run appears where a real one
// would: while this run waits for the folder's lock (a journal publish:
// SHA256SUMS or a split set), or just before its rename (a single file
// without SHA256SUMS, which takes no lock). Against the code before this
// change, every case without --force replaced the other run's file.
TEST(PublishFaults, AnOutputThatAppearedMeanwhileIsNotReplaced) {
    struct race {
        const char * what;
        uint64_t     split;
        bool         sums;
        const char * op;
        const char * appears;   // relative to the folder
        bool         force;
    };
    const race races[] = {
        {"one file and SHA256SUMS", 0, true, "open-lock", "model.gguf", false},
        {"a split set and SHA256SUMS", 6, true, "open-lock", "model-00002-of-00003.gguf", false},
        {"a split set, first shard", 6, false, "open-lock", "model-00001-of-00003.gguf", false},
        {"one file, no SHA256SUMS", 0, false, "rename", "model.gguf", false},
        {"one file and SHA256SUMS, --force", 0, true, "open-lock", "model.gguf", true},
    };
    for (const race & r : races) {
        SCOPED_TRACE(r.what);
        const std::string dir = scratch("race");
        remove_tree(dir);
        ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
        racing_disk disk;
        disk.op = r.op;
        disk.target = dir + "/" + r.appears;
        g::write_options wo;
        wo.force = r.force;
        wo.sync = false;
        wo.split_max_tensors = r.split;
        if (r.sums) wo.sums_path = dir + "/SHA256SUMS";
        std::vector<std::string> written;
        std::string err;
        u::use_disk(&disk);
        const bool ok = g::write_output(model_spec(9, "this run"), wo, dir + "/model.gguf", written, err);
        u::use_disk(nullptr);
        ASSERT_TRUE(disk.raced) << "the other run never came (no step " << r.op << ")";
        if (r.force) {
            EXPECT_TRUE(ok) << err;
            EXPECT_TRUE(read_text(disk.target) != "the other run's output\n") << "--force did not replace it";
        } else {
            EXPECT_FALSE(ok) << "published over the other run's " << disk.target;
            EXPECT_NE(err.find(disk.target + " appeared"), std::string::npos) << err;
            EXPECT_TRUE(read_text(disk.target) == "the other run's output\n") << "the other run's file was replaced";
            EXPECT_EQ(gguf_test::list_dir(dir), std::vector<std::string>{r.appears}) << "this run left files behind";
        }
        remove_tree(dir);
    }
}

// ---- the publishes of the commands: sweep, report, calibrate ------------------------------
// Each through the core function the command itself calls (the command only
// decides what to write), so that every step of it can fail or crash here.

namespace {

// What a sweep publishes: its plans in --plans-dir, then the chart and the
// JSON that names them (src/llama/sweep.h sweep_output_files), as strings;
// `n_keeps` says which plans, `tag` makes the contents differ between runs.
std::vector<std::pair<std::string, std::string>> sweep_files(const std::string & root, const std::vector<int> & n_keeps,
                                                             const std::string & tag) {
    std::vector<std::pair<std::string, std::string>> files;
    for (int n : n_keeps) {
        files.push_back({root + "/plans/keep-" + std::to_string(n) + ".json",
                         "{\"format\": \"reap-plan\", \"n_keep\": " + std::to_string(n) + ", \"run\": \"" + tag + "\"}\n"});
    }
    files.push_back({root + "/out/sweep.svg", "<svg><!-- " + tag + " --></svg>\n"});
    files.push_back({root + "/out/sweep.json", "{\"format\": \"reap-sweep\", \"run\": \"" + tag + "\"}\n"});
    return files;
}

bool recover_sweep(const std::string & root, std::string & err) {
    return u::prepare_output(root + "/plans/keep-8.json", err) && u::prepare_output(root + "/out/sweep.json", err);
}

} // namespace

// reap sweep -o OUT/sweep.json --plans-dir PLANS over a previous sweep (its
// plans for other sizes stay), and into a --plans-dir that does not exist yet
// (made by the publish, and removed again when the publish fails): the plans
// appear together, then the chart and the JSON together.
TEST(PublishFaults, SweepPlansChartAndJson) {
    for (const bool previous : {true, false}) {
        SCOPED_TRACE(previous ? "over a previous sweep" : "a new plans folder");
        scenario sc;
        sc.root = scratch(previous ? "sweep-over" : "sweep-fresh");
        sc.folders = {"plans", "out"};
        sc.make_old = [previous](const std::string & root) {
            if (!previous) {
                ::rmdir((root + "/plans").c_str());
                return;
            }
            for (const auto & [path, text] : sweep_files(root, {8, 4}, "previous")) write_text(path, text);
        };
        sc.publish = [](const std::string & root, std::string & err) {
            return reap::planner::publish_sweep_files(root + "/plans", sweep_files(root, {8, 6}, "new, longer"), err);
        };
        sc.recover = recover_sweep;
        sc.groups = {{"plans/keep-8.json", "plans/keep-6.json"}, {"out/sweep.svg", "out/sweep.json"}};
        sc.crash_recovery = previous;   // the recovery's steps are the same in both
        tally t = run_all(sc);
        report(previous ? "sweep over a previous one" : "sweep into a new plans folder", t);
        EXPECT_GT(t.crash_states[0], 0);
        EXPECT_GT(t.crash_states[1], 0);   // the plans in place, the JSON not yet
        EXPECT_GT(t.crash_states[2], 0);
    }
}

// reap report over a previous card: write_report (report/report.h) audits the
// build and draws the figures, then publishes the figures together and the
// card last. The fixture is report_test_util.h's (the zoo's qwen3moe, an
// archive, a plan and its build).
TEST(PublishFaults, ReportCardOverAPreviousOne) {
    report_test::fixture fx;
    std::string why;
    if (!report_test::setup("faults_report", fx, why)) GTEST_SKIP() << why;
    const std::vector<std::string> figures = {"saliency-heatmap.svg", "retention.svg", "domain-usage.svg"};
    scenario sc;
    sc.root = scratch("report");
    sc.folders = {"card", "card/figures"};
    sc.make_old = [&figures](const std::string & root) {
        write_text(root + "/card/README.md", "the previous card\n");
        for (const auto & f : figures) write_text(root + "/card/figures/" + f, "<svg>previous " + f + "</svg>\n");
    };
    sc.publish = [&fx](const std::string & root, std::string & err) {
        reap::report::report_options o;
        o.source = fx.model;
        o.plan = fx.plan;
        o.pruned = fx.cut;
        o.saliency = fx.sal;
        o.out_dir = root + "/card";
        o.force = true;
        o.tool_version = report_test::k_tool_version;
        reap::report::report_result res;
        return reap::report::write_report(o, res, err);
    };
    sc.recover = [&figures](const std::string & root, std::string & err) {
        return u::prepare_output(root + "/card/figures/" + figures[0], err) && u::prepare_output(root + "/card/README.md", err);
    };
    for (const auto & f : figures) {
        if (sc.groups.empty()) sc.groups.emplace_back();
        sc.groups[0].push_back("card/figures/" + f);
    }
    sc.groups.push_back({"card/README.md"});
    // each run audits the build and draws the figures again: ENOSPC alone (the
    // same write_files_durably takes EIO too in FilesOfTwoFoldersInOrder)
    sc.errors = {ENOSPC};
    tally t = run_all(sc);
    report("report card over a previous one", t);
    EXPECT_GT(t.crash_states[0], 0);
    EXPECT_GT(t.crash_states[1], 0);   // the figures in place, the card not yet
    EXPECT_GT(t.crash_states[2], 0);
}

namespace {

// A saliency archive of the calibration, `tokens` routed per domain so far.
reap::saliency::archive calibration_so_far(int64_t tokens) {
    return saliency_test::make_archive({"en", "code"}, saliency_test::make_fingerprint(), reap::saliency::metric_set::reap,
                                       tokens);
}

// A calibration stopped after 3 windows of 9: its checkpoint in out/, where
// the archive goes too; what the next run does first is prepare both names.
scenario calibration_scenario(const std::string & name) {
    scenario sc;
    sc.root = scratch(name);
    sc.folders = {"out"};
    sc.make_old = [](const std::string & root) {
        std::string err;
        ASSERT_TRUE(reap::saliency::write_checkpoint(calibration_so_far(40), 3, 9, root + "/out/sal.gguf.checkpoint", err)) << err;
    };
    sc.recover = [](const std::string & root, std::string & err) {
        return u::prepare_output(root + "/out/sal.gguf", err) && u::prepare_output(root + "/out/sal.gguf.checkpoint", err);
    };
    return sc;
}

} // namespace

// reap calibrate --checkpoint-every N: every save replaces the checkpoint
// whole (saliency/checkpoint.h write_checkpoint); a crash or a full disk at
// any step leaves the previous one, which --resume can still read.
TEST(PublishFaults, CalibrateCheckpointReplacesThePreviousOne) {
    scenario sc = calibration_scenario("checkpoint");
    sc.publish = [](const std::string & root, std::string & err) {
        return reap::saliency::write_checkpoint(calibration_so_far(80), 6, 9, root + "/out/sal.gguf.checkpoint", err);
    };
    sc.groups = {{"out/sal.gguf.checkpoint"}};
    tally t = run_all(sc);
    report("calibrate checkpoint over the previous one", t);
    EXPECT_GT(t.crash_states[0], 0);
    EXPECT_GT(t.crash_states[1], 0);
    // what was published is a checkpoint --resume reads: the archive so far and where to go on
    reset(sc);
    std::string err;
    ASSERT_TRUE(sc.publish(sc.root, err)) << err;
    reap::saliency::archive back;
    ASSERT_TRUE(reap::saliency::read_archive(sc.root + "/out/sal.gguf.checkpoint", back, err)) << err;
    uint64_t next = 0, n = 0;
    ASSERT_TRUE(back.provenance.get_u64(reap::saliency::k_key_checkpoint_next_window, next, err)) << err;
    ASSERT_TRUE(back.provenance.get_u64(reap::saliency::k_key_checkpoint_n_windows, n, err)) << err;
    EXPECT_EQ(next, 6u);
    EXPECT_EQ(n, 9u);
    EXPECT_EQ(back.domains[0].n_tokens, calibration_so_far(80).domains[0].n_tokens);
    remove_tree(sc.root);
}

// The end of reap calibrate: the finished archive is published, then the
// checkpoint removed (saliency/checkpoint.h publish_calibration). A crash in
// between leaves both (the archive whole); before, the checkpoint alone; a
// failed write reports it and keeps the checkpoint, naming it.
TEST(PublishFaults, CalibrateArchiveThenTheCheckpointGoes) {
    scenario sc = calibration_scenario("calibrated");
    sc.publish = [](const std::string & root, std::string & err) {
        return reap::saliency::publish_calibration(calibration_so_far(120), root + "/out/sal.gguf", false,
                                                   root + "/out/sal.gguf.checkpoint", err);
    };
    sc.groups = {{"out/sal.gguf"}, {"out/sal.gguf.checkpoint"}};
    tally t = run_all(sc);
    report("calibrate archive, then the checkpoint removed", t);
    // no crash leaves state 2: removing the checkpoint is the last step
    EXPECT_GT(t.crash_states[0], 0);
    EXPECT_GT(t.crash_states[1], 0);   // the archive published, the checkpoint not yet removed
    // a full disk while writing the archive: reported, naming the checkpoint kept for --resume
    reset(sc);
    fault_disk full;
    full.mode = fault_disk::fault::fail;
    full.at = 3;
    full.error = ENOSPC;
    u::use_disk(&full);
    std::string err;
    const bool ok = sc.publish(sc.root, err);
    u::use_disk(nullptr);
    EXPECT_FALSE(ok);
    EXPECT_NE(err.find("the checkpoint " + sc.root + "/out/sal.gguf.checkpoint written before is kept"), std::string::npos)
        << full.failed_op << ": " << err;
    remove_tree(sc.root);
}

// test_cli_reliability.cpp: reap never loses a byte (issue 11), through the reap
// binary ($REAP_BIN) on zoo models:
//   * no command writes over one of its inputs or over its other output, with
//     or without --force (calibrate's checkpoint, plan, imatrix, merge, prune
//     and its SHA256SUMS; calibrate only in a build with llama.cpp);
//   * SHA256SUMS keeps every line it does not own (comments, other files, a
//     file larger than 64 MiB); two prunes into one folder at once both keep
//     their line;
//   * names that are not UTF-8 give valid JSON, not an abort;
//   * a FIFO given as an input is refused at once;
//   * a plan records the model it was made for: prune and verify refuse
//     another (unless --allow-other-model, which the output records);
//   * SIGINT / SIGTERM during a prune: exit 130 / 143, a message, no temp file;
//   * SIGKILL of prune (reap_killable, at chosen publish steps: in the middle
//     of the data, just after the journal, between two renames; single file
//     and split, fresh and --force over a previous output): afterwards
//     exactly one complete set verifies (the old or the new), nothing partial
//     is visible, and the next run leaves no temp file; a sliced imatrix in
//     another folder appears with its model or not at all. Every step of
//     every publish is crashed in-process by test_publish_faults.cpp;
//   * a full disk (a small tmpfs) for every core command that writes: exit 2,
//     a clear message, no output and no temp file;
//   * issue 23: nothing takes the name SHA256SUMS of the output folder (an
//     imatrix input, a model output); a journal names only files of its own
//     folder; merge counts one calibration once; no lock file and no stale
//     temp of any output is left in a folder after a run there; two prunes
//     without --force to one new path: one publishes, the other exits 2;
//     verify during a republish sees a whole set.
#include "diskfull_test_util.h"
#include "gguf/gguf.h"
#include "plan/plan.h"
#include "prune/prune.h"
#include "prune_test_util.h"
#include "saliency/archive.h"
#include "saliency/merge.h"
#include "saliency_test_util.h"
#include "util/file.h"
#include "util/sha256.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <random>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace g = reap::gguf;
namespace s = reap::saliency;
using prune_test::quote;
using prune_test::read_all;

namespace {

int run_reap(const std::string & args, std::string & out) {
    return prune_test::run(quote(gguf_test::reap_bin()) + " " + args, out);
}

std::string text_of(const std::string & path) {
    const std::vector<uint8_t> b = read_all(path);
    return std::string(b.begin(), b.end());
}

void write_text(const std::string & path, const std::string & text) {
    prune_test::write_all(path, std::vector<uint8_t>(text.begin(), text.end()));
}

void copy_file(const std::string & from, const std::string & to) { prune_test::write_all(to, read_all(from)); }

struct fixture {
    std::string zoo, dir;
    std::string model(const std::string & name) const { return zoo + "/" + name + ".gguf"; }
};

// A scratch directory on /dev/shm when there is one (a tmpfs: fsync costs
// nothing there, so the tests that run prune hundreds of times or write a
// 65 MiB SHA256SUMS stay fast; what they check does not depend on the disk),
// else under $REAP_TEST_TMP. The name carries the test's PID: /dev/shm is
// shared by every checkout on the machine, and two runs of one test (two
// worktrees) must not remove each other's folder.
std::string fast_scratch(const std::string & name) {
    struct stat st;
    if (::stat("/dev/shm", &st) != 0 || ::access("/dev/shm", W_OK) != 0) return prune_test::scratch("reliability-" + name);
    const std::string dir = "/dev/shm/reap-test-reliability-" + name + "-" + std::to_string(::getpid());
    std::string out;
    prune_test::run("rm -rf " + quote(dir), out);
    ::mkdir(dir.c_str(), 0755);
    return dir;
}

// The prelude of the tests below that prune the gpt-oss zoo model: fx.dir
// moved to a fast scratch folder `name`, and a random half-keep plan (seeded)
// of the model written to fx.dir/p.json. `model` gets the model's path.
void gpt_oss_half_plan(fixture & fx, const std::string & name, uint64_t seed, std::string & model, reap::plan & p) {
    std::string why;
    fx.dir = fast_scratch(name);
    model = fx.model("gpt-oss");
    g::model gm;
    ASSERT_TRUE(g::open_model(model, gm, why)) << why;
    ASSERT_TRUE(prune_test::random_plan(gm, prune_test::half_keep(gm), seed, p, why)) << why;
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/p.json", true, why)) << why;
}

void remove_tree(const std::string & dir) {
    std::string out;
    if (dir.rfind("/dev/shm/", 0) == 0) prune_test::run("rm -rf " + quote(dir), out);
}

bool setup(const std::string & name, fixture & fx, std::string & why) {
    if (!prune_test::exists(gguf_test::reap_bin())) {
        why = "reap binary not built ($REAP_BIN)";
        return false;
    }
    fx.zoo = prune_test::zoo_dir("reliability_zoo", why);
    if (fx.zoo.empty()) return false;
    fx.dir = prune_test::scratch("reliability-" + name);
    return true;
}

// A synthetic saliency archive with `model`'s fingerprint (domain "en",
// statistics drawn with `seed`: archives of two seeds are two calibrations).
void write_archive_for(const std::string & model, const std::string & path, uint32_t seed = 7) {
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(model, m, err)) << err;
    s::fingerprint fp;
    ASSERT_TRUE(s::model_fingerprint(m, fp, err)) << err;
    s::archive a = s::make_archive(fp, s::metric_set::reap);
    saliency_test::sim_options o;
    o.seed = seed;
    saliency_test::simulate_domain(a, "en", o);
    ASSERT_TRUE(s::write_archive(a, path, err, true)) << err;
}

// `src` with general.name set to `name` (same shape, another header).
void write_renamed(const std::string & src, const std::string & dst, const std::string & name) {
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(src, m, err)) << err;
    g::output_spec spec = g::spec_from_model(m);
    spec.kvs.set_string("general.name", name);
    g::write_options wo;
    wo.force = true;
    wo.sync = false;
    std::vector<std::string> written;
    ASSERT_TRUE(g::write_output(spec, wo, dst, written, err)) << err;
}

using diskfull_test::leftovers;
using diskfull_test::visible;

// reap with the test disk of tests/killing_disk.cpp: killed (REAP_TEST_KILL_AT)
// or held (REAP_TEST_PAUSE_AT) at a numbered publish step, each step traced
// with REAP_TEST_TRACE=1.
std::string killable_bin() { return gguf_test::env_or("REAP_KILLABLE_BIN", gguf_test::own_bin_dir() + "/reap_killable"); }

// Starts `BIN ARGS` (reap or reap_killable) with extra environment `env`
// ("A=1 B=2"), output to `log`.
pid_t spawn(const std::string & bin, const std::string & env, const std::string & args, const std::string & log) {
    const pid_t pid = fork();
    if (pid == 0) {
        const std::string cmd = env + " exec " + quote(bin) + " " + args + " > " + quote(log) + " 2>&1";
        execl("/bin/sh", "sh", "-c", cmd.c_str(), (char *) nullptr);
        _exit(127);
    }
    return pid;
}

bool wait_for(const std::string & log, const std::string & what) {
    for (int i = 0; i < 3000; ++i) {
        if (text_of(log).find(what) != std::string::npos) return true;
        usleep(10 * 1000);
    }
    return false;
}

// Two plans for `gm` keeping half its experts, drawn with seeds `a` and `b`,
// written as DIR/old.json and DIR/new.json (DIR made): the previous output
// and the new one of the fault-injection tests.
void write_old_and_new_plans(const g::model & gm, uint32_t a, uint32_t b, const std::string & dir, reap::plan & p_old,
                             reap::plan & p_new) {
    std::string err;
    const int64_t keep = prune_test::half_keep(gm);
    ASSERT_TRUE(prune_test::random_plan(gm, keep, a, p_old, err)) << err;
    ASSERT_TRUE(prune_test::random_plan(gm, keep, b, p_new, err)) << err;
    ::mkdir(dir.c_str(), 0755);
    ASSERT_TRUE(reap::write_plan(p_old, dir + "/old.json", true, err)) << err;
    ASSERT_TRUE(reap::write_plan(p_new, dir + "/new.json", true, err)) << err;
}

// The publish steps (util::disk) of one run of ARGS, in order: "OP WHAT"
// (step N is element N - 1).
std::vector<std::string> trace_steps(const std::string & args) {
    std::string out;
    EXPECT_EQ(prune_test::run("REAP_TEST_TRACE=1 " + quote(killable_bin()) + " " + args, out), 0) << out;
    std::vector<std::string> steps;
    const std::string tag = "reap-test: step ";
    for (size_t pos = 0; (pos = out.find(tag, pos)) != std::string::npos;) {
        pos += tag.size();
        const size_t end = out.find('\n', pos);
        const std::string line = out.substr(pos, end - pos);
        steps.push_back(line.substr(line.find(' ') + 1));
        if (std::stoul(line) != steps.size()) ADD_FAILURE() << "steps out of order: " << line;
    }
    return steps;
}

// The kill points the whole-process tests use, found in a traced run:
//   data:    the middle one of the steps that write a temp's bytes (every
//            file still a temp: the previous output must stay);
//   journal: the step after the journal is renamed into place (committed,
//            nothing renamed yet: the next run completes the new set);
//   renames: the step after the first file of the set is renamed into place.
struct kill_points {
    int data = 0, journal = 0, renames = 0;
};

kill_points find_kill_points(const std::vector<std::string> & steps) {
    kill_points k;
    std::vector<int> writes;
    int journal_rename = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
        const std::string & s = steps[i];
        const bool rename = s.rfind("rename ", 0) == 0;
        if (!journal_rename && (s.rfind("write ", 0) == 0 || s.rfind("stream ", 0) == 0)) writes.push_back((int) i + 1);
        if (rename && s.size() > 13 && s.compare(s.size() - 13, 13, ".reap-journal") == 0) {
            journal_rename = (int) i + 1;
        } else if (rename && journal_rename && !k.renames) {
            k.renames = (int) i + 2;
        }
    }
    if (!writes.empty()) k.data = writes[writes.size() / 2];
    if (journal_rename) k.journal = journal_rename + 1;
    return k;
}

// Runs reap_killable ARGS to be SIGKILLed at step `at`; false when it was not.
bool run_killed_at(int at, const std::string & args, std::string & out) {
    const int rc = prune_test::run("REAP_TEST_KILL_AT=" + std::to_string(at) + " " + quote(killable_bin()) + " " + args, out);
    return rc == -1 || rc == 128 + SIGKILL;
}

// Whether a killed run left a journal in `dir` (its own temp file is not one).
bool has_journal(const std::string & dir) {
    for (const std::string & e : leftovers(dir)) {
        if (e.size() > 13 && e.compare(e.size() - 13, 13, ".reap-journal") == 0) return true;
    }
    return false;
}

} // namespace

// Defects 1, 2, 4: an output is never an input, nor another output, --force or not.
TEST(OutputRule, NoCommandWritesOverItsInputs) {
    fixture fx;
    std::string why, out;
    if (!setup("inputs", fx, why)) GTEST_SKIP() << why;
    const std::string m = fx.dir + "/m.gguf", sal = fx.dir + "/sal.gguf", corpus = fx.dir + "/c.jsonl";
    copy_file(fx.model("qwen3moe"), m);
    write_archive_for(m, sal);
    write_text(corpus, "{\"domain\": \"en\", \"text\": \"hello\"}\n");
    const std::vector<uint8_t> m0 = read_all(m), sal0 = read_all(sal), corpus0 = read_all(corpus);
    auto unchanged = [&] {
        EXPECT_TRUE(read_all(m) == m0) << "the model changed";
        EXPECT_TRUE(read_all(sal) == sal0) << "the archive changed";
        EXPECT_TRUE(read_all(corpus) == corpus0) << "the corpus changed";
    };
    const std::string cal = "calibrate -m " + quote(m) + " --corpus " + quote(corpus) + " -c 64 --no-progress";
    const std::string plan = "plan " + quote(sal) + " -m " + quote(m) + " --keep 6 --no-protect-super --force";
    struct attempt {
        std::string args, expect;
    };
    std::vector<attempt> attempts;
    if (REAP_WITH_LLAMA) {  // without llama.cpp calibrate is a refusal (test_cli_help)
        attempts = {
            {cal + " -o " + quote(fx.dir + "/x.gguf") + " --checkpoint " + quote(fx.dir + "/x.gguf"), "output"},  // defect 1
            {cal + " -o " + quote(m) + " --force", "model"},
            {cal + " -o " + quote(corpus) + " --force", "corpus"},
            {cal + " -o " + quote(fx.dir + "/y.gguf") + " --checkpoint " + quote(m), "model"},
        };
    }
    attempts.insert(attempts.end(), {
        {plan + " -o " + quote(sal), "saliency archive"},
        {plan + " -o " + quote(m), "model"},
        {"imatrix " + quote(sal) + " -m " + quote(m) + " -o " + quote(m) + " --force", "model"},
        {"imatrix " + quote(sal) + " -o " + quote(sal) + " --force", "imatrix"},
        {"merge " + quote(sal) + " " + quote(sal) + " -o " + quote(sal) + " --force", "input"},
    });
    for (const attempt & a : attempts) {
        SCOPED_TRACE(a.args);
        EXPECT_EQ(run_reap(a.args, out), 2) << out;
        EXPECT_NE(out.find("refusing to write"), std::string::npos) << out;
        EXPECT_NE(out.find(a.expect), std::string::npos) << out;
        unchanged();
    }
    EXPECT_FALSE(prune_test::exists(fx.dir + "/x.gguf"));

    // Defect 4: an input named SHA256SUMS in the output folder (the model, then
    // the plan) is not replaced by the checksum file, with or without --force.
    reap::plan p;
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    ASSERT_TRUE(prune_test::random_plan(gm, 6, 3, p, why)) << why;
    const std::string sums = fx.dir + "/SHA256SUMS";
    copy_file(m, sums);
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/p.json", true, why)) << why;
    for (const char * force : {"", " --force"}) {
        EXPECT_EQ(run_reap("prune -m " + quote(sums) + " --plan " + quote(fx.dir + "/p.json") + " -o " +
                               quote(fx.dir + "/out.gguf") + force, out), 2) << out;
        EXPECT_NE(out.find("refusing to write"), std::string::npos) << out;
        EXPECT_TRUE(read_all(sums) == m0);
        EXPECT_FALSE(prune_test::exists(fx.dir + "/out.gguf"));
    }
    ::unlink(sums.c_str());
    ASSERT_TRUE(reap::write_plan(p, sums, true, why)) << why;
    const std::vector<uint8_t> plan0 = read_all(sums);
    EXPECT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(sums) + " -o " + quote(fx.dir + "/out.gguf") + " --force", out), 2) << out;
    EXPECT_NE(out.find("plan"), std::string::npos) << out;
    EXPECT_TRUE(read_all(sums) == plan0);
    EXPECT_TRUE(leftovers(fx.dir).empty());
}

// Defect 3: lines SHA256SUMS does not own survive, whatever the file's size.
TEST(Sha256Sums, KeepsEveryForeignLineAnySize) {
    fixture fx;
    std::string why, out;
    if (!setup("sums", fx, why)) GTEST_SKIP() << why;
    fx.dir = fast_scratch("sums");
    const std::string m = fx.model("gpt-oss");
    g::model gm;   // a second plan of it below
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(gm, prune_test::half_keep(gm), 5, p, why)) << why;
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/p.json", true, why)) << why;
    // a comment, a line that is no checksum, another file's line, then > 64 MiB
    // of long comment lines (cheap to parse), another checksum line, a comment
    auto make_before = [] {
        std::string t = "# release notes: keep me\nnot a checksum line\n" + std::string(64, 'a') + "  other.bin\n";
        for (int i = 0; i < 65; ++i) t += "# " + std::string(1u << 20, char('a' + i % 26)) + "\n";
        return t + std::string(64, 'b') + "  *binary-mode.bin\n# trailing comment\n";
    };
    write_text(fx.dir + "/SHA256SUMS", make_before());
    // ... streamed through a line at a time: prune's peak memory grows by far
    // less than the file's 65 MiB (reading it whole, then composing the new
    // text, took twice that)
    // (compared with the same prune into a folder with no SHA256SUMS, so that a
    // sanitizer build's own overhead cancels; the text is made again below, not
    // held: a forked child's peak counts the parent's pages)
    int status = -1;
    const std::string small_dir = fx.dir + "/nosums";
    ::mkdir(small_dir.c_str(), 0755);
    const long rss_small = gguf_test::run_peak_rss_kib({gguf_test::reap_bin(), "prune", "-m", m, "--plan", fx.dir + "/p.json",
                                                        "-o", small_dir + "/out.gguf"}, fx.dir + "/prune0.log", status);
    ASSERT_EQ(status, 0) << text_of(fx.dir + "/prune0.log");
    const long rss = gguf_test::run_peak_rss_kib({gguf_test::reap_bin(), "prune", "-m", m, "--plan", fx.dir + "/p.json", "-o",
                                                  fx.dir + "/out.gguf"}, fx.dir + "/prune.log", status);
    ASSERT_EQ(status, 0) << text_of(fx.dir + "/prune.log");
    EXPECT_LT(rss - rss_small, 16l << 10) << "peak RSS " << rss << " KiB with a 65 MiB SHA256SUMS, " << rss_small
                                          << " KiB without";
    std::string hex;
    ASSERT_TRUE(reap::util::sha256_file(fx.dir + "/out.gguf", hex, why)) << why;
    EXPECT_TRUE(text_of(fx.dir + "/SHA256SUMS") == make_before() + hex + "  out.gguf\n") << "SHA256SUMS lost or changed lines";
    // the second prune replaces its own line in place and keeps the rest
    const std::string before = "# header\n" + std::string(64, 'c') + "  out.gguf\n# footer\n";
    write_text(fx.dir + "/SHA256SUMS", before);
    ASSERT_TRUE(prune_test::random_plan(gm, prune_test::half_keep(gm), 6, p, why)) << why;
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/p.json", true, why)) << why;
    ASSERT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(fx.dir + "/p.json") + " -o " + quote(fx.dir + "/out.gguf") + " --force", out), 0) << out;
    ASSERT_TRUE(reap::util::sha256_file(fx.dir + "/out.gguf", hex, why)) << why;
    EXPECT_EQ(text_of(fx.dir + "/SHA256SUMS"), "# header\n" + hex + "  out.gguf\n# footer\n");
    EXPECT_EQ(run_reap("verify -m " + quote(m) + " --plan " + quote(fx.dir + "/p.json") + " " + quote(fx.dir + "/out.gguf"), out), 0) << out;
    ::unlink((fx.dir + "/SHA256SUMS").c_str());
    remove_tree(fx.dir);
}

// Defect 5: two prunes into one folder at once both keep their SHA256SUMS line.
TEST(Sha256Sums, ConcurrentPrunesKeepBothLines) {
    fixture fx;
    std::string why, out;
    if (!setup("concurrent", fx, why)) GTEST_SKIP() << why;
    std::string m;
    reap::plan p;
    ASSERT_NO_FATAL_FAILURE(gpt_oss_half_plan(fx, "concurrent", 7, m, p));
    const int rounds = 12;
    int both = 0;
    for (int r = 0; r < rounds; ++r) {
        ::unlink((fx.dir + "/SHA256SUMS").c_str());
        const pid_t a = spawn(gguf_test::reap_bin(), "", "prune -m " + quote(m) + " --plan " + quote(fx.dir + "/p.json") + " --force -o " + quote(fx.dir + "/a.gguf"), fx.dir + "/a.log");
        const pid_t b = spawn(gguf_test::reap_bin(), "", "prune -m " + quote(m) + " --plan " + quote(fx.dir + "/p.json") + " --force -o " + quote(fx.dir + "/b.gguf"), fx.dir + "/b.log");
        int sa = 0, sb = 0;
        waitpid(a, &sa, 0);
        waitpid(b, &sb, 0);
        ASSERT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0) << text_of(fx.dir + "/a.log");
        ASSERT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 0) << text_of(fx.dir + "/b.log");
        std::vector<std::pair<std::string, std::string>> entries;
        ASSERT_TRUE(reap::prune::read_sha256sums(fx.dir + "/SHA256SUMS", entries, why)) << why;
        both += entries.size() == 2;
        EXPECT_EQ(entries.size(), 2u) << text_of(fx.dir + "/SHA256SUMS");
        for (const char * o : {"/a.gguf", "/b.gguf"}) {
            EXPECT_EQ(run_reap("verify -m " + quote(m) + " --plan " + quote(fx.dir + "/p.json") + " " + quote(fx.dir + o), out), 0) << out;
        }
    }
    RecordProperty("rounds_with_both_lines", both);
    EXPECT_EQ(both, rounds);
    remove_tree(fx.dir);
}

// Issue 23 item 12: two prunes without --force to one new path, started
// together, with two plans. Exactly one publishes; the other exits 2 naming
// the file (it "appeared" while it wrote, or it "exists" when it started
// late), and the file is the winner's: it verifies against the winner's plan.
// Against the binary before this change both exited 0 in most rounds and the
// file was whichever renamed last.
TEST(Concurrency, TwoPrunesToOneNewPathOneWins) {
    fixture fx;
    std::string why, out;
    if (!setup("race", fx, why)) GTEST_SKIP() << why;
    fx.dir = fast_scratch("race");
    const std::string m = fx.model("gpt-oss");
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan pa, pb;
    write_old_and_new_plans(gm, 11, 12, fx.dir, pa, pb);
    const std::string plans[2] = {fx.dir + "/old.json", fx.dir + "/new.json"};
    const std::string target = fx.dir + "/cut.gguf";
    const int rounds = 12;
    int lost_at_publish = 0;
    for (int r = 0; r < rounds; ++r) {
        SCOPED_TRACE("round " + std::to_string(r));
        ::unlink(target.c_str());
        ::unlink((fx.dir + "/SHA256SUMS").c_str());
        pid_t pid[2];
        const std::string logs[2] = {fx.dir + "/a.log", fx.dir + "/b.log"};
        for (int i = 0; i < 2; ++i) {
            pid[i] = spawn(gguf_test::reap_bin(), "", "prune -m " + quote(m) + " --plan " + quote(plans[i]) +
                                                          " --split-max-tensors 8 -o " + quote(target), logs[i]);
        }
        int rc[2];
        for (int i = 0; i < 2; ++i) {
            int st = 0;
            waitpid(pid[i], &st, 0);
            rc[i] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        ASSERT_TRUE((rc[0] == 0 && rc[1] == 2) || (rc[0] == 2 && rc[1] == 0))
            << "exit " << rc[0] << " and " << rc[1] << "\n" << text_of(logs[0]) << text_of(logs[1]);
        const int winner = rc[0] == 0 ? 0 : 1;
        const std::string lost = text_of(logs[1 - winner]);
        EXPECT_NE(lost.find(fx.dir + "/cut-0000"), std::string::npos) << lost;
        lost_at_publish += lost.find(" appeared while this run was writing it") != std::string::npos;
        std::string shard1;
        for (const std::string & e : visible(fx.dir)) {
            if (e.rfind("cut-00001-of-", 0) == 0) shard1 = fx.dir + "/" + e;
        }
        ASSERT_FALSE(shard1.empty());
        EXPECT_EQ(run_reap("verify -m " + quote(m) + " --plan " + quote(plans[winner]) + " " + quote(shard1), out), 0) << out;
        for (const std::string & e : visible(fx.dir)) {
            if (e.rfind("cut-", 0) == 0) ::unlink((fx.dir + "/" + e).c_str());
        }
        EXPECT_TRUE(leftovers(fx.dir).empty());
    }
    RecordProperty("rounds_lost_at_publish", lost_at_publish);
    printf("two prunes to one new path: %d of %d rounds lost at the publish (the rest at the start)\n",
           lost_at_publish, rounds);
    remove_tree(fx.dir);
}

// Issue 23 item 12: verify during a prune --force republish of a split set
// (the same plan, so every complete set verifies) sees a whole set: it reads
// under the folder's shared lock. Against the binary before this change some
// runs said FAILED or named a pending journal (9 of 27 in the probe).
TEST(Concurrency, VerifyDuringARepublishSeesAWholeSet) {
    fixture fx;
    std::string why, out;
    if (!setup("republish", fx, why)) GTEST_SKIP() << why;
    std::string m;
    reap::plan p;
    ASSERT_NO_FATAL_FAILURE(gpt_oss_half_plan(fx, "republish", 21, m, p));
    const std::string plan = fx.dir + "/p.json", target = fx.dir + "/cut.gguf";
    const std::string prune = "prune -m " + quote(m) + " --plan " + quote(plan) + " --split-max-tensors 8 --force -o " + quote(target);
    ASSERT_EQ(run_reap(prune, out), 0) << out;
    std::string shard1;
    for (const std::string & e : visible(fx.dir)) {
        if (e.rfind("cut-00001-of-", 0) == 0) shard1 = fx.dir + "/" + e;
    }
    ASSERT_FALSE(shard1.empty());
    const int republishes = 40;
    const pid_t loop = fork();
    if (loop == 0) {
        const std::string cmd = "for i in $(seq " + std::to_string(republishes) + "); do " + quote(gguf_test::reap_bin()) +
                                " " + prune + " > /dev/null 2>&1 || exit 1; done";
        execl("/bin/sh", "sh", "-c", cmd.c_str(), (char *) nullptr);
        _exit(127);
    }
    int verifies = 0, wrong = 0, st = 0;
    std::string first_wrong;
    while (waitpid(loop, &st, WNOHANG) == 0) {
        const int rc = run_reap("verify -m " + quote(m) + " --plan " + quote(plan) + " " + quote(shard1), out);
        ++verifies;
        if (rc != 0 && wrong++ == 0) first_wrong = "exit " + std::to_string(rc) + ": " + out;
    }
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a republish failed";
    RecordProperty("verifies", verifies);
    printf("verify during %d republishes: %d runs, %d wrong verdicts\n", republishes, verifies, wrong);
    EXPECT_GE(verifies, 5);
    EXPECT_EQ(wrong, 0) << first_wrong;
    EXPECT_TRUE(leftovers(fx.dir).empty());
    remove_tree(fx.dir);
}

// Defect 6: names that are not UTF-8 come out as U+FFFD in JSON, not as an abort.
TEST(Json, InvalidUtf8NamesGiveValidJson) {
    fixture fx;
    std::string why, out;
    if (!setup("utf8", fx, why)) GTEST_SKIP() << why;
    const std::string bad = fx.dir + "/bad\xff\xfe.gguf";
    write_renamed(fx.model("qwen3moe"), bad, "name \xc3\x28 \xff");
    // the same model under an architecture name that is not UTF-8 (its keys renamed alike)
    const std::string bad_arch = fx.dir + "/arch.gguf";
    {
        g::model m;
        ASSERT_TRUE(g::open_model(fx.model("qwen3moe"), m, why)) << why;
        g::output_spec spec = g::spec_from_model(m);
        const std::string arch = "qwen3moe\xff";
        for (g::kv & e : spec.kvs.entries) {
            if (e.key.rfind("qwen3moe.", 0) == 0) e.key = arch + e.key.substr(8);
        }
        spec.kvs.set_string("general.architecture", arch);
        g::write_options wo;
        wo.sync = false;
        std::vector<std::string> written;
        ASSERT_TRUE(g::write_output(spec, wo, bad_arch, written, why)) << why;
    }
    nlohmann::json j;
    ASSERT_EQ(run_reap("inspect " + quote(bad_arch) + " --json", out), 0) << out;
    ASSERT_NO_THROW(j = nlohmann::json::parse(out)) << out;
    EXPECT_NE(out.find("\xef\xbf\xbd"), std::string::npos) << "no U+FFFD for the invalid bytes";
    ASSERT_EQ(run_reap("inspect " + quote(bad) + " --json", out), 0) << out;
    ASSERT_NO_THROW(j = nlohmann::json::parse(out)) << out;
    // plan records the archive's file name (not UTF-8) in its provenance
    const std::string sal = fx.dir + "/sal\xff.gguf";
    write_archive_for(bad, sal);
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(bad) + " --keep 6 --no-protect-super -o " + quote(fx.dir + "/p.json"), out), 0) << out;
    reap::plan p;
    ASSERT_TRUE(reap::read_plan(fx.dir + "/p.json", p, why)) << why;
    EXPECT_NE(p.provenance.dump().find("\xef\xbf\xbd"), std::string::npos);
    ASSERT_EQ(run_reap("compare " + quote(fx.dir + "/p.json") + " " + quote(fx.dir + "/p.json") + " --json", out), 0) << out;
    EXPECT_NO_THROW(j = nlohmann::json::parse(out)) << out;
}

// Defect 10: a FIFO given as an input is refused at once, not waited on.
TEST(Inputs, FifoIsRefusedNotWaitedOn) {
    fixture fx;
    std::string why, out;
    if (!setup("fifo", fx, why)) GTEST_SKIP() << why;
    const std::string fifo = fx.dir + "/pipe.gguf";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    const std::string m = fx.model("qwen3moe"), sal = fx.dir + "/sal.gguf";
    write_archive_for(m, sal);
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(gm, 6, 1, p, why)) << why;
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/p.json", true, why)) << why;
    const std::vector<std::string> cmds = {
        "inspect " + quote(fifo),
        "prune -m " + quote(fifo) + " --plan " + quote(fx.dir + "/p.json") + " -o " + quote(fx.dir + "/o.gguf"),
        "prune -m " + quote(m) + " --plan " + quote(fifo) + " -o " + quote(fx.dir + "/o.gguf"),
        "plan " + quote(fifo) + " -m " + quote(m) + " --keep 6 -o " + quote(fx.dir + "/q.json"),
        "plan " + quote(sal) + " -m " + quote(fifo) + " --keep 6 -o " + quote(fx.dir + "/q.json"),
        "merge " + quote(fifo) + " " + quote(sal) + " -o " + quote(fx.dir + "/mm.gguf"),
        "imatrix " + quote(fifo) + " -o " + quote(fx.dir + "/i.gguf"),
    };
    for (const std::string & c : cmds) {
        SCOPED_TRACE(c);
        EXPECT_EQ(prune_test::run("timeout 20 " + quote(gguf_test::reap_bin()) + " " + c, out), 2) << out;   // 124: it hung
        EXPECT_NE(out.find("not a regular file"), std::string::npos) << out;
    }
}

// Defect 11: a plan records the model it was made for.
TEST(PlanFingerprint, PruneAndVerifyRefuseAnotherModel) {
    fixture fx;
    std::string why, out;
    if (!setup("fingerprint", fx, why)) GTEST_SKIP() << why;
    const std::string a = fx.dir + "/a.gguf", b = fx.dir + "/b.gguf", sal = fx.dir + "/sal.gguf";
    copy_file(fx.model("qwen3moe"), a);
    write_renamed(a, b, "another model of the same shape");
    write_archive_for(a, sal);
    const std::string plan = fx.dir + "/p.json";
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(a) + " --keep 6 --no-protect-super -o " + quote(plan), out), 0) << out;
    reap::plan p;
    ASSERT_TRUE(reap::read_plan(plan, p, why)) << why;
    g::model ma;
    ASSERT_TRUE(g::open_model(a, ma, why)) << why;
    EXPECT_EQ(p.model_sha256, reap::model_header_sha256(ma));
    g::model mb;
    ASSERT_TRUE(g::open_model(b, mb, why)) << why;
    EXPECT_NE(reap::model_header_sha256(mb), p.model_sha256);

    EXPECT_EQ(run_reap("prune -m " + quote(b) + " --plan " + quote(plan) + " -o " + quote(fx.dir + "/ob.gguf"), out), 2) << out;
    EXPECT_NE(out.find("another model"), std::string::npos) << out;
    EXPECT_NE(out.find("--allow-other-model"), std::string::npos) << out;
    EXPECT_FALSE(prune_test::exists(fx.dir + "/ob.gguf"));
    ASSERT_EQ(run_reap("prune -m " + quote(b) + " --plan " + quote(plan) + " -o " + quote(fx.dir + "/ob.gguf") + " --allow-other-model", out), 0) << out;
    g::model ob;
    ASSERT_TRUE(g::open_model(fx.dir + "/ob.gguf", ob, why)) << why;
    std::string recorded;
    ASSERT_TRUE(ob.kvs.get_string("reap.plan.other_model", recorded, why)) << why;
    EXPECT_EQ(recorded, p.model_sha256);
    EXPECT_EQ(run_reap("verify -m " + quote(b) + " --plan " + quote(plan) + " " + quote(fx.dir + "/ob.gguf"), out), 2) << out;
    EXPECT_NE(out.find("another model"), std::string::npos) << out;
    EXPECT_EQ(run_reap("verify -m " + quote(b) + " --plan " + quote(plan) + " " + quote(fx.dir + "/ob.gguf") + " --allow-other-model", out), 0) << out;
    // the right model passes; an old plan without a fingerprint passes with a warning
    ASSERT_EQ(run_reap("prune -m " + quote(a) + " --plan " + quote(plan) + " -o " + quote(fx.dir + "/oa.gguf"), out), 0) << out;
    EXPECT_EQ(out.find("warning"), std::string::npos) << out;
    p.model_sha256.clear();   // a plan of an older reap: no fingerprint at all (no identity either)
    p.router_sha256.clear();
    p.n_vocab = 0;
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/old.json", true, why)) << why;
    ASSERT_EQ(run_reap("prune -m " + quote(b) + " --plan " + quote(fx.dir + "/old.json") + " -o " + quote(fx.dir + "/oo.gguf"), out), 0) << out;
    EXPECT_NE(out.find("warning"), std::string::npos) << out;
    EXPECT_NE(out.find("no model fingerprint"), std::string::npos) << out;
}

// Issue 23 item 8: the fingerprint covers the weights that matter. A model
// with the same header but other router weights has the same header hash, so
// before the identity (moe/identity.h) its plans pruned it without a word.
TEST(PlanFingerprint, PruneRefusesAnotherModelOfTheSameHeader) {
    fixture fx;
    std::string why, out;
    if (!setup("identity", fx, why)) GTEST_SKIP() << why;
    const std::string a = fx.dir + "/a.gguf", c = fx.dir + "/c.gguf", sal = fx.dir + "/sal.gguf";
    copy_file(fx.model("qwen3moe"), a);
    ASSERT_TRUE(gguf_test::write_with_other_router(a, c, why)) << why;
    write_archive_for(a, sal);
    const std::string plan = fx.dir + "/p.json";
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(a) + " --keep 6 --no-protect-super -o " + quote(plan), out), 0) << out;
    reap::plan p;
    ASSERT_TRUE(reap::read_plan(plan, p, why)) << why;
    g::model ma, mc;
    ASSERT_TRUE(g::open_model(a, ma, why)) << why;
    ASSERT_TRUE(g::open_model(c, mc, why)) << why;
    ASSERT_EQ(reap::model_header_sha256(mc), reap::model_header_sha256(ma));   // the header cannot tell them apart
    // the plan records the routers' hash: sha256 of the router bytes in block order, computed here independently
    std::string routers;
    for (int l = 0; l < 64; ++l) {
        for (const auto & t : ma.tensors) {
            if (t.name != "blk." + std::to_string(l) + ".ffn_gate_inp.weight") continue;
            std::vector<uint8_t> b(t.nbytes);
            ASSERT_TRUE(g::read_tensor_bytes(ma, t, 0, b.size(), b.data(), why)) << why;
            routers.append(b.begin(), b.end());
        }
    }
    ASSERT_FALSE(routers.empty());
    EXPECT_EQ(p.router_sha256, reap::util::sha256_bytes(routers.data(), routers.size()));
    int64_t n_vocab = 0;
    for (const auto & t : ma.tensors) {
        if (t.name == "token_embd.weight") n_vocab = t.ne[1];
    }
    EXPECT_EQ(p.n_vocab, n_vocab);

    EXPECT_EQ(run_reap("prune -m " + quote(c) + " --plan " + quote(plan) + " -o " + quote(fx.dir + "/oc.gguf"), out), 2) << out;
    EXPECT_NE(out.find("was made for another model: router weights differ"), std::string::npos) << out;
    EXPECT_NE(out.find("(" + plan + ")"), std::string::npos) << out;   // both named
    EXPECT_NE(out.find("(" + c + ")"), std::string::npos) << out;
    EXPECT_FALSE(prune_test::exists(fx.dir + "/oc.gguf"));
    EXPECT_EQ(run_reap("verify -m " + quote(c) + " --plan " + quote(plan) + " " + quote(fx.dir + "/oc.gguf"), out), 2) << out;
    EXPECT_NE(out.find("router weights differ"), std::string::npos) << out;
    // with --allow-other-model it prunes and records the plan's model
    ASSERT_EQ(run_reap("prune -m " + quote(c) + " --plan " + quote(plan) + " -o " + quote(fx.dir + "/oc.gguf") + " --allow-other-model", out), 0) << out;
    g::model oc;
    ASSERT_TRUE(g::open_model(fx.dir + "/oc.gguf", oc, why)) << why;
    std::string recorded;
    ASSERT_TRUE(oc.kvs.get_string("reap.plan.other_model", recorded, why)) << why;
    EXPECT_EQ(recorded, p.model_sha256);
    // the right model: no warning; a plan with the header fingerprint only (older reap): accepted with a warning
    ASSERT_EQ(run_reap("prune -m " + quote(a) + " --plan " + quote(plan) + " -o " + quote(fx.dir + "/oa.gguf"), out), 0) << out;
    EXPECT_EQ(out.find("warning"), std::string::npos) << out;
    p.router_sha256.clear();
    p.n_vocab = 0;
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/old.json", true, why)) << why;
    ASSERT_EQ(run_reap("prune -m " + quote(c) + " --plan " + quote(fx.dir + "/old.json") + " -o " + quote(fx.dir + "/oo.gguf"), out), 0) << out;
    EXPECT_NE(out.find("warning"), std::string::npos) << out;
    EXPECT_NE(out.find("header fingerprint only"), std::string::npos) << out;
    // a router hash without its vocabulary size is a malformed plan
    nlohmann::json doc = nlohmann::json::parse(read_all(plan));
    doc["model"].erase("n_vocab");
    std::ofstream(fx.dir + "/half.json") << doc.dump();
    EXPECT_EQ(run_reap("prune -m " + quote(a) + " --plan " + quote(fx.dir + "/half.json") + " -o " + quote(fx.dir + "/oh.gguf"), out), 2) << out;
    EXPECT_NE(out.find("n_vocab"), std::string::npos) << out;
}

// Item 2: SIGINT / SIGTERM in the middle of a prune: exit 130 / 143, a
// message, no temp file, no output; the previous output (--force) stays.
TEST(Interrupt, SigintSigtermRemoveTemps) {
    fixture fx;
    std::string why, out;
    if (!setup("interrupt", fx, why)) GTEST_SKIP() << why;
    const std::string m = fx.model("qwen3moe");
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(gm, 6, 11, p, why)) << why;
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/p.json", true, why)) << why;
    const std::string args = "prune -m " + quote(m) + " --plan " + quote(fx.dir + "/p.json") + " -o " +
                             quote(fx.dir + "/out.gguf") + " --split-max-tensors 20";
    // held in the middle of the data, every shard still a temp file
    const int pause_at = find_kill_points(trace_steps(args)).data;
    ASSERT_GT(pause_at, 0);
    for (const std::string & e : visible(fx.dir)) {
        if (e != "p.json") ::unlink((fx.dir + "/" + e).c_str());
    }
    for (int sig : {SIGINT, SIGTERM}) {
        SCOPED_TRACE(sig);
        const std::string log = fx.dir + "/log";
        ::unlink(log.c_str());
        const pid_t pid = spawn(killable_bin(), "REAP_TEST_PAUSE_AT=" + std::to_string(pause_at), args, log);
        ASSERT_TRUE(wait_for(log, "paused at step " + std::to_string(pause_at))) << text_of(log);
        EXPECT_FALSE(leftovers(fx.dir).empty()) << "the run holds no temp file at the pause";
        kill(pid, sig);
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        ASSERT_TRUE(WIFEXITED(st)) << text_of(log);
        EXPECT_EQ(WEXITSTATUS(st), 128 + sig) << text_of(log);
        EXPECT_NE(text_of(log).find(sig == SIGINT ? "interrupted by SIGINT" : "interrupted by SIGTERM"), std::string::npos) << text_of(log);
        EXPECT_TRUE(leftovers(fx.dir).empty());
        EXPECT_EQ(visible(fx.dir), (std::vector<std::string>{"log", "p.json"}));
    }
}

// Item 3, end to end: a prune process SIGKILLed at three publish steps (in
// the middle of the data, just after the journal, between two renames),
// single file and split, fresh and over a previous output. After each kill
// exactly one complete set verifies, the old or the new, and nothing partial
// is visible; the next run completes and leaves no temp file. (Every step is
// crashed in-process by test_publish_faults.cpp.)
TEST(FaultInjection, SigkillAnywhereLeavesOneCompleteSet) {
    fixture fx;
    std::string why, out;
    if (!setup("kill", fx, why)) GTEST_SKIP() << why;
    fx.dir = fast_scratch("kill");
    const std::string m = fx.model("gpt-oss");
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan p_old, p_new;
    const std::string plans = fx.dir + "/plans";
    write_old_and_new_plans(gm, 21, 22, plans, p_old, p_new);

    struct scenario {
        const char * name;
        std::string split;
        bool over_old;
    };
    const std::vector<scenario> scenarios = {{"single", "", false},
                                             {"single-force", "", true},
                                             {"split", " --split-max-tensors 8", false},
                                             {"split-force", " --split-max-tensors 8", true}};
    int n_kills = 0, n_old = 0, n_new = 0, n_nothing = 0, n_journal = 0;
    for (const scenario & sc : scenarios) {
        SCOPED_TRACE(sc.name);
        const std::string dir = fx.dir + "/" + sc.name, out_path = dir + "/out.gguf";
        auto prune_args = [&](const std::string & plan) {
            return "prune -m " + quote(m) + " --plan " + quote(plans + "/" + plan) + " -o " + quote(out_path) + sc.split +
                   " --force";
        };
        auto fresh = [&] {
            prune_test::run("rm -rf " + quote(dir), out);
            ::mkdir(dir.c_str(), 0755);
            if (sc.over_old) ASSERT_EQ(run_reap(prune_args("old.json"), out), 0) << out;
        };
        // the files of a verified set, by name
        std::vector<std::string> old_files, new_files;
        fresh();
        old_files = visible(dir);
        ASSERT_EQ(run_reap(prune_args("new.json"), out), 0) << out;
        new_files = visible(dir);
        std::string first = out_path;
        for (const std::string & f : new_files) {
            if (f.rfind("out-00001-of-", 0) == 0) first = dir + "/" + f;
        }
        ASSERT_TRUE(prune_test::exists(first)) << first;
        ASSERT_TRUE(std::find(new_files.begin(), new_files.end(), "SHA256SUMS") != new_files.end());
        if (!sc.split.empty()) ASSERT_GT(new_files.size(), 3u) << "the split output has one shard";
        // the steps of one run, and the three to kill it at
        fresh();
        const std::vector<std::string> steps = trace_steps(prune_args("new.json"));
        const kill_points kp = find_kill_points(steps);
        ASSERT_GT(kp.data, 0);
        ASSERT_GT(kp.journal, kp.data);
        ASSERT_GT(kp.renames, kp.journal);
        printf("fault injection, %s: %zu files in the new set, %zu steps per run; killed at %d (%s), %d (%s), %d (%s)\n",
               sc.name, new_files.size(), steps.size(), kp.data, steps[kp.data - 1].c_str(), kp.journal,
               steps[kp.journal - 1].c_str(), kp.renames, steps[kp.renames - 1].c_str());

        auto verifies = [&](const reap::plan & p, const std::string & plan) {
            std::string e;
            return prune_test::verify(gm, p, plans + "/" + plan, first, e);
        };
        for (const int at : {kp.data, kp.journal, kp.renames}) {
            SCOPED_TRACE("killed at step " + std::to_string(at) + " of " + std::to_string(steps.size()));
            fresh();
            EXPECT_TRUE(run_killed_at(at, prune_args("new.json"), out)) << "not killed: " << out;
            ++n_kills;
            // a kill after the journal's commit leaves a journal the next run completes
            const bool journal = has_journal(dir);
            if (journal) {
                ++n_journal;
                // verify does not take the half-published set for either: it says what happened
                EXPECT_EQ(run_reap("verify -m " + quote(m) + " --plan " + quote(plans + "/new.json") + " " + quote(first), out), 2) << out;
                EXPECT_NE(out.find("interrupted prune"), std::string::npos) << out;
                // what the next run does first (util::prepare_output): complete the journal
                ASSERT_GE(reap::util::recover_dir(dir, why), 1) << why;
            }
            const std::vector<std::string> vis = visible(dir);
            const bool is_old = vis == old_files && (!sc.over_old || verifies(p_old, "old.json"));
            const bool is_new = vis == new_files && verifies(p_new, "new.json");
            EXPECT_TRUE(is_old != is_new) << "after the kill: old " << is_old << ", new " << is_new;
            if (is_new) ++n_new;
            else if (is_old && sc.over_old) ++n_old;
            else if (is_old) ++n_nothing;
            if (journal) EXPECT_TRUE(is_new);
            EXPECT_EQ(journal, at != kp.data) << "a journal is left exactly by a kill after it";
            // the next run: completes, verifies, leaves no temp file (the killed run's are gone too)
            ASSERT_EQ(run_reap(prune_args("new.json"), out), 0) << out;
            EXPECT_TRUE(verifies(p_new, "new.json"));
            EXPECT_TRUE(leftovers(dir).empty()) << "left over: " << leftovers(dir).front();
            EXPECT_EQ(visible(dir), new_files);
        }
    }
    printf("fault injection: %d kills: %d left the old output, %d no output (fresh), %d the new one (%d of them "
           "through a journal the next run completed)\n",
           n_kills, n_old, n_nothing, n_new, n_journal);
    EXPECT_EQ(n_kills, 12);
    EXPECT_EQ(n_journal, 8);
    EXPECT_GT(n_new, 0);
    EXPECT_GT(n_old + n_nothing, 0);
    remove_tree(fx.dir);
}

// A journal is a list of renames that the next run carries out for a killed
// one: it renames only a reap temp file over its own target, in one folder
// (the journal's, or another named by absolute path when the target is an
// output the running command declared), and refuses the whole journal,
// renaming nothing, when any entry is something else.
TEST(Journal, RenamesOnlyReapTempsOverTheirTargets) {
    const std::string dir = prune_test::scratch("reliability-journal"), other = dir + "/other", here = dir + "/here";
    std::string out, err;
    prune_test::run("rm -rf " + quote(here) + " " + quote(other), out);
    ::mkdir(here.c_str(), 0755);
    ::mkdir(other.c_str(), 0755);
    auto journal = [&](const std::vector<std::string> & names) {
        std::string text = "reap-journal 1";
        text.push_back('\0');
        for (const std::string & n : names) {
            text += n;
            text.push_back('\0');
        }
        write_text(here + "/.a.gguf.reap-journal", text);
    };
    const std::string other_real = [&] {
        char * r = ::realpath(other.c_str(), nullptr);
        std::string s = r ? r : "";
        free(r);
        return s;
    }();
    ASSERT_FALSE(other_real.empty());
    write_text(here + "/.a.gguf.reap-tmp.1.x", "new a");
    write_text(other_real + "/.a.imatrix.gguf.reap-tmp.1.y", "new imatrix");
    write_text(here + "/victim", "kept");
    const std::vector<std::vector<std::string>> refused = {
        {".a.gguf.reap-tmp.1.x", "a.gguf", "victim", "a.gguf"},                       // not a temp of its target
        {".a.gguf.reap-tmp.1.x", "a.gguf", ".a.gguf.reap-tmp.1.x", "b.gguf"},         // a temp of another target
        {".a.gguf.reap-tmp.1.x", "a.gguf", "../victim", "a.gguf"},                    // a relative path
        {other_real + "/.a.imatrix.gguf.reap-tmp.1.y", here + "/a.imatrix.gguf"},     // across two folders
        {other_real + "/.a.imatrix.gguf.reap-tmp.1.y", "a.imatrix.gguf"},             // half absolute
    };
    for (const auto & entries : refused) {
        journal(entries);
        EXPECT_EQ(reap::util::recover_dir(here, err), -1) << entries[2];
        EXPECT_NE(err.find("not a reap temp file"), std::string::npos) << err;
        EXPECT_EQ(visible(here), std::vector<std::string>{"victim"}) << entries[2];   // nothing renamed
        EXPECT_TRUE(prune_test::exists(here + "/.a.gguf.reap-journal"));              // the journal left as it is
    }
    // a temp here and one in another folder, by absolute path: refused while
    // the file elsewhere is no declared output of this process (a journal names
    // only files of its own folder); once declared, both renamed and the
    // journal removed
    journal({".a.gguf.reap-tmp.1.x", "a.gguf", other_real + "/.a.imatrix.gguf.reap-tmp.1.y", other_real + "/a.imatrix.gguf"});
    EXPECT_EQ(reap::util::recover_dir(here, err), -1);
    EXPECT_NE(err.find("a journal names only files of its own folder"), std::string::npos) << err;
    EXPECT_EQ(visible(here), std::vector<std::string>{"victim"});
    EXPECT_TRUE(visible(other).empty());
    reap::util::declare_output_elsewhere(other + "/a.imatrix.gguf");
    ASSERT_EQ(reap::util::recover_dir(here, err), 1) << err;
    EXPECT_EQ(text_of(here + "/a.gguf"), "new a");
    EXPECT_EQ(text_of(other + "/a.imatrix.gguf"), "new imatrix");
    EXPECT_EQ(text_of(here + "/victim"), "kept");
    EXPECT_TRUE(leftovers(here).empty());
    EXPECT_TRUE(leftovers(other).empty());
}

// A llama-imatrix GGUF for `model` (every expert tensor: in_sum2 and counts,
// in llama-imatrix's layout), each expert's values its own, so that two cuts
// slice it differently.
void write_imatrix_for(const g::model & m, const std::string & path) {
    g::output_spec spec;
    spec.kvs.set_string("general.type", "imatrix");
    spec.kvs.set_string_array("imatrix.datasets", {"calib.txt"});
    spec.kvs.set_u32("imatrix.chunk_count", 3);
    spec.kvs.set_u32("imatrix.chunk_size", 4);
    auto f32 = [](const std::string & name, int64_t ne0, int64_t ne1, float v) {
        g::output_tensor t;
        t.name = name;
        t.type = g::tensor_type::F32;
        t.n_dims = 2;
        t.ne[0] = ne0;
        t.ne[1] = ne1;
        std::vector<float> vals((size_t) (ne0 * ne1));
        for (size_t i = 0; i < vals.size(); ++i) vals[i] = v + float(i / (size_t) ne0);   // + the expert's index
        auto bytes = std::make_shared<std::vector<uint8_t>>(vals.size() * sizeof(float));
        memcpy(bytes->data(), vals.data(), bytes->size());
        t.memory = bytes;
        return t;
    };
    for (const g::tensor_info & t : m.tensors) {
        if (t.name.find("_exps.weight") == std::string::npos) continue;
        spec.tensors.push_back(f32(t.name + ".in_sum2", t.ne[0], t.ne[2], 1.5f));
        spec.tensors.push_back(f32(t.name + ".counts", 1, t.ne[2], 12.f));
    }
    ASSERT_FALSE(spec.tensors.empty());
    g::write_options wo;
    wo.force = true;
    wo.sync = false;
    std::vector<std::string> written;
    std::string err;
    ASSERT_TRUE(g::write_output(spec, wo, path, written, err)) << err;
}

// A sliced imatrix written to another folder (--imatrix-out elsewhere)
// appears with its model or not at all: the model's journal names it by
// absolute path. prune --force over a previous model and imatrix is SIGKILLed
// (reap_killable) in the middle of its data, just after the journal, and
// between the model's rename and the imatrix's; afterwards (the next run's
// recovery done)
// the two files are both the previous ones or both the new ones, byte for
// byte, and the next run leaves no temp file in either folder. Before the
// imatrix joined the journal, a kill between the two renames left the new
// model beside the previous imatrix.
TEST(FaultInjection, SlicedImatrixElsewhereAppearsWithItsModel) {
    fixture fx;
    std::string why, out;
    if (!setup("kill-imatrix", fx, why)) GTEST_SKIP() << why;
    fx.dir = fast_scratch("kill-imatrix");
    const std::string m = fx.model("gpt-oss");
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan p_old, p_new;
    const std::string plans = fx.dir + "/plans", imatrix = fx.dir + "/plans/source.imatrix.gguf";
    write_old_and_new_plans(gm, 31, 32, plans, p_old, p_new);
    write_imatrix_for(gm, imatrix);

    const std::string model_dir = fx.dir + "/model", imatrix_dir = fx.dir + "/imatrix";
    const std::string model_out = model_dir + "/out.gguf", imatrix_out = imatrix_dir + "/out.imatrix.gguf";
    auto prune_args = [&](const std::string & plan) {
        return "prune -m " + quote(m) + " --plan " + quote(plans + "/" + plan) + " -o " + quote(model_out) + " --imatrix " +
               quote(imatrix) + " --imatrix-out " + quote(imatrix_out) + " --force";
    };
    auto fresh = [&] {
        prune_test::run("rm -rf " + quote(model_dir) + " " + quote(imatrix_dir), out);
        ::mkdir(model_dir.c_str(), 0755);
        ::mkdir(imatrix_dir.c_str(), 0755);
        ASSERT_EQ(run_reap(prune_args("old.json"), out), 0) << out;
    };
    fresh();
    const std::vector<uint8_t> old_model = read_all(model_out), old_imatrix = read_all(imatrix_out);
    ASSERT_EQ(run_reap(prune_args("new.json"), out), 0) << out;
    const std::vector<uint8_t> new_model = read_all(model_out), new_imatrix = read_all(imatrix_out);
    ASSERT_NE(old_model, new_model);
    ASSERT_NE(old_imatrix, new_imatrix);
    // the outputs are deterministic: a second run writes the same bytes
    ASSERT_EQ(run_reap(prune_args("new.json"), out), 0) << out;
    ASSERT_EQ(read_all(model_out), new_model);
    ASSERT_EQ(read_all(imatrix_out), new_imatrix);
    fresh();
    const std::vector<std::string> steps = trace_steps(prune_args("new.json"));
    const kill_points kp = find_kill_points(steps);
    ASSERT_GT(kp.data, 0);
    ASSERT_GT(kp.journal, kp.data);
    ASSERT_GT(kp.renames, kp.journal);
    // the first rename after the journal is one of the model's companions (the
    // model itself, the file a loader opens, comes last): the kill leaves the
    // new imatrix and no model until the journal is completed
    ASSERT_EQ(steps[kp.renames - 2].find(model_dir + "/out.gguf"), std::string::npos) << steps[kp.renames - 2];
    ASSERT_EQ(steps[kp.renames - 2].rfind("rename ", 0), 0u) << steps[kp.renames - 2];

    int n_old = 0, n_new = 0, n_journal = 0, n_points = 0;
    for (const int at : {kp.data, kp.journal, kp.renames}) {
        ++n_points;
        SCOPED_TRACE("killed at step " + std::to_string(at) + " of " + std::to_string(steps.size()) + ": " + steps[at - 1]);
        fresh();
        EXPECT_TRUE(run_killed_at(at, prune_args("new.json"), out)) << "not killed: " << out;
        const bool journal = has_journal(model_dir);
        n_journal += journal;
        // what the next run does first: complete the model folder's journal
        // (its entry in the imatrix folder is that run's declared output)
        reap::util::declare_output_elsewhere(imatrix_out);
        if (journal) ASSERT_GE(reap::util::recover_dir(model_dir, why), 1) << why;
        const std::vector<uint8_t> model_now = read_all(model_out), imatrix_now = read_all(imatrix_out);
        const bool is_old = model_now == old_model && imatrix_now == old_imatrix;
        const bool is_new = model_now == new_model && imatrix_now == new_imatrix;
        EXPECT_TRUE(is_old || is_new) << "model: " << (model_now == old_model ? "old" : model_now == new_model ? "new" : "other")
                                      << ", imatrix: "
                                      << (imatrix_now == old_imatrix ? "old" : imatrix_now == new_imatrix ? "new" : "other");
        n_old += is_old;
        n_new += is_new;
        EXPECT_EQ(visible(imatrix_dir), std::vector<std::string>{"out.imatrix.gguf"});
        // the next run completes and leaves nothing behind, in either folder
        ASSERT_EQ(run_reap(prune_args("new.json"), out), 0) << out;
        EXPECT_EQ(read_all(model_out), new_model);
        EXPECT_EQ(read_all(imatrix_out), new_imatrix);
        EXPECT_TRUE(leftovers(model_dir).empty()) << "left over: " << leftovers(model_dir).front();
        EXPECT_TRUE(leftovers(imatrix_dir).empty()) << "left over: " << leftovers(imatrix_dir).front();
    }
    printf("sliced imatrix elsewhere: %d kills: %d left the previous pair, %d the new pair (%d through a journal the "
           "next run completed)\n",
           n_points, n_old, n_new, n_journal);
    EXPECT_EQ(n_old, 1);
    EXPECT_EQ(n_new, 2);
    EXPECT_EQ(n_journal, 2);
    remove_tree(fx.dir);
}

// Bytes a file of `n` bytes takes on a tmpfs (whole pages).
uint64_t pages(uint64_t n) { return (n + 4095) / 4096 * 4096; }

// Item 3: a full disk (a small tmpfs, tests/diskfull_test_util.h) for every
// core command that writes: prune (single, split, --imatrix), plan, merge,
// imatrix, report, and a command's standard output redirected there: exit 2,
// the reason, no output, no temp file. A disk that fills part way through a
// prune --imatrix (room for the model or the imatrix, not both) leaves
// neither, one that fills part way through a report (its figures fit, its card
// does not) leaves no half card, and a --force over a previous card leaves
// that card as it was. The commands that
// run a model (calibrate, eval, sweep) are in test_llama_diskfull.cpp.
TEST(DiskFull, EveryWritingCommandFailsCleanly) {
    fixture fx;
    std::string why, out;
    if (!setup("diskfull", fx, why)) GTEST_SKIP() << why;
    const std::string mnt = fx.dir + "/tmpfs";
    diskfull_test::tmpfs guard;
    if (!diskfull_test::mount_tmpfs(guard, mnt, 2 << 20)) return;
    const std::string m = fx.model("qwen3moe"), sal = fx.dir + "/sal.gguf", sal2 = fx.dir + "/sal2.gguf";
    const std::string plan = fx.dir + "/p.json", build = fx.dir + "/build.gguf", imx = fx.dir + "/imatrix.gguf";
    write_archive_for(m, sal);
    write_archive_for(m, sal2, 8);   // another calibration (merge refuses one counted twice)
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    write_imatrix_for(gm, imx);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(gm, prune_test::half_keep(gm), 4, p, why)) << why;
    ASSERT_TRUE(reap::write_plan(p, plan, true, why)) << why;
    ASSERT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(plan) + " -o " + quote(build), out), 0) << out;
    const std::string report_args = "report -m " + quote(m) + " --plan " + quote(plan) + " --saliency " + quote(sal) +
                                    " " + quote(build) + " -o ";
    const std::vector<std::string> cmds = {
        "prune -m " + quote(m) + " --plan " + quote(plan) + " -o " + quote(mnt + "/out.gguf"),
        "prune -m " + quote(m) + " --plan " + quote(plan) + " -o " + quote(mnt + "/out.gguf") + " --split-max-tensors 10",
        "prune -m " + quote(m) + " --plan " + quote(plan) + " --imatrix " + quote(imx) + " -o " + quote(mnt + "/out.gguf"),
        "plan " + quote(sal) + " -m " + quote(m) + " --keep 6 --no-protect-super -o " + quote(mnt + "/p.json"),
        "merge " + quote(sal) + " " + quote(sal2) + " -o " + quote(mnt + "/merged.gguf"),
        "imatrix " + quote(imx) + " -m " + quote(m) + " -o " + quote(mnt + "/from-imatrix.gguf"),
        report_args + quote(mnt + "/card"),
        // standard output on the full disk: a JSON that cannot be written is an error, not exit 0
        "inspect --json " + quote(m) + " > " + quote(mnt + "/inspect.json"),
        "plan " + quote(sal) + " -m " + quote(m) + " --keep 6 --no-protect-super -o " + quote(fx.dir + "/p2.json") +
            " --force --json > " + quote(mnt + "/plan.json"),
    };
    for (const std::string & c : cmds) {
        SCOPED_TRACE(c);
        diskfull_test::fill(mnt);
        const std::vector<std::string> before = visible(mnt);
        const bool redirected = c.find(" > ") != std::string::npos;
        const int status = redirected ? prune_test::run("{ " + quote(gguf_test::reap_bin()) + " " + c + "; }", out)
                                      : run_reap(c, out);
        if (redirected) {   // the redirection itself made the (empty) file
            EXPECT_EQ(status, 2) << out;
            EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
        } else {
            diskfull_test::expect_clean_failure(status, out, mnt, before);
        }
        std::string rm;
        prune_test::run("rm -rf " + quote(mnt) + "/* " + quote(mnt) + "/.[!.]*", rm);
    }

    // A pruned model with its sliced imatrix on a disk with room for one of
    // them, for all but a page, or for exactly them (not for the journal that
    // publishes them together): neither appears.
    {
        const std::string args = "prune -m " + quote(m) + " --plan " + quote(plan) + " --imatrix " + quote(imx) + " -o " +
                                 quote(mnt + "/out.gguf");
        const uint64_t free0 = diskfull_test::free_bytes(mnt);
        ASSERT_EQ(run_reap(args, out), 0) << out;
        const uint64_t need = free0 - diskfull_test::free_bytes(mnt);
        const uint64_t imatrix_pages = pages(gguf_test::apparent_size(mnt + "/out.imatrix.gguf"));
        ASSERT_EQ(visible(mnt), (std::vector<std::string>{"SHA256SUMS", "out.gguf", "out.imatrix.gguf"}));
        ASSERT_GT(need, imatrix_pages);
        prune_test::run("rm -rf " + quote(mnt) + "/* " + quote(mnt) + "/.[!.]*", out);
        for (const uint64_t leave : {need - imatrix_pages, imatrix_pages, need - 4096, need}) {
            SCOPED_TRACE("free bytes: " + std::to_string(leave) + " of the " + std::to_string(need) + " prune takes");
            diskfull_test::fill(mnt, leave);
            diskfull_test::expect_clean_failure(run_reap(args, out), out, mnt, {"filler"});
            ::unlink((mnt + "/filler").c_str());
        }
    }

    // A report whose figures fit and whose card does not (or all but a page, or
    // exactly all, without the journal's page): nothing of it appears.
    // What the card takes on this tmpfs, measured by writing it there once.
    const std::string card = mnt + "/card";
    const uint64_t free0 = diskfull_test::free_bytes(mnt);
    ASSERT_EQ(run_reap(report_args + quote(card), out), 0) << out;
    const uint64_t need = free0 - diskfull_test::free_bytes(mnt);
    const uint64_t readme_pages = pages(gguf_test::apparent_size(card + "/README.md"));
    ASSERT_GE(visible(card + "/figures").size(), 2u) << "the report wrote no figures: " << out;
    ASSERT_GT(need, readme_pages);
    prune_test::run("rm -rf " + quote(card), out);
    for (const uint64_t leave : {need - readme_pages, need - 4096, need}) {
        SCOPED_TRACE("free bytes: " + std::to_string(leave) + " of the " + std::to_string(need) + " the card takes");
        diskfull_test::fill(mnt, leave);
        diskfull_test::expect_clean_failure(run_reap(report_args + quote(card), out), out, mnt, {"filler"});
        ::unlink((mnt + "/filler").c_str());
    }
    // --force over a complete card (one without the archive: no figures) on a
    // disk that fills part way through the new one: the old card stays as it was
    const std::string plain_args = "report -m " + quote(m) + " --plan " + quote(plan) + " " + quote(build) + " -o ";
    ASSERT_EQ(run_reap(plain_args + quote(card), out), 0) << out;
    const std::vector<uint8_t> old_readme = read_all(card + "/README.md");
    const std::vector<std::string> old_figures = visible(card + "/figures");
    ASSERT_TRUE(old_figures.empty()) << "a card without an archive has figures: the test cannot tell old from new";
    diskfull_test::fill(mnt, need - 4096);
    diskfull_test::expect_clean_failure(run_reap(report_args + quote(card) + " --force", out), out, mnt,
                                        {"card", "filler"});
    EXPECT_EQ(read_all(card + "/README.md"), old_readme);
    EXPECT_EQ(visible(card + "/figures"), old_figures);
    EXPECT_TRUE(leftovers(card).empty());
    EXPECT_TRUE(leftovers(card + "/figures").empty());
}

// ---- issue 23: what the probe found ------------------------------------------------------

namespace {

// A PID that names no process: a child that has exited and been reaped.
long dead_pid() {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    int st = 0;
    waitpid(pid, &st, 0);
    return (long) pid;
}

} // namespace

// Item 2: SHA256SUMS is the checksum file of the output folder; no input and
// no model takes its name. An imatrix named DIR/SHA256SUMS (prune --imatrix)
// is an input: refused, byte-identical afterwards; a model output named
// SHA256SUMS is refused, with --force and with --no-sums (the next prune into
// that folder would rewrite it as its checksum file). Against the binary
// before this change: the imatrix got a hash line appended, and the model
// was written, then replaced by the sums file.
TEST(OutputRule, NothingIsNamedLikeTheChecksumFile) {
    fixture fx;
    std::string why, out;
    if (!setup("sums-names", fx, why)) GTEST_SKIP() << why;
    const std::string m = fx.model("gpt-oss"), plan = fx.dir + "/p.json";
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(gm, prune_test::half_keep(gm), 5, p, why)) << why;
    ASSERT_TRUE(reap::write_plan(p, plan, true, why)) << why;
    const std::string dir = fx.dir + "/out", imatrix = dir + "/SHA256SUMS";
    ::mkdir(dir.c_str(), 0755);
    write_imatrix_for(gm, imatrix);
    const std::vector<uint8_t> imatrix0 = read_all(imatrix);
    for (const char * force : {"", " --force"}) {
        EXPECT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(plan) + " --imatrix " + quote(imatrix) + " -o " +
                               quote(dir + "/out.gguf") + force, out), 2) << out;
        EXPECT_NE(out.find("refusing to write " + imatrix + " over the imatrix"), std::string::npos) << out;
        EXPECT_TRUE(read_all(imatrix) == imatrix0) << "the imatrix changed";
        EXPECT_EQ(visible(dir), std::vector<std::string>{"SHA256SUMS"});
    }
    const std::string dir2 = fx.dir + "/out2";
    ::mkdir(dir2.c_str(), 0755);
    for (const char * opts : {"", " --force", " --no-sums"}) {
        EXPECT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(plan) + " -o " + quote(dir2 + "/SHA256SUMS") + opts, out), 2) << out;
        EXPECT_NE(out.find("SHA256SUMS is the name of the checksum file"), std::string::npos) << out;
        EXPECT_TRUE(visible(dir2).empty());
    }
    EXPECT_TRUE(leftovers(dir).empty());
    EXPECT_TRUE(leftovers(dir2).empty());
}

// Item 3: a journal names only files of the folder it lives in. A journal
// left (or planted) in an output folder whose entries rename a file of
// another folder is refused by any command writing there (exit 2, the
// message), and the file elsewhere stays as it was; prune's own
// --imatrix-out in another folder is the one declared exception
// (FaultInjection.SlicedImatrixElsewhereAppearsWithItsModel). Against the
// binary before this change, `reap plan -o OUT/p.json` renamed the planted
// temp over victim.txt.
TEST(Journal, NamesOnlyFilesOfItsFolder) {
    fixture fx;
    std::string why, out;
    if (!setup("journal-elsewhere", fx, why)) GTEST_SKIP() << why;
    const std::string m = fx.model("qwen3moe"), sal = fx.dir + "/sal.gguf";
    write_archive_for(m, sal);
    const std::string dir = fx.dir + "/out", victims = fx.dir + "/victims";
    ::mkdir(dir.c_str(), 0755);
    ::mkdir(victims.c_str(), 0755);
    char * r = ::realpath(victims.c_str(), nullptr);
    ASSERT_NE(r, nullptr);
    const std::string vreal = r;
    free(r);
    write_text(victims + "/victim.txt", "precious");
    write_text(victims + "/.victim.txt.reap-tmp.1.abcdef", "replaced");
    std::string text = "reap-journal 1";
    text.push_back('\0');
    for (const std::string & e : {vreal + "/.victim.txt.reap-tmp.1.abcdef", vreal + "/victim.txt"}) {
        text += e;
        text.push_back('\0');
    }
    write_text(dir + "/.x.gguf.reap-journal", text);
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(gm, 6, 3, p, why)) << why;
    ASSERT_TRUE(reap::write_plan(p, fx.dir + "/p.json", true, why)) << why;
    const std::vector<std::string> cmds = {
        "plan " + quote(sal) + " -m " + quote(m) + " --keep 6 --no-protect-super -o " + quote(dir + "/p.json"),
        "prune -m " + quote(m) + " --plan " + quote(fx.dir + "/p.json") + " -o " + quote(dir + "/x.gguf") + " --force",
        "merge " + quote(sal) + " " + quote(fx.dir + "/sal2.gguf") + " -o " + quote(dir + "/merged.gguf"),
    };
    write_archive_for(m, fx.dir + "/sal2.gguf", 9);
    for (const std::string & c : cmds) {
        SCOPED_TRACE(c);
        EXPECT_EQ(run_reap(c, out), 2) << out;
        EXPECT_NE(out.find("a journal names only files of its own folder"), std::string::npos) << out;
        EXPECT_EQ(text_of(victims + "/victim.txt"), "precious");
        EXPECT_TRUE(prune_test::exists(victims + "/.victim.txt.reap-tmp.1.abcdef"));
        EXPECT_TRUE(visible(dir).empty());
        EXPECT_TRUE(prune_test::exists(dir + "/.x.gguf.reap-journal"));   // left for a person to look at
    }
}

namespace {

// A plan keeping half the experts of `model` (seeded) and an imatrix of it,
// written to `plan` and `imatrix`: the inputs of a prune --imatrix.
bool half_plan_and_imatrix(const std::string & model, const std::string & plan, const std::string & imatrix, std::string & why) {
    g::model gm;
    reap::plan p;
    if (!g::open_model(model, gm, why) || !prune_test::random_plan(gm, prune_test::half_keep(gm), 31, p, why) ||
        !reap::write_plan(p, plan, true, why)) {
        return false;
    }
    write_imatrix_for(gm, imatrix);
    return true;
}

} // namespace

// Issue 23 item 14: SHA256SUMS lists every file prune writes in its folder,
// the sliced imatrix beside the model too (not one written elsewhere), as
// GNU sha256sum checks it; an imatrix records no model identity, so one made
// on another model of the same shape is accepted, and --help says so rather
// than claiming it is refused. Against the binary before this change the
// imatrix was not listed and --help claimed "refused when it is for another
// model".
TEST(Sha256Sums, ListTheSlicedImatrixBesideTheModel) {
    fixture fx;
    std::string why, out;
    if (!setup("sums-imatrix", fx, why)) GTEST_SKIP() << why;
    fx.dir = fast_scratch("sums-imatrix");
    const std::string m = fx.model("gpt-oss");
    const std::string plan = fx.dir + "/p.json", imatrix = fx.dir + "/source.imatrix.gguf";
    ASSERT_TRUE(half_plan_and_imatrix(m, plan, imatrix, why)) << why;
    const std::string here = fx.dir + "/here", there = fx.dir + "/there";
    ::mkdir(here.c_str(), 0755);
    ::mkdir(there.c_str(), 0755);
    const std::string prune = "prune -m " + quote(m) + " --plan " + quote(plan) + " --imatrix " + quote(imatrix) + " ";
    // beside the model (the default name), single and split
    ASSERT_EQ(run_reap(prune + "-o " + quote(here + "/a.gguf"), out), 0) << out;
    ASSERT_EQ(run_reap(prune + "--split-max-tensors 10 -o " + quote(here + "/s.gguf"), out), 0) << out;
    // elsewhere: listed in neither folder's SHA256SUMS (its folder has none)
    ASSERT_EQ(run_reap(prune + "--imatrix-out " + quote(there + "/b.imatrix.gguf") + " -o " + quote(here + "/b.gguf"), out), 0) << out;
    std::vector<std::pair<std::string, std::string>> entries;
    ASSERT_TRUE(reap::prune::read_sha256sums(here + "/SHA256SUMS", entries, why)) << why;
    std::vector<std::string> listed;
    for (const auto & e : entries) listed.push_back(e.first);
    std::sort(listed.begin(), listed.end());
    std::vector<std::string> want;
    for (const std::string & e : visible(here)) {
        if (e != "SHA256SUMS") want.push_back(e);
    }
    EXPECT_EQ(listed, want) << text_of(here + "/SHA256SUMS");
    EXPECT_NE(std::find(listed.begin(), listed.end(), "a.imatrix.gguf"), listed.end());
    EXPECT_NE(std::find(listed.begin(), listed.end(), "s.imatrix.gguf"), listed.end());
    EXPECT_FALSE(prune_test::exists(there + "/SHA256SUMS"));
    // GNU sha256sum, not reap, checks the hashes
    EXPECT_EQ(prune_test::run("cd " + quote(here) + " && sha256sum -c --strict SHA256SUMS", out), 0) << out;
    EXPECT_NE(out.find("a.imatrix.gguf: OK"), std::string::npos) << out;
    EXPECT_EQ(run_reap("verify -m " + quote(m) + " --plan " + quote(plan) + " " + quote(here + "/a.gguf"), out), 0) << out;
    // another model of the same shape (another general.name): its imatrix fits
    // every tensor and cannot be told apart; --help says what is checked
    const std::string other = fx.dir + "/other.gguf", other_imatrix = fx.dir + "/other.imatrix.gguf";
    write_renamed(m, other, "another model");
    g::model om;
    ASSERT_TRUE(g::open_model(other, om, why)) << why;
    write_imatrix_for(om, other_imatrix);
    EXPECT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(plan) + " --imatrix " + quote(other_imatrix) +
                           " -o " + quote(here + "/c.gguf"), out), 0) << out;
    ASSERT_EQ(run_reap("prune --help", out), 0) << out;
    std::string help = out;
    for (char & c : help) c = c == '\n' ? ' ' : c;
    std::string flat;   // the help's words, one space between them
    for (char c : help) {
        if (c != ' ' || (!flat.empty() && flat.back() != ' ')) flat.push_back(c);
    }
    EXPECT_NE(flat.find("An imatrix records no model identity"), std::string::npos) << out;
    EXPECT_EQ(flat.find("refused when it is for another model"), std::string::npos) << out;
    remove_tree(fx.dir);
}

// Item 4: merge counts one calibration once. The same archive given twice, a
// byte-identical copy beside it, an archive merged from it beside it (and a
// merge of merges that share an input) are refused, naming the two; the
// merged archive records the data sha256 of every archive merged into it
// (reap.saliency.merge.sources). Against the binary before this change every
// one of these merges exited 0 with the tokens counted twice.
TEST(Merge, CountsOneCalibrationOnce) {
    fixture fx;
    std::string why, out;
    if (!setup("merge-twice", fx, why)) GTEST_SKIP() << why;
    const std::string m = fx.model("qwen3moe");
    const std::string a = fx.dir + "/a.gguf", b = fx.dir + "/b.gguf", c = fx.dir + "/c.gguf", copy = fx.dir + "/a-copy.gguf";
    write_archive_for(m, a, 1);
    write_archive_for(m, b, 2);
    write_archive_for(m, c, 3);
    copy_file(a, copy);
    const std::string ab = fx.dir + "/ab.gguf", abc = fx.dir + "/abc.gguf", bc = fx.dir + "/bc.gguf";
    auto merge = [&](const std::vector<std::string> & ins, const std::string & to) {
        std::string args = "merge";
        for (const auto & i : ins) args += " " + quote(i);
        return run_reap(args + " -o " + quote(to), out);
    };
    ASSERT_EQ(merge({a, b}, ab), 0) << out;
    ASSERT_EQ(merge({ab, c}, abc), 0) << out;
    ASSERT_EQ(merge({b, c}, bc), 0) << out;
    s::archive x;
    ASSERT_TRUE(s::read_archive(abc, x, why)) << why;
    std::vector<std::string> sources;
    ASSERT_TRUE(s::merge_sources(x, sources, why)) << why;
    EXPECT_EQ(sources.size(), 3u);   // a, b and c, not ab and c
    struct refusal {
        std::vector<std::string> inputs;
        std::string first, second;   // the two inputs the message names
    };
    const std::vector<refusal> refusals = {
        {{a, a}, a, a},
        {{a, copy}, a, copy},
        {{ab, a}, ab, a},
        {{b, ab}, b, ab},
        {{abc, bc}, abc, bc},
        {{c, ab, b}, ab, b},
    };
    for (const refusal & f : refusals) {
        const std::string to = fx.dir + "/refused.gguf";
        SCOPED_TRACE(f.first + " + " + f.second);
        EXPECT_EQ(merge(f.inputs, to), 2) << out;
        EXPECT_NE(out.find(f.first + " and " + f.second + " both hold the archive"), std::string::npos) << out;
        EXPECT_NE(out.find("twice"), std::string::npos) << out;
        EXPECT_FALSE(prune_test::exists(to));
    }
}

// Item 5: nothing of reap's stays behind. After a successful prune, plan,
// merge or report, no .reap.lock is in any folder it wrote (a Hugging Face
// upload of the folder carries nothing of reap's); a prune killed part way to
// one name leaves its output-sized temp, and the next run in that folder to
// another name removes it (and any other stale temp of a reap output), but
// leaves the temps of live runs and staged temps (a sliced imatrix another
// folder's journal may still name). Against the binary before this change:
// .reap.lock stayed in every output folder and the killed run's temp stayed.
TEST(Leftovers, NoLockAndNoStaleTempsAfterARun) {
    fixture fx;
    std::string why, out;
    if (!setup("leftovers", fx, why)) GTEST_SKIP() << why;
    fx.dir = fast_scratch("leftovers");
    const std::string m = fx.model("gpt-oss"), sal = fx.dir + "/sal.gguf", sal2 = fx.dir + "/sal2.gguf";
    write_archive_for(m, sal, 4);
    write_archive_for(m, sal2, 5);
    g::model gm;
    ASSERT_TRUE(g::open_model(m, gm, why)) << why;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(gm, prune_test::half_keep(gm), 6, p, why)) << why;
    const std::string plan = fx.dir + "/p.json", dir = fx.dir + "/out";
    ASSERT_TRUE(reap::write_plan(p, plan, true, why)) << why;
    ::mkdir(dir.c_str(), 0755);
    const std::string prune = "prune -m " + quote(m) + " --plan " + quote(plan) + " -o ";
    ASSERT_EQ(run_reap(prune + quote(dir + "/a.gguf"), out), 0) << out;
    ASSERT_EQ(run_reap(prune + quote(dir + "/split.gguf") + " --split-max-tensors 10", out), 0) << out;
    ASSERT_EQ(run_reap("merge " + quote(sal) + " " + quote(sal2) + " -o " + quote(dir + "/m.gguf"), out), 0) << out;
    ASSERT_EQ(run_reap("report -m " + quote(m) + " --plan " + quote(plan) + " --saliency " + quote(sal) + " " +
                           quote(dir + "/a.gguf") + " -o " + quote(dir + "/card"), out), 0) << out;
    for (const std::string & d : {dir, dir + "/card", dir + "/card/figures", fx.dir}) {
        EXPECT_FALSE(prune_test::exists(d + "/.reap.lock")) << d;
        EXPECT_TRUE(leftovers(d).empty()) << d;
    }
    // a prune to b.gguf killed while writing: its temp stays until the next run
    // in the folder, whatever that run writes
    const int at = find_kill_points(trace_steps(prune + quote(dir + "/b.gguf"))).data;
    ASSERT_GT(at, 0);
    ASSERT_EQ(::unlink((dir + "/b.gguf").c_str()), 0);
    EXPECT_TRUE(run_killed_at(at, prune + quote(dir + "/b.gguf"), out)) << "not killed: " << out;
    ASSERT_EQ(leftovers(dir).size(), 1u);
    const std::string killed = leftovers(dir)[0];
    const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getpid());
    const std::string other_dead = ".other.json.reap-tmp." + dead + ".abcdef";
    const std::string staged_dead = ".elsewhere.imatrix.gguf.reap-tmp." + dead + ".s.abcdef";
    const std::string other_live = ".other.json.reap-tmp." + live + ".ghijkl";
    for (const std::string & t : {other_dead, staged_dead, other_live}) write_text(dir + "/" + t, "x");
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(m) + " --keep 6 --no-protect-super -o " + quote(dir + "/q.json"), out), 0) << out;
    EXPECT_FALSE(prune_test::exists(dir + "/" + killed)) << "the killed prune's temp is still there";
    EXPECT_FALSE(prune_test::exists(dir + "/" + other_dead));
    EXPECT_TRUE(prune_test::exists(dir + "/" + staged_dead)) << "a staged temp was removed by a run on another name";
    EXPECT_TRUE(prune_test::exists(dir + "/" + other_live)) << "a live run's temp was removed";
    EXPECT_FALSE(prune_test::exists(dir + "/.reap.lock"));
    // a run on the staged temp's own name removes it
    ASSERT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(m) + " --keep 6 --no-protect-super -o " +
                           quote(dir + "/elsewhere.imatrix.gguf"), out), 0) << out;
    EXPECT_FALSE(prune_test::exists(dir + "/" + staged_dead));
    ::unlink((dir + "/" + other_live).c_str());
    EXPECT_TRUE(leftovers(dir).empty());
    remove_tree(fx.dir);
}

// Issue 23 item 13: prune --dry-run lists what the real run would clean
// first (the stale temps of any output in the folder, a killed run's
// journal), removing nothing; the real run then removes exactly those. And a
// run SIGKILLed while it holds the folder's lock (right after its journal)
// leaves no lock file: the lock is the folder's own flock. Against the
// binary before this change the dry run listed nothing and the killed run
// left .reap.lock.
TEST(Leftovers, DryRunListsTheStaleTempsAndAKillLeavesNoLock) {
    fixture fx;
    std::string why, out;
    if (!setup("dry-run", fx, why)) GTEST_SKIP() << why;
    std::string m;
    reap::plan p;
    ASSERT_NO_FATAL_FAILURE(gpt_oss_half_plan(fx, "dry-run", 41, m, p));
    const std::string plan = fx.dir + "/p.json", dir = fx.dir + "/out";
    ::mkdir(dir.c_str(), 0755);
    const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getpid());
    const std::string own_dead = ".a.gguf.reap-tmp." + dead + ".abcdef";
    const std::string other_dead = ".other.json.reap-tmp." + dead + ".ghijkl";
    const std::string staged_dead = ".elsewhere.imatrix.gguf.reap-tmp." + dead + ".s.mnopqr";
    const std::string other_live = ".other.json.reap-tmp." + live + ".stuvwx";
    for (const std::string & t : {own_dead, other_dead, staged_dead, other_live}) write_text(dir + "/" + t, "x");
    const std::string prune = "prune -m " + quote(m) + " --plan " + quote(plan) + " -o " + quote(dir + "/a.gguf");
    ASSERT_EQ(run_reap(prune + " --dry-run", out), 0) << out;
    for (const std::string & t : {own_dead, other_dead}) {
        EXPECT_NE(out.find("would first remove the stale temp file " + dir + "/" + t), std::string::npos) << out;
    }
    for (const std::string & t : {staged_dead, other_live}) EXPECT_EQ(out.find(t), std::string::npos) << out;
    for (const std::string & t : {own_dead, other_dead, staged_dead, other_live}) {
        EXPECT_TRUE(prune_test::exists(dir + "/" + t)) << "the dry run removed " << t;
    }
    ASSERT_EQ(run_reap(prune, out), 0) << out;
    EXPECT_FALSE(prune_test::exists(dir + "/" + own_dead));
    EXPECT_FALSE(prune_test::exists(dir + "/" + other_dead));
    EXPECT_TRUE(prune_test::exists(dir + "/" + staged_dead));
    EXPECT_TRUE(prune_test::exists(dir + "/" + other_live));
    ::unlink((dir + "/" + staged_dead).c_str());
    ::unlink((dir + "/" + other_live).c_str());
    // killed right after its journal, holding the lock: the journal is listed,
    // and no lock file is left
    const std::string split = "prune -m " + quote(m) + " --plan " + quote(plan) + " --split-max-tensors 10 --force -o " +
                              quote(dir + "/s.gguf");
    ASSERT_EQ(run_reap(split, out), 0) << out;   // the previous set: the traced run and the killed one replace it alike
    const int at = find_kill_points(trace_steps(split)).journal;
    ASSERT_GT(at, 0);
    EXPECT_TRUE(run_killed_at(at, split, out)) << "not killed: " << out;
    EXPECT_FALSE(prune_test::exists(dir + "/.reap.lock")) << "a killed run left its lock file";
    ASSERT_TRUE(has_journal(dir));
    ASSERT_EQ(run_reap(split + " --dry-run", out), 0) << out;
    EXPECT_NE(out.find("would first complete the journal of a killed run " + dir + "/.s-00001-of-"), std::string::npos) << out;
    ASSERT_TRUE(has_journal(dir)) << "the dry run completed the journal";
    ASSERT_EQ(run_reap(split, out), 0) << out;
    EXPECT_TRUE(leftovers(dir).empty());
    EXPECT_FALSE(prune_test::exists(dir + "/.reap.lock"));
    remove_tree(fx.dir);
}

// A killed run whose parent has not reaped it yet is a zombie: kill(pid, 0)
// still answers for it, but it writes nothing more, so its temps are stale.
// The next run in the folder removes them (and its dry run lists them), while
// a running process's temp stays. Before, a zombie's temp was taken for a live
// run's and left beside the finished run (issue 37, item 13).
TEST(Leftovers, AZombieRunsTempsAreStale) {
    fixture fx;
    std::string why, out;
    if (!setup("zombie", fx, why)) GTEST_SKIP() << why;
    std::string m;
    reap::plan p;
    ASSERT_NO_FATAL_FAILURE(gpt_oss_half_plan(fx, "zombie", 43, m, p));
    const std::string plan = fx.dir + "/p.json", dir = fx.dir + "/out";
    ::mkdir(dir.c_str(), 0755);
    const pid_t zombie = fork();
    if (zombie == 0) _exit(0);
    ASSERT_GT(zombie, 0);
    // wait until the child has exited (and is not reaped: a zombie)
    std::string state;
    for (int i = 0; i < 1000 && state != "Z"; ++i) {
        std::ifstream f("/proc/" + std::to_string(zombie) + "/stat");
        std::string line((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        const size_t close = line.rfind(')');
        state = close != std::string::npos && close + 2 < line.size() ? line.substr(close + 2, 1) : "";
        if (state != "Z") ::usleep(1000);
    }
    ASSERT_EQ(state, "Z") << "the child never became a zombie";
    ASSERT_EQ(::kill(zombie, 0), 0) << "kill(pid, 0) no longer answers for a zombie: the test shows nothing";
    const std::string own = ".a.gguf.reap-tmp." + std::to_string(zombie) + ".abcdef";
    const std::string other = ".other.json.reap-tmp." + std::to_string(zombie) + ".ghijkl";
    const std::string live = ".other.json.reap-tmp." + std::to_string(::getpid()) + ".mnopqr";
    for (const std::string & t : {own, other, live}) write_text(dir + "/" + t, "x");
    const std::string prune = "prune -m " + quote(m) + " --plan " + quote(plan) + " -o " + quote(dir + "/a.gguf");
    ASSERT_EQ(run_reap(prune + " --dry-run", out), 0) << out;
    for (const std::string & t : {own, other}) {
        EXPECT_NE(out.find("would first remove the stale temp file " + dir + "/" + t), std::string::npos) << out;
    }
    EXPECT_EQ(out.find(live), std::string::npos) << out;
    ASSERT_EQ(run_reap(prune, out), 0) << out;
    EXPECT_FALSE(prune_test::exists(dir + "/" + own)) << "a zombie's temp of this output was left";
    EXPECT_FALSE(prune_test::exists(dir + "/" + other)) << "a zombie's temp of another output was left";
    EXPECT_TRUE(prune_test::exists(dir + "/" + live)) << "a running process's temp was removed";
    int st = 0;
    waitpid(zombie, &st, 0);
    remove_tree(fx.dir);
}

// An output never takes a name of reap's own bookkeeping: a model written as
// DIR/.y.gguf.reap-journal was, before, taken by the next run in DIR for a
// killed run's journal ("not a reap journal"), and every later command in the
// folder failed. Refused now (exit 2, nothing written) for journal and temp
// names, by prune and by plan, and the folder stays usable.
TEST(OutputRule, AnOutputNeverTakesAJournalOrTempName) {
    fixture fx;
    std::string why, out;
    if (!setup("bookkeeping-names", fx, why)) GTEST_SKIP() << why;
    std::string m;
    reap::plan p;
    ASSERT_NO_FATAL_FAILURE(gpt_oss_half_plan(fx, "bookkeeping-names", 47, m, p));
    const std::string plan = fx.dir + "/p.json", dir = fx.dir + "/out", sal = fx.dir + "/sal.gguf";
    write_archive_for(m, sal, 4);
    ::mkdir(dir.c_str(), 0755);
    for (const std::string name : {".y.gguf.reap-journal", ".y.gguf.reap-tmp.1.abcdef", ".y.gguf.reap-tmp.1.s.abcdef"}) {
        EXPECT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(plan) + " -o " + quote(dir + "/" + name), out), 2) << out;
        EXPECT_NE(out.find("is a name reap gives its own temp files and journals"), std::string::npos) << out;
        EXPECT_EQ(run_reap("plan " + quote(sal) + " -m " + quote(m) + " --keep 6 --no-protect-super -o " + quote(dir + "/" + name), out), 2)
            << out;
        EXPECT_NE(out.find("is a name reap gives its own temp files and journals"), std::string::npos) << out;
    }
    EXPECT_TRUE(leftovers(dir).empty());
    EXPECT_FALSE(prune_test::exists(dir + "/SHA256SUMS"));
    ASSERT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(plan) + " -o " + quote(dir + "/y.gguf"), out), 0) << out;
    remove_tree(fx.dir);
}

// The journal's name, one rule for the publisher that writes it and for verify,
// which refuses an output while it exists: DIR/.NAME.reap-journal beside the target.
TEST(Reliability, JournalNameRule) {
    EXPECT_EQ(reap::util::journal_path("out/cut.gguf"), "out/.cut.gguf.reap-journal");
    EXPECT_EQ(reap::util::journal_path("/a/b/cut-00001-of-00003.gguf"), "/a/b/.cut-00001-of-00003.gguf.reap-journal");
    EXPECT_EQ(reap::util::journal_path("cut.gguf"), "./.cut.gguf.reap-journal");
}

// The folder's SHA256SUMS is the run's own bookkeeping: --imatrix-out naming it
// (beside the model or in another folder, with --force, with --no-sums) is
// refused before anything is written, and a user's SHA256SUMS there keeps its
// bytes. Before, `--imatrix-out DIR/SHA256SUMS --force --no-sums` replaced the
// user's checksum file with the sliced imatrix (issue 37, item 2).
TEST(OutputRule, TheSlicedImatrixIsNeverWrittenAsAChecksumFile) {
    fixture fx;
    std::string why, out;
    if (!setup("imatrix-sums", fx, why)) GTEST_SKIP() << why;
    const std::string m = fx.model("gpt-oss");
    const std::string plan = fx.dir + "/p.json", imatrix = fx.dir + "/source.imatrix.gguf";
    ASSERT_TRUE(half_plan_and_imatrix(m, plan, imatrix, why)) << why;
    const std::string s4 = fx.dir + "/s4", other = fx.dir + "/other";
    ::mkdir(s4.c_str(), 0755);
    ::mkdir(other.c_str(), 0755);
    const std::string users = "0000000000000000000000000000000000000000000000000000000000000000  notes.txt\n";
    for (const std::string & sums : {s4 + "/SHA256SUMS", other + "/SHA256SUMS"}) {
        write_text(sums, users);
        for (const char * more : {" --force --no-sums", " --force", ""}) {
            SCOPED_TRACE(sums + more);
            EXPECT_EQ(run_reap("prune -m " + quote(m) + " --plan " + quote(plan) + " --imatrix " + quote(imatrix) + " --imatrix-out " +
                                   quote(sums) + " -o " + quote(s4 + "/x.gguf") + more, out), 2) << out;
            EXPECT_NE(out.find("refusing to write the sliced imatrix"), std::string::npos) << out;
            EXPECT_EQ(text_of(sums), users);
            EXPECT_FALSE(prune_test::exists(s4 + "/x.gguf"));
        }
    }
}

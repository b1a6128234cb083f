// test_llama_diskfull.cpp: a full disk (a small tmpfs, tests/diskfull_test_util.h)
// for the commands that run a model (issue 11), through the reap binary on the
// project's trained model with a few hundred tokens; the core commands are in
// test_cli_reliability.cpp. Every failure must be clean: exit 2, the reason, no
// output and no temp file on the full disk.
//   * calibrate: its -o, and its --checkpoint, on the full disk; a disk with
//     room for one checkpoint only (the second fails): the first stays whole
//     and, once there is room, --resume from it writes the archive an
//     uninterrupted run writes, byte for byte; room for the checkpoint but not
//     the archive: the checkpoint stays, and the message says so;
//   * eval: --kld-base on the full disk and on one with room for half of it,
//     --tmp-dir (the base's rows) on it, and --json on a standard output
//     redirected to it;
//   * sweep: -o (JSON and chart) and --plans-dir on the full disk, and a disk
//     with room for some of its files only: none of them appears;
//   * a read-only output folder (a read-only bind mount, else an immutable
//     folder: root writes anywhere otherwise): sweep -o or --plans-dir there,
//     and prune and plan -o there, exit 2 naming the folder before any work
//     (sweep scores nothing); where neither can be set up the test fails.
#include "diskfull_test_util.h"
#include "llama_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

using namespace reap_test;
using diskfull_test::expect_clean_failure;
using diskfull_test::visible;

namespace {

std::string model() { return source_dir() + "/models/reap-moe-tiny.gguf"; }

void write_text(const std::string & path, const std::string & text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

std::string reap_cmd(const std::string & args) { return shell_quote(reap_bin()) + " " + args; }

// The llama.cpp flags of every run: small windows, one thread (two threads spin
// waiting for each other on a loaded machine, at no gain for 64 tokens).
const char * k_flags = " -c 64 -t 1";

// A scratch directory of its own (ctest runs this file's tests in parallel, and
// each empties its directory first) with a small two-domain corpus (7 windows of -c 64), a
// plain text, the archive calibrated from the corpus and a plan made from it.
struct inputs {
    std::string dir, corpus, text, sal, plan;
    int         n_windows = 0;   // of the corpus at -c 64
};

inputs get_inputs() {
    inputs in;
    in.dir = test_tmp_dir() + "/llama-diskfull-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string out;
    run_cmd("rm -rf " + shell_quote(in.dir) + " && mkdir -p " + shell_quote(in.dir), out);
    in.corpus = in.dir + "/corpus.jsonl";
    std::string lines;
    auto line = [&](const char * domain, const std::string & text) {
        lines += nlohmann::json{{"domain", domain}, {"text", text}}.dump() + "\n";
    };
    const std::string a = "The quick brown fox jumps over the lazy dog. Experts route tokens; the router picks the top k of them.";
    const std::string b = "int main(void) { for (int i = 0; i < 10; ++i) printf(\"%d\\n\", i); return 0; }";
    const std::string c = "Pruning removes experts that a workload rarely routes to. Calibration records how often each fires.";
    const std::string d = "def f(x):\n    return [y * y for y in range(x) if y % 3]\n";
    line("en", a);
    line("code", b);
    line("en", c);
    line("code", d);
    write_text(in.corpus, lines);
    in.text = in.dir + "/text.txt";
    std::string t;
    for (int i = 0; i < 8; ++i) t += "Calibration records, per domain, layer and expert, how often and how strongly each expert fires. ";
    write_text(in.text, t);
    in.sal = in.dir + "/saliency.gguf";
    in.plan = in.dir + "/plan.json";
    EXPECT_EQ(run_cmd(reap_cmd("calibrate -m " + shell_quote(model()) + " --corpus " + shell_quote(in.corpus) + " -o " +
                           shell_quote(in.sal) + k_flags + " -np 1 --no-progress"), out), 0) << out;
    const size_t at = out.find(" windows, ");   // "calibrated N tokens (W windows, ..."
    const size_t open = out.rfind('(', at);
    in.n_windows = at == std::string::npos || open == std::string::npos ? 0 : std::atoi(out.c_str() + open + 1);
    EXPECT_GE(in.n_windows, 3) << out;
    EXPECT_EQ(run_cmd(reap_cmd("plan " + shell_quote(in.sal) + " -m " + shell_quote(model()) + " --keep 8 -o " +
                           shell_quote(in.plan)), out), 0) << out;
    return in;
}

// Runs `cmd` with the file system of `mnt` full; then empties `mnt`.
void expect_fails_cleanly(const std::string & mnt, const std::string & cmd, const std::string & reason = "No space left on device") {
    SCOPED_TRACE(cmd);
    diskfull_test::fill(mnt);
    std::string out;
    expect_clean_failure(run_cmd(cmd, out), out, mnt, {"filler"}, reason);
    run_cmd("rm -rf " + shell_quote(mnt) + "/* " + shell_quote(mnt) + "/.[!.]*", out);
}

void calibrate_case(const inputs & in, const std::string & mnt) {
    // -np 1: a decode a window, so the run has checkpoints to write between its windows
    const std::string calibrate = "calibrate -m " + shell_quote(model()) + " --corpus " + shell_quote(in.corpus) + k_flags + " -np 1" +
                                  " --no-progress --checkpoint-every 1";
    // -o on the full disk (its checkpoint beside it), then the checkpoint alone there
    expect_fails_cleanly(mnt, reap_cmd(calibrate + " -o " + shell_quote(mnt + "/s.gguf")));
    const std::string elsewhere = in.dir + "/calibrate-out";
    std::string out;
    run_cmd("rm -rf " + shell_quote(elsewhere) + " && mkdir " + shell_quote(elsewhere), out);
    expect_fails_cleanly(mnt, reap_cmd(calibrate + " -o " + shell_quote(elsewhere + "/s.gguf") + " --checkpoint " +
                                   shell_quote(mnt + "/ck.gguf")));
    EXPECT_TRUE(visible(elsewhere).empty());
    EXPECT_TRUE(diskfull_test::leftovers(elsewhere).empty());

    // Room for one checkpoint, not for the next one's temp beside it: the first stays whole.
    // A checkpoint is the archive and two keys more (well under a page more): room for
    // the archive's pages and one page fits one checkpoint, never two.
    const uint64_t archive_pages = (gguf_test::apparent_size(in.sal) + 4095) / 4096 * 4096;
    const uint64_t one = archive_pages + 4096;
    ASSERT_LT(one, 2 * archive_pages);
    diskfull_test::fill(mnt, one);
    const int status = run_cmd(reap_cmd(calibrate + " -o " + shell_quote(mnt + "/s.gguf")), out);
    expect_clean_failure(status, out, mnt, {"filler", "s.gguf.checkpoint"});
    EXPECT_NE(out.find("make room and rerun with --resume"), std::string::npos) << out;
    // resumed once there is room: the archive of an uninterrupted run (in.sal), byte for byte
    ::unlink((mnt + "/filler").c_str());
    ASSERT_EQ(run_cmd(reap_cmd(calibrate + " -o " + shell_quote(mnt + "/s.gguf") + " --resume"), out), 0) << out;
    EXPECT_NE(out.find("(resumed)"), std::string::npos) << out;
    EXPECT_TRUE(gguf_test::read_all(mnt + "/s.gguf") == gguf_test::read_all(in.sal))
        << "the resumed archive differs from the uninterrupted one";
    EXPECT_EQ(visible(mnt), std::vector<std::string>{"s.gguf"});   // the checkpoint is gone
    EXPECT_TRUE(diskfull_test::leftovers(mnt).empty());

    // Room for the checkpoint (one, before the last window), not for the archive: the checkpoint stays.
    ::unlink((mnt + "/s.gguf").c_str());
    diskfull_test::fill(mnt, one);
    const std::string once = calibrate.substr(0, calibrate.size() - 1) + std::to_string(in.n_windows - 1);
    expect_clean_failure(run_cmd(reap_cmd(once + " -o " + shell_quote(mnt + "/s.gguf")), out), out, mnt,
                         {"filler", "s.gguf.checkpoint"});
    EXPECT_NE(out.find("make room and rerun with --resume"), std::string::npos) << out;
}

void eval_case(const inputs & in, const std::string & mnt) {
    const std::string eval = "eval -m " + shell_quote(model()) + " -f " + shell_quote(in.text) + k_flags + " --chunks 1 -q";
    // the KLD base file it writes, on a full disk, then on one with room for half of it
    // (its header and tokens are written, its records are not)
    const std::string base = eval + " --kld-base " + shell_quote(mnt + "/base.kld");
    expect_fails_cleanly(mnt, reap_cmd(base));
    {
        std::string out;
        ASSERT_EQ(run_cmd(reap_cmd(base), out), 0) << out;
        const uint64_t size = gguf_test::apparent_size(mnt + "/base.kld");
        ASSERT_GT(size, 3 * 4096u) << out;
        ::unlink((mnt + "/base.kld").c_str());
        ::unlink((mnt + "/base.kld.reap-receipt.json").c_str());   // (and what the run wrote beside it)
        SCOPED_TRACE("room for " + std::to_string(size / 2) + " of the " + std::to_string(size) + " bytes of the KLD base");
        diskfull_test::fill(mnt, size / 2);
        expect_clean_failure(run_cmd(reap_cmd(base), out), out, mnt, {"filler"});
        ::unlink((mnt + "/filler").c_str());
    }
    // the base's rows: refused up front, naming the flag
    expect_fails_cleanly(mnt, reap_cmd(eval + " --mask " + shell_quote(in.plan) + " --tmp-dir " + shell_quote(mnt)), "--tmp-dir");
    // its JSON on a standard output that cannot be written (the shell made the empty file)
    {
        SCOPED_TRACE("eval --json > full disk");
        diskfull_test::fill(mnt);
        std::string out;
        EXPECT_EQ(run_cmd("{ " + reap_cmd(eval + " --mask " + shell_quote(in.plan) + " --json > " + shell_quote(mnt + "/e.json")) +
                              "; }", out), 2) << out;
        EXPECT_NE(out.find("cannot write the standard output: No space left on device"), std::string::npos) << out;
    }
}

void sweep_case(const inputs & in, const std::string & mnt) {
    const std::string sweep = "sweep " + shell_quote(in.sal) + " -m " + shell_quote(model()) + " -f " + shell_quote(in.text) +
                              k_flags + " --chunks 1 -q --keep 8,16";
    const std::string to_mnt = " -o " + shell_quote(mnt + "/sweep.json") + " --plans-dir " + shell_quote(mnt + "/plans");
    expect_fails_cleanly(mnt, reap_cmd(sweep + to_mnt));
    // What its files take on this tmpfs, measured by writing them there once.
    std::string out;
    const uint64_t free0 = diskfull_test::free_bytes(mnt);
    ASSERT_EQ(run_cmd(reap_cmd(sweep + to_mnt), out), 0) << out;
    const uint64_t need = free0 - diskfull_test::free_bytes(mnt);
    const std::vector<std::string> files = {"plans/keep-16.json", "plans/keep-8.json", "sweep.json", "sweep.svg"};
    for (const std::string & f : files) EXPECT_TRUE(gguf_test::exists(mnt + "/" + f)) << f << ": " << out;
    run_cmd("rm -rf " + shell_quote(mnt) + "/*", out);
    // room for about half of them, for all but the last page, or for exactly them (not
    // for the journal that publishes them together): none appears
    for (const uint64_t leave : {need / 2, need - 4096, need}) {
        SCOPED_TRACE("free bytes: " + std::to_string(leave) + " of the " + std::to_string(need) + " the sweep takes");
        diskfull_test::fill(mnt, leave);
        expect_clean_failure(run_cmd(reap_cmd(sweep + to_mnt), out), out, mnt, {"filler"});
        ::unlink((mnt + "/filler").c_str());
    }
}

} // namespace

// One test, one process: the archive and plan the cases share are made once.
TEST(DiskFull, CalibrateEvalSweep) {
    const inputs in = get_inputs();
    ASSERT_FALSE(HasFailure());
    const std::string mnt = in.dir + "/tmpfs";
    diskfull_test::tmpfs fs;
    if (!diskfull_test::mount_tmpfs(fs, mnt, 1 << 20)) return;
    std::string out;
    {
        SCOPED_TRACE("calibrate");
        calibrate_case(in, mnt);
        run_cmd("rm -rf " + shell_quote(mnt) + "/*", out);
    }
    {
        SCOPED_TRACE("eval");
        eval_case(in, mnt);
        run_cmd("rm -rf " + shell_quote(mnt) + "/*", out);
    }
    {
        SCOPED_TRACE("sweep");
        sweep_case(in, mnt);
        run_cmd("rm -rf " + shell_quote(mnt) + "/*", out);
    }
}

namespace {

// A folder nothing can be written in, even by root, while this lives: a
// read-only bind mount of itself, or, where mounting is not allowed, the
// immutable attribute (chattr +i). `how` says which; empty when neither could
// be set up (`why`).
struct read_only_dir {
    std::string dir, how;
    ~read_only_dir() {
        if (how == "bind mount") ::umount2(dir.c_str(), MNT_DETACH);
        if (how == "immutable") set_immutable(false);
    }
    bool set_immutable(bool on) {
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
        if (fd < 0) return false;
        int flags = 0;
        bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
        flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
        ok = ok && ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
        ::close(fd);
        return ok;
    }
    bool make(const std::string & d, std::string & why) {
        dir = d;
        if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) == 0) {
            if (::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0) {
                how = "bind mount";
                return true;
            }
            why = std::string("read-only remount: ") + strerror(errno);
            ::umount2(dir.c_str(), MNT_DETACH);
        } else {
            why = std::string("bind mount: ") + strerror(errno);
        }
        if (set_immutable(true)) {
            how = "immutable";
            return true;
        }
        why += std::string("; chattr +i: ") + strerror(errno);
        return false;
    }
};

} // namespace

// Issue 23 item 11: an output folder that cannot be written is refused before
// any work. Against the binary before this change sweep scored every size
// first (its table printed), then failed to create its temp file.
TEST(ReadOnly, OutputFolderIsRefusedBeforeAnyWork) {
    const inputs in = get_inputs();
    ASSERT_FALSE(HasFailure());
    const std::string ro = in.dir + "/read-only";
    ASSERT_EQ(::mkdir(ro.c_str(), 0755), 0) << strerror(errno);
    write_text(ro + "/kept.txt", "was here before\n");
    read_only_dir guard;
    std::string why;
    if (!guard.make(ro, why)) {
        FAIL() << "READ-ONLY TEST NOT RUN: cannot make " << ro << " read-only (" << why
               << "); needs root with CAP_SYS_ADMIN or CAP_LINUX_IMMUTABLE";
    }
    // the condition holds: root itself cannot create a file there
    const std::string probe = ro + "/probe";
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
        ::close(fd);
        ::unlink(probe.c_str());
        FAIL() << ro << " (" << guard.how << ") is still writable";
    }
    const std::string sweep = "sweep " + shell_quote(in.sal) + " -m " + shell_quote(model()) + " -f " + shell_quote(in.text) +
                              k_flags + " --chunks 1 -q --keep 8,16";
    const std::string cases[] = {
        reap_cmd(sweep + " -o " + shell_quote(ro + "/sweep.json")),
        reap_cmd(sweep + " -o " + shell_quote(in.dir + "/sweep.json") + " --plans-dir " + shell_quote(ro + "/plans")),
        reap_cmd("prune -m " + shell_quote(model()) + " --plan " + shell_quote(in.plan) + " -o " + shell_quote(ro + "/cut.gguf")),
        reap_cmd("plan " + shell_quote(in.sal) + " -m " + shell_quote(model()) + " --keep 8 -o " + shell_quote(ro + "/p.json")),
    };
    for (const std::string & cmd : cases) {
        SCOPED_TRACE(cmd + " (" + guard.how + ")");
        std::string out;
        EXPECT_EQ(run_cmd(cmd, out), 2) << out;
        EXPECT_NE(out.find("the folder " + ro + " is not writable"), std::string::npos) << out;
        EXPECT_EQ(out.find("predicted size"), std::string::npos) << "scored before refusing: " << out;   // the sweep's table
    }
    EXPECT_EQ(visible(ro), std::vector<std::string>{"kept.txt"});
    EXPECT_FALSE(gguf_test::exists(in.dir + "/sweep.json"));
}

// Never a loadable mix (issue 23, item 7): `reap prune --force` republishing a
// split set over an existing one is killed, and stock llama.cpp is asked to
// load what is left. Whatever the moment of the kill, the folder holds the old
// set, the new set, or a set llama.cpp refuses (its first shard absent while
// the journal is pending): never new shards beside old ones that load together.
//   * strace kills the run before each of its rename and unlink system calls
//     in turn (every step of the publish, deterministically, with no fault
//     hook in reap);
//   * 25 SIGKILLs at seeded random moments of a run, as a user's kill would
//     fall.
// After each kill `reap verify` either verifies a complete set or exits 2
// naming the pending journal; the next run leaves only the set and its
// SHA256SUMS (no lock, no temp).
#include "llama_test_util.h"
#include "prune_test_util.h"
#include "diskfull_test_util.h"
#include "gguf_test_util.h"

#include "gguf/gguf.h"
#include "plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <random>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

namespace g = reap::gguf;
using prune_test::quote;

struct set_fixture {
    std::string model, dir, out, plans;
    g::model gm;
    reap::plan p_old, p_new;
    std::vector<std::string> old_files, new_files;   // what each complete set shows, by name
    std::map<std::string, std::vector<uint8_t>> old_bytes, new_bytes;   // and every byte of it
    std::string first;                               // the shard a loader opens

    std::string prune_args(const std::string & plan) const {
        return "prune -m " + quote(model) + " --plan " + quote(plans + "/" + plan) + " -o " + quote(out) +
               " --split-max-tensors 20 --force";
    }
};

int run_reap(const std::string & args, std::string & out) {
    return prune_test::run(quote(gguf_test::reap_bin()) + " " + args + " 2>&1", out);
}

// Every visible file of `dir`, name -> bytes.
std::map<std::string, std::vector<uint8_t>> contents(const std::string & dir) {
    std::map<std::string, std::vector<uint8_t>> out;
    for (const std::string & f : diskfull_test::visible(dir)) out[f] = gguf_test::read_all(dir + "/" + f);
    return out;
}

// A folder with the old set (pruned with one plan) in place; new_files from a
// run with the other plan, then the old set made again.
void make_fixture(const std::string & name, set_fixture & fx) {
    std::string err, out;
    fx.model = prune_test::env_or("REAP_SOURCE_DIR", ".") + "/models/reap-moe-tiny.gguf";
    ASSERT_TRUE(g::open_model(fx.model, fx.gm, err)) << err;
    fx.dir   = prune_test::scratch(name);
    fx.plans = fx.dir + "/plans";
    fx.out   = fx.dir + "/set/out.gguf";
    ::mkdir(fx.plans.c_str(), 0755);
    const int64_t keep = prune_test::half_keep(fx.gm);
    ASSERT_TRUE(prune_test::random_plan(fx.gm, keep, 11, fx.p_old, err)) << err;
    ASSERT_TRUE(prune_test::random_plan(fx.gm, keep, 12, fx.p_new, err)) << err;
    ASSERT_TRUE(reap::write_plan(fx.p_old, fx.plans + "/old.json", true, err)) << err;
    ASSERT_TRUE(reap::write_plan(fx.p_new, fx.plans + "/new.json", true, err)) << err;
    const std::string set = fx.dir + "/set";
    ::mkdir(set.c_str(), 0755);
    ASSERT_EQ(run_reap(fx.prune_args("new.json"), out), 0) << out;
    fx.new_files = diskfull_test::visible(set);
    fx.new_bytes = contents(set);
    ASSERT_EQ(run_reap(fx.prune_args("old.json"), out), 0) << out;
    fx.old_files = diskfull_test::visible(set);
    fx.old_bytes = contents(set);
    ASSERT_NE(fx.old_bytes, fx.new_bytes);
    ASSERT_EQ(fx.old_files, fx.new_files) << "old and new sets must share their names: that is what could mix";
    for (const std::string & f : fx.new_files) {
        if (f.rfind("out-00001-of-", 0) == 0) fx.first = set + "/" + f;
    }
    ASSERT_FALSE(fx.first.empty()) << "no first shard";
    ASSERT_GE(fx.new_files.size(), 4u) << "the set must have three shards or more";
}

bool verifies(const set_fixture & fx, const reap::plan & p, const char * plan) {
    std::string err;
    return prune_test::verify(fx.gm, p, fx.plans + "/" + plan, fx.first, err);
}

bool llama_loads(const std::string & first) {
    return reap_test::load_model(first) != nullptr;
}

bool has_journal(const std::string & dir) {
    for (const std::string & e : diskfull_test::leftovers(dir)) {
        if (e.size() > 13 && e.compare(e.size() - 13, 13, ".reap-journal") == 0) return true;
    }
    return false;
}

struct tally {
    int old_set = 0, new_set = 0, refused = 0;
};

// What a kill left: a complete set that verifies, or a pending journal that
// reap verify names and llama.cpp cannot load. Then the next run completes.
void check_after_kill(const set_fixture & fx, tally & t) {
    std::string out;
    const std::string set = fx.dir + "/set";
    if (has_journal(set)) {
        EXPECT_EQ(run_reap("verify -m " + quote(fx.model) + " --plan " + quote(fx.plans + "/new.json") + " " +
                           quote(fx.first), out), 2) << out;
        EXPECT_NE(out.find("journal"), std::string::npos) << out;
        // killed before the first rename (the old set whole, byte for byte) or after the last
        // one (the new set whole): either may load, it is one model; anything between must not
        const auto now = contents(set);
        if (now == fx.old_bytes) {
            ++t.old_set;
        } else if (now == fx.new_bytes) {
            ++t.new_set;
        } else {
            EXPECT_FALSE(llama_loads(fx.first)) << "llama.cpp loaded a set whose journal is pending";
            ++t.refused;
        }
    } else {
        const std::vector<std::string> vis = diskfull_test::visible(set);
        const bool is_old = vis == fx.old_files && verifies(fx, fx.p_old, "old.json");
        const bool is_new = vis == fx.new_files && verifies(fx, fx.p_new, "new.json");
        EXPECT_TRUE(is_old != is_new) << "after the kill: old " << is_old << ", new " << is_new;
        if (is_old) ++t.old_set;
        if (is_new) ++t.new_set;
        EXPECT_TRUE(llama_loads(fx.first));
    }
    ASSERT_EQ(run_reap(fx.prune_args("new.json"), out), 0) << out;
    EXPECT_TRUE(verifies(fx, fx.p_new, "new.json"));
    EXPECT_EQ(diskfull_test::visible(set), fx.new_files);
    const auto left = diskfull_test::leftovers(set);
    EXPECT_TRUE(left.empty()) << "left over: " << left.front();
    // the old set again, for the next kill
    ASSERT_EQ(run_reap(fx.prune_args("old.json"), out), 0) << out;
}

// The system calls of a publish that change which files the folder shows.
const char * k_publish_calls = "rename,renameat,renameat2,unlink,unlinkat";

// How many of each of k_publish_calls one `prune --force` makes (strace -c
// counts them): syscall name -> calls. strace's `when=K` counts each syscall
// on its own, so the kills go through them name by name.
std::map<std::string, int> count_publish_calls(const set_fixture & fx) {
    std::string out;
    const std::string log = fx.dir + "/strace.txt";
    EXPECT_EQ(prune_test::run("strace -f -qq -c -o " + quote(log) + " -e trace=" + k_publish_calls + " " +
                                  quote(gguf_test::reap_bin()) + " " + fx.prune_args("new.json") + " 2>&1", out), 0)
        << out;
    std::ifstream in(log);
    std::map<std::string, int> calls;
    // rows: "% time  seconds  usecs/call  calls  [errors]  syscall"
    for (std::string line; std::getline(in, line);) {
        std::istringstream is(line);
        std::vector<std::string> f;
        for (std::string w; is >> w;) f.push_back(w);
        if (f.size() < 5 || f.back() == "total" || f.back() == "syscall") continue;
        const std::string name = f.back();
        if ((std::string(",") + k_publish_calls + ",").find("," + name + ",") != std::string::npos) {
            calls[name] = std::atoi(f[3].c_str());
        }
    }
    return calls;
}

} // namespace

TEST(PublishOrder, KillBeforeEachRenameNeverLeavesALoadableMix) {
    set_fixture fx;
    ASSERT_NO_FATAL_FAILURE(make_fixture("publish-order-strace", fx));
    std::string out;
    ASSERT_EQ(prune_test::run("strace -V", out), 0) << "strace (scripts/setup-deps.sh installs it): " << out;
    const std::map<std::string, int> calls = count_publish_calls(fx);
    int n_calls = 0;
    for (const auto & [name, n] : calls) n_calls += n;
    ASSERT_GE(n_calls, (int) fx.new_files.size()) << "fewer renames than files published";
    ASSERT_EQ(run_reap(fx.prune_args("old.json"), out), 0) << out;
    tally t;
    for (const auto & [name, n] : calls) {
        for (int k = 1; k <= n; ++k) {
            SCOPED_TRACE("killed before " + name + " call " + std::to_string(k) + " of " + std::to_string(n));
            const int rc = prune_test::run("strace -f -qq -o /dev/null -e trace=" + name + " -e inject=" + name +
                                               ":signal=KILL:when=" + std::to_string(k) + " " +
                                               quote(gguf_test::reap_bin()) + " " + fx.prune_args("new.json") + " 2>&1",
                                           out);
            EXPECT_NE(rc, 0) << "not killed: " << out;
            ASSERT_NO_FATAL_FAILURE(check_after_kill(fx, t));
        }
    }
    printf("killed before each of %d renames/unlinks: %d left the old set, %d the new one, %d a set llama.cpp "
           "refused (journal pending)\n", n_calls, t.old_set, t.new_set, t.refused);
    EXPECT_GT(t.refused, 0) << "no kill fell between the journal and the last rename";
    EXPECT_GT(t.old_set, 0);
    prune_test::run("rm -rf " + quote(fx.dir), out);
}

TEST(PublishOrder, RandomSigkillsNeverLeaveALoadableMix) {
    set_fixture fx;
    ASSERT_NO_FATAL_FAILURE(make_fixture("publish-order-random", fx));
    std::string out;
    // how long one run takes: the kills fall anywhere in it
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(run_reap(fx.prune_args("new.json"), out), 0) << out;
    const double run_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(run_reap(fx.prune_args("old.json"), out), 0) << out;
    std::mt19937 rng(20261201);
    tally t;
    int killed = 0;
    for (int k = 0; k < 25; ++k) {
        const useconds_t at = (useconds_t) (std::uniform_real_distribution<double>(0.2, 1.0)(rng) * run_us);
        SCOPED_TRACE("SIGKILL after " + std::to_string(at) + " us");
        const pid_t pid = fork();
        if (pid == 0) {
            const std::string cmd = "exec " + quote(gguf_test::reap_bin()) + " " + fx.prune_args("new.json") +
                                    " > /dev/null 2>&1";
            execl("/bin/sh", "sh", "-c", cmd.c_str(), (char *) nullptr);
            _exit(127);
        }
        ASSERT_GT(pid, 0);
        usleep(at);
        ::kill(pid, SIGKILL);
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status)) ++killed;
        ASSERT_NO_FATAL_FAILURE(check_after_kill(fx, t));
    }
    printf("25 SIGKILLs at random moments (%d killed a running prune, %.0f ms a run): %d left the old set, %d the new "
           "one, %d a set llama.cpp refused\n", killed, run_us / 1000, t.old_set, t.new_set, t.refused);
    EXPECT_GT(killed, 0);
    prune_test::run("rm -rf " + quote(fx.dir), out);
}

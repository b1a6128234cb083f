// reap_killable's test disk: the reap CLI (the same objects as reap) with a
// stepping_disk (tests/fault_disk.h) installed before main, driven by the
// environment of the whole-process fault tests (test_cli_reliability.cpp):
//   REAP_TEST_TRACE=1     print "reap-test: step N OP WHAT" on stderr at each step
//   REAP_TEST_KILL_AT=N   SIGKILL the process at step N, before taking it
//   REAP_TEST_PAUSE_AT=N  print "reap-test: paused at step N" and wait there
//                         (up to a minute) for the test to signal it
// The production binary has none of this: its disk is util::real_disk.
#include "fault_disk.h"

#include "util/disk.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace {

long env_number(const char * name) {
    const char * v = std::getenv(name);
    return v && *v ? std::atol(v) : 0;
}

class killing_disk : public fault_test::stepping_disk {
public:
    bool trace = env_number("REAP_TEST_TRACE") != 0;
    long kill_at = env_number("REAP_TEST_KILL_AT");
    long pause_at = env_number("REAP_TEST_PAUSE_AT");

protected:
    bool at_step(long step, const char * op, const std::string & what, int, const void *, size_t) override {
        if (trace) fprintf(stderr, "reap-test: step %ld %s %s\n", step, op, what.c_str());
        if (step == kill_at) ::kill(::getpid(), SIGKILL);
        if (step == pause_at) {
            fprintf(stderr, "reap-test: paused at step %ld\n", step);
            for (int i = 0; i < 600; ++i) ::usleep(100000);
        }
        return true;
    }
};

killing_disk g_disk;

struct install {
    install() { reap::util::use_disk(&g_disk); }
} g_install;

} // namespace

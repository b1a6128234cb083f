// The interrupt handlers of interrupt.h and the registry of live temp files
// they remove; calibrate's stop-on-SIGINT (stop_request.h).
#include "util/interrupt.h"
#include "util/stop_request.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <string_view>
#include <unistd.h>

namespace reap::util {

// The registry: a list that only grows; a slot is reused once free. The
// handler reads only slots marked live, whose path was written before they
// were marked.

namespace {

struct temp_slot {
    std::atomic<bool> live{false};
    char              path[4096];
    temp_slot *       next = nullptr;
};

std::atomic<temp_slot *> g_temps{nullptr};

} // namespace

void * register_temp(const std::string & path) {
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

namespace {

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

namespace {

std::atomic<bool> * g_stop = nullptr;
const char *        g_stop_message = "";
size_t              g_stop_message_len = 0;

extern "C" void on_stop_request(int) {
    if (g_stop->load()) {
        std::signal(SIGINT, SIG_DFL);
        std::raise(SIGINT);
        return;
    }
    g_stop->store(true);
    ssize_t r = ::write(2, g_stop_message, g_stop_message_len);
    (void) r;
}

} // namespace

void install_stop_on_sigint(std::atomic<bool> * stop, const char * message) {
    g_stop = stop;
    g_stop_message = message;
    g_stop_message_len = std::strlen(message);
    std::signal(SIGINT, on_stop_request);
}

void restore_default_sigint() {
    std::signal(SIGINT, SIG_DFL);
}

} // namespace reap::util

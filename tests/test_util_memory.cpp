// test_util_memory.cpp: util/memory.h reads the memory a process may fill from
// the kernel's own files; here it gets hand-written copies of them (formats
// from proc(5) and the cgroup v1/v2 documentation), so every case runs on any
// machine: MemAvailable in KiB, a v2 memory.max of "max" or a number, a v1
// limit_in_bytes with its "unlimited" value, a process outside any memory
// controller, unreadable files. And the live call on this machine agrees with
// /proc/meminfo read here.
#include "util/memory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

namespace {

std::map<std::string, std::string> g_files;

bool fake_read(const std::string & path, std::string & out) {
    const auto it = g_files.find(path);
    if (it == g_files.end()) return false;
    out = it->second;
    return true;
}

}  // namespace

TEST(Memory, MemAvailableInKiB) {
    const std::string meminfo = "MemTotal:       24557376 kB\nMemFree:        1234 kB\nMemAvailable:   23001234 kB\n";
    ASSERT_TRUE(reap::util::meminfo_available(meminfo).has_value());
    EXPECT_EQ(*reap::util::meminfo_available(meminfo), 23001234ull * 1024);
    EXPECT_FALSE(reap::util::meminfo_available("MemTotal: 1 kB\n").has_value());
    EXPECT_FALSE(reap::util::meminfo_available("MemAvailable: kB\n").has_value());
    EXPECT_FALSE(reap::util::meminfo_available("MemAvailable: 99999999999999999999999 kB\n").has_value());
}

TEST(Memory, CgroupV2) {
    g_files = {{"/sys/fs/cgroup/user.slice/job/memory.max", "838860800\n"}};
    auto v = reap::util::cgroup_memory_limit("0::/user.slice/job\n", fake_read);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->bytes, 838860800u);
    EXPECT_EQ(v->source, "/sys/fs/cgroup/user.slice/job/memory.max");
    g_files = {{"/sys/fs/cgroup/user.slice/job/memory.max", "max\n"}};
    EXPECT_FALSE(reap::util::cgroup_memory_limit("0::/user.slice/job\n", fake_read).has_value());
    g_files = {{"/sys/fs/cgroup/memory.max", "1000\n"}};
    v = reap::util::cgroup_memory_limit("0::/\n", fake_read);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->bytes, 1000u);
}

// What the cgroup already holds, less its page cache (which the kernel
// reclaims before it kills), is not available.
TEST(Memory, CgroupLimitLessWhatItHolds) {
    g_files = {{"/sys/fs/cgroup/job/memory.max", "838860800\n"},
               {"/sys/fs/cgroup/job/memory.current", "300000000\n"},
               {"/sys/fs/cgroup/job/memory.stat", "anon 100000000\nfile 250000000\nkernel 5\n"}};
    auto v = reap::util::cgroup_memory_limit("0::/job\n", fake_read);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->bytes, 838860800u - 50000000u);
    EXPECT_NE(v->source.find("50000000 bytes in use"), std::string::npos) << v->source;
    const std::string self = "11:memory:/reap-bench\n";
    g_files = {{"/sys/fs/cgroup/memory/reap-bench/memory.limit_in_bytes", "838860800\n"},
               {"/sys/fs/cgroup/memory/reap-bench/memory.usage_in_bytes", "700000000\n"},
               {"/sys/fs/cgroup/memory/reap-bench/memory.stat", "cache 1\nrss 2\ntotal_cache 100000000\n"}};
    v = reap::util::cgroup_memory_limit(self, fake_read);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->bytes, 838860800u - 600000000u);
    // no stat file: the whole usage counts; usage above the limit: nothing left
    g_files.erase("/sys/fs/cgroup/memory/reap-bench/memory.stat");
    g_files["/sys/fs/cgroup/memory/reap-bench/memory.usage_in_bytes"] = "900000000\n";
    v = reap::util::cgroup_memory_limit(self, fake_read);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->bytes, 0u);
}

TEST(Memory, CgroupV1) {
    const std::string self = "12:pids:/x\n11:memory:/reap-bench\n10:cpu,cpuacct:/y\n";
    g_files = {{"/sys/fs/cgroup/memory/reap-bench/memory.limit_in_bytes", "838860800\n"}};
    auto v = reap::util::cgroup_memory_limit(self, fake_read);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->bytes, 838860800u);
    // v1's "no limit" is a page-rounded LONG_MAX
    g_files = {{"/sys/fs/cgroup/memory/reap-bench/memory.limit_in_bytes", "9223372036854771712\n"}};
    EXPECT_FALSE(reap::util::cgroup_memory_limit(self, fake_read).has_value());
    // no memory controller line, or its file absent: nothing known
    g_files = {};
    EXPECT_FALSE(reap::util::cgroup_memory_limit(self, fake_read).has_value());
    EXPECT_FALSE(reap::util::cgroup_memory_limit("12:pids:/x\n", fake_read).has_value());
    EXPECT_FALSE(reap::util::cgroup_memory_limit("garbage\n", fake_read).has_value());
}

TEST(Memory, LiveCallIsAtMostMemAvailable) {
    std::ifstream f("/proc/meminfo");
    ASSERT_TRUE(f) << "/proc/meminfo";
    std::stringstream ss;
    ss << f.rdbuf();
    const auto mine = reap::util::meminfo_available(ss.str());
    ASSERT_TRUE(mine.has_value());
    const auto v = reap::util::available_memory();
    ASSERT_TRUE(v.has_value());
    // MemAvailable moves between the two reads; the cgroup limit can only lower it
    EXPECT_LE(v->bytes, *mine + (256ull << 20));
    EXPECT_GT(v->bytes, 0u);
}

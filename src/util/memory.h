// How much memory this process may fill: the kernel's MemAvailable, and the
// limit of the memory cgroup the process runs in (cgroup v2 memory.max, or v1
// memory.limit_in_bytes) less what the cgroup holds beyond its page cache,
// whichever is lower. Used to tell a user before a
// long run that the model will stream from disk (a source larger than this is
// read again for every ubatch). Linux only; elsewhere nothing is known.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace reap::util {

struct memory_limit {
    uint64_t    bytes = 0;   // the lower of the two
    std::string source;      // "MemAvailable" or the cgroup file it came from
};

// The memory available to this process, or nothing when neither source can be read.
std::optional<memory_limit> available_memory();

// Parses /proc/self/cgroup's text and the files of the memory cgroup it names,
// read through `read` (path -> contents, false when absent): the cgroup's
// limit in bytes less what it already holds other than page cache (usage less
// memory.stat's file cache: v2 memory.current and "file", v1
// memory.usage_in_bytes and "total_cache"), or nothing when there is no limit
// ("max", or v1's "unlimited" value of ~2^63). Exposed for tests, which hand
// it fake files.
std::optional<memory_limit> cgroup_memory_limit(const std::string & proc_self_cgroup,
                                                bool (*read)(const std::string & path, std::string & out));

// MemAvailable in bytes from /proc/meminfo's text, or nothing.
std::optional<uint64_t> meminfo_available(const std::string & meminfo);

}  // namespace reap::util

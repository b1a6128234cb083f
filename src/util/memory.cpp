// The memory available to this process: MemAvailable and the memory cgroup's
// limit. See memory.h.
#include "util/memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace reap::util {

namespace {

bool read_proc_file(const std::string & path, std::string & out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
}

// A decimal byte count (whitespace around it allowed), or nothing.
std::optional<uint64_t> parse_bytes(const std::string & text) {
    size_t i = 0;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    uint64_t v = 0;
    size_t   digits = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
        if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
        v = v * 10 + (uint64_t) (text[i] - '0');
    }
    if (digits == 0) return std::nullopt;
    return v;
}

}  // namespace

std::optional<uint64_t> meminfo_available(const std::string & meminfo) {
    std::istringstream in(meminfo);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("MemAvailable:", 0) != 0) continue;
        const auto kib = parse_bytes(line.substr(13));
        if (!kib || *kib > UINT64_MAX / 1024) return std::nullopt;
        return *kib * 1024;
    }
    return std::nullopt;
}

std::optional<memory_limit> cgroup_memory_limit(const std::string & proc_self_cgroup,
                                                bool (*read)(const std::string &, std::string &)) {
    // Lines are "ID:CONTROLLERS:PATH": v2 has "0::PATH", v1 a line whose
    // controllers include "memory".
    std::istringstream in(proc_self_cgroup);
    std::string line;
    while (std::getline(in, line)) {
        const size_t a = line.find(':');
        const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string ctrls = line.substr(a + 1, b - a - 1);
        const std::string path  = line.substr(b + 1);
        std::string dir, file, usage_file, cache_key, text;
        if (ctrls.empty()) {
            dir        = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
            file       = dir + "/memory.max";
            usage_file = dir + "/memory.current";
            cache_key  = "file";
        } else {
            bool memory = false;
            std::istringstream cs(ctrls);
            std::string c;
            while (std::getline(cs, c, ',')) memory |= c == "memory";
            if (!memory) continue;
            dir        = "/sys/fs/cgroup/memory" + (path == "/" ? std::string() : path);
            file       = dir + "/memory.limit_in_bytes";
            usage_file = dir + "/memory.usage_in_bytes";
            cache_key  = "total_cache";
        }
        if (!read(file, text)) continue;
        const auto v = parse_bytes(text);
        // "max" (v2) does not parse; v1 says "no limit" with a value near 2^63
        if (!v || *v >= (1ull << 62)) continue;
        // less what the cgroup already holds, but for its page cache (the
        // kernel reclaims that before it kills)
        uint64_t in_use = 0;
        if (read(usage_file, text)) {
            const auto used = parse_bytes(text);
            uint64_t cache = 0;
            if (used && read(dir + "/memory.stat", text)) {
                std::istringstream st(text);
                std::string key, value;
                while (st >> key >> value) {
                    if (key != cache_key) continue;
                    if (const auto c = parse_bytes(value)) cache = *c;
                    break;
                }
            }
            if (used) in_use = *used - std::min(*used, cache);
        }
        if (in_use == 0) return memory_limit{*v, file};
        return memory_limit{*v - std::min(*v, in_use), file + " less " + std::to_string(in_use) + " bytes in use"};
    }
    return std::nullopt;
}

std::optional<memory_limit> available_memory() {
    std::optional<memory_limit> best;
    std::string text;
    if (read_proc_file("/proc/meminfo", text)) {
        if (const auto v = meminfo_available(text)) best = memory_limit{*v, "MemAvailable"};
    }
    if (read_proc_file("/proc/self/cgroup", text)) {
        const auto cg = cgroup_memory_limit(text, read_proc_file);
        if (cg && (!best || cg->bytes < best->bytes)) best = cg;
    }
    return best;
}

}  // namespace reap::util

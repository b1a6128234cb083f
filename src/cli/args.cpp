// The shared steps of the reap subcommands: see args.h.
#include "cli/args.h"

#include <cerrno>
#include <cstdlib>

namespace reap::cli {

bool take_value(int argc, char ** argv, int & i, std::string & dst, std::string & err) {
    if (i + 1 >= argc) {
        err = std::string(argv[i]) + " needs a value";
        return false;
    }
    dst = argv[++i];
    return true;
}

bool parse_positive(const std::string & option, const std::string & s, int64_t max, int64_t & out, std::string & err) {
    char * end = nullptr;
    errno = 0;
    const long long v = s.empty() ? 0 : strtoll(s.c_str(), &end, 10);
    if (s.empty() || errno || *end || v < 1 || v > max) {
        err = option + ": '" + s + "' is not a positive integer";
        return false;
    }
    out = v;
    return true;
}

std::vector<std::string> split_list(const std::string & s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t comma = s.find(',', start);
        const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) out.push_back(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

int usage_error(const char * cmd, const std::string & msg, const char * usage_line) {
    fprintf(stderr, "reap %s: %s\n%s  (--help for details)\n", cmd, msg.c_str(), usage_line);
    return 1;
}

int usage_error_full(const char * cmd, const std::string & msg, const char * usage) {
    fprintf(stderr, "reap %s: %s\n\n%s", cmd, msg.c_str(), usage);
    return 1;
}

int fail(const char * cmd, const std::string & msg) {
    fprintf(stderr, "reap %s: %s\n", cmd, msg.c_str());
    return 1;
}

std::string human_bytes(uint64_t bytes) {
    const char * units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    char buf[64];
    snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
    return buf;
}

} // namespace reap::cli

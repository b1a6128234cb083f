// The one place reap turns byte counts and large integers into text (see number_format.h).
#include "util/number_format.h"

#include <cstdio>

namespace reap::util {

size_unit decimal_unit(uint64_t bytes) {
    static const size_unit units[] = {{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}};
    for (const size_unit & u : units) {
        if ((double) bytes >= u.bytes) return u;
    }
    return size_unit{};
}

std::string format_size(uint64_t bytes) {
    const size_unit dec = decimal_unit(bytes);
    if (dec.bytes == 1) return std::to_string(bytes) + " B";
    static const char * const binary[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double b = (double) bytes;
    int bi = 0;
    while (b >= 1024.0 && bi < 4) {
        b /= 1024.0;
        ++bi;
    }
    char buf[96];
    snprintf(buf, sizeof(buf), "%.2f %s (%.2f %s)", (double) bytes / dec.bytes, dec.name, b, binary[bi]);
    return buf;
}

std::string group_digits(int64_t v) {
    // the magnitude as unsigned, so that INT64_MIN has one too
    const uint64_t mag = v < 0 ? 0 - (uint64_t) v : (uint64_t) v;
    const std::string d = std::to_string(mag);
    std::string out = v < 0 ? "-" : "";
    for (size_t i = 0; i < d.size(); ++i) {
        if (i && (d.size() - i) % 3 == 0) out += ',';
        out += d[i];
    }
    return out;
}

} // namespace reap::util

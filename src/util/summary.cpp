// Summaries of long lists for terminal reports (see summary.h).
#include "util/summary.h"

#include <algorithm>
#include <cstdio>

namespace reap::util {

summary summarize(std::vector<double> v) {
    summary s;
    s.count = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    s.min = v.front();
    s.max = v.back();
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / double(n);
    return s;
}

std::string first_few(const std::vector<std::string> & items) {
    const size_t show = items.size() <= k_list_full ? items.size() : k_list_first;
    std::string out;
    for (size_t i = 0; i < show; ++i) out += (i ? ", " : "") + items[i];
    if (show < items.size()) out += ", ... (+" + std::to_string(items.size() - show) + " more)";
    return out;
}

std::string min_median_max(const summary & s, const char * fmt) {
    char a[64], b[64], c[64];
    snprintf(a, sizeof(a), fmt, s.min);
    snprintf(b, sizeof(b), fmt, s.median);
    snprintf(c, sizeof(c), fmt, s.max);
    return std::string("min ") + a + ", median " + b + ", max " + c;
}

} // namespace reap::util

// Small string helpers shared by the core libraries (saliency, plan, ...).
#pragma once

#include <string>
#include <vector>

namespace reap::util {

// The items of `v` separated by `sep`: join({"a", "b"}) == "a, b".
inline std::string join(const std::vector<std::string> & v, const char * sep = ", ") {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += sep;
        out += v[i];
    }
    return out;
}

} // namespace reap::util

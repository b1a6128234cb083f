// The one way reap turns JSON into text: names read from files (an arch, a
// tensor or file name, a corpus domain) need not be valid UTF-8, and
// nlohmann's dump() throws on invalid UTF-8 by default; here invalid bytes
// become U+FFFD instead, so `inspect --json`, plans, reports and records
// never abort on a hostile name.
#pragma once

#include <string>

namespace reap::util {

// j.dump(indent) with invalid UTF-8 replaced (J: nlohmann::json or ordered_json).
template <class J>
std::string json_text(const J & j, int indent = -1) {
    return j.dump(indent, ' ', false, J::error_handler_t::replace);
}

} // namespace reap::util

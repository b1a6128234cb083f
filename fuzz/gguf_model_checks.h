// What the GGUF harnesses do with a path: open it as a model and, when it is
// accepted, run the layout, the census, the memory parser on the same bytes
// and a bounded read of every tensor, as inspect, plan and prune would.
#pragma once

#include "gguf/gguf.h"
#include "moe/census.h"
#include "plan/plan.h"

#include <algorithm>
#include <string>
#include <vector>

namespace reap_fuzz {

inline void exercise_model(const std::string & path) {
    reap::gguf::model m;
    std::string err;
    if (!reap::gguf::open_model(path, m, err)) {
        return;
    }
    reap::moe::layout lay;
    if (reap::model_layout(m, lay, err)) {
        reap::moe::census c;
        if (reap::moe::take_census(m, {1, 2}, c, err)) {
            (void) reap::moe::census_json(c);
        }
    }
    std::vector<uint8_t> buf;
    for (const auto & t : m.tensors) {
        const uint64_t n = std::min<uint64_t>(t.nbytes, 64);
        buf.resize(n);
        (void) reap::gguf::read_tensor_bytes(m, t, t.nbytes - n, n, buf.data(), err);
    }
}

}  // namespace reap_fuzz

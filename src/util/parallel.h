// Runs the rows of one batch on several threads: fn(i) for i in [0, n) on up
// to n_threads threads (the caller's among them), each taking the next index
// until none is left. For work that is even per row and short-lived (a row's
// log-softmax, its KLD); no pool outlives the call.
#pragma once

#include <functional>

namespace reap::util {

void parallel_for(int n, int n_threads, const std::function<void(int)> & fn);

}  // namespace reap::util

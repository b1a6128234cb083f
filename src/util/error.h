// The error of a library call that does a command's work (prune, plan,
// compare): a kind, so that the command maps a failure to its exit status
// without reading the message, and the message the command prints.
#pragma once

#include <string>
#include <utility>

namespace reap::util {

enum class error_kind {
    usage,    // the request cannot be served as asked (options the inputs cannot satisfy)
    input,    // an input cannot be read, is malformed, or does not fit the other inputs
    output,   // an output is refused (the output rule) or cannot be written
};

struct error {
    error_kind  kind = error_kind::input;
    std::string message;
};

// Sets `e` and returns false, so a stage fails in one line:
//   if (!read_plan(path, p, msg)) return fail_with(err, error_kind::input, msg);
inline bool fail_with(error & e, error_kind kind, std::string message) {
    e.kind = kind;
    e.message = std::move(message);
    return false;
}

} // namespace reap::util

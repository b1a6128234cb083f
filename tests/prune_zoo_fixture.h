// The zoo of small models that test_prune and test_cli_prune prune (one
// folder, made once by tools/make_zoo.py), and opening a model inside a test.
#pragma once

#include "gguf/gguf.h"
#include "prune_test_util.h"

#include <gtest/gtest.h>

#include <string>

namespace prune_test {

inline std::string zoo_or_skip(std::string & err) { return zoo_dir("prune-zoo", err); }

// Opens `path` as a model, failing the test on error.
inline reap::gguf::model open(const std::string & path) {
    reap::gguf::model m;
    std::string err;
    EXPECT_TRUE(reap::gguf::open_model(path, m, err)) << err;
    return m;
}

} // namespace prune_test

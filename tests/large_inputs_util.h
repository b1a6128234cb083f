// large_inputs_util.h: what the large-input tests (test_large_inputs.cpp, in
// process; test_cli_large_inputs.cpp, through the reap binary) build their
// sparse fixtures with: a blank (sparse) file, tensors whose data are zeros
// from it or values in memory, and one write of a spec.
#pragma once

#include "gguf_test_util.h"

#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fcntl.h>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace large_inputs {

inline std::string read_text(const std::string & path) {
    const auto b = gguf_test::read_all(path);
    return std::string(b.begin(), b.end());
}

// A sparse file of `n` zero bytes (nothing allocated).
inline void blank_file(const std::string & path, uint64_t n) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, (off_t) n), 0);
    ::close(fd);
}

inline reap::gguf::output_tensor tensor(const std::string & name, reap::gguf::tensor_type type, std::vector<int64_t> ne) {
    reap::gguf::output_tensor t;
    t.name = name;
    t.type = type;
    t.n_dims = (uint32_t) ne.size();
    for (size_t d = 0; d < ne.size(); ++d) t.ne[d] = ne[d];
    return t;
}

inline uint64_t nbytes_of(const reap::gguf::output_tensor & t) {
    uint64_t n = 0;
    std::string err;
    EXPECT_TRUE(reap::gguf::tensor_nbytes(t.type, t.n_dims, t.ne, n, err)) << err;
    return n;
}

// Data from a blank (sparse) file: zeros that cost no disk.
inline reap::gguf::output_tensor blank_tensor(reap::gguf::output_tensor t, const std::string & blank) {
    t.pieces.push_back({blank, 0, nbytes_of(t)});
    return t;
}

inline reap::gguf::output_tensor memory_tensor(reap::gguf::output_tensor t, const std::vector<float> & v) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(float));
    memcpy(bytes->data(), v.data(), bytes->size());
    t.memory = bytes;
    return t;
}

inline void write_spec(const reap::gguf::output_spec & spec, const std::string & path) {
    std::string err;
    ASSERT_TRUE(gguf_test::write_fixture(spec, path, err)) << err;
}

} // namespace large_inputs

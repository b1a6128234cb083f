// Pieces shared by the reader and the writer of reap::gguf (not public API):
// positioned reads from a file or a memory image, and the parser of one KV
// value that both the reader and the writer's validation of raw bytes use.
#pragma once

#include "gguf/gguf.h"

#include <string>

namespace reap::gguf::detail {

// Random-access bytes: a file read with pread, or memory.
class byte_source {
public:
    virtual ~byte_source() = default;
    virtual uint64_t size() const = 0;
    // Reads exactly n bytes at `offset` (the caller checked the range); false on an I/O error.
    virtual bool read_at(uint64_t offset, void * dst, size_t n) = 0;
};

class memory_source final : public byte_source {
public:
    memory_source(const uint8_t * data, size_t size) : data_(data), size_(size) {}
    uint64_t size() const override { return size_; }
    bool read_at(uint64_t offset, void * dst, size_t n) override;
private:
    const uint8_t * data_;
    size_t          size_;
};

class fd_source final : public byte_source {
public:
    fd_source(int fd, uint64_t size) : fd_(fd), size_(size) {}
    uint64_t size() const override { return size_; }
    bool read_at(uint64_t offset, void * dst, size_t n) override;
private:
    int      fd_;
    uint64_t size_;
};

// Reads exactly n bytes at offset from fd (retrying short reads and EINTR).
bool pread_full(int fd, void * dst, size_t n, uint64_t offset);
// Writes exactly n bytes to fd (retrying short writes and EINTR).
bool write_full(int fd, const void * src, size_t n);

// Checks that `e.raw` is a well-formed value of `e.type` (and, for arrays,
// agrees with elem_type and n_elems). On failure `err` names the key.
bool validate_kv_raw(const kv & e, std::string & err);

inline uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

} // namespace reap::gguf::detail

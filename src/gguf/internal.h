// Pieces shared by the reader, the writer and the KV code of reap::gguf (not
// public API): positioned reads from a file or a memory image, the size of a
// scalar value type, and the parser of one KV value that both the reader and
// the writer's validation of raw bytes use.
#pragma once

#include "gguf/gguf.h"

#include <cstring>
#include <string>
#include <vector>

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

// Appends v to `b` as its bytes in the file (little-endian, as the host).
template <typename T> void put(std::vector<uint8_t> & b, T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
}

// Appends a GGUF string: its u64 length, then its bytes.
inline void put_string(std::vector<uint8_t> & b, const std::string & s) {
    put<uint64_t>(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
}

// Bytes of one value of a fixed-size type (U8 .. F64, BOOL); 0 for STRING, ARRAY
// and unknown types.
inline size_t scalar_size(value_type t) {
    switch (t) {
        case value_type::U8: case value_type::I8: case value_type::BOOL: return 1;
        case value_type::U16: case value_type::I16: return 2;
        case value_type::U32: case value_type::I32: case value_type::F32: return 4;
        case value_type::U64: case value_type::I64: case value_type::F64: return 8;
        default: return 0;
    }
}

// Checks that `e.raw` is a well-formed value of `e.type` (and, for arrays,
// agrees with elem_type and n_elems). On failure `err` names the key.
bool validate_kv_raw(const kv & e, std::string & err);

inline uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

} // namespace reap::gguf::detail

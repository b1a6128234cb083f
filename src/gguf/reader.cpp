// The GGUF reader: parses one file's header and checks it against the file's
// size before anything is trusted, then opens split sets as one model.
//
// Checks, in file order (each failure names the file, the object and where):
//   magic "GGUF"; version 2 or 3; n_tensors and n_kv small enough that their
//   minimal encodings fit the bytes left; every string/array length within
//   the bytes left; non-empty unique keys; known value types; no nested
//   arrays; non-empty unique tensor names shorter than 64 bytes; n_dims 1..4;
//   ne >= 0 with overflow-checked element and byte counts; known ggml type
//   with ne[0] a multiple of its block size; general.alignment a u32 power
//   of two <= 1 MiB; tensor offsets aligned, in order and non-overlapping;
//   all tensor data inside the file.
#include "gguf/internal.h"
#include "util/file.h"
#include "util/path.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

namespace reap::gguf {

namespace detail {

bool memory_source::read_at(uint64_t offset, void * dst, size_t n) {
    if (offset > size_ || n > size_ - offset) return false;
    if (n) std::memcpy(dst, data_ + offset, n);
    return true;
}

bool fd_source::read_at(uint64_t offset, void * dst, size_t n) {
    if (offset > size_ || n > size_ - offset) return false;
    return util::pread_full(fd_, dst, n, offset);
}

} // namespace detail

namespace {

using detail::byte_source;
using detail::scalar_size;

constexpr uint64_t k_max_string_bytes = 1ull << 30;   // no key, name or value string is larger
constexpr uint64_t k_min_kv_bytes     = 8 + 1 + 4 + 1;           // key length, 1-byte key, type, 1-byte value
constexpr uint64_t k_min_tensor_bytes = 8 + 1 + 4 + 8 + 4 + 8;   // name length, name, n_dims, ne[0], type, offset

bool known_value_type(uint32_t t) { return t <= (uint32_t) value_type::F64; }

std::string printable_quoted(const std::string & s) {
    std::string out = "'";
    for (char c : s.substr(0, 80)) {
        out += (c >= 32 && c < 127) ? c : '?';
    }
    if (s.size() > 80) out += "...";
    return out + "'";
}

// A forward reader over a byte_source with a bounded read-ahead buffer. Every
// read is checked against the bytes left; when `capture` is set, the bytes
// read are also appended to it (to keep a KV's raw value).
class cursor {
public:
    // The buffer is never larger than the source: a KV's raw value (a few
    // bytes, validated once per KV when a file is written) needs no 64 KiB.
    explicit cursor(byte_source & src) : src_(src), buf_((size_t) std::min<uint64_t>(1 << 16, src.size())) {}

    uint64_t pos() const { return pos_; }
    uint64_t size() const { return src_.size(); }
    uint64_t remaining() const { return src_.size() - pos_; }
    std::vector<uint8_t> * capture = nullptr;

    // Reads n bytes; false when fewer remain or on an I/O error (io_error tells which).
    bool read(void * dst, size_t n) {
        if (n > remaining()) return false;
        uint8_t * out = static_cast<uint8_t *>(dst);
        size_t left = n;
        while (left > 0) {
            if (pos_ < buf_start_ || pos_ >= buf_start_ + buf_len_) {
                if (left >= buf_.size()) {    // large read: straight into the destination
                    if (!src_.read_at(pos_, out, left)) { io_error = true; return false; }
                    if (capture) capture->insert(capture->end(), out, out + left);
                    pos_ += left;
                    return true;
                }
                const size_t want = (size_t) std::min<uint64_t>(buf_.size(), remaining());
                if (!src_.read_at(pos_, buf_.data(), want)) { io_error = true; return false; }
                buf_start_ = pos_;
                buf_len_ = want;
            }
            const size_t at = (size_t) (pos_ - buf_start_);
            const size_t take = std::min(left, buf_len_ - at);
            std::memcpy(out, buf_.data() + at, take);
            if (capture) capture->insert(capture->end(), out, out + take);
            out += take;
            left -= take;
            pos_ += take;
        }
        return true;
    }

    template <typename T> bool read(T & v) { return read(&v, sizeof(T)); }

    bool io_error = false;

private:
    byte_source &        src_;
    std::vector<uint8_t> buf_;
    uint64_t             buf_start_ = 0;
    size_t               buf_len_ = 0;
    uint64_t             pos_ = 0;
};

// The header parser. `fail` builds "<name>: <message>" into err.
class parser {
public:
    parser(byte_source & src, const std::string & name, std::string & err) : cur_(src), name_(name), err_(err) {}

    bool parse(file_header & out);

    // Reads one value of type `type` (an array's element type and count
    // included) for key `key`; the caller set cur_.capture to collect the bytes.
    bool read_value(const std::string & key, value_type type, kv & e);

    uint64_t position() const { return cur_.pos(); }

private:
    // The stages of parse, in file order.
    bool parse_preamble(file_header & out, uint64_t & n_tensors, uint64_t & n_kv);
    bool parse_kvs(file_header & out, uint64_t n_kv);
    bool parse_tensor_infos(file_header & out, uint64_t n_tensors);
    bool parse_alignment(file_header & out);
    bool check_data_ranges(file_header & out);

    bool fail(const std::string & msg) {
        err_ = name_ + ": " + msg;
        return false;
    }
    bool truncated(const std::string & what, uint64_t need) {
        if (cur_.io_error) return fail("read error at offset " + std::to_string(cur_.pos()) + " (" + what + "): " + strerror(errno));
        return fail("truncated: " + what + " needs " + std::to_string(need) + " bytes at offset " +
                    std::to_string(cur_.pos()) + ", only " + std::to_string(cur_.remaining()) + " left (file size " +
                    std::to_string(cur_.size()) + ")");
    }
    template <typename T> bool read_num(T & v, const std::string & what) {
        if (!cur_.read(v)) return truncated(what, sizeof(T));
        return true;
    }
    bool read_string(std::string & s, const std::string & what) {
        const uint64_t at = cur_.pos();
        uint64_t len = 0;
        if (!read_num(len, what + " length")) return false;
        if (len > cur_.remaining() || len > k_max_string_bytes) {
            return fail(what + ": string length " + std::to_string(len) + " at offset " + std::to_string(at) +
                        " runs past end of file (" + std::to_string(cur_.remaining()) + " bytes left)");
        }
        s.resize((size_t) len);
        if (!cur_.read(s.data(), (size_t) len)) return truncated(what, len);
        return true;
    }

    cursor              cur_;
    const std::string & name_;
    std::string &       err_;
};

bool parser::read_value(const std::string & key, value_type type, kv & e) {
    const std::string what = "key " + printable_quoted(key);
    const uint64_t at = cur_.pos();
    if (type == value_type::STRING) {
        std::string s;
        return read_string(s, what + " value");
    }
    if (type != value_type::ARRAY) {
        uint8_t tmp[8];
        const size_t sz = scalar_size(type);
        if (!cur_.read(tmp, sz)) return truncated(what + " value", sz);
        return true;
    }
    uint32_t elem = 0;
    if (!read_num(elem, what + " array element type")) return false;
    if (!known_value_type(elem)) {
        return fail(what + ": unknown array element type " + std::to_string(elem) + " at offset " + std::to_string(at));
    }
    if ((value_type) elem == value_type::ARRAY) {
        return fail(what + ": nested array (array of arrays) at offset " + std::to_string(at) + " is not supported");
    }
    uint64_t n = 0;
    if (!read_num(n, what + " array length")) return false;
    const uint64_t min_elem = (value_type) elem == value_type::STRING ? 8 : scalar_size((value_type) elem);
    if (n > cur_.remaining() / min_elem) {
        return fail(what + ": array length " + std::to_string(n) + " at offset " + std::to_string(at + 4) +
                    " cannot fit in the " + std::to_string(cur_.remaining()) + " bytes left in the file");
    }
    e.elem_type = (value_type) elem;
    e.n_elems = n;
    if ((value_type) elem == value_type::STRING) {
        std::string s;
        for (uint64_t i = 0; i < n; ++i) {
            if (!read_string(s, what + " element " + std::to_string(i))) return false;
        }
        return true;
    }
    // Fixed-size elements: read in chunks so that the capture grows with real bytes only.
    uint64_t left = n * min_elem;
    uint8_t chunk[4096];
    while (left > 0) {
        const size_t take = (size_t) std::min<uint64_t>(left, sizeof(chunk));
        if (!cur_.read(chunk, take)) return truncated(what + " array data", left);
        left -= take;
    }
    return true;
}

bool parser::parse(file_header & out) {
    out.file_size = cur_.size();
    uint64_t n_tensors = 0, n_kv = 0;
    return parse_preamble(out, n_tensors, n_kv) && parse_kvs(out, n_kv) && parse_tensor_infos(out, n_tensors) &&
           parse_alignment(out) && check_data_ranges(out);
}

// Magic, version and the two counts, checked against the bytes left.
bool parser::parse_preamble(file_header & out, uint64_t & n_tensors, uint64_t & n_kv) {
    char magic[4];
    if (!cur_.read(magic, 4)) return truncated("magic", 4);
    if (std::memcmp(magic, "GGUF", 4) != 0) {
        char hex[32];
        snprintf(hex, sizeof(hex), "%02x %02x %02x %02x", (uint8_t) magic[0], (uint8_t) magic[1], (uint8_t) magic[2],
                 (uint8_t) magic[3]);
        return fail(std::string("bad magic ") + hex + " (expected 'GGUF' = 47 47 55 46): not a GGUF file");
    }
    if (!read_num(out.version, "version")) return false;
    if (out.version != 2 && out.version != 3) {
        if (out.version == 0x02000000u || out.version == 0x03000000u) {
            return fail("GGUF version " + std::to_string(out.version) + " looks like a big-endian file, which is not supported");
        }
        return fail("unsupported GGUF version " + std::to_string(out.version) + " (only versions 2 and 3 are read)");
    }
    if (!read_num(n_tensors, "tensor count")) return false;
    if (!read_num(n_kv, "kv count")) return false;
    const uint64_t left = cur_.remaining();
    if (n_tensors > left / k_min_tensor_bytes) {
        return fail("n_tensors = " + std::to_string(n_tensors) + " cannot fit in the " + std::to_string(left) +
                    " bytes left after the header (each tensor info takes at least " + std::to_string(k_min_tensor_bytes) + ")");
    }
    if (n_kv > left / k_min_kv_bytes || n_kv * k_min_kv_bytes + n_tensors * k_min_tensor_bytes > left) {
        return fail("n_kv = " + std::to_string(n_kv) + " cannot fit in the " + std::to_string(left) +
                    " bytes left after the header (each kv takes at least " + std::to_string(k_min_kv_bytes) + ")");
    }
    return true;
}

bool parser::parse_kvs(file_header & out, uint64_t n_kv) {
    std::unordered_map<std::string, uint64_t> key_index;
    out.kvs.entries.clear();
    out.kvs.entries.reserve((size_t) n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
        const uint64_t at = cur_.pos();
        kv e;
        if (!read_string(e.key, "kv #" + std::to_string(i) + " key")) return false;
        if (e.key.empty()) return fail("kv #" + std::to_string(i) + " at offset " + std::to_string(at) + " has an empty key");
        auto [it, inserted] = key_index.emplace(e.key, i);
        if (!inserted) {
            return fail("duplicate key " + printable_quoted(e.key) + " (kv #" + std::to_string(i) + " at offset " +
                        std::to_string(at) + ", first as kv #" + std::to_string(it->second) + ")");
        }
        uint32_t type = 0;
        if (!read_num(type, "key " + printable_quoted(e.key) + " type")) return false;
        if (!known_value_type(type)) {
            return fail("key " + printable_quoted(e.key) + ": unknown value type " + std::to_string(type) + " at offset " +
                        std::to_string(cur_.pos() - 4));
        }
        e.type = (value_type) type;
        cur_.capture = &e.raw;
        const bool ok = read_value(e.key, e.type, e);
        cur_.capture = nullptr;
        if (!ok) return false;
        out.kvs.entries.push_back(std::move(e));
    }
    return true;
}

bool parser::parse_tensor_infos(file_header & out, uint64_t n_tensors) {
    std::unordered_map<std::string, uint64_t> tensor_index;
    out.tensors.clear();
    out.tensors.reserve((size_t) n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        const uint64_t at = cur_.pos();
        tensor_info t;
        const std::string tag = "tensor #" + std::to_string(i);
        if (!read_string(t.name, tag + " name")) return false;
        if (t.name.empty()) return fail(tag + " at offset " + std::to_string(at) + " has an empty name");
        if (t.name.size() > k_max_name_bytes) {
            return fail(tag + " name " + printable_quoted(t.name) + " is " + std::to_string(t.name.size()) +
                        " bytes; ggml allows at most " + std::to_string(k_max_name_bytes));
        }
        auto [it, inserted] = tensor_index.emplace(t.name, i);
        if (!inserted) {
            return fail("duplicate tensor name " + printable_quoted(t.name) + " (" + tag + " at offset " + std::to_string(at) +
                        ", first as tensor #" + std::to_string(it->second) + ")");
        }
        const std::string what = "tensor " + printable_quoted(t.name);
        if (!read_num(t.n_dims, what + " n_dims")) return false;
        if (t.n_dims < 1 || t.n_dims > k_max_dims) {
            return fail(what + ": n_dims = " + std::to_string(t.n_dims) + " outside 1..4 (offset " +
                        std::to_string(cur_.pos() - 4) + ")");
        }
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            if (!read_num(t.ne[d], what + " ne[" + std::to_string(d) + "]")) return false;
        }
        uint32_t type = 0;
        if (!read_num(type, what + " type")) return false;
        if (!find_type(type)) {
            return fail(what + ": unknown or removed ggml type " + std::to_string(type) + " (offset " +
                        std::to_string(cur_.pos() - 4) + ")");
        }
        t.type = (tensor_type) type;
        if (!read_num(t.offset, what + " offset")) return false;
        std::string shape_err;
        if (!tensor_nbytes(t.type, t.n_dims, t.ne, t.nbytes, shape_err, what + " " + t.shape_string() + " " +
                           type_name(t.type))) {
            return fail(shape_err);
        }
        out.tensors.push_back(std::move(t));
    }
    out.header_bytes = cur_.pos();
    return true;
}

// general.alignment (a u32 power of two, at most k_max_alignment) and the data offset it gives.
bool parser::parse_alignment(file_header & out) {
    out.alignment = k_default_alignment;
    if (const kv * a = out.kvs.find(k_key_alignment)) {
        if (a->type != value_type::U32) {
            return fail(std::string(k_key_alignment) + " has type " + a->type_string() + ", expected u32");
        }
        uint32_t v = 0;
        std::memcpy(&v, a->raw.data(), 4);
        if (v == 0 || (v & (v - 1)) != 0) {
            return fail(std::string(k_key_alignment) + " = " + std::to_string(v) + " is not a power of two");
        }
        if (v > k_max_alignment) {
            return fail(std::string(k_key_alignment) + " = " + std::to_string(v) + " exceeds the limit of " +
                        std::to_string(k_max_alignment));
        }
        out.alignment = v;
    }
    out.data_offset = detail::align_up(out.header_bytes, out.alignment);
    return true;
}

// Every tensor's data aligned, in order, non-overlapping and inside the file.
bool parser::check_data_ranges(file_header & out) {
    if (!out.tensors.empty() && out.data_offset > out.file_size) {
        return fail("data section starts at offset " + std::to_string(out.data_offset) + ", past end of file (size " +
                    std::to_string(out.file_size) + ")");
    }
    uint64_t min_next = 0;
    const tensor_info * prev = nullptr;
    for (tensor_info & t : out.tensors) {
        const std::string what = "tensor " + printable_quoted(t.name);
        if (t.offset % out.alignment != 0) {
            return fail(what + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                        std::to_string(out.alignment));
        }
        if (t.offset < min_next) {
            return fail(what + ": data at offset " + std::to_string(t.offset) + " overlaps or precedes tensor " +
                        printable_quoted(prev->name) + " (data section [" + std::to_string(prev->offset) + ", " +
                        std::to_string(min_next) + ")); offsets must be increasing");
        }
        if (t.offset > out.file_size - out.data_offset || t.nbytes > out.file_size - out.data_offset - t.offset) {
            const unsigned __int128 begin = (unsigned __int128) out.data_offset + t.offset;
            const unsigned __int128 end = begin + t.nbytes;
            auto u128 = [](unsigned __int128 v) {
                if (v <= std::numeric_limits<uint64_t>::max()) return std::to_string((uint64_t) v);
                return std::string("2^64+");
            };
            return fail(what + ": data [" + u128(begin) + ", " + u128(end) + ") ends past end of file (size " +
                        std::to_string(out.file_size) + ")");
        }
        t.file_offset = out.data_offset + t.offset;
        t.shard = 0;
        min_next = t.offset + t.nbytes;
        prev = &t;
    }
    return true;
}

} // namespace

long block_index(const std::string & name, size_t & dot) {
    if (!util::starts_with(name, "blk.")) return -1;
    size_t i = 4;
    long n = 0;
    if (i >= name.size() || !isdigit((unsigned char) name[i])) return -1;
    while (i < name.size() && isdigit((unsigned char) name[i])) {
        n = n * 10 + (name[i] - '0');
        if (n > 1000000) return -1;
        ++i;
    }
    if (i >= name.size() || name[i] != '.') return -1;
    dot = i;
    return n;
}

bool detail::validate_kv_raw(const kv & e, std::string & err) {
    if (e.key.empty()) {
        err = "kv with an empty key";
        return false;
    }
    if (!known_value_type((uint32_t) e.type)) {
        err = "key " + printable_quoted(e.key) + ": unknown value type " + std::to_string((uint32_t) e.type);
        return false;
    }
    memory_source src(e.raw.data(), e.raw.size());
    std::string inner;
    const std::string name = "key " + printable_quoted(e.key) + " raw value";
    parser p(src, name, inner);
    kv probe;
    if (!p.read_value(e.key, e.type, probe)) {
        err = inner;
        return false;
    }
    // The value must use every raw byte, and an array must agree with its declared element type and count.
    if (p.position() != e.raw.size()) {
        err = "key " + printable_quoted(e.key) + ": " + std::to_string(e.raw.size() - p.position()) +
              " raw bytes left over after its " + e.type_string() + " value";
        return false;
    }
    if (e.type == value_type::ARRAY && (probe.elem_type != e.elem_type || probe.n_elems != e.n_elems)) {
        err = "key " + printable_quoted(e.key) + ": array element type/count disagree with its raw bytes";
        return false;
    }
    return true;
}

bool parse_header(const uint8_t * data, size_t size, const std::string & name, file_header & out, std::string & err) {
    detail::memory_source src(data, size);
    out = file_header{};
    out.path = name;
    parser p(src, name, err);
    return p.parse(out);
}

bool read_header(const std::string & path, file_header & out, std::string & err) {
    const int fd = util::open_input(path, err);   // refuses a FIFO or device before it can block
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        err = path + ": cannot stat: " + strerror(errno);
        ::close(fd);
        return false;
    }
    detail::fd_source src(fd, (uint64_t) st.st_size);
    out = file_header{};
    out.path = path;
    parser p(src, path, err);
    const bool ok = p.parse(out);
    ::close(fd);
    return ok;
}

// ---- split sets ------------------------------------------------------------------

std::string split_path(const std::string & prefix, uint32_t shard_index, uint32_t n_shards) {
    char suffix[64];
    snprintf(suffix, sizeof(suffix), "-%05u-of-%05u.gguf", shard_index + 1, n_shards);
    return prefix + suffix;
}

bool parse_split_path(const std::string & path, std::string & prefix, uint32_t & shard_index, uint32_t & n_shards) {
    // PREFIX-NNNNN-of-MMMMM.gguf with at least 5 digits each (more when the numbers need them).
    const std::string ext = ".gguf";
    if (!util::ends_with(path, ".gguf")) return false;
    const std::string stem = path.substr(0, path.size() - ext.size());
    const size_t of = stem.rfind("-of-");
    if (of == std::string::npos) return false;
    const std::string count_digits = stem.substr(of + 4);
    const size_t dash = stem.rfind('-', of == 0 ? 0 : of - 1);
    if (dash == std::string::npos || dash == 0) return false;
    const std::string no_digits = stem.substr(dash + 1, of - dash - 1);
    auto parse_num = [](const std::string & s, uint32_t & v) {
        if (s.size() < 5 || s.size() > 9) return false;
        v = 0;
        for (char c : s) {
            if (c < '0' || c > '9') return false;
            v = v * 10 + (uint32_t) (c - '0');
        }
        return true;
    };
    uint32_t no = 0, count = 0;
    if (!parse_num(no_digits, no) || !parse_num(count_digits, count) || no < 1 || count < 1 || no > count) return false;
    prefix = stem.substr(0, dash);
    shard_index = no - 1;
    n_shards = count;
    return split_path(prefix, shard_index, n_shards) == path;
}

const tensor_info * model::find_tensor(std::string_view name) const {
    if (sorted_index_.size() == tensors.size()) {
        auto it = std::lower_bound(sorted_index_.begin(), sorted_index_.end(), name,
                                   [&](size_t i, std::string_view n) { return tensors[i].name < n; });
        if (it != sorted_index_.end() && tensors[*it].name == name) return &tensors[*it];
        return nullptr;
    }
    for (const tensor_info & t : tensors) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

uint64_t model::file_bytes() const {
    uint64_t n = 0;
    for (const file_header & s : shards) n += s.file_size;
    return n;
}

uint64_t model::tensor_bytes() const {
    uint64_t n = 0;
    for (const tensor_info & t : tensors) n += t.nbytes;
    return n;
}

bool open_model(const std::string & path, model & out, std::string & err) {
    out = model{};
    file_header first;
    if (!read_header(path, first, err)) return false;

    uint32_t n_split = 1;
    if (first.kvs.has(k_key_split_count) && !first.kvs.get_u32(k_key_split_count, n_split, err)) {
        err = path + ": " + err;
        return false;
    }
    if (n_split == 0) n_split = 1;   // llama-gguf-split --merge leaves split.count = 0 in the merged file
    uint32_t split_no = 0;
    if (first.kvs.has(k_key_split_no) && !first.kvs.get_u32(k_key_split_no, split_no, err)) {
        err = path + ": " + err;
        return false;
    }
    if (n_split == 1) {
        out.shards.push_back(std::move(first));
    } else {
        std::string prefix;
        uint32_t idx = 0, count = 0;
        const bool named = parse_split_path(path, prefix, idx, count);
        if (split_no != 0) {
            err = path + ": this is shard " + std::to_string(split_no + 1) + " of " + std::to_string(n_split) +
                  " of a split model; open the first shard" +
                  (named ? " (" + split_path(prefix, 0, n_split) + ")" : std::string());
            return false;
        }
        if (!named || idx != 0 || count != n_split) {
            err = path + ": split.count = " + std::to_string(n_split) + " but the file is not named PREFIX-" +
                  split_path("", 0, n_split).substr(1) + " (needed to find the other shards)";
            return false;
        }
        uint64_t expected_tensors = 0;
        if (!first.kvs.get_u64(k_key_split_tensors_count, expected_tensors, err)) {
            err = path + ": " + err;
            return false;
        }
        out.shards.push_back(std::move(first));
        for (uint32_t i = 1; i < n_split; ++i) {
            const std::string p = split_path(prefix, i, n_split);
            file_header h;
            if (!read_header(p, h, err)) {
                err = "shard " + std::to_string(i + 1) + " of " + std::to_string(n_split) + ": " + err;
                return false;
            }
            uint32_t no = 0, cnt = 0;
            uint64_t tc = 0;
            if (!h.kvs.get_u32(k_key_split_no, no, err) || !h.kvs.get_u32(k_key_split_count, cnt, err) ||
                !h.kvs.get_u64(k_key_split_tensors_count, tc, err)) {
                err = p + ": " + err;
                return false;
            }
            if (no != i) {
                err = p + ": split.no = " + std::to_string(no) + ", expected " + std::to_string(i);
                return false;
            }
            if (cnt != n_split) {
                err = p + ": split.count = " + std::to_string(cnt) + ", but the first shard says " + std::to_string(n_split);
                return false;
            }
            if (tc != expected_tensors) {
                err = p + ": split.tensors.count = " + std::to_string(tc) + ", but the first shard says " +
                      std::to_string(expected_tensors);
                return false;
            }
            out.shards.push_back(std::move(h));
        }
        uint64_t total = 0;
        for (const file_header & h : out.shards) total += h.tensors.size();
        if (total != expected_tensors) {
            err = path + ": the " + std::to_string(n_split) + " shards hold " + std::to_string(total) +
                  " tensors, but split.tensors.count = " + std::to_string(expected_tensors);
            return false;
        }
    }

    out.kvs = out.shards[0].kvs;
    std::unordered_map<std::string, uint32_t> owner;
    for (uint32_t s = 0; s < out.shards.size(); ++s) {
        for (tensor_info t : out.shards[s].tensors) {
            t.shard = s;
            auto [it, inserted] = owner.emplace(t.name, s);
            if (!inserted) {
                err = "tensor " + printable_quoted(t.name) + " appears in shard " + std::to_string(it->second + 1) +
                      " and again in shard " + std::to_string(s + 1) + " (" + out.shards[s].path + ")";
                return false;
            }
            out.tensors.push_back(std::move(t));
        }
        for (tensor_info & t : out.shards[s].tensors) t.shard = s;
    }
    out.sorted_index_.resize(out.tensors.size());
    for (size_t i = 0; i < out.tensors.size(); ++i) out.sorted_index_[i] = i;
    std::sort(out.sorted_index_.begin(), out.sorted_index_.end(),
              [&](size_t a, size_t b) { return out.tensors[a].name < out.tensors[b].name; });
    return true;
}

bool read_tensor_bytes(const model & m, const tensor_info & t, uint64_t offset, uint64_t length, void * dst,
                       std::string & err) {
    if (t.shard >= m.shards.size()) {
        err = "tensor " + printable_quoted(t.name) + ": shard " + std::to_string(t.shard) + " out of range";
        return false;
    }
    if (offset > t.nbytes || length > t.nbytes - offset) {
        err = "tensor " + printable_quoted(t.name) + ": range [" + std::to_string(offset) + ", +" + std::to_string(length) +
              ") outside its " + std::to_string(t.nbytes) + " bytes";
        return false;
    }
    const std::string & path = m.path_of(t);
    const int fd = util::open_input(path, err);
    if (fd < 0) return false;
    const bool ok = util::pread_full(fd, dst, (size_t) length, t.file_offset + offset);
    const int saved = errno;
    ::close(fd);
    if (!ok) {
        err = path + ": cannot read tensor " + printable_quoted(t.name) + " data: " + (saved ? strerror(saved) : "short read");
        return false;
    }
    return true;
}

bool read_tensor(const model & m, std::string_view name, std::vector<uint8_t> & out, std::string & err) {
    const tensor_info * t = m.find_tensor(name);
    if (!t) {
        err = "no tensor named " + printable_quoted(std::string(name));
        return false;
    }
    out.resize((size_t) t->nbytes);
    return read_tensor_bytes(m, *t, 0, t->nbytes, out.data(), err);
}

} // namespace reap::gguf

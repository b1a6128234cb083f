// reap::gguf — reading, validating and writing GGUF files and split sets,
// without linking ggml or llama.cpp.
//
// What this gives the rest of reap.cpp:
//   * a table of every ggml tensor type (name, block size, bytes per block);
//   * read_header(): one GGUF file parsed and checked against its size (every
//     count, length, shape and offset is bounded before use, every rejection
//     names the object and where it is);
//   * open_model(): a single file or a whole split set (PREFIX-%05d-of-%05d.gguf)
//     presented as one logical model;
//   * kv_store: the metadata in file order with each value's raw bytes kept,
//     typed getters that report a wrong type instead of reinterpreting, and
//     setters for writers;
//   * write_output(): an output described as KVs + tensors whose data are
//     pieces of source files (or small in-memory buffers), streamed with
//     bounded memory to a temp file that is fsynced and renamed into place,
//     optionally split into shards the way llama.cpp's gguf-split does;
//     layout_output() gives the exact sizes without writing.
//
// Errors are values: functions return bool and fill `err` with a message that
// names the file, key or tensor involved. Nothing here exits or aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace reap::util {
class durable_file;
}

namespace reap::gguf {

// ---- constants of the format ---------------------------------------------------

constexpr uint32_t k_default_alignment = 32;         // when general.alignment is absent
constexpr uint32_t k_max_alignment     = 1u << 20;   // we reject larger general.alignment
constexpr size_t   k_max_name_bytes    = 63;         // tensor names must be < 64 bytes (GGML_MAX_NAME)
constexpr uint32_t k_max_dims          = 4;

// Keys with a meaning to this library.
constexpr const char * k_key_alignment           = "general.alignment";
constexpr const char * k_key_architecture        = "general.architecture";
constexpr const char * k_key_split_no            = "split.no";            // u16, 0-based
constexpr const char * k_key_split_count         = "split.count";         // u16
constexpr const char * k_key_split_tensors_count = "split.tensors.count"; // i32, tensors in the whole set

// ---- ggml tensor types -----------------------------------------------------------

// The ggml type ids of the pinned ggml.h (ids that ggml removed are not listed
// and are rejected by the reader).
enum class tensor_type : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
    I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

struct type_info {
    tensor_type type;
    const char * name;       // ggml's name, e.g. "q4_K", "bf16", "mxfp4"
    int64_t      block_size; // elements per block
    uint64_t     block_bytes;// bytes per block
};

// The entry for a ggml type id, or nullptr when the id is unknown or removed.
const type_info * find_type(uint32_t id);
// The entry whose name equals `name` (case-insensitive), or nullptr.
const type_info * find_type(std::string_view name);
// Every known type, in id order.
const std::vector<type_info> & all_types();
// ggml's name of a type ("?" for an unknown id).
const char * type_name(tensor_type type);

// Bytes of a tensor of `type` and shape ne[0..n_dims). Fails (with a message
// naming `what`) on an unknown type, n_dims outside 1..4, a negative ne,
// ne[0] not a multiple of the block size, or an element/byte count that
// overflows 64 bits.
bool tensor_nbytes(tensor_type type, uint32_t n_dims, const int64_t * ne, uint64_t & nbytes,
                   std::string & err, std::string_view what = "tensor");

// ---- KV metadata -----------------------------------------------------------------

// GGUF value types (the numbering of the file format).
enum class value_type : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
// "u8", "i32", "f32", "bool", "string", "array", ... ("?" when unknown).
const char * value_type_name(value_type type);

// One metadata entry. `raw` holds the value bytes exactly as they appear in
// the file after the key and the type (for an array: element type, count,
// elements; for a string: length, bytes), little-endian. Writing `key`, `type`
// and `raw` back reproduces the entry byte for byte.
struct kv {
    std::string          key;
    value_type           type = value_type::U8;
    value_type           elem_type = value_type::U8;  // element type when type == ARRAY
    uint64_t             n_elems = 0;                 // element count when type == ARRAY
    std::vector<uint8_t> raw;

    // "u32" or "array[string]" etc., for messages.
    std::string type_string() const;
    // A short human-readable rendering of the value (arrays abbreviated).
    std::string value_string(size_t max_elems = 8) const;
};

// The ordered KV list of a GGUF file. Lookups are by exact key.
//
// Getters return false and fill `err` when the key is missing or has a type
// that cannot represent the request without loss; the message names the key,
// the expected and the actual type. They never reinterpret bytes.
//   integers: any of u8..u64 / i8..i64 is accepted when the value fits the
//             requested type (converters disagree on widths; llama.cpp's own
//             loader reads e.g. split.count as u16 and expert counts as u32).
//   floats:   f32 or f64 (f64 narrowed for get_f32).
//   bool:     bool only. strings: string only.
// The `*_or` variants succeed with `fallback` when the key is absent and
// fail only when it is present with a wrong type.
class kv_store {
public:
    std::vector<kv> entries;   // in file order

    const kv * find(std::string_view key) const;   // nullptr when absent
    bool has(std::string_view key) const { return find(key) != nullptr; }
    size_t size() const { return entries.size(); }

    bool get_u32   (std::string_view key, uint32_t & out, std::string & err) const;
    bool get_u64   (std::string_view key, uint64_t & out, std::string & err) const;
    bool get_i64   (std::string_view key, int64_t  & out, std::string & err) const;
    bool get_f32   (std::string_view key, float    & out, std::string & err) const;
    bool get_f64   (std::string_view key, double   & out, std::string & err) const;
    bool get_bool  (std::string_view key, bool     & out, std::string & err) const;
    bool get_string(std::string_view key, std::string & out, std::string & err) const;
    // Arrays: element type rules as for the scalars above.
    bool get_string_array(std::string_view key, std::vector<std::string> & out, std::string & err) const;
    bool get_i64_array   (std::string_view key, std::vector<int64_t> & out, std::string & err) const;
    bool get_f64_array   (std::string_view key, std::vector<double>  & out, std::string & err) const;

    bool get_u32_or   (std::string_view key, uint32_t fallback, uint32_t & out, std::string & err) const;
    bool get_string_or(std::string_view key, const std::string & fallback, std::string & out, std::string & err) const;

    // Setters replace the value of an existing key in place (its position in
    // the order is kept) or append a new key at the end.
    void set_u8    (const std::string & key, uint8_t v);
    void set_u16   (const std::string & key, uint16_t v);
    void set_u32   (const std::string & key, uint32_t v);
    void set_i32   (const std::string & key, int32_t v);
    void set_u64   (const std::string & key, uint64_t v);
    void set_i64   (const std::string & key, int64_t v);
    void set_f32   (const std::string & key, float v);
    void set_f64   (const std::string & key, double v);
    void set_bool  (const std::string & key, bool v);
    void set_string(const std::string & key, const std::string & v);
    void set_string_array(const std::string & key, const std::vector<std::string> & v);
    void set_i32_array   (const std::string & key, const std::vector<int32_t> & v);
    void set_i64_array   (const std::string & key, const std::vector<int64_t> & v);
    void set_f32_array   (const std::string & key, const std::vector<float> & v);
    // Sets an entry from an existing one (any type), e.g. copied from another store.
    void set(const kv & entry);
    // Removes `key`; returns whether it was present.
    bool remove(std::string_view key);
};

// ---- tensors and files -------------------------------------------------------------

struct tensor_info {
    std::string name;
    uint32_t    n_dims = 1;
    int64_t     ne[k_max_dims] = {1, 1, 1, 1};   // ne[d] == 1 for d >= n_dims
    tensor_type type = tensor_type::F32;
    uint64_t    offset = 0;       // within the data section of its shard, as stored
    uint64_t    nbytes = 0;       // exact data bytes (no padding)
    uint32_t    shard = 0;        // 0-based index of the shard file holding the data
    uint64_t    file_offset = 0;  // absolute offset of the data in that file

    uint64_t n_elements() const;
    // "[4096, 128, 8]" for messages.
    std::string shape_string() const;
};

// The block index N of a tensor named "blk.N.<rest>" (N decimal, at most
// 1000000), with `dot` set to the position of the '.' after N; -1 for any
// other name.
long block_index(const std::string & name, size_t & dot);

// One parsed GGUF file (metadata only; the data are read on demand).
struct file_header {
    std::string              path;
    uint32_t                 version = 3;
    uint64_t                 file_size = 0;
    uint32_t                 alignment = k_default_alignment;
    uint64_t                 header_bytes = 0;  // bytes up to the end of the tensor infos
    uint64_t                 data_offset = 0;   // start of the data section (header_bytes aligned up)
    kv_store                 kvs;
    std::vector<tensor_info> tensors;           // in file order; shard = 0
};

// Parses and validates one GGUF file (see the file comment of reader.cpp for
// the full list of checks). Reads with pread through a bounded buffer; never
// maps the file. On failure `err` names the file, the object and the
// position ("tensor 'blk.3.ffn_up_exps.weight': data [a, b) ends past end of
// file (size c)").
bool read_header(const std::string & path, file_header & out, std::string & err);
// The same checks on a file image in memory (for tests and tools); `name`
// stands in for the path in messages.
bool parse_header(const uint8_t * data, size_t size, const std::string & name, file_header & out, std::string & err);

// A GGUF model: one file, or every shard of a split set, as one logical model.
struct model {
    std::vector<file_header> shards;   // shards[i] is shard i (0-based); one entry when unsplit
    kv_store                 kvs;      // the KVs of shard 0 (split.* keys included)
    std::vector<tensor_info> tensors;  // every tensor of the set, shard by shard, in file order

    // The tensor named `name`, or nullptr.
    const tensor_info * find_tensor(std::string_view name) const;
    // The path of the file that holds `t`'s data.
    const std::string & path_of(const tensor_info & t) const { return shards[t.shard].path; }
    // Sum of the shard file sizes.
    uint64_t file_bytes() const;
    // Sum of tensor data bytes (no padding).
    uint64_t tensor_bytes() const;

private:
    friend bool open_model(const std::string &, model &, std::string &);
    std::vector<size_t> sorted_index_;  // indexes into tensors, sorted by name
};

// Opens `path` as a model. When the file has split.count > 1 (it must then be
// shard 1, split.no == 0, named PREFIX-00001-of-0000N.gguf), every shard
// PREFIX-%05d-of-%05d.gguf is opened and checked: same split.count, split.no
// equal to its position, equal split.tensors.count matching the total number
// of tensors, no tensor name in two shards. A file with split.count absent,
// 0 or 1 is a single-file model (llama-gguf-split --merge leaves 0).
bool open_model(const std::string & path, model & out, std::string & err);

// The shard paths of a split set: PREFIX-00001-of-0000N.gguf .. (gguf-split's naming).
std::string split_path(const std::string & prefix, uint32_t shard_index, uint32_t n_shards);
// When `path` is PREFIX-%05d-of-%05d.gguf, sets prefix/shard_index (0-based)/n_shards and returns true.
bool parse_split_path(const std::string & path, std::string & prefix, uint32_t & shard_index, uint32_t & n_shards);

// Reads `length` bytes at `offset` within tensor `t`'s data into `dst`.
// Fails when the range is outside the tensor or the read comes up short.
bool read_tensor_bytes(const model & m, const tensor_info & t, uint64_t offset, uint64_t length,
                       void * dst, std::string & err);
// Reads all of tensor `name`'s data.
bool read_tensor(const model & m, std::string_view name, std::vector<uint8_t> & out, std::string & err);

// ---- writing -------------------------------------------------------------------

// A run of bytes of a source file that becomes part of an output tensor's data.
struct data_piece {
    std::string path;
    uint64_t    offset = 0;
    uint64_t    length = 0;
};

// Data made only when its tensor is written: fills `out` with the tensor's
// bytes (false with `err` when it cannot).
using tensor_producer = std::function<bool(std::vector<uint8_t> & out, std::string & err)>;

// An output tensor: metadata, and its data as the concatenation of `pieces`
// in order, or (when `memory` is set) the bytes of `memory`, or (when
// `produce` is set) what `produce` gives when the tensor is written, once;
// one of the three. The data length must equal the bytes implied by type and
// shape (a producer's is checked as it is written). A producer lets an output
// be laid out and sized (layout_output: a dry run) without its data being
// made, and keeps one such tensor's data in memory at a time while writing.
struct output_tensor {
    std::string name;
    uint32_t    n_dims = 1;
    int64_t     ne[k_max_dims] = {1, 1, 1, 1};
    tensor_type type = tensor_type::F32;
    std::vector<data_piece> pieces;
    std::shared_ptr<const std::vector<uint8_t>> memory;
    tensor_producer produce;
};

// An output: KVs in order and tensors in order. The alignment is taken from
// general.alignment in `kvs` when present (must be a u32 power of two <= 1 MiB).
struct output_spec {
    uint32_t                   version = 3;
    kv_store                   kvs;
    std::vector<output_tensor> tensors;
};

// An output tensor that copies source tensor `t` of `m` unchanged.
output_tensor copy_of(const model & m, const tensor_info & t);
// A spec that reproduces `m` as one logical model: its KVs without split.*
// keys, every tensor copied. (Splitting, if wanted, is chosen in write_options.)
output_spec spec_from_model(const model & m);

struct write_options {
    bool     force = false;               // replace an existing target (never an input)
    uint64_t split_max_bytes = 0;         // > 0: start a new shard before tensor data exceeds this
    uint64_t split_max_tensors = 0;       // > 0: at most this many tensors per shard
    bool     sync = true;                 // fsync files and their directory
    bool     copy_file_range = true;      // false: always copy through the pread/write buffer
    // non-empty: SHA256SUMS beside the output (in its directory), updated with
    // the hashes of the files written, computed as they are written (the
    // copy then goes through the buffer), and published together with them.
    std::string sums_path;
    // non-null: the files are written and finished but not published; they
    // are moved into *stage (still temp files, removed unless published) for
    // the caller to publish with another output (no sums_path then).
    std::vector<util::durable_file> * stage = nullptr;
    // with stage: the SHA-256 (hex) of each staged file, hashed as written,
    // appended here in the order of *stage.
    std::vector<std::string> * stage_sha256 = nullptr;
    // finished files that appear together with the output, in the same
    // publish (its sliced imatrix, beside it or in another folder).
    std::vector<util::durable_file *> publish_with;
    // per publish_with file (same order; shorter or "": not listed): its
    // SHA-256, listed in SHA256SUMS when the file lies beside it (every file
    // written in the folder is listed).
    std::vector<std::string> publish_with_sha256;
};

// Where an output goes, shard by shard.
struct shard_layout {
    std::string path;
    size_t      first_tensor = 0;   // index into output_spec::tensors
    size_t      n_tensors = 0;
    uint64_t    data_offset = 0;    // header bytes incl. padding
    uint64_t    file_bytes = 0;     // exact size of the file
};

// Computes exactly what write_output would write, without touching the file
// system: shard paths and file sizes. Splitting happens when
// split_max_bytes or split_max_tensors is set, following gguf-split: all KVs
// in shard 1, every shard gets split.no (u16), split.tensors.count (i32),
// split.count (u16) appended in that order (existing split.* keys are dropped
// first); a shard is closed when adding the next tensor would make its padded
// tensor data exceed split_max_bytes or its tensor count reach
// split_max_tensors (a shard always holds at least one tensor); names are
// PREFIX-%05d-of-%05d.gguf where PREFIX is `target` without a ".gguf"
// suffix, even when the result is one shard. Unsplit, the output is `target`
// itself and split.* keys of the spec are left out. Fails on invalid tensors (type, shape, name, duplicates, data
// length that does not match the shape) or KVs (bad general.alignment).
bool layout_output(const output_spec & spec, const write_options & opts, const std::string & target,
                   std::vector<shard_layout> & shards, std::string & err);

// Writes the output described by `spec`. For each shard, the one output rule
// (util::check_output): refuses when the target exists and !opts.force, and
// always when it is the same file as any source piece's file (SHA256SUMS: only
// the latter); writes each shard through a
// util::durable_file (temp file beside the target), streams the data
// (copy_file_range where the kernel allows, otherwise pread/write through a
// fixed 1 MiB buffer: memory does not grow with the model; holes of a sparse
// source are skipped with SEEK_DATA/SEEK_HOLE and stay holes), checks every
// write, fsyncs, and publishes every shard (and SHA256SUMS, with
// opts.sums_path) together through util::publish_together: a kill at any
// moment leaves the previous files or the complete new set (a journal the
// next run completes), never a mix. On failure no temp file is left and no
// target is created or replaced. `written` receives the paths written, in
// shard order; `hashes` their SHA-256 (with opts.sums_path, else empty strings).
bool write_output(const output_spec & spec, const write_options & opts, const std::string & target,
                  std::vector<std::string> & written, std::vector<std::string> & hashes, std::string & err);
bool write_output(const output_spec & spec, const write_options & opts, const std::string & target,
                  std::vector<std::string> & written, std::string & err);

} // namespace reap::gguf

// The ggml tensor type table (names, block sizes, bytes per block, as in the
// pinned ggml.h / ggml-common.h), GGUF value type names, and the overflow-
// checked byte count of a tensor. Kept here so that reap_core needs no ggml.
#include "gguf/gguf.h"

#include <cctype>
#include <limits>

namespace reap::gguf {

namespace {

const std::vector<type_info> & table() {
    static const std::vector<type_info> types = {
        {tensor_type::F32,     "f32",      1,   4},
        {tensor_type::F16,     "f16",      1,   2},
        {tensor_type::Q4_0,    "q4_0",    32,  18},
        {tensor_type::Q4_1,    "q4_1",    32,  20},
        {tensor_type::Q5_0,    "q5_0",    32,  22},
        {tensor_type::Q5_1,    "q5_1",    32,  24},
        {tensor_type::Q8_0,    "q8_0",    32,  34},
        {tensor_type::Q8_1,    "q8_1",    32,  36},
        {tensor_type::Q2_K,    "q2_K",   256,  84},
        {tensor_type::Q3_K,    "q3_K",   256, 110},
        {tensor_type::Q4_K,    "q4_K",   256, 144},
        {tensor_type::Q5_K,    "q5_K",   256, 176},
        {tensor_type::Q6_K,    "q6_K",   256, 210},
        {tensor_type::Q8_K,    "q8_K",   256, 292},
        {tensor_type::IQ2_XXS, "iq2_xxs",256,  66},
        {tensor_type::IQ2_XS,  "iq2_xs", 256,  74},
        {tensor_type::IQ3_XXS, "iq3_xxs",256,  98},
        {tensor_type::IQ1_S,   "iq1_s",  256,  50},
        {tensor_type::IQ4_NL,  "iq4_nl",  32,  18},
        {tensor_type::IQ3_S,   "iq3_s",  256, 110},
        {tensor_type::IQ2_S,   "iq2_s",  256,  82},
        {tensor_type::IQ4_XS,  "iq4_xs", 256, 136},
        {tensor_type::I8,      "i8",       1,   1},
        {tensor_type::I16,     "i16",      1,   2},
        {tensor_type::I32,     "i32",      1,   4},
        {tensor_type::I64,     "i64",      1,   8},
        {tensor_type::F64,     "f64",      1,   8},
        {tensor_type::IQ1_M,   "iq1_m",  256,  56},
        {tensor_type::BF16,    "bf16",     1,   2},
        {tensor_type::TQ1_0,   "tq1_0",  256,  54},
        {tensor_type::TQ2_0,   "tq2_0",  256,  66},
        {tensor_type::MXFP4,   "mxfp4",   32,  17},
        {tensor_type::NVFP4,   "nvfp4",   64,  36},
        {tensor_type::Q1_0,    "q1_0",   128,  18},
        {tensor_type::Q2_0,    "q2_0",    64,  18},
    };
    return types;
}

bool iequal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::tolower((unsigned char) a[i]) != std::tolower((unsigned char) b[i])) return false;
    }
    return true;
}

} // namespace

const std::vector<type_info> & all_types() { return table(); }

const type_info * find_type(uint32_t id) {
    for (const type_info & t : table()) {
        if ((uint32_t) t.type == id) return &t;
    }
    return nullptr;
}

const type_info * find_type(std::string_view name) {
    for (const type_info & t : table()) {
        if (iequal(t.name, name)) return &t;
    }
    return nullptr;
}

const char * type_name(tensor_type type) {
    const type_info * t = find_type((uint32_t) type);
    return t ? t->name : "?";
}

const char * value_type_name(value_type type) {
    switch (type) {
        case value_type::U8:     return "u8";
        case value_type::I8:     return "i8";
        case value_type::U16:    return "u16";
        case value_type::I16:    return "i16";
        case value_type::U32:    return "u32";
        case value_type::I32:    return "i32";
        case value_type::F32:    return "f32";
        case value_type::BOOL:   return "bool";
        case value_type::STRING: return "string";
        case value_type::ARRAY:  return "array";
        case value_type::U64:    return "u64";
        case value_type::I64:    return "i64";
        case value_type::F64:    return "f64";
    }
    return "?";
}

bool tensor_nbytes(tensor_type type, uint32_t n_dims, const int64_t * ne, uint64_t & nbytes,
                   std::string & err, std::string_view what) {
    const type_info * info = find_type((uint32_t) type);
    if (!info) {
        err = std::string(what) + ": unknown ggml type " + std::to_string((uint32_t) type);
        return false;
    }
    if (n_dims < 1 || n_dims > k_max_dims) {
        err = std::string(what) + ": n_dims " + std::to_string(n_dims) + " outside 1..4";
        return false;
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        if (ne[d] < 0) {
            err = std::string(what) + ": ne[" + std::to_string(d) + "] = " + std::to_string(ne[d]) + " is negative";
            return false;
        }
        const uint64_t n = (uint64_t) ne[d];
        if (n != 0 && elements > (uint64_t) std::numeric_limits<int64_t>::max() / n) {
            err = std::string(what) + ": element count overflows int64 at ne[" + std::to_string(d) + "] = " +
                  std::to_string(ne[d]);
            return false;
        }
        elements *= n;
    }
    if (ne[0] % info->block_size != 0) {
        err = std::string(what) + ": ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the block size " +
              std::to_string(info->block_size) + " of type " + info->name;
        return false;
    }
    const uint64_t blocks = elements / (uint64_t) info->block_size;
    if (blocks != 0 && info->block_bytes > std::numeric_limits<uint64_t>::max() / blocks) {
        err = std::string(what) + ": byte count overflows 64 bits";
        return false;
    }
    nbytes = blocks * info->block_bytes;
    if (nbytes > (uint64_t) std::numeric_limits<int64_t>::max()) {
        err = std::string(what) + ": byte count " + std::to_string(nbytes) + " exceeds int64";
        return false;
    }
    return true;
}

uint64_t tensor_info::n_elements() const {
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims && d < k_max_dims; ++d) n *= (uint64_t) ne[d];
    return n;
}

std::string tensor_info::shape_string() const {
    std::string s = "[";
    for (uint32_t d = 0; d < n_dims && d < k_max_dims; ++d) {
        if (d) s += ", ";
        s += std::to_string(ne[d]);
    }
    return s + "]";
}

} // namespace reap::gguf

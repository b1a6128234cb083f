// kv_store: the ordered GGUF metadata with each value's raw bytes, typed
// getters that report a wrong type rather than reinterpret, and setters that
// build the raw bytes for writers. Values are little-endian in the file; the
// host is required to be little-endian too (checked at compile time).
#include "gguf/gguf.h"
#include "gguf/internal.h"

#include <cmath>
#include <cstring>
#include <limits>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "reap::gguf assumes a little-endian host"
#endif

namespace reap::gguf {

namespace {

using detail::put;
using detail::put_string;
using detail::scalar_size;

bool is_integer(value_type t) {
    switch (t) {
        case value_type::U8: case value_type::I8: case value_type::U16: case value_type::I16:
        case value_type::U32: case value_type::I32: case value_type::U64: case value_type::I64: return true;
        default: return false;
    }
}

bool is_float(value_type t) { return t == value_type::F32 || t == value_type::F64; }

template <typename T> T load(const uint8_t * p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// An integer value widened without loss: negative values in `s`, others in `u`.
struct wide_int {
    bool     negative = false;
    uint64_t u = 0;
    int64_t  s = 0;
};

wide_int load_int(value_type t, const uint8_t * p) {
    wide_int w;
    auto set_signed = [&](int64_t v) { if (v < 0) { w.negative = true; w.s = v; } else { w.u = (uint64_t) v; w.s = v; } };
    switch (t) {
        case value_type::U8:  w.u = load<uint8_t>(p);  w.s = (int64_t) w.u; break;
        case value_type::U16: w.u = load<uint16_t>(p); w.s = (int64_t) w.u; break;
        case value_type::U32: w.u = load<uint32_t>(p); w.s = (int64_t) w.u; break;
        case value_type::U64: w.u = load<uint64_t>(p); w.s = (int64_t) w.u; break;
        case value_type::I8:  set_signed(load<int8_t>(p));  break;
        case value_type::I16: set_signed(load<int16_t>(p)); break;
        case value_type::I32: set_signed(load<int32_t>(p)); break;
        case value_type::I64: set_signed(load<int64_t>(p)); break;
        default: break;
    }
    return w;
}

std::string int_string(const wide_int & w) { return w.negative ? std::to_string(w.s) : std::to_string(w.u); }

double load_float(value_type t, const uint8_t * p) {
    return t == value_type::F32 ? (double) load<float>(p) : load<double>(p);
}

std::string missing(std::string_view key) { return "key '" + std::string(key) + "' is missing"; }

std::string wrong_type(const kv & e, const char * expected) {
    return "key '" + e.key + "' has type " + e.type_string() + ", expected " + expected;
}

// Walks the elements of an array entry; `fn(index, pointer, length)` gets each
// element's bytes (for strings: the characters). Returns false on malformed raw bytes.
template <typename F> bool for_each_elem(const kv & e, F fn) {
    if (e.raw.size() < 12) return false;
    const uint8_t * p = e.raw.data() + 12;
    const uint8_t * end = e.raw.data() + e.raw.size();
    for (uint64_t i = 0; i < e.n_elems; ++i) {
        if (e.elem_type == value_type::STRING) {
            if (end - p < 8) return false;
            const uint64_t len = load<uint64_t>(p);
            p += 8;
            if ((uint64_t) (end - p) < len) return false;
            fn(i, p, (size_t) len);
            p += len;
        } else {
            const size_t sz = scalar_size(e.elem_type);
            if (sz == 0 || (size_t) (end - p) < sz) return false;
            fn(i, p, sz);
            p += sz;
        }
    }
    return p == end;
}

} // namespace

std::string kv::type_string() const {
    if (type == value_type::ARRAY) return std::string("array[") + value_type_name(elem_type) + "]";
    return value_type_name(type);
}

static std::string scalar_string(value_type t, const uint8_t * p, size_t len) {
    if (is_integer(t)) return int_string(load_int(t, p));
    if (is_float(t)) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%.9g", load_float(t, p));
        return buf;
    }
    if (t == value_type::BOOL) return *p ? "true" : "false";
    if (t == value_type::STRING) return std::string((const char *) p, len);
    return "?";
}

std::string kv::value_string(size_t max_elems) const {
    if (type == value_type::STRING) {
        if (raw.size() < 8) return "?";
        std::string s((const char *) raw.data() + 8, raw.size() - 8);
        if (s.size() > 120) s = s.substr(0, 117) + "...";
        return "\"" + s + "\"";
    }
    if (type != value_type::ARRAY) {
        return raw.size() == scalar_size(type) ? scalar_string(type, raw.data(), raw.size()) : "?";
    }
    std::string s = "[";
    for_each_elem(*this, [&](uint64_t i, const uint8_t * p, size_t len) {
        if (i >= max_elems) return;
        if (i) s += ", ";
        std::string v = scalar_string(elem_type, p, len);
        if (elem_type == value_type::STRING) {
            if (v.size() > 40) v = v.substr(0, 37) + "...";
            v = "\"" + v + "\"";
        }
        s += v;
    });
    if (n_elems > max_elems) s += ", ... (" + std::to_string(n_elems) + " elements)";
    return s + "]";
}

const kv * kv_store::find(std::string_view key) const {
    for (const kv & e : entries) {
        if (e.key == key) return &e;
    }
    return nullptr;
}

// Reads an integer KV into [lo, hi] (as signed / unsigned 64-bit bounds).
static bool get_int_in_range(const kv_store & s, std::string_view key, const char * expected, bool want_signed,
                             int64_t lo, uint64_t hi, wide_int & out, std::string & err) {
    const kv * e = s.find(key);
    if (!e) { err = missing(key); return false; }
    if (!is_integer(e->type) || e->raw.size() != scalar_size(e->type)) { err = wrong_type(*e, expected); return false; }
    out = load_int(e->type, e->raw.data());
    const bool fits = out.negative ? (want_signed && out.s >= lo) : out.u <= hi;
    if (!fits) {
        err = "key '" + e->key + "' = " + int_string(out) + " (" + e->type_string() + ") does not fit " + expected;
        return false;
    }
    return true;
}

bool kv_store::get_u32(std::string_view key, uint32_t & out, std::string & err) const {
    wide_int w;
    if (!get_int_in_range(*this, key, "u32", false, 0, std::numeric_limits<uint32_t>::max(), w, err)) return false;
    out = (uint32_t) w.u;
    return true;
}

bool kv_store::get_u64(std::string_view key, uint64_t & out, std::string & err) const {
    wide_int w;
    if (!get_int_in_range(*this, key, "u64", false, 0, std::numeric_limits<uint64_t>::max(), w, err)) return false;
    out = w.u;
    return true;
}

bool kv_store::get_i64(std::string_view key, int64_t & out, std::string & err) const {
    wide_int w;
    if (!get_int_in_range(*this, key, "i64", true, std::numeric_limits<int64_t>::min(),
                          (uint64_t) std::numeric_limits<int64_t>::max(), w, err)) return false;
    out = w.negative ? w.s : (int64_t) w.u;
    return true;
}

bool kv_store::get_f64(std::string_view key, double & out, std::string & err) const {
    const kv * e = find(key);
    if (!e) { err = missing(key); return false; }
    if (!is_float(e->type) || e->raw.size() != scalar_size(e->type)) { err = wrong_type(*e, "f32 or f64"); return false; }
    out = load_float(e->type, e->raw.data());
    return true;
}

bool kv_store::get_f32(std::string_view key, float & out, std::string & err) const {
    double d;
    if (!get_f64(key, d, err)) return false;
    out = (float) d;
    return true;
}

bool kv_store::get_bool(std::string_view key, bool & out, std::string & err) const {
    const kv * e = find(key);
    if (!e) { err = missing(key); return false; }
    if (e->type != value_type::BOOL || e->raw.size() != 1) { err = wrong_type(*e, "bool"); return false; }
    out = e->raw[0] != 0;
    return true;
}

bool kv_store::get_string(std::string_view key, std::string & out, std::string & err) const {
    const kv * e = find(key);
    if (!e) { err = missing(key); return false; }
    if (e->type != value_type::STRING || e->raw.size() < 8 || load<uint64_t>(e->raw.data()) != e->raw.size() - 8) {
        err = wrong_type(*e, "string");
        return false;
    }
    out.assign((const char *) e->raw.data() + 8, e->raw.size() - 8);
    return true;
}

bool kv_store::get_string_array(std::string_view key, std::vector<std::string> & out, std::string & err) const {
    const kv * e = find(key);
    if (!e) { err = missing(key); return false; }
    if (e->type != value_type::ARRAY || e->elem_type != value_type::STRING) { err = wrong_type(*e, "array[string]"); return false; }
    std::vector<std::string> v;
    v.reserve(e->n_elems);
    if (!for_each_elem(*e, [&](uint64_t, const uint8_t * p, size_t len) { v.emplace_back((const char *) p, len); })) {
        err = "key '" + e->key + "': malformed array bytes";
        return false;
    }
    out = std::move(v);
    return true;
}

bool kv_store::get_i64_array(std::string_view key, std::vector<int64_t> & out, std::string & err) const {
    const kv * e = find(key);
    if (!e) { err = missing(key); return false; }
    if (e->type != value_type::ARRAY || !is_integer(e->elem_type)) { err = wrong_type(*e, "array of integers"); return false; }
    std::vector<int64_t> v;
    v.reserve(e->n_elems);
    bool fits = true;
    if (!for_each_elem(*e, [&](uint64_t, const uint8_t * p, size_t) {
            const wide_int w = load_int(e->elem_type, p);
            if (!w.negative && w.u > (uint64_t) std::numeric_limits<int64_t>::max()) fits = false;
            v.push_back(w.negative ? w.s : (int64_t) w.u);
        })) {
        err = "key '" + e->key + "': malformed array bytes";
        return false;
    }
    if (!fits) { err = "key '" + e->key + "': an element does not fit i64"; return false; }
    out = std::move(v);
    return true;
}

bool kv_store::get_f64_array(std::string_view key, std::vector<double> & out, std::string & err) const {
    const kv * e = find(key);
    if (!e) { err = missing(key); return false; }
    if (e->type != value_type::ARRAY || !(is_float(e->elem_type) || is_integer(e->elem_type))) {
        err = wrong_type(*e, "array of numbers");
        return false;
    }
    std::vector<double> v;
    v.reserve(e->n_elems);
    if (!for_each_elem(*e, [&](uint64_t, const uint8_t * p, size_t) {
            if (is_float(e->elem_type)) {
                v.push_back(load_float(e->elem_type, p));
            } else {
                const wide_int w = load_int(e->elem_type, p);
                v.push_back(w.negative ? (double) w.s : (double) w.u);
            }
        })) {
        err = "key '" + e->key + "': malformed array bytes";
        return false;
    }
    out = std::move(v);
    return true;
}

bool kv_store::get_u32_or(std::string_view key, uint32_t fallback, uint32_t & out, std::string & err) const {
    if (!has(key)) { out = fallback; return true; }
    return get_u32(key, out, err);
}

bool kv_store::get_string_or(std::string_view key, const std::string & fallback, std::string & out, std::string & err) const {
    if (!has(key)) { out = fallback; return true; }
    return get_string(key, out, err);
}

void kv_store::set(const kv & entry) {
    for (kv & e : entries) {
        if (e.key == entry.key) { e = entry; return; }
    }
    entries.push_back(entry);
}

bool kv_store::remove(std::string_view key) {
    for (size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].key == key) {
            entries.erase(entries.begin() + (ptrdiff_t) i);
            return true;
        }
    }
    return false;
}

template <typename T> static kv make_scalar(const std::string & key, value_type t, T v) {
    kv e;
    e.key = key;
    e.type = t;
    put<T>(e.raw, v);
    return e;
}

template <typename T> static kv make_array(const std::string & key, value_type elem, const std::vector<T> & v) {
    kv e;
    e.key = key;
    e.type = value_type::ARRAY;
    e.elem_type = elem;
    e.n_elems = v.size();
    put<uint32_t>(e.raw, (uint32_t) elem);
    put<uint64_t>(e.raw, v.size());
    for (const T & x : v) put<T>(e.raw, x);
    return e;
}

void kv_store::set_u8 (const std::string & key, uint8_t v)  { set(make_scalar(key, value_type::U8, v)); }
void kv_store::set_u16(const std::string & key, uint16_t v) { set(make_scalar(key, value_type::U16, v)); }
void kv_store::set_u32(const std::string & key, uint32_t v) { set(make_scalar(key, value_type::U32, v)); }
void kv_store::set_i32(const std::string & key, int32_t v)  { set(make_scalar(key, value_type::I32, v)); }
void kv_store::set_u64(const std::string & key, uint64_t v) { set(make_scalar(key, value_type::U64, v)); }
void kv_store::set_i64(const std::string & key, int64_t v)  { set(make_scalar(key, value_type::I64, v)); }
void kv_store::set_f32(const std::string & key, float v)    { set(make_scalar(key, value_type::F32, v)); }
void kv_store::set_f64(const std::string & key, double v)   { set(make_scalar(key, value_type::F64, v)); }
void kv_store::set_bool(const std::string & key, bool v)    { set(make_scalar<uint8_t>(key, value_type::BOOL, v ? 1 : 0)); }

void kv_store::set_string(const std::string & key, const std::string & v) {
    kv e;
    e.key = key;
    e.type = value_type::STRING;
    put_string(e.raw, v);
    set(e);
}

void kv_store::set_string_array(const std::string & key, const std::vector<std::string> & v) {
    kv e;
    e.key = key;
    e.type = value_type::ARRAY;
    e.elem_type = value_type::STRING;
    e.n_elems = v.size();
    put<uint32_t>(e.raw, (uint32_t) value_type::STRING);
    put<uint64_t>(e.raw, v.size());
    for (const std::string & s : v) put_string(e.raw, s);
    set(e);
}

void kv_store::set_i32_array(const std::string & key, const std::vector<int32_t> & v)  { set(make_array(key, value_type::I32, v)); }
void kv_store::set_i64_array(const std::string & key, const std::vector<int64_t> & v)  { set(make_array(key, value_type::I64, v)); }
void kv_store::set_f32_array(const std::string & key, const std::vector<float> & v)    { set(make_array(key, value_type::F32, v)); }

} // namespace reap::gguf

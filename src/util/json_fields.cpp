// Typed reading of JSON objects (json_fields.h): one place for what a field of
// each kind may hold and for the message that names a field that does not.
#include "util/json_fields.h"

#include "util/file.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>

namespace reap::util {

using nlohmann::json;

const char * json_type_name(const json & v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::object: return "object";
        case json::value_t::array: return "array";
        case json::value_t::string: return "string";
        case json::value_t::boolean: return "boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "integer";
        case json::value_t::number_float: return "number";
        default: return "value";
    }
}

bool read_json_file(const std::string & path, const char * what, uint64_t max_bytes, json & out, std::string & err) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t) st.st_size > max_bytes) {
        err = std::string(what) + " '" + path + "' is " + std::to_string((uint64_t) st.st_size) + " bytes, more than any " + what +
              " reap writes (" + std::to_string(max_bytes) + ")";
        return false;
    }
    std::string text;
    if (!read_file(path, what, text, err)) return false;
    try {
        out = json::parse(text);
    } catch (const json::parse_error & e) {
        err = std::string(what) + " '" + path + "' is not JSON (" + e.what() + ")";
        return false;
    }
    return true;
}

bool is_sha256_hex(const std::string & s) {
    if (s.size() != 64) return false;
    for (char c : s) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
}

namespace {

const json & empty_object() {
    static const json e = json::object();
    return e;
}

std::string show(const json & v) {
    std::string t = v.dump(-1, ' ', false, json::error_handler_t::replace);
    return t.size() > 40 ? t.substr(0, 40) + "…" : t;
}

std::string range(double lo, double hi) {
    char buf[96];
    snprintf(buf, sizeof buf, "[%g, %g]", lo, hi);
    return buf;
}

} // namespace

json_fields::json_fields(const json & obj, std::string where, std::string path)
    : json_fields(obj, std::move(where), std::move(path), std::make_shared<std::string>()) {
    if (!obj_.is_object()) fail("", std::string("must be an object, not ") + json_type_name(obj_));
}

json_fields::json_fields(const json & obj, std::string where, std::string path, std::shared_ptr<std::string> err)
    : obj_(obj.is_object() ? obj : empty_object()), where_(std::move(where)), path_(std::move(path)), err_(std::move(err)) {}

std::string json_fields::field(const std::string & key) const {
    if (path_.empty()) return key;
    return key.empty() ? path_ : path_ + "." + key;
}

bool json_fields::fail(const std::string & key, const std::string & what) {
    if (err_->empty()) {
        const std::string f = field(key);
        *err_ = where_ + ": " + (f.empty() ? std::string("the top level") : f) + " " + what;
    }
    return false;
}

const json * json_fields::at(const char * key) const {
    const auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
}

bool json_fields::has(const char * key) const { return at(key) != nullptr; }

bool json_fields::need(const char * key, const json *& v) {
    if (!ok()) return false;
    v = at(key);
    return v ? true : fail(key, "is missing");
}

json_fields json_fields::child(const char * key) {
    const json * v = nullptr;
    if (need(key, v) && !v->is_object()) fail(key, std::string("must be an object, not ") + json_type_name(*v));
    return json_fields(v && v->is_object() ? *v : empty_object(), where_, field(key), err_);
}

json_fields json_fields::nested(const json & v, const std::string & key) {
    const std::string f = field(key);
    if (!v.is_object()) fail(key, std::string("must be an object, not ") + json_type_name(v));
    return json_fields(v, where_, f, err_);
}

bool json_fields::members(const char * key, std::vector<std::pair<std::string, const json *>> & out) {
    out.clear();
    if (!ok()) return false;
    const json * v = at(key);
    if (!v) return true;
    if (!v->is_object()) return fail(key, std::string("must be an object, not ") + json_type_name(*v));
    for (auto it = v->begin(); it != v->end(); ++it) out.push_back({it.key(), &it.value()});
    return true;
}

bool json_fields::elements(const char * key, std::vector<const json *> & out) {
    out.clear();
    if (!ok()) return false;
    const json * v = at(key);
    if (!v) return true;
    if (!v->is_array()) return fail(key, std::string("must be an array, not ") + json_type_name(*v));
    for (const auto & e : *v) out.push_back(&e);
    return true;
}

bool json_fields::str(const char * key, std::string & out) {
    const json * v = nullptr;
    if (!need(key, v)) return false;
    if (!v->is_string()) return fail(key, std::string("must be a string, not ") + json_type_name(*v));
    out = v->get<std::string>();
    return true;
}

bool json_fields::boolean(const char * key, bool & out) {
    const json * v = nullptr;
    if (!need(key, v)) return false;
    if (!v->is_boolean()) return fail(key, std::string("must be true or false, not ") + json_type_name(*v));
    out = v->get<bool>();
    return true;
}

bool json_fields::u64(const char * key, uint64_t & out, uint64_t hi) {
    const json * v = nullptr;
    if (!need(key, v)) return false;
    if (v->is_number_unsigned()) {
        out = v->get<uint64_t>();
    } else if (v->is_number_integer() && v->get<int64_t>() >= 0) {
        out = (uint64_t) v->get<int64_t>();
    } else {
        return fail(key, "must be a whole number >= 0, not " + show(*v));
    }
    if (out > hi) return fail(key, "= " + std::to_string(out) + " is above its limit " + std::to_string(hi));
    return true;
}

bool json_fields::i64(const char * key, int64_t & out, int64_t lo, int64_t hi) {
    const json * v = nullptr;
    if (!need(key, v)) return false;
    if (v->is_number_unsigned()) {
        if (v->get<uint64_t>() > (uint64_t) INT64_MAX) return fail(key, "= " + show(*v) + " is out of range");
        out = (int64_t) v->get<uint64_t>();
    } else if (v->is_number_integer()) {
        out = v->get<int64_t>();
    } else {
        return fail(key, "must be a whole number, not " + show(*v));
    }
    if (out < lo || out > hi) {
        return fail(key, "= " + std::to_string(out) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return true;
}

bool json_fields::num(const char * key, double & out, double lo, double hi) {
    const json * v = nullptr;
    if (!need(key, v)) return false;
    if (!v->is_number()) return fail(key, "must be a number, not " + show(*v));
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) return fail(key, "= " + show(*v) + " is out of range " + range(lo, hi));
    out = d;
    return true;
}

bool json_fields::sha256(const char * key, std::string & out) {
    std::string s;
    if (!str(key, s)) return false;
    if (!is_sha256_hex(s)) return fail(key, "must be a SHA-256 (64 lowercase hex digits), not \"" + s.substr(0, 70) + "\"");
    out = s;
    return true;
}

bool json_fields::opt_str(const char * key, std::string & out) { return !ok() ? false : !has(key) || str(key, out); }
bool json_fields::opt_boolean(const char * key, bool & out) { return !ok() ? false : !has(key) || boolean(key, out); }
bool json_fields::opt_u64(const char * key, uint64_t & out, uint64_t hi) { return !ok() ? false : !has(key) || u64(key, out, hi); }
bool json_fields::opt_i64(const char * key, int64_t & out, int64_t lo, int64_t hi) {
    return !ok() ? false : !has(key) || i64(key, out, lo, hi);
}
bool json_fields::opt_num(const char * key, double & out, double lo, double hi) {
    return !ok() ? false : !has(key) || num(key, out, lo, hi);
}
bool json_fields::opt_sha256(const char * key, std::string & out) { return !ok() ? false : !has(key) || sha256(key, out); }

bool json_fields::opt_strings(const char * key, std::vector<std::string> & out) {
    std::vector<const json *> els;
    if (!elements(key, els)) return false;
    out.clear();
    for (size_t i = 0; i < els.size(); ++i) {
        if (!els[i]->is_string()) {
            return fail(std::string(key) + "[" + std::to_string(i) + "]", std::string("must be a string, not ") + json_type_name(*els[i]));
        }
        out.push_back(els[i]->get<std::string>());
    }
    return true;
}

} // namespace reap::util

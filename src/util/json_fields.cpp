// Typed reading of JSON objects (json_fields.h): one place for what a field of
// each kind may hold and for the message that names a field that does not.
#include "util/json_fields.h"

#include "util/file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

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

namespace {

// A DOM builder behind nlohmann's SAX interface, that keeps the byte position
// and the message of the first problem instead of throwing: nlohmann puts the
// line and column into a parse_error's message but not into out_of_range's (a
// number too large for a double), and sax_parse hands both to parse_error()
// with the position. Written on the public SAX interface only (nlohmann's own
// DOM parser is a detail that changes between versions).
struct located_dom_parser {
    json &              root;
    std::vector<json *> open;                   // the arrays and objects being filled, innermost last
    json *              member = nullptr;       // the object member the next value goes to
    bool                failed = false;
    size_t              position = 0;           // bytes read when the problem was found
    std::string         what;                   // nlohmann's message

    explicit located_dom_parser(json & out) : root(out) {}

    // Earlier elements of an open array may move when it grows, but they are
    // all closed by then: only the open containers are pointed to, and each
    // lives in a parent that does not change while it is open.
    json * put(json && v) {
        if (open.empty()) {
            root = std::move(v);
            return &root;
        }
        json & top = *open.back();
        if (top.is_array()) {
            top.push_back(std::move(v));
            return &top.back();
        }
        *member = std::move(v);
        return member;
    }
    bool null() { put(json(nullptr)); return true; }
    bool boolean(bool v) { put(json(v)); return true; }
    bool number_integer(json::number_integer_t v) { put(json(v)); return true; }
    bool number_unsigned(json::number_unsigned_t v) { put(json(v)); return true; }
    bool number_float(json::number_float_t v, const json::string_t &) { put(json(v)); return true; }
    bool string(json::string_t & v) { put(json(std::move(v))); return true; }
    bool binary(json::binary_t &) {   // JSON text has none
        failed = true;
        what   = "a binary value";
        return false;
    }
    bool start_object(size_t) { open.push_back(put(json::object())); return true; }
    bool key(json::string_t & k) { member = &(*open.back())[k]; return true; }
    bool end_object() { open.pop_back(); return true; }
    bool start_array(size_t) { open.push_back(put(json::array())); return true; }
    bool end_array() { open.pop_back(); return true; }
    bool parse_error(size_t pos, const std::string & /*last_token*/, const json::exception & e) {
        if (!failed) {
            failed   = true;
            position = pos;
            what     = e.what();
        }
        return false;
    }
};

// nlohmann's message without its "[json.exception.parse_error.101] " tag and
// the "parse error at line 1, column 5: " that the caller says its own way.
std::string json_reason(std::string what) {
    if (what.rfind("[json.exception.", 0) == 0) {
        const size_t close = what.find("] ");
        if (close != std::string::npos) what.erase(0, close + 2);
    }
    if (what.rfind("parse error", 0) == 0) {
        const size_t colon = what.find(": ");
        if (colon != std::string::npos) what.erase(0, colon + 2);
    }
    return what;
}

} // namespace

bool parse_json_text(const std::string & text, json & out, json_text_problem & problem) {
    problem = json_text_problem();
    out     = json();
    json doc;
    located_dom_parser handler(doc);
    bool ok = false;
    try {
        ok = json::sax_parse(text, &handler) && !handler.failed;
    } catch (const json::exception & e) {   // none is known to reach here; every one is a value all the same
        problem.reason = json_reason(e.what());
        return false;
    }
    if (!ok) {
        if (!handler.failed) {   // cannot happen: sax_parse fails only through parse_error()
            problem.reason = "the JSON parser stopped without saying why";
            return false;
        }
        problem.reason = json_reason(handler.what);
        // the position counts the bytes read, the problem's own the last of them
        const size_t last = std::min(handler.position, text.size());
        const size_t at   = last > 0 ? last - 1 : 0;
        size_t line_start = 0;
        problem.line      = 1;
        for (size_t i = 0; i < at; ++i) {
            if (text[i] == '\n') {
                ++problem.line;
                line_start = i + 1;
            }
        }
        problem.column = text.empty() ? 0 : at - line_start + 1;
        return false;
    }
    out = std::move(doc);
    return true;
}

bool parse_json_text(const std::string & text, const std::string & where, json & out, std::string & err) {
    json_text_problem p;
    if (parse_json_text(text, out, p)) return true;
    err = where + ": not valid JSON";
    if (p.line > 0) err += " at line " + std::to_string(p.line) + (p.column > 0 ? ", column " + std::to_string(p.column) : "");
    err += ": " + p.reason;
    return false;
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
    return parse_json_text(text, std::string(what) + " '" + path + "'", out, err);
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

bool json_fields::header(const char * format, const char * what, int64_t max_version, int64_t & version) {
    const json * v = at("format");
    if (!v || !v->is_string() || v->get<std::string>() != format) {
        if (err_->empty()) {
            *err_ = where_ + " is not " + what + " (format " + (v ? show(*v) : std::string("missing")) + ", expected \"" + format + "\")";
        }
        return false;
    }
    return i64("version", version, 1, max_version);
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

// Typed reading of one JSON object from a file: every field's type and range
// checked, and the first problem kept as a message that names the field by
// its path ("eval 'e.json': pruned.\"a.gguf\".kld_mean must be ..."). The
// format modules (src/formats/) read through it, so each rule of what a
// number, a hash or a count may be is written once.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace reap::util {

// "object", "string", "integer", ... for messages.
const char * json_type_name(const nlohmann::json & v);

// Where and why a text is not JSON: the line and column (1-based, in bytes)
// of the last byte the parser read, 0 where unknown, and nlohmann's reason
// without its tag ("number overflow parsing '1e99999'", "syntax error while
// parsing value - invalid literal; last read: 'K'").
struct json_text_problem {
    uint64_t    line = 0, column = 0;
    std::string reason;
};

// The one way reap parses JSON text: every nlohmann exception, parse_error
// and out_of_range (a number too large for a double) alike, becomes a false
// return with the problem, its position included (nlohmann's message for
// out_of_range has none). `out` is null on failure.
bool parse_json_text(const std::string & text, nlohmann::json & out, json_text_problem & problem);

// The same, the message "<where>: not valid JSON at line L, column C: <reason>".
bool parse_json_text(const std::string & text, const std::string & where, nlohmann::json & out, std::string & err);

// Reads the regular file at `path` (at most `max_bytes`) and parses it as
// JSON (parse_json_text); messages name it as "<what> '<path>'".
bool read_json_file(const std::string & path, const char * what, uint64_t max_bytes, nlohmann::json & out, std::string & err);

// Whether `s` is a SHA-256 in hex as reap writes it (64 lowercase hex digits).
bool is_sha256_hex(const std::string & s);

class json_fields {
public:
    // `obj` must outlive the reader; `where` names it ("eval 'e.json'"); `path`
    // is the field path inside the file ("" at the top level).
    json_fields(const nlohmann::json & obj, std::string where, std::string path = "");

    bool               ok() const { return err_->empty(); }
    const std::string & error() const { return *err_; }
    // The message for a problem found by the caller, about field `key`.
    bool fail(const std::string & key, const std::string & what);

    // Present and not null.
    bool has(const char * key) const;
    // A reader for the object at `key` (required; absent or not an object
    // fails, and the child then reads an empty object). Child and parent share
    // one message: the first problem found through either.
    json_fields child(const char * key);
    // A reader for `v`, a member of this object's field `key` (an element or
    // a map entry): it must be an object.
    json_fields nested(const nlohmann::json & v, const std::string & key);
    // The members of object `key` (absent: none).
    bool members(const char * key, std::vector<std::pair<std::string, const nlohmann::json *>> & out);
    // The elements of array `key` (absent: none).
    bool elements(const char * key, std::vector<const nlohmann::json *> & out);

    // The file's kind, checked the one way every reader checks it: "format"
    // must be the string `format` ("<where> is not <what> (format "X",
    // expected "F")") and "version" a whole number in [1, max_version] (out).
    bool header(const char * format, const char * what, int64_t max_version, int64_t & version);

    // Required fields (absent or null fails, except where opt_* says).
    bool str(const char * key, std::string & out);
    bool boolean(const char * key, bool & out);
    bool u64(const char * key, uint64_t & out, uint64_t hi = UINT64_MAX);
    bool i64(const char * key, int64_t & out, int64_t lo, int64_t hi);
    // A finite number in [lo, hi].
    bool num(const char * key, double & out, double lo, double hi);
    // 64 lowercase hex digits.
    bool sha256(const char * key, std::string & out);

    // Optional: absent or null leaves `out` as it is and succeeds.
    bool opt_str(const char * key, std::string & out);
    bool opt_boolean(const char * key, bool & out);
    bool opt_u64(const char * key, uint64_t & out, uint64_t hi = UINT64_MAX);
    bool opt_i64(const char * key, int64_t & out, int64_t lo, int64_t hi);
    bool opt_num(const char * key, double & out, double lo, double hi);
    bool opt_sha256(const char * key, std::string & out);
    // Optional array of strings.
    bool opt_strings(const char * key, std::vector<std::string> & out);

    const nlohmann::json & object() const { return obj_; }
    std::string field(const std::string & key) const;   // path of `key` for messages

private:
    const nlohmann::json * at(const char * key) const;
    bool                   need(const char * key, const nlohmann::json *& v);

    json_fields(const nlohmann::json & obj, std::string where, std::string path, std::shared_ptr<std::string> err);

    const nlohmann::json &       obj_;
    std::string                  where_, path_;
    std::shared_ptr<std::string> err_;   // shared with children: the first problem anywhere
};

} // namespace reap::util

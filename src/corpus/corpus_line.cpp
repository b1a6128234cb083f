// reap corpus lines: parsing and checking one JSONL sample. See corpus_line.h.
#include "corpus/corpus_line.h"
#include "util/json_fields.h"
#include "util/path.h"
#include "util/text_escape.h"

namespace reap {

uint64_t fnv1a64(const std::string & s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

static std::string trim(const std::string & s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

bool looks_like_jsonl_corpus(const std::string & path, const std::string & text) {
    if (util::ends_with(path, ".jsonl")) {
        return true;
    }
    const size_t b = text.find_first_not_of(" \t\r\n");
    if (b == std::string::npos || text[b] != '{') {
        return false;
    }
    const size_t e = text.find('\n', b);
    nlohmann::json          j;
    util::json_text_problem problem;   // not JSON (a number too large for a double included): not a corpus
    if (!util::parse_json_text(text.substr(b, e == std::string::npos ? std::string::npos : e - b), j, problem)) return false;
    return j.is_object() && j.contains("domain") && (j.contains("text") || j.contains("messages"));
}

bool parse_corpus_line(const std::string & raw, const std::string & where, corpus_line & out, bool & blank,
                       std::string & err) {
    out   = corpus_line();
    blank = false;
    out.line = trim(raw);
    if (out.line.empty()) {
        blank = true;
        return true;
    }
    nlohmann::json          j;
    util::json_text_problem problem;
    if (!util::parse_json_text(out.line, j, problem)) {
        // `where` names the line; the problem's column, and what is wrong (an
        // ill-formed UTF-8 byte, a number too large for a double, ...)
        err = where + ": not valid JSON" + (problem.column > 0 ? " at column " + std::to_string(problem.column) : "") + ": " +
              problem.reason;
        return false;
    }
    if (!j.is_object()) {
        err = where + ": not a JSON object";
        return false;
    }
    const auto dom = j.find("domain");
    if (dom == j.end() || !dom->is_string() || dom->get<std::string>().empty()) {
        err = where + ": no \"domain\" string";
        return false;
    }
    // a domain is a name shown in every table, figure and card: one printable line
    if (!util::is_printable_line(dom->get<std::string>())) {
        err = where + ": the \"domain\" '" + util::terminal_text(dom->get<std::string>()) +
              "' holds a control character (a newline, an escape, ...)";
        return false;
    }
    const auto text = j.find("text"), msgs = j.find("messages");
    const bool has_text = text != j.end(), has_msgs = msgs != j.end();
    if (has_text == has_msgs) {
        err = where + (has_text ? ": both \"text\" and \"messages\"" : ": neither \"text\" nor \"messages\"");
        return false;
    }
    if (has_text && !text->is_string()) {
        err = where + ": \"text\" is not a string";
        return false;
    }
    if (has_msgs && !msgs->is_array()) {
        err = where + ": \"messages\" is not an array";
        return false;
    }
    out.hash     = fnv1a64(out.line);
    out.domain   = dom->get<std::string>();
    out.has_text = has_text;
    if (has_text) {
        out.text = text->get<std::string>();
    } else {
        out.messages = *msgs;
    }
    return true;
}

}  // namespace reap

// One escape per destination for text that comes from inputs. See text_escape.h.
#include "util/text_escape.h"

#include <cstdint>
#include <cstdio>

namespace reap::util {

namespace {

constexpr const char * k_replacement = "\xEF\xBF\xBD";   // U+FFFD

// The length of the UTF-8 sequence at s[i] (1..4) and its code point, or 0
// when the bytes there are not well-formed UTF-8 (overlong, surrogate, > U+10FFFF).
size_t utf8_at(const std::string & s, size_t i, uint32_t & cp) {
    const auto b = [&](size_t k) { return (unsigned char) s[i + k]; };
    const unsigned char c = b(0);
    size_t n = 0;
    if (c < 0x80) { cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
    else return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((b(k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(k) & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

} // namespace

std::string printable_utf8(const std::string & s, bool keep_newlines) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        const size_t n = utf8_at(s, i, cp);
        const bool control = n > 0 && ((cp < 0x20 && cp != '\t' && !(keep_newlines && cp == '\n')) || cp == 0x7F ||
                                       (cp >= 0x80 && cp < 0xA0));
        if (n == 0 || control) {
            out += k_replacement;
            i += n ? n : 1;
            continue;
        }
        out.append(s, i, n);
        i += n;
    }
    return out;
}

bool is_printable_line(const std::string & s) { return printable_utf8(s, false) == s; }

std::string xml_text(const std::string & s) {
    std::string out;
    for (char c : printable_utf8(s)) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string terminal_text(const std::string & s) { return printable_utf8(s, false); }

std::string markdown_text(const std::string & s) {
    std::string out;
    for (char c : printable_utf8(s, false)) {
        switch (c) {
            case '\\': case '`': case '*': case '_': case '[': case ']': case '<': case '>': case '|': case '#':
            case '!': case '(': case ')': case '{': case '}': case '~': case '&':
                out += '\\';
                out += c;
                break;
            case '\t': out += ' '; break;
            default: out += c;
        }
    }
    return out;
}

std::string shell_word(const std::string & s) {
    bool plain = !s.empty();
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '.' || c == '/' || c == ':' || c == '=' || c == '+' || c == '-';
        if (!ok) plain = false;
    }
    if (plain) return s;
    // Printable text goes between single quotes. Bytes a page may not show
    // (controls, bytes that are not UTF-8) become "$(printf '\ooo')", which
    // every POSIX shell joins to the word; newlines that end such a run stay
    // literal inside quotes, since $(...) would drop them, and the quote closes
    // after them: every line after the first starts with a quote, never with
    // a Markdown fence.
    std::string out, bad;
    bool quoted = false;
    auto quote = [&](bool open) {
        if (quoted != open) out += '\'';
        quoted = open;
    };
    auto flush_bad = [&] {
        size_t keep = bad.size();
        while (keep > 0 && bad[keep - 1] == '\n') --keep;
        if (keep > 0) {
            quote(false);
            out += "\"$(printf '";
            for (size_t k = 0; k < keep; ++k) {
                char oct[8];
                std::snprintf(oct, sizeof oct, "\\%03o", (unsigned) (unsigned char) bad[k]);
                out += oct;
            }
            out += "')\"";
        }
        if (keep < bad.size()) {
            quote(true);
            out.append(bad.size() - keep, '\n');
            quote(false);   // the next line starts with a quote
        }
        bad.clear();
    };
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        const size_t n = utf8_at(s, i, cp);
        const bool control = n > 0 && ((cp < 0x20 && cp != '\t') || cp == 0x7F || (cp >= 0x80 && cp < 0xA0));
        if (n == 0 || control) {
            bad.append(s, i, n ? n : 1);
            i += n ? n : 1;
            continue;
        }
        flush_bad();
        quote(true);
        if (s[i] == '\'') out += "'\\''";
        else out.append(s, i, n);
        i += n;
    }
    flush_bad();
    quote(false);
    return out.empty() ? "''" : out;
}

} // namespace reap::util

// Text from inputs is data: corpus domains, file names and build names reach
// SVG figures, Markdown cards, shell blocks and the terminal, and in none of
// them may they act as markup or commands. One escape per destination, here.
#pragma once

#include <string>

namespace reap::util {

// `s` with every byte sequence that is not UTF-8, and every control character
// XML 1.0 forbids or a terminal would act on (all below 0x20 but tab and
// newline, DEL, and the C1 controls), replaced by U+FFFD.
std::string printable_utf8(const std::string & s, bool keep_newlines = true);

// Whether `s` is one line of printable UTF-8 (printable_utf8(s, false) == s):
// names that are shown everywhere (corpus domains) must be.
bool is_printable_line(const std::string & s);

// XML/SVG character data and attribute values: printable_utf8, then & < > " '
// as entities.
std::string xml_text(const std::string & s);

// One line of text for a terminal or a log: printable_utf8 with newlines
// replaced too.
std::string terminal_text(const std::string & s);

// Markdown inline text (a table cell, a heading, a link's text): one line;
// the characters Markdown or HTML would read as markup (\ ` * _ [ ] < > | #
// ! and the like) backslash-escaped.
std::string markdown_text(const std::string & s);

// One word for a POSIX shell that names `s` byte for byte, single-quoted when
// it holds anything but [A-Za-z0-9_./:=+-] (a ' inside becomes '\''); bytes
// that are not printable UTF-8 become "$(printf '\ooo')" pieces, so the word
// is printable text for a Markdown code block and still names the file.
std::string shell_word(const std::string & s);

} // namespace reap::util

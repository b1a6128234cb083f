// Text from inputs is data (util/text_escape.h): the escapes checked against
// the byte sequences UTF-8 forbids and the characters each destination acts
// on, and a chart whose series and row names are hostile is checked to be
// well-formed XML by Python's own parser (an independent reader).
#include "util/svg_chart.h"
#include "util/text_escape.h"

#include "prune_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

namespace u = reap::util;

namespace {
const std::string k_fffd = "\xEF\xBF\xBD";
}

TEST(TextEscape, ReplacesWhatIsNotPrintableUtf8) {
    EXPECT_EQ(u::printable_utf8("plain, é ✓ 𝄞"), "plain, é ✓ 𝄞");
    EXPECT_EQ(u::printable_utf8("a\xff" "b"), "a" + k_fffd + "b");
    EXPECT_EQ(u::printable_utf8("\xC0\xAF"), k_fffd + k_fffd);          // overlong '/'
    EXPECT_EQ(u::printable_utf8("\xED\xA0\x80"), k_fffd + k_fffd + k_fffd);   // a UTF-16 surrogate
    EXPECT_EQ(u::printable_utf8("\xE2\x9C"), k_fffd + k_fffd);          // cut short
    EXPECT_EQ(u::printable_utf8("bell\a esc\x1b[31m del\x7f"), "bell" + k_fffd + " esc" + k_fffd + "[31m del" + k_fffd);
    EXPECT_EQ(u::printable_utf8("c1 \xC2\x9B"), "c1 " + k_fffd);          // CSI as a C1 control
    EXPECT_EQ(u::printable_utf8("tab\tline\n"), "tab\tline\n");
    EXPECT_EQ(u::terminal_text("two\nlines"), "two" + k_fffd + "lines");
}

TEST(TextEscape, EachDestinationItsOwnEscape) {
    EXPECT_EQ(u::xml_text("<script>&\"'"), "&lt;script&gt;&amp;&quot;&apos;");
    EXPECT_EQ(u::markdown_text("a|b `c` [d](e) <x> *y* #z"), "a\\|b \\`c\\` \\[d\\]\\(e\\) \\<x\\> \\*y\\* \\#z");
    EXPECT_EQ(u::markdown_text("two\nlines"), "two" + k_fffd + "lines");
    EXPECT_EQ(u::shell_word("model-Q4_K.gguf"), "model-Q4_K.gguf");
    EXPECT_EQ(u::shell_word("m x.gguf"), "'m x.gguf'");
    EXPECT_EQ(u::shell_word("m'`$(rm -rf ~)`.gguf"), "'m'\\''`$(rm -rf ~)`.gguf'");
    EXPECT_EQ(u::shell_word(""), "''");
}

// A name that is not printable (a newline, a control, a byte that is not
// UTF-8) is still handed to the shell exactly: dash (POSIX sh) reads each
// word back to the same bytes, and the word itself is printable text whose
// lines after the first start with a quote (no Markdown fence can close on
// one). Before, the card printed U+FFFD for such bytes: a command naming a
// file that does not exist (issue 37 item 14).
TEST(TextEscape, AShellWordNamesEveryByte) {
    const std::vector<std::string> names = {
        "cut\nx.gguf", "cut\n", "\n```\n<b>x</b>.gguf", "a\x01\x1b[2J\xff\xfe'b\n\nc\n\x02.gguf",
        "100%s\\n%d.gguf", "tab\there\xC2\x9B.gguf", "\n", "mod\xC3\xA8le\x7f.gguf"};
    for (const std::string & name : names) {
        const std::string word = u::shell_word(name);
        EXPECT_EQ(u::printable_utf8(word), word) << word;
        for (size_t at = word.find('\n'); at != std::string::npos; at = word.find('\n', at + 1)) {
            EXPECT_TRUE(word[at + 1] == '\'' || word[at + 1] == '\n') << word;
        }
        const std::string script = ::testing::TempDir() + "/shell_word.sh";
        {
            std::ofstream f(script, std::ios::binary);
            f << "printf '%s' " << word << "\n";
        }
        FILE * p = ::popen(("sh " + script).c_str(), "r");
        ASSERT_NE(p, nullptr);
        std::string got;
        char buf[256];
        for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) got.append(buf, n);
        EXPECT_EQ(::pclose(p), 0) << word;
        EXPECT_EQ(got, name) << word;
    }
}

TEST(TextEscape, HostileNamesMakeWellFormedSvg) {
    const std::string hostile = "m<script>alert(1)</script>\x01\x1b[2J\xff&\"'";
    u::chart c;
    c.title = hostile;
    c.x_label = hostile;
    u::chart_panel p;
    p.y_label = hostile;
    u::chart_series s;
    s.name = hostile;
    s.x = {1, 2};
    s.y = {3, 4};
    p.series.push_back(s);
    c.panels.push_back(p);
    u::heatmap h;
    h.title = hostile;
    h.x_label = hostile;
    h.value_label = hostile;
    h.row_labels = {hostile};
    h.n_cols = 1;
    h.values = {0.5};
    h.marked = {1};
    const std::string dir = prune_test::scratch("text-escape");
    for (const auto & [name, svg] : {std::pair<std::string, std::string>{"chart.svg", u::render_svg(c)},
                                     {"heatmap.svg", u::render_heatmap_svg(h)}}) {
        EXPECT_EQ(svg.find("<script"), std::string::npos) << name;
        std::ofstream(dir + "/" + name, std::ios::binary) << svg;
        std::string out;
        EXPECT_EQ(prune_test::run("/usr/bin/python3 -c 'import sys, xml.dom.minidom; "
                                  "xml.dom.minidom.parse(sys.argv[1])' " + prune_test::quote(dir + "/" + name) + " 2>&1",
                                  out), 0)
            << name << " is not well-formed XML: " << out;
    }
}

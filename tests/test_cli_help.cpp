// The command line against its own documentation, through the reap binary
// ($REAP_BIN; skipped when it is not built):
//   * every command `reap help` lists: the options its --help lists are the
//     option table's (`reap COMMAND --list-options`, the hidden listing of the
//     table the parser runs on), the usage line names only listed options, and
//     the parser accepts every one of them with a value (it reaches the next,
//     deliberately unknown argument; for calibrate, llama.cpp's own parser
//     accepts the flags handed to it), while an unlisted option is refused;
//   * README.md and docs/commands.md name only options that the command's
//     --help lists;
//   * exit statuses as cmp/diff: 0 success, 1 verify finds a difference,
//     2 usage error, missing or malformed input; integers out of range
//     (--shard 1/-2, 0/99999999999999999999) are usage errors, not wrapped.
//   * a reap built without llama.cpp (REAP_WITH_LLAMA 0: the sanitizer phase)
//     lists calibrate, eval and sweep apart, as not in this build, and each of
//     them, whatever its arguments, exits 2 saying so and writes nothing; a
//     full build has no such list. The checks above then cover the commands
//     this build has.
#include "gguf_test_util.h"
#include "prune_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace g = reap::gguf;
using prune_test::quote;

namespace {

// Commands whose parser does not use the option table yet: only their help
// and README are checked. The test fails once one of them gains
// --list-options, so that it is moved out of here and checked in full.
const std::set<std::string> k_not_table_driven = {};

// The arguments that get a command that hands unknown flags to llama.cpp
// (options::forward_unknown) past its own checks, to llama.cpp's parser and
// then to opening files that do not exist ("DIR" is a scratch directory).
const std::map<std::string, std::string> k_forwarding_base = {
    {"calibrate", "-m DIR/missing.gguf --corpus DIR/missing.jsonl -o DIR/out.gguf"},
    {"eval", "-m DIR/missing.gguf -p DIR/missing-p.gguf -f DIR/missing.txt"},
    {"sweep", "DIR/missing-saliency.gguf -m DIR/missing.gguf -f DIR/missing.txt --keep 4"},
    {"fit", "-m DIR/missing.gguf --corpus DIR/missing.jsonl -f DIR/missing.txt --budget 1G -o DIR/fit"},
    {"judge", "DIR/missing-a.json DIR/missing-b.json --judge DIR/missing.gguf -o DIR/judge.json"},
};

// An option no command knows: the probe that follows the option under test.
const char * k_probe = "--zz-not-an-option";

struct result {
    int         status = -1;
    std::string out;  // stdout and stderr
};

std::string bin() { return prune_test::env_or("REAP_BIN", "/nonexistent"); }

result reap(const std::string & args) {
    result r;
    r.status = prune_test::run(quote(bin()) + " " + args, r.out);
    return r;
}

bool contains(const std::string & hay, const std::string & needle) { return hay.find(needle) != std::string::npos; }

std::vector<std::string> lines_of(const std::string & text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

std::vector<std::string> split_ws(const std::string & s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

// The command names of the rows under the line `heading` of `reap help`.
std::vector<std::string> help_rows(const std::string & heading_start) {
    std::vector<std::string> out;
    bool in_list = false;
    for (const std::string & line : lines_of(reap("help").out)) {
        if (!in_list) {
            in_list = line.compare(0, heading_start.size(), heading_start) == 0;
        } else {
            if (line.size() < 3 || line[0] != ' ' || line[2] == ' ') break;
            out.push_back(split_ws(line)[0]);
        }
    }
    return out;
}

// The commands `reap help` lists: the rows under "commands:".
std::vector<std::string> commands() { return help_rows("commands:"); }

// The commands it lists as not in this build (a build without llama.cpp).
std::vector<std::string> missing_commands() { return help_rows("not in this build"); }

// What a build without llama.cpp says for a command that runs a model.
const char * k_without_llama = "this reap was built without llama.cpp";

// The options an option row of a --help lists: a row starts with two blanks
// and '-'; its names run up to the first double blank, separated by ", ",
// each optionally followed by a value name.
std::set<std::string> listed_options(const std::string & help) {
    std::set<std::string> out;
    for (const std::string & line : lines_of(help)) {
        if (line.size() < 3 || line.compare(0, 3, "  -") != 0) continue;
        std::string left = line.substr(2, line.find("  ", 2) == std::string::npos ? std::string::npos : line.find("  ", 2) - 2);
        size_t start = 0;
        while (start < left.size()) {
            size_t comma = left.find(", ", start);
            if (comma == std::string::npos) comma = left.size();
            const std::string item = left.substr(start, comma - start);
            const std::string name = item.substr(0, item.find(' '));
            if (!name.empty() && name[0] == '-') out.insert(name);
            start = comma + 2;
        }
    }
    return out;
}

// The option-like words of `text` ("[--json]", "(--keep", "--domain NAME=]..."):
// words that start with '-' once brackets and parentheses are stripped.
std::set<std::string> option_words(const std::string & text) {
    std::set<std::string> out;
    for (std::string w : split_ws(text)) {
        while (!w.empty() && (w[0] == '[' || w[0] == '(' || w[0] == '|')) w.erase(0, 1);
        if (w.size() < 2 || w[0] != '-' || !(std::isalpha((unsigned char) w[1]) || w[1] == '-')) continue;
        size_t end = 1;
        while (end < w.size() && (std::isalnum((unsigned char) w[end]) || w[end] == '-')) ++end;
        out.insert(w.substr(0, end));
    }
    return out;
}

// The usage lines of a --help: everything before the first blank line.
std::string usage_lines(const std::string & help) { return help.substr(0, help.find("\n\n")); }

struct table_row {
    std::vector<std::string> names;
    std::string              value;  // "" flag, "[X]" optional
    bool                     forward = false;
};

// An option relation the table declares: "for" (names[0] belongs to the mode
// `mode`) or "excludes" (names[0] and names[1] do not go together).
struct table_relation {
    std::string              kind, mode;
    std::vector<std::string> names;
};

struct table {
    std::vector<table_row>      rows;
    std::vector<table_relation> relations;
    bool                        forward_unknown = false;
};

bool list_table(const std::string & cmd, table & t, std::string & why) {
    const result r = reap(cmd + " --list-options");
    if (r.status != 0) {
        why = "reap " + cmd + " --list-options: status " + std::to_string(r.status) + "\n" + r.out;
        return false;
    }
    for (const std::string & line : lines_of(r.out)) {
        std::vector<std::string> f;
        size_t start = 0;
        for (;;) {
            const size_t tab = line.find('\t', start);
            f.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
            if (tab == std::string::npos) break;
            start = tab + 1;
        }
        if (f.size() == 3 && (f[0] == "for" || f[0] == "excludes")) {
            t.relations.push_back(f[0] == "for" ? table_relation{"for", f[2], {f[1]}} : table_relation{"excludes", "", {f[1], f[2]}});
            continue;
        }
        if (f.size() != 3 || (f[2] != "reap" && f[2] != "forward")) {
            why = "reap " + cmd + " --list-options: malformed line '" + line + "'";
            return false;
        }
        if (f[0] == "*") {
            t.forward_unknown = true;
            continue;
        }
        table_row row;
        row.names = split_ws(f[0]);
        row.value = f[1];
        row.forward = f[2] == "forward";
        t.rows.push_back(row);
    }
    return true;
}

// A value each option accepts, by its value name (or the option itself).
std::string sample_value(const std::string & option, std::string value) {
    if (!value.empty() && value.front() == '[') value = value.substr(1, value.size() - 2);
    static const std::map<std::string, std::string> by_option = {{"--consensus", "minrank"}, {"--channel-score", "energy"}};
    static const std::map<std::string, std::string> by_value = {
        {"N", "2"}, {"S", "1"}, {"R", "0.5"}, {"SIZE", "1G"}, {"i/n", "0/2"}, {"a,b", "a"}, {"M", "frequency"}, {"K", "8"},
        {"NAME=FILE", "d=x.imatrix.gguf"}, {"TYPE", "f16"}, {"on|off|auto", "on"}, {"PATTERN=BUFTYPE,...", "exps=CPU"},
        {"HOST:PORT,...", "127.0.0.1:50052"}, {"K,K,...", "8,16"},
        {"A,B,...", "experts,width"}, {"T", "q8_0"}, {"M,M,...", "reap,man"},
    };
    if (auto it = by_option.find(option); it != by_option.end()) return it->second;
    if (auto it = by_value.find(value); it != by_value.end()) return it->second;
    return "x.file";  // FILE, PATH, MODEL.gguf, ...
}

std::string join(const std::set<std::string> & s) {
    std::string out;
    for (const auto & x : s) out += (out.empty() ? "" : " ") + x;
    return out;
}

std::set<std::string> minus(const std::set<std::string> & a, const std::set<std::string> & b) {
    std::set<std::string> out;
    for (const auto & x : a) {
        if (!b.count(x)) out.insert(x);
    }
    return out;
}

class Cli : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!prune_test::exists(bin())) GTEST_SKIP() << "reap binary not built ($REAP_BIN)";
    }
};

TEST_F(Cli, HelpListsExactlyWhatTheParserAccepts) {
    const std::vector<std::string> cmds = commands();
    ASSERT_GE(cmds.size(), REAP_WITH_LLAMA ? 9u : 6u) << reap("help").out;
    const std::string dir = prune_test::scratch("cli_help");
    for (const std::string & cmd : cmds) {
        SCOPED_TRACE("reap " + cmd);
        const result h = reap(cmd + " --help");
        ASSERT_EQ(h.status, 0) << h.out;
        const std::set<std::string> listed = listed_options(h.out);
        const std::set<std::string> in_usage = option_words(usage_lines(h.out));
        EXPECT_TRUE(minus(in_usage, listed).empty()) << "in the usage line, not listed: " << join(minus(in_usage, listed));
        if (k_not_table_driven.count(cmd)) {
            EXPECT_NE(reap(cmd + " --list-options").status, 0) << cmd << " has an option table now: take it out of k_not_table_driven";
            continue;
        }
        EXPECT_TRUE(listed.count("-h") && listed.count("--help")) << h.out;
        EXPECT_TRUE(contains(h.out, "\nexit status:\n  0 ") && contains(h.out, "\n  2 ")) << h.out;
        table t;
        std::string why;
        ASSERT_TRUE(list_table(cmd, t, why)) << why;
        std::set<std::string> in_table;
        for (const table_row & r : t.rows) in_table.insert(r.names.begin(), r.names.end());
        EXPECT_TRUE(minus(listed, in_table).empty()) << "listed, not in the table: " << join(minus(listed, in_table));
        EXPECT_TRUE(minus(in_table, listed).empty()) << "in the table, not listed: " << join(minus(in_table, listed));

        if (!t.forward_unknown) {
            // The parser refuses what is not listed ...
            const result bad = reap(cmd + " " + k_probe);
            EXPECT_EQ(bad.status, 2) << bad.out;
            EXPECT_TRUE(contains(bad.out, std::string("unknown option ") + k_probe)) << bad.out;
            // ... and takes each listed option with its value: parsing reaches the
            // probe after it. One run per row (its first name, without and with a
            // value when the value is optional); the row's other names, which the
            // table maps to the same row, together in one more run.
            std::string aliases;
            for (const table_row & r : t.rows) {
                if (r.names[0] == "-h") continue;
                std::vector<std::string> forms;
                if (r.value.empty() || r.value.front() == '[') forms.push_back(r.names[0]);
                if (!r.value.empty()) forms.push_back(r.names[0] + " " + quote(sample_value(r.names[0], r.value)));
                for (const std::string & form : forms) {
                    const result a = reap(cmd + " " + form + " " + k_probe);
                    EXPECT_EQ(a.status, 2) << form << "\n" << a.out;
                    EXPECT_TRUE(contains(a.out, std::string("unknown option ") + k_probe)) << form << "\n" << a.out;
                }
                for (size_t i = 1; i < r.names.size(); ++i) {
                    aliases += " " + r.names[i] + (r.value.empty() ? "" : " " + quote(sample_value(r.names[0], r.value)));
                }
            }
            if (!aliases.empty()) {
                const result a = reap(cmd + aliases + " " + k_probe);
                EXPECT_EQ(a.status, 2) << aliases << "\n" << a.out;
                EXPECT_TRUE(contains(a.out, std::string("unknown option ") + k_probe)) << aliases << "\n" << a.out;
            }
        } else {
            // A command that hands unknown flags to llama.cpp's parser: a run with
            // files that do not exist gets through both parsers (and then fails to
            // open them) unless a flag is refused.
            ASSERT_TRUE(k_forwarding_base.count(cmd)) << "say in k_forwarding_base how to run " << cmd;
            std::string base = cmd;
            for (std::string w : split_ws(k_forwarding_base.at(cmd))) {
                if (w.compare(0, 4, "DIR/") == 0) w = quote(dir + w.substr(3));
                base += " " + w;
            }
            base += " ";
            const result plain = reap(base);
            EXPECT_EQ(plain.status, 2) << plain.out;
            EXPECT_FALSE(contains(plain.out, "did not accept")) << plain.out;
            const result bad = reap(base + k_probe);
            EXPECT_EQ(bad.status, 2) << bad.out;
            EXPECT_TRUE(contains(bad.out, "did not accept")) << bad.out;
            std::string aliases;
            for (const table_row & r : t.rows) {
                if (r.names[0] == "-h") continue;
                const std::string value = r.value.empty() ? "" : " " + quote(sample_value(r.names[0], r.value));
                std::vector<std::string> forms = {r.names[0] + value};
                if (!r.value.empty() && r.value.front() == '[') forms.push_back(r.names[0]);
                for (const std::string & form : forms) {
                    const result a = reap(base + form);
                    EXPECT_EQ(a.status, 2) << form << "\n" << a.out;
                    EXPECT_FALSE(contains(a.out, "did not accept") || contains(a.out, "unknown option") ||
                                 contains(a.out, "needs a value")) << form << "\n" << a.out;
                }
                for (size_t i = 1; i < r.names.size(); ++i) aliases += " " + r.names[i] + value;
            }
            if (!aliases.empty()) {
                const result a = reap(base + aliases);
                EXPECT_EQ(a.status, 2) << aliases << "\n" << a.out;
                EXPECT_FALSE(contains(a.out, "did not accept") || contains(a.out, "unknown option") ||
                             contains(a.out, "needs a value")) << aliases << "\n" << a.out;
            }
        }
    }
}

// README.md (the short version) and docs/commands.md (the full reference) both.
TEST_F(Cli, ReadmeNamesOnlyOptionsTheHelpLists) {
    std::map<std::string, std::string> help;
    for (const std::string & c : commands()) help[c] = reap(c + " --help").out;
    // Documented, but without a --help in this build: their options are checked in a full build.
    std::set<std::string> missing;
    for (const std::string & c : missing_commands()) missing.insert(c);
    for (const char * doc : {"README.md", "docs/commands.md"}) {
        SCOPED_TRACE(doc);
        std::ifstream f(prune_test::env_or("REAP_SOURCE_DIR", REAP_SOURCE_DIR) + "/" + doc);
        ASSERT_TRUE(f.good());
        // Sections "### `reap CMD ...`" (or "## `reap CMD ...`") up to the next
        // heading: the options in the heading and in every code span that starts with '-'.
        std::string cmd;
        size_t n_checked = 0;
        std::set<std::string> sections;
        for (std::string line; std::getline(f, line);) {
            if (line.compare(0, 1, "#") == 0) {
                cmd.clear();
                const size_t hashes = line.find_first_not_of('#');
                if ((hashes == 2 || hashes == 3) && line.compare(hashes, 7, " `reap ") == 0) {
                    cmd = split_ws(line.substr(hashes + 7))[0];
                    ASSERT_TRUE(help.count(cmd) || missing.count(cmd)) << "README documents an unknown command: " << line;
                    sections.insert(cmd);
                    if (missing.count(cmd)) {
                        cmd.clear();
                        continue;
                    }
                    const std::string open = line.substr(hashes + 2);
                    const std::string span = open.substr(0, open.find('`'));
                    for (const std::string & o : option_words(span)) {
                        EXPECT_TRUE(listed_options(help[cmd]).count(o)) << "README heading names " << o << ", not in reap " << cmd << " --help";
                        ++n_checked;
                    }
                }
                continue;
            }
            if (cmd.empty()) continue;
            for (size_t a = line.find('`'); a != std::string::npos; a = line.find('`', a + 1)) {
                const size_t b = line.find('`', a + 1);
                if (b == std::string::npos) break;
                const std::string span = line.substr(a + 1, b - a - 1);
                if (!span.empty() && span[0] == '-') {
                    for (const std::string & o : option_words(span)) {
                        EXPECT_TRUE(listed_options(help[cmd]).count(o)) << "README's " << cmd << " section names " << o
                                                                         << ", not in reap " << cmd << " --help";
                        ++n_checked;
                    }
                }
                a = b;
            }
        }
        EXPECT_EQ(sections.size(), help.size() + missing.size())
            << doc << " documents " << sections.size() << " of " << help.size() + missing.size() << " commands";
        EXPECT_GT(n_checked, 30u);
    }
}

TEST_F(Cli, ExitStatusLikeCmp) {
    const std::string dir = prune_test::scratch("cli_exit");
    const std::string model = dir + "/m.gguf", plan = dir + "/p.json", out = dir + "/out.gguf";
    gguf_test::model_options mo;
    mo.n_layer = 1;  // one MoE block: qwen3moe has no dense blocks
    gguf_test::write_model(model, mo);

    // usage errors: 2
    EXPECT_EQ(reap("").status, 2);
    EXPECT_EQ(reap("frobnicate").status, 2);
    EXPECT_EQ(reap("help").status, 0);
    EXPECT_EQ(reap("inspect").status, 2);
    EXPECT_EQ(reap("inspect " + quote(model) + " --frobnicate").status, 2);
    EXPECT_EQ(reap("inspect " + quote(model) + " --keep").status, 2);
    EXPECT_EQ(reap("prune -m " + quote(model)).status, 2);
    // the one integer parser: no sign games, no wrap-around
    for (const std::string bad : {"0", "-1", "+1", "1x", "4294967296", "99999999999999999999", "-9223372036854775809"}) {
        const result r = reap("inspect " + quote(model) + " --keep " + bad);
        EXPECT_EQ(r.status, 2) << bad << "\n" << r.out;
        EXPECT_TRUE(contains(r.out, "--keep: '" + bad + "'")) << r.out;
    }
    for (const std::string bad : {"1/-2", "0/99999999999999999999", "0/4294967296", "2/2", "-1/2", "1", "/2", "1/"}) {
        if (!REAP_WITH_LLAMA) break;  // calibrate is a refusal there (CommandsThatRunAModel)
        const result r = reap("calibrate -m " + quote(model) + " --corpus x -o " + quote(dir + "/s.gguf") + " --shard " + bad);
        EXPECT_EQ(r.status, 2) << bad << "\n" << r.out;
        EXPECT_TRUE(contains(r.out, "--shard wants i/n")) << r.out;
    }
    if (REAP_WITH_LLAMA) {   // one base, one mask: a second --base-mask is a usage error, not the last one winning
        const result r = reap("eval -m " + quote(model) + " --base-mask a.json --base-mask b.json -p " + quote(model) + " -f x");
        EXPECT_EQ(r.status, 2) << r.out;
        EXPECT_TRUE(contains(r.out, "--base-mask given twice")) << r.out;
    }
    // inputs that cannot be read: 2
    EXPECT_EQ(reap("inspect " + quote(dir + "/missing.gguf")).status, 2);
    EXPECT_EQ(reap("compare " + quote(dir + "/a.json") + " " + quote(dir + "/b.json")).status, 2);
    EXPECT_EQ(reap("merge " + quote(dir + "/a.gguf") + " " + quote(dir + "/b.gguf") + " -o " + quote(dir + "/c.gguf")).status, 2);
    const result r_inspect = reap("inspect " + quote(model));
    ASSERT_EQ(r_inspect.status, 0) << r_inspect.out;

    // a pruned output that verifies: 0
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(model, m, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 2, 5, p, err)) << err;
    ASSERT_TRUE(reap::write_plan(p, plan, true, err)) << err;
    const result pr = reap("prune -m " + quote(model) + " --plan " + quote(plan) + " -o " + quote(out));
    ASSERT_EQ(pr.status, 0) << pr.out;
    const std::string verify = "verify -m " + quote(model) + " --plan " + quote(plan) + " ";
    result v = reap(verify + quote(out));
    ASSERT_EQ(v.status, 0) << v.out;

    // verify cannot check: 2, and it does not say FAILED
    for (const std::string & args : {verify + quote(dir + "/missing.gguf"),
                                     "verify -m " + quote(dir + "/missing.gguf") + " --plan " + quote(plan) + " " + quote(out),
                                     "verify -m " + quote(model) + " --plan " + quote(dir + "/missing.json") + " " + quote(out),
                                     verify + quote(out) + " --sums " + quote(dir + "/missing.sums"),
                                     verify + quote(model), verify + quote(dir), verify, verify + quote(out) + " --bogus"}) {
        v = reap(args);
        EXPECT_EQ(v.status, 2) << args << "\n" << v.out;
        EXPECT_FALSE(contains(v.out, "FAILED")) << args << "\n" << v.out;
    }

    // verify finds a difference: 1
    g::model om;
    ASSERT_TRUE(g::open_model(out, om, err)) << err;
    const g::tensor_info * t = om.find_tensor("blk.0.ffn_down_exps.weight");
    ASSERT_NE(t, nullptr);
    const std::vector<uint8_t> good = gguf_test::read_all(out);
    std::vector<uint8_t> bytes = good;
    bytes[size_t(t->file_offset + t->nbytes / 2)] ^= 0x10;
    gguf_test::write_all(out, bytes);
    v = reap(verify + quote(out));
    EXPECT_EQ(v.status, 1) << v.out;
    EXPECT_TRUE(contains(v.out, "FAILED") && contains(v.out, "blk.0.ffn_down_exps.weight")) << v.out;
    bytes.assign(good.begin(), good.begin() + std::ptrdiff_t(good.size() / 2));  // truncated
    gguf_test::write_all(out, bytes);
    v = reap(verify + quote(out));
    EXPECT_EQ(v.status, 1) << v.out;
    gguf_test::write_all(out, good);
    ASSERT_EQ(reap(verify + quote(out)).status, 0);
    ASSERT_EQ(::unlink(reap::prune::sums_path_for(out).c_str()), 0);  // SHA256SUMS gone
    v = reap(verify + quote(out));
    EXPECT_EQ(v.status, 1) << v.out;
    EXPECT_EQ(reap(verify + quote(out) + " --no-sums").status, 0);
}

// calibrate, eval and sweep run a model through llama.cpp: a full build lists
// them among the commands; a build without llama.cpp lists them apart and
// refuses them, with any arguments, exit 2 and no output written.
TEST_F(Cli, CommandsThatRunAModelNeedLlama) {
    const std::vector<std::string> runs_model = {"calibrate", "eval", "sweep", "fit", "judge"};
    const std::vector<std::string> cmds = commands(), missing = missing_commands();
    const std::string help = reap("help").out;
    for (const std::string & c : runs_model) {
        EXPECT_EQ(std::count(cmds.begin(), cmds.end(), c), REAP_WITH_LLAMA ? 1 : 0) << c << "\n" << help;
    }
    if (REAP_WITH_LLAMA) {
        EXPECT_TRUE(missing.empty()) << help;
        EXPECT_FALSE(contains(help, "not in this build")) << help;
        EXPECT_FALSE(contains(reap("calibrate --help").out, k_without_llama));
        return;
    }
    EXPECT_EQ(missing, runs_model) << help;
    const std::string dir = prune_test::scratch("cli_without_llama");
    const std::string model = dir + "/m.gguf", corpus = dir + "/c.jsonl", text = dir + "/t.txt";
    gguf_test::model_options mo;
    mo.n_layer = 1;
    gguf_test::write_model(model, mo);
    std::ofstream(corpus) << "{\"domain\": \"en\", \"text\": \"hello\"}\n";
    std::ofstream(text) << "hello\n";
    const std::map<std::string, std::string> real_args = {
        {"calibrate", "-m " + quote(model) + " --corpus " + quote(corpus) + " -o " + quote(dir + "/out.gguf")},
        {"eval", "-m " + quote(model) + " -p " + quote(model) + " -f " + quote(text) + " --json"},
        {"sweep", quote(dir + "/sal.gguf") + " -m " + quote(model) + " -f " + quote(text) + " --keep 4 -o " + quote(dir + "/out.json")},
        {"fit", "-m " + quote(model) + " --corpus " + quote(corpus) + " -f " + quote(text) + " --budget 1G -o " + quote(dir + "/fit")},
        {"judge", quote(text) + " " + quote(text) + " --judge " + quote(model) + " -o " + quote(dir + "/judge.json")},
    };
    for (const std::string & c : runs_model) {
        for (const std::string & args : {c, c + " --help", c + " --list-options", "help " + c, c + " " + real_args.at(c)}) {
            SCOPED_TRACE("reap " + args);
            const result r = reap(args);
            EXPECT_EQ(r.status, 2) << r.out;
            EXPECT_TRUE(contains(r.out, "reap " + c + ": " + k_without_llama)) << r.out;
        }
    }
    EXPECT_FALSE(prune_test::exists(dir + "/out.gguf"));
    EXPECT_FALSE(prune_test::exists(dir + "/out.json"));
    EXPECT_FALSE(prune_test::exists(dir + "/fit"));
}

// An option whose mode was not asked for is refused, not silently ignored
// (issue 37, item 14): the needle grid's options without --needle, free
// generation's without --generate, fit's gate options without a gate. Without
// llama.cpp these commands are refused as a whole (the same exit status).
TEST_F(Cli, AnOptionWithoutItsModeIsRefused) {
    const std::string files = " -m m.gguf -p m.gguf -f t.txt";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"eval" + files + " --needle-lengths 64", "--needle-lengths is for the needle grid: give --needle"},
        {"eval" + files + " --needles 4", "--needles is for the needle grid: give --needle"},
        {"eval" + files + " --max-new 5", "--max-new is for free generation: give --generate PROMPTS"},
        {"eval" + files + " --temp 0.5", "--temp is for free generation: give --generate PROMPTS"},
        {"sweep s.gguf -m m.gguf -f t.txt --keep 4 --needle-depths 0.5", "--needle-depths is for the needle grid: give --needle"},
        {"fit -m m.gguf --corpus c.jsonl -f t.txt --budget 1G -o d --needle-slack 2", "--needle-slack is for the needle gate: give --needle"},
        {"fit -m m.gguf --corpus c.jsonl -f t.txt --budget 1G -o d --needle --gate-slack 0.1",
         "--gate-slack is for the generation gate: give --generate PROMPTS"},
        {"fit -m m.gguf --corpus c.jsonl -f t.txt --budget 1G -o d --gate-top 2", "--gate-top is for the gates: give --needle, --generate"},
        // issue 49 item 14: at their default values too
        {"eval" + files + " --needles 1", "--needles is for the needle grid: give --needle"},
        {"eval" + files + " --temp 0", "--temp is for free generation: give --generate PROMPTS"},
        {"eval" + files + " --max-new 128", "--max-new is for free generation: give --generate PROMPTS"},
        {"fit -m m.gguf --corpus c.jsonl -f t.txt --budget 1G -o d --dry-run --needle-slack 0", "--needle-slack is for the needle gate: give --needle"},
        {"fit -m m.gguf --corpus c.jsonl -f t.txt --budget 1G -o d --dry-run --gate-top 3", "--gate-top is for the gates: give --needle, --generate"},
        {"fit -m m.gguf --corpus c.jsonl -f t.txt --budget 1G -o d --dry-run --gate-slack 0.05", "--gate-slack is for the generation gate: give --generate PROMPTS"},
        {"fit -m m.gguf --corpus c.jsonl -f t.txt --budget 1G -o d --task-slack 0.1", "--task-slack is for the task gate"},
        {"eval" + files + " --tasks-limit 5", "--tasks-limit is for the multiple-choice files: give --multiple-choice, --hellaswag or --winogrande"},
        {"eval" + files + " --needles 100000", "--needles: '100000' is too large"},
        {"eval" + files + " --prompt hi", "--prompt is for --smoke: give --smoke"},
        {"eval" + files + " -n 12", "-n is for --smoke: give --smoke"},
        // an empty list is no list (before, "," meant the defaults)
        {"eval" + files + " --needle --needle-lengths ,", "--needle-lengths: ',' names no length"},
        {"eval" + files + " --needle --needle-depths ,", "--needle-depths: ',' names no depth"},
    };
    for (const auto & [args, why] : cases) {
        SCOPED_TRACE("reap " + args);
        const result r = reap(args);
        EXPECT_EQ(r.status, 2) << r.out;
        EXPECT_TRUE(contains(r.out, REAP_WITH_LLAMA ? why : k_without_llama)) << r.out;
    }
}

// Issue 50 item 4: what an option is for and what it excludes is declared in
// the option table, once, and every command refuses the same way. The walk:
// every relation of every command's table (--list-options), each option given
// alone with a value it accepts, must be refused with the one message form
// ("NAME is for MODE: give ...", "A and B do not go together: ..."), before
// anything else is asked of the command line; and the gate, needle, task and
// endpoint options are among them.
TEST_F(Cli, EveryDeclaredOptionRelationRefusesInOneForm) {
    std::set<std::string> seen;
    size_t walked = 0;
    for (const std::string & cmd : commands()) {
        if (k_not_table_driven.count(cmd)) continue;
        table t;
        std::string why;
        ASSERT_TRUE(list_table(cmd, t, why)) << why;
        const auto with_value = [&t](const std::string & name, const std::string & value) {
            for (const table_row & r : t.rows) {
                if (std::find(r.names.begin(), r.names.end(), name) == r.names.end()) continue;
                return r.value.empty() ? name : name + " " + value;
            }
            return name;
        };
        const auto value_of = [&t](const std::string & name) {
            for (const table_row & r : t.rows) {
                if (std::find(r.names.begin(), r.names.end(), name) != r.names.end()) return sample_value(name, r.value);
            }
            return std::string();
        };
        for (const table_relation & rel : t.relations) {
            SCOPED_TRACE("reap " + cmd + " " + rel.kind + " " + rel.names[0]);
            const std::string expected = rel.kind == "for" ? rel.names[0] + " is for " + rel.mode + ": give "
                                                           : rel.names[0] + " and " + rel.names[1] + " do not go together: ";
            // the table's sample value first, then numbers most options accept
            bool refused = false;
            std::string last;
            for (const std::string & v : {value_of(rel.names[0]), std::string("1"), std::string("0.5"), std::string("64")}) {
                std::string args = cmd + " " + with_value(rel.names[0], v);
                if (rel.kind == "excludes") args += " " + with_value(rel.names[1], value_of(rel.names[1]));
                const result r = reap(args);
                last = r.out;
                if (r.status == 2 && contains(r.out, "reap " + cmd + ": " + expected)) {
                    refused = true;
                    break;
                }
            }
            EXPECT_TRUE(refused) << last;
            seen.insert(cmd + " " + rel.names[0]);
            ++walked;
        }
    }
    if (REAP_WITH_LLAMA) {
        for (const char * r : {"fit --gate-slack", "fit --needle-slack", "fit --gate-top", "fit --task-slack", "eval --needles",
                               "eval --temp", "eval --samples", "eval --tasks-limit", "eval --prompt", "sweep --tasks-limit",
                               "sweep --needle-depths", "judge --timeout", "judge --judge-model", "eval --needle"}) {
            EXPECT_TRUE(seen.count(r)) << r << " is not declared in its command's table";
        }
    }
    printf("%zu option relations walked\n", walked);
}

} // namespace


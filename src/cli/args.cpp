// The shared steps of the reap subcommands: see args.h.
#include "cli/args.h"

#include <algorithm>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>

namespace reap::cli {

namespace {

// The help's width: rows are wrapped to fit it.
constexpr size_t k_width = 90;
// Option names longer than this put their help two spaces after them instead
// of in the common column.
constexpr size_t k_max_column = 30;

std::string kind_of_integer(int64_t min) {
    return min >= 1 ? "a positive integer" : min == 0 ? "a non-negative integer" : "an integer";
}

// Appends `text` word-wrapped to `width` columns; lines after the first are
// indented by `indent` spaces. '\n' in `text` starts a new line.
void wrap(std::string & out, const std::string & text, size_t first_width, size_t indent) {
    size_t width = first_width;
    size_t start = 0;
    bool first_line = true;
    while (start <= text.size()) {
        size_t nl = text.find('\n', start);
        if (nl == std::string::npos) nl = text.size();
        const std::string para = text.substr(start, nl - start);
        size_t used = 0;
        bool line_has_word = false;
        auto new_line = [&]() {
            out += "\n" + std::string(indent, ' ');
            width = k_width > indent + 20 ? k_width - indent : 20;
            used = 0;
            line_has_word = false;
        };
        if (!first_line) new_line();
        first_line = false;
        // A paragraph's leading blanks are kept (for indented sub-items).
        size_t i = 0;
        while (i < para.size() && para[i] == ' ') ++i;
        out += para.substr(0, i);
        used = i;
        while (i < para.size()) {
            size_t j = para.find(' ', i);
            if (j == std::string::npos) j = para.size();
            const std::string word = para.substr(i, j - i);
            if (line_has_word && used + 1 + word.size() > width) new_line();
            if (line_has_word) {
                out += ' ';
                ++used;
            }
            out += word;
            used += word.size();
            line_has_word = true;
            i = j;
            while (i < para.size() && para[i] == ' ') ++i;
        }
        if (nl == text.size()) break;
        start = nl + 1;
    }
}

std::string with_newline(std::string s) {
    if (!s.empty() && s.back() != '\n') s += '\n';
    return s;
}

} // namespace

bool parse_part_of(const std::string & option, const std::string & v, uint32_t & i, uint32_t & n, std::string & err) {
    const size_t slash = v.find('/');
    int64_t index = 0, count = 0;
    std::string why;
    if (slash == std::string::npos) {
        why = "no '/'";
    } else if (parse_integer("n", v.substr(slash + 1), 1, UINT32_MAX, count, why) &&
               parse_integer("i", v.substr(0, slash), 0, UINT32_MAX, index, why) && index >= count) {
        why = "i is not below n";
    }
    if (!why.empty()) {
        err = option + " wants i/n with 0 <= i < n, got '" + v + "' (" + why + ")";
        return false;
    }
    i = uint32_t(index);
    n = uint32_t(count);
    return true;
}

bool parse_integer(const std::string & option, const std::string & s, int64_t min, int64_t max, int64_t & out,
                   std::string & err) {
    const std::string what = option + ": '" + s + "' ";
    size_t i = 0;
    const bool neg = !s.empty() && s[0] == '-';
    if (neg) ++i;
    if (i == s.size()) {
        err = what + "is not " + kind_of_integer(min);
        return false;
    }
    // The magnitude, saturated just above 2^63 so that no digit string wraps.
    const uint64_t limit = uint64_t(INT64_MAX) + 1;
    uint64_t mag = 0;
    for (; i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') {
            err = what + "is not " + kind_of_integer(min);
            return false;
        }
        const uint64_t d = uint64_t(s[i] - '0');
        mag = mag > (limit - d) / 10 ? limit + 1 : mag * 10 + d;
    }
    const bool too_low = neg && (mag > limit || int64_t(0 - mag) < min);
    const bool too_high = !neg && (mag > uint64_t(INT64_MAX) || int64_t(mag) > max);
    if (too_low) {
        err = what + (min >= 0 ? "is not " + kind_of_integer(min) : "is too small (at least " + std::to_string(min) + ")");
        return false;
    }
    if (too_high) {
        err = what + "is too large (at most " + std::to_string(max) + ")";
        return false;
    }
    if (neg) {
        out = mag == limit ? INT64_MIN : -int64_t(mag);
    } else {
        out = int64_t(mag);
    }
    if (out < min) {  // "-0" and the like when min > 0
        err = what + "is not " + kind_of_integer(min);
        return false;
    }
    return true;
}

bool parse_number(const std::string & option, const std::string & s, double lo, double hi, double & out, std::string & err) {
    char * end = nullptr;
    const double x = strtod(s.c_str(), &end);
    if (s.empty() || *end || !(x >= lo && x <= hi)) {
        char range[64];
        snprintf(range, sizeof(range), "%g..%g", lo, hi);
        err = option + ": '" + s + "' is not a number within " + range;
        return false;
    }
    out = x;
    return true;
}

bool parse_integer_list(const std::string & option, const std::string & v, int64_t min, int64_t max,
                        std::vector<int64_t> & out, std::string & err) {
    for (const std::string & item : split_list(v)) {
        int64_t x = 0;
        if (!parse_integer(option, item, min, max, x, err)) return false;
        out.push_back(x);
    }
    return true;
}

std::vector<std::string> split_list(const std::string & s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t comma = s.find(',', start);
        const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) out.push_back(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

int fail(const char * cmd, const std::string & msg) {
    fprintf(stderr, "reap %s: %s\n", cmd, msg.c_str());
    return exit_error;
}

int fail(const char * cmd, const util::error & e) { return fail(cmd, e.message); }

// ---- options ----

options::options(const char * cmd, std::string usage) : cmd_(cmd), usage_(with_newline(std::move(usage))) {}

options & options::about(std::string text) {
    about_ = with_newline(std::move(text));
    return *this;
}

options & options::section(std::string title) {
    row r;
    r.kind = row_kind::section;
    r.help = std::move(title);
    rows_.push_back(std::move(r));
    return *this;
}

options & options::prose(std::string text) {
    row r;
    r.kind = row_kind::prose;
    r.help = with_newline(std::move(text));
    rows_.push_back(std::move(r));
    return *this;
}

options & options::help_row() {
    row r;
    r.kind = row_kind::help;
    r.names = {"-h", "--help"};
    r.help = "this help";
    rows_.push_back(std::move(r));
    return *this;
}

options & options::exit_note(int status, std::string text) {
    exit_notes_.emplace_back(status, std::move(text));
    return *this;
}

options & options::add(const std::string & names, std::string value, std::string help, handler set) {
    row r;
    for (std::string n : split_list(names)) {
        n.erase(0, n.find_first_not_of(' '));
        if (n.empty() || n[0] != '-' || find(n) || n == "-h" || n == "--help" || n == "--list-options") {
            fprintf(stderr, "reap %s: option table: bad or repeated name '%s'\n", cmd_, n.c_str());
            abort();
        }
        r.names.push_back(n);
    }
    r.value = std::move(value);
    r.help = std::move(help);
    r.set = std::move(set);
    rows_.push_back(std::move(r));
    return *this;
}

options & options::flag(const std::string & names, std::string help, bool & target) {
    return flag(names, std::move(help), target, true);
}

options & options::flag(const std::string & names, std::string help, bool & target, bool value) {
    return add(names, "", std::move(help), [&target, value](const std::string &, std::string &) {
        target = value;
        return true;
    });
}

options & options::text(const std::string & names, std::string value, std::string help, std::string & target) {
    return add(names, std::move(value), std::move(help), [&target](const std::string & v, std::string &) {
        target = v;
        return true;
    });
}

options & options::texts(const std::string & names, std::string value, std::string help, std::vector<std::string> & target) {
    return add(names, std::move(value), std::move(help), [&target](const std::string & v, std::string &) {
        target.push_back(v);
        return true;
    });
}

options & options::custom(const std::string & names, std::string value, std::string help, handler set) {
    return add(names, std::move(value), std::move(help), std::move(set));
}

options & options::optional(const std::string & names, std::string value, std::vector<std::string> words, std::string help,
                            handler set) {
    add(names, std::move(value), std::move(help), std::move(set));
    rows_.back().value_optional = true;
    rows_.back().words = std::move(words);
    return *this;
}

options & options::forward(const std::string & names, std::string value, std::string help, handler also) {
    add(names, std::move(value), std::move(help), std::move(also));
    rows_.back().forward = true;
    return *this;
}

options & options::forward_optional(const std::string & names, std::string value, std::vector<std::string> words,
                                    std::string implied, std::string help) {
    optional(names, std::move(value), std::move(words), std::move(help), nullptr);
    rows_.back().forward = true;
    rows_.back().implied = std::move(implied);
    return *this;
}

options & options::forward_unknown(std::string help) {
    forward_unknown_ = true;
    if (!help.empty()) prose(std::move(help));
    return *this;
}

options & options::forward_unknown(std::string help, std::function<int(const std::string &)> n_values) {
    unknown_values_ = std::move(n_values);
    return forward_unknown(std::move(help));
}

options & options::positional(handler set) {
    positional_ = std::move(set);
    return *this;
}

const options::row * options::find(const std::string & name) const {
    for (const row & r : rows_) {
        if (r.kind != row_kind::option) continue;
        if (std::find(r.names.begin(), r.names.end(), name) != r.names.end()) return &r;
    }
    return nullptr;
}

std::string options::or_list(const std::vector<std::string> & words) {
    std::string s;
    for (size_t i = 0; i < words.size(); ++i) s += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
    return s;
}

std::string options::first_long_name(const std::string & names) {
    std::string best;
    for (std::string n : split_list(names)) {
        n.erase(0, n.find_first_not_of(' '));
        if (n.size() > best.size()) best = n;
    }
    return best;
}

void options::range_bug() {
    fprintf(stderr, "reap: option table: an integer option's range does not fit its variable\n");
    abort();
}

bool options::parse(int argc, char ** argv, int & status, bool check_required_too) {
    forwarded_.assign(1, argv[0]);
    bool only_positional = false;
    std::string err;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (!only_positional && a == "--") {
            only_positional = true;
            continue;
        }
        if (only_positional || a.size() < 2 || a[0] != '-') {
            if (positional_) {
                if (!positional_(a, err)) {
                    status = usage_error(err);
                    return false;
                }
            } else if (forward_unknown_) {
                forwarded_.push_back(argv[i]);
            } else {
                status = usage_error("unexpected argument '" + a + "'");
                return false;
            }
            continue;
        }
        if (a == "-h" || a == "--help") {
            print_help(stdout);
            status = exit_ok;
            return false;
        }
        if (a == "--list-options") {
            print_list(stdout);
            status = exit_ok;
            return false;
        }
        const row * r = find(a);
        if (!r) {
            if (forward_unknown_) {
                const int n = unknown_values_ ? unknown_values_(a) : 0;
                if (n > 0 && i + n >= argc) {
                    status = usage_error(a + " needs " + (n == 1 ? "a value" : std::to_string(n) + " values"));
                    return false;
                }
                for (int k = 0; k <= std::max(n, 0); ++k) forwarded_.push_back(argv[i + k]);
                i += std::max(n, 0);
                continue;
            }
            status = usage_error("unknown option " + a);
            return false;
        }
        const int at = i;
        std::string v;
        if (!r->value.empty()) {
            if (r->value_optional) {
                if (i + 1 < argc && std::find(r->words.begin(), r->words.end(), std::string(argv[i + 1])) != r->words.end()) {
                    v = argv[++i];
                }
            } else if (i + 1 >= argc) {
                status = usage_error(a + " needs a value (" + r->value + ")");
                return false;
            } else {
                v = argv[++i];
            }
        }
        if (r->forward) {
            for (int k = at; k <= i; ++k) forwarded_.push_back(argv[k]);
            // rows_ does not change while the command runs, so the pointer stays valid
            if (i == at && r->value_optional && !r->implied.empty()) forwarded_.push_back(const_cast<char *>(r->implied.c_str()));
        }
        if (r->set && !r->set(v, err)) {
            status = usage_error(err);
            return false;
        }
        given_.insert(r->names.begin(), r->names.end());
    }
    if (!check_relations(status)) return false;
    return !check_required_too || check_required(status);
}

bool options::given(const std::string & name) const { return given_.count(name) > 0; }

options & options::for_mode(std::vector<std::string> names, std::string mode, std::string how, std::function<bool()> on) {
    for (const std::string & n : names) {
        if (!find(n)) throw std::logic_error("for_mode: " + n + " is not an option of reap " + cmd_);
    }
    relations_.push_back({std::move(names), std::move(mode), std::move(how), std::move(on)});
    return *this;
}

options & options::excludes(std::string a, std::string b, std::string why) {
    if (!find(a) || !find(b)) throw std::logic_error("excludes: " + a + " or " + b + " is not an option of reap " + cmd_);
    relations_.push_back({{std::move(a), std::move(b)}, "", std::move(why), nullptr});
    return *this;
}

bool options::check_relations(int & status) const {
    for (const relation & r : relations_) {
        if (!r.on) {
            if (given(r.names[0]) && given(r.names[1])) {
                status = usage_error(r.names[0] + " and " + r.names[1] + " do not go together: " + r.how);
                return false;
            }
            continue;
        }
        if (r.on()) continue;
        for (const std::string & n : r.names) {
            if (given(n)) {
                status = usage_error(n + " is for " + r.mode + ": give " + r.how);
                return false;
            }
        }
    }
    return true;
}

bool options::check_required(int & status) const {
    for (const auto & [given, missing] : required_) {
        if (!given()) {
            status = usage_error(missing);
            return false;
        }
    }
    return true;
}

int options::usage_error(const std::string & msg) const {
    fprintf(stderr, "reap %s: %s\n%s(reap %s --help for details)\n", cmd_, msg.c_str(), usage_.c_str(), cmd_);
    return exit_error;
}

int options::forward_refused() const {
    fprintf(stderr, "reap %s: llama.cpp did not accept the flags above (reap %s --help)\n", cmd_, cmd_);
    return exit_error;
}

void options::print_help(FILE * out) const {
    auto left_of = [](const row & r) {
        std::string s = "  ";
        for (size_t i = 0; i < r.names.size(); ++i) s += (i ? ", " : "") + r.names[i];
        if (!r.value.empty()) s += r.value_optional ? " [" + r.value + "]" : " " + r.value;
        return s;
    };
    size_t col = 0;
    bool have_help_row = false;
    for (const row & r : rows_) {
        if (r.kind == row_kind::help) have_help_row = true;
        if (r.kind != row_kind::option && r.kind != row_kind::help) continue;
        const size_t w = left_of(r).size();
        if (w <= k_max_column) col = std::max(col, w);
    }
    col += 2;
    std::string s = usage_;
    if (!about_.empty()) s += "\n" + about_;
    auto option_row = [&](const row & r) {
        std::string left = left_of(r);
        if (left.size() + 2 > col) {
            left += "  ";
        } else {
            left.resize(col, ' ');
        }
        s += left;
        wrap(s, r.help, k_width > left.size() + 20 ? k_width - left.size() : 20, col);
        s += "\n";
    };
    for (const row & r : rows_) {
        switch (r.kind) {
            case row_kind::section: s += "\n" + r.help + "\n"; break;
            case row_kind::prose: s += "\n" + r.help; break;
            case row_kind::option:
            case row_kind::help: option_row(r); break;
        }
    }
    if (!have_help_row) {
        row h;
        h.kind = row_kind::help;
        h.names = {"-h", "--help"};
        h.help = "this help";
        option_row(h);
    }
    std::vector<std::pair<int, std::string>> codes = exit_notes_;
    codes.emplace_back(exit_ok, "success");
    codes.emplace_back(exit_error, "usage error, an input that cannot be read or is malformed, or a write that failed");
    std::stable_sort(codes.begin(), codes.end(), [](const auto & x, const auto & y) { return x.first < y.first; });
    s += "\nexit status:\n";
    for (const auto & [code, text] : codes) {
        std::string left = "  " + std::to_string(code);
        left.resize(8, ' ');
        s += left;
        wrap(s, text, k_width - 8, 8);
        s += "\n";
    }
    fputs(s.c_str(), out);
}

void options::print_list(FILE * out) const {
    fprintf(out, "-h --help\t\treap\n");
    for (const row & r : rows_) {
        if (r.kind != row_kind::option) continue;
        std::string line;
        for (size_t i = 0; i < r.names.size(); ++i) line += (i ? " " : "") + r.names[i];
        line += "\t";
        if (!r.value.empty()) line += r.value_optional ? "[" + r.value + "]" : r.value;
        line += r.forward ? "\tforward" : "\treap";
        fprintf(out, "%s\n", line.c_str());
    }
    if (forward_unknown_) fprintf(out, "*\t\tforward\n");
    for (const relation & r : relations_) {
        if (!r.on) {
            fprintf(out, "excludes\t%s\t%s\n", r.names[0].c_str(), r.names[1].c_str());
            continue;
        }
        for (const std::string & n : r.names) fprintf(out, "for\t%s\t%s\n", n.c_str(), r.mode.c_str());
    }
}

} // namespace reap::cli

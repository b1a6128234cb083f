// The steps every reap subcommand (src/cli/cmd_*.cpp) shares: the exit
// statuses, the option table that both parses a command's arguments and
// prints its --help (so the two cannot drift apart), the one integer parser,
// reporting usage errors and failures in the "reap NAME: ..." form, and one
// small helper for a command's output (same file; sizes: util/number_format.h).
#pragma once

#include "util/error.h"
#include "util/file.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace reap::cli {

// The exit status of every command, as cmp(1) and diff(1) use theirs.
enum exit_status : int {
    exit_ok          = 0,    // done; what was checked holds
    exit_differs     = 1,    // checked, and it does not hold (verify: OUT is not MODEL pruned by PLAN)
    exit_error       = 2,    // usage error, a file that cannot be read or written, a malformed input
    exit_interrupted = 130,  // stopped by SIGINT (calibrate, after writing its checkpoint)
};

// The one integer parser of the command line. `s` must be decimal digits with
// an optional leading '-' (no blanks, no '+', nothing after the digits) and
// its value in [min, max]; the value is accumulated with overflow checks, so
// "99999999999999999999" is out of range, never wrapped. On failure sets
// err = "<option>: '<s>' is not a positive integer" (or "... too large (at
// most MAX)", ...) and returns false.
bool parse_integer(const std::string & option, const std::string & s, int64_t min, int64_t max, int64_t & out,
                   std::string & err);

// The one real-number parser of the command line: all of `s` a number (strtod)
// within [lo, hi]; else err = "<option>: '<s>' is not a number within LO..HI".
bool parse_number(const std::string & option, const std::string & s, double lo, double hi, double & out, std::string & err);

// "A,B,..." (split_list), each item as parse_integer takes it, appended to `out`.
bool parse_integer_list(const std::string & option, const std::string & v, int64_t min, int64_t max,
                        std::vector<int64_t> & out, std::string & err);

// Parses "i/n" with 0 <= i < n <= UINT32_MAX (part i of n); the message names `option`.
bool parse_part_of(const std::string & option, const std::string & v, uint32_t & i, uint32_t & n, std::string & err);

// Splits "a,b,,c" into {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_list(const std::string & s);

// Prints "reap <cmd>: <msg>" on stderr; returns exit_error. For failures
// after the arguments were accepted (unreadable or malformed inputs, writes
// that failed).
int fail(const char * cmd, const std::string & msg);
// The same for a library call's error: every kind (usage, input, output) is exit_error.
int fail(const char * cmd, const util::error & e);

// One command's options: declared once, in the order --help lists them, and
// both parsed and printed from this table. A command builds it, calls
// parse(), checks what must go together (required options, exclusive ones)
// and reports those with usage_error().
//
//   options t("inspect", "usage: reap inspect MODEL.gguf [--json] [--keep N]...");
//   t.about("Prints the census of a GGUF model...\n");
//   t.section("options:");
//   t.flag("--json", "print one JSON object", p.json);
//   t.integers("--keep", "N", "also size the model keeping N experts (repeatable)", 1, UINT32_MAX, p.keeps);
//   t.help_row();
//   t.positional("MODEL.gguf", [&](const std::string & a, std::string & err) { ... });
//   int status = 0;
//   if (!t.parse(argc, argv, status)) return status;
//
// Names are given as printed: "-m, --model". An option without a value name
// is a flag. Help text is wrapped to the terminal width of the other rows;
// '\n' in it starts a new line. Every command also accepts -h/--help (prints
// the help, exit 0) and the hidden --list-options, which prints the table
// and exits 0: one option a line, three tab-separated fields: its names
// separated by spaces; the value name ("[VALUE]" for an optional value, empty
// for a flag); "reap" or "forward" (handed to the wrapped parser). A last line
// "*<tab><tab>forward" says that arguments not in the table are handed on too.
// tests/test_cli_help.cpp compares that list with --help and with what the
// parser accepts.
class options {
  public:
    using handler = std::function<bool(const std::string & value, std::string & err)>;

    // `usage`: the usage line(s), "usage: reap CMD ..." (several lines allowed).
    options(const char * cmd, std::string usage);

    // Free prose printed between the usage lines and the option list.
    options & about(std::string text);
    // A heading in the option list ("options:", "how many (exactly one):").
    options & section(std::string title);
    // Hand-written text inside the option list (a blank line precedes it).
    options & prose(std::string text);
    // Where the "-h, --help" row goes (at the end when never called).
    options & help_row();
    // A line of the "exit status:" list that ends every --help, beyond 0 and 2
    // (verify's 1, calibrate's 130).
    options & exit_note(int status, std::string text);

    // A flag that sets `target` to true.
    options & flag(const std::string & names, std::string help, bool & target);
    // A flag that sets `target` to `value`.
    options & flag(const std::string & names, std::string help, bool & target, bool value);
    // An option with a value stored in `target` (the last one given wins).
    options & text(const std::string & names, std::string value, std::string help, std::string & target);
    // A repeatable option: every value is appended to `target` (-p A -p B).
    options & texts(const std::string & names, std::string value, std::string help, std::vector<std::string> & target);
    // An integer option in [min, max] (parse_integer).
    template <class T>
    options & integer(const std::string & names, std::string value, std::string help, int64_t min, int64_t max, T & target) {
        return integer_option<T>(names, std::move(value), std::move(help), min, max, [&target](T x) { target = x; });
    }
    // A repeatable integer option: every value is appended to `target`.
    template <class T>
    options & integers(const std::string & names, std::string value, std::string help, int64_t min, int64_t max,
                       std::vector<T> & target) {
        return integer_option<T>(names, std::move(value), std::move(help), min, max, [&target](T x) { target.push_back(x); });
    }
    // An integer option in [min, max] whose value `store` keeps (integer, integers).
    template <class T, class Store>
    options & integer_option(const std::string & names, std::string value, std::string help, int64_t min, int64_t max,
                             Store store) {
        static_assert(std::is_integral<T>::value, "integer options store integers");
        check_range<T>(min, max);
        const std::string opt = first_long_name(names);
        return custom(names, std::move(value), std::move(help), [store, min, max, opt](const std::string & v, std::string & err) {
            int64_t x = 0;
            if (!parse_integer(opt, v, min, max, x, err)) return false;
            store(T(x));
            return true;
        });
    }
    // An option whose value is one of the words of `choices`, each standing
    // for the value stored in `target`; any other word is refused ("<option>:
    // unknown '<word>' (a, b or c)", the words in the order given).
    template <class T>
    options & choice(const std::string & names, std::string value, std::string help,
                     std::vector<std::pair<std::string, T>> choices, T & target) {
        const std::string opt = first_long_name(names);
        return custom(names, std::move(value), std::move(help),
                      [choices = std::move(choices), &target, opt](const std::string & v, std::string & err) {
                          std::vector<std::string> words;
                          for (const auto & [word, x] : choices) {
                              if (word == v) {
                                  target = x;
                                  return true;
                              }
                              words.push_back(word);
                          }
                          err = opt + ": unknown '" + v + "' (" + or_list(words) + ")";
                          return false;
                      });
    }
    // An option whose value `set` checks and stores; `value` empty: a flag
    // (`set` then receives "").
    options & custom(const std::string & names, std::string value, std::string help, handler set);
    // An option whose value is optional: the next argument is its value only
    // when it is one of `words` (-fa [on|off|auto]); otherwise `set` receives "".
    options & optional(const std::string & names, std::string value, std::vector<std::string> words, std::string help,
                       handler set);
    // An option of the wrapped parser (llama.cpp's common arguments): listed in
    // the help, accepted here and handed on with its value, in order, through
    // forwarded(). `value` empty: it takes none. `also` (optional) sees the
    // value too (calibrate keeps -m for itself as well).
    options & forward(const std::string & names, std::string value, std::string help, handler also = nullptr);
    // An option of the wrapped parser whose value is optional here: when the
    // next argument is not one of `words`, `implied` is handed on as its value
    // (llama.cpp's -fa wants a value; a bare -fa has meant "on").
    options & forward_optional(const std::string & names, std::string value, std::vector<std::string> words,
                               std::string implied, std::string help);
    // Arguments not in the table are handed on through forwarded() as well
    // (options and their values alike) instead of being refused; `help` says so
    // in the help (printed as prose where this is called).
    options & forward_unknown(std::string help);
    // The same, with the wrapped parser's own count of the values a flag takes
    // (-1: it does not know the flag): a known flag travels with its values,
    // so they are never taken for positional arguments; an unknown one goes
    // alone, for the wrapped parser to refuse.
    options & forward_unknown(std::string help, std::function<int(const std::string &)> n_values);

    // What the command cannot run without: after the arguments are parsed,
    // the first of these (in the order required) that is still empty is a
    // usage error saying `missing` ("no model given (-m MODEL.gguf)").
    template <class Value>
    options & require(const Value & value, std::string missing) {
        required_.emplace_back([&value] { return !value.empty(); }, std::move(missing));
        return *this;
    }
    // Whether parse() met the option (any of its names: "--needles"), whatever
    // its value: an option of a mode that was not asked for is refused even at
    // its default value.
    bool given(const std::string & name) const;
    // Option relations, declared with the table and checked by parse() once
    // every argument is read, before the required values, in declaration
    // order. for_mode: each of `names` belongs to a mode; given (at any value)
    // while `on()` says the mode is off, it is refused: "<name> is for <mode>:
    // give <how>". excludes: `a` and `b` cannot be given together: "<a> and
    // <b> do not go together: <why>". --list-options prints them after the
    // options, "for<TAB>NAME<TAB>MODE" and "excludes<TAB>A<TAB>B" a line.
    options & for_mode(std::vector<std::string> names, std::string mode, std::string how, std::function<bool()> on);
    options & excludes(std::string a, std::string b, std::string why);
    // The check runs after parse(): a temporary would be gone by then.
    template <class Value>
    options & require(const Value && value, std::string missing) = delete;
    // The same where only some uses of the command need the value: required
    // when `needed()`, asked after the parse, says so (eval's -f, which
    // --kld-base and --smoke do without).
    template <class Value>
    options & require(const Value & value, std::string missing, std::function<bool()> needed) {
        required_.emplace_back([&value, needed = std::move(needed)] { return !needed() || !value.empty(); },
                               std::move(missing));
        return *this;
    }
    template <class Value>
    options & require(const Value && value, std::string missing, std::function<bool()> needed) = delete;

    // What a non-option argument means (MODEL.gguf, input files...). Without
    // one, a non-option argument is a usage error. After "--" every argument
    // is a non-option.
    options & positional(handler set);

    // Parses argv[1..argc). Returns true when the command should go on;
    // otherwise false with `status` set: exit_ok after printing the help
    // (-h/--help) or the option list (--list-options), exit_error after a
    // usage error (reported as usage_error() does), a missing required value
    // (require()) included, unless `check_required_too` is false: then the
    // caller asks check_required() itself, after whatever must be refused
    // first (eval: llama.cpp's verdict on the forwarded options).
    bool parse(int argc, char ** argv, int & status, bool check_required_too = true);

    // The require() checks alone: false with `status` at the first missing value.
    bool check_required(int & status) const;

    // The arguments handed on (forward(), forward_unknown()), argv[0] first,
    // ready for a parser that takes (argc, argv).
    std::vector<char *> & forwarded() { return forwarded_; }

    // Prints "reap <cmd>: <msg>", then the usage line(s) and "(reap <cmd> --help
    // for details)" on stderr; returns exit_error.
    int usage_error(const std::string & msg) const;
    // For when llama.cpp's parser refused forwarded() (it has said why): prints
    // "reap <cmd>: llama.cpp did not accept the flags above ..." on stderr;
    // returns exit_error.
    int forward_refused() const;

    void print_help(FILE * out) const;
    void print_list(FILE * out) const;

  private:
    enum class row_kind { option, section, prose, help };
    struct row {
        row_kind                 kind = row_kind::option;
        std::vector<std::string> names;  // "-m", "--model"
        std::string              value;  // value name; empty: a flag
        bool                     value_optional = false;
        std::vector<std::string> words;  // the values an optional value may take
        std::string              help;   // option help, section title or prose
        handler                  set;
        bool                     forward = false;
        std::string              implied;  // forward_optional: handed on when the value is absent
    };

    options & add(const std::string & names, std::string value, std::string help, handler set);
    const row * find(const std::string & name) const;
    std::function<int(const std::string &)> unknown_values_;
    static std::string first_long_name(const std::string & names);
    static std::string or_list(const std::vector<std::string> & words);   // "a, b or c"
    template <class T> static void check_range(int64_t min, int64_t max) {
        (void) min;
        (void) max;
        if constexpr (std::is_unsigned<T>::value && sizeof(T) >= sizeof(int64_t)) return;
        else if constexpr (std::is_unsigned<T>::value) {
            if (min < 0 || uint64_t(max) > uint64_t(std::numeric_limits<T>::max())) range_bug();
        } else {
            if (min < int64_t(std::numeric_limits<T>::min()) || max > int64_t(std::numeric_limits<T>::max())) range_bug();
        }
    }
    [[noreturn]] static void range_bug();

    const char *        cmd_;
    std::string         usage_;
    std::string         about_;
    std::vector<row>    rows_;
    std::vector<std::pair<int, std::string>> exit_notes_;
    handler             positional_;
    std::vector<std::pair<std::function<bool()>, std::string>> required_;   // given?, the message when not
    struct relation {
        std::vector<std::string> names;        // for_mode: the mode's options; excludes: the two
        std::string              mode, how;    // for_mode; excludes: how = why
        std::function<bool()>    on;           // for_mode: whether the mode is asked for; excludes: none
    };
    std::vector<relation> relations_;
    bool check_relations(int & status) const;
    std::set<std::string> given_;   // every name of every option parse() met
    bool                forward_unknown_ = false;
    std::vector<char *> forwarded_;
};

// Whether both paths exist and name the same file (device and inode).
using util::same_file;

} // namespace reap::cli

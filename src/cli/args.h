// The steps every reap subcommand (src/cli/cmd_*.cpp) shares: taking an
// option's value, parsing positive integers and comma lists, reporting usage
// errors and failures in the "reap NAME: ..." form, the parse-or-help front of
// a command, and two small helpers for its output (byte sizes, same file).
#pragma once

#include "util/file.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace reap::cli {

// Takes the value of the option argv[i] (that is, argv[i + 1]) into `dst` and
// advances i past it. When argv[i] is the last argument, sets
// err = "<option> needs a value" and returns false.
bool take_value(int argc, char ** argv, int & i, std::string & dst, std::string & err);

// Parses `s` as a decimal integer in [1, max] (strtoll syntax: leading blanks
// and '+' allowed, nothing after the digits). On failure sets
// err = "<option>: '<s>' is not a positive integer" and returns false.
bool parse_positive(const std::string & option, const std::string & s, int64_t max, int64_t & out, std::string & err);

// Splits "a,b,,c" into {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_list(const std::string & s);

// Prints "reap <cmd>: <msg>" and, on the next line, "<usage_line>  (--help for
// details)" on stderr; returns 1, the exit status of a usage error.
int usage_error(const char * cmd, const std::string & msg, const char * usage_line);

// Prints "reap <cmd>: <msg>", a blank line and the whole `usage` text on
// stderr; returns 1 (the style of the commands that wrap llama.cpp flags).
int usage_error_full(const char * cmd, const std::string & msg, const char * usage);

// Prints "reap <cmd>: <msg>" on stderr; returns 1.
int fail(const char * cmd, const std::string & msg);

// The front of a command with a params struct: runs
// parse(argc, argv, params, help, err). Returns true when the command should
// go on; otherwise false with `status` set: 1 after a usage error (reported as
// usage_error does), 0 after printing the help with print_usage(stdout).
template <class Params>
bool parse_command(const char * cmd, int argc, char ** argv, Params & params,
                   bool (*parse)(int, char **, Params &, bool &, std::string &), void (*print_usage)(FILE *),
                   const char * usage_line, int & status) {
    bool help = false;
    std::string err;
    if (!parse(argc, argv, params, help, err)) {
        status = usage_error(cmd, err, usage_line);
        return false;
    }
    if (help) {
        print_usage(stdout);
        status = 0;
        return false;
    }
    return true;
}

// "123 B", "1.50 KiB", ... "2.00 TiB" (binary units, two decimals above bytes).
std::string human_bytes(uint64_t bytes);

// Whether both paths exist and name the same file (device and inode).
using util::same_file;

} // namespace reap::cli

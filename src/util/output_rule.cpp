// The output rule of output_rule.h: same entry by inode or by resolved
// directory entry, and the checks every command makes before it writes.
#include "util/output_rule.h"

#include "util/path.h"
#include "util/publish.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace reap::util {

std::string entry_of(const std::string & path) {
    char * dir = ::realpath(dir_of(path).c_str(), nullptr);
    if (!dir) return "";
    std::string r = std::string(dir) + "/" + base_name(path);
    free(dir);
    return r;
}

bool same_entry(const std::string & a, const std::string & b) {
    if (a.empty() || b.empty()) return false;
    struct stat sa, sb;
    const bool ea = ::stat(a.c_str(), &sa) == 0, eb = ::stat(b.c_str(), &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    const std::string x = entry_of(a), y = entry_of(b);
    return !x.empty() && x == y;
}

bool check_not_input(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                     std::string & err) {
    // the names of reap's own bookkeeping: a file by such a name would be
    // taken for a killed run's journal or temp by the next run in the folder
    const std::string name = base_name(output);
    if (name.find(k_temp_marker) != std::string::npos || (name.size() > 1 && name[0] == '.' && ends_with(name, k_journal_suffix))) {
        err = "refusing to write " + output + ": '" + name + "' is a name reap gives its own temp files and journals (choose another output name)";
        return false;
    }
    for (const auto & [what, path] : inputs) {
        if (same_entry(output, path)) {
            err = "refusing to write " + output + " over the " + what + " '" + path + "' (the same file)";
            return false;
        }
    }
    return true;
}

bool check_writable_dir(const std::string & output, std::string & err) {
    // the nearest folder that exists: the output's own, or the one a command
    // will create its folder in (report -o DIR, sweep --plans-dir)
    std::string dir = dir_of(output);
    struct stat st;
    while (::stat(dir.c_str(), &st) != 0 && dir != "/" && dir != ".") dir = dir_of(dir);
    // access() says EROFS for a read-only mount and EPERM/EACCES for an
    // immutable folder even to root, whose permission bits it otherwise skips
    if (::access(dir.c_str(), W_OK) != 0) {
        err = "cannot write " + output + ": the folder " + dir + " is not writable (" + strerror(errno) + ")";
        return false;
    }
    return true;
}

bool check_output(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                  bool force, std::string & err) {
    if (!check_not_input(output, inputs, err)) return false;
    if (!check_writable_dir(output, err)) return false;
    struct stat st;
    if (::lstat(output.c_str(), &st) != 0) return true;   // nothing there yet
    if (::stat(output.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        err = output + " exists and is not a regular file";
        return false;
    }
    return refuse_existing(output, force, err);
}

bool refuse_existing(const std::string & path, bool force, std::string & err) {
    struct stat st;
    if (force || ::lstat(path.c_str(), &st) != 0) return true;
    err = path + " exists (use --force to replace it)";
    return false;
}

} // namespace reap::util

// The output rule of output_rule.h: same entry by inode or by resolved
// directory entry, and the checks every command makes before it writes.
#include "util/output_rule.h"

#include "util/path.h"

#include <cstdlib>
#include <sys/stat.h>

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
    for (const auto & [what, path] : inputs) {
        if (same_entry(output, path)) {
            err = "refusing to write " + output + " over the " + what + " '" + path + "' (the same file)";
            return false;
        }
    }
    return true;
}

bool check_output(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                  bool force, std::string & err) {
    if (!check_not_input(output, inputs, err)) return false;
    struct stat st;
    if (::lstat(output.c_str(), &st) != 0) return true;   // nothing there yet
    if (::stat(output.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        err = output + " exists and is not a regular file";
        return false;
    }
    if (!force) {
        err = output + " exists (use --force to replace it)";
        return false;
    }
    return true;
}

} // namespace reap::util

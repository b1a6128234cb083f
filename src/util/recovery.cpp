// Recovery of recovery.h: completing the journals of killed runs and removing
// their stale temps, under the folder's lock, through current_disk().
#include "util/recovery.h"

#include "util/disk.h"
#include "util/file.h"
#include "util/output_rule.h"
#include "util/path.h"
#include "util/publish.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <vector>

namespace reap::util {

namespace {

// The outputs this process writes outside the folder of the journal that
// publishes them (declare_output_elsewhere).
std::vector<std::string> g_declared_elsewhere;

bool declared_elsewhere(const std::string & target) {
    for (const std::string & d : g_declared_elsewhere) {
        if (same_entry(d, target)) return true;
    }
    return false;
}

bool complete_journal(const std::string & dir, const std::string & journal, std::string & err) {
    std::string text;
    if (!read_file(dir + "/" + journal, "journal", text, err)) return false;
    std::vector<std::string> parts;
    for (size_t pos = 0; pos < text.size();) {
        const size_t end = text.find('\0', pos);
        if (end == std::string::npos) break;
        parts.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    if (parts.empty() || parts[0] != k_journal_header || parts.size() % 2 != 1) {
        err = dir + "/" + journal + ": not a reap journal (left as it is)";
        return false;
    }
    // An entry renames a temp of reap's over its own target, in one directory:
    // the journal's (names), or another one (absolute paths). Anything else is
    // not ours to rename: every entry is checked before the first rename.
    std::vector<std::pair<std::string, std::string>> renames;
    for (size_t i = 1; i + 1 < parts.size(); i += 2) {
        const std::string & tmp = parts[i], & target = parts[i + 1];
        const bool elsewhere = !tmp.empty() && tmp[0] == '/';
        const bool one_dir = elsewhere ? (!target.empty() && target[0] == '/' && dir_of(tmp) == dir_of(target))
                                       : (tmp.find('/') == std::string::npos && target.find('/') == std::string::npos);
        if (!one_dir || base_name(target).empty() ||
            !starts_with(base_name(tmp), ("." + base_name(target) + k_temp_marker).c_str())) {
            err = dir + "/" + journal + ": an entry that is not a reap temp file and its target in one directory (left as it is)";
            return false;
        }
        // a journal names only files of its own folder; an entry in another
        // folder is renamed only when it is an output this command declared
        // (a sliced imatrix written elsewhere), never on a journal's word alone
        if (elsewhere && !declared_elsewhere(target)) {
            err = dir + "/" + journal + ": an entry renames " + target +
                  ", a file outside this folder that this command does not write: a journal names only files of "
                  "its own folder (left as it is; rerun the interrupted command, or remove the journal)";
            return false;
        }
        renames.emplace_back(elsewhere ? tmp : dir + "/" + tmp, elsewhere ? target : dir + "/" + target);
    }
    // as publish_together does: the first file's old version goes first (if its
    // temp is still there, its rename is still to come), its new one last
    struct stat st;
    if (!renames.empty() && ::lstat(renames[0].first.c_str(), &st) == 0 && !remove_first_of_set(renames[0].second, err)) {
        return false;
    }
    if (!renames.empty()) std::rotate(renames.begin(), renames.begin() + 1, renames.end());
    for (const auto & [from, to] : renames) {
        if (::lstat(from.c_str(), &st) != 0) continue;   // renamed before the kill
        if (!current_disk().rename(from, to)) {
            err = "cannot rename " + from + " to " + to + ": " + strerror(errno);
            return false;
        }
        if (dir_of(to) != dir) fsync_dir_of(to);
    }
    fsync_dir_of(dir + "/" + journal);
    current_disk().unlink(dir + "/" + journal);
    fsync_dir_of(dir + "/" + journal);
    return true;
}

// Whether `pid` names a process that is still running. kill(pid, 0) answers
// for a zombie too (a killed run whose parent has not reaped it yet): its
// state in /proc/PID/stat (after the command name's last ')') says Z or X.
bool alive(long pid) {
    if (pid <= 0 || (::kill((pid_t) pid, 0) != 0 && errno != EPERM)) return false;
    // /proc files report size 0: read what the kernel gives, not st_size
    std::string stat;
    if (std::FILE * f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r")) {
        char buf[512];
        stat.assign(buf, std::fread(buf, 1, sizeof buf, f));
        std::fclose(f);
    }
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) return true;
    const char state = stat[close + 2];
    return state != 'Z' && state != 'X' && state != 'x';
}

bool is_journal(const std::string & e) { return e.size() > 1 && e[0] == '.' && ends_with(e, k_journal_suffix); }

// Whether `e` is a temp of a run that is gone (.NAME.reap-tmp.PID.XXXXXX, or
// .NAME.reap-tmp.PID.s.XXXXXX when staged) whose NAME matches `name` (or,
// with `prefix`, starts with it). With `any_name`, NAME may be anything, but
// a staged temp is never one: another folder's journal may still name it
// (only a run on its own output name, which completes that journal first,
// removes it).
bool is_stale_temp(const std::string & e, const std::string & name, bool prefix, bool any_name = false) {
    if (e.size() < 2 || e[0] != '.') return false;
    const size_t m = e.rfind(k_temp_marker);
    if (m == std::string::npos || m < 1) return false;
    const std::string owner = e.substr(1, m - 1);
    if (!any_name && !(prefix ? starts_with(owner, name.c_str()) : owner == name)) return false;
    const std::string rest = e.substr(m + std::strlen(k_temp_marker));
    const size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0) return false;
    if (any_name && rest.find('.', dot + 1) != std::string::npos) return false;   // staged
    char * endp = nullptr;
    const std::string digits = rest.substr(0, dot);
    const long pid = std::strtol(digits.c_str(), &endp, 10);
    return endp && *endp == '\0' && !alive(pid);
}

// Completes the journals in `dir` and removes the stale temps of `name` (with
// `any_name`, of every output but staged ones: is_stale_temp), under the
// directory's lock, which is taken only when there is something to do. A run
// that is publishing holds the lock from its journal to its last rename: its
// temps are never taken for a dead run's.
int clean_dir(const std::string & dir, const std::string & name, bool prefix, int & removed, std::string & err,
              bool any_name = false) {
    removed = 0;
    const bool temps = any_name || !name.empty();
    auto stale = [&](const std::string & e) { return temps && is_stale_temp(e, name, prefix, any_name); };
    bool any = false;
    for (const std::string & e : list_dir(dir)) any = any || is_journal(e) || stale(e);
    if (!any) return 0;
    dir_lock lk;
    if (!lk.lock(dir, err)) return -1;
    int n = 0;
    for (const std::string & e : list_dir(dir)) {
        if (!is_journal(e)) continue;
        if (!complete_journal(dir, e, err)) return -1;
        ++n;
    }
    for (const std::string & e : list_dir(dir)) {
        if (stale(e) && current_disk().unlink(dir + "/" + e)) ++removed;
    }
    return n;
}

} // namespace

void declare_output_elsewhere(const std::string & path) {
    if (!path.empty()) g_declared_elsewhere.push_back(path);
}

int recover_dir(const std::string & dir, std::string & err) {
    int removed = 0;
    return clean_dir(dir, "", false, removed, err);
}

int remove_stale_temps(const std::string & dir, const std::string & name, bool prefix) {
    std::string err;
    int removed = 0;
    clean_dir(dir, name, prefix, removed, err);
    return removed;
}

pending_cleanup cleanup_before(const std::string & output) {
    // the same tests as prepare_output's two clean_dir calls
    pending_cleanup c;
    const std::string name = base_name(output);
    for (const std::string & e : list_dir(dir_of(output))) {
        if (is_journal(e)) c.journals.push_back(e);
        else if (is_stale_temp(e, name, false) || is_stale_temp(e, "", false, true)) c.temps.push_back(e);
    }
    std::sort(c.journals.begin(), c.journals.end());
    std::sort(c.temps.begin(), c.temps.end());
    return c;
}

bool prepare_output(const std::string & output, std::string & err) {
    // the stale temps of this output (staged ones too), then those of every
    // other output of the folder (not staged ones)
    int removed = 0;
    const std::string dir = dir_of(output);
    return clean_dir(dir, base_name(output), false, removed, err) >= 0 && clean_dir(dir, "", false, removed, err, true) >= 0;
}

} // namespace reap::util

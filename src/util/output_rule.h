// The output rule, in one place: which paths are the same entry, and the check
// every command makes for every path it writes before it writes anything.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace reap::util {

// One rule for every path a command writes (models, shards, archives,
// checkpoints, plans, SHA256SUMS, records, charts): an output is never one of
// the command's inputs, nor another of its outputs. Two paths are the same
// when they name the same existing file (st_dev + st_ino: hard links and
// other spellings count) or, when one does not exist yet, the same directory
// entry (the directory resolved with realpath, then the name).
bool same_entry(const std::string & a, const std::string & b);

// Refuses `output` ("refusing to write OUTPUT over the WHAT 'PATH'")
// when it is the same entry as one of `inputs` (pairs of what it is, path;
// empty paths are skipped), with or without --force, and when its name is
// one reap gives its temps (NAME.reap-tmp.*) or journals (.NAME.reap-journal).
// Every command calls it for every output before it writes anything.
bool check_not_input(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                     std::string & err);

// Refuses `output` ("cannot write OUTPUT: the folder DIR is not writable
// (reason)") when the nearest existing folder on its path (its own, or where a
// command will make its folder) cannot be written: a read-only mount, an
// immutable folder, no permission. Checked before any work, not at the end.
bool check_writable_dir(const std::string & output, std::string & err);

// An existing `path` is refused without `force` ("PATH exists (use --force to
// replace it)"): the one wording of that rule, for every writer.
bool refuse_existing(const std::string & path, bool force, std::string & err);

// check_not_input, then check_writable_dir, then: an existing `output` is refused without `force`
// ("OUTPUT exists (use --force to replace it)") and always when it is not a
// regular file.
bool check_output(const std::string & output, const std::vector<std::pair<std::string, std::string>> & inputs,
                  bool force, std::string & err);


// The directory entry `path` names: the realpath of its directory, "/", its
// last component ("" when the directory cannot be resolved).
std::string entry_of(const std::string & path);

} // namespace reap::util

// Recovery: what every command does in an output folder before it writes,
// finishing what a killed run left there (its journal completed, its stale
// temps removed).
#pragma once

#include <string>
#include <vector>

namespace reap::util {

// Finishes what a killed run left in `dir`, under its dir_lock: completes
// every publish whose journal is there (renames the temps it lists that still
// exist, then removes the journal). Returns the number of journals completed,
// or -1 with `err` when a journal is not reap's: an entry that is no reap temp
// renamed over its own target, or one in another folder that is not an output
// this process declared (declare_output_elsewhere): a journal names only
// files of the folder it lives in. Such a journal is left as it is.
int recover_dir(const std::string & dir, std::string & err);

// Declares `path`, an output of this command published by the journal of
// another folder (prune's --imatrix-out beside another folder's model), so
// that recover_dir completes a killed run's journal entry for it. Call it
// before the first write.
void declare_output_elsewhere(const std::string & path);

// Removes, in `dir`, the temp files of runs that are gone (named
// .NAME.reap-tmp.PID.XXXXXX with PID not a live process) whose NAME is
// `name` or, with `prefix`, starts with `name`. Temps of live runs are left.
// Returns how many were removed.
int remove_stale_temps(const std::string & dir, const std::string & name, bool prefix = false);

// What prepare_output(output) would do there, without doing it (a dry run
// lists it): the journals of killed runs it would complete and the stale temps
// it would remove, as names in the output's folder, sorted.
struct pending_cleanup {
    std::vector<std::string> journals, temps;
};
pending_cleanup cleanup_before(const std::string & output);

// What every command does before writing `output` (after check_output):
// completes the journals of killed runs in its directory (recover_dir), then
// removes the stale temps of this output's name (remove_stale_temps), then
// those of every other output in the folder (a killed run to another name
// leaves nothing behind once anything is written there again), except staged
// temps (durable_file::open), which only a run on their own name removes.
bool prepare_output(const std::string & output, std::string & err);

} // namespace reap::util

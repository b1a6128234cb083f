// reap calibrate's checkpoint and final publish (checkpoint.h).
#include "saliency/checkpoint.h"

#include "util/disk.h"

#include <sys/stat.h>

namespace reap::saliency {

namespace {

// A write that fails (a full disk) leaves the previous checkpoint as it was: say so.
void note_kept(const std::string & checkpoint_path, std::string & err) {
    struct stat st;
    if (::stat(checkpoint_path.c_str(), &st) == 0) {
        err += " (the checkpoint " + checkpoint_path + " written before is kept: make room and rerun with --resume)";
    }
}

} // namespace

bool write_checkpoint(const archive & so_far, uint64_t next_window, uint64_t n_windows, const std::string & path,
                      std::string & err) {
    archive ck = so_far;
    ck.provenance.set_u64(k_key_checkpoint_next_window, next_window);
    ck.provenance.set_u64(k_key_checkpoint_n_windows, n_windows);
    if (!write_archive(ck, path, err, /*force=*/true)) {
        note_kept(path, err);
        return false;
    }
    return true;
}

bool publish_calibration(const archive & done, const std::string & out_path, bool force,
                         const std::string & checkpoint_path, std::string & err) {
    if (!write_archive(done, out_path, err, force)) {
        note_kept(checkpoint_path, err);
        return false;
    }
    struct stat st;
    if (::stat(checkpoint_path.c_str(), &st) == 0) util::current_disk().unlink(checkpoint_path);
    return true;
}

} // namespace reap::saliency

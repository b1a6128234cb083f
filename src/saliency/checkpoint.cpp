// reap calibrate's checkpoint and final publish (checkpoint.h).
#include "saliency/checkpoint.h"

#include "util/disk.h"
#include "util/file.h"
#include "util/path.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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

// A halves file is named "<checkpoint>" k_halves_infix "<next window>".
constexpr const char * k_halves_infix = ".halves.";

// The halves file's name for domain d of half 'a' or 'b': "a0", "b3", ...
std::string half_domain_name(char half, size_t d) { return half + std::to_string(d); }

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

split_halves make_split_halves(const archive & like) {
    split_halves h;
    for (archive * half : {&h.a, &h.b}) {
        *half = make_archive(like.model, like.metrics);
        half->has_sq_norms = like.has_sq_norms;
        for (const auto & d : like.domains) half->add_domain(d.name);
    }
    return h;
}

std::string split_halves_path(const std::string & checkpoint_path, uint64_t next_window) {
    return checkpoint_path + k_halves_infix + std::to_string(next_window);
}

bool write_split_halves(const split_halves & h, uint64_t next_window, const std::string & checkpoint_path,
                        std::string & err) {
    archive both = make_archive(h.a.model, h.a.metrics);
    both.has_sq_norms = h.a.has_sq_norms;
    for (const auto & [half, tag] : {std::pair<const archive *, char>{&h.a, 'a'}, {&h.b, 'b'}}) {
        for (size_t d = 0; d < half->domains.size(); ++d) {
            domain_stats s = half->domains[d];
            s.name = half_domain_name(tag, d);
            both.domains.push_back(std::move(s));
        }
    }
    both.provenance.set_u64(k_key_checkpoint_next_window, next_window);
    const std::string path = split_halves_path(checkpoint_path, next_window);
    if (!write_archive(both, path, err, /*force=*/true)) {
        err = "the split halves of the checkpoint: " + err;
        note_kept(checkpoint_path, err);
        return false;
    }
    return true;
}

bool read_split_halves(const std::string & checkpoint_path, uint64_t next_window, const archive & like, split_halves & out,
                       std::string & err) {
    const std::string path = split_halves_path(checkpoint_path, next_window);
    archive both;
    if (!read_archive(path, both, err)) {
        err = "the checkpoint's split halves (--until-stable or a target): " + err;
        return false;
    }
    uint64_t at = 0;
    std::string e2;
    const size_t n = like.domains.size();
    if (!both.provenance.get_u64(k_key_checkpoint_next_window, at, e2) || at != next_window) {
        err = "'" + path + "' was not written with the checkpoint at window " + std::to_string(next_window);
        return false;
    }
    if (!fingerprints_match(both.model, like.model, err)) {
        err = "'" + path + "': " + err;
        return false;
    }
    if (both.metrics != like.metrics || both.has_sq_norms != like.has_sq_norms || both.n_ff != 0 || both.domains.size() != 2 * n) {
        err = "'" + path + "' does not hold two halves of this run's " + std::to_string(n) + " domains";
        return false;
    }
    out = make_split_halves(like);
    for (size_t i = 0; i < 2 * n; ++i) {
        const char tag = i < n ? 'a' : 'b';
        const size_t d = i % n;
        if (both.domains[i].name != half_domain_name(tag, d)) {
            err = "'" + path + "': domain " + std::to_string(i) + " is '" + both.domains[i].name + "', not '" +
                  half_domain_name(tag, d) + "'";
            return false;
        }
        domain_stats & into = (i < n ? out.a : out.b).domains[d];
        both.domains[i].name = into.name;
        into = std::move(both.domains[i]);
    }
    return true;
}

void remove_split_halves(const std::string & checkpoint_path, uint64_t keep_next_window) {
    const std::string stem = util::base_name(checkpoint_path) + k_halves_infix;
    for (const std::string & name : util::list_dir(util::dir_of(checkpoint_path))) {
        if (!util::starts_with(name, stem.c_str())) continue;
        const std::string digits = name.substr(stem.size());
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 20) continue;
        if (keep_next_window != UINT64_MAX && digits == std::to_string(keep_next_window)) continue;
        util::current_disk().unlink(util::beside(checkpoint_path, name));
    }
}

} // namespace reap::saliency

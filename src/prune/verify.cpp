// The auditor of prune.h (`reap verify`): re-reads a pruned output and proves,
// byte for byte, that it is the source pruned by the plan. It derives every
// expected byte range from the layout table and the plan on its own rather
// than re-running make_pruned_spec, and compares through a fixed pair of
// buffers, so memory does not grow with the model.
#include "prune/prune.h"

#include "moe/width.h"
#include "prune/width.h"
#include "util/file.h"
#include "util/path.h"
#include "util/sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace reap::prune {

namespace {

constexpr size_t k_chunk = 4u << 20;

bool is_split_key(const std::string & key) { return util::starts_with(key, "split."); }

bool is_provenance_key(const std::string & key) {
    return key == k_key_plan_sha256 || key == k_key_source_expert_count || key == k_key_version ||
           key == k_key_plan_other_model || key == k_key_width_source_length ||
           util::starts_with(key, k_key_source_expert_ids);
}

// Open file descriptors by path, closed together.
class fd_cache {
public:
    ~fd_cache() {
        for (auto & kv : fds_) ::close(kv.second);
    }
    int get(const std::string & path, std::string & err) {
        auto it = fds_.find(path);
        if (it != fds_.end()) return it->second;
        const int fd = util::open_input(path, err);
        if (fd < 0) return -1;
        fds_[path] = fd;
        return fd;
    }
private:
    std::map<std::string, int> fds_;
};

// How `fd` goes on at `pos`: a hole (reads as zeros) or data, for `run` bytes
// (1 to `want`). Where the file system cannot say, or the span passes the end
// of the file (read, and fail there), it is data for `want`.
struct extent {
    bool     hole;
    uint64_t run;
};

extent extent_at(int fd, uint64_t pos, uint64_t want) {
    struct stat st;
    if (::fstat(fd, &st) != 0 || pos + want > (uint64_t) st.st_size) return {false, want};
    const off_t data = ::lseek(fd, (off_t) pos, SEEK_DATA);
    if (data < 0) return {errno == ENXIO, want};   // ENXIO: a hole up to the end
    if ((uint64_t) data > pos) return {true, std::min<uint64_t>(want, (uint64_t) data - pos)};
    const off_t hole = ::lseek(fd, (off_t) pos, SEEK_HOLE);
    if (hole <= (off_t) pos) return {false, want};
    return {false, std::min<uint64_t>(want, (uint64_t) hole - pos)};
}

struct comparer {
    fd_cache             fds;
    std::vector<uint8_t> a, b;
    uint64_t             compared = 0;

    comparer() : a(k_chunk), b(k_chunk) {}

    // Compares `len` bytes of src_path@src_off with out_path@out_off. On a
    // difference sets `diff_at` (relative to the start) and returns false with
    // err empty; on an I/O error returns false with err set.
    bool same(const std::string & src_path, uint64_t src_off, const std::string & out_path, uint64_t out_off,
              uint64_t len, uint64_t & diff_at, std::string & err) {
        err.clear();
        const int fs = fds.get(src_path, err);
        if (fs < 0) return false;
        const int fo = fds.get(out_path, err);
        if (fo < 0) return false;
        for (uint64_t done = 0; done < len;) {
            // a span that is a hole in both files is zeros in both: equal unread (a
            // sparse model's prune was otherwise read whole, twice)
            const extent es = extent_at(fs, src_off + done, len - done), eo = extent_at(fo, out_off + done, len - done);
            const uint64_t run = std::min(es.run, eo.run);
            if (es.hole && eo.hole) {
                done += run;
                compared += run;
                continue;
            }
            const size_t n = size_t(std::min<uint64_t>(k_chunk, run));
            if (!util::pread_full(fs, a.data(), n, src_off + done)) {
                err = src_path + ": read error at " + std::to_string(src_off + done);
                return false;
            }
            if (!util::pread_full(fo, b.data(), n, out_off + done)) {
                err = out_path + ": read error at " + std::to_string(out_off + done);
                return false;
            }
            if (memcmp(a.data(), b.data(), n) != 0) {
                size_t i = 0;
                while (a[i] == b[i]) ++i;
                diff_at = done + i;
                return false;
            }
            done += n;
            compared += n;
        }
        return true;
    }
};

bool same_kv(const gguf::kv & x, const gguf::kv & y) {
    return x.key == y.key && x.type == y.type && x.raw == y.raw;
}

std::string kv_desc(const gguf::kv & e) { return e.type_string() + " " + e.value_string(); }

// The kept-id keys of a stamp (reap.source.expert_ids.L) equal the plan's keep
// lists, layer by layer; a stamp of a reap that predates them has none (all
// of them or none), and no other layer may have one.
bool check_kept_ids(const gguf::model & out, const moe::layout & lay, const plan & p, verify_report & rep,
                    std::string & err) {
    std::map<int64_t, std::vector<int64_t>> kept;
    if (!moe::read_kept_ids(out.kvs, lay.n_layer, (uint64_t) lay.n_expert, (uint64_t) p.n_keep, kept, err)) return false;
    if (kept.empty()) return true;
    if (kept.size() != lay.moe_layers.size()) {
        err = "the output has " + std::to_string(kept.size()) + " " + k_key_source_expert_ids + "* keys for " +
              std::to_string(lay.moe_layers.size()) + " MoE layers";
        return false;
    }
    for (int layer : lay.moe_layers) {
        const std::string key = moe::source_expert_ids_key(layer);
        const auto it = kept.find(layer);
        if (it == kept.end()) {
            err = "KV '" + key + "' is missing (the other MoE layers have theirs)";
            return false;
        }
        const plan_layer * pl = p.find_layer(layer);
        if (!pl || it->second != pl->keep) {
            err = "KV '" + key + "' does not list the plan's kept experts of layer " + std::to_string(layer);
            return false;
        }
        ++rep.n_kvs;
    }
    return true;
}

bool check_kvs(const gguf::model & src, const gguf::model & out, const moe::layout & lay, const plan & p,
               const verify_options & opts, verify_report & rep, std::string & err) {
    const std::string count_key = moe::kv_key(lay.arch, "expert_count");
    // expected: the source's KVs, split.* and provenance keys left out, expert_count = n_keep
    std::vector<gguf::kv> want, got;
    for (const gguf::kv & e : src.kvs.entries) {
        if (!is_split_key(e.key) && !is_provenance_key(e.key)) want.push_back(e);
    }
    for (const gguf::kv & e : out.kvs.entries) {
        if (!is_split_key(e.key) && !is_provenance_key(e.key)) got.push_back(e);
    }
    gguf::kv_store want_store;
    want_store.entries = want;
    if (!set_expert_count(want_store, lay.arch, p.n_keep, err)) return false;
    // a width cut's: expert_feed_forward_length = K, and a shared-expert count where the arch sizes them by it
    if (p.has_width() && !moe::width_kvs(src, lay, p.width_keep, want_store, err)) return false;
    want = want_store.entries;
    for (size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
        if (i >= got.size()) {
            err = "KV '" + want[i].key + "' of the source is missing from the output";
            return false;
        }
        if (i >= want.size()) {
            err = "KV '" + got[i].key + "' of the output is not in the source";
            return false;
        }
        if (want[i].key != got[i].key) {
            err = "KV " + std::to_string(i) + " (without split.*/reap.* keys) is '" + got[i].key + "' in the output, '" +
                  want[i].key + "' expected";
            return false;
        }
        if (!same_kv(want[i], got[i])) {
            if (want[i].key == count_key) {
                err = "KV '" + count_key + "' is " + kv_desc(got[i]) + ", expected " + kv_desc(want[i]) +
                      " (n_keep of the plan)";
            } else if (const gguf::kv * s = src.kvs.find(want[i].key); s && !same_kv(*s, want[i])) {
                err = "KV '" + want[i].key + "' is " + kv_desc(got[i]) + ", expected " + kv_desc(want[i]) + " (the plan's width cut)";
            } else {
                err = "KV '" + want[i].key + "' differs: output " + kv_desc(got[i]) + ", source " + kv_desc(want[i]);
            }
            return false;
        }
        ++rep.n_kvs;
    }
    // provenance: either the source's own values (no stamp) or a fresh stamp
    const gguf::kv * o_sha = out.kvs.find(k_key_plan_sha256);
    const gguf::kv * s_sha = src.kvs.find(k_key_plan_sha256);
    rep.stamped = o_sha && !(s_sha && same_kv(*o_sha, *s_sha));
    if (!rep.stamped) {
        for (const char * key : {k_key_plan_sha256, k_key_source_expert_count, k_key_version, k_key_plan_other_model}) {
            const gguf::kv * o = out.kvs.find(key);
            const gguf::kv * s = src.kvs.find(key);
            if (!o && !s) continue;
            if (!o || !s || !same_kv(*o, *s)) {
                err = std::string("KV '") + key + "': " + (o ? kv_desc(*o) : std::string("absent")) +
                      " in the output without a fresh " + k_key_plan_sha256 + " stamp; the source has " +
                      (s ? kv_desc(*s) : std::string("none"));
                return false;
            }
            ++rep.n_kvs;
        }
        return true;
    }
    std::string sha;
    if (!out.kvs.get_string(k_key_plan_sha256, sha, err)) return false;
    if (!opts.plan_sha256.empty() && sha != opts.plan_sha256) {
        err = std::string("KV '") + k_key_plan_sha256 + "' is " + sha + ", but the plan file's sha256 is " +
              opts.plan_sha256 + " (the output was pruned with another plan)";
        return false;
    }
    uint64_t src_count = 0;
    if (!out.kvs.get_u64(k_key_source_expert_count, src_count, err)) return false;
    if (int64_t(src_count) != lay.n_expert) {
        err = std::string("KV '") + k_key_source_expert_count + "' is " + std::to_string(src_count) +
              ", the source has " + std::to_string(lay.n_expert) + " experts";
        return false;
    }
    if (out.kvs.has(k_key_version)) {
        std::string v;
        if (!out.kvs.get_string(k_key_version, v, err)) return false;
    }
    if (out.kvs.has(k_key_plan_other_model)) {
        std::string v;
        if (!out.kvs.get_string(k_key_plan_other_model, v, err)) return false;
    }
    rep.n_kvs += 2 + (out.kvs.has(k_key_version) ? 1 : 0) + (out.kvs.has(k_key_plan_other_model) ? 1 : 0);
    if (p.has_width()) {
        uint64_t n_ff = 0;
        if (!out.kvs.get_u64(k_key_width_source_length, n_ff, err)) return false;
        if (int64_t(n_ff) != p.width_n_ff) {
            err = std::string("KV '") + k_key_width_source_length + "' is " + std::to_string(n_ff) + ", the plan's source width is " +
                  std::to_string(p.width_n_ff);
            return false;
        }
        ++rep.n_kvs;
    } else if (out.kvs.has(k_key_width_source_length)) {
        err = std::string("KV '") + k_key_width_source_length + "' in the output of a plan that keeps every channel";
        return false;
    }
    return check_kept_ids(out, lay, p, rep, err);
}

// gate/up rows (bias elements) of the kept channels of every matrix `mats`, byte for byte.
bool check_width_rows(const gguf::model & src, const gguf::model & out, const gguf::tensor_info & s,
                      const gguf::tensor_info & o, const width_matrices & mats, const plan & p, int64_t n_mat, comparer & cmp,
                      std::string & err) {
    const std::string who = "tensor '" + s.name + "'";
    if (o.type != s.type) {
        err = who + ": type " + std::string(gguf::type_name(o.type)) + " in the output, " + gguf::type_name(s.type) + " in the source";
        return false;
    }
    const uint64_t per_expert = s.nbytes / uint64_t(n_mat), row = per_expert / uint64_t(p.width_n_ff);
    if (o.nbytes != row * uint64_t(p.width_keep) * uint64_t(mats.size())) {
        err = who + ": " + std::to_string(o.nbytes) + " bytes in the output, " +
              std::to_string(row * uint64_t(p.width_keep) * uint64_t(mats.size())) + " expected";
        return false;
    }
    for (size_t k = 0; k < mats.size(); ++k) {
        const std::vector<int64_t> & ch = mats.channels(k);
        for (size_t j = 0; j < ch.size(); ++j) {
            const uint64_t at_src = s.file_offset + uint64_t(mats.source(k)) * per_expert + uint64_t(ch[j]) * row;
            const uint64_t at_out = o.file_offset + (k * ch.size() + j) * row;
            uint64_t diff = 0;
            if (!cmp.same(src.path_of(s), at_src, out.path_of(o), at_out, row, diff, err)) {
                if (err.empty()) {
                    err = who + ": " + (mats.shared ? std::string("shared expert") : "output expert " + std::to_string(k) +
                                                                                      " (source expert " + std::to_string(mats.source(k)) + ")") +
                          " channel " + std::to_string(j) + " (source channel " + std::to_string(ch[j]) + ") differs at byte " +
                          std::to_string(diff) + " of its row";
                }
                return false;
            }
        }
    }
    return true;
}

// down: every matrix of `mats` against a fresh requantisation of its kept columns to the output's type.
bool check_width_down(const gguf::model & src, const gguf::model & out, const gguf::tensor_info & s,
                      const gguf::tensor_info & o, const width_matrices & mats, const verify_options & opts,
                      verify_report & rep, std::string & err) {
    const std::string who = "tensor '" + s.name + "'";
    const uint64_t per_out = o.nbytes / uint64_t(mats.size());
    const bool weighted = needs_importance(o.type);
    if (weighted && !opts.importance) {
        rep.differs = false;   // not a difference: the audit cannot be made
        err = who + " is " + gguf::type_name(o.type) + ", which is quantised with an importance matrix: give the source "
              "model's llama-imatrix file the cut used (--imatrix) to audit it";
        return false;
    }
    std::vector<uint8_t> want, got(per_out);
    std::vector<float> w;
    for (size_t k = 0; k < mats.size(); ++k) {
        if (weighted && !opts.importance(s.name, k, w, err)) {
            rep.differs = false;
            return false;
        }
        if (!requantise_down_expert(src, s, mats.source(k), mats.channels(k), o.type, want, err, weighted ? &w : nullptr)) {
            return false;
        }
        if (want.size() != per_out) {
            err = who + ": " + std::to_string(o.nbytes) + " bytes in the output, " + std::to_string(want.size() * mats.size()) +
                  " expected (" + std::to_string(mats.size()) + " matrices requantised to " + gguf::type_name(o.type) + ")";
            return false;
        }
        if (!gguf::read_tensor_bytes(out, o, k * per_out, per_out, got.data(), err)) return false;
        if (want != got) {
            size_t i = 0;
            while (want[i] == got[i]) ++i;
            err = who + ": " + (mats.shared ? std::string("the shared expert") : "output expert " + std::to_string(k) +
                                                                              " (source expert " + std::to_string(mats.source(k)) + ")") +
                  " differs at byte " + std::to_string(i) + " from the source's kept columns requantised to " +
                  gguf::type_name(o.type);
            return false;
        }
        rep.bytes_requantised += per_out;
    }
    ++rep.n_requantised;
    return true;
}

// A tensor a width plan cuts (s in the source, o in the output): its shape,
// then gate/up rows (bias elements) of the kept channels byte for byte, down
// rows against a fresh requantisation of the kept columns to the output's
// type. A shared expert cut with the routed ones (llama4) is one matrix with
// the layer's shared channels.
bool check_width_tensor(const gguf::model & src, const gguf::model & out, const gguf::tensor_info & s,
                        const gguf::tensor_info & o, const plan_layer & pl, const plan & p, int64_t n_expert, comparer & cmp,
                        const verify_options & opts, verify_report & rep, std::string & err) {
    const std::string who = "tensor '" + s.name + "'";
    const bool shared = moe::width_is_shared(s.name);
    const bool down = moe::width_cuts_columns(s.name, shared);
    const int width_dim = moe::width_channel_dim(s.name);
    int64_t ne_want[4] = {s.ne[0], s.ne[1], s.ne[2], s.ne[3]};
    ne_want[width_dim] = p.width_keep;
    if (!shared) ne_want[s.n_dims - 1] = p.n_keep;   // the expert axis: last (weights [.., .., n_expert], biases [n_ff, n_expert])
    bool shape_ok = o.n_dims == s.n_dims;
    for (int d = 0; d < 4; ++d) shape_ok = shape_ok && o.ne[d] == ne_want[d];
    if (!shape_ok) {
        gguf::tensor_info w = s;
        for (int d = 0; d < 4; ++d) w.ne[d] = ne_want[d];
        err = who + ": shape " + o.shape_string() + " in the output, " + w.shape_string() + " expected (width " +
              std::to_string(p.width_keep) + ")";
        return false;
    }
    const width_matrices mats{&pl, shared};
    if (shared && int64_t(pl.shared_channels.size()) != p.width_keep) {
        err = who + ": layer " + std::to_string(pl.layer) + " has no shared-expert channels in the plan";
        return false;
    }
    if (!down) return check_width_rows(src, out, s, o, mats, p, shared ? 1 : n_expert, cmp, err);
    return check_width_down(src, out, s, o, mats, opts, rep, err);
}

bool check_tensors(const gguf::model & src, const gguf::model & out, const moe::layout & lay, const plan & p,
                   const verify_options & opts, verify_report & rep, std::string & err) {
    if (out.tensors.size() != src.tensors.size()) {
        err = "the output has " + std::to_string(out.tensors.size()) + " tensors, the source " +
              std::to_string(src.tensors.size());
        return false;
    }
    comparer cmp;
    const bool shared_cut = p.has_width() && moe::width_cuts_shared(src, lay);
    for (size_t i = 0; i < src.tensors.size(); ++i) {
        const gguf::tensor_info & s = src.tensors[i];
        const gguf::tensor_info & o = out.tensors[i];
        const moe::tensor_role & role = lay.roles[i];
        const std::string who = "tensor '" + s.name + "'";
        if (o.name != s.name) {
            err = "tensor " + std::to_string(i) + " is '" + o.name + "' in the output, '" + s.name + "' in the source";
            return false;
        }
        if (p.has_width() && (moe::width_keeps_rows(s.name, shared_cut) || moe::width_cuts_columns(s.name, shared_cut))) {
            const plan_layer * pl = p.find_layer(role.layer);
            if (!pl || pl->channels.size() != pl->keep.size()) {
                err = who + ": layer " + std::to_string(role.layer) + " has no channel lists in the plan";
                return false;
            }
            if (!check_width_tensor(src, out, s, o, *pl, p, lay.n_expert, cmp, opts, rep, err)) return false;
            ++rep.n_sliced;
            ++rep.n_tensors;
            continue;
        }
        if (o.type != s.type) {
            err = who + ": type " + gguf::type_name(o.type) + " in the output, " + gguf::type_name(s.type) + " in the source";
            return false;
        }
        int64_t ne_want[4] = {s.ne[0], s.ne[1], s.ne[2], s.ne[3]};
        const bool sliced = role.slice != moe::slice_kind::none;
        if (sliced) ne_want[role.expert_dim] = p.n_keep;
        bool shape_ok = o.n_dims == s.n_dims;
        for (int d = 0; d < 4; ++d) shape_ok = shape_ok && o.ne[d] == ne_want[d];
        if (!shape_ok) {
            gguf::tensor_info w = s;
            for (int d = 0; d < 4; ++d) w.ne[d] = ne_want[d];
            err = who + ": shape " + o.shape_string() + " in the output, " + w.shape_string() + " expected";
            return false;
        }
        uint64_t diff = 0;
        if (!sliced) {
            if (o.nbytes != s.nbytes) {
                err = who + ": " + std::to_string(o.nbytes) + " bytes in the output, " + std::to_string(s.nbytes) + " in the source";
                return false;
            }
            if (!cmp.same(src.path_of(s), s.file_offset, out.path_of(o), o.file_offset, s.nbytes, diff, err)) {
                if (err.empty()) err = who + ": differs from the source at byte " + std::to_string(diff);
                return false;
            }
        } else {
            const plan_layer * pl = p.find_layer(role.layer);
            if (!pl) {
                err = who + ": layer " + std::to_string(role.layer) + " is not in the plan";
                return false;
            }
            const uint64_t S = role.expert_bytes;
            if (S * uint64_t(lay.n_expert) != s.nbytes || o.nbytes != S * uint64_t(p.n_keep)) {
                err = who + ": " + std::to_string(o.nbytes) + " bytes in the output, " +
                      std::to_string(S * uint64_t(p.n_keep)) + " expected (" + std::to_string(p.n_keep) + " experts of " +
                      std::to_string(S) + " bytes)";
                return false;
            }
            for (size_t k = 0; k < pl->keep.size(); ++k) {
                const int64_t e = pl->keep[k];
                if (!cmp.same(src.path_of(s), s.file_offset + uint64_t(e) * S, out.path_of(o), o.file_offset + k * S, S,
                              diff, err)) {
                    if (err.empty()) {
                        err = who + ": output expert " + std::to_string(k) + " (source expert " + std::to_string(e) +
                              ") differs at byte " + std::to_string(diff) + " of its " + std::to_string(S) + "-byte " +
                              moe::slice_name(role.slice);
                    }
                    return false;
                }
            }
            ++rep.n_sliced;
        }
        ++rep.n_tensors;
    }
    rep.bytes_compared = cmp.compared;
    return true;
}

bool check_sums(const gguf::model & out, const verify_options & opts, verify_report & rep, std::string & err) {
    const std::string sums = opts.sums_path.empty() ? sums_path_for(out.shards[0].path) : opts.sums_path;
    std::vector<std::pair<std::string, std::string>> entries;
    if (!read_sha256sums(sums, entries, err)) return false;
    for (const gguf::file_header & sh : out.shards) {
        const std::pair<std::string, std::string> * found = nullptr;
        for (const auto & e : entries) {
            if (util::same_file(util::beside(sums, e.first), sh.path)) found = &e;
        }
        if (!found) {
            err = sums + ": does not list " + sh.path;
            return false;
        }
        std::string hex;
        if (!util::sha256_file(sh.path, hex, err)) return false;
        if (hex != found->second) {
            err = sums + ": " + sh.path + " has sha256 " + hex + ", SHA256SUMS says " + found->second;
            return false;
        }
        ++rep.n_sums_checked;
    }
    return true;
}

} // namespace

bool verify_pruned(const gguf::model & src, const plan & p, const std::string & out_path, const verify_options & opts,
                   verify_report & report, std::string & err) {
    report = verify_report{};
    moe::layout lay;
    if (!model_layout(src, lay, err)) {
        err = "source: " + err;
        return false;
    }
    plan_model_facts facts = p.has_width() ? facts_of(lay, src) : facts_of(lay);
    facts.down_block = 1;   // the output's down type, whatever it is, is checked tensor by tensor (check_width_tensor)
    if (!validate_plan(p, facts, err)) return false;
    // a prune killed after committing its set leaves a journal that the next
    // run completes; until then the files may be a mix of old and new
    const std::string journal = util::journal_path(out_path);
    if (::access(journal.c_str(), F_OK) == 0) {
        err = out_path + ": an interrupted prune left " + journal +
              " (its new files are complete but not all in place): run the prune again to finish publishing";
        return false;
    }
    // An output that cannot be opened is an error; from here on, anything
    // wrong with what it holds means it does not verify.
    struct stat st;
    if (::stat(out_path.c_str(), &st) != 0 || ::access(out_path.c_str(), R_OK) != 0) {
        err = out_path + ": cannot open: " + strerror(errno);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        err = out_path + ": not a regular file";
        return false;
    }
    for (const gguf::file_header & ss : src.shards) {
        if (util::same_file(out_path, ss.path)) {
            err = out_path + " is a file of the source model, not a pruned output";
            return false;
        }
    }
    report.differs = true;
    gguf::model out;
    if (!gguf::open_model(out_path, out, err)) return false;
    report.n_shards = uint32_t(out.shards.size());
    for (const gguf::file_header & sh : out.shards) {
        for (const gguf::file_header & ss : src.shards) {
            if (util::same_file(sh.path, ss.path)) {
                err = sh.path + " is a file of the source model, not a pruned output";
                return false;
            }
        }
    }
    if (out.shards[0].alignment != src.shards[0].alignment) {
        err = "alignment " + std::to_string(out.shards[0].alignment) + " in the output, " +
              std::to_string(src.shards[0].alignment) + " in the source";
        return false;
    }
    if (!check_kvs(src, out, lay, p, opts, report, err)) return false;
    if (!check_tensors(src, out, lay, p, opts, report, err)) return false;
    // an explicit --sums that cannot be read (missing, a folder, ...) is a usage
    // or I/O error (exit 2), not an output that differs
    if (opts.check_sums && !opts.sums_path.empty()) {
        struct stat st;
        if (::stat(opts.sums_path.c_str(), &st) != 0 || ::access(opts.sums_path.c_str(), R_OK) != 0) {
            report.differs = false;
            err = opts.sums_path + ": cannot open: " + strerror(errno);
            return false;
        }
        if (!S_ISREG(st.st_mode)) {
            report.differs = false;
            err = "--sums " + opts.sums_path + " is not a regular file";
            return false;
        }
    }
    if (opts.check_sums && !check_sums(out, opts, report, err)) return false;
    report.differs = false;
    return true;
}

} // namespace reap::prune

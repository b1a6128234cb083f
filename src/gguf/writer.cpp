// The GGUF writer: lays an output_spec out into one file or gguf-split style
// shards (exact sizes without I/O), and writes it safely: temp file beside
// the target, data streamed from the source files with copy_file_range or a
// fixed-size pread/write buffer (holes of a sparse source stay holes), every
// write checked, fsync, rename. Its targets follow the one output rule
// (util::check_output): never an input file (the same file by st_dev +
// st_ino, or the same directory entry), never an existing target unless asked to.
#include "gguf/internal.h"
#include "util/file.h"
#include "util/path.h"
#include "util/sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>

namespace reap::gguf {

namespace {

using detail::align_up;
using detail::put;
using detail::put_string;

std::string in_quotes(const std::string & s) { return "'" + s + "'"; }

bool is_split_key(const std::string & key) {
    return key == k_key_split_no || key == k_key_split_count || key == k_key_split_tensors_count;
}

// Checks the spec and returns its alignment and each tensor's byte count.
bool validate_spec(const output_spec & spec, uint32_t & alignment, std::vector<uint64_t> & nbytes, std::string & err) {
    if (spec.version != 2 && spec.version != 3) {
        err = "output version " + std::to_string(spec.version) + " (only 2 and 3 can be written)";
        return false;
    }
    std::unordered_set<std::string> keys;
    for (const kv & e : spec.kvs.entries) {
        if (!keys.insert(e.key).second) {
            err = "output kv: duplicate key " + in_quotes(e.key);
            return false;
        }
        if (!detail::validate_kv_raw(e, err)) {
            err = "output kv: " + err;
            return false;
        }
    }
    alignment = k_default_alignment;
    if (const kv * a = spec.kvs.find(k_key_alignment)) {
        if (a->type != value_type::U32) {
            err = std::string("output kv: ") + k_key_alignment + " has type " + a->type_string() + ", expected u32";
            return false;
        }
        std::memcpy(&alignment, a->raw.data(), 4);
        if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > k_max_alignment) {
            err = std::string("output kv: ") + k_key_alignment + " = " + std::to_string(alignment) +
                  " is not a power of two <= " + std::to_string(k_max_alignment);
            return false;
        }
    }
    std::unordered_set<std::string> names;
    nbytes.assign(spec.tensors.size(), 0);
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
        const output_tensor & t = spec.tensors[i];
        if (t.name.empty() || t.name.size() > k_max_name_bytes) {
            err = "output tensor #" + std::to_string(i) + " name " + in_quotes(t.name) + " is empty or longer than " +
                  std::to_string(k_max_name_bytes) + " bytes";
            return false;
        }
        if (!names.insert(t.name).second) {
            err = "output tensor " + in_quotes(t.name) + " appears twice";
            return false;
        }
        if (!tensor_nbytes(t.type, t.n_dims, t.ne, nbytes[i], err, "output tensor " + in_quotes(t.name))) return false;
        uint64_t have = 0;
        if ((t.memory ? 1 : 0) + (t.pieces.empty() ? 0 : 1) + (t.produce ? 1 : 0) > 1) {
            err = "output tensor " + in_quotes(t.name) + " has more than one of file pieces, an in-memory buffer and a producer";
            return false;
        }
        if (t.produce) {
            have = nbytes[i];   // checked when it is made (write_shard)
        } else if (t.memory) {
            have = t.memory->size();
        } else {
            for (const data_piece & p : t.pieces) {
                if (p.length > std::numeric_limits<uint64_t>::max() - have) {
                    err = "output tensor " + in_quotes(t.name) + ": piece lengths overflow";
                    return false;
                }
                have += p.length;
            }
        }
        if (have != nbytes[i]) {
            err = "output tensor " + in_quotes(t.name) + " " + type_name(t.type) + ": its data supply " +
                  std::to_string(have) + " bytes but the shape needs " + std::to_string(nbytes[i]);
            return false;
        }
    }
    return true;
}

// The KVs of shard `index` of `n_shards` (gguf-split's conventions).
std::vector<const kv *> shard_kvs(const output_spec & spec, bool split, size_t index, uint32_t alignment,
                                  std::vector<kv> & owned) {
    std::vector<const kv *> out;
    if (!split) {
        // A single file is not part of a split set, whatever the spec's KVs say.
        for (const kv & e : spec.kvs.entries) {
            if (!is_split_key(e.key)) out.push_back(&e);
        }
        return out;
    }
    if (index == 0) {
        for (const kv & e : spec.kvs.entries) {
            if (!is_split_key(e.key)) out.push_back(&e);
        }
    } else if (alignment != k_default_alignment) {
        // gguf-split leaves general.alignment in shard 1 only, which misplaces the data of later
        // shards when the alignment is not the default; we repeat it where it matters.
        out.push_back(spec.kvs.find(k_key_alignment));
    }
    for (const kv & e : owned) out.push_back(&e);
    return out;
}

std::vector<kv> split_keys(size_t index, size_t n_shards, size_t n_tensors) {
    kv_store s;
    s.set_u16(k_key_split_no, (uint16_t) index);
    s.set_i32(k_key_split_tensors_count, (int32_t) n_tensors);
    s.set_u16(k_key_split_count, (uint16_t) n_shards);
    return s.entries;
}

uint64_t header_size(const std::vector<const kv *> & kvs, const output_spec & spec, size_t first, size_t count) {
    uint64_t n = 4 + 4 + 8 + 8;
    for (const kv * e : kvs) n += 8 + e->key.size() + 4 + e->raw.size();
    for (size_t i = first; i < first + count; ++i) {
        const output_tensor & t = spec.tensors[i];
        n += 8 + t.name.size() + 4 + 8ull * t.n_dims + 4 + 8;
    }
    return n;
}

std::string prefix_of(const std::string & target) {
    if (target.size() > 5 && util::ends_with(target, ".gguf")) return target.substr(0, target.size() - 5);
    return target;
}

std::string errno_text(int e) { return e ? strerror(e) : "unexpected end of data"; }

// Zero bytes for padding (alignment <= 1 MiB; written in chunks).
bool write_zeros(int fd, uint64_t n, util::sha256_stream * hash) {
    static const uint8_t zeros[4096] = {};
    if (hash) hash->update_zeros(n);
    while (n > 0) {
        const size_t take = (size_t) std::min<uint64_t>(n, sizeof(zeros));
        if (!util::current_disk().write(fd, zeros, take)) return false;
        n -= take;
    }
    return true;
}

// Writes n bytes and hashes them (hash may be null).
bool write_hashed(int fd, const void * data, size_t n, util::sha256_stream * hash) {
    if (hash) hash->update(data, n);
    return util::current_disk().write(fd, data, n);
}

// Copies [offset, offset+length) of src_fd (all data, no holes) to the current
// position of dst_fd. Tries copy_file_range first (no user-space copy); falls
// back to a 1 MiB buffer. With `hash`, always the buffer: the bytes are hashed
// as they pass, so that the output need not be read again for SHA256SUMS.
bool copy_data(int src_fd, uint64_t offset, uint64_t length, int dst_fd, std::vector<uint8_t> & buffer,
                bool & try_copy_file_range, int & error, util::sha256_stream * hash) {
    if (hash) try_copy_file_range = false;
    error = 0;
#if defined(__linux__)
    while (try_copy_file_range && length > 0) {
        loff_t in = (loff_t) offset;
        const size_t chunk = (size_t) std::min<uint64_t>(length, 1ull << 30);
        const ssize_t n = copy_file_range(src_fd, &in, dst_fd, nullptr, chunk, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP || errno == EBADF ||
                errno == EPERM) {
                try_copy_file_range = false;   // not supported here: use the buffer from now on
                break;
            }
            error = errno;
            return false;
        }
        if (n == 0) {
            error = 0;
            return false;   // source shorter than expected
        }
        offset += (uint64_t) n;
        length -= (uint64_t) n;
    }
#else
    try_copy_file_range = false;
#endif
    if (buffer.empty()) buffer.resize(1 << 20);
    while (length > 0) {
        const size_t take = (size_t) std::min<uint64_t>(length, buffer.size());
        errno = 0;
        if (!util::pread_full(src_fd, buffer.data(), take, offset)) {
            error = errno;
            return false;
        }
        if (!write_hashed(dst_fd, buffer.data(), take, hash)) {
            error = errno;
            return false;
        }
        offset += take;
        length -= take;
    }
    return true;
}

// Copies [offset, offset+length) of src_fd to the current position of dst_fd,
// keeping the source's holes as holes (SEEK_DATA/SEEK_HOLE; the destination
// position just moves past them, the caller sets the final size): a sparse
// source is not inflated, and its zeros are neither read nor written. Where the
// file system cannot say, everything is data.
bool copy_range(int src_fd, uint64_t offset, uint64_t length, int dst_fd, std::vector<uint8_t> & buffer,
                bool & try_copy_file_range, int & error, util::sha256_stream * hash) {
    error = 0;
    while (length > 0) {
        uint64_t data = offset, data_end = offset + length;
#if defined(SEEK_DATA) && defined(SEEK_HOLE)
        const off_t d = ::lseek(src_fd, (off_t) offset, SEEK_DATA);
        if (d >= 0) {
            data = std::min<uint64_t>((uint64_t) d, offset + length);
        } else if (errno == ENXIO) {
            data = offset + length;   // only a hole from here to the end of the file
        }
        if (data > offset) {
            if (::lseek(dst_fd, (off_t) (data - offset), SEEK_CUR) < 0) {
                error = errno;
                return false;
            }
            if (hash) hash->update_zeros(data - offset);
            length -= data - offset;
            offset = data;
            continue;
        }
        const off_t h = ::lseek(src_fd, (off_t) offset, SEEK_HOLE);
        if (h > (off_t) offset) data_end = std::min<uint64_t>((uint64_t) h, offset + length);
#endif
        const uint64_t n = data_end - offset;
        if (!copy_data(src_fd, offset, n, dst_fd, buffer, try_copy_file_range, error, hash)) return false;
        offset += n;
        length -= n;
    }
    return true;
}

struct source_file {
    int      fd = -1;
    uint64_t size = 0;
};

// Closes the sources on every exit path (the temp files are the durable_files').
struct write_session {
    std::map<std::string, source_file> sources;
    ~write_session() {
        for (auto & [path, s] : sources) {
            if (s.fd >= 0) ::close(s.fd);
        }
    }
};

} // namespace

output_tensor copy_of(const model & m, const tensor_info & t) {
    output_tensor o;
    o.name = t.name;
    o.n_dims = t.n_dims;
    for (uint32_t d = 0; d < k_max_dims; ++d) o.ne[d] = t.ne[d];
    o.type = t.type;
    if (t.nbytes > 0) o.pieces.push_back({m.path_of(t), t.file_offset, t.nbytes});
    return o;
}

output_spec spec_from_model(const model & m) {
    output_spec spec;
    if (!m.shards.empty()) spec.version = m.shards[0].version;
    for (const kv & e : m.kvs.entries) {
        if (!is_split_key(e.key)) spec.kvs.entries.push_back(e);
    }
    for (const tensor_info & t : m.tensors) spec.tensors.push_back(copy_of(m, t));
    return spec;
}

bool layout_output(const output_spec & spec, const write_options & opts, const std::string & target,
                   std::vector<shard_layout> & shards, std::string & err) {
    shards.clear();
    uint32_t alignment = 0;
    std::vector<uint64_t> nbytes;
    if (!validate_spec(spec, alignment, nbytes, err)) return false;
    if (target.empty()) {
        err = "no output path";
        return false;
    }
    const bool split = opts.split_max_bytes > 0 || opts.split_max_tensors > 0;

    // Assign tensors to shards: close a shard when the next tensor would exceed a limit.
    std::vector<std::pair<size_t, size_t>> ranges;   // first, count
    ranges.push_back({0, 0});
    uint64_t shard_data = 0;
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
        const uint64_t padded = align_up(nbytes[i], alignment);
        auto & cur = ranges.back();
        const bool too_many = opts.split_max_tensors > 0 && cur.second >= opts.split_max_tensors;
        const bool too_big = opts.split_max_bytes > 0 && shard_data + padded > opts.split_max_bytes;
        if (split && cur.second > 0 && (too_many || too_big)) {
            ranges.push_back({i, 0});
            shard_data = 0;
        }
        ranges.back().second++;
        shard_data += padded;
    }
    if (split && ranges.size() > 65535) {
        err = "the output would need " + std::to_string(ranges.size()) + " shards; split.count is a u16";
        return false;
    }
    if (split && spec.tensors.size() > (size_t) std::numeric_limits<int32_t>::max()) {
        err = "too many tensors for split.tensors.count (i32)";
        return false;
    }

    const std::string prefix = prefix_of(target);
    for (size_t s = 0; s < ranges.size(); ++s) {
        std::vector<kv> owned = split ? split_keys(s, ranges.size(), spec.tensors.size()) : std::vector<kv>{};
        const std::vector<const kv *> kvs = shard_kvs(spec, split, s, alignment, owned);
        shard_layout l;
        l.path = split ? split_path(prefix, (uint32_t) s, (uint32_t) ranges.size()) : target;
        l.first_tensor = ranges[s].first;
        l.n_tensors = ranges[s].second;
        l.data_offset = align_up(header_size(kvs, spec, l.first_tensor, l.n_tensors), alignment);
        l.file_bytes = l.data_offset;
        for (size_t i = l.first_tensor; i < l.first_tensor + l.n_tensors; ++i) l.file_bytes += align_up(nbytes[i], alignment);
        shards.push_back(std::move(l));
    }
    return true;
}

namespace {

// Opens every source file once and checks each piece lies inside its file.
bool open_sources(const output_spec & spec, write_session & session, std::string & err) {
    for (const output_tensor & t : spec.tensors) {
        for (const data_piece & p : t.pieces) {
            auto it = session.sources.find(p.path);
            if (it == session.sources.end()) {
                source_file s;
                std::string oerr;
                s.fd = util::open_input(p.path, oerr);
                struct stat st;
                if (s.fd < 0 || fstat(s.fd, &st) != 0) {
                    err = s.fd < 0 ? oerr + " (source of tensor " + in_quotes(t.name) + ")"
                                   : p.path + ": cannot stat: " + strerror(errno);
                    if (s.fd >= 0) ::close(s.fd);
                    return false;
                }
                s.size = (uint64_t) st.st_size;
                it = session.sources.emplace(p.path, s).first;
            }
            if (p.offset > it->second.size || p.length > it->second.size - p.offset) {
                err = "tensor " + in_quotes(t.name) + ": source piece [" + std::to_string(p.offset) + ", +" +
                      std::to_string(p.length) + ") lies outside " + p.path + " (size " +
                      std::to_string(it->second.size) + ")";
                return false;
            }
        }
    }
    return true;
}

// Checks every target before writing anything, by the one output rule (util/file.h).
bool check_targets(const std::vector<shard_layout> & layout, const write_session & session,
                   const write_options & opts, std::string & err) {
    std::vector<std::pair<std::string, std::string>> inputs;
    for (const auto & source : session.sources) inputs.emplace_back("input file", source.first);
    for (const shard_layout & l : layout) {
        if (!util::check_output(l.path, inputs, opts.force, err)) return false;
    }
    if (!opts.sums_path.empty()) {
        if (util::dir_of(opts.sums_path) != util::dir_of(layout[0].path)) {
            err = opts.sums_path + ": SHA256SUMS must lie beside the output";
            return false;
        }
        if (!util::check_not_input(opts.sums_path, inputs, err)) return false;   // updated in place, never an input
    }
    return true;
}

// The header of one shard (KVs, tensor infos), padded to its data offset.
std::vector<uint8_t> shard_header(const output_spec & spec, const std::vector<const kv *> & kvs,
                                  const shard_layout & l, const std::vector<uint64_t> & nbytes, uint32_t alignment) {
    std::vector<uint8_t> header = {'G', 'G', 'U', 'F'};
    put<uint32_t>(header, spec.version);
    put<uint64_t>(header, l.n_tensors);
    put<uint64_t>(header, kvs.size());
    for (const kv * e : kvs) {
        put_string(header, e->key);
        put<uint32_t>(header, (uint32_t) e->type);
        header.insert(header.end(), e->raw.begin(), e->raw.end());
    }
    uint64_t offset = 0;
    for (size_t i = l.first_tensor; i < l.first_tensor + l.n_tensors; ++i) {
        const output_tensor & t = spec.tensors[i];
        put_string(header, t.name);
        put<uint32_t>(header, t.n_dims);
        for (uint32_t d = 0; d < t.n_dims; ++d) put<int64_t>(header, t.ne[d]);
        put<uint32_t>(header, (uint32_t) t.type);
        put<uint64_t>(header, offset);
        offset += align_up(nbytes[i], alignment);
    }
    header.resize(l.data_offset, 0);
    return header;
}

// What writing one shard needs besides its layout.
struct shard_writer {
    const output_spec &           spec;
    const std::vector<uint64_t> & nbytes;
    uint32_t                      alignment;
    write_session &               session;
    std::vector<uint8_t>          buffer;
    bool                          try_copy_file_range;
};

// Writes shard `l` (header, then every tensor's data and padding) to `fd`,
// hashing as it goes when `hash` is set, and checks the file's final size.
bool write_shard(shard_writer & w, const shard_layout & l, const std::vector<uint8_t> & header, int fd,
                 util::sha256_stream * hash, std::string & err) {
    auto fail_io = [&](const std::string & what, int e) {
        err = l.path + ": " + what + ": " + errno_text(e);
        return false;
    };
    if (!write_hashed(fd, header.data(), header.size(), hash)) return fail_io("write header", errno);
    for (size_t i = l.first_tensor; i < l.first_tensor + l.n_tensors; ++i) {
        const output_tensor & t = w.spec.tensors[i];
        // one step of the publish (util::disk): copy_file_range below writes fd itself
        if (!util::current_disk().will_write(fd)) return fail_io("write tensor " + in_quotes(t.name), errno);
        if (t.produce) {
            // made here, one tensor at a time; what it gives must be what the layout counted
            std::vector<uint8_t> made;
            if (!t.produce(made, err)) {
                err = l.path + ": tensor " + in_quotes(t.name) + ": " + err;
                return false;
            }
            if (made.size() != w.nbytes[i]) {
                err = l.path + ": tensor " + in_quotes(t.name) + ": its producer made " + std::to_string(made.size()) +
                      " bytes, the shape needs " + std::to_string(w.nbytes[i]);
                return false;
            }
            if (!write_hashed(fd, made.data(), made.size(), hash)) return fail_io("write tensor " + in_quotes(t.name), errno);
        } else if (t.memory) {
            if (!write_hashed(fd, t.memory->data(), t.memory->size(), hash)) {
                return fail_io("write tensor " + in_quotes(t.name), errno);
            }
        } else {
            for (const data_piece & p : t.pieces) {
                int e = 0;
                if (!copy_range(w.session.sources[p.path].fd, p.offset, p.length, fd, w.buffer, w.try_copy_file_range,
                                e, hash)) {
                    return fail_io("copy tensor " + in_quotes(t.name) + " from " + p.path, e);
                }
            }
        }
        if (!write_zeros(fd, align_up(w.nbytes[i], w.alignment) - w.nbytes[i], hash)) {
            return fail_io("write padding", errno);
        }
    }
    // A hole copied last leaves the size short of the position: set it.
    const off_t end = ::lseek(fd, 0, SEEK_CUR);
    if (end < 0) return fail_io("seek", errno);
    struct stat st;
    if (fstat(fd, &st) != 0) return fail_io("stat", errno);
    if (st.st_size < end && ::ftruncate(fd, end) != 0) return fail_io("set the size", errno);
    if (fstat(fd, &st) != 0) return fail_io("stat", errno);
    if ((uint64_t) st.st_size != l.file_bytes) {
        err = l.path + ": wrote " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(l.file_bytes);
        return false;
    }
    return true;
}

// Publish: the shards (and SHA256SUMS) appear together or not at all
// (util::publish_together: a journal, then the renames), under the
// directory's lock, which also keeps two runs from losing each other's
// SHA256SUMS lines.
bool publish_shards(const std::vector<shard_layout> & layout, std::vector<util::durable_file> & files,
                    const std::vector<std::string> & hashes, const write_options & opts, std::string & err) {
    const bool sums = !opts.sums_path.empty();
    util::dir_lock lock;
    if ((sums || files.size() > 1 || !opts.publish_with.empty()) && !lock.lock(util::dir_of(layout[0].path), err)) return false;
    std::vector<util::durable_file *> set;
    for (auto & f : files) set.push_back(&f);
    set.insert(set.end(), opts.publish_with.begin(), opts.publish_with.end());
    util::durable_file sums_file;
    if (sums) {
        std::vector<std::pair<std::string, std::string>> entries;
        for (size_t s = 0; s < layout.size(); ++s) entries.emplace_back(layout[s].path, hashes[s]);
        // its companions written in the same folder (a sliced imatrix beside the model)
        for (size_t i = 0; i < opts.publish_with.size() && i < opts.publish_with_sha256.size(); ++i) {
            const std::string & target = opts.publish_with[i]->target();
            if (!opts.publish_with_sha256[i].empty() && util::dir_of(target) == util::dir_of(opts.sums_path)) {
                entries.emplace_back(target, opts.publish_with_sha256[i]);
            }
        }
        if (!util::stage_sha256sums(entries, opts.sums_path, sums_file, err, opts.sync)) return false;
        set.push_back(&sums_file);
    }
    return util::publish_together(set, err);
}

} // namespace

bool write_output(const output_spec & spec, const write_options & opts, const std::string & target,
                  std::vector<std::string> & written, std::string & err) {
    std::vector<std::string> hashes;
    return write_output(spec, opts, target, written, hashes, err);
}

bool write_output(const output_spec & spec, const write_options & opts, const std::string & target,
                  std::vector<std::string> & written, std::vector<std::string> & hashes, std::string & err) {
    written.clear();
    hashes.clear();
    std::vector<shard_layout> layout;
    if (!layout_output(spec, opts, target, layout, err)) return false;
    uint32_t alignment = 0;
    std::vector<uint64_t> nbytes;
    validate_spec(spec, alignment, nbytes, err);   // cannot fail: layout_output checked it
    const bool split = opts.split_max_bytes > 0 || opts.split_max_tensors > 0;

    write_session session;
    if (!open_sources(spec, session, err)) return false;
    if (!check_targets(layout, session, opts, err)) return false;
    const bool sums = !opts.sums_path.empty();
    // temps of a killed run that wrote this output with another shard count
    if (split) util::remove_stale_temps(util::dir_of(target), util::base_name(prefix_of(target)) + "-", true);

    shard_writer w{spec, nbytes, alignment, session, {}, opts.copy_file_range};
    // every shard is written to its temp file first, then all are renamed into place
    std::vector<util::durable_file> files(layout.size());
    for (size_t s = 0; s < layout.size(); ++s) {
        const shard_layout & l = layout[s];
        util::durable_file & out = files[s];
        if (!out.open(l.path, err, opts.sync, opts.stage != nullptr)) return false;
        if (!opts.force) out.keep_existing();   // nor a file another run published meanwhile
        std::vector<kv> owned = split ? split_keys(s, layout.size(), spec.tensors.size()) : std::vector<kv>{};
        const std::vector<const kv *> kvs = shard_kvs(spec, split, s, alignment, owned);
        std::unique_ptr<util::sha256_stream> hash(sums || opts.stage_sha256 ? new util::sha256_stream() : nullptr);
        if (!write_shard(w, l, shard_header(spec, kvs, l, nbytes, alignment), out.fd(), hash.get(), err)) return false;
        if (!out.finish(err)) return false;
        hashes.push_back(hash ? hash->hex() : std::string());
    }

    if (opts.stage) {   // the caller publishes them, with its other output
        if (sums) {
            err = "internal error: a staged output with SHA256SUMS";
            return false;
        }
        for (size_t s = 0; s < layout.size(); ++s) {
            opts.stage->push_back(std::move(files[s]));
            if (opts.stage_sha256) opts.stage_sha256->push_back(hashes[s]);
            written.push_back(layout[s].path);
        }
        return true;
    }
    if (!publish_shards(layout, files, hashes, opts, err)) return false;
    for (const shard_layout & l : layout) written.push_back(l.path);
    return true;
}

} // namespace reap::gguf

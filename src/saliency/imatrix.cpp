// reap::saliency imatrix import: llama-imatrix files (GGUF and legacy .dat)
// read with full bounds checking and turned into an "energy" saliency archive.
// See imatrix.h.
#include "saliency/imatrix.h"
#include "moe/layout_gguf.h"
#include "moe/width.h"
#include "util/file.h"
#include "util/path.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace reap::saliency {

namespace {

using util::ends_with;
using util::stem_of;

// "blk.L.ffn_down_exps.weight" -> L; -1 otherwise (the layout table's names).
int down_exps_layer(const std::string & name) {
    int layer = -1;
    std::string base;
    return moe::parse_expert_weight(name, layer, base) && base == "ffn_down_exps" ? layer : -1;
}

// "blk.L.ffn_down_shexp.weight" -> L; -1 otherwise (the layout table's names).
int down_shexp_layer(const std::string & name) {
    return moe::shared_down_weight_layer(name);
}

// Whether `name` is a routed-expert weight (ffn_*_exps.weight) as the layout table names them.
bool is_expert_weight(const std::string & name) {
    int layer = -1;
    std::string base;
    return moe::parse_expert_weight(name, layer, base);
}

// Values are read and reduced in chunks of this many floats, whatever the entry's size.
constexpr size_t k_chunk_floats = 1 << 16;

// Reduces `n_values` floats, delivered in chunks by `read(first, n, dst)`, into
// per-matrix sums (n_mat matrices of n_values / n_mat values, summed in order
// as double) and "every value equals ncall" flags; checks every value is
// finite and non-negative. `where` names the entry in messages.
template <typename Read>
bool reduce_values(int64_t n_values, int64_t n_mat, float ncall, const Read & read, const std::string & where,
                   imatrix_entry & en, std::string & err, bool keep_values) {
    const uint64_t per = (uint64_t) n_values / (uint64_t) n_mat;
    en.mat_sum.assign((size_t) n_mat, 0.0);
    en.mat_all_ncall.assign((size_t) n_mat, 1);
    if (keep_values) en.values.reserve((size_t) n_values);   // bounded: the reader checked the values lie in the file
    std::vector<float> buf(std::min<uint64_t>(k_chunk_floats, (uint64_t) n_values));
    for (uint64_t first = 0; first < (uint64_t) n_values;) {
        const size_t n = (size_t) std::min<uint64_t>(buf.size(), (uint64_t) n_values - first);
        if (!read(first, n, buf.data(), err)) return false;
        for (size_t k = 0; k < n; ++k) {
            const float v = buf[k];
            if (!std::isfinite(v) || v < 0) {
                err = where + ": value " + std::to_string(first + k) + " is " + std::to_string(v) +
                      " (not a finite non-negative number)";
                return false;
            }
            const size_t m = (size_t) ((first + k) / per);
            en.mat_sum[m] += v;
            if (v != ncall) en.mat_all_ncall[m] = 0;
            if (keep_values) en.values.push_back(v);
        }
        first += n;
    }
    return true;
}

bool read_gguf_imatrix(const std::string & path, imatrix_file & out, std::string & err, bool keep_values) {
    gguf::model m;
    if (!gguf::open_model(path, m, err)) return false;
    std::string type, e;
    if (!m.kvs.get_string_or("general.type", "", type, e)) {
        err = "imatrix '" + path + "': " + e;
        return false;
    }
    if (!type.empty() && type != "imatrix") {
        err = "'" + path + "' is not an imatrix file (general.type = '" + type + "')";
        return false;
    }
    if (m.kvs.has("imatrix.datasets") && !m.kvs.get_string_array("imatrix.datasets", out.datasets, e)) {
        err = "imatrix '" + path + "': " + e;
        return false;
    }
    uint32_t v = 0;
    if (m.kvs.has("imatrix.chunk_count")) {
        if (!m.kvs.get_u32("imatrix.chunk_count", v, e)) { err = "imatrix '" + path + "': " + e; return false; }
        out.chunk_count = v;
    }
    if (m.kvs.has("imatrix.chunk_size")) {
        if (!m.kvs.get_u32("imatrix.chunk_size", v, e)) { err = "imatrix '" + path + "': " + e; return false; }
        out.chunk_size = v;
    }
    // Pair W.in_sum2 with W.counts.
    std::map<std::string, std::pair<const gguf::tensor_info *, const gguf::tensor_info *>> pairs;
    for (const auto & t : m.tensors) {
        std::string base = t.name;
        if (ends_with(base, ".in_sum2")) {
            pairs[base.substr(0, base.size() - 8)].first = &t;
        } else if (ends_with(base, ".counts")) {
            pairs[base.substr(0, base.size() - 7)].second = &t;
        } else {
            err = "imatrix '" + path + "': tensor '" + t.name + "' is neither <weight>.in_sum2 nor <weight>.counts" +
                  (type.empty() ? " (is this an imatrix file?)" : "");
            return false;
        }
    }
    if (pairs.empty()) {
        err = "imatrix '" + path + "' has no entries";
        return false;
    }
    for (const auto & kv : pairs) {
        const std::string & name = kv.first;
        const gguf::tensor_info * s = kv.second.first;
        const gguf::tensor_info * c = kv.second.second;
        const std::string where = "imatrix '" + path + "' entry '" + name + "'";
        if (!s || !c) {
            err = where + ": has " + (s ? "in_sum2 but no counts" : "counts but no in_sum2");
            return false;
        }
        if (s->type != gguf::tensor_type::F32 || c->type != gguf::tensor_type::F32) {
            err = where + ": in_sum2 and counts must be F32";
            return false;
        }
        const int64_t n_mat = c->ne[0] == 1 ? c->ne[1] : -1;
        if (n_mat < 1 || c->ne[2] != 1 || c->ne[3] != 1) {
            err = where + ": counts has shape " + c->shape_string() + ", expected [1, n_mat]";
            return false;
        }
        if (s->ne[1] != n_mat || s->ne[2] != 1 || s->ne[3] != 1 || s->ne[0] < 1) {
            err = where + ": in_sum2 has shape " + s->shape_string() + ", expected [n_values, " + std::to_string(n_mat) + "]";
            return false;
        }
        imatrix_entry en;
        en.n_mat    = n_mat;
        en.n_values = s->ne[0] * n_mat;
        std::vector<float> cv((size_t) n_mat);
        if (!gguf::read_tensor_bytes(m, *c, 0, c->nbytes, cv.data(), err)) return false;
        en.counts.resize((size_t) n_mat);
        for (int64_t i = 0; i < n_mat; ++i) {
            const float f = cv[(size_t) i];
            if (!std::isfinite(f) || f < 0 || std::fabs(f - std::round(f)) > 1e-3f) {
                err = where + ": count of matrix " + std::to_string(i) + " is " + std::to_string(f) +
                      " (not a non-negative integer)";
                return false;
            }
            en.counts[(size_t) i] = std::round(f);
        }
        if (down_exps_layer(name) >= 0 || (keep_values && down_shexp_layer(name) >= 0)) {
            const auto read = [&](uint64_t first, size_t n, float * dst, std::string & e) {
                return gguf::read_tensor_bytes(m, *s, first * sizeof(float), n * sizeof(float), dst, e);
            };
            if (!reduce_values(en.n_values, n_mat, -1.f, read, where + ": in_sum2", en, err, keep_values)) return false;
            en.mat_all_ncall.clear();
        }
        out.entries.emplace(name, std::move(en));
        out.order.push_back(name);
    }
    return true;
}

}  // namespace

namespace {

// A legacy .dat read through `read(offset, n, dst)` over `size` bytes (a
// memory image or a file): headers are read as they come, the values of
// entries import does not use are skipped, down_exps values are reduced in
// chunks.
template <typename Read>
bool parse_legacy(const Read & read, uint64_t size, const std::string & name, imatrix_file & out,
                  int64_t legacy_split, bool keep_values, std::string & err) {
    out.legacy = true;
    out.entries.clear();
    out.order.clear();
    const std::string head = "imatrix '" + name + "' (legacy format)";
    uint64_t pos = 0;
    std::string rerr;
    auto left = [&]() { return size - pos; };
    auto i32 = [&](int32_t & v) {
        if (left() < 4 || !read(pos, 4, &v, rerr)) return false;
        pos += 4;
        return true;
    };
    auto fail = [&](const std::string & what) {
        err = what + (rerr.empty() ? "" : " (" + rerr + ")");
        return false;
    };
    int32_t n_entries = 0;
    if (!i32(n_entries)) return fail(head + ": shorter than its entry count");
    // every entry takes at least 16 bytes (len, 1 name byte, ncall, nval, 1 value... )
    if (n_entries < 1 || (uint64_t) n_entries > left() / 16) {
        err = head + ": entry count " + std::to_string(n_entries) + " is impossible for a file of " +
              std::to_string(size) + " bytes";
        return false;
    }
    for (int32_t i = 0; i < n_entries; ++i) {
        const std::string where = head + " entry " + std::to_string(i) + " at offset " + std::to_string(pos);
        int32_t len = 0, ncall = 0, nval = 0;
        if (!i32(len)) return fail(where + ": truncated name length");
        if (len < 1 || len > 1024 || (uint64_t) len > left()) {
            err = where + ": name length " + std::to_string(len) + " out of range (1..1024, " + std::to_string(left()) +
                  " bytes left)";
            return false;
        }
        std::string ename((size_t) len, '\0');
        if (!read(pos, (size_t) len, ename.data(), rerr)) return fail(where + ": cannot read the name");
        pos += (uint64_t) len;
        if (ename.find('\0') != std::string::npos) { err = where + ": name holds a NUL byte"; return false; }
        if (!i32(ncall) || !i32(nval)) return fail(where + " ('" + ename + "'): truncated header");
        if (ncall < 0) { err = where + " ('" + ename + "'): negative call count " + std::to_string(ncall); return false; }
        if (nval < 1 || (uint64_t) nval > left() / sizeof(float)) {
            err = where + " ('" + ename + "'): " + std::to_string(nval) + " values but " + std::to_string(left()) +
                  " bytes left";
            return false;
        }
        imatrix_entry en;
        en.ncall    = ncall;
        en.n_values = nval;
        en.counts   = {(double) ncall};
        en.values_offset = pos;
        // the shared expert's down entry is one matrix, read only for its values
        const bool shexp = keep_values && down_shexp_layer(ename) >= 0;
        if ((down_exps_layer(ename) >= 0 && legacy_split > 0 && nval % legacy_split == 0) || shexp) {
            en.n_mat = shexp ? 1 : legacy_split;
            const uint64_t base = pos;
            const auto rd = [&](uint64_t first, size_t n, float * dst, std::string & e) {
                return read(base + first * sizeof(float), n * sizeof(float), dst, e);
            };
            if (!reduce_values(nval, en.n_mat, (float) ncall, rd, where + " ('" + ename + "')", en, err, keep_values)) return false;
        }
        pos += (uint64_t) nval * sizeof(float);
        if (!out.entries.emplace(ename, std::move(en)).second) {
            err = where + ": entry '" + ename + "' appears twice";
            return false;
        }
        out.order.push_back(ename);
    }
    out.trailer_offset = pos;
    // optional trailer: chunk count, dataset name
    if (left() > 0) {
        int32_t n_chunks = 0, len = 0;
        if (!i32(n_chunks) || n_chunks < 0) return fail(head + ": damaged trailer (chunk count)");
        out.chunk_count = n_chunks;
        if (left() > 0) {
            if (!i32(len) || len < 0 || (uint64_t) len != left()) {
                err = head + ": damaged trailer (dataset name length " + std::to_string(len) + ", " +
                      std::to_string(left()) + " bytes left)";
                return false;
            }
            if (len > 0) {
                std::string ds((size_t) len, '\0');
                if (!read(pos, (size_t) len, ds.data(), rerr)) return fail(head + ": cannot read the dataset name");
                out.datasets.push_back(std::move(ds));
            }
            pos += (uint64_t) len;
        }
    }
    return true;
}

}  // namespace

bool parse_imatrix_legacy(const uint8_t * data, size_t size, const std::string & name, imatrix_file & out,
                          std::string & err, int64_t legacy_split, bool keep_values) {
    const auto read = [&](uint64_t off, size_t n, void * dst, std::string &) {
        if (off > size || n > size - off) return false;
        memcpy(dst, data + off, n);
        return true;
    };
    return parse_legacy(read, size, name, out, legacy_split, keep_values, err);
}

bool read_imatrix(const std::string & path, imatrix_file & out, std::string & err, int64_t legacy_split, bool keep_values) {
    out = imatrix_file();
    out.path = path;
    const int fd = util::open_input(path, err, "imatrix");
    if (fd < 0) return false;
    struct fd_guard { int fd; ~fd_guard() { ::close(fd); } } guard{fd};
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        err = "imatrix '" + path + "' is not a regular file";
        return false;
    }
    char magic[4] = {0, 0, 0, 0};
    if (st.st_size >= 4 && util::pread_full(fd, magic, 4, 0) && memcmp(magic, "GGUF", 4) == 0) {
        return read_gguf_imatrix(path, out, err, keep_values);
    }
    const auto read = [&](uint64_t off, size_t n, void * dst, std::string & e) {
        if (util::pread_full(fd, dst, n, off)) return true;
        e = std::string("read error: ") + strerror(errno);
        return false;
    };
    return parse_legacy(read, (uint64_t) st.st_size, path, out, legacy_split, keep_values, err);
}

bool parse_imatrix_input(const std::string & arg, bool named, imatrix_input & out, std::string & err) {
    out = imatrix_input();
    if (named) {
        const size_t eq = arg.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
            err = "--domain wants NAME=FILE, got '" + arg + "'";
            return false;
        }
        out.domain = arg.substr(0, eq);
        out.path   = arg.substr(eq + 1);
    } else {
        out.path   = arg;
        out.domain = stem_of(arg);
    }
    if (out.domain.empty() || out.domain.size() > k_max_domain_bytes) {
        err = "domain name '" + out.domain + "' must have 1 to " + std::to_string(k_max_domain_bytes) + " bytes";
        return false;
    }
    return true;
}

namespace {

// The fingerprint of a model-less import, inferred from the first file: its
// down_exps entries name the MoE layers and the expert count.
bool infer_fingerprint(const imatrix_file & f, fingerprint & fp, std::string & err) {
    if (f.legacy) {
        err = "imatrix '" + f.path + "' is in the legacy format, which does not record the number of experts: "
              "pass the model with -m";
        return false;
    }
    int max_layer = -1;
    for (const auto & kv : f.entries) {
        const int l = down_exps_layer(kv.first);
        if (l < 0) continue;
        max_layer = std::max(max_layer, l);
        fp.moe_layers.push_back(l);
        if (fp.n_expert == 0) fp.n_expert = (uint32_t) kv.second.n_mat;
    }
    if (max_layer < 0) {
        err = "imatrix '" + f.path + "' has no blk.N.ffn_down_exps.weight entry: not from a MoE model";
        return false;
    }
    std::sort(fp.moe_layers.begin(), fp.moe_layers.end());
    fp.arch    = "unknown";
    fp.n_layer = (uint32_t) max_layer + 1;
    // the highest layer may be a dense one the imatrix shows other tensors of
    for (const auto & kv : f.entries) {
        if (util::starts_with(kv.first, "blk.")) {
            const long l = strtol(kv.first.c_str() + 4, nullptr, 10);
            if (l >= (long) fp.n_layer && l < 1000000) fp.n_layer = (uint32_t) l + 1;
        }
    }
    return true;
}

// Every entry of `f` names a tensor of `model` with a matching size.
bool check_belongs_to_model(const imatrix_file & f, const gguf::model & model, const std::string & head,
                            std::string & err) {
    for (const auto & kv : f.entries) {
        const gguf::tensor_info * t = model.find_tensor(kv.first);
        if (!t) {
            err = head + " is from another model: entry '" + kv.first + "' names no tensor of '" +
                  model.shards[0].path + "'";
            return false;
        }
        const bool exps = is_expert_weight(kv.first) && t->n_dims >= 3;
        const int64_t n_mat = exps ? t->ne[2] : 1;
        const uint64_t nvals = (uint64_t) kv.second.n_values;
        if (!f.legacy && exps && kv.second.n_mat != n_mat) {
            err = head + " is from another model: entry '" + kv.first + "' has " + std::to_string(kv.second.n_mat) +
                  " experts, the model's tensor " + std::to_string(n_mat);
            return false;
        }
        const uint64_t want = exps ? (uint64_t) t->ne[0] * (uint64_t) n_mat : 0;
        if ((exps && nvals != want) || (!exps && (t->ne[0] <= 0 || nvals % (uint64_t) t->ne[0] != 0))) {
            err = head + " is from another model: entry '" + kv.first + "' has " + std::to_string(nvals) +
                  " values, the model's tensor has shape " + t->shape_string();
            return false;
        }
    }
    return true;
}

// The message for a MoE layer the file has no down_exps entry for, with the
// reason when the layer is an MTP block.
std::string missing_layer_message(const imatrix_file & f, const gguf::model * model, const fingerprint & fp,
                                  const std::string & head, const std::string & name, int l) {
    std::string msg = head + " has no entry '" + name + "' (MoE layer " + std::to_string(l) + ")" +
                      (f.legacy ? ": legacy files leave out tensors that saw no data" : "");
    moe::layout lay;
    std::string e2;
    if (model && moe::layout_of(*model, lay, e2, moe::describe_options()) && lay.is_mtp(l)) {
        msg += ": it is an MTP block (" + fp.arch + ".nextn_predict_layers = " + std::to_string(lay.n_mtp) +
               "), which llama.cpp's main graph, and so "
               "llama-imatrix, never runs; reap calibrate measures MTP blocks (in llama.cpp's MTP context)";
    }
    return msg;
}

// Adds layer `l`'s per-expert counts and energies from `en` to the domain `d`;
// `layer_count` receives the layer's total count, `rep` its unused experts.
bool add_layer(const imatrix_file & f, const imatrix_entry & en, const std::string & head, const std::string & name,
               int l, int64_t E, archive & out, domain_stats & d, imatrix_domain_report & rep, double & layer_count,
               std::string & err) {
    if (en.n_values % E != 0 || (!f.legacy && en.n_mat != E) || en.mat_sum.size() != (size_t) E) {
        err = head + " entry '" + name + "': " + std::to_string(en.n_values) + " values in " +
              std::to_string(f.legacy ? 0 : en.n_mat) + " matrices do not split into " + std::to_string(E) +
              " experts: the file is from another model";
        return false;
    }
    if (out.n_ff > 0 && (en.n_values != E * (int64_t) out.n_ff || en.values.size() != (size_t) en.n_values)) {
        err = head + " entry '" + name + "': " + std::to_string(en.n_values / E) + " channels per expert, but the archive's " +
              "channel statistics have " + std::to_string(out.n_ff) + " (n_ff_exp of the first file's first MoE layer)";
        return false;
    }
    std::vector<int> unused;
    layer_count = 0;
    for (int64_t e = 0; e < E; ++e) {
        double energy = en.mat_sum[(size_t) e];
        double cnt;
        if (f.legacy) {
            const bool placeholder = en.ncall > 0 && en.mat_all_ncall[(size_t) e];
            cnt = (placeholder || en.ncall == 0) ? 0 : (double) en.ncall;
            if (cnt == 0) energy = 0;
        } else {
            cnt = en.counts[(size_t) e];
            if (cnt == 0 && energy != 0) {
                err = head + " entry '" + name + "': expert " + std::to_string(e) + " has no count but a non-zero sum";
                return false;
            }
        }
        const size_t c = out.index(l, (int) e);
        d.count[c] += cnt;
        d.energy_sum[c] += energy;
        if (out.n_ff > 0 && cnt != 0) {   // the expert's in_sum2 row, channel by channel (placeholders stay 0)
            for (uint32_t ch = 0; ch < out.n_ff; ++ch) d.ch_energy[c * out.n_ff + ch] += en.values[(size_t) e * out.n_ff + ch];
        }
        layer_count += cnt;
        if (cnt == 0) unused.push_back((int) e);
    }
    if (!unused.empty()) {
        rep.n_unused += unused.size();
        rep.unused.emplace_back(l, std::move(unused));
    }
    return true;
}

// Adds layer `l`'s shared expert channel energies (blk.L.ffn_down_shexp.weight's
// in_sum2: one matrix of n_ff values, Σ h_c² over every token) to domain `d`.
bool add_shared_layer(const imatrix_file & f, const std::string & head, int l, archive & out, domain_stats & d,
                      std::string & err) {
    const std::string name = "blk." + std::to_string(l) + ".ffn_down_shexp.weight";
    auto it = f.entries.find(name);
    if (it == f.entries.end()) {
        err = head + " has no entry '" + name + "' (MoE layer " + std::to_string(l) + "): the model's shared expert is cut " +
              "with the routed experts in a width cut, which then needs its channel energies (llama-imatrix records them " +
              "for every layer it ran on 16 or more rows)";
        return false;
    }
    const imatrix_entry & en = it->second;
    if ((!f.legacy && en.n_mat != 1) || en.n_values != (int64_t) out.n_ff || en.values.size() != (size_t) out.n_ff) {
        err = head + " entry '" + name + "': " + std::to_string(en.n_values) + " values in " + std::to_string(en.n_mat) +
              " matrices, expected one matrix of " + std::to_string(out.n_ff) +
              " (the shared expert is as wide as the routed experts): the file is from another model";
        return false;
    }
    const bool no_rows = f.legacy ? en.ncall == 0 : en.counts.at(0) == 0;
    for (uint32_t c = 0; c < out.n_ff; ++c) {
        if (no_rows && en.values[c] != 0 && !f.legacy) {
            err = head + " entry '" + name + "': no count but a non-zero value in channel " + std::to_string(c);
            return false;
        }
        if (!no_rows) d.sh_energy[out.shared_channel_index(l, c)] += en.values[c];
    }
    return true;
}

// Adds one read file to the archive as domain `domain`: checks it against the
// model (when given) and the MoE layers, then sums every layer's experts.
bool add_file(const imatrix_file & f, const std::string & domain, const gguf::model * model, const fingerprint & fp,
              bool channels, archive & out, imatrix_domain_report & rep, std::string & err) {
    const std::string head = "imatrix '" + f.path + "'";
    if (model && !check_belongs_to_model(f, *model, head, err)) return false;
    const std::set<int> moe(fp.moe_layers.begin(), fp.moe_layers.end());
    // Find the down_exps entry of every MoE layer.
    for (const auto & kv : f.entries) {
        const int l = down_exps_layer(kv.first);
        if (l >= 0 && !moe.count(l)) {
            err = head + ": entry '" + kv.first + "' is for layer " + std::to_string(l) +
                  ", not an MoE layer of the " + (model ? "model" : "first file");
            return false;
        }
    }
    if (channels && out.n_ff == 0) {   // the width: the first file's first MoE layer (add_layer checks the rest)
        auto it = f.entries.find("blk." + std::to_string(fp.moe_layers.front()) + ".ffn_down_exps.weight");
        const int64_t n_ff = it == f.entries.end() ? 0 : it->second.n_values / (int64_t) fp.n_expert;
        if (n_ff < 1 || (uint64_t) n_ff * out.n_cells() > k_max_channel_values) {
            err = head + ": no usable ffn_down_exps entry for layer " + std::to_string(fp.moe_layers.front()) +
                  " to take the channel count from";
            return false;
        }
        out.n_ff = (uint32_t) n_ff;
    }
    domain_stats & d = out.find_domain(domain) ? *out.find_domain(domain) : out.add_domain(domain);
    rep.domain = domain;
    rep.path   = f.path;
    rep.legacy = f.legacy;
    double first_layer_count = -1;
    for (int l : fp.moe_layers) {
        const std::string name = "blk." + std::to_string(l) + ".ffn_down_exps.weight";
        auto it = f.entries.find(name);
        if (it == f.entries.end()) {
            err = missing_layer_message(f, model, fp, head, name, l);
            return false;
        }
        double layer_count = 0;
        if (!add_layer(f, it->second, head, name, l, fp.n_expert, out, d, rep, layer_count, err)) return false;
        if (first_layer_count < 0) first_layer_count = layer_count;
        if (out.has_shared_channels && !add_shared_layer(f, head, l, out, d, err)) return false;
    }
    if (!f.legacy) {
        if (fp.n_expert_used > 0 && first_layer_count >= 0 &&
            std::fmod(first_layer_count, (double) fp.n_expert_used) == 0) {
            rep.n_tokens = (int64_t) (first_layer_count / fp.n_expert_used);
        } else if (f.chunk_count > 0 && f.chunk_size > 0) {
            rep.n_tokens = f.chunk_count * f.chunk_size;
        }
    }
    d.n_tokens += rep.n_tokens;
    return true;
}

}  // namespace

bool import_imatrix(const std::vector<imatrix_input> & inputs, const gguf::model * model, archive & out,
                    std::vector<imatrix_domain_report> & reports, std::string & err, bool channels) {
    reports.clear();
    if (inputs.empty()) {
        err = "no imatrix files";
        return false;
    }
    // One file at a time: read, checked, added to the archive, dropped.
    imatrix_file first;
    std::vector<std::string> names;

    // The fingerprint: the model's, or inferred from the first file.
    fingerprint fp;
    if (model) {
        if (!model_fingerprint(*model, fp, err)) return false;
    } else {
        if (!read_imatrix(inputs[0].path, first, err, 0, channels)) return false;
        if (!infer_fingerprint(first, fp, err)) return false;
    }
    out = make_archive(fp, metric_set::energy);
    if (model && channels) {   // a shared expert cut with the routed ones (llama4) needs its channel energies
        moe::layout lay;
        moe::expert_width w;
        if (!moe::layout_of(*model, lay, err, moe::describe_options()) || !moe::expert_width_of(*model, lay, w, err)) return false;
        out.has_shared_channels = w.shared_cut;
    }
    bool any_legacy = false;

    for (size_t i = 0; i < inputs.size(); ++i) {
        imatrix_file cur;
        if (i == 0 && !first.path.empty()) {
            cur = std::move(first);
        } else if (!read_imatrix(inputs[i].path, cur, err, (int64_t) fp.n_expert, channels)) {
            return false;
        }
        names.push_back(util::base_name(cur.path));
        any_legacy = any_legacy || cur.legacy;
        imatrix_domain_report rep;
        if (!add_file(cur, inputs[i].domain, model, fp, channels, out, rep, err)) return false;
        reports.push_back(std::move(rep));
    }

    out.provenance.set_string(k_key_tool, "reap imatrix");
    out.provenance.set_string_array("reap.saliency.imatrix.files", names);
    if (any_legacy) out.provenance.set_bool("reap.saliency.imatrix.legacy_counts", true);
    return validate(out, err);
}

}  // namespace reap::saliency

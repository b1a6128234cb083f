// reap::saliency imatrix import: llama-imatrix files (GGUF and legacy .dat)
// read with full bounds checking and turned into an "energy" saliency archive.
// See imatrix.h.
#include "saliency/imatrix.h"
#include "util/file.h"
#include "util/path.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include <sys/stat.h>

namespace reap::saliency {

namespace {

using util::ends_with;
using util::stem_of;

// "blk.L.ffn_down_exps.weight" -> L; -1 otherwise.
int down_exps_layer(const std::string & name) {
    size_t dot = 0;
    const long l = gguf::block_index(name, dot);
    return l >= 0 && name.compare(dot, std::string::npos, ".ffn_down_exps.weight") == 0 ? (int) l : -1;
}

bool is_expert_weight(const std::string & name) {
    return name.find("_exps.weight") != std::string::npos;
}

// Little-endian readers over a bounded image.
struct cursor {
    const uint8_t * p;
    size_t          size, pos = 0;
    bool i32(int32_t & v) {
        if (size - pos < 4) return false;
        memcpy(&v, p + pos, 4);
        pos += 4;
        return true;
    }
    size_t left() const { return size - pos; }
};

bool read_file_bytes(const std::string & path, std::vector<uint8_t> & out, std::string & err) {
    std::string text;
    if (!util::read_file(path, "imatrix", text, err)) return false;
    out.assign(text.begin(), text.end());
    return true;
}

bool read_gguf_imatrix(const std::string & path, imatrix_file & out, std::string & err) {
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
        std::vector<uint8_t> sb, cb;
        if (!gguf::read_tensor(m, s->name, sb, err) || !gguf::read_tensor(m, c->name, cb, err)) return false;
        imatrix_entry en;
        en.n_mat = n_mat;
        en.sums.resize(sb.size() / sizeof(float));
        memcpy(en.sums.data(), sb.data(), en.sums.size() * sizeof(float));
        en.counts.resize((size_t) n_mat);
        for (int64_t i = 0; i < n_mat; ++i) {
            float f;
            memcpy(&f, cb.data() + i * sizeof(float), sizeof(float));
            if (!std::isfinite(f) || f < 0 || std::fabs(f - std::round(f)) > 1e-3f) {
                err = where + ": count of matrix " + std::to_string(i) + " is " + std::to_string(f) +
                      " (not a non-negative integer)";
                return false;
            }
            en.counts[(size_t) i] = std::round(f);
        }
        for (size_t i = 0; i < en.sums.size(); ++i) {
            if (!std::isfinite(en.sums[i]) || en.sums[i] < 0) {
                err = where + ": in_sum2 value " + std::to_string(i) + " is " + std::to_string(en.sums[i]) +
                      " (not a finite non-negative number)";
                return false;
            }
        }
        out.entries.emplace(name, std::move(en));
    }
    return true;
}

}  // namespace

bool parse_imatrix_legacy(const uint8_t * data, size_t size, const std::string & name, imatrix_file & out,
                          std::string & err) {
    out.legacy = true;
    out.entries.clear();
    cursor c{data, size};
    const std::string head = "imatrix '" + name + "' (legacy format)";
    int32_t n_entries = 0;
    if (!c.i32(n_entries)) {
        err = head + ": shorter than its entry count";
        return false;
    }
    // every entry takes at least 16 bytes (len, 1 name byte, ncall, nval, 1 value... )
    if (n_entries < 1 || (uint64_t) n_entries > c.left() / 16) {
        err = head + ": entry count " + std::to_string(n_entries) + " is impossible for a file of " +
              std::to_string(size) + " bytes";
        return false;
    }
    for (int32_t i = 0; i < n_entries; ++i) {
        const std::string where = head + " entry " + std::to_string(i) + " at offset " + std::to_string(c.pos);
        int32_t len = 0, ncall = 0, nval = 0;
        if (!c.i32(len)) { err = where + ": truncated name length"; return false; }
        if (len < 1 || len > 1024 || (size_t) len > c.left()) {
            err = where + ": name length " + std::to_string(len) + " out of range (1..1024, " + std::to_string(c.left()) +
                  " bytes left)";
            return false;
        }
        std::string ename((const char *) data + c.pos, (size_t) len);
        c.pos += (size_t) len;
        if (ename.find('\0') != std::string::npos) { err = where + ": name holds a NUL byte"; return false; }
        if (!c.i32(ncall) || !c.i32(nval)) { err = where + " ('" + ename + "'): truncated header"; return false; }
        if (ncall < 0) { err = where + " ('" + ename + "'): negative call count " + std::to_string(ncall); return false; }
        if (nval < 1 || (uint64_t) nval > c.left() / sizeof(float)) {
            err = where + " ('" + ename + "'): " + std::to_string(nval) + " values but " + std::to_string(c.left()) +
                  " bytes left";
            return false;
        }
        imatrix_entry en;
        en.ncall = ncall;
        en.sums.resize((size_t) nval);
        memcpy(en.sums.data(), data + c.pos, (size_t) nval * sizeof(float));
        c.pos += (size_t) nval * sizeof(float);
        for (size_t k = 0; k < en.sums.size(); ++k) {
            if (!std::isfinite(en.sums[k]) || en.sums[k] < 0) {
                err = where + " ('" + ename + "'): value " + std::to_string(k) + " is not a finite non-negative number";
                return false;
            }
        }
        en.counts = {(double) ncall};
        if (!out.entries.emplace(ename, std::move(en)).second) {
            err = where + ": entry '" + ename + "' appears twice";
            return false;
        }
    }
    // optional trailer: chunk count, dataset name
    if (c.left() > 0) {
        int32_t n_chunks = 0, len = 0;
        if (!c.i32(n_chunks) || n_chunks < 0) { err = head + ": damaged trailer (chunk count)"; return false; }
        out.chunk_count = n_chunks;
        if (c.left() > 0) {
            if (!c.i32(len) || len < 0 || (size_t) len != c.left()) {
                err = head + ": damaged trailer (dataset name length " + std::to_string(len) + ", " +
                      std::to_string(c.left()) + " bytes left)";
                return false;
            }
            if (len > 0) out.datasets.emplace_back((const char *) data + c.pos, (size_t) len);
            c.pos += (size_t) len;
        }
    }
    return true;
}

bool read_imatrix(const std::string & path, imatrix_file & out, std::string & err) {
    out = imatrix_file();
    out.path = path;
    {
        std::ifstream in(path, std::ios::binary);
        char magic[4] = {0, 0, 0, 0};
        if (in) in.read(magic, 4);
        if (in && memcmp(magic, "GGUF", 4) == 0) {
            return read_gguf_imatrix(path, out, err);
        }
    }
    std::vector<uint8_t> bytes;
    if (!read_file_bytes(path, bytes, err)) return false;
    return parse_imatrix_legacy(bytes.data(), bytes.size(), path, out, err);
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

bool import_imatrix(const std::vector<imatrix_input> & inputs, const gguf::model * model, archive & out,
                    std::vector<imatrix_domain_report> & reports, std::string & err) {
    reports.clear();
    if (inputs.empty()) {
        err = "no imatrix files";
        return false;
    }
    std::vector<imatrix_file> files(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (!read_imatrix(inputs[i].path, files[i], err)) return false;
    }

    // The fingerprint: the model's, or inferred from the first file.
    fingerprint fp;
    if (model) {
        if (!model_fingerprint(*model, fp, err)) return false;
    } else {
        const imatrix_file & f = files[0];
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
    }
    out = make_archive(fp, metric_set::energy);
    bool any_legacy = false;
    const std::set<int> moe(fp.moe_layers.begin(), fp.moe_layers.end());

    for (size_t i = 0; i < files.size(); ++i) {
        const imatrix_file & f = files[i];
        const std::string head = "imatrix '" + f.path + "'";
        any_legacy = any_legacy || f.legacy;
        // Belongs to this model?
        if (model) {
            for (const auto & kv : f.entries) {
                const gguf::tensor_info * t = model->find_tensor(kv.first);
                if (!t) {
                    err = head + " is from another model: entry '" + kv.first + "' names no tensor of '" +
                          model->shards[0].path + "'";
                    return false;
                }
                const bool exps = is_expert_weight(kv.first) && t->n_dims >= 3;
                const int64_t n_mat = exps ? t->ne[2] : 1;
                const uint64_t nvals = kv.second.sums.size();
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
        }
        // Find the down_exps entry of every MoE layer.
        for (const auto & kv : f.entries) {
            const int l = down_exps_layer(kv.first);
            if (l >= 0 && !moe.count(l)) {
                err = head + ": entry '" + kv.first + "' is for layer " + std::to_string(l) +
                      ", not an MoE layer of the " + (model ? "model" : "first file");
                return false;
            }
        }
        domain_stats & d = out.find_domain(inputs[i].domain) ? *out.find_domain(inputs[i].domain)
                                                              : out.add_domain(inputs[i].domain);
        imatrix_domain_report rep;
        rep.domain = inputs[i].domain;
        rep.path   = f.path;
        rep.legacy = f.legacy;
        double first_layer_count = -1;
        for (int l : fp.moe_layers) {
            const std::string name = "blk." + std::to_string(l) + ".ffn_down_exps.weight";
            auto it = f.entries.find(name);
            if (it == f.entries.end()) {
                err = head + " has no entry '" + name + "' (MoE layer " + std::to_string(l) + ")" +
                      (f.legacy ? ": legacy files leave out tensors that saw no data" : "");
                return false;
            }
            const imatrix_entry & en = it->second;
            const int64_t E = fp.n_expert;
            if (en.sums.size() % (size_t) E != 0 || (!f.legacy && en.n_mat != E)) {
                err = head + " entry '" + name + "': " + std::to_string(en.sums.size()) + " values in " +
                      std::to_string(f.legacy ? 0 : en.n_mat) + " matrices do not split into " + std::to_string(E) +
                      " experts: the file is from another model";
                return false;
            }
            const size_t nv = en.sums.size() / (size_t) E;
            std::vector<int> unused;
            double layer_count = 0;
            for (int64_t e = 0; e < E; ++e) {
                const float * s = en.sums.data() + (size_t) e * nv;
                double energy = 0;
                for (size_t j = 0; j < nv; ++j) energy += s[j];
                double cnt;
                if (f.legacy) {
                    bool placeholder = en.ncall > 0;
                    for (size_t j = 0; j < nv && placeholder; ++j) placeholder = s[j] == (float) en.ncall;
                    cnt = (placeholder || en.ncall == 0) ? 0 : (double) en.ncall;
                    if (cnt == 0) energy = 0;
                } else {
                    cnt = en.counts[(size_t) e];
                    if (cnt == 0 && energy != 0) {
                        err = head + " entry '" + name + "': expert " + std::to_string(e) +
                              " has no count but a non-zero sum";
                        return false;
                    }
                }
                const size_t c = out.index(l, (int) e);
                d.count[c] += cnt;
                d.energy_sum[c] += energy;
                layer_count += cnt;
                if (cnt == 0) unused.push_back((int) e);
            }
            if (first_layer_count < 0) first_layer_count = layer_count;
            if (!unused.empty()) {
                rep.n_unused += unused.size();
                rep.unused.emplace_back(l, std::move(unused));
            }
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
        reports.push_back(std::move(rep));
    }

    out.provenance.set_string(k_key_tool, "reap imatrix");
    std::vector<std::string> names;
    for (const auto & f : files) {
        names.push_back(util::base_name(f.path));
    }
    out.provenance.set_string_array("reap.saliency.imatrix.files", names);
    if (any_legacy) out.provenance.set_bool("reap.saliency.imatrix.legacy_counts", true);
    return validate(out, err);
}

}  // namespace reap::saliency

// The slicer of prune.h: turns (source model, plan) into an output_spec whose
// tensors are byte pieces of the source files, in plan order, for
// gguf::write_output to stream. Also SHA256SUMS maintenance for the outputs.
#include "prune/prune.h"

#include "util/file.h"
#include "util/sha256.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace reap::prune {

bool make_pruned_spec(const gguf::model & m, const moe::layout & lay, const plan & p, const prune_options & opts,
                      gguf::output_spec & out, std::string & err) {
    int64_t n_layer = 0;
    if (!m.kvs.get_i64(moe::kv_key(lay.arch, "block_count"), n_layer, err)) return false;
    if (!validate_plan(p, facts_of(lay, n_layer), err)) return false;
    gguf::output_spec spec;
    if (!moe::pruned_header(m, lay, p.n_keep, opts, spec, err)) return false;
    // the header leaves the sliced tensors without data: their bytes are the kept experts', in plan order
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const gguf::tensor_info & t = m.tensors[i];
        const moe::tensor_role & role = lay.roles[i];
        if (role.slice == moe::slice_kind::none) continue;
        const std::string who = "tensor '" + t.name + "'";
        const plan_layer * pl = p.find_layer(role.layer);
        if (!pl) {
            err = who + " carries the expert axis but its layer " + std::to_string(role.layer) + " is not in the plan";
            return false;
        }
        gguf::output_tensor & o = spec.tensors[i];
        const std::string & path = m.path_of(t);
        for (int64_t e : pl->keep) {
            uint64_t off = 0, size = 0;
            if (!moe::expert_range(role, lay.n_expert, e, off, size)) {
                err = who + ": no byte range for expert " + std::to_string(e);
                return false;
            }
            if (size == 0) continue;
            gguf::data_piece piece{path, t.file_offset + off, size};
            if (!o.pieces.empty() && o.pieces.back().offset + o.pieces.back().length == piece.offset) {
                o.pieces.back().length += size;   // consecutive experts: one run
            } else {
                o.pieces.push_back(std::move(piece));
            }
        }
    }
    out = std::move(spec);
    return true;
}

bool make_pruned_spec(const gguf::model & m, const plan & p, const prune_options & opts, gguf::output_spec & out,
                      std::string & err) {
    moe::layout lay;
    if (!model_layout(m, lay, err)) return false;
    return make_pruned_spec(m, lay, p, opts, out, err);
}

// ---- SHA256SUMS ----------------------------------------------------------------

static std::string dir_of(const std::string & path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

static std::string base_of(const std::string & path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string sums_path_for(const std::string & path) { return dir_of(path) + "SHA256SUMS"; }

bool read_sha256sums(const std::string & sums_path, std::vector<std::pair<std::string, std::string>> & entries,
                     std::string & err) {
    entries.clear();
    FILE * f = fopen(sums_path.c_str(), "rb");
    if (!f) {
        err = sums_path + ": cannot open: " + strerror(errno);
        return false;
    }
    std::string text;
    char buf[1 << 14];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0 && text.size() < (64u << 20)) text.append(buf, n);
    fclose(f);
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        // "<64 hex>  name" (text mode) or "<64 hex> *name" (binary mode)
        bool ok = line.size() > 66 && (line[64] == ' ') && (line[65] == ' ' || line[65] == '*');
        for (size_t i = 0; ok && i < 64; ++i) ok = isxdigit((unsigned char) line[i]) != 0;
        if (!ok) {
            err = sums_path + ":" + std::to_string(line_no) + ": not a sha256sum line";
            return false;
        }
        std::string hex = line.substr(0, 64);
        for (char & c : hex) c = char(tolower((unsigned char) c));
        entries.emplace_back(line.substr(66), hex);
    }
    return true;
}

bool update_sha256sums(const std::vector<std::string> & files, const std::string & sums_path, std::string & err) {
    const std::string dir = dir_of(sums_path);
    std::vector<std::pair<std::string, std::string>> entries;
    struct stat st;
    if (::stat(sums_path.c_str(), &st) == 0) {
        std::string e2;
        if (!read_sha256sums(sums_path, entries, e2)) entries.clear();   // unreadable: replaced
    }
    for (const std::string & f : files) {
        std::string hex;
        if (!util::sha256_file(f, hex, err)) return false;
        const std::string name = dir_of(f) == dir ? base_of(f) : f;
        bool replaced = false;
        for (auto & e : entries) {
            if (e.first == name) {
                e.second = hex;
                replaced = true;
            }
        }
        if (!replaced) entries.emplace_back(name, hex);
    }
    std::string text;
    for (const auto & e : entries) text += e.second + "  " + e.first + "\n";
    const std::string tmp = sums_path + ".tmp." + std::to_string(::getpid());
    const util::write_status ws = util::write_file_synced(tmp, text);
    if (ws == util::write_status::cannot_create) {
        err = tmp + ": cannot create: " + strerror(errno);
        return false;
    }
    if (ws != util::write_status::ok || ::rename(tmp.c_str(), sums_path.c_str()) != 0) {
        err = sums_path + ": cannot write: " + strerror(errno);
        ::unlink(tmp.c_str());
        return false;
    }
    return true;
}

} // namespace reap::prune

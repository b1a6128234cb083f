// The header and exact size of a pruned model (see pruned.h).
#include "moe/pruned.h"
#include "moe/width.h"

#include <charconv>

namespace reap::moe {

namespace {

// A KV holding integer `v` in the value type of `like` (a scalar integer KV):
// keeping the source's type keeps an identity plan byte-identical and readers
// that insist on a width (llama.cpp reads u32) happy.
bool int_kv_like(const gguf::kv & like, int64_t v, gguf::kv & out, std::string & err) {
    out = gguf::kv{};
    out.key = like.key;
    out.type = like.type;
    int nbytes = 0;
    bool is_signed = false;
    switch (like.type) {
        case gguf::value_type::U8: nbytes = 1; break;
        case gguf::value_type::I8: nbytes = 1; is_signed = true; break;
        case gguf::value_type::U16: nbytes = 2; break;
        case gguf::value_type::I16: nbytes = 2; is_signed = true; break;
        case gguf::value_type::U32: nbytes = 4; break;
        case gguf::value_type::I32: nbytes = 4; is_signed = true; break;
        case gguf::value_type::U64: nbytes = 8; break;
        case gguf::value_type::I64: nbytes = 8; is_signed = true; break;
        default:
            err = "KV '" + like.key + "' has type " + like.type_string() + ", an integer was expected";
            return false;
    }
    const int bits = nbytes * 8;
    const bool fits = v >= 0 && (bits == 64 || (is_signed ? v < (int64_t(1) << (bits - 1)) : v < (int64_t(1) << bits)));
    if (!fits) {
        err = "KV '" + like.key + "': " + std::to_string(v) + " does not fit its type " + like.type_string();
        return false;
    }
    out.raw.resize(size_t(nbytes));
    for (int i = 0; i < nbytes; ++i) out.raw[size_t(i)] = uint8_t(uint64_t(v) >> (8 * i));
    return true;
}

} // namespace

bool set_integer_kv(gguf::kv_store & kvs, const std::string & key, int64_t v, std::string & err) {
    const gguf::kv * e = kvs.find(key);
    if (!e) {
        err = "KV '" + key + "' missing";
        return false;
    }
    gguf::kv repl;
    if (!int_kv_like(*e, v, repl, err)) return false;
    kvs.set(repl);
    return true;
}

bool set_expert_count(gguf::kv_store & kvs, const std::string & arch, int64_t n_keep, std::string & err) {
    return set_integer_kv(kvs, kv_key(arch, "expert_count"), n_keep, err);
}

std::string source_expert_ids_key(int layer) { return k_key_source_expert_ids + std::to_string(layer); }

bool read_kept_ids(const gguf::kv_store & kvs, int64_t n_layer, uint64_t n_source, uint64_t n_keep,
                   std::map<int64_t, std::vector<int64_t>> & out, std::string & err) {
    out.clear();
    const size_t prefix = std::char_traits<char>::length(k_key_source_expert_ids);
    for (const gguf::kv & e : kvs.entries) {
        if (e.key.compare(0, prefix, k_key_source_expert_ids) != 0) continue;
        const std::string suffix = e.key.substr(prefix);
        int64_t layer = -1;
        const auto [end, ec] = std::from_chars(suffix.data(), suffix.data() + suffix.size(), layer);
        if (suffix.empty() || ec != std::errc() || end != suffix.data() + suffix.size() || layer < 0 || layer >= n_layer) {
            err = "KV '" + e.key + "': not a block of the model's " + std::to_string(n_layer);
            return false;
        }
        std::vector<int64_t> ids;
        if (!kvs.get_i64_array(e.key, ids, err)) return false;
        std::vector<bool> seen((size_t) n_source, false);
        for (int64_t id : ids) {
            if (id < 0 || (uint64_t) id >= n_source || seen[(size_t) id]) {
                err = "KV '" + e.key + "': expert id " + std::to_string(id) + " is outside 0.." +
                      std::to_string(n_source - 1) + " or repeated";
                return false;
            }
            seen[(size_t) id] = true;
        }
        if (ids.size() != n_keep) {
            err = "KV '" + e.key + "' lists " + std::to_string(ids.size()) + " experts, the file has " + std::to_string(n_keep);
            return false;
        }
        out[layer] = std::move(ids);
    }
    return true;
}

bool pruned_header(const gguf::model & m, const layout & lay, int64_t n_keep, const stamp_options & stamp,
                   gguf::output_spec & out, std::string & err) {
    if (n_keep < 1 || n_keep > lay.n_expert) {
        err = "keeping " + std::to_string(n_keep) + " experts is outside 1.." + std::to_string(lay.n_expert);
        return false;
    }
    if (lay.roles.size() != m.tensors.size()) {
        err = "layout has " + std::to_string(lay.roles.size()) + " roles for " + std::to_string(m.tensors.size()) + " tensors";
        return false;
    }
    gguf::output_spec spec = gguf::spec_from_model(m);
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const gguf::tensor_info & t = m.tensors[i];
        const tensor_role & role = lay.roles[i];
        if (role.slice == slice_kind::none) continue;
        if (role.expert_dim < 0 || role.expert_dim >= int(t.n_dims) || t.ne[role.expert_dim] != lay.n_expert ||
            role.expert_bytes * uint64_t(lay.n_expert) != t.nbytes) {
            err = "tensor '" + t.name + "' " + t.shape_string() + ": expert axis " + std::to_string(role.expert_dim) +
                  " does not hold " + std::to_string(lay.n_expert) + " experts of equal size";
            return false;
        }
        gguf::output_tensor & o = spec.tensors[i];
        o.ne[role.expert_dim] = n_keep;
        o.pieces.clear();
    }
    if (!set_expert_count(spec.kvs, lay.arch, n_keep, err)) return false;
    if (stamp.stamp) {
        if (stamp.plan_sha256.size() != 64) {
            err = "prune: the plan's sha256 is required for the provenance stamp";
            return false;
        }
        spec.kvs.set_string(k_key_plan_sha256, stamp.plan_sha256);
        spec.kvs.set_u32(k_key_source_expert_count, uint32_t(lay.n_expert));
        if (!stamp.version.empty()) spec.kvs.set_string(k_key_version, stamp.version);
        if (!stamp.other_model.empty()) spec.kvs.set_string(k_key_plan_other_model, stamp.other_model);
        // the kept ids' places: the slicer (prune::make_pruned_spec) fills in the plan's ids
        std::vector<int32_t> ids((size_t) n_keep);
        for (int64_t e = 0; e < n_keep; ++e) ids[(size_t) e] = (int32_t) e;
        for (int layer : lay.moe_layers) spec.kvs.set_i32_array(source_expert_ids_key(layer), ids);
    }
    out = std::move(spec);
    return true;
}

bool width_kvs(const gguf::model & m, const layout & lay, int64_t k, gguf::kv_store & kvs, std::string & err) {
    if (!set_integer_kv(kvs, expert_width_key(lay.arch), k, err)) return false;
    expert_width w;
    if (!expert_width_of(m, lay, w, err)) return false;
    if (w.shared_width == 0) return true;
    const std::string why = shared_width_refusal(w.shared_width, w.n_ff, 1, k);
    if (!why.empty()) {
        err = why;
        return false;
    }
    return set_integer_kv(kvs, expert_shared_count_key(lay.arch), w.shared_width / k, err);
}

bool width_header(const gguf::model & m, const layout & lay, const width_cut & w, bool stamp, gguf::output_spec & spec,
                  std::string & err) {
    if (w.keep < 1 || w.keep > w.n_ff) {
        err = "width " + std::to_string(w.keep) + " out of range [1, " + std::to_string(w.n_ff) + "]";
        return false;
    }
    if (spec.tensors.size() != m.tensors.size()) {
        err = "the pruned header has " + std::to_string(spec.tensors.size()) + " tensors, the model " + std::to_string(m.tensors.size());
        return false;
    }
    const bool shared = width_cuts_shared(m, lay);
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const gguf::tensor_info & t = m.tensors[i];
        const bool cols = width_cuts_columns(t.name, shared);
        if (!cols && !width_keeps_rows(t.name, shared)) continue;
        // down: [n_ff, n_embd, n_expert]; gate/up: [n_embd, n_ff, n_expert]; their biases [n_ff, n_expert]
        const int dim = width_channel_dim(t.name);
        if (t.ne[dim] != w.n_ff) {
            err = "tensor '" + t.name + "' " + t.shape_string() + " is not " + std::to_string(w.n_ff) + " channels wide";
            return false;
        }
        gguf::output_tensor & o = spec.tensors[i];
        o.ne[dim] = w.keep;
        if (cols && w.down_type) o.type = *w.down_type;
    }
    if (!width_kvs(m, lay, w.keep, spec.kvs, err)) return false;
    if (stamp) spec.kvs.set_u32(k_key_width_source_length, uint32_t(w.n_ff));
    return true;
}

bool pruned_files(const gguf::model & m, const layout & lay, int64_t n_keep, const stamp_options & stamp,
                  const gguf::write_options & wo, const std::string & target, std::vector<gguf::shard_layout> & shards,
                  std::string & err, const width_cut & width) {
    gguf::output_spec spec;
    if (!pruned_header(m, lay, n_keep, stamp, spec, err)) return false;
    if (width.keep > 0 && !width_header(m, lay, width, stamp.stamp, spec, err)) return false;
    // Only the layout is computed: one piece of the kept length stands for the kept experts
    // (and for a shared expert cut in width).
    const bool shared = width.keep > 0 && width_cuts_shared(m, lay);
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
        const tensor_role & role = lay.roles[i];
        const gguf::tensor_info & t = m.tensors[i];
        const bool cut = width.keep > 0 && (width_keeps_rows(t.name, shared) || width_cuts_columns(t.name, shared));
        if (role.slice == slice_kind::none && !cut) continue;
        spec.tensors[i].pieces.clear();
        const gguf::output_tensor & o = spec.tensors[i];
        uint64_t kept = 0;
        if (!gguf::tensor_nbytes(o.type, o.n_dims, o.ne, kept, err, "output tensor '" + o.name + "'")) return false;
        if (kept > 0) spec.tensors[i].pieces.push_back({m.path_of(t), t.file_offset, kept});
    }
    return gguf::layout_output(spec, wo, target, shards, err);
}

bool pruned_bytes(const gguf::model & m, const layout & lay, int64_t n_keep, const stamp_options & stamp,
                  const gguf::write_options & wo, uint64_t & bytes, uint32_t & n_files, std::string & err,
                  const width_cut & width) {
    std::vector<gguf::shard_layout> shards;
    if (!pruned_files(m, lay, n_keep, stamp, wo, "reap-pruned-size.gguf", shards, err, width)) return false;
    bytes = 0;
    for (const auto & sh : shards) bytes += sh.file_bytes;
    n_files = uint32_t(shards.size());
    return true;
}

} // namespace reap::moe

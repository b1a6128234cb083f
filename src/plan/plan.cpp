// The plan format of plan.h: hostile-input parsing (every field type-checked),
// writing through temp + fsync + rename, and the plan's model identity
// (validation against a model: plan_validate.cpp).
#include "plan/plan.h"
#include "plan/plan_internal.h"

#include "moe/identity.h"
#include "moe/layout_gguf.h"
#include "moe/width.h"
#include "util/output_rule.h"
#include "util/file.h"
#include "util/json.h"
#include "util/json_fields.h"
#include "util/path.h"
#include "util/sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace reap {

using nlohmann::json;
using util::json_type_name;

namespace {

// Largest counts we accept from a plan: far above any real model, small
// enough that nothing downstream overflows.
constexpr int64_t k_max_layers  = 1 << 20;
constexpr int64_t k_max_experts = 1 << 24;
constexpr int64_t k_max_width   = 1 << 24;   // an expert's intermediate channels
constexpr uint64_t k_max_plan_bytes = 256ull << 20;

// An integer field: a JSON integer (not a float, not a string) in [lo, hi].
bool get_int(const json & v, const std::string & what, int64_t lo, int64_t hi, int64_t & out, std::string & err) {
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > uint64_t(hi)) {
            err = what + " = " + std::to_string(u) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
            return false;
        }
        out = int64_t(u);
    } else if (v.is_number_integer()) {
        out = v.get<int64_t>();
    } else {
        err = what + " must be an integer, not " + json_type_name(v);
        return false;
    }
    if (out < lo || out > hi) {
        err = what + " = " + std::to_string(out) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return false;
    }
    return true;
}

const json * field(const json & obj, const char * key, const std::string & where, std::string & err) {
    auto it = obj.find(key);
    if (it == obj.end()) {
        err = where + ": missing field \"" + key + "\"";
        return nullptr;
    }
    return &*it;
}


} // namespace

bool check_keep_id(const std::string & who, size_t k, int64_t e, int64_t n_expert, std::vector<uint8_t> & seen, std::string & err) {
    if (e < 0 || e >= n_expert) {
        err = who + ": expert " + std::to_string(e) + " (keep[" + std::to_string(k) + "]) out of range [0, " +
              std::to_string(n_expert) + ")";
        return false;
    }
    if (seen[size_t(e)]) {
        err = who + ": expert " + std::to_string(e) + " listed twice";
        return false;
    }
    seen[size_t(e)] = 1;
    return true;
}

const plan_layer * plan::find_layer(int layer) const {
    auto it = std::lower_bound(layers.begin(), layers.end(), layer,
                               [](const plan_layer & l, int v) { return l.layer < v; });
    if (it != layers.end() && it->layer == layer) return &*it;
    for (const plan_layer & l : layers) {   // unsorted plans built in code
        if (l.layer == layer) return &l;
    }
    return nullptr;
}

namespace {

// "format" and "version" of the document.
bool parse_format(const json & doc, const std::string & who, int64_t & version, std::string & err) {
    const json * v;
    if (!(v = field(doc, "format", who, err))) return false;
    if (!v->is_string() || v->get<std::string>() != k_plan_format) {
        err = who + ": \"format\" must be \"" + k_plan_format + "\", got " + reap::util::json_text(*v);
        return false;
    }
    if (!(v = field(doc, "version", who, err))) return false;
    if (!get_int(*v, who + ": \"version\"", 0, INT32_MAX, version, err)) return false;
    if (version < k_plan_version_experts || version > k_plan_version) {
        err = who + ": unsupported version " + std::to_string(version) + " (this reap reads versions " +
              std::to_string(k_plan_version_experts) + " to " + std::to_string(k_plan_version) + ")";
        return false;
    }
    return true;
}

// The "model" object: arch, counts and the optional header hash.
bool parse_model(const json & doc, const std::string & who, plan & p, std::string & err) {
    const json * model = field(doc, "model", who, err);
    if (!model) return false;
    if (!model->is_object()) {
        err = who + ": \"model\" must be an object, not " + std::string(json_type_name(*model));
        return false;
    }
    const std::string mwho = who + ": model";
    const json * v;
    if (!(v = field(*model, "arch", mwho, err))) return false;
    if (!v->is_string() || v->get<std::string>().empty()) {
        err = mwho + ".arch must be a non-empty string, got " + reap::util::json_text(*v);
        return false;
    }
    p.arch = v->get<std::string>();
    if (!(v = field(*model, "n_layer", mwho, err))) return false;
    if (!get_int(*v, mwho + ".n_layer", 1, k_max_layers, p.n_layer, err)) return false;
    if (!(v = field(*model, "n_expert", mwho, err))) return false;
    if (!get_int(*v, mwho + ".n_expert", 1, k_max_experts, p.n_expert, err)) return false;
    if (!(v = field(*model, "n_expert_used", mwho, err))) return false;
    if (!get_int(*v, mwho + ".n_expert_used", 1, p.n_expert, p.n_expert_used, err)) return false;
    // optional: older plans lack them
    for (auto [key, dest] : {std::pair<const char *, std::string *>{"header_sha256", &p.model_sha256}, {"router_sha256", &p.router_sha256}}) {
        auto h = model->find(key);
        if (h == model->end()) continue;
        bool ok = h->is_string() && h->get<std::string>().size() == 64;
        if (ok) {
            for (char c : h->get<std::string>()) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
        }
        if (!ok) {
            err = mwho + "." + key + " must be 64 lowercase hex digits, got " + reap::util::json_text(*h);
            return false;
        }
        *dest = h->get<std::string>();
    }
    if (!p.router_sha256.empty()) {   // the identity: router hash and vocabulary size together (0: no token_embd)
        if (!(v = field(*model, "n_vocab", mwho, err))) return false;
        if (!get_int(*v, mwho + ".n_vocab", 0, INT64_MAX, p.n_vocab, err)) return false;
    }
    return true;
}

// Hex digit value, or -1.
int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::string channel_bitmap(const std::vector<int64_t> & channels, int64_t n_ff) {
    static const char digits[] = "0123456789abcdef";
    std::vector<uint8_t> bytes(size_t((n_ff + 7) / 8), 0);
    for (int64_t c : channels) {
        if (c >= 0 && c < n_ff) bytes[size_t(c / 8)] = uint8_t(bytes[size_t(c / 8)] | (1u << (c % 8)));
    }
    std::string s(bytes.size() * 2, '0');
    for (size_t b = 0; b < bytes.size(); ++b) {
        s[2 * b] = digits[bytes[b] >> 4];
        s[2 * b + 1] = digits[bytes[b] & 15];
    }
    return s;
}

bool parse_channel_bitmap(const std::string & s, int64_t n_ff, int64_t K, std::vector<int64_t> & out, std::string & err) {
    const size_t n_bytes = size_t((n_ff + 7) / 8);
    if (s.size() != 2 * n_bytes) {
        err = "has " + std::to_string(s.size()) + " hex digits, " + std::to_string(2 * n_bytes) + " expected (" +
              std::to_string(n_ff) + " channels, 8 per byte)";
        return false;
    }
    out.clear();
    out.reserve(size_t(K));
    for (size_t b = 0; b < n_bytes; ++b) {
        const int hi = hex_digit(s[2 * b]), lo = hex_digit(s[2 * b + 1]);
        if (hi < 0 || lo < 0) {
            err = "has '" + std::string(1, hi < 0 ? s[2 * b] : s[2 * b + 1]) + "' at " + std::to_string(hi < 0 ? 2 * b : 2 * b + 1) +
                  ", not a hex digit";
            return false;
        }
        for (unsigned byte = unsigned(hi * 16 + lo); byte != 0; byte &= byte - 1) {   // the set bits, lowest first
            const int64_t c = int64_t(b) * 8 + __builtin_ctz(byte);
            if (c >= n_ff) {
                err = "sets channel " + std::to_string(c) + ", beyond the " + std::to_string(n_ff) + " channels";
                return false;
            }
            out.push_back(c);
        }
    }
    if (int64_t(out.size()) != K) {
        err = "keeps " + std::to_string(out.size()) + " channels, width.keep is " + std::to_string(K) +
              " (every expert keeps the same width)";
        return false;
    }
    return true;
}

namespace {

// A width plan layer's optional "shared_channel_bitmap" (version 3 and later):
// the K channels of the shared expert cut with the routed ones (llama4), one
// bitmap as channel_bitmaps. Whether the model needs it is validate_plan's.
bool parse_shared_channels(const json & l, const std::string & kwho, int64_t version, const plan & p, plan_layer & pl,
                           std::string & err) {
    auto it = l.find("shared_channel_bitmap");
    if (it == l.end()) return true;
    const std::string swho = kwho + ": shared_channel_bitmap";
    if (version < 3) {
        err = swho + " in a version " + std::to_string(version) + " plan (shared-expert channels are version 3 or later)";
        return false;
    }
    if (!it->is_string()) {
        err = swho + " must be a string, not " + std::string(json_type_name(*it));
        return false;
    }
    if (!parse_channel_bitmap(it->get_ref<const std::string &>(), p.width_n_ff, p.width_keep, pl.shared_channels, err)) {
        err = swho + " " + err;
        return false;
    }
    return true;
}

// A layer's channel lists (width plans only): n_keep of them, each width_keep
// source channels in [0, width_n_ff), ascending without repeats. Version 2
// lists them ("channels": arrays of ids), version 3 and later as bitmaps
// ("channel_bitmaps": hex strings, channel_bitmap()).
bool parse_channels(const json & l, const std::string & kwho, int64_t version, const plan & p, plan_layer & pl,
                    std::string & err) {
    const bool bitmaps = version >= 3;
    const char * name = bitmaps ? "channel_bitmaps" : "channels";
    const char * other = bitmaps ? "channels" : "channel_bitmaps";
    if (l.contains(other) && p.has_width()) {
        err = kwho + ": \"" + other + "\" in a version " + std::to_string(version) + " plan (version " +
              std::to_string(version) + " gives the kept channels as \"" + name + "\")";
        return false;
    }
    auto it = l.find(name);
    if (!p.has_width()) {
        for (const char * f : {"channels", "channel_bitmaps", "shared_channel_bitmap"}) {
            if (l.contains(f)) {
                err = kwho + ": \"" + f + "\" in a plan without \"width\"";
                return false;
            }
        }
        return true;
    }
    if (!parse_shared_channels(l, kwho, version, p, pl, err)) return false;
    if (it == l.end()) {
        err = kwho + ": missing field \"" + name + "\" (the plan cuts width: every kept expert lists its channels)";
        return false;
    }
    if (!it->is_array()) {
        err = kwho + ": \"" + name + "\" must be an array, not " + std::string(json_type_name(*it));
        return false;
    }
    if (int64_t(it->size()) != p.n_keep) {
        err = kwho + ": \"" + name + "\" has " + std::to_string(it->size()) + " " + (bitmaps ? "bitmaps" : "lists") +
              ", n_keep is " + std::to_string(p.n_keep) + " (one per kept expert)";
        return false;
    }
    pl.channels.resize(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
        const json & list = (*it)[i];
        const std::string cwho = kwho + ": " + name + "[" + std::to_string(i) + "] (source expert " + std::to_string(pl.keep[i]) + ")";
        std::vector<int64_t> & out = pl.channels[i];
        if (bitmaps) {
            if (!list.is_string()) {
                err = cwho + " must be a string, not " + std::string(json_type_name(list));
                return false;
            }
            if (!parse_channel_bitmap(list.get_ref<const std::string &>(), p.width_n_ff, p.width_keep, out, err)) {
                err = cwho + " " + err;
                return false;
            }
            continue;
        }
        if (!list.is_array()) {
            err = cwho + " must be an array, not " + std::string(json_type_name(list));
            return false;
        }
        if (int64_t(list.size()) != p.width_keep) {
            err = cwho + " lists " + std::to_string(list.size()) + " channels, width.keep is " + std::to_string(p.width_keep) +
                  " (every expert keeps the same width)";
            return false;
        }
        out.reserve(list.size());
        for (size_t j = 0; j < list.size(); ++j) {
            int64_t c = 0;
            if (!get_int(list[j], cwho + "[" + std::to_string(j) + "]", 0, p.width_n_ff - 1, c, err)) return false;
            if (!out.empty() && c <= out.back()) {
                err = cwho + ": channel " + std::to_string(c) + " after " + std::to_string(out.back()) +
                      (c == out.back() ? " (listed twice)" : " (channels must be in ascending order)");
                return false;
            }
            out.push_back(c);
        }
    }
    return true;
}

// The optional "width" object: {"n_ff": N, "keep": K}, 1 <= K <= N; version 2 only.
bool parse_width(const json & doc, const std::string & who, int64_t version, plan & p, std::string & err) {
    auto it = doc.find("width");
    if (it == doc.end()) return true;
    if (version < 2) {
        err = who + ": \"width\" in a version " + std::to_string(version) + " plan (width plans are version 2 or later)";
        return false;
    }
    if (!it->is_object()) {
        err = who + ": \"width\" must be an object, not " + std::string(json_type_name(*it));
        return false;
    }
    const json * v;
    if (!(v = field(*it, "n_ff", who + ": width", err))) return false;
    if (!get_int(*v, who + ": width.n_ff", 1, k_max_width, p.width_n_ff, err)) return false;
    if (!(v = field(*it, "keep", who + ": width", err))) return false;
    if (!get_int(*v, who + ": width.keep", 1, p.width_n_ff, p.width_keep, err)) return false;
    return true;
}

// layers[i]: its block index (ascending, after the layers before it) and
// n_keep expert ids, each in range and listed once (`seen` is scratch).
bool parse_layer(const json & l, const std::string & who, size_t i, int64_t version, const plan & p,
                 std::vector<uint8_t> & seen, plan_layer & pl, std::string & err) {
    const std::string lwho = who + ": layers[" + std::to_string(i) + "]";
    if (!l.is_object()) {
        err = lwho + " must be an object, not " + std::string(json_type_name(l));
        return false;
    }
    const json * v;
    int64_t layer = 0;
    if (!(v = field(l, "layer", lwho, err))) return false;
    if (!get_int(*v, lwho + ".layer", 0, p.n_layer - 1, layer, err)) return false;
    pl.layer = int(layer);
    const std::string kwho = who + ": layer " + std::to_string(layer);
    if (!p.layers.empty() && p.layers.back().layer >= pl.layer) {
        err = p.layers.back().layer == pl.layer
                  ? kwho + " is listed twice"
                  : kwho + " comes after layer " + std::to_string(p.layers.back().layer) +
                        " (layers must be in ascending order)";
        return false;
    }
    if (!(v = field(l, "keep", kwho, err))) return false;
    if (!v->is_array()) {
        err = kwho + ": \"keep\" must be an array, not " + std::string(json_type_name(*v));
        return false;
    }
    if (int64_t(v->size()) != p.n_keep) {
        err = kwho + ": keeps " + std::to_string(v->size()) + " experts, n_keep is " + std::to_string(p.n_keep) +
              " (every MoE layer keeps the same count)";
        return false;
    }
    seen.assign(size_t(p.n_expert), 0);
    pl.keep.reserve(v->size());
    for (size_t k = 0; k < v->size(); ++k) {
        int64_t e = 0;
        if (!get_int((*v)[k], kwho + ": keep[" + std::to_string(k) + "]", INT64_MIN, INT64_MAX, e, err)) return false;
        if (!check_keep_id(kwho, k, e, p.n_expert, seen, err)) return false;
        pl.keep.push_back(e);
    }
    return parse_channels(l, kwho, version, p, pl, err);
}

// The "layers" array, every entry through parse_layer.
bool parse_layers(const json & doc, const std::string & who, int64_t version, plan & p, std::string & err) {
    const json * layers = field(doc, "layers", who, err);
    if (!layers) return false;
    if (!layers->is_array()) {
        err = who + ": \"layers\" must be an array, not " + std::string(json_type_name(*layers));
        return false;
    }
    if (layers->empty()) {
        err = who + ": \"layers\" is empty (a plan lists every MoE layer)";
        return false;
    }
    std::vector<uint8_t> seen;
    for (size_t i = 0; i < layers->size(); ++i) {
        plan_layer pl;
        if (!parse_layer((*layers)[i], who, i, version, p, seen, pl, err)) return false;
        p.layers.push_back(std::move(pl));
    }
    return true;
}

}  // namespace

bool parse_plan(const std::string & text, const std::string & name, plan & out, std::string & err) {
    const std::string who = "plan " + name;
    json doc;
    if (!util::parse_json_text(text, who, doc, err)) return false;   // a number too large for a double included
    if (!doc.is_object()) {
        err = who + ": top level must be an object, not " + std::string(json_type_name(doc));
        return false;
    }
    plan p;
    int64_t version = 0;
    if (!parse_format(doc, who, version, err) || !parse_model(doc, who, p, err)) return false;
    const json * v;
    if (!(v = field(doc, "n_keep", who, err))) return false;
    if (!get_int(*v, who + ": \"n_keep\"", 1, p.n_expert, p.n_keep, err)) return false;
    if (!parse_width(doc, who, version, p, err)) return false;
    if (!parse_layers(doc, who, version, p, err)) return false;

    auto prov = doc.find("provenance");
    if (prov != doc.end()) {
        if (!prov->is_object()) {
            err = who + ": \"provenance\" must be an object, not " + std::string(json_type_name(*prov));
            return false;
        }
        p.provenance = *prov;
    }
    out = std::move(p);
    return true;
}

std::string model_header_sha256(const gguf::model & m) {
    util::sha256_stream h;
    auto put_u64 = [&h](uint64_t v) { h.update(&v, sizeof(v)); };
    auto put_str = [&](const std::string & s) {
        put_u64(s.size());
        h.update(s.data(), s.size());
    };
    // A quantised copy (llama-quantize) or a re-split one is the same model: a
    // plan made on the F16 file prunes its Q4 copy (the byte-splice path), and
    // calibrating on a quant is a plan for the F16. So the keys that splitting
    // and quantising write, the tensor types and the order of keys and tensors
    // (llama-quantize moves output.weight) are left out; another model (another
    // name, fine-tune, arch, shape or key) still differs.
    std::vector<const gguf::kv *> kvs;
    for (const gguf::kv & e : m.kvs.entries) {
        if (util::starts_with(e.key, "split.") || util::starts_with(e.key, "quantize.") ||
            e.key == "general.file_type" || e.key == "general.quantization_version") {
            continue;
        }
        kvs.push_back(&e);
    }
    std::sort(kvs.begin(), kvs.end(), [](const gguf::kv * a, const gguf::kv * b) { return a->key < b->key; });
    for (const gguf::kv * e : kvs) {
        put_str(e->key);
        put_u64((uint64_t) e->type);
        put_u64(e->raw.size());
        h.update(e->raw.data(), e->raw.size());
    }
    std::vector<const gguf::tensor_info *> tensors;
    for (const gguf::tensor_info & t : m.tensors) tensors.push_back(&t);
    std::sort(tensors.begin(), tensors.end(),
              [](const gguf::tensor_info * a, const gguf::tensor_info * b) { return a->name < b->name; });
    for (const gguf::tensor_info * t : tensors) {
        put_str(t->name);
        put_u64(t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; ++d) put_u64((uint64_t) t->ne[d]);
    }
    return h.hex();
}

bool stamp_plan_model(plan & p, const gguf::model & m, std::string & err) {
    moe::model_identity id;
    if (!moe::identity_of(m, id, err)) return false;
    stamp_plan_model(p, m, id);
    return true;
}

void stamp_plan_model(plan & p, const gguf::model & m, const moe::model_identity & id) {
    p.model_sha256 = model_header_sha256(m);
    p.router_sha256 = id.router_sha256;
    p.n_vocab = id.n_vocab;
}

bool plan_model_mismatch(const plan & p, const gguf::model & m, const std::string & plan_name, const std::string & model_name,
                         std::string & mismatch, std::string & warning, std::string & err) {
    warning.clear();
    mismatch.clear();
    if (p.model_sha256.empty() && p.router_sha256.empty()) {
        warning = plan_name + " records no model fingerprint (written by an older reap plan): it cannot be checked to be " +
                  "for " + model_name;
        return true;
    }
    if (!p.model_sha256.empty()) {
        const std::string have = model_header_sha256(m);
        if (have != p.model_sha256) {
            mismatch = plan_name + " was made for another model (header sha256 " + p.model_sha256 + "), " + model_name + " has " + have;
            return true;
        }
    }
    if (p.router_sha256.empty()) {
        warning = plan_name + " records the model's header fingerprint only (written by an older reap plan): its router " +
                  "weights cannot be checked to be " + model_name + "'s";
        return true;
    }
    moe::model_identity have;
    if (!moe::identity_of(m, have, err)) {
        err = model_name + ": " + err;
        return false;
    }
    moe::model_identity want;
    want.arch = p.arch;
    want.n_layer = p.n_layer;
    want.n_expert = p.n_expert;
    want.n_vocab = p.n_vocab;
    want.router_sha256 = p.router_sha256;
    const std::string diff = moe::identity_difference(want, plan_name, have, model_name);
    if (!diff.empty()) mismatch = plan_name + " was made for another model: " + diff;
    return true;
}

bool check_plan_model(const plan & p, const gguf::model & m, bool allow_other, const std::string & plan_name,
                      const std::string & model_name, std::string & warning, bool & other, std::string & err) {
    std::string what;
    if (!plan_model_mismatch(p, m, plan_name, model_name, what, warning, err)) return false;
    other = !what.empty();
    if (what.empty()) return true;
    if (!allow_other) {
        err = what + "; pass --allow-other-model to use it anyway";
        return false;
    }
    warning = what + "; used anyway (--allow-other-model)";
    return true;
}

bool check_plan_model(const plan & p, const gguf::model & m, bool allow_other, const std::string & plan_name,
                      const std::string & model_name, std::string & warning, std::string & err) {
    bool other = false;
    return check_plan_model(p, m, allow_other, plan_name, model_name, warning, other, err);
}

bool read_plan(const std::string & path, plan & out, std::string & err) {
    std::string sha256;
    return read_plan(path, out, sha256, err);
}

bool read_plan(const std::string & path, plan & out, std::string & sha256, std::string & err) {
    const int fd = util::open_input(path, err);   // a FIFO is refused, not waited on
    if (fd < 0) {
        err = "plan " + err;
        return false;
    }
    FILE * f = fdopen(fd, "rb");
    if (!f) {
        ::close(fd);
        err = "plan " + path + ": cannot open: " + strerror(errno);
        return false;
    }
    std::string text;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        text.append(buf, n);
        if (text.size() > k_max_plan_bytes) {
            fclose(f);
            err = "plan " + path + ": larger than " + std::to_string(k_max_plan_bytes >> 20) + " MiB";
            return false;
        }
    }
    const bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        err = "plan " + path + ": read error";
        return false;
    }
    sha256 = util::sha256_bytes(text.data(), text.size());
    return parse_plan(text, path, out, err);
}

json plan_to_json(const plan & p) {
    json doc = json::object();
    doc["format"] = k_plan_format;
    doc["version"] = p.has_width() ? k_plan_version : k_plan_version_experts;
    doc["model"] = {{"arch", p.arch}, {"n_layer", p.n_layer}, {"n_expert", p.n_expert}, {"n_expert_used", p.n_expert_used}};
    if (!p.model_sha256.empty()) doc["model"]["header_sha256"] = p.model_sha256;
    if (!p.router_sha256.empty()) {
        doc["model"]["router_sha256"] = p.router_sha256;
        doc["model"]["n_vocab"] = p.n_vocab;
    }
    doc["n_keep"] = p.n_keep;
    if (p.has_width()) doc["width"] = {{"n_ff", p.width_n_ff}, {"keep", p.width_keep}};
    json layers = json::array();
    for (const plan_layer & l : p.layers) {
        json entry = {{"layer", l.layer}, {"keep", l.keep}};
        if (p.has_width()) {
            json bitmaps = json::array();
            for (const auto & ch : l.channels) bitmaps.push_back(channel_bitmap(ch, p.width_n_ff));
            entry["channel_bitmaps"] = std::move(bitmaps);
            if (!l.shared_channels.empty()) entry["shared_channel_bitmap"] = channel_bitmap(l.shared_channels, p.width_n_ff);
        }
        layers.push_back(std::move(entry));
    }
    doc["layers"] = layers;
    doc["provenance"] = p.provenance.is_object() ? p.provenance : json::object();
    return doc;
}

// nlohmann::json keeps keys sorted; the format reads best in its own order
// with one layer per line, so the document is assembled by hand.
std::string plan_text(const plan & p) {
    const json doc = plan_to_json(p);
    std::string s = "{\n";
    s += "  \"format\": " + reap::util::json_text(doc["format"]) + ",\n";
    s += "  \"version\": " + reap::util::json_text(doc["version"]) + ",\n";
    s += "  \"model\": {\"arch\": " + reap::util::json_text(doc["model"]["arch"]) + ", \"n_layer\": " + reap::util::json_text(doc["model"]["n_layer"]) +
         ", \"n_expert\": " + reap::util::json_text(doc["model"]["n_expert"]) + ", \"n_expert_used\": " +
         reap::util::json_text(doc["model"]["n_expert_used"]) +
         (p.model_sha256.empty() ? std::string() : ", \"header_sha256\": " + reap::util::json_text(doc["model"]["header_sha256"])) +
         (p.router_sha256.empty() ? std::string()
                                  : ", \"router_sha256\": " + reap::util::json_text(doc["model"]["router_sha256"]) +
                                        ", \"n_vocab\": " + reap::util::json_text(doc["model"]["n_vocab"])) +
         "},\n";
    s += "  \"n_keep\": " + reap::util::json_text(doc["n_keep"]) + ",\n";
    if (p.has_width()) {
        s += "  \"width\": {\"n_ff\": " + reap::util::json_text(doc["width"]["n_ff"]) +
             ", \"keep\": " + reap::util::json_text(doc["width"]["keep"]) + "},\n";
    }
    s += "  \"layers\": [\n";
    const json & layers = doc["layers"];
    for (size_t i = 0; i < layers.size(); ++i) {
        s += "    {\"layer\": " + reap::util::json_text(layers[i]["layer"]) + ", \"keep\": " + reap::util::json_text(layers[i]["keep"]);
        if (p.has_width()) {   // one kept expert's channel bitmap per line
            const json & ch = layers[i]["channel_bitmaps"];
            s += ", \"channel_bitmaps\": [\n";
            for (size_t e = 0; e < ch.size(); ++e) {
                s += "      " + reap::util::json_text(ch[e]) + (e + 1 < ch.size() ? ",\n" : "\n");
            }
            s += "    ]";
            if (layers[i].contains("shared_channel_bitmap")) {
                s += ", \"shared_channel_bitmap\": " + reap::util::json_text(layers[i]["shared_channel_bitmap"]);
            }
        }
        s += "}";
        s += i + 1 < layers.size() ? ",\n" : "\n";
    }
    s += "  ],\n";
    std::string prov = reap::util::json_text(doc["provenance"], 2);
    // indent the nested object by two spaces
    std::string ind;
    for (char c : prov) {
        ind += c;
        if (c == '\n') ind += "  ";
    }
    s += "  \"provenance\": " + ind + "\n}\n";
    return s;
}

bool write_plan(const plan & p, const std::string & path, bool force, std::string & err) {
    return util::refuse_existing(path, force, err) && util::write_file_durably(path, plan_text(p), err);
}

bool plan_file_sha256(const std::string & path, std::string & hex, std::string & err) {
    return util::sha256_file(path, hex, err);
}

} // namespace reap

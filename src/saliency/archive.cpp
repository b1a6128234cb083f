// reap::saliency archive: model fingerprint, validation, GGUF read/write and
// domain sums of the saliency archive (see archive.h for the format and the
// contracts; merging is saliency/merge.cpp).
#include "saliency/archive.h"
#include "util/text_escape.h"
#include "moe/identity.h"
#include "moe/layout_gguf.h"
#include "util/json_fields.h"
#include "util/path.h"
#include "util/strings.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

namespace reap::saliency {

namespace {

std::string fmt_num(double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
}

using util::join;
using util::starts_with;

// The keys of the format proper (everything else under reap.saliency. is provenance).
bool is_format_key(const std::string & k) {
    static const std::set<std::string> keys = {
        k_key_version, k_key_domains, k_key_n_tokens, k_key_metrics, k_key_arch, k_key_n_layer,
        k_key_n_expert, k_key_n_expert_used, k_key_moe_layers, k_key_router_sha256, k_key_n_ff,
        k_key_shared_channels,
    };
    return keys.count(k) != 0;
}

}  // namespace

std::string layers_text(const std::vector<int> & layers) {
    std::vector<std::string> s;
    for (int x : layers) s.push_back(std::to_string(x));
    return "[" + join(s, ",") + "]";
}

// ---- metric sets ------------------------------------------------------------------

const char * metric_set_name(metric_set m) {
    switch (m) {
        case metric_set::reap:    return "reap";
        case metric_set::energy:  return "energy";
        case metric_set::weights: return "weights";
    }
    return "?";
}

bool parse_metric_set(const std::string & s, metric_set & out) {
    for (metric_set m : {metric_set::reap, metric_set::energy, metric_set::weights}) {
        if (s == metric_set_name(m)) { out = m; return true; }
    }
    return false;
}

const std::vector<std::string> & metric_names(metric_set m) {
    static const std::vector<std::string> reap = {"count", "gate_sum", "reap_sum", "ean_sum", "max_norm"};
    static const std::vector<std::string> energy = {"count", "energy_sum"};
    static const std::vector<std::string> weights = {"aimer"};
    return m == metric_set::reap ? reap : m == metric_set::energy ? energy : weights;
}

// Weights archives have no channel statistics (a width cut needs tokens).
const std::vector<std::string> & channel_metric_names(metric_set m) {
    static const std::vector<std::string> reap = {"ch_energy", "ch_reap"};
    static const std::vector<std::string> energy = {"ch_energy"};
    static const std::vector<std::string> none;
    return m == metric_set::reap ? reap : m == metric_set::energy ? energy : none;
}

const std::vector<std::string> & shared_metric_names(metric_set m) {
    static const std::vector<std::string> reap = {"sh_energy", "sh_reap"};
    static const std::vector<std::string> energy = {"sh_energy"};
    static const std::vector<std::string> none;
    return m == metric_set::reap ? reap : m == metric_set::energy ? energy : none;
}

std::vector<std::string> archive::expert_metric_names() const {
    std::vector<std::string> v = metric_names(metrics);
    if (has_sq_norms) v.push_back("ean_sq_sum");
    return v;
}

std::vector<double> * metric_data(domain_stats & d, const std::string & name) {
    if (name == "count") return &d.count;
    if (name == "gate_sum") return &d.gate_sum;
    if (name == "reap_sum") return &d.reap_sum;
    if (name == "ean_sum") return &d.ean_sum;
    if (name == "max_norm") return &d.max_norm;
    if (name == "energy_sum") return &d.energy_sum;
    if (name == "ean_sq_sum") return &d.ean_sq_sum;
    if (name == "aimer") return &d.aimer;
    if (name == "ch_energy") return &d.ch_energy;
    if (name == "ch_reap") return &d.ch_reap;
    if (name == "sh_energy") return &d.sh_energy;
    if (name == "sh_reap") return &d.sh_reap;
    return nullptr;
}

const std::vector<double> * metric_data(const domain_stats & d, const std::string & name) {
    return metric_data(const_cast<domain_stats &>(d), name);
}

static const std::vector<std::string> & all_metric_names() {
    static const std::vector<std::string> all = {"count",      "gate_sum",   "reap_sum", "ean_sum",
                                                 "max_norm",   "energy_sum", "ean_sq_sum", "aimer"};
    return all;
}

// ---- fingerprint ----------------------------------------------------------------------

bool model_fingerprint(const gguf::model & m, fingerprint & out, std::string & err) {
    moe::model_identity id;
    if (!moe::identity_of(m, id, err)) return false;
    out = fingerprint_of(id);
    return true;
}

fingerprint fingerprint_of(const moe::model_identity & id) {
    fingerprint fp;
    fp.arch = id.arch;
    fp.n_layer = uint32_t(id.n_layer);
    fp.n_expert = uint32_t(id.n_expert);
    fp.n_expert_used = uint32_t(id.n_expert_used);
    fp.moe_layers = id.moe_layers;
    fp.router_sha256 = id.router_sha256;
    return fp;
}

bool fingerprints_match(const fingerprint & archived, const fingerprint & model, std::string & err) {
    const std::string head = "saliency archive is for another model: ";
    if (archived.arch != model.arch) {
        err = head + "arch '" + archived.arch + "' (archive) vs '" + model.arch + "' (model)";
        return false;
    }
    if (archived.n_layer != model.n_layer) {
        err = head + "n_layer " + std::to_string(archived.n_layer) + " (archive) vs " + std::to_string(model.n_layer) + " (model)";
        return false;
    }
    if (archived.n_expert != model.n_expert) {
        err = head + "n_expert " + std::to_string(archived.n_expert) + " (archive) vs " + std::to_string(model.n_expert) + " (model)";
        return false;
    }
    if (archived.n_expert_used && model.n_expert_used && archived.n_expert_used != model.n_expert_used) {
        err = head + "n_expert_used " + std::to_string(archived.n_expert_used) + " (archive) vs " +
              std::to_string(model.n_expert_used) + " (model)";
        return false;
    }
    if (archived.moe_layers != model.moe_layers) {
        err = head + "MoE layers " + layers_text(archived.moe_layers) + " (archive) vs " + layers_text(model.moe_layers) + " (model)";
        return false;
    }
    if (!archived.router_sha256.empty() && !model.router_sha256.empty() && archived.router_sha256 != model.router_sha256) {
        err = head + "router weights differ (router sha256 " + archived.router_sha256.substr(0, 16) + "... (archive) vs " +
              model.router_sha256.substr(0, 16) + "... (model))";
        return false;
    }
    return true;
}

// ---- the archive ----------------------------------------------------------------------

domain_stats * archive::find_domain(const std::string & name) {
    for (auto & d : domains) {
        if (d.name == name) return &d;
    }
    return nullptr;
}

const domain_stats * archive::find_domain(const std::string & name) const {
    return const_cast<archive *>(this)->find_domain(name);
}

domain_stats & archive::add_domain(const std::string & name) {
    if (domain_stats * d = find_domain(name)) return *d;
    domain_stats d;
    d.name = name;
    for (const auto & m : expert_metric_names()) metric_data(d, m)->assign(n_cells(), 0.0);
    if (n_ff > 0) {
        for (const auto & m : channel_metric_names(metrics)) metric_data(d, m)->assign(n_channel_values(), 0.0);
    }
    if (has_shared_channels) {
        for (const auto & m : shared_metric_names(metrics)) metric_data(d, m)->assign(n_shared_channel_values(), 0.0);
    }
    domains.push_back(std::move(d));
    return domains.back();
}

archive make_archive(const fingerprint & fp, metric_set metrics) {
    archive a;
    a.model = fp;
    a.metrics = metrics;
    return a;
}

namespace {

// The two kinds of channel statistics an archive may hold, for the checks
// they share: the routed experts' ([n_ff, n_expert, n_layer], with n_ff > 0)
// and the shared expert's ([n_ff, n_layer], with has_shared_channels).
struct channel_kind {
    std::vector<std::string>        all;      // every metric of the kind
    const std::vector<std::string> & wanted;  // those of the archive's metric set
    bool                            present;  // the archive declares them
    std::vector<uint64_t>           shape;
    const char *                    dims;
    std::string                     none_declared, declared;   // why none is expected / why one is
    size_t                          n_values;
    std::string                     without, counted;   // for messages: an archive without them; their count
};

channel_kind routed_channels(const archive & a) {
    return {{"ch_energy", "ch_reap"}, channel_metric_names(a.metrics), a.n_ff > 0,
            {a.n_ff, a.model.n_expert, a.model.n_layer}, "(n_ff_exp, n_expert, n_layer)",
            std::string("the archive declares no channel statistics ('") + k_key_n_ff + "' absent or 0)",
            "n_ff_exp " + std::to_string(a.n_ff), a.n_channel_values(),
            "an archive without channel statistics (n_ff_exp 0)", "n_layer x n_expert x n_ff_exp " + std::to_string(a.n_ff)};
}

channel_kind shared_channels(const archive & a) {
    return {{"sh_energy", "sh_reap"}, shared_metric_names(a.metrics), a.has_shared_channels,
            {a.n_ff, a.model.n_layer}, "(n_ff_exp, n_layer)",
            std::string("the archive declares no shared expert channel statistics ('") + k_key_shared_channels + "' absent)",
            std::string("'") + k_key_shared_channels + "' is true", a.n_shared_channel_values(),
            "an archive without the shared expert's channel statistics", "n_layer x n_ff_exp " + std::to_string(a.n_ff)};
}

bool is_wanted(const channel_kind & k, const std::string & metric) {
    return k.present && std::find(k.wanted.begin(), k.wanted.end(), metric) != k.wanted.end();
}

// The vectors of one kind in domain d: present exactly when wanted, each of
// the kind's size (the values are the caller's to check).
bool channel_vectors_fit(const archive & a, const domain_stats & d, const channel_kind & k, const std::string & dn, std::string & err) {
    for (const std::string & m : k.all) {
        const std::vector<double> & v = *metric_data(d, m);
        const bool want = is_wanted(k, m);
        if (!want && !v.empty()) {
            err = dn + " has '" + m + "', which " +
                  (!k.present ? k.without + " cannot have" : "is not part of metric set '" + std::string(metric_set_name(a.metrics)) + "'");
            return false;
        }
        if (want && v.size() != k.n_values) {
            err = dn + ": '" + m + "' has " + std::to_string(v.size()) + " values, expected " + std::to_string(k.n_values) + " (" +
                  k.counted + ")";
            return false;
        }
    }
    return true;
}

} // namespace

// The channel statistics of domain d (archive.h, validate()).
static bool validate_channels(const archive & a, const domain_stats & d, const std::vector<bool> & is_moe, std::string & err) {
    const std::string dn = "saliency archive: domain '" + d.name + "'";
    if ((uint64_t) a.n_cells() * a.n_ff > k_max_channel_values) {
        err = dn + ": n_layer x n_expert x n_ff_exp = " + std::to_string((uint64_t) a.n_cells() * a.n_ff) +
              " channel values is implausibly large";
        return false;
    }
    const channel_kind k = routed_channels(a);
    if (!channel_vectors_fit(a, d, k, dn, err)) return false;
    for (const std::string & m : k.all) {
        const std::vector<double> & v = *metric_data(d, m);
        const bool is_energy = m == "ch_energy";
        for (size_t i = 0; i < v.size(); ++i) {
            const double x = v[i];
            if (x == 0) continue;
            const size_t cell = i / a.n_ff;
            const uint32_t l = (uint32_t) (cell / a.model.n_expert), e = (uint32_t) (cell % a.model.n_expert);
            // the place is spelled out only for an error: per value it was most of a read's time
            auto where = [&] {
                return dn + " '" + m + "' layer " + std::to_string(l) + " expert " + std::to_string(e) + " channel " +
                       std::to_string(i % a.n_ff);
            };
            if (!std::isfinite(x)) { err = where() + ": value is not finite"; return false; }
            if (is_energy && x < 0) { err = where() + ": negative value " + fmt_num(x); return false; }
            if (!is_moe[l]) { err = where() + ": non-zero value " + fmt_num(x) + " in a layer that is not an MoE layer"; return false; }
            if (d.count[cell] == 0) { err = where() + ": value " + fmt_num(x) + " where count is 0"; return false; }
        }
    }
    return true;
}

// The shared expert's channel statistics of domain d (archive.h, validate()).
static bool validate_shared_channels(const archive & a, const domain_stats & d, const std::vector<bool> & is_moe, std::string & err) {
    const std::string dn = "saliency archive: domain '" + d.name + "'";
    const channel_kind k = shared_channels(a);
    if (!channel_vectors_fit(a, d, k, dn, err)) return false;
    for (const std::string & m : k.all) {
        const std::vector<double> & v = *metric_data(d, m);
        for (size_t i = 0; i < v.size(); ++i) {
            const double x = v[i];
            if (x == 0) continue;
            const uint32_t l = (uint32_t) (i / a.n_ff);
            // both are sums of non-negative terms: the shared expert's gate is 1
            const char * wrong = !std::isfinite(x) ? "value is not finite"
                                 : x < 0           ? "negative value "
                                 : !is_moe[l]      ? "non-zero value "
                                                   : nullptr;
            if (!wrong) continue;
            // the place is spelt out only for an error: validate reads every value
            err = dn + " '" + m + "' layer " + std::to_string(l) + " channel " + std::to_string(i % a.n_ff) + ": " + wrong +
                  (std::isfinite(x) ? fmt_num(x) : "") + (std::isfinite(x) && x >= 0 ? " in a layer that is not an MoE layer" : "");
            return false;
        }
    }
    return true;
}

bool validate(const archive & a, std::string & err) {
    const fingerprint & fp = a.model;
    if (a.has_shared_channels && a.n_ff == 0) {
        err = "saliency archive: the shared expert's channel statistics need channel statistics (n_ff_exp 0)";
        return false;
    }
    if (fp.arch.empty()) { err = "saliency archive: model arch is empty"; return false; }
    if (fp.n_layer < 1 || fp.n_expert < 1) {
        err = "saliency archive: n_layer " + std::to_string(fp.n_layer) + " and n_expert " + std::to_string(fp.n_expert) + " must be >= 1";
        return false;
    }
    if ((uint64_t) fp.n_layer * fp.n_expert > (1ull << 28)) {
        err = "saliency archive: n_layer x n_expert = " + std::to_string((uint64_t) fp.n_layer * fp.n_expert) + " is implausibly large";
        return false;
    }
    if (fp.n_expert_used > fp.n_expert) {
        err = "saliency archive: n_expert_used " + std::to_string(fp.n_expert_used) + " > n_expert " + std::to_string(fp.n_expert);
        return false;
    }
    if (fp.moe_layers.empty()) { err = "saliency archive: no MoE layers"; return false; }
    for (size_t i = 0; i < fp.moe_layers.size(); ++i) {
        const int l = fp.moe_layers[i];
        if (l < 0 || (uint32_t) l >= fp.n_layer || (i && l <= fp.moe_layers[i - 1])) {
            err = "saliency archive: MoE layers " + layers_text(fp.moe_layers) + " must be ascending, unique and in [0, " +
                  std::to_string(fp.n_layer) + ")";
            return false;
        }
    }
    if (!fp.router_sha256.empty() && !util::is_sha256_hex(fp.router_sha256)) {
        err = "saliency archive: router_sha256 '" + fp.router_sha256 + "' is not 64 lowercase hex digits";
        return false;
    }
    std::vector<bool> is_moe(fp.n_layer, false);
    for (int l : fp.moe_layers) is_moe[l] = true;

    if (a.metrics == metric_set::weights && (a.domains.size() > 1 || a.n_ff > 0 || a.has_sq_norms)) {
        err = "saliency archive: metric set 'weights' holds one domain of per-expert scores and nothing else";
        return false;
    }
    if (a.has_sq_norms && a.metrics != metric_set::reap) {
        err = std::string("saliency archive: squared output norms belong to metric set 'reap', not '") + metric_set_name(a.metrics) + "'";
        return false;
    }
    std::set<std::string> names;
    const auto wanted = a.expert_metric_names();
    for (const auto & d : a.domains) {
        const std::string dn = "domain '" + d.name + "'";
        if (d.name.empty()) { err = "saliency archive: a domain has an empty name"; return false; }
        if (d.name.size() > k_max_domain_bytes) {
            err = "saliency archive: " + dn + ": name longer than " + std::to_string(k_max_domain_bytes) + " bytes";
            return false;
        }
        if (!util::is_printable_line(d.name)) {
            err = "saliency archive: domain '" + util::terminal_text(d.name) + "': a control character or ill-formed UTF-8 in the name";
            return false;
        }
        if (!names.insert(d.name).second) { err = "saliency archive: " + dn + " appears twice"; return false; }
        if (d.n_tokens < 0) { err = "saliency archive: " + dn + ": n_tokens " + std::to_string(d.n_tokens) + " < 0"; return false; }
        for (const auto & m : all_metric_names()) {
            const std::vector<double> & v = *metric_data(d, m);
            const bool want = std::find(wanted.begin(), wanted.end(), m) != wanted.end();
            if (!want && !v.empty()) {
                err = "saliency archive: " + dn + " has '" + m + "', which is not part of metric set '" + metric_set_name(a.metrics) + "'" +
                      (m == "ean_sq_sum" ? " without squared norms" : "");
                return false;
            }
            if (want && v.size() != a.n_cells()) {
                err = "saliency archive: " + dn + ": '" + m + "' has " + std::to_string(v.size()) + " values, expected " +
                      std::to_string(a.n_cells()) + " (n_layer " + std::to_string(fp.n_layer) + " x n_expert " + std::to_string(fp.n_expert) + ")";
                return false;
            }
        }
        for (const auto & m : wanted) {
            const std::vector<double> & v = *metric_data(d, m);
            const bool nonneg = m != "gate_sum" && m != "reap_sum";
            const bool is_count = m == "count";
            for (size_t i = 0; i < v.size(); ++i) {
                const uint32_t l = (uint32_t) (i / fp.n_expert), e = (uint32_t) (i % fp.n_expert);
                // spelled out only for an error (as in validate_channels)
                auto cell = [&] {
                    return "saliency archive: " + dn + " '" + m + "' layer " + std::to_string(l) + " expert " + std::to_string(e);
                };
                const double x = v[i];
                if (!std::isfinite(x)) { err = cell() + ": value is not finite"; return false; }
                if (nonneg && x < 0) { err = cell() + ": negative value " + fmt_num(x); return false; }
                if (is_count && x != std::floor(x)) { err = cell() + ": count " + fmt_num(x) + " is not an integer"; return false; }
                if (!is_moe[l] && x != 0) { err = cell() + ": non-zero value " + fmt_num(x) + " in a layer that is not an MoE layer"; return false; }
                if (m == "aimer" && x > 1 + 1e-12) {   // mean|w| <= rms(w) (Cauchy-Schwarz)
                    err = cell() + ": AIMER " + fmt_num(x) + " above 1";
                    return false;
                }
                if (!is_count && x != 0 && !d.count.empty() && d.count[i] == 0) {
                    err = cell() + ": value " + fmt_num(x) + " where count is 0";
                    return false;
                }
            }
        }
        if (!validate_channels(a, d, is_moe, err) || !validate_shared_channels(a, d, is_moe, err)) return false;
    }
    return true;
}

bool check_count_invariant(const archive & a, std::string & err, double rel_tol) {
    if (a.model.n_expert_used == 0 || a.metrics == metric_set::weights) return true;   // weights: no tokens
    for (const auto & d : a.domains) {
        if (d.count.size() != a.n_cells()) {
            err = "domain '" + d.name + "': count has the wrong size";
            return false;
        }
        const double expected = (double) d.n_tokens * a.model.n_expert_used;
        for (int l : a.model.moe_layers) {
            double s = 0;
            for (uint32_t e = 0; e < a.model.n_expert; ++e) s += d.count[a.index(l, (int) e)];
            if (std::fabs(s - expected) > rel_tol * expected) {
                err = "domain '" + d.name + "' layer " + std::to_string(l) + ": sum of count = " + fmt_num(s) + ", expected " +
                      fmt_num(expected) + " (" + std::to_string(d.n_tokens) + " tokens x " + std::to_string(a.model.n_expert_used) + ")";
                return false;
            }
        }
    }
    return true;
}

// ---- reading ------------------------------------------------------------------------

namespace {

// general.type and the format version.
bool check_type_and_version(const gguf::kv_store & kv, const std::string & where, uint32_t & version, std::string & err) {
    std::string type, e;
    if (!kv.has(k_key_type)) {
        err = where + "no general.type: not a saliency archive";
        return false;
    }
    if (!kv.get_string(k_key_type, type, e)) { err = where + e; return false; }
    if (type != k_general_type) {
        err = where + "general.type is '" + type + "', expected '" + k_general_type + "' (not a saliency archive)";
        return false;
    }
    if (!kv.get_u32(k_key_version, version, e)) { err = where + e; return false; }
    if (version < k_version_experts || version > k_version_sq_norms) {
        err = where + "format version " + std::to_string(version) + " is not supported (this reap reads versions " +
              std::to_string(k_version_experts) + " to " + std::to_string(k_version_sq_norms) + ")";
        return false;
    }
    return true;
}

// The model fingerprint: arch, counts (bounded) and the MoE layers (in range).
bool read_fingerprint(const gguf::kv_store & kv, const std::string & where, fingerprint & fp, std::string & err) {
    std::string e;
    std::vector<int64_t> layers;
    if (!kv.get_string(k_key_arch, fp.arch, e) || !kv.get_u32(k_key_n_layer, fp.n_layer, e) ||
        !kv.get_u32(k_key_n_expert, fp.n_expert, e) || !kv.get_u32(k_key_n_expert_used, fp.n_expert_used, e) ||
        !kv.get_i64_array(k_key_moe_layers, layers, e) || !kv.get_string_or(k_key_router_sha256, "", fp.router_sha256, e)) {
        err = where + e;
        return false;
    }
    if (fp.n_layer < 1 || fp.n_expert < 1 || (uint64_t) fp.n_layer * fp.n_expert > (1ull << 28)) {
        err = where + "n_layer " + std::to_string(fp.n_layer) + " x n_expert " + std::to_string(fp.n_expert) + " is out of range";
        return false;
    }
    if (layers.size() > fp.n_layer) {
        err = where + "'" + k_key_moe_layers + "' lists " + std::to_string(layers.size()) + " layers, more than n_layer " + std::to_string(fp.n_layer);
        return false;
    }
    for (int64_t l : layers) {
        if (l < 0 || l >= (int64_t) fp.n_layer) {
            err = where + "'" + k_key_moe_layers + "': layer " + std::to_string(l) + " out of range [0, " + std::to_string(fp.n_layer) + ")";
            return false;
        }
        fp.moe_layers.push_back((int) l);
    }
    return true;
}

// Reads channel statistics tensor `t` into `v`: type F64, shape `ne` (the
// dimensions named by `dims` in messages; the rest 1), and a byte count
// that matches, at most k_max_channel_values values.
bool read_f64_tensor(const gguf::model & m, const std::string & where, const gguf::tensor_info & t,
                     const std::vector<uint64_t> & ne, const char * dims, std::vector<double> & v, std::string & err) {
    if (t.type != gguf::tensor_type::F64) {
        err = where + "tensor '" + t.name + "' has type " + gguf::type_name(t.type) + ", expected f64";
        return false;
    }
    bool shape_ok = true;
    uint64_t n = 1;
    std::string expected;
    for (size_t i = 0; i < 4; ++i) {
        const uint64_t want = i < ne.size() ? ne[i] : 1;
        shape_ok = shape_ok && t.ne[i] == (int64_t) want;
        if (i < ne.size()) {
            expected += (i ? ", " : "") + std::to_string(want);
            // saturating: past the bound the count only has to stay past it
            n = want != 0 && n > k_max_channel_values / want ? k_max_channel_values + 1 : n * want;
        }
    }
    if (!shape_ok) {
        err = where + "tensor '" + t.name + "' has shape " + t.shape_string() + ", expected [" + expected + "] " + dims;
        return false;
    }
    if (n > k_max_channel_values || t.nbytes != n * sizeof(double)) {
        err = where + "tensor '" + t.name + "' has " + std::to_string(t.nbytes) + " bytes, expected " +
              std::to_string(n * sizeof(double)) + (n > k_max_channel_values ? " (implausibly many channel values)" : "");
        return false;
    }
    v.resize((size_t) n);   // bounded: the reader checked that the data lie inside the file
    std::string e;
    if (!gguf::read_tensor_bytes(m, t, 0, t.nbytes, v.data(), e)) {
        err = where + e;
        return false;
    }
    return true;
}

// Domain d's channel tensors of one kind: type, shape and size checked; none
// when the archive declares none, and none outside the metric set.
bool read_channel_tensors(const gguf::model & m, const std::string & where, const archive & a, const channel_kind & k,
                          domain_stats & d, std::string & err) {
    for (const std::string & mn : k.all) {
        const std::string tn = d.name + "." + mn;
        const gguf::tensor_info * t = m.find_tensor(tn);
        if (!is_wanted(k, mn)) {
            if (t) {
                err = where + "tensor '" + tn + "' is not expected: " +
                      (!k.present ? k.none_declared : "it does not belong to metric set '" + std::string(metric_set_name(a.metrics)) + "'");
                return false;
            }
            continue;
        }
        if (!t) { err = where + "domain '" + d.name + "': tensor '" + tn + "' is missing (" + k.declared + ")"; return false; }
        if (!read_f64_tensor(m, where, *t, k.shape, k.dims, *metric_data(d, mn), err)) return false;
    }
    return true;
}

// Domain d's tensors of archive a's metric set (`metrics` names it), each
// checked for type, shape and size, and no tensor of the other set.
bool read_domain_tensors(const gguf::model & m, const std::string & where, const archive & a,
                         const std::string & metrics, domain_stats & d, std::string & err) {
    const fingerprint & fp = a.model;
    const std::string & dn = d.name;
    const auto wanted = a.expert_metric_names();
    std::string e;
    for (const auto & mn : wanted) {
        const std::string tn = dn + "." + mn;
        const gguf::tensor_info * t = m.find_tensor(tn);
        if (!t) { err = where + "domain '" + dn + "': tensor '" + tn + "' is missing"; return false; }
        if (t->type != gguf::tensor_type::F64) {
            err = where + "tensor '" + tn + "' has type " + gguf::type_name(t->type) + ", expected f64";
            return false;
        }
        const bool shape_ok = t->ne[0] == (int64_t) fp.n_expert && t->ne[1] == (int64_t) fp.n_layer && t->ne[2] == 1 && t->ne[3] == 1;
        if (!shape_ok) {
            err = where + "tensor '" + tn + "' has shape " + t->shape_string() + ", expected [" + std::to_string(fp.n_expert) +
                  ", " + std::to_string(fp.n_layer) + "] (n_expert, n_layer)";
            return false;
        }
        if (t->nbytes != a.n_cells() * sizeof(double)) {
            err = where + "tensor '" + tn + "' has " + std::to_string(t->nbytes) + " bytes, expected " + std::to_string(a.n_cells() * sizeof(double));
            return false;
        }
        std::vector<double> & v = *metric_data(d, mn);
        v.resize(a.n_cells());   // bounded: the reader checked that the data lie inside the file
        if (!gguf::read_tensor_bytes(m, *t, 0, t->nbytes, v.data(), e)) { err = where + e; return false; }
    }
    // Tensors of this domain that belong to the other metric set are a contradiction.
    for (const auto & mn : all_metric_names()) {
        if (std::find(wanted.begin(), wanted.end(), mn) == wanted.end() && m.find_tensor(dn + "." + mn)) {
            err = where + "tensor '" + dn + "." + mn + "' does not belong to metric set '" + metrics + "'";
            return false;
        }
    }
    return read_channel_tensors(m, where, a, routed_channels(a), d, err) && read_channel_tensors(m, where, a, shared_channels(a), d, err);
}

// The domains (names checked, each listed once) and their tensors into a.domains.
bool read_domains(const gguf::model & m, const std::string & where, const std::string & metrics, archive & a,
                  std::string & err) {
    const gguf::kv_store & kv = m.kvs;
    std::string e;
    std::vector<std::string> names;
    std::vector<int64_t> n_tokens;
    if (!kv.get_string_array(k_key_domains, names, e) || !kv.get_i64_array(k_key_n_tokens, n_tokens, e)) {
        err = where + e;
        return false;
    }
    if (names.size() != n_tokens.size()) {
        err = where + "'" + k_key_domains + "' has " + std::to_string(names.size()) + " domains but '" + k_key_n_tokens + "' has " +
              std::to_string(n_tokens.size()) + " counts";
        return false;
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < names.size(); ++i) {
        const std::string & dn = names[i];
        if (dn.empty() || dn.size() > k_max_domain_bytes) {
            err = where + "domain " + std::to_string(i) + " has an empty name or one longer than " + std::to_string(k_max_domain_bytes) + " bytes";
            return false;
        }
        if (!util::is_printable_line(dn)) {
            err = where + "domain " + std::to_string(i) + " '" + util::terminal_text(dn) +
                  "': a control character or ill-formed UTF-8 in the name";
            return false;
        }
        if (!seen.insert(dn).second) { err = where + "domain '" + dn + "' listed twice"; return false; }
        domain_stats d;
        d.name = dn;
        d.n_tokens = n_tokens[i];
        if (!read_domain_tensors(m, where, a, metrics, d, err)) return false;
        a.domains.push_back(std::move(d));
    }
    return true;
}

}  // namespace

bool read_archive(const std::string & path, archive & out, std::string & err) {
    gguf::model m;
    std::string e;
    if (!gguf::open_model(path, m, e)) {
        err = "cannot read saliency archive: " + e;
        return false;
    }
    const std::string where = "saliency archive " + path + ": ";
    if (m.shards.size() != 1) {
        err = where + "is a split set; archives are single files";
        return false;
    }
    const gguf::kv_store & kv = m.kvs;
    uint32_t version = 0;
    if (!check_type_and_version(kv, where, version, err)) return false;

    archive a;
    std::string metrics;
    if (!kv.get_string(k_key_metrics, metrics, e)) { err = where + e; return false; }
    if (!kv.get_u32_or(k_key_n_ff, 0, a.n_ff, e)) { err = where + e; return false; }
    if (a.n_ff > 0 && version < k_version) {
        err = where + "format version " + std::to_string(version) + " has no channel statistics, but '" + k_key_n_ff +
              "' is " + std::to_string(a.n_ff);
        return false;
    }
    if (kv.has(k_key_shared_channels)) {
        bool shared = false;
        if (!kv.get_bool(k_key_shared_channels, shared, e)) { err = where + e; return false; }
        if (!shared) {
            err = where + "'" + k_key_shared_channels + "' is false: writers leave it out instead";
            return false;
        }
        a.has_shared_channels = true;
    }
    // version 4 says its shared channels by the key alone; 3 always has them, 1 and 2 never
    const bool shared_version_ok = version == k_version_sq_norms || a.has_shared_channels == (version == k_version_shared);
    if (!shared_version_ok || (a.has_shared_channels && a.n_ff == 0)) {
        err = where + "format version " + std::to_string(version) + " with '" + k_key_shared_channels + "' " +
              (a.has_shared_channels ? "true" : "absent") + " and '" + k_key_n_ff + "' " + std::to_string(a.n_ff) +
              ": the shared expert's channel statistics come with version " + std::to_string(k_version_shared) +
              " (or " + std::to_string(k_version_sq_norms) + ") and channel statistics, and only with them";
        return false;
    }
    if (!parse_metric_set(metrics, a.metrics)) {
        err = where + "'" + k_key_metrics + "' = '" + metrics + "', expected 'reap', 'energy' or 'weights'";
        return false;
    }
    // weights archives came with version 4; imatrix archives stay below it
    if ((a.metrics == metric_set::weights) != (version == k_version_sq_norms) && a.metrics != metric_set::reap) {
        err = where + "metric set '" + metrics + "' in format version " + std::to_string(version) + ": " +
              (a.metrics == metric_set::weights ? "weights archives are version 4" : "imatrix archives are versions 1 to 3");
        return false;
    }
    a.has_sq_norms = a.metrics == metric_set::reap && version == k_version_sq_norms;
    if (!read_fingerprint(kv, where, a.model, err)) return false;
    if (!read_domains(m, where, metrics, a, err)) return false;
    for (const auto & entry : kv.entries) {
        if (starts_with(entry.key, "reap.saliency.") && !is_format_key(entry.key)) a.provenance.entries.push_back(entry);
    }
    if (!validate(a, e)) {
        err = where + e.substr(std::min(e.size(), strlen("saliency archive: ")));
        return false;
    }
    out = std::move(a);
    return true;
}

// ---- writing ------------------------------------------------------------------------

bool archive_spec(const archive & a, gguf::output_spec & out, std::string & err) {
    if (!validate(a, err)) return false;
    gguf::output_spec spec;
    gguf::kv_store & kv = spec.kvs;
    kv.set_string(k_key_type, k_general_type);
    const bool v4 = a.has_sq_norms || a.metrics == metric_set::weights;
    kv.set_u32(k_key_version, v4 ? k_version_sq_norms : a.has_shared_channels ? k_version_shared : a.n_ff > 0 ? k_version : k_version_experts);
    std::vector<std::string> names;
    std::vector<int64_t> n_tokens;
    for (const auto & d : a.domains) {
        names.push_back(d.name);
        n_tokens.push_back(d.n_tokens);
    }
    kv.set_string_array(k_key_domains, names);
    kv.set_i64_array(k_key_n_tokens, n_tokens);
    kv.set_string(k_key_metrics, metric_set_name(a.metrics));
    kv.set_string(k_key_arch, a.model.arch);
    kv.set_u32(k_key_n_layer, a.model.n_layer);
    kv.set_u32(k_key_n_expert, a.model.n_expert);
    kv.set_u32(k_key_n_expert_used, a.model.n_expert_used);
    kv.set_i32_array(k_key_moe_layers, std::vector<int32_t>(a.model.moe_layers.begin(), a.model.moe_layers.end()));
    kv.set_string(k_key_router_sha256, a.model.router_sha256);
    if (a.n_ff > 0) kv.set_u32(k_key_n_ff, a.n_ff);
    if (a.has_shared_channels) kv.set_bool(k_key_shared_channels, true);
    for (const auto & entry : a.provenance.entries) {
        if (!starts_with(entry.key, "reap.saliency.") || is_format_key(entry.key)) {
            err = "saliency archive: provenance key '" + entry.key + "' must start with 'reap.saliency.' and not be a format key";
            return false;
        }
        kv.set(entry);
    }
    for (const auto & d : a.domains) {
        for (const auto & mn : a.expert_metric_names()) {
            const std::vector<double> & v = *metric_data(d, mn);
            gguf::output_tensor t;
            t.name = d.name + "." + mn;
            t.n_dims = 2;
            t.ne[0] = a.model.n_expert;
            t.ne[1] = a.model.n_layer;
            t.type = gguf::tensor_type::F64;
            auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(double));
            if (!v.empty()) memcpy(bytes->data(), v.data(), bytes->size());
            t.memory = std::move(bytes);
            spec.tensors.push_back(std::move(t));
        }
        for (const auto & mn : a.n_ff > 0 ? channel_metric_names(a.metrics) : std::vector<std::string>()) {
            const std::vector<double> & v = *metric_data(d, mn);
            gguf::output_tensor t;
            t.name = d.name + "." + mn;
            t.n_dims = 3;
            t.ne[0] = a.n_ff;
            t.ne[1] = a.model.n_expert;
            t.ne[2] = a.model.n_layer;
            t.type = gguf::tensor_type::F64;
            t.memory = std::make_shared<std::vector<uint8_t>>((const uint8_t *) v.data(), (const uint8_t *) (v.data() + v.size()));
            spec.tensors.push_back(std::move(t));
        }
        for (const auto & mn : a.has_shared_channels ? shared_metric_names(a.metrics) : std::vector<std::string>()) {
            const std::vector<double> & v = *metric_data(d, mn);
            gguf::output_tensor t;
            t.name = d.name + "." + mn;
            t.n_dims = 2;
            t.ne[0] = a.n_ff;
            t.ne[1] = a.model.n_layer;
            t.type = gguf::tensor_type::F64;
            t.memory = std::make_shared<std::vector<uint8_t>>((const uint8_t *) v.data(), (const uint8_t *) (v.data() + v.size()));
            spec.tensors.push_back(std::move(t));
        }
    }
    out = std::move(spec);
    return true;
}

bool write_archive(const archive & a, const std::string & path, std::string & err, bool force) {
    gguf::output_spec spec;
    if (!archive_spec(a, spec, err)) return false;
    gguf::write_options opts;
    opts.force = force;
    std::vector<std::string> written;
    return gguf::write_output(spec, opts, path, written, err);
}

// ---- sums ----------------------------------------------------------------------------

void add_domain_stats(domain_stats & into, const domain_stats & other, metric_set ms) {
    into.n_tokens += other.n_tokens;
    std::vector<std::string> names = metric_names(ms);
    names.push_back("ean_sq_sum");                                          // empty vectors add nothing
    for (const auto & mn : channel_metric_names(ms)) names.push_back(mn);
    for (const auto & mn : shared_metric_names(ms)) names.push_back(mn);
    for (const auto & mn : names) {
        std::vector<double> & a = *metric_data(into, mn);
        const std::vector<double> & b = *metric_data(other, mn);
        for (size_t i = 0; i < a.size() && i < b.size(); ++i) a[i] = mn == "max_norm" ? std::max(a[i], b[i]) : a[i] + b[i];
    }
}

bool sum_domains(const archive & a, const std::vector<std::string> & names, domain_stats & out, std::string & err) {
    std::vector<const domain_stats *> sel;
    if (names.empty()) {
        for (const auto & d : a.domains) sel.push_back(&d);
    } else {
        std::set<std::string> seen;
        for (const auto & n : names) {
            const domain_stats * d = a.find_domain(n);
            if (!d) {
                std::vector<std::string> have;
                for (const auto & x : a.domains) have.push_back("'" + x.name + "'");
                err = "unknown domain '" + n + "': the saliency archive has " + (have.empty() ? std::string("no domains") : join(have));
                return false;
            }
            if (seen.insert(n).second) sel.push_back(d);
        }
    }
    if (sel.empty()) {
        err = "the saliency archive has no domains";
        return false;
    }
    domain_stats s;
    std::vector<std::string> sel_names;
    for (const auto * d : sel) sel_names.push_back(d->name);
    s.name = join(sel_names, "+");
    for (const auto & mn : a.expert_metric_names()) metric_data(s, mn)->assign(a.n_cells(), 0.0);
    if (a.n_ff > 0) {
        for (const auto & mn : channel_metric_names(a.metrics)) metric_data(s, mn)->assign(a.n_channel_values(), 0.0);
    }
    if (a.has_shared_channels) {
        for (const auto & mn : shared_metric_names(a.metrics)) metric_data(s, mn)->assign(a.n_shared_channel_values(), 0.0);
    }
    for (const auto * d : sel) add_domain_stats(s, *d, a.metrics);
    out = std::move(s);
    return true;
}

} // namespace reap::saliency

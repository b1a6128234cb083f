// Merging saliency archives (see merge.h): the sum, what a merged archive
// was made of (sources, coverage), and reap merge's whole run.
#include "saliency/merge.h"

#include "util/file.h"
#include "util/json_fields.h"
#include "util/output_rule.h"
#include "util/sha256.h"
#include "util/strings.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <map>
#include <numeric>
#include <set>

namespace reap::saliency {

using util::join;

namespace {

bool same_fingerprint(const fingerprint & x, const fingerprint & y, std::string & err) {
    const std::string head = "cannot merge saliency archives of different models: ";
    auto differ = [&](const std::string & field, const std::string & a, const std::string & b) {
        err = head + field + " " + a + " vs " + b;
        return false;
    };
    if (x.arch != y.arch) return differ("arch", "'" + x.arch + "'", "'" + y.arch + "'");
    if (x.n_layer != y.n_layer) return differ("n_layer", std::to_string(x.n_layer), std::to_string(y.n_layer));
    if (x.n_expert != y.n_expert) return differ("n_expert", std::to_string(x.n_expert), std::to_string(y.n_expert));
    if (x.n_expert_used != y.n_expert_used) return differ("n_expert_used", std::to_string(x.n_expert_used), std::to_string(y.n_expert_used));
    if (x.moe_layers != y.moe_layers) return differ("MoE layers", layers_text(x.moe_layers), layers_text(y.moe_layers));
    if (x.router_sha256 != y.router_sha256) {
        return differ("router sha256", "'" + x.router_sha256 + "'", "'" + y.router_sha256 + "'");
    }
    return true;
}

// "i/n" with 0 <= i < n, both plain decimal numbers.
bool parse_shard(const std::string & s, uint64_t & i, uint64_t & n) {
    const size_t slash = s.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() || s.size() > 41) return false;
    auto number = [](const std::string & t, uint64_t & v) {
        if (t.empty() || t.size() > 19 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
        v = std::stoull(t);
        return true;
    };
    return number(s.substr(0, slash), i) && number(s.substr(slash + 1), n) && n >= 1 && i < n;
}

bool parse_coverage(const std::string & s, coverage & c) {
    const size_t space = s.find(' ');
    if (space == std::string::npos) return false;
    c.corpus_sha256 = s.substr(0, space);
    return util::is_sha256_hex(c.corpus_sha256) && parse_shard(s.substr(space + 1), c.shard_index, c.shard_count);
}

std::string shard_text(const coverage & c) {
    return c.shard_count == 1 ? std::string("the whole corpus") : "shard " + std::to_string(c.shard_index) + "/" + std::to_string(c.shard_count);
}

} // namespace

bool merge_into(archive & into, const archive & other, std::string & err) {
    if (!same_fingerprint(into.model, other.model, err)) return false;
    if (into.metrics != other.metrics) {
        err = std::string("cannot merge saliency archives with different metric sets: '") + metric_set_name(into.metrics) +
              "' (" + join(metric_names(into.metrics)) + ") vs '" + metric_set_name(other.metrics) + "' (" + join(metric_names(other.metrics)) + ")";
        return false;
    }
    if (into.metrics == metric_set::weights) {
        err = "cannot merge weights archives (reap score): they hold per-expert scores of the weights, not sums over tokens";
        return false;
    }
    if (into.n_ff != other.n_ff) {
        err = "cannot merge saliency archives with different channel statistics: n_ff_exp " + std::to_string(into.n_ff) +
              " vs " + std::to_string(other.n_ff) + " (0 = none; calibrate both with --width-saliency, or neither)";
        return false;
    }
    if (into.has_shared_channels != other.has_shared_channels) {
        err = std::string("cannot merge saliency archives with and without the shared expert's channel statistics (") +
              (into.has_shared_channels ? "the first" : "the second") + " has them: calibrate both with the same reap, or import both with -m)";
        return false;
    }
    if (!validate(into, err) || !validate(other, err)) return false;
    // token counts are read from files: their sum must fit before anything is changed
    for (const auto & d : other.domains) {
        const domain_stats * t = into.find_domain(d.name);
        int64_t sum = 0;
        if (t && __builtin_add_overflow(t->n_tokens, d.n_tokens, &sum)) {
            err = "cannot merge domain '" + d.name + "': its token counts " + std::to_string(t->n_tokens) + " and " +
                  std::to_string(d.n_tokens) + " overflow a 64-bit count";
            return false;
        }
    }
    // An archive from before squared norms makes the sum one without them
    // (--method msan on it then says why); everything else still adds up.
    if (into.has_sq_norms && !other.has_sq_norms) {
        into.has_sq_norms = false;
        for (auto & d : into.domains) d.ean_sq_sum.clear();
    }
    for (const auto & d : other.domains) {
        const bool existed = into.find_domain(d.name) != nullptr;
        domain_stats & t = into.add_domain(d.name);
        if (existed) {
            add_domain_stats(t, d, into.metrics);
        } else {
            t = d;
            if (!into.has_sq_norms) t.ean_sq_sum.clear();
        }
    }
    std::vector<gguf::kv> kept;
    for (const auto & entry : into.provenance.entries) {
        const gguf::kv * o = other.provenance.find(entry.key);
        if (o && o->type == entry.type && o->elem_type == entry.elem_type && o->n_elems == entry.n_elems && o->raw == entry.raw) {
            kept.push_back(entry);
        }
    }
    into.provenance.entries = std::move(kept);
    return true;
}

std::string data_sha256(const archive & a) {
    util::sha256_stream h;
    auto text = [&](const std::string & t) {
        const uint64_t n = t.size();
        h.update(&n, sizeof n);
        h.update(t.data(), t.size());
    };
    text(metric_set_name(a.metrics));
    std::vector<const domain_stats *> order;
    for (const auto & d : a.domains) order.push_back(&d);
    std::sort(order.begin(), order.end(), [](const domain_stats * x, const domain_stats * y) { return x->name < y->name; });
    for (const domain_stats * d : order) {
        text(d->name);
        h.update(&d->n_tokens, sizeof d->n_tokens);
        for (const std::string & m : metric_names(a.metrics)) {
            const std::vector<double> * v = metric_data(*d, m);
            const uint64_t n = v ? v->size() : 0;
            h.update(&n, sizeof n);
            if (n) h.update(v->data(), n * sizeof(double));
        }
        if (a.n_ff > 0) {   // only then: an archive without channels hashes as before
            const uint64_t w = a.n_ff;
            h.update(&w, sizeof w);
            for (const std::string & m : channel_metric_names(a.metrics)) {
                const std::vector<double> * v = metric_data(*d, m);
                if (!v->empty()) h.update(v->data(), v->size() * sizeof(double));
            }
        }
        if (a.has_sq_norms) {   // only then: an archive without them hashes as before
            const uint64_t tag = 0x5351;   // "SQ": the squared norms follow
            h.update(&tag, sizeof tag);
            h.update(d->ean_sq_sum.data(), d->ean_sq_sum.size() * sizeof(double));
        }
        if (a.has_shared_channels) {   // only then: an archive without them hashes as before
            const uint64_t tag = 0x5348;   // "SH": the shared vectors follow
            h.update(&tag, sizeof tag);
            for (const std::string & m : shared_metric_names(a.metrics)) {
                const std::vector<double> * v = metric_data(*d, m);
                if (!v->empty()) h.update(v->data(), v->size() * sizeof(double));
            }
        }
    }
    return h.hex();
}

bool merge_sources(const archive & a, std::vector<std::string> & out, std::string & err) {
    out.clear();
    if (!a.provenance.find(k_key_merge_sources)) {
        out.push_back(data_sha256(a));
        return true;
    }
    std::string e;
    if (!a.provenance.get_string_array(k_key_merge_sources, out, e) || out.empty()) {
        err = std::string(k_key_merge_sources) + " is not a non-empty array of sha256 digests";
        return false;
    }
    std::set<std::string> seen;
    for (const std::string & h : out) {
        if (!util::is_sha256_hex(h)) {
            err = std::string(k_key_merge_sources) + ": '" + h.substr(0, 80) + "' is not 64 lowercase hex digits";
            return false;
        }
        if (!seen.insert(h).second) {
            err = std::string(k_key_merge_sources) + " lists the archive " + h.substr(0, 16) + "... twice (its tokens were counted twice)";
            return false;
        }
    }
    return true;
}

std::string coverage::text() const {
    return corpus_sha256 + " " + std::to_string(shard_index) + "/" + std::to_string(shard_count);
}

bool coverage_of(const archive & a, std::vector<coverage> & out, std::string & err) {
    out.clear();
    if (a.provenance.find(k_key_merge_coverage)) {
        std::vector<std::string> list;
        std::string e;
        if (!a.provenance.get_string_array(k_key_merge_coverage, list, e)) {
            err = std::string(k_key_merge_coverage) + " is not an array of strings";
            return false;
        }
        for (const std::string & s : list) {
            coverage c;
            if (!parse_coverage(s, c)) {
                err = std::string(k_key_merge_coverage) + ": '" + s.substr(0, 90) + "' is not \"CORPUS_SHA256 i/n\" with 0 <= i < n";
                return false;
            }
            out.push_back(c);
        }
        return true;
    }
    // one calibration: its corpus and --shard; a merge that recorded no
    // coverage (older) covers what it does not say
    if (a.provenance.find(k_key_merge_sources)) return true;
    std::string corpus, options, ignored;
    if (!a.provenance.get_string_or(k_key_corpus_sha256, "", corpus, ignored) || corpus.empty() ||
        !a.provenance.get_string_or(k_key_options, "", options, ignored) || options.empty()) {
        return true;
    }
    coverage c;
    c.corpus_sha256 = corpus;
    nlohmann::json j;
    std::string shard = "0/1";   // calibrate before --shard read every sample
    if (!util::parse_json_text(options, k_key_options, j, err)) return false;
    if (j.is_object() && j.contains("shard")) {
        if (!j["shard"].is_string()) {
            err = std::string(k_key_options) + ": shard must be a string \"i/n\"";
            return false;
        }
        shard = j["shard"].get<std::string>();
    }
    if (!util::is_sha256_hex(corpus) || !parse_shard(shard, c.shard_index, c.shard_count)) {
        err = std::string(k_key_corpus_sha256) + " / " + k_key_options + ": '" + corpus.substr(0, 70) + "', shard '" + shard.substr(0, 40) +
              "' are not a corpus sha256 and i/n with 0 <= i < n";
        return false;
    }
    out.push_back(c);
    return true;
}

bool sample_hashes_of(const archive & a, std::vector<uint64_t> & out, std::string & err) {
    out.clear();
    err.clear();
    if (!a.provenance.find(k_key_sample_hashes)) return false;
    std::vector<int64_t> raw;
    if (!a.provenance.get_i64_array(k_key_sample_hashes, raw, err)) {
        err = std::string(k_key_sample_hashes) + " is not an array of 64-bit integers";
        return false;
    }
    out.reserve(raw.size());
    for (int64_t v : raw) {
        const uint64_t h = (uint64_t) v;
        if (!out.empty() && h <= out.back()) {
            err = std::string(k_key_sample_hashes) + " is not in ascending order without repeats (element " + std::to_string(out.size()) + ")";
            out.clear();
            return false;
        }
        out.push_back(h);
    }
    return true;
}

void set_sample_hashes(archive & a, std::vector<uint64_t> hashes) {
    std::sort(hashes.begin(), hashes.end());
    hashes.erase(std::unique(hashes.begin(), hashes.end()), hashes.end());
    a.provenance.set_i64_array(k_key_sample_hashes, std::vector<int64_t>(hashes.begin(), hashes.end()));
}

namespace {

// How many hashes two ascending lists share, and the first shared.
size_t shared_hashes(const std::vector<uint64_t> & a, const std::vector<uint64_t> & b, uint64_t & first) {
    size_t n = 0;
    for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
        if (a[i] < b[j]) {
            ++i;
        } else if (b[j] < a[i]) {
            ++j;
        } else {
            if (n++ == 0) first = a[i];
            ++i, ++j;
        }
    }
    return n;
}

} // namespace

bool coverages_overlap(const coverage & a, const coverage & b) {
    if (a.corpus_sha256 != b.corpus_sha256) return false;
    const uint64_t g = std::gcd(a.shard_count, b.shard_count);
    return a.shard_index % g == b.shard_index % g;
}

bool merge_archives(const merge_request & req, merge_result & out, util::error & err) {
    out = merge_result();
    auto fail = [&](util::error_kind kind, const std::string & msg) { return util::fail_with(err, kind, msg); };
    std::string e;
    {   // the output rule (util/output_rule.h)
        std::vector<std::pair<std::string, std::string>> ins;
        for (const auto & in : req.inputs) ins.emplace_back("input", in);
        if (!util::check_output(req.output, ins, req.force, e)) return fail(util::error_kind::output, e);
    }
    const std::vector<std::string> & inputs = req.inputs;
    archive merged;
    std::vector<std::string> hashes, sources, covered;
    std::map<std::string, size_t> holder;   // data sha256 of an archive merged in -> the input holding it
    std::vector<std::pair<coverage, size_t>> parts;   // every calibration's coverage -> the input holding it
    std::vector<std::vector<std::string>> recorded(inputs.size());   // what each input says it was merged from (files)
    std::vector<std::optional<std::vector<uint64_t>>> samples;     // each input's sample hashes, where it records them
    for (size_t i = 0; i < inputs.size(); ++i) {
        archive a;
        if (!read_archive(inputs[i], a, e)) return fail(util::error_kind::input, e);
        std::string hex;
        if (!util::sha256_file(inputs[i], hex, e)) return fail(util::error_kind::input, e);
        hashes.push_back(hex);
        // one calibration counted once: the same archive twice, a copy of it, or
        // an archive merged from it beside it are refused, naming the two
        std::vector<std::string> held;
        if (!merge_sources(a, held, e)) return fail(util::error_kind::input, inputs[i] + ": " + e);
        for (const std::string & h : held) {
            const auto [it, fresh] = holder.emplace(h, i);
            if (!fresh) {
                return fail(util::error_kind::input, inputs[it->second] + " and " + inputs[i] + " both hold the archive with data sha256 " +
                                                         h.substr(0, 16) + "...: merging them would count its tokens twice (give each calibration once)");
            }
            sources.push_back(h);
        }
        // archives merged before sources were recorded list their inputs' file hashes
        std::string rerr;
        a.provenance.get_string_array(k_key_merge_inputs, recorded[i], rerr);
        for (size_t j = 0; j < i; ++j) {
            const bool j_in_i = std::find(recorded[i].begin(), recorded[i].end(), hashes[j]) != recorded[i].end();
            const bool i_in_j = std::find(recorded[j].begin(), recorded[j].end(), hex) != recorded[j].end();
            if (j_in_i || i_in_j) {
                return fail(util::error_kind::input, inputs[j] + " and " + inputs[i] + ": " + (j_in_i ? inputs[i] : inputs[j]) +
                                                         " was merged from " + (j_in_i ? inputs[j] : inputs[i]) + " (file sha256 " +
                                                         (j_in_i ? hashes[j] : hex).substr(0, 16) + "...): merging them would count its tokens twice");
            }
        }
        // one sample counted once: two calibrations of one corpus file must
        // read disjoint shards of it
        std::vector<coverage> cov;
        if (!coverage_of(a, cov, e)) return fail(util::error_kind::input, inputs[i] + ": " + e);
        for (const coverage & c : cov) {
            for (const auto & [other, j] : parts) {
                if (!coverages_overlap(c, other)) continue;
                return fail(util::error_kind::input,
                            inputs[j] + " (" + shard_text(other) + ") and " + inputs[i] + " (" + shard_text(c) +
                                ") were both calibrated on samples of the corpus with sha256 " + c.corpus_sha256.substr(0, 16) +
                                "...: merging them would count those samples' tokens twice (a --max-tokens cap keeps a prefix of the "
                                "same samples; merge disjoint shards: --shard i/n with one n, each i once)");
            }
        }
        for (const coverage & c : cov) {
            parts.emplace_back(c, i);
            covered.push_back(c.text());
        }
        // and whatever the corpus files: the samples each calibration decoded
        std::vector<uint64_t> mine;
        if (sample_hashes_of(a, mine, e)) {
            for (size_t j = 0; j < i; ++j) {
                uint64_t first = 0;
                const size_t n = samples[j] ? shared_hashes(*samples[j], mine, first) : 0;
                if (n == 0) continue;
                char hex[17];
                snprintf(hex, sizeof(hex), "%016" PRIx64, first);
                return fail(util::error_kind::input,
                            inputs[j] + " and " + inputs[i] + " were calibrated on " + std::to_string(n) + " samples in common (of " +
                                std::to_string(samples[j]->size()) + " and " + std::to_string(mine.size()) + "; the first's line hash " +
                                hex + "): merging them would count those samples' tokens twice (calibrate disjoint corpora, or one "
                                "corpus in disjoint shards: --shard i/n with one n, each i once)");
            }
            samples.push_back(std::move(mine));
        } else if (!e.empty()) {
            return fail(util::error_kind::input, inputs[i] + ": " + e);
        } else {
            samples.push_back(std::nullopt);
        }
        out.inputs.push_back({inputs[i], a.model.arch, a.domains.size(), a.metrics});
        if (i == 0) {
            merged = std::move(a);
        } else if (!merge_into(merged, a, e)) {
            return fail(util::error_kind::input, inputs[0] + " and " + inputs[i] + ": " + e);
        }
    }
    merged.provenance.set_string_array(k_key_merge_inputs, hashes);
    merged.provenance.set_string_array(k_key_merge_sources, sources);
    if (!covered.empty()) merged.provenance.set_string_array(k_key_merge_coverage, covered);
    merged.provenance.remove(k_key_sample_hashes);
    if (std::all_of(samples.begin(), samples.end(), [](const auto & s) { return s.has_value(); })) {
        std::vector<uint64_t> all;
        for (const auto & s : samples) all.insert(all.end(), s->begin(), s->end());
        set_sample_hashes(merged, std::move(all));
    }
    if (!req.tool.empty()) merged.provenance.set_string(k_key_tool, req.tool);
    if (!write_archive(merged, req.output, e, req.force)) return fail(util::error_kind::output, e);
    out.count_invariant = check_count_invariant(merged, out.invariant_note, 1e-9);
    for (const auto & d : merged.domains) out.domains.emplace_back(d.name, d.n_tokens);
    return true;
}

} // namespace reap::saliency

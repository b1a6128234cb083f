// reap planners: scoring, ordering and selecting experts from a saliency
// archive, budgets from exact pruned sizes, and plan comparison (see
// planners.h for the definitions every function here implements).
#include "plan/planners.h"
#include "plan/provenance.h"
#include "plan/receipts.h"
#include "util/number_format.h"
#include "util/strings.h"
#include "util/summary.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace reap::planner {

namespace {

using util::join;

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The method's score of every cell from (summed) statistics.
std::vector<double> scores_of(const saliency::domain_stats & d, method m, size_t n_cells) {
    std::vector<double> s(n_cells, 0.0);
    auto ratio = [&](const std::vector<double> & num) {
        for (size_t i = 0; i < n_cells; ++i) s[i] = d.count[i] > 0 ? num[i] / d.count[i] : 0.0;
    };
    switch (m) {
        case method::reap:      ratio(d.reap_sum); break;
        case method::man:       ratio(d.ean_sum); break;
        case method::msan:      ratio(d.ean_sq_sum); break;
        case method::ean:       s = d.ean_sum; break;
        case method::energy:    ratio(d.energy_sum); break;
        case method::frequency: s = d.count; break;
        case method::gate:      s = d.gate_sum; break;
        case method::aimer:     // AIMER removes the experts of highest score: ranked by 1 - score
            for (size_t i = 0; i < n_cells; ++i) s[i] = 1.0 - d.aimer[i];
            break;
        case method::random:    break;
    }
    return s;
}

// Tokens routed to cell i; a weights archive (no tokens, every expert scored) counts each as 1.
double routed_tokens(const saliency::domain_stats & d, size_t i) { return d.count.empty() ? 1.0 : d.count[i]; }

// Ranks (0 = best) of the experts of one layer by score, ties to the lower id.
std::vector<int64_t> ranks_of(const double * score, int64_t n) {
    std::vector<int64_t> idx(n);
    for (int64_t e = 0; e < n; ++e) idx[e] = e;
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    std::vector<int64_t> rank(n);
    for (int64_t r = 0; r < n; ++r) rank[idx[r]] = r;
    return rank;
}

// A plan for the model of `facts` keeping n_keep experts per layer, no layers yet.
plan plan_header(const plan_model_facts & facts, int64_t n_keep) {
    plan p;
    p.arch = facts.arch;
    p.n_layer = facts.n_layer;
    p.n_expert = facts.n_expert;
    p.n_expert_used = facts.n_expert_used;
    p.n_keep = n_keep;
    return p;
}

}  // namespace

// ---- methods ---------------------------------------------------------------------------

namespace {

// What each method reads, in one table: its name, what it ranks by, and the
// statistic it needs (the message of a refusal says why an archive lacks it).
struct method_info {
    method       m;
    const char * name;
    const char * description;
};

const std::vector<method_info> & method_table() {
    static const std::vector<method_info> t = {
        {method::reap, "reap", "REAP: mean over routed tokens of gate weight x expert output norm (sum reap_sum / sum count)"},
        {method::man, "man", "MAN: mean expert output norm over routed tokens, gate-free (sum ean_sum / sum count)"},
        {method::msan, "msan", "MSAN: mean squared expert output norm over routed tokens (sum ean_sq_sum / sum count)"},
        {method::aimer, "aimer", "AIMER, from the weights alone (reap score): 1 - mean|w|/rms(w) of the expert's gate, up and down weights; the flattest experts go first"},
        {method::frequency, "frequency", "how many tokens were routed to the expert (sum count)"},
        {method::gate, "gate", "total router weight the expert received (sum gate_sum)"},
        {method::ean, "ean", "EAN: total expert output norm over routed tokens, frequency-weighted (sum ean_sum)"},
        {method::energy, "energy", "mean squared norm of the ffn_down_exps input over routed tokens (imatrix archives: sum energy_sum / sum count)"},
        {method::random, "random", "seeded random order (baseline; --seed)"},
    };
    return t;
}

const method_info & info_of(method m) {
    for (const auto & i : method_table()) {
        if (i.m == m) return i;
    }
    return method_table().back();
}

// What an archive of each metric set can rank by, for the refusal's "use ...".
std::string methods_for(const saliency::archive & a) {
    switch (a.metrics) {
        case saliency::metric_set::reap:
            return std::string("reap, man, ") + (a.has_sq_norms ? "msan, " : "") + "frequency, gate, ean or random";
        case saliency::metric_set::energy:  return "energy, frequency or random";
        case saliency::metric_set::weights: return "aimer or random";
    }
    return "random";
}

}  // namespace

const char * method_name(method m) { return info_of(m).name; }

bool parse_method(const std::string & s, method & out) {
    for (const auto & i : method_table()) {
        if (s == i.name) {
            out = i.m;
            return true;
        }
    }
    return false;
}

const std::vector<method> & all_methods() {
    static const std::vector<method> v = [] {
        std::vector<method> r;
        for (const auto & i : method_table()) r.push_back(i.m);
        return r;
    }();
    return v;
}

const char * method_description(method m) { return info_of(m).description; }

std::string method_names_text(bool with_random) {
    std::vector<std::string> v;
    for (const auto & i : method_table()) {
        if (with_random || i.m != method::random) v.push_back(i.name);
    }
    return join(v);
}

bool method_fits(method m, const saliency::archive & a, std::string & err) {
    using saliency::metric_set;
    const metric_set ms = a.metrics;
    std::string why;
    switch (m) {
        case method::reap: case method::man: case method::gate: case method::ean:
            if (ms != metric_set::reap) why = "needs the expert outputs that reap calibrate records (reap_sum, ean_sum)";
            break;
        case method::msan:
            if (ms != metric_set::reap) why = "needs the squared expert output norms that reap calibrate records (ean_sq_sum)";
            else if (!a.has_sq_norms) why = "needs squared expert output norms (ean_sq_sum), which archives record from version 4 on; this one was calibrated before (calibrate again with this reap)";
            break;
        case method::energy:
            if (ms != metric_set::energy) why = "ranks by the imatrix's energy_sum, which only archives from reap imatrix hold";
            break;
        case method::frequency:
            if (ms == metric_set::weights) why = "needs routed-token counts, and a weights archive saw no token";
            break;
        case method::aimer:
            if (ms != metric_set::weights) why = "ranks by the weights alone: make its archive with reap score -m MODEL -o SCORES.gguf";
            break;
        case method::random: break;
    }
    if (ms == metric_set::energy && (m == method::man || m == method::msan)) {
        why += " (an imatrix holds the squared norm of the down projection's input, not of the expert's output)";
    }
    if (why.empty()) return true;
    err = std::string("--method ") + method_name(m) + " " + why + "; this archive has metric set '" + saliency::metric_set_name(ms) +
          "' (" + join(a.expert_metric_names()) + "): use --method " + methods_for(a);
    return false;
}

method default_method(saliency::metric_set ms) {
    return ms == saliency::metric_set::energy ? method::energy : ms == saliency::metric_set::weights ? method::aimer : method::reap;
}

// ---- ranking ----------------------------------------------------------------------------

namespace {

// Consensus: each expert's best rank in any domain of the plan's set.
std::vector<int64_t> best_domain_ranks(const saliency::archive & a, const ranking & r, method how) {
    const int64_t E = a.model.n_expert;
    std::vector<int64_t> minrank(a.n_cells(), E);
    for (const auto & name : r.domains) {
        const saliency::domain_stats * d = a.find_domain(name);
        const std::vector<double> s = scores_of(*d, how, a.n_cells());
        for (int l : a.model.moe_layers) {
            const std::vector<int64_t> rk = ranks_of(&s[a.index(l, 0)], E);
            for (int64_t e = 0; e < E; ++e) minrank[a.index(l, (int) e)] = std::min(minrank[a.index(l, (int) e)], rk[e]);
        }
    }
    return minrank;
}

// Super experts: max_norm over every domain of the archive; sets r.super_threshold.
std::vector<double> super_expert_norms(const saliency::archive & a, const rank_options & o, ranking & r) {
    const int64_t E = a.model.n_expert;
    std::vector<double> max_norm(a.n_cells(), 0.0);
    for (const auto & d : a.domains) {
        for (size_t i = 0; i < a.n_cells(); ++i) max_norm[i] = std::max(max_norm[i], d.max_norm[i]);
    }
    // over the experts that were measured: a never-routed one has no max_norm
    // (0), and counting those would pull the percentile down in an archive
    // whose experts are mostly dead
    std::vector<double> vals;
    for (int l : a.model.moe_layers) {
        for (int64_t e = 0; e < E; ++e) {
            if (max_norm[a.index(l, (int) e)] > 0) vals.push_back(max_norm[a.index(l, (int) e)]);
        }
    }
    std::sort(vals.begin(), vals.end());
    if (!vals.empty() && vals.back() > 0) {
        const double pos = o.super_percentile / 100.0 * double(vals.size() - 1);
        const size_t lo = (size_t) std::floor(pos), hi = std::min(vals.size() - 1, lo + 1);
        const double pct = vals[lo] + (vals[hi] - vals[lo]) * (pos - double(lo));
        r.super_threshold = std::max(pct, o.super_min_fraction * vals.back());
    }
    return max_norm;
}

// What every layer's ranking reads, computed once over the archive.
struct rank_inputs {
    const saliency::archive &        a;
    const rank_options &             o;
    const saliency::domain_stats &   sum;         // the plan's domains summed
    std::vector<double>              score;       // the share method's score over `sum`
    std::vector<int64_t>             minrank;     // empty unless consensus::minrank
    std::vector<double>              max_norm;    // empty unless a reap archive
    std::vector<std::vector<double>> dom_score;   // per archive domain
};

// Each archive domain's score and rank (1-based; empty where the domain routed nothing) in layer l.
void add_domain_scores(const rank_inputs & in, int l, layer_ranking & lr) {
    const saliency::archive & a = in.a;
    const int64_t E = a.model.n_expert;
    for (size_t di = 0; di < a.domains.size(); ++di) {
        const double * s = &in.dom_score[di][a.index(l, 0)];
        lr.domain_score.emplace_back(s, s + E);
        double routed = 0;
        for (int64_t e = 0; e < E; ++e) routed += routed_tokens(a.domains[di], a.index(l, (int) e));
        std::vector<int64_t> rk;
        if (routed > 0) {
            rk = ranks_of(s, E);
            for (int64_t & x : rk) ++x;
        }
        lr.domain_rank.push_back(std::move(rk));
    }
}

// Layer l's ranking: protected super experts first, never-routed experts last,
// the rest by the method's key; records dead, super and never-routed experts in r.
layer_ranking rank_layer(const rank_inputs & in, int l, ranking & r) {
    const saliency::archive & a = in.a;
    const rank_options & o = in.o;
    const int64_t E = a.model.n_expert;
    layer_ranking lr;
    lr.layer = l;
    lr.score.assign(in.score.begin() + (ptrdiff_t) a.index(l, 0), in.score.begin() + (ptrdiff_t) a.index(l, 0) + E);
    double layer_total = 0;
    for (double x : lr.score) layer_total += x;
    add_domain_scores(in, l, lr);
    std::vector<double> routed_norms;   // max_norm of the experts routed in some domain
    for (int64_t e = 0; e < E; ++e) {
        const size_t i = a.index(l, (int) e);
        bool any = false;
        for (const auto & d : a.domains) any = any || routed_tokens(d, i) > 0;
        if (!any) r.dead.push_back({l, e, 0.0});
        else if (!in.max_norm.empty()) routed_norms.push_back(in.max_norm[i]);
    }
    const double norm_median = util::summarize(std::move(routed_norms)).median;
    std::vector<int> tier(E, 1);
    std::vector<double> key(E, 0.0);
    for (int64_t e = 0; e < E; ++e) {
        const size_t i = a.index(l, (int) e);
        if (o.how == method::random) {
            // a key from (seed, layer, expert) alone: the same on every platform
            key[e] = -double(splitmix64(o.seed ^ splitmix64((uint64_t) l * 0x100000001b3ull + (uint64_t) e)) >> 11);
        } else if (!in.minrank.empty()) {
            key[e] = -double(in.minrank[i]);
        } else {
            key[e] = in.score[i];
        }
        const bool is_super = r.super_threshold > 0 && in.max_norm[i] > r.super_threshold;
        if (is_super) {
            expert_ref x{l, e, in.max_norm[i]};
            x.norm_ratio = norm_median > 0 ? in.max_norm[i] / norm_median : 0.0;
            x.score_share = layer_total > 0 ? in.score[i] / layer_total : 0.0;
            r.super_candidates.push_back(x);
            if (o.protect_super) r.super_experts.push_back(x);
        }
        if (routed_tokens(in.sum, i) == 0) {
            r.never_routed.push_back({l, e, 0.0});
            tier[e] = 2;
            key[e] = 0;
        }
        if (is_super && o.protect_super) tier[e] = 0;
    }
    lr.order.resize(E);
    for (int64_t e = 0; e < E; ++e) lr.order[e] = e;
    std::sort(lr.order.begin(), lr.order.end(), [&](int64_t x, int64_t y) {
        if (tier[x] != tier[y]) return tier[x] < tier[y];
        if (key[x] != key[y]) return key[x] > key[y];
        return x < y;
    });
    return lr;
}

}  // namespace

bool rank_experts(const saliency::archive & a, int64_t n_group, const rank_options & o, ranking & out, std::string & err) {
    if (!method_fits(o.how, a, err)) return false;
    const int64_t E = a.model.n_expert;
    const int64_t G = n_group > 1 ? n_group : 1;
    if (E % G != 0) {
        err = "the model's " + std::to_string(E) + " experts do not split into " + std::to_string(G) + " groups";
        return false;
    }
    ranking r;
    r.opts = o;
    r.n_expert = E;
    r.n_group = G;
    r.share_method = o.how == method::random ? default_method(a.metrics) : o.how;

    saliency::domain_stats sum;
    if (!saliency::sum_domains(a, o.domains, sum, err)) return false;
    if (o.domains.empty()) {
        for (const auto & d : a.domains) r.domains.push_back(d.name);
    } else {
        std::set<std::string> seen;
        for (const auto & d : o.domains) {
            if (seen.insert(d).second) r.domains.push_back(d);
        }
    }
    rank_inputs in{a, o, sum, scores_of(sum, r.share_method, a.n_cells()), {}, {}, {}};
    if (o.cons == consensus::minrank && o.how != method::random) in.minrank = best_domain_ranks(a, r, o.how);
    if (a.metrics == saliency::metric_set::reap) in.max_norm = super_expert_norms(a, o, r);

    // per domain of the archive: the share method's score over that domain alone (receipts.h)
    for (const auto & d : a.domains) {
        r.archive_domains.push_back(d.name);
        r.in_plan.push_back(std::find(r.domains.begin(), r.domains.end(), d.name) != r.domains.end());
    }
    for (const auto & d : a.domains) in.dom_score.push_back(scores_of(d, r.share_method, a.n_cells()));

    for (int l : a.model.moe_layers) r.layers.push_back(rank_layer(in, l, r));
    out = std::move(r);
    return true;
}

std::vector<int64_t> select_keep(const layer_ranking & lr, int64_t n_expert, int64_t n_group, int64_t n_keep) {
    const int64_t G = n_group > 1 ? n_group : 1;
    const int64_t per_src = n_expert / G, per_keep = n_keep / G;
    std::vector<int64_t> taken(G, 0), keep;
    for (int64_t e : lr.order) {
        const int64_t g = e / per_src;
        if (g < G && taken[g] < per_keep) {
            ++taken[g];
            keep.push_back(e);
        }
    }
    std::sort(keep.begin(), keep.end());
    return keep;
}

double saliency_share(const std::vector<double> & score, const std::vector<int64_t> & keep) {
    double total = 0, kept = 0;
    for (double s : score) total += s;
    for (int64_t e : keep) {
        if (e >= 0 && (size_t) e < score.size()) kept += score[e];
    }
    return total > 0 ? kept / total : 1.0;
}

share_report plan_share(const ranking & r, const plan & p) {
    share_report rep;
    double sum = 0;
    for (const auto & pl : p.layers) {
        for (const auto & lr : r.layers) {
            if (lr.layer == pl.layer) {
                rep.layers.push_back(pl.layer);
                rep.share.push_back(saliency_share(lr.score, pl.keep));
                sum += rep.share.back();
            }
        }
    }
    rep.mean = rep.share.empty() ? 0 : sum / double(rep.share.size());
    return rep;
}

share_report oracle_share(const ranking & r, int64_t n_keep) {
    share_report rep;
    double sum = 0;
    for (const auto & lr : r.layers) {
        std::vector<double> s = lr.score;
        std::sort(s.begin(), s.end(), std::greater<double>());
        double total = 0, kept = 0;
        for (size_t i = 0; i < s.size(); ++i) {
            total += s[i];
            if ((int64_t) i < n_keep) kept += s[i];
        }
        rep.layers.push_back(lr.layer);
        rep.share.push_back(total > 0 ? kept / total : 1.0);
        sum += rep.share.back();
    }
    rep.mean = rep.share.empty() ? 0 : sum / double(rep.share.size());
    return rep;
}

bool make_plan(const ranking & r, const plan_model_facts & facts, int64_t n_keep, plan & out, std::string & err,
               bool with_receipts) {
    plan p = plan_header(facts, n_keep);
    for (const auto & lr : r.layers) {
        plan_layer pl;
        pl.layer = lr.layer;
        pl.keep = select_keep(lr, r.n_expert, r.n_group, n_keep);
        p.layers.push_back(std::move(pl));
    }
    if (!validate_plan(p, facts, err)) return false;

    // protected experts that did not fit (more of them in a layer or group than it keeps)
    std::vector<expert_ref> dropped;
    for (const auto & x : r.super_experts) {
        for (const auto & l : p.layers) {
            if (l.layer == x.layer && !std::count(l.keep.begin(), l.keep.end(), x.expert)) dropped.push_back(x);
        }
    }
    record_ranking(p, r, dropped);
    // safety margin, saliency retained (overall, per layer, per domain), dead and super experts
    if (with_receipts) {
        receipts rc;
        if (!plan_receipts(r, p, rc, err)) return false;
        record_receipts(p, rc);
    }
    out = std::move(p);
    return true;
}

// ---- allowed counts, ratios, sizes ----------------------------------------------------------

bool keep_allowed(const plan_model_facts & facts, int64_t n_keep, std::string & why) {
    // a plan that keeps the first experts of each group, checked by the plan validator itself
    plan p = plan_header(facts, n_keep);
    if (n_keep < 1 || n_keep > facts.n_expert) {
        why = "n_keep " + std::to_string(n_keep) + " out of range [" + std::to_string(std::max<int64_t>(1, facts.n_expert_used)) +
              ", " + std::to_string(facts.n_expert) + "] (the model has " + std::to_string(facts.n_expert) + " experts per layer)";
        return false;
    }
    const int64_t G = facts.n_group > 1 ? facts.n_group : 1;
    layer_ranking lr;
    for (int64_t e = 0; e < facts.n_expert; ++e) lr.order.push_back(e);
    // every layer gets the same list: selected once, not once per layer
    // (allowed_keeps asks this for every n_keep: at K3 dims 92 x 896 selections)
    std::vector<int64_t> keep;
    if (!facts.moe_layers.empty()) keep = select_keep(lr, facts.n_expert, G, n_keep);
    for (int l : facts.moe_layers) {
        plan_layer pl;
        pl.layer = l;
        pl.keep = keep;
        if ((int64_t) pl.keep.size() != n_keep) {
            why = "n_keep " + std::to_string(n_keep) + " is not a multiple of the " + std::to_string(G) +
                  " expert groups of the group-limited router; every group must keep the same number";
            return false;
        }
        p.layers.push_back(std::move(pl));
    }
    return validate_plan(p, facts, why);
}

std::vector<int64_t> allowed_keeps(const plan_model_facts & facts) {
    std::vector<int64_t> v;
    std::string why;
    for (int64_t n = 1; n <= facts.n_expert; ++n) {
        if (keep_allowed(facts, n, why)) v.push_back(n);
    }
    return v;
}

bool keep_from_ratio(double ratio, const plan_model_facts & facts, int64_t & n_keep, std::string & note, std::string & err) {
    if (!(ratio >= 0.0 && ratio < 1.0)) {
        err = "--ratio " + std::to_string(ratio) + " must be in [0, 1): the fraction of routed experts removed";
        return false;
    }
    int64_t n = facts.n_expert - (int64_t) std::llround(ratio * double(facts.n_expert));
    const int64_t G = facts.n_group > 1 ? facts.n_group : 1;
    note.clear();
    if (n % G != 0) {
        const int64_t down = n - n % G;
        note = "--ratio " + std::to_string(ratio) + " gives " + std::to_string(n) + " experts per layer; rounded down to " +
               std::to_string(down) + ", a multiple of the " + std::to_string(G) + " expert groups";
        n = down;
    }
    std::string why;
    if (!keep_allowed(facts, n, why)) {
        const std::vector<int64_t> ok = allowed_keeps(facts);
        err = "--ratio " + std::to_string(ratio) + " keeps " + std::to_string(n) + " of " + std::to_string(facts.n_expert) +
              " experts per layer: " + why;
        if (!ok.empty()) {
            err += " (allowed: " + std::to_string(ok.front()) + ".." + std::to_string(ok.back()) +
                   (G > 1 ? " in steps of " + std::to_string(G) : std::string()) + ", i.e. --ratio <= " +
                   std::to_string(1.0 - double(ok.front()) / double(facts.n_expert)) + ")";
        }
        return false;
    }
    n_keep = n;
    return true;
}

bool parse_size(const std::string & s, uint64_t & bytes, std::string & err) {
    size_t i = 0;
    int dots = 0, digits = 0;
    while (i < s.size() && (std::isdigit((unsigned char) s[i]) || s[i] == '.')) {
        if (s[i] == '.') ++dots; else ++digits;
        ++i;
    }
    std::string unit = s.substr(i);
    while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
    for (char & c : unit) c = (char) std::tolower((unsigned char) c);
    if (digits == 0 || dots > 1) {
        err = "'" + s + "' is not a size (a number and an optional unit: 512G, 277.5GB, 300GiB, 1000000)";
        return false;
    }
    static const std::map<std::string, long double> units = {
        {"", 1.0L}, {"b", 1.0L},
        {"k", 1e3L}, {"kb", 1e3L}, {"m", 1e6L}, {"mb", 1e6L}, {"g", 1e9L}, {"gb", 1e9L}, {"t", 1e12L}, {"tb", 1e12L},
        {"kib", 1024.0L}, {"mib", 1048576.0L}, {"gib", 1073741824.0L}, {"tib", 1099511627776.0L},
    };
    const auto u = units.find(unit);
    if (u == units.end()) {
        err = "'" + s + "': unknown unit '" + s.substr(i) + "' (use K/KB, M/MB, G/GB, T/TB = powers of 1000, or KiB, MiB, GiB, TiB = powers of 1024)";
        return false;
    }
    const long double v = std::strtold(s.substr(0, i).c_str(), nullptr) * u->second;
    if (!(v >= 1.0L) || v >= 1.8e19L) {
        err = "'" + s + "' is not a positive size below 16 EiB";
        return false;
    }
    bytes = (uint64_t) v;
    return true;
}

bool pruned_bytes(const size_context & ctx, const plan & p, uint64_t & bytes, uint32_t & n_shards, std::string & err) {
    moe::width_cut w = ctx.width;
    if (p.has_width()) w = {p.width_n_ff, p.width_keep, ctx.width.down_type};
    return moe::pruned_bytes(*ctx.model, *ctx.layout, p.n_keep, ctx.prune, ctx.write, bytes, n_shards, err, w);
}

namespace {

// The plan that keeps n experts per layer, its exact pruned size and the
// saliency share it keeps: one row of the budget search and the size table.
bool size_point_of(const ranking & r, const plan_model_facts & facts, const size_context & ctx, int64_t n, size_point & pt,
                   std::string & err) {
    plan p;
    if (!make_plan(r, facts, n, p, err, false)) return false;
    pt.n_keep = n;
    if (!pruned_bytes(ctx, p, pt.bytes, pt.n_shards, err)) return false;
    pt.share = plan_share(r, p).mean;
    return true;
}

}  // namespace

bool fit_budget(const ranking & r, const plan_model_facts & facts, const size_context & ctx, uint64_t budget,
                bool full_table, int64_t & n_keep, std::vector<size_point> & table, std::string & err) {
    const std::vector<int64_t> allowed = allowed_keeps(facts);
    if (allowed.empty()) {
        err = "no expert count is allowed for this model";
        return false;
    }
    std::map<int64_t, size_point> memo;
    auto point = [&](int64_t n, size_point & pt) {
        const auto it = memo.find(n);
        if (it != memo.end()) {
            pt = it->second;
            return true;
        }
        if (!size_point_of(r, facts, ctx, n, pt, err)) return false;
        memo[n] = pt;
        return true;
    };
    size_point lo_pt;
    if (!point(allowed.front(), lo_pt)) return false;
    if (lo_pt.bytes > budget) {
        uint64_t dense = 0;
        for (size_t i = 0; i < ctx.layout->roles.size() && i < ctx.model->tensors.size(); ++i) {
            if (ctx.layout->roles[i].slice == moe::slice_kind::none) dense += ctx.model->tensors[i].nbytes;
        }
        err = "budget " + util::format_size(budget) + " (" + std::to_string(budget) + " bytes) is below the smallest prunable size: keeping " +
              std::to_string(allowed.front()) + " experts per layer (the least the model allows) gives " + util::format_size(lo_pt.bytes) +
              " (" + std::to_string(lo_pt.bytes) + " bytes); the tensors outside the routed experts alone take " + util::format_size(dense);
        return false;
    }
    // binary search for the last allowed index that fits (sizes grow with n_keep)
    size_t lo = 0, hi = allowed.size() - 1;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo + 1) / 2;
        size_point pt;
        if (!point(allowed[mid], pt)) return false;
        if (pt.bytes <= budget) lo = mid; else hi = mid - 1;
    }
    // guard against a non-monotonic size: move up while the next one fits
    while (lo + 1 < allowed.size()) {
        size_point pt;
        if (!point(allowed[lo + 1], pt)) return false;
        if (pt.bytes > budget) break;
        ++lo;
    }
    n_keep = allowed[lo];
    std::set<size_t> idx = {lo};
    if (lo > 0) idx.insert(lo - 1);
    if (lo + 1 < allowed.size()) idx.insert(lo + 1);
    if (full_table) {
        const size_t n = allowed.size(), want = 40;
        const size_t step = n <= want ? 1 : (n + want - 1) / want;
        for (size_t i = 0; i < n; i += step) idx.insert(i);
        idx.insert(n - 1);
    }
    table.clear();
    for (size_t i : idx) {
        size_point pt;
        if (!point(allowed[i], pt)) return false;
        table.push_back(pt);
    }
    return true;
}

bool size_table(const ranking & r, const plan_model_facts & facts, const size_context & ctx, int64_t around,
                std::vector<size_point> & table, std::string & err) {
    const std::vector<int64_t> allowed = allowed_keeps(facts);
    std::set<int64_t> pick;
    const size_t n = allowed.size(), want = 40;
    const size_t step = n <= want ? 1 : (n + want - 1) / want;
    for (size_t i = 0; i < n; i += step) pick.insert(allowed[i]);
    if (n) pick.insert(allowed.back());
    for (size_t i = 0; i < n; ++i) {
        if (allowed[i] == around) {
            pick.insert(around);
            if (i > 0) pick.insert(allowed[i - 1]);
            if (i + 1 < n) pick.insert(allowed[i + 1]);
        }
    }
    table.clear();
    for (int64_t k : pick) {
        size_point pt;
        if (!size_point_of(r, facts, ctx, k, pt, err)) return false;
        table.push_back(pt);
    }
    return true;
}

// ---- comparing ------------------------------------------------------------------------------

bool compare_plans(const plan & a, const plan & b, plan_overlap & out, std::string & err) {
    if (a.arch != b.arch || a.n_layer != b.n_layer || a.n_expert != b.n_expert) {
        err = "the plans are for different models: " + a.arch + " (" + std::to_string(a.n_layer) + " layers, " + std::to_string(a.n_expert) +
              " experts) vs " + b.arch + " (" + std::to_string(b.n_layer) + " layers, " + std::to_string(b.n_expert) + " experts)";
        return false;
    }
    if (a.layers.size() != b.layers.size()) {
        err = "the plans list different MoE layers (" + std::to_string(a.layers.size()) + " vs " + std::to_string(b.layers.size()) + ")";
        return false;
    }
    plan_overlap o;
    double s_shared = 0, s_j = 0;
    for (size_t i = 0; i < a.layers.size(); ++i) {
        if (a.layers[i].layer != b.layers[i].layer) {
            err = "the plans list different MoE layers (layer " + std::to_string(a.layers[i].layer) + " vs " + std::to_string(b.layers[i].layer) + ")";
            return false;
        }
        std::set<int64_t> sa(a.layers[i].keep.begin(), a.layers[i].keep.end()), sb(b.layers[i].keep.begin(), b.layers[i].keep.end());
        layer_overlap lo;
        lo.layer = a.layers[i].layer;
        for (int64_t e : sa) lo.shared += sb.count(e);
        lo.union_size = (int64_t) (sa.size() + sb.size()) - lo.shared;
        lo.jaccard = lo.union_size ? double(lo.shared) / double(lo.union_size) : 1.0;
        s_shared += double(lo.shared);
        s_j += lo.jaccard;
        o.layers.push_back(lo);
    }
    if (!o.layers.empty()) {
        o.mean_shared = s_shared / double(o.layers.size());
        o.mean_jaccard = s_j / double(o.layers.size());
    }
    out = std::move(o);
    return true;
}

bool plan_matches_archive(const plan & p, const saliency::archive & a, std::string & err) {
    const std::string head = "the saliency archive is for another model than the plan: ";
    if (p.arch != a.model.arch) {
        err = head + "arch '" + a.model.arch + "' (archive) vs '" + p.arch + "' (plan)";
        return false;
    }
    if (p.n_layer != (int64_t) a.model.n_layer || p.n_expert != (int64_t) a.model.n_expert) {
        err = head + std::to_string(a.model.n_layer) + " layers x " + std::to_string(a.model.n_expert) + " experts (archive) vs " +
              std::to_string(p.n_layer) + " x " + std::to_string(p.n_expert) + " (plan)";
        return false;
    }
    if (a.model.n_expert_used && p.n_expert_used != (int64_t) a.model.n_expert_used) {
        err = head + "n_expert_used " + std::to_string(a.model.n_expert_used) + " (archive) vs " + std::to_string(p.n_expert_used) + " (plan)";
        return false;
    }
    std::vector<int> pl;
    for (const auto & l : p.layers) pl.push_back(l.layer);
    if (pl != a.model.moe_layers) {
        err = head + "the MoE layers differ";
        return false;
    }
    return true;
}

} // namespace reap::planner

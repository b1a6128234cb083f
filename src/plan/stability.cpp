// The keep-list's stability over a calibration's checkpoints. See stability.h.
#include "plan/stability.h"

#include "plan/planners.h"
#include "util/json_fields.h"
#include "util/number_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace reap::planner {

namespace {

constexpr const char * k_mix = "";   // the plans' key of the mix (a domain's is its name, prefixed)

std::string plan_key(const std::string & domain) { return "domain:" + domain; }
std::string plan_name(const std::string & key) { return key == k_mix ? "the mix" : key.substr(7); }

// The keep-lists of a layer as a hex bitmap over n_expert experts, and back.
std::string to_hex(const std::vector<int64_t> & keep, int64_t n_expert) {
    std::string bits((size_t) (n_expert + 3) / 4, '0');
    for (int64_t e : keep) {
        char & c = bits[(size_t) e / 4];
        const int v = (c <= '9' ? c - '0' : c - 'a' + 10) | (1 << (e % 4));
        c = (char) (v < 10 ? '0' + v : 'a' + v - 10);
    }
    return bits;
}

bool from_hex(const std::string & bits, int64_t n_expert, std::vector<int64_t> & keep) {
    if ((int64_t) bits.size() != (n_expert + 3) / 4) return false;
    keep.clear();
    for (size_t i = 0; i < bits.size(); ++i) {
        const char c = bits[i];
        const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return false;
        for (int b = 0; b < 4; ++b) {
            if (!(v & (1 << b))) continue;
            const int64_t e = (int64_t) i * 4 + b;
            if (e >= n_expert) return false;
            keep.push_back(e);
        }
    }
    return true;
}

// The best rank (1 = most salient) a removed expert holds in any domain, the
// lowest over layers (receipts.h's safety margin, from the ranking alone).
int64_t safety_margin(const ranking & r, const std::vector<std::vector<int64_t>> & keep) {
    int64_t best = 0;
    for (size_t l = 0; l < r.layers.size(); ++l) {
        std::vector<bool> kept((size_t) r.n_expert, false);
        for (int64_t e : keep[l]) kept[(size_t) e] = true;
        for (const auto & rank : r.layers[l].domain_rank) {
            for (size_t e = 0; e < rank.size(); ++e) {
                if (!kept[e] && (best == 0 || rank[e] < best)) best = rank[e];
            }
        }
    }
    return best;
}

}  // namespace

stability_tracker::stability_tracker(double threshold_, int64_t n_keep_, int64_t n_group_)
    : threshold(threshold_), n_keep(n_keep_), n_group(n_group_) {}

double stability_tracker::overlap(const std::vector<std::vector<int64_t>> & a, const std::vector<std::vector<int64_t>> & b) {
    if (a.size() != b.size() || a.empty()) return 0;
    double sum = 0;
    for (size_t l = 0; l < a.size(); ++l) {
        std::vector<int64_t> x = a[l], y = b[l], both;
        std::sort(x.begin(), x.end());
        std::sort(y.begin(), y.end());
        std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(both));
        const size_t either = x.size() + y.size() - both.size();
        sum += either == 0 ? 1.0 : (double) both.size() / (double) either;
    }
    return sum / (double) a.size();
}

double stability_tracker::lowest_overlap(const plans & a, const plans & b, std::string & weakest) {
    double low = 2;
    for (const auto & [key, keep] : a) {
        const auto it = b.find(key);
        if (key == k_mix || it == b.end()) continue;   // the mix; a domain not yet seen then
        const double j = overlap(keep, it->second);
        if (j < low) {
            low = j;
            weakest = plan_name(key);
        }
    }
    return low > 1 ? -1 : low;
}

stability_tracker::plans stability_tracker::plans_of(const saliency::archive & a, ranking & mix, std::string & err) const {
    plans out;
    rank_options o;
    o.how = default_method(a.metrics);
    auto keeps = [&](const ranking & r) {
        std::vector<std::vector<int64_t>> k;
        for (const layer_ranking & lr : r.layers) k.push_back(select_keep(lr, r.n_expert, r.n_group, n_keep));
        return k;
    };
    if (!rank_experts(a, n_group, o, mix, err)) return {};
    out[k_mix] = keeps(mix);
    for (const saliency::domain_stats & d : a.domains) {
        if (d.n_tokens == 0) continue;
        o.domains = {d.name};
        ranking r;
        if (!rank_experts(a, n_group, o, r, err)) return {};
        out[plan_key(d.name)] = keeps(r);
    }
    return out;
}

bool stability_tracker::observe(const saliency::archive & so_far, const saliency::split_halves & halves, int64_t tokens,
                                stability_point & out, std::string & err) {
    snapshot now;
    now.tokens = tokens;
    n_expert_of_state = so_far.model.n_expert;
    ranking mix, mix_a, mix_b;
    now.keep = plans_of(so_far, mix, err);
    if (now.keep.empty()) return false;
    out = stability_point();
    out.tokens = tokens;
    out.safety_margin = safety_margin(mix, now.keep[k_mix]);
    std::string weak_prev, weak_half;
    if (previous) {
        out.jaccard_prev = overlap(now.keep[k_mix], previous->keep[k_mix]);
        out.domain_prev  = lowest_overlap(now.keep, previous->keep, weak_prev);
    }
    // the split halves: each half's plans (named as the run's domains), once both
    // halves hold tokens
    int64_t tokens_a = 0, tokens_b = 0;
    for (const auto & d : halves.a.domains) tokens_a += d.n_tokens;
    for (const auto & d : halves.b.domains) tokens_b += d.n_tokens;
    if (tokens_a > 0 && tokens_b > 0) {
        const plans pa = plans_of(halves.a, mix_a, err);
        const plans pb = plans_of(halves.b, mix_b, err);
        if (pa.empty() || pb.empty()) return false;
        out.jaccard_half = overlap(pa.at(k_mix), pb.at(k_mix));
        out.domain_half  = lowest_overlap(pa, pb, weak_half);
    }
    out.weakest = out.domain_half >= 0 && out.domain_half < out.domain_prev ? weak_half : weak_prev;
    out.stable = threshold > 0 && out.jaccard_prev >= threshold && out.jaccard_half >= threshold;
    points.push_back(out);
    previous = std::move(now);   // the next checkpoint compares with this one
    return true;
}

bool stability_tracker::held() const {
    return points.size() >= 2 && points[points.size() - 1].stable && points[points.size() - 2].stable;
}

namespace {

nlohmann::ordered_json point_json(const stability_point & p) {
    return {{"tokens", p.tokens}, {"jaccard_prev", p.jaccard_prev}, {"jaccard_half", p.jaccard_half},
            {"domain_prev", p.domain_prev}, {"domain_half", p.domain_half}, {"weakest", p.weakest}, {"safety_margin", p.safety_margin}, {"stable", p.stable}};
}

}  // namespace

nlohmann::ordered_json stability_tracker::curve_object() const {
    nlohmann::ordered_json j = {{"threshold", threshold}, {"n_keep", n_keep}, {"points", nlohmann::ordered_json::array()}};
    for (const stability_point & p : points) j["points"].push_back(point_json(p));
    return j;
}

std::string stability_tracker::curve_json() const { return curve_object().dump(); }

std::string stability_tracker::state_json() const {
    nlohmann::ordered_json j = curve_object();
    j["history"] = nlohmann::ordered_json::array();
    if (const auto & s = previous) {
        nlohmann::ordered_json plans_j = nlohmann::ordered_json::object();
        for (const auto & [key, keep] : s->keep) {
            nlohmann::ordered_json layers = nlohmann::ordered_json::array();
            for (const auto & k : keep) layers.push_back(to_hex(k, n_expert_of_state));
            plans_j[key] = layers;
        }
        j["history"].push_back({{"tokens", s->tokens}, {"keep", plans_j}});
    }
    j["n_expert"] = n_expert_of_state;
    return j.dump();
}

namespace {

// The curve's fields of `j` (threshold, n_keep, points); throws nlohmann's
// exceptions on a missing or mistyped field, err on a value out of range.
bool read_curve(const nlohmann::json & j, stability_curve & c, std::string & err) {
    c.threshold = j.at("threshold").get<double>();
    c.n_keep    = j.at("n_keep").get<int64_t>();
    c.points.clear();
    for (const auto & p : j.at("points")) {
        stability_point s;
        s.tokens        = p.at("tokens").get<int64_t>();
        s.jaccard_prev  = p.at("jaccard_prev").get<double>();
        s.jaccard_half  = p.at("jaccard_half").get<double>();
        s.domain_prev   = p.at("domain_prev").get<double>();
        s.domain_half   = p.at("domain_half").get<double>();
        s.weakest       = p.at("weakest").get<std::string>();
        s.safety_margin = p.at("safety_margin").get<int64_t>();
        s.stable        = p.at("stable").get<bool>();
        for (double v : {s.jaccard_prev, s.jaccard_half, s.domain_prev, s.domain_half}) {
            if (!(v == -1 || (v >= 0 && v <= 1))) {
                err = "an overlap out of range";
                return false;
            }
        }
        if (s.tokens <= 0 || s.safety_margin < 0 || (!c.points.empty() && s.tokens <= c.points.back().tokens)) {
            err = "a point out of range or out of order";
            return false;
        }
        c.points.push_back(s);
    }
    if (!(c.threshold >= 0 && c.threshold <= 1) || c.n_keep <= 0) {
        err = "threshold or n_keep out of range";
        return false;
    }
    return true;
}

}  // namespace

bool parse_stability_curve(const std::string & text, stability_curve & out, std::string & err) {
    nlohmann::json j;
    if (!util::parse_json_text(text, "the archive's stability curve", j, err)) return false;
    try {
        if (!read_curve(j, out, err)) {
            err = "the archive's stability curve: " + err;
            return false;
        }
    } catch (const nlohmann::json::exception & e) {
        err = std::string("the archive's stability curve: missing or mistyped field (") + e.what() + ")";
        return false;
    }
    return true;
}

bool stability_tracker::restore(const std::string & text, std::string & err) {
    nlohmann::json j;
    if (!util::parse_json_text(text, "the checkpoint's stability state", j, err)) return false;
    const auto bad = [&](const std::string & what) {
        err = "the checkpoint's stability state: " + what;
        return false;
    };
    try {
        stability_curve c;
        std::string e;
        if (!j.is_object() || !read_curve(j, c, e)) return bad(e.empty() ? "not an object" : e);
        if (c.threshold != threshold || c.n_keep != n_keep) return bad("made for another --until-stable or target");
        const int64_t n_expert = j.at("n_expert").get<int64_t>();
        if (n_expert <= 0 || n_expert > (1 << 20)) return bad("n_expert out of range");
        std::optional<snapshot> last;   // the newest entry (a checkpoint of an older reap may hold several)
        for (const auto & h : j.at("history")) {
            snapshot s;
            s.tokens = h.at("tokens").get<int64_t>();
            for (const auto & [key, layers] : h.at("keep").items()) {
                auto & keep = s.keep[key];
                for (const auto & bits : layers) {
                    keep.emplace_back();
                    if (!from_hex(bits.get<std::string>(), n_expert, keep.back())) return bad("a keep-list bitmap is malformed");
                }
            }
            last = std::move(s);
        }
        n_expert_of_state = n_expert;
        points  = std::move(c.points);
        previous = std::move(last);
    } catch (const nlohmann::json::exception & e) {
        return bad(std::string("missing or mistyped field (") + e.what() + ")");
    }
    return true;
}

std::string curve_table(const stability_curve & c) {
    auto fig = [](double v) {
        char b[16];
        if (v < 0) return std::string("    -");
        snprintf(b, sizeof(b), "%5.3f", v);
        return std::string(b);
    };
    char line[256];
    if (c.threshold > 0) {
        snprintf(line, sizeof(line), "  calibration stability (--until-stable %.3g, %lld kept per layer): overlap of the keep-lists\n",
                 c.threshold, (long long) c.n_keep);
    } else {
        snprintf(line, sizeof(line), "  calibration stability (%lld kept per layer; no --until-stable): overlap of the keep-lists\n",
                 (long long) c.n_keep);
    }
    std::string s = line;
    s += "  (mean Jaccard over layers) with the previous checkpoint and between the two split halves; the mix, then the lowest domain\n";
    s += "        tokens   mix:prev  half   domains:prev  half   safety margin\n";
    for (const stability_point & p : c.points) {
        snprintf(line, sizeof(line), "  %12s   %s  %s   %s  %s   %5lld%s\n", util::group_digits(p.tokens).c_str(),
                 fig(p.jaccard_prev).c_str(), fig(p.jaccard_half).c_str(), fig(p.domain_prev).c_str(), fig(p.domain_half).c_str(),
                 (long long) p.safety_margin, p.stable ? "  stable" : "");
        s += line;
    }
    const bool held = c.points.size() >= 2 && c.points.back().stable && c.points[c.points.size() - 2].stable;
    if (c.threshold > 0) {
        s += held ? "  the keep-list held: the calibration stopped there\n"
                  : "  the keep-list did not hold before the corpus ended\n";
    }
    return s;
}

std::string describe(const stability_point & p) {
    char buf[320];
    std::string s = "stability at " + util::group_digits(p.tokens) + " tokens: ";
    if (p.jaccard_prev < 0) return s + "the first checkpoint, nothing to compare with yet";
    auto figure = [&](double j) {
        if (j < 0) return std::string("-");
        snprintf(buf, sizeof(buf), "%.3f", j);
        return std::string(buf);
    };
    s += "the mix's keep-list overlaps the previous checkpoint's by " + figure(p.jaccard_prev) + ", the split halves' overlap " +
         figure(p.jaccard_half);
    if (!p.weakest.empty()) {
        s += "; the domains' lowest " + figure(p.domain_prev) + " and " + figure(p.domain_half) + " (" + p.weakest + ")";
    }
    snprintf(buf, sizeof(buf), "; safety margin %lld%s", (long long) p.safety_margin, p.stable ? "; stable" : "");
    return s + buf;
}

}  // namespace reap::planner

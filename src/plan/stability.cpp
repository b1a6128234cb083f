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

bool stability_tracker::observe(const saliency::archive & so_far, int64_t tokens, stability_point & out, std::string & err) {
    snapshot now;
    now.tokens = tokens;
    n_expert_of_state = so_far.model.n_expert;
    rank_options o;
    o.how = default_method(so_far.metrics);
    ranking mix;
    auto keeps = [&](const ranking & r) {
        std::vector<std::vector<int64_t>> k;
        for (const layer_ranking & lr : r.layers) k.push_back(select_keep(lr, r.n_expert, r.n_group, n_keep));
        return k;
    };
    if (!rank_experts(so_far, n_group, o, mix, err)) return false;
    now.keep[k_mix] = keeps(mix);
    for (const saliency::domain_stats & d : so_far.domains) {
        if (d.n_tokens == 0) continue;
        o.domains = {d.name};
        ranking r;
        if (!rank_experts(so_far, n_group, o, r, err)) return false;
        now.keep[plan_key(d.name)] = keeps(r);
    }
    out = stability_point();
    out.tokens = tokens;
    out.safety_margin = safety_margin(mix, now.keep[k_mix]);
    std::string weak_prev, weak_half;
    if (!history.empty()) {
        out.jaccard_prev = overlap(now.keep[k_mix], history.back().keep[k_mix]);
        out.domain_prev  = lowest_overlap(now.keep, history.back().keep, weak_prev);
    }
    size_t half = history.size();   // the latest snapshot with at most half the tokens
    for (size_t i = 0; i < history.size(); ++i) {
        if (history[i].tokens * 2 <= tokens) half = i;
    }
    if (half < history.size()) {
        out.jaccard_half = overlap(now.keep[k_mix], history[half].keep[k_mix]);
        out.domain_half  = lowest_overlap(now.keep, history[half].keep, weak_half);
    }
    out.weakest = out.domain_half >= 0 && out.domain_half < out.domain_prev ? weak_half : weak_prev;
    out.stable = out.jaccard_prev >= threshold && out.jaccard_half >= threshold;
    points.push_back(out);
    // later checkpoints (more tokens) compare with this one, and with snapshots
    // from the current half snapshot on, never with earlier ones
    if (half < history.size()) history.erase(history.begin(), history.begin() + (ptrdiff_t) half);
    history.push_back(std::move(now));
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

std::string stability_tracker::curve_json() const {
    nlohmann::ordered_json j = {{"threshold", threshold}, {"n_keep", n_keep}, {"points", nlohmann::ordered_json::array()}};
    for (const stability_point & p : points) j["points"].push_back(point_json(p));
    return j.dump();
}

std::string stability_tracker::state_json() const {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(curve_json());
    j["history"] = nlohmann::ordered_json::array();
    for (const snapshot & s : history) {
        nlohmann::ordered_json plans_j = nlohmann::ordered_json::object();
        for (const auto & [key, keep] : s.keep) {
            nlohmann::ordered_json layers = nlohmann::ordered_json::array();
            for (const auto & k : keep) layers.push_back(to_hex(k, n_expert_of_state));
            plans_j[key] = layers;
        }
        j["history"].push_back({{"tokens", s.tokens}, {"keep", plans_j}});
    }
    j["n_expert"] = n_expert_of_state;
    return j.dump();
}

bool stability_tracker::restore(const std::string & text, std::string & err) {
    nlohmann::json j;
    if (!util::parse_json_text(text, "the checkpoint's stability state", j, err)) return false;
    const auto bad = [&](const std::string & what) {
        err = "the checkpoint's stability state: " + what;
        return false;
    };
    try {
        if (!j.is_object() || j.value("threshold", -1.0) != threshold || j.value("n_keep", (int64_t) -1) != n_keep) {
            return bad("made for another --until-stable or target");
        }
        const int64_t n_expert = j.at("n_expert").get<int64_t>();
        if (n_expert <= 0 || n_expert > (1 << 20)) return bad("n_expert out of range");
        n_expert_of_state = n_expert;
        points.clear();
        history.clear();
        for (const auto & p : j.at("points")) {
            stability_point s;
            s.tokens       = p.at("tokens").get<int64_t>();
            s.jaccard_prev = p.at("jaccard_prev").get<double>();
            s.jaccard_half = p.at("jaccard_half").get<double>();
            s.domain_prev  = p.at("domain_prev").get<double>();
            s.domain_half  = p.at("domain_half").get<double>();
            s.weakest      = p.at("weakest").get<std::string>();
            s.safety_margin = p.at("safety_margin").get<int64_t>();
            s.stable       = p.at("stable").get<bool>();
            if (s.tokens <= 0 || s.safety_margin < 0 || s.jaccard_prev > 1 || s.jaccard_half > 1 ||
                s.domain_prev > 1 || s.domain_half > 1) {
                return bad("a point out of range");
            }
            points.push_back(s);
        }
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
            history.push_back(std::move(s));
        }
    } catch (const nlohmann::json::exception & e) {
        return bad(std::string("missing or mistyped field (") + e.what() + ")");
    }
    return true;
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
    s += "the mix's keep-list overlaps the previous checkpoint's by " + figure(p.jaccard_prev) + ", half the tokens' by " +
         figure(p.jaccard_half);
    if (!p.weakest.empty()) {
        s += "; the domains' lowest " + figure(p.domain_prev) + " and " + figure(p.domain_half) + " (" + p.weakest + ")";
    }
    snprintf(buf, sizeof(buf), "; safety margin %lld%s", (long long) p.safety_margin, p.stable ? "; stable" : "");
    return s + buf;
}

}  // namespace reap::planner

// Tests of the planners (src/plan/planners.h), core only: each method's plan
// equals a top-N recomputed here straight from the archive (tie-break to the
// lower id included), minrank consensus, the seeded random baseline, group
// constraints, super-expert protection (injected outlier), never-routed
// experts, keep counts from ratios, size parsing, plan overlap and oracle
// shares, --budget sizes against files really written (zoo models), the
// plan receipts (safety margin, per-domain shares), the list summary helper
// and the rerank statistic of width plans (Spearman against hand-ranked cases).
#include "gguf_test_util.h"
#include "plan/planners.h"
#include "plan/provenance.h"
#include "plan/receipts.h"
#include "plan/width_planner.h"
#include "plan/width_rerank.h"
#include "prune_test_util.h"
#include "saliency_test_util.h"
#include "util/summary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

namespace g = reap::gguf;
namespace s = reap::saliency;
namespace pl = reap::planner;
using saliency_test::make_archive;
using saliency_test::make_fingerprint;

namespace {

// The facts of the synthetic archives' model (no GGUF needed).
reap::plan_model_facts facts_for(const s::fingerprint & fp, int64_t n_group = 0, int64_t n_group_used = 0) {
    reap::plan_model_facts f;
    f.arch = fp.arch;
    f.n_layer = fp.n_layer;
    f.n_expert = fp.n_expert;
    f.n_expert_used = fp.n_expert_used;
    f.n_group = n_group;
    f.n_group_used = n_group_used;
    f.moe_layers = fp.moe_layers;
    return f;
}

// Reference: the score of every expert of `layer` by method name, summing the
// raw statistics of `domains` (all when empty) here, independently of the library.
std::vector<double> reference_scores(const s::archive & a, const std::vector<std::string> & domains, const std::string & method, int layer) {
    const int64_t E = a.model.n_expert;
    std::vector<double> cnt(E, 0), gate(E, 0), reap(E, 0), ean(E, 0), ean_sq(E, 0), energy(E, 0), aimer(E, 0);
    for (const auto & d : a.domains) {
        if (!domains.empty() && std::find(domains.begin(), domains.end(), d.name) == domains.end()) continue;
        for (int64_t e = 0; e < E; ++e) {
            const size_t i = (size_t) layer * E + e;
            if (!d.aimer.empty()) aimer[e] = d.aimer[i];   // one domain: the weights
            if (!d.count.empty()) cnt[e] += d.count[i];
            if (!d.ean_sq_sum.empty()) ean_sq[e] += d.ean_sq_sum[i];
            if (!d.gate_sum.empty()) {
                gate[e] += d.gate_sum[i];
                reap[e] += d.reap_sum[i];
                ean[e] += d.ean_sum[i];
            }
            if (!d.energy_sum.empty()) energy[e] += d.energy_sum[i];
        }
    }
    std::vector<double> sc(E, 0);
    for (int64_t e = 0; e < E; ++e) {
        if (method == "reap") sc[e] = cnt[e] > 0 ? reap[e] / cnt[e] : 0;
        if (method == "ean") sc[e] = ean[e];
        if (method == "man") sc[e] = cnt[e] > 0 ? ean[e] / cnt[e] : 0;
        if (method == "msan") sc[e] = cnt[e] > 0 ? ean_sq[e] / cnt[e] : 0;
        if (method == "aimer") sc[e] = -aimer[e];   // AIMER removes the highest first
        if (method == "energy") sc[e] = cnt[e] > 0 ? energy[e] / cnt[e] : 0;
        if (method == "frequency") sc[e] = cnt[e];
        if (method == "gate") sc[e] = gate[e];
    }
    return sc;
}

// Reference top-N (per group when n_group > 1), ties to the lower id, ascending.
std::vector<int64_t> reference_topn(const std::vector<double> & sc, int64_t n, int64_t n_group = 1) {
    const int64_t E = (int64_t) sc.size(), per = E / n_group;
    std::vector<int64_t> keep;
    for (int64_t g = 0; g < n_group; ++g) {
        std::vector<int64_t> ids;
        for (int64_t e = g * per; e < (g + 1) * per; ++e) ids.push_back(e);
        std::sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) { return sc[x] != sc[y] ? sc[x] > sc[y] : x < y; });
        keep.insert(keep.end(), ids.begin(), ids.begin() + n / n_group);
    }
    std::sort(keep.begin(), keep.end());
    return keep;
}

reap::plan plan_for(const s::archive & a, const pl::rank_options & o, int64_t n_keep, int64_t n_group = 0, int64_t n_group_used = 0) {
    pl::ranking r;
    std::string err;
    EXPECT_TRUE(pl::rank_experts(a, n_group, o, r, err)) << err;
    reap::plan p;
    EXPECT_TRUE(pl::make_plan(r, facts_for(a.model, n_group, n_group_used), n_keep, p, err)) << err;
    return p;
}

}  // namespace

TEST(Planners, EveryMethodEqualsTheReferenceTopN) {
    const s::fingerprint fp = make_fingerprint(4, 16, 4, {1, 2, 3});
    const s::archive a = make_archive({"code", "en", "ja"}, fp, s::metric_set::reap, 500, /*sq_norms=*/true);
    s::archive en = make_archive({"all"}, fp, s::metric_set::energy);
    // a weights archive: seeded AIMER values in (0.6, 0.9), a tie in layer 2
    s::archive w = s::make_archive(fp, s::metric_set::weights);
    {
        std::mt19937_64 rng(11);
        std::uniform_real_distribution<double> u(0.6, 0.9);
        s::domain_stats & d = w.add_domain("weights");
        for (int l : fp.moe_layers) {
            for (uint32_t e = 0; e < fp.n_expert; ++e) d.aimer[w.index(l, e)] = u(rng);
        }
        d.aimer[w.index(2, 5)] = d.aimer[w.index(2, 9)];
        std::string err;
        ASSERT_TRUE(s::validate(w, err)) << err;
    }
    struct cse { std::string method; const s::archive * arch; std::vector<std::string> domains; };
    const std::vector<cse> cases = {
        {"reap", &a, {}}, {"frequency", &a, {}}, {"gate", &a, {}}, {"ean", &a, {}}, {"man", &a, {}}, {"msan", &a, {}},
        {"reap", &a, {"code"}}, {"gate", &a, {"ja", "en"}}, {"msan", &a, {"en"}}, {"frequency", &en, {}}, {"energy", &en, {}},
        {"aimer", &w, {}},
    };
    for (const auto & c : cases) {
        for (int64_t n : {4, 5, 8, 13, 16}) {
            pl::rank_options o;
            ASSERT_TRUE(pl::parse_method(c.method, o.how));
            o.domains = c.domains;
            o.protect_super = false;
            const reap::plan p = plan_for(*c.arch, o, n);
            ASSERT_EQ(p.layers.size(), 3u);
            EXPECT_EQ(p.n_keep, n);
            for (const auto & l : p.layers) {
                const auto ref = reference_topn(reference_scores(*c.arch, c.domains, c.method, l.layer), n);
                EXPECT_EQ(l.keep, ref) << c.method << " n=" << n << " layer " << l.layer;
            }
            EXPECT_EQ(p.provenance["method"], c.method);
        }
    }
}

TEST(Planners, TiesBreakToTheLowerId) {
    const s::fingerprint fp = make_fingerprint(1, 8, 2, {0});
    s::archive a = make_archive({"d"}, fp);
    pl::rank_options o;
    o.protect_super = false;
    for (const std::string m : {"reap", "frequency", "gate", "ean"}) {
        ASSERT_TRUE(pl::parse_method(m, o.how));
        // find the last kept (x) and first removed (y) at n = 4, then make them equal
        s::archive t = a;
        const auto sc = reference_scores(t, {}, m, 0);
        std::vector<int64_t> ids(8);
        std::iota(ids.begin(), ids.end(), 0);
        std::sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) { return sc[x] != sc[y] ? sc[x] > sc[y] : x < y; });
        const int64_t x = ids[3], y = ids[4];
        for (const auto & mn : s::metric_names(t.metrics)) (*s::metric_data(t.domains[0], mn))[y] = (*s::metric_data(t.domains[0], mn))[x];
        const auto sc2 = reference_scores(t, {}, m, 0);
        ASSERT_EQ(sc2[x], sc2[y]);
        const reap::plan p = plan_for(t, o, 4);
        const int64_t lower = std::min(x, y), higher = std::max(x, y);
        EXPECT_TRUE(std::count(p.layers[0].keep.begin(), p.layers[0].keep.end(), lower)) << m;
        EXPECT_FALSE(std::count(p.layers[0].keep.begin(), p.layers[0].keep.end(), higher)) << m;
        EXPECT_EQ(p.layers[0].keep, reference_topn(sc2, 4)) << m;
        EXPECT_TRUE(std::is_sorted(p.layers[0].keep.begin(), p.layers[0].keep.end()));
    }
    // all-equal scores: the lowest ids are kept
    s::archive z = s::make_archive(fp, s::metric_set::reap);
    z.add_domain("d").n_tokens = 0;
    o.how = pl::method::reap;
    EXPECT_EQ(plan_for(z, o, 3).layers[0].keep, (std::vector<int64_t>{0, 1, 2}));
}

TEST(Planners, MinrankConsensus) {
    const s::fingerprint fp = make_fingerprint(2, 12, 2, {0, 1});
    const s::archive a = make_archive({"code", "en", "ja"}, fp);
    pl::rank_options o;
    o.protect_super = false;
    o.cons = pl::consensus::minrank;
    o.domains = {"code", "ja"};
    for (int64_t n : {2, 5, 9}) {
        const reap::plan p = plan_for(a, o, n);
        for (const auto & l : p.layers) {
            std::vector<int64_t> best(12, 1 << 30);
            for (const std::string d : {"code", "ja"}) {
                const auto sc = reference_scores(a, {d}, "reap", l.layer);
                std::vector<int64_t> ids(12);
                std::iota(ids.begin(), ids.end(), 0);
                std::sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) { return sc[x] != sc[y] ? sc[x] > sc[y] : x < y; });
                for (int64_t r = 0; r < 12; ++r) best[ids[r]] = std::min(best[ids[r]], r);
            }
            std::vector<double> key(12);
            for (int e = 0; e < 12; ++e) key[e] = -double(best[e]);
            EXPECT_EQ(l.keep, reference_topn(key, n)) << "n=" << n << " layer " << l.layer;
        }
        EXPECT_EQ(p.provenance["consensus"], "minrank");
    }
}

TEST(Planners, RandomIsSeededAndValid) {
    const s::fingerprint fp = make_fingerprint(3, 32, 4, {0, 1, 2});
    const s::archive a = make_archive({"d"}, fp);
    pl::rank_options o;
    o.how = pl::method::random;
    o.protect_super = false;
    o.seed = 11;
    const reap::plan p1 = plan_for(a, o, 10), p2 = plan_for(a, o, 10);
    o.seed = 12;
    const reap::plan p3 = plan_for(a, o, 10);
    for (size_t i = 0; i < p1.layers.size(); ++i) {
        EXPECT_EQ(p1.layers[i].keep, p2.layers[i].keep);
        EXPECT_EQ(p1.layers[i].keep.size(), 10u);
        EXPECT_TRUE(std::is_sorted(p1.layers[i].keep.begin(), p1.layers[i].keep.end()));
    }
    bool differs = false;
    for (size_t i = 0; i < p1.layers.size(); ++i) differs |= p1.layers[i].keep != p3.layers[i].keep;
    EXPECT_TRUE(differs);
    EXPECT_EQ(p1.provenance["seed"], 11);
}

TEST(Planners, GroupLimitedRoutersKeepTheSameCountPerGroup) {
    const s::fingerprint fp = make_fingerprint(3, 16, 4, {1, 2}, "deepseek2");
    const s::archive a = make_archive({"code", "en"}, fp);
    pl::rank_options o;
    o.protect_super = false;
    for (int64_t n : {8, 12}) {
        const reap::plan p = plan_for(a, o, n, 4, 2);
        for (const auto & l : p.layers) {
            std::vector<int> per(4, 0);
            for (int64_t e : l.keep) per[e / 4]++;
            for (int gi = 0; gi < 4; ++gi) EXPECT_EQ(per[gi], n / 4) << "layer " << l.layer << " group " << gi;
            EXPECT_EQ(l.keep, reference_topn(reference_scores(a, {}, "reap", l.layer), n, 4));
        }
    }
    std::string why;
    const auto f = facts_for(fp, 4, 2);
    EXPECT_FALSE(pl::keep_allowed(f, 10, why));
    EXPECT_NE(why.find("multiple"), std::string::npos) << why;
    EXPECT_FALSE(pl::keep_allowed(f, 4, why));   // one expert per group: llama.cpp scores groups by their best two
    EXPECT_NE(why.find("per group"), std::string::npos) << why;
    EXPECT_EQ(pl::allowed_keeps(f), (std::vector<int64_t>{8, 12, 16}));
    int64_t n = 0;
    std::string note, err;
    ASSERT_TRUE(pl::keep_from_ratio(0.3, f, n, note, err)) << err;   // 16 - 5 = 11 -> 8
    EXPECT_EQ(n, 8);
    EXPECT_NE(note.find("rounded down to 8"), std::string::npos) << note;
    EXPECT_FALSE(pl::keep_from_ratio(0.6, f, n, note, err));
    EXPECT_NE(err.find("allowed: 8..16 in steps of 4"), std::string::npos) << err;
}

TEST(Planners, SuperExpertsAreProtected) {
    const s::fingerprint fp = make_fingerprint(2, 16, 2, {0, 1});
    s::archive a = make_archive({"code", "en"}, fp);
    // the least salient expert of layer 1 gets a huge output norm in one token of "en"
    const auto sc = reference_scores(a, {}, "reap", 1);
    const int64_t weakest = std::min_element(sc.begin(), sc.end()) - sc.begin();
    a.find_domain("en")->max_norm[a.index(1, (int) weakest)] = 1000.0;
    pl::rank_options o;
    o.how = pl::method::reap;
    pl::ranking r;
    std::string err;
    ASSERT_TRUE(pl::rank_experts(a, 0, o, r, err)) << err;
    ASSERT_EQ(r.super_experts.size(), 1u);
    EXPECT_EQ(r.super_experts[0].layer, 1);
    EXPECT_EQ(r.super_experts[0].expert, weakest);
    EXPECT_EQ(r.super_experts[0].value, 1000.0);
    EXPECT_GT(r.super_threshold, 2.5);   // above every ordinary norm of the simulation
    reap::plan p;
    ASSERT_TRUE(pl::make_plan(r, facts_for(fp), 4, p, err)) << err;
    EXPECT_TRUE(std::count(p.layers[1].keep.begin(), p.layers[1].keep.end(), weakest));
    // the other three are the top-3 of the rest
    std::vector<double> rest = sc;
    rest[weakest] = 1e300;
    EXPECT_EQ(p.layers[1].keep, reference_topn(rest, 4));
    ASSERT_EQ(p.provenance["super_experts"].size(), 1u);
    EXPECT_EQ(p.provenance["super_experts"][0]["expert"], weakest);
    // layer 0 is untouched by the outlier
    EXPECT_EQ(p.layers[0].keep, reference_topn(reference_scores(a, {}, "reap", 0), 4));

    o.protect_super = false;
    ASSERT_TRUE(pl::rank_experts(a, 0, o, r, err)) << err;
    EXPECT_TRUE(r.super_experts.empty());
    EXPECT_EQ(r.super_candidates.size(), 1u);
    ASSERT_TRUE(pl::make_plan(r, facts_for(fp), 4, p, err)) << err;
    EXPECT_FALSE(std::count(p.layers[1].keep.begin(), p.layers[1].keep.end(), weakest));
    EXPECT_EQ(p.provenance["protect_super"], false);
    EXPECT_EQ(p.provenance["super_experts"].size(), 1u);   // still reported

    // energy archives have no max_norm: nothing is protected
    ASSERT_TRUE(pl::rank_experts(make_archive({"d"}, fp, s::metric_set::energy), 0, pl::rank_options{pl::method::energy}, r, err)) << err;
    EXPECT_TRUE(r.super_experts.empty());
    EXPECT_EQ(r.super_threshold, 0.0);
}

TEST(Planners, NeverRoutedExpertsGoFirst) {
    const s::fingerprint fp = make_fingerprint(2, 12, 2, {0, 1});
    s::archive a = s::make_archive(fp, s::metric_set::reap);
    saliency_test::sim_options so;
    so.never_routed = {2, 7, 11};
    saliency_test::simulate_domain(a, "code", so);
    so.seed = 8;
    so.never_routed = {2, 5};
    saliency_test::simulate_domain(a, "en", so);
    std::string err;
    ASSERT_TRUE(s::check_count_invariant(a, err)) << err;

    pl::rank_options o;
    o.how = pl::method::random;   // even a random order removes them first
    o.protect_super = false;
    o.seed = 3;
    pl::ranking r;
    ASSERT_TRUE(pl::rank_experts(a, 0, o, r, err)) << err;
    // never routed in any domain: expert 2 only (7, 11 are used by "en", 5 by "code")
    ASSERT_EQ(r.never_routed.size(), 2u);
    EXPECT_EQ(r.never_routed[0].expert, 2);
    EXPECT_EQ(r.never_routed[1].expert, 2);
    for (const auto & lr : r.layers) EXPECT_EQ(lr.order.back(), 2);
    reap::plan p;
    ASSERT_TRUE(pl::make_plan(r, facts_for(fp), 11, p, err)) << err;
    for (const auto & l : p.layers) EXPECT_FALSE(std::count(l.keep.begin(), l.keep.end(), 2));
    EXPECT_EQ(p.provenance["never_routed"].size(), 2u);

    // with --domains code, 2, 7 and 11 are never routed: the last three in the order
    o.domains = {"code"};
    ASSERT_TRUE(pl::rank_experts(a, 0, o, r, err)) << err;
    EXPECT_EQ(r.never_routed.size(), 6u);
    for (const auto & lr : r.layers) EXPECT_EQ(std::vector<int64_t>(lr.order.end() - 3, lr.order.end()), (std::vector<int64_t>{2, 7, 11}));
    ASSERT_TRUE(pl::make_plan(r, facts_for(fp), 9, p, err)) << err;
    for (const auto & l : p.layers) EXPECT_EQ(l.keep, (std::vector<int64_t>{0, 1, 3, 4, 5, 6, 8, 9, 10}));
}

TEST(Planners, InvalidRequestsGetClearErrors) {
    const s::fingerprint fp = make_fingerprint(3, 8, 2, {0, 2});
    const s::archive a = make_archive({"code", "en"}, fp);
    const auto f = facts_for(fp);
    std::string err;
    EXPECT_FALSE(pl::keep_allowed(f, 1, err));
    EXPECT_NE(err.find("below n_expert_used 2"), std::string::npos) << err;
    EXPECT_FALSE(pl::keep_allowed(f, 9, err));
    EXPECT_NE(err.find("out of range [2, 8]"), std::string::npos) << err;
    pl::ranking r;
    pl::rank_options o;
    o.domains = {"code", "fr"};
    EXPECT_FALSE(pl::rank_experts(a, 0, o, r, err));
    EXPECT_NE(err.find("unknown domain 'fr'"), std::string::npos) << err;
    o.domains.clear();
    o.how = pl::method::energy;
    EXPECT_FALSE(pl::rank_experts(a, 0, o, r, err));
    EXPECT_NE(err.find("--method energy ranks by the imatrix's energy_sum, which only archives from reap imatrix hold"), std::string::npos) << err;
    o.how = pl::method::reap;
    EXPECT_FALSE(pl::rank_experts(make_archive({"d"}, fp, s::metric_set::energy), 0, o, r, err));
    EXPECT_NE(err.find("use --method energy"), std::string::npos) << err;
    int64_t n;
    std::string note;
    EXPECT_FALSE(pl::keep_from_ratio(1.0, f, n, note, err));
    EXPECT_NE(err.find("[0, 1)"), std::string::npos) << err;
    EXPECT_FALSE(pl::keep_from_ratio(0.9, f, n, note, err));   // keeps 1 < n_expert_used
    EXPECT_NE(err.find("below n_expert_used"), std::string::npos) << err;
    ASSERT_TRUE(pl::keep_from_ratio(0.5, f, n, note, err)) << err;
    EXPECT_EQ(n, 4);
    ASSERT_TRUE(pl::keep_from_ratio(0.0, f, n, note, err)) << err;
    EXPECT_EQ(n, 8);
    // an archive of another model
    s::fingerprint other = fp;
    other.n_expert = 16;
    EXPECT_FALSE(s::fingerprints_match(other, fp, err));
    EXPECT_NE(err.find("another model"), std::string::npos) << err;
}

TEST(Planners, ParseSize) {
    uint64_t b = 0;
    std::string err;
    ASSERT_TRUE(pl::parse_size("512G", b, err)) << err;
    EXPECT_EQ(b, 512000000000ull);
    ASSERT_TRUE(pl::parse_size("277.5GB", b, err)) << err;
    EXPECT_EQ(b, 277500000000ull);
    ASSERT_TRUE(pl::parse_size("300GiB", b, err)) << err;
    EXPECT_EQ(b, 300ull << 30);
    ASSERT_TRUE(pl::parse_size("1.5mib", b, err)) << err;
    EXPECT_EQ(b, 1572864ull);
    ASSERT_TRUE(pl::parse_size("123456", b, err)) << err;
    EXPECT_EQ(b, 123456ull);
    ASSERT_TRUE(pl::parse_size("2T", b, err)) << err;
    EXPECT_EQ(b, 2000000000000ull);
    ASSERT_TRUE(pl::parse_size("10KB", b, err)) << err;
    EXPECT_EQ(b, 10000ull);
    for (const char * bad : {"", "G", "12XB", "1.2.3G", "-5G", "0", "1e3", "99999999999TB"}) {
        EXPECT_FALSE(pl::parse_size(bad, b, err)) << bad;
        EXPECT_FALSE(err.empty());
    }
    // the text of sizes: tests/test_number_format.cpp
}

TEST(Planners, CompareAndOracle) {
    const s::fingerprint fp = make_fingerprint(3, 8, 2, {0, 2});
    const s::archive a = make_archive({"code", "en"}, fp);
    pl::rank_options o;
    o.protect_super = false;
    const reap::plan p1 = plan_for(a, o, 4);
    o.how = pl::method::random;
    const reap::plan p2 = plan_for(a, o, 6);
    pl::plan_overlap ov;
    std::string err;
    ASSERT_TRUE(pl::compare_plans(p1, p1, ov, err)) << err;
    EXPECT_EQ(ov.mean_jaccard, 1.0);
    EXPECT_EQ(ov.mean_shared, 4.0);
    ASSERT_TRUE(pl::compare_plans(p1, p2, ov, err)) << err;
    for (size_t i = 0; i < ov.layers.size(); ++i) {
        std::vector<int64_t> inter;
        std::set_intersection(p1.layers[i].keep.begin(), p1.layers[i].keep.end(), p2.layers[i].keep.begin(), p2.layers[i].keep.end(),
                              std::back_inserter(inter));
        EXPECT_EQ(ov.layers[i].shared, (int64_t) inter.size());
        EXPECT_DOUBLE_EQ(ov.layers[i].jaccard, double(inter.size()) / double(10 - inter.size()));
    }
    // the reap plan is the oracle for the reap score (no super experts, no groups)
    pl::ranking r;
    o.how = pl::method::reap;
    ASSERT_TRUE(pl::rank_experts(a, 0, o, r, err)) << err;
    const auto s1 = pl::plan_share(r, p1), or1 = pl::oracle_share(r, 4);
    EXPECT_NEAR(s1.mean, or1.mean, 1e-12);
    EXPECT_LE(pl::plan_share(r, p2).mean, pl::oracle_share(r, 6).mean + 1e-12);
    // hand-checked share of layer 0
    const auto sc = reference_scores(a, {}, "reap", 0);
    double tot = 0, kept = 0;
    for (int e = 0; e < 8; ++e) tot += sc[e];
    for (int64_t e : p1.layers[0].keep) kept += sc[e];
    EXPECT_NEAR(s1.share[0], kept / tot, 1e-12);
    EXPECT_NEAR(p1.provenance["saliency_retained"]["mean"].get<double>(), s1.mean, 1e-12);
    // plans of different models
    reap::plan px = p1;
    px.n_expert = 16;
    EXPECT_FALSE(pl::compare_plans(p1, px, ov, err));
    EXPECT_NE(err.find("different models"), std::string::npos) << err;
    EXPECT_TRUE(pl::plan_matches_archive(p1, a, err)) << err;
    EXPECT_FALSE(pl::plan_matches_archive(px, a, err));
}

// --budget on zoo models: the predicted size is the size of the file the
// library prune path writes (stamped, unsplit and split), the next allowed N
// would not fit, and a budget under the smallest size is refused.
TEST(Planners, BudgetMatchesWrittenBytes) {
    std::string err;
    const std::string zoo = prune_test::zoo_dir("plan_zoo", err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("plan_budget");
    for (const std::string name : {"qwen3moe", "deepseek2"}) {
        g::model m;
        ASSERT_TRUE(g::open_model(zoo + "/" + name + ".gguf", m, err)) << err;
        reap::moe::layout lay;
        ASSERT_TRUE(reap::model_layout(m, lay, err)) << err;
        const auto facts = reap::facts_of(lay);
        s::fingerprint fp;
        ASSERT_TRUE(s::model_fingerprint(m, fp, err)) << err;
        const s::archive a = make_archive({"code", "en"}, fp);
        pl::ranking r;
        ASSERT_TRUE(pl::rank_experts(a, facts.n_group, pl::rank_options{}, r, err)) << err;
        const auto allowed = pl::allowed_keeps(facts);
        ASSERT_GE(allowed.size(), 2u) << name;

        for (uint64_t split : {0ull, 20000ull}) {
            pl::size_context ctx;
            ctx.model = &m;
            ctx.layout = &lay;
            ctx.prune.version = "test";
            ctx.prune.plan_sha256 = std::string(64, '0');
            ctx.write.split_max_bytes = split;
            // a budget between two allowed sizes
            reap::plan pmid, pnext;
            const int64_t mid = allowed[allowed.size() / 2], next = allowed[allowed.size() / 2 + 1];
            ASSERT_TRUE(pl::make_plan(r, facts, mid, pmid, err)) << err;
            ASSERT_TRUE(pl::make_plan(r, facts, next, pnext, err)) << err;
            uint64_t bmid = 0, bnext = 0;
            uint32_t sh = 0;
            ASSERT_TRUE(pl::pruned_bytes(ctx, pmid, bmid, sh, err)) << err;
            ASSERT_TRUE(pl::pruned_bytes(ctx, pnext, bnext, sh, err)) << err;
            ASSERT_LT(bmid, bnext);
            const uint64_t budget = bmid + (bnext - bmid) / 2;
            int64_t n = 0;
            std::vector<pl::size_point> table;
            ASSERT_TRUE(pl::fit_budget(r, facts, ctx, budget, true, n, table, err)) << err;
            EXPECT_EQ(n, mid) << name;
            ASSERT_FALSE(table.empty());
            // write it for real (stamp with the real plan hash: same length) and compare sizes
            reap::plan p;
            ASSERT_TRUE(pl::make_plan(r, facts, n, p, err)) << err;
            std::vector<std::string> written;
            const std::string out = dir + "/" + name + "-" + std::to_string(split) + ".gguf";
            ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/plan.json", out, written, err, true, split)) << err;
            uint64_t total = 0;
            for (const auto & w : written) total += prune_test::read_all(w).size();
            EXPECT_EQ(total, bmid) << name << " split " << split;
            EXPECT_LE(total, budget);
            if (split) EXPECT_GT(written.size(), 1u) << "expected a split set";
            for (const auto & pt : table) {
                if (pt.n_keep == next) EXPECT_GT(pt.bytes, budget);
                if (pt.n_keep == mid) EXPECT_EQ(pt.bytes, bmid);
            }
            // below the smallest size
            reap::plan pmin;
            ASSERT_TRUE(pl::make_plan(r, facts, allowed.front(), pmin, err)) << err;
            uint64_t bmin = 0;
            ASSERT_TRUE(pl::pruned_bytes(ctx, pmin, bmin, sh, err)) << err;
            EXPECT_FALSE(pl::fit_budget(r, facts, ctx, bmin - 1, false, n, table, err));
            EXPECT_NE(err.find("below the smallest prunable size"), std::string::npos) << err;
            ASSERT_TRUE(pl::fit_budget(r, facts, ctx, bmin, false, n, table, err)) << err;
            EXPECT_EQ(n, allowed.front());
        }
    }
}

TEST(Planners, SuperExpertsThatDoNotFitAreReported) {
    // 16 layers x 128 experts: the 99.5th percentile leaves room for ~10 super experts
    std::vector<int> layers(16);
    std::iota(layers.begin(), layers.end(), 0);
    const s::fingerprint fp = make_fingerprint(16, 128, 4, layers, "deepseek2");
    s::archive a = make_archive({"d"}, fp, s::metric_set::reap, 200);
    // three outliers in group 0 (experts 0..15) of layer 3; 8 groups, keep 16 = 2 per group
    a.domains[0].max_norm[a.index(3, 1)] = 1000;
    a.domains[0].max_norm[a.index(3, 6)] = 1001;
    a.domains[0].max_norm[a.index(3, 9)] = 1002;
    pl::ranking r;
    std::string err;
    ASSERT_TRUE(pl::rank_experts(a, 8, pl::rank_options{}, r, err)) << err;
    ASSERT_EQ(r.super_experts.size(), 3u);
    reap::plan p;
    ASSERT_TRUE(pl::make_plan(r, facts_for(fp, 8, 4), 16, p, err)) << err;
    const auto & keep = p.layers[3].keep;
    const int in_group0 = (int) std::count_if(keep.begin(), keep.end(), [](int64_t e) { return e < 16; });
    EXPECT_EQ(in_group0, 2);
    int kept_super = 0;
    for (int64_t e : {1, 6, 9}) kept_super += (int) std::count(keep.begin(), keep.end(), e);
    EXPECT_EQ(kept_super, 2);
    ASSERT_TRUE(p.provenance.contains("super_experts_not_kept"));
    EXPECT_EQ(p.provenance["super_experts_not_kept"].size(), 1u);
}

// Never-routed experts have no max_norm (0: nothing was measured); counting them
// in the percentile pulled the threshold down, so an archive whose experts are
// mostly dead flagged the top 0.5% of all cells, about 5% of the routed ones
// here (and 413 "super experts" on a real one). The percentile is of the
// routed experts: with no outlier among ~190 of them, at most 0.5% (one) pass.
TEST(Planners, SuperExpertThresholdIgnoresNeverRoutedExperts) {
    std::vector<int> layers(16);
    std::iota(layers.begin(), layers.end(), 0);
    const s::fingerprint fp = make_fingerprint(16, 128, 4, layers, "qwen3moe");
    s::archive a = make_archive({"d"}, fp, s::metric_set::reap, 200);
    size_t routed = 0;
    for (int l : layers) {
        for (int e = 0; e < 128; ++e) {
            const size_t i = a.index(l, e);
            s::domain_stats & d = a.domains[0];
            if (e >= 13) d.count[i] = d.gate_sum[i] = d.reap_sum[i] = d.ean_sum[i] = d.max_norm[i] = 0;
            routed += d.count[i] > 0;
        }
    }
    ASSERT_GE(routed, 150u);
    pl::ranking r;
    std::string err;
    ASSERT_TRUE(pl::rank_experts(a, 0, pl::rank_options{}, r, err)) << err;
    EXPECT_LE(r.super_candidates.size(), (size_t) std::ceil(0.005 * (double) routed)) << "threshold " << r.super_threshold;
    // an outlier among them is still found
    a.domains[0].max_norm[a.index(3, 1)] = 1000;
    ASSERT_TRUE(pl::rank_experts(a, 0, pl::rank_options{}, r, err)) << err;
    ASSERT_EQ(r.super_candidates.size(), 1u);
    EXPECT_EQ(r.super_candidates[0].layer, 3);
    EXPECT_EQ(r.super_candidates[0].expert, 1);
}

// The receipts (receipts.h) of small plans against a computation here: ranks
// within each domain (ties to the lower id), the best rank of a pruned expert,
// a domain that routed nothing in a layer ranking nothing there, per-domain
// shares, a plan that prunes nothing (no margin), and the recorded values a
// plan read back gives (older or damaged provenance: unset, no failure).
TEST(Planners, ReceiptsEqualAComputationHere) {
    const s::fingerprint fp = make_fingerprint(3, 16, 2, {0, 2});
    s::archive a = make_archive({"code", "en", "ja"}, fp);
    // "ja" routed nothing in layer 2: it ranks nothing there
    s::domain_stats & ja = *a.find_domain("ja");
    for (int64_t e = 0; e < 16; ++e) {
        const size_t i = a.index(2, (int) e);
        ja.count[i] = ja.gate_sum[i] = ja.reap_sum[i] = ja.ean_sum[i] = ja.max_norm[i] = 0;
    }
    for (const std::string method : {"reap", "frequency"}) {
        for (const std::vector<std::string> & doms : {std::vector<std::string>{}, std::vector<std::string>{"en", "ja"}}) {
            pl::rank_options o;
            ASSERT_TRUE(pl::parse_method(method, o.how));
            o.domains = doms;
            o.protect_super = false;
            pl::ranking r;
            std::string err;
            ASSERT_TRUE(pl::rank_experts(a, 0, o, r, err)) << err;
            reap::plan p;
            ASSERT_TRUE(pl::make_plan(r, facts_for(fp), 6, p, err)) << err;
            pl::receipts rc;
            ASSERT_TRUE(pl::plan_receipts(r, p, rc, err)) << err;
            ASSERT_EQ(rc.layers.size(), 2u);
            std::vector<double> layer_margins;
            for (size_t li = 0; li < 2; ++li) {
                const int l = p.layers[li].layer;
                const auto & keep = p.layers[li].keep;
                int64_t best = 0;
                for (size_t di = 0; di < a.domains.size(); ++di) {
                    const auto sc = reference_scores(a, {a.domains[di].name}, method, l);
                    double routed = 0;
                    for (int64_t e = 0; e < 16; ++e) routed += a.domains[di].count[a.index(l, (int) e)];
                    int64_t b = 0;
                    if (routed > 0) {
                        for (int64_t e = 0; e < 16; ++e) {
                            if (std::count(keep.begin(), keep.end(), e)) continue;
                            int64_t rank = 1;   // 1 + the experts ahead of e (higher score, or equal and lower id)
                            for (int64_t x = 0; x < 16; ++x) rank += sc[x] > sc[e] || (sc[x] == sc[e] && x < e);
                            if (b == 0 || rank < b) b = rank;
                        }
                    }
                    EXPECT_EQ(rc.layers[li].margin_by_domain[di], b) << method << " layer " << l << " " << a.domains[di].name;
                    const bool in = doms.empty() || std::count(doms.begin(), doms.end(), a.domains[di].name);
                    if (in && b > 0 && (best == 0 || b < best)) best = b;
                    double tot = 0, k = 0;
                    for (int64_t e = 0; e < 16; ++e) tot += sc[e];
                    for (int64_t e : keep) k += sc[e];
                    EXPECT_NEAR(rc.layers[li].share_by_domain[di], tot > 0 ? k / tot : 1.0, 1e-12);
                }
                EXPECT_EQ(rc.layers[li].margin, best) << method << " layer " << l;
                EXPECT_EQ(rc.layers[li].n_pruned, 10);
                layer_margins.push_back(double(best));
            }
            EXPECT_EQ(rc.layers[1].margin_by_domain[2], 0) << "ja routed nothing in layer 2";
            const pl::margin_summary ms = pl::summarize_margin(rc);
            EXPECT_EQ(ms.min, (int64_t) std::min(layer_margins[0], layer_margins[1]));
            EXPECT_DOUBLE_EQ(ms.median, (layer_margins[0] + layer_margins[1]) / 2);
            EXPECT_EQ(p.provenance["safety_margin"]["min"].get<int64_t>(), ms.min);
            EXPECT_TRUE(p.provenance["safety_margin"]["per_domain"][2]["per_layer"][1].is_null());
            pl::plan_provenance pv;
            ASSERT_TRUE(pl::read_plan_provenance(p.provenance, "p", pv, err)) << err;
            const pl::recorded_receipts & rec = pv.receipts;
            EXPECT_TRUE(rec.has_margin && rec.has_share && rec.has_dead && rec.has_super);
            EXPECT_EQ(rec.margin, ms.min);
        }
    }
    // nothing pruned: no margin, everything retained
    pl::ranking r;
    std::string err;
    ASSERT_TRUE(pl::rank_experts(a, 0, pl::rank_options{}, r, err)) << err;
    reap::plan all;
    ASSERT_TRUE(pl::make_plan(r, facts_for(fp), 16, all, err)) << err;
    EXPECT_TRUE(all.provenance["safety_margin"]["min"].is_null());
    EXPECT_EQ(all.provenance["saliency_retained"]["min"].get<double>(), 1.0);
    pl::plan_provenance pv;
    ASSERT_TRUE(pl::read_plan_provenance(all.provenance, "all", pv, err)) << err;
    EXPECT_TRUE(pv.receipts.margin_null);
    // damaged provenance: an error naming the field (older plans: PlanProvenance.EveryFieldReadIsTypeChecked)
    EXPECT_FALSE(pl::read_plan_provenance({{"saliency_retained", {{"mean", "x"}}}}, "old", pv, err));
    EXPECT_NE(err.find("provenance.saliency_retained.mean"), std::string::npos) << err;
    // a plan for another set of layers is refused with the layer named
    reap::plan other = all;
    other.layers[1].layer = 1;
    pl::receipts rc;
    EXPECT_FALSE(pl::plan_receipts(r, other, rc, err));
    EXPECT_NE(err.find("layer 1"), std::string::npos) << err;
}

TEST(Summary, CountMinMedianMaxAndFirstFew) {
    const reap::util::summary odd = reap::util::summarize({5, 1, 3});
    EXPECT_EQ(odd.count, 3u);
    EXPECT_EQ(odd.min, 1);
    EXPECT_EQ(odd.median, 3);
    EXPECT_EQ(odd.max, 5);
    EXPECT_EQ(odd.mean, 3);
    EXPECT_EQ(reap::util::summarize({4, 1, 3, 10}).median, 3.5);
    EXPECT_EQ(reap::util::summarize({}).count, 0u);
    std::vector<std::string> v;
    for (int i = 0; i < 12; ++i) v.push_back(std::to_string(i));
    EXPECT_EQ(reap::util::first_few(v), "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11");
    v.push_back("12");
    EXPECT_EQ(reap::util::first_few(v), "0, 1, 2, 3, 4, 5, ... (+7 more)");
    EXPECT_EQ(reap::util::min_median_max(odd), "min 1, median 3, max 5");
}

// Width planning: each kept expert keeps its K highest-scoring channels (ties
// to the lower id, NaN last), listed ascending; the result is a valid width
// plan; bad widths and score counts are refused naming layer and expert.
TEST(Planners, WidthKeepsEachExpertsBestChannels) {
    namespace pl = reap::planner;
    EXPECT_EQ(pl::top_channels({0.5, 3.0, 1.0, 3.0, 2.0, -1.0}, 3), (std::vector<int64_t>{1, 3, 4}));
    EXPECT_EQ(pl::top_channels({1.0, 1.0, 1.0, 1.0}, 2), (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(pl::top_channels({NAN, 0.0, -5.0}, 2), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(pl::top_channels({2.0, 1.0}, 2), (std::vector<int64_t>{0, 1}));

    reap::plan p;
    p.arch = "qwen3moe";
    p.n_layer = 2;
    p.n_expert = 4;
    p.n_expert_used = 1;
    p.n_keep = 2;
    p.layers = {{0, {3, 1}, {}}, {1, {0, 2}, {}}};
    // expert e of layer l scores channel c as ((c * (e + 2) + l) mod 8): a different order per expert
    auto scores = [](int layer, int64_t e, std::vector<double> & s, std::string &) {
        s.resize(8);
        for (int64_t c = 0; c < 8; ++c) s[size_t(c)] = double((c * (e + 2) + layer) % 8);
        return true;
    };
    std::string err;
    ASSERT_TRUE(pl::add_width(p, 8, 3, scores, err)) << err;
    EXPECT_EQ(p.width_n_ff, 8);
    EXPECT_EQ(p.width_keep, 3);
    for (const auto & l : p.layers) {
        ASSERT_EQ(l.channels.size(), 2u);
        for (size_t k = 0; k < 2; ++k) {
            std::vector<double> s;
            scores(l.layer, l.keep[k], s, err);
            // the reference: every channel outside the list scores at most the list's lowest
            double lowest = INFINITY;
            for (int64_t c : l.channels[k]) lowest = std::min(lowest, s[size_t(c)]);
            for (int64_t c = 0; c < 8; ++c) {
                if (std::find(l.channels[k].begin(), l.channels[k].end(), c) == l.channels[k].end()) EXPECT_LE(s[size_t(c)], lowest);
            }
            EXPECT_TRUE(std::is_sorted(l.channels[k].begin(), l.channels[k].end()));
        }
    }
    // layer 0, expert 3: scores (5c) mod 8 = 0,5,2,7,4,1,6,3 -> the best three are channels 3 (7), 6 (6), 1 (5)
    EXPECT_EQ(p.layers[0].channels[0], (std::vector<int64_t>{1, 3, 6}));
    reap::plan q;
    ASSERT_TRUE(reap::parse_plan(reap::plan_text(p), "t.json", q, err)) << err;
    EXPECT_EQ(reap::plan_to_json(p), reap::plan_to_json(q));

    EXPECT_FALSE(pl::add_width(p, 8, 9, scores, err));
    EXPECT_NE(err.find("width 9 out of range [1, 8]"), std::string::npos) << err;
    auto short_scores = [](int, int64_t, std::vector<double> & s, std::string &) { s.assign(7, 1.0); return true; };
    EXPECT_FALSE(pl::add_width(p, 8, 3, short_scores, err));
    EXPECT_NE(err.find("layer 0 expert 3: 7 channel scores, the experts have 8 channels"), std::string::npos) << err;
}

// llama4's shared expert (cut with the routed ones): the planner keeps, per
// layer, the K shared channels with the largest archive score of the asked
// metric summed over the plan's domains (sh_reap / sh_energy), computed here
// from the raw arrays; the plan's text round-trips them as
// "shared_channel_bitmap". An archive without shared statistics is refused,
// saying how to make one; an unknown domain, naming it.
TEST(WidthPlanner, SharedChannelsFromTheArchive) {
    s::archive a = make_archive({"code", "en", "ja"}, make_fingerprint(2, 4, 1, {0, 1}, "llama4"));
    saliency_test::add_channels(a, 8);
    std::string err;
    pl::shared_channel_scores shared;
    EXPECT_FALSE(pl::archive_shared_channel_scores(a, "sal.gguf", {}, pl::channel_score::reap, 8, shared, err));
    EXPECT_NE(err.find("sal.gguf has no channel scores of the shared expert"), std::string::npos) << err;
    EXPECT_NE(err.find("reap calibrate --width-saliency"), std::string::npos) << err;

    a.has_shared_channels = true;
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (auto & d : a.domains) {
        d.sh_energy.resize(a.n_shared_channel_values());
        d.sh_reap.resize(a.n_shared_channel_values());
        for (double & v : d.sh_energy) v = u(rng);
        for (double & v : d.sh_reap) v = u(rng) - 0.3;
    }
    // the reference: layer l's sum over `domains` of `metric`, its K best channels ascending (ties to the lower id)
    auto reference = [&](const std::vector<std::string> & domains, bool reap, int layer, int64_t K) {
        std::vector<std::pair<double, int64_t>> by;
        for (int64_t c = 0; c < 8; ++c) {
            double sum = 0;
            for (const auto & d : a.domains) {
                if (!domains.empty() && std::find(domains.begin(), domains.end(), d.name) == domains.end()) continue;
                sum += (reap ? d.sh_reap : d.sh_energy)[size_t(layer) * 8 + size_t(c)];
            }
            by.push_back({-sum, c});
        }
        std::sort(by.begin(), by.end());
        std::vector<int64_t> keep;
        for (int64_t j = 0; j < K; ++j) keep.push_back(by[size_t(j)].second);
        std::sort(keep.begin(), keep.end());
        return keep;
    };
    pl::channel_scores routed;
    ASSERT_TRUE(pl::archive_channel_scores(a, "sal.gguf", {}, pl::channel_score::reap, 8, routed, err)) << err;
    for (const auto & [domains, score] : std::vector<std::pair<std::vector<std::string>, pl::channel_score>>{
             {{}, pl::channel_score::reap}, {{"ja", "code"}, pl::channel_score::energy}}) {
        ASSERT_TRUE(pl::archive_shared_channel_scores(a, "sal.gguf", domains, score, 8, shared, err)) << err;
        reap::plan p;
        p.arch = "llama4";
        p.n_layer = 2;
        p.n_expert = 4;
        p.n_expert_used = 1;
        p.n_keep = 2;
        p.layers = {{0, {3, 1}, {}, {}}, {1, {0, 2}, {}, {}}};
        ASSERT_TRUE(pl::add_width(p, 8, 3, routed, err, shared)) << err;
        for (const auto & l : p.layers) {
            EXPECT_EQ(l.shared_channels, reference(domains, score == pl::channel_score::reap, l.layer, 3)) << "layer " << l.layer;
        }
        const std::string text = reap::plan_text(p);
        EXPECT_NE(text.find("\"shared_channel_bitmap\": \"" + reap::channel_bitmap(p.layers[1].shared_channels, 8) + "\""),
                  std::string::npos) << text;
        reap::plan q;
        ASSERT_TRUE(reap::parse_plan(text, "t.json", q, err)) << err;
        for (size_t i = 0; i < p.layers.size(); ++i) EXPECT_EQ(q.layers[i].shared_channels, p.layers[i].shared_channels);
    }
    EXPECT_FALSE(pl::archive_shared_channel_scores(a, "sal.gguf", {"fr"}, pl::channel_score::reap, 8, shared, err));
    EXPECT_NE(err.find("unknown domain 'fr'"), std::string::npos) << err;
}

// ---- the rerank statistic of a width plan (plan/width_rerank.h) -----------------

// Spearman's rho: a case with ties worked by hand (average ranks, then
// Pearson), and tie-free random data against the textbook formula
// 1 - 6 Σd² / (n (n² - 1)), which holds only without ties.
TEST(WidthRerank, SpearmanAgainstHandAndTheTieFreeFormula) {
    // x ranks 1..5; y = {5, 6, 7, 8, 7} ranks {1, 2, 3.5, 5, 3.5}: Σdxdy = 8, Σdx² = 10, Σdy² = 9.5
    EXPECT_NEAR(pl::spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 8.0 / std::sqrt(95.0), 1e-12);
    EXPECT_DOUBLE_EQ(pl::spearman({1, 2, 3}, {30, 20, 10}), -1.0);
    EXPECT_TRUE(std::isnan(pl::spearman({1}, {2})));
    EXPECT_TRUE(std::isnan(pl::spearman({1, 2, 3}, {4, 4, 4})));
    std::mt19937 rng(3);
    for (int trial = 0; trial < 20; ++trial) {
        const size_t n = 5 + rng() % 40;
        std::vector<double> x(n), y(n);
        std::vector<int> px(n), py(n);
        std::iota(px.begin(), px.end(), 1);
        std::iota(py.begin(), py.end(), 1);
        std::shuffle(px.begin(), px.end(), rng);
        std::shuffle(py.begin(), py.end(), rng);
        double d2 = 0;
        for (size_t i = 0; i < n; ++i) {
            x[i] = std::exp(0.1 * px[i]);   // distinct values whose ranks are px, py
            y[i] = -1.0 / py[i];
            d2 += double(px[i] - py[i]) * double(px[i] - py[i]);
        }
        const double want = 1.0 - 6.0 * d2 / (double(n) * (double(n) * double(n) - 1.0));
        EXPECT_NEAR(pl::spearman(x, y), want, 1e-12) << "n = " << n;
    }
}

// rerank_of on a plan of three layers whose channel scores are given here:
// full = Σ of an expert's scores, restricted = Σ over its kept channels, ranked
// by hand. Layer 3 ranks the same both ways (1); layer 5 moves every expert
// (Σd² = 12 over 4 experts: 1 - 72/60 = -0.2); layer 7's experts all score the
// same (undefined, left out of min and median).
TEST(WidthRerank, PerLayerFromTheChannelScores) {
    reap::plan p;
    p.width_n_ff = 4;
    p.width_keep = 2;
    p.n_keep = 4;
    const std::map<int, std::vector<std::vector<double>>> table = {
        {3, {{4, 3, 2, 1}, {1, 1, 1, 1}, {0, 0, 5, 6}, {2, 2, 2, 2}}},
        {5, {{10, 0, 0, 0}, {1, 1, 1, 1}, {3, 3, 0, 0}, {0, 0, 0, 8}}},
        {7, {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}}};
    p.layers = {{3, {0, 1, 2, 3}, {{0, 1}, {2, 3}, {2, 3}, {0, 3}}},
                {5, {3, 2, 1, 0}, {{0, 3}, {0, 1}, {0, 1}, {1, 2}}},
                {7, {0, 1, 2, 3}, {{0, 1}, {0, 1}, {0, 1}, {0, 1}}}};
    const pl::channel_scores scores = [&](int layer, int64_t e, std::vector<double> & out, std::string &) {
        out = table.at(layer)[size_t(e)];
        return true;
    };
    pl::width_rerank rr;
    std::string err;
    ASSERT_TRUE(pl::rerank_of(p, scores, rr, err)) << err;
    ASSERT_EQ(rr.layers, (std::vector<int>{3, 5, 7}));
    EXPECT_NEAR(rr.spearman[0], 1.0, 1e-12);
    EXPECT_NEAR(rr.spearman[1], -0.2, 1e-12);
    EXPECT_TRUE(std::isnan(rr.spearman[2]));
    EXPECT_EQ(rr.n_defined, 2u);
    EXPECT_NEAR(rr.min, -0.2, 1e-12);
    EXPECT_NEAR(rr.median, 0.4, 1e-12);

    const pl::channel_scores short_scores = [](int, int64_t, std::vector<double> & out, std::string &) {
        out = {1, 2, 3};
        return true;
    };
    EXPECT_FALSE(pl::rerank_of(p, short_scores, rr, err));
    EXPECT_NE(err.find("layer 3 expert 0: 3 channel scores for experts of 4 channels"), std::string::npos) << err;
}

// Each criterion needs its statistic: an archive without it is refused, saying
// why and what the archive can rank by.
TEST(Planners, AMethodWithoutItsStatisticIsRefusedSayingWhy) {
    const s::fingerprint fp = make_fingerprint(2, 8, 2, {0, 1});
    const s::archive old = make_archive({"d"}, fp);                       // before squared norms
    const s::archive now = make_archive({"d"}, fp, s::metric_set::reap, 200, /*sq_norms=*/true);
    const s::archive im = make_archive({"d"}, fp, s::metric_set::energy);
    s::archive w = s::make_archive(fp, s::metric_set::weights);
    w.add_domain("weights");
    for (int l : fp.moe_layers) {
        for (uint32_t e = 0; e < fp.n_expert; ++e) w.domains[0].aimer[w.index(l, e)] = 0.7 + 0.01 * e;
    }
    struct cse { const char * method; const s::archive * a; const char * said; };
    const std::vector<cse> cases = {
        {"msan", &old, "which archives record from version 4 on"},
        {"aimer", &now, "make its archive with reap score"},
        {"man", &im, "not of the expert's output"},
        {"msan", &im, "not of the expert's output"},
        {"reap", &w, "use --method aimer or random"},
        {"frequency", &w, "a weights archive saw no token"},
    };
    for (const auto & c : cases) {
        pl::rank_options o;
        ASSERT_TRUE(pl::parse_method(c.method, o.how));
        pl::ranking r;
        std::string err;
        EXPECT_FALSE(pl::rank_experts(*c.a, 0, o, r, err)) << c.method;
        EXPECT_NE(err.find(c.said), std::string::npos) << c.method << ": " << err;
    }
    for (const char * m : {"man", "msan", "ean", "reap"}) {
        pl::rank_options o;
        ASSERT_TRUE(pl::parse_method(m, o.how));
        pl::ranking r;
        std::string err;
        EXPECT_TRUE(pl::rank_experts(now, 0, o, r, err)) << m << ": " << err;
    }
    // a weights archive ranks by aimer when no method is given, and its flattest expert goes first
    EXPECT_EQ(pl::default_method(s::metric_set::weights), pl::method::aimer);
    pl::rank_options o;
    o.how = pl::method::aimer;
    pl::ranking r;
    std::string err;
    ASSERT_TRUE(pl::rank_experts(w, 0, o, r, err)) << err;
    EXPECT_EQ(r.layers[0].order.front(), 0);   // lowest AIMER: kept first
    EXPECT_EQ(r.layers[0].order.back(), 7);    // highest: removed first
    EXPECT_TRUE(r.never_routed.empty());
    EXPECT_TRUE(r.dead.empty());
}

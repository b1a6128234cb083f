// test_plan_receipts.cpp: the receipts the plan library (plan/choose.h) records,
// prints (print_plan_report) and gives as JSON (plan_choice_json, what
// `reap plan --json` prints), and the comparison (plan/compare.h) shows side by side, at the dims of the public
// K3-class builds: 92 MoE layers x 896 experts, 5 domains, a generated archive
// and a sparse model (~60 MB apparent, a few MB on disk). Every number is
// checked against one computed here from the archive itself (ranks, shares,
// dead experts, super-expert ratios: no library call), and the terminal
// output stays a screenful (under 40 lines) however many layers and experts.
// In-process: links only reap_core, runs no binary (the commands' own parsing
// and exit statuses: test_cli_plan.cpp).
#include "gguf_test_util.h"

#include "gguf/gguf.h"
#include "plan/choose.h"
#include "plan/compare.h"
#include "plan/plan.h"
#include "saliency/archive.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fcntl.h>
#include <map>
#include <set>
#include <unistd.h>

namespace g  = reap::gguf;
namespace pl = reap::planner;
namespace sl = reap::saliency;
using gguf_test::scratch_dir;

namespace {

constexpr int     kLayers = 92;
constexpr int64_t kE = 896, kD = 8, kF = 8, kUsed = 8;
const std::vector<std::string> kDomains = {"en", "code", "ja", "zh", "math"};

std::string read_text(const std::string & path) {
    const auto b = gguf_test::read_all(path);
    return std::string(b.begin(), b.end());
}

// What `f` writes to a FILE *, as a string.
template <typename F> std::string printed(F f) {
    char * buf = nullptr;
    size_t len = 0;
    FILE * mem = open_memstream(&buf, &len);
    if (!mem) return "";
    f(mem);
    fclose(mem);
    std::string s(buf, len);
    free(buf);
    return s;
}

// `reap plan` as library calls: choose_plan, then the report print_plan_report
// prints (or with `json` the document plan_choice_json gives) into `out`, and
// the plan written to req.output unless a dry run. The command prints one line
// more after the report ("wrote PLAN.json"). On failure `out` holds the error.
bool run_plan(const pl::plan_request & req, bool json, std::string & out, double * seconds = nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    pl::plan_choice c;
    reap::util::error err;
    if (!pl::choose_plan(req, c, err)) {
        out = err.message;
        return false;
    }
    out = json ? pl::plan_choice_json(req, c).dump(2) + "\n"
               : printed([&](FILE * f) { pl::print_plan_report(f, req, c); });
    std::string werr;
    if (!req.dry_run && !reap::write_plan(c.p, req.output, req.force, werr)) {
        out = werr;
        return false;
    }
    if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return true;
}

// A plan request for `sal` on `model` written to `output` (keep, ratio or budget left to the caller).
pl::plan_request plan_req(const std::string & sal, const std::string & model, const std::string & output) {
    pl::plan_request req;
    req.saliency = sal;
    req.model = model;
    req.output = output;
    req.force = true;
    req.version = "receipts-test";
    return req;
}

// `reap compare` as library calls: compare_plan_files, then print_comparison
// (or with `json` comparison_json) into `out`.
bool run_compare(const std::string & a, const std::string & b, const std::string & sal, bool json, std::string & out,
                 double * seconds = nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    pl::compare_request req;
    req.plan_a = a;
    req.plan_b = b;
    req.saliency = sal;
    pl::plan_comparison c;
    reap::util::error err;
    if (!pl::compare_plan_files(req, c, err)) {
        out = err.message;
        return false;
    }
    out = json ? pl::comparison_json(req, c).dump(2) + "\n"
               : printed([&](FILE * f) { pl::print_comparison(f, req, c); });
    if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return true;
}

size_t lines_of(const std::string & s) { return (size_t) std::count(s.begin(), s.end(), '\n'); }

g::output_tensor tensor(const std::string & name, std::vector<int64_t> ne, const std::string & blank) {
    g::output_tensor t;
    t.name = name;
    t.type = g::tensor_type::F32;
    t.n_dims = (uint32_t) ne.size();
    uint64_t n = 4;
    for (size_t d = 0; d < ne.size(); ++d) {
        t.ne[d] = ne[d];
        n *= (uint64_t) ne[d];
    }
    t.pieces.push_back({blank, 0, n});   // zeros from a sparse file: no disk
    return t;
}

// qwen3moe, 92 blocks, every one MoE with 896 experts; all data are holes.
void write_model(const std::string & path, const std::string & blank) {
    g::output_spec spec;
    auto & kv = spec.kvs;
    kv.set_string("general.architecture", "qwen3moe");
    kv.set_string("general.name", "reap receipts fixture");
    kv.set_u32("qwen3moe.block_count", kLayers);
    kv.set_u32("qwen3moe.context_length", 256);
    kv.set_u32("qwen3moe.embedding_length", (uint32_t) kD);
    kv.set_u32("qwen3moe.expert_count", (uint32_t) kE);
    kv.set_u32("qwen3moe.expert_used_count", (uint32_t) kUsed);
    kv.set_u32("qwen3moe.expert_feed_forward_length", (uint32_t) kF);
    kv.set_f32("qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
    spec.tensors.push_back(tensor("token_embd.weight", {kD, 16}, blank));
    for (int l = 0; l < kLayers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        spec.tensors.push_back(tensor(b + "attn_norm.weight", {kD}, blank));
        spec.tensors.push_back(tensor(b + "ffn_gate_inp.weight", {kD, kE}, blank));
        spec.tensors.push_back(tensor(b + "ffn_gate_exps.weight", {kD, kF, kE}, blank));
        spec.tensors.push_back(tensor(b + "ffn_up_exps.weight", {kD, kF, kE}, blank));
        spec.tensors.push_back(tensor(b + "ffn_down_exps.weight", {kF, kD, kE}, blank));
    }
    spec.tensors.push_back(tensor("output_norm.weight", {kD}, blank));
    std::vector<std::string> written;
    std::string err;
    g::write_options wo;
    wo.force = true;
    wo.sync = false;
    ASSERT_TRUE(g::write_output(spec, wo, path, written, err)) << err;
}

uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
double unit(uint64_t a, uint64_t b, uint64_t c) { return double(mix(mix(mix(a) ^ b) ^ c) >> 11) / 9007199254740992.0; }

// The 11 dead instances (no token in any domain) and the two super experts.
const std::vector<std::pair<int, int64_t>> kDead = {{3, 17}, {3, 200}, {5, 1}, {12, 895}, {12, 0}, {40, 77},
                                                    {41, 77}, {60, 500}, {60, 501}, {60, 502}, {91, 3}};
const std::vector<std::pair<int, int64_t>> kSuper = {{12, 160}, {28, 132}};

// Each domain: a per-layer popularity shared by all domains times a domain
// factor, so domains agree roughly but not exactly; ~8% of the cells of a
// domain other than the first see no token; `sparse` leaves all but 16 experts per layer unrouted
// (the K3-dims imatrix case: 880 never-routed experts per layer).
sl::archive make_archive(const sl::fingerprint & fp, bool sparse) {
    sl::archive a = sl::make_archive(fp, sl::metric_set::reap);
    for (size_t di = 0; di < kDomains.size(); ++di) {
        sl::domain_stats & d = a.add_domain(kDomains[di]);
        d.n_tokens = 10000;
        for (int l = 0; l < kLayers; ++l) {
            for (int64_t e = 0; e < kE; ++e) {
                const size_t i = a.index(l, (int) e);
                const bool dead = std::find(kDead.begin(), kDead.end(), std::make_pair(l, e)) != kDead.end();
                const bool is_super = std::find(kSuper.begin(), kSuper.end(), std::make_pair(l, e)) != kSuper.end();
                if (dead || (sparse && (e % 56) != 0) || (!is_super && di > 0 && unit(di, l, e) < 0.08)) continue;
                const double pop = unit(99, l, e), own = unit(di + 10, l, e);
                d.count[i] = std::floor(1 + 300 * pop * pop * (0.5 + own));
                // an expert's quality is mostly its own, a little the domain's
                const double gate = 0.05 + 0.3 * (0.9 * unit(20, l, e) + 0.1 * unit(di + 21, l, e));
                const double norm = 0.5 + 2.0 * (0.9 * unit(30, l, e) + 0.1 * unit(di + 31, l, e));
                d.gate_sum[i] = d.count[i] * gate;
                d.reap_sum[i] = d.count[i] * gate * norm;
                d.ean_sum[i] = d.count[i] * norm;
                d.max_norm[i] = norm * 1.5;
                if (is_super) d.max_norm[i] = di == 1 ? 900.0 + 100.0 * l : 4.0;
            }
        }
    }
    return a;
}

// ---- the reference, computed here from the archive ----------------------------------

double score_of(const sl::domain_stats & d, size_t i, const std::string & method) {
    if (method == "frequency") return d.count[i];
    return d.count[i] > 0 ? d.reap_sum[i] / d.count[i] : 0.0;
}

// 1-based ranks of the experts of layer l in domain d (ties to the lower id);
// empty when the domain routed no token in the layer.
std::vector<int64_t> ranks(const sl::archive & a, const sl::domain_stats & d, int l, const std::string & method) {
    double routed = 0;
    for (int64_t e = 0; e < kE; ++e) routed += d.count[a.index(l, (int) e)];
    if (routed == 0) return {};
    std::vector<int64_t> ids(kE);
    std::vector<double> score(kE);   // each expert's score once, not once per comparison
    for (int64_t e = 0; e < kE; ++e) {
        ids[e] = e;
        score[e] = score_of(d, a.index(l, (int) e), method);
    }
    std::sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) {
        return score[x] != score[y] ? score[x] > score[y] : x < y;
    });
    std::vector<int64_t> r(kE);
    for (int64_t k = 0; k < kE; ++k) r[ids[k]] = k + 1;
    return r;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct reference {
    std::vector<int64_t> layer_margin;                  // over `domains`
    std::vector<std::vector<int64_t>> domain_margin;    // [domain][layer], all archive domains
    std::vector<double> layer_share;                    // over `domains`, summed
    std::vector<std::vector<double>> domain_share;      // [domain][layer]
};

// The receipts of keep-lists `keep` (per layer), scored by `method` over `domains`.
reference compute(const sl::archive & a, const std::vector<std::vector<int64_t>> & keep, const std::string & method,
                  const std::vector<std::string> & domains) {
    reference r;
    r.domain_margin.assign(a.domains.size(), {});
    r.domain_share.assign(a.domains.size(), {});
    for (int l = 0; l < kLayers; ++l) {
        std::vector<bool> kept(kE, false);
        for (int64_t e : keep[l]) kept[e] = true;
        int64_t best = 0;
        for (size_t di = 0; di < a.domains.size(); ++di) {
            const auto rk = ranks(a, a.domains[di], l, method);
            int64_t b = 0;
            for (int64_t e = 0; e < kE && !rk.empty(); ++e) {
                if (!kept[e] && (b == 0 || rk[e] < b)) b = rk[e];
            }
            r.domain_margin[di].push_back(b);
            const bool in = std::find(domains.begin(), domains.end(), a.domains[di].name) != domains.end();
            if (in && b > 0 && (best == 0 || b < best)) best = b;
            double tot = 0, k = 0;
            for (int64_t e = 0; e < kE; ++e) {
                const double s = score_of(a.domains[di], a.index(l, (int) e), method);
                tot += s;
                k += kept[e] ? s : 0;
            }
            r.domain_share[di].push_back(tot > 0 ? k / tot : 1.0);
        }
        r.layer_margin.push_back(best);
        // summed over the plan's domains: Σ reap_sum / Σ count (or Σ count)
        std::vector<double> cnt(kE, 0), rs(kE, 0);
        for (const auto & d : a.domains) {
            if (std::find(domains.begin(), domains.end(), d.name) == domains.end()) continue;
            for (int64_t e = 0; e < kE; ++e) {
                cnt[e] += d.count[a.index(l, (int) e)];
                rs[e] += d.reap_sum[a.index(l, (int) e)];
            }
        }
        double tot = 0, k = 0;
        for (int64_t e = 0; e < kE; ++e) {
            const double s = method == "frequency" ? cnt[e] : cnt[e] > 0 ? rs[e] / cnt[e] : 0.0;
            tot += s;
            k += kept[e] ? s : 0;
        }
        r.layer_share.push_back(tot > 0 ? k / tot : 1.0);
    }
    return r;
}

std::vector<std::vector<int64_t>> keeps_of(const nlohmann::json & plan) {
    std::vector<std::vector<int64_t>> k;
    for (const auto & l : plan.at("layers")) k.push_back(l.at("keep").get<std::vector<int64_t>>());
    return k;
}

std::pair<int64_t, double> min_median(const std::vector<int64_t> & v) {
    std::vector<double> x;
    for (int64_t r : v) {
        if (r > 0) x.push_back(double(r));
    }
    return {x.empty() ? 0 : (int64_t) *std::min_element(x.begin(), x.end()), x.empty() ? 0.0 : median(x)};
}

// Checks a plan's recorded receipts against the reference.
void check_receipts(const sl::archive & a, const nlohmann::json & plan, const std::string & method, const std::vector<std::string> & domains) {
    const reference ref = compute(a, keeps_of(plan), method, domains);
    const nlohmann::json & pv = plan.at("provenance");
    const nlohmann::json & sm = pv.at("safety_margin");
    const auto [mn, md] = min_median(ref.layer_margin);
    ASSERT_GT(mn, 0);
    EXPECT_EQ(sm.at("min").get<int64_t>(), mn) << method;
    EXPECT_DOUBLE_EQ(sm.at("median").get<double>(), md) << method;
    EXPECT_EQ(sm.at("n_expert").get<int64_t>(), kE);
    ASSERT_EQ(sm.at("per_layer").size(), (size_t) kLayers);
    for (int l = 0; l < kLayers; ++l) {
        ASSERT_EQ(sm["per_layer"][l].at("layer").get<int>(), l);
        ASSERT_EQ(sm["per_layer"][l].at("rank").get<int64_t>(), ref.layer_margin[l]) << method << " layer " << l;
    }
    // the worst layer's expert and domain really hold that rank
    const nlohmann::json & w = sm.at("worst");
    const int wl = w.at("layer").get<int>();
    const sl::domain_stats * wd = a.find_domain(w.at("domain").get<std::string>());
    ASSERT_NE(wd, nullptr);
    EXPECT_EQ(ref.layer_margin[wl], mn);
    EXPECT_EQ(ranks(a, *wd, wl, method)[w.at("expert").get<int64_t>()], mn);
    ASSERT_EQ(sm.at("per_domain").size(), a.domains.size());
    for (size_t di = 0; di < a.domains.size(); ++di) {
        const nlohmann::json & pd = sm["per_domain"][di];
        EXPECT_EQ(pd.at("domain"), a.domains[di].name);
        const auto [dmn, dmd] = min_median(ref.domain_margin[di]);
        EXPECT_EQ(pd.at("min").get<int64_t>(), dmn) << a.domains[di].name;
        EXPECT_DOUBLE_EQ(pd.at("median").get<double>(), dmd) << a.domains[di].name;
        for (int l = 0; l < kLayers; ++l) ASSERT_EQ(pd["per_layer"][l].get<int64_t>(), ref.domain_margin[di][l]);
    }
    const nlohmann::json & sr = pv.at("saliency_retained");
    double mean = 0;
    for (double x : ref.layer_share) mean += x / kLayers;
    EXPECT_NEAR(sr.at("mean").get<double>(), mean, 1e-12);
    EXPECT_NEAR(sr.at("min").get<double>(), *std::min_element(ref.layer_share.begin(), ref.layer_share.end()), 1e-12);
    EXPECT_NEAR(sr.at("median").get<double>(), median(ref.layer_share), 1e-12);
    EXPECT_NEAR(sr.at("max").get<double>(), *std::max_element(ref.layer_share.begin(), ref.layer_share.end()), 1e-12);
    for (int l = 0; l < kLayers; ++l) ASSERT_NEAR(sr["per_layer"][l].at("share").get<double>(), ref.layer_share[l], 1e-12);
    for (size_t di = 0; di < a.domains.size(); ++di) {
        const nlohmann::json & pd = sr.at("per_domain")[di];
        double m = 0;
        for (double x : ref.domain_share[di]) m += x / kLayers;
        EXPECT_NEAR(pd.at("mean").get<double>(), m, 1e-12) << a.domains[di].name;
        EXPECT_NEAR(pd.at("median").get<double>(), median(ref.domain_share[di]), 1e-12);
        for (int l = 0; l < kLayers; ++l) ASSERT_NEAR(pd["per_layer"][l].get<double>(), ref.domain_share[di][l], 1e-12);
    }
}

struct fixture {
    std::string     dir, model, sal;
    sl::fingerprint fp;
    sl::archive     a;
};

// The model and both archives in a scratch dir of the test's own (ctest runs
// the tests of this file as separate, possibly parallel, processes).
const fixture & fx() {
    static fixture f;
    static bool made = false;
    if (made) return f;
    made = true;
    f.dir = scratch_dir(std::string("plan-receipts-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const auto t0 = std::chrono::steady_clock::now();
    const std::string blank = f.dir + "/blank";
    const int fd = ::open(blank.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, (off_t) (kD * kF * kE * 4)), 0);
    ::close(fd);
    f.model = f.dir + "/k.gguf";
    write_model(f.model, blank);
    ::unlink(blank.c_str());
    g::model m;
    std::string err;
    EXPECT_TRUE(g::open_model(f.model, m, err)) << err;
    sl::fingerprint fp;
    EXPECT_TRUE(sl::model_fingerprint(m, fp, err)) << err;
    f.fp = fp;
    f.a = make_archive(fp, false);
    f.sal = f.dir + "/sal.gguf";
    EXPECT_TRUE(sl::write_archive(f.a, f.sal, err, true)) << err;
    printf("  fixtures: model %llu bytes apparent, %llu allocated; archive %llu bytes; %.2f s\n",
           (unsigned long long) gguf_test::apparent_size(f.model), (unsigned long long) gguf_test::allocated_bytes(f.model),
           (unsigned long long) gguf_test::apparent_size(f.sal),
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return f;
}

nlohmann::json read_json(const std::string & path) { return nlohmann::json::parse(read_text(path)); }

}  // namespace

TEST(PlanReceipts, K3DimsRecordedPrintedAndShort) {
    const fixture & f = fx();
    ASSERT_LT(gguf_test::allocated_bytes(f.model), 8ull << 20) << "the model should be sparse";
    std::string out;
    double secs = 0;
    const std::string plan = f.dir + "/reap720.json";
    pl::plan_request req = plan_req(f.sal, f.model, plan);
    req.keep = 720;
    ASSERT_TRUE(run_plan(req, false, out, &secs)) << out;
    printf("  plan 896 x 92: %.2f s, %zu lines\n", secs, lines_of(out));
    EXPECT_LT(lines_of(out) + 1, 40u) << out;   // + the command's "wrote" line
    const nlohmann::json j = read_json(plan);
    check_receipts(f.a, j, "reap", kDomains);

    // the keep-lists: super experts first, then the summed score, dead last (reference)
    const nlohmann::json & pv = j.at("provenance");
    for (int l = 0; l < kLayers; ++l) {
        std::vector<double> cnt(kE, 0), rs(kE, 0);
        for (const auto & d : f.a.domains) {
            for (int64_t e = 0; e < kE; ++e) {
                cnt[e] += d.count[f.a.index(l, (int) e)];
                rs[e] += d.reap_sum[f.a.index(l, (int) e)];
            }
        }
        std::vector<int64_t> ids(kE), tier(kE);
        std::vector<double> sc(kE);   // once per expert, not once per comparison
        for (int64_t e = 0; e < kE; ++e) {
            ids[e] = e;
            tier[e] = std::count(kSuper.begin(), kSuper.end(), std::make_pair(l, e)) ? 0 : cnt[e] == 0 ? 2 : 1;
            sc[e] = cnt[e] > 0 ? rs[e] / cnt[e] : 0.0;
        }
        std::sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) {
            return tier[x] != tier[y] ? tier[x] < tier[y] : sc[x] != sc[y] ? sc[x] > sc[y] : x < y;
        });
        ids.resize(720);
        std::sort(ids.begin(), ids.end());
        ASSERT_EQ(j["layers"][l]["keep"].get<std::vector<int64_t>>(), ids) << "layer " << l;
    }

    // dead experts: every cell with no count in any domain, found here
    std::vector<std::string> dead;
    for (int l = 0; l < kLayers; ++l) {
        for (int64_t e = 0; e < kE; ++e) {
            bool any = false;
            for (const auto & d : f.a.domains) any = any || d.count[f.a.index(l, (int) e)] > 0;
            if (!any) dead.push_back("blk." + std::to_string(l) + " e" + std::to_string(e));
        }
    }
    ASSERT_EQ(dead.size(), kDead.size());
    EXPECT_EQ(pv.at("dead_experts").at("instances").get<std::vector<std::string>>(), dead);
    EXPECT_EQ(pv["dead_experts"].at("count").get<size_t>(), dead.size());
    EXPECT_EQ(pv["dead_experts"].at("pruned").get<size_t>(), dead.size());
    EXPECT_EQ(pv["dead_experts"].at("layers").get<size_t>(), 7u);

    // super experts: max_norm, ratio to the layer's median max_norm (routed experts), kept
    ASSERT_EQ(pv.at("super_experts").size(), kSuper.size());
    for (size_t k = 0; k < kSuper.size(); ++k) {
        const auto & x = pv["super_experts"][k];
        const int l = kSuper[k].first;
        EXPECT_EQ(x.at("layer").get<int>(), l);
        EXPECT_EQ(x.at("expert").get<int64_t>(), kSuper[k].second);
        EXPECT_EQ(x.at("kept"), true);
        std::vector<double> norms;
        for (int64_t e = 0; e < kE; ++e) {
            double mx = 0, c = 0;
            for (const auto & d : f.a.domains) {
                mx = std::max(mx, d.max_norm[f.a.index(l, (int) e)]);
                c += d.count[f.a.index(l, (int) e)];
            }
            if (c > 0) norms.push_back(mx);
        }
        const double want = (900.0 + 100.0 * l) / median(norms);
        EXPECT_NEAR(x.at("max_norm").get<double>(), 900.0 + 100.0 * l, 1e-9);
        EXPECT_NEAR(x.at("max_norm_ratio").get<double>(), want, 1e-9 * want);
    }

    // the terminal block says the same numbers
    const auto [mn, md] = min_median(compute(f.a, keeps_of(j), "reap", kDomains).layer_margin);
    char want[160];
    snprintf(want, sizeof(want), "no pruned expert ranks better than %lld of 896 in any domain, in any layer (median layer: %g;",
             (long long) mn, md);
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
    EXPECT_NE(out.find("dead experts (no token routed in any domain): 11 in 7 of 92 layers (1..3 per layer, median 1), 11 pruned: "
                       "blk.3 e17, blk.3 e200, blk.5 e1, blk.12 e0, blk.12 e895, blk.40 e77, blk.41 e77, blk.60 e500, blk.60 e501, "
                       "blk.60 e502, blk.91 e3\n"),
              std::string::npos) << out;
    EXPECT_NE(out.find("2, 2 kept (max_norm, x the layer's median max_norm, share of the layer's score): blk.12 e160 (2100, "), std::string::npos) << out;
    EXPECT_NE(out.find("saliency retained: mean "), std::string::npos) << out;

}

// --json prints the document it writes, receipts included; with --dry-run it
// writes nothing and adds the size table.
TEST(PlanReceipts, JsonIsTheWrittenDocument) {
    const fixture & f = fx();
    std::string out;
    const std::string plan = f.dir + "/j.json";
    pl::plan_request req = plan_req(f.sal, f.model, plan);
    req.keep = 720;
    req.force = false;
    ASSERT_TRUE(run_plan(req, true, out)) << out;
    const nlohmann::json js = nlohmann::json::parse(out), j = read_json(plan);
    EXPECT_EQ(js.at("layers"), j.at("layers"));
    EXPECT_EQ(js.at("provenance"), j.at("provenance"));
    EXPECT_EQ(js.at("output"), plan);
    check_receipts(f.a, js, "reap", kDomains);
    pl::plan_request dry = plan_req(f.sal, f.model, f.dir + "/dry.json");
    dry.budget_text = "50M";
    std::string perr;
    ASSERT_TRUE(pl::parse_size(dry.budget_text, dry.budget, perr)) << perr;
    dry.dry_run = true;
    dry.force = false;
    ASSERT_TRUE(run_plan(dry, true, out)) << out;
    const nlohmann::json jd = nlohmann::json::parse(out);
    EXPECT_TRUE(jd.at("output").is_null());
    EXPECT_FALSE(gguf_test::exists(f.dir + "/dry.json"));
    ASSERT_GT(jd.at("size_table").size(), 3u);
    check_receipts(f.a, jd, "reap", kDomains);
}

// Every method records a margin, not only --consensus minrank: frequency over
// a subset of domains, minrank, and the seeded random baseline.
TEST(PlanReceipts, EveryMethodHasAMargin) {
    const fixture & f = fx();
    // args: the options of `reap plan` each case stands for
    struct cse { std::string args, method; std::vector<std::string> domains; pl::rank_options rank; bool method_given; };
    pl::rank_options freq, minrank, random;
    freq.how = pl::method::frequency;
    freq.domains = {"en", "code"};
    minrank.cons = pl::consensus::minrank;
    minrank.protect_super = false;
    random.how = pl::method::random;
    random.seed = 4;
    const std::vector<cse> cases = {
        {"--method frequency --domains en,code", "frequency", {"en", "code"}, freq, true},
        {"--consensus minrank --no-protect-super", "reap", kDomains, minrank, false},
        {"--method random --seed 4", "reap", kDomains, random, true},
    };
    std::vector<int64_t> margins;
    for (const auto & c : cases) {
        std::string out;
        const std::string plan = f.dir + "/m.json";
        pl::plan_request req = plan_req(f.sal, f.model, plan);
        req.ratio = 0.5;
        req.rank = c.rank;
        req.method_given = c.method_given;
        ASSERT_TRUE(run_plan(req, false, out)) << c.args << ": " << out;
        EXPECT_LT(lines_of(out) + 1, 40u) << out;
        const nlohmann::json j = read_json(plan);
        SCOPED_TRACE(c.args);
        check_receipts(f.a, j, c.method, c.domains);
        margins.push_back(j["provenance"]["safety_margin"]["min"].get<int64_t>());
        if (c.domains.size() < kDomains.size()) {
            EXPECT_NE(out.find("in any chosen domain"), std::string::npos) << out;
            EXPECT_NE(out.find("[not planned on]"), std::string::npos) << out;
        }
    }
    // minrank maximises the margin: no keep-list of the same size does better
    // (here: the random baseline's)
    EXPECT_GE(margins[1], margins[2]);
}

// 880 never-routed experts in every one of 92 layers: still a screenful.
TEST(PlanReceipts, ManyDeadExpertsStayShort) {
    const fixture & f = fx();
    const sl::archive sparse = make_archive(f.fp, true);
    const std::string sparse_sal = f.dir + "/sparse.gguf";
    std::string err;
    ASSERT_TRUE(sl::write_archive(sparse, sparse_sal, err, true)) << err;
    std::string out;
    const std::string plan = f.dir + "/sparse.json";
    pl::plan_request req = plan_req(sparse_sal, f.model, plan);
    req.keep = 720;
    req.rank.domains = {"en", "code"};
    ASSERT_TRUE(run_plan(req, false, out)) << out;
    EXPECT_LT(lines_of(out) + 1, 40u) << out;
    size_t longest = 0;
    for (size_t at = 0, nl; at < out.size(); at = nl + 1) {
        nl = out.find('\n', at);
        if (nl == std::string::npos) nl = out.size();
        longest = std::max(longest, nl - at);
    }
    EXPECT_LT(longest, 400u) << out;
    const nlohmann::json j = read_json(plan);
    const auto keep = keeps_of(j);
    size_t n_dead = 0, n_kept = 0;
    for (int l = 0; l < kLayers; ++l) {
        std::vector<size_t> times_kept(kE, 0);   // one pass over the keep-list, not one per dead expert
        for (int64_t e : keep[l]) {
            if (e >= 0 && e < kE) ++times_kept[e];
        }
        for (int64_t e = 0; e < kE; ++e) {
            bool any = false;
            for (const auto & d : sparse.domains) any = any || d.count[sparse.index(l, (int) e)] > 0;
            if (any) continue;
            ++n_dead;
            n_kept += times_kept[e];
        }
    }
    ASSERT_GE(n_dead, (size_t) kLayers * (kE - 16));
    const auto & de = j["provenance"]["dead_experts"];
    EXPECT_EQ(de["count"].get<size_t>(), n_dead);
    EXPECT_EQ(de["kept"].get<size_t>(), n_kept);
    EXPECT_EQ(de["instances"].size(), n_dead);
    EXPECT_EQ(de["kept_instances"].size(), n_kept);
    EXPECT_NE(out.find("dead experts (no token routed in any domain): " + std::to_string(n_dead) + " in 92 of 92 layers ("),
              std::string::npos) << out;
    EXPECT_NE(out.find(std::to_string(n_dead - n_kept) + " pruned, " + std::to_string(n_kept) + " KEPT: blk.0 e1, blk.0 e2,"),
              std::string::npos) << out;
    check_receipts(sparse, j, "reap", {"en", "code"});
}

// reap compare: the margins of two plans side by side, from the archive (and as
// recorded), equal to the reference; the per-layer table is summarised.
TEST(PlanReceipts, CompareSideBySide) {
    const fixture & f = fx();
    std::string out;
    const std::string pa = f.dir + "/ca.json", pb = f.dir + "/cb.json";
    pl::plan_request ra_req = plan_req(f.sal, f.model, pa);
    ra_req.keep = 640;
    ASSERT_TRUE(run_plan(ra_req, false, out)) << out;
    pl::plan_request rb_req = plan_req(f.sal, f.model, pb);
    rb_req.keep = 576;
    rb_req.rank.how = pl::method::frequency;
    rb_req.rank.domains = {"ja"};
    rb_req.method_given = true;
    ASSERT_TRUE(run_plan(rb_req, false, out)) << out;
    double secs = 0;
    ASSERT_TRUE(run_compare(pa, pb, f.sal, false, out, &secs)) << out;
    printf("  compare 896 x 92: %.2f s, %zu lines\n", secs, lines_of(out));
    EXPECT_LT(lines_of(out), 40u) << out;
    EXPECT_NE(out.find("92 MoE layers"), std::string::npos) << out;
    const nlohmann::json ja = read_json(pa), jb = read_json(pb);
    // both scored by the archive's reap score over all domains
    const reference ra = compute(f.a, keeps_of(ja), "reap", kDomains), rb = compute(f.a, keeps_of(jb), "reap", kDomains);
    const auto [amn, amd] = min_median(ra.layer_margin);
    const auto [bmn, bmd] = min_median(rb.layer_margin);
    char row[200];
    snprintf(row, sizeof(row), "safety margin (best rank of a pruned expert) %-24s %s\n",
             (std::to_string(amn) + " (median " + [v = amd] { char b[32]; snprintf(b, sizeof(b), "%g", v); return std::string(b); }() + ")").c_str(),
             (std::to_string(bmn) + " (median " + [v = bmd] { char b[32]; snprintf(b, sizeof(b), "%g", v); return std::string(b); }() + ")").c_str());
    EXPECT_NE(out.find(row), std::string::npos) << row << "\n" << out;
    ASSERT_TRUE(run_compare(pa, pb, f.sal, true, out)) << out;
    const nlohmann::json j = nlohmann::json::parse(out);
    const auto & rc = j.at("receipts");
    EXPECT_EQ(rc.at("source"), "saliency");
    EXPECT_EQ(rc["a"].at("safety_margin").get<int64_t>(), amn);
    EXPECT_DOUBLE_EQ(rc["a"].at("safety_margin_median").get<double>(), amd);
    EXPECT_EQ(rc["b"].at("safety_margin").get<int64_t>(), bmn);
    EXPECT_DOUBLE_EQ(rc["b"].at("safety_margin_median").get<double>(), bmd);
    for (size_t di = 0; di < kDomains.size(); ++di) {
        EXPECT_EQ(rc["a"]["per_domain"][di]["safety_margin"].get<int64_t>(), min_median(ra.domain_margin[di]).first);
        EXPECT_EQ(rc["b"]["per_domain"][di]["safety_margin"].get<int64_t>(), min_median(rb.domain_margin[di]).first);
    }
    EXPECT_EQ(rc["a"]["dead_experts_kept"].get<int64_t>(), 0);
    EXPECT_EQ(rc["a"]["super_experts_kept"].get<int64_t>(), 2);
    EXPECT_EQ(j.at("layers").size(), (size_t) kLayers);
    // without the archive: as each plan recorded it (B: frequency over ja)
    ASSERT_TRUE(run_compare(pa, pb, "", true, out)) << out;
    const nlohmann::json jr = nlohmann::json::parse(out);
    EXPECT_EQ(jr["receipts"]["source"], "plans");
    EXPECT_EQ(jr["receipts"]["b"]["safety_margin"].get<int64_t>(),
              min_median(compute(f.a, keeps_of(jb), "frequency", {"ja"}).layer_margin).first);
    // a plan written before the receipts: '-' and null, not an error
    nlohmann::json old = ja;
    for (const char * k : {"safety_margin", "dead_experts"}) old["provenance"].erase(k);
    old["provenance"]["saliency_retained"].erase("per_domain");
    for (auto & x : old["provenance"]["super_experts"]) x.erase("kept");
    gguf_test::write_all(f.dir + "/old.json", [&] { const std::string s = old.dump(); return std::vector<uint8_t>(s.begin(), s.end()); }());
    ASSERT_TRUE(run_compare(f.dir + "/old.json", pb, "", true, out)) << out;
    const nlohmann::json jo = nlohmann::json::parse(out);
    EXPECT_TRUE(jo["receipts"]["a"]["safety_margin"].is_null());
    EXPECT_TRUE(jo["receipts"]["a"]["super_experts_kept"].is_null());
    EXPECT_NEAR(jo["receipts"]["a"]["saliency_retained"].get<double>(), ja["provenance"]["saliency_retained"]["mean"].get<double>(), 1e-15);
    ASSERT_TRUE(run_compare(f.dir + "/old.json", pb, "", false, out)) << out;
    EXPECT_NE(out.find("safety margin (best rank of a pruned expert) -"), std::string::npos) << out;
}

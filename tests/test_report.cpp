// End-to-end tests of `reap report` (the binary named by $REAP_BIN; skipped
// when it is not built) on a zoo model, a synthetic saliency archive, a plan
// and a build written by `reap plan` and `reap prune`:
//   * the card: Hugging Face front matter, the census, the method, the eval
//     table of an eval that measured this build, "pruned blind" for a domain
//     the calibration never saw, the SHA256SUMS lines equal to sha256sum's;
//   * the figures: rsvg-convert draws each to a PNG of the size the SVG
//     declares (read from the PNG header), and the plotted numbers (the data-*
//     values of the heatmap, retention curve and usage chart) equal the ones
//     computed here from the archive the test wrote and the plan file;
//   * the card is checked: a flipped byte in one shard of a split build
//     refuses the card (exit 1, nothing written); an eval JSON of another file
//     is listed as not counted and never under "Verified" (so is a masked
//     eval of another plan); an eval on the calibration corpus is marked as
//     flattering the cut; an archive other than the plan's is refused;
//   * the card never replaces an input (an eval, archive, plan or source at
//     the path of a figure or of README.md, or a hard link to one), with or
//     without --force, nor a file that exists without --force;
//   * the heatmap at K3 size (92 x 896) stays small, exact and drawable.
#include "formats/eval_file.h"
#include "formats/sweep_file.h"
#include "gguf/gguf.h"
#include "moe/identity.h"
#include "plan/plan.h"
#include "prune_test_util.h"
#include "saliency_test_util.h"
#include "util/path.h"
#include "util/svg_chart.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <unistd.h>

namespace g = reap::gguf;
namespace s = reap::saliency;
using prune_test::quote;

namespace {

int run_reap(const std::string & args, std::string & out) {
    return prune_test::run(quote(gguf_test::reap_bin()) + " " + args, out);
}

std::string read_text(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void write_text(const std::string & path, const std::string & text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

nlohmann::json read_json(const std::string & path) { return nlohmann::json::parse(read_text(path)); }

// sha256sum's answer for a file.
std::string sha256sum(const std::string & path) {
    std::string out;
    if (prune_test::run("sha256sum " + quote(path), out) != 0) return "";
    return out.substr(0, 64);
}

// The text of a card section: from "## NAME" to the next "## ".
std::string section(const std::string & card, const std::string & name) {
    const size_t a = card.find("## " + name + "\n");
    if (a == std::string::npos) return "";
    const size_t b = card.find("\n## ", a + 3);
    return card.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

struct fixture {
    std::string dir, model, sal, plan, cut;
    s::archive  a;
    nlohmann::json plan_json;
};

const char * k_corpus_sha = "1111111111111111111111111111111111111111111111111111111111111111";

// The zoo's qwen3moe, an archive "measured" on it (en, code; corpus hash
// recorded), a plan keeping 6 of 16 and its build (split into shards when
// `split`), all through the CLI.
bool setup(const std::string & name, fixture & fx, std::string & why, bool split = false) {
    if (!prune_test::exists(gguf_test::reap_bin())) {
        why = "reap binary not built ($REAP_BIN)";
        return false;
    }
    const std::string zoo = prune_test::zoo_dir("report_zoo", why);
    if (zoo.empty()) return false;
    fx.dir = prune_test::scratch(name);
    fx.model = zoo + "/qwen3moe.gguf";
    fx.sal = fx.dir + "/sal.gguf";
    fx.plan = fx.dir + "/plan.json";
    g::model m;
    std::string err, out;
    if (!g::open_model(fx.model, m, err)) { why = err; return false; }
    s::fingerprint fp;
    if (!s::model_fingerprint(m, fp, err)) { why = err; return false; }
    fx.a = s::make_archive(fp, s::metric_set::reap);
    uint32_t seed = 11;
    for (const char * d : {"en", "code"}) {
        saliency_test::sim_options o;
        o.seed = seed++;
        saliency_test::simulate_domain(fx.a, d, o);
    }
    fx.a.provenance.set_string(s::k_key_corpus_sha256, k_corpus_sha);
    fx.a.provenance.set_string("reap.saliency.corpus", "calib.jsonl");
    if (!s::write_archive(fx.a, fx.sal, err, true)) { why = err; return false; }
    if (run_reap("plan " + quote(fx.sal) + " -m " + quote(fx.model) + " --keep 6 -o " + quote(fx.plan), out) != 0) {
        why = out;
        return false;
    }
    fx.plan_json = read_json(fx.plan);
    std::filesystem::create_directories(fx.dir + "/build");
    fx.cut = fx.dir + "/build/cut.gguf";
    if (run_reap("prune -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " -o " + quote(fx.cut) +
                     (split ? " --split-max-tensors 8" : ""), out) != 0) {
        why = out;
        return false;
    }
    return true;
}

// The build's files as `reap prune` named them.
std::vector<std::string> build_files(const fixture & fx) {
    std::vector<std::string> v;
    for (const auto & f : gguf_test::list_dir(fx.dir + "/build")) {
        if (prune_test::quote(f).find(".gguf") != std::string::npos) v.push_back(fx.dir + "/build/" + f);
    }
    std::sort(v.begin(), v.end());
    return v;
}

// An eval JSON as `reap eval --json` writes it for one pruned file, naming
// `files` by their hashes and the corpus by `input_sha`.
std::string eval_json(const std::vector<std::string> & files, const std::string & input_sha,
                      const std::vector<std::string> & domains) {
    nlohmann::ordered_json j;
    auto m = [](double k) {
        return nlohmann::ordered_json{{"ppl_base", 10.0}, {"ppl_pruned", 11.0}, {"ppl_ratio", 1.1}, {"kld_mean", k},
                                      {"kld_median", k / 2}, {"kld_p99", k * 5}, {"kld_max", k * 9}, {"argmax_agree", 0.9},
                                      {"n_tokens", 1000}};
    };
    j = m(0.125);
    nlohmann::ordered_json d = nlohmann::ordered_json::object();
    double k = 0.1;
    for (const auto & name : domains) d[name] = m(k += 0.01);
    j["domains"] = d;
    j["corpus"] = true;
    j["candidate"] = files.empty() ? "" : files[0];
    j["masked"] = false;
    j["input"] = {{"file", "heldout.jsonl"}, {"sha256", input_sha}};
    nlohmann::ordered_json cf = nlohmann::ordered_json::array();
    for (const auto & f : files) {
        cf.push_back({{"file", f.substr(f.rfind('/') + 1)}, {"bytes", prune_test::read_all(f).size()}, {"sha256", sha256sum(f)}});
    }
    j["candidate_files"] = cf;
    return j.dump(2);
}

// A sweep of the zoo's qwen3moe, every field as `reap sweep -o` writes them: at
// version 1 (no model fingerprint) when `model_sha` is empty, else version 2
// recording it. Two points, N = 12 and the plan's 6; KLD 1/N overall.
nlohmann::ordered_json sweep_json(const fixture & fx, const std::string & method, const std::string & model_sha) {
    nlohmann::ordered_json sw;
    auto m = [](double k, int n) {
        return nlohmann::ordered_json{{"ppl_base", 10.0}, {"ppl_pruned", 11.0}, {"ppl_ratio", 1.1}, {"kld_mean", k}, {"kld_median", k / 2},
                                      {"kld_p99", k * 2}, {"kld_max", k * 3}, {"argmax_agree", 0.9}, {"n_tokens", n}};
    };
    sw["format"] = "reap-sweep";
    sw["version"] = model_sha.empty() ? 1 : 2;
    sw["tool"] = "reap sweep 0.1.0";
    sw["model"] = {{"path", fx.model}, {"arch", "qwen3moe"}, {"n_expert", 16}, {"n_expert_used", 2}, {"moe_layers", 2}, {"file_bytes", 100000}};
    if (!model_sha.empty()) sw["model"]["header_sha256"] = model_sha;
    sw["saliency"] = {{"file", fx.sal}, {"sha256", sha256sum(fx.sal)}, {"method", method}, {"domains", {"en", "code"}}};
    sw["input"] = {{"file", "heldout.jsonl"}, {"n_ctx", 128}, {"n_windows", 3}, {"corpus", true}};
    sw["points"] = nlohmann::ordered_json::array();
    for (int n : {12, 6}) {
        sw["points"].push_back({{"n_keep", n}, {"request", {{"keep", std::to_string(n)}}}, {"removed_fraction", (16 - n) / 16.0},
                                {"predicted_bytes", 1000 * n}, {"predicted_shards", 1}, {"saliency_share", n / 16.0},
                                {"safety_margin", 3}, {"safety_margin_median", 4.0}, {"overall", m(1.0 / n, 10)},
                                {"domains", {{"en", m(2.0 / n, 5)}}}});
    }
    return sw;
}

// The fingerprint (plan::model_header_sha256) of the zoo's qwen3moe and of
// another model of its shape: a copy written with another general.name.
std::string source_sha(const fixture & fx) {
    g::model m;
    std::string err;
    return g::open_model(fx.model, m, err) ? reap::model_header_sha256(m) : err;
}

std::string other_model_sha(const fixture & fx) {
    g::model m;
    std::string err;
    if (!g::open_model(fx.model, m, err)) return err;
    g::output_spec spec = g::spec_from_model(m);
    spec.kvs.set_string("general.name", "another model of the same shape");
    g::write_options wo;
    wo.force = true;
    wo.sync = false;
    std::vector<std::string> written;
    const std::string other = fx.dir + "/other-model.gguf";
    if (!g::write_output(spec, wo, other, written, err)) return err;
    g::model o;
    return g::open_model(other, o, err) ? reap::model_header_sha256(o) : err;
}

// An eval of this build as `reap eval --json` writes it now (formats/eval_file.h):
// its files by their SHA256SUMS hashes, the base by `base_sha`.
reap::eval_report build_eval(const fixture & fx, const std::string & base_sha) {
    reap::eval_report r;
    r.pruned_scored = true;
    r.overall.n_tokens = 1000;
    r.overall.ppl_base = 10;
    r.overall.ppl_pruned = 11;
    r.overall.ppl_ratio = 1.1;
    r.overall.kld_mean = 0.125;
    r.overall.kld_median = 0.0625;
    r.overall.kld_p99 = 0.5;
    r.overall.kld_max = 1;
    r.overall.argmax_agree = 0.9;
    r.candidate = fx.cut;
    r.base_path = fx.model;
    r.base_sha256 = base_sha;
    r.input_path = "heldout.jsonl";
    r.input_sha256 = std::string(64, '2');
    for (const auto & f : build_files(fx)) r.candidate_files.push_back({f.substr(f.rfind('/') + 1), prune_test::read_all(f).size(), sha256sum(f)});
    return r;
}

// Width and height of a PNG, from its IHDR chunk.
bool png_size(const std::string & path, uint32_t & w, uint32_t & h) {
    const std::vector<uint8_t> b = prune_test::read_all(path);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (b.size() < 24 || !std::equal(sig, sig + 8, b.begin()) || std::string(b.begin() + 12, b.begin() + 16) != "IHDR") return false;
    auto be = [&](size_t i) { return (uint32_t) b[i] << 24 | (uint32_t) b[i + 1] << 16 | (uint32_t) b[i + 2] << 8 | b[i + 3]; };
    w = be(16);
    h = be(20);
    return true;
}

// The attribute `name` of the first tag in `tag`.
std::string attr(const std::string & tag, const std::string & name) {
    const std::string key = " " + name + "=\"";
    const size_t a = tag.find(key);
    if (a == std::string::npos) return "";
    const size_t b = tag.find('"', a + key.size());
    return tag.substr(a + key.size(), b - a - key.size());
}

// Every tag of `svg` opening with `<kind ` that carries `has`.
std::vector<std::string> tags(const std::string & svg, const std::string & kind, const std::string & has) {
    std::vector<std::string> v;
    for (size_t p = svg.find("<" + kind + " "); p != std::string::npos; p = svg.find("<" + kind + " ", p + 1)) {
        const std::string t = svg.substr(p, svg.find('>', p) - p + 1);
        if (t.find(has) != std::string::npos) v.push_back(t);
    }
    return v;
}

std::vector<double> numbers(const std::string & s) {
    std::vector<double> v;
    std::istringstream in(s);
    double x;
    while (in >> x) v.push_back(x);
    return v;
}

// The REAP score per expert of one layer over every domain, from the archive.
std::vector<double> reap_score(const s::archive & a, int layer) {
    std::vector<double> cnt(a.model.n_expert, 0), rs(a.model.n_expert, 0), sc(a.model.n_expert, 0);
    for (const auto & d : a.domains) {
        for (uint32_t e = 0; e < a.model.n_expert; ++e) {
            cnt[e] += d.count[a.index(layer, (int) e)];
            rs[e] += d.reap_sum[a.index(layer, (int) e)];
        }
    }
    for (uint32_t e = 0; e < a.model.n_expert; ++e) sc[e] = cnt[e] > 0 ? rs[e] / cnt[e] : 0;
    return sc;
}

bool have_rsvg() {
    std::string out;
    return prune_test::run("command -v rsvg-convert", out) == 0;
}

} // namespace

TEST(ReportCli, CardAndFiguresFromReceipts) {
    fixture fx;
    std::string why, out;
    if (!setup("report_card", fx, why)) GTEST_SKIP() << why;
    const std::vector<std::string> files = build_files(fx);
    ASSERT_EQ(files.size(), 1u);
    const std::string ev = fx.dir + "/eval.json";
    write_text(ev, eval_json(files, std::string(64, '2'), {"en", "code", "fr"}));
    // a sweep as `reap sweep -o` wrote it at version 1 (two points, the chosen N among them)
    write_text(fx.dir + "/sweep.json", sweep_json(fx, "reap", "").dump(2));
    // a masked eval of this plan, in the format of several candidates: matched by the plan's hash
    nlohmann::json mk = nlohmann::json::parse(eval_json({}, std::string(64, '2'), {"en", "code"}));
    mk.erase("candidate_files");
    mk["masked"] = true;
    mk["candidate_sha256"] = sha256sum(fx.plan);
    const std::string evm = fx.dir + "/masked.json";
    write_text(evm, nlohmann::json{{"masked", {{"some/where/plan.json", mk}}}}.dump());
    const std::string card_dir = fx.dir + "/card";
    ASSERT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --saliency " + quote(fx.sal) +
                           " --eval " + quote(ev) + " --eval " + quote(evm) + " --sweep " + quote(fx.dir + "/sweep.json") + " -o " + quote(card_dir), out), 0) << out;
    const std::string card = read_text(card_dir + "/README.md");

    // front matter
    ASSERT_EQ(card.rfind("---\n", 0), 0u) << card.substr(0, 200);
    const std::string fm = card.substr(0, card.find("\n---\n", 4) + 1);
    EXPECT_NE(fm.find("base_model: FILL_IN"), std::string::npos) << fm;
    EXPECT_NE(fm.find("library_name: gguf"), std::string::npos);
    EXPECT_NE(fm.find("pipeline_tag: text-generation"), std::string::npos);
    for (const char * t : {"moe", "expert-pruning", "reap"}) EXPECT_NE(fm.find("  - " + std::string(t) + "\n"), std::string::npos) << t;
    EXPECT_NE(fm.find("  - \"qwen3moe\"\n"), std::string::npos) << fm;
    // the build's tensor types, read with the test's own GGUF parser
    gguf_test::plain_gguf pg;
    ASSERT_TRUE(gguf_test::plain_read(fx.cut, pg, why)) << why;
    for (const auto & t : pg.tensors) {
        const gguf_test::plain_type * pt = gguf_test::plain_type_of(t.type);
        ASSERT_NE(pt, nullptr);
        EXPECT_NE(fm.find("  - \"" + std::string(pt->name) + "\"\n"), std::string::npos) << pt->name;
    }
    // census: the experts per layer of both files
    EXPECT_NE(card.find("| routed experts per MoE layer | 16 | 6 |"), std::string::npos) << section(card, "Source vs build");
    // method: each domain's own REAP saliency kept (mean over layers) and the safety
    // margin (the best rank a pruned expert holds in a domain; ties to the lower id),
    // computed here from the archive and the plan's keep lists
    {
        const std::string meth = section(card, "Method");
        const int64_t n = fx.a.model.n_expert;
        int64_t margin = 0;
        for (const auto & d : fx.a.domains) {
            double share = 0;
            for (const auto & pl : fx.plan_json["layers"]) {
                const int layer = pl["layer"].get<int>();
                const auto keep = pl["keep"].get<std::vector<int64_t>>();
                std::vector<double> sc((size_t) n);
                for (int64_t e = 0; e < n; ++e) {
                    const double c = d.count[fx.a.index(layer, (int) e)];
                    sc[(size_t) e] = c > 0 ? d.reap_sum[fx.a.index(layer, (int) e)] / c : 0;
                }
                double kept = 0;
                for (int64_t e : keep) kept += sc[(size_t) e];
                share += kept / std::accumulate(sc.begin(), sc.end(), 0.0);
                for (int64_t e = 0; e < n; ++e) {
                    if (std::count(keep.begin(), keep.end(), e)) continue;
                    int64_t rank = 1;
                    for (int64_t f = 0; f < n; ++f) rank += sc[(size_t) f] > sc[(size_t) e] || (sc[(size_t) f] == sc[(size_t) e] && f < e);
                    if (margin == 0 || rank < margin) margin = rank;
                }
            }
            share /= (double) fx.plan_json["layers"].size();
            const size_t row = meth.find("| " + d.name + " | ");
            ASSERT_NE(row, std::string::npos) << meth;
            const std::string line = meth.substr(row, meth.find('\n', row) - row);
            const size_t cell = line.rfind("| ", line.size() - 3);
            EXPECT_NEAR(std::stod(line.substr(cell + 2)), 100 * share, 0.051) << line;
        }
        EXPECT_NE(meth.find("no pruned expert ranks better than " + std::to_string(margin) + " of " + std::to_string(n) + " "),
                  std::string::npos) << meth;
    }
    // verified: the audit, SHA256SUMS and this eval; not verified: fr was never calibrated on
    const std::string ver = section(card, "Verified"), nver = section(card, "Not verified");
    EXPECT_NE(ver.find("byte for byte"), std::string::npos) << ver;
    EXPECT_NE(ver.find("`eval.json`"), std::string::npos) << ver;
    EXPECT_NE(ver.find("| **all** | 1,000 | 0.1250 |"), std::string::npos) << ver;
    EXPECT_NE(ver.find("**Eval `masked.json`**: measured on the plan's experts masked"), std::string::npos) << ver;
    EXPECT_NE(nver.find("Pruned blind for `fr`"), std::string::npos) << nver;
    EXPECT_EQ(nver.find("Quality unmeasured"), std::string::npos) << nver;
    EXPECT_EQ(nver.find("flatters"), std::string::npos) << nver;
    // SHA256SUMS as sha256sum computes it
    EXPECT_NE(section(card, "SHA256SUMS").find(sha256sum(fx.cut) + "  cut.gguf\n"), std::string::npos);

    // figures: drawn by a real renderer at the declared size
    const std::vector<std::string> figs = {"saliency-heatmap.svg", "retention.svg", "domain-usage.svg", "sweep-kld.svg"};
    for (const auto & f : figs) {
        const std::string svg_path = card_dir + "/figures/" + f;
        ASSERT_TRUE(prune_test::exists(svg_path)) << f;
        EXPECT_NE(card.find("(figures/" + f + ")"), std::string::npos) << f;
        if (!have_rsvg()) continue;
        const std::string svg = read_text(svg_path), png = fx.dir + "/" + f + ".png";
        ASSERT_EQ(prune_test::run("rsvg-convert -f png -o " + quote(png) + " " + quote(svg_path), out), 0) << f << ": " << out;
        uint32_t w = 0, h = 0;
        ASSERT_TRUE(png_size(png, w, h)) << f;
        const std::string root = svg.substr(0, svg.find('>'));
        EXPECT_EQ(w, (uint32_t) std::lround(std::stod(attr(root, "width")))) << f;
        EXPECT_EQ(h, (uint32_t) std::lround(std::stod(attr(root, "height")))) << f;
        EXPECT_EQ(w, 760u) << f;
        EXPECT_GT(h, 200u) << f;
    }

    // the heatmap's numbers: each MoE layer's REAP shares, sorted, kept ones marked
    const std::string hm = read_text(card_dir + "/figures/saliency-heatmap.svg");
    const std::vector<std::string> rows = tags(hm, "g", "data-row=");
    ASSERT_EQ(rows.size(), fx.plan_json["layers"].size());
    for (size_t r = 0; r < rows.size(); ++r) {
        const auto & pl = fx.plan_json["layers"][r];
        const int layer = pl["layer"];
        EXPECT_EQ(attr(rows[r], "data-row"), std::to_string(layer));
        const std::vector<double> sc = reap_score(fx.a, layer);
        const double total = std::accumulate(sc.begin(), sc.end(), 0.0);
        std::vector<int> ids(sc.size());
        std::iota(ids.begin(), ids.end(), 0);
        std::stable_sort(ids.begin(), ids.end(), [&](int x, int y) { return sc[x] > sc[y]; });
        const std::vector<double> got = numbers(attr(rows[r], "data-values")), marked = numbers(attr(rows[r], "data-marked"));
        ASSERT_EQ(got.size(), sc.size());
        const std::vector<int64_t> keep = pl["keep"].get<std::vector<int64_t>>();
        for (size_t i = 0; i < ids.size(); ++i) {
            EXPECT_NEAR(got[i], sc[ids[i]] / total, 1e-12) << "layer " << layer << " rank " << i;
            EXPECT_EQ(marked[i] == 1, std::count(keep.begin(), keep.end(), ids[i]) == 1) << "layer " << layer << " expert " << ids[i];
        }
    }
    // the retention curve at the chosen N: the plan's keep lists' share, and the build's size
    const std::string rt = read_text(card_dir + "/figures/retention.svg");
    double share = 0;
    for (const auto & pl : fx.plan_json["layers"]) {
        const std::vector<double> sc = reap_score(fx.a, pl["layer"]);
        double kept = 0;
        for (int64_t e : pl["keep"].get<std::vector<int64_t>>()) kept += sc[e];
        share += kept / std::accumulate(sc.begin(), sc.end(), 0.0);
    }
    share /= (double) fx.plan_json["layers"].size();
    // the size axis' unit, as its label names it
    const size_t ul = rt.find("file size (");
    ASSERT_NE(ul, std::string::npos);
    const std::string unit_name = rt.substr(ul + 11, 2);
    const double unit = unit_name == "kB" ? 1e3 : unit_name == "MB" ? 1e6 : unit_name == "GB" ? 1e9 : 0;
    ASSERT_GT(unit, 0) << unit_name;
    bool seen_share = false, seen_size = false;
    for (const auto & t : tags(rt, "circle", "data-x=\"6\"")) {
        if (attr(t, "data-series") == "saliency kept") {
            EXPECT_NEAR(std::stod(attr(t, "data-y")), 100 * share, 1e-9);
            seen_share = true;
        } else if (attr(t, "data-series") == "file size") {
            EXPECT_NEAR(std::stod(attr(t, "data-y")) * unit, (double) prune_test::read_all(fx.cut).size(), 1e-6 * unit);
            seen_size = true;
        }
    }
    EXPECT_TRUE(seen_share && seen_size) << rt.substr(0, 2000);
    EXPECT_EQ(tags(rt, "line", "data-mark=\"6\"").size(), 1u);
    // positions follow the values: the share markers lie on one line y = a + b * value
    {
        std::vector<std::pair<double, double>> pts;
        for (const auto & t : tags(rt, "circle", "data-series=\"saliency kept\"")) pts.push_back({std::stod(attr(t, "data-y")), std::stod(attr(t, "cy"))});
        ASSERT_GE(pts.size(), 3u);
        const auto lo = *std::min_element(pts.begin(), pts.end()), hi = *std::max_element(pts.begin(), pts.end());
        ASSERT_GT(hi.first, lo.first);
        for (const auto & [v, cy] : pts) EXPECT_NEAR(cy, lo.second + (v - lo.first) / (hi.first - lo.first) * (hi.second - lo.second), 0.15);
        EXPECT_LT(hi.second, lo.second);   // larger share drawn higher
    }
    // expert usage: each domain's routed tokens on kept experts, per layer
    const std::string us = read_text(card_dir + "/figures/domain-usage.svg");
    for (const auto & d : fx.a.domains) {
        const std::vector<std::string> pts = tags(us, "circle", "data-series=\"" + d.name + "\"");
        ASSERT_EQ(pts.size(), fx.plan_json["layers"].size()) << d.name;
        for (size_t i = 0; i < pts.size(); ++i) {
            const auto & pl = fx.plan_json["layers"][i];
            const int layer = pl["layer"];
            double all = 0, kept = 0;
            for (uint32_t e = 0; e < fx.a.model.n_expert; ++e) all += d.count[fx.a.index(layer, (int) e)];
            for (int64_t e : pl["keep"].get<std::vector<int64_t>>()) kept += d.count[fx.a.index(layer, (int) e)];
            EXPECT_EQ(std::stod(attr(pts[i], "data-x")), layer);
            EXPECT_NEAR(std::stod(attr(pts[i], "data-y")), 100 * kept / all, 1e-9) << d.name << " layer " << layer;
        }
    }
    // the sweep's chart plots the sweep's numbers
    const std::string kc = read_text(card_dir + "/figures/sweep-kld.svg");
    const std::vector<std::string> kpts = tags(kc, "circle", "data-series=\"overall\"");
    ASSERT_EQ(kpts.size(), 2u);
    for (const auto & t : kpts) EXPECT_NEAR(std::stod(attr(t, "data-y")), 1.0 / std::stod(attr(t, "data-x")), 1e-15);
    if (!have_rsvg()) GTEST_SKIP() << "rsvg-convert not installed (scripts/setup-deps.sh installs librsvg2-bin): figures not drawn";
}

TEST(ReportCli, FlippedByteInAShardRefusesTheCard) {
    fixture fx;
    std::string why, out;
    if (!setup("report_flip", fx, why, true)) GTEST_SKIP() << why;
    const std::vector<std::string> files = build_files(fx);
    ASSERT_GE(files.size(), 2u) << "the build should be split";
    fx.cut = files[0];
    const std::string card_dir = fx.dir + "/card";
    const std::string cmd = "report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --saliency " + quote(fx.sal) + " -o " + quote(card_dir);
    ASSERT_EQ(run_reap(cmd, out), 0) << out;   // intact: a card
    ASSERT_TRUE(prune_test::exists(card_dir + "/README.md"));
    // one byte of the last shard's tensor data flipped: verify fails, no card
    std::vector<uint8_t> b = prune_test::read_all(files.back());
    b[b.size() - 7] ^= 0x40;
    prune_test::write_all(files.back(), b);
    const std::string card_dir2 = fx.dir + "/card2";
    EXPECT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " -o " + quote(card_dir2), out), 1) << out;
    EXPECT_NE(out.find("FAILED"), std::string::npos) << out;
    EXPECT_FALSE(prune_test::exists(card_dir2 + "/README.md"));
    // and an existing card is not replaced by a failing run
    const std::string before = read_text(card_dir + "/README.md");
    EXPECT_EQ(run_reap(cmd + " --force", out), 1) << out;
    EXPECT_EQ(read_text(card_dir + "/README.md"), before);
}

TEST(ReportCli, EvalOfAnotherFileIsNeverVerified) {
    fixture fx;
    std::string why, out;
    if (!setup("report_other_eval", fx, why)) GTEST_SKIP() << why;
    // an eval of the source model (another file), one with no hashes at another path,
    // and one of this build on the calibration corpus itself
    const std::string other = fx.dir + "/other.json", nohash = fx.dir + "/nohash.json", same = fx.dir + "/same.json";
    write_text(other, eval_json({fx.model}, std::string(64, '2'), {"en"}));
    nlohmann::json nh = nlohmann::json::parse(eval_json({fx.cut}, std::string(64, '2'), {"en"}));
    nh.erase("candidate_files");
    nh["candidate"] = fx.dir + "/elsewhere.gguf";
    write_text(nohash, nh.dump());
    const std::string mother = fx.dir + "/mask-other.json";
    nlohmann::json mo = nlohmann::json::parse(eval_json({}, std::string(64, '2'), {"en"}));
    mo.erase("candidate_files");
    mo["masked"] = true;
    mo["candidate_sha256"] = std::string(64, '4');
    write_text(mother, mo.dump());
    const std::string card_dir = fx.dir + "/card";
    ASSERT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --saliency " + quote(fx.sal) +
                           " --eval " + quote(other) + " --eval " + quote(nohash) + " --eval " + quote(mother) + " -o " + quote(card_dir), out), 0) << out;
    std::string card = read_text(card_dir + "/README.md");
    std::string ver = section(card, "Verified"), nver = section(card, "Not verified");
    for (const char * f : {"other.json", "nohash.json", "mask-other.json"}) {
        EXPECT_EQ(ver.find(f), std::string::npos) << f << "\n" << ver;
        EXPECT_NE(nver.find("Eval `" + std::string(f) + "` is not counted"), std::string::npos) << f << "\n" << nver;
    }
    EXPECT_EQ(ver.find("KLD mean"), std::string::npos) << ver;
    EXPECT_NE(nver.find("Quality unmeasured"), std::string::npos) << nver;

    // this build, but measured on the calibration corpus
    write_text(same, eval_json({fx.cut}, k_corpus_sha, {"en", "code"}));
    ASSERT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --saliency " + quote(fx.sal) +
                           " --eval " + quote(same) + " -o " + quote(card_dir) + " --force", out), 0) << out;
    card = read_text(card_dir + "/README.md");
    nver = section(card, "Not verified");
    EXPECT_NE(nver.find("flatters the cut"), std::string::npos) << nver;
    EXPECT_EQ(nver.find("Pruned blind"), std::string::npos) << nver;

    // an archive other than the plan's: refused
    s::archive b = fx.a;
    b.domains[0].count[b.index(b.model.moe_layers[0], 0)] += 0;   // same numbers, other provenance
    b.provenance.set_string(s::k_key_corpus_sha256, std::string(64, '3'));
    ASSERT_TRUE(s::write_archive(b, fx.dir + "/other-sal.gguf", why, true)) << why;
    EXPECT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --saliency " +
                           quote(fx.dir + "/other-sal.gguf") + " -o " + quote(fx.dir + "/card3"), out), 2) << out;
    EXPECT_NE(out.find("not the one the plan was made from"), std::string::npos) << out;
}

// Issue 23, item 1: no command writes over any of its inputs, report
// included. Every file the report would publish (README.md and each figure)
// is checked against every file it reads (by inode: a hard link counts), with
// or without --force, before any work; and an existing file it would replace
// (a user's figure) is refused without --force. Against the binary before
// this change: an eval at DIR/figures/retention.svg or an archive at
// DIR/figures/saliency-heatmap.svg was replaced by the SVG (exit 0, no
// --force), and with --force the plan, the source model or an eval at
// DIR/README.md was replaced by the card.
TEST(ReportCli, NeverWritesOverItsInputs) {
    fixture fx;
    std::string why, out;
    if (!setup("report_inputs", fx, why)) GTEST_SKIP() << why;
    const std::string card = fx.dir + "/card", figs = card + "/figures";
    std::filesystem::create_directories(figs);
    const std::string ev = eval_json({fx.cut}, std::string(64, '2'), {"en", "code"});
    auto report = [&](const std::string & model, const std::string & plan, const std::string & sal, const std::string & eval,
                      const char * force) {
        return run_reap("report -m " + quote(model) + " --plan " + quote(plan) + " " + quote(fx.cut) +
                            (sal.empty() ? "" : " --saliency " + quote(sal)) + (eval.empty() ? "" : " --eval " + quote(eval)) +
                            " -o " + quote(card) + force, out);
    };
    struct attempt {
        std::string what, at;   // which input, placed at which path of the card
        const char * force;
    };
    const std::vector<attempt> attempts = {
        {"eval", figs + "/retention.svg", ""},
        {"eval", figs + "/domain-usage.svg", " --force"},
        {"saliency archive", figs + "/saliency-heatmap.svg", ""},
        {"saliency archive", figs + "/saliency-heatmap.svg", " --force"},
        {"plan", card + "/README.md", " --force"},
        {"source model", card + "/README.md", " --force"},
        {"eval", card + "/README.md", " --force"},
    };
    for (const attempt & a : attempts) {
        SCOPED_TRACE(a.what + " at " + a.at + a.force);
        std::filesystem::remove_all(card);
        std::filesystem::create_directories(figs);
        std::string model = fx.model, plan = fx.plan, sal = fx.sal, eval;
        if (a.what == "eval") {
            write_text(a.at, ev);
            eval = a.at;
        } else {
            std::filesystem::copy_file(a.what == "plan" ? fx.plan : a.what == "source model" ? fx.model : fx.sal, a.at);
            (a.what == "plan" ? plan : a.what == "source model" ? model : sal) = a.at;
        }
        const std::vector<uint8_t> before = prune_test::read_all(a.at);
        EXPECT_EQ(report(model, plan, sal, eval, a.force), 2) << out;
        EXPECT_NE(out.find("refusing to write " + a.at + " over the " + a.what), std::string::npos) << out;
        EXPECT_TRUE(prune_test::read_all(a.at) == before) << "the input was replaced";
        if (a.at != card + "/README.md") EXPECT_FALSE(prune_test::exists(card + "/README.md"));
    }
    // the same file under another name (a hard link): refused by inode
    std::filesystem::remove_all(card);
    std::filesystem::create_directories(figs);
    const std::string eval = fx.dir + "/eval.json";
    write_text(eval, ev);
    ASSERT_EQ(::link(eval.c_str(), (figs + "/retention.svg").c_str()), 0);
    EXPECT_EQ(report(fx.model, fx.plan, fx.sal, eval, " --force"), 2) << out;
    EXPECT_NE(out.find("over the eval '" + eval + "'"), std::string::npos) << out;
    EXPECT_EQ(read_text(eval), ev);
    // a user's figure that is no input: kept without --force, replaced with it
    std::filesystem::remove_all(card);
    std::filesystem::create_directories(figs);
    write_text(figs + "/retention.svg", "<svg>mine</svg>");
    EXPECT_EQ(report(fx.model, fx.plan, fx.sal, eval, ""), 2) << out;
    EXPECT_NE(out.find(figs + "/retention.svg exists (use --force"), std::string::npos) << out;
    EXPECT_EQ(read_text(figs + "/retention.svg"), "<svg>mine</svg>");
    EXPECT_FALSE(prune_test::exists(card + "/README.md"));
    EXPECT_EQ(report(fx.model, fx.plan, fx.sal, eval, " --force"), 0) << out;
    EXPECT_NE(read_text(figs + "/retention.svg"), "<svg>mine</svg>");
    EXPECT_EQ(read_text(eval), ev);
    // and the card it wrote is replaced only with --force
    EXPECT_EQ(report(fx.model, fx.plan, fx.sal, eval, ""), 2) << out;
    EXPECT_NE(out.find("exists (use --force"), std::string::npos) << out;
}

// The heatmap at the size of a K3 build (92 MoE layers x 896 experts): runs of
// equal colour merge, so the file stays small; every value is still in it
// exactly; a real renderer draws it at the declared size.
// Issue 23, item 2: an eval run with --base-mask compares the build with a
// masked base, not with the source; the card must not show it as the build's
// quality. Against the binary before this change the eval (matched to the
// build by its files' hashes) was listed under "Verified" with its table.
TEST(ReportClaims, BaseMaskedEvalIsNotTheBuildsQuality) {
    fixture fx;
    std::string why, out;
    if (!setup("report_base_mask", fx, why)) GTEST_SKIP() << why;
    reap::eval_report r = build_eval(fx, source_sha(fx));
    r.base_mask = fx.plan;
    r.base_mask_sha256 = sha256sum(fx.plan);
    const std::string ev = fx.dir + "/masked-base.json";
    write_text(ev, reap::eval_report_to_json(r).dump(2));
    const std::string card_dir = fx.dir + "/card";
    ASSERT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --eval " + quote(ev) +
                           " -o " + quote(card_dir), out), 0) << out;
    const std::string card = read_text(card_dir + "/README.md");
    const std::string ver = section(card, "Verified"), nver = section(card, "Not verified");
    EXPECT_EQ(ver.find("masked-base.json"), std::string::npos) << ver;
    EXPECT_EQ(ver.find("KLD mean"), std::string::npos) << ver;
    EXPECT_NE(nver.find("Eval `masked-base.json` is not counted"), std::string::npos) << nver;
    EXPECT_NE(nver.find("a measurement of a masked base"), std::string::npos) << nver;
    EXPECT_NE(nver.find("Quality unmeasured"), std::string::npos) << nver;
    // the same eval without the mask is this build's measurement
    r.base_mask.clear();
    r.base_mask_sha256.clear();
    write_text(ev, reap::eval_report_to_json(r).dump(2));
    ASSERT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --eval " + quote(ev) +
                           " -o " + quote(card_dir) + " --force", out), 0) << out;
    EXPECT_NE(section(read_text(card_dir + "/README.md"), "Verified").find("**Eval `masked-base.json`**: measured on this build's files"),
              std::string::npos);
}

// Issue 23, item 3: an eval records the base it compared with; one against
// another model (a model of the same shape, its header differing) is not
// counted for this build. Against the binary before this change it was
// "Verified" (the build's files matched; the base was not looked at).
TEST(ReportClaims, EvalAgainstAnotherBaseIsNotCounted) {
    fixture fx;
    std::string why, out;
    if (!setup("report_other_base", fx, why)) GTEST_SKIP() << why;
    const std::string other = other_model_sha(fx), mine = source_sha(fx);
    ASSERT_EQ(other.size(), 64u) << other;
    ASSERT_NE(other, mine);
    const std::string ev = fx.dir + "/other-base.json";
    write_text(ev, reap::eval_report_to_json(build_eval(fx, other)).dump(2));
    const std::string card_dir = fx.dir + "/card";
    ASSERT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --eval " + quote(ev) +
                           " -o " + quote(card_dir), out), 0) << out;
    const std::string card = read_text(card_dir + "/README.md");
    const std::string ver = section(card, "Verified"), nver = section(card, "Not verified");
    EXPECT_EQ(ver.find("other-base.json"), std::string::npos) << ver;
    EXPECT_NE(nver.find("Eval `other-base.json` is not counted"), std::string::npos) << nver;
    EXPECT_NE(nver.find("against another base model (header sha256 " + other.substr(0, 12)), std::string::npos) << nver;
}

// Issue 23, item 3: a sweep records its model and its method. One of another
// model is refused; a --method random sweep is not shown as this build's
// method (no "(this N)", no mark on the chart, and said so). Against the
// binary before this change the first made a card (exit 0) and the second
// showed "6 (this N)".
TEST(ReportClaims, SweepOfAnotherModelOrMethodIsNotThisBuilds) {
    fixture fx;
    std::string why, out;
    if (!setup("report_sweep_claims", fx, why)) GTEST_SKIP() << why;
    const std::string other = other_model_sha(fx);
    ASSERT_EQ(other.size(), 64u) << other;
    const std::string sw = fx.dir + "/sweep.json";
    std::string card_dir = fx.dir + "/card-other";
    auto report = [&](const std::string & extra) {
        return run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --sweep " + quote(sw) +
                            " -o " + quote(card_dir) + extra, out);
    };
    write_text(sw, sweep_json(fx, "reap", other).dump(2));
    EXPECT_EQ(report(""), 2) << out;
    EXPECT_NE(out.find("measured another model"), std::string::npos) << out;
    EXPECT_FALSE(prune_test::exists(card_dir + "/README.md"));

    card_dir = fx.dir + "/card";
    write_text(sw, sweep_json(fx, "random", source_sha(fx)).dump(2));
    ASSERT_EQ(report(""), 0) << out;
    std::string card = read_text(card_dir + "/README.md");
    std::string sizes = section(card, "Other sizes");
    EXPECT_NE(sizes.find("| 6 | "), std::string::npos) << sizes;
    EXPECT_EQ(sizes.find("this N"), std::string::npos) << sizes;
    EXPECT_NE(sizes.find("ranked by `random`, not this build's method"), std::string::npos) << sizes;
    EXPECT_NE(section(card, "Not verified").find("ranked experts by `random`"), std::string::npos) << card;
    EXPECT_EQ(read_text(card_dir + "/figures/sweep-kld.svg").find("this build"), std::string::npos);

    // the plan's own method: this N, marked
    write_text(sw, sweep_json(fx, "reap", source_sha(fx)).dump(2));
    ASSERT_EQ(report(" --force"), 0) << out;
    card = read_text(card_dir + "/README.md");
    EXPECT_NE(section(card, "Other sizes").find("| 6 (this N) | "), std::string::npos) << card;
    EXPECT_NE(read_text(card_dir + "/figures/sweep-kld.svg").find("this build: N = 6"), std::string::npos);
    EXPECT_EQ(section(card, "Not verified").find("ranked experts by"), std::string::npos) << card;
}

// Issue 26 item 3: a sweep of several sources (version 3) shows its frontier
// on the card, and names the point this build is: the source with this
// build's source's router weights and file size, at the plan's N. A source
// list without this build's source says so.
TEST(ReportCard, SweepFrontierNamesThisBuild) {
    fixture fx;
    std::string why, out;
    if (!setup("report_frontier", fx, why)) GTEST_SKIP() << why;
    g::model m;
    ASSERT_TRUE(g::open_model(fx.model, m, why)) << why;
    reap::moe::model_identity id;
    ASSERT_TRUE(reap::moe::identity_of(m, id, why)) << why;
    const std::string sw = fx.dir + "/sweep.json", card_dir = fx.dir + "/card";
    auto write_sweep = [&](uint64_t source_bytes) {
        nlohmann::ordered_json j = sweep_json(fx, "reap", source_sha(fx));
        j["version"] = 3;
        j["reference"] = {{"model", "ref-f32.gguf"}, {"kld_base", ""}};
        nlohmann::ordered_json other_points = j["points"];
        for (auto & pt : other_points) pt["overall"]["kld_mean"] = 2 * pt["overall"]["kld_mean"].get<double>();
        j["sources"] = {{{"path", "other-quant.gguf"}, {"header_sha256", source_sha(fx)}, {"router_sha256", id.router_sha256},
                         {"file_bytes", 12345}, {"points", other_points}},
                        {{"path", fx.model}, {"header_sha256", source_sha(fx)}, {"router_sha256", id.router_sha256},
                         {"file_bytes", source_bytes}, {"points", j["points"]}}};
        j["frontier"] = nlohmann::ordered_json::array();
        for (int n : {12, 6}) {
            j["frontier"].push_back({{"request", {{"keep", std::to_string(n)}}}, {"best", {{"source", fx.model}, {"n_keep", n}}}});
        }
        write_text(sw, j.dump(2));
    };
    auto report = [&](const std::string & extra) {
        return run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " --sweep " + quote(sw) +
                            " -o " + quote(card_dir) + extra, out);
    };
    write_sweep(m.file_bytes());
    ASSERT_EQ(report(""), 0) << out;
    std::string sizes = section(read_text(card_dir + "/README.md"), "Other sizes");
    EXPECT_NE(sizes.find("### Which quantisation to cut"), std::string::npos) << sizes;
    EXPECT_NE(sizes.find("| keep 6 | `" + reap::util::base_name(fx.model) + "` (this build) | 6 |"), std::string::npos) << sizes;
    EXPECT_NE(sizes.find("| keep 12 | `" + reap::util::base_name(fx.model) + "` | 12 |"), std::string::npos) << sizes;   // not this N
    EXPECT_NE(sizes.find("`other-quant.gguf` (N 6) | 0.1667 |"), std::string::npos) << sizes;   // the lead: 2/6 - 1/6
    EXPECT_NE(sizes.find("This build is `" + reap::util::base_name(fx.model) + "` at N = 6, a point of the sweep."), std::string::npos) << sizes;
    const std::string svg = read_text(card_dir + "/figures/sweep-frontier.svg");
    EXPECT_NE(svg.find("other-quant.gguf"), std::string::npos);
    EXPECT_NE(svg.find("best per request"), std::string::npos);
    // another file size: another quantisation, so no point of the sweep is this build
    write_sweep(m.file_bytes() + 1);
    ASSERT_EQ(report(" --force"), 0) << out;
    sizes = section(read_text(card_dir + "/README.md"), "Other sizes");
    EXPECT_EQ(sizes.find("(this build)"), std::string::npos) << sizes;
    EXPECT_NE(sizes.find("none of the sweep's sources"), std::string::npos) << sizes;
}

// Issue 23, item 10: impossible numbers in an eval or sweep are refused with
// the field named. Against the binary before this change each made a card.
TEST(ReportClaims, ImpossibleNumbersAreRefused) {
    fixture fx;
    std::string why, out;
    if (!setup("report_impossible", fx, why)) GTEST_SKIP() << why;
    struct bad { std::string flag, file, words; nlohmann::json doc; };
    nlohmann::json kld = nlohmann::json::parse(eval_json(build_files(fx), std::string(64, '2'), {"en"}));
    kld["kld_mean"] = -1.0;
    nlohmann::json top1 = nlohmann::json::parse(eval_json(build_files(fx), std::string(64, '2'), {"en"}));
    top1["argmax_agree"] = 2.5;
    nlohmann::json huge = nlohmann::json::parse(eval_json(build_files(fx), std::string(64, '2'), {"en"}));
    huge["n_tokens"] = 18446744073709551615ull;
    nlohmann::json twice = nlohmann::json::parse(sweep_json(fx, "reap", "").dump());
    twice["points"][1]["n_keep"] = 12;
    const std::vector<bad> cases = {{"--eval", "kld.json", "kld_mean", kld},
                                    {"--eval", "top1.json", "argmax_agree", top1},
                                    {"--eval", "huge.json", "n_tokens", huge},
                                    {"--sweep", "twice.json", "n_keep = 12 is scored twice", twice}};
    for (const auto & b : cases) {
        const std::string path = fx.dir + "/" + b.file;
        write_text(path, b.doc.dump(2));
        EXPECT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(fx.cut) + " " + b.flag + " " + quote(path) +
                               " -o " + quote(fx.dir + "/card-" + b.file), out), 2) << b.file << ": " << out;
        EXPECT_NE(out.find(b.words), std::string::npos) << b.file << ": " << out;
        EXPECT_FALSE(prune_test::exists(fx.dir + "/card-" + b.file + "/README.md")) << b.file;
    }
}

// Text from inputs is data (issue 23 item 9): a build whose file name holds
// Markdown, HTML and shell syntax gets a card whose "How to run" lines hand the
// shell that name as one word (the shell itself says so, and runs nothing of
// it), and whose tables keep their columns.
TEST(ReportText, HostileFileNamesStayData) {
    fixture fx;
    std::string why, out;
    if (!setup("report_hostile", fx, why)) GTEST_SKIP() << why;
    const std::string name = "m<script>alert(1)<|x`$(touch PWNED)`'q.gguf";   // no slash: one file
    const std::string cut = fx.dir + "/build/" + name;
    ASSERT_EQ(run_reap("prune -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " -o " + quote(cut), out), 0) << out;
    const std::string card_dir = fx.dir + "/card";
    ASSERT_EQ(run_reap("report -m " + quote(fx.model) + " --plan " + quote(fx.plan) + " " + quote(cut) + " -o " +
                       quote(card_dir), out), 0) << out;
    const std::string card = read_text(card_dir + "/README.md");
    // the llama-server line, as a user would paste it: the shell sees the name as one word
    const size_t at = card.find("llama-server -m ");
    ASSERT_NE(at, std::string::npos) << card;
    const std::string line = card.substr(at, card.find('\n', at) - at);
    const std::string script = fx.dir + "/words.sh";
    write_text(script, "cd " + quote(fx.dir) + " && set -- " + line.substr(std::string("llama-server ").size()) +
                           " && printf '%s' \"$2\"\n");
    ASSERT_EQ(prune_test::run("sh " + quote(script), out), 0) << out;
    EXPECT_EQ(out, name) << line;
    EXPECT_FALSE(prune_test::exists(fx.dir + "/PWNED")) << "the card's command ran part of the name";
    // every table row has its header's columns (a pipe in a name is escaped)
    auto cells = [](const std::string & row) {
        int n = 0;
        for (size_t i = 0; i < row.size(); ++i) {
            if (row[i] == '\\') { ++i; continue; }
            if (row[i] == '|') ++n;
        }
        return n;
    };
    std::istringstream is(card);
    int header = -1;
    for (std::string row; std::getline(is, row);) {
        const size_t b = row.find_first_not_of(' ');
        if (b == std::string::npos || row[b] != '|') { header = -1; continue; }
        if (header < 0) header = cells(row);
        else EXPECT_EQ(cells(row), header) << row;
    }
}

TEST(ReportFigures, HeatmapAtK3ScaleStaysSmallAndExact) {
    reap::util::heatmap h;
    h.title = "k3";
    h.n_cols = 896;
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(0, 1);
    for (int r = 0; r < 92; ++r) {
        h.row_labels.push_back(std::to_string(r + 1));
        std::vector<double> v(896);
        for (double & x : v) x = std::pow(u(rng), 4);
        std::sort(v.rbegin(), v.rend());
        for (int c = 0; c < 896; ++c) {
            h.values.push_back(v[c]);
            h.marked.push_back(c < 400 || c == 700 + r ? 1 : 0);   // kept block plus one protected expert per row
        }
    }
    const std::string svg = reap::util::render_heatmap_svg(h);
    EXPECT_LT(svg.size(), 3u << 20) << "heatmap of 92 x 896 is " << svg.size() << " bytes";
    const std::vector<std::string> rows = tags(svg, "g", "data-row=");
    ASSERT_EQ(rows.size(), 92u);
    for (size_t r = 0; r < rows.size(); ++r) {
        const std::vector<double> v = numbers(attr(rows[r], "data-values")), m = numbers(attr(rows[r], "data-marked"));
        ASSERT_EQ(v.size(), 896u);
        for (size_t c = 0; c < 896; ++c) {
            ASSERT_EQ(v[c], h.values[r * 896 + c]) << r << "," << c;
            ASSERT_EQ(m[c], h.marked[r * 896 + c]) << r << "," << c;
        }
    }
    // the drawn rectangles cover every cell once, marked ones on the marked ramp
    size_t covered = 0, marked_cells = 0;
    for (const auto & t : tags(svg, "rect", "data-cols=")) {
        const std::vector<double> cr = numbers(attr(t, "data-cols"));
        covered += (size_t) cr[1];
        if (attr(t, "data-marked") == "1") marked_cells += (size_t) cr[1];
    }
    EXPECT_EQ(covered, 92u * 896u);
    EXPECT_EQ(marked_cells, 92u * 401u);
    if (!have_rsvg()) GTEST_SKIP() << "rsvg-convert not installed";
    const std::string dir = prune_test::scratch("report_heatmap_k3");
    write_text(dir + "/h.svg", svg);
    std::string out;
    ASSERT_EQ(prune_test::run("rsvg-convert -f png -o " + quote(dir + "/h.png") + " " + quote(dir + "/h.svg"), out), 0) << out;
    uint32_t w = 0, hh = 0;
    ASSERT_TRUE(png_size(dir + "/h.png", w, hh));
    EXPECT_EQ(w, (uint32_t) reap::util::k_chart_width);
    EXPECT_EQ(hh, (uint32_t) std::lround(reap::util::heatmap_height(h)));
}

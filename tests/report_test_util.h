// report_test_util.h: the fixtures of test_report.cpp (the report library,
// in-process) and test_cli_report.cpp (`reap report` end to end): the zoo's
// qwen3moe, a synthetic saliency archive, a plan keeping 6 of 16 and its
// build, made through the library (plan/choose.h, prune/run.h); eval and
// sweep documents of that build; and readers of the card and its SVG figures.
#pragma once

#include "cli/commands.h"   // REAP_VERSION
#include "formats/eval_file.h"
#include "formats/sweep_file.h"
#include "gguf/gguf.h"
#include "moe/identity.h"
#include "plan/choose.h"
#include "plan/plan.h"
#include "prune/run.h"
#include "prune_test_util.h"
#include "saliency_test_util.h"
#include "util/svg_chart.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <unistd.h>

namespace g = reap::gguf;
namespace s = reap::saliency;
using prune_test::quote;

namespace report_test {


inline std::string read_text(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline void write_text(const std::string & path, const std::string & text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

inline nlohmann::json read_json(const std::string & path) { return nlohmann::json::parse(read_text(path)); }

// sha256sum's answer for a file.
inline std::string sha256sum(const std::string & path) {
    std::string out;
    if (prune_test::run("sha256sum " + quote(path), out) != 0) return "";
    return out.substr(0, 64);
}

// The text of a card section: from "## NAME" to the next "## ".
inline std::string section(const std::string & card, const std::string & name) {
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

// The version the fixtures' plan and build record (reap's own, as the CLI would).
inline constexpr const char * k_tool_version = REAP_VERSION;

inline constexpr const char * k_corpus_sha = "1111111111111111111111111111111111111111111111111111111111111111";

// `reap prune -m SOURCE --plan PLAN -o OUT [--split-max-tensors N]` as library
// calls (prune/run.h): the build and its SHA256SUMS line.
inline bool prune_build(const fixture & fx, const std::string & out, uint64_t split_max_tensors, std::string & why) {
    reap::prune::prune_request req;
    req.model = fx.model;
    req.plan = fx.plan;
    req.output = out;
    req.split_max_tensors = split_max_tensors;
    req.version = k_tool_version;
    req.sync = false;
    reap::prune::prune_job job;
    reap::prune::prune_written written;
    reap::util::error e;
    if (!reap::prune::prepare_prune(req, job, e) || !reap::prune::write_prune(job, written, e)) {
        why = e.message;
        return false;
    }
    return true;
}

// The zoo's qwen3moe, an archive "measured" on it (en, code; corpus hash
// recorded), a plan keeping 6 of 16 and its build (split into shards when
// `split`), all through the library (plan/choose.h, prune/run.h).
// `edit_source`, when given, makes the source from the zoo's file (written
// to the scratch folder) before anything is measured on it.
inline bool setup(const std::string & name, fixture & fx, std::string & why, bool split = false,
                  const std::function<bool(const std::string & zoo_model, const std::string & out, std::string & why)> & edit_source = {},
                  const std::function<void(s::archive & a)> & edit_archive = {}) {
    const std::string zoo = prune_test::zoo_dir("report_zoo", why);
    if (zoo.empty()) return false;
    fx.dir = prune_test::scratch(name);
    fx.model = zoo + "/qwen3moe.gguf";
    if (edit_source) {
        const std::string edited = fx.dir + "/source.gguf";
        if (!edit_source(fx.model, edited, why)) return false;
        fx.model = edited;
    }
    fx.sal = fx.dir + "/sal.gguf";
    fx.plan = fx.dir + "/plan.json";
    g::model m;
    std::string err;
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
    if (edit_archive) edit_archive(fx.a);
    if (!s::write_archive(fx.a, fx.sal, err, true)) { why = err; return false; }
    reap::planner::plan_request req;   // reap plan SAL -m MODEL --keep 6 -o PLAN
    req.saliency = fx.sal;
    req.model = fx.model;
    req.output = fx.plan;
    req.keep = 6;
    req.version = k_tool_version;
    reap::planner::plan_choice choice;
    reap::util::error e;
    if (!reap::planner::choose_plan(req, choice, e)) { why = e.message; return false; }
    if (!reap::write_plan(choice.p, fx.plan, false, err)) { why = err; return false; }
    fx.plan_json = read_json(fx.plan);
    std::filesystem::create_directories(fx.dir + "/build");
    fx.cut = fx.dir + "/build/cut.gguf";
    if (!prune_build(fx, fx.cut, split ? 8 : 0, why)) return false;
    return true;
}

// The build's files as `reap prune` named them.
inline std::vector<std::string> build_files(const fixture & fx) {
    std::vector<std::string> v;
    for (const auto & f : gguf_test::list_dir(fx.dir + "/build")) {
        if (prune_test::quote(f).find(".gguf") != std::string::npos) v.push_back(fx.dir + "/build/" + f);
    }
    std::sort(v.begin(), v.end());
    return v;
}

// An eval JSON as `reap eval --json` writes it for one pruned file, naming
// `files` by their hashes and the corpus by `input_sha`.
inline std::string eval_json(const std::vector<std::string> & files, const std::string & input_sha,
                      const std::vector<std::string> & domains) {
    nlohmann::ordered_json j;
    auto m = [](double k, size_t n) {
        return nlohmann::ordered_json{{"ppl_base", 10.0}, {"ppl_pruned", 11.0}, {"ppl_ratio", 1.1}, {"kld_mean", k},
                                      {"kld_median", k / 2}, {"kld_p99", k * 5}, {"kld_max", k * 9}, {"argmax_agree", 0.9},
                                      {"n_tokens", n}};
    };
    nlohmann::ordered_json d = nlohmann::ordered_json::object();
    // each token in one domain: the domains share the 1,000 (the first takes the
    // remainder), KLD spread around 0.125; the whole row their token-weighted mean
    const size_t nd = domains.size(), per = nd ? 1000 / nd : 0;
    double weighted = 0;
    for (size_t i = 0; i < nd; ++i) {
        const size_t n = i == 0 ? 1000 - per * (nd - 1) : per;
        const double k = 0.125 + 0.01 * ((double) i - (double) (nd - 1) / 2);
        d[domains[i]] = m(k, n);
        weighted += k * (double) n;
    }
    j = m(nd ? weighted / 1000 : 0.125, 1000);
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
inline nlohmann::ordered_json sweep_json(const fixture & fx, const std::string & method, const std::string & model_sha) {
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
                                {"domains", {{"en", m(1.0 / n, 10)}}}});
    }
    return sw;
}

// The fingerprint (plan::model_header_sha256) of the zoo's qwen3moe and of
// another model of its shape: a copy written with another general.name.
inline std::string source_sha(const fixture & fx) {
    g::model m;
    std::string err;
    return g::open_model(fx.model, m, err) ? reap::model_header_sha256(m) : err;
}

inline std::string other_model_sha(const fixture & fx) {
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
inline reap::eval_report build_eval(const fixture & fx, const std::string & base_sha) {
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

// The source model's identity (moe::identity_of: its router hash and shape).
inline bool source_identity(const fixture & fx, reap::moe::model_identity & id, std::string & why) {
    g::model m;
    return g::open_model(fx.model, m, why) && reap::moe::identity_of(m, id, why);
}

// Width and height of a PNG, from its IHDR chunk.
inline bool png_size(const std::string & path, uint32_t & w, uint32_t & h) {
    const std::vector<uint8_t> b = prune_test::read_all(path);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (b.size() < 24 || !std::equal(sig, sig + 8, b.begin()) || std::string(b.begin() + 12, b.begin() + 16) != "IHDR") return false;
    auto be = [&](size_t i) { return (uint32_t) b[i] << 24 | (uint32_t) b[i + 1] << 16 | (uint32_t) b[i + 2] << 8 | b[i + 3]; };
    w = be(16);
    h = be(20);
    return true;
}

// The attribute `name` of the first tag in `tag`.
inline std::string attr(const std::string & tag, const std::string & name) {
    const std::string key = " " + name + "=\"";
    const size_t a = tag.find(key);
    if (a == std::string::npos) return "";
    const size_t b = tag.find('"', a + key.size());
    return tag.substr(a + key.size(), b - a - key.size());
}

// Every tag of `svg` opening with `<kind ` that carries `has`.
inline std::vector<std::string> tags(const std::string & svg, const std::string & kind, const std::string & has) {
    std::vector<std::string> v;
    for (size_t p = svg.find("<" + kind + " "); p != std::string::npos; p = svg.find("<" + kind + " ", p + 1)) {
        const std::string t = svg.substr(p, svg.find('>', p) - p + 1);
        if (t.find(has) != std::string::npos) v.push_back(t);
    }
    return v;
}

inline std::vector<double> numbers(const std::string & s) {
    std::vector<double> v;
    std::istringstream in(s);
    double x;
    while (in >> x) v.push_back(x);
    return v;
}

// The REAP score per expert of one layer over every domain, from the archive.
inline std::vector<double> reap_score(const s::archive & a, int layer) {
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

inline bool have_rsvg() {
    std::string out;
    return prune_test::run("command -v rsvg-convert", out) == 0;
}

} // namespace report_test

// test_llama_archs.cpp: reap against every MoE architecture the pinned
// llama.cpp writes. For each arch, make_arch_models (tests/make_arch_models.cpp)
// has llama.cpp itself build and save a small random model (16 experts, top-2,
// four blocks, a byte-level vocabulary), so which tensors exist and where their
// expert axis lies is llama.cpp's word, not reap's. Then:
//   * inspect: `reap inspect --json` describes it, and the layout table, with the
//     arch required to be in the table and its block rule checked, classifies
//     every tensor; the MoE blocks are exactly those llama.cpp routes through,
//     every tensor llama.cpp names as per-expert (_exps, router, exp_probs_b) is
//     sliced, and the experts per token are what llama.cpp picks. An arch the
//     table cannot classify is a failure.
//   * calibrate: over a short text, Σ count = tokens × experts used in every MoE
//     layer, for exactly the MoE layers; and the gate-weight and expert-output
//     nodes calibrate reads (its report names them) are those llama.cpp applies:
//     per token, Σ_k g_k·f_k over the selected experts equals the routed MoE
//     output node (ffn_moe_out) within 1e-4 relative.
//   * prune: a random 50% plan with unsorted keep order prunes, verifies byte for
//     byte, loads and decodes in llama.cpp (finite logits, routing only to kept ids).
//   * never-routed: the experts a prompt never reaches in a layer are pruned (the
//     routed ones kept, shuffled); llama.cpp's logits for that prompt are then the
//     base's and its routing the base's renumbered, for every arch whose routing
//     weights of the selected experts do not depend on the others (the layout's
//     weights_change_when_pruned). Where they do (a softmax over all experts
//     without renormalisation), the first MoE layer's routing must still be the
//     base's renumbered, each of its gate weights the base's divided by the
//     softmax mass of the kept experts (read from llama.cpp's ffn_moe_probs and
//     ffn_moe_weights nodes), and the logits must move.
// Each arch writes its row to $REAP_TEST_TMP/archs/table/<arch>.tsv (one line,
// tab-separated: arch, MoE blocks, inspect, calibrate, gate check, prune,
// never-routed); scripts/arch_table.py turns those rows into the table of
// docs/architectures.md (`make arch-table`).
#include "llama_test_util.h"
#include "prune_test_util.h"

#include "llama/calibrate.h"
#include "moe/census.h"
#include "moe/layout_gguf.h"
#include "plan/plan.h"
#include "saliency/archive.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

using namespace reap_test;
namespace sal = reap::saliency;

namespace {

std::string generator() {
    return llama_bin_dir() + "/make_arch_models";
}

// make_arch_models --list: the archs it writes, and the skipped ones with reasons.
void arch_list(std::vector<std::string> & archs, std::vector<std::string> & skipped) {
    std::string out;
    if (run_cmd(shell_quote(generator()) + " --list", out) != 0) return;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("skip ", 0) == 0) {
            skipped.push_back(line.substr(5));
        } else if (!line.empty()) {
            archs.push_back(line);
        }
    }
}

std::vector<std::string> archs() {
    std::vector<std::string> a, s;
    arch_list(a, s);
    return a;
}

// The model of `arch` (generated once per test tmp dir).
std::string arch_model(const std::string & arch, const std::string & variant, std::string & err) {
    const std::string dir = test_tmp_dir() + "/archs";
    ::mkdir(dir.c_str(), 0755);
    const std::string path = dir + "/" + arch + (variant.empty() ? "" : "-" + variant) + ".gguf";
    if (file_exists(path)) return path;
    std::string out;
    const std::string cmd = shell_quote(generator()) + " --arch " + shell_quote(arch) + " --out " + shell_quote(path) +
                            (variant.empty() ? "" : " --variant " + variant);
    if (run_cmd(cmd, out) != 0 || !file_exists(path)) {
        err = "make_arch_models failed: " + cmd + "\n" + out;
        return "";
    }
    return path;
}

// Prompts: one for calibration and the 50% cut, a short one for the
// never-routed cut (few tokens, so that most experts stay unrouted).
const char * k_text =
    "The quick brown fox jumps over the lazy dog. int main() { return 0; } "
    "Experts route tokens; the router picks the top k.";
const char * k_short = "Hi yo";

struct row {
    std::string arch, moe_layers, inspect = "-", calibrate = "-", gate_check = "-", prune = "-", never_routed = "-";
};

// One TSV field: tabs and line breaks (an error message may hold them) become spaces.
std::string tsv_field(std::string s) {
    for (char & c : s) {
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    }
    return s;
}

void write_row(const row & r) {
    const std::string dir = test_tmp_dir() + "/archs/table";
    ::mkdir((test_tmp_dir() + "/archs").c_str(), 0755);
    ::mkdir(dir.c_str(), 0755);
    std::ofstream out(dir + "/" + r.arch + ".tsv");
    const std::string fields[] = {r.arch, r.moe_layers, r.inspect, r.calibrate, r.gate_check, r.prune, r.never_routed};
    for (size_t i = 0; i < std::size(fields); ++i) out << (i ? "\t" : "") << tsv_field(fields[i]);
    out << "\n";
}

// Whether llama.cpp's naming makes `t` a routed-expert tensor: an _exps, router
// or selection-bias name with a dimension of n_expert (arctic's ffn_norm_exps is
// one vector of n_embd, shared experts are not routed).
bool is_expert_tensor(const reap::gguf::tensor_info & t, int64_t n_expert) {
    const std::string & name = t.name;
    if (name.find("_shexp") != std::string::npos) return false;
    bool dim = false;
    for (uint32_t d = 0; d < t.n_dims && d < 4; ++d) dim = dim || t.ne[d] == n_expert;
    return dim && (name.find("_exps.") != std::string::npos || name.find(".ffn_gate_inp.") != std::string::npos ||
                   name.find(".exp_probs_b") != std::string::npos);
}

// A plan keeping, in every MoE layer, the experts `routed` lists for it (in a
// shuffled order), topped up to one common count with unrouted ones.
reap::plan plan_keeping(const reap::moe::layout & lay,
                        const std::map<int, std::vector<std::vector<int32_t>>> & routed, uint32_t seed) {
    std::map<int, std::set<int64_t>> used;
    size_t n_keep = (size_t) lay.n_expert_used;
    for (const auto & [il, rows] : routed) {
        for (const auto & r : rows) used[il].insert(r.begin(), r.end());
        n_keep = std::max(n_keep, used[il].size());
    }
    std::mt19937 rng(seed);
    reap::plan p;
    p.arch = lay.arch;
    p.n_layer = lay.n_layer;
    p.n_expert = lay.n_expert;
    p.n_expert_used = lay.n_expert_used;
    p.n_keep = (int64_t) n_keep;
    for (int il : lay.moe_layers) {
        reap::plan_layer pl;
        pl.layer = il;
        pl.keep.assign(used[il].begin(), used[il].end());
        for (int64_t e = 0; e < lay.n_expert && pl.keep.size() < n_keep; ++e) {
            if (!used[il].count(e)) pl.keep.push_back(e);
        }
        std::shuffle(pl.keep.begin(), pl.keep.end(), rng);
        p.layers.push_back(pl);
    }
    p.provenance = {{"method", "never-routed"}};
    return p;
}

// Archs whose llama.cpp model loads expert tensors (router, *_exps) but whose
// graph runs only a dense FFN (build_ffn on weights that are absent in an MoE
// file), so no token is ever routed: refact in the pinned llama.cpp.
const std::set<std::string> k_unrouted = {"refact"};

// For those: calibrate refuses, naming the routing node it cannot find, and a
// random 50% cut (pruned, verified, loaded) computes exactly the base's logits,
// since no expert takes part.
void check_unrouted_arch(const std::string & arch, const reap::gguf::model & m, const std::string & path,
                         const prompt_run & base, row & r) {
    std::string err, out;
    const std::string dir = prune_test::scratch("archs-" + arch);
    std::ofstream(dir + "/text.txt") << k_text << "\n";
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate -m " + shell_quote(path) + " --corpus " +
                          shell_quote(dir + "/text.txt") + " -o " + shell_quote(dir + "/s.gguf") + " -c 64 -t 1",
                      out), 2) << out;
    EXPECT_NE(out.find("ffn_moe_topk"), std::string::npos) << out;
    r.calibrate = "refused: graph routes no token";
    reap::plan p;
    const int64_t n_keep = prune_test::half_keep(m);
    ASSERT_TRUE(prune_test::random_plan(m, n_keep, 20261130, p, err)) << err;
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/half.json", dir + "/half.gguf", written, err)) << err;
    ASSERT_TRUE(prune_test::verify(m, p, dir + "/half.json", dir + "/half.gguf", err)) << err;
    prompt_run cut;
    ASSERT_TRUE(run_prompt(dir + "/half.gguf", k_text, cut, err, 1)) << err;
    EXPECT_EQ(cut.logits, base.logits) << arch << ": experts that llama.cpp never runs changed the logits";
    r.prune = std::string(testing::Test::HasFailure() ? "FAIL" : "pruned, verified, same logits") + " (keep " +
              std::to_string(n_keep) + "/" + std::to_string(p.n_expert) + ")";
    r.never_routed = "n/a: same logits after any cut";
    write_row(r);
}

// Archs the layout table refuses on purpose, and the piece of the tensor name
// its error names: grovemoe's chunk experts (*_chexps) have their own count and
// are weighted by the router probability at index e / group, so no renumbering
// of a cut keeps its logits. For those: inspect's layout, prune and calibrate
// all refuse it (exit 2), naming the tensor, and write nothing.
const std::map<std::string, std::string> k_refused = {{"grovemoe", "_chexps"}};

void check_refused_arch(const std::string & arch, const reap::gguf::model & m, const std::string & path,
                        const std::string & needle, row & r) {
    const std::string dir = prune_test::scratch("archs-" + arch);
    std::ofstream(dir + "/text.txt") << k_text << "\n";
    uint32_t n_layer = 0;
    for (const auto & t : m.tensors) {
        size_t dot;
        const long il = reap::gguf::block_index(t.name, dot);
        if (il >= 0) n_layer = std::max<uint32_t>(n_layer, (uint32_t) il + 1);
    }
    nlohmann::json layers = nlohmann::json::array();
    for (uint32_t il = 0; il < n_layer; ++il) layers.push_back({{"layer", il}, {"keep", {0, 1, 2, 3, 4, 5, 6, 7}}});
    std::ofstream(dir + "/p.json") << nlohmann::json({{"format", "reap-plan"}, {"version", 1},
                                                      {"model", {{"arch", arch}, {"n_layer", n_layer}, {"n_expert", 16},
                                                                 {"n_expert_used", 2}}},
                                                      {"n_keep", 8}, {"layers", layers}}).dump();
    std::string out;
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " prune -m " + shell_quote(path) + " --plan " + shell_quote(dir + "/p.json") +
                          " -o " + shell_quote(dir + "/out.gguf"), out), 2) << out;
    EXPECT_NE(out.find(needle), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/out.gguf"));
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate -m " + shell_quote(path) + " --corpus " +
                          shell_quote(dir + "/text.txt") + " -o " + shell_quote(dir + "/s.gguf") + " -c 64 -t 1", out), 2)
        << out;
    EXPECT_NE(out.find(needle), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/s.gguf"));
    r.calibrate = r.prune = testing::Test::HasFailure() ? "FAIL" : "refused (exit 2, tensor named)";
    write_row(r);
}

// The values of named graph nodes in one decode of a prompt (contiguous F32
// nodes only), through the scheduler's eval callback.
struct node_capture {
    std::set<std::string> names;
    std::set<std::string> optional;   // read when present
    std::map<std::string, std::vector<float>> data;
    std::string bad;   // a wanted node that could not be read

    explicit node_capture(std::set<std::string> n, std::set<std::string> opt = {})
        : names(std::move(n)), optional(std::move(opt)) {}

    static bool callback(ggml_tensor * t, bool ask, void * user) {
        auto * self = static_cast<node_capture *>(user);
        if (!self->names.count(t->name) && !self->optional.count(t->name)) return false;
        if (ask) return true;
        if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) {
            self->bad = t->name;
            return true;
        }
        auto & v = self->data[t->name];
        const size_t old = v.size();
        v.resize(old + (size_t) ggml_nelements(t));
        ggml_backend_tensor_get(t, v.data() + old, 0, ggml_nbytes(t));
        return true;
    }

    bool run(const std::string & path, const std::string & prompt, std::string & err) {
        model_ptr model = load_model(path);
        context_ptr ctx = model ? new_context(model.get(), 128, callback, this, false, 1) : nullptr;
        const std::vector<llama_token> toks = model ? tokenize(model.get(), prompt) : std::vector<llama_token>{};
        if (!ctx || toks.empty() || decode_all(ctx.get(), toks) != 0) {
            err = "could not run " + path;
            return false;
        }
        for (const auto & n : names) {
            if (!data.count(n)) bad = n;
        }
        if (!bad.empty()) err = path + ": node " + bad + " missing or not a contiguous F32 tensor";
        return bad.empty();
    }
};

class ArchMatrix : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchMatrix, InspectCalibratePruneNeverRouted) {
    const std::string arch = GetParam();
    const auto t0 = std::chrono::steady_clock::now();
    row r;
    r.arch = arch;
    std::string err;
    const std::string path = arch_model(arch, "", err);
    ASSERT_FALSE(path.empty()) << err;

    // ---- inspect / the layout table
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(path, m, err)) << err;
    reap::moe::layout lay;
    const auto refused = k_refused.find(arch);
    if (!reap::moe::layout_of(m, lay, err)) {
        if (refused != k_refused.end() && err.find(refused->second) != std::string::npos) {
            r.inspect = "refused: " + err;
            check_refused_arch(arch, m, path, refused->second, r);
            return;
        }
        r.inspect = "FAIL: " + err;
        write_row(r);
        FAIL() << arch << ": the layout table cannot classify it: " << err;
    }
    ASSERT_EQ(refused, k_refused.end()) << arch << ": the layout table now classifies it; drop it from k_refused";
    write_row(r);  // a row even when a later step fails
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        if (is_expert_tensor(m.tensors[i], lay.n_expert)) {
            EXPECT_NE(lay.roles[i].slice, reap::moe::slice_kind::none) << m.tensors[i].name << " left unsliced";
        }
    }
    std::string inspect_out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " inspect " + shell_quote(path) + " --json", inspect_out), 0)
        << inspect_out;
    const nlohmann::json census = nlohmann::json::parse(inspect_out, nullptr, false);
    ASSERT_FALSE(census.is_discarded()) << inspect_out;
    EXPECT_EQ(census["moe_layers"].get<std::vector<int>>(), lay.moe_layers);
    EXPECT_EQ(census["n_expert"].get<int64_t>(), lay.n_expert);
    for (int il : lay.moe_layers) r.moe_layers += (r.moe_layers.empty() ? "" : ",") + std::to_string(il);

    prompt_run base;
    ASSERT_TRUE(run_prompt(path, k_text, base, err, 1)) << err;
    ASSERT_TRUE(all_finite(base.logits)) << arch;
    std::vector<int> routed_layers;
    for (const auto & [il, rows] : base.routed) {
        routed_layers.push_back(il);
        ASSERT_EQ((int) rows.size(), base.n_tokens) << "layer " << il;
        for (const auto & row : rows) {
            ASSERT_EQ((int64_t) row.size(), lay.n_expert_used) << "layer " << il;
            for (int32_t e : row) ASSERT_TRUE(e >= 0 && e < lay.n_expert) << "layer " << il << " expert " << e;
        }
    }
    ASSERT_GE(lay.moe_layers.size(), 1u);
    const bool graph_ignores_experts = k_unrouted.count(arch) > 0;
    if (graph_ignores_experts) {
        EXPECT_TRUE(routed_layers.empty()) << arch << ": llama.cpp now routes through its experts; drop it from k_unrouted";
    } else {
        EXPECT_EQ(routed_layers, lay.moe_layers) << arch << ": reap's MoE layers differ from those llama.cpp routes";
    }
    r.inspect = "ok (" + std::to_string(lay.n_expert) + " experts, top-" + std::to_string(lay.n_expert_used) + ")";
    write_row(r);
    if (graph_ignores_experts) {
        check_unrouted_arch(arch, m, path, base, r);
        return;
    }

    // ---- calibrate
    const std::string dir = prune_test::scratch("archs-" + arch);
    const std::string corpus = dir + "/text.txt";
    std::ofstream(corpus) << k_text << "\n" << k_text << "\n";
    reap::calibrate_options co;
    co.model_path = path;
    co.corpus_path = corpus;
    co.out_path = dir + "/s.gguf";
    co.rt.n_ctx = co.rt.n_batch = co.rt.n_ubatch = 64;
    co.rt.n_threads = 1;   // tiny models: a second thread only spins
    co.rt.llama.n_gpu_layers = 0;
    co.progress = false;
    co.force = true;
    sal::archive a;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(co, a, rep, err)) << arch << ": " << err;
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << arch << ": " << err;
    std::vector<int> arch_layers(a.model.moe_layers.begin(), a.model.moe_layers.end());
    EXPECT_EQ(arch_layers, lay.moe_layers);
    ASSERT_FALSE(a.domains.empty());
    for (int il : lay.moe_layers) {
        double sum = 0;
        for (int64_t e = 0; e < lay.n_expert; ++e) sum += a.domains[0].count[a.index(il, (int) e)];
        EXPECT_GT(sum, 0) << "layer " << il << " recorded nothing";
    }
    // the gate weights and expert outputs calibrate reads are what llama.cpp applies:
    // in every MoE layer and for every token, Σ_k g_k·f_k over the selected experts is
    // the routed MoE output (ffn_moe_out; the shared expert is added after it).
    // llama4 weights the expert input instead, so there the outputs just sum.
    {
        // smallthinker renames build_moe_ffn's output node to ffn_out (a second cb on
        // the same tensor): that name is read when ffn_moe_out is absent
        std::set<std::string> names, fallback;
        for (int il : lay.moe_layers) {
            names.insert(rep.weights_node + "-" + std::to_string(il));
            names.insert(rep.down_node + "-" + std::to_string(il));
            fallback.insert("ffn_moe_out-" + std::to_string(il));
            fallback.insert("ffn_out-" + std::to_string(il));
        }
        node_capture nodes(names, fallback);
        ASSERT_TRUE(nodes.run(path, k_short, err)) << arch << ": " << err;
        double worst = 0;
        for (int il : lay.moe_layers) {
            const std::string L = "-" + std::to_string(il);
            const std::vector<float> & g = nodes.data[rep.weights_node + L];
            const std::vector<float> & f = nodes.data[rep.down_node + L];
            const bool renamed = !nodes.data.count("ffn_moe_out" + L);
            const std::vector<float> & out = nodes.data[(renamed ? "ffn_out" : "ffn_moe_out") + L];
            const size_t k = (size_t) lay.n_expert_used, n_tok = g.size() / k;
            ASSERT_GT(n_tok, 0u);
            ASSERT_FALSE(out.empty()) << arch << " layer " << il << ": no MoE output node";
            ASSERT_EQ(out.size() % n_tok, 0u);
            const size_t d = out.size() / n_tok;
            ASSERT_EQ(f.size(), n_tok * k * d) << arch << " layer " << il << ": expert outputs of an unexpected shape";
            for (size_t t = 0; t < n_tok; ++t) {
                double num = 0, den = 0;
                for (size_t c = 0; c < d; ++c) {
                    double sum = 0;
                    for (size_t j = 0; j < k; ++j) {
                        const double gk = lay.router.weight_before_ffn ? 1.0 : g[t * k + j];
                        sum += gk * f[(t * k + j) * d + c];
                    }
                    const double o = out[t * d + c];
                    num += (sum - o) * (sum - o);
                    den += o * o;
                }
                worst = std::max(worst, std::sqrt(num / std::max(den, 1e-30)));
            }
        }
        EXPECT_LT(worst, 1e-4) << arch << ": Σ g·f over " << rep.weights_node << " and " << rep.down_node
                               << " does not reproduce ffn_moe_out";
        r.gate_check = std::string(worst < 1e-4 ? "" : "FAIL ") + rep.weights_node + " · " + rep.down_node;
    }
    r.calibrate = "Σcount = " + std::to_string(a.domains[0].n_tokens) + " tokens × " + std::to_string(lay.n_expert_used) +
                  " in every MoE layer";
    write_row(r);

    // ---- a random 50% cut, unsorted keep order
    {
        reap::plan p;
        const int64_t n_keep = prune_test::half_keep(m);
        ASSERT_TRUE(prune_test::random_plan(m, n_keep, 20261130, p, err)) << err;
        std::vector<std::string> written;
        ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/half.json", dir + "/half.gguf", written, err)) << err;
        ASSERT_TRUE(prune_test::verify(m, p, dir + "/half.json", dir + "/half.gguf", err)) << err;
        prompt_run cut;
        ASSERT_TRUE(run_prompt(dir + "/half.gguf", k_text, cut, err, 1)) << err;
        EXPECT_TRUE(all_finite(cut.logits));
        ASSERT_EQ(cut.routed.size(), base.routed.size());
        for (const auto & [il, rows] : cut.routed) {
            for (const auto & row : rows) {
                for (int32_t e : row) ASSERT_TRUE(e >= 0 && e < n_keep) << "layer " << il << " expert " << e;
            }
        }
        // the file says which source experts it kept, as the plan lists them (read by ggml),
        // split too; llama.cpp loads the split set
        std::map<int, std::vector<int64_t>> want;
        for (const reap::plan_layer & pl : p.layers) want[pl.layer] = pl.keep;
        EXPECT_EQ(ggml_kept_ids(dir + "/half.gguf"), want);
        std::vector<std::string> shards;
        ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/half.json", dir + "/split.gguf", shards, err, true, 0, 4)) << err;
        ASSERT_GT(shards.size(), 1u);
        EXPECT_EQ(ggml_kept_ids(shards[0]), want);
        EXPECT_NE(load_model(shards[0]), nullptr) << "llama.cpp does not load the split set";
        r.prune = "pruned, verified, decodes (keep " + std::to_string(n_keep) + "/" + std::to_string(lay.n_expert) + ")";
        write_row(r);
    }

    // ---- prune exactly the experts a short prompt never reaches
    prompt_run small;
    ASSERT_TRUE(run_prompt(path, k_short, small, err, 1)) << err;
    const reap::plan p = plan_keeping(lay, small.routed, 7);
    ASSERT_LT(p.n_keep, lay.n_expert) << "the short prompt reached every expert: nothing to prune";
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/unrouted.json", dir + "/unrouted.gguf", written, err)) << err;
    ASSERT_TRUE(prune_test::verify(m, p, dir + "/unrouted.json", dir + "/unrouted.gguf", err)) << err;
    prompt_run cut;
    ASSERT_TRUE(run_prompt(dir + "/unrouted.gguf", k_short, cut, err, 1)) << err;
    std::map<int, std::vector<int32_t>> new_id;
    for (const auto & pl : p.layers) new_id[pl.layer] = inverse_keep(pl.keep, lay.n_expert);
    std::string why;
    const std::string kept = "keep " + std::to_string(p.n_keep) + "/" + std::to_string(lay.n_expert);
    if (!lay.router.weights_change_when_pruned) {
        EXPECT_TRUE(same_model(small, cut, new_id, why)) << arch << " (" << reap::moe::gating_name(lay.router.gating)
                                                         << "): " << why;
        r.never_routed = (testing::Test::HasFailure() ? "FAIL: " : "same logits (") + kept + ")";
    } else {
        // softmax over all experts, not renormalised: in the first MoE layer (whose
        // input the cut does not touch) the same experts are picked, renumbered, and
        // each weight is the base's divided by the softmax mass the kept experts had:
        // w'(t,k) = w(t,k) / Σ_{e kept} p(t,e), p the base's softmax over all experts.
        const int il = lay.moe_layers.front();
        ASSERT_EQ(cut.routed.at(il).size(), small.routed.at(il).size());
        for (size_t t = 0; t < small.routed.at(il).size(); ++t) {
            for (size_t k = 0; k < small.routed.at(il)[t].size(); ++k) {
                EXPECT_EQ(new_id[il][small.routed.at(il)[t][k]], cut.routed.at(il)[t][k]) << "token " << t;
            }
        }
        node_capture before({"ffn_moe_probs-" + std::to_string(il), "ffn_moe_weights-" + std::to_string(il)});
        node_capture after({"ffn_moe_weights-" + std::to_string(il)});
        ASSERT_TRUE(before.run(path, k_short, err)) << err;
        ASSERT_TRUE(after.run(dir + "/unrouted.gguf", k_short, err)) << err;
        const std::vector<float> & probs = before.data["ffn_moe_probs-" + std::to_string(il)];
        const std::vector<float> & w = before.data["ffn_moe_weights-" + std::to_string(il)];
        const std::vector<float> & w2 = after.data["ffn_moe_weights-" + std::to_string(il)];
        const size_t n_tok = small.routed.at(il).size(), n_used = (size_t) lay.n_expert_used;
        ASSERT_EQ(probs.size(), n_tok * (size_t) lay.n_expert);
        ASSERT_EQ(w.size(), n_tok * n_used);
        ASSERT_EQ(w2.size(), n_tok * n_used);
        const std::vector<int64_t> & keep = p.layers.front().keep;
        double worst = 0;
        for (size_t t = 0; t < n_tok; ++t) {
            double mass = 0;
            for (int64_t e : keep) mass += probs[t * (size_t) lay.n_expert + (size_t) e];
            for (size_t k = 0; k < n_used; ++k) {
                const double want = w[t * n_used + k] / mass, got = w2[t * n_used + k];
                worst = std::max(worst, std::fabs(got - want) / std::max(1e-30, std::fabs(want)));
            }
        }
        EXPECT_LT(worst, 1e-4) << arch << ": weights after the cut are not the base's renormalised over the kept experts";
        EXPECT_FALSE(same_model(small, cut, new_id, why)) << arch << ": softmax without renormalisation, yet " << why;
        r.never_routed = std::string(testing::Test::HasFailure() ? "FAIL: " : "") +
                         "routing kept; weights = base / kept softmax mass (softmax not renormalised; " + kept + ")";
    }
    write_row(r);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-14s %5.2f s  MoE layers %s  %s\n", arch.c_str(), secs, r.moe_layers.c_str(), r.never_routed.c_str());
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, ArchMatrix, ::testing::ValuesIn(archs()),
                         [](const ::testing::TestParamInfo<std::string> & i) {
                             std::string s = i.param;
                             for (char & c : s) if (!isalnum((unsigned char) c)) c = '_';
                             return s;
                         });

// Per-layer MoE keys: nemotron_h with <arch>.expert_used_count a per-layer
// array, 0 in its attention and recurrent blocks 0 and 1, 2 in its MoE blocks 2
// and 3 (llama.cpp's graph reads the array per layer for this arch). Every module
// reads the MoE blocks' value: the layout, inspect's census, the archive
// fingerprint, calibrate (whose invariant needs it), plan and prune.
TEST(ArchVariants, PerLayerExpertUsedCount) {
    std::string err;
    const std::string path = arch_model("nemotron_h", "used-array", err);
    ASSERT_FALSE(path.empty()) << err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(path, m, err)) << err;
    std::vector<int64_t> arr;
    ASSERT_TRUE(m.kvs.get_i64_array("nemotron_h.expert_used_count", arr, err)) << "not an array: " << err;
    EXPECT_EQ(arr, (std::vector<int64_t>{0, 0, 2, 2}));
    reap::moe::layout lay;
    ASSERT_TRUE(reap::moe::layout_of(m, lay, err)) << err;
    EXPECT_EQ(lay.n_expert_used, 2);
    EXPECT_EQ(lay.moe_layers, (std::vector<int>{2, 3}));
    reap::moe::census c;
    ASSERT_TRUE(reap::moe::take_census(m, {}, c, err)) << err;
    EXPECT_EQ(c.n_expert_used, 2u);
    sal::fingerprint fp;
    ASSERT_TRUE(sal::model_fingerprint(m, fp, err)) << err;
    EXPECT_EQ(fp.n_expert_used, 2u);

    // llama.cpp runs it with top-2 in blocks 2 and 3
    prompt_run base;
    ASSERT_TRUE(run_prompt(path, k_text, base, err, 1)) << err;
    ASSERT_EQ(base.routed.size(), 2u);
    for (const auto & [il, rows] : base.routed) ASSERT_EQ(rows.at(0).size(), 2u) << "layer " << il;

    // calibrate and a 50% cut
    const std::string dir = prune_test::scratch("archs-used-array");
    std::ofstream(dir + "/text.txt") << k_text << "\n";
    std::string out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate -m " + shell_quote(path) + " --corpus " +
                          shell_quote(dir + "/text.txt") + " -o " + shell_quote(dir + "/s.gguf") + " -c 64 -t 1",
                      out), 0) << out;
    sal::archive a;
    ASSERT_TRUE(sal::read_archive(dir + "/s.gguf", a, err)) << err;
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    EXPECT_EQ(a.model.n_expert_used, 2u);
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 5, p, err)) << err;
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/p.json", dir + "/cut.gguf", written, err)) << err;
    ASSERT_TRUE(prune_test::verify(m, p, dir + "/p.json", dir + "/cut.gguf", err)) << err;
    prompt_run cut;
    ASSERT_TRUE(run_prompt(dir + "/cut.gguf", k_text, cut, err, 1)) << err;
    EXPECT_TRUE(all_finite(cut.logits));
}

// Bad input: a model with an expert-axis tensor the layout table does not know
// (here "blk.1.ffn_route_table.weight", one row per expert) is refused by prune
// and by calibrate, naming the tensor; nothing is written.
TEST(ArchVariants, UnknownExpertAxisTensorRefused) {
    std::string err;
    const std::string src = arch_model("qwen3moe", "", err);
    ASSERT_FALSE(src.empty()) << err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(src, m, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 3, p, err)) << err;
    const std::string dir = prune_test::scratch("archs-unknown-tensor");
    ASSERT_TRUE(reap::write_plan(p, dir + "/p.json", true, err)) << err;

    reap::gguf::output_spec spec = reap::gguf::spec_from_model(m);
    reap::gguf::output_tensor t;
    t.name = "blk.1.ffn_route_table.weight";
    t.n_dims = 2;
    t.ne[0] = 32;
    t.ne[1] = 16;   // n_expert
    t.type = reap::gguf::tensor_type::F32;
    t.memory = std::make_shared<std::vector<uint8_t>>(32 * 16 * 4, 0);
    spec.tensors.push_back(t);
    reap::gguf::write_options wo;
    wo.sync = false;
    std::vector<std::string> written;
    const std::string bad = dir + "/bad.gguf";
    ASSERT_TRUE(reap::gguf::write_output(spec, wo, bad, written, err)) << err;

    std::ofstream(dir + "/text.txt") << k_text << "\n";
    std::string out;
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " prune -m " + shell_quote(bad) + " --plan " +
                          shell_quote(dir + "/p.json") + " -o " + shell_quote(dir + "/out.gguf"), out), 2) << out;
    EXPECT_NE(out.find("blk.1.ffn_route_table.weight"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/out.gguf"));
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate -m " + shell_quote(bad) + " --corpus " +
                          shell_quote(dir + "/text.txt") + " -o " + shell_quote(dir + "/s.gguf") + " -c 64", out), 2)
        << out;
    EXPECT_NE(out.find("blk.1.ffn_route_table.weight"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/s.gguf"));
}

// The generator runs and lists the archs; an empty list would make the matrix
// above vanish silently.
TEST(ArchList, EveryMoEArchLlamaCppWrites) {
    std::vector<std::string> a, s;
    arch_list(a, s);
    EXPECT_GE(a.size(), 40u) << "make_arch_models --list gave too few archs (" << generator() << ")";
    EXPECT_GE(s.size(), 5u);
    for (const std::string & x : s) EXPECT_NE(x.find(": "), std::string::npos) << "no reason given: " << x;
}

}  // namespace

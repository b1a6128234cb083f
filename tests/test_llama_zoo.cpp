// test_llama_zoo.cpp: every model of the arch zoo (tools/make_zoo.py) loads and
// decodes in the pinned llama.cpp, with finite logits for every token and a routing
// record for exactly the MoE layers the zoo says it has; and quantised variants made
// with llama.cpp's own llama-quantize (Q8_0, Q4_K_M, and IQ2_XXS from an imatrix
// made by llama-imatrix) load and decode too. This is what keeps the zoo honest:
// the layout, slicer and calibration tests rely on these files being real models.
// On every one of these files reap itself is checked against llama.cpp: the MoE
// layers, expert count and experts per token of reap's layout (the table that
// plan, prune and calibrate go by) are those llama.cpp routes through, and
// reap's census (tensors, bytes by type, the *_exps pool) is what ggml's gguf
// reader finds in the file.
#include "llama_test_util.h"

#include "moe/census.h"
#include "gguf/gguf.h"
#include "plan/plan.h"

#include "gguf.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace reap_test;

namespace {

const char * k_prompt =
    "The quick brown fox jumps over the lazy dog. int main() { return 0; } "
    "Experts route tokens; the router picks the top k.";

nlohmann::json read_facts(const std::string & gguf_path) {
    const std::string json_path = gguf_path.substr(0, gguf_path.size() - 5) + ".json";
    std::ifstream f(json_path);
    if (!f) {
        return nullptr;
    }
    return nlohmann::json::parse(f, nullptr, false);
}

// The GGML type of one tensor in a GGUF file, or -1.
int tensor_type(const std::string & path, const std::string & name) {
    gguf_init_params ip = {/*no_alloc =*/ true, /*ctx =*/ nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    if (!g) {
        return -1;
    }
    const int64_t id = gguf_find_tensor(g, name.c_str());
    const int t = id < 0 ? -1 : (int) gguf_get_tensor_type(g, id);
    gguf_free(g);
    return t;
}

// Loads `path`, decodes the prompt with logits for all tokens, checks them, and
// checks the routing record against the zoo's facts (when given).
void check_model_runs(const std::string & path, const nlohmann::json & facts) {
    model_ptr model = load_model(path);
    ASSERT_TRUE(model) << "llama.cpp could not load " << path;

    topk_collector topk;
    context_ptr ctx = new_context(model.get(), 128, topk_collector::callback, &topk);
    ASSERT_TRUE(ctx) << "no context for " << path;

    const std::vector<llama_token> toks = tokenize(model.get(), k_prompt);
    ASSERT_GT(toks.size(), 20u);
    ASSERT_LE(toks.size(), 128u);
    ASSERT_EQ(decode_all(ctx.get(), toks), 0) << path;

    const std::vector<float> logits = get_logits(ctx.get(), model.get(), (int) toks.size());
    ASSERT_FALSE(logits.empty());
    EXPECT_TRUE(all_finite(logits)) << path << ": non-finite logits";

    // the rows differ between tokens: the model is not degenerate
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
    double diff = 0;
    for (int v = 0; v < n_vocab; ++v) {
        diff += std::fabs(logits[v] - logits[(size_t) (toks.size() - 1) * n_vocab + v]);
    }
    EXPECT_GT(diff, 1e-3) << path << ": first and last token have the same logits";

    // reap's layout of the same file: the MoE layers llama.cpp routed, their
    // experts per token, ids within reap's expert count
    {
        reap::gguf::model gm;
        reap::moe::layout lay;
        std::string err;
        ASSERT_TRUE(reap::gguf::open_model(path, gm, err)) << err;
        ASSERT_TRUE(reap::model_layout(gm, lay, err)) << path << ": " << err;
        std::set<int> routed_layers;
        for (const auto & [il, rows] : topk.routed) {
            routed_layers.insert(il);
            for (const auto & row : rows) {
                ASSERT_EQ((int64_t) row.size(), lay.n_expert_used) << path << " layer " << il;
                for (int e : row) ASSERT_LT(e, lay.n_expert) << path << " layer " << il;
            }
        }
        EXPECT_EQ(std::set<int>(lay.moe_layers.begin(), lay.moe_layers.end()), routed_layers)
            << path << ": reap's MoE layers differ from those llama.cpp routes through";
    }

    if (facts.is_null()) {
        return;
    }
    const int n_expert = facts["n_expert"];
    const int n_used   = facts["n_expert_used"];
    std::set<int> want_layers;
    for (int l : facts["moe_layers"]) {
        want_layers.insert(l);
    }
    std::set<int> got_layers;
    std::set<int> experts_seen;
    for (const auto & [il, rows] : topk.routed) {
        got_layers.insert(il);
        ASSERT_EQ(rows.size(), toks.size()) << "layer " << il << ": one routing row per token";
        for (const auto & row : rows) {
            ASSERT_EQ((int) row.size(), n_used);
            std::set<int> uniq(row.begin(), row.end());
            EXPECT_EQ((int) uniq.size(), n_used) << "layer " << il << ": an expert picked twice for one token";
            for (int e : row) {
                ASSERT_GE(e, 0);
                ASSERT_LT(e, n_expert);
                experts_seen.insert(e);
            }
        }
    }
    EXPECT_EQ(got_layers, want_layers) << path << ": MoE layers seen by cb_eval differ from the zoo's";
    // with random routers, a 30-token prompt reaches more than the top-k of one token
    EXPECT_GT((int) experts_seen.size(), n_used) << path;

    if (facts.value("expert_group_count", 0) > 1) {
        // group-limited routing: per token, the experts come from at most group_used groups
        const int n_group = facts["expert_group_count"];
        const int n_group_used = facts["expert_group_used_count"];
        const int per_group = n_expert / n_group;
        for (const auto & [il, rows] : topk.routed) {
            for (const auto & row : rows) {
                std::set<int> groups;
                for (int e : row) {
                    groups.insert(e / per_group);
                }
                EXPECT_LE((int) groups.size(), n_group_used) << "layer " << il;
            }
        }
    }
}

// reap's census of `path` against ggml's gguf reader: the tensor count, bytes
// by type (ggml's names and sizes), all tensor bytes, and the *_exps pool.
void expect_census_matches_ggml(const std::string & path) {
    SCOPED_TRACE(path);
    reap::gguf::model gm;
    reap::moe::census c;
    std::string err;
    ASSERT_TRUE(reap::gguf::open_model(path, gm, err)) << err;
    ASSERT_TRUE(reap::moe::take_census(gm, {}, c, err)) << err;
    gguf_init_params ip = {/*no_alloc =*/ true, /*ctx =*/ nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    ASSERT_TRUE(g);
    std::map<std::string, std::pair<uint64_t, uint64_t>> types;   // name -> count, bytes
    uint64_t total = 0, pool = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const uint64_t bytes = gguf_get_tensor_size(g, i);
        auto & ty = types[ggml_type_name(gguf_get_tensor_type(g, i))];
        ty.first += 1;
        ty.second += bytes;
        total += bytes;
        if (std::string(gguf_get_tensor_name(g, i)).find("_exps") != std::string::npos) pool += bytes;
    }
    EXPECT_EQ(c.n_tensors, (uint64_t) gguf_get_n_tensors(g));
    gguf_free(g);
    EXPECT_EQ(c.tensor_bytes, total);
    EXPECT_EQ(c.expert_pool_bytes, pool);
    EXPECT_GT(pool, 0u);
    EXPECT_EQ(c.dense_bytes, total - pool);
    ASSERT_EQ(c.types.size(), types.size());
    for (const auto & [name, tc] : c.types) {
        ASSERT_TRUE(types.count(name)) << "reap names a type ggml does not: " << name;
        EXPECT_EQ(tc.count, types[name].first) << name;
        EXPECT_EQ(tc.bytes, types[name].second) << name;
    }
}

class ZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooModel, LoadsAndDecodes) {
    std::string err;
    const std::string path = zoo_model(GetParam(), err);
    ASSERT_FALSE(path.empty()) << err;
    const nlohmann::json facts = read_facts(path);
    ASSERT_FALSE(facts.is_null()) << "no facts file beside " << path;
    check_model_runs(path, facts);
    expect_census_matches_ggml(path);
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooModel, ::testing::ValuesIn(zoo_names()),
                         [](const ::testing::TestParamInfo<std::string> & info) {
                             std::string n = info.param;
                             for (char & c : n) {
                                 if (!isalnum((unsigned char) c)) {
                                     c = '_';
                                 }
                             }
                             return n;
                         });

// The generator is deterministic: same name, same bytes.
TEST(Zoo, Deterministic) {
    const std::string dir = test_tmp_dir() + "/zoo-determinism";
    std::string out1, out2;
    const std::string base = shell_quote(python()) + " " + shell_quote(source_dir() + "/tools/make_zoo.py") +
                             " --arch qwen2moe --out ";
    ASSERT_EQ(run_cmd(base + shell_quote(dir + "/a"), out1), 0) << out1;
    ASSERT_EQ(run_cmd(base + shell_quote(dir + "/b"), out2), 0) << out2;
    std::ifstream a(dir + "/a/qwen2moe.gguf", std::ios::binary), b(dir + "/b/qwen2moe.gguf", std::ios::binary);
    std::stringstream sa, sb;
    sa << a.rdbuf();
    sb << b.rdbuf();
    ASSERT_GT(sa.str().size(), 1000u);
    EXPECT_TRUE(sa.str() == sb.str());
}

// ---- quantised variants ----------------------------------------------------------

// Quantised with llama.cpp's llama-quantize (IQ2_XXS from an llama-imatrix imatrix):
// the expert slabs really get the type, and the model still loads and decodes.
void check_quant(const std::string & type, ggml_type expect_exps) {
    if (!has_llama_tools()) {
        GTEST_SKIP() << "llama-quantize / llama-imatrix not built in " << llama_bin_dir();
    }
    std::string err;
    const std::string base = zoo_model("qwen3moe-q256", err);
    ASSERT_FALSE(base.empty()) << err;
    const std::string path = zoo_quantized("qwen3moe-q256", type, err);
    ASSERT_FALSE(path.empty()) << err;
    // no silent fallback to another type for the slabs (their rows are 256 wide)
    EXPECT_EQ(tensor_type(path, "blk.0.ffn_gate_exps.weight"), (int) expect_exps) << type;
    EXPECT_EQ(tensor_type(path, "blk.1.ffn_up_exps.weight"), (int) expect_exps) << type;
    // the facts of the base still apply: same experts, same MoE layers
    check_model_runs(path, read_facts(base));
    expect_census_matches_ggml(path);
}

TEST(ZooQuant, Q8_0)    { check_quant("Q8_0", GGML_TYPE_Q8_0); }
TEST(ZooQuant, Q4_K_M)  { check_quant("Q4_K_M", GGML_TYPE_Q4_K); }
TEST(ZooQuant, IQ2_XXS) { check_quant("IQ2_XXS", GGML_TYPE_IQ2_XXS); }
TEST(ZooQuant, IQ1_S)   { check_quant("IQ1_S", GGML_TYPE_IQ1_S); }

}  // namespace

// test_llama_calibrate.cpp: reap calibrate against independent measurements.
//   * every zoo arch (qwen3moe, qwen2moe, deepseek2 sigmoid + selection bias,
//     gpt-oss router/expert biases, glm4moe, llama4 gate-before-experts, kimi-k3
//     latent experts): the archive validates, Σ_e count = tokens × n_expert_used
//     in every MoE layer (the last one included), and the per-domain counts equal
//     a plain decode's routing read through ffn_moe_topk by tests/llama_test_util.h;
//   * llama.cpp's own llama-imatrix on the same tokens: its ffn_down_exps counts
//     (read with ggml's gguf reader) equal ours exactly, and `reap imatrix` on
//     its file gives the same counts;
//   * shards: merge(calibrate(shard 0/2), calibrate(shard 1/2)) = calibrate(all);
//   * interrupted (stop flag, SIGINT, SIGKILL) + resumed = uninterrupted, byte
//     for byte; resume refuses other options;
//   * a Q8_0 model made by llama-quantize;
//   * a > 2 GB corpus with --max-tokens: peak RSS flat, same statistics as the
//     same samples in a compact file, token counts as computed here;
//   * a 163,840-token vocabulary with -b/-ub 2048: the logits stay bounded (peak
//     RSS) while every token still reaches the last layer's experts;
//   * the project's trained model (when models/reap-moe-tiny.gguf exists) against
//     tools/reference_forward.py's PyTorch computation, F32 KV cache, no flash attention;
//   * packing: many windows a decode = one window a decode (counts exact, sums
//     within archive_compare.h's bound) on the trained model and every zoo arch,
//     with the row mode llama.cpp's graph of each arch allows (calibrate.h);
//   * kimi-k3 at a 163,840-token vocabulary and -b/-ub 4096: not lowered, peak RSS
//     under 1 GiB, the same counts as -ub 256.
//   * --width-saliency (per channel of the down projection's input): ch_energy
//     equals llama-imatrix's ffn_down_exps in_sum2 per expert and channel (rel
//     1e-4), and reap imatrix --width-saliency imports exactly that; on the
//     trained model ch_energy and ch_reap (Σ g·|a_c|·‖W_down[:,c]‖) equal
//     tools/reference_forward.py's PyTorch computation; on every zoo arch the
//     expert statistics are those of a run without it, and Σ_c ch_reap bounds
//     reap_sum (triangle inequality) where the expert output has no bias;
//     on llama4 (its shared expert is cut with the routed ones) sh_energy equals
//     llama-imatrix's ffn_down_shexp in_sum2 per layer and channel (rel 1e-4),
//     sh_reap sits within the bounds the column norms put on it, and reap
//     imatrix imports that entry (and refuses a file without it); resumed =
//     uninterrupted with them, and a checkpoint without them does not resume.
#include "archive_compare.h"
#include "llama_test_util.h"

#include "llama/calibrate.h"
#include "gguf/gguf.h"
#include "llama/corpus.h"
#include "saliency/archive.h"
#include "saliency/merge.h"

#include "ggml.h"
#include "gguf.h"

#include <gtest/gtest.h>

#include <tuple>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <fstream>
#include <map>
#include <sstream>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

using namespace reap_test;
namespace sal = reap::saliency;

namespace {

std::string scratch(const std::string & name) {
    const std::string d = test_tmp_dir() + "/calibrate-" + name;
    std::string out;
    run_cmd("rm -rf " + shell_quote(d) + " && mkdir -p " + shell_quote(d), out);
    return d;
}

std::string llama_bin(const std::string & tool) {
    return env_or("REAP_LLAMA_BIN_DIR", self_dir()) + "/" + tool;
}

std::string reap_bin() { return env_or("REAP_BIN", self_dir() + "/reap"); }

void write_file(const std::string & path, const std::string & text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

std::string read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A small multi-domain corpus: text samples (one longer than the -c 64 window)
// and a messages sample with reasoning_content.
std::string small_corpus(const std::string & dir) {
    nlohmann::json lines = nlohmann::json::array({
        {{"domain", "en"}, {"text", "The quick brown fox jumps over the lazy dog. Experts route tokens; the router picks the top k of them for every token."}},
        {{"domain", "code"}, {"text", "int main(void) { for (int i = 0; i < 10; ++i) printf(\"%d\\n\", i); return 0; }"}},
        {{"domain", "en"}, {"text", "Pruning removes experts that a workload rarely routes to."}},
        {{"domain", "chat"}, {"messages", {{{"role", "user"}, {"content", "What is 2+2?"}},
                                           {{"role", "assistant"}, {"content", "4"}, {"reasoning_content", "two plus two"}}}}},
        {{"domain", "code"}, {"text", "def f(x):\n    return [y * y for y in range(x) if y % 3]\n"}},
        {{"domain", "fr"}, {"text", "Le renard brun saute par-dessus le chien paresseux."}},
        {{"domain", "en"}, {"text", "Calibration records, per domain, layer and expert, how often and how strongly each expert fires."}},
        {{"domain", "fr"}, {"text", "Les experts sont choisis par le routeur."}},
    });
    std::string text;
    for (const auto & l : lines) text += l.dump() + "\n";
    const std::string path = dir + "/corpus.jsonl";
    write_file(path, text);
    return path;
}

reap::calibrate_options opts(const std::string & model, const std::string & corpus, const std::string & out) {
    reap::calibrate_options o;
    o.model_path  = model;
    o.corpus_path = corpus;
    o.out_path    = out;
    o.rt.n_ctx    = 64;
    o.rt.n_batch  = 64;
    o.rt.n_ubatch = 64;
    o.rt.n_threads = 2;
    o.rt.llama.n_gpu_layers = 0;
    o.progress = false;
    o.force    = true;
    return o;
}

// Per domain: layer -> expert -> count, from plain decodes of the same windows.
std::map<std::string, std::map<int, std::vector<double>>> reference_counts(const std::string & model_path,
                                                                           const std::string & corpus_path, int n_ctx,
                                                                           int n_expert) {
    std::map<std::string, std::map<int, std::vector<double>>> out;
    model_ptr model = load_model(model_path);
    topk_collector topk;
    context_ptr ctx = new_context(model.get(), (uint32_t) n_ctx, topk_collector::callback, &topk);
    reap::corpus cp;
    std::string err;
    EXPECT_TRUE(reap::read_corpus_file(corpus_path, model.get(), {}, cp, err)) << err;
    for (const auto & s : cp.samples) {
        for (size_t off = 0; off < s.tokens.size(); off += (size_t) n_ctx) {
            std::vector<llama_token> w(s.tokens.begin() + off,
                                       s.tokens.begin() + std::min(s.tokens.size(), off + (size_t) n_ctx));
            llama_memory_clear(llama_get_memory(ctx.get()), true);
            topk.clear();
            EXPECT_EQ(decode_all(ctx.get(), w), 0);
            for (const auto & kv : topk.routed) {
                auto & v = out[cp.domains[s.domain]][kv.first];
                v.resize(n_expert, 0.0);
                for (const auto & row : kv.second)
                    for (int32_t e : row) v[e] += 1;
            }
        }
    }
    return out;
}

class ZooCalibrate : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooCalibrate, CountsMatchRoutingAndInvariantHolds) {
    std::string err;
    const std::string model = zoo_model(GetParam(), err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("zoo-" + GetParam());
    const std::string corpus = small_corpus(dir);
    sal::archive a;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(opts(model, corpus, dir + "/s.gguf"), a, rep, err)) << err;
    ASSERT_TRUE(sal::validate(a, err)) << err;
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    EXPECT_GT(rep.n_windows, rep.n_samples);  // the long sample was cut into windows
    EXPECT_EQ(a.domains.size(), 4u);

    // read back what was written: same as in memory
    sal::archive b;
    ASSERT_TRUE(sal::read_archive(dir + "/s.gguf", b, err)) << err;
    ASSERT_EQ(b.domains.size(), a.domains.size());
    for (size_t d = 0; d < a.domains.size(); ++d) {
        EXPECT_EQ(b.domains[d].count, a.domains[d].count);
        EXPECT_EQ(b.domains[d].reap_sum, a.domains[d].reap_sum);
    }

    const auto ref = reference_counts(model, corpus, 64, (int) a.model.n_expert);
    for (const auto & d : a.domains) {
        ASSERT_TRUE(ref.count(d.name)) << d.name;
        EXPECT_GT(d.n_tokens, 0);
        for (int l : a.model.moe_layers) {
            ASSERT_TRUE(ref.at(d.name).count(l)) << "no routing of layer " << l;
            for (uint32_t e = 0; e < a.model.n_expert; ++e) {
                EXPECT_EQ(d.count[a.index(l, e)], ref.at(d.name).at(l)[e])
                    << GetParam() << " domain " << d.name << " layer " << l << " expert " << e;
                const size_t c = a.index(l, e);
                if (d.count[c] > 0) {
                    EXPECT_GT(d.ean_sum[c], 0);
                    EXPECT_GT(d.gate_sum[c], 0);
                    EXPECT_LE(d.max_norm[c], d.ean_sum[c] * (1 + 1e-12));
                    EXPECT_GE(d.max_norm[c] * d.count[c], d.ean_sum[c] * (1 - 1e-12));
                }
            }
        }
    }
    // Gate sums: renormalised routers (and gpt-oss's softmax over the selected)
    // give weights that sum to one per token.
    if (GetParam() == "qwen3moe" || GetParam() == "gpt-oss") {
        for (int l : a.model.moe_layers) {
            double g = 0;
            int64_t n = 0;
            for (const auto & d : a.domains) {
                n += d.n_tokens;
                for (uint32_t e = 0; e < a.model.n_expert; ++e) g += d.gate_sum[a.index(l, e)];
            }
            EXPECT_NEAR(g, (double) n, 1e-3 * n) << "layer " << l;
        }
    }
}

// --width-saliency on every zoo arch: one node more changes nothing of the expert
// statistics; the channels are the down tensor's input width; every routed expert has
// channel energy; and ‖f‖ = ‖Σ_c a_c·W[:,c]‖ <= Σ_c |a_c|·‖W[:,c]‖, so reap_sum <= Σ_c ch_reap
// wherever the gate weight comes after the expert and the output has no bias (gpt-oss).
TEST_P(ZooCalibrate, WidthSaliencyAddsChannelsAndChangesNothingElse) {
    std::string err;
    const std::string model = zoo_model(GetParam(), err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("zoo-width-" + GetParam());
    const std::string corpus = small_corpus(dir);
    sal::archive plain, wide;
    reap::calibrate_report rp, rw;
    ASSERT_TRUE(reap::run_calibrate(opts(model, corpus, dir + "/plain.gguf"), plain, rp, err)) << err;
    auto o = opts(model, corpus, dir + "/wide.gguf");
    o.width_saliency = true;
    ASSERT_TRUE(reap::run_calibrate(o, wide, rw, err)) << err;
    ASSERT_TRUE(sal::validate(wide, err)) << err;
    EXPECT_EQ(plain.n_ff, 0u);
    reap::gguf::model gm;
    ASSERT_TRUE(reap::gguf::open_model(model, gm, err)) << err;
    const auto * down = gm.find_tensor("blk." + std::to_string(wide.model.moe_layers.front()) + ".ffn_down_exps.weight");
    ASSERT_NE(down, nullptr);
    EXPECT_EQ((int64_t) wide.n_ff, down->ne[0]);
    sal::archive back;
    ASSERT_TRUE(sal::read_archive(dir + "/wide.gguf", back, err)) << err;
    ASSERT_EQ(back.domains.size(), wide.domains.size());
    for (size_t d = 0; d < wide.domains.size(); ++d) {
        for (const auto & m : sal::metric_names(wide.metrics)) {
            EXPECT_EQ(*sal::metric_data(wide.domains[d], m), *sal::metric_data(plain.domains[d], m)) << GetParam() << " " << m;
        }
        EXPECT_EQ(back.domains[d].ch_energy, wide.domains[d].ch_energy);
        EXPECT_EQ(back.domains[d].ch_reap, wide.domains[d].ch_reap);
        EXPECT_EQ(back.domains[d].sh_energy, wide.domains[d].sh_energy);
        EXPECT_EQ(back.domains[d].sh_reap, wide.domains[d].sh_reap);
    }
    // the shared expert's channels: only where it is cut with the routed experts (llama4)
    EXPECT_EQ(wide.has_shared_channels, GetParam() == "llama4") << GetParam();
    EXPECT_EQ(back.has_shared_channels, wide.has_shared_channels);
    const bool bounded = !rw.weights_before_ffn && rw.down_node == "ffn_moe_down";
    size_t n_bounded = 0;
    for (const auto & d : wide.domains) {
        for (int l : wide.model.moe_layers) {
            for (uint32_t e = 0; e < wide.model.n_expert; ++e) {
                const size_t c = wide.index(l, e);
                if (d.count[c] == 0) continue;
                double energy = 0, reap = 0;
                for (uint32_t ch = 0; ch < wide.n_ff; ++ch) {
                    energy += d.ch_energy[c * wide.n_ff + ch];
                    reap += d.ch_reap[c * wide.n_ff + ch];
                }
                EXPECT_GT(energy, 0) << GetParam() << " layer " << l << " expert " << e;
                if (bounded && d.gate_sum[c] > 0) {
                    EXPECT_LE(d.reap_sum[c], reap * (1 + 1e-5)) << GetParam() << " layer " << l << " expert " << e;
                    ++n_bounded;
                }
            }
        }
    }
    if (bounded) EXPECT_GT(n_bounded, 0u);
}

INSTANTIATE_TEST_SUITE_P(Archs, ZooCalibrate,
                         ::testing::Values("qwen3moe", "qwen2moe", "deepseek2", "gpt-oss", "glm4moe", "llama4", "kimi-k3"),
                         [](const auto & info) {
                             std::string n = info.param;
                             for (char & c : n) if (c == '-') c = '_';
                             return n;
                         });

// llama-imatrix's per-expert counts of ffn_down_exps on the same tokens, and its
// in_sum2 (Σ a_c² per expert and channel of the down projection's input, summed in
// float) against calibrate --width-saliency's ch_energy (relative 1e-4); then reap
// imatrix imports the same counts, and with --width-saliency those in_sum2 values as
// they are, whose sum per expert is the energy_sum it has always imported.
// Writes dir/text.txt (12 short lines) and runs llama-imatrix on it with -c 64 -b 64
// (calibrate's windows in opts()) into dir/im.gguf.
void llama_imatrix_on_text(const std::string & model, const std::string & dir) {
    std::string text, out;
    for (int i = 0; i < 12; ++i) {
        text += "Line " + std::to_string(i) + ": the router sends each token to its top experts; "
                "some experts see code, others prose.\n";
    }
    write_file(dir + "/text.txt", text);
    ASSERT_EQ(run_cmd(shell_quote(llama_bin("llama-imatrix")) + " -m " + shell_quote(model) + " -f " +
                          shell_quote(dir + "/text.txt") + " -c 64 -b 64 -t 2 --no-ppl -o " + shell_quote(dir + "/im.gguf"),
                      out), 0) << out;
}

TEST(Calibrate, CountsAndChannelEnergiesEqualLlamaImatrix) {
    std::string err, out;
    const std::string model = zoo_model("qwen3moe", err);
    ASSERT_FALSE(model.empty()) << err;
    if (!file_exists(llama_bin("llama-imatrix"))) GTEST_SKIP() << "no " << llama_bin("llama-imatrix");
    const std::string dir = scratch("imatrix");
    ASSERT_NO_FATAL_FAILURE(llama_imatrix_on_text(model, dir));

    sal::archive a;
    reap::calibrate_report rep;
    auto o = opts(model, dir + "/text.txt", dir + "/s.gguf");
    o.width_saliency = true;
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    ASSERT_EQ(a.domains.size(), 1u);
    EXPECT_EQ(a.domains[0].name, "text");
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    ASSERT_GT(a.n_ff, 0u);

    // llama-imatrix's file, read with ggml's own reader
    ggml_context * gctx = nullptr;
    gguf_init_params ip = {/*no_alloc =*/ false, /*ctx =*/ &gctx};
    gguf_context * g = gguf_init_from_file((dir + "/im.gguf").c_str(), ip);
    ASSERT_TRUE(g);
    double worst = 0;
    size_t n_compared = 0;
    for (int l : a.model.moe_layers) {
        const std::string name = "blk." + std::to_string(l) + ".ffn_down_exps.weight.counts";
        ggml_tensor * t = ggml_get_tensor(gctx, name.c_str());
        ASSERT_TRUE(t) << name;
        ASSERT_EQ(ggml_nelements(t), (int64_t) a.model.n_expert);
        for (uint32_t e = 0; e < a.model.n_expert; ++e) {
            EXPECT_EQ(a.domains[0].count[a.index(l, e)], (double) ((const float *) t->data)[e]) << name << " expert " << e;
        }
        const std::string sname = "blk." + std::to_string(l) + ".ffn_down_exps.weight.in_sum2";
        ggml_tensor * s2 = ggml_get_tensor(gctx, sname.c_str());
        ASSERT_TRUE(s2) << sname;
        ASSERT_EQ(s2->ne[0], (int64_t) a.n_ff) << sname;
        ASSERT_EQ(s2->ne[1], (int64_t) a.model.n_expert) << sname;
        for (uint32_t e = 0; e < a.model.n_expert; ++e) {
            for (uint32_t c = 0; c < a.n_ff; ++c) {
                const double theirs = ((const float *) s2->data)[(size_t) e * a.n_ff + c];
                const double ours = a.domains[0].ch_energy[a.channel_index(l, (int) e, c)];
                if (theirs == 0) {
                    EXPECT_EQ(ours, 0) << sname << " expert " << e << " channel " << c;
                    continue;
                }
                const double rel = std::fabs(ours - theirs) / std::fabs(theirs);
                EXPECT_LE(rel, 1e-4) << sname << " expert " << e << " channel " << c << ": " << ours << " vs " << theirs;
                worst = std::max(worst, rel);
                ++n_compared;
            }
        }
    }
    gguf_free(g);
    ggml_free(gctx);
    printf("ch_energy vs llama-imatrix in_sum2: %zu channels compared, max relative difference %.2e\n", n_compared, worst);
    EXPECT_GT(n_compared, (size_t) a.n_ff * 4);

    // reap imatrix on that file gives the same counts
    if (!file_exists(reap_bin())) GTEST_SKIP() << "no " << reap_bin();
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " imatrix -m " + shell_quote(model) + " --domain text=" +
                          shell_quote(dir + "/im.gguf") + " -o " + shell_quote(dir + "/imx.gguf"), out), 0) << out;
    sal::archive b;
    ASSERT_TRUE(sal::read_archive(dir + "/imx.gguf", b, err)) << err;
    ASSERT_EQ(b.domains.size(), 1u);
    EXPECT_EQ(b.domains[0].count, a.domains[0].count);
    EXPECT_EQ(b.domains[0].n_tokens, a.domains[0].n_tokens);
    std::string e2;
    EXPECT_TRUE(sal::fingerprints_match(b.model, a.model, e2)) << e2;

    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " imatrix --width-saliency -m " + shell_quote(model) + " --domain text=" +
                          shell_quote(dir + "/im.gguf") + " -o " + shell_quote(dir + "/imw.gguf"), out), 0) << out;
    sal::archive w;
    ASSERT_TRUE(sal::read_archive(dir + "/imw.gguf", w, err)) << err;
    ASSERT_EQ(w.n_ff, a.n_ff);
    EXPECT_EQ(w.domains[0].count, a.domains[0].count);
    EXPECT_EQ(w.domains[0].energy_sum, b.domains[0].energy_sum);
    for (int l : a.model.moe_layers) {
        for (uint32_t e = 0; e < a.model.n_expert; ++e) {
            double sum = 0;
            for (uint32_t c = 0; c < a.n_ff; ++c) {
                const double x = w.domains[0].ch_energy[w.channel_index(l, (int) e, c)];
                EXPECT_NEAR(x, a.domains[0].ch_energy[a.channel_index(l, (int) e, c)], 1e-4 * x) << "layer " << l << " expert " << e;
                sum += x;
            }
            EXPECT_NEAR(sum, w.domains[0].energy_sum[w.index(l, (int) e)], 1e-12 * sum) << "layer " << l << " expert " << e;
        }
    }
}

// The F32 values of tensor `name` of a GGUF file read with ggml's own reader (empty when absent).
std::vector<float> ggml_f32_values(const std::string & path, const std::string & name) {
    ggml_context * gctx = nullptr;
    gguf_init_params ip = {/*no_alloc =*/ false, /*ctx =*/ &gctx};
    gguf_context * g = gguf_init_from_file(path.c_str(), ip);
    std::vector<float> v;
    if (!g) return v;
    if (ggml_tensor * t = ggml_get_tensor(gctx, name.c_str())) {
        v.resize((size_t) ggml_nelements(t));
        const ggml_type_traits * tr = ggml_get_type_traits(t->type);
        if (t->type == GGML_TYPE_F32) memcpy(v.data(), t->data, v.size() * sizeof(float));
        else tr->to_float(t->data, v.data(), (int64_t) v.size());
    }
    gguf_free(g);
    ggml_free(gctx);
    return v;
}

// A copy of GGUF file `src` at `dst` (reap's reader and writer) whose tensors pass
// through `edit` (return false to leave one out).
void rewrite_gguf(const std::string & src, const std::string & dst,
                  const std::function<bool(reap::gguf::output_tensor &)> & edit) {
    reap::gguf::model m;
    std::string err;
    ASSERT_TRUE(reap::gguf::open_model(src, m, err)) << err;
    reap::gguf::output_spec spec;
    spec.kvs = m.kvs;
    for (const auto & t : m.tensors) {
        reap::gguf::output_tensor o;
        o.name = t.name;
        o.type = t.type;
        o.n_dims = t.n_dims;
        for (int d = 0; d < 4; ++d) o.ne[d] = t.ne[d];
        auto bytes = std::make_shared<std::vector<uint8_t>>(t.nbytes);
        ASSERT_TRUE(reap::gguf::read_tensor_bytes(m, t, 0, t.nbytes, bytes->data(), err)) << err;
        o.memory = bytes;
        if (edit(o)) spec.tensors.push_back(std::move(o));
    }
    reap::gguf::write_options wo;
    wo.force = true;
    std::vector<std::string> written;
    ASSERT_TRUE(reap::gguf::write_output(spec, wo, dst, written, err)) << err;
}

// llama4's shared expert is cut with the routed experts, so --width-saliency measures
// its channels too: on the same text and windows, sh_energy equals llama-imatrix's
// ffn_down_shexp in_sum2 per layer and channel (relative 1e-4) and its count is every
// token; sh_reap[c] / ‖W[:,c]‖ (the column norm computed here from ggml's reading of
// the weight) lies between sqrt(sh_energy[c]) and sqrt(n_tokens · sh_energy[c]), as
// Σ_t |h_c| must, and equals sqrt(sh_energy[c]) for one token. reap imatrix -m imports those in_sum2 values as they are, and
// refuses a file without a layer's entry (or with another shape).
TEST(Calibrate, SharedExpertChannelsEqualLlamaImatrix) {
    std::string err, out;
    const std::string model = zoo_model("llama4", err);
    ASSERT_FALSE(model.empty()) << err;
    ASSERT_TRUE(file_exists(llama_bin("llama-imatrix"))) << llama_bin("llama-imatrix");
    ASSERT_TRUE(file_exists(reap_bin())) << reap_bin();
    const std::string dir = scratch("imatrix-shexp");
    ASSERT_NO_FATAL_FAILURE(llama_imatrix_on_text(model, dir));
    sal::archive a;
    reap::calibrate_report rep;
    auto o = opts(model, dir + "/text.txt", dir + "/s.gguf");
    o.width_saliency = true;
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    ASSERT_TRUE(a.has_shared_channels);
    ASSERT_EQ(a.domains.size(), 1u);
    const sal::domain_stats & d = a.domains[0];
    ASSERT_EQ(d.sh_energy.size(), (size_t) a.model.n_layer * a.n_ff);
    double worst = 0;
    size_t n_compared = 0;
    for (int l : a.model.moe_layers) {
        const std::string w = "blk." + std::to_string(l) + ".ffn_down_shexp.weight";
        const std::vector<float> in_sum2 = ggml_f32_values(dir + "/im.gguf", w + ".in_sum2");
        const std::vector<float> counts = ggml_f32_values(dir + "/im.gguf", w + ".counts");
        ASSERT_EQ(in_sum2.size(), (size_t) a.n_ff) << w;
        ASSERT_EQ(counts.size(), 1u) << w;
        EXPECT_EQ((double) counts[0], (double) d.n_tokens) << w << ": the shared expert sees every token";
        const std::vector<float> W = ggml_f32_values(model, w);   // [n_ff, n_embd]: row r holds n_ff columns' entries
        ASSERT_EQ(W.size() % a.n_ff, 0u);
        for (uint32_t c = 0; c < a.n_ff; ++c) {
            const double ours = d.sh_energy[a.shared_channel_index(l, c)];
            const double theirs = in_sum2[c];
            ASSERT_GT(theirs, 0) << w << " channel " << c;
            const double rel = std::fabs(ours - theirs) / theirs;
            EXPECT_LE(rel, 1e-4) << w << " channel " << c << ": " << ours << " vs " << theirs;
            worst = std::max(worst, rel);
            ++n_compared;
            double sq = 0;
            for (size_t r = 0; r < W.size() / a.n_ff; ++r) sq += (double) W[r * a.n_ff + c] * W[r * a.n_ff + c];
            const double per_norm = d.sh_reap[a.shared_channel_index(l, c)] / std::sqrt(sq);
            EXPECT_GE(per_norm, std::sqrt(ours) * (1 - 1e-6)) << w << " channel " << c;
            EXPECT_LE(per_norm, std::sqrt((double) d.n_tokens * ours) * (1 + 1e-6)) << w << " channel " << c;
        }
    }
    for (uint32_t c = 0; c < a.n_ff; ++c) EXPECT_EQ(d.sh_energy[a.shared_channel_index(0, c)], 0);   // a dense layer
    // one token: Σ_t |h_c| = sqrt(Σ_t h_c²), so sh_reap = ‖W[:,c]‖ · sqrt(sh_energy) exactly
    sal::archive one;
    auto o1 = opts(model, dir + "/text.txt", dir + "/one.gguf");
    o1.width_saliency = true;
    o1.max_tokens = 1;
    ASSERT_TRUE(reap::run_calibrate(o1, one, rep, err)) << err;
    ASSERT_EQ(one.domains[0].n_tokens, 1);
    size_t n_one = 0;
    for (int l : one.model.moe_layers) {
        const std::vector<float> W = ggml_f32_values(model, "blk." + std::to_string(l) + ".ffn_down_shexp.weight");
        for (uint32_t c = 0; c < one.n_ff; ++c) {
            double sq = 0;
            for (size_t r = 0; r < W.size() / one.n_ff; ++r) sq += (double) W[r * one.n_ff + c] * W[r * one.n_ff + c];
            const double e = one.domains[0].sh_energy[one.shared_channel_index(l, c)];
            const double want = std::sqrt(sq) * std::sqrt(e);
            EXPECT_NEAR(one.domains[0].sh_reap[one.shared_channel_index(l, c)], want, 1e-9 * want) << "layer " << l << " channel " << c;
            n_one += e > 0;
        }
    }
    EXPECT_GT(n_one, (size_t) one.n_ff);
    printf("sh_energy vs llama-imatrix ffn_down_shexp in_sum2: %zu channels compared, max relative difference %.2e\n",
           n_compared, worst);
    EXPECT_EQ(n_compared, a.model.moe_layers.size() * a.n_ff);

    // reap imatrix -m imports the file's values as they are
    const std::string imx = shell_quote(reap_bin()) + " imatrix --width-saliency -m " + shell_quote(model) + " --domain text=";
    ASSERT_EQ(run_cmd(imx + shell_quote(dir + "/im.gguf") + " -o " + shell_quote(dir + "/imw.gguf"), out), 0) << out;
    sal::archive b;
    ASSERT_TRUE(sal::read_archive(dir + "/imw.gguf", b, err)) << err;
    ASSERT_TRUE(b.has_shared_channels);
    EXPECT_TRUE(b.domains[0].sh_reap.empty());
    for (int l : a.model.moe_layers) {
        const std::vector<float> in_sum2 = ggml_f32_values(dir + "/im.gguf", "blk." + std::to_string(l) + ".ffn_down_shexp.weight.in_sum2");
        for (uint32_t c = 0; c < a.n_ff; ++c) EXPECT_EQ(b.domains[0].sh_energy[b.shared_channel_index(l, c)], (double) in_sum2[c]);
    }
    // the legacy .dat of the same run holds in_sum2 / count x ncall (ncall = count / 64 rounded up, per
    // llama-imatrix's writer): reap imatrix imports those values as they are (the channels' order unchanged)
    ASSERT_EQ(run_cmd(shell_quote(llama_bin("llama-imatrix")) + " -m " + shell_quote(model) + " -f " +
                          shell_quote(dir + "/text.txt") + " -c 64 -b 64 -t 2 --no-ppl --output-format dat -o " +
                          shell_quote(dir + "/im.dat"), out), 0) << out;
    ASSERT_EQ(run_cmd(imx + shell_quote(dir + "/im.dat") + " -o " + shell_quote(dir + "/imd.gguf"), out), 0) << out;
    sal::archive dat;
    ASSERT_TRUE(sal::read_archive(dir + "/imd.gguf", dat, err)) << err;
    ASSERT_TRUE(dat.has_shared_channels);
    for (int l : a.model.moe_layers) {
        const std::string w = "blk." + std::to_string(l) + ".ffn_down_shexp.weight";
        const std::vector<float> in_sum2 = ggml_f32_values(dir + "/im.gguf", w + ".in_sum2");
        const float count = ggml_f32_values(dir + "/im.gguf", w + ".counts").at(0);
        const float ncall = (float) (((int) count + 63) / 64);
        for (uint32_t c = 0; c < a.n_ff; ++c) {
            const float want = in_sum2[c] / count * ncall;
            EXPECT_NEAR(dat.domains[0].sh_energy[dat.shared_channel_index(l, c)], want, 1e-6 * want) << w << " channel " << c;
        }
    }
    // a file without layer 3's entry, or with two matrices there, is refused
    const std::string gone = "blk." + std::to_string(a.model.moe_layers.back()) + ".ffn_down_shexp.weight";
    ASSERT_NO_FATAL_FAILURE(rewrite_gguf(dir + "/im.gguf", dir + "/gone.gguf", [&](reap::gguf::output_tensor & t) {
        return t.name.rfind(gone, 0) != 0;
    }));
    EXPECT_EQ(run_cmd(imx + shell_quote(dir + "/gone.gguf") + " -o " + shell_quote(dir + "/x.gguf"), out), 2) << out;
    EXPECT_NE(out.find("has no entry '" + gone + "' (MoE layer " + std::to_string(a.model.moe_layers.back()) + ")"),
              std::string::npos) << out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " imatrix -m " + shell_quote(model) + " --domain text=" +
                          shell_quote(dir + "/gone.gguf") + " -o " + shell_quote(dir + "/counts.gguf"), out), 0)
        << "without --width-saliency the entry is not needed: " << out;
    ASSERT_NO_FATAL_FAILURE(rewrite_gguf(dir + "/im.gguf", dir + "/two.gguf", [&](reap::gguf::output_tensor & t) {
        if (t.name == gone + ".in_sum2") {   // the same values as two matrices of n_ff / 2 ...
            t.ne[0] /= 2;
            t.ne[1] = 2;
            t.n_dims = 2;   // (GGUF drops trailing dimensions of 1)
        } else if (t.name == gone + ".counts") {   // ... each with the count of the one
            auto two = std::make_shared<std::vector<uint8_t>>(*t.memory);
            two->insert(two->end(), t.memory->begin(), t.memory->end());
            t.memory = two;
            t.ne[1] = 2;
            t.n_dims = 2;
        }
        return true;
    }));
    EXPECT_EQ(run_cmd(imx + shell_quote(dir + "/two.gguf") + " -o " + shell_quote(dir + "/x.gguf"), out), 2) << out;
    EXPECT_NE(out.find("entry '" + gone + "': " + std::to_string(a.n_ff) + " values in 2 matrices, expected one matrix of " +
                       std::to_string(a.n_ff)), std::string::npos) << out;
}

TEST(Calibrate, ShardsMergeToTheWhole) {
    std::string err;
    const std::string model = zoo_model("deepseek2", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("shards");
    const std::string corpus = small_corpus(dir);
    sal::archive whole, s0, s1;
    reap::calibrate_report r, r0, r1;
    ASSERT_TRUE(reap::run_calibrate(opts(model, corpus, dir + "/all.gguf"), whole, r, err)) << err;
    auto o0 = opts(model, corpus, dir + "/s0.gguf");
    o0.shard_index = 0; o0.shard_count = 2;
    auto o1 = opts(model, corpus, dir + "/s1.gguf");
    o1.shard_index = 1; o1.shard_count = 2;
    ASSERT_TRUE(reap::run_calibrate(o0, s0, r0, err)) << err;
    ASSERT_TRUE(reap::run_calibrate(o1, s1, r1, err)) << err;
    EXPECT_EQ(r0.n_samples + r1.n_samples, r.n_samples);
    EXPECT_GT(r0.n_samples, 0u);
    EXPECT_GT(r1.n_samples, 0u);
    ASSERT_TRUE(sal::merge_into(s0, s1, err)) << err;
    ASSERT_EQ(s0.domains.size(), whole.domains.size());
    for (const auto & d : whole.domains) {
        const sal::domain_stats * m = s0.find_domain(d.name);
        ASSERT_TRUE(m) << d.name;
        EXPECT_EQ(m->n_tokens, d.n_tokens);
        EXPECT_EQ(m->count, d.count) << d.name;
        for (size_t i = 0; i < d.count.size(); ++i) {
            EXPECT_NEAR(m->reap_sum[i], d.reap_sum[i], 1e-9 * (1 + std::fabs(d.reap_sum[i])));
            EXPECT_NEAR(m->ean_sum[i], d.ean_sum[i], 1e-9 * (1 + std::fabs(d.ean_sum[i])));
            EXPECT_NEAR(m->gate_sum[i], d.gate_sum[i], 1e-9 * (1 + std::fabs(d.gate_sum[i])));
            EXPECT_EQ(m->max_norm[i], d.max_norm[i]);
        }
    }
}

// One sample counted once (issue 37 item 5): archives calibrated by reap on
// the same corpus merge only when their shards are disjoint. The whole corpus
// with a shard of it, two --max-tokens caps (prefixes of the same samples),
// shards 0/2 and 2/4 (hash 0 mod 4 is 0 mod 2) and a merge of 0/2 + 1/2 with
// 1/4 are refused; 0/2 with 1/4 merge, and the merged archive records what
// each calibration covered. Before, every one of these merged with exit 0.
// Issue 49 item 6: another corpus file holding the same samples plus one line
// is refused too (it merged, counting every shared sample twice); a file of
// that line alone merges, and the merge records the samples of both, so that
// the merged archive with either part is refused in turn.
TEST(Calibrate, MergeRefusesCalibrationsThatShareSamples) {
    std::string err;
    const std::string model = zoo_model("deepseek2", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("merge-overlap");
    const std::string corpus = small_corpus(dir);
    struct part { const char * name; uint32_t i, n; int64_t max_tokens; };
    const std::vector<part> parts = {{"all", 0, 1, 0}, {"s0of2", 0, 2, 0}, {"s1of2", 1, 2, 0}, {"s1of4", 1, 4, 0},
                                     {"s2of4", 2, 4, 0}, {"cap60", 0, 1, 60}, {"cap90", 0, 1, 90}};
    std::map<std::string, uint64_t> samples;   // name -> the samples it read (calibrate_report)
    for (const part & p : parts) {
        auto o = opts(model, corpus, dir + "/" + p.name + ".gguf");
        o.shard_index = p.i;
        o.shard_count = p.n;
        o.max_tokens = p.max_tokens;
        sal::archive a;
        reap::calibrate_report r;
        ASSERT_TRUE(reap::run_calibrate(o, a, r, err)) << p.name << ": " << err;
        samples[p.name] = r.n_samples;
        EXPECT_GT(r.n_samples, 0u) << p.name;
    }
    // another corpus: the same text with one more line
    const std::string other_dir = scratch("merge-overlap-other");
    const std::string other = small_corpus(other_dir);
    {
        std::ofstream f(other, std::ios::app);
        f << R"({"domain":"en","text":"One more line makes another corpus file."})" << "\n";
    }
    const std::string extra = other_dir + "/extra.jsonl";
    std::ofstream(extra) << R"({"domain":"en","text":"One more line makes another corpus file."})" << "\n";
    for (const auto & [file, name] : std::vector<std::pair<std::string, std::string>>{{other, "other"}, {extra, "extra"}}) {
        sal::archive a;
        reap::calibrate_report r;
        ASSERT_TRUE(reap::run_calibrate(opts(model, file, dir + "/" + name + ".gguf"), a, r, err)) << err;
    }
    auto merge = [&](std::vector<std::string> names, const std::string & out, std::string & why) {
        sal::merge_request req;
        for (const auto & n : names) req.inputs.push_back(dir + "/" + n + ".gguf");
        req.output = dir + "/" + out + ".gguf";
        req.force = true;
        sal::merge_result res;
        reap::util::error e;
        const bool ok = sal::merge_archives(req, res, e);
        why = e.message;
        return ok;
    };
    std::string why;
    for (const auto & bad : std::vector<std::vector<std::string>>{{"all", "s0of2"}, {"cap60", "cap90"}, {"s0of2", "s2of4"}}) {
        EXPECT_FALSE(merge(bad, "x", why)) << bad[0] << " + " << bad[1];
        EXPECT_NE(why.find("would count those samples' tokens twice"), std::string::npos) << why;
    }
    EXPECT_NE((merge({"all", "s0of2"}, "x", why), why).find("(the whole corpus) and " + dir + "/s0of2.gguf (shard 0/2)"), std::string::npos) << why;
    EXPECT_TRUE(merge({"s0of2", "s1of4"}, "m0-1", why)) << why;
    EXPECT_TRUE(merge({"s0of2", "s1of2"}, "m01", why)) << why;
    EXPECT_FALSE(merge({"all", "other"}, "x", why));
    EXPECT_NE(why.find(dir + "/all.gguf and " + dir + "/other.gguf were calibrated on " + std::to_string(samples["all"]) +
                       " samples in common"), std::string::npos) << why;
    EXPECT_TRUE(merge({"all", "extra"}, "m-extra", why)) << why;
    {
        sal::archive m;
        std::vector<uint64_t> hashes;
        ASSERT_TRUE(sal::read_archive(dir + "/m-extra.gguf", m, err)) << err;
        ASSERT_TRUE(sal::sample_hashes_of(m, hashes, err)) << err;
        EXPECT_EQ(hashes.size(), samples["all"] + 1);
    }
    EXPECT_FALSE(merge({"m-extra", "other"}, "x", why));
    EXPECT_NE(why.find("samples in common"), std::string::npos) << why;
    EXPECT_FALSE(merge({"m01", "s1of4"}, "x", why));
    EXPECT_NE(why.find("(shard 1/2) and " + dir + "/s1of4.gguf (shard 1/4)"), std::string::npos) << why;
    sal::archive m01;
    ASSERT_TRUE(sal::read_archive(dir + "/m01.gguf", m01, err)) << err;
    std::vector<sal::coverage> cov;
    ASSERT_TRUE(sal::coverage_of(m01, cov, err)) << err;
    ASSERT_EQ(cov.size(), 2u);
    EXPECT_EQ(cov[0].shard_index, 0u);
    EXPECT_EQ(cov[1].shard_index, 1u);
    EXPECT_EQ(cov[0].shard_count, 2u);
    EXPECT_EQ(cov[0].corpus_sha256, cov[1].corpus_sha256);
    EXPECT_EQ(samples["s0of2"] + samples["s1of2"], samples["all"]);
    // the command: exit 2, nothing written
    ASSERT_TRUE(file_exists(reap_bin())) << reap_bin();
    std::string out;
    EXPECT_EQ(run_cmd(shell_quote(reap_bin()) + " merge " + shell_quote(dir + "/cap60.gguf") + " " + shell_quote(dir + "/cap90.gguf") +
                          " -o " + shell_quote(dir + "/cli.gguf"), out), 2) << out;
    EXPECT_NE(out.find("would count those samples' tokens twice"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/cli.gguf"));
}

TEST(Calibrate, CapsLimitTokens) {
    std::string err;
    const std::string model = zoo_model("qwen3moe", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("caps");
    const std::string corpus = small_corpus(dir);
    auto o = opts(model, corpus, dir + "/s.gguf");
    o.max_tokens_per_domain = 30;
    sal::archive a;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    for (const auto & d : a.domains) EXPECT_EQ(d.n_tokens, 30) << d.name;
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    o.max_tokens_per_domain = 0;
    o.max_tokens = 100;
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    int64_t n = 0;
    for (const auto & d : a.domains) n += d.n_tokens;
    EXPECT_EQ(n, 100);
    EXPECT_EQ(rep.n_tokens, 100);
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
}

TEST(Calibrate, InterruptedAndResumedEqualsUninterrupted) {
    std::string err;
    const std::string model = zoo_model("gpt-oss", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("resume");
    const std::string corpus = small_corpus(dir);
    sal::archive a;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(opts(model, corpus, dir + "/full.gguf"), a, rep, err)) << err;

    // the short samples of the corpus are packed: several windows a decode
    ASSERT_LT(rep.n_decodes, rep.n_windows);

    // stop requested from the start: one decode, then a checkpoint (at a decode's end)
    std::atomic<bool> stop{true};
    auto o = opts(model, corpus, dir + "/resumed.gguf");
    o.force = false;
    o.stop  = &stop;
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    EXPECT_TRUE(rep.interrupted);
    EXPECT_GE(rep.n_windows_done, 1u);
    EXPECT_LT(rep.n_windows_done, rep.n_windows);
    EXPECT_FALSE(file_exists(dir + "/resumed.gguf"));
    ASSERT_TRUE(file_exists(dir + "/resumed.gguf.checkpoint"));

    // a second interrupted leg, with periodic checkpoints
    stop = false;
    o.resume = true;
    o.checkpoint_every = 2;
    // without --resume a checkpoint in the way is an error
    auto fresh = o;
    fresh.resume = false;
    EXPECT_FALSE(reap::run_calibrate(fresh, a, rep, err));
    EXPECT_NE(err.find("--resume"), std::string::npos) << err;
    // other options: refused
    auto other = o;
    other.rt.n_ctx = 32;
    other.rt.n_batch = 32;
    EXPECT_FALSE(reap::run_calibrate(other, a, rep, err));
    EXPECT_NE(err.find("other options"), std::string::npos) << err;

    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    EXPECT_TRUE(rep.resumed);
    EXPECT_FALSE(rep.interrupted);
    EXPECT_FALSE(file_exists(dir + "/resumed.gguf.checkpoint"));
    const std::string x = read_bytes(dir + "/full.gguf"), y = read_bytes(dir + "/resumed.gguf");
    EXPECT_FALSE(x.empty());
    EXPECT_TRUE(x == y) << "resumed archive differs from the uninterrupted one";
}

// llama4 with --width-saliency (the shared expert's channels too): stopped after the first
// decode and resumed = uninterrupted, byte for byte; a checkpoint without the shared
// statistics (as a reap before them wrote, same options) is refused, saying so.
TEST(Calibrate, SharedChannelsResumeEqualsUninterrupted) {
    std::string err;
    const std::string model = zoo_model("llama4", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("resume-shared");
    const std::string corpus = small_corpus(dir);
    sal::archive a;
    reap::calibrate_report rep;
    auto full = opts(model, corpus, dir + "/full.gguf");
    full.width_saliency = true;
    ASSERT_TRUE(reap::run_calibrate(full, a, rep, err)) << err;
    ASSERT_TRUE(a.has_shared_channels);
    std::atomic<bool> stop{true};
    auto o = opts(model, corpus, dir + "/resumed.gguf");
    o.width_saliency = true;
    o.force = false;
    o.stop  = &stop;
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    ASSERT_TRUE(rep.interrupted);
    const std::string ck = dir + "/resumed.gguf.checkpoint";
    ASSERT_TRUE(file_exists(ck));
    const std::string ck_bytes = read_bytes(ck);
    // the same checkpoint without the shared statistics: refused
    sal::archive c;
    ASSERT_TRUE(sal::read_archive(ck, c, err)) << err;
    c.has_shared_channels = false;
    for (auto & d : c.domains) { d.sh_energy.clear(); d.sh_reap.clear(); }
    ASSERT_TRUE(sal::write_archive(c, ck, err, true)) << err;
    stop = false;
    o.resume = true;
    EXPECT_FALSE(reap::run_calibrate(o, a, rep, err));
    EXPECT_NE(err.find("was made without the shared expert's channel statistics, which this run collects"), std::string::npos) << err;
    write_file(ck, ck_bytes);
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    EXPECT_TRUE(rep.resumed);
    EXPECT_TRUE(read_bytes(dir + "/full.gguf") == read_bytes(dir + "/resumed.gguf")) << "resumed archive differs from the uninterrupted one";
}

TEST(Calibrate, QuantisedModel) {
    std::string err, out;
    const std::string model = zoo_model("qwen3moe", err);
    ASSERT_FALSE(model.empty()) << err;
    if (!file_exists(llama_bin("llama-quantize"))) GTEST_SKIP() << "no " << llama_bin("llama-quantize");
    const std::string dir = scratch("q8");
    const std::string q8 = dir + "/q8.gguf";
    ASSERT_EQ(run_cmd(shell_quote(llama_bin("llama-quantize")) + " " + shell_quote(model) + " " + shell_quote(q8) + " Q8_0 2",
                      out), 0) << out;
    const std::string corpus = small_corpus(dir);
    sal::archive a;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(opts(q8, corpus, dir + "/s.gguf"), a, rep, err)) << err;
    ASSERT_TRUE(sal::validate(a, err)) << err;
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    const auto ref = reference_counts(q8, corpus, 64, (int) a.model.n_expert);
    for (const auto & d : a.domains)
        for (int l : a.model.moe_layers)
            for (uint32_t e = 0; e < a.model.n_expert; ++e)
                EXPECT_EQ(d.count[a.index(l, e)], ref.at(d.name).at(l)[e]);
}

TEST(Calibrate, Errors) {
    std::string err;
    const std::string model = zoo_model("qwen3moe", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("errors");
    sal::archive a;
    reap::calibrate_report rep;
    write_file(dir + "/bad.jsonl", "{\"domain\": \"en\", \"text\": \"fine\"}\n{\"text\": \"no domain\"}\n");
    EXPECT_FALSE(reap::run_calibrate(opts(model, dir + "/bad.jsonl", dir + "/s.gguf"), a, rep, err));
    EXPECT_NE(err.find("bad.jsonl:2"), std::string::npos) << err;
    write_file(dir + "/short.txt", "tiny");
    EXPECT_FALSE(reap::run_calibrate(opts(model, dir + "/short.txt", dir + "/s.gguf"), a, rep, err));
    EXPECT_NE(err.find("-c 64"), std::string::npos) << err;
    const std::string corpus = small_corpus(dir);
    auto o = opts(model, corpus, dir + "/s.gguf");
    o.shard_index = 2; o.shard_count = 2;
    EXPECT_FALSE(reap::run_calibrate(o, a, rep, err));
    // no overwrite without force
    o = opts(model, corpus, dir + "/s.gguf");
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    o.force = false;
    EXPECT_FALSE(reap::run_calibrate(o, a, rep, err));
    EXPECT_NE(err.find("exists"), std::string::npos) << err;
}

// One sample of `text` calibrated in one window (F32 KV cache, no flash attention)
// and the same tokens through tools/reference_forward.py saliency (--channels with
// width), whose JSON lands in `ref`. False with `err` when a step fails.
bool calibrate_against_reference(const std::string & model, const std::string & dir, const std::string & text, bool width,
                                 sal::archive & a, nlohmann::json & ref, std::string & err) {
    write_file(dir + "/one.jsonl", nlohmann::json({{"domain", "en"}, {"text", text}}).dump() + "\n");
    auto o = opts(model, dir + "/one.jsonl", dir + "/s.gguf");
    o.rt.n_ctx = 1024;
    o.rt.past_trained = true;   // one long window against the reference's arithmetic, not the model's quality
    o.rt.n_batch = 1024;
    o.rt.n_ubatch = 1024;
    o.rt.llama.cache_type_k = GGML_TYPE_F32;
    o.rt.llama.cache_type_v = GGML_TYPE_F32;
    o.rt.llama.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    o.width_saliency = width;
    reap::calibrate_report rep;
    if (!reap::run_calibrate(o, a, rep, err)) return false;
    model_ptr m = load_model(model);
    reap::corpus cp;
    if (!reap::read_corpus_file(dir + "/one.jsonl", m.get(), {}, cp, err)) return false;
    if (rep.n_windows != 1 || cp.samples.size() != 1 || (int64_t) cp.samples[0].tokens.size() != a.domains[0].n_tokens) {
        err = "not one window of the sample's tokens";
        return false;
    }
    const auto & toks = cp.samples[0].tokens;
    {
        std::ofstream f(dir + "/tokens.bin", std::ios::binary);
        const int32_t n = (int32_t) toks.size();
        f.write((const char *) &n, 4);
        f.write((const char *) toks.data(), 4 * toks.size());
    }
    std::string out;
    if (run_cmd("REAP_SOURCE_DIR=" + shell_quote(source_dir()) + " " + shell_quote(python()) + " " +
                    shell_quote(source_dir() + "/tools/reference_forward.py") + " saliency" + (width ? " --channels" : "") +
                    " -m " + shell_quote(model) + " --dump " + shell_quote(dir + "/tokens.bin") + " --out " +
                    shell_quote(dir + "/ref.json"), out) != 0) {
        err = out;
        return false;
    }
    std::ifstream rf(dir + "/ref.json");
    ref = nlohmann::json::parse(rf);
    return true;
}

// The trained model against tools/reference_forward.py (PyTorch, the trainer's own code).
TEST(Calibrate, TrainedModelMatchesReferenceForward) {
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    if (!file_exists(model)) GTEST_SKIP() << "no " << model << " (make model)";
    const std::string dir = scratch("reference");
    // one sample, one window
    const std::string text =
        "NAME\n    ls - list directory contents\n\nSYNOPSIS\n    ls [OPTION]... [FILE]...\n\nDESCRIPTION\n"
        "    List information about the FILEs (the current directory by default). Sort entries\n"
        "    alphabetically if none of -cftuvSUX nor --sort is specified.\n"
        "int main(int argc, char **argv) { return argc > 1 ? atoi(argv[1]) : 0; }\n";
    sal::archive a;
    nlohmann::json ref;
    std::string err;
    ASSERT_TRUE(calibrate_against_reference(model, dir, text, false, a, ref, err)) << err;
    const auto & d = a.domains[0];
    for (int l : a.model.moe_layers) {
        const auto & r = ref.at(std::to_string(l));
        // the archive's sums, and MAN / MSAN as the planner scores them (sum / count) against
        // the means the reference takes over each expert's routed tokens
        constexpr int K = 7;
        double tot[K] = {}, ref_tot[K] = {}, diff[K] = {}, rel[K] = {};
        int64_t count_diff = 0;
        for (uint32_t e = 0; e < a.model.n_expert; ++e) {
            const size_t c = a.index(l, e);
            const double n = d.count[c];
            const double ours[K]   = {d.gate_sum[c], d.reap_sum[c], d.ean_sum[c], d.max_norm[c], d.ean_sq_sum[c],
                                      n > 0 ? d.ean_sum[c] / n : 0.0, n > 0 ? d.ean_sq_sum[c] / n : 0.0};
            const double theirs[K] = {r["gate_sum"][e].get<double>(), r["reap_sum"][e].get<double>(),
                                      r["ean_sum"][e].get<double>(),  r["max_norm"][e].get<double>(),
                                      r["ean_sq_sum"][e].get<double>(), r["man"][e].get<double>(), r["msan"][e].get<double>()};
            count_diff += std::llabs((int64_t) d.count[c] - r["count"][e].get<int64_t>());
            for (int k = 0; k < K; ++k) {
                tot[k] += ours[k];
                ref_tot[k] += theirs[k];
                diff[k] = std::max(diff[k], std::fabs(ours[k] - theirs[k]));
                if (theirs[k] != 0) rel[k] = std::max(rel[k], std::fabs(ours[k] - theirs[k]) / std::fabs(theirs[k]));
            }
        }
        EXPECT_EQ(count_diff, 0) << "layer " << l << ": routing differs from the reference";
        const char * names[K] = {"gate_sum", "reap_sum", "ean_sum", "max_norm", "ean_sq_sum", "man", "msan"};
        printf("layer %d: max relative difference per expert:", l);
        for (int k = 0; k < K; ++k) printf(" %s %.2e", names[k], rel[k]);
        printf("\n");
        for (int k = 0; k < K; ++k) {
            // every expert within 1e-3 relative (measured: ~1e-6 with an F32 KV cache and no flash attention)
            EXPECT_LE(rel[k], 1e-3) << "layer " << l << " " << names[k] << ": max |ours - reference| " << diff[k];
            EXPECT_NEAR(tot[k], ref_tot[k], 1e-3 * std::fabs(ref_tot[k])) << "layer " << l << " " << names[k];
        }
    }
}

// The channel statistics of the trained model against tools/reference_forward.py
// --channels: ch_energy Σ a_c² and ch_reap Σ g·|a_c|·‖W_down[:,c]‖, computed there in
// PyTorch from the trainer's own forward pass and the down weights read by gguf-py.
TEST(Calibrate, TrainedModelChannelsMatchReferenceForward) {
    const std::string model = source_dir() + "/models/reap-moe-tiny.gguf";
    if (!file_exists(model)) GTEST_SKIP() << "no " << model << " (make model)";
    const std::string dir = scratch("reference-width");
    const std::string text =
        "NAME\n    grep - print lines that match patterns\n\nSYNOPSIS\n    grep [OPTION...] PATTERNS [FILE...]\n"
        "static int count_lines(const char *s) { int n = 0; while (*s) n += *s++ == '\\n'; return n; }\n";
    sal::archive a;
    nlohmann::json ref;
    std::string err;
    ASSERT_TRUE(calibrate_against_reference(model, dir, text, true, a, ref, err)) << err;
    const auto & d = a.domains[0];
    for (int l : a.model.moe_layers) {
        const auto & r = ref.at(std::to_string(l));
        double rel[2] = {0, 0};
        for (uint32_t e = 0; e < a.model.n_expert; ++e) {
            ASSERT_EQ(d.count[a.index(l, (int) e)], r["count"][e].get<double>()) << "layer " << l << " expert " << e;
            const auto & re = r["ch_energy"][e];
            const auto & rr = r["ch_reap"][e];
            ASSERT_EQ(re.size(), (size_t) a.n_ff);
            double scale[2] = {0, 0};   // the expert's largest channel: a channel near 0 is compared on that scale
            for (uint32_t c = 0; c < a.n_ff; ++c) {
                scale[0] = std::max(scale[0], std::fabs(re[c].get<double>()));
                scale[1] = std::max(scale[1], std::fabs(rr[c].get<double>()));
            }
            for (uint32_t c = 0; c < a.n_ff; ++c) {
                const size_t i = a.channel_index(l, (int) e, c);
                const double ours[2] = {d.ch_energy[i], d.ch_reap[i]}, theirs[2] = {re[c].get<double>(), rr[c].get<double>()};
                for (int k = 0; k < 2; ++k) {
                    const double r_k = std::fabs(ours[k] - theirs[k]) / std::max(std::fabs(theirs[k]), 1e-2 * scale[k] + 1e-30);
                    rel[k] = std::max(rel[k], r_k);
                    EXPECT_LE(r_k, 1e-3) << "layer " << l << " expert " << e << " channel " << c << (k ? " ch_reap " : " ch_energy ")
                                         << ours[k] << " vs " << theirs[k];
                }
            }
        }
        printf("layer %d: max relative difference per channel: ch_energy %.2e ch_reap %.2e\n", l, rel[0], rel[1]);
    }
}

// The CLI: llama.cpp flags go through llama.cpp's parser; Ctrl-C (SIGINT)
// finishes the window, writes a checkpoint and exits 130; --resume completes
// the run with the same archive as an uninterrupted one. The interrupt is
// deterministic: $REAP_CALIBRATE_PAUSE_AFTER holds the run after window 25
// until the signal (sent by this test from outside, as a shell would) arrives,
// so the checkpoint is always the one at window 25, never a race with the end.
TEST(CalibrateCli, SigintCheckpointResume) {
    ASSERT_TRUE(file_exists(reap_bin())) << "no " << reap_bin();
    std::string err, out;
    const std::string model = zoo_model("qwen3moe", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("cli");
    std::string corpus_text;
    const int n_samples = 60;   // one window each (-c 64)
    for (int i = 0; i < n_samples; ++i) {
        corpus_text += nlohmann::json({{"domain", i % 3 ? "en" : "code"},
                                       {"text", "sample " + std::to_string(i) + ": the router picks experts."}})
                           .dump() + "\n";
    }
    write_file(dir + "/c.jsonl", corpus_text);
    const std::string flags = " -m " + shell_quote(model) + " --corpus " + shell_quote(dir + "/c.jsonl") +
                              " -c 64 -b 64 -ub 64 -np 1 -t 1 -ctk f32 -ctv f32 -fa off --no-progress";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate" + flags + " -o " + shell_quote(dir + "/full.gguf"), out), 0) << out;
    EXPECT_NE(out.find("ffn_moe_weights_norm"), std::string::npos) << out;
    EXPECT_NE(out.find("(" + std::to_string(n_samples) + " windows"), std::string::npos) << out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate --help", out), 0);
    EXPECT_NE(out.find("--shard"), std::string::npos);
    EXPECT_NE(run_cmd(shell_quote(reap_bin()) + " calibrate" + flags + " -o " + shell_quote(dir + "/x.gguf") +
                          " --no-such-flag", out), 0);

    const std::string log = dir + "/r.log";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        const std::string cmd = "REAP_CALIBRATE_PAUSE_AFTER=25 exec " + shell_quote(reap_bin()) + " calibrate" + flags +
                                " -o " + shell_quote(dir + "/r.gguf") + " --checkpoint-every 20 > " + shell_quote(log) + " 2>&1";
        execl("/bin/sh", "sh", "-c", cmd.c_str(), (char *) nullptr);
        _exit(127);
    }
    // The run holds after window 25 (at most 60 s) until interrupted.
    bool paused = false;
    for (int i = 0; i < 6000 && !paused; ++i) {
        paused = read_bytes(log).find("paused after 25 windows") != std::string::npos;
        if (!paused) usleep(10 * 1000);
    }
    EXPECT_TRUE(paused) << read_bytes(log);
    kill(pid, SIGINT);
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st)) << read_bytes(log);
    ASSERT_EQ(WEXITSTATUS(st), 130) << read_bytes(log);
    EXPECT_NE(read_bytes(log).find("interrupted after 25 windows"), std::string::npos) << read_bytes(log);
    EXPECT_FALSE(file_exists(dir + "/r.gguf"));
    ASSERT_TRUE(file_exists(dir + "/r.gguf.checkpoint")) << read_bytes(log);
    // the checkpoint is the interrupt's (window 25), not the periodic one (20)
    sal::archive ck;
    ASSERT_TRUE(sal::read_archive(dir + "/r.gguf.checkpoint", ck, err)) << err;
    uint64_t next = 0;
    ASSERT_TRUE(ck.provenance.get_u64("reap.saliency.checkpoint.next_window", next, err)) << err;
    EXPECT_EQ(next, 25u);
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate" + flags + " -o " + shell_quote(dir + "/r.gguf") +
                          " --checkpoint-every 20 --resume",
                      out), 0) << out;
    EXPECT_NE(out.find("resumed"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/r.gguf.checkpoint"));
    EXPECT_TRUE(read_bytes(dir + "/full.gguf") == read_bytes(dir + "/r.gguf"));
}

// SIGKILL (no handler, no chance to checkpoint) in the middle of a run:
// --resume from the last periodic checkpoint (window 20) gives the same
// archive, byte for byte, as an uninterrupted run, and no temp file is left.
// The kill lands while the run holds after window 25
// ($REAP_CALIBRATE_PAUSE_AFTER), so it is always after the checkpoint at 20.
TEST(CalibrateCli, SigkillResumeEqualsUninterrupted) {
    ASSERT_TRUE(file_exists(reap_bin())) << "no " << reap_bin();
    std::string err, out;
    const std::string model = zoo_model("qwen3moe", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("kill9");
    std::string corpus_text;
    for (int i = 0; i < 40; ++i) {
        corpus_text += nlohmann::json({{"domain", i % 2 ? "en" : "code"},
                                       {"text", "sample " + std::to_string(i) + ": experts are routed."}})
                           .dump() + "\n";
    }
    write_file(dir + "/c.jsonl", corpus_text);
    const std::string flags = " -m " + shell_quote(model) + " --corpus " + shell_quote(dir + "/c.jsonl") +
                              " -c 64 -b 64 -ub 64 -np 1 -t 1 -ctk f32 -ctv f32 -fa off --no-progress --checkpoint-every 10";
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate" + flags + " -o " + shell_quote(dir + "/full.gguf"), out), 0) << out;
    const std::string log = dir + "/k.log";
    ASSERT_TRUE(kill_where_it_holds("REAP_CALIBRATE_PAUSE_AFTER=25 exec " + shell_quote(reap_bin()) + " calibrate" + flags +
                                        " -o " + shell_quote(dir + "/k.gguf"), log, "paused after 25 windows", err)) << err;
    EXPECT_FALSE(file_exists(dir + "/k.gguf"));
    sal::archive ck;
    ASSERT_TRUE(sal::read_archive(dir + "/k.gguf.checkpoint", ck, err)) << err;
    uint64_t next = 0;
    ASSERT_TRUE(ck.provenance.get_u64("reap.saliency.checkpoint.next_window", next, err)) << err;
    EXPECT_EQ(next, 20u);
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " calibrate" + flags + " -o " + shell_quote(dir + "/k.gguf") + " --resume", out), 0) << out;
    EXPECT_NE(out.find("resumed"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/k.gguf.checkpoint"));
    EXPECT_TRUE(read_bytes(dir + "/full.gguf") == read_bytes(dir + "/k.gguf")) << "resumed archive differs";
    run_cmd("ls -a " + shell_quote(dir), out);
    EXPECT_EQ(out.find(".reap-tmp."), std::string::npos) << out;
}

// `messages` samples go through the model's own chat template, reasoning_content included.
// Packed decodes (up to 64 windows of one domain a decode, -b/-ub 1024)
// against one window a decode (-np 1, -b = the window): the archive of the
// same tokens (archive_compare.h), in fewer decodes and ubatches. The row mode
// is what the probe finds in the pinned llama.cpp's graph of each arch:
// kimi-k3 and gpt-oss narrow to the output rows after their last layer;
// deepseek2 and glm4moe run their last layer on every row once nextn
// embeddings are unmasked; the others narrow before it.
struct packed_case { const char * model; reap::row_mode rows; double tol; };

class PackedCalibrate : public ::testing::TestWithParam<packed_case> {};

TEST_P(PackedCalibrate, EqualsOneWindowADecode) {
    const packed_case pc = GetParam();
    std::string err;
    std::string model;
    if (std::string(pc.model) == "trained") {
        model = source_dir() + "/models/reap-moe-tiny.gguf";
        ASSERT_TRUE(file_exists(model)) << model;
    } else {
        model = zoo_model(pc.model, err);
        ASSERT_FALSE(model.empty()) << err;
    }
    const std::string dir = scratch(std::string("packed-") + pc.model);
    const std::string corpus = small_corpus(dir);
    auto one = opts(model, corpus, dir + "/one.gguf");
    one.n_seq = 1;
    one.rt.llama.cache_type_k = one.rt.llama.cache_type_v = GGML_TYPE_F32;
    one.rt.llama.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    auto packed = one;
    packed.out_path = dir + "/packed.gguf";
    packed.n_seq    = 0;
    packed.rt.n_batch  = packed.rt.n_ubatch = 1024;
    sal::archive a, b;
    reap::calibrate_report ra, rb;
    ASSERT_TRUE(reap::run_calibrate(one, a, ra, err)) << err;
    ASSERT_TRUE(reap::run_calibrate(packed, b, rb, err)) << err;
    EXPECT_EQ(ra.n_decodes, ra.n_windows);
    EXPECT_EQ(rb.rows, pc.rows) << reap::row_mode_name(rb.rows);
    EXPECT_GT(rb.n_seq, 1);
    EXPECT_LT(rb.n_decodes, ra.n_decodes);
    EXPECT_LT(rb.n_ubatches, ra.n_ubatches);
    // one ubatch a decode here (-ub = -b), one decode a domain: 4 domains
    EXPECT_EQ(rb.n_decodes, a.domains.size());
    const double worst = expect_same_calibration(a, b, pc.model, pc.tol);
    printf("%s: %zu decodes -> %zu, %s, largest relative difference of a sum %.3g\n", pc.model, ra.n_decodes,
           rb.n_decodes, reap::row_mode_name(rb.rows), worst);
    ASSERT_TRUE(sal::check_count_invariant(b, err)) << err;
}

INSTANTIATE_TEST_SUITE_P(Archs, PackedCalibrate,
                         ::testing::Values(packed_case{"trained", reap::row_mode::every_row, k_pack_rel_tol_f32},
                                           packed_case{"qwen3moe", reap::row_mode::every_row, k_pack_rel_tol_f16},
                                           packed_case{"qwen2moe", reap::row_mode::every_row, k_pack_rel_tol_f16},
                                           packed_case{"deepseek2", reap::row_mode::nextn_unmasked, k_pack_rel_tol_f16},
                                           packed_case{"gpt-oss", reap::row_mode::one_output, k_pack_rel_tol_f16},
                                           packed_case{"glm4moe", reap::row_mode::nextn_unmasked, k_pack_rel_tol_f16},
                                           packed_case{"llama4", reap::row_mode::every_row, k_pack_rel_tol_f16},
                                           packed_case{"kimi-k3", reap::row_mode::one_output, k_pack_rel_tol_f16}),
                         [](const auto & info) {
                             std::string n = info.param.model;
                             for (char & c : n) if (c == '-') c = '_';
                             return n;
                         });

TEST(Corpus, MessagesRenderedWithChatTemplate) {
    const std::string model_path = source_dir() + "/models/reap-moe-tiny.gguf";
    if (!file_exists(model_path)) GTEST_SKIP() << "no " << model_path << " (make model)";
    const std::string dir = scratch("messages");
    write_file(dir + "/m.jsonl",
               nlohmann::json({{"domain", "chat"},
                               {"messages", {{{"role", "user"}, {"content", "What is 2+2?"}},
                                             {{"role", "assistant"}, {"content", "4"}, {"reasoning_content", "two plus two"}}}}})
                       .dump() + "\n");
    model_ptr m = load_model(model_path);
    ASSERT_TRUE(m);
    reap::corpus cp;
    std::string err;
    ASSERT_TRUE(reap::read_corpus_file(dir + "/m.jsonl", m.get(), {}, cp, err)) << err;
    ASSERT_EQ(cp.samples.size(), 1u);
    const std::string text = common_detokenize(llama_model_get_vocab(m.get()), cp.samples[0].tokens, true);
    EXPECT_NE(text.find("<|im_start|>user\nWhat is 2+2?<|im_end|>"), std::string::npos) << text;
    EXPECT_NE(text.find("<|im_start|>assistant\n"), std::string::npos) << text;
    EXPECT_NE(text.find("two plus two"), std::string::npos) << text;
    EXPECT_EQ(cp.domains, std::vector<std::string>{"chat"});
}

// A split model (llama-gguf-split) calibrates to the same archive as the single file.
TEST(Calibrate, SplitModelSameArchive) {
    std::string err, out;
    const std::string model = zoo_model("qwen3moe", err);
    ASSERT_FALSE(model.empty()) << err;
    if (!file_exists(llama_bin("llama-gguf-split"))) GTEST_SKIP() << "no " << llama_bin("llama-gguf-split");
    const std::string dir = scratch("split");
    ASSERT_EQ(run_cmd(shell_quote(llama_bin("llama-gguf-split")) + " --split --split-max-tensors 10 " + shell_quote(model) +
                          " " + shell_quote(dir + "/m"), out), 0) << out;
    const std::string first = dir + "/m-00001-of-00004.gguf";
    ASSERT_TRUE(file_exists(first)) << out;
    const std::string corpus = small_corpus(dir);
    sal::archive a, b;
    reap::calibrate_report ra, rb;
    ASSERT_TRUE(reap::run_calibrate(opts(model, corpus, dir + "/one.gguf"), a, ra, err)) << err;
    ASSERT_TRUE(reap::run_calibrate(opts(first, corpus, dir + "/split.gguf"), b, rb, err)) << err;
    EXPECT_TRUE(read_bytes(dir + "/one.gguf") == read_bytes(dir + "/split.gguf"));
}

}  // namespace

// A corpus of > 2 GB through the CLI with --max-tokens 2000 (met inside the
// bulk samples) and a per-domain cap: a head of samples in three domains, then 2 GiB of 1 MiB blocks (each
// one "bulk" sample and blank lines), then a "late" domain's sample. The
// samples are tokenized only until the caps are met, the rest of the file is
// only scanned: peak RSS of the child stays under 256 MiB and within 32 MiB of
// the same run on the corpus without the blank lines (under a MiB); every
// domain is in the archive (the late one too) with the token counts computed
// here by tokenizing the samples and applying the caps in corpus order; and
// the two archives hold the same statistics.
TEST(CalibrateCli, CorpusMemoryFlat) {
    std::string err;
    const std::string model = zoo_model("qwen3moe", err);
    ASSERT_FALSE(model.empty()) << err;
    if (!file_exists(gguf_test::reap_bin())) GTEST_SKIP() << "no " << gguf_test::reap_bin();
    const std::string dir = scratch("corpus-memory");
    std::vector<std::pair<std::string, std::string>> samples;   // (domain, text), corpus order
    const char * words[] = {"router", "expert", "token", "layer", "prune", "weight", "domain", "saliency"};
    for (int i = 0; i < 6; ++i) {
        std::string t;
        for (int w = 0; w < 3 + i; ++w) t += std::string(words[(i * 3 + w) % 8]) + (w % 5 == 4 ? ". " : " ");
        samples.emplace_back(i % 3 == 0 ? "en" : i % 3 == 1 ? "code" : "fr", t);
    }
    const size_t n_head = samples.size();
    const int n_blocks = 2048;   // 1 MiB each
    for (int b = 0; b < n_blocks; ++b) {
        samples.emplace_back("bulk", "block " + std::to_string(b) + ": the experts of every layer see tokens routed to them.");
    }
    samples.emplace_back("late", "A domain that appears only at the end of the corpus.");
    auto line = [&](size_t i) { return nlohmann::json({{"domain", samples[i].first}, {"text", samples[i].second}}).dump() + "\n"; };
    // The compact corpus and the big one (same samples, blank lines between).
    {
        std::ofstream small(dir + "/small.jsonl", std::ios::binary), big(dir + "/big.jsonl", std::ios::binary);
        // a block's blank lines (4095 spaces and a newline each) as one write
        std::string blanks;
        for (int k = 0; k < 256; ++k) blanks += std::string(4095, ' ') + "\n";
        for (size_t i = 0; i < samples.size(); ++i) {
            const std::string l = line(i);
            small << l;
            big << l;
            if (i >= n_head && i < n_head + n_blocks) {
                big.write(blanks.data(), (std::streamsize) (((1u << 20) - l.size()) / 4096 * 4096));
            }
        }
        ASSERT_TRUE(small.good() && big.good());
    }
    struct stat st;
    ASSERT_EQ(stat((dir + "/big.jsonl").c_str(), &st), 0);
    const uint64_t big_size = (uint64_t) st.st_size;
    ASSERT_GT(big_size, 2000000000ull);

    const int64_t max_tokens = 2000, per_domain = 1800;
    // One thread: what is measured is the scan, and under a loaded ctest a second
    // thread's OpenMP spin-waits cost more CPU than this tiny model's decodes.
    auto run = [&](const std::string & corpus, const std::string & out, long & rss) {
        int status = -1;
        rss = gguf_test::run_peak_rss_kib({gguf_test::reap_bin(), "calibrate", "-m", model, "--corpus", corpus, "-o", out, "-c", "64",
                                           "-b", "64", "-ub", "64", "-t", "1", "--max-tokens", std::to_string(max_tokens),
                                           "--max-tokens-per-domain", std::to_string(per_domain), "--no-progress", "--force"},
                                          out + ".log", status);
        EXPECT_EQ(status, 0) << read_bytes(out + ".log");
    };
    long rss_big = 0, rss_small = 0;
    const auto t0 = std::chrono::steady_clock::now();
    run(dir + "/big.jsonl", dir + "/big.gguf", rss_big);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run(dir + "/small.jsonl", dir + "/small.gguf", rss_small);
    ::unlink((dir + "/big.jsonl").c_str());
    printf("calibrate --max-tokens %lld: corpus %llu bytes -> peak RSS %ld KiB (%.1f s); compact corpus -> %ld KiB\n",
           (long long) max_tokens, (unsigned long long) big_size, rss_big, secs, rss_small);
    RecordProperty("calibrate_big_corpus_bytes", std::to_string(big_size));
    RecordProperty("calibrate_big_peak_rss_kib", std::to_string(rss_big));
    RecordProperty("calibrate_small_peak_rss_kib", std::to_string(rss_small));
    EXPECT_LT(rss_big, 256l << 10);
    EXPECT_LT(std::labs(rss_big - rss_small), 32l << 10) << rss_big << " vs " << rss_small << " KiB";

    // Expected tokens per domain: every sample tokenized here, caps in corpus order.
    std::map<std::string, int64_t> expect;
    {
        model_ptr m = load_model(model);
        int64_t used = 0;
        for (const auto & s : samples) {
            int64_t & d = expect[s.first];
            if (used >= max_tokens || d >= per_domain) continue;
            const int64_t n = (int64_t) tokenize(m.get(), s.second).size();
            const int64_t k = std::min({n, max_tokens - used, per_domain - d});
            used += k;
            d += k;
        }
    }
    sal::archive big, small;
    ASSERT_TRUE(sal::read_archive(dir + "/big.gguf", big, err)) << err;
    ASSERT_TRUE(sal::read_archive(dir + "/small.gguf", small, err)) << err;
    ASSERT_EQ(big.domains.size(), expect.size());
    ASSERT_EQ(big.domains.size(), small.domains.size());
    EXPECT_EQ(big.domains.back().name, "late");
    for (size_t i = 0; i < big.domains.size(); ++i) {
        const auto & d = big.domains[i];
        EXPECT_EQ(d.n_tokens, expect[d.name]) << d.name;
        EXPECT_EQ(d.name, small.domains[i].name);
        EXPECT_EQ(d.n_tokens, small.domains[i].n_tokens) << d.name;
        EXPECT_EQ(d.count, small.domains[i].count) << d.name;
        EXPECT_EQ(d.reap_sum, small.domains[i].reap_sum) << d.name;
    }
    // the total cap was met inside the bulk samples: the rest were only scanned
    int64_t total = 0;
    for (const auto & kv : expect) total += kv.second;
    EXPECT_EQ(total, max_tokens);
    EXPECT_GT(expect["bulk"], 0);
    EXPECT_EQ(expect["late"], 0);
    ASSERT_TRUE(sal::check_count_invariant(big, err)) << err;
}

// qwen3moe's graph narrows to the output rows before its last layer, so every
// token's logits are kept, and llama.cpp sizes the logits buffer and the output
// head's part of the compute buffer by vocabulary x batch: at Kimi-K3's
// 163,840 tokens and -b/-ub 2048 that is 1.25 GiB each. calibrate lowers the
// batch so that both fit --batch-memory (512 MiB: 409 rows): peak RSS stays under
// 768 MiB (model 45 MiB, two 256 MiB logits buffers, the rest of the compute
// buffer), it says so, and Σ_e count = tokens × n_expert_used still holds in
// every MoE layer, the last one included.
TEST(CalibrateCli, LargeVocabularyLogitsBounded) {
    std::string err;
    const std::string model = zoo_model("qwen3moe-v163840", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("calibrate-large-vocab");
    {
        std::ofstream c(dir + "/c.jsonl", std::ios::binary);
        std::string text;
        while (text.size() < 2600) text += "the experts of every layer see the tokens routed to them. ";
        c << nlohmann::json({{"domain", "en"}, {"text", text}}).dump() << "\n";
        ASSERT_TRUE(c.good());
    }
    const std::string out = dir + "/s.gguf";
    int status = -1;
    const long rss = gguf_test::run_peak_rss_kib({gguf_test::reap_bin(), "calibrate", "-m", model, "--corpus", dir + "/c.jsonl",
                                                  "-o", out, "-c", "2048", "--ctx-past-trained", "-b", "2048", "-ub", "2048", "-t", "2",
                                                  "--batch-memory", "512MiB", "--no-progress", "--force"},
                                                 out + ".log", status);
    const std::string log = read_bytes(out + ".log");
    ASSERT_EQ(status, 0) << log;
    printf("calibrate, 163,840-token vocabulary, -b/-ub 2048: peak RSS %ld KiB\n", rss);
    RecordProperty("calibrate_large_vocab_peak_rss_kib", std::to_string(rss));
    EXPECT_NE(log.find("-b/-ub lowered to 409 tokens"), std::string::npos) << log;
    EXPECT_LT(rss, 768l << 10);

    sal::archive a;
    ASSERT_TRUE(sal::read_archive(out, a, err)) << err;
    ASSERT_EQ(a.domains.size(), 1u);
    const auto & d = a.domains[0];
    ASSERT_GT(d.n_tokens, 2048) << "the corpus must span more than one capped batch";
    ASSERT_EQ(a.model.moe_layers.size(), 2u);
    for (int layer : a.model.moe_layers) {
        double sum = 0;
        for (int e = 0; e < (int) a.model.n_expert; ++e) sum += d.count[a.index(layer, e)];
        EXPECT_EQ(sum, (double) d.n_tokens * (double) a.model.n_expert_used) << "layer " << layer;
    }
}

// kimi-k3 and gpt-oss narrow to the output rows only after their last layer, so
// a decode needs one output row: at Kimi-K3's 163,840-token vocabulary, -b/-ub
// 4096 stay as given (the log says nothing is lowered), peak RSS stays under
// 1 GiB (every row an output would keep 2.5 GiB of logits twice), and the
// counts equal a -ub 256 run's exactly.
// Both runs use -fa off: llama.cpp's CPU flash attention picks a tiled kernel
// when a ubatch holds at least a tile of query rows per sequence and a
// row-by-row one otherwise, and the two round differently, so on these random
// routers a near-tie top-k may pick the other expert (measured with flash
// attention on: kimi-k3 2 of 116,736 routings moved, gpt-oss 9 of 38,912).
// With the same attention kernel the arithmetic of a token does not depend on
// the ubatch it was in, and nothing may move. -fa off is also the heavier case
// for memory (the attention scores are materialised), so the RSS bound holds
// a fortiori with flash attention.
class LargeVocabulary : public ::testing::TestWithParam<const char *> {};

TEST_P(LargeVocabulary, NotCappedWhereTheGraphAllows) {
    const std::string name = GetParam();
    std::string err;
    const std::string model = zoo_model(name, err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("large-vocab-" + name);
    std::string text;
    while (text.size() < 12000) text += "the experts of every layer see the tokens routed to them. ";
    write_file(dir + "/c.txt", text);
    const std::string out = dir + "/s.gguf";
    int status = -1;
    const long rss = gguf_test::run_peak_rss_kib({gguf_test::reap_bin(), "calibrate", "-m", model, "--corpus", dir + "/c.txt",
                                                  "-o", out, "-c", "512", "--ctx-past-trained", "-b", "4096", "-ub", "4096", "-t", "2",
                                                  "-fa", "off", "--no-progress", "--force"},
                                                 out + ".log", status);
    const std::string log = read_bytes(out + ".log");
    ASSERT_EQ(status, 0) << log;
    printf("calibrate %s, 163,840-token vocabulary, -b/-ub 4096: peak RSS %ld KiB\n", name.c_str(), rss);
    RecordProperty("calibrate_large_vocab_one_output_peak_rss_kib", std::to_string(rss));
    EXPECT_EQ(log.find("lowered"), std::string::npos) << log;
    EXPECT_NE(log.find("-b 4096 -ub 4096"), std::string::npos) << log;
    EXPECT_NE(log.find("one output row"), std::string::npos) << log;
    // the probe decode is aborted on purpose; llama.cpp's errors about that stay unsaid
    EXPECT_EQ(log.find("failed to decode"), std::string::npos) << log;
    EXPECT_LT(rss, 1l << 20);

    sal::archive a, small;
    ASSERT_TRUE(sal::read_archive(out, a, err)) << err;
    ASSERT_GE(a.domains.at(0).n_tokens, 8192) << "the text must fill two ubatches";
    auto o = opts(model, dir + "/c.txt", dir + "/ub256.gguf");
    o.rt.n_ctx = 512;
    o.rt.past_trained = true;   // the sizes of a large vocabulary at this window, not the model's quality
    o.rt.n_batch = 4096;
    o.rt.n_ubatch = 256;
    o.rt.llama.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(o, small, rep, err)) << err;
    ASSERT_EQ(a.domains.size(), small.domains.size());
    EXPECT_EQ(a.domains[0].n_tokens, small.domains[0].n_tokens);
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    ASSERT_TRUE(sal::check_count_invariant(small, err)) << err;
    const auto & x = a.domains[0].count;
    const auto & y = small.domains[0].count;
    ASSERT_EQ(x.size(), y.size());
    double moved = 0, all = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        moved += std::fabs(x[i] - y[i]) / 2;
        all += x[i];
    }
    printf("%s, -ub 4096 against -ub 256: %.0f of %.0f routings moved\n", name.c_str(), moved, all);
    EXPECT_EQ(moved, 0) << "a token's routing depended on its ubatch";
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], y[i]) << "count " << i;
}

INSTANTIATE_TEST_SUITE_P(CalibrateCli, LargeVocabulary, ::testing::Values("kimi-k3-v163840", "gpt-oss-v163840"),
                         [](const auto & info) {
                             std::string n = info.param;
                             for (char & ch : n) if (ch == '-') ch = '_';
                             return n;
                         });

// eval and sweep choose -b/-ub themselves (size_eval_batches, src/llama/eval.h):
// the largest whole number of windows whose context, the scored rows' logits and
// the base's rows read beside them fit --memory, as llama.cpp lays the context out.
// At Kimi-K3's 163,840-token vocabulary and -c 512 a window's 255 scored rows are
// 255 x 640 KiB, twice (logits, base rows): 334 MB, and the compute buffer holds
// the output head's 512 rows, 336 MB: one window needs 670 MB, two 1.34 GB. So
// --memory 1G decodes one window at a time and 1500M two, and the peak RSS of each
// stays under its --memory (the base's rows of all four windows, 668 MB, go to a
// temp file); the JSON says what was chosen. calibrate (only there for a plan)
// reads the same text.
TEST(CalibrateCli, EvalBatchFitsTheVocabulary) {
    std::string err, out;
    const std::string model = zoo_model("qwen3moe-v163840", err);
    ASSERT_FALSE(model.empty()) << err;
    const std::string dir = scratch("eval-large-vocab");
    std::string text;
    while (text.size() < 2700) text += "the experts of every layer see the tokens routed to them. ";
    write_file(dir + "/c.txt", text);
    auto o = opts(model, dir + "/c.txt", dir + "/s.gguf");
    o.rt.n_ctx = 512;
    o.rt.past_trained = true;   // the sizes of a large vocabulary at this window, not the model's quality
    o.rt.n_batch = o.rt.n_ubatch = 256;
    o.rt.n_threads = 1;   // as the eval below: a second thread's spin-waits cost CPU under load
    sal::archive a;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(o, a, rep, err)) << err;
    ASSERT_EQ(run_cmd(shell_quote(gguf_test::reap_bin()) + " plan " + shell_quote(dir + "/s.gguf") + " -m " + shell_quote(model) +
                          " --keep 4 -o " + shell_quote(dir + "/p.json") + " --force 2>&1", out), 0) << out;
    for (const auto & [memory, bytes, batch] : {std::tuple<std::string, long, int>{"1G", 1000000000l, 512},
                                                std::tuple<std::string, long, int>{"1500M", 1500000000l, 1024}}) {
        int status = -1;
        const std::string log = dir + "/eval-" + memory + ".log";
        const long rss = gguf_test::run_peak_rss_kib({gguf_test::reap_bin(), "eval", "-m", model, "--mask", dir + "/p.json",
                                                      "-f", dir + "/c.txt", "-c", "512", "--ctx-past-trained", "-t", "1", "--tmp-dir", dir, "--json",
                                                      "--memory", memory},
                                                     log, status);
        const std::string text_log = read_bytes(log);
        ASSERT_EQ(status, 0) << text_log;
        printf("eval --mask, 163,840-token vocabulary, --memory %s: peak RSS %ld KiB\n", memory.c_str(), rss);
        const size_t brace = text_log.find('{');
        ASSERT_NE(brace, std::string::npos) << text_log;
        const nlohmann::json j = nlohmann::json::parse(text_log.substr(brace), nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << text_log;
        // one candidate: its report is the object itself
        EXPECT_EQ(j.value("n_batch", 0), batch) << memory << "\n" << text_log;
        EXPECT_EQ(j.value("n_ubatch", 0), batch) << memory;
        EXPECT_EQ(j.value("n_windows", 0), 4) << memory;
        EXPECT_LT(rss * 1024, bytes) << memory;
    }
}

// The cost line, and the warning when the model is larger than the memory
// available: the expected bytes are expert pool x ubatches (2,000,000,000 x 3).
TEST(Calibrate, CostLineWarnsWhenTheModelStreams) {
    reap::calibrate_report r;
    r.n_tokens = 8192;
    r.n_batch = r.n_ubatch = 4096;
    r.n_seq = 8;
    r.n_ubatches = 3;
    r.rows = reap::row_mode::one_output;
    r.expert_pool_bytes = 2000000000ull;
    const std::string fits = reap::calibrate_cost_text(r, 16, 2, 2440000000ull,
                                                       reap::util::memory_limit{8000000000ull, "MemAvailable"});
    EXPECT_NE(fits.find("8,192 tokens, 16 windows in 2 decodes (-b 4096 -ub 4096, at most 8 windows a decode, "
                        "one output row): 3 ubatches, each reading up to 2.00 GB"), std::string::npos) << fits;
    EXPECT_EQ(fits.find("warning"), std::string::npos) << fits;
    const std::string streams = reap::calibrate_cost_text(
        r, 16, 2, 2440000000ull, reap::util::memory_limit{800000000ull, "/sys/fs/cgroup/memory/x/memory.limit_in_bytes"});
    EXPECT_NE(streams.find("warning: the model (2.44 GB"), std::string::npos) << streams;
    EXPECT_NE(streams.find("memory.limit_in_bytes"), std::string::npos) << streams;
    EXPECT_NE(streams.find("about 6.00 GB"), std::string::npos) << streams;
    EXPECT_NE(streams.find("for 3 ubatches"), std::string::npos) << streams;
    // nothing known about memory: no warning
    EXPECT_EQ(reap::calibrate_cost_text(r, 16, 2, 2440000000ull, std::nullopt).find("warning"), std::string::npos);
}

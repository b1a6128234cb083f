// test_llama_mtp.cpp: models with MTP (next-token prediction) blocks. The
// fixtures are written by llama.cpp's own builder and saver for every arch
// make_arch_models --list-mtp names (glm4moe, deepseek2, ...: --variant mtp):
// four trunk blocks and one MTP block (block 4, <arch>.nextn_predict_layers = 1)
// with its own 16 routed experts.
//
// The reference for what the MTP block sees is llama.cpp's own MTP draft driver
// (common/speculative.cpp, "draft-mtp"), run here through its public API with
// an eval callback on its MTP context: calibrate's counts for block 4 must be,
// expert by expert, the routing that driver produces over the same windows, and
// Σ_k g_k·f_k over the nodes calibrate reads must be block 4's ffn_moe_out. A plan
// made from the archive includes block 4; the pruned model loads, decodes and
// its MTP draft runs (through the same driver), routing only to kept experts.
// `reap eval` reports the greedy acceptance of the MTP head's first draft token,
// checked against a teacher-forced pass through llama.cpp's API whose draft
// tokens equal those llama.cpp's driver proposes, position by position. Two
// chained MTP heads (hy_v3 --variant mtp2) are checked the same way for calibrate,
// plan, prune and the draft.
#include "archive_compare.h"
#include "llama_test_util.h"
#include "prune_test_util.h"

#include "llama/calibrate.h"
#include "moe/layout_gguf.h"
#include "plan/plan.h"
#include "saliency/archive.h"

#include "speculative.h"

#include "../src/llama-ext.h"   // llama.cpp's staging API (nextn embeddings), as its common/ includes it

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace reap_test;
namespace sal = reap::saliency;

namespace {

const char * k_text =
    "The quick brown fox jumps over the lazy dog. int main() { return 0; } "
    "Experts route tokens; the router picks the top k.";

constexpr int k_mtp_block = 4;   // block_count 5, nextn_predict_layers 1

std::string generator() {
    return llama_bin_dir() + "/make_arch_models";
}

std::vector<std::string> mtp_archs() {
    std::string out;
    std::vector<std::string> a;
    if (run_cmd(shell_quote(generator()) + " --list-mtp", out) != 0) return a;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty()) a.push_back(line);
    }
    return a;
}

std::string mtp_model(const std::string & arch, std::string & err, const std::string & variant = "mtp") {
    const std::string dir = test_tmp_dir() + "/archs";
    ::mkdir(dir.c_str(), 0755);
    const std::string path = dir + "/" + arch + "-" + variant + ".gguf";
    if (file_exists(path)) return path;
    std::string out;
    const std::string cmd = shell_quote(generator()) + " --arch " + shell_quote(arch) + " --variant " + variant +
                            " --out " + shell_quote(path);
    if (run_cmd(cmd, out) != 0 || !file_exists(path)) {
        err = "make_arch_models failed: " + cmd + "\n" + out;
        return "";
    }
    return path;
}

// Reads, in the MTP context, each MTP block's routing (ffn_moe_topk-L, strided)
// and any other named F32 nodes.
struct mtp_capture {
    std::set<std::string>                     names;
    std::map<int, std::vector<std::vector<int32_t>>> routed;   // block -> per token, in decode order
    std::map<std::string, std::vector<float>> data;

    static bool callback(ggml_tensor * t, bool ask, void * user) {
        auto * self = static_cast<mtp_capture *>(user);
        static const char prefix[] = "ffn_moe_topk-";
        const bool topk = std::strncmp(t->name, prefix, sizeof(prefix) - 1) == 0;
        if (!topk && !self->names.count(t->name)) return ask ? false : true;
        if (ask) return true;
        if (topk) {
            auto & rows = self->routed[std::atoi(t->name + sizeof(prefix) - 1)];
            std::vector<int32_t> row((size_t) t->ne[0]);
            for (int64_t j = 0; j < t->ne[1]; ++j) {
                ggml_backend_tensor_get(t, row.data(), j * t->nb[1], row.size() * sizeof(int32_t));
                rows.push_back(row);
            }
        } else if (t->type == GGML_TYPE_F32 && ggml_is_contiguous(t)) {
            auto & v = self->data[t->name];
            const size_t old = v.size();
            v.resize(old + (size_t) ggml_nelements(t));
            ggml_backend_tensor_get(t, v.data() + old, 0, ggml_nbytes(t));
        }
        return true;
    }
};

// llama.cpp's MTP draft driver over a target context of `model`, with the
// capture on its MTP context. One window (one sequence) at a time.
struct llama_mtp_driver {
    common_params                      params;
    context_ptr                        tgt;
    common_speculative_init_result_ptr init;
    common_speculative_ptr             spec;

    bool open(llama_model * model, int n_ctx, mtp_capture * cap, std::string & err) {
        tgt = new_context(model, (uint32_t) n_ctx, nullptr, nullptr, false, 1);
        params.n_ctx = params.n_batch = params.n_ubatch = n_ctx;
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1;
        params.speculative.types = {COMMON_SPECULATIVE_TYPE_DRAFT_MTP};
        params.speculative.draft.n_max = 3;
        params.speculative.draft.p_min = 0.0f;
        params.cb_eval = mtp_capture::callback;
        params.cb_eval_user_data = cap;
        init = std::make_unique<common_speculative_init_result>(params, model, tgt.get());
        if (!tgt || !init->context()) {
            err = "llama.cpp did not create the target and MTP contexts";
            return false;
        }
        return true;
    }
    // A fresh driver state for a new sequence (its carried h back to zeros).
    void restart() {
        llama_memory_clear(llama_get_memory(tgt.get()), true);
        llama_memory_clear(llama_get_memory(init->context()), true);
        params.speculative.draft.ctx_tgt = tgt.get();
        params.speculative.draft.ctx_dft = init->context();
        spec.reset(common_speculative_init(params.speculative, 1));
    }
    // Target decode of toks at positions 0.., then the driver's process().
    bool prefill(const std::vector<llama_token> & toks) {
        llama_batch b = llama_batch_init((int32_t) toks.size(), 0, 1);
        for (size_t i = 0; i < toks.size(); ++i) common_batch_add(b, toks[i], (llama_pos) i, {0}, true);
        const bool ok = llama_decode(tgt.get(), b) == 0 && common_speculative_process(spec.get(), b);
        llama_batch_free(b);
        return ok;
    }
    // The driver's draft after the prefix, continuing with id_last at position n_past
    // (n_max tokens at most; -1 = the configured 3).
    llama_tokens draft(llama_token id_last, int n_past, const llama_tokens & prompt, int n_max = -1) {
        llama_tokens result;
        auto & dp = common_speculative_get_draft_params(spec.get(), 0);
        dp.drafting = true;
        dp.n_max = n_max;
        dp.n_past = n_past;
        dp.id_last = id_last;
        dp.prompt = &prompt;
        dp.result = &result;
        common_speculative_draft(spec.get());
        return result;
    }
};

// llama.cpp's driver on `model`: prefill the first 20 tokens of `text`, then
// draft from the 21st (as many tokens as the heads give); `cap` sees the MTP
// blocks' routing throughout.
bool draft_after_prefix(llama_model * model, int n_ctx, const std::string & text, mtp_capture & cap,
                        llama_tokens & draft, size_t & n_prefix, std::string & err) {
    llama_mtp_driver drv;
    if (!drv.open(model, n_ctx, &cap, err)) return false;
    drv.restart();
    const std::vector<llama_token> prompt = tokenize(model, text);
    const std::vector<llama_token> prefix(prompt.begin(), prompt.begin() + 20);
    if (!drv.prefill(prefix)) {
        err = "the driver's prefill failed";
        return false;
    }
    draft = drv.draft(prompt[20], 20, prefix);
    n_prefix = prefix.size();
    return true;
}

// The windows calibrate makes of a plain text: -c tokens each, the first
// replaced by BOS, the remainder dropped.
std::vector<std::vector<llama_token>> text_windows(const llama_model * model, const std::string & text, int n_ctx) {
    const std::vector<llama_token> toks = tokenize(model, text);
    std::vector<std::vector<llama_token>> w;
    for (size_t b = 0; b + (size_t) n_ctx <= toks.size(); b += (size_t) n_ctx) {
        w.emplace_back(toks.begin() + (long) b, toks.begin() + (long) b + n_ctx);
        w.back()[0] = llama_vocab_bos(llama_model_get_vocab(model));
    }
    return w;
}

// Per window and position p: the model's own argmax at p, and its MTP head's
// argmax for (h_{p-1}, x_p) (h = 0 before position 0), each window decoded whole
// by the target, then by an MTP context of the same model with those pairs,
// through llama.cpp's API directly.
struct argmaxes {
    std::vector<std::vector<int>> target, draft;
};

void teacher_forced(const std::string & path, const std::vector<std::vector<llama_token>> & windows, argmaxes & out) {
    model_ptr model = load_model(path);
    ASSERT_TRUE(model);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
    const int n_embd = llama_model_n_embd_out(model.get());
    const int len = (int) windows[0].size();
    context_ptr tgt = new_context(model.get(), (uint32_t) len, nullptr, nullptr, false, 1);
    ASSERT_TRUE(tgt);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t) len;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    context_ptr mtp(llama_init_from_model(model.get(), cp));
    ASSERT_TRUE(mtp);
    llama_set_embeddings_nextn(tgt.get(), true, false);
    auto argmax = [&](const float * row) { return (int) (std::max_element(row, row + n_vocab) - row); };
    std::vector<llama_token> tok(len);
    std::vector<float> embd((size_t) len * n_embd);
    std::vector<llama_pos> pos(len);
    std::vector<int32_t> n_seq(len, 1);
    std::vector<llama_seq_id> seq0(len, 0);
    std::vector<llama_seq_id *> seq(len);
    std::vector<int8_t> logits(len, 1);
    for (int i = 0; i < len; ++i) seq[i] = &seq0[i];
    for (const auto & w : windows) {
        llama_memory_clear(llama_get_memory(tgt.get()), true);
        llama_memory_clear(llama_get_memory(mtp.get()), true);
        ASSERT_EQ(decode_all(tgt.get(), w), 0);
        out.target.emplace_back();
        for (int p = 0; p < len; ++p) out.target.back().push_back(argmax(llama_get_logits_ith(tgt.get(), p)));
        const float * h = llama_get_embeddings_nextn(tgt.get());
        ASSERT_TRUE(h);
        std::fill(embd.begin(), embd.begin() + n_embd, 0.0f);
        std::copy(h, h + (size_t) (len - 1) * n_embd, embd.begin() + n_embd);
        for (int p = 0; p < len; ++p) {
            tok[p] = w[p];
            pos[p] = p;
        }
        llama_batch b = {len, tok.data(), embd.data(), pos.data(), n_seq.data(), seq.data(), logits.data()};
        ASSERT_EQ(llama_decode(mtp.get(), b), 0);
        out.draft.emplace_back();
        for (int p = 0; p < len; ++p) out.draft.back().push_back(argmax(llama_get_logits_ith(mtp.get(), p)));
    }
}

// llama.cpp's own driver proposes, as its first draft token at the first
// k_driver_positions scored positions p (from len/2) of a window, the MTP head's
// argmax above: it processes the window's tokens before p, then drafts one token
// after x_p. (Each position is a fresh prefill: a few keep the test cheap.)
constexpr int k_driver_positions = 8;

void check_driver_drafts(const std::string & path, const std::vector<llama_token> & w, const std::vector<int> & draft) {
    std::string err;
    model_ptr model = load_model(path);
    ASSERT_TRUE(model);
    mtp_capture cap;
    llama_mtp_driver drv;
    ASSERT_TRUE(drv.open(model.get(), (int) w.size(), &cap, err)) << err;
    const int len = (int) w.size();
    for (int p = len / 2; p <= len - 2 && p < len / 2 + k_driver_positions; ++p) {
        drv.restart();
        const llama_tokens prefix(w.begin(), w.begin() + p);
        ASSERT_TRUE(drv.prefill(prefix));
        const llama_tokens d = drv.draft(w[(size_t) p], p, prefix, 1);
        ASSERT_EQ(d.size(), 1u) << "position " << p;
        EXPECT_EQ(d[0], draft[(size_t) p]) << path << " position " << p;
    }
}

// Greedy acceptance over the scored positions, as reap eval defines it.
void acceptance(const argmaxes & a, int64_t & positions, int64_t & accepted) {
    positions = accepted = 0;
    for (size_t w = 0; w < a.target.size(); ++w) {
        const int len = (int) a.target[w].size();
        for (int p = len / 2; p <= len - 2; ++p) {
            ++positions;
            accepted += a.target[w][(size_t) p] == a.draft[w][(size_t) p];
        }
    }
}

constexpr int k_ctx = 64;
constexpr int k_eval_windows = 6;   // reap eval --chunks: 186 scored positions

// calibrate over a text in windows of k_ctx tokens, one thread, on the CPU
reap::calibrate_options calibrate_options_for(const std::string & model, const std::string & corpus,
                                              const std::string & out) {
    reap::calibrate_options co;
    co.model_path = model;
    co.corpus_path = corpus;
    co.out_path = out;
    co.rt.n_ctx = co.rt.n_batch = co.rt.n_ubatch = k_ctx;
    co.rt.n_threads = 1;
    co.rt.llama.n_gpu_layers = 0;
    co.progress = false;
    co.force = true;
    return co;
}

class Mtp : public ::testing::TestWithParam<std::string> {};

TEST_P(Mtp, CalibratePlanPruneDraftEval) {
    const std::string arch = GetParam();
    const auto t0 = std::chrono::steady_clock::now();
    std::string err;
    const std::string path = mtp_model(arch, err);
    ASSERT_FALSE(path.empty()) << err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(path, m, err)) << err;
    int64_t nextn = 0;
    ASSERT_TRUE(m.kvs.get_i64(reap::moe::kv_key(arch, "nextn_predict_layers"), nextn, err)) << err;
    ASSERT_EQ(nextn, 1);
    reap::moe::layout lay;
    ASSERT_TRUE(reap::moe::layout_of(m, lay, err)) << err;
    ASSERT_EQ(lay.moe_layers.back(), k_mtp_block) << "the MTP block's experts are not an MoE layer of the layout";
    {
        // reap inspect names it, as llama.cpp counts it
        std::string out;
        ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " inspect " + shell_quote(path) + " --json", out), 0) << out;
        const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << out;
        EXPECT_EQ(j["mtp_layers"], nlohmann::json::array({k_mtp_block}));
        model_ptr model = load_model(path);
        ASSERT_TRUE(model);
        EXPECT_EQ(llama_model_n_layer_nextn(model.get()), 1);
        EXPECT_EQ(llama_model_n_layer(model.get()), k_mtp_block) << "llama.cpp's trunk ends before the MTP block";
    }

    // ---- calibrate: the MTP block is measured
    const std::string dir = prune_test::scratch("mtp-" + arch);
    const std::string corpus = dir + "/text.txt";
    const std::string text = std::string(k_text) + "\n" + k_text + "\n";
    std::ofstream(corpus) << text;
    const int n_ctx = k_ctx;
    const reap::calibrate_options co = calibrate_options_for(path, corpus, dir + "/s.gguf");
    sal::archive a;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(co, a, rep, err)) << err;
    EXPECT_EQ(rep.mtp_layers, std::vector<int>{k_mtp_block});
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    ASSERT_EQ(a.domains.size(), 1u);
    const sal::domain_stats & d = a.domains[0];
    double sum = 0;
    for (int64_t e = 0; e < lay.n_expert; ++e) sum += d.count[a.index(k_mtp_block, (int) e)];
    EXPECT_EQ(sum, (double) d.n_tokens * (double) lay.n_expert_used) << "MTP block: not every token routed top-k";
    ASSERT_GT(d.n_tokens, 0);

    // ---- packed: four windows a decode (one for recurrent/hybrid models, whose rows
    // llama.cpp may reorder), the MTP context's rows in slices of 40 (--batch-memory
    // for 40 rows of logits, twice): the same archive as one window a decode
    {
        model_ptr vm = load_model(path);
        ASSERT_TRUE(vm);
        const uint64_t n_vocab = (uint64_t) llama_vocab_n_tokens(llama_model_get_vocab(vm.get()));
        const bool recurrent = llama_model_is_recurrent(vm.get()) || llama_model_is_hybrid(vm.get());
        auto packed = co;
        packed.out_path     = dir + "/packed.gguf";
        packed.n_seq        = 4;
        packed.rt.n_batch      = packed.rt.n_ubatch = 4 * k_ctx;
        packed.rt.batch_memory = 40 * 2 * n_vocab * sizeof(float);
        sal::archive b;
        reap::calibrate_report rb;
        ASSERT_TRUE(reap::run_calibrate(packed, b, rb, err)) << err;
        ASSERT_GT(rep.n_windows, 1u);
        EXPECT_EQ(rb.n_seq, recurrent ? 1 : (int) std::min<size_t>(4, rep.n_windows));
        if (!recurrent) EXPECT_LT(rb.n_decodes, rep.n_decodes);
        expect_same_calibration(a, b, arch + " packed", k_pack_rel_tol_f16);
    }

    // ---- the same windows through llama.cpp's own MTP driver: the same routing, expert by expert
    {
        model_ptr model = load_model(path);
        ASSERT_TRUE(model);
        mtp_capture cap;
        const std::string L = "-" + std::to_string(k_mtp_block);
        // (some archs' MTP graphs rename build_moe_ffn's output ffn_moe_out to mtp_ffn_moe_out)
        cap.names = {rep.weights_node + L, rep.down_node + L, "ffn_moe_out" + L, "mtp_ffn_moe_out" + L};
        llama_mtp_driver drv;
        ASSERT_TRUE(drv.open(model.get(), n_ctx, &cap, err)) << err;
        const auto windows = text_windows(model.get(), text, n_ctx);
        ASSERT_EQ((int64_t) windows.size() * n_ctx, d.n_tokens);
        for (const auto & w : windows) {
            drv.restart();
            ASSERT_TRUE(drv.prefill(w));
        }
        std::vector<double> counts((size_t) lay.n_expert, 0.0);
        ASSERT_EQ(cap.routed.size(), 1u);
        ASSERT_EQ((int64_t) cap.routed[k_mtp_block].size(), d.n_tokens);
        for (const auto & row : cap.routed[k_mtp_block]) {
            for (int32_t e : row) counts[(size_t) e] += 1;
        }
        for (int64_t e = 0; e < lay.n_expert; ++e) {
            EXPECT_EQ(d.count[a.index(k_mtp_block, (int) e)], counts[(size_t) e]) << "expert " << e;
        }
        // Σ_k g_k·f_k = ffn_moe_out in the MTP block, per token
        const auto & g = cap.data[rep.weights_node + L];
        const auto & f = cap.data[rep.down_node + L];
        const auto & o = cap.data.count("ffn_moe_out" + L) ? cap.data["ffn_moe_out" + L] : cap.data["mtp_ffn_moe_out" + L];
        ASSERT_FALSE(o.empty()) << "no MoE output node in the MTP block";
        const size_t k = (size_t) lay.n_expert_used, n_tok = g.size() / k;
        ASSERT_EQ(n_tok, (size_t) d.n_tokens);
        ASSERT_EQ(o.size() % n_tok, 0u);
        const size_t dim = o.size() / n_tok;
        ASSERT_EQ(f.size(), n_tok * k * dim);
        double worst = 0;
        for (size_t t = 0; t < n_tok; ++t) {
            double num = 0, den = 0;
            for (size_t c = 0; c < dim; ++c) {
                double s = 0;
                for (size_t j = 0; j < k; ++j) s += g[t * k + j] * f[(t * k + j) * dim + c];
                num += (s - o[t * dim + c]) * (s - o[t * dim + c]);
                den += (double) o[t * dim + c] * o[t * dim + c];
            }
            worst = std::max(worst, std::sqrt(num / std::max(den, 1e-30)));
        }
        EXPECT_LT(worst, 1e-4) << "Σ g·f over " << rep.weights_node << " and " << rep.down_node;
    }

    // ---- a plan from the archive includes the MTP block; prune, verify
    std::string out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " plan " + shell_quote(co.out_path) + " -m " + shell_quote(path) +
                          " --keep 8 -o " + shell_quote(dir + "/plan.json"), out), 0) << out;
    reap::plan p;
    ASSERT_TRUE(reap::read_plan(dir + "/plan.json", p, err)) << err;
    ASSERT_FALSE(p.layers.empty());
    EXPECT_EQ(p.layers.back().layer, k_mtp_block);
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/plan.json", dir + "/cut.gguf", written, err)) << err;
    ASSERT_TRUE(prune_test::verify(m, p, dir + "/plan.json", dir + "/cut.gguf", err)) << err;

    // ---- the pruned model loads, decodes, and its MTP draft runs (llama.cpp's driver)
    {
        prompt_run cut;
        ASSERT_TRUE(run_prompt(dir + "/cut.gguf", k_text, cut, err, 1)) << err;
        EXPECT_TRUE(all_finite(cut.logits));
        model_ptr model = load_model(dir + "/cut.gguf");
        ASSERT_TRUE(model);
        EXPECT_EQ(llama_model_n_layer_nextn(model.get()), 1);
        mtp_capture cap;
        llama_tokens draft;
        size_t n_prefix = 0;
        ASSERT_TRUE(draft_after_prefix(model.get(), n_ctx, k_text, cap, draft, n_prefix, err)) << err;
        EXPECT_EQ(draft.size(), 3u) << "the pruned model's MTP head drafted nothing";
        const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
        for (llama_token t : draft) EXPECT_TRUE(t >= 0 && t < n_vocab);
        ASSERT_GT(cap.routed[k_mtp_block].size(), n_prefix);   // the prefix, then the draft steps
        for (const auto & row : cap.routed[k_mtp_block]) {
            for (int32_t e : row) ASSERT_TRUE(e >= 0 && e < p.n_keep) << "MTP block routed to expert " << e;
        }
    }

    // ---- reap eval: the MTP draft's acceptance, base and pruned, as llama.cpp's driver gives it
    {
        const std::string longer = dir + "/long.txt";
        std::string many;
        for (int i = 0; i < 4; ++i) many += text;
        std::ofstream(longer) << many;
        // the pruned file, and the base masked by the same plan (virtual pruning, trunk and MTP block)
        ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(path) + " -p " + shell_quote(dir + "/cut.gguf") +
                              " --mask " + shell_quote(dir + "/plan.json") + " -f " + shell_quote(longer) +
                              " -c 64 -t 1 --chunks " + std::to_string(k_eval_windows) + " --json", out), 0) << out;
        const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << out;
        ASSERT_TRUE(j["pruned"][dir + "/cut.gguf"].contains("mtp_draft")) << out;
        ASSERT_TRUE(j["masked"][dir + "/plan.json"].contains("mtp_draft")) << out;
        const auto & md = j["pruned"][dir + "/cut.gguf"]["mtp_draft"];
        const auto & mm = j["masked"][dir + "/plan.json"]["mtp_draft"];
        model_ptr model = load_model(path);
        ASSERT_TRUE(model);
        auto windows = text_windows(model.get(), many, n_ctx);
        ASSERT_GE(windows.size(), (size_t) k_eval_windows);
        windows.resize(k_eval_windows);
        model.reset();
        argmaxes base, cut;
        teacher_forced(path, windows, base);
        teacher_forced(dir + "/cut.gguf", windows, cut);
        check_driver_drafts(path, windows[0], base.draft[0]);
        check_driver_drafts(dir + "/cut.gguf", windows[0], cut.draft[0]);
        int64_t pos_base = 0, acc_base = 0, pos_cut = 0, acc_cut = 0;
        acceptance(base, pos_base, acc_base);
        acceptance(cut, pos_cut, acc_cut);
        EXPECT_EQ(md["blocks"].get<int>(), 1);
        EXPECT_EQ(md["positions"].get<int64_t>(), pos_base);
        EXPECT_EQ(md["base_accepted"].get<int64_t>(), acc_base);
        EXPECT_EQ(md["pruned_accepted"].get<int64_t>(), acc_cut);
        EXPECT_DOUBLE_EQ(md["base_acceptance"].get<double>(), (double) acc_base / (double) pos_base);
        EXPECT_DOUBLE_EQ(md["pruned_acceptance"].get<double>(), (double) acc_cut / (double) pos_cut);
        // the mask computes what the pruned file does
        EXPECT_EQ(mm["base_accepted"].get<int64_t>(), acc_base);
        EXPECT_EQ(mm["pruned_accepted"].get<int64_t>(), acc_cut) << "the masked base's MTP draft differs from the pruned file's";
        // reap sweep reports each cut's acceptance too: its N = 8 plan is the plan above
        if (arch == "glm4moe") {
            ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " sweep " + shell_quote(co.out_path) + " -m " + shell_quote(path) +
                                  " -f " + shell_quote(longer) + " --keep 8 -c 64 -t 1 --chunks " +
                                  std::to_string(k_eval_windows) + " -o " + shell_quote(dir + "/sweep.json") + " --force",
                              out), 0) << out;
            std::ifstream in(dir + "/sweep.json");
            const nlohmann::json sw = nlohmann::json::parse(in, nullptr, false);
            ASSERT_FALSE(sw.is_discarded());
            EXPECT_DOUBLE_EQ(sw["mtp_base_acceptance"].get<double>(), (double) acc_base / (double) pos_base);
            ASSERT_EQ(sw["points"].size(), 1u);
            EXPECT_DOUBLE_EQ(sw["points"][0]["mtp_acceptance"].get<double>(), (double) acc_cut / (double) pos_cut);
        }
        // (random heads rarely agree with their trunk; on glm4moe's fixture the base agrees at a few
        // positions, so there the counts compared are not 0 = 0)
        if (arch == "glm4moe") EXPECT_GT(acc_base, 0) << "no position accepted: the comparison says little";
        std::printf("%-12s MTP acceptance over %lld positions: base %lld, pruned %lld\n", arch.c_str(),
                    (long long) pos_base, (long long) acc_base, (long long) acc_cut);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-12s %.2f s\n", arch.c_str(), secs);
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, Mtp, ::testing::ValuesIn(mtp_archs()),
                         [](const ::testing::TestParamInfo<std::string> & i) {
                             std::string s = i.param;
                             for (char & c : s) if (!isalnum((unsigned char) c)) c = '_';
                             return s;
                         });

// Two chained MTP heads (hy_v3 runs several; blocks 4 and 5, one head per draft
// step): calibrate measures both, each with the rows llama.cpp's driver gives it
// (the driver runs every head over the same rows, one after the other); a plan
// includes both; the pruned model drafts two tokens through both heads, routing
// only to kept experts. reap eval's acceptance is the first head's, as the
// driver's first draft tokens give it.
TEST(MtpHeads, TwoChainedHeads) {
    std::string err;
    const std::string path = mtp_model("hy_v3", err, "mtp2");
    ASSERT_FALSE(path.empty()) << err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(path, m, err)) << err;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::moe::layout_of(m, lay, err)) << err;
    const std::string dir = prune_test::scratch("mtp-heads");
    const std::string text = std::string(k_text) + "\n" + k_text + "\n";
    std::ofstream(dir + "/text.txt") << text;
    const reap::calibrate_options co = calibrate_options_for(path, dir + "/text.txt", dir + "/s.gguf");
    sal::archive a;
    reap::calibrate_report rep;
    ASSERT_TRUE(reap::run_calibrate(co, a, rep, err)) << err;
    EXPECT_EQ(rep.mtp_layers, (std::vector<int>{4, 5}));
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    {
        model_ptr model = load_model(path);
        ASSERT_TRUE(model);
        ASSERT_EQ(llama_model_n_layer_nextn(model.get()), 2);
        mtp_capture cap;
        llama_mtp_driver drv;
        ASSERT_TRUE(drv.open(model.get(), k_ctx, &cap, err)) << err;
        for (const auto & w : text_windows(model.get(), text, k_ctx)) {
            drv.restart();
            ASSERT_TRUE(drv.prefill(w));
        }
        ASSERT_EQ(cap.routed.size(), 2u);
        for (int il : {4, 5}) {
            std::vector<double> counts((size_t) lay.n_expert, 0.0);
            ASSERT_EQ((int64_t) cap.routed[il].size(), a.domains[0].n_tokens) << "block " << il;
            for (const auto & row : cap.routed[il]) {
                for (int32_t e : row) counts[(size_t) e] += 1;
            }
            for (int64_t e = 0; e < lay.n_expert; ++e) {
                EXPECT_EQ(a.domains[0].count[a.index(il, (int) e)], counts[(size_t) e]) << "block " << il << " expert " << e;
            }
        }
    }
    std::string out;
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " plan " + shell_quote(co.out_path) + " -m " + shell_quote(path) +
                          " --keep 8 -o " + shell_quote(dir + "/plan.json"), out), 0) << out;
    reap::plan p;
    ASSERT_TRUE(reap::read_plan(dir + "/plan.json", p, err)) << err;
    ASSERT_GE(p.layers.size(), 2u);
    EXPECT_EQ(p.layers[p.layers.size() - 2].layer, 4);
    EXPECT_EQ(p.layers.back().layer, 5);
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/plan.json", dir + "/cut.gguf", written, err)) << err;
    ASSERT_TRUE(prune_test::verify(m, p, dir + "/plan.json", dir + "/cut.gguf", err)) << err;
    {
        model_ptr model = load_model(dir + "/cut.gguf");
        ASSERT_TRUE(model);
        mtp_capture cap;
        llama_tokens draft;
        size_t n_prefix = 0;
        ASSERT_TRUE(draft_after_prefix(model.get(), k_ctx, k_text, cap, draft, n_prefix, err)) << err;
        EXPECT_EQ(draft.size(), 2u) << "two chained heads draft two tokens";
        ASSERT_EQ(cap.routed.size(), 2u);
        for (const auto & [il, rows] : cap.routed) {
            for (const auto & row : rows) {
                for (int32_t e : row) ASSERT_TRUE(e >= 0 && e < p.n_keep) << "block " << il << " routed to expert " << e;
            }
        }
    }
    // eval: the first head's acceptance (it drafts the first token), as the driver's first drafts give it
    ASSERT_EQ(run_cmd(shell_quote(reap_bin()) + " eval -m " + shell_quote(path) + " -p " + shell_quote(dir + "/cut.gguf") +
                          " -f " + shell_quote(dir + "/text.txt") + " -c 64 -t 1 --json", out), 0) << out;
    const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    EXPECT_EQ(j["mtp_draft"]["blocks"].get<int>(), 2);
    model_ptr model = load_model(path);
    ASSERT_TRUE(model);
    const auto windows = text_windows(model.get(), text, k_ctx);
    model.reset();
    argmaxes base, cut;
    teacher_forced(path, windows, base);
    teacher_forced(dir + "/cut.gguf", windows, cut);
    check_driver_drafts(path, windows[0], base.draft[0]);
    check_driver_drafts(dir + "/cut.gguf", windows[0], cut.draft[0]);
    int64_t pos_base = 0, acc_base = 0, pos_cut = 0, acc_cut = 0;
    acceptance(base, pos_base, acc_base);
    acceptance(cut, pos_cut, acc_cut);
    EXPECT_EQ(j["mtp_draft"]["positions"].get<int64_t>(), pos_base);
    EXPECT_EQ(j["mtp_draft"]["base_accepted"].get<int64_t>(), acc_base);
    EXPECT_EQ(j["mtp_draft"]["pruned_accepted"].get<int64_t>(), acc_cut);
}

// The generator runs and lists the MTP archs; an empty list would make the tests above vanish.
TEST(MtpList, GeneratorNamesTheArchs) {
    EXPECT_GE(mtp_archs().size(), 2u) << generator() << " --list-mtp";
}

}  // namespace

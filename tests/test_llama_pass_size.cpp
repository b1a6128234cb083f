// test_llama_pass_size.cpp: the memory-sized ubatch of calibrate
// (src/llama/pass_size.h) against independent facts.
//   * the KV bytes llama.cpp reports for a weightless context equal the cache
//     computed here from the model's header (layers × cells × K and V widths ×
//     the cache type's size), for F16 and F32 caches; the logits are rows ×
//     n_vocab floats; a larger ubatch needs a larger compute buffer; the CPU
//     backend's work buffer equals ggml's scratch for the largest op, computed
//     here from the header (the routed rows' index, or the attention scores
//     converted for an F16 V cache); it was missing, and in a cgroup its 168 MB
//     at -ub 8192 on a top-8 model left the page cache nothing;
//   * the choice rule: the largest candidate that fits, the smallest (flagged)
//     when none does, reap's default when the memory is unknown; the
//     candidates stop at the size that takes every token at once;
//   * the budget: --memory as given; else available less the reserve, less the
//     model when it fits in half of that;
//   * calibrate without -b/-ub, given exactly the --memory that -ub 32768 needs
//     (33k tokens, the trained model) or -ub 8192 (17k tokens, glm4moe with an
//     MTP block), takes that size and writes the archive of the size given by
//     hand; -ub 4096 gives the same calibration (counts exact at -fa off, sums
//     within archive_compare.h's bound); the size by hand with one byte less
//     --memory is refused before any decode, naming what it needs; --resume
//     takes the checkpoint's -b/-ub, not a new choice;
//   * eval without -b/-ub, given exactly the --memory that -b 32768 needs
//     (40k tokens, the trained model), takes it, one byte less takes a smaller
//     size, and the same size by hand is refused; its scores equal those of
//     -b 4096 within float summation order; `reap eval` with a size by hand
//     over --memory exits 2 before any pass;
//   * a size refused and --dry-run read only the model's header (what of a
//     private copy is in the page cache after each; a real run reads it all);
//   * a size whose buffers cannot be allocated (ulimit -v) does not fit: the
//     automatic choice steps down, the size by hand is refused.
#include "archive_compare.h"
#include "llama_test_util.h"
#include "prune_test_util.h"

#include "llama/calibrate.h"
#include "llama/eval.h"
#include "llama/pass_size.h"
#include "plan/stability.h"
#include "util/number_format.h"
#include "saliency/archive.h"
#include "saliency/checkpoint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace reap_test;
namespace sal = reap::saliency;

namespace {

std::string scratch(const std::string & name) { return prune_test::scratch("pass-size-" + name); }

std::string trained_model() { return source_dir() + "/models/reap-moe-tiny.gguf"; }

// glm4moe with one MTP block, written by llama.cpp's own builder (as test_llama_mtp.cpp).
std::string mtp_model(std::string & err) {
    const std::string dir = test_tmp_dir() + "/archs";
    ::mkdir(dir.c_str(), 0755);
    const std::string path = dir + "/glm4moe-mtp.gguf";
    if (file_exists(path)) return path;
    const std::string tmp = path + "." + std::to_string(::getpid()) + ".tmp";
    const std::string cmd = shell_quote(llama_bin_dir() + "/make_arch_models") + " --arch glm4moe --variant mtp --out " +
                            shell_quote(tmp);
    std::string out;
    if (run_cmd(cmd, out) != 0 || !file_exists(tmp) || ::rename(tmp.c_str(), path.c_str()) != 0) {
        err = "make_arch_models failed: " + cmd + "\n" + out;
        return "";
    }
    return path;
}

// A plain text of about n bytes (byte-level vocabulary: about n tokens), varied enough to route widely.
std::string text_file(const std::string & dir, size_t n) {
    const char * parts[] = {"The router picks the top k experts of every token. ", "for (int i = 0; i < n; ++i) s += a[i]; ",
                            "Le renard brun saute par-dessus le chien. ", "3.14159 * 2.71828 = 8.53972; ",
                            "def f(x): return [y * y for y in range(x)]\n", "Experts that a workload rarely uses are cut. "};
    std::string t;
    for (size_t i = 0; t.size() < n; ++i) t += parts[(i * 7 + i / 6) % 6] + std::to_string(i % 97) + " ";
    const std::string path = dir + "/text.txt";
    std::ofstream(path, std::ios::binary) << t;
    return path;
}

reap::calibrate_options opts(const std::string & model, const std::string & corpus, const std::string & out) {
    reap::calibrate_options o;
    o.model_path  = model;
    o.corpus_path = corpus;
    o.out_path    = out;
    o.rt.n_ctx = 256;
    o.rt.n_threads = 2;
    o.rt.llama.n_gpu_layers = 0;
    o.rt.llama.cache_type_k = o.rt.llama.cache_type_v = GGML_TYPE_F32;
    o.rt.llama.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    o.progress = false;
    o.force    = true;
    return o;
}

std::string read_file_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

uint64_t meta_u64(const llama_model * m, const std::string & key) {
    char buf[64] = {0};
    if (llama_model_meta_val_str(m, key.c_str(), buf, sizeof(buf)) < 0) return 0;
    return std::strtoull(buf, nullptr, 10);
}

}  // namespace

TEST(PassSize, MeterKvEqualsTheHeadersShape) {
    const std::string path = trained_model();
    ASSERT_TRUE(file_exists(path)) << path;
    model_ptr m = load_model(path);
    char name[64] = {0};
    ASSERT_GT(llama_model_meta_val_str(m.get(), "general.architecture", name, sizeof(name)), 0);
    const std::string a = name;
    const uint64_t n_layer = meta_u64(m.get(), a + ".block_count");
    const uint64_t n_head = meta_u64(m.get(), a + ".attention.head_count");
    const uint64_t n_head_kv = meta_u64(m.get(), a + ".attention.head_count_kv");
    uint64_t k_len = meta_u64(m.get(), a + ".attention.key_length");
    uint64_t v_len = meta_u64(m.get(), a + ".attention.value_length");
    if (k_len == 0) k_len = meta_u64(m.get(), a + ".embedding_length") / n_head;
    if (v_len == 0) v_len = k_len;
    ASSERT_GT(n_layer, 0u);
    ASSERT_GT(n_head_kv, 0u);
    const int64_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m.get()));

    reap::context_meter meter;
    std::string err;
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    ASSERT_TRUE(meter.open(path, mp, err)) << err;
    for (ggml_type type : {GGML_TYPE_F16, GGML_TYPE_F32}) {
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 4096;
        cp.n_batch = cp.n_ubatch = 512;
        cp.n_seq_max = 1;
        cp.type_k = cp.type_v = type;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        reap::context_bytes small, large;
        ASSERT_TRUE(meter.measure(cp, 7, nullptr, small, err)) << err;
        const uint64_t kv = n_layer * 4096 * n_head_kv * (k_len + v_len) * ggml_type_size(type);
        EXPECT_EQ(small.state, kv) << ggml_type_name(type) << ": " << reap::describe(small);
        EXPECT_EQ(small.output, 7u * (uint64_t) n_vocab * sizeof(float));
        cp.n_batch = cp.n_ubatch = 4096;
        ASSERT_TRUE(meter.measure(cp, 0, nullptr, large, err)) << err;
        EXPECT_EQ(large.state, kv);
        EXPECT_GT(large.compute, small.compute) << reap::describe(small) << " vs " << reap::describe(large);
        // The CPU backend's work buffer, which llama.cpp's breakdown leaves out,
        // is the scratch of the graph's largest op as ggml-cpu plans it, plus a
        // cache line per thread. Two ops compete here:
        //  * the routed MoE matmul (MUL_MAT_ID): a row mapping of 8 bytes for
        //    every expert × used slot × token, a counter and a cache line per
        //    expert (the weights are F32, their own dot type: nothing converted);
        //  * at -fa off, the attention scores (n_head × cells × ubatch floats)
        //    converted to F16 to multiply an F16 V cache (an F32 cache takes
        //    them as they are).
        const uint64_t n_expert = meta_u64(m.get(), a + ".expert_count");
        const uint64_t n_used   = meta_u64(m.get(), a + ".expert_used_count");
        ASSERT_GT(n_expert, 0u);
        ASSERT_GT(n_used, 0u);
        const auto work = [&](uint64_t n_tokens) {
            const uint64_t mmid = n_expert * 8 + 8 + n_expert * n_used * n_tokens * 8 + 8 + 64 * n_expert + 64;
            const uint64_t kqv  = type == GGML_TYPE_F16 ? n_head * 4096 * n_tokens * 2 : 0;
            return std::max(mmid, kqv) + 64 * (uint64_t) cp.n_threads_batch;
        };
        EXPECT_EQ(small.work, work(512)) << ggml_type_name(type) << ": " << reap::describe(small);
        EXPECT_EQ(large.work, work(4096)) << ggml_type_name(type) << ": " << reap::describe(large);
        EXPECT_TRUE(large.allocatable());
        EXPECT_EQ(large.total(), large.state + large.compute + large.work + large.output);
    }
}

TEST(PassSize, ChoosesTheLargestThatFits) {
    EXPECT_EQ(reap::ubatch_candidates(1000000), (std::vector<int>{32768, 16384, 8192, 4096, 2048, 1024, 512}));
    // 16384 takes 10,000 tokens at once: nothing larger is tried; 4096 and below always are
    EXPECT_EQ(reap::ubatch_candidates(10000), (std::vector<int>{16384, 8192, 4096, 2048, 1024, 512}));
    EXPECT_EQ(reap::ubatch_candidates(100), (std::vector<int>{4096, 2048, 1024, 512}));

    // need: 1 MB a token
    std::vector<int> tried;
    auto need = [&](int c, reap::context_bytes & b, std::string &) {
        tried.push_back(c);
        b = {};
        b.compute = (uint64_t) c << 20;
        return true;
    };
    const auto cands = reap::ubatch_candidates(1000000);
    reap::memory_budget budget;
    budget.known = true;
    budget.bytes = 9000ull << 20;
    reap::sized_choice pick;
    std::string err;
    ASSERT_TRUE(reap::choose_largest_fitting(cands, budget, need, pick, err)) << err;
    EXPECT_EQ(pick.size, 8192);
    EXPECT_TRUE(pick.fits);
    EXPECT_EQ(tried, (std::vector<int>{32768, 16384, 8192}));
    budget.bytes = 100ull << 20;   // nothing fits: the smallest, flagged
    ASSERT_TRUE(reap::choose_largest_fitting(cands, budget, need, pick, err)) << err;
    EXPECT_EQ(pick.size, 512);
    EXPECT_FALSE(pick.fits);
    budget = {};   // unknown memory: reap's default size
    ASSERT_TRUE(reap::choose_largest_fitting(cands, budget, need, pick, err)) << err;
    EXPECT_EQ(pick.size, 4096);
    EXPECT_TRUE(pick.fits);
    // a size this machine cannot allocate does not fit, whatever the budget
    budget.known = true;
    budget.bytes = 1ull << 50;
    auto refused_above_8192 = [&](int c, reap::context_bytes & b, std::string & e) {
        need(c, b, e);
        if (c > 8192) b.refused = "its compute buffers";
        return true;
    };
    ASSERT_TRUE(reap::choose_largest_fitting(cands, budget, refused_above_8192, pick, err)) << err;
    EXPECT_EQ(pick.size, 8192);
    EXPECT_TRUE(pick.fits);
    // a failing measurement is an error, not a choice
    auto broken = [](int, reap::context_bytes &, std::string & e) { e = "cannot lay out"; return false; };
    EXPECT_FALSE(reap::choose_largest_fitting(cands, budget, broken, pick, err));
    EXPECT_EQ(err, "cannot lay out");
}

TEST(PassSize, BudgetFromMemory) {
    const uint64_t G = 1ull << 30;
    auto given = reap::pass_memory_budget(3 * G, 100 * G, std::nullopt);
    EXPECT_TRUE(given.known);
    EXPECT_EQ(given.bytes, 3 * G);
    EXPECT_FALSE(reap::pass_memory_budget(0, G, std::nullopt).known);
    reap::util::memory_limit avail;
    avail.bytes  = 24 * G;
    avail.source = "MemAvailable";
    // reserve min(24/8, 2) = 2 GiB; a 4 GiB model fits in half of the 22 left: kept cached
    auto cached = reap::pass_memory_budget(0, 4 * G, avail);
    EXPECT_EQ(cached.bytes, 18 * G) << cached.why;
    // a 300 GiB model streams: its bytes are not taken off
    auto streamed = reap::pass_memory_budget(0, 300 * G, avail);
    EXPECT_EQ(streamed.bytes, 22 * G) << streamed.why;
    avail.bytes = 800ull << 20;   // 800 MB: a reserve of an eighth
    EXPECT_EQ(reap::pass_memory_budget(0, 300 * G, avail).bytes, 700ull << 20);
}

// On a model, over about n_bytes tokens: -ub `big` by hand (what it needs
// measured), the automatic choice given exactly that much --memory (it takes
// `big`, the same archive bit for bit), -ub 4096 by hand (the same
// calibration: counts exact, sums within the bound), and -ub `big` by hand one
// byte short (refused before any decode).
void automatic_against_hand(const std::string & model, const std::string & tag, size_t n_bytes, int big,
                            bool flash_attn = false) {
    const std::string dir = scratch(tag);
    const auto opts = [&](const std::string & m, const std::string & t, const std::string & o) {
        auto x = ::opts(m, t, o);
        if (flash_attn) x.rt.llama.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
        return x;
    };
    const std::string text = text_file(dir, n_bytes);
    std::string err;
    sal::archive hand, chosen, small;
    reap::calibrate_report rhand, rchosen, rsmall;

    auto hand_opts = opts(model, text, dir + "/hand.gguf");
    hand_opts.rt.n_batch = hand_opts.rt.n_ubatch = big;
    hand_opts.rt.memory = 64ull << 30;   // only checked against, never allocated
    ASSERT_TRUE(reap::run_calibrate(hand_opts, hand, rhand, err)) << err;
    ASSERT_EQ(rhand.n_ubatch, big) << rhand.size_note;
    ASSERT_GT(rhand.memory_needed, 0u);

    // exactly what `big` needs: the automatic choice takes it (and nothing larger)
    auto auto_opts = opts(model, text, dir + "/auto.gguf");
    auto_opts.rt.memory = rhand.memory_needed;
    ASSERT_TRUE(reap::run_calibrate(auto_opts, chosen, rchosen, err)) << err;
    EXPECT_EQ(rchosen.n_ubatch, big) << rchosen.size_note;
    EXPECT_EQ(rchosen.memory_needed, rhand.memory_needed);
    EXPECT_EQ(rchosen.memory_budget, rhand.memory_needed);
    EXPECT_NE(rchosen.size_note.find("the largest that fits"), std::string::npos) << rchosen.size_note;
    EXPECT_EQ(read_file_bytes(dir + "/hand.gguf"), read_file_bytes(dir + "/auto.gguf"));

    auto small_opts = opts(model, text, dir + "/small.gguf");
    small_opts.rt.n_batch = small_opts.rt.n_ubatch = 4096;
    ASSERT_TRUE(reap::run_calibrate(small_opts, small, rsmall, err)) << err;
    EXPECT_EQ(rsmall.n_ubatch, 4096);
    EXPECT_LT(rsmall.memory_needed, rhand.memory_needed);
    EXPECT_GT(rsmall.n_ubatches, rhand.n_ubatches);
    const double worst = expect_same_calibration(small, hand, tag + " -ub 4096 vs " + std::to_string(big), k_pack_rel_tol_f16);
    printf("%s: -ub %d needs %llu bytes, 4096 needs %llu; ubatches %zu vs %zu; largest relative difference %.3g\n",
           tag.c_str(), big, (unsigned long long) rhand.memory_needed, (unsigned long long) rsmall.memory_needed,
           rhand.n_ubatches, rsmall.n_ubatches, worst);

    // by hand, one byte short: refused before anything is decoded or written
    auto short_opts = opts(model, text, dir + "/short.gguf");
    short_opts.rt.n_batch = short_opts.rt.n_ubatch = big;
    short_opts.rt.memory = rhand.memory_needed - 1;
    sal::archive none;
    reap::calibrate_report rnone;
    EXPECT_FALSE(reap::run_calibrate(short_opts, none, rnone, err));
    EXPECT_NE(err.find("-ub " + std::to_string(big) + " (given) needs"), std::string::npos) << err;
    EXPECT_NE(err.find("--memory"), std::string::npos) << err;
    EXPECT_FALSE(file_exists(dir + "/short.gguf"));
    EXPECT_EQ(rnone.n_windows_done, 0u);
}

TEST(PassSize, CalibrateTrainedModelAutomaticEqualsHand) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    automatic_against_hand(trained_model(), "trained", 33500, 32768);
}

// glm4moe's MTP context shares one KV cache across a decode's windows, so
// without flash attention its attention scores grow with the square of the
// ubatch (-ub 32768 needs 35 GB with the CPU work buffer): -ub 8192 here.
TEST(PassSize, CalibrateMtpArchAutomaticEqualsHand) {
    std::string err;
    const std::string model = mtp_model(err);
    ASSERT_FALSE(model.empty()) << err;
    automatic_against_hand(model, "glm4moe-mtp", 17000, 8192);
}

// The same at -ub 32768, one decode of 125 windows, with flash attention: at
// -fa off an MTP model's windows share one unified cache (mtp.h), so the
// attention scores are (125 × 256)² per head, 35 GB with the work buffer, and
// the automatic choice steps down; -fa on tiles them (5.1 GB).
TEST(PassSize, CalibrateMtpArchLargestUbatchWithFlashAttention) {
    std::string err;
    const std::string model = mtp_model(err);
    ASSERT_FALSE(model.empty()) << err;
    automatic_against_hand(model, "glm4moe-mtp-fa", 33000, 32768, true);
}

// A checkpoint made at -ub 1024 resumes at -ub 1024 though the automatic
// choice would be larger: the result is the uninterrupted -ub 1024 run's.
TEST(PassSize, ResumeTakesTheCheckpointsSizes) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("resume");
    const std::string text = text_file(dir, 12000);
    std::string err;
    auto whole = opts(trained_model(), text, dir + "/whole.gguf");
    whole.rt.n_batch = whole.rt.n_ubatch = 1024;
    sal::archive a, b;
    reap::calibrate_report ra, rb;
    ASSERT_TRUE(reap::run_calibrate(whole, a, ra, err)) << err;

    auto cut = opts(trained_model(), text, dir + "/cut.gguf");
    cut.rt.n_batch = cut.rt.n_ubatch = 1024;
    std::atomic<bool> stop{true};   // one decode, then a checkpoint
    cut.stop = &stop;
    reap::calibrate_report rc;
    sal::archive c;
    ASSERT_TRUE(reap::run_calibrate(cut, c, rc, err)) << err;
    ASSERT_TRUE(rc.interrupted);
    auto resumed = opts(trained_model(), text, dir + "/cut.gguf");
    resumed.resume = true;
    resumed.rt.memory = 64ull << 30;   // the automatic choice would take 16384
    ASSERT_TRUE(reap::run_calibrate(resumed, b, rb, err)) << err;
    EXPECT_TRUE(rb.resumed);
    EXPECT_EQ(rb.n_batch, 1024);
    EXPECT_EQ(rb.n_ubatch, 1024);
    EXPECT_NE(rb.size_note.find("the checkpoint's"), std::string::npos) << rb.size_note;
    const std::string x = read_file_bytes(dir + "/whole.gguf"), y = read_file_bytes(dir + "/cut.gguf");
    EXPECT_FALSE(x.empty());
    EXPECT_TRUE(x == y) << "resumed archive differs from the uninterrupted -ub 1024 one";
}

// ---- --until-stable (plan/stability.h) -----------------------------------------------------

namespace {

// Three domains of unequal size, several samples each (JSONL).
std::string domains_corpus(const std::string & dir) {
    const char * domains[] = {"en", "code", "fr"};
    const char * texts[] = {"The router picks the top k experts of every token and the rest never see it. ",
                            "for (int i = 0; i < n; ++i) { s += a[i] * b[i]; } return s; ",
                            "Le renard brun saute par-dessus le chien paresseux, puis il dort. "};
    std::ofstream f(dir + "/corpus.jsonl", std::ios::binary);
    for (int i = 0; i < 36; ++i) {
        const int d = i % 6 < 3 ? 0 : i % 6 < 5 ? 1 : 2;   // 3:2:1
        std::string t;
        while (t.size() < 700) t += texts[d] + std::to_string(i * 31 + (int) t.size()) + " ";
        f << "{\"domain\": \"" << domains[d] << "\", \"text\": \"" << t << "\"}\n";
    }
    return dir + "/corpus.jsonl";
}

}  // namespace

TEST(UntilStable, OverlapIsTheMeanJaccardOverLayers) {
    using T = reap::planner::stability_tracker;
    EXPECT_DOUBLE_EQ(T::overlap({{0, 1, 2}, {3, 4}}, {{2, 1, 0}, {3, 4}}), 1.0);
    // layer 0: {0,1,2} vs {0,1,3}: 2/4; layer 1 the same: mean 0.75
    EXPECT_DOUBLE_EQ(T::overlap({{0, 1, 2}, {3, 4}}, {{0, 1, 3}, {3, 4}}), 0.75);
    EXPECT_DOUBLE_EQ(T::overlap({{0}}, {{1}}), 0.0);
}

// A checkpoint's state is a file's: another threshold or target, a field
// missing or mistyped, a bitmap of the wrong width, are refused.
TEST(UntilStable, StateFromACheckpointIsChecked) {
    reap::planner::stability_tracker t(0.9, 4, 0);
    std::string err;
    const std::string good = R"({"threshold":0.9,"n_keep":4,"points":[{"tokens":100,"jaccard_prev":-1,"jaccard_half":-1,)"
                             R"("domain_prev":-1,"domain_half":-1,"weakest":"","safety_margin":3,"stable":false}],)"
                             R"("history":[{"tokens":100,"keep":{"":["0f","f0"]}}],"n_expert":8})";
    ASSERT_TRUE(t.restore(good, err)) << err;
    EXPECT_EQ(t.curve().size(), 1u);
    EXPECT_EQ(nlohmann::json::parse(t.state_json()), nlohmann::json::parse(good));
    auto refused = [&](std::string text, const std::string & from, const std::string & to, const std::string & says) {
        text.replace(text.find(from), from.size(), to);
        reap::planner::stability_tracker u(0.9, 4, 0);
        EXPECT_FALSE(u.restore(text, err)) << text;
        EXPECT_NE(err.find(says), std::string::npos) << err;
    };
    refused(good, "\"n_keep\":4", "\"n_keep\":5", "another --until-stable or target");
    refused(good, "\"0f\"", "\"0f0\"", "bitmap");
    refused(good, "\"0f\"", "\"0g\"", "bitmap");
    refused(good, "\"tokens\":100,\"jaccard_prev\"", "\"tokens\":\"x\",\"jaccard_prev\"", "mistyped");
    refused(good, "\"jaccard_prev\":-1", "\"jaccard_prev\":1e99999", "number");
}

TEST(UntilStable, ARecordedCurveIsChecked) {
    reap::planner::stability_curve c;
    std::string err;
    const std::string good = R"({"threshold":0.95,"n_keep":16,"points":[{"tokens":10,"jaccard_prev":-1,"jaccard_half":-1,)"
                             R"("domain_prev":-1,"domain_half":-1,"weakest":"","safety_margin":3,"stable":false},)"
                             R"({"tokens":20,"jaccard_prev":0.9,"jaccard_half":-1,"domain_prev":0.8,"domain_half":-1,)"
                             R"("weakest":"en","safety_margin":4,"stable":false}]})";
    ASSERT_TRUE(reap::planner::parse_stability_curve(good, c, err)) << err;
    ASSERT_EQ(c.points.size(), 2u);
    EXPECT_EQ(c.points[1].weakest, "en");
    EXPECT_NE(reap::planner::curve_table(c).find("did not hold"), std::string::npos);
    for (const auto & [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"\"jaccard_prev\":0.9", "\"jaccard_prev\":1.5"},   // an overlap above 1
             {"\"tokens\":20", "\"tokens\":5"},                  // out of order
             {"\"n_keep\":16", "\"n_keep\":0"},
             {"\"safety_margin\":4", "\"safety_margin\":\"4\""}}) {
        std::string bad = good;
        bad.replace(bad.find(from), from.size(), to);
        EXPECT_FALSE(reap::planner::parse_stability_curve(bad, c, err)) << bad;
        EXPECT_NE(err.find("stability curve"), std::string::npos) << err;
    }
}

// A run with a target and no --until-stable (stability lines at its
// checkpoints, never stopped) takes each domain's windows in the stability
// order and interleaves the domains' decodes: it writes the plain run's
// statistics (the same tokens, counts exact, sums within what another packing
// and order give, archive_compare.h), and its curve.
TEST(UntilStable, ShuffledInterleavedOrderKeepsEveryDomainsStatistics) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("interleaved");
    const std::string corpus = domains_corpus(dir);
    std::string err;
    auto plain = opts(trained_model(), corpus, dir + "/plain.gguf");
    plain.rt.n_batch = plain.rt.n_ubatch = 1024;
    auto inter = plain;
    inter.out_path = dir + "/inter.gguf";
    inter.target_ratio = 0.5;
    inter.checkpoint_every = 8;
    sal::archive a, b;
    reap::calibrate_report ra, rb;
    ASSERT_TRUE(reap::run_calibrate(plain, a, ra, err)) << err;
    ASSERT_TRUE(reap::run_calibrate(inter, b, rb, err)) << err;
    EXPECT_TRUE(rb.interleaved);
    EXPECT_TRUE(rb.shuffled);
    EXPECT_FALSE(ra.shuffled);
    EXPECT_FALSE(rb.stopped_stable);
    EXPECT_GE(rb.stability.size(), 3u);
    for (const auto & p : rb.stability) EXPECT_FALSE(p.stable) << "no threshold, nothing is stable";
    ASSERT_EQ(a.domains.size(), 3u);
    expect_same_calibration(a, b, "interleaved", k_pack_rel_tol_f32);
    std::string curve, e2;
    EXPECT_TRUE(b.provenance.get_string(reap::planner::k_key_stability, curve, e2)) << e2;
    EXPECT_FALSE(b.provenance.get_string(reap::planner::k_key_stability_state, curve, e2));
}

// A target that keeps every expert cannot move: the run stops at the first
// checkpoint that has both comparisons, twice in a row, before the corpus
// ends; the archive holds exactly the tokens decoded by then and the curve.
// Stopped after its first decode and resumed, the run is the same byte for byte.
TEST(UntilStable, StopsOnceTheKeepListHoldsAndResumesTheSame) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("stops");
    const std::string corpus = domains_corpus(dir);
    model_ptr m = load_model(trained_model());
    char buf[32] = {0};
    ASSERT_GT(llama_model_meta_val_str(m.get(), "qwen3moe.expert_count", buf, sizeof(buf)), 0);
    const int64_t n_expert = std::atoll(buf);
    std::string err;
    auto o = opts(trained_model(), corpus, dir + "/whole.gguf");
    o.rt.n_batch = o.rt.n_ubatch = 512;
    o.until_stable = 1.0;
    o.target_keep = n_expert;
    o.checkpoint_every = 2;   // the first decode's two windows reach the first stability checkpoint
    sal::archive a;
    reap::calibrate_report ra;
    ASSERT_TRUE(reap::run_calibrate(o, a, ra, err)) << err;
    EXPECT_TRUE(ra.stopped_stable);
    ASSERT_GE(ra.stability.size(), 3u);
    EXPECT_TRUE(ra.stability.back().stable);
    EXPECT_TRUE(ra.stability[ra.stability.size() - 2].stable);
    EXPECT_FALSE(ra.stability.front().stable);
    int64_t tokens = 0;
    for (const auto & d : a.domains) tokens += d.n_tokens;
    EXPECT_EQ(tokens, ra.stability.back().tokens);
    EXPECT_LT(tokens, ra.n_tokens);
    {   // issue 49 item 16: the summary's first line states what the archive holds, not the corpus
        char * text = nullptr;
        size_t len = 0;
        FILE * mem = open_memstream(&text, &len);
        reap::print_calibrate_result(mem, o, ra);
        fclose(mem);
        const std::string printed(text, len);
        free(text);
        EXPECT_EQ(printed.rfind("calibrated " + std::to_string(tokens) + " tokens, stopped early", 0), 0u) << printed;
        EXPECT_NE(printed.find("stopped at " + std::to_string(tokens) + " of"), std::string::npos) << printed;
    }
    // interleaved: in domain order its first windows would all be en's (about 54 of them)
    int with_tokens = 0;
    for (const auto & d : a.domains) with_tokens += d.n_tokens > 0;
    EXPECT_GE(with_tokens, 2);
    ASSERT_TRUE(sal::check_count_invariant(a, err)) << err;
    std::string curve, e2;
    ASSERT_TRUE(a.provenance.get_string(reap::planner::k_key_stability, curve, e2)) << e2;
    EXPECT_NE(curve.find("\"stable\":true"), std::string::npos) << curve;

    // reap plan prints the curve the archive records
    std::string out;
    ASSERT_EQ(run_cmd(shell_quote(env_or("REAP_BIN", self_dir() + "/reap")) + " plan " +
                          shell_quote(dir + "/whole.gguf") + " -m " + shell_quote(trained_model()) + " --keep " +
                          std::to_string(n_expert) + " --dry-run 2>&1", out), 0) << out;
    EXPECT_NE(out.find("calibration stability (--until-stable 1, " + std::to_string(n_expert) + " kept per layer)"),
              std::string::npos) << out;
    EXPECT_NE(out.find(reap::util::group_digits(tokens) + "   1.000  1.000"), std::string::npos) << out;
    EXPECT_NE(out.find("the keep-list held: the calibration stopped there"), std::string::npos) << out;

    auto cut = o;
    cut.out_path = dir + "/cut.gguf";
    std::atomic<bool> stop{true};
    cut.stop = &stop;
    sal::archive c;
    reap::calibrate_report rc;
    ASSERT_TRUE(reap::run_calibrate(cut, c, rc, err)) << err;
    ASSERT_TRUE(rc.interrupted);
    stop = false;
    cut.resume = true;
    ASSERT_TRUE(reap::run_calibrate(cut, c, rc, err)) << err;
    EXPECT_TRUE(rc.stopped_stable);
    EXPECT_TRUE(rc.resumed);
    EXPECT_EQ(rc.stability.size(), ra.stability.size()) << "the resumed run took the checkpoint's curve";
    const std::string x = read_file_bytes(dir + "/whole.gguf"), y = read_file_bytes(dir + "/cut.gguf");
    EXPECT_FALSE(x.empty());
    EXPECT_TRUE(x == y) << "resumed --until-stable archive differs from the uninterrupted one";
    std::string listing;
    run_cmd("ls -a " + shell_quote(dir), listing);
    EXPECT_EQ(listing.find(".halves."), std::string::npos) << "split halves left after the run finished: " << listing;
}

TEST(UntilStable, RefusesAMissingOrDoubleTarget) {
    const std::string dir = scratch("refuses");
    auto o = opts(trained_model(), domains_corpus(dir), dir + "/x.gguf");
    o.until_stable = 0.9;
    sal::archive a;
    reap::calibrate_report r;
    std::string err;
    EXPECT_FALSE(reap::run_calibrate(o, a, r, err));
    EXPECT_NE(err.find("--target-keep N or --target-ratio R"), std::string::npos) << err;
    o.target_keep = 8;
    o.target_ratio = 0.5;
    EXPECT_FALSE(reap::run_calibrate(o, a, r, err));
    o.target_ratio = -1;
    o.until_stable = 1.5;
    EXPECT_FALSE(reap::run_calibrate(o, a, r, err));
    EXPECT_NE(err.find("0 < J <= 1"), std::string::npos) << err;
    EXPECT_FALSE(file_exists(dir + "/x.gguf"));
}

// The command line: a size by hand over --memory exits 2 naming what it needs,
// before any decode and with nothing written; flags out of range are usage errors.
TEST(PassSize, CommandLineRefusesASizeThatCannotFit) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("cli");
    const std::string text = text_file(dir, 3000);
    const std::string bin = shell_quote(env_or("REAP_BIN", self_dir() + "/reap"));
    const std::string base = bin + " calibrate -m " + shell_quote(trained_model()) + " --corpus " + shell_quote(text) +
                             " -o " + shell_quote(dir + "/s.gguf") + " -c 256 --no-progress";
    std::string out;
    EXPECT_EQ(run_cmd(base + " -ub 4096 --memory 1M 2>&1", out), 2) << out;
    EXPECT_NE(out.find("-b 4096 -ub 4096 (given) needs"), std::string::npos) << out;
    EXPECT_NE(out.find("more than the 1.00 MB (976.56 KiB) this run may take (--memory 1.00 MB (976.56 KiB))"), std::string::npos) << out;
    EXPECT_EQ(out.find("calibrated"), std::string::npos) << out;
    EXPECT_FALSE(file_exists(dir + "/s.gguf"));
    for (const char * bad : {" --memory 0", " --memory lots", " --until-stable 0 --target-ratio 0.5",
                             " --until-stable 0.9 --target-ratio 1", " --until-stable 0.9"}) {
        EXPECT_EQ(run_cmd(base + bad + " 2>&1", out), 2) << bad << "\n" << out;
        EXPECT_FALSE(file_exists(dir + "/s.gguf")) << bad;
    }
    // automatic: fits, says so
    ASSERT_EQ(run_cmd(base + " --memory 8G 2>&1", out), 0) << out;
    EXPECT_NE(out.find("-ub automatic: the largest that fits, needs"), std::string::npos) << out;
}

namespace {

// Drops the file's pages from the page cache (they are clean once synced).
void evict_from_page_cache(const std::string & path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << path;
    ::fdatasync(fd);
    EXPECT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0) << path;
    ::close(fd);
}

// The fraction of the file's pages in the page cache (mincore of a mapping,
// which faults nothing in).
double resident_fraction(const std::string & path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return -1;
    const size_t size = (size_t) ::lseek(fd, 0, SEEK_END);
    void * p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return -1;
    const size_t page = (size_t) ::sysconf(_SC_PAGESIZE), n = (size + page - 1) / page;
    std::vector<unsigned char> in(n);
    size_t resident = 0;
    if (::mincore(p, size, in.data()) == 0) {
        for (unsigned char c : in) resident += c & 1;
    }
    ::munmap(p, size);
    return (double) resident / (double) n;
}

}  // namespace

// A size refused (calibrate, eval) and a --dry-run read the model's header or
// vocabulary, not its weights: a source larger than memory is not read
// (llama.cpp maps a model it loads with MAP_POPULATE, all of it) to be told
// that -ub does not fit. Measured on a private copy of the trained model by
// what of it is in the page cache after each command; a real run, which does
// read it, is the check that the measure sees a read.
TEST(PassSize, RefusalAndDryRunReadOnlyTheHeader) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("header-only");
    const std::string model = dir + "/model.gguf";
    std::filesystem::copy_file(trained_model(), model, std::filesystem::copy_options::overwrite_existing);
    const std::string text = text_file(dir, 3000);
    const std::string base = shell_quote(env_or("REAP_BIN", self_dir() + "/reap")) + " calibrate -m " + shell_quote(model) +
                             " --corpus " + shell_quote(text) + " -c 256 -t 2 --no-progress";
    const std::string out_path = dir + "/s.gguf";
    std::string out;
    evict_from_page_cache(model);
    ASSERT_LT(resident_fraction(model), 0.05) << "the copy's pages could not be dropped from the page cache";
    EXPECT_EQ(run_cmd(base + " -o " + shell_quote(out_path) + " -ub 4096 --memory 1M 2>&1", out), 2) << out;
    EXPECT_NE(out.find("(given) needs"), std::string::npos) << out;
    EXPECT_LT(resident_fraction(model), 0.25) << "refused, but read the model";

    evict_from_page_cache(model);
    EXPECT_EQ(run_cmd(base + " --dry-run 2>&1", out), 0) << out;
    EXPECT_NE(out.find("-ub automatic"), std::string::npos) << out;
    EXPECT_LT(resident_fraction(model), 0.25) << "--dry-run read the model";

    // eval's base too: its vocabulary sizes the decodes, its weights come after
    evict_from_page_cache(model);
    const std::string eval = shell_quote(env_or("REAP_BIN", self_dir() + "/reap")) + " eval -m " + shell_quote(model) +
                             " -p " + shell_quote(trained_model()) + " -f " + shell_quote(text) + " -c 256 -t 2";
    EXPECT_EQ(run_cmd(eval + " -b 4096 --memory 1M 2>&1", out), 2) << out;
    EXPECT_NE(out.find("(given) needs"), std::string::npos) << out;
    EXPECT_LT(resident_fraction(model), 0.25) << "eval refused, but read the base";

    evict_from_page_cache(model);
    EXPECT_EQ(run_cmd(base + " -o " + shell_quote(out_path) + " --memory 8G 2>&1", out), 0) << out;
    EXPECT_GT(resident_fraction(model), 0.9) << "a real run reads the model: the measure should see it";
}

// A size whose buffers this machine cannot allocate does not fit, whatever
// --memory allows: under an address-space limit (ulimit -v) that refuses the
// compute buffers of -ub 32768 (320 MB on the trained model) the automatic
// choice steps down rather than choose a size whose run would fail, and that
// size given by hand is refused, naming what was refused. The limits are swept,
// since the process's own address space differs between machines: from the
// first that lets calibrate run, every larger one must run too and choose a
// size no smaller, and one of them must choose less than 32768.
TEST(PassSize, ASizeThatCannotBeAllocatedDoesNotFit) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("unallocatable");
    const std::string text = text_file(dir, 33500);
    const std::string base = shell_quote(env_or("REAP_BIN", self_dir() + "/reap")) + " calibrate -m " +
                             shell_quote(trained_model()) + " --corpus " + shell_quote(text) +
                             " -c 256 -t 2 --memory 64G --dry-run";
    const auto run_limited = [&](uint64_t limit_mib, const std::string & extra, std::string & out) {
        const std::string cmd = limit_mib ? "(ulimit -v " + std::to_string(limit_mib << 10) + " && exec " + base + extra + ")"
                                          : base + extra;
        return run_cmd(cmd, out);
    };
    const auto chosen_ub = [](const std::string & out) {
        const size_t at = out.find(" -ub ", out.find("(-b "));
        return at == std::string::npos ? -1 : std::atoi(out.c_str() + at + 5);
    };
    std::string out;
    ASSERT_EQ(run_limited(0, "", out), 0) << out;
    ASSERT_EQ(chosen_ub(out), 32768) << out;

    // Near the first limit that lets calibrate run at all, which of llama.cpp's
    // allocations fails first differs between machines and runs (some of its
    // small ones are made under an assertion), so the checks start one step
    // above it, and the size given by hand is tried in the middle of the limits
    // that stepped down: far from the process's own needs and from 32768's.
    uint64_t first_ran = 0;
    int previous = 0;
    uint64_t first_stepped = 0, last_stepped = 0;
    for (uint64_t mib = 40; mib <= 1600; mib += 25) {
        const int rc = run_limited(mib, "", out);
        if (!first_ran && rc != 0) continue;   // too little for the process itself
        if (!first_ran) first_ran = mib;
        if (mib <= first_ran + 25 && rc != 0) continue;
        ASSERT_EQ(rc, 0) << "ulimit -v " << mib << " MiB:\n" << out;
        const int ub = chosen_ub(out);
        if (mib > first_ran + 25) {
            EXPECT_GE(ub, previous) << "ulimit -v " << mib << " MiB:\n" << out;
        }
        previous = ub;
        if (ub < 32768) {
            if (!first_stepped) {
                first_stepped = mib;
                EXPECT_NE(out.find("-ub automatic: the largest that fits"), std::string::npos) << out;
            }
            last_stepped = mib;
        }
    }
    ASSERT_TRUE(first_ran) << "calibrate never ran under 1600 MiB of address space:\n" << out;
    ASSERT_GT(first_stepped, 0u) << "no limit made -ub 32768 unallocatable";
    EXPECT_EQ(previous, 32768) << "1600 MiB should hold every size";
    const uint64_t by_hand_at = first_stepped + (last_stepped - first_stepped) / 50 * 25;
    ASSERT_EQ(run_limited(by_hand_at, " -ub 32768", out), 2) << "ulimit -v " << by_hand_at << " MiB:\n" << out;
    EXPECT_NE(out.find("-b 32768 -ub 32768 (given) needs"), std::string::npos) << out;
    EXPECT_NE(out.find("llama.cpp could not allocate its compute buffers"), std::string::npos) << out;
    printf("-ub 32768 stepped down under ulimit -v %llu..%llu MiB; refused by hand at %llu\n", (unsigned long long) first_stepped,
           (unsigned long long) last_stepped, (unsigned long long) by_hand_at);
}

namespace {

reap::eval_options eval_opts(const std::string & text, int b, uint64_t memory) {
    reap::eval_options o;
    o.base_path  = trained_model();
    o.input_path = text;
    o.rt.n_ctx   = 512;
    o.rt.past_trained = true;   // windows past the tiny model's 256: sizes, not quality
    o.rt.n_batch = o.rt.n_ubatch = b;
    o.rt.memory  = memory;
    o.rt.n_threads = 2;
    o.rt.llama.n_gpu_layers = 0;
    o.progress   = false;
    return o;
}

}  // namespace

TEST(PassSize, EvalAutomaticEqualsHand) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("eval");
    const std::string text = text_file(dir, 40000);
    std::string err;
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(trained_model(), m, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 4, 11, p, err)) << err;
    ASSERT_TRUE(reap::write_plan(p, dir + "/mask.json", true, err)) << err;
    int64_t n_vocab = 0;
    for (const auto & t : m.tensors) {
        if (t.name == "token_embd.weight") n_vocab = t.ne[1];
    }
    ASSERT_GT(n_vocab, 0);
    const int64_t max_tokens = 40001;

    // by hand: what -b 32768 needs (64 windows of 512 a decode)
    reap::eval_runtime hand = eval_opts(text, 32768, 64ull << 30).rt;
    reap::eval_sizes hs;
    ASSERT_TRUE(reap::size_eval_batches(hand, trained_model(), 512, n_vocab, max_tokens, hs, err)) << err;
    ASSERT_EQ(hand.n_batch, 32768);
    ASSERT_GT(hs.needed, 0u);
    // the scored rows' logits and the base's rows beside them: 64 windows x 255 rows
    EXPECT_GE(hs.needed, 64ull * 255 * (2 * (uint64_t) n_vocab * sizeof(float) + sizeof(int32_t))) << hs.note;

    // exactly that much --memory: the automatic choice takes it
    reap::eval_runtime chosen = eval_opts(text, 0, hs.needed).rt;
    reap::eval_sizes cs;
    ASSERT_TRUE(reap::size_eval_batches(chosen, trained_model(), 512, n_vocab, max_tokens, cs, err)) << err;
    EXPECT_EQ(chosen.n_batch, 32768) << cs.note;
    EXPECT_EQ(chosen.n_ubatch, 32768);
    EXPECT_EQ(cs.needed, hs.needed);
    EXPECT_NE(cs.note.find("the largest that fits"), std::string::npos) << cs.note;

    // one byte less: a smaller size automatically, a refusal by hand
    reap::eval_runtime less = eval_opts(text, 0, hs.needed - 1).rt;
    ASSERT_TRUE(reap::size_eval_batches(less, trained_model(), 512, n_vocab, max_tokens, cs, err)) << err;
    EXPECT_EQ(less.n_batch, 16384) << cs.note;
    EXPECT_LT(cs.needed, hs.needed);
    reap::eval_runtime short_hand = eval_opts(text, 32768, hs.needed - 1).rt;
    EXPECT_FALSE(reap::size_eval_batches(short_hand, trained_model(), 512, n_vocab, max_tokens, cs, err));
    EXPECT_NE(err.find("-b 32768 -ub 32768 (given) needs"), std::string::npos) << err;
    EXPECT_NE(err.find("--memory"), std::string::npos) << err;

    // the scores of the chosen size against -b 4096's
    const std::vector<reap::eval_candidate> cands = {{dir + "/mask.json", true, nullptr}};
    std::vector<reap::eval_report> big, small;
    ASSERT_TRUE(reap::run_eval_candidates(eval_opts(text, 0, hs.needed), cands, big, err)) << err;
    ASSERT_TRUE(reap::run_eval_candidates(eval_opts(text, 4096, 64ull << 30), cands, small, err)) << err;
    ASSERT_EQ(big.size(), 1u);
    ASSERT_EQ(small.size(), 1u);
    EXPECT_EQ(big[0].n_batch, 32768);
    EXPECT_EQ(small[0].n_batch, 4096);
    const reap::eval_metrics & a = big[0].overall, & b = small[0].overall;
    EXPECT_EQ(a.n_tokens, b.n_tokens);
    EXPECT_GT(a.n_tokens, 19000u);
    printf("eval -b 32768 vs 4096: ppl_base %.9g vs %.9g, ppl_pruned %.9g vs %.9g, kld_mean %.9g vs %.9g, agree %.9g vs %.9g\n",
           a.ppl_base, b.ppl_base, a.ppl_pruned, b.ppl_pruned, a.kld_mean, b.kld_mean, a.argmax_agree, b.argmax_agree);
    EXPECT_NEAR(a.ppl_base / b.ppl_base, 1.0, 1e-5);
    EXPECT_NEAR(a.ppl_pruned / b.ppl_pruned, 1.0, 1e-5);
    EXPECT_NEAR(a.kld_mean / b.kld_mean, 1.0, 1e-4);
}

TEST(PassSize, EvalCommandLineRefusesASizeThatCannotFit) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("eval-cli");
    const std::string text = text_file(dir, 3000);
    const std::string bin = shell_quote(env_or("REAP_BIN", self_dir() + "/reap"));
    const std::string base = bin + " eval -m " + shell_quote(trained_model()) + " -p " + shell_quote(trained_model()) + " -f " +
                             shell_quote(text) + " -c 256";
    std::string out;
    EXPECT_EQ(run_cmd(base + " -b 4096 --memory 1M 2>&1", out), 2) << out;
    EXPECT_NE(out.find("-b 4096 -ub 4096 (given) needs"), std::string::npos) << out;
    EXPECT_NE(out.find("more than the 1.00 MB (976.56 KiB) this run may take (--memory 1.00 MB (976.56 KiB))"), std::string::npos) << out;
    EXPECT_EQ(out.find("kld"), std::string::npos) << out;
    EXPECT_EQ(run_cmd(base + " --memory 0 2>&1", out), 2) << out;
    ASSERT_EQ(run_cmd(base + " --memory 8G 2>&1", out), 0) << out;
}

// ---- --until-stable on the demo corpus (issue: knowing when to stop) ---------------

namespace {

// Per MoE layer, the Jaccard of two plan files' keep-lists (read from the JSON
// here, not through the tracker's own overlap).
std::vector<double> plan_jaccards(const std::string & a_path, const std::string & b_path) {
    const auto keeps = [](const std::string & path) {
        std::map<int64_t, std::set<int64_t>> k;
        const nlohmann::json doc = nlohmann::json::parse(read_file_bytes(path));
        for (const auto & l : doc.at("layers")) {
            for (const auto & e : l.at("keep")) k[l.at("layer").get<int64_t>()].insert(e.get<int64_t>());
        }
        return k;
    };
    const auto a = keeps(a_path), b = keeps(b_path);
    std::vector<double> out;
    for (const auto & [layer, ka] : a) {
        const auto it = b.find(layer);
        if (it == b.end()) return {};
        size_t both = 0;
        for (int64_t e : ka) both += it->second.count(e);
        out.push_back((double) both / (double) (ka.size() + it->second.size() - both));
    }
    return out;
}

}  // namespace

// The demo corpus (data/corpus/calib.jsonl, about 770,000 tokens) with the demo
// model: --until-stable 0.95 --target-ratio 0.5 stops before the corpus ends,
// and the plan of what it read overlaps the plan of the whole corpus, read in
// corpus order without a target, by a mean Jaccard of at least 0.95 over the
// MoE layers (both plans made by `reap plan --ratio 0.5`). In corpus order
// (document after document) the plans of half the tokens never came within
// 0.95 of the whole's, and the run went to the end. The same run SIGKILLed
// while it holds after window 400 (the stability checkpoint at window 310 is
// on disk, with its split halves: two disjoint parts of its tokens that add
// up to it) and resumed writes the same bytes as the uninterrupted run.
TEST(UntilStable, StopsEarlyOnTheDemoCorpusWithTheWholeCorpusPlan) {
    const std::string corpus = source_dir() + "/data/corpus/calib.jsonl";
    ASSERT_TRUE(file_exists(corpus)) << corpus << ": run `make corpus`";
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string reap = shell_quote(env_or("REAP_BIN", self_dir() + "/reap"));
    const std::string dir = scratch("demo-corpus");
    const std::string common = " -m " + shell_quote(trained_model()) + " --corpus " + shell_quote(corpus) +
                               " -c 256 -ub 4096 -t 2 --no-progress";
    const std::string target = " --until-stable 0.95 --target-ratio 0.5";
    std::string out;
    ASSERT_EQ(run_cmd(reap + " calibrate" + common + " -o " + shell_quote(dir + "/whole.gguf") + " --force 2>&1", out), 0) << out;
    ASSERT_EQ(run_cmd(reap + " calibrate" + common + target + " -o " + shell_quote(dir + "/stable.gguf") + " --force 2>&1", out), 0)
        << out;
    EXPECT_NE(out.find("; stable"), std::string::npos) << out;
    std::ofstream(dir + "/stable.log") << out;   // the stability lines, for a reader

    sal::archive whole, stable;
    std::string err;
    ASSERT_TRUE(sal::read_archive(dir + "/whole.gguf", whole, err)) << err;
    ASSERT_TRUE(sal::read_archive(dir + "/stable.gguf", stable, err)) << err;
    int64_t whole_tokens = 0, stable_tokens = 0;
    for (const auto & d : whole.domains) whole_tokens += d.n_tokens;
    for (const auto & d : stable.domains) stable_tokens += d.n_tokens;
    EXPECT_GT(whole_tokens, 700000);
    EXPECT_LT(stable_tokens, whole_tokens) << "--until-stable read the whole corpus";
    ASSERT_EQ(stable.domains.size(), whole.domains.size());
    for (size_t d = 0; d < whole.domains.size(); ++d) {
        EXPECT_GT(stable.domains[d].n_tokens, 0) << whole.domains[d].name << ": every domain is read from the start";
    }

    for (const char * name : {"whole", "stable"}) {
        const std::string d = dir + "/" + name;
        ASSERT_EQ(run_cmd(reap + " plan " + shell_quote(d + ".gguf") + " -m " + shell_quote(trained_model()) +
                              " --ratio 0.5 -o " + shell_quote(d + ".plan.json") + " --force 2>&1", out), 0) << out;
    }
    const std::vector<double> j = plan_jaccards(dir + "/whole.plan.json", dir + "/stable.plan.json");
    ASSERT_FALSE(j.empty());
    double mean = 0;
    std::string per_layer;
    for (double v : j) {
        mean += v / (double) j.size();
        per_layer += " " + std::to_string(v);
    }
    EXPECT_GE(mean, 0.95) << "stopped at " << stable_tokens << " of " << whole_tokens << " tokens; per layer" << per_layer;

    // SIGKILL while it holds after window 400, then --resume
    const std::string log = dir + "/killed.log", killed = dir + "/killed.gguf";
    ASSERT_TRUE(kill_where_it_holds("REAP_CALIBRATE_PAUSE_AFTER=400 exec " + reap + " calibrate" + common + target + " -o " +
                                        shell_quote(killed) + " --force", log, "paused after", err)) << err;
    ASSERT_FALSE(file_exists(killed));
    ASSERT_TRUE(file_exists(killed + ".checkpoint"));
    // the checkpoint's split halves: two disjoint parts of its tokens that add up
    // to it (counts exactly), each domain's decodes in turn, beside it in their
    // own file named by the checkpoint's window
    {
        sal::archive ck;
        ASSERT_TRUE(sal::read_archive(killed + ".checkpoint", ck, err)) << err;
        uint64_t next = 0;
        ASSERT_TRUE(ck.provenance.get_u64(sal::k_key_checkpoint_next_window, next, err)) << err;
        const std::string halves_file = sal::split_halves_path(killed + ".checkpoint", next);
        ASSERT_TRUE(file_exists(halves_file)) << halves_file;
        sal::split_halves h;
        ASSERT_TRUE(sal::read_split_halves(killed + ".checkpoint", next, ck, h, err)) << err;
        int64_t in_a = 0, in_b = 0;
        for (size_t d = 0; d < ck.domains.size(); ++d) {
            const auto & x = ck.domains[d];
            const auto & a = h.a.domains[d];
            const auto & b = h.b.domains[d];
            EXPECT_EQ(a.name, x.name);
            EXPECT_EQ(a.n_tokens + b.n_tokens, x.n_tokens) << x.name;
            for (size_t i = 0; i < x.count.size(); ++i) ASSERT_EQ(a.count[i] + b.count[i], x.count[i]) << x.name << " cell " << i;
            in_a += a.n_tokens;
            in_b += b.n_tokens;
        }
        EXPECT_GT(in_a, 0);
        EXPECT_GT(in_b, 0);
        // the curve's split-half overlap at that checkpoint is what `reap plan`
        // gives for each half (its domains a0.. and b0..)
        std::string state, e2;
        ASSERT_TRUE(ck.provenance.get_string(reap::planner::k_key_stability_state, state, e2)) << e2;
        const double recorded = nlohmann::json::parse(state).at("points").back().at("jaccard_half").get<double>();
        for (const char tag : {'a', 'b'}) {
            std::string names;
            for (size_t d = 0; d < ck.domains.size(); ++d) names += (d ? "," : "") + std::string(1, tag) + std::to_string(d);
            ASSERT_EQ(run_cmd(reap + " plan " + shell_quote(halves_file) + " -m " + shell_quote(trained_model()) + " --domains " +
                                  names + " --ratio 0.5 -o " + shell_quote(dir + "/half-" + tag + ".plan.json") + " --force 2>&1", out), 0)
                << out;
        }
        const std::vector<double> jh = plan_jaccards(dir + "/half-a.plan.json", dir + "/half-b.plan.json");
        ASSERT_FALSE(jh.empty());
        double mean_h = 0;
        for (double v : jh) mean_h += v / (double) jh.size();
        EXPECT_NEAR(mean_h, recorded, 1e-12);
        // a halves file of another window is refused, naming it
        sal::split_halves other;
        EXPECT_FALSE(sal::read_split_halves(killed + ".checkpoint", next + 1, ck, other, err));
        EXPECT_NE(err.find("halves"), std::string::npos) << err;
    }
    ASSERT_EQ(run_cmd(reap + " calibrate" + common + target + " -o " + shell_quote(killed) + " --resume 2>&1", out), 0) << out;
    EXPECT_NE(out.find("resumed"), std::string::npos) << out;
    EXPECT_TRUE(read_file_bytes(dir + "/stable.gguf") == read_file_bytes(killed)) << "resumed archive differs";
    std::string listing;
    run_cmd("ls -a " + shell_quote(dir), listing);
    EXPECT_EQ(listing.find(".halves."), std::string::npos) << "split halves left after the run finished: " << listing;
}

// `reap calibrate --dry-run` reads the corpus and lays the run out (windows,
// decodes, -b/-ub chosen against --memory) and prints the same cost lines the
// run prints before its first decode, then stops: no decode, no file, and no
// -o needed.
TEST(PassSize, CalibrateDryRunPrintsTheRunsChoiceAndWritesNothing) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("dry-run");
    const std::string corpus = domains_corpus(dir);
    const std::string reap = shell_quote(env_or("REAP_BIN", self_dir() + "/reap"));
    const std::string common = " -m " + shell_quote(trained_model()) + " --corpus " + shell_quote(corpus) +
                               " -c 256 --memory 1G -t 1 --no-progress";
    const auto cost_lines = [](const std::string & log) {
        std::string lines, line;
        std::istringstream in(log);
        while (std::getline(in, line)) {
            if (line.rfind("reap calibrate: ", 0) == 0 && line.find("stability") == std::string::npos) lines += line + "\n";
        }
        return lines;
    };
    std::string dry, real;
    ASSERT_EQ(run_cmd(reap + " calibrate --dry-run" + common + " -o " + shell_quote(dir + "/dry.gguf") + " 2>&1", dry), 0) << dry;
    EXPECT_FALSE(file_exists(dir + "/dry.gguf"));
    EXPECT_FALSE(file_exists(dir + "/dry.gguf.checkpoint"));
    EXPECT_NE(dry.find(" ubatches, each reading"), std::string::npos) << dry;
    std::string no_output;
    EXPECT_EQ(run_cmd(reap + " calibrate --dry-run" + common + " 2>&1", no_output), 0) << no_output;
    ASSERT_EQ(run_cmd(reap + " calibrate" + common + " -o " + shell_quote(dir + "/real.gguf") + " --force 2>&1", real), 0) << real;
    EXPECT_TRUE(file_exists(dir + "/real.gguf"));
    EXPECT_FALSE(cost_lines(dry).empty()) << dry;
    EXPECT_EQ(cost_lines(dry), cost_lines(real));
}

// Issue 49 item 13: a --memory that not even the smallest automatic -ub fits is
// refused before any decode, naming what the smallest needs (before: a warning,
// then the calibration ran); --dry-run says the same.
TEST(PassSize, AMemoryNothingFitsIsRefusedBeforeAnyDecode) {
    ASSERT_TRUE(file_exists(trained_model())) << trained_model();
    const std::string dir = scratch("memory-nothing-fits");
    const std::string text = text_file(dir, 4000), out_path = dir + "/out.gguf";
    for (const char * more : {"", " --dry-run"}) {
        std::string out;
        EXPECT_EQ(run_cmd(shell_quote(env_or("REAP_BIN", self_dir() + "/reap")) + " calibrate -m " + shell_quote(trained_model()) +
                              " --corpus " + shell_quote(text) + " -o " + shell_quote(out_path) + " -c 256 -t 1 --memory 1" + more, out), 2)
            << out;
        EXPECT_NE(out.find("-ub automatic: even the smallest size"), std::string::npos) << out;
        EXPECT_NE(out.find("give a larger --memory"), std::string::npos) << out;
        EXPECT_FALSE(file_exists(out_path));
    }
}

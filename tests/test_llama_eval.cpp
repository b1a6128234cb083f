// Tests of `reap eval` (src/llama/eval.h and the CLI): identity gives KLD 0 and
// full top-1 agreement; base perplexity, mean KLD and top-1 agreement match
// llama.cpp's llama-perplexity on the same files; KLD base files pass both ways
// between the two tools; damaged base files are rejected with a message that
// names the damage; corpus domains are scored without attending across
// samples; several -p give the numbers of separate runs; errors for missing
// files, vocabulary mismatch and short texts.
//
// Fixtures are generated here: tests/make_eval_models.py writes two tiny
// random-weight qwen3moe models (base, and pruned = base with perturbed experts)
// and one with a different vocabulary; the text is generated from a seeded RNG.
#include "gguf_test_util.h"
#include "llama_test_util.h"
#include "llama/eval.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using gguf_test::env_or;

bool exists(const std::string & p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

// The directory of this test binary: reap and llama.cpp's tools are built
// beside it, which is the fallback when ctest's environment is missing.
std::string exe_dir() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return ".";
    std::string p(buf, (size_t) n);
    const size_t slash = p.rfind('/');
    return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string source_dir() { return env_or("REAP_SOURCE_DIR", REAP_SOURCE_DIR); }
using gguf_test::reap_bin;
using reap_test::find_number;
using reap_test::run_llama_perplexity;
std::string llama_bin(const std::string & tool) { return env_or("REAP_LLAMA_BIN_DIR", exe_dir()) + "/" + tool; }

// Runs a shell command; stdout and stderr come back separately (stderr is
// appended to out when err_out is &out).
int run(const std::string & cmd, std::string & out, std::string * err_out = nullptr) {
    char tmpl[] = "/tmp/reap-eval-stderr-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) return -1;
    close(fd);
    out.clear();
    FILE * p = popen(("(" + cmd + ") 2>" + tmpl).c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    const int st = pclose(p);
    std::ifstream ef(tmpl);
    std::stringstream ss;
    ss << ef.rdbuf();
    if (err_out == &out) {
        out += ss.str();
    } else if (err_out) {
        *err_out = ss.str();
    }
    remove(tmpl);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string python() {
    const std::string p = env_or("REAP_PYTHON", "");
    if (!p.empty()) return p;
    return exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

std::string read_bytes(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_bytes(const std::string & path, const std::string & data) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::binary);
        out.write(data.data(), (std::streamsize) data.size());
    }
    rename(tmp.c_str(), path.c_str());
}

// Deterministic word salad: enough structure for a tokenizer, no network.
std::string make_text(uint32_t seed, int n_words) {
    static const char * words[] = {"the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as",
                                   "by", "at", "from", "his", "her", "an", "which", "or", "be", "are", "this",
                                   "were", "it", "had", "not", "but", "they", "have", "one", "all", "their", "there"};
    std::mt19937 rng(seed);
    std::string s;
    for (int i = 0; i < n_words; ++i) {
        s += words[rng() % (sizeof(words) / sizeof(words[0]))];
        s += (i % 17 == 16) ? ".\n" : " ";
    }
    return s;
}

// Shared fixtures, made once per directory (each test may run in its own
// process, possibly in parallel: every file is written to a temp name and
// renamed into place).
struct fixtures {
    std::string dir, base, pruned, other, text, kld_lp;
    std::string skip;  // why the fixtures are unavailable, if they are
};

const fixtures & fx() {
    static fixtures f = [] {
        fixtures r;
        const std::string root = env_or("REAP_TEST_TMP", "test-tmp");
        mkdir(root.c_str(), 0755);
        r.dir    = root + "/eval-v1";
        r.base   = r.dir + "/base.gguf";
        r.pruned = r.dir + "/pruned.gguf";
        r.other  = r.dir + "/othervocab.gguf";
        r.text   = r.dir + "/text.txt";
        r.kld_lp = r.dir + "/llama-perplexity.kld";  // default -b: 16 windows per decode
        if (!exists(r.other)) {
            const std::string tmp = r.dir + ".tmp." + std::to_string(getpid());
            std::string out;
            const int rc = run(python() + " " + source_dir() + "/tests/make_eval_models.py " + tmp, out, &out);
            if (rc != 0) {
                r.skip = "cannot generate the test models (python with numpy needed; set REAP_PYTHON): " + out;
                return r;
            }
            if (rename(tmp.c_str(), r.dir.c_str()) != 0) {
                std::string ignored;
                run("rm -rf " + tmp, ignored);  // another process won the race
            }
        }
        if (!exists(r.text)) {
            write_bytes(r.text, make_text(42, 3000));
        }
        return r;
    }();
    return f;
}

#define NEED_FIXTURES()                        \
    do {                                       \
        if (!fx().skip.empty()) GTEST_SKIP() << fx().skip; \
    } while (0)

reap::eval_options options(const std::string & base, const std::string & pruned, const std::string & input, int n_ctx) {
    reap::eval_options o;
    o.base_path   = base;
    o.pruned_path = pruned;
    o.input_path  = input;
    o.rt.n_ctx    = n_ctx;
    // llama-perplexity's defaults, so that both compute the same arithmetic (eval's own
    // default, settle_batches, is larger; a masked or pruned model's near-tie routings
    // can flip between batch shapes)
    o.rt.n_batch  = 2048;
    o.rt.n_ubatch = 512;
    o.rt.n_threads = 1;
    o.progress    = false;
    return o;
}

// llama-perplexity's base file for the fixture text, made once.
bool llama_perplexity_base_file(std::string & why) {
    if (exists(fx().kld_lp)) return true;
    const std::string tmp = fx().kld_lp + ".tmp." + std::to_string(getpid());
    std::string out;
    const int rc = run(llama_bin("llama-perplexity") + " -m " + fx().base + " -f " + fx().text +
                       " -c 128 -t 1 --kl-divergence-base " + tmp, out, &out);
    if (rc != 0) {
        why = "llama-perplexity failed: " + out;
        return false;
    }
    rename(tmp.c_str(), fx().kld_lp.c_str());
    return true;
}

} // namespace

// Identity gives KLD 0 and full agreement, and -p is really loaded: in the
// same run a real cut of the base (reap prune to 4 of its 8 experts) gives
// KLD > 0, and the cut alone gives the numbers it has beside the identity.
TEST(Eval, IdentityGivesZeroKldAndFullAgreement) {
    NEED_FIXTURES();
    reap::eval_report r;
    std::string err;
    ASSERT_TRUE(reap::run_eval(options(fx().base, fx().base, fx().text, 128), r, err)) << err;
    EXPECT_GT(r.overall.n_tokens, 1000u);
    EXPECT_EQ(r.overall.kld_mean, 0.0);
    EXPECT_EQ(r.overall.kld_max, 0.0);
    EXPECT_EQ(r.overall.argmax_agree, 1.0);
    EXPECT_EQ(r.overall.ppl_base, r.overall.ppl_pruned);
    EXPECT_EQ(r.overall.ppl_ratio, 1.0);

    const std::string tag = std::to_string(getpid());
    const std::string plan = fx().dir + "/cut-" + tag + ".json", cut = fx().dir + "/cut-" + tag + ".gguf";
    nlohmann::json doc = {{"format", "reap-plan"}, {"version", 1},
                          {"model", {{"arch", "qwen3moe"}, {"n_layer", 2}, {"n_expert", 8}, {"n_expert_used", 2}}},
                          {"n_keep", 4},
                          {"layers", {{{"layer", 0}, {"keep", {0, 2, 5, 7}}}, {{"layer", 1}, {"keep", {1, 3, 4, 6}}}}}};
    write_bytes(plan, doc.dump());
    std::string out;
    ASSERT_EQ(run(reap_bin() + " prune -m " + fx().base + " --plan " + plan + " -o " + cut + " --force", out, &out), 0) << out;

    auto eval_json = [&](const std::string & ps) {
        std::string o, e;
        EXPECT_EQ(run(reap_bin() + " eval -m " + fx().base + ps + " -f " + fx().text + " -c 128 -t 1 -b 2048 -ub 512 --json", o, &e), 0) << e;
        return nlohmann::json::parse(o);
    };
    const nlohmann::json pair = eval_json(" -p " + fx().base + " -p " + cut);
    const nlohmann::json alone = eval_json(" -p " + cut);
    ASSERT_TRUE(pair.contains("pruned")) << pair.dump();
    const nlohmann::json & id = pair["pruned"][fx().base];
    const nlohmann::json & c = pair["pruned"][cut];
    EXPECT_EQ(id["kld_max"].get<double>(), 0.0);
    EXPECT_EQ(id["argmax_agree"].get<double>(), 1.0);
    EXPECT_EQ(id["ppl_ratio"].get<double>(), 1.0);
    EXPECT_GT(c["kld_mean"].get<double>(), 1e-3);
    EXPECT_LT(c["argmax_agree"].get<double>(), 1.0);
    EXPECT_NE(c["ppl_pruned"], id["ppl_pruned"]);
    EXPECT_EQ(alone, c);   // the cut's numbers are the cut's, alone or beside the identity
    remove(plan.c_str());
    remove(cut.c_str());
}

TEST(Eval, CliIdentityJson) {
    NEED_FIXTURES();
    std::string out, err;
    ASSERT_EQ(run(reap_bin() + " eval -m " + fx().base + " -p " + fx().base + " -f " + fx().text + " -c 128 -t 1 -b 2048 -ub 512 --json",
                  out, &err), 0) << err;
    const auto j = nlohmann::json::parse(out);
    for (const char * k : {"ppl_base", "ppl_pruned", "ppl_ratio", "kld_mean", "kld_median", "kld_p99", "kld_max",
                           "argmax_agree", "n_tokens", "domains"}) {
        EXPECT_TRUE(j.contains(k)) << k;
    }
    EXPECT_EQ(j["kld_mean"].get<double>(), 0.0);
    EXPECT_EQ(j["kld_max"].get<double>(), 0.0);
    EXPECT_EQ(j["argmax_agree"].get<double>(), 1.0);
    EXPECT_EQ(j["n_tokens"].get<size_t>(), j["n_windows"].get<size_t>() * 63u);  // windows of 128, 63 scored each
    EXPECT_GT(j["n_windows"].get<size_t>(), 10u);
}

TEST(Eval, PrunedDiffers) {
    NEED_FIXTURES();
    reap::eval_report r;
    std::string err;
    ASSERT_TRUE(reap::run_eval(options(fx().base, fx().pruned, fx().text, 128), r, err)) << err;
    EXPECT_GT(r.overall.kld_mean, 1e-3);
    EXPECT_LE(r.overall.kld_median, r.overall.kld_p99);
    EXPECT_LE(r.overall.kld_p99, r.overall.kld_max);
    EXPECT_GT(r.overall.argmax_agree, 0.3);
    EXPECT_LT(r.overall.argmax_agree, 1.0);
    EXPECT_NEAR(r.overall.ppl_ratio, r.overall.ppl_pruned / r.overall.ppl_base, 1e-12);
}

TEST(Eval, BasePerplexityMatchesLlamaPerplexity) {
    NEED_FIXTURES();
    // -b 128: one window per decode; 512 and 2048 (the default): 4 and 16 windows
    // side by side as separate sequences, as llama-perplexity packs them.
    for (int batch : {128, 512, 2048}) {
        std::string out;
        ASSERT_EQ(run_llama_perplexity("-m " + fx().base + " -f " + fx().text + " -c 128 -t 1 -b " + std::to_string(batch),
                                   "Final estimate", out), 0) << out;
        const double lp = find_number(out, "Final estimate: PPL = ");
        ASSERT_TRUE(std::isfinite(lp)) << out;
        reap::eval_report r;
        std::string err;
        reap::eval_options o = options(fx().base, fx().pruned, fx().text, 128);
        o.rt.n_batch = batch;
        o.rt.n_ubatch = std::min(batch, 512);   // llama-perplexity's default -ub
        ASSERT_TRUE(reap::run_eval(o, r, err)) << err;
        // The contract is 0.1%; the same batching gives the same logits, so in fact it is exact to print precision.
        EXPECT_NEAR(r.overall.ppl_base / lp, 1.0, 1e-3) << "reap " << r.overall.ppl_base << " llama-perplexity " << lp
                                                        << " (-b " << batch << ")";
        EXPECT_NEAR(r.overall.ppl_base, lp, 1e-4 + 1e-7 * lp) << "-b " << batch;
    }
}

TEST(Eval, KldMatchesLlamaPerplexity) {
    NEED_FIXTURES();
    std::string why;
    ASSERT_TRUE(llama_perplexity_base_file(why)) << why;
    std::string out;
    ASSERT_EQ(run_llama_perplexity("-m " + fx().pruned + " -c 128 -t 1 --kl-divergence --kl-divergence-base " +
                               fx().kld_lp, "Same top p", out), 0) << out;
    const double lp_kld = find_number(out, "Mean    KLD:");
    const double lp_top = find_number(out, "Same top p:");
    const double lp_ppl = find_number(out, "Mean PPL(Q)                   :");
    const double lp_base = find_number(out, "Mean PPL(base)                :");
    const double lp_med = find_number(out, "Median  KLD:");
    const double lp_p99 = find_number(out, "99.0%   KLD:");
    const double lp_max = find_number(out, "Maximum KLD:");
    ASSERT_TRUE(std::isfinite(lp_kld) && std::isfinite(lp_top) && std::isfinite(lp_ppl) && std::isfinite(lp_max)) << out;

    // Through llama-perplexity's own base file: the same rules, so the same numbers.
    reap::eval_options o = options("", fx().pruned, fx().text, 0);
    o.kld_base_path = fx().kld_lp;
    reap::eval_report r;
    std::string err;
    ASSERT_TRUE(reap::run_eval(o, r, err)) << err;
    EXPECT_EQ(r.kld_base_mode, "read");
    EXPECT_NEAR(r.overall.kld_mean, lp_kld, 2e-6 + 1e-4 * lp_kld);
    EXPECT_NEAR(100.0 * r.overall.argmax_agree, lp_top, 1.5e-3);
    EXPECT_NEAR(r.overall.ppl_pruned / lp_ppl, 1.0, 1e-5);
    EXPECT_NEAR(r.overall.ppl_base / lp_base, 1.0, 1e-5);
    EXPECT_NEAR(r.overall.kld_median, lp_med, 2e-6 + 1e-4 * lp_med);
    EXPECT_NEAR(r.overall.kld_p99, lp_p99, 2e-6 + 1e-4 * lp_p99);
    EXPECT_NEAR(r.overall.kld_max, lp_max, 2e-6 + 1e-4 * lp_max);

    // Both models live (exact log-probs): close to the 16-bit version.
    reap::eval_report live;
    ASSERT_TRUE(reap::run_eval(options(fx().base, fx().pruned, fx().text, 128), live, err)) << err;
    EXPECT_NEAR(live.overall.kld_mean, lp_kld, 1e-5 + 0.01 * lp_kld);
    EXPECT_NEAR(100.0 * live.overall.argmax_agree, lp_top, 0.5);
}

TEST(Eval, BaseFilesPassBetweenTools) {
    NEED_FIXTURES();
    std::string why;
    ASSERT_TRUE(llama_perplexity_base_file(why)) << why;
    const std::string mine = fx().dir + "/reap-" + std::to_string(getpid()) + ".kld";
    remove(mine.c_str());

    // reap writes (base run, then the pruned model against the file) ...
    std::string out, err;
    ASSERT_EQ(run(reap_bin() + " eval -m " + fx().base + " -p " + fx().pruned + " -f " + fx().text +
                  " -c 128 -t 1 -b 2048 -ub 512 --json --kld-base " + mine, out, &err), 0) << err;
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["kld_base"], "written");
    // ... the very bytes llama-perplexity writes for the same model and text ...
    EXPECT_TRUE(read_bytes(mine) == read_bytes(fx().kld_lp)) << "reap's base file differs from llama-perplexity's";

    // ... and llama-perplexity reads it, agreeing with reap.
    std::string lp;
    ASSERT_EQ(run_llama_perplexity("-m " + fx().pruned + " -c 128 -t 1 --kl-divergence --kl-divergence-base " + mine,
                               "Same top p", lp), 0) << lp;
    const double lp_kld = find_number(lp, "Mean    KLD:");
    EXPECT_NEAR(j["kld_mean"].get<double>(), lp_kld, 2e-6 + 1e-4 * lp_kld);
    EXPECT_NEAR(100.0 * j["argmax_agree"].get<double>(), find_number(lp, "Same top p:"), 1.5e-3);

    // Without -p only the file is written, with the base's own perplexity.
    const std::string only = fx().dir + "/reap-only-" + std::to_string(getpid()) + ".kld";
    remove(only.c_str());
    ASSERT_EQ(run(reap_bin() + " eval -m " + fx().base + " -f " + fx().text + " -c 128 -t 1 -b 2048 -ub 512 --json --kld-base " + only,
                  out, &err), 0) << err;
    const auto jo = nlohmann::json::parse(out);
    EXPECT_TRUE(jo["ppl_pruned"].is_null());
    EXPECT_NEAR(jo["ppl_base"].get<double>() / j["ppl_base"].get<double>(), 1.0, 1e-4);
    EXPECT_TRUE(read_bytes(only) == read_bytes(fx().kld_lp));
    remove(only.c_str());

    // A second run finds the file and reads it, without -m.
    ASSERT_EQ(run(reap_bin() + " eval -p " + fx().pruned + " -f " + fx().text + " -t 1 -b 2048 -ub 512 --json --kld-base " + mine, out,
                  &err), 0) << err;
    const auto j2 = nlohmann::json::parse(out);
    EXPECT_EQ(j2["kld_base"], "read");
    EXPECT_EQ(j2["kld_mean"].get<double>(), j["kld_mean"].get<double>());
    remove(mine.c_str());
}

TEST(Eval, BaseFileMustMatchTextAndContext) {
    NEED_FIXTURES();
    std::string why;
    ASSERT_TRUE(llama_perplexity_base_file(why)) << why;
    const std::string other_text = fx().dir + "/other-" + std::to_string(getpid()) + ".txt";
    write_bytes(other_text, make_text(7, 3000));
    reap::eval_options o = options("", fx().pruned, other_text, 0);
    o.kld_base_path = fx().kld_lp;
    reap::eval_report r;
    std::string err;
    EXPECT_FALSE(reap::run_eval(o, r, err));
    EXPECT_NE(err.find("not the text"), std::string::npos) << err;
    remove(other_text.c_str());

    o = options("", fx().pruned, fx().text, 256);
    o.kld_base_path = fx().kld_lp;
    EXPECT_FALSE(reap::run_eval(o, r, err));
    EXPECT_NE(err.find("differs from the n_ctx 128"), std::string::npos) << err;

    o = options("", fx().other, fx().text, 0);
    o.kld_base_path = fx().kld_lp;
    EXPECT_FALSE(reap::run_eval(o, r, err));  // same size vocabulary, other tokens: the text check catches it
}

// One damaged copy of the base file per kind of damage, in the spirit of ggml's test-gguf.
TEST(Eval, DamagedBaseFilesAreRejected) {
    NEED_FIXTURES();
    std::string why;
    ASSERT_TRUE(llama_perplexity_base_file(why)) << why;
    const std::string good = read_bytes(fx().kld_lp);
    reap::kld_base_header gh;
    ASSERT_TRUE(reap::kld_base_read_header(fx().kld_lp, gh, why)) << why;
    ASSERT_EQ(gh.n_vocab, 259);
    const size_t n_ctx = (size_t) gh.n_ctx, n_chunk = (size_t) gh.n_chunk;
    const size_t rec_bytes = 2 * reap::kld_record_u16(259);
    const size_t data_at = 20 + 4 * n_ctx * n_chunk;
    const std::string bad = fx().dir + "/damaged-" + std::to_string(getpid()) + ".kld";

    auto expect_rejected = [&](const std::string & bytes, const std::string & needle, bool header_only) {
        write_bytes(bad, bytes);
        reap::kld_base_header h;
        std::string err;
        if (header_only) {
            EXPECT_FALSE(reap::kld_base_read_header(bad, h, err)) << needle;
            EXPECT_NE(err.find(needle), std::string::npos) << "message '" << err << "' lacks '" << needle << "'";
        }
        reap::eval_options o = options("", fx().pruned, "", 0);
        o.kld_base_path = bad;
        reap::eval_report r;
        err.clear();
        EXPECT_FALSE(reap::run_eval(o, r, err)) << needle;
        EXPECT_NE(err.find(needle), std::string::npos) << "message '" << err << "' lacks '" << needle << "'";
    };
    auto with_i32 = [&](size_t offset, int32_t v) {
        std::string b = good;
        memcpy(&b[offset], &v, 4);
        return b;
    };

    expect_rejected(good.substr(0, good.size() - 1), "truncated", true);
    expect_rejected(good.substr(0, 10), "truncated", true);
    expect_rejected(good + "x", "trailing bytes", true);
    expect_rejected("_logitz_" + good.substr(8), "magic", true);
    expect_rejected(with_i32(12, 258), "need", true);            // n_vocab off by one: sizes no longer add up
    expect_rejected(with_i32(12, -5), "n_vocab -5", true);
    expect_rejected(with_i32(8, 0), "n_ctx 0", true);
    expect_rejected(with_i32(16, 0), "n_chunk 0", true);
    expect_rejected(with_i32(16, INT32_MAX), "need", true);      // huge n_chunk: caught by size, no allocation
    {
        // Every count at its maximum: the size computation must not overflow into a match.
        std::string b = with_i32(8, 1 << 22);
        memcpy(&b[12], "\x00\x00\x00\x01", 4);
        memcpy(&b[16], "\xff\xff\xff\x7f", 4);
        expect_rejected(b, "overflow", true);
    }
    expect_rejected(with_i32(20 + 4 * 77, 259), "outside the vocabulary", true);  // a token id out of range
    {
        // A consistent file whose n_vocab is not the model's: the wrong-vocabulary message.
        // Build it: n_vocab 261 (2 more), records 2 uint16 longer.
        const size_t rec_old = reap::kld_record_u16(259), rec_new = reap::kld_record_u16(261);
        std::string b = good.substr(0, data_at);
        int32_t v = 261;
        memcpy(&b[12], &v, 4);
        const size_t n_rec = n_chunk * (n_ctx - 1 - n_ctx / 2);
        for (size_t r = 0; r < n_rec; ++r) {
            b += good.substr(data_at + r * rec_old * 2, rec_old * 2);
            b += std::string((rec_new - rec_old) * 2, '\0');
        }
        write_bytes(bad, b);
        reap::kld_base_header h;
        std::string err;
        EXPECT_TRUE(reap::kld_base_read_header(bad, h, err)) << err;
        expect_rejected(b, "vocabulary of 261 tokens", false);
    }
    {
        // A record whose scale is NaN: found while reading, named by chunk and position.
        std::string b = good;
        const float nan = NAN;
        memcpy(&b[data_at + 5 * rec_bytes], &nan, 4);
        expect_rejected(b, "damaged", false);
    }
    // Seeded random truncations: every one is refused, none crashes.
    std::mt19937 rng(1234);
    for (int i = 0; i < 8; ++i) {
        expect_rejected(good.substr(0, rng() % good.size()), "truncated", true);
    }
    remove(bad.c_str());

    std::string out, err;
    write_bytes(bad, good.substr(0, good.size() / 2));
    EXPECT_EQ(run(reap_bin() + " eval -p " + fx().pruned + " --kld-base " + bad, out, &err), 2);
    EXPECT_NE(err.find("truncated"), std::string::npos) << err;
    remove(bad.c_str());
}

TEST(Eval, CompressedRowRoundTrip) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 3.f);
    for (int n_vocab : {1, 2, 7, 300, 1001}) {
        std::vector<float> logits(n_vocab);
        for (auto & v : logits) v = nd(rng);
        std::vector<uint16_t> rec(reap::kld_record_u16(n_vocab));
        const double nll = reap::kld_compress_row(logits.data(), n_vocab, n_vocab / 2, rec.data());
        std::vector<float> lp(n_vocab);
        ASSERT_TRUE(reap::kld_decompress_row(rec.data(), n_vocab, lp.data()));
        float mx = logits[0];
        for (float v : logits) mx = std::max(mx, v);
        double s = 0;
        for (float v : logits) s += std::exp((double) v - mx);
        const double lse = mx + std::log(s);
        EXPECT_NEAR(nll, lse - logits[n_vocab / 2], 1e-4);
        for (int i = 0; i < n_vocab; ++i) {
            if (logits[i] > mx - 16) {
                EXPECT_NEAR(lp[i], logits[i] - lse, 2e-4) << i;  // scale/2 <= 16/65535/2
            }
        }
    }
}

TEST(Eval, CorpusDomainsAndSampleIsolation) {
    NEED_FIXTURES();
    // Samples of different lengths: shorter than one window, several windows, and one too short to score.
    const std::string a = make_text(1, 20), b = make_text(2, 150), c = make_text(3, 60);
    auto line = [](const std::string & dom, const std::string & text) {
        return nlohmann::json{{"domain", dom}, {"text", text}}.dump() + "\n";
    };
    const std::string chat = nlohmann::json{{"domain", "chat"},
        {"messages", {{{"role", "user"}, {"content", make_text(4, 30)}}, {{"role", "assistant"}, {"content", make_text(5, 40)}}}}}
        .dump() + "\n";
    const std::string corpus = fx().dir + "/corpus-" + std::to_string(getpid()) + ".jsonl";
    const std::string only_c = fx().dir + "/corpus-c-" + std::to_string(getpid()) + ".jsonl";
    write_bytes(corpus, line("en", a) + line("code", b) + chat + line("en", c) + line("en", "x"));
    write_bytes(only_c, line("solo", c));

    reap::eval_report r;
    std::string err;
    ASSERT_TRUE(reap::run_eval(options(fx().base, fx().pruned, corpus, 128), r, err)) << err;
    EXPECT_TRUE(r.corpus);
    EXPECT_EQ(r.n_samples, 5u);
    EXPECT_EQ(r.n_samples_skipped, 1u);
    ASSERT_EQ(r.domains.size(), 3u);
    EXPECT_EQ(r.domains[0].first, "en");
    EXPECT_EQ(r.domains[1].first, "code");
    EXPECT_EQ(r.domains[2].first, "chat");
    size_t sum = 0;
    for (const auto & d : r.domains) {
        EXPECT_GT(d.second.n_tokens, 0u) << d.first;
        sum += d.second.n_tokens;
    }
    EXPECT_EQ(sum, r.overall.n_tokens);

    // A sample scores the same alone as among others: nothing attends across
    // samples. One window per decode (-b 128) gives identical arithmetic, so the
    // sums agree to rounding; with windows packed side by side (the default -b)
    // only the matmul shapes change, a far smaller effect than any leak.
    const std::string only_a_path = fx().dir + "/corpus-a-" + std::to_string(getpid()) + ".jsonl";
    write_bytes(only_a_path, line("en", a));
    for (int batch : {128, 2048}) {
        auto opts = [&](const std::string & path) {
            reap::eval_options o = options(fx().base, fx().pruned, path, 128);
            o.rt.n_batch = batch;
            return o;
        };
        reap::eval_report all, solo, only_a;
        ASSERT_TRUE(reap::run_eval(opts(corpus), all, err)) << err;
        ASSERT_TRUE(reap::run_eval(opts(only_c), solo, err)) << err;
        ASSERT_TRUE(reap::run_eval(opts(only_a_path), only_a, err)) << err;
        const auto & en = all.domains[0].second;  // samples a and c
        EXPECT_EQ(en.n_tokens, solo.overall.n_tokens + only_a.overall.n_tokens);
        const double nll_en = std::log(en.ppl_base) * en.n_tokens;
        const double nll_sep = std::log(solo.overall.ppl_base) * solo.overall.n_tokens +
                               std::log(only_a.overall.ppl_base) * only_a.overall.n_tokens;
        EXPECT_NEAR(nll_en, nll_sep, (batch == 128 ? 1e-9 : 2e-3) * std::fabs(nll_sep)) << "-b " << batch;
    }

    // JSON carries the domains by name.
    std::string out, serr;
    ASSERT_EQ(run(reap_bin() + " eval -m " + fx().base + " -p " + fx().pruned + " -f " + corpus + " -c 128 -t 1 -b 2048 -ub 512 --json",
                  out, &serr), 0) << serr;
    const auto j = nlohmann::json::parse(out);
    ASSERT_TRUE(j["domains"].contains("chat"));
    EXPECT_EQ(j["domains"]["chat"]["n_tokens"].get<size_t>(), r.domains[2].second.n_tokens);
    remove(corpus.c_str());
    remove(only_c.c_str());
    remove(only_a_path.c_str());
}

// Field by field, exactly: a several-model run keeps the base's rows and must
// give the very numbers a run with that one -p gives.
static void expect_same_metrics(const reap::eval_metrics & a, const reap::eval_metrics & b, const std::string & what) {
    EXPECT_EQ(a.n_tokens, b.n_tokens) << what;
    EXPECT_EQ(a.ppl_base, b.ppl_base) << what;
    EXPECT_EQ(a.ppl_pruned, b.ppl_pruned) << what;
    EXPECT_EQ(a.ppl_ratio, b.ppl_ratio) << what;
    EXPECT_EQ(a.kld_mean, b.kld_mean) << what;
    EXPECT_EQ(a.kld_median, b.kld_median) << what;
    EXPECT_EQ(a.kld_p99, b.kld_p99) << what;
    EXPECT_EQ(a.kld_max, b.kld_max) << what;
    EXPECT_EQ(a.argmax_agree, b.argmax_agree) << what;
}

TEST(Eval, SeveralPrunedEqualSeparateRuns) {
    NEED_FIXTURES();
    auto line = [](const std::string & dom, const std::string & text) {
        return nlohmann::json{{"domain", dom}, {"text", text}}.dump() + "\n";
    };
    const std::string corpus = fx().dir + "/corpus-multi-" + std::to_string(getpid()) + ".jsonl";
    write_bytes(corpus, line("en", make_text(11, 40)) + line("code", make_text(12, 300)) + line("en", make_text(13, 90)));
    // Plain text of about 21 windows of 128: two decodes at -b 2048 (16 windows
    // each), the second one partial; the fixture's 3000 words (about 100 windows)
    // cost four times as much and exercise nothing more.
    const std::string text = fx().dir + "/text-multi-" + std::to_string(getpid()) + ".txt";
    write_bytes(text, make_text(42, 600));
    // The pruned model twice over under two names would be rejected as one
    // path given twice; the base itself is the second "pruned" model.
    const std::vector<std::string> paths = {fx().pruned, fx().base};
    for (const std::string & input : {text, corpus}) {
        reap::eval_options o = options(fx().base, "", input, 128);
        o.rt.n_threads = 2;  // rows are read by several threads, and windows go side by side (-b 2048)
        std::vector<reap::eval_report> multi;
        std::string err;
        ASSERT_TRUE(reap::run_eval_multi(o, paths, multi, err)) << err;
        ASSERT_EQ(multi.size(), paths.size());
        for (size_t i = 0; i < paths.size(); ++i) {
            reap::eval_options one = o;
            one.pruned_path = paths[i];
            reap::eval_report single;
            ASSERT_TRUE(reap::run_eval(one, single, err)) << err;
            const std::string what = input + " / " + paths[i];
            expect_same_metrics(multi[i].overall, single.overall, what);
            ASSERT_EQ(multi[i].domains.size(), single.domains.size()) << what;
            for (size_t d = 0; d < single.domains.size(); ++d) {
                EXPECT_EQ(multi[i].domains[d].first, single.domains[d].first) << what;
                expect_same_metrics(multi[i].domains[d].second, single.domains[d].second, what + " / " + single.domains[d].first);
            }
            EXPECT_EQ(multi[i].n_windows, single.n_windows) << what;
            if (input == text) EXPECT_GT(single.n_windows, 16u) << "one decode holds all windows";
            EXPECT_EQ(reap::eval_report_json(multi[i]), reap::eval_report_json(single)) << what;
        }
        EXPECT_EQ(multi[1].overall.kld_max, 0.0);  // the base against itself
        EXPECT_GT(multi[0].overall.kld_mean, 1e-3);
    }

    // The CLI: {"pruned": {PATH: the single-model object}} in -p order.
    std::string out, serr, single_out;
    ASSERT_EQ(run(reap_bin() + " eval -m " + fx().base + " -p " + fx().pruned + " -p " + fx().base + " -f " + corpus +
                  " -c 128 -t 2 -b 2048 -ub 512 --json", out, &serr), 0) << serr;
    const auto j = nlohmann::ordered_json::parse(out);
    ASSERT_TRUE(j.contains("pruned")) << out;
    ASSERT_EQ(j["pruned"].size(), 2u);
    EXPECT_EQ(j["pruned"].begin().key(), fx().pruned);
    ASSERT_EQ(run(reap_bin() + " eval -m " + fx().base + " -p " + fx().pruned + " -f " + corpus + " -c 128 -t 2 -b 2048 -ub 512 --json",
                  single_out, &serr), 0) << serr;
    EXPECT_EQ(j["pruned"][fx().pruned], nlohmann::ordered_json::parse(single_out));

    // A mismatched vocabulary anywhere in the list fails before the base runs; a path given twice is refused.
    std::vector<reap::eval_report> rs;
    std::string err;
    EXPECT_FALSE(reap::run_eval_multi(options(fx().base, "", corpus, 128), {fx().pruned, fx().other}, rs, err));
    EXPECT_NE(err.find("vocabulary mismatch"), std::string::npos) << err;
    EXPECT_FALSE(reap::run_eval_multi(options(fx().base, "", corpus, 128), {fx().pruned, fx().pruned}, rs, err));
    EXPECT_NE(err.find("given twice"), std::string::npos) << err;
    remove(corpus.c_str());
    remove(text.c_str());
}

TEST(Eval, ClearErrors) {
    NEED_FIXTURES();
    reap::eval_report r;
    std::string err;
    EXPECT_FALSE(reap::run_eval(options(fx().dir + "/missing.gguf", fx().pruned, fx().text, 128), r, err));
    EXPECT_NE(err.find("cannot open base model"), std::string::npos) << err;
    EXPECT_FALSE(reap::run_eval(options(fx().base, fx().pruned, fx().dir + "/missing.txt", 128), r, err));
    EXPECT_NE(err.find("cannot open input"), std::string::npos) << err;
    EXPECT_FALSE(reap::run_eval(options(fx().base, fx().other, fx().text, 128), r, err));
    EXPECT_NE(err.find("vocabulary mismatch"), std::string::npos) << err;
    EXPECT_FALSE(reap::run_eval(options(fx().base, fx().pruned, fx().text, 100000), r, err));
    EXPECT_NE(err.find("-c 100000 is past the trained context of '" + fx().base + "' (1024 tokens)"), std::string::npos) << err;
    {
        reap::eval_options o = options(fx().base, fx().pruned, fx().text, 100000);
        o.rt.past_trained = true;
        EXPECT_FALSE(reap::run_eval(o, r, err));
        EXPECT_NE(err.find("text too short"), std::string::npos) << err;
    }

    std::string out, serr;
    EXPECT_EQ(run(reap_bin() + " eval -m " + fx().base + " -p " + fx().other + " -f " + fx().text, out, &serr), 2);
    EXPECT_NE(serr.find("vocabulary mismatch"), std::string::npos) << serr;
    EXPECT_EQ(run(reap_bin() + " eval -m " + fx().base + " --bogus", out, &serr), 2);
    EXPECT_NE(serr.find("invalid argument: --bogus"), std::string::npos) << serr;
    EXPECT_EQ(run(reap_bin() + " eval --help", out, &serr), 0);
    EXPECT_NE(out.find("--kld-base"), std::string::npos);
}

TEST(Eval, SmokeAgreement) {
    NEED_FIXTURES();
    reap::smoke_options o;
    o.base_path = fx().base;
    o.pruned_path = fx().base;
    o.prompt = "the of and to";
    o.n_predict = 12;
    o.rt.n_threads = 1;
    reap::smoke_report r;
    std::string err;
    ASSERT_TRUE(reap::run_smoke(o, r, err)) << err;
    EXPECT_EQ(r.base_tokens, r.pruned_tokens);
    EXPECT_EQ((size_t) r.n_agree, r.base_tokens.size());

    std::string out, serr;
    ASSERT_EQ(run(reap_bin() + " eval -m " + fx().base + " -p " + fx().pruned + " --smoke -n 12 --prompt 'the of and to'"
                  " -t 1 --json", out, &serr), 0) << serr;
    const auto j = nlohmann::json::parse(out);
    EXPECT_LE(j["n_agree"].get<int>(), 12);
    EXPECT_EQ(j["base_tokens"].size(), 12u);
}

namespace {

// Bytes this process has read through read() and its kind (/proc/self/io's
// rchar): a model llama.cpp maps is not counted, the base's hash is.
uint64_t bytes_read_by_me() {
    std::ifstream io("/proc/self/io");
    std::string key;
    uint64_t v = 0;
    while (io >> key >> v) {
        if (key == "rchar:") return v;
    }
    return 0;
}

} // namespace

// The base's hash for the receipts (base_files_sha256) reads the whole base
// once more, which a streamed source pays per eval; reap fit runs an eval per
// candidate. A second eval of the same, unchanged base in one process takes the
// hash it already has; once the file changes (here only its mtime), it is read
// again. Every hash equals sha256sum's of the file. (Counted with rchar: the
// three runs read the same text and temp rows besides, so the base's bytes are
// the difference.)
TEST(Eval, ASecondEvalOfAnUnchangedBaseDoesNotReadItAgainToHashIt) {
    NEED_FIXTURES();
    const std::string base = fx().dir + "/hashed-base-" + std::to_string(getpid()) + ".gguf";
    std::string out;
    ASSERT_EQ(run("cp " + fx().base + " " + base, out, &out), 0) << out;
    ASSERT_EQ(run("sha256sum " + base, out), 0);
    const std::string want = out.substr(0, 64);
    const uint64_t size = (uint64_t) read_bytes(base).size();
    auto eval_once = [&](uint64_t & read) {
        reap::eval_report r;
        std::string err;
        const uint64_t before = bytes_read_by_me();
        EXPECT_TRUE(reap::run_eval(options(base, fx().pruned, fx().text, 128), r, err)) << err;
        read = bytes_read_by_me() - before;
        return r.base_files_sha256;
    };
    uint64_t first = 0, second = 0, third = 0;
    EXPECT_EQ(eval_once(first), want);
    EXPECT_EQ(eval_once(second), want);
    ASSERT_EQ(run("touch -d '2001-01-01' " + base, out, &out), 0) << out;
    EXPECT_EQ(eval_once(third), want);
    printf("base %llu bytes; read by the first eval %llu, the second %llu, after touch %llu\n", (unsigned long long) size,
           (unsigned long long) first, (unsigned long long) second, (unsigned long long) third);
    // the runs read the same text, tokenizer and temp rows alike: what differs is the hash's read of the base
    EXPECT_GE(first, second + size * 95 / 100);
    EXPECT_GE(third, second + size * 95 / 100);
    remove(base.c_str());
}

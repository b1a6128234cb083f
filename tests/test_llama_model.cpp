// Tests of the project's own trained model, models/reap-moe-tiny.gguf:
//   * the pinned llama.cpp loads it, and its byte-level tokenizer round-trips
//     every domain of the corpus (en, code, ja, zh, de, fr);
//   * the export is exact: llama.cpp's logits equal the trainer's own PyTorch
//     forward pass (tools/reference_forward.py) on the same tokens, within 1e-3
//     for F32 (exact attention: F32 KV cache, flash attention off);
//   * an F16 copy made with llama-quantize stays within the bound the model
//     card states;
//   * it generates: greedy decoding of an English prompt yields printable text.
// Those are checks of the fixture (suite TrainedModelFixture). The TrainedModel
// suite checks reap on it: reap's layout and census agree with what llama.cpp
// loads and routes through, and its quantised variants rank, prune and verify.
#include "llama_test_util.h"
#include "reference_forward_util.h"

#include "moe/census.h"
#include "gguf/gguf.h"
#include "plan/plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

using namespace reap_test;

namespace {

std::string trained_model() {
    return source_dir() + "/models/reap-moe-tiny.gguf";
}

// One text per domain, chosen to exercise multi-byte UTF-8 and code symbols.
const std::vector<std::pair<std::string, std::string>> & domain_texts() {
    static const std::vector<std::pair<std::string, std::string>> texts = {
        {"en",   "NAME\nls - list directory contents\n\nSYNOPSIS\nls [OPTION]... [FILE]...\n"},
        {"code", "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42); /* done */\n\treturn 0;\n}\ndef f(x):\n    return x ** 2\n"},
        {"ja",   "名前\nls - ディレクトリの内容をリスト表示する\n\n書式\nls [オプション]... [ファイル]...\n"},
        {"zh",   "名称\nls - 列出目录内容\n\n描述\n列出指定“文件”（默认为当前目录）的信息。\n"},
        {"de",   "BEZEICHNUNG\nls - Verzeichnisinhalte auflisten\n\nÜBERSICHT\nGrößen in Blöcken\n"},
        {"fr",   "NOM\nls - Afficher le contenu de répertoires\n\nSYNOPSIS\nça, déjà, où\n"},
    };
    return texts;
}

std::string all_domains_text() {
    std::string s;
    for (const auto & [domain, text] : domain_texts()) {
        s += text;
    }
    return s;
}

// BOS + the first 255 bytes of every domain's text: one full context window.
std::vector<llama_token> window_tokens(const llama_model * model) {
    std::vector<llama_token> toks = tokenize(model, all_domains_text());
    toks.resize(std::min<size_t>(toks.size(), 256));
    return toks;
}

} // namespace

TEST(TrainedModelFixture, LoadsAndTokenizerRoundTripsEveryDomain) {
    model_ptr model = load_model(trained_model());
    ASSERT_TRUE(model) << "cannot load " << trained_model();
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    EXPECT_EQ(llama_vocab_n_tokens(vocab), 259);
    for (const auto & [domain, text] : domain_texts()) {
        const std::vector<llama_token> toks = tokenize(model.get(), text, /*add_special=*/true);
        ASSERT_EQ(toks.size(), text.size() + 1) << domain << ": byte-level tokenizer must give BOS + one token per byte";
        EXPECT_EQ(toks[0], llama_vocab_bos(vocab));
        std::string back;
        for (size_t i = 1; i < toks.size(); ++i) {
            EXPECT_EQ(toks[i], (llama_token) (uint8_t) text[i - 1]) << domain << " byte " << i - 1;
            char piece[16];
            const int n = llama_token_to_piece(vocab, toks[i], piece, sizeof(piece), 0, false);
            ASSERT_GT(n, 0);
            back.append(piece, n);
        }
        EXPECT_EQ(back, text) << domain;
    }
}

TEST(TrainedModelFixture, LogitsEqualTheTrainersForwardPass) {
    model_ptr model = load_model(trained_model());
    ASSERT_TRUE(model);
    const std::vector<llama_token> toks = window_tokens(model.get());
    ASSERT_EQ(toks.size(), 256u);
    context_ptr ctx = new_context(model.get(), 256, nullptr, nullptr, /*exact=*/true);
    ASSERT_TRUE(ctx);
    ASSERT_EQ(decode_all(ctx.get(), toks), 0);
    const std::vector<float> logits = get_logits(ctx.get(), model.get(), (int) toks.size());
    ASSERT_TRUE(all_finite(logits));
    const std::string dump = test_tmp_dir() + "/trained-f32-logits.bin";
    write_dump(dump, toks, logits);
    std::string out;
    const double diff = reference_max_abs_diff(trained_model(), dump, out);
    ASSERT_GE(diff, 0) << out;
    EXPECT_LT(diff, 1e-3) << out;
}

TEST(TrainedModelFixture, F16CopyStaysWithinStatedBound) {
    ASSERT_TRUE(has_llama_tools()) << "llama-quantize is built by `make build`; not found in " << llama_bin_dir();
    const std::string f16 = test_tmp_dir() + "/reap-moe-tiny-f16.gguf";
    std::string err;
    ASSERT_TRUE(run_to_file(shell_quote(llama_bin_dir() + "/llama-quantize") + " " +
                            shell_quote(trained_model()) + " @OUT@ F16", f16, err)) << err;
    model_ptr model = load_model(f16);
    ASSERT_TRUE(model);
    const std::vector<llama_token> toks = window_tokens(model.get());
    context_ptr ctx = new_context(model.get(), 256, nullptr, nullptr, /*exact=*/true);
    ASSERT_EQ(decode_all(ctx.get(), toks), 0);
    const std::string dump = test_tmp_dir() + "/trained-f16-logits.bin";
    write_dump(dump, toks, get_logits(ctx.get(), model.get(), (int) toks.size()));
    std::string out;
    // Compared with the F32 model's reference: the bound stated in models/README.md.
    const double diff = reference_max_abs_diff(trained_model(), dump, out);
    ASSERT_GE(diff, 0) << out;
    EXPECT_LT(diff, 0.05) << out;
    std::printf("F16 copy: max |logit - reference| = %.3g\n", diff);
}

TEST(TrainedModelFixture, GreedyGenerationIsText) {
    model_ptr model = load_model(trained_model());
    ASSERT_TRUE(model);
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    std::vector<llama_token> toks = tokenize(model.get(), "NAME\nls - list directory contents\n\nDESCRIPTION\n");
    context_ptr ctx = new_context(model.get(), 256);
    ASSERT_TRUE(ctx);
    std::string generated;
    for (int step = 0; step < 48; ++step) {
        ASSERT_EQ(decode_all(ctx.get(), toks), 0);
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        const float * row = llama_get_logits_ith(ctx.get(), (int) toks.size() - 1);
        const int n_vocab = llama_vocab_n_tokens(vocab);
        const llama_token next = (llama_token) (std::max_element(row, row + n_vocab) - row);
        toks.push_back(next);
        char piece[16];
        const int n = llama_token_to_piece(vocab, next, piece, sizeof(piece), 0, false);
        generated.append(piece, std::max(n, 0));
    }
    int printable = 0;
    for (unsigned char c : generated) {
        printable += (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t';
    }
    std::printf("greedy continuation: %s\n", generated.c_str());
    EXPECT_GT(printable, (int) generated.size() * 9 / 10) << generated;
    // Text, not a run of one character: several distinct letters.
    std::set<char> letters;
    for (char c : generated) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            letters.insert(c);
        }
    }
    EXPECT_GE(letters.size(), 6u) << generated;
}

// reap reads the model as llama.cpp runs it: the MoE layers of reap's layout
// are the layers llama.cpp routes through, with reap's experts per token and
// expert count; the census's tensor bytes are what llama.cpp loaded, and its
// expert counts are llama.cpp's metadata.
TEST(TrainedModel, ReapReadsItAsLlamaCppRunsIt) {
    model_ptr model = load_model(trained_model());
    ASSERT_TRUE(model);
    topk_collector topk;
    context_ptr ctx = new_context(model.get(), 256, topk_collector::callback, &topk);
    ASSERT_TRUE(ctx);
    const std::vector<llama_token> toks = window_tokens(model.get());
    ASSERT_EQ(decode_all(ctx.get(), toks), 0);

    reap::gguf::model gm;
    reap::moe::layout lay;
    reap::moe::census c;
    std::string err;
    ASSERT_TRUE(reap::gguf::open_model(trained_model(), gm, err)) << err;
    ASSERT_TRUE(reap::model_layout(gm, lay, err)) << err;
    ASSERT_TRUE(reap::moe::take_census(gm, {}, c, err)) << err;

    std::set<int> routed;
    std::set<int> experts;
    for (const auto & [il, rows] : topk.routed) {
        routed.insert(il);
        ASSERT_EQ(rows.size(), toks.size()) << "layer " << il;
        for (const auto & row : rows) {
            ASSERT_EQ((int64_t) row.size(), lay.n_expert_used) << "layer " << il;
            for (int e : row) {
                ASSERT_GE(e, 0);
                ASSERT_LT(e, lay.n_expert);
                experts.insert(e);
            }
        }
    }
    EXPECT_EQ(std::set<int>(lay.moe_layers.begin(), lay.moe_layers.end()), routed);
    EXPECT_EQ(std::vector<uint32_t>(lay.moe_layers.begin(), lay.moe_layers.end()), c.moe_layers);
    EXPECT_GT((int64_t) experts.size(), lay.n_expert / 2) << "a 256-token window reaches most experts";

    char buf[64];
    ASSERT_GT(llama_model_meta_val_str(model.get(), "qwen3moe.expert_count", buf, sizeof(buf)), 0);
    EXPECT_EQ(std::to_string(c.n_expert), buf);
    EXPECT_EQ(lay.n_expert, (int64_t) c.n_expert);
    ASSERT_GT(llama_model_meta_val_str(model.get(), "qwen3moe.expert_used_count", buf, sizeof(buf)), 0);
    EXPECT_EQ(std::to_string(c.n_expert_used), buf);
    EXPECT_EQ(c.tensor_bytes, llama_model_size(model.get()));
}

// Quantised variants are made from the model at test time (never committed):
// Q8_0, Q4_K_M, and IQ2_XXS with an importance matrix from llama-imatrix over
// the calib split. Each loads, and its perplexity relative to the F32 model
// (reap eval on held-out text) stays close to 1. The Q4_K_M
// variant is then pruned to half its experts and verified byte for byte.
TEST(TrainedModel, QuantisedVariantsLoadRankAndPrune) {
    ASSERT_TRUE(has_llama_tools()) << "llama-quantize/llama-imatrix are built by `make build`";
    const std::string dir = test_tmp_dir() + "/trained-quant";
    ::mkdir(dir.c_str(), 0755);
    const std::string bin = llama_bin_dir();
    const std::string reap = reap_bin();
    std::string err, out;

    // Text: 16 kB of the calib split for the imatrix, 8 kB of heldout English for eval.
    auto extract = [&](const std::string & split, const std::string & domain, size_t bytes, const std::string & dst) {
        const std::string py = "import json,sys\nn=0\nout=open(sys.argv[3],'w')\n"
                               "for l in open(sys.argv[1]):\n    r=json.loads(l)\n"
                               "    if sys.argv[2] in ('all', r['domain']) and n < int(sys.argv[4]):\n"
                               "        out.write(r['text']+'\\n\\n'); n += len(r['text'].encode())\n";
        return run_cmd(shell_quote(python()) + " -c " + shell_quote(py) + " " +
                       shell_quote(source_dir() + "/data/corpus/" + split + ".jsonl") + " " + domain + " " +
                       shell_quote(dst) + " " + std::to_string(bytes), out) == 0;
    };
    ASSERT_TRUE(extract("calib", "all", 16000, dir + "/calib.txt")) << out << " (run `make corpus`)";
    ASSERT_TRUE(extract("heldout", "en", 8000, dir + "/heldout-en.txt")) << out;

    const std::string imatrix = dir + "/imatrix.gguf";
    ASSERT_TRUE(run_to_file(shell_quote(bin + "/llama-imatrix") + " -m " + shell_quote(trained_model()) + " -f " +
                            shell_quote(dir + "/calib.txt") + " -o @OUT@ -c 256 -b 256 -t 1 --no-ppl", imatrix, err)) << err;

    // One thread everywhere: the same files and numbers as with two (compared), at a
    // fraction of the CPU time on a busy machine, where a second ggml thread spins
    // waiting for the first. One eval scores the three variants: the base runs once.
    const std::vector<std::string> types = {"Q8_0", "Q4_K_M", "IQ2_XXS"};
    std::string pruned_args;
    for (const std::string & type : types) {
        const std::string q = dir + "/reap-moe-tiny-" + type + ".gguf";
        const std::string im = type.rfind("IQ", 0) == 0 ? " --imatrix " + shell_quote(imatrix) : "";
        ASSERT_TRUE(run_to_file(shell_quote(bin + "/llama-quantize") + im + " " + shell_quote(trained_model()) + " @OUT@ " + type + " 1", q, err)) << err;
        ASSERT_TRUE(load_model(q)) << type;
        pruned_args += " -p " + shell_quote(q);
    }
    ASSERT_EQ(run_cmd(shell_quote(reap) + " eval -m " + shell_quote(trained_model()) + pruned_args + " -f " +
                      shell_quote(dir + "/heldout-en.txt") + " -c 256 -t 1 --json -q 2>/dev/null", out), 0) << out;
    const nlohmann::json scored = nlohmann::json::parse(out).at("pruned");
    ASSERT_EQ(scored.size(), types.size()) << out;
    std::map<std::string, double> ratio;
    for (const std::string & type : types) {
        ratio[type] = scored.at(dir + "/reap-moe-tiny-" + type + ".gguf").at("ppl_ratio").get<double>();
        std::printf("%-8s perplexity ratio to F32: %.4f\n", type.c_str(), ratio[type]);
    }
    // Rows of 192 (n_embd) and 128 (expert FFN) are not multiples of 256, so
    // llama-quantize falls back for k- and i-quants (Q4_K_M -> q5_0/q8_0,
    // IQ2_XXS -> iq4_nl/q4_0/q5_0): the files still shrink in that order, and
    // every variant stays close to the F32 model.
    EXPECT_LT(ratio["Q8_0"], 1.01);
    EXPECT_LT(ratio["Q8_0"], ratio["Q4_K_M"]);
    EXPECT_LT(ratio["Q4_K_M"], 1.05);
    EXPECT_LT(ratio["IQ2_XXS"], 1.05);
    struct stat st_q8, st_q4, st_iq2;
    ASSERT_EQ(::stat((dir + "/reap-moe-tiny-Q8_0.gguf").c_str(), &st_q8), 0);
    ASSERT_EQ(::stat((dir + "/reap-moe-tiny-Q4_K_M.gguf").c_str(), &st_q4), 0);
    ASSERT_EQ(::stat((dir + "/reap-moe-tiny-IQ2_XXS.gguf").c_str(), &st_iq2), 0);
    EXPECT_GT(st_q8.st_size, st_q4.st_size);
    EXPECT_GT(st_q4.st_size, st_iq2.st_size);

    // Prune the quantised model: the slabs are sliced in their quantised form.
    const std::string q4 = dir + "/reap-moe-tiny-Q4_K_M.gguf";
    nlohmann::json plan = {{"format", "reap-plan"}, {"version", 1},
                           {"model", {{"arch", "qwen3moe"}, {"n_layer", 4}, {"n_expert", 32}, {"n_expert_used", 4}}},
                           {"n_keep", 16}, {"layers", nlohmann::json::array()}, {"provenance", {{"method", "test: odd experts, descending"}}}};
    for (int l = 0; l < 4; ++l) {
        std::vector<int> keep;
        for (int e = 31; e >= 1; e -= 2) {
            keep.push_back(e);
        }
        plan["layers"].push_back({{"layer", l}, {"keep", keep}});
    }
    const std::string plan_path = dir + "/plan.json";
    std::ofstream(plan_path) << plan.dump();
    const std::string cut = dir + "/cut-Q4_K_M.gguf";
    ASSERT_EQ(run_cmd(shell_quote(reap) + " prune -m " + shell_quote(q4) + " --plan " + shell_quote(plan_path) + " -o " +
                      shell_quote(cut) + " --force", out), 0) << out;
    ASSERT_EQ(run_cmd(shell_quote(reap) + " verify -m " + shell_quote(q4) + " --plan " + shell_quote(plan_path) + " " +
                      shell_quote(cut), out), 0) << out;
    model_ptr pruned = load_model(cut);
    ASSERT_TRUE(pruned);
    context_ptr ctx = new_context(pruned.get(), 64);
    const std::vector<llama_token> toks = tokenize(pruned.get(), "NAME\nls - list directory contents\n");
    ASSERT_EQ(decode_all(ctx.get(), toks), 0);
    EXPECT_TRUE(all_finite(get_logits(ctx.get(), pruned.get(), (int) toks.size())));
}

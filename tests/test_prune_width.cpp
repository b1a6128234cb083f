// Tests of the width cut (src/prune/width.h): every zoo model pruned by a plan
// that keeps half the experts and half the channels of each, checked against
// the source as ggml's own gguf reader loads it: gate/up rows (and biases)
// byte for byte, down the kept columns of the source dequantised by ggml and
// requantised by ggml in the test itself; reap verify accepts it, reports
// the requantised tensors apart, and catches a byte changed in either part;
// the width key and the stamp; shared experts byte-identical, with
// expert_shared_count = S/K where llama.cpp sizes them by it (verify names a
// file that kept the source's count), except llama4's, cut with the routed
// experts to the plan's shared channels and audited as they are; refused down types and widths name why; a
// down type that needs an importance matrix takes the imatrix sliced to the
// kept channels.
#include "imatrix_test_util.h"
#include "prune_test_util.h"
#include "width_test_util.h"

#include "moe/width.h"
#include "prune/run.h"
#include "prune/width.h"

#include <ggml.h>
#include <gguf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

using namespace width_test;

namespace {

// Prunes with the width options into dir/out.gguf (plan in dir/plan.json, stamped, SHA256SUMS).
bool width_prune(const reap::gguf::model & m, const reap::plan & p, const reap::prune::width_options & wo,
                 const std::string & dir, std::string & out, std::string & err) {
    out = dir + "/out.gguf";
    std::vector<std::string> written;
    return prune_test::prune_to(m, p, dir + "/plan.json", out, written, err, true, 0, 0, wo);
}

} // namespace

// Every zoo model whose width can be cut: half the experts, half the channels
// (the others are refused with the reason). f16 down slabs keep
// their type (requantising f16 values to f16 is exact: the kept columns equal
// the source's); mxfp4 ones (blocks of 32, wider than half of 32 channels)
// are requantised to f32.
TEST(PruneWidth, ZooModelsHalfTheChannels) {
    std::string err;
    const std::string zoo = prune_test::zoo_dir("prune-zoo", err);
    if (zoo.empty()) GTEST_SKIP() << err;
    for (const std::string & name : prune_test::zoo_names()) {
        SCOPED_TRACE(name);
        const std::string dir = prune_test::scratch("prune-width-" + name);
        reap::gguf::model m;
        ASSERT_TRUE(reap::gguf::open_model(zoo + "/" + name + ".gguf", m, err)) << err;
        reap::moe::layout lay;
        ASSERT_TRUE(reap::model_layout(m, lay, err)) << err;
        reap::plan_model_facts f = reap::facts_of(lay, m);
        reap::plan p;
        ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 11, p, err)) << err;
        ASSERT_EQ(f.width_refusal, "");
        // llama4's shared expert is sized from the same key: cut with the routed ones, and a plan
        // without its channels is refused
        EXPECT_EQ(f.shared_cut, name == "llama4");
        if (f.shared_cut) {
            prune_test::random_width(p, f.n_ff_exp, f.n_ff_exp / 2, 5, false);
            reap::gguf::output_spec spec;
            EXPECT_FALSE(reap::prune::make_pruned_spec(m, lay, p, {}, reap::prune::width_options{}, spec, err));
            EXPECT_NE(err.find("lists no shared-expert channels"), std::string::npos) << err;
        }
        prune_test::random_width(p, f.n_ff_exp, f.n_ff_exp / 2, 5, f.shared_cut);
        reap::prune::width_options wo;
        ggml_type down_type = GGML_TYPE_F16;
        if (f.down_block > f.n_ff_exp / 2) {
            wo.down_type = reap::gguf::tensor_type::F32;
            down_type = GGML_TYPE_F32;
            // without a down type, the source's blocks refuse this width
            reap::gguf::output_spec spec;
            EXPECT_FALSE(reap::prune::make_pruned_spec(m, lay, p, {}, reap::prune::width_options{}, spec, err));
            EXPECT_NE(err.find("is not a multiple of " + std::to_string(f.down_block)), std::string::npos) << err;
        }
        std::string out;
        ASSERT_TRUE(width_prune(m, p, wo, dir, out, err)) << err;
        expect_width_cut(m.shards[0].path, out, p, down_type);
        EXPECT_EQ(gguf_int(out, reap::moe::expert_width_key(lay.arch)), f.n_ff_exp / 2);
        EXPECT_EQ(gguf_int(out, reap::prune::k_key_width_source_length), f.n_ff_exp);
        expect_shared_kept(m.shards[0].path, out, lay.arch, f.n_ff_exp / 2);

        reap::prune::verify_options vo;
        ASSERT_TRUE(reap::plan_file_sha256(dir + "/plan.json", vo.plan_sha256, err)) << err;
        reap::prune::verify_report rep;
        ASSERT_TRUE(reap::prune::verify_pruned(m, p, out, vo, rep, err)) << err;
        EXPECT_EQ(rep.n_requantised, lay.moe_layers.size() * (f.shared_cut ? 2 : 1));   // llama4: ffn_down_shexp too
        EXPECT_GT(rep.bytes_requantised, 0u);

        if (m.kvs.has(lay.arch + ".expert_shared_count")) {
            // the output with the source's shared-expert count back: verify names the key
            reap::gguf::model o;
            ASSERT_TRUE(reap::gguf::open_model(out, o, err)) << err;
            reap::gguf::output_spec back = reap::gguf::spec_from_model(o);
            back.kvs.set_u32(lay.arch + ".expert_shared_count", uint32_t(gguf_int(m.shards[0].path, lay.arch + ".expert_shared_count")));
            reap::gguf::write_options w;
            w.force = true;
            std::vector<std::string> written;
            ASSERT_TRUE(reap::gguf::write_output(back, w, dir + "/count.gguf", written, err)) << err;
            reap::prune::verify_options nv;
            nv.check_sums = false;
            EXPECT_FALSE(reap::prune::verify_pruned(m, p, dir + "/count.gguf", nv, rep, err));
            EXPECT_NE(err.find("KV '" + lay.arch + ".expert_shared_count' is u32 1, expected u32 2 (the plan's width cut)"),
                      std::string::npos) << err;
        }

        // a byte changed in a gate row, then in a requantised down row
        reap::gguf::model o;
        ASSERT_TRUE(reap::gguf::open_model(out, o, err)) << err;
        const std::string L = "blk." + std::to_string(lay.moe_layers.back()) + ".";
        std::vector<std::string> tampered = {"ffn_gate_exps.weight", "ffn_down_exps.weight"};
        if (f.shared_cut) tampered.insert(tampered.end(), {"ffn_up_shexp.weight", "ffn_down_shexp.weight"});
        for (const std::string & which : tampered) {
            SCOPED_TRACE(which);
            const reap::gguf::tensor_info * t = nullptr;
            for (const auto & x : o.tensors) if (x.name == L + which) t = &x;
            ASSERT_NE(t, nullptr);
            std::vector<uint8_t> bytes = prune_test::read_all(out);
            const size_t at = size_t(t->file_offset + t->nbytes / 2);
            bytes[at] = uint8_t(bytes[at] ^ 0x40);
            const std::string bad = dir + "/bad.gguf";
            prune_test::write_all(bad, bytes);
            reap::prune::verify_options nv;
            nv.check_sums = false;
            EXPECT_FALSE(reap::prune::verify_pruned(m, p, bad, nv, rep, err));
            EXPECT_TRUE(rep.differs);
            EXPECT_NE(err.find(which.find("down") != std::string::npos ? "requantised to" : "(source channel "),
                      std::string::npos) << err;
        }
    }
}

// --imatrix on a llama4 width cut: the shared expert's down entry
// (blk.L.ffn_down_shexp.weight, one matrix of n_ff values) keeps the layer's
// shared channels, in order, and kept_importance gives them divided by its
// count (llama-quantize's normalisation); its gate/up entries (per n_embd
// input) are copied. Values from a formula of (matrix, channel), picked here.
TEST(PruneWidth, ImatrixSliceOfLlama4SharedDown) {
    std::string err;
    const std::string zoo = prune_test::zoo_dir("prune-zoo", err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-width-l4-imatrix");
    reap::gguf::model m;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::gguf::open_model(zoo + "/llama4.gguf", m, err) && reap::model_layout(m, lay, err)) << err;
    const reap::plan_model_facts f = reap::facts_of(lay, m);
    ASSERT_TRUE(f.shared_cut) << f.width_refusal;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 4, p, err)) << err;
    prune_test::random_width(p, f.n_ff_exp, f.n_ff_exp / 2, 6, true);
    auto value = [](int64_t mat, int64_t c) { return 1.0f + float(mat) + 0.125f * float(c); };
    std::vector<imatrix_test::fake_entry> es;
    for (int l : lay.moe_layers) {
        const std::string L = "blk." + std::to_string(l) + ".";
        for (const auto & [name, n_mat] : std::vector<std::pair<std::string, int64_t>>{
                 {"ffn_gate_exps", lay.n_expert}, {"ffn_up_exps", lay.n_expert}, {"ffn_down_exps", lay.n_expert},
                 {"ffn_gate_shexp", 1}, {"ffn_up_shexp", 1}, {"ffn_down_shexp", 1}}) {
            const reap::gguf::tensor_info * t = m.find_tensor(L + name + ".weight");
            ASSERT_NE(t, nullptr) << name;
            imatrix_test::fake_entry e{t->name, t->ne[0], n_mat, {}, std::vector<float>(size_t(n_mat), 4.0f)};
            for (int64_t mat = 0; mat < n_mat; ++mat) {
                for (int64_t c = 0; c < t->ne[0]; ++c) e.sums.push_back(value(mat, c));
            }
            es.push_back(e);
        }
    }
    imatrix_test::write_gguf_imatrix(dir + "/src.imatrix.gguf", es);
    reap::prune::imatrix_slice sl;
    ASSERT_TRUE(reap::prune::prepare_imatrix_slice(dir + "/src.imatrix.gguf", m, lay, p, sl, err)) << err;
    const std::string out = dir + "/cut.imatrix.gguf";
    ASSERT_TRUE(reap::prune::write_imatrix_slice(sl, out, true, false, err)) << err;
    const auto cut = load_with_ggml(out);
    for (const reap::plan_layer & pl : p.layers) {
        const std::string L = "blk." + std::to_string(pl.layer) + ".";
        SCOPED_TRACE(L);
        const loaded & down = cut.at(L + "ffn_down_shexp.weight.in_sum2");
        ASSERT_EQ(down.ne[0], p.width_keep);
        ASSERT_EQ(down.ne[1], 1);
        const float * v = reinterpret_cast<const float *>(down.data.data());
        std::vector<float> w;
        ASSERT_TRUE(reap::prune::kept_importance(sl, L + "ffn_down_shexp.weight", 0, w, err)) << err;
        ASSERT_EQ(int64_t(w.size()), p.width_keep);
        for (int64_t j = 0; j < p.width_keep; ++j) {
            EXPECT_EQ(v[j], value(0, pl.shared_channels[size_t(j)])) << "kept channel " << j;
            EXPECT_FLOAT_EQ(w[size_t(j)], value(0, pl.shared_channels[size_t(j)]) / 4.0f);
        }
        EXPECT_EQ(cut.at(L + "ffn_down_shexp.weight.counts").ne[1], 1);
        EXPECT_EQ(cut.at(L + "ffn_up_shexp.weight.in_sum2").ne[0], 64) << "gate/up entries are per input: copied";
        EXPECT_EQ(cut.at(L + "ffn_down_exps.weight.in_sum2").ne[0], p.width_keep);
    }
}

// Requantising to a quantised type: f16 down slabs of qwen3moe to q8_0 (all
// 32 channels, in blocks of 32) agree byte for byte with the test's own ggml
// requantisation, and verify audits them the same way.
TEST(PruneWidth, RequantisesToAnotherType) {
    std::string err;
    const std::string zoo = prune_test::zoo_dir("prune-zoo", err);
    if (zoo.empty()) GTEST_SKIP() << err;
    const std::string dir = prune_test::scratch("prune-width-q8");
    reap::gguf::model m;
    ASSERT_TRUE(reap::gguf::open_model(zoo + "/qwen3moe.gguf", m, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, prune_test::half_keep(m), 3, p, err)) << err;
    prune_test::random_width(p, 32, 32, 1);
    reap::prune::width_options wo;
    wo.down_type = reap::gguf::tensor_type::Q8_0;
    std::string out;
    ASSERT_TRUE(width_prune(m, p, wo, dir, out, err)) << err;
    expect_width_cut(m.shards[0].path, out, p, GGML_TYPE_Q8_0);
    reap::prune::verify_options vo;
    vo.check_sums = false;
    reap::prune::verify_report rep;
    EXPECT_TRUE(reap::prune::verify_pruned(m, p, out, vo, rep, err)) << err;

    // widths and types the cut refuses, each saying why
    reap::moe::layout lay;
    ASSERT_TRUE(reap::model_layout(m, lay, err)) << err;
    reap::gguf::output_spec spec;
    prune_test::random_width(p, 32, 16, 1);
    EXPECT_FALSE(reap::prune::make_pruned_spec(m, lay, p, {}, wo, spec, err));
    EXPECT_NE(err.find("width 16 is not a multiple of 32, the block size of q8_0"), std::string::npos) << err;
    prune_test::random_width(p, 32, 32, 1);
    wo.down_type = reap::gguf::tensor_type::IQ2_XXS;
    EXPECT_FALSE(reap::prune::make_pruned_spec(m, lay, p, {}, wo, spec, err));
    EXPECT_NE(err.find("the block size of iq2_xxs"), std::string::npos) << err;
    EXPECT_NE(reap::prune::requantise_refusal(reap::gguf::tensor_type::IQ2_XXS, 256).find("needs an importance matrix"),
              std::string::npos);
    EXPECT_NE(reap::prune::requantise_refusal(reap::gguf::tensor_type::Q8_K, 256).find("cannot quantise to q8_K"),
              std::string::npos);
    EXPECT_EQ(reap::prune::requantise_refusal(reap::gguf::tensor_type::Q4_K, 256), "");
    EXPECT_NE(reap::prune::requantise_refusal(reap::gguf::tensor_type::Q4_K, 128).find("not whole blocks of q4_K"),
              std::string::npos);
}

// ---- down types that need an importance matrix (iq2_xxs): the imatrix sliced to the kept channels ----
//
// A small model (tests/gguf_test_util.h) with 512-channel experts and f32 down
// slabs, cut to 256 channels (iq2_xxs blocks are 256) through the prune stages
// of reap prune (prune/run.h) with --down-type iq2_xxs and --imatrix. Each
// kept expert's down bytes must equal the test's own ggml quantisation of the
// kept columns with the importance picked here from the imatrix's values
// (in_sum2 / count at the kept channels: llama-quantize's normalisation), and
// differ from a quantisation with uniform importance (so the imatrix did
// count). Without --imatrix: a usage error naming the type; verify audits the
// cut only with the imatrix.
TEST(PruneWidth, DownTypeThatNeedsAnImportanceMatrix) {
    using namespace reap;
    const std::string dir = prune_test::scratch("prune-width-iq2");
    constexpr int64_t F = 512, K = 256, D = 64, E = 4;
    gguf_test::model_options mo;
    mo.n_ff_exp = F;
    mo.n_embd = D;
    mo.n_layer = 1;   // block 0 only: MoE (the fixture's block 1 is dense, which qwen3moe's layout refuses)
    gguf::output_spec spec = gguf_test::make_model_spec(mo);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<gguf::output_tensor> kept_tensors;
    for (gguf::output_tensor & t : spec.tensors) {
        if (t.name.find("_shexp") != std::string::npos) continue;   // no shared expert sized from the width key
        if (t.name.find("ffn_down_exps") != std::string::npos) {   // f32 values a quantiser takes (no NaN bit patterns)
            t.type = gguf::tensor_type::F32;
            auto v = std::make_shared<std::vector<uint8_t>>(size_t(F * D * E) * sizeof(float));
            float * f = reinterpret_cast<float *>(v->data());
            for (int64_t i = 0; i < F * D * E; ++i) f[i] = normal(rng);
            t.memory = v;
        }
        kept_tensors.push_back(t);
    }
    spec.tensors = kept_tensors;
    const std::string model_path = dir + "/model.gguf";
    std::string err;
    ASSERT_TRUE(gguf_test::write_fixture(spec, model_path, err)) << err;
    gguf::model m;
    ASSERT_TRUE(gguf::open_model(model_path, m, err)) << err;
    plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 2, 4, p, err)) << err;
    prune_test::random_width(p, F, K, 9);
    ASSERT_TRUE(write_plan(p, dir + "/plan.json", true, err)) << err;

    // the imatrix: every expert weight of block 0; expert 1 saw no token
    std::uniform_real_distribution<float> uni(0.01f, 4.0f);
    std::map<std::string, std::vector<float>> sums;
    const std::vector<float> counts = {6, 0, 3, 11};
    std::vector<imatrix_test::fake_entry> es;
    for (int l : {0}) {
        for (const auto & [w, nv] : std::vector<std::pair<std::string, int64_t>>{{"gate", 256}, {"up", D}, {"down", F}}) {
            imatrix_test::fake_entry e{"blk." + std::to_string(l) + ".ffn_" + w + "_exps.weight", nv, E, {}, counts};
            for (int64_t i = 0; i < nv * E; ++i) e.sums.push_back(counts[size_t(i / nv)] == 0 ? 0.f : uni(rng));
            sums[e.name] = e.sums;
            es.push_back(e);
        }
    }
    imatrix_test::write_gguf_imatrix(dir + "/src.imatrix.gguf", es);

    prune::prune_request req;
    req.model = model_path;
    req.plan = dir + "/plan.json";
    req.output = dir + "/out.gguf";
    req.force = true;
    req.sync = false;
    req.down_type = "iq2_xxs";
    {   // without an importance matrix: a usage error naming the type
        prune::prune_job job;
        util::error e;
        EXPECT_FALSE(prune::prepare_prune(req, job, e));
        EXPECT_EQ(e.kind, util::error_kind::usage);
        EXPECT_NE(e.message.find("--down-type iq2_xxs"), std::string::npos) << e.message;
        EXPECT_NE(e.message.find("needs an importance matrix"), std::string::npos) << e.message;
        EXPECT_NE(e.message.find("--imatrix"), std::string::npos) << e.message;
    }
    req.imatrix = dir + "/src.imatrix.gguf";
    prune::prune_job job;
    util::error e;
    ASSERT_TRUE(prune::prepare_prune(req, job, e)) << e.message;
    ASSERT_TRUE(prune::prepare_imatrix(job, e)) << e.message;
    prune::prune_written written;
    ASSERT_TRUE(prune::write_prune(job, written, e)) << e.message;

    const auto src = load_with_ggml(model_path), out = load_with_ggml(req.output);
    ASSERT_FALSE(out.empty());
    for (const plan_layer & pl : p.layers) {
        const std::string name = "blk." + std::to_string(pl.layer) + ".ffn_down_exps.weight";
        SCOPED_TRACE(name);
        const loaded & s = src.at(name), & o = out.at(name);
        ASSERT_EQ(o.type, GGML_TYPE_IQ2_XXS);
        ASSERT_EQ(o.ne[0], K);
        const size_t per_out = o.data.size() / size_t(p.n_keep);
        const std::vector<float> & in = sums.at(name);
        for (size_t k = 0; k < pl.keep.size(); ++k) {
            const int64_t ex = pl.keep[k];
            std::vector<float> kept(static_cast<size_t>(D * K)), imp(static_cast<size_t>(K));
            for (int64_t r = 0; r < D; ++r) {
                const float * row = reinterpret_cast<const float *>(s.data.data()) + (ex * D + r) * F;
                for (int64_t j = 0; j < K; ++j) kept[size_t(r * K + j)] = row[pl.channels[k][size_t(j)]];
            }
            const float c = counts[size_t(ex)];
            for (int64_t j = 0; j < K; ++j) imp[size_t(j)] = c > 0 ? in[size_t(ex * F + pl.channels[k][size_t(j)])] / c : 1.0f;
            std::vector<uint8_t> want(per_out), flat(per_out);
            ASSERT_EQ(ggml_quantize_chunk(GGML_TYPE_IQ2_XXS, kept.data(), want.data(), 0, D, K, imp.data()), per_out);
            EXPECT_EQ(0, memcmp(want.data(), o.data.data() + k * per_out, per_out)) << "output expert " << k;
            if (c > 0) {   // the importance changed the quantisation
                const std::vector<float> ones(static_cast<size_t>(K), 1.0f);
                ggml_quantize_chunk(GGML_TYPE_IQ2_XXS, kept.data(), flat.data(), 0, D, K, ones.data());
                EXPECT_NE(0, memcmp(flat.data(), want.data(), per_out)) << "output expert " << k;
            }
        }
    }
    // the sliced imatrix beside it: down entries of K values per kept expert
    gguf::model im;
    ASSERT_TRUE(gguf::open_model(job.imatrix_out, im, err)) << err;
    const gguf::tensor_info * t = im.find_tensor("blk.0.ffn_down_exps.weight.in_sum2");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->ne[0], K);
    EXPECT_EQ(t->ne[1], p.n_keep);

    // verify: without the imatrix the down tensors cannot be audited (not a difference); with it, OK
    prune::verify_options vo;
    vo.check_sums = false;
    prune::verify_report rep;
    EXPECT_FALSE(prune::verify_pruned(m, p, req.output, vo, rep, err));
    EXPECT_FALSE(rep.differs);
    EXPECT_NE(err.find("iq2_xxs, which is quantised with an importance matrix"), std::string::npos) << err;
    const prune::imatrix_slice & isl = job.islice;
    vo.importance = [&isl](const std::string & down, size_t k, std::vector<float> & w, std::string & why) {
        return prune::kept_importance(isl, down, k, w, why);
    };
    EXPECT_TRUE(prune::verify_pruned(m, p, req.output, vo, rep, err)) << err;
    EXPECT_EQ(rep.n_requantised, 1u);

    // issue 49 item 11: the card's audit (reap report) takes the imatrix too;
    // without it the card is refused naming it, with it the card is written
    const std::string reap = prune_test::env_or("REAP_BIN", "");
    ASSERT_FALSE(reap.empty()) << "REAP_BIN is not set (ctest sets it: tests/CMakeLists.txt)";
    std::string log;
    const std::string card = dir + "/card", cmd = "'" + reap + "' report -m '" + model_path + "' --plan '" + dir + "/plan.json' '" +
                                                  req.output + "' -o '" + card + "'";
    EXPECT_EQ(prune_test::run(cmd, log), 2) << log;
    EXPECT_NE(log.find("--imatrix"), std::string::npos) << log;
    EXPECT_EQ(prune_test::run(cmd + " --imatrix '" + dir + "/src.imatrix.gguf'", log), 0) << log;
    EXPECT_TRUE(prune_test::exists(card + "/README.md"));
}

// The same for llama4's shared expert (cut with the routed ones): the test
// fixture as llama4, block 0 an MoE layer with an f32 shared expert 512
// wide, cut to 256 with --down-type iq2_xxs. An imatrix without the
// blk.0.ffn_down_shexp.weight entry is refused before anything is written,
// naming it; with it, the shared down bytes equal the test's own ggml
// quantisation of its kept columns with the entry's values there / count,
// and verify audits both down tensors with the imatrix.
TEST(PruneWidth, Llama4SharedDownThatNeedsAnImportanceMatrix) {
    using namespace reap;
    const std::string dir = prune_test::scratch("prune-width-l4-iq2");
    constexpr int64_t F = 512, K = 256, D = 64, E = 4;
    gguf_test::model_options mo;
    mo.n_ff_exp = F;
    mo.n_embd = D;
    mo.n_layer = 1;
    gguf::output_spec spec = gguf_test::make_model_spec(mo);
    std::vector<std::string> qwen_keys;
    for (const auto & kv : spec.kvs.entries) {
        if (kv.key.rfind("qwen3moe.", 0) == 0) qwen_keys.push_back(kv.key);
    }
    for (const std::string & k : qwen_keys) ASSERT_TRUE(spec.kvs.remove(k)) << k;
    spec.kvs.set_string("general.architecture", "llama4");
    spec.kvs.set_u32("llama4.block_count", 1);
    spec.kvs.set_u32("llama4.context_length", 256);
    spec.kvs.set_u32("llama4.embedding_length", uint32_t(D));
    spec.kvs.set_u32("llama4.expert_count", uint32_t(E));
    spec.kvs.set_u32("llama4.expert_used_count", 2);
    spec.kvs.set_u32("llama4.expert_feed_forward_length", uint32_t(F));
    spec.kvs.set_u32("llama4.interleave_moe_layer_step", 1);
    std::mt19937 rng(8);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    auto f32 = [&](const std::string & name, std::vector<int64_t> ne) {
        gguf::output_tensor t;
        t.name = name;
        t.type = gguf::tensor_type::F32;
        t.n_dims = uint32_t(ne.size());
        size_t n = 1;
        for (size_t d = 0; d < ne.size(); ++d) n *= size_t(t.ne[d] = ne[d]);
        auto v = std::make_shared<std::vector<uint8_t>>(n * sizeof(float));
        for (size_t i = 0; i < n; ++i) reinterpret_cast<float *>(v->data())[i] = normal(rng);
        t.memory = v;
        return t;
    };
    std::vector<gguf::output_tensor> tensors;
    for (gguf::output_tensor & t : spec.tensors) {
        if (t.name.find("_shexp") != std::string::npos) continue;
        tensors.push_back(t.name.find("ffn_down_exps") != std::string::npos ? f32(t.name, {F, D, E}) : t);
    }
    tensors.push_back(f32("blk.0.ffn_gate_shexp.weight", {D, F}));
    tensors.push_back(f32("blk.0.ffn_up_shexp.weight", {D, F}));
    tensors.push_back(f32("blk.0.ffn_down_shexp.weight", {F, D}));
    spec.tensors = tensors;
    const std::string model_path = dir + "/model.gguf";
    std::string err;
    ASSERT_TRUE(gguf_test::write_fixture(spec, model_path, err)) << err;
    gguf::model m;
    moe::layout lay;
    ASSERT_TRUE(gguf::open_model(model_path, m, err) && model_layout(m, lay, err)) << err;
    ASSERT_TRUE(facts_of(lay, m).shared_cut) << facts_of(lay, m).width_refusal;
    plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 2, 4, p, err)) << err;
    prune_test::random_width(p, F, K, 9, true);
    ASSERT_TRUE(write_plan(p, dir + "/plan.json", true, err)) << err;

    std::uniform_real_distribution<float> uni(0.01f, 4.0f);
    const std::vector<float> counts = {6, 2, 3, 11};
    std::vector<imatrix_test::fake_entry> es;
    for (const auto & [w, nv] : std::vector<std::pair<std::string, int64_t>>{{"gate", 256}, {"up", D}, {"down", F}}) {
        imatrix_test::fake_entry e{"blk.0.ffn_" + w + "_exps.weight", nv, E, {}, counts};
        for (int64_t i = 0; i < nv * E; ++i) e.sums.push_back(uni(rng));
        es.push_back(e);
    }
    imatrix_test::write_gguf_imatrix(dir + "/no-shexp.imatrix.gguf", es);
    imatrix_test::fake_entry sh{"blk.0.ffn_down_shexp.weight", F, 1, {}, {5}};
    for (int64_t c = 0; c < F; ++c) sh.sums.push_back(uni(rng));
    es.push_back(sh);
    imatrix_test::write_gguf_imatrix(dir + "/src.imatrix.gguf", es);

    prune::prune_request req;
    req.model = model_path;
    req.plan = dir + "/plan.json";
    req.output = dir + "/out.gguf";
    req.force = true;
    req.sync = false;
    req.down_type = "iq2_xxs";
    req.imatrix = dir + "/no-shexp.imatrix.gguf";
    {
        prune::prune_job job;
        util::error e;
        EXPECT_FALSE(prune::prepare_prune(req, job, e));
        EXPECT_EQ(e.kind, util::error_kind::input);
        EXPECT_NE(e.message.find("has no entry 'blk.0.ffn_down_shexp.weight': quantising the shared expert's cut down "
                                 "projection to iq2_xxs needs it"), std::string::npos) << e.message;
        EXPECT_FALSE(prune_test::exists(req.output));
    }
    req.imatrix = dir + "/src.imatrix.gguf";
    prune::prune_job job;
    util::error e;
    ASSERT_TRUE(prune::prepare_prune(req, job, e)) << e.message;
    ASSERT_TRUE(prune::prepare_imatrix(job, e)) << e.message;
    prune::prune_written written;
    ASSERT_TRUE(prune::write_prune(job, written, e)) << e.message;

    const auto src = load_with_ggml(model_path), out = load_with_ggml(req.output);
    const loaded & s = src.at("blk.0.ffn_down_shexp.weight"), & o = out.at("blk.0.ffn_down_shexp.weight");
    ASSERT_EQ(o.type, GGML_TYPE_IQ2_XXS);
    ASSERT_EQ(o.ne[0], K);
    const std::vector<int64_t> & ch = p.layers[0].shared_channels;
    std::vector<float> kept(static_cast<size_t>(D * K)), imp(static_cast<size_t>(K));
    for (int64_t r = 0; r < D; ++r) {
        for (int64_t j = 0; j < K; ++j) kept[size_t(r * K + j)] = reinterpret_cast<const float *>(s.data.data())[r * F + ch[size_t(j)]];
    }
    for (int64_t j = 0; j < K; ++j) imp[size_t(j)] = sh.sums[size_t(ch[size_t(j)])] / 5.0f;
    std::vector<uint8_t> want(o.data.size()), flat(o.data.size());
    ASSERT_EQ(ggml_quantize_chunk(GGML_TYPE_IQ2_XXS, kept.data(), want.data(), 0, D, K, imp.data()), want.size());
    EXPECT_TRUE(want == o.data) << "the shared down projection: kept columns quantised with the sliced importance";
    const std::vector<float> ones(static_cast<size_t>(K), 1.0f);
    ggml_quantize_chunk(GGML_TYPE_IQ2_XXS, kept.data(), flat.data(), 0, D, K, ones.data());
    EXPECT_FALSE(flat == want) << "the importance changed the quantisation";

    prune::verify_options vo;
    vo.check_sums = false;
    const prune::imatrix_slice & isl = job.islice;
    vo.importance = [&isl](const std::string & down, size_t k, std::vector<float> & w, std::string & why) {
        return prune::kept_importance(isl, down, k, w, why);
    };
    prune::verify_report rep;
    EXPECT_TRUE(prune::verify_pruned(m, p, req.output, vo, rep, err)) << err;
    EXPECT_EQ(rep.n_requantised, 2u);
}

// test_imatrix.cpp: reap imatrix's reader and import (src/saliency/imatrix.h),
// on imatrix files generated here: GGUF ones written with reap::gguf's writer in
// llama-imatrix's layout (<weight>.in_sum2 [n_values, n_mat], <weight>.counts
// [1, n_mat]) and legacy .dat images built byte by byte; a small MoE-shaped
// model (tests/gguf_test_util.h: 4 experts, MoE blocks 0 and 2) stands for -m.
// Damaged inputs (every truncation, seeded byte flips, specific bad fields)
// must fail with a message, never crash (this also runs under ASan).
// llama-imatrix's own files are checked in test_llama_calibrate.cpp.
#include "gguf_test_util.h"
#include "imatrix_test_util.h"
#include "plan/plan.h"
#include "moe/layout_gguf.h"
#include "prune/imatrix_slice.h"
#include "saliency/imatrix.h"
#include "util/file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include <sys/wait.h>

namespace g  = reap::gguf;
namespace sl = reap::saliency;
using gguf_test::scratch_dir;
using namespace imatrix_test;

namespace {

void put_i32(std::vector<uint8_t> & b, int32_t v) {
    uint8_t x[4];
    memcpy(x, &v, 4);
    b.insert(b.end(), x, x + 4);
}

// A legacy .dat image: per entry (name, ncall, values), then the trailer.
std::vector<uint8_t> legacy_image(const std::vector<std::pair<std::string, std::vector<float>>> & es, int32_t ncall,
                                  bool trailer = true) {
    std::vector<uint8_t> b;
    put_i32(b, (int32_t) es.size());
    for (const auto & e : es) {
        put_i32(b, (int32_t) e.first.size());
        b.insert(b.end(), e.first.begin(), e.first.end());
        put_i32(b, ncall);
        put_i32(b, (int32_t) e.second.size());
        const uint8_t * p = (const uint8_t *) e.second.data();
        b.insert(b.end(), p, p + e.second.size() * sizeof(float));
    }
    if (trailer) {
        put_i32(b, 3);
        const std::string ds = "calib.txt";
        put_i32(b, (int32_t) ds.size());
        b.insert(b.end(), ds.begin(), ds.end());
    }
    return b;
}

// Legacy values for the down_exps of one layer: experts with count 0 hold ncall.
std::vector<float> legacy_values(const std::vector<float> & counts, int32_t ncall) {
    std::vector<float> v;
    for (int64_t m = 0; m < kE; ++m)
        for (int64_t j = 0; j < kF; ++j)
            v.push_back(counts[m] == 0 ? (float) ncall : sum_value(m, j, counts[m]) / counts[m] * (float) ncall);
    return v;
}

TEST_F(ImatrixTest, GgufImportCountsAndEnergy) {
    const std::vector<float> c0 = {5, 0, 2, 1}, c2 = {3, 3, 2, 0};
    write_gguf_imatrix(dir + "/en.gguf", default_entries(c0, c2));
    sl::archive a;
    std::vector<sl::imatrix_domain_report> reps;
    std::string err;
    ASSERT_TRUE(sl::import_imatrix({{"en", dir + "/en.gguf"}}, &model, a, reps, err)) << err;
    EXPECT_EQ(a.metrics, sl::metric_set::energy);
    ASSERT_EQ(a.domains.size(), 1u);
    const auto & d = a.domains[0];
    EXPECT_EQ(d.name, "en");
    EXPECT_EQ(d.n_tokens, 4);  // Σ count / n_expert_used = 8 / 2
    ASSERT_TRUE(sl::check_count_invariant(a, err)) << err;
    for (int64_t e = 0; e < kE; ++e) {
        EXPECT_EQ(d.count[a.index(0, (int) e)], c0[e]);
        EXPECT_EQ(d.count[a.index(2, (int) e)], c2[e]);
        EXPECT_EQ(d.count[a.index(1, (int) e)], 0);
        double want = 0;
        for (int64_t j = 0; j < kF; ++j) want += sum_value(e, j, c0[e]);
        EXPECT_NEAR(d.energy_sum[a.index(0, (int) e)], want, 1e-4 * (1 + want));
    }
    ASSERT_EQ(reps.size(), 1u);
    EXPECT_EQ(reps[0].n_unused, 2u);
    ASSERT_EQ(reps[0].unused.size(), 2u);
    EXPECT_EQ(reps[0].unused[0].first, 0);
    EXPECT_EQ(reps[0].unused[0].second, std::vector<int>{1});
    EXPECT_EQ(reps[0].unused[1].first, 2);
    EXPECT_EQ(reps[0].unused[1].second, std::vector<int>{3});
    // the model's fingerprint
    sl::fingerprint fp;
    ASSERT_TRUE(sl::model_fingerprint(model, fp, err)) << err;
    EXPECT_TRUE(sl::fingerprints_match(a.model, fp, err)) << err;
    // round trip through the file format
    ASSERT_TRUE(sl::write_archive(a, dir + "/s.gguf", err)) << err;
    sl::archive b;
    ASSERT_TRUE(sl::read_archive(dir + "/s.gguf", b, err)) << err;
    EXPECT_EQ(b.domains[0].count, d.count);
    EXPECT_EQ(b.domains[0].energy_sum, d.energy_sum);
}

TEST_F(ImatrixTest, DomainsFromNamesAndStemsAndSumming) {
    write_gguf_imatrix(dir + "/code.imatrix.gguf", default_entries({1, 1, 1, 1}, {2, 1, 1, 0}));
    write_gguf_imatrix(dir + "/b.gguf", default_entries({4, 0, 0, 0}, {1, 1, 1, 1}));
    sl::imatrix_input a_in, b_in, c_in;
    std::string err;
    ASSERT_TRUE(sl::parse_imatrix_input(dir + "/code.imatrix.gguf", false, a_in, err)) << err;
    EXPECT_EQ(a_in.domain, "code.imatrix");
    ASSERT_TRUE(sl::parse_imatrix_input("ja=" + dir + "/b.gguf", true, b_in, err)) << err;
    EXPECT_EQ(b_in.domain, "ja");
    EXPECT_EQ(b_in.path, dir + "/b.gguf");
    EXPECT_FALSE(sl::parse_imatrix_input("noequals", true, c_in, err));
    ASSERT_TRUE(sl::parse_imatrix_input("ja=" + dir + "/code.imatrix.gguf", true, c_in, err)) << err;
    sl::archive a;
    std::vector<sl::imatrix_domain_report> reps;
    ASSERT_TRUE(sl::import_imatrix({a_in, b_in, c_in}, &model, a, reps, err)) << err;
    ASSERT_EQ(a.domains.size(), 2u);
    const sl::domain_stats * ja = a.find_domain("ja");
    ASSERT_TRUE(ja);
    EXPECT_EQ(ja->count[a.index(0, 0)], 5);  // 4 + 1: files of one domain are summed
    EXPECT_EQ(ja->n_tokens, 4);
}

TEST_F(ImatrixTest, WithoutModelTheFingerprintIsInferred) {
    write_gguf_imatrix(dir + "/en.gguf", default_entries({1, 1, 1, 1}, {2, 1, 1, 0}));
    sl::archive a;
    std::vector<sl::imatrix_domain_report> reps;
    std::string err;
    ASSERT_TRUE(sl::import_imatrix({{"en", dir + "/en.gguf"}}, nullptr, a, reps, err)) << err;
    EXPECT_EQ(a.model.arch, "unknown");
    EXPECT_EQ(a.model.n_expert, (uint32_t) kE);
    EXPECT_EQ(a.model.n_layer, 3u);
    EXPECT_EQ(a.model.moe_layers, (std::vector<int>{0, 2}));
    EXPECT_EQ(a.model.n_expert_used, 0u);
    EXPECT_EQ(a.domains[0].n_tokens, 12);  // chunk_count x chunk_size
}

TEST_F(ImatrixTest, FileFromAnotherModelIsRejected) {
    std::string err;
    sl::archive a;
    std::vector<sl::imatrix_domain_report> reps;
    // 8 experts where the model has 4
    {
        auto es = default_entries({1, 1, 1, 1}, {1, 1, 1, 1});
        for (auto & e : es) {
            if (e.n_mat != kE) continue;
            e.n_mat = 8;
            e.counts.resize(8, 1.f);
            e.sums.resize((size_t) (e.n_values * 8), 1.f);
        }
        write_gguf_imatrix(dir + "/e8.gguf", es);
        EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/e8.gguf"}}, &model, a, reps, err));
        EXPECT_NE(err.find("another model"), std::string::npos) << err;
    }
    // an entry for a tensor the model does not have
    {
        auto es = default_entries({1, 1, 1, 1}, {1, 1, 1, 1});
        es.push_back({"blk.7.attn_q.weight", kD, 1, std::vector<float>(kD, 1.f), {1.f}});
        write_gguf_imatrix(dir + "/extra.gguf", es);
        EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/extra.gguf"}}, &model, a, reps, err));
        EXPECT_NE(err.find("blk.7.attn_q.weight"), std::string::npos) << err;
    }
    // a wrong input width
    {
        auto es = default_entries({1, 1, 1, 1}, {1, 1, 1, 1});
        es[0].n_values = 16;
        es[0].sums.resize((size_t) (16 * kE));
        write_gguf_imatrix(dir + "/width.gguf", es);
        EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/width.gguf"}}, &model, a, reps, err));
        EXPECT_NE(err.find("another model"), std::string::npos) << err;
    }
    // a MoE layer missing
    {
        auto es = default_entries({1, 1, 1, 1}, {1, 1, 1, 1});
        es.erase(es.begin() + 2);
        write_gguf_imatrix(dir + "/missing.gguf", es);
        EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/missing.gguf"}}, &model, a, reps, err));
        EXPECT_NE(err.find("blk.2.ffn_down_exps.weight"), std::string::npos) << err;
    }
    // a model file is not an imatrix
    EXPECT_FALSE(sl::import_imatrix({{"x", model_path}}, &model, a, reps, err));
}

// A model whose last MoE block is an MTP block (nextn_predict_layers = 1):
// llama-imatrix never runs it, so its files lack that block; the import refuses
// with the reason and points at reap calibrate, which measures MTP blocks.
TEST_F(ImatrixTest, MtpBlockMissingSaysWhy) {
    g::output_spec spec = gguf_test::make_model_spec();
    spec.kvs.set_u32("qwen3moe.nextn_predict_layers", 1);
    std::vector<std::string> written;
    std::string err;
    g::write_options wo;
    wo.force = true;
    wo.sync = false;
    ASSERT_TRUE(g::write_output(spec, wo, dir + "/mtp.gguf", written, err)) << err;
    g::model m;
    ASSERT_TRUE(g::open_model(dir + "/mtp.gguf", m, err)) << err;
    auto es = default_entries({1, 1, 1, 1}, {1, 1, 1, 1});
    es.erase(es.begin() + 2);   // blk.2.ffn_down_exps: the MTP block
    write_gguf_imatrix(dir + "/trunk.gguf", es);
    sl::archive a;
    std::vector<sl::imatrix_domain_report> reps;
    EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/trunk.gguf"}}, &m, a, reps, err));
    EXPECT_NE(err.find("blk.2.ffn_down_exps.weight"), std::string::npos) << err;
    EXPECT_NE(err.find("MTP block"), std::string::npos) << err;
    EXPECT_NE(err.find("reap calibrate"), std::string::npos) << err;
    // the same file against the model without MTP blocks: no such reason
    EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/trunk.gguf"}}, &model, a, reps, err));
    EXPECT_EQ(err.find("MTP block"), std::string::npos) << err;
}

TEST_F(ImatrixTest, DamagedGgufImatrix) {
    std::string err;
    sl::archive a;
    std::vector<sl::imatrix_domain_report> reps;
    auto es = default_entries({1, 1, 1, 1}, {1, 1, 1, 1});
    es[0].counts[1] = 1.5f;
    write_gguf_imatrix(dir + "/frac.gguf", es);
    EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/frac.gguf"}}, &model, a, reps, err));
    EXPECT_NE(err.find("not a non-negative integer"), std::string::npos) << err;

    es = default_entries({1, 1, 1, 1}, {1, 1, 1, 1});
    es[2].sums[3] = NAN;
    write_gguf_imatrix(dir + "/nan.gguf", es);
    EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/nan.gguf"}}, &model, a, reps, err));

    es = default_entries({0, 1, 1, 1}, {1, 1, 1, 1});
    es[0].sums[0] = 2.f;  // a sum where nothing was counted
    write_gguf_imatrix(dir + "/nocount.gguf", es);
    EXPECT_FALSE(sl::import_imatrix({{"x", dir + "/nocount.gguf"}}, &model, a, reps, err));

    // truncations of a valid file: all rejected, none crash
    write_gguf_imatrix(dir + "/ok.gguf", default_entries({1, 1, 1, 1}, {1, 1, 1, 1}));
    const auto bytes = gguf_test::read_all(dir + "/ok.gguf");
    g::file_header h;
    ASSERT_TRUE(g::read_header(dir + "/ok.gguf", h, err)) << err;
    uint64_t data_end = 0;  // past this only alignment padding follows
    for (const auto & t : h.tensors) data_end = std::max(data_end, h.data_offset + t.offset + t.nbytes);
    for (size_t n = 0; n < data_end; n += 7) {
        gguf_test::write_all(dir + "/cut.gguf", std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
        sl::imatrix_file f;
        EXPECT_FALSE(sl::read_imatrix(dir + "/cut.gguf", f, err)) << "truncated at " << n;
    }
}

TEST_F(ImatrixTest, LegacyDat) {
    const int32_t ncall = 6;
    const std::vector<float> c0 = {5, 0, 2, 1}, c2 = {3, 3, 2, 7};
    const auto img = legacy_image({{"blk.0.ffn_down_exps.weight", legacy_values(c0, ncall)},
                                   {"blk.2.ffn_down_exps.weight", legacy_values(c2, ncall)},
                                   {"blk.1.ffn_up.weight", std::vector<float>(kD, 2.f)}},
                                  ncall);
    gguf_test::write_all(dir + "/old.dat", img);
    sl::imatrix_file f;
    std::string err;
    ASSERT_TRUE(sl::read_imatrix(dir + "/old.dat", f, err)) << err;
    EXPECT_TRUE(f.legacy);
    EXPECT_EQ(f.entries.size(), 3u);
    EXPECT_EQ(f.chunk_count, 3);
    EXPECT_EQ(f.datasets, std::vector<std::string>{"calib.txt"});

    sl::archive a;
    std::vector<sl::imatrix_domain_report> reps;
    EXPECT_FALSE(sl::import_imatrix({{"old", dir + "/old.dat"}}, nullptr, a, reps, err));
    EXPECT_NE(err.find("-m"), std::string::npos) << err;
    ASSERT_TRUE(sl::import_imatrix({{"old", dir + "/old.dat"}}, &model, a, reps, err)) << err;
    const auto & d = a.domains[0];
    for (int64_t e = 0; e < kE; ++e) {
        // count: ncall for experts with data, 0 for the placeholder; energy/count = mean energy per token
        EXPECT_EQ(d.count[a.index(0, (int) e)], c0[e] == 0 ? 0 : ncall);
        if (c0[e] > 0) {
            double mean = 0;
            for (int64_t j = 0; j < kF; ++j) mean += sum_value(e, j, c0[e]) / c0[e];
            EXPECT_NEAR(d.energy_sum[a.index(0, (int) e)] / d.count[a.index(0, (int) e)], mean, 1e-4 * mean);
        }
    }
    ASSERT_EQ(reps.size(), 1u);
    EXPECT_TRUE(reps[0].legacy);
    EXPECT_EQ(reps[0].n_unused, 1u);
    EXPECT_TRUE(a.provenance.has("reap.saliency.imatrix.legacy_counts"));

    // no trailer is fine too
    const auto bare = legacy_image({{"blk.0.ffn_down_exps.weight", legacy_values(c0, ncall)}}, ncall, false);
    ASSERT_TRUE(sl::parse_imatrix_legacy(bare.data(), bare.size(), "bare", f, err)) << err;
}

// --width-saliency: ch_energy is each expert's in_sum2 row (GGUF) or its legacy values
// (placeholders of unused experts 0), channel by channel; Σ over channels = energy_sum;
// files whose experts have another width are refused.
TEST_F(ImatrixTest, ChannelEnergiesAreTheInSum2Rows) {
    const std::vector<float> c0 = {5, 0, 2, 1}, c2 = {3, 3, 2, 0};
    write_gguf_imatrix(dir + "/en.gguf", default_entries(c0, c2));
    sl::archive a;
    std::vector<sl::imatrix_domain_report> reps;
    std::string err;
    ASSERT_TRUE(sl::import_imatrix({{"en", dir + "/en.gguf"}}, &model, a, reps, err, /*channels=*/true)) << err;
    ASSERT_EQ(a.n_ff, (uint32_t) kF);
    const auto & d = a.domains[0];
    for (int l : {0, 2}) {
        for (int64_t e = 0; e < kE; ++e) {
            const float cnt = (l == 0 ? c0 : c2)[(size_t) e];
            double sum = 0;
            for (int64_t j = 0; j < kF; ++j) {
                const double x = d.ch_energy[a.channel_index(l, (int) e, j)];
                EXPECT_EQ(x, (double) sum_value(e, j, cnt)) << "layer " << l << " expert " << e << " channel " << j;
                sum += x;
            }
            EXPECT_EQ(sum, d.energy_sum[a.index(l, (int) e)]) << "layer " << l << " expert " << e;
        }
    }
    ASSERT_TRUE(sl::write_archive(a, dir + "/s.gguf", err)) << err;
    sl::archive b;
    ASSERT_TRUE(sl::read_archive(dir + "/s.gguf", b, err)) << err;
    EXPECT_EQ(b.domains[0].ch_energy, d.ch_energy);
    EXPECT_TRUE(b.domains[0].ch_reap.empty());   // the energy set has no REAP channels

    // legacy: the stored values, placeholders (count 0) left out
    const int32_t ncall = 6;
    const std::vector<float> l0 = legacy_values(c0, ncall);
    gguf_test::write_all(dir + "/old.dat", legacy_image({{"blk.0.ffn_down_exps.weight", l0},
                                                         {"blk.2.ffn_down_exps.weight", legacy_values({1, 1, 1, 1}, ncall)}},
                                                        ncall));
    sl::archive c;
    ASSERT_TRUE(sl::import_imatrix({{"old", dir + "/old.dat"}}, &model, c, reps, err, true)) << err;
    for (int64_t e = 0; e < kE; ++e) {
        for (int64_t j = 0; j < kF; ++j) {
            EXPECT_EQ(c.domains[0].ch_energy[c.channel_index(0, (int) e, j)], c0[(size_t) e] == 0 ? 0.0 : (double) l0[(size_t) (e * kF + j)])
                << "expert " << e << " channel " << j;
        }
    }

    // a second file whose experts are twice as wide (no -m: the first file sets the width)
    std::vector<fake_entry> wide;
    for (int l : {0, 2}) {
        fake_entry w{"blk." + std::to_string(l) + ".ffn_down_exps.weight", 2 * kF, kE, {}, {1, 1, 1, 1}};
        for (int64_t m = 0; m < kE; ++m)
            for (int64_t j = 0; j < 2 * kF; ++j) w.sums.push_back(sum_value(m, j, 1));
        wide.push_back(w);
    }
    write_gguf_imatrix(dir + "/wide.gguf", wide);
    sl::archive x;
    EXPECT_FALSE(sl::import_imatrix({{"en", dir + "/en.gguf"}, {"w", dir + "/wide.gguf"}}, nullptr, x, reps, err, true));
    EXPECT_NE(err.find("64 channels per expert, but the archive's channel statistics have 32"), std::string::npos) << err;
}

TEST_F(ImatrixTest, DamagedLegacyDat) {
    const int32_t ncall = 6;
    const auto img = legacy_image({{"blk.0.ffn_down_exps.weight", legacy_values({5, 0, 2, 1}, ncall)},
                                   {"blk.2.ffn_down_exps.weight", legacy_values({3, 3, 2, 7}, ncall)}},
                                  ncall);
    std::string err;
    sl::imatrix_file f;
    // every truncation: rejected, except exactly at the end of the entries or
    // after the chunk count (the trailer is optional, as in llama.cpp's loader)
    const size_t entries_end = img.size() - 4 - 4 - 9;
    for (size_t n = 0; n < img.size(); ++n) {
        err.clear();
        const bool ok = sl::parse_imatrix_legacy(img.data(), n, "cut", f, err);
        EXPECT_EQ(ok, n == entries_end || n == entries_end + 4) << "truncated at " << n << ": " << err;
        if (!ok) EXPECT_FALSE(err.empty());
    }
    // specific damage
    auto damaged = [&](size_t off, int32_t v) {
        auto b = img;
        memcpy(b.data() + off, &v, 4);
        return sl::parse_imatrix_legacy(b.data(), b.size(), "bad", f, err);
    };
    EXPECT_FALSE(damaged(0, 1 << 30));        // n_entries
    EXPECT_NE(err.find("entry count"), std::string::npos) << err;
    EXPECT_FALSE(damaged(0, -1));
    EXPECT_FALSE(damaged(4, -5));             // name length
    EXPECT_FALSE(damaged(4, 1 << 20));
    const size_t nval_off = 4 + 4 + 26 + 4;   // n_entries, len, "blk.0.ffn_down_exps.weight", ncall
    EXPECT_FALSE(damaged(nval_off, 1 << 29)); // nval
    EXPECT_NE(err.find("values but"), std::string::npos) << err;
    EXPECT_FALSE(damaged(nval_off, 0));
    EXPECT_FALSE(damaged(nval_off - 4, -3));  // ncall
    // seeded byte flips: never a crash; a result that parses has finite values
    std::mt19937 rng(1234);
    for (int i = 0; i < 2000; ++i) {
        auto b = img;
        const int n_flips = 1 + (int) (rng() % 4);
        for (int k = 0; k < n_flips; ++k) b[rng() % b.size()] ^= (uint8_t) (1u << (rng() % 8));
        if (sl::parse_imatrix_legacy(b.data(), b.size(), "flip", f, err, kE)) {
            for (const auto & kv : f.entries)
                for (double v : kv.second.mat_sum) ASSERT_TRUE(std::isfinite(v) && v >= 0);
        }
    }
}

}  // namespace

// ---- slicing to a plan (reap prune --imatrix, src/prune/imatrix_slice.h) ----------
// Expected outputs are built here from the same value formula, never read back
// from the slicer: GGUF rows and counts of the kept experts in keep order, the
// legacy file as the byte image of the cut entries.

namespace {

constexpr int64_t kG = 256;  // the test model's ffn_gate_exps ne[0]

// Every expert weight of MoE blocks 0 and 2 (gate, up, down) and one dense entry.
std::vector<fake_entry> full_entries(const std::vector<float> & c0, const std::vector<float> & c2) {
    std::vector<fake_entry> es;
    for (int l : {0, 2}) {
        const auto & c = l == 0 ? c0 : c2;
        for (const auto & [w, nv] : std::vector<std::pair<std::string, int64_t>>{{"gate", kG}, {"up", kD}, {"down", kF}}) {
            fake_entry e{"blk." + std::to_string(l) + ".ffn_" + w + "_exps.weight", nv, kE, {}, c};
            for (int64_t m = 0; m < kE; ++m)
                for (int64_t j = 0; j < nv; ++j) e.sums.push_back(sum_value(m, j, c[m]) + (float) l);
            es.push_back(e);
        }
    }
    es.push_back({"blk.1.ffn_up.weight", kD, 1, std::vector<float>(kD, 3.f), {12.f}});
    return es;
}

// The entries cut to `keep` per layer (layer 0: keep0, layer 2: keep2).
std::vector<fake_entry> cut_entries(const std::vector<fake_entry> & es, const std::vector<int64_t> & keep0,
                                    const std::vector<int64_t> & keep2) {
    std::vector<fake_entry> out;
    for (const auto & e : es) {
        if (e.n_mat == 1) { out.push_back(e); continue; }
        const auto & keep = e.name.rfind("blk.0.", 0) == 0 ? keep0 : keep2;
        const int64_t nv = (int64_t) e.sums.size() / e.n_mat;
        fake_entry c{e.name, nv, (int64_t) keep.size(), {}, {}};
        for (int64_t k : keep) {
            c.sums.insert(c.sums.end(), e.sums.begin() + k * nv, e.sums.begin() + (k + 1) * nv);
            c.counts.push_back(e.counts[(size_t) k]);
        }
        out.push_back(c);
    }
    return out;
}

reap::plan slice_plan(const std::vector<int64_t> & keep0, const std::vector<int64_t> & keep2) {
    reap::plan p;
    p.arch = "qwen3moe";
    p.n_layer = 4;
    p.n_expert = kE;
    p.n_expert_used = 2;
    p.n_keep = (int64_t) keep0.size();
    p.layers = {{0, keep0}, {2, keep2}};
    return p;
}

std::vector<float> floats_of(const g::model & m, const std::string & name) {
    std::vector<uint8_t> b;
    std::string err;
    EXPECT_TRUE(g::read_tensor(m, name, b, err)) << err;
    std::vector<float> v(b.size() / sizeof(float));
    memcpy(v.data(), b.data(), b.size());
    return v;
}

// `o` (a written GGUF imatrix) holds exactly the entries `want`: each one's
// in_sum2 and counts tensors, shapes and values.
void expect_entries(const g::model & o, const std::vector<fake_entry> & want) {
    ASSERT_EQ(o.tensors.size(), 2 * want.size());
    for (const auto & e : want) {
        SCOPED_TRACE(e.name);
        const g::tensor_info * t = o.find_tensor(e.name + ".in_sum2");
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->ne[0], e.n_values);
        EXPECT_EQ(t->ne[1], e.n_mat);
        EXPECT_EQ(floats_of(o, e.name + ".in_sum2"), e.sums);
        EXPECT_EQ(floats_of(o, e.name + ".counts"), e.counts);
    }
}

// The legacy .dat entries of `es`: (sum / count) * ncall per value,
// llama-imatrix's placeholder ncall where the count is 0.
std::vector<std::pair<std::string, std::vector<float>>> legacy_of(int32_t ncall, const std::vector<fake_entry> & es) {
    std::vector<std::pair<std::string, std::vector<float>>> v;
    for (const auto & e : es) {
        const int64_t nv = (int64_t) e.sums.size() / e.n_mat;
        std::vector<float> x;
        for (size_t k = 0; k < e.sums.size(); ++k) {
            const float c = e.counts[(size_t) ((int64_t) k / nv)];
            x.push_back(c == 0 ? (float) ncall : e.sums[k] / c * (float) ncall);
        }
        v.emplace_back(e.name, x);
    }
    return v;
}

}  // namespace

TEST_F(ImatrixTest, SliceGgufToPlan) {
    const std::vector<float> c0 = {5, 0, 2, 7}, c2 = {3, 3, 2, 1};
    const std::vector<int64_t> k0 = {3, 0}, k2 = {1, 2};
    const auto es = full_entries(c0, c2);
    write_gguf_imatrix(dir + "/src.gguf", es, 9, 16);
    std::string err;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::moe::layout_of(model, lay, err, reap::moe::describe_options())) << err;
    const reap::plan p = slice_plan(k0, k2);
    reap::prune::imatrix_slice s;
    ASSERT_TRUE(reap::prune::prepare_imatrix_slice(dir + "/src.gguf", model, lay, p, s, err)) << err;
    EXPECT_EQ(s.sliced.size(), 6u);

    // coverage: per kept expert, its count (all three entries of a layer agree here)
    const auto & cov = s.coverage;
    ASSERT_TRUE(cov.counts_known);
    ASSERT_EQ(cov.layers.size(), 2u);
    EXPECT_EQ(cov.layers[0].counts, (std::vector<int64_t>{7, 5}));
    EXPECT_EQ(cov.layers[1].counts, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(cov.layers[0].min, 5);
    EXPECT_EQ(cov.layers[0].max, 7);
    EXPECT_DOUBLE_EQ(cov.layers[0].mean, 6.0);
    EXPECT_EQ(cov.min, 2);
    EXPECT_EQ(cov.max, 7);
    EXPECT_DOUBLE_EQ(cov.mean, 17.0 / 4);
    EXPECT_DOUBLE_EQ(cov.median, 4.0);
    EXPECT_TRUE(cov.at_most(0).empty());
    const auto low = cov.below(3);
    ASSERT_EQ(low.size(), 1u);
    EXPECT_EQ(low[0].layer, 2);
    EXPECT_EQ(low[0].index, 1);
    EXPECT_EQ(low[0].source, 2);
    EXPECT_EQ(low[0].count, 2);

    const std::string out = reap::prune::default_imatrix_out(dir + "/cut.gguf", false);
    EXPECT_EQ(out, dir + "/cut.imatrix.gguf");
    ASSERT_TRUE(reap::prune::write_imatrix_slice(s, out, false, false, err)) << err;
    g::model src, o;
    ASSERT_TRUE(g::open_model(dir + "/src.gguf", src, err)) << err;
    ASSERT_TRUE(g::open_model(out, o, err)) << err;
    ASSERT_EQ(o.kvs.entries.size(), src.kvs.entries.size());
    for (size_t i = 0; i < o.kvs.entries.size(); ++i) {
        EXPECT_EQ(o.kvs.entries[i].key, src.kvs.entries[i].key);
        EXPECT_EQ(o.kvs.entries[i].raw, src.kvs.entries[i].raw);
    }
    const auto want = cut_entries(es, k0, k2);
    expect_entries(o, want);
    // the reader takes it; a second write needs force; never over the source
    sl::imatrix_file back;
    ASSERT_TRUE(sl::read_imatrix(out, back, err)) << err;
    EXPECT_FALSE(reap::prune::write_imatrix_slice(s, out, false, false, err));
    EXPECT_NE(err.find("exists"), std::string::npos) << err;
    EXPECT_FALSE(reap::prune::write_imatrix_slice(s, dir + "/src.gguf", true, false, err));
    EXPECT_NE(err.find("source"), std::string::npos) << err;
}

TEST_F(ImatrixTest, SliceLegacyToPlan) {
    const int32_t ncall = 4;
    const std::vector<float> c0 = {5, 0, 2, 7}, c2 = {3, 3, 2, 1};
    const std::vector<int64_t> k0 = {3, 1}, k2 = {0, 2};
    const auto es = full_entries(c0, c2);
    gguf_test::write_all(dir + "/src.dat", legacy_image(legacy_of(ncall, es), ncall));
    std::string err;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::moe::layout_of(model, lay, err, reap::moe::describe_options())) << err;
    const reap::plan p = slice_plan(k0, k2);
    reap::prune::imatrix_slice s;
    ASSERT_TRUE(reap::prune::prepare_imatrix_slice(dir + "/src.dat", model, lay, p, s, err)) << err;
    EXPECT_FALSE(s.coverage.counts_known);
    // expert 1 of layer 0 (kept second) saw nothing: the only one at 0
    const auto zero = s.coverage.at_most(0);
    ASSERT_EQ(zero.size(), 1u);
    EXPECT_EQ(zero[0].layer, 0);
    EXPECT_EQ(zero[0].index, 1);
    EXPECT_EQ(zero[0].source, 1);
    const std::string out = reap::prune::default_imatrix_out(dir + "/cut.gguf", true);
    EXPECT_EQ(out, dir + "/cut.imatrix.dat");
    ASSERT_TRUE(reap::prune::write_imatrix_slice(s, out, false, false, err)) << err;
    std::string got;
    ASSERT_TRUE(reap::util::read_file(out, "sliced imatrix", got, err)) << err;
    const auto want = legacy_image(legacy_of(ncall, cut_entries(es, k0, k2)), ncall);
    EXPECT_EQ(got, std::string(want.begin(), want.end()));
}

TEST_F(ImatrixTest, SliceRefusesAnotherModelOrMissingExperts) {
    const std::vector<float> c = {1, 2, 3, 4};
    std::string err;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::moe::layout_of(model, lay, err, reap::moe::describe_options())) << err;
    const reap::plan p = slice_plan({0, 1}, {2, 3});
    reap::prune::imatrix_slice s;
    auto refused = [&](const std::vector<fake_entry> & es, const std::string & what) {
        write_gguf_imatrix(dir + "/bad.gguf", es);
        EXPECT_FALSE(reap::prune::prepare_imatrix_slice(dir + "/bad.gguf", model, lay, p, s, err)) << what;
        EXPECT_NE(err.find(what), std::string::npos) << err;
    };
    auto es = full_entries(c, c);
    // 3 experts: an imatrix of another model
    auto three = es;
    three[2].n_mat = 3;
    three[2].counts.resize(3);
    three[2].sums.resize((size_t) (3 * kF));
    refused(three, "is for another model: entry 'blk.0.ffn_down_exps.weight'");
    // a name the model does not have
    auto other = es;
    other.back().name = "blk.1.ffn_gate.weight";
    refused(other, "names no tensor");
    // layer 2 without its up_exps entry
    auto missing = es;
    missing.erase(missing.begin() + 4);
    refused(missing, "lacks the expert entry 'blk.2.ffn_up_exps.weight'");
    // no expert entry at all
    refused({es.back()}, "no per-expert entries");
}

// ---- slicing to a width plan: down entries keep each kept expert's channels -------
// Expected values come from the entries' formula (full_entries), picked here by
// (expert, channel); gate/up entries are cut along the experts only.

namespace {

// Channel lists (ascending, K = 8 of kF = 32) for the kept experts of one layer, distinct per expert.
std::vector<std::vector<int64_t>> test_channels(size_t n_keep, int64_t shift) {
    std::vector<std::vector<int64_t>> out;
    for (size_t k = 0; k < n_keep; ++k) {
        std::vector<int64_t> ch;
        for (int64_t j = 0; j < 8; ++j) ch.push_back((j * 4 + (int64_t) k * 3 + shift) % kF);
        std::sort(ch.begin(), ch.end());
        out.push_back(ch);
    }
    return out;
}

reap::plan width_plan(const std::vector<int64_t> & keep0, const std::vector<int64_t> & keep2) {
    reap::plan p = slice_plan(keep0, keep2);
    p.width_n_ff = kF;
    p.width_keep = 8;
    p.layers[0].channels = test_channels(keep0.size(), 1);
    p.layers[1].channels = test_channels(keep2.size(), 2);
    return p;
}

// The entries `es` cut by width plan `p`: cut_entries, then down entries' values of
// output expert k taken at p's channels[k] (value (m, j) of a source entry at m * nv + j).
std::vector<fake_entry> width_cut_entries(const std::vector<fake_entry> & es, const reap::plan & p) {
    std::vector<fake_entry> out = cut_entries(es, p.layers[0].keep, p.layers[1].keep);
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i].name.find("ffn_down_exps") == std::string::npos) continue;
        const reap::plan_layer & pl = p.layers[out[i].name.rfind("blk.0.", 0) == 0 ? 0 : 1];
        const int64_t nv = (int64_t) es[i].sums.size() / es[i].n_mat;
        out[i].sums.clear();
        out[i].n_values = p.width_keep;
        for (size_t k = 0; k < pl.keep.size(); ++k) {
            for (int64_t c : pl.channels[k]) out[i].sums.push_back(es[i].sums[(size_t) (pl.keep[k] * nv + c)]);
        }
    }
    return out;
}

}  // namespace

TEST_F(ImatrixTest, SliceGgufToWidthPlan) {
    const std::vector<float> c0 = {5, 0, 2, 7}, c2 = {3, 3, 2, 1};
    const auto es = full_entries(c0, c2);
    write_gguf_imatrix(dir + "/src.gguf", es, 9, 16);
    std::string err;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::moe::layout_of(model, lay, err, reap::moe::describe_options())) << err;
    const reap::plan p = width_plan({3, 1}, {2, 0});
    reap::prune::imatrix_slice s;
    ASSERT_TRUE(reap::prune::prepare_imatrix_slice(dir + "/src.gguf", model, lay, p, s, err)) << err;
    const std::string out = dir + "/cut.imatrix.gguf";
    ASSERT_TRUE(reap::prune::write_imatrix_slice(s, out, false, false, err)) << err;
    g::model o;
    ASSERT_TRUE(g::open_model(out, o, err)) << err;
    const auto want = width_cut_entries(es, p);
    expect_entries(o, want);
    sl::imatrix_file back;
    ASSERT_TRUE(sl::read_imatrix(out, back, err)) << err;

    // the requantisation's importance: llama-quantize's in_sum2 / count (all 1 where the count is 0)
    std::vector<float> w;
    ASSERT_TRUE(reap::prune::kept_importance(s, "blk.0.ffn_down_exps.weight", 0, w, err)) << err;
    ASSERT_EQ(w.size(), 8u);
    for (size_t j = 0; j < 8; ++j) {
        const int64_t c = p.layers[0].channels[0][j];
        EXPECT_FLOAT_EQ(w[j], sum_value(3, c, 7) / 7) << "channel " << c;
    }
    ASSERT_TRUE(reap::prune::kept_importance(s, "blk.0.ffn_down_exps.weight", 1, w, err)) << err;  // expert 1 saw nothing
    EXPECT_EQ(w, std::vector<float>(8, 1.0f));
    ASSERT_TRUE(reap::prune::kept_importance(s, "blk.2.ffn_down_exps.weight", 0, w, err)) << err;
    for (size_t j = 0; j < 8; ++j) EXPECT_FLOAT_EQ(w[j], (sum_value(2, p.layers[1].channels[0][j], 2) + 2.f) / 2);
    EXPECT_FALSE(reap::prune::kept_importance(s, "blk.2.ffn_down_exps.weight", 2, w, err));
    EXPECT_FALSE(reap::prune::kept_importance(s, "blk.1.ffn_up.weight", 0, w, err));
}

TEST_F(ImatrixTest, SliceLegacyToWidthPlan) {
    const int32_t ncall = 4;
    const std::vector<float> c0 = {5, 0, 2, 7}, c2 = {3, 3, 2, 1};
    // the legacy values are cut like the sums: the count of output expert k is that of keep[k]
    const auto es = full_entries(c0, c2);
    gguf_test::write_all(dir + "/src.dat", legacy_image(legacy_of(ncall, es), ncall));
    std::string err;
    reap::moe::layout lay;
    ASSERT_TRUE(reap::moe::layout_of(model, lay, err, reap::moe::describe_options())) << err;
    const reap::plan p = width_plan({0, 1}, {3, 2});
    reap::prune::imatrix_slice s;
    ASSERT_TRUE(reap::prune::prepare_imatrix_slice(dir + "/src.dat", model, lay, p, s, err)) << err;
    const std::string out = dir + "/cut.imatrix.dat";
    ASSERT_TRUE(reap::prune::write_imatrix_slice(s, out, false, false, err)) << err;
    std::string got;
    ASSERT_TRUE(reap::util::read_file(out, "sliced imatrix", got, err)) << err;
    const auto want = legacy_image(legacy_of(ncall, width_cut_entries(es, p)), ncall);
    EXPECT_EQ(got, std::string(want.begin(), want.end()));
    // importance: value / ncall (llama-quantize's legacy normalisation), the placeholder 1 where unused
    std::vector<float> w;
    ASSERT_TRUE(reap::prune::kept_importance(s, "blk.0.ffn_down_exps.weight", 0, w, err)) << err;
    for (size_t j = 0; j < 8; ++j) EXPECT_FLOAT_EQ(w[j], sum_value(0, p.layers[0].channels[0][j], 5) / 5);
    ASSERT_TRUE(reap::prune::kept_importance(s, "blk.0.ffn_down_exps.weight", 1, w, err)) << err;
    EXPECT_EQ(w, std::vector<float>(8, 1.0f));
}

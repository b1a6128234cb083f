// Tests of the saliency archive (src/saliency/archive.h): round trips of both
// metric sets, provenance, merge = sum (max for max_norm), fingerprint of a
// model and its mismatch messages, the count invariant, and damaged archives
// (one file per kind of damage, plus seeded byte flips) rejected with a
// message that names the problem. Core only: no llama.cpp.
#include "gguf_test_util.h"
#include "saliency_test_util.h"
#include "saliency/merge.h"
#include "util/sha256.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

namespace g = reap::gguf;
namespace s = reap::saliency;
using saliency_test::make_archive;
using saliency_test::make_fingerprint;

namespace {

void expect_equal(const s::archive & a, const s::archive & b) {
    EXPECT_EQ(a.model.arch, b.model.arch);
    EXPECT_EQ(a.model.n_layer, b.model.n_layer);
    EXPECT_EQ(a.model.n_expert, b.model.n_expert);
    EXPECT_EQ(a.model.n_expert_used, b.model.n_expert_used);
    EXPECT_EQ(a.model.moe_layers, b.model.moe_layers);
    EXPECT_EQ(a.model.router_sha256, b.model.router_sha256);
    EXPECT_EQ(a.metrics, b.metrics);
    ASSERT_EQ(a.domains.size(), b.domains.size());
    for (size_t i = 0; i < a.domains.size(); ++i) {
        EXPECT_EQ(a.domains[i].name, b.domains[i].name);
        EXPECT_EQ(a.domains[i].n_tokens, b.domains[i].n_tokens);
        for (const auto & m : s::metric_names(a.metrics)) {
            EXPECT_EQ(*s::metric_data(a.domains[i], m), *s::metric_data(b.domains[i], m)) << a.domains[i].name << "." << m;
        }
    }
}

std::string write_tmp(const s::archive & a, const std::string & dir, const std::string & name) {
    const std::string path = dir + "/" + name;
    std::string err;
    EXPECT_TRUE(s::write_archive(a, path, err, true)) << err;
    return path;
}

// Writes `spec` (after `damage`) and expects read_archive to fail with a message containing `needle`.
// n_ff > 0: the archive has channel statistics of that width; shared: the shared expert's too.
void expect_rejected(const std::string & dir, const std::string & name, const std::function<void(g::output_spec &)> & damage,
                     const std::string & needle, uint32_t n_ff = 0, bool shared = false) {
    s::archive a = make_archive({"code", "en"});
    if (n_ff > 0) saliency_test::add_channels(a, n_ff);
    if (shared) saliency_test::add_shared_channels(a);
    g::output_spec spec;
    std::string err;
    ASSERT_TRUE(s::archive_spec(a, spec, err)) << err;
    damage(spec);
    const std::string path = dir + "/" + name + ".gguf";
    std::vector<std::string> written;
    g::write_options wo;
    wo.force = true;
    wo.sync = false;
    ASSERT_TRUE(g::write_output(spec, wo, path, written, err)) << name << ": " << err;
    s::archive back;
    EXPECT_FALSE(s::read_archive(path, back, err)) << name << ": damaged archive accepted";
    EXPECT_NE(err.find(needle), std::string::npos) << name << ": message '" << err << "' lacks '" << needle << "'";
}

g::output_tensor * tensor_named(g::output_spec & spec, const std::string & name) {
    for (auto & t : spec.tensors) if (t.name == name) return &t;
    return nullptr;
}

// Replaces element `i` of an F64 tensor's data.
void poke(g::output_spec & spec, const std::string & name, size_t i, double v) {
    g::output_tensor * t = tensor_named(spec, name);
    ASSERT_NE(t, nullptr);
    auto bytes = std::make_shared<std::vector<uint8_t>>(*t->memory);
    memcpy(bytes->data() + i * sizeof(double), &v, sizeof(double));
    t->memory = bytes;
}

}  // namespace

TEST(SaliencyArchive, RoundTripReapMetrics) {
    const std::string dir = gguf_test::scratch_dir("saliency_rt");
    s::archive a = make_archive({"code", "en", "ja"});
    a.provenance.set_string(s::k_key_corpus_sha256, std::string(64, 'b'));
    a.provenance.set_string(s::k_key_options, "-c 512");
    std::string err;
    ASSERT_TRUE(s::validate(a, err)) << err;
    ASSERT_TRUE(s::check_count_invariant(a, err)) << err;
    const std::string path = write_tmp(a, dir, "a.gguf");
    s::archive b;
    ASSERT_TRUE(s::read_archive(path, b, err)) << err;
    expect_equal(a, b);
    std::string v;
    ASSERT_TRUE(b.provenance.get_string(s::k_key_corpus_sha256, v, err)) << err;
    EXPECT_EQ(v, std::string(64, 'b'));
    ASSERT_TRUE(b.provenance.get_string(s::k_key_options, v, err)) << err;
    EXPECT_EQ(v, "-c 512");
    // the file is a GGUF whose tensors have the documented shape
    g::model m;
    ASSERT_TRUE(g::open_model(path, m, err)) << err;
    const g::tensor_info * t = m.find_tensor("ja.reap_sum");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, g::tensor_type::F64);
    EXPECT_EQ(t->ne[0], 8);
    EXPECT_EQ(t->ne[1], 3);
    // refuses to overwrite unless forced
    EXPECT_FALSE(s::write_archive(a, path, err));
}

// A domain name is shown in every table, figure and card: one with a control
// character (an escape that clears the terminal, a newline that breaks a
// Markdown table) is refused by validate, and so never written or read.
TEST(SaliencyArchive, DomainNamesArePrintableLines) {
    std::string err;
    for (const std::string bad : {"e\x1b[2Jn", "two\nlines", "bad\xffutf8"}) {
        s::archive a = make_archive({"en", bad});
        EXPECT_FALSE(s::validate(a, err)) << "accepted domain of " << bad.size() << " bytes";
        EXPECT_NE(err.find("control character or ill-formed UTF-8"), std::string::npos) << err;
    }
    s::archive ok = make_archive({"en", "日本語-ja"});
    EXPECT_TRUE(s::validate(ok, err)) << err;
}

TEST(SaliencyArchive, RoundTripEnergyMetrics) {
    const std::string dir = gguf_test::scratch_dir("saliency_rt_energy");
    s::archive a = make_archive({"all"}, make_fingerprint(), s::metric_set::energy);
    a.model.router_sha256.clear();   // imatrix imports may not know the router
    a.model.n_expert_used = 0;
    std::string err;
    const std::string path = write_tmp(a, dir, "e.gguf");
    s::archive b;
    ASSERT_TRUE(s::read_archive(path, b, err)) << err;
    expect_equal(a, b);
    EXPECT_TRUE(b.domains[0].reap_sum.empty());
    EXPECT_EQ(b.domains[0].energy_sum.size(), 24u);
    g::model m;
    ASSERT_TRUE(g::open_model(path, m, err));
    EXPECT_EQ(m.tensors.size(), 2u);
}

TEST(SaliencyArchive, MergeIsTheSum) {
    s::archive a = make_archive({"code", "en"});
    s::archive b = s::make_archive(a.model, a.metrics);
    saliency_test::sim_options o;
    o.seed = 99;
    o.n_tokens = 300;
    saliency_test::simulate_domain(b, "en", o);
    o.seed = 100;
    saliency_test::simulate_domain(b, "ja", o);
    a.provenance.set_string(s::k_key_tool, "reap 0.1");
    a.provenance.set_string(s::k_key_corpus_sha256, "x");
    b.provenance.set_string(s::k_key_tool, "reap 0.1");
    b.provenance.set_string(s::k_key_corpus_sha256, "y");

    s::archive m = a;
    std::string err;
    ASSERT_TRUE(s::merge_into(m, b, err)) << err;
    ASSERT_EQ(m.domains.size(), 3u);
    EXPECT_EQ(m.domains[0].name, "code");
    EXPECT_EQ(m.domains[1].name, "en");
    EXPECT_EQ(m.domains[2].name, "ja");
    const s::domain_stats & ea = *a.find_domain("en"), & eb = *b.find_domain("en"), & em = *m.find_domain("en");
    EXPECT_EQ(em.n_tokens, ea.n_tokens + eb.n_tokens);
    for (size_t i = 0; i < a.n_cells(); ++i) {
        EXPECT_EQ(em.count[i], ea.count[i] + eb.count[i]);
        EXPECT_EQ(em.gate_sum[i], ea.gate_sum[i] + eb.gate_sum[i]);
        EXPECT_EQ(em.reap_sum[i], ea.reap_sum[i] + eb.reap_sum[i]);
        EXPECT_EQ(em.ean_sum[i], ea.ean_sum[i] + eb.ean_sum[i]);
        EXPECT_EQ(em.max_norm[i], std::max(ea.max_norm[i], eb.max_norm[i]));
    }
    EXPECT_EQ(m.find_domain("code")->count, a.find_domain("code")->count);
    EXPECT_EQ(m.find_domain("ja")->reap_sum, b.find_domain("ja")->reap_sum);
    ASSERT_TRUE(s::check_count_invariant(m, err)) << err;
    // agreeing provenance kept, disagreeing dropped
    EXPECT_TRUE(m.provenance.has(s::k_key_tool));
    EXPECT_FALSE(m.provenance.has(s::k_key_corpus_sha256));

    // the sum over domains equals the sum of the parts
    s::domain_stats sum;
    ASSERT_TRUE(s::sum_domains(m, {"en", "code"}, sum, err)) << err;
    for (size_t i = 0; i < a.n_cells(); ++i) EXPECT_EQ(sum.count[i], em.count[i] + m.find_domain("code")->count[i]);
    EXPECT_FALSE(s::sum_domains(m, {"fr"}, sum, err));
    EXPECT_NE(err.find("unknown domain 'fr'"), std::string::npos) << err;
    EXPECT_NE(err.find("'ja'"), std::string::npos) << err;
}

TEST(SaliencyArchive, MergeRejectsOtherModelsAndMetricSets) {
    s::archive a = make_archive({"code"});
    std::string err;
    {
        s::archive b = make_archive({"code"}, make_fingerprint(3, 16, 2));
        EXPECT_FALSE(s::merge_into(a, b, err));
        EXPECT_NE(err.find("n_expert 8 vs 16"), std::string::npos) << err;
    }
    {
        s::fingerprint fp = make_fingerprint();
        fp.router_sha256 = std::string(64, 'c');
        s::archive b = make_archive({"code"}, fp);
        EXPECT_FALSE(s::merge_into(a, b, err));
        EXPECT_NE(err.find("router sha256"), std::string::npos) << err;
    }
    {
        s::fingerprint fp = make_fingerprint();
        fp.arch = "deepseek2";
        EXPECT_FALSE(s::merge_into(a, make_archive({"code"}, fp), err));
        EXPECT_NE(err.find("arch"), std::string::npos) << err;
    }
    {
        s::archive b = make_archive({"code"}, make_fingerprint(), s::metric_set::energy);
        EXPECT_FALSE(s::merge_into(a, b, err));
        EXPECT_NE(err.find("different metric sets"), std::string::npos) << err;
    }
}

// Found by fuzz_archive (fuzz/regressions/archive/token-count-overflow.gguf):
// merging an archive whose token count is near the int64 limit into itself
// overflowed the sum (undefined behaviour). Refused now, naming the domain,
// and the target is left as it was.
TEST(SaliencyArchive, MergeRefusesTokenCountsThatOverflow) {
    s::archive a = make_archive({"code", "en"});
    a.find_domain("en")->n_tokens = std::numeric_limits<int64_t>::max() / 2 + 1;
    s::archive b = a;
    const s::archive before = a;
    std::string err;
    EXPECT_FALSE(s::merge_into(a, b, err));
    EXPECT_NE(err.find("domain 'en'"), std::string::npos) << err;
    EXPECT_NE(err.find("overflow"), std::string::npos) << err;
    ASSERT_EQ(a.domains.size(), before.domains.size());
    for (size_t d = 0; d < a.domains.size(); ++d) {
        EXPECT_EQ(a.domains[d].n_tokens, before.domains[d].n_tokens) << a.domains[d].name;
        EXPECT_EQ(a.domains[d].count, before.domains[d].count) << a.domains[d].name;
    }
}

// Issue 49 item 6: the sample hashes a calibration records are read back
// sorted and distinct (set_sample_hashes sorts and drops repeats); a
// hand-edited list out of order or with a repeat is refused naming the key,
// and an archive without one records none (merge then checks corpora only).
TEST(SaliencyArchive, SampleHashesAreCheckedWhenRead) {
    s::archive a = make_archive({"code"});
    std::vector<uint64_t> got;
    std::string err;
    EXPECT_FALSE(s::sample_hashes_of(a, got, err));
    EXPECT_TRUE(err.empty()) << err;
    s::set_sample_hashes(a, {~uint64_t(0), 7, 3, 7});
    ASSERT_TRUE(s::sample_hashes_of(a, got, err)) << err;
    EXPECT_EQ(got, (std::vector<uint64_t>{3, 7, ~uint64_t(0)}));
    for (const std::vector<int64_t> & bad : {std::vector<int64_t>{7, 3}, std::vector<int64_t>{3, 3}, std::vector<int64_t>{-1, 5}}) {
        a.provenance.set_i64_array(s::k_key_sample_hashes, bad);
        EXPECT_FALSE(s::sample_hashes_of(a, got, err));
        EXPECT_NE(err.find(std::string(s::k_key_sample_hashes) + " is not in ascending order without repeats (element 1)"),
                  std::string::npos) << err;
    }
}

TEST(SaliencyArchive, CountInvariant) {
    s::archive a = make_archive({"code"});
    std::string err;
    ASSERT_TRUE(s::check_count_invariant(a, err)) << err;
    a.domains[0].count[a.index(2, 3)] += 1;
    EXPECT_FALSE(s::check_count_invariant(a, err));
    EXPECT_NE(err.find("domain 'code' layer 2"), std::string::npos) << err;
    EXPECT_NE(err.find("500 tokens x 2"), std::string::npos) << err;
    EXPECT_TRUE(s::check_count_invariant(a, err, 0.01));
}

TEST(SaliencyArchive, ValidateRejectsBadInMemoryArchives) {
    std::string err;
    {
        s::archive a = make_archive({"code"});
        a.domains[0].reap_sum.pop_back();
        EXPECT_FALSE(s::validate(a, err));
        EXPECT_NE(err.find("'reap_sum' has 23 values, expected 24"), std::string::npos) << err;
    }
    {
        s::archive a = make_archive({"code"});
        a.domains[0].energy_sum.assign(24, 0.0);
        EXPECT_FALSE(s::validate(a, err));
        EXPECT_NE(err.find("not part of metric set"), std::string::npos) << err;
    }
    {
        s::archive a = make_archive({"code"});
        a.domains[0].name = std::string(60, 'x');
        EXPECT_FALSE(s::validate(a, err));
        EXPECT_NE(err.find("longer than"), std::string::npos) << err;
    }
    {
        s::archive a = make_archive({"code"});
        a.domains[0].max_norm[a.index(0, 1)] = -1;
        EXPECT_FALSE(s::validate(a, err));
        EXPECT_NE(err.find("'max_norm' layer 0 expert 1: negative"), std::string::npos) << err;
    }
    {
        s::archive a = make_archive({"code"});
        a.model.moe_layers = {2, 0};
        EXPECT_FALSE(s::validate(a, err));
        EXPECT_NE(err.find("ascending"), std::string::npos) << err;
    }
    {
        s::archive a = make_archive({"code"});
        const std::string dir = gguf_test::scratch_dir("saliency_badwrite");
        a.domains[0].count[0] = std::numeric_limits<double>::quiet_NaN();
        EXPECT_FALSE(s::write_archive(a, dir + "/x.gguf", err, true));
        EXPECT_NE(err.find("not finite"), std::string::npos) << err;
        EXPECT_FALSE(gguf_test::exists(dir + "/x.gguf"));
    }
}

TEST(SaliencyArchive, ModelFingerprint) {
    const std::string dir = gguf_test::scratch_dir("saliency_fp");
    gguf_test::model_options mo;
    mo.n_expert = 4;
    gguf_test::write_model(dir + "/m1.gguf", mo);
    mo.seed = 2;
    gguf_test::write_model(dir + "/m2.gguf", mo);
    g::model m1, m2;
    std::string err;
    ASSERT_TRUE(g::open_model(dir + "/m1.gguf", m1, err)) << err;
    ASSERT_TRUE(g::open_model(dir + "/m2.gguf", m2, err)) << err;
    s::fingerprint f1, f2;
    ASSERT_TRUE(s::model_fingerprint(m1, f1, err)) << err;
    ASSERT_TRUE(s::model_fingerprint(m2, f2, err)) << err;
    EXPECT_EQ(f1.arch, "qwen3moe");
    EXPECT_EQ(f1.n_layer, 3u);
    EXPECT_EQ(f1.n_expert, 4u);
    EXPECT_EQ(f1.n_expert_used, 2u);
    EXPECT_EQ(f1.moe_layers, (std::vector<int>{0, 2}));
    // independent recomputation: sha256 of the router bytes in layer order
    std::vector<uint8_t> r0, r2;
    ASSERT_TRUE(g::read_tensor(m1, "blk.0.ffn_gate_inp.weight", r0, err)) << err;
    ASSERT_TRUE(g::read_tensor(m1, "blk.2.ffn_gate_inp.weight", r2, err)) << err;
    r0.insert(r0.end(), r2.begin(), r2.end());
    EXPECT_EQ(f1.router_sha256, reap::util::sha256_bytes(r0.data(), r0.size()));
    EXPECT_NE(f1.router_sha256, f2.router_sha256);

    EXPECT_TRUE(s::fingerprints_match(f1, f1, err));
    EXPECT_FALSE(s::fingerprints_match(f2, f1, err));
    EXPECT_NE(err.find("another model"), std::string::npos) << err;
    EXPECT_NE(err.find("router weights differ"), std::string::npos) << err;
    s::fingerprint f3 = f1;
    f3.n_expert = 8;
    EXPECT_FALSE(s::fingerprints_match(f3, f1, err));
    EXPECT_NE(err.find("n_expert 8 (archive) vs 4 (model)"), std::string::npos) << err;
    f3 = f1;
    f3.router_sha256.clear();   // unknown router: the rest must still match
    EXPECT_TRUE(s::fingerprints_match(f3, f1, err)) << err;

    // a dense model cannot be fingerprinted
    g::output_spec spec = gguf_test::make_model_spec();
    spec.kvs.remove("qwen3moe.expert_count");
    std::vector<std::string> written;
    g::write_options wo;
    wo.force = true;
    wo.sync = false;
    ASSERT_TRUE(g::write_output(spec, wo, dir + "/dense.gguf", written, err)) << err;
    g::model md;
    ASSERT_TRUE(g::open_model(dir + "/dense.gguf", md, err)) << err;
    EXPECT_FALSE(s::model_fingerprint(md, f3, err));
    EXPECT_NE(err.find("not a Mixture-of-Experts model"), std::string::npos) << err;
}

TEST(SaliencyArchive, DamagedArchivesRejected) {
    const std::string dir = gguf_test::scratch_dir("saliency_damaged");
    expect_rejected(dir, "type", [](g::output_spec & sp) { sp.kvs.set_string("general.type", "model"); }, "not a saliency archive");
    expect_rejected(dir, "notype", [](g::output_spec & sp) { sp.kvs.remove("general.type"); }, "no general.type");
    expect_rejected(dir, "version", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_version, 9); }, "version 9 is not supported");
    expect_rejected(dir, "metrics", [](g::output_spec & sp) { sp.kvs.set_string(s::k_key_metrics, "bogus"); }, "expected 'reap', 'energy' or 'weights'");
    expect_rejected(dir, "metrics_type", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_metrics, 1); }, s::k_key_metrics);
    expect_rejected(dir, "ntok", [](g::output_spec & sp) { sp.kvs.set_i64_array(s::k_key_n_tokens, {5}); }, "has 2 domains but");
    expect_rejected(dir, "ntok_neg", [](g::output_spec & sp) { sp.kvs.set_i64_array(s::k_key_n_tokens, {5, -3}); }, "n_tokens -3 < 0");
    expect_rejected(dir, "dup", [](g::output_spec & sp) { sp.kvs.set_string_array(s::k_key_domains, {"code", "code"}); }, "listed twice");
    expect_rejected(dir, "nodomain", [](g::output_spec & sp) { sp.kvs.set_string_array(s::k_key_domains, {"code", "fr"}); },
                    "tensor 'fr.count' is missing");
    expect_rejected(dir, "layers", [](g::output_spec & sp) { sp.kvs.set_i32_array(s::k_key_moe_layers, {0, 7}); }, "layer 7 out of range");
    expect_rejected(dir, "nexpert", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_n_expert, 0); }, "out of range");
    expect_rejected(dir, "huge", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_n_expert, 1u << 30); }, "out of range");
    expect_rejected(dir, "used", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_n_expert_used, 9); }, "n_expert_used 9 > n_expert 8");
    expect_rejected(dir, "sha", [](g::output_spec & sp) { sp.kvs.set_string(s::k_key_router_sha256, "xyz"); }, "not 64 lowercase hex");
    expect_rejected(dir, "missing_tensor", [](g::output_spec & sp) {
        sp.tensors.erase(sp.tensors.begin() + 2);  // code.reap_sum
    }, "tensor 'code.reap_sum' is missing");
    expect_rejected(dir, "f32", [](g::output_spec & sp) {
        g::output_tensor * t = tensor_named(sp, "en.gate_sum");
        t->type = g::tensor_type::F32;
        t->memory = std::make_shared<std::vector<uint8_t>>(t->memory->size() / 2);
    }, "tensor 'en.gate_sum' has type f32, expected f64");
    expect_rejected(dir, "shape", [](g::output_spec & sp) {
        g::output_tensor * t = tensor_named(sp, "en.count");
        std::swap(t->ne[0], t->ne[1]);
    }, "tensor 'en.count' has shape [3, 8], expected [8, 3]");
    expect_rejected(dir, "shape3d", [](g::output_spec & sp) {
        g::output_tensor * t = tensor_named(sp, "en.count");
        t->n_dims = 3;
        t->ne[1] = 1;
        t->ne[2] = 3;
    }, "tensor 'en.count' has shape");
    expect_rejected(dir, "nan", [](g::output_spec & sp) { poke(sp, "code.ean_sum", 3, std::nan("")); }, "'ean_sum' layer 0 expert 3: value is not finite");
    expect_rejected(dir, "frac", [](g::output_spec & sp) { poke(sp, "code.count", 2, 1.5); }, "count 1.5 is not an integer");
    expect_rejected(dir, "neg", [](g::output_spec & sp) { poke(sp, "code.count", 2, -4); }, "negative value -4");
    expect_rejected(dir, "dense_row", [](g::output_spec & sp) { poke(sp, "en.reap_sum", 8 + 5, 0.25); },
                    "'reap_sum' layer 1 expert 5: non-zero value 0.25 in a layer that is not an MoE layer");
    expect_rejected(dir, "energy_extra", [](g::output_spec & sp) {
        g::output_tensor t = *tensor_named(sp, "en.count");
        t.name = "en.energy_sum";
        sp.tensors.push_back(t);
    }, "does not belong to metric set 'reap'");

    // truncated file and a file that is not GGUF at all
    s::archive a = make_archive({"code", "en"});
    const std::string good = write_tmp(a, dir, "good.gguf");
    std::vector<uint8_t> bytes = gguf_test::read_all(good);
    std::string err;
    s::archive back;
    gguf_test::write_all(dir + "/trunc.gguf", std::vector<uint8_t>(bytes.begin(), bytes.begin() + (ptrdiff_t) bytes.size() - 100));
    EXPECT_FALSE(s::read_archive(dir + "/trunc.gguf", back, err));
    EXPECT_NE(err.find("trunc.gguf"), std::string::npos) << err;
    gguf_test::write_all(dir + "/text.gguf", std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o'});
    EXPECT_FALSE(s::read_archive(dir + "/text.gguf", back, err));
    EXPECT_FALSE(s::read_archive(dir + "/absent.gguf", back, err));

    // seeded byte flips anywhere: never a crash; what is accepted is valid
    std::mt19937 rng(1234);
    int rejected = 0;
    for (int it = 0; it < 300; ++it) {
        std::vector<uint8_t> dmg = bytes;
        const int n_flips = 1 + (int) (rng() % 4);
        for (int k = 0; k < n_flips; ++k) dmg[rng() % dmg.size()] ^= (uint8_t) (1u << (rng() % 8));
        gguf_test::write_all(dir + "/flip.gguf", dmg);
        s::archive x;
        if (s::read_archive(dir + "/flip.gguf", x, err)) {
            EXPECT_TRUE(s::validate(x, err)) << err;
        } else {
            EXPECT_FALSE(err.empty());
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 0);
}

// ---- channel statistics (width saliency, archive version 2) ---------------------------

namespace {

void expect_channels_equal(const s::archive & a, const s::archive & b) {
    EXPECT_EQ(a.n_ff, b.n_ff);
    ASSERT_EQ(a.domains.size(), b.domains.size());
    for (size_t i = 0; i < a.domains.size(); ++i) {
        EXPECT_EQ(a.domains[i].ch_energy, b.domains[i].ch_energy) << a.domains[i].name;
        EXPECT_EQ(a.domains[i].ch_reap, b.domains[i].ch_reap) << a.domains[i].name;
    }
}

}  // namespace

TEST(SaliencyArchiveChannels, RoundTripIsVersion2WithDocumentedShapes) {
    const std::string dir = gguf_test::scratch_dir("saliency_ch_rt");
    std::string err;
    for (s::metric_set ms : {s::metric_set::reap, s::metric_set::energy}) {
        s::archive a = make_archive({"code", "en"}, make_fingerprint(), ms);
        saliency_test::add_channels(a, 6);
        ASSERT_TRUE(s::validate(a, err)) << err;
        const std::string path = write_tmp(a, dir, std::string(s::metric_set_name(ms)) + ".gguf");
        s::archive b;
        ASSERT_TRUE(s::read_archive(path, b, err)) << err;
        expect_equal(a, b);
        expect_channels_equal(a, b);
        EXPECT_EQ(b.domains[0].ch_reap.empty(), ms == s::metric_set::energy);
        g::model m;
        ASSERT_TRUE(g::open_model(path, m, err)) << err;
        uint32_t v = 0, n_ff = 0;
        ASSERT_TRUE(m.kvs.get_u32(s::k_key_version, v, err)) << err;
        EXPECT_EQ(v, 2u);
        ASSERT_TRUE(m.kvs.get_u32(s::k_key_n_ff, n_ff, err)) << err;
        EXPECT_EQ(n_ff, 6u);
        const g::tensor_info * t = m.find_tensor("en.ch_energy");
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->type, g::tensor_type::F64);
        EXPECT_EQ(t->ne[0], 6);   // n_ff, n_expert, n_layer
        EXPECT_EQ(t->ne[1], 8);
        EXPECT_EQ(t->ne[2], 3);
        EXPECT_EQ(m.find_tensor("en.ch_reap") != nullptr, ms == s::metric_set::reap);
        // element (l, e, c) at (l * n_expert + e) * n_ff + c, read here from the file's bytes
        const size_t at = a.channel_index(2, 5, 4);
        double x = 0;
        ASSERT_TRUE(g::read_tensor_bytes(m, *t, at * sizeof(double), sizeof(double), &x, err)) << err;
        EXPECT_EQ(x, a.find_domain("en")->ch_energy[at]);
    }
    // without channel statistics: version 1 and no width key, as before
    s::archive plain = make_archive({"code"});
    const std::string path = write_tmp(plain, dir, "plain.gguf");
    g::model m;
    ASSERT_TRUE(g::open_model(path, m, err)) << err;
    uint32_t v = 0;
    ASSERT_TRUE(m.kvs.get_u32(s::k_key_version, v, err)) << err;
    EXPECT_EQ(v, 1u);
    EXPECT_FALSE(m.kvs.has(s::k_key_n_ff));
}

// An archive written before channel statistics existed (the fuzz seed, committed
// with the first archive format) still reads, without them.
TEST(SaliencyArchiveChannels, OldArchiveStillReads) {
    const std::string seed = std::string(REAP_SOURCE_DIR) + "/fuzz/seeds/archive/tiny-moe.saliency.gguf";
    s::archive a;
    std::string err;
    ASSERT_TRUE(s::read_archive(seed, a, err)) << err;
    EXPECT_EQ(a.n_ff, 0u);
    ASSERT_FALSE(a.domains.empty());
    EXPECT_TRUE(a.domains[0].ch_energy.empty());
}

TEST(SaliencyArchiveChannels, MergeAndDomainSumsAddChannels) {
    s::archive a = make_archive({"code", "en"});
    saliency_test::add_channels(a, 3, 1);
    s::archive b = make_archive({"en", "ja"}, make_fingerprint(), s::metric_set::reap, 200);
    saliency_test::add_channels(b, 3, 2);
    s::archive m = a;
    std::string err;
    ASSERT_TRUE(s::merge_into(m, b, err)) << err;
    ASSERT_EQ(m.n_ff, 3u);
    const auto & ea = *a.find_domain("en"), & eb = *b.find_domain("en"), & em = *m.find_domain("en");
    for (size_t i = 0; i < m.n_channel_values(); ++i) {
        EXPECT_EQ(em.ch_energy[i], ea.ch_energy[i] + eb.ch_energy[i]);
        EXPECT_EQ(em.ch_reap[i], ea.ch_reap[i] + eb.ch_reap[i]);
    }
    EXPECT_EQ(m.find_domain("ja")->ch_reap, b.find_domain("ja")->ch_reap);
    ASSERT_TRUE(s::validate(m, err)) << err;
    s::domain_stats sum;
    ASSERT_TRUE(s::sum_domains(m, {"en", "code"}, sum, err)) << err;
    for (size_t i = 0; i < m.n_channel_values(); ++i) EXPECT_EQ(sum.ch_energy[i], em.ch_energy[i] + m.find_domain("code")->ch_energy[i]);
    // the data hash sees the channels; an archive without them hashes as its cells alone
    s::archive c = a;
    c.domains[0].ch_reap[c.channel_index(0, 1, 2)] += 1;
    EXPECT_NE(s::data_sha256(a), s::data_sha256(c));
    s::archive plain = make_archive({"code", "en"});
    s::archive no_ch = a;
    no_ch.n_ff = 0;
    for (auto & d : no_ch.domains) { d.ch_energy.clear(); d.ch_reap.clear(); }
    EXPECT_EQ(s::data_sha256(no_ch), s::data_sha256(plain));
    EXPECT_NE(s::data_sha256(a), s::data_sha256(plain));
    // widths must agree: with and without, or two widths
    s::archive x = plain;
    EXPECT_FALSE(s::merge_into(x, a, err));
    EXPECT_NE(err.find("n_ff_exp 0 vs 3"), std::string::npos) << err;
    s::archive w = make_archive({"en"});
    saliency_test::add_channels(w, 5);
    s::archive y = a;
    EXPECT_FALSE(s::merge_into(y, w, err));
    EXPECT_NE(err.find("n_ff_exp 3 vs 5"), std::string::npos) << err;
}

TEST(SaliencyArchiveChannels, ValidateRejectsBadChannelValues) {
    std::string err;
    s::archive a = make_archive({"code"});
    saliency_test::add_channels(a, 4);
    ASSERT_TRUE(s::validate(a, err)) << err;
    auto bad = [&](const std::function<void(s::archive &)> & damage, const std::string & needle) {
        s::archive x = a;
        damage(x);
        EXPECT_FALSE(s::validate(x, err)) << needle;
        EXPECT_NE(err.find(needle), std::string::npos) << err;
    };
    bad([](s::archive & x) { x.domains[0].ch_energy.pop_back(); }, "'ch_energy' has 95 values, expected 96");
    bad([](s::archive & x) { x.n_ff = 0; }, "(n_ff_exp 0) cannot have");
    bad([](s::archive & x) { x.domains[0].ch_reap[x.channel_index(0, 1, 1)] = NAN; }, "'ch_reap' layer 0 expert 1 channel 1: value is not finite");
    bad([](s::archive & x) { x.domains[0].ch_energy[x.channel_index(2, 3, 0)] = -1; }, "'ch_energy' layer 2 expert 3 channel 0: negative value -1");
    bad([](s::archive & x) { x.domains[0].ch_energy[x.channel_index(1, 3, 2)] = 1; }, "layer 1 expert 3 channel 2: non-zero value 1 in a layer that is not an MoE layer");
    s::archive z = make_archive({"code"}, make_fingerprint(), s::metric_set::reap, 1);   // one token: most experts unused
    saliency_test::add_channels(z, 4);
    size_t unused = 0;
    while (z.domains[0].count[unused] != 0) ++unused;
    z.domains[0].ch_reap[unused * 4 + 3] = 0.5;
    EXPECT_FALSE(s::validate(z, err));
    EXPECT_NE(err.find("channel 3: value 0.5 where count is 0"), std::string::npos) << err;
    s::archive e = make_archive({"code"}, make_fingerprint(), s::metric_set::energy);
    saliency_test::add_channels(e, 4);
    e.domains[0].ch_reap = e.domains[0].ch_energy;
    EXPECT_FALSE(s::validate(e, err));
    EXPECT_NE(err.find("not part of metric set 'energy'"), std::string::npos) << err;
}

TEST(SaliencyArchiveChannels, DamagedChannelTensorsRejected) {
    const std::string dir = gguf_test::scratch_dir("saliency_ch_damage");
    expect_rejected(dir, "v1", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_version, 1); },
                    "format version 1 has no channel statistics, but 'reap.saliency.model.n_ff_exp' is 4", 4);
    expect_rejected(dir, "no_width", [](g::output_spec & sp) { sp.kvs.remove(s::k_key_n_ff); },
                    "tensor 'code.ch_energy' is not expected: the archive declares no channel statistics", 4);
    expect_rejected(dir, "width_type", [](g::output_spec & sp) { sp.kvs.set_string(s::k_key_n_ff, "4"); }, s::k_key_n_ff, 4);
    expect_rejected(dir, "width", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_n_ff, 5); },
                    "tensor 'code.ch_energy' has shape [4, 8, 3], expected [5, 8, 3] (n_ff_exp, n_expert, n_layer)", 4);
    expect_rejected(dir, "huge", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_n_ff, 1u << 30); }, "expected [1073741824, 8, 3]", 4);
    expect_rejected(dir, "missing", [](g::output_spec & sp) {
        for (size_t i = 0; i < sp.tensors.size(); ++i) if (sp.tensors[i].name == "en.ch_reap") sp.tensors.erase(sp.tensors.begin() + (ptrdiff_t) i);
    }, "tensor 'en.ch_reap' is missing", 4);
    expect_rejected(dir, "f32", [](g::output_spec & sp) {
        g::output_tensor * t = tensor_named(sp, "en.ch_energy");
        t->type = g::tensor_type::F32;
        t->memory = std::make_shared<std::vector<uint8_t>>(t->memory->size() / 2);
    }, "tensor 'en.ch_energy' has type f32, expected f64", 4);
    expect_rejected(dir, "flat", [](g::output_spec & sp) {
        g::output_tensor * t = tensor_named(sp, "en.ch_energy");
        t->n_dims = 2;
        t->ne[1] = 8 * 3;
        t->ne[2] = 1;
    }, "tensor 'en.ch_energy' has shape [4, 24], expected [4, 8, 3]", 4);
    expect_rejected(dir, "nan", [](g::output_spec & sp) { poke(sp, "code.ch_energy", 5, std::nan("")); },
                    "'ch_energy' layer 0 expert 1 channel 1: value is not finite", 4);
    expect_rejected(dir, "dense", [](g::output_spec & sp) { poke(sp, "en.ch_reap", (8 + 2) * 4 + 1, 2.0); },
                    "'ch_reap' layer 1 expert 2 channel 1: non-zero value 2 in a layer that is not an MoE layer", 4);
}

// ---- the shared expert's channel statistics (llama4's width cut, archive version 3) ----

TEST(SaliencyArchiveShared, RoundTripIsVersion3WithDocumentedShapes) {
    const std::string dir = gguf_test::scratch_dir("saliency_sh_rt");
    std::string err;
    for (s::metric_set ms : {s::metric_set::reap, s::metric_set::energy}) {
        s::archive a = make_archive({"code", "en"}, make_fingerprint(), ms);
        saliency_test::add_channels(a, 6);
        saliency_test::add_shared_channels(a);
        ASSERT_TRUE(s::validate(a, err)) << err;
        const std::string path = write_tmp(a, dir, std::string(s::metric_set_name(ms)) + ".gguf");
        s::archive b;
        ASSERT_TRUE(s::read_archive(path, b, err)) << err;
        EXPECT_TRUE(b.has_shared_channels);
        for (size_t i = 0; i < a.domains.size(); ++i) {
            EXPECT_EQ(a.domains[i].sh_energy, b.domains[i].sh_energy);
            EXPECT_EQ(a.domains[i].sh_reap, b.domains[i].sh_reap);
            EXPECT_EQ(a.domains[i].ch_energy, b.domains[i].ch_energy);
        }
        EXPECT_EQ(b.domains[0].sh_reap.empty(), ms == s::metric_set::energy);
        EXPECT_TRUE(b.provenance.entries.empty() || !b.provenance.find(s::k_key_shared_channels));
        g::model m;
        ASSERT_TRUE(g::open_model(path, m, err)) << err;
        uint32_t v = 0;
        bool shared = false;
        ASSERT_TRUE(m.kvs.get_u32(s::k_key_version, v, err)) << err;
        EXPECT_EQ(v, 3u);
        ASSERT_TRUE(m.kvs.get_bool(s::k_key_shared_channels, shared, err)) << err;
        EXPECT_TRUE(shared);
        const g::tensor_info * t = m.find_tensor("en.sh_energy");
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->type, g::tensor_type::F64);
        EXPECT_EQ(t->n_dims, 2u);
        EXPECT_EQ(t->ne[0], 6);   // n_ff, n_layer
        EXPECT_EQ(t->ne[1], 3);
        EXPECT_EQ(m.find_tensor("en.sh_reap") != nullptr, ms == s::metric_set::reap);
        // element (l, c) at l * n_ff + c, read here from the file's bytes
        double x = 0;
        ASSERT_TRUE(g::read_tensor_bytes(m, *t, (2 * 6 + 5) * sizeof(double), sizeof(double), &x, err)) << err;
        EXPECT_EQ(x, a.find_domain("en")->sh_energy[a.shared_channel_index(2, 5)]);
        EXPECT_GT(x, 0);
    }
    // the same archive without them is written as version 2 (no key, no tensors)
    s::archive a = make_archive({"code"});
    saliency_test::add_channels(a, 6);
    const std::string path = write_tmp(a, dir, "v2.gguf");
    g::model m;
    ASSERT_TRUE(g::open_model(path, m, err)) << err;
    uint32_t v = 0;
    ASSERT_TRUE(m.kvs.get_u32(s::k_key_version, v, err)) << err;
    EXPECT_EQ(v, 2u);
    EXPECT_FALSE(m.kvs.has(s::k_key_shared_channels));
    EXPECT_EQ(m.find_tensor("code.sh_energy"), nullptr);
}

TEST(SaliencyArchiveShared, AddDomainMergeSumsAndHash) {
    s::archive a = make_archive({"code", "en"});
    saliency_test::add_channels(a, 3, 1);
    saliency_test::add_shared_channels(a, 1);
    s::archive b = make_archive({"en", "ja"}, make_fingerprint(), s::metric_set::reap, 200);
    saliency_test::add_channels(b, 3, 2);
    saliency_test::add_shared_channels(b, 2);
    std::string err;
    // add_domain zero-fills the shared vectors
    s::archive z = a;
    const s::domain_stats & fresh = z.add_domain("new");
    EXPECT_EQ(fresh.sh_energy, std::vector<double>(3 * 3, 0.0));
    EXPECT_EQ(fresh.sh_reap, std::vector<double>(3 * 3, 0.0));
    ASSERT_TRUE(s::validate(z, err)) << err;
    s::archive m = a;
    ASSERT_TRUE(s::merge_into(m, b, err)) << err;
    EXPECT_TRUE(m.has_shared_channels);
    const auto & ea = *a.find_domain("en"), & eb = *b.find_domain("en"), & em = *m.find_domain("en");
    for (size_t i = 0; i < m.n_shared_channel_values(); ++i) {
        EXPECT_EQ(em.sh_energy[i], ea.sh_energy[i] + eb.sh_energy[i]);
        EXPECT_EQ(em.sh_reap[i], ea.sh_reap[i] + eb.sh_reap[i]);
    }
    EXPECT_EQ(m.find_domain("ja")->sh_energy, b.find_domain("ja")->sh_energy);
    ASSERT_TRUE(s::validate(m, err)) << err;
    s::domain_stats sum;
    ASSERT_TRUE(s::sum_domains(m, {"en", "code"}, sum, err)) << err;
    ASSERT_EQ(sum.sh_reap.size(), m.n_shared_channel_values());
    for (size_t i = 0; i < m.n_shared_channel_values(); ++i) EXPECT_EQ(sum.sh_reap[i], em.sh_reap[i] + m.find_domain("code")->sh_reap[i]);
    // the data hash sees them; without them an archive hashes as its channels alone
    s::archive c = a;
    c.domains[1].sh_energy[c.shared_channel_index(2, 1)] += 1;
    EXPECT_NE(s::data_sha256(a), s::data_sha256(c));
    s::archive no_sh = a;
    no_sh.has_shared_channels = false;
    for (auto & d : no_sh.domains) { d.sh_energy.clear(); d.sh_reap.clear(); }
    s::archive ch_only = make_archive({"code", "en"});
    saliency_test::add_channels(ch_only, 3, 1);
    EXPECT_EQ(s::data_sha256(no_sh), s::data_sha256(ch_only));
    EXPECT_NE(s::data_sha256(a), s::data_sha256(ch_only));
    // with and without do not mix, either way round
    s::archive x = ch_only;
    EXPECT_FALSE(s::merge_into(x, a, err));
    EXPECT_NE(err.find("with and without the shared expert's channel statistics (the second has them"), std::string::npos) << err;
    s::archive y = a;
    EXPECT_FALSE(s::merge_into(y, ch_only, err));
    EXPECT_NE(err.find("(the first has them"), std::string::npos) << err;
    EXPECT_EQ(y.domains[0].sh_energy, a.domains[0].sh_energy);   // nothing changed
}

TEST(SaliencyArchiveShared, ValidateRejectsBadSharedValues) {
    std::string err;
    s::archive a = make_archive({"code"});
    saliency_test::add_channels(a, 4);
    saliency_test::add_shared_channels(a);
    ASSERT_TRUE(s::validate(a, err)) << err;
    auto bad = [&](const std::function<void(s::archive &)> & damage, const std::string & needle) {
        s::archive x = a;
        damage(x);
        EXPECT_FALSE(s::validate(x, err)) << needle;
        EXPECT_NE(err.find(needle), std::string::npos) << err;
    };
    bad([](s::archive & x) { x.domains[0].sh_energy.pop_back(); }, "'sh_energy' has 11 values, expected 12 (n_layer x n_ff_exp 4)");
    bad([](s::archive & x) { x.domains[0].sh_reap.clear(); }, "'sh_reap' has 0 values, expected 12");
    bad([](s::archive & x) { x.has_shared_channels = false; }, "has 'sh_energy', which an archive without the shared expert's channel statistics cannot have");
    bad([](s::archive & x) {
        x.n_ff = 0;
        for (auto & d : x.domains) { d.ch_energy.clear(); d.ch_reap.clear(); }
    }, "the shared expert's channel statistics need channel statistics (n_ff_exp 0)");
    bad([](s::archive & x) { x.domains[0].sh_reap[x.shared_channel_index(2, 3)] = NAN; }, "'sh_reap' layer 2 channel 3: value is not finite");
    bad([](s::archive & x) { x.domains[0].sh_energy[x.shared_channel_index(0, 1)] = INFINITY; }, "'sh_energy' layer 0 channel 1: value is not finite");
    bad([](s::archive & x) { x.domains[0].sh_energy[x.shared_channel_index(0, 2)] = -1; }, "'sh_energy' layer 0 channel 2: negative value -1");
    bad([](s::archive & x) { x.domains[0].sh_reap[x.shared_channel_index(2, 0)] = -0.5; }, "'sh_reap' layer 2 channel 0: negative value -0.5");
    bad([](s::archive & x) { x.domains[0].sh_energy[x.shared_channel_index(1, 3)] = 2; }, "'sh_energy' layer 1 channel 3: non-zero value 2 in a layer that is not an MoE layer");
    s::archive e = make_archive({"code"}, make_fingerprint(), s::metric_set::energy);
    saliency_test::add_channels(e, 4);
    saliency_test::add_shared_channels(e);
    e.domains[0].sh_reap = e.domains[0].sh_energy;
    EXPECT_FALSE(s::validate(e, err));
    EXPECT_NE(err.find("'sh_reap', which is not part of metric set 'energy'"), std::string::npos) << err;
}

TEST(SaliencyArchiveShared, DamagedSharedTensorsRejected) {
    const std::string dir = gguf_test::scratch_dir("saliency_sh_damage");
    expect_rejected(dir, "v2", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_version, 2); },
                    "format version 2 with 'reap.saliency.model.shared_channels' true", 4, true);
    expect_rejected(dir, "v3_nokey", [](g::output_spec & sp) { sp.kvs.remove(s::k_key_shared_channels); },
                    "format version 3 with 'reap.saliency.model.shared_channels' absent", 4, true);
    expect_rejected(dir, "v3_plain", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_version, 3); },
                    "format version 3 with 'reap.saliency.model.shared_channels' absent", 4);
    expect_rejected(dir, "nowidth", [](g::output_spec & sp) { sp.kvs.set_bool(s::k_key_shared_channels, true); sp.kvs.set_u32(s::k_key_version, 3); },
                    "and 'reap.saliency.model.n_ff_exp' 0", 0);
    expect_rejected(dir, "false", [](g::output_spec & sp) { sp.kvs.set_bool(s::k_key_shared_channels, false); },
                    "'reap.saliency.model.shared_channels' is false", 4, true);
    expect_rejected(dir, "key_type", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_shared_channels, 1); },
                    s::k_key_shared_channels, 4, true);
    expect_rejected(dir, "undeclared", [](g::output_spec & sp) {
        sp.kvs.remove(s::k_key_shared_channels);
        sp.kvs.set_u32(s::k_key_version, 2);
    }, "tensor 'code.sh_energy' is not expected: the archive declares no shared expert channel statistics", 4, true);
    expect_rejected(dir, "missing", [](g::output_spec & sp) {
        for (size_t i = 0; i < sp.tensors.size(); ++i) if (sp.tensors[i].name == "en.sh_reap") sp.tensors.erase(sp.tensors.begin() + (ptrdiff_t) i);
    }, "tensor 'en.sh_reap' is missing", 4, true);
    expect_rejected(dir, "f32", [](g::output_spec & sp) {
        g::output_tensor * t = tensor_named(sp, "en.sh_energy");
        t->type = g::tensor_type::F32;
        t->memory = std::make_shared<std::vector<uint8_t>>(t->memory->size() / 2);
    }, "tensor 'en.sh_energy' has type f32, expected f64", 4, true);
    expect_rejected(dir, "shape", [](g::output_spec & sp) {
        g::output_tensor * t = tensor_named(sp, "code.sh_reap");
        t->ne[0] = 6;
        t->ne[1] = 2;
    }, "tensor 'code.sh_reap' has shape [6, 2], expected [4, 3] (n_ff_exp, n_layer)", 4, true);
    expect_rejected(dir, "routed_shape", [](g::output_spec & sp) {
        g::output_tensor * t = tensor_named(sp, "code.sh_reap");
        t->n_dims = 3;
        t->ne[1] = 1;
        t->ne[2] = 3;
    }, "tensor 'code.sh_reap' has shape [4, 1, 3], expected [4, 3]", 4, true);
    expect_rejected(dir, "nan", [](g::output_spec & sp) { poke(sp, "code.sh_energy", 2 * 4 + 1, std::nan("")); },
                    "'sh_energy' layer 2 channel 1: value is not finite", 4, true);
    expect_rejected(dir, "negative", [](g::output_spec & sp) { poke(sp, "en.sh_reap", 3, -2.0); },
                    "'sh_reap' layer 0 channel 3: negative value -2", 4, true);
    expect_rejected(dir, "dense", [](g::output_spec & sp) { poke(sp, "en.sh_reap", 4 + 2, 2.0); },
                    "'sh_reap' layer 1 channel 2: non-zero value 2 in a layer that is not an MoE layer", 4, true);
    expect_rejected(dir, "v5", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_version, 5); },
                    "version 5 is not supported (this reap reads versions 1 to 4)", 4, true);
    // version 4 says its metric set holds squared norms: an archive without them is refused naming the tensor
    expect_rejected(dir, "v4", [](g::output_spec & sp) { sp.kvs.set_u32(s::k_key_version, 4); },
                    "tensor 'code.ean_sq_sum' is missing", 4, true);
}

// Version 4: calibrate's squared output norms (MSAN) and reap score's weights
// archives round-trip with the documented tensors; an archive without them is
// still version 1 and reads without them; merging one of each keeps what both hold.
TEST(SaliencyArchiveV4, SquaredNormsAndWeightsArchives) {
    const std::string dir = gguf_test::scratch_dir("saliency_v4");
    std::string err;
    const s::fingerprint fp = make_fingerprint();
    s::archive a = make_archive({"code", "en"}, fp, s::metric_set::reap, 400, /*sq_norms=*/true);
    ASSERT_TRUE(s::validate(a, err)) << err;
    const std::string path = write_tmp(a, dir, "sq.gguf");
    s::archive b;
    ASSERT_TRUE(s::read_archive(path, b, err)) << err;
    EXPECT_TRUE(b.has_sq_norms);
    for (size_t i = 0; i < a.domains.size(); ++i) EXPECT_EQ(a.domains[i].ean_sq_sum, b.domains[i].ean_sq_sum);
    g::model m;
    ASSERT_TRUE(g::open_model(path, m, err)) << err;
    uint32_t v = 0;
    ASSERT_TRUE(m.kvs.get_u32(s::k_key_version, v, err)) << err;
    EXPECT_EQ(v, 4u);
    const g::tensor_info * t = m.find_tensor("en.ean_sq_sum");
    ASSERT_NE(t, nullptr);
    double x = 0;   // element (l, e) at l * n_expert + e, from the file's bytes
    ASSERT_TRUE(g::read_tensor_bytes(m, *t, (2 * 8 + 3) * sizeof(double), sizeof(double), &x, err)) << err;
    EXPECT_EQ(x, a.find_domain("en")->ean_sq_sum[a.index(2, 3)]);

    // Σ‖f‖² >= (Σ‖f‖)² / count holds for the simulated norms (Cauchy-Schwarz): a real statistic
    const s::domain_stats & d = *a.find_domain("en");
    for (size_t i = 0; i < a.n_cells(); ++i) {
        if (d.count[i] > 0) EXPECT_GE(d.ean_sq_sum[i] * (1 + 1e-12), d.ean_sum[i] * d.ean_sum[i] / d.count[i]);
    }

    // an archive without squared norms: version 1, no tensor, read without them
    const s::archive old = make_archive({"code"}, fp);
    const std::string old_path = write_tmp(old, dir, "old.gguf");
    g::model om;
    ASSERT_TRUE(g::open_model(old_path, om, err)) << err;
    ASSERT_TRUE(om.kvs.get_u32(s::k_key_version, v, err)) << err;
    EXPECT_EQ(v, 1u);
    EXPECT_EQ(om.find_tensor("code.ean_sq_sum"), nullptr);
    s::archive ob;
    ASSERT_TRUE(s::read_archive(old_path, ob, err)) << err;
    EXPECT_FALSE(ob.has_sq_norms);

    // merged with an old one: the sum holds everything else, and no squared norms
    s::archive merged = a;
    s::archive other = make_archive({"ja"}, fp);
    ASSERT_TRUE(s::merge_into(merged, other, err)) << err;
    EXPECT_FALSE(merged.has_sq_norms);
    for (const auto & dd : merged.domains) EXPECT_TRUE(dd.ean_sq_sum.empty()) << dd.name;
    ASSERT_TRUE(s::validate(merged, err)) << err;
    // two new ones: squared norms add
    s::archive both = a, more = make_archive({"en"}, fp, s::metric_set::reap, 100, true);
    ASSERT_TRUE(s::merge_into(both, more, err)) << err;
    EXPECT_TRUE(both.has_sq_norms);
    EXPECT_EQ(both.find_domain("en")->ean_sq_sum[a.index(1, 2)],
              a.find_domain("en")->ean_sq_sum[a.index(1, 2)] + more.find_domain("en")->ean_sq_sum[a.index(1, 2)]);

    // a weights archive: one domain, aimer only, version 4; above 1 is refused; no merging
    s::archive w = s::make_archive(fp, s::metric_set::weights);
    s::domain_stats & wd = w.add_domain("weights");
    for (int l : fp.moe_layers) {
        for (uint32_t e = 0; e < fp.n_expert; ++e) wd.aimer[w.index(l, e)] = 0.75 + 0.01 * e;
    }
    const std::string wpath = write_tmp(w, dir, "w.gguf");
    s::archive wb;
    ASSERT_TRUE(s::read_archive(wpath, wb, err)) << err;
    EXPECT_EQ(wb.metrics, s::metric_set::weights);
    EXPECT_EQ(wb.domains[0].aimer, wd.aimer);
    EXPECT_TRUE(wb.domains[0].count.empty());
    ASSERT_TRUE(s::check_count_invariant(wb, err)) << err;
    s::archive w2 = w;
    EXPECT_FALSE(s::merge_into(w2, w, err));
    EXPECT_NE(err.find("cannot merge weights archives"), std::string::npos) << err;
    s::archive bad = w;
    bad.domains[0].aimer[w.index(fp.moe_layers[0], 0)] = 1.5;
    EXPECT_FALSE(s::validate(bad, err));
    EXPECT_NE(err.find("above 1"), std::string::npos) << err;
    bad = w;
    bad.add_domain("second");
    EXPECT_FALSE(s::validate(bad, err));
    EXPECT_NE(err.find("one domain"), std::string::npos) << err;
}

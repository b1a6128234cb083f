// test_cli_large_inputs.cpp: reap at the sizes of the public K3-class builds,
// on sparse fixtures (GBs apparent, MBs on disk), through the `reap` binary:
//   * `reap imatrix` on an imatrix with K3 dims (896 experts x 7168, 4 layers,
//     expert entries plus big non-expert ones): the archive holds the numbers
//     computed here from the values written, and the child's peak RSS stays
//     under a bound that does not move with the file's size (a second file a
//     fifth of the size gives the same peak);
//   * a model past 4 GiB: 896 experts, each expert tensor > 2^31 bytes, tensor
//     offsets > 4 GiB, > 6 GiB apparent, every expert slab marked at its start
//     and end: `reap inspect`, `reap plan --budget` (archive written with the
//     saliency library), `reap prune` (one file and --split-max-size) and
//     `reap verify`, with copy_file_range and with the pread/write fallback
//     (REAP_NO_COPY_FILE_RANGE=1); a direct pread of every kept slab's markers
//     proves the right bytes moved, and the outputs stay sparse.
// The writer's holes at that size, in process: test_large_inputs.cpp.
// Links only reap_core.
#include "large_inputs_util.h"
#include "saliency_test_util.h"

#include "gguf/gguf.h"
#include "saliency/archive.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <unistd.h>


// gcc says __SANITIZE_ADDRESS__, clang says __has_feature(address_sanitizer).
#if defined(__SANITIZE_ADDRESS__)
static constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
static constexpr bool kUnderAddressSanitizer = true;
#else
static constexpr bool kUnderAddressSanitizer = false;
#endif
#else
static constexpr bool kUnderAddressSanitizer = false;
#endif

namespace g  = reap::gguf;
namespace sl = reap::saliency;
using gguf_test::scratch_dir;
using namespace large_inputs;

namespace {

// ---- imatrix at K3 dims ------------------------------------------------------------

constexpr int64_t kK3Experts = 896, kK3Embd = 7168, kK3Ff = 2048, kK3Layers = 4;

float down_value(int64_t l, int64_t e, int64_t j) { return 0.5f * (float) ((e + l) % 13 + 1) + 1e-3f * (float) j; }
float down_count(int64_t l, int64_t e) { return (float) ((e + l) % 5); }   // 0: the expert saw nothing

// An imatrix (GGUF) with K3 dims: per layer gate/up/down expert entries; the
// gate/up values and the `extra_floats` values of a non-expert entry per layer
// are zeros from a sparse file, down values are real.
void write_k3_imatrix(const std::string & path, const std::string & blank, int64_t extra_floats) {
    g::output_spec spec;
    spec.kvs.set_string("general.type", "imatrix");
    spec.kvs.set_string_array("imatrix.datasets", {"big.txt"});
    spec.kvs.set_u32("imatrix.chunk_count", 10);
    spec.kvs.set_u32("imatrix.chunk_size", 512);
    for (int64_t l = 0; l < kK3Layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        std::vector<float> counts((size_t) kK3Experts), sums((size_t) (kK3Experts * kK3Ff));
        for (int64_t e = 0; e < kK3Experts; ++e) {
            counts[(size_t) e] = down_count(l, e);
            for (int64_t j = 0; j < kK3Ff; ++j)
                sums[(size_t) (e * kK3Ff + j)] = counts[(size_t) e] == 0 ? 0.f : down_value(l, e, j);
        }
        for (const char * w : {"ffn_gate_exps", "ffn_up_exps"}) {
            spec.tensors.push_back(blank_tensor(tensor(b + w + ".weight.in_sum2", g::tensor_type::F32, {kK3Embd, kK3Experts}), blank));
            spec.tensors.push_back(memory_tensor(tensor(b + w + ".weight.counts", g::tensor_type::F32, {1, kK3Experts}), counts));
        }
        spec.tensors.push_back(memory_tensor(tensor(b + "ffn_down_exps.weight.in_sum2", g::tensor_type::F32, {kK3Ff, kK3Experts}), sums));
        spec.tensors.push_back(memory_tensor(tensor(b + "ffn_down_exps.weight.counts", g::tensor_type::F32, {1, kK3Experts}), counts));
        if (extra_floats > 0) {
            spec.tensors.push_back(blank_tensor(tensor(b + "attn_output.weight.in_sum2", g::tensor_type::F32, {extra_floats, 1}), blank));
            spec.tensors.push_back(memory_tensor(tensor(b + "attn_output.weight.counts", g::tensor_type::F32, {1, 1}), {100.f}));
        }
    }
    write_spec(spec, path);
}

TEST(LargeInputs, ImatrixK3MemoryFlat) {
    const std::string bin = gguf_test::reap_bin();
    if (!gguf_test::exists(bin)) GTEST_SKIP() << "no " << bin;
    const std::string dir = scratch_dir("large-imatrix");
    const int64_t big_extra = 256ll << 20;   // 1 GiB of non-expert values per layer
    blank_file(dir + "/blank", (uint64_t) big_extra * 4);
    write_k3_imatrix(dir + "/big.gguf", dir + "/blank", big_extra);
    write_k3_imatrix(dir + "/small.gguf", dir + "/blank", 0);
    const uint64_t big_size = gguf_test::apparent_size(dir + "/big.gguf"), small_size = gguf_test::apparent_size(dir + "/small.gguf");
    ASSERT_GT(big_size, 4ull << 30);
    ASSERT_LT(small_size * 10, big_size);

    int st = 0;
    const long rss_big = gguf_test::run_peak_rss_kib({bin, "imatrix", dir + "/big.gguf", "-o", dir + "/big.sal.gguf"},
                                                     dir + "/big.log", st);
    ASSERT_EQ(st, 0) << read_text(dir + "/big.log");
    const long rss_small = gguf_test::run_peak_rss_kib({bin, "imatrix", dir + "/small.gguf", "-o", dir + "/small.sal.gguf"},
                                                       dir + "/small.log", st);
    ASSERT_EQ(st, 0) << read_text(dir + "/small.log");
    // The bound: 64 MiB, whatever the file (the gate/up entries alone are
    // 2 x 25.7 MB per layer, the file 4+ GiB); and the same peak for a file
    // a tenth of the size. Under AddressSanitizer (the sanitizer build runs an
    // instrumented reap) the runtime's own shadow memory and allocator caches
    // add about 120 MiB to any process: the bound is 256 MiB there, and the
    // comparison of the two files is what shows the peak is flat.
    const long bound_kib = (kUnderAddressSanitizer ? 256 : 64) << 10;
    EXPECT_LT(rss_big, bound_kib) << "file " << big_size << " bytes";
    EXPECT_LT(rss_small, bound_kib);
    EXPECT_LT(std::labs(rss_big - rss_small), 8 << 10) << rss_big << " vs " << rss_small << " KiB";
    RecordProperty("imatrix_big_file_bytes", std::to_string(big_size));
    RecordProperty("imatrix_big_peak_rss_kib", std::to_string(rss_big));
    RecordProperty("imatrix_small_file_bytes", std::to_string(small_size));
    RecordProperty("imatrix_small_peak_rss_kib", std::to_string(rss_small));
    printf("imatrix K3: file %llu bytes -> peak RSS %ld KiB; file %llu bytes -> %ld KiB\n",
           (unsigned long long) big_size, rss_big, (unsigned long long) small_size, rss_small);

    // The numbers, from the values written.
    sl::archive a;
    std::string err;
    ASSERT_TRUE(sl::read_archive(dir + "/big.sal.gguf", a, err)) << err;
    ASSERT_EQ(a.model.n_expert, (uint32_t) kK3Experts);
    ASSERT_EQ(a.domains.size(), 1u);
    const auto & d = a.domains[0];
    EXPECT_EQ(d.n_tokens, 10 * 512);
    for (int64_t l = 0; l < kK3Layers; ++l) {
        for (int64_t e = 0; e < kK3Experts; ++e) {
            double energy = 0;
            if (down_count(l, e) > 0)
                for (int64_t j = 0; j < kK3Ff; ++j) energy += (double) down_value(l, e, j);
            const size_t i = a.index((int) l, (int) e);
            ASSERT_EQ(d.count[i], (double) down_count(l, e)) << l << "/" << e;
            ASSERT_NEAR(d.energy_sum[i], energy, 1e-9 * (energy + 1)) << l << "/" << e;
        }
    }
    ::unlink((dir + "/big.gguf").c_str());
    ::unlink((dir + "/small.gguf").c_str());
    ::unlink((dir + "/blank").c_str());
}

// ---- a model past 4 GiB ------------------------------------------------------------

constexpr int64_t kE = 896, kD = 1024, kF = 640;              // F32 slabs of kD x kF
constexpr uint64_t kSlab = (uint64_t) kD * kF * 4;             // 2.62 MB per expert
const char * const kExps[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};

// The marker of expert e of expert tensor k: 8 bytes at the start and the
// complement at the end of its slab.
uint64_t marker(int k, int64_t e) { return 0x5eed000000000000ull | ((uint64_t) (k + 1) << 32) | (uint64_t) (e + 1); }

// Writes the fixture: qwen3moe, one MoE block of 896 experts, the three
// expert tensors first (2.35 GB each: > 2^31 bytes; the third starts past
// 4 GiB), zeros from a sparse file, then markers written into the slabs.
void write_big_model(const std::string & path, const std::string & blank) {
    g::output_spec spec;
    auto & kv = spec.kvs;
    kv.set_string("general.architecture", "qwen3moe");
    kv.set_string("general.name", "reap past-4-GiB fixture");
    kv.set_u32("qwen3moe.block_count", 1);
    kv.set_u32("qwen3moe.context_length", 256);
    kv.set_u32("qwen3moe.embedding_length", (uint32_t) kD);
    kv.set_u32("qwen3moe.expert_count", (uint32_t) kE);
    kv.set_u32("qwen3moe.expert_used_count", 8);
    kv.set_u32("qwen3moe.expert_feed_forward_length", (uint32_t) kF);
    kv.set_f32("qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
    for (int k = 0; k < 3; ++k) {
        std::vector<int64_t> ne = k == 2 ? std::vector<int64_t>{kF, kD, kE} : std::vector<int64_t>{kD, kF, kE};
        spec.tensors.push_back(blank_tensor(tensor(std::string("blk.0.") + kExps[k] + ".weight", g::tensor_type::F32, ne), blank));
    }
    std::mt19937 rng(5);
    std::vector<float> router((size_t) (kD * kE));
    for (auto & v : router) v = (float) (rng() % 1000) / 1000.f - 0.5f;
    spec.tensors.push_back(memory_tensor(tensor("blk.0.ffn_gate_inp.weight", g::tensor_type::F32, {kD, kE}), router));
    spec.tensors.push_back(memory_tensor(tensor("blk.0.attn_norm.weight", g::tensor_type::F32, {kD}), std::vector<float>(kD, 1.f)));
    spec.tensors.push_back(memory_tensor(tensor("output_norm.weight", g::tensor_type::F32, {kD}), std::vector<float>(kD, 1.f)));
    spec.tensors.push_back(memory_tensor(tensor("token_embd.weight", g::tensor_type::F32, {kD, 16}), std::vector<float>(kD * 16, 0.25f)));
    write_spec(spec, path);

    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(path, m, err)) << err;
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    for (int k = 0; k < 3; ++k) {
        const g::tensor_info * t = m.find_tensor(std::string("blk.0.") + kExps[k] + ".weight");
        ASSERT_NE(t, nullptr);
        for (int64_t e = 0; e < kE; ++e) {
            const uint64_t a = marker(k, e), z = ~a;
            ASSERT_EQ(::pwrite(fd, &a, 8, (off_t) (t->file_offset + (uint64_t) e * kSlab)), 8);
            ASSERT_EQ(::pwrite(fd, &z, 8, (off_t) (t->file_offset + (uint64_t) (e + 1) * kSlab - 8)), 8);
        }
    }
    ::close(fd);
}

uint64_t pread_u64(int fd, uint64_t off) {
    uint64_t v = 0;
    EXPECT_EQ(::pread(fd, &v, 8, (off_t) off), 8) << "at " << off;
    return v;
}

struct run_result {
    int    status = -1;
    long   rss_kib = 0;
    double seconds = 0;
    std::string log;
};

run_result reap(const std::vector<std::string> & args, const std::string & log, const std::vector<std::string> & env = {}) {
    std::vector<std::string> argv = {gguf_test::reap_bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    run_result r;
    const auto t0 = std::chrono::steady_clock::now();
    r.rss_kib = gguf_test::run_peak_rss_kib(argv, log, r.status, env);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.log = read_text(log);
    printf("  reap %s%s: %.2f s, peak RSS %ld KiB\n", args[0].c_str(), env.empty() ? "" : (" (" + env[0] + ")").c_str(),
           r.seconds, r.rss_kib);
    return r;
}

// Checks, by pread at offsets computed here, that output expert i of every
// expert tensor carries the markers of source expert keep[i]. `files` are the
// output's shards; the expert tensors' offsets come from the header (checked
// against the packed layout computed here: tensors in spec order, slabs of
// n_keep experts, 32-byte alignment, so gate at 0, up at n_keep * kSlab...).
void check_markers(const std::vector<std::string> & files, const std::vector<int> & keep) {
    const uint64_t n = keep.size();
    for (const auto & f : files) {
        g::file_header h;
        std::string err;
        ASSERT_TRUE(g::read_header(f, h, err)) << err;
        const int fd = ::open(f.c_str(), O_RDONLY);
        ASSERT_GE(fd, 0);
        uint64_t expect_offset = 0;   // in this shard's data section
        for (const auto & t : h.tensors) {
            int k = -1;
            for (int j = 0; j < 3; ++j) k = t.name == std::string("blk.0.") + kExps[j] + ".weight" ? j : k;
            if (k < 0) continue;
            EXPECT_EQ(t.offset, expect_offset) << f << " " << t.name;
            ASSERT_EQ(t.nbytes, n * kSlab) << t.name;
            expect_offset += n * kSlab;
            for (uint64_t i = 0; i < n; ++i) {
                const uint64_t at = h.data_offset + t.offset + i * kSlab;
                ASSERT_EQ(pread_u64(fd, at), marker(k, keep[i])) << f << " " << t.name << " expert " << i;
                ASSERT_EQ(pread_u64(fd, at + kSlab - 8), ~marker(k, keep[i])) << f << " " << t.name << " expert " << i;
            }
        }
        ::close(fd);
    }
}

TEST(LargeInputs, ModelPast4GiB) {
    const std::string bin = gguf_test::reap_bin();
    if (!gguf_test::exists(bin)) GTEST_SKIP() << "no " << bin;
    const std::string dir = scratch_dir("large-model");
    blank_file(dir + "/blank", (uint64_t) kE * kSlab);
    const std::string model = dir + "/k.gguf";
    const auto tw = std::chrono::steady_clock::now();
    write_big_model(model, dir + "/blank");
    printf("  fixture written in %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count());
    ::unlink((dir + "/blank").c_str());
    const uint64_t model_size = gguf_test::apparent_size(model);
    ASSERT_GT(model_size, 6ull << 30);
    ASSERT_GT((uint64_t) kE * kSlab, 1ull << 31);
    EXPECT_LT(gguf_test::allocated_bytes(model), 64ull << 20) << "the fixture should be sparse";
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(model, m, err)) << err;
    const g::tensor_info * down = m.find_tensor("blk.0.ffn_down_exps.weight");
    ASSERT_NE(down, nullptr);
    ASSERT_GT(down->file_offset, 4ull << 30);

    // inspect: the sizes past 32 bits, printed whole.
    run_result r = reap({"inspect", model}, dir + "/inspect.log");
    ASSERT_EQ(r.status, 0) << r.log;
    EXPECT_NE(r.log.find("896 routed"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find(" " + std::to_string(model_size) + " "), std::string::npos) << r.log;            // file bytes
    EXPECT_NE(r.log.find(" " + std::to_string(3 * kE * kSlab) + " "), std::string::npos) << r.log;        // expert pool
    EXPECT_NE(r.log.find(" " + std::to_string(3 * kSlab) + " "), std::string::npos) << r.log;             // per expert

    // plan --budget: an archive for this model, from the saliency library.
    sl::fingerprint fp;
    ASSERT_TRUE(sl::model_fingerprint(m, fp, err)) << err;
    sl::archive a = saliency_test::make_archive({"en"}, fp, sl::metric_set::reap, 200);
    ASSERT_TRUE(sl::write_archive(a, dir + "/sal.gguf", err, true)) << err;
    const uint64_t budget = 6500000000ull;   // 6.5 GB: about 826 of 896 experts
    r = reap({"plan", dir + "/sal.gguf", "-m", model, "--budget", std::to_string(budget), "-o", dir + "/plan.json"},
             dir + "/plan.log");
    ASSERT_EQ(r.status, 0) << r.log;
    const auto pj = nlohmann::json::parse(read_text(dir + "/plan.json"));
    std::vector<int> keep;
    for (const auto & layer : pj.at("layers")) keep = layer.at("keep").get<std::vector<int>>();
    ASSERT_GT(keep.size(), 800u);
    ASSERT_LT(keep.size(), (size_t) kE);

    struct variant {
        const char *             name;
        std::vector<std::string> extra;
        std::vector<std::string> env;
    };
    const std::vector<variant> variants = {
        {"crf", {}, {}},
        {"fallback", {}, {"REAP_NO_COPY_FILE_RANGE=1"}},
        {"crf-split", {"--split-max-size", "5G"}, {}},
        {"fallback-split", {"--split-max-size", "5G"}, {"REAP_NO_COPY_FILE_RANGE=1"}},
    };
    for (const auto & v : variants) {
        SCOPED_TRACE(v.name);
        const std::string out = dir + "/" + v.name + ".gguf";
        std::vector<std::string> args = {"prune", "-m", model, "--plan", dir + "/plan.json", "-o", out, "--no-sums"};
        args.insert(args.end(), v.extra.begin(), v.extra.end());
        r = reap(args, dir + "/" + v.name + ".prune.log", v.env);
        ASSERT_EQ(r.status, 0) << r.log;
        const bool split = !v.extra.empty();
        std::vector<std::string> files = split ? std::vector<std::string>{g::split_path(dir + "/" + v.name, 0, 2),
                                                                          g::split_path(dir + "/" + v.name, 1, 2)}
                                               : std::vector<std::string>{out};
        uint64_t total = 0;
        for (const auto & f : files) {
            ASSERT_TRUE(gguf_test::exists(f)) << f << "\n" << r.log;
            total += gguf_test::apparent_size(f);
            EXPECT_LT(gguf_test::allocated_bytes(f), 64ull << 20) << f << ": holes should stay holes";
        }
        if (!split) {
            // the budget was met, and one more expert would not have fit: each
            // adds its three slabs and its router row
            EXPECT_LE(total, budget);
            EXPECT_GT(total + 3 * kSlab + kD * 4, budget);
            EXPECT_GT(total, 4ull << 30);
        } else {
            EXPECT_GT(gguf_test::apparent_size(files[0]), 4ull << 30);
        }
        check_markers(files, keep);
        r = reap({"verify", "-m", model, "--plan", dir + "/plan.json", files[0], "--no-sums"}, dir + "/" + v.name + ".verify.log");
        EXPECT_EQ(r.status, 0) << r.log;
        for (const auto & f : files) ::unlink(f.c_str());
    }
    ::unlink(model.c_str());
}

}  // namespace

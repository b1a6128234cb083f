// test_large_inputs.cpp: the GGUF writer at the sizes of the public K3-class
// builds, in process, on sparse fixtures (MBs apparent, KBs on disk): a sparse
// source's holes stay holes in the output, also when the output ends in one,
// in both copy modes; verify skips a span only where it is a hole in both the
// source and the output. The runs of the reap binary at K3 size (imatrix memory,
// a model past 4 GiB through inspect, plan, prune and verify) are in
// test_cli_large_inputs.cpp.
// Links only reap_core.
#include "large_inputs_util.h"
#include "prune_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fcntl.h>
#include <unistd.h>

namespace g = reap::gguf;
using gguf_test::scratch_dir;
using namespace large_inputs;

namespace {

// The writer keeps a sparse source's holes as holes, also when the output ends
// in one (its size is then set, not written), in both copy modes; the bytes
// read back equal the source's.
TEST(LargeInputs, WriterKeepsHoles) {
    const std::string dir = scratch_dir("large-holes");
    const uint64_t n = 8ull << 20;
    blank_file(dir + "/src", n);
    const int fd = ::open((dir + "/src").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const char mark[] = "middle of a hole";
    ASSERT_EQ(::pwrite(fd, mark, sizeof(mark), (off_t) (n / 2 + 3)), (ssize_t) sizeof(mark));
    ::close(fd);
    for (bool crf : {true, false}) {
        g::output_spec spec;
        spec.kvs.set_string("general.architecture", "none");
        spec.tensors.push_back(memory_tensor(tensor("a", g::tensor_type::F32, {8}), std::vector<float>(8, 1.5f)));
        spec.tensors.push_back(blank_tensor(tensor("b", g::tensor_type::F32, {(int64_t) (n / 4)}), dir + "/src"));
        std::vector<std::string> written;
        std::string err;
        g::write_options wo;
        wo.force = true;
        wo.sync = false;
        wo.copy_file_range = crf;
        ASSERT_TRUE(g::write_output(spec, wo, dir + "/out.gguf", written, err)) << err;
        g::model m;
        ASSERT_TRUE(g::open_model(dir + "/out.gguf", m, err)) << err;
        const g::tensor_info * b = m.find_tensor("b");
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(gguf_test::apparent_size(dir + "/out.gguf"), b->file_offset + n) << "the file ends with b's data";
        EXPECT_LT(gguf_test::allocated_bytes(dir + "/out.gguf"), 256ull << 10);
        const auto src = gguf_test::read_all(dir + "/src"), out = gguf_test::read_all(dir + "/out.gguf");
        ASSERT_EQ(out.size(), b->file_offset + n);
        EXPECT_TRUE(std::equal(src.begin(), src.end(), out.begin() + (std::ptrdiff_t) b->file_offset)) << (crf ? "crf" : "fallback");
    }
}

// verify reads no span that is a hole in both files (both zeros), and still
// finds a byte written into a hole of either, and a truncated output: a sparse
// model of 8 experts (expert tensors all holes), 4 kept.
TEST(LargeInputs, VerifySkipsOnlyHolesOfBoth) {
    const std::string dir = scratch_dir("large-verify-holes");
    constexpr int64_t kDim = 128, kExperts = 8;   // slabs of 64 KiB
    const uint64_t slab = kDim * kDim * 4;
    blank_file(dir + "/blank", slab * kExperts);
    g::output_spec spec;
    spec.kvs.set_string("general.architecture", "qwen3moe");
    spec.kvs.set_u32("qwen3moe.block_count", 1);
    spec.kvs.set_u32("qwen3moe.context_length", 256);
    spec.kvs.set_u32("qwen3moe.embedding_length", (uint32_t) kDim);
    spec.kvs.set_u32("qwen3moe.expert_count", (uint32_t) kExperts);
    spec.kvs.set_u32("qwen3moe.expert_used_count", 2);
    spec.kvs.set_u32("qwen3moe.expert_feed_forward_length", (uint32_t) kDim);
    spec.kvs.set_f32("qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
    for (const char * w : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
        spec.tensors.push_back(blank_tensor(tensor(std::string("blk.0.") + w + ".weight", g::tensor_type::F32, {kDim, kDim, kExperts}),
                                            dir + "/blank"));
    }
    std::vector<float> router((size_t) (kDim * kExperts));
    for (size_t i = 0; i < router.size(); ++i) router[i] = (float) (i % 7) - 3.f;
    spec.tensors.push_back(memory_tensor(tensor("blk.0.ffn_gate_inp.weight", g::tensor_type::F32, {kDim, kExperts}), router));
    spec.tensors.push_back(memory_tensor(tensor("blk.0.attn_norm.weight", g::tensor_type::F32, {kDim}), std::vector<float>(kDim, 1.f)));
    spec.tensors.push_back(memory_tensor(tensor("token_embd.weight", g::tensor_type::F32, {kDim, 16}), std::vector<float>(kDim * 16, 0.25f)));
    write_spec(spec, dir + "/src.gguf");
    g::model m;
    std::string err;
    ASSERT_TRUE(g::open_model(dir + "/src.gguf", m, err)) << err;
    reap::plan p;
    ASSERT_TRUE(prune_test::random_plan(m, 4, 3, p, err)) << err;
    std::vector<std::string> written;
    ASSERT_TRUE(prune_test::prune_to(m, p, dir + "/plan.json", dir + "/out.gguf", written, err, false)) << err;
    ASSERT_LT(gguf_test::allocated_bytes(dir + "/out.gguf"), slab) << "the output should keep the holes";
    reap::prune::verify_options vo;
    vo.check_sums = false;   // the bytes are what is damaged below, not the sums
    reap::prune::verify_report rep;
    ASSERT_TRUE(reap::prune::verify_pruned(m, p, dir + "/out.gguf", vo, rep, err)) << err;
    g::model out;
    ASSERT_TRUE(g::open_model(dir + "/out.gguf", out, err)) << err;
    uint64_t data_bytes = 0;
    for (const auto & t : out.tensors) data_bytes += t.nbytes;
    EXPECT_EQ(rep.bytes_compared, data_bytes) << "every byte counted, the skipped holes too";
    const uint64_t in_hole = out.find_tensor("blk.0.ffn_up_exps.weight")->file_offset + 2 * slab + slab / 2;
    const uint64_t src_hole = m.find_tensor("blk.0.ffn_up_exps.weight")->file_offset + (uint64_t) p.layers[0].keep[2] * slab + slab / 2;
    auto poke = [](const std::string & path, uint64_t at, char c) {
        const int fd = ::open(path.c_str(), O_WRONLY);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(::pwrite(fd, &c, 1, (off_t) at), 1);
        ::close(fd);
    };
    // a byte in a hole of the output
    poke(dir + "/out.gguf", in_hole, 'x');
    rep = {};
    EXPECT_FALSE(reap::prune::verify_pruned(m, p, dir + "/out.gguf", vo, rep, err));
    EXPECT_TRUE(rep.differs) << err;
    EXPECT_NE(err.find("ffn_up_exps"), std::string::npos) << err;
    // the same byte in the source's hole too: equal again
    poke(dir + "/src.gguf", src_hole, 'x');
    g::model m2;
    ASSERT_TRUE(g::open_model(dir + "/src.gguf", m2, err)) << err;
    rep = {};
    EXPECT_TRUE(reap::prune::verify_pruned(m2, p, dir + "/out.gguf", vo, rep, err)) << err;
    // then only in the source (the output's byte back to zero)
    poke(dir + "/out.gguf", in_hole, '\0');
    rep = {};
    EXPECT_FALSE(reap::prune::verify_pruned(m2, p, dir + "/out.gguf", vo, rep, err));
    EXPECT_TRUE(rep.differs) << err;
    // an output that ends inside a hole it should have: truncated, not equal
    poke(dir + "/src.gguf", src_hole, '\0');
    ASSERT_EQ(::truncate((dir + "/out.gguf").c_str(), (off_t) (gguf_test::apparent_size(dir + "/out.gguf") - slab / 2)), 0);
    rep = {};
    EXPECT_FALSE(reap::prune::verify_pruned(m, p, dir + "/out.gguf", vo, rep, err));
    EXPECT_TRUE(rep.differs) << err;
}

}  // namespace

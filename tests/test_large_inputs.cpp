// test_large_inputs.cpp: the GGUF writer at the sizes of the public K3-class
// builds, in process, on sparse fixtures (MBs apparent, KBs on disk): a sparse
// source's holes stay holes in the output, also when the output ends in one,
// in both copy modes. The runs of the reap binary at K3 size (imatrix memory,
// a model past 4 GiB through inspect, plan, prune and verify) are in
// test_cli_large_inputs.cpp.
// Links only reap_core.
#include "large_inputs_util.h"

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

}  // namespace

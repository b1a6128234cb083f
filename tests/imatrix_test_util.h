// imatrix_test_util.h: the imatrix files of test_imatrix.cpp (the reader and
// import, in process) and test_cli_imatrix.cpp (`reap imatrix` end to end):
// GGUF imatrix files in llama-imatrix's layout (<weight>.in_sum2 [n_values,
// n_mat], <weight>.counts [1, n_mat]) with values from one formula, and the
// fixture's small MoE-shaped model (gguf_test_util.h: 4 experts, MoE blocks 0
// and 2) standing for -m.
#pragma once

#include "gguf_test_util.h"

#include "gguf/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace imatrix_test {

constexpr int64_t kE = 4, kF = 32, kD = 64;  // the test model's experts, down input (n_ff_exp), n_embd

inline reap::gguf::output_tensor f32_tensor(const std::string & name, std::vector<int64_t> ne, const std::vector<float> & v) {
    reap::gguf::output_tensor t;
    t.name = name;
    t.type = reap::gguf::tensor_type::F32;
    t.n_dims = (uint32_t) ne.size();
    for (size_t d = 0; d < ne.size(); ++d) t.ne[d] = ne[d];
    auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(float));
    memcpy(bytes->data(), v.data(), bytes->size());
    t.memory = bytes;
    return t;
}

struct fake_entry {
    std::string name;
    int64_t n_values, n_mat;
    std::vector<float> sums, counts;
};

// in_sum2 value of (matrix m, channel j) for counts c: deterministic, > 0 when c > 0.
inline float sum_value(int64_t m, int64_t j, float c) { return c == 0 ? 0.f : c * (0.25f + 0.01f * (float) j + 0.5f * (float) m); }

inline std::vector<fake_entry> default_entries(const std::vector<float> & counts0, const std::vector<float> & counts2) {
    std::vector<fake_entry> es;
    auto exps = [&](const std::string & name, int64_t nv, const std::vector<float> & c) {
        fake_entry e{name, nv, kE, {}, c};
        for (int64_t m = 0; m < kE; ++m)
            for (int64_t j = 0; j < nv; ++j) e.sums.push_back(sum_value(m, j, c[m]));
        es.push_back(e);
    };
    exps("blk.0.ffn_down_exps.weight", kF, counts0);
    exps("blk.0.ffn_up_exps.weight", kD, counts0);
    exps("blk.2.ffn_down_exps.weight", kF, counts2);
    fake_entry dense{"blk.1.ffn_up.weight", kD, 1, std::vector<float>(kD, 3.f), {12.f}};
    es.push_back(dense);
    return es;
}

inline void write_gguf_imatrix(const std::string & path, const std::vector<fake_entry> & es, uint32_t chunk_count = 3,
                               uint32_t chunk_size = 4) {
    reap::gguf::output_spec spec;
    spec.kvs.set_string("general.type", "imatrix");
    spec.kvs.set_string_array("imatrix.datasets", {"calib.txt"});
    spec.kvs.set_u32("imatrix.chunk_count", chunk_count);
    spec.kvs.set_u32("imatrix.chunk_size", chunk_size);
    for (const auto & e : es) {
        spec.tensors.push_back(f32_tensor(e.name + ".in_sum2", {e.n_values, e.n_mat}, e.sums));
        spec.tensors.push_back(f32_tensor(e.name + ".counts", {1, e.n_mat}, e.counts));
    }
    std::string err;
    ASSERT_TRUE(gguf_test::write_fixture(spec, path, err)) << err;
}

struct ImatrixTest : ::testing::Test {
    std::string dir, model_path;
    reap::gguf::model model;
    void SetUp() override {
        dir = gguf_test::scratch_dir(std::string("imatrix-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        model_path = dir + "/model.gguf";
        gguf_test::write_model(model_path);
        std::string err;
        ASSERT_TRUE(reap::gguf::open_model(model_path, model, err)) << err;
    }
};

} // namespace imatrix_test

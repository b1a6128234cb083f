// test_kernel_counts.cpp: the expert counts llama.cpp's fused CUDA top-k MoE
// kernel takes, as compiled into reap (src/plan/kernel_counts.h, generated at
// configure time), against the llama.cpp source itself, read here: the case
// labels of launch_topk_moe_cuda's switch, and the guard of
// ggml_cuda_should_use_topk_moe (powers of two up to a bound, plus named
// exceptions) that must agree with them. Fails when the source's set changes
// and the build did not follow. Then the N restriction of reap plan
// (--multiple-of, --fused-kernel).
#include "plan/kernel_counts.h"
#include "util/file.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace pl = reap::planner;

namespace {

std::string source_text() {
    std::string text, err;
    EXPECT_TRUE(reap::util::read_file(pl::fused_topk_moe_source(), "topk-moe.cu", text, err)) << err;
    return text;
}

// The text of the function whose signature starts with `head`, up to the next top-level "\n}".
std::string function_body(const std::string & text, const std::string & head) {
    const size_t at = text.find(head);
    if (at == std::string::npos) return "";
    const size_t end = text.find("\n}", at);
    return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

TEST(KernelCounts, CompiledListIsTheSourceSwitch) {
    const std::string text = source_text();
    const std::string launch = function_body(text, "void launch_topk_moe_cuda(");
    ASSERT_FALSE(launch.empty()) << "no launch_topk_moe_cuda in " << pl::fused_topk_moe_source();
    const size_t sw = launch.find("switch (n_expert)");
    ASSERT_NE(sw, std::string::npos);
    const std::string body = launch.substr(sw);
    std::set<int64_t> cases;
    const std::regex re(R"(case\s+(\d+)\s*:)");
    for (auto it = std::sregex_iterator(body.begin(), body.end(), re); it != std::sregex_iterator(); ++it) {
        cases.insert(std::stoll((*it)[1]));
    }
    ASSERT_FALSE(cases.empty());
    const auto & compiled = pl::fused_topk_moe_counts();
    EXPECT_EQ(std::set<int64_t>(compiled.begin(), compiled.end()), cases)
        << "the fused top-k MoE counts of " << pl::fused_topk_moe_source() << " changed: reconfigure the build";
}

TEST(KernelCounts, GuardAgreesWithTheSwitch) {
    const std::string text = source_text();
    const std::string guard = function_body(text, "bool ggml_cuda_should_use_topk_moe(");
    ASSERT_FALSE(guard.empty());
    std::smatch m;
    ASSERT_TRUE(std::regex_search(guard, m, std::regex(R"(n_expert\s*>\s*(\d+))")));
    const int64_t bound = std::stoll(m[1]);
    std::set<int64_t> want;
    for (int64_t n = 1; n <= bound; n *= 2) want.insert(n);
    const std::regex ne(R"(n_expert\s*!=\s*(\d+))");
    for (auto it = std::sregex_iterator(guard.begin(), guard.end(), ne); it != std::sregex_iterator(); ++it) {
        want.insert(std::stoll((*it)[1]));
    }
    const auto & compiled = pl::fused_topk_moe_counts();
    EXPECT_EQ(std::set<int64_t>(compiled.begin(), compiled.end()), want);
    for (int64_t n : {3, 96, 160, 384, 640, 896}) EXPECT_FALSE(pl::fused_kernel_takes(n)) << n;
}

TEST(KernelCounts, Restriction) {
    reap::plan_model_facts f;
    f.arch = "qwen3moe";
    f.n_layer = 2;
    f.n_expert = 600;
    f.n_expert_used = 8;
    f.moe_layers = {0, 1};
    pl::count_rule none;
    EXPECT_FALSE(none.any());
    EXPECT_TRUE(none.allows(397));
    pl::count_rule fused;
    fused.fused = true;
    const auto ok = pl::restrict_counts(pl::allowed_keeps(f), fused);
    std::vector<int64_t> want;
    for (int64_t n : pl::fused_topk_moe_counts()) {
        if (n >= 8 && n <= 600) want.push_back(n);
    }
    EXPECT_EQ(ok, want);
    int64_t n = 0;
    std::string err;
    ASSERT_TRUE(pl::largest_allowed(f, fused, 500, n, err)) << err;
    EXPECT_EQ(n, 288);
    ASSERT_TRUE(pl::largest_allowed(f, fused, 600, n, err)) << err;
    EXPECT_EQ(n, 576);
    EXPECT_FALSE(pl::largest_allowed(f, fused, 7, n, err));
    pl::count_rule mult;
    mult.multiple_of = 48;
    ASSERT_TRUE(pl::largest_allowed(f, mult, 500, n, err)) << err;
    EXPECT_EQ(n, 480);
    mult.fused = true;   // multiples of 48 the kernel takes: 288, 576
    ASSERT_TRUE(pl::largest_allowed(f, mult, 575, n, err)) << err;
    EXPECT_EQ(n, 288);
    EXPECT_NE(mult.describe().find("multiple of 48"), std::string::npos);
}

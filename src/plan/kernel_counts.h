// Expert counts that llama.cpp runs fastest: the counts its fused CUDA top-k
// MoE kernel takes (read at configure time from the pinned llama.cpp's
// ggml/src/ggml-cuda/topk-moe.cu, the case labels of launch_topk_moe_cuda; any
// other count falls back to the unfused path), and the restriction of a
// plan's N to them (`reap plan --fused-kernel`) or to multiples of M
// (`--multiple-of M`). Kept apart from planners.* : the planners size and
// rank, this only narrows which N are offered to them.
//
// Core library: no llama.cpp dependency (the list is a generated header).
#pragma once

#include "plan/planners.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap::planner {

// The counts the fused kernel takes, ascending (empty when the source had none).
const std::vector<int64_t> & fused_topk_moe_counts();
// The file they were read from.
const char * fused_topk_moe_source();
bool fused_kernel_takes(int64_t n_expert);
// "1, 2, 4, ..., 576"
std::string fused_counts_text();

// A restriction of N: multiple_of > 0 and/or fused. Neither set: every N.
struct count_rule {
    int64_t multiple_of = 0;
    bool    fused = false;
    bool    any() const { return multiple_of > 0 || fused; }
    bool    allows(int64_t n) const;
    std::string describe() const;   // "a multiple of 8 and a count the fused top-k MoE kernel takes"
};

// The values of `allowed` (ascending) the rule allows.
std::vector<int64_t> restrict_counts(const std::vector<int64_t> & allowed, const count_rule & rule);

// The largest N the model allows and the rule allows that is <= `at_most`; fails naming the rule.
bool largest_allowed(const plan_model_facts & facts, const count_rule & rule, int64_t at_most, int64_t & n_keep,
                     std::string & err);

// fit_budget over the N the rule allows: the largest that fits `budget`, and the
// table of the points evaluated (with `full_table`, up to ~40 of the allowed N).
bool fit_budget_rule(const ranking & r, const plan_model_facts & facts, const size_context & ctx, uint64_t budget,
                     const count_rule & rule, bool full_table, int64_t & n_keep, std::vector<size_point> & table,
                     std::string & err);

// The size table over the N the rule allows (up to ~40, plus `around` and its neighbours).
bool size_table_rule(const ranking & r, const plan_model_facts & facts, const size_context & ctx, int64_t around,
                     const count_rule & rule, std::vector<size_point> & table, std::string & err);

}  // namespace reap::planner

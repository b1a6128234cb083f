// Kernel-friendly expert counts: the fused CUDA top-k MoE kernel's list
// (generated from llama.cpp's source by CMakeLists.txt) and the restriction
// of a plan's N to it or to multiples. See kernel_counts.h.
#include "plan/kernel_counts.h"

#include "reap_fused_counts.h"
#include "util/number_format.h"

#include <algorithm>
#include <map>
#include <set>

namespace reap::planner {

const std::vector<int64_t> & fused_topk_moe_counts() {
    // a leading 0 keeps the initialiser valid when the list is empty
    static const std::vector<int64_t> counts = [] {
        const int64_t raw[] = {0, REAP_FUSED_TOPK_MOE_COUNTS};
        std::vector<int64_t> v(raw + 1, raw + sizeof(raw) / sizeof(raw[0]));
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
        return v;
    }();
    return counts;
}

const char * fused_topk_moe_source() { return REAP_FUSED_TOPK_MOE_SOURCE; }

bool fused_kernel_takes(int64_t n_expert) {
    const auto & c = fused_topk_moe_counts();
    return std::binary_search(c.begin(), c.end(), n_expert);
}

std::string fused_counts_text() {
    std::string s;
    for (int64_t n : fused_topk_moe_counts()) s += (s.empty() ? "" : ", ") + std::to_string(n);
    return s.empty() ? "none known" : s;
}

bool count_rule::allows(int64_t n) const {
    if (multiple_of > 0 && n % multiple_of != 0) return false;
    return !fused || fused_kernel_takes(n);
}

std::string count_rule::describe() const {
    std::string s;
    if (multiple_of > 0) s = "a multiple of " + std::to_string(multiple_of);
    if (fused) s += std::string(s.empty() ? "" : " and ") + "a count llama.cpp's fused top-k MoE kernel takes (" +
                    fused_counts_text() + ")";
    return s.empty() ? "any count" : s;
}

std::vector<int64_t> restrict_counts(const std::vector<int64_t> & allowed, const count_rule & rule) {
    std::vector<int64_t> out;
    for (int64_t n : allowed) {
        if (rule.allows(n)) out.push_back(n);
    }
    return out;
}

bool largest_allowed(const plan_model_facts & facts, const count_rule & rule, int64_t at_most, int64_t & n_keep,
                     std::string & err) {
    const std::vector<int64_t> ok = restrict_counts(allowed_keeps(facts), rule);
    const auto it = std::upper_bound(ok.begin(), ok.end(), at_most);
    if (it == ok.begin()) {
        err = "no N <= " + std::to_string(at_most) + " that the model allows is " + rule.describe() +
              (ok.empty() ? "" : " (the smallest such N is " + std::to_string(ok.front()) + ")");
        return false;
    }
    n_keep = *(it - 1);
    return true;
}

namespace {

// Size and saliency share of keeping n, memoised.
struct pointer {
    const ranking & r;
    const plan_model_facts & facts;
    const size_context & ctx;
    std::map<int64_t, size_point> memo;
    bool get(int64_t n, size_point & pt, std::string & err) {
        const auto it = memo.find(n);
        if (it != memo.end()) { pt = it->second; return true; }
        plan p;
        if (!make_plan(r, facts, n, p, err) || !pruned_bytes(ctx, p, pt.bytes, pt.n_shards, err)) return false;
        pt.n_keep = n;
        pt.share = plan_share(r, p).mean;
        memo[n] = pt;
        return true;
    }
};

// The table: `at` and its neighbours in `ok`, and with `full` ~40 spread over it.
bool table_of(pointer & pts, const std::vector<int64_t> & ok, size_t at, bool full, std::vector<size_point> & table,
              std::string & err) {
    std::set<size_t> idx = {at};
    if (at > 0) idx.insert(at - 1);
    if (at + 1 < ok.size()) idx.insert(at + 1);
    if (full) {
        const size_t n = ok.size(), want = 40, step = n <= want ? 1 : (n + want - 1) / want;
        for (size_t i = 0; i < n; i += step) idx.insert(i);
        idx.insert(n - 1);
    }
    table.clear();
    for (size_t i : idx) {
        size_point pt;
        if (!pts.get(ok[i], pt, err)) return false;
        table.push_back(pt);
    }
    return true;
}

}  // namespace

bool fit_budget_rule(const ranking & r, const plan_model_facts & facts, const size_context & ctx, uint64_t budget,
                     const count_rule & rule, bool full_table, int64_t & n_keep, std::vector<size_point> & table,
                     std::string & err) {
    const std::vector<int64_t> ok = restrict_counts(allowed_keeps(facts), rule);
    if (ok.empty()) {
        err = "no N the model allows is " + rule.describe();
        return false;
    }
    pointer pts{r, facts, ctx, {}};
    size_point pt;
    if (!pts.get(ok.front(), pt, err)) return false;
    if (pt.bytes > budget) {
        err = "budget " + util::format_size(budget) + " is below the smallest N that is " + rule.describe() + ": keeping " +
              std::to_string(ok.front()) + " gives " + util::format_size(pt.bytes);
        return false;
    }
    // sizes grow with N: the last index that fits
    size_t lo = 0, hi = ok.size() - 1;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo + 1) / 2;
        if (!pts.get(ok[mid], pt, err)) return false;
        if (pt.bytes <= budget) lo = mid; else hi = mid - 1;
    }
    n_keep = ok[lo];
    return table_of(pts, ok, lo, full_table, table, err);
}

bool size_table_rule(const ranking & r, const plan_model_facts & facts, const size_context & ctx, int64_t around,
                     const count_rule & rule, std::vector<size_point> & table, std::string & err) {
    const std::vector<int64_t> ok = restrict_counts(allowed_keeps(facts), rule);
    const auto it = std::find(ok.begin(), ok.end(), around);
    if (it == ok.end()) {
        err = "N = " + std::to_string(around) + " is not " + rule.describe();
        return false;
    }
    pointer pts{r, facts, ctx, {}};
    return table_of(pts, ok, (size_t) (it - ok.begin()), true, table, err);
}

}  // namespace reap::planner

// A plan against a model: the facts of the model a plan must agree with
// (plan_model_facts), the width a model can be cut to, and validate_plan, the
// check every command runs before it acts on a plan.
#include "plan/plan.h"
#include "plan/plan_internal.h"

#include "moe/layout_gguf.h"
#include "moe/width.h"

#include <string>
#include <vector>

namespace reap {

namespace {

std::string range_list(const std::vector<int> & v) {
    // "1..3, 5, 7..9"
    std::string s;
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
        if (!s.empty()) s += ", ";
        s += std::to_string(v[i]);
        if (j > i) s += ".." + std::to_string(v[j]);
        i = j + 1;
    }
    return s.empty() ? "none" : s;
}

}  // namespace

plan_model_facts facts_of(const moe::layout & lay) {
    plan_model_facts f;
    f.arch = lay.arch;
    f.n_layer = lay.n_layer;
    f.n_expert = lay.n_expert;
    f.n_expert_used = lay.n_expert_used;
    f.n_group = lay.router.n_group;
    f.n_group_used = lay.router.n_group_used;
    f.moe_layers = lay.moe_layers;
    return f;
}

plan_model_facts facts_of(const moe::layout & lay, const gguf::model & m) {
    plan_model_facts f = facts_of(lay);
    moe::expert_width w;
    std::string err;
    if (!moe::expert_width_of(m, lay, w, err)) {
        f.width_refusal = err;
    } else {
        f.n_ff_exp = w.n_ff;
        f.down_block = w.down_block;
        f.down_type_name = gguf::type_name(w.down_type);
        f.width_refusal = w.refusal;
        f.shared_width = w.shared_width;
        f.shared_cut = w.shared_cut;
    }
    return f;
}

std::string width_refusal(int64_t k, int64_t n_ff, int64_t block, const std::string & type_name) {
    if (k < 1 || k > n_ff) {
        return "width " + std::to_string(k) + " out of range [1, " + std::to_string(n_ff) + "] (the experts' width is " +
               std::to_string(n_ff) + ")";
    }
    if (block > 1 && k % block != 0) {
        const int64_t below = k / block * block;
        return "width " + std::to_string(k) + " is not a multiple of " + std::to_string(block) + ", the block size of " +
               type_name + " (the down projections' type: their rows are requantised in whole blocks); " +
               (below > 0 ? "nearest: " + std::to_string(below) + (below + block <= n_ff ? " or " + std::to_string(below + block) : "")
                          : (block <= n_ff ? "smallest: " + std::to_string(block) : "no width below " + std::to_string(n_ff) + " fits"));
    }
    return "";
}

std::string width_refusal(int64_t k, const plan_model_facts & m) {
    const std::string why = width_refusal(k, m.n_ff_exp, m.down_block, m.down_type_name);
    return why.empty() ? moe::shared_width_refusal(m.shared_width, m.n_ff_exp, m.down_block, k) : why;
}

// Whether `ch` is K ascending channels in [0, n_ff).
bool channel_list_ok(const std::vector<int64_t> & ch, int64_t n_ff, int64_t K) {
    bool ok = int64_t(ch.size()) == K;
    for (size_t j = 0; ok && j < ch.size(); ++j) ok = ch[j] >= 0 && ch[j] < n_ff && (j == 0 || ch[j] > ch[j - 1]);
    return ok;
}

// A layer's shared channels: K of them exactly when the model's shared
// expert is cut with the routed ones (llama4), none otherwise.
bool validate_shared_channels(const plan & p, const plan_model_facts & m, const plan_layer & l, std::string & err) {
    const std::string lwho = "plan: layer " + std::to_string(l.layer);
    const bool want = p.has_width() && m.shared_cut;
    if (!want && !l.shared_channels.empty()) {
        err = lwho + ": lists shared-expert channels, but " +
              (p.has_width() ? "the model's shared experts (if any) are not cut in width"
                             : std::string("the plan does not cut width"));
        return false;
    }
    if (want && !channel_list_ok(l.shared_channels, p.width_n_ff, p.width_keep)) {
        err = lwho + (l.shared_channels.empty() ? ": lists no shared-expert channels" : ": shared-expert channels") +
              " (llama.cpp's " + m.arch + " loader sizes its shared expert with the routed experts' width, so a width plan "
              "keeps " + std::to_string(p.width_keep) + " ascending channels of it in [0, " + std::to_string(p.width_n_ff) +
              ") in every MoE layer)";
        return false;
    }
    return true;
}

// The width part of validate_plan: the plan's n_ff is the model's and K suits
// the down tensors' blocks.
bool validate_width(const plan & p, const plan_model_facts & m, std::string & err) {
    if (!p.has_width()) {
        for (const plan_layer & l : p.layers) {
            if (!validate_shared_channels(p, m, l, err)) return false;
        }
        return true;
    }
    if (m.n_ff_exp <= 0) {
        err = "plan: cuts expert width, but " + (m.width_refusal.empty() ? std::string("the model's expert width is unknown")
                                                                         : m.width_refusal);
        return false;
    }
    if (p.width_n_ff != m.n_ff_exp) {
        err = "plan: made for experts of width " + std::to_string(p.width_n_ff) + ", the model's are " + std::to_string(m.n_ff_exp);
        return false;
    }
    const std::string why = width_refusal(p.width_keep, m);
    if (!why.empty()) {
        err = "plan: " + why;
        return false;
    }
    for (const plan_layer & l : p.layers) {   // plans built in code did not go through parse_channels
        const std::string lwho = "plan: layer " + std::to_string(l.layer);
        if (l.channels.size() != l.keep.size()) {
            err = lwho + ": lists channels for " + std::to_string(l.channels.size()) + " experts, keeps " +
                  std::to_string(l.keep.size());
            return false;
        }
        for (size_t i = 0; i < l.channels.size(); ++i) {
            if (!channel_list_ok(l.channels[i], p.width_n_ff, p.width_keep)) {
                err = lwho + ": channels[" + std::to_string(i) + "] must be " + std::to_string(p.width_keep) +
                      " ascending channels in [0, " + std::to_string(p.width_n_ff) + ")";
                return false;
            }
        }
        if (!validate_shared_channels(p, m, l, err)) return false;
    }
    return true;
}

bool validate_plan(const plan & p, const plan_model_facts & m, std::string & err) {
    const std::string who = "plan";
    auto mismatch = [&](const char * what, const std::string & pv, const std::string & mv) {
        err = who + ": made for a model with " + what + " " + pv + ", the model has " + mv;
        return false;
    };
    if (p.arch != m.arch) return mismatch("arch", "'" + p.arch + "'", "'" + m.arch + "'");
    if (p.n_layer != m.n_layer) return mismatch("n_layer", std::to_string(p.n_layer), std::to_string(m.n_layer));
    if (p.n_expert != m.n_expert) return mismatch("n_expert", std::to_string(p.n_expert), std::to_string(m.n_expert));
    if (p.n_expert_used != m.n_expert_used)
        return mismatch("n_expert_used", std::to_string(p.n_expert_used), std::to_string(m.n_expert_used));
    if (p.n_keep < m.n_expert_used) {
        err = who + ": n_keep " + std::to_string(p.n_keep) + " is below n_expert_used " + std::to_string(m.n_expert_used) +
              " (the router picks " + std::to_string(m.n_expert_used) + " experts per token; the model could not run)";
        return false;
    }
    if (p.n_keep > m.n_expert || p.n_keep < 1) {
        err = who + ": n_keep " + std::to_string(p.n_keep) + " out of range [1, " + std::to_string(m.n_expert) + "]";
        return false;
    }
    if (!validate_width(p, m, err)) return false;
    const int64_t n_group = m.n_group > 1 ? m.n_group : 1;
    if (n_group > 1) {
        if (m.n_expert % n_group != 0) {
            err = who + ": the model's " + std::to_string(m.n_expert) + " experts do not split into " +
                  std::to_string(n_group) + " groups";
            return false;
        }
        if (p.n_keep % n_group != 0) {
            err = who + ": group-limited router (" + std::to_string(n_group) + " groups of " +
                  std::to_string(m.n_expert / n_group) + "): n_keep " + std::to_string(p.n_keep) +
                  " is not a multiple of the group count; every group must keep the same number";
            return false;
        }
        const int64_t per = p.n_keep / n_group;
        if (per < 2) {
            err = who + ": group-limited router (" + std::to_string(n_group) + " groups): n_keep " +
                  std::to_string(p.n_keep) + " leaves " + std::to_string(per) +
                  " expert(s) per group; llama.cpp scores each group by its best two experts, keep at least " +
                  std::to_string(2 * n_group);
            return false;
        }
        if (m.n_group_used > 0 && per * m.n_group_used < m.n_expert_used) {
            err = who + ": group-limited router: " + std::to_string(per) + " experts per group in the " +
                  std::to_string(m.n_group_used) + " selected groups cannot supply the " +
                  std::to_string(m.n_expert_used) + " experts each token uses; keep at least " +
                  std::to_string(((m.n_expert_used + m.n_group_used - 1) / m.n_group_used) * n_group);
            return false;
        }
    }
    // the layers: exactly the MoE layers
    for (const plan_layer & l : p.layers) {
        if (!std::binary_search(m.moe_layers.begin(), m.moe_layers.end(), l.layer)) {
            err = who + ": layer " + std::to_string(l.layer) + " is not an MoE layer of the model (MoE layers: " +
                  range_list(m.moe_layers) + ")";
            return false;
        }
    }
    for (int layer : m.moe_layers) {
        if (!p.find_layer(layer)) {
            err = who + ": MoE layer " + std::to_string(layer) + " is missing from the plan (every MoE layer must be listed)";
            return false;
        }
    }
    std::vector<uint8_t> seen;
    for (const plan_layer & l : p.layers) {
        const std::string lwho = who + ": layer " + std::to_string(l.layer);
        if (int64_t(l.keep.size()) != p.n_keep) {
            err = lwho + ": keeps " + std::to_string(l.keep.size()) + " experts, n_keep is " + std::to_string(p.n_keep) +
                  " (every MoE layer keeps the same count)";
            return false;
        }
        seen.assign(size_t(m.n_expert), 0);
        for (size_t k = 0; k < l.keep.size(); ++k) {
            if (!check_keep_id(lwho, k, l.keep[k], m.n_expert, seen, err)) return false;
        }
        if (n_group > 1) {
            // llama.cpp assigns expert e to group e / (n_expert / n_group), in the
            // output too: so the output's i-th expert, in group i / (n_keep / n_group),
            // must come from that same source group, which also makes every
            // group keep the same count.
            const int64_t src_per = m.n_expert / n_group;
            const int64_t out_per = p.n_keep / n_group;
            std::vector<int64_t> per_group(size_t(n_group), 0);
            for (int64_t e : l.keep) per_group[size_t(e / src_per)]++;
            for (int64_t g = 0; g < n_group; ++g) {
                if (per_group[size_t(g)] != out_per) {
                    err = lwho + ": group-limited router (" + std::to_string(n_group) + " groups of " +
                          std::to_string(src_per) + "): keeps " + std::to_string(per_group[size_t(g)]) + " in group " +
                          std::to_string(g) + ", " + std::to_string(out_per) +
                          " expected; every group must keep the same number";
                    return false;
                }
            }
            for (size_t k = 0; k < l.keep.size(); ++k) {
                const int64_t want = int64_t(k) / out_per;
                const int64_t got = l.keep[k] / src_per;
                if (got != want) {
                    err = lwho + ": group-limited router: output expert " + std::to_string(k) + " falls in output group " +
                          std::to_string(want) + " but is source expert " + std::to_string(l.keep[k]) + " of group " +
                          std::to_string(got) + " (keep the experts of each group together, groups in order)";
                    return false;
                }
            }
        }
    }
    return true;
}

bool model_layout(const gguf::model & m, moe::layout & out, std::string & err) {
    return moe::layout_of(m, out, err);
}

bool validate_plan(const plan & p, const gguf::model & m, std::string & err) {
    moe::layout lay;
    if (!model_layout(m, lay, err)) return false;
    return validate_plan(p, p.has_width() ? facts_of(lay, m) : facts_of(lay), err);
}

} // namespace reap

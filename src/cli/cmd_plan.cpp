// reap plan: turn a saliency archive into a keep-list per MoE layer for a
// model (--keep N, --ratio R or --budget SIZE), print what it keeps and
// write the plan JSON with its receipts (receipts.h). A thin layer over reap::planner (planners.h): the
// scoring, ordering, group rules, super-expert protection and the exact
// budget search live there.
#include "cli/args.h"
#include "cli/plan_flags.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "plan/kernel_counts.h"
#include "plan/plan.h"
#include "plan/planners.h"
#include "plan/provenance.h"
#include "plan/receipts.h"
#include "saliency/archive.h"
#include "util/json.h"
#include "util/number_format.h"
#include "util/file.h"
#include "util/sha256.h"
#include "util/summary.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

namespace pl = reap::planner;

struct plan_params {
    std::string              saliency;
    std::string              model;
    std::string              output;
    int64_t                  keep = -1;
    double                   ratio = -1;
    std::string              budget_text;
    uint64_t                 budget = 0;
    pl::rank_options         rank;
    bool                     method_given = false;
    uint64_t                 split_max_bytes = 0;
    uint64_t                 split_max_tensors = 0;
    bool                     stamp = true;
    bool                     dry_run = false;
    bool                     force = false;
    bool                     json = false;
    pl::count_rule           counts;   // --multiple-of / --fused-kernel
};

// The command's options, parsed and printed from one table. `n_how` counts
// --keep, --ratio and --budget (exactly one is wanted).
void declare(reap::cli::options & t, plan_params & p, int & n_how) {
    t.about(
        "Chooses which routed experts each MoE layer of MODEL keeps, from a saliency\n"
        "archive (reap calibrate, reap imatrix, reap merge) measured on that model, and\n"
        "writes the plan that reap prune executes. Every MoE layer keeps the same count N.\n");
    t.section("how many (exactly one):");
    t.custom("--keep", "N", "keep N experts per layer (n_expert_used <= N <= n_expert)",
             [&p, &n_how](const std::string & v, std::string & err) {
                 ++n_how;
                 return reap::cli::parse_integer("--keep", v, 1, INT64_MAX, p.keep, err);
             });
    t.custom("--ratio", "R",
             "remove the fraction R of the routed experts: N = n_expert - round(R * n_expert) (0 <= R < 1; with "
             "expert groups, N is rounded down to a multiple of the group count)",
             [&p, &n_how](const std::string & v, std::string & err) {
                 ++n_how;
                 char * end = nullptr;
                 p.ratio = strtod(v.c_str(), &end);
                 if (v.empty() || *end || !(p.ratio >= 0.0 && p.ratio < 1.0)) {
                     err = "--ratio: '" + v + "' is not a number in [0, 1) (the fraction of routed experts removed)";
                     return false;
                 }
                 return true;
             });
    t.custom("--budget", "SIZE",
             "the largest allowed N whose pruned file fits SIZE bytes. The size is exact: the bytes reap prune will "
             "write (headers, padding and provenance keys included; the sum of all shards with --split-max-size / "
             "--split-max-tensors). SIZE is a number with an optional unit: K/KB, M/MB, G/GB, T/TB are DECIMAL (10^3 "
             ".. 10^12, as disk vendors and gguf-split count), KiB/MiB/GiB/TiB are BINARY (2^10 .. 2^40); no unit = "
             "bytes; decimals allowed (512G, 277.5GB, 300GiB).",
             [&p, &n_how](const std::string & v, std::string & err) {
                 ++n_how;
                 if (!pl::parse_size(v, p.budget, err)) {
                     err = "--budget: " + err;
                     return false;
                 }
                 p.budget_text = v;
                 return true;
             });

    t.integer("--multiple-of", "K", "only an N that is a multiple of K (with --ratio: rounded down to one; with "
              "--budget: the largest such N that fits)", 1, INT64_MAX, p.counts.multiple_of);
    t.flag("--fused-kernel",
           "only an N that llama.cpp's fused CUDA top-k MoE kernel takes (read from the llama.cpp source built "
           "against: " + pl::fused_counts_text() + "; other counts run the unfused path); rounds as --multiple-of",
           p.counts.fused);

    reap::cli::declare_ranking(t, p.rank, p.method_given);

    t.section("other options:");
    t.text("-m, --model", "MODEL.gguf",
           "the model the plan is for (first shard of a split set ok); the archive must come from it (same router weights)",
           p.model);
    t.text("-o, --output", "PLAN.json", "where to write the plan", p.output);
    reap::cli::declare_split_max_size(t, p.split_max_bytes);
    t.integer("--split-max-tensors", "N", "likewise", 1, INT64_MAX, p.split_max_tensors);
    t.flag("--no-stamp", "size as reap prune --no-stamp will write", p.stamp, false);
    t.flag("--dry-run",
           "print the table N -> exact size -> saliency retained and the chosen N; write nothing (-o not needed)",
           p.dry_run);
    t.flag("--force", "replace an existing PLAN.json", p.force);
    t.flag("--json",
           "print the plan as one JSON object (the document written to -o, with the receipts in its provenance; "
           "plus \"output\" and, with --dry-run or --budget, \"size_table\") instead of the report",
           p.json);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (!p.saliency.empty()) {
            err = "unexpected argument '" + a + "' (one saliency archive; reap merge combines several)";
            return false;
        }
        p.saliency = a;
        return true;
    });
}

std::string percent(double x) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.2f%%", 100.0 * x);
    return buf;
}

// The receipts block: safety margin, saliency retained, dead and super
// experts, every long list summarised (util/summary.h); the full data are in
// the plan's provenance and in --json.
void print_receipts(const pl::receipts & rc, const pl::ranking & rk, bool protect_super) {
    namespace u = reap::util;
    const bool all_domains = rk.domains.size() == rk.archive_domains.size();
    printf("  receipts (%s score within each domain; rank 1 = most salient):\n", rc.method.c_str());
    const pl::margin_summary ms = pl::summarize_margin(rc);
    if (ms.n_layers == 0) {
        printf("    safety margin: none (no expert is pruned)\n");
    } else {
        printf("    safety margin: no pruned expert ranks better than %" PRId64 " of %" PRId64 " in any %sdomain, in any layer "
               "(median layer: %g; %s, rank %" PRId64 " in %s)\n",
               ms.min, rc.n_expert, all_domains ? "" : "chosen ", ms.median, pl::expert_name(ms.layer, ms.expert).c_str(), ms.min,
               ms.domain.c_str());
        std::vector<std::string> per;
        for (size_t d = 0; d < rc.domains.size(); ++d) {
            const pl::margin_summary m = pl::summarize_margin(rc, (int) d);
            char buf[160];
            if (m.n_layers == 0) snprintf(buf, sizeof(buf), "%s -", rc.domains[d].c_str());
            else snprintf(buf, sizeof(buf), "%s %" PRId64 " (median %g)", rc.domains[d].c_str(), m.min, m.median);
            per.push_back(std::string(buf) + (rc.in_plan[d] ? "" : " [not planned on]"));
        }
        printf("      per domain: %s\n", u::first_few(per).c_str());
    }
    const u::summary sh = pl::summarize_share(rc);
    if (rc.layers.size() <= u::k_list_full) {
        std::string per;
        for (const auto & l : rc.layers) per += " L" + std::to_string(l.layer) + " " + percent(l.share);
        printf("    saliency retained: mean %s;%s\n", percent(sh.mean).c_str(), per.c_str());
    } else {
        printf("    saliency retained: mean %s over %zu layers (%s)\n", percent(sh.mean).c_str(), sh.count,
               u::min_median_max({sh.count, 100 * sh.min, 100 * sh.median, 100 * sh.max, 0}, "%.2f%%").c_str());
    }
    std::vector<std::string> per;
    for (size_t d = 0; d < rc.domains.size(); ++d) {
        const u::summary x = pl::summarize_share(rc, (int) d);
        per.push_back(rc.domains[d] + " " + percent(x.mean) + " (min " + percent(x.min) + ")" + (rc.in_plan[d] ? "" : " [not planned on]"));
    }
    printf("      per domain (mean over layers): %s\n", u::first_few(per).c_str());

    // dead experts: count, layers, count per layer, the first few
    if (rc.dead.empty()) {
        printf("    dead experts (no token routed in any domain): none\n");
    } else {
        std::map<int, int> per_layer;
        std::vector<std::string> names;
        size_t kept = 0;
        for (size_t i = 0; i < rc.dead.size(); ++i) {
            per_layer[rc.dead[i].layer]++;
            names.push_back(pl::expert_name(rc.dead[i].layer, rc.dead[i].expert));
            kept += rc.dead_kept[i] ? 1 : 0;
        }
        std::vector<double> counts;
        for (const auto & [l, n] : per_layer) counts.push_back(n);
        const u::summary c = u::summarize(counts);
        char range[64];
        if (c.min == c.max) snprintf(range, sizeof(range), "%g per layer", c.min);
        else snprintf(range, sizeof(range), "%g..%g per layer, median %g", c.min, c.max, c.median);
        printf("    dead experts (no token routed in any domain): %zu in %zu of %zu layers (%s), %zu pruned%s: %s\n",
               rc.dead.size(), per_layer.size(), rc.layers.size(), range, rc.dead.size() - kept,
               kept ? (", " + std::to_string(kept) + " KEPT").c_str() : "", u::first_few(names).c_str());
    }
    if (rk.super_threshold <= 0) {
        printf("    super experts: not detectable (no max_norm in this archive)\n");
    } else if (rc.super.empty()) {
        printf("    super experts (max_norm > %.4g): none\n", rk.super_threshold);
    } else {
        std::vector<std::string> names;
        size_t kept = 0;
        for (size_t i = 0; i < rc.super.size(); ++i) {
            const auto & x = rc.super[i];
            char buf[200];
            snprintf(buf, sizeof(buf), "%s (%.4g, %.1fx, %.1f%%%s)", pl::expert_name(x.layer, x.expert).c_str(), x.value,
                     x.norm_ratio, 100.0 * x.score_share, rc.super_kept[i] ? "" : ", PRUNED");
            names.push_back(buf);
            kept += rc.super_kept[i] ? 1 : 0;
        }
        printf("    super experts (max_norm > %.4g, %s): %zu, %zu kept (max_norm, x the layer's median max_norm, share of the "
               "layer's score): %s\n",
               rk.super_threshold,
               protect_super ? "protected" : "NOT protected: --no-protect-super", rc.super.size(), kept, u::first_few(names).c_str());
    }
    if (!all_domains) {
        std::vector<std::string> names;
        for (const auto & x : rk.never_routed) names.push_back(pl::expert_name(x.layer, x.expert));
        if (names.empty()) printf("    never routed in the chosen domains (removed first): none\n");
        else printf("    never routed in the chosen domains (removed first): %zu: %s\n", names.size(), u::first_few(names).c_str());
    }
}

// Whether llama.cpp's fused CUDA top-k MoE kernel takes the model's count and the chosen N.
void print_fused_note(int64_t n_expert, int64_t n_keep) {
    const bool src = pl::fused_kernel_takes(n_expert), out = pl::fused_kernel_takes(n_keep);
    if (src && out) return;
    printf("  fused top-k MoE kernel (llama.cpp CUDA; takes %s):", pl::fused_counts_text().c_str());
    if (!src) printf(" the model's %" PRId64 " experts are not one of them;", n_expert);
    printf(" N = %" PRId64 " %s\n", n_keep,
           out ? "is" : "is not: the pruned model routes through the unfused path (--fused-kernel picks one)");
}

} // namespace

int cmd_plan(int argc, char ** argv) {
    plan_params params;
    int n_how = 0;
    reap::cli::options t("plan",
                         "usage: reap plan SALIENCY.gguf -m MODEL.gguf (--keep N | --ratio R | --budget SIZE) [options] -o PLAN.json");
    declare(t, params, n_how);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    if (params.saliency.empty()) return t.usage_error("no saliency archive given");
    if (params.model.empty()) return t.usage_error("no model given (-m MODEL.gguf)");
    if (n_how != 1) {
        return t.usage_error(n_how == 0 ? "say how many experts to keep: --keep N, --ratio R or --budget SIZE"
                                        : "give only one of --keep, --ratio and --budget");
    }
    if (params.output.empty() && !params.dry_run) return t.usage_error("no output given (-o PLAN.json)");
    auto fail = [](const std::string & msg) { return reap::cli::fail("plan", msg); };
    std::string err;

    reap::gguf::model model;
    if (!reap::gguf::open_model(params.model, model, err)) return fail(err);
    if (!params.output.empty()) {   // the output rule (util/file.h)
        std::vector<std::pair<std::string, std::string>> inputs = {{"saliency archive", params.saliency}};
        for (const auto & sh : model.shards) inputs.emplace_back("model file", sh.path);
        if (!reap::util::check_output(params.output, inputs, params.force, err)) return fail(err);
    }
    reap::moe::layout lay;
    if (!reap::model_layout(model, lay, err)) return fail(params.model + ": " + err);
    const reap::plan_model_facts facts = reap::facts_of(lay);

    reap::saliency::fingerprint fp;
    if (!reap::saliency::model_fingerprint(model, fp, err)) return fail(params.model + ": " + err);
    reap::saliency::archive arch;
    if (!reap::saliency::read_archive(params.saliency, arch, err)) return fail(err);
    if (!reap::saliency::fingerprints_match(arch.model, fp, err)) return fail(params.saliency + " vs " + params.model + ": " + err);
    if (!params.method_given) params.rank.how = pl::default_method(arch.metrics);

    pl::ranking rk;
    if (!pl::rank_experts(arch, facts.n_group, params.rank, rk, err)) return fail(err);

    pl::size_context sctx;
    sctx.model = &model;
    sctx.layout = &lay;
    sctx.prune.stamp = params.stamp;
    sctx.prune.version = REAP_VERSION;
    sctx.prune.plan_sha256 = std::string(64, '0');   // the real hash has the same length
    sctx.write.split_max_bytes = params.split_max_bytes;
    sctx.write.split_max_tensors = params.split_max_tensors;

    int64_t n_keep = 0;
    std::string note;
    std::vector<pl::size_point> table;
    const pl::count_rule & rule = params.counts;
    if (params.keep >= 0) {
        if (!pl::keep_allowed(facts, params.keep, err)) return fail("--keep " + std::to_string(params.keep) + ": " + err);
        if (rule.any() && !rule.allows(params.keep)) {
            return fail("--keep " + std::to_string(params.keep) + " is not " + rule.describe());
        }
        n_keep = params.keep;
    } else if (params.ratio >= 0) {
        if (!pl::keep_from_ratio(params.ratio, facts, n_keep, note, err)) return fail(err);
        if (rule.any() && !rule.allows(n_keep)) {
            const int64_t was = n_keep;
            if (!pl::largest_allowed(facts, rule, was, n_keep, err)) return fail("--ratio: " + err);
            note += (note.empty() ? "" : "; ") + std::string("N = ") + std::to_string(was) + " rounded down to " +
                    std::to_string(n_keep) + ", " + rule.describe();
        }
    } else if (rule.any()) {
        if (!pl::fit_budget_rule(rk, facts, sctx, params.budget, rule, params.dry_run, n_keep, table, err)) return fail("--budget " + params.budget_text + ": " + err);
    } else {
        if (!pl::fit_budget(rk, facts, sctx, params.budget, params.dry_run, n_keep, table, err)) return fail("--budget " + params.budget_text + ": " + err);
    }
    if (params.dry_run && table.empty()) {
        // the table around the chosen N, for --keep / --ratio too
        if (rule.any() ? !pl::size_table_rule(rk, facts, sctx, n_keep, rule, table, err)
                       : !pl::size_table(rk, facts, sctx, n_keep, table, err)) return fail(err);
    }

    reap::plan plan;
    if (!pl::make_plan(rk, facts, n_keep, plan, err)) return fail(err);
    plan.model_sha256 = reap::model_header_sha256(model);
    uint64_t bytes = 0;
    uint32_t n_shards = 1;
    if (!pl::pruned_bytes(sctx, plan, bytes, n_shards, err)) return fail(err);

    pl::plan_origin origin;
    origin.tool = "reap plan";
    origin.saliency_path = params.saliency;
    if (!reap::util::sha256_file(params.saliency, origin.saliency_sha256, err)) return fail(err);
    origin.metric_set = reap::saliency::metric_set_name(arch.metrics);
    pl::plan_request & req = origin.request;
    if (params.keep >= 0) req.size = {pl::size_kind::keep, std::to_string(params.keep), params.keep};
    if (params.ratio >= 0) req.size = {pl::size_kind::ratio, "", 0, params.ratio};
    if (!params.budget_text.empty()) req.size = {pl::size_kind::budget, params.budget_text, 0, 0, params.budget};
    req.split_max_bytes = params.split_max_bytes;
    req.split_max_tensors = params.split_max_tensors;
    req.stamp = params.stamp;
    req.multiple_of = rule.multiple_of;
    req.fused_kernel = rule.fused;
    origin.predicted_bytes = bytes;
    origin.predicted_shards = n_shards;
    pl::record_origin(plan, origin, REAP_VERSION);
    const nlohmann::json & prov = plan.provenance;

    pl::receipts rc;
    if (!pl::plan_receipts(rk, plan, rc, err)) return fail(err);

    if (params.json) {
        nlohmann::json j = reap::plan_to_json(plan);
        j["output"] = params.dry_run ? nlohmann::json(nullptr) : nlohmann::json(params.output);
        if (!table.empty()) {
            nlohmann::json t = nlohmann::json::array();
            for (const auto & pt : table) {
                t.push_back({{"n_keep", pt.n_keep}, {"bytes", pt.bytes}, {"shards", pt.n_shards}, {"saliency_retained", pt.share},
                             {"over_budget", !params.budget_text.empty() && pt.bytes > params.budget}});
            }
            j["size_table"] = t;
        }
        if (!params.dry_run && !reap::write_plan(plan, params.output, params.force, err)) return fail(err);
        printf("%s\n", reap::util::json_text(j, 2).c_str());
        return 0;
    }

    // report
    const uint64_t src_bytes = model.file_bytes();
    printf("reap plan: %s (%s, %zu MoE layers, %" PRId64 " experts, top-%" PRId64 "%s)\n", params.model.c_str(), lay.arch.c_str(),
           lay.moe_layers.size(), lay.n_expert, lay.n_expert_used,
           facts.n_group > 1 ? (", " + std::to_string(facts.n_group) + " expert groups").c_str() : "");
    std::string doms;
    for (size_t i = 0; i < rk.domains.size(); ++i) doms += (i ? "," : "") + rk.domains[i];
    printf("  saliency %s: method %s, domains %s%s\n", params.saliency.c_str(), pl::method_name(params.rank.how), doms.c_str(),
           params.rank.cons == pl::consensus::minrank ? ", consensus minrank" : "");
    if (!note.empty()) printf("  note: %s\n", note.c_str());
    if (!table.empty()) {
        printf("  %8s  %20s  %-28s %7s  %s\n", "N", "bytes", "size", "shards", "saliency retained   [fused: llama.cpp's fused top-k MoE kernel takes N]");
        for (const auto & pt : table) {
            const bool over = !params.budget_text.empty() && pt.bytes > params.budget;
            printf("  %8" PRId64 "  %20" PRIu64 "  %-28s %7u  %6.2f%%%s%s%s\n", pt.n_keep, pt.bytes, reap::util::format_size(pt.bytes).c_str(),
                   pt.n_shards, 100.0 * pt.share, pl::fused_kernel_takes(pt.n_keep) ? "  [fused]" : "",
                   pt.n_keep == n_keep ? "  <- chosen" : "", over ? "  (over budget)" : "");
        }
    }
    if (prov.contains("super_experts_not_kept")) {
        std::vector<std::string> names;
        for (const auto & x : prov["super_experts_not_kept"]) names.push_back(pl::expert_name(x["layer"].get<int>(), x["expert"].get<int64_t>()));
        printf("  warning: %zu protected super expert(s) do not fit in N = %" PRId64 " (more in a layer or group than it keeps): %s\n",
               names.size(), n_keep, reap::util::first_few(names).c_str());
    }
    printf("  keep %" PRId64 " of %" PRId64 " experts per layer (%.1f%% removed)\n", n_keep, lay.n_expert,
           100.0 * double(lay.n_expert - n_keep) / double(lay.n_expert));
    printf("  pruned file: %" PRIu64 " bytes, %s%s (source %s)\n", bytes, reap::util::format_size(bytes).c_str(),
           n_shards > 1 ? (" in " + std::to_string(n_shards) + " shards").c_str() : "", reap::util::format_size(src_bytes).c_str());
    if (!params.budget_text.empty()) printf("  budget %s = %" PRIu64 " bytes\n", params.budget_text.c_str(), params.budget);
    print_fused_note(lay.n_expert, n_keep);
    print_receipts(rc, rk, params.rank.protect_super);

    if (params.dry_run) {
        printf("dry run: no plan written\n");
        return 0;
    }
    if (!reap::write_plan(plan, params.output, params.force, err)) return fail(err);
    printf("  wrote %s (full receipts in its provenance)\n", params.output.c_str());
    return 0;
}

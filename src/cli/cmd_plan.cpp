// reap plan: turn a saliency archive into a keep-list per MoE layer for a
// model (--keep N, --ratio R or --budget SIZE), print what it keeps and
// write the plan JSON. A thin layer over reap::planner (planners.h): the
// scoring, ordering, group rules, super-expert protection and the exact
// budget search live there.
#include "cli/args.h"
#include "cli/commands.h"
#include "gguf/gguf.h"
#include "plan/plan.h"
#include "plan/planners.h"
#include "saliency/archive.h"
#include "util/sha256.h"

#include <cerrno>
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
};

const char * k_usage_line =
    "usage: reap plan SALIENCY.gguf -m MODEL.gguf (--keep N | --ratio R | --budget SIZE) [options] -o PLAN.json";

void print_usage(FILE * out) {
    fprintf(out,
        "%s\n"
        "\n"
        "Chooses which routed experts each MoE layer of MODEL keeps, from a saliency\n"
        "archive (reap calibrate, reap imatrix, reap merge) measured on that model, and\n"
        "writes the plan that reap prune executes. Every MoE layer keeps the same count N.\n"
        "\n"
        "how many (exactly one):\n"
        "  --keep N          keep N experts per layer (n_expert_used <= N <= n_expert)\n"
        "  --ratio R         remove the fraction R of the routed experts: N = n_expert -\n"
        "                    round(R * n_expert) (0 <= R < 1; with expert groups, N is\n"
        "                    rounded down to a multiple of the group count)\n"
        "  --budget SIZE     the largest allowed N whose pruned file fits SIZE bytes. The size\n"
        "                    is exact: the bytes reap prune will write (headers, padding and\n"
        "                    provenance keys included; the sum of all shards with\n"
        "                    --split-max-size / --split-max-tensors). SIZE is a number with\n"
        "                    an optional unit: K/KB, M/MB, G/GB, T/TB are DECIMAL (10^3 ..\n"
        "                    10^12, as disk vendors and gguf-split count), KiB/MiB/GiB/TiB are\n"
        "                    BINARY (2^10 .. 2^40); no unit = bytes; decimals allowed\n"
        "                    (512G, 277.5GB, 300GiB).\n"
        "\n"
        "how (score per expert over the chosen domains, higher = kept first):\n",
        k_usage_line);
    for (pl::method m : pl::all_methods()) {
        fprintf(out, "  --method %-10s %s%s\n", pl::method_name(m), pl::method_description(m),
                m == pl::method::reap ? " [default; energy for imatrix archives]" : "");
    }
    fprintf(out,
        "  --domains a,b     score over these domains of the archive (summed); default: all\n"
        "  --consensus M     sum (default): one score over the summed domains;\n"
        "                    minrank: rank the experts within each domain separately and\n"
        "                    order them by their best rank in any domain (keeps what any\n"
        "                    domain needs most)\n"
        "  --seed S          seed of --method random (default 0)\n"
        "  --no-protect-super  do not force-keep super experts. A super expert has a max\n"
        "                    output norm (max over all domains) above the 99.5th percentile of\n"
        "                    all experts' max norms and above a tenth of the largest; by default\n"
        "                    they are kept before anything else (reap archives only)\n"
        "\n"
        "Experts never routed to in any chosen domain are removed first. Ties break to the\n"
        "lower expert id; keep-lists are ascending. With a group-limited router\n"
        "(expert_group_count > 1), every group keeps N / groups experts (its best ones).\n"
        "The plan records, and the command prints, the super experts, the never-routed\n"
        "experts and the share of the total saliency (the method's score summed over the\n"
        "layer's experts) kept in each layer and on average over layers.\n"
        "\n"
        "other options:\n"
        "  -m, --model MODEL.gguf    the model the plan is for (first shard of a split set ok);\n"
        "                            the archive must come from it (same router weights)\n"
        "  -o, --output PLAN.json    where to write the plan\n"
        "  --split-max-size SIZE     size as reap prune will split (units as --budget)\n"
        "  --split-max-tensors N     likewise\n"
        "  --no-stamp                size as reap prune --no-stamp will write\n"
        "  --dry-run                 print the table N -> exact size -> saliency retained and\n"
        "                            the chosen N; write nothing (-o not needed)\n"
        "  --force                   replace an existing PLAN.json\n"
        "  -h, --help                this help\n");
}

bool parse_int(const std::string & s, int64_t & out) {
    if (s.empty()) return false;
    char * end = nullptr;
    errno = 0;
    const long long v = strtoll(s.c_str(), &end, 10);
    if (errno || *end) return false;
    out = v;
    return true;
}

bool parse_args(int argc, char ** argv, plan_params & p, bool & help, std::string & err) {
    int n_how = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        std::string v;
        auto value = [&]() { return reap::cli::take_value(argc, argv, i, v, err); };
        if (arg == "-h" || arg == "--help") {
            help = true;
            return true;
        } else if (arg == "-m" || arg == "--model") {
            if (!value()) return false;
            p.model = v;
        } else if (arg == "-o" || arg == "--output") {
            if (!value()) return false;
            p.output = v;
        } else if (arg == "--keep") {
            if (!value()) return false;
            if (!reap::cli::parse_positive("--keep", v, INT64_MAX, p.keep, err)) return false;
            ++n_how;
        } else if (arg == "--ratio") {
            if (!value()) return false;
            char * end = nullptr;
            p.ratio = strtod(v.c_str(), &end);
            if (v.empty() || *end || !(p.ratio >= 0.0 && p.ratio < 1.0)) {
                err = "--ratio: '" + v + "' is not a number in [0, 1) (the fraction of routed experts removed)";
                return false;
            }
            ++n_how;
        } else if (arg == "--budget") {
            if (!value()) return false;
            if (!pl::parse_size(v, p.budget, err)) {
                err = "--budget: " + err;
                return false;
            }
            p.budget_text = v;
            ++n_how;
        } else if (arg == "--method") {
            if (!value()) return false;
            if (!pl::parse_method(v, p.rank.how)) {
                err = "--method: unknown method '" + v + "' (reap, frequency, gate, ean, energy, random)";
                return false;
            }
            p.method_given = true;
        } else if (arg == "--domains") {
            if (!value()) return false;
            p.rank.domains = reap::cli::split_list(v);
            if (p.rank.domains.empty()) {
                err = "--domains: empty list";
                return false;
            }
        } else if (arg == "--consensus") {
            if (!value()) return false;
            if (v == "minrank") p.rank.cons = pl::consensus::minrank;
            else if (v == "sum") p.rank.cons = pl::consensus::sum;
            else {
                err = "--consensus: unknown '" + v + "' (sum or minrank)";
                return false;
            }
        } else if (arg == "--seed") {
            if (!value()) return false;
            int64_t s = 0;
            if (!parse_int(v, s) || s < 0) {
                err = "--seed: '" + v + "' is not a non-negative integer";
                return false;
            }
            p.rank.seed = (uint64_t) s;
        } else if (arg == "--no-protect-super") {
            p.rank.protect_super = false;
        } else if (arg == "--split-max-size") {
            if (!value()) return false;
            if (!pl::parse_size(v, p.split_max_bytes, err)) {
                err = "--split-max-size: " + err;
                return false;
            }
        } else if (arg == "--split-max-tensors") {
            if (!value()) return false;
            int64_t n = 0;
            if (!reap::cli::parse_positive("--split-max-tensors", v, INT64_MAX, n, err)) return false;
            p.split_max_tensors = (uint64_t) n;
        } else if (arg == "--no-stamp") {
            p.stamp = false;
        } else if (arg == "--dry-run") {
            p.dry_run = true;
        } else if (arg == "--force") {
            p.force = true;
        } else if (!arg.empty() && arg[0] == '-') {
            err = "unknown option " + arg;
            return false;
        } else if (p.saliency.empty()) {
            p.saliency = arg;
        } else {
            err = "unexpected argument '" + arg + "' (one saliency archive; reap merge combines several)";
            return false;
        }
    }
    if (p.saliency.empty()) err = "no saliency archive given";
    else if (p.model.empty()) err = "no model given (-m MODEL.gguf)";
    else if (n_how != 1) err = n_how == 0 ? "say how many experts to keep: --keep N, --ratio R or --budget SIZE"
                                          : "give only one of --keep, --ratio and --budget";
    else if (p.output.empty() && !p.dry_run) err = "no output given (-o PLAN.json)";
    return err.empty();
}

void print_refs(const char * title, const std::vector<pl::expert_ref> & refs, bool with_value) {
    if (refs.empty()) {
        printf("  %s: none\n", title);
        return;
    }
    printf("  %s (%zu):\n", title, refs.size());
    std::map<int, std::string> by_layer;
    for (const auto & r : refs) {
        char buf[64];
        if (with_value) snprintf(buf, sizeof(buf), " %" PRId64 " (max_norm %.4g)", r.expert, r.value);
        else snprintf(buf, sizeof(buf), " %" PRId64, r.expert);
        by_layer[r.layer] += buf;
    }
    for (const auto & [l, s] : by_layer) printf("    layer %d:%s\n", l, s.c_str());
}

} // namespace

int cmd_plan(int argc, char ** argv) {
    plan_params params;
    int status = 0;
    if (!reap::cli::parse_command("plan", argc, argv, params, parse_args, print_usage, k_usage_line, status)) return status;
    auto fail = [](const std::string & msg) { return reap::cli::fail("plan", msg); };
    std::string err;

    reap::gguf::model model;
    if (!reap::gguf::open_model(params.model, model, err)) return fail(err);
    reap::moe::layout lay;
    if (!reap::model_layout(model, lay, err)) return fail(params.model + ": " + err);
    int64_t n_layer = 0;
    if (!model.kvs.get_i64(reap::moe::kv_key(lay.arch, "block_count"), n_layer, err)) return fail(params.model + ": " + err);
    const reap::plan_model_facts facts = reap::facts_of(lay, n_layer);

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
    if (params.keep >= 0) {
        if (!pl::keep_allowed(facts, params.keep, err)) return fail("--keep " + std::to_string(params.keep) + ": " + err);
        n_keep = params.keep;
    } else if (params.ratio >= 0) {
        if (!pl::keep_from_ratio(params.ratio, facts, n_keep, note, err)) return fail(err);
    } else {
        if (!pl::fit_budget(rk, facts, sctx, params.budget, params.dry_run, n_keep, table, err)) return fail("--budget " + params.budget_text + ": " + err);
    }
    if (params.dry_run && table.empty()) {
        // the table around the chosen N, for --keep / --ratio too
        if (!pl::size_table(rk, facts, sctx, n_keep, table, err)) return fail(err);
    }

    reap::plan plan;
    if (!pl::make_plan(rk, facts, n_keep, plan, err)) return fail(err);
    uint64_t bytes = 0;
    uint32_t n_shards = 1;
    if (!pl::pruned_bytes(sctx, plan, bytes, n_shards, err)) return fail(err);

    std::string archive_sha;
    if (!reap::util::sha256_file(params.saliency, archive_sha, err)) return fail(err);
    nlohmann::json & prov = plan.provenance;
    prov["tool"] = std::string("reap plan ") + REAP_VERSION;
    prov["saliency"] = {{"file", params.saliency}, {"sha256", archive_sha}, {"metric_set", reap::saliency::metric_set_name(arch.metrics)}};
    nlohmann::json req = nlohmann::json::object();
    if (params.keep >= 0) req["keep"] = params.keep;
    if (params.ratio >= 0) req["ratio"] = params.ratio;
    if (!params.budget_text.empty()) {
        req["budget"] = params.budget_text;
        req["budget_bytes"] = params.budget;
    }
    if (params.split_max_bytes) req["split_max_bytes"] = params.split_max_bytes;
    if (params.split_max_tensors) req["split_max_tensors"] = params.split_max_tensors;
    req["stamp"] = params.stamp;
    prov["request"] = req;
    prov["predicted_bytes"] = bytes;
    prov["predicted_shards"] = n_shards;

    // report
    const pl::share_report share = pl::plan_share(rk, plan);
    const uint64_t src_bytes = model.file_bytes();
    printf("reap plan: %s (%s, %zu MoE layers, %" PRId64 " experts, top-%" PRId64 "%s)\n", params.model.c_str(), lay.arch.c_str(),
           lay.moe_layers.size(), lay.n_expert, lay.n_expert_used,
           facts.n_group > 1 ? (", " + std::to_string(facts.n_group) + " expert groups").c_str() : "");
    std::string doms;
    for (size_t i = 0; i < rk.domains.size(); ++i) doms += (i ? "," : "") + rk.domains[i];
    printf("  saliency %s: method %s, domains %s%s\n", params.saliency.c_str(), pl::method_name(params.rank.how), doms.c_str(),
           params.rank.cons == pl::consensus::minrank ? ", consensus minrank" : "");
    if (!note.empty()) printf("  note: %s\n", note.c_str());
    if (rk.super_threshold > 0) {
        printf("  super-expert threshold: max_norm > %.4g (%s)\n", rk.super_threshold,
               params.rank.protect_super ? "protected" : "NOT protected: --no-protect-super");
    } else {
        printf("  super experts: not detectable (no max_norm in this archive)\n");
    }
    if (rk.super_threshold > 0) print_refs("super experts", rk.super_candidates, true);
    print_refs("never routed to (removed first)", rk.never_routed, false);
    if (!table.empty()) {
        printf("  %8s  %20s  %-28s %7s  %s\n", "N", "bytes", "size", "shards", "saliency retained");
        for (const auto & pt : table) {
            const bool over = !params.budget_text.empty() && pt.bytes > params.budget;
            printf("  %8" PRId64 "  %20" PRIu64 "  %-28s %7u  %6.2f%%%s%s\n", pt.n_keep, pt.bytes, pl::format_size(pt.bytes).c_str(),
                   pt.n_shards, 100.0 * pt.share, pt.n_keep == n_keep ? "  <- chosen" : "", over ? "  (over budget)" : "");
        }
    }
    if (prov.contains("super_experts_not_kept")) {
        printf("  warning: %zu protected super expert(s) do not fit in N = %" PRId64 " (more in a layer or group than it keeps):",
               prov["super_experts_not_kept"].size(), n_keep);
        for (const auto & x : prov["super_experts_not_kept"]) {
            printf(" L%d/%" PRId64, x["layer"].get<int>(), x["expert"].get<int64_t>());
        }
        printf("\n");
    }
    printf("  keep %" PRId64 " of %" PRId64 " experts per layer (%.1f%% removed)\n", n_keep, lay.n_expert,
           100.0 * double(lay.n_expert - n_keep) / double(lay.n_expert));
    printf("  pruned file: %" PRIu64 " bytes, %s%s (source %s)\n", bytes, pl::format_size(bytes).c_str(),
           n_shards > 1 ? (" in " + std::to_string(n_shards) + " shards").c_str() : "", pl::format_size(src_bytes).c_str());
    if (!params.budget_text.empty()) printf("  budget %s = %" PRIu64 " bytes\n", params.budget_text.c_str(), params.budget);
    printf("  saliency retained (%s score):", pl::method_name(rk.share_method));
    for (size_t i = 0; i < share.layers.size(); ++i) printf(" L%d %.1f%%", share.layers[i], 100.0 * share.share[i]);
    printf("; mean %.2f%%\n", 100.0 * share.mean);

    if (params.dry_run) {
        printf("dry run: no plan written\n");
        return 0;
    }
    if (!reap::write_plan(plan, params.output, params.force, err)) return fail(err);
    printf("  wrote %s\n", params.output.c_str());
    return 0;
}

// reap sweep: how much each cut size costs, without writing a single pruned
// model. Plans every requested size from one ranking (src/plan/sweep.h: nested
// plans, exact predicted file sizes), scores each by masking its removed
// experts in the base model (src/llama/mask.h through reap eval's engine: the
// base runs once, then one masked pass per size, one model resident), and
// writes one JSON, a table and the chart that tells which N to ship.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/llama_flags.h"
#include "cli/plan_flags.h"
#include "llama/eval.h"
#include "plan/sweep.h"
#include "report/sweep_chart.h"
#include "util/file.h"
#include "util/number_format.h"
#include "util/json.h"
#include "util/path.h"
#include "util/sha256.h"
#include "util/svg_chart.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace pl = reap::planner;

namespace {

struct sweep_params {
    std::string saliency, output, plot, plans_dir;
    bool        force = false, quiet = false, method_given = false;
    reap::cli::runtime_given given;
    int         n_kinds = 0;
    std::vector<pl::size_request> sizes;
    pl::rank_options rank;
    uint64_t    split_max_bytes = 0;
    reap::eval_options eval;
};

void declare(reap::cli::options & t, sweep_params & p) {
    t.about(
    "Scores several cut sizes in one run and writes no model. Each size is planned as\n"
    "reap plan would plan it (same method, domains, super-expert protection, group rules,\n"
    "exact predicted file size), all from one ranking, so the plans are nested: what a\n"
    "smaller N keeps, every larger N keeps too. Each plan is then evaluated by virtual\n"
    "pruning (reap eval --mask): the base model runs once over -f, then once per size with\n"
    "the plan's removed experts made unselectable in every router. The numbers are those\n"
    "of reap eval -p on the file reap prune would write from the same plan.\n"
    "\n"
    "Output: a table (N kept, removed %, predicted bytes, saliency kept, safety margin (the\n"
    "best rank any removed expert holds in any domain), KLD mean/median/p99, top-1\n"
    "agreement, PPL ratio; per domain for a corpus), and with -o a JSON file\n"
    "(format reap-sweep) and an SVG chart of KLD and top-1 against N with the file size on\n"
    "a second axis (--plot, default SWEEP.svg beside the JSON). --plans-dir DIR also\n"
    "writes each plan as DIR/keep-N.json, ready for reap prune.\n"
    "\n"
    );
    t.section("options:");
    t.text("-m, --model", "FILE", "base model (first shard of a split model is fine)", p.eval.base_path);
    t.text("-f, --file", "FILE", "plain text or corpus JSONL, read as reap eval reads it", p.eval.input_path);
    auto sizes = [&p](pl::size_kind kind) {
        return [&p, kind](const std::string & v, std::string & err) {
            ++p.n_kinds;
            return pl::parse_size_requests(kind, v, p.sizes, err);
        };
    };
    t.custom("--keep", "N,N,...", "experts kept per MoE layer", sizes(pl::size_kind::keep));
    t.custom("--ratios", "R,R,...", "fractions of routed experts removed (as reap plan --ratio)", sizes(pl::size_kind::ratio));
    t.custom("--budgets", "SIZE,...", "file sizes to fit (as reap plan --budget: 400G, 300GiB, ...)",
             sizes(pl::size_kind::budget));
    reap::cli::declare_ranking(t, p.rank, p.method_given);
    t.section("other options:");
    reap::cli::declare_split_max_size(t, p.split_max_bytes);
    t.text("-o, --output", "FILE", "the sweep as JSON", p.output);
    t.text("--plot", "FILE", "the chart (SVG; default: -o with .svg)", p.plot);
    t.text("--plans-dir", "DIR", "write every plan as DIR/keep-N.json (DIR is created if missing)", p.plans_dir);
    t.flag("--force", "replace existing outputs", p.force);
    t.integer("--chunks", "N", "score at most N windows (plain text)", 1, INT32_MAX, p.eval.max_chunks);
    t.text("--tmp-dir", "DIR", "where the base's rows wait (default $TMPDIR or /tmp)", p.eval.tmp_dir);
    t.flag("-q, --quiet", "no progress line", p.quiet);
    t.flag("--verbose", "show llama.cpp's log", p.eval.verbose);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (!p.saliency.empty()) {
            err = "unexpected argument '" + a + "' (one saliency archive)";
            return false;
        }
        p.saliency = a;
        return true;
    });
    reap::cli::declare_eval_runtime(t, "window size (default 512)", p.given, p.eval.rt);
}

const char * kind_name(pl::size_kind k) {
    return k == pl::size_kind::keep ? "keep" : k == pl::size_kind::ratio ? "ratio" : "budget";
}

// SWEEP.json -> SWEEP.svg, in the same directory.
std::string with_extension(const std::string & path, const char * ext) {
    return reap::util::beside(path, reap::util::stem_of(path) + ext);
}

// The chart of the sweep just run (report/sweep_chart.h): KLD and top-1 per domain and overall.
reap::util::chart make_chart(const std::string & title, const std::vector<pl::sweep_point> & pts,
                             const std::vector<reap::eval_report> & reps) {
    reap::report::sweep_chart_input in;
    in.title = title;
    if (!reps.empty()) {
        for (const auto & d : reps[0].domains) in.domains.push_back(d.first);
    }
    for (size_t i = 0; i < pts.size() && i < reps.size(); ++i) {
        reap::report::sweep_chart_point q;
        q.n_keep = pts[i].n_keep;
        q.bytes = pts[i].bytes;
        q.overall = {reps[i].overall.kld_mean, reps[i].overall.argmax_agree};
        for (const auto & d : reps[i].domains) {
            const reap::eval_metrics & m = d.second;
            q.domains.push_back(m.n_tokens ? reap::report::sweep_chart_cost{m.kld_mean, m.argmax_agree}
                                           : reap::report::sweep_chart_cost{});
        }
        in.points.push_back(q);
    }
    return reap::report::sweep_chart(in);
}

} // namespace

int cmd_sweep(int argc, char ** argv) {
    sweep_params p;
    reap::cli::options t("sweep",
                         "usage: reap sweep SALIENCY.gguf -m BASE.gguf -f TEXT_OR_CORPUS (--keep N,N,... | --ratios R,R,... |\n"
                         "                  --budgets SIZE,SIZE,...) [-o SWEEP.json] [--plot SWEEP.svg] [options]");
    declare(t, p);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    std::string err;
    if (p.saliency.empty()) return t.usage_error("no saliency archive given");
    if (p.eval.base_path.empty()) return t.usage_error("no model given (-m BASE.gguf)");
    if (p.eval.input_path.empty()) return t.usage_error("no input given (-f TEXT_OR_CORPUS)");
    if (p.n_kinds != 1) {
        return t.usage_error(p.n_kinds == 0 ? "say which sizes: --keep N,N,..., --ratios R,R,... or --budgets SIZE,..."
                                            : "give one of --keep, --ratios and --budgets, once");
    }
    if (!reap::cli::parse_llama_runtime(t, "sweep", p.eval.base_path, p.given, p.eval.rt, status)) return status;
    p.eval.progress = !p.quiet && isatty(fileno(stderr));
    if (p.plot.empty() && !p.output.empty()) p.plot = with_extension(p.output, ".svg");
    auto fail = [](const std::string & msg) { return reap::cli::fail("sweep", msg); };
    // the output rule (util/file.h): no output is an input, nor the other output
    const std::vector<std::pair<std::string, std::string>> inputs = {
        {"model", p.eval.base_path}, {"saliency archive", p.saliency}, {"input", p.eval.input_path}};
    for (const std::string * out : {&p.output, &p.plot}) {
        if (!out->empty() && !reap::util::check_output(*out, inputs, p.force, err)) return fail(err);
    }
    if (!p.output.empty() && reap::util::same_entry(p.output, p.plot)) return fail("--plot is the output '" + p.output + "'");

    // plan every size
    pl::ranked_model rm;
    if (!pl::open_ranked_model(p.eval.base_path, p.saliency, p.rank, p.method_given, rm, err)) return fail(err);
    pl::size_context sctx;
    sctx.model = &rm.model;
    sctx.layout = &rm.layout;
    sctx.prune.version = REAP_VERSION;
    sctx.prune.plan_sha256 = std::string(64, '0');  // the real hash has the same length
    sctx.write.split_max_bytes = p.split_max_bytes;
    std::vector<pl::sweep_point> pts;
    if (!pl::plan_sweep(rm, sctx, p.sizes, pts, err)) return fail(err);
    std::string archive_sha;
    if (!reap::util::sha256_file(p.saliency, archive_sha, err)) return fail(err);
    const std::string model_sha = reap::model_header_sha256(rm.model);
    for (auto & pt : pts) {
        pt.p.model_sha256 = model_sha;
        nlohmann::json & prov = pt.p.provenance;
        prov["tool"] = std::string("reap sweep ") + REAP_VERSION;
        prov["saliency"] = {{"file", p.saliency}, {"sha256", archive_sha}};
        prov["request"] = {{kind_name(pt.req.kind), pt.req.text}};
        prov["predicted_bytes"] = pt.bytes;
        prov["predicted_shards"] = pt.n_shards;
    }
    // Every output is written at the end, all or nothing (util::write_files_durably):
    // the plans first, then the chart, the JSON that names them last.
    std::vector<std::pair<std::string, std::string>> files;
    auto plan_path = [&p](const pl::sweep_point & pt) { return p.plans_dir + "/keep-" + std::to_string(pt.n_keep) + ".json"; };
    if (!p.plans_dir.empty()) {
        for (const auto & pt : pts) {
            if (!reap::util::check_output(plan_path(pt), inputs, p.force, err)) return fail(err);
            files.push_back({plan_path(pt), reap::plan_text(pt.p)});
        }
    }

    // score every plan by masking
    std::vector<reap::eval_candidate> cands;
    for (const auto & pt : pts) {
        reap::eval_candidate c;
        c.path = "keep " + std::to_string(pt.n_keep);
        c.mask = true;
        c.in_memory = &pt.p;
        cands.push_back(c);
    }
    std::vector<reap::eval_report> reps;
    if (!reap::run_eval_candidates(p.eval, cands, reps, err)) return fail(err);

    // report
    const uint64_t src_bytes = rm.model.file_bytes();
    std::string doms;
    for (size_t i = 0; i < rm.rank.domains.size(); ++i) doms += (i ? "," : "") + rm.rank.domains[i];
    printf("reap sweep: %s (%s, %zu MoE layers, %" PRId64 " experts, top-%" PRId64 "), %s %s\n", p.eval.base_path.c_str(),
           rm.layout.arch.c_str(), rm.layout.moe_layers.size(), rm.layout.n_expert, rm.layout.n_expert_used,
           reap::util::format_size(src_bytes).c_str(), "source");
    printf("  saliency %s: method %s, domains %s; scored on %s: %zu tokens in %zu windows, base PPL %.4f\n\n",
           p.saliency.c_str(), pl::method_name(rm.rank.opts.how), doms.c_str(), p.eval.input_path.c_str(),
           reps.empty() ? (size_t) 0 : reps[0].overall.n_tokens, reps.empty() ? (size_t) 0 : reps[0].n_windows,
           reps.empty() ? 0.0 : reps[0].overall.ppl_base);
    printf("  %6s %8s %22s %9s %7s %10s %10s %10s %8s %10s\n", "N", "removed", "predicted size", "saliency", "margin",
           "KLD mean", "median", "p99", "top-1", "PPL ratio");
    for (size_t i = 0; i < pts.size(); ++i) {
        const auto & m = reps[i].overall;
        const std::string margin = pts[i].margin > 0 ? std::to_string(pts[i].margin) : "-";
        printf("  %6" PRId64 " %7.1f%% %22s %8.2f%% %7s %10.6f %10.6f %10.6f %7.3f%% %10.5f\n", pts[i].n_keep,
               100.0 * (double) (rm.layout.n_expert - pts[i].n_keep) / (double) rm.layout.n_expert,
               reap::util::format_size(pts[i].bytes).c_str(), 100.0 * pts[i].share, margin.c_str(), m.kld_mean, m.kld_median, m.kld_p99,
               100.0 * m.argmax_agree, m.ppl_ratio);
    }
    printf("  (margin: the best rank, 1 = most salient, any removed expert holds in any domain, in any layer; each\n"
           "   plan's receipts in full: --plans-dir)\n");
    if (!reps.empty() && !reps[0].domains.empty()) {
        printf("\n  per domain: KLD mean / top-1\n  %6s", "N");
        for (const auto & d : reps[0].domains) printf(" %20s", d.first.c_str());
        printf("\n");
        for (size_t i = 0; i < pts.size(); ++i) {
            printf("  %6" PRId64, pts[i].n_keep);
            for (const auto & d : reps[i].domains) printf("   %9.5f /%6.2f%%", d.second.kld_mean, 100.0 * d.second.argmax_agree);
            printf("\n");
        }
    }
    for (const auto & pt : pts) {
        if (!pt.note.empty()) printf("  note (N = %" PRId64 "): %s\n", pt.n_keep, pt.note.c_str());
    }
    // a model with MTP blocks: each cut's MTP draft acceptance (masked like the trunk; reap eval's definition)
    // (every cut is a mask of the base: measured whenever the base's is)
    const bool mtp = !reps.empty() && reps[0].mtp_blocks > 0 && reps[0].mtp_base;
    auto cut_rate = [&](size_t i) { return reps[i].mtp_pruned ? reps[i].mtp_pruned->rate() : -1.0; };
    if (mtp) {
        printf("\n  MTP draft acceptance (greedy, first draft token): base %.3f%%", 100.0 * reps[0].mtp_base->rate());
        for (size_t i = 0; i < pts.size(); ++i) printf(", N=%" PRId64 " %.3f%%", pts[i].n_keep, 100.0 * cut_rate(i));
        printf("\n");
    }

    if (!p.output.empty()) {
        nlohmann::ordered_json j;
        j["format"]  = "reap-sweep";
        j["version"] = 1;
        j["tool"]    = std::string("reap sweep ") + REAP_VERSION;
        j["model"]   = {{"path", p.eval.base_path}, {"arch", rm.layout.arch}, {"n_expert", rm.layout.n_expert},
                        {"n_expert_used", rm.layout.n_expert_used}, {"moe_layers", rm.layout.moe_layers.size()},
                        {"file_bytes", src_bytes}};
        j["saliency"] = {{"file", p.saliency}, {"sha256", archive_sha}, {"method", pl::method_name(rm.rank.opts.how)},
                         {"domains", rm.rank.domains}};
        j["input"]   = {{"file", p.eval.input_path}, {"n_ctx", reps.empty() ? 0 : reps[0].n_ctx},
                        {"n_windows", reps.empty() ? 0 : reps[0].n_windows}, {"corpus", !reps.empty() && reps[0].corpus}};
        nlohmann::ordered_json points = nlohmann::ordered_json::array();
        for (size_t i = 0; i < pts.size(); ++i) {
            nlohmann::ordered_json q;
            q["n_keep"]           = pts[i].n_keep;
            q["request"]          = {{kind_name(pts[i].req.kind), pts[i].req.text}};
            q["removed_fraction"] = (double) (rm.layout.n_expert - pts[i].n_keep) / (double) rm.layout.n_expert;
            q["predicted_bytes"]  = pts[i].bytes;
            q["predicted_shards"] = pts[i].n_shards;
            q["saliency_share"]   = pts[i].share;
            q["safety_margin"]    = pts[i].margin > 0 ? nlohmann::ordered_json(pts[i].margin) : nlohmann::ordered_json(nullptr);
            q["safety_margin_median"] = pts[i].margin > 0 ? nlohmann::ordered_json(pts[i].margin_median) : nlohmann::ordered_json(nullptr);
            if (!p.plans_dir.empty()) q["plan"] = plan_path(pts[i]);
            q["overall"]          = reap::eval_metrics_json(reps[i].overall);
            nlohmann::ordered_json d = nlohmann::ordered_json::object();
            for (const auto & [name, m] : reps[i].domains) d[name] = reap::eval_metrics_json(m);
            q["domains"] = d;
            if (mtp) q["mtp_acceptance"] = cut_rate(i);
            points.push_back(q);
        }
        if (mtp) j["mtp_base_acceptance"] = reps[0].mtp_base->rate();
        j["points"] = points;
        files.push_back({p.output, reap::util::json_text(j, 2) + "\n"});
    }
    if (!p.plot.empty()) {
        const std::string title = rm.layout.arch + ": cost of each cut (" + pl::method_name(rm.rank.opts.how) + ", " + doms + ")";
        files.insert(files.end() - (p.output.empty() ? 0 : 1), {p.plot, reap::util::render_svg(make_chart(title, pts, reps))});
    }
    bool made_dir = false;
    if (!p.plans_dir.empty()) {
        made_dir = reap::util::current_disk().mkdir(p.plans_dir, 0755);
        if (!made_dir && errno != EEXIST) return fail("cannot create --plans-dir '" + p.plans_dir + "': " + strerror(errno));
    }
    if (!reap::util::write_files_durably(files, err)) {
        if (made_dir) reap::util::remove_made_dir(p.plans_dir);
        return fail(err);
    }
    for (size_t i = 0; i < files.size(); ++i) printf("%s  wrote %s\n", i ? "" : "\n", files[i].first.c_str());
    return 0;
}

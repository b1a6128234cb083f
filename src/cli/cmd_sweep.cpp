// reap sweep: how much each cut size costs, without writing a single pruned
// model. Parses the options, calls the sweep (src/llama/sweep.h: plans every
// size from one ranking, scores each by masking), prints its table and
// publishes the plans, the chart and the JSON (formats/sweep_file.h) through
// planner::publish_sweep_files (plan/sweep.h).
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/llama_flags.h"
#include "cli/plan_flags.h"
#include "llama/sweep.h"
#include "util/file.h"
#include "util/path.h"

#include <cstdio>
#include <string>
#include <vector>
#include <unistd.h>

namespace pl = reap::planner;

namespace {

struct sweep_params {
    reap::sweep_options      sw;
    std::string              output, plot;
    bool                     force = false, quiet = false;
    reap::cli::runtime_given given;
    int                      n_kinds = 0;
};

void declare(reap::cli::options & t, sweep_params & p) {
    t.about(
    "Scores several cut sizes in one run and writes no model. Each size is planned as\n"
    "reap plan would plan it (same method, domains, super-expert protection, group rules,\n"
    "exact predicted file size), all from one ranking, so the plans are nested: what a\n"
    "smaller N keeps, every larger N keeps too. Each plan is then evaluated by virtual\n"
    "pruning (reap eval --mask): the base model runs once over -f, then once per size with\n"
    "the plan's removed experts made unselectable in every router. They score as reap eval -p\n"
    "scores the file reap prune would write from the plan, to rounding (wider on quantised types).\n"
    "\n"
    "Output: a table (N kept, removed %, predicted bytes, saliency kept, safety margin (the\n"
    "best rank any removed expert holds in any domain), KLD mean/median/p99, top-1\n"
    "agreement, PPL ratio; per domain for a corpus), and with -o a JSON file\n"
    "(format reap-sweep) and an SVG chart of KLD and top-1 against N with the file size on\n"
    "a second axis (--plot, default SWEEP.svg beside the JSON). --plans-dir DIR also\n"
    "writes each plan as DIR/keep-N.json, ready for reap prune.\n"
    "\n"
    "Several sources against one reference: -m Q1.gguf -m Q2.gguf ... with --reference\n"
    "REF.gguf (run once) or --kld-base REF.kld (read as reap eval reads it; written from\n"
    "--reference when missing). Every source and the reference must be one model (arch,\n"
    "blocks, experts, vocabulary and router weights, which llama-quantize never changes);\n"
    "each source is planned from the one ranking, sized for its own file, masked and scored\n"
    "against the reference's rows (plain text -f). Output: a table request x source, the\n"
    "winner of each request and by how much, the frontier in the JSON (reap-sweep version\n"
    "3) and a chart of KLD against file size, one line per source; plans as\n"
    "DIR/SOURCE-keep-N.json.\n"
    "\n"
    );
    t.section("options:");
    t.custom("-m, --model", "FILE", "base model or a source (first shard of a split model is fine); repeat for several sources",
             [&p](const std::string & v, std::string &) { (p.sw.eval.base_path.empty() ? p.sw.eval.base_path : p.sw.more_sources.emplace_back()) = v; return true; });
    t.text("--reference", "FILE", "the model every source is scored against (several sources)", p.sw.reference);
    t.text("--kld-base", "FILE", "the reference's KLD base file (read; written from --reference when missing)", p.sw.kld_base);
    t.text("-f, --file", "FILE", "plain text or corpus JSONL, read as reap eval reads it", p.sw.eval.input_path);
    auto sizes = [&p](pl::size_kind kind) {
        return [&p, kind](const std::string & v, std::string & err) {
            ++p.n_kinds;
            return pl::parse_size_requests(kind, v, p.sw.sizes, err);
        };
    };
    t.custom("--keep", "N,N,...", "experts kept per MoE layer", sizes(pl::size_kind::keep));
    t.custom("--ratios", "R,R,...", "fractions of routed experts removed (as reap plan --ratio)", sizes(pl::size_kind::ratio));
    t.custom("--budgets", "SIZE,...", "file sizes to fit (as reap plan --budget: 400G, 300GiB, ...)",
             sizes(pl::size_kind::budget));
    reap::cli::declare_ranking(t, p.sw.rank, p.sw.method_given);
    t.section("other options:");
    reap::cli::declare_split_max_size(t, p.sw.split_max_bytes);
    t.text("-o, --output", "FILE", "the sweep as JSON", p.output);
    t.text("--plot", "FILE", "the chart (SVG; default: -o with .svg)", p.plot);
    t.text("--plans-dir", "DIR", "write every plan as DIR/keep-N.json (DIR is created if missing)", p.sw.plans_dir);
    t.flag("--force", "replace existing outputs", p.force);
    t.integer("--chunks", "N", "score at most N windows (plain text)", 1, INT32_MAX, p.sw.eval.max_chunks);
    t.text("--tmp-dir", "DIR", "where the base's rows wait (default $TMPDIR or /tmp)", p.sw.eval.tmp_dir);
    t.flag("-q, --quiet", "no progress line", p.quiet);
    t.flag("--verbose", "show llama.cpp's log", p.sw.eval.verbose);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (!p.sw.saliency.empty()) {
            err = "unexpected argument '" + a + "' (one saliency archive)";
            return false;
        }
        p.sw.saliency = a;
        return true;
    });
    reap::cli::declare_eval_runtime(t, "window size (default 512)", p.given, p.sw.eval.rt);
    t.require(p.sw.saliency, "no saliency archive given")
     .require(p.sw.eval.base_path, "no model given (-m BASE.gguf)")
     .require(p.sw.eval.input_path, "no input given (-f TEXT_OR_CORPUS)");
}

} // namespace

int cmd_sweep(int argc, char ** argv) {
    sweep_params p;
    reap::cli::options t("sweep",
                         "usage: reap sweep SALIENCY.gguf -m BASE.gguf [-m Q2.gguf ...] [--reference REF.gguf | --kld-base REF.kld]\n"
                         "                  -f TEXT (--keep N,... | --ratios R,... | --budgets SIZE,...) [-o SWEEP.json] [options]");
    declare(t, p);
    int status = 0;
    if (!t.parse(argc, argv, status)) return status;
    std::string err;
    if (p.n_kinds != 1) {
        return t.usage_error(p.n_kinds == 0 ? "say which sizes: --keep N,N,..., --ratios R,R,... or --budgets SIZE,..."
                                            : "give one of --keep, --ratios and --budgets, once");
    }
    if (!reap::cli::parse_llama_runtime(t, "sweep", p.sw.eval.base_path, p.given, p.sw.eval.rt, status)) return status;
    p.sw.eval.progress = !p.quiet && isatty(fileno(stderr));
    p.sw.tool_version = REAP_VERSION;
    if (p.plot.empty() && !p.output.empty()) p.plot = reap::util::beside(p.output, reap::util::stem_of(p.output) + ".svg");
    auto fail = [](const std::string & msg) { return reap::cli::fail("sweep", msg); };
    // the output rule (util/file.h): no output is an input, nor the other output
    std::vector<std::pair<std::string, std::string>> inputs = {{"model", p.sw.eval.base_path}, {"saliency archive", p.sw.saliency},
        {"input", p.sw.eval.input_path}, {"reference", p.sw.reference}, {"KLD base", p.sw.kld_base}};
    for (const std::string & m : p.sw.more_sources) inputs.push_back({"source", m});
    for (const std::string * out : {&p.output, &p.plot}) {
        if (!out->empty() && !reap::util::check_output(*out, inputs, p.force, err)) return fail(err);
    }
    if (!p.output.empty() && reap::util::same_entry(p.output, p.plot)) return fail("--plot is the output '" + p.output + "'");

    reap::sweep_result r;
    if (!reap::plan_sweep_points(p.sw, r, err)) return fail(err);
    for (const auto & f : reap::sweep_output_files(p.sw, r, "", "")) {   // where the plans go, before the scoring
        if (!reap::util::check_output(f.first, inputs, p.force, err)) return fail(err);
    }
    if (!reap::score_sweep(p.sw, r, err)) return fail(err);
    reap::print_sweep(stdout, p.sw, r);
    const auto files = reap::sweep_output_files(p.sw, r, p.plot, p.output);
    if (!pl::publish_sweep_files(p.sw.plans_dir, files, err)) return fail(err);
    for (size_t i = 0; i < files.size(); ++i) printf("%s  wrote %s\n", i ? "" : "\n", files[i].first.c_str());
    return 0;
}

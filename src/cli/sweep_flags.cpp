// The options of reap sweep (sweep_flags.h): the table and --help's prose.
#include "cli/sweep_flags.h"

#include "cli/eval_flags.h"
#include "cli/plan_flags.h"

namespace pl = reap::planner;

namespace reap::cli {

// --help's prose: what a sweep does, its output and its modes.
const char * const k_sweep_about =
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
    "Methods as an axis (--methods reap,man,msan,aimer,...): every size planned by each\n"
    "method and scored by mask against the same base pass: one table and one chart, the\n"
    "criterion that measured best for this model and this text. Each method ranks with the\n"
    "archive that holds its statistic: give a calibration archive (reap calibrate) and, for\n"
    "aimer, a weights archive (reap score) as a second argument; one calibration serves every\n"
    "method that needs one. Plans as DIR/METHOD-keep-N.json. One source, no width cuts.\n"
    "\n"
    "Width cuts (--widths K,...): each size is also cut, in every kept expert, to its K most\n"
    "salient intermediate channels (the archive's channel scores, as reap plan --width K), and\n"
    "scored by the mask that also zeroes the removed channels before the down projection:\n"
    "one row per (N, K), the predicted size that of the width-cut file reap prune writes\n"
    "(down requantised to its type or --down-type T), plans as DIR/keep-N-width-K.json, the\n"
    "chart KLD and top-1 against file size, one line per width.\n"
    "\n"
    "Tasks (one source): --multiple-choice / --hellaswag / --winogrande FILE scores the base and\n"
    "every size's mask on llama-perplexity's task files as reap eval does (accuracy, 95% interval,\n"
    "right->wrong / wrong->right against the base, McNemar's p), in the same run; -o's \"choice\".\n"
    "Behaviour (one source): --needle runs reap eval's needle-in-a-haystack grid over -f and\n"
    "--generate PROMPTS its free generation, each once on the base and then on every size's\n"
    "mask, exactly as reap eval --mask keep-N.json runs them (same cells, values, prompts and\n"
    "decoding; reap eval --help says what each number means). The table gets one column\n"
    "group per size: needle n/m exact; loop rate, termination rate, distinct-4 and the mean\n"
    "leading tokens that agree with the base's output. The JSON keeps every decoded text and\n"
    "token (\"needle\" and \"generate\", with what was measured) and each point's numbers.\n"
    "\n"
    ;

void declare_sweep(options & t, sweep_params & p) {
    t.about(k_sweep_about);
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
    t.custom("--widths", "K,K,...",
             "width cuts: every kept expert cut to its K most salient channels (as reap plan --width K), each K with "
             "every size of --keep / --ratios / --budgets (a count x width grid; a budget finds the largest N whose "
             "width-cut file fits) or alone with every expert kept. K = the experts' width is the uncut row. One "
             "source; not with --needle / --generate",
             [&p](const std::string & v, std::string & err) {
                 if (!reap::cli::parse_integer_list("--widths", v, 1, INT64_MAX, p.sw.widths, err)) return false;
                 if (p.sw.widths.empty()) err = "--widths: empty list";
                 return !p.sw.widths.empty();
             });
    t.text("--down-type", "T", "with --widths: the type reap prune --down-type will requantise down to (sizes, K's block)",
           p.sw.down_type);
    reap::cli::declare_channel_score(t, p.sw.channel_by, p.sw.channel_score_given);
    t.for_mode({"--down-type", "--channel-score"}, "width cuts", "--widths K,...", [&p] { return !p.sw.widths.empty(); });
    reap::cli::declare_methods(t, p.sw.methods,
                               "plan every size by each of these methods (see --method) and score them all in one run; "
                               "aimer needs a weights archive (reap score) as a second SALIENCY argument");
    reap::cli::declare_ranking(t, p.sw.rank, p.sw.method_given,
                               "seed (default 0) of --method random's order, of --needle's values and of --temp's draws "
                               "(one seed for all three, as reap eval's --seed; recorded in -o's \"needle\" and \"generate\")");
    t.section("other options:");
    reap::cli::declare_split_max_size(t, p.sw.split_max_bytes);
    t.text("-o, --output", "FILE", "the sweep as JSON", p.output);
    t.text("--plot", "FILE", "the chart (SVG; default: -o with .svg)", p.plot);
    t.text("--plans-dir", "DIR", "write every plan as DIR/keep-N.json (width cuts: keep-N-width-K.json; DIR is created if missing)",
           p.sw.plans_dir);
    t.flag("--force", "replace existing outputs", p.force);
    t.integer("--chunks", "N", "score at most N windows (plain text)", 1, INT32_MAX, p.sw.eval.max_chunks);
    t.text("--tmp-dir", "DIR", "where the base's rows wait (default $TMPDIR or /tmp)", p.sw.eval.tmp_dir);
    declare_behaviour(t, p.sw.needle, p.sw.generate, p.sw.do_needle, false, "as reap eval --needle / --generate; see above");
    declare_task_files(t, p.sw.choice, "scored on the base and every size's mask, as reap eval scores them");
    t.for_mode({"--tasks-limit"}, "the task files", "--multiple-choice, --hellaswag or --winogrande",
               [&p] { return !p.sw.choice.tasks_path.empty(); });
    t.flag("-q, --quiet", "no progress line", p.quiet);
    t.flag("--verbose", "show llama.cpp's log", p.sw.eval.verbose);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (p.sw.saliency.empty()) {
            p.sw.saliency = a;
        } else if (p.sw.second_saliency.empty()) {
            p.sw.second_saliency = a;   // --methods: checked after parsing
        } else {
            err = "unexpected argument '" + a + "' (at most two saliency archives, with --methods)";
            return false;
        }
        return true;
    });
    t.excludes("--methods", "--method", "--methods plans by each method it lists");
    t.excludes("--methods", "--widths", "a methods sweep cuts experts only");
    reap::cli::declare_eval_runtime(t, "window size (default " + std::to_string(reap::k_default_window) + ", or the model's trained context when shorter)", p.given, p.sw.eval.rt);
    t.require(p.sw.saliency, "no saliency archive given")
     .require(p.sw.eval.base_path, "no model given (-m BASE.gguf)")
     .require(p.sw.eval.input_path, "no input given (-f TEXT_OR_CORPUS)");
}

} // namespace reap::cli

// The options of reap eval (eval_flags.h): the table and --help's prose.
#include "cli/eval_flags.h"

#include <cstdint>
#include <cstdlib>

namespace reap::cli {

void declare_behaviour(options & t, needle_options & needle, generate_options & generate, bool & do_needle, bool with_seed,
                       const std::string & see, std::function<bool()> also_generates) {
    t.flag("--needle", "the needle-in-a-haystack grid over -f (" + see + ")", do_needle);
    t.custom("--needle-lengths", "L,...", "haystack lengths in tokens (default 64, 128, ... up to half the trained "
             "context, the largest five)", [&needle](const std::string & v, std::string & err) {
                 std::vector<int64_t> lengths;
                 if (!parse_integer_list("--needle-lengths", v, 1, INT32_MAX, lengths, err)) return false;
                 if (lengths.empty()) {   // "," is no list, not the defaults
                     err = "--needle-lengths: '" + v + "' names no length";
                     return false;
                 }
                 needle.lengths.insert(needle.lengths.end(), lengths.begin(), lengths.end());
                 return true;
             });
    t.custom("--needle-depths", "D,...", "where the needle goes, 0..1 of the haystack (default 0.15,0.5,0.85)",
             [&needle](const std::string & v, std::string & err) {
                 if (split_list(v).empty()) {
                     err = "--needle-depths: '" + v + "' names no depth";
                     return false;
                 }
                 for (const auto & s : split_list(v)) {
                     double d = 0;
                     if (!parse_number("--needle-depths", s, 0, 1, d, err)) return false;
                     needle.depths.push_back(d);
                 }
                 return true;
             });
    t.integer("--needles", "N", "needles (values) per length x depth cell (default 1, at most 10000)", 1, 10000, needle.needles);
    if (with_seed) {
        t.integer("--seed", "S", "seed of the needles' values and of --temp's draws (default 0; recorded in --json)", 0,
                  INT64_MAX, needle.seed);
    }
    t.text("--generate", "PROMPTS", "free generation after every prompt of a corpus (" + see + ")",
           generate.prompts_path);
    t.integer("--max-new", "N", "tokens --generate writes at most per prompt (default 128)", 1, INT32_MAX,
              generate.max_new);
    t.custom("--temp", "T", "--generate samples at temperature T, seeded (default 0: greedy)",
             [&generate](const std::string & v, std::string & err) { return parse_number("--temp", v, 0, 100, generate.temperature, err); });
    t.for_mode({"--needle-lengths", "--needle-depths", "--needles"}, "the needle grid", "--needle", [&do_needle] { return do_needle; });
    t.for_mode({"--max-new", "--temp"}, "free generation", "--generate PROMPTS" + std::string(also_generates ? " (or --tasks FILE)" : ""),
               [&generate, also_generates] { return !generate.prompts_path.empty() || (also_generates && also_generates()); });
}

void declare_task_files(options & t, reap::choice_options & choice, const std::string & see) {
    const auto task_file = [&choice](reap::choice_format f) {
        return [&choice, f](const std::string & v, std::string & err) {
            if (!choice.tasks_path.empty()) {
                err = std::string(reap::choice_format_flag(f)) + ": one task file a run (" + reap::choice_format_flag(choice.format) +
                      " " + choice.tasks_path + " was given)";
                return false;
            }
            choice.format = f;
            choice.tasks_path = v;
            return true;
        };
    };
    t.custom("--multiple-choice", "FILE", "multiple-choice accuracy on llama-perplexity's binary task file (ARC, MMLU, "
             "TruthfulQA, HellaSwag as published for llama.cpp); " + see, task_file(reap::choice_format::multiple_choice));
    t.custom("--hellaswag", "FILE", "HellaSwag accuracy on llama-perplexity's 6-lines-a-task text file", task_file(reap::choice_format::hellaswag));
    t.custom("--winogrande", "FILE", "Winogrande accuracy on llama-perplexity's CSV", task_file(reap::choice_format::winogrande));
    t.custom("--tasks-limit", "N", "score N tasks drawn as llama-perplexity draws them (default: every task; --hellaswag: 400, "
             "as llama-perplexity; 0 = every task)", [&choice](const std::string & v, std::string & err) {
                 int64_t n = 0;
                 if (!parse_integer("--tasks-limit", v, 0, INT32_MAX, n, err)) return false;
                 choice.limit = (size_t) n;
                 return true;
             });
}

// --help's prose for eval: what each use measures and how.
static const char * eval_about() {
    return
    "Runs both models over the same tokens and reports perplexity of each and their\n"
    "ratio, KL(base || pruned) of the next-token distributions over the full vocabulary\n"
    "(mean, median, p99, max) and top-1 agreement. Windows of -c tokens; the second\n"
    "half of each window is scored, as llama-perplexity does, so the base PPL equals\n"
    "llama-perplexity's on the same file and -c (and -b). Without --kld-base KLD uses\n"
    "full-precision log-probabilities.\n"
    "\n"
    "A -f ending in .jsonl (or whose first line is {\"domain\": ..., \"text\"|\"messages\": ...})\n"
    "is a corpus, read as reap calibrate reads it (`messages` go through the model's chat\n"
    "template; a line without a domain, or with both or neither of text and messages, is\n"
    "an error): every sample is windowed on its own (a sample shorter than -c is one\n"
    "shorter window, longer ones lose their remainder; samples under 3 tokens are skipped\n"
    "as too short), and the report is per domain and overall.\n"
    "A plain text needs at least -c tokens (llama-perplexity asks for 2 x -c).\n"
    "\n"
    "Virtual pruning: --mask PLAN.json scores a plan without writing the pruned file. The\n"
    "base model runs with the plan's removed experts made unselectable in every MoE\n"
    "layer's router (-inf on the router logits and on the selection score, after any\n"
    "exp_probs_b bias and before group scoring and top-k), which computes what the model\n"
    "reap prune writes from that plan would compute. The plan must fit the base exactly\n"
    "as reap prune requires. A width plan (reap plan --width) also zeroes each kept\n"
    "expert's removed channels before its down projection: what the width-cut file\n"
    "computes, down's requantisation aside (exact for an f32/f16 down kept in its type).\n"
    "--base-mask PLAN masks the base itself: with -p PRUNED made\n"
    "from the same plan, KLD ~ 0 shows the two agree.\n"
    "\n"
    "Several -p / --mask: the base runs once; each model is scored against it with the\n"
    "same numbers as separate runs. One model is resident at a time: masks run on the\n"
    "loaded base, which is then freed before each pruned file loads in turn. The base's\n"
    "log-softmax rows wait in an unlinked temp file in --tmp-dir: scored tokens x\n"
    "(4 x n_vocab + 4) bytes (259-token vocabulary: ~1 KiB per token; 163,840: 640 KiB\n"
    "per token, 10k tokens ~ 6.5 GB); a run needing more than the disk has is refused\n"
    "up front. Output: a table per model under a \"== PATH\" line, or with --json one\n"
    "object {\"pruned\": {\"PATH\": ...}, \"masked\": {\"PLAN\": ...}} in the order given\n"
    "(a single -p or --mask prints its object alone).\n"
    "\n"
    "MTP blocks (<arch>.nextn_predict_layers > 0): the MTP draft's greedy acceptance for\n"
    "base and pruned, over the scored positions p: the share where the MTP head's argmax\n"
    "for (h_{p-1}, x_p) equals the same model's own argmax at p (\"mtp_draft\" in --json).\n"
    "--mask and --base-mask mask the MTP blocks too; not for a base read from --kld-base.\n"
    "\n"
    "Behaviour (on the base and every -p / --mask, one model resident; no KLD run):\n"
    "--needle: for each length x depth cell, a haystack of exactly L tokens of -f (plain text,\n"
    "or a corpus's samples joined by blank lines), the sentence \"The secret code is V.\" with a\n"
    "seeded random V (\"KVX-7391\") put in at depth D at the nearest sentence boundary, then\n"
    "the question: a user turn through the model's chat template when it has one, else the\n"
    "lead-in \"The secret code is\" repeated at the end. Greedy decoding of V's length in tokens\n"
    "(or to end of generation); a cell is exact when the answer, trimmed, is V. An -f shorter\n"
    "than a length is an error naming the length. Table: a mark per cell and model, \"n/m\".\n"
    "--generate PROMPTS: continuations (up to --max-new tokens; greedy, or sampled with --temp,\n"
    "prompt i seeded with --seed + i for every model) of every prompt of a corpus (`messages`\n"
    "end with the template's assistant turn); per domain: loop rate (an output whose last\n"
    "r x p tokens repeat with a period p >= k: a span of at least k = 8 tokens said r = 3\n"
    "times back to back; shorter repeats count through their multiples, so a doubled word or\n"
    "a 20-character rule line does not, a phrase said three times does), termination rate\n"
    "(an end-of-generation token before the cap), distinct-4 (distinct token 4-grams / all),\n"
    "mean length and the mean leading tokens that agree with the base's output.\n"
    "Reading them: the base's n/m is the ceiling a cut is held to; a loop rate above the\n"
    "base's is runaway repetition, a termination rate below it outputs that no longer stop\n"
    "on their own, a distinct-4 far from it changed wording (make demo's cuts: docs/results.md).\n"
    "--json: {\"format\": \"reap-behaviour\", \"needle\": ..., \"generate\": ...}, every decoded text\n"
    "and token, and per section \"measured\": the input's sha256, the base's fingerprint, each\n"
    "mask's plan hash and each pruned file's SHA256SUMS hash (reap report --eval reads it).\n"
    "A progress line with ETA shows on a terminal's stderr (not with -q).\n"
    "\n"
    "Tasks (on the base and every -p / --mask, one model resident; no KLD run):\n"
    "--multiple-choice FILE | --hellaswag FILE | --winogrande FILE: accuracy on the task files\n"
    "llama-perplexity reads, each task scored as it scores them (every choice tokenized whole;\n"
    "the mean log-probability of the tokens after what all choices share; the first best\n"
    "wins), so a pruned file's accuracy equals `llama-perplexity --multiple-choice` (etc.)\n"
    "on the same file, data, -c and -np, and a mask's equals its file's, task for task.\n"
    "The context is laid out as there: max(4, -np) sequences in one KV cache of that many\n"
    "times -c (default 512) cells, whole tasks packed into each decode. A model larger than\n"
    "memory is read once per decode: a larger -np and -c pack more tasks into one.\n"
    "Per model: accuracy with its 95% Wilson interval and, against the base on the same\n"
    "tasks, how many went right->wrong and wrong->right, with McNemar's exact two-sided\n"
    "p-value (below 0.05: the cut changed which tasks are right by more than chance would).\n"
    "--tasks FILE: generative tasks, JSONL, one a line: {\"id\", \"prompt\" | \"messages\", \"answer\":\n"
    "{\"exact\": S} | {\"regex\": R} | {\"number\": X, \"tol\": T}, \"max_tokens\"?}; messages go through the\n"
    "model's chat template. Each task answered --samples K times (greedy, or --temp T with --top-p P,\n"
    "seeded per task and sample from --seed: the same draws on every model) up to its max_tokens\n"
    "or --max-new. Per model: pass rate over tasks x samples with its 95% interval, answers that\n"
    "hit the cap; --recheck-cap N answers exactly those again at N and says which then finished.\n"
    "--answers-dir DIR writes each model's answers file (reap judge reads two of them). With\n"
    "--samples 1 a row is one attempt per task: it carries real variance when sampled.\n"
    "--json: {\"format\": \"reap-tasks\", \"choice\": ...}, every task's pick and flag and\n"
    "what was measured (reap report --tasks reads it). The task file is checked whole\n"
    "before any model loads: a count, offset or label out of range, a task with no correct\n"
    "choice or a Winogrande line without its fields is an error naming it.\n"
    "\n";
}

void declare_eval(options & t, eval_params & p) {
    t.about(eval_about());
    t.section("options:");
    t.text("-m, --model", "FILE", "base model", p.opt.base_path);
    t.custom("-p, --pruned", "FILE", "pruned model (same vocabulary); repeat for several",
             [&p](const std::string & v, std::string &) {
                 p.pruned.push_back(v);
                 p.cands.push_back({v, false});
                 return true;
             });
    t.custom("--mask", "PLAN.json", "the base with this plan's removed experts masked; repeat for several",
             [&p](const std::string & v, std::string &) {
                 p.cands.push_back({v, true});
                 return true;
             });
    // one base, one mask: a second --base-mask is refused rather than silently winning
    t.custom("--base-mask", "PLAN.json", "mask the base itself (compare a masked base with -p, or with --mask); once",
             [&p](const std::string & v, std::string & err) {
                 if (!p.opt.base_mask_path.empty()) {
                     err = "--base-mask given twice (" + p.opt.base_mask_path + ", " + v + "): the base is masked by one plan";
                     return false;
                 }
                 p.opt.base_mask_path = v;
                 return true;
             });
    t.text("--tmp-dir", "DIR", "where the base's rows wait (default $TMPDIR or /tmp)", p.opt.tmp_dir);
    t.text("-f, --file", "FILE", "plain text or corpus JSONL", p.opt.input_path);
    t.text("--kld-base", "FILE",
           "llama-perplexity --kl-divergence-base file: if FILE is missing, run the base over -f and write it "
           "(without -p only the file is written); if it exists, use it instead of running the base (-m may be "
           "omitted; -f, if given, must give the file's tokens). Plain text only. KLD against the file uses its "
           "16-bit log-probs, like llama-perplexity. With several -p each is scored through the file in turn.",
           p.opt.kld_base_path);
    t.integer("--chunks", "N", "score at most N windows (plain text)", 1, INT32_MAX, p.opt.max_chunks);
    t.flag("--json", "print one JSON object instead of the table (see several -p)", p.json);
    t.flag("-q, --quiet", "no progress line (it only shows when stderr is a terminal)", p.quiet);
    t.flag("--verbose", "show llama.cpp's log", p.opt.verbose);
    t.flag("--smoke", "greedy-decode both models after --prompt and report how many leading tokens agree (one -p)",
           p.do_smoke);
    declare_behaviour(t, p.needle, p.generate, p.do_needle, true, "see above; with -p / --mask",
                      [&p] { return !p.gen.tasks_path.empty(); });
    declare_task_files(t, p.choice, "see above");
    t.text("--tasks", "FILE", "generative tasks with checkers (JSONL; see above); --temp, --max-new and --seed apply",
           p.gen.tasks_path);
    t.custom("--samples", "K", "--tasks: answers per task (default 1)", [&p](const std::string & v, std::string & err) {
        int64_t n = 0;
        if (!parse_integer("--samples", v, 1, 1 << 16, n, err)) return false;
        p.gen.settings.samples = (int) n;
        return true;
    });
    t.custom("--top-p", "P", "--tasks: nucleus sampling with --temp > 0 (default 1: off)", [&p](const std::string & v, std::string & err) {
        return parse_number("--top-p", v, 1e-6, 1, p.gen.settings.top_p, err);
    });
    t.custom("--recheck-cap", "N", "--tasks: answer again at this larger cap exactly the answers that hit theirs",
             [&p](const std::string & v, std::string & err) {
                 int64_t n = 0;
                 if (!parse_integer("--recheck-cap", v, 1, 1 << 20, n, err)) return false;
                 p.gen.settings.recheck_cap = (int) n;
                          return true;
             });
    t.custom("--answers-dir", "DIR", "--tasks: write each model's answers file there (for reap judge)",
             [&p](const std::string & v, std::string &) {
                 p.answers_dir = v;
                          return true;
             });
    t.integer("-n, --n-predict", "N", "tokens to generate with --smoke (default 12)", 1, INT32_MAX, p.smoke.n_predict);
    t.text("--prompt", "TEXT", "prompt for --smoke", p.smoke.prompt);
    t.for_mode({"--prompt", "-n"}, "--smoke", "--smoke", [&p] { return p.do_smoke; });
    t.for_mode({"--tasks-limit"}, "the multiple-choice files", "--multiple-choice, --hellaswag or --winogrande",
               [&p] { return !p.choice.tasks_path.empty(); });
    t.for_mode({"--samples", "--top-p", "--recheck-cap", "--answers-dir"}, "generative tasks", "--tasks FILE",
               [&p] { return !p.gen.tasks_path.empty(); });
    t.excludes("--needle", "--tasks", "the needle grid goes in another run");
    t.help_row();
    declare_eval_runtime(t, "window size (default " + std::to_string(reap::k_default_window) + ", or the model's trained context when shorter, or the --kld-base file's)", p.given, p.opt.rt);
    // What each use needs (cmd_eval.cpp picks the use by the same flags: --smoke,
    // then --needle / --generate, then the evaluation). With --kld-base,
    // --needle's missing -f is not asked: cmd_eval.cpp refuses the pair first.
    const auto behaviour = [&p] {
        return !p.do_smoke && (p.do_needle || !p.generate.prompts_path.empty() || !p.choice.tasks_path.empty() ||
                               !p.gen.tasks_path.empty());
    };
    t.require(p.opt.base_path, "--needle, --generate and the task files run the base too: give -m BASE.gguf", behaviour)
     .require(p.opt.input_path, "--needle takes its haystack from -f TEXT_OR_CORPUS",
              [&p, behaviour] { return behaviour() && p.do_needle && p.opt.kld_base_path.empty(); })
     .require(p.opt.input_path, "no input: give -f TEXT_OR_CORPUS",
              [&p, behaviour] { return !p.do_smoke && !behaviour() && p.opt.kld_base_path.empty(); });
}


} // namespace reap::cli

// reap judge: a blinded, order-swapped pairwise judge of two builds' answers
// files (reap eval --tasks --answers-dir), in-process on any GGUF with a chat
// template (src/llama/judge.h; the rules: src/metrics/judge_rules.h). Writes
// JUDGE.json and the request log beside it; prints the comparison.
#include "cli/commands.h"
#include "cli/llama_flags.h"
#include "llama/judge.h"
#include "util/json.h"
#include "util/output_rule.h"
#include "util/publish.h"

#include <cstdio>
#include <unistd.h>

namespace {

struct judge_params {
    reap::judge_options o;
    std::vector<std::string> answers;
    std::string out;
    bool force = false, quiet = false;
    reap::cli::runtime_given given;
};

// JUDGE.json -> JUDGE.requests.jsonl
std::string log_path_of(const std::string & out) {
    const bool json = out.size() > 5 && out.compare(out.size() - 5, 5, ".json") == 0;
    return (json ? out.substr(0, out.size() - 5) : out) + ".requests.jsonl";
}

} // namespace

int cmd_judge(int argc, char ** argv) {
    judge_params p;
    reap::cli::options t("judge", "usage: reap judge ANSWERS_A.json ANSWERS_B.json (--judge JUDGE.gguf | --judge-url URL [--judge-model NAME])\n"
                                  "                  [--rubric RUBRIC.json] [--samples K] -o JUDGE.json");
    t.about(
        "Compares two builds' answers to the same tasks (reap eval --tasks ... --answers-dir DIR\n"
        "writes one answers file per model) with a judge model. Each task's prompt and the two\n"
        "answers, labelled only \"first\" and \"second\", go to the judge in both orders, rendered\n"
        "through the judge's own chat template. In-process (--judge), the verdict is the label\n"
        "that owns the best-scored token, after the prompt, among the tokens that begin a label:\n"
        "the first step of grammar-constrained greedy output (never free text parsed). From\n"
        "A's side: a win when A is chosen in both orders, a\n"
        "loss when B is, a tie when the verdict followed the position. The position rate (how\n"
        "often the judge chose what it was shown first) makes a position-biased judge visible:\n"
        "0.5 reads the answers, 1.0 only looks at the order.\n"
        "--rubric FILE ({\"scale\": [1, 5], \"instructions\": \"...\"}): each answer is also scored\n"
        "alone on the scale (the digit the judge scores highest); the means come with 95%\n"
        "intervals. The two files must answer the same task file (its sha256), the same tasks\n"
        "and samples in the same order; the first mismatch is named.\n"
        "--judge-url http://HOST:PORT/v1: an OpenAI-compatible chat-completions endpoint such as\n"
        "llama-server: each request carries a grammar that allows only the labels, temperature 0\n"
        "and one token; the reply must begin exactly one label. A request with no reply or an\n"
        "HTTP 5xx is tried again (--retries), one refused or malformed or not a verdict is a\n"
        "failure; failures are counted and named, never a tie, and JUDGE.json is then not\n"
        "written (exit 2): the same command resumes, asking only what has no verdict yet.\n"
        "Output: JUDGE.json (reap report --judge reads it) and JUDGE.requests.jsonl beside it,\n"
        "every prompt and reply (in-process: the labels' best logits), for audit; the log is\n"
        "also the journal a rerun resumes from (--force starts over). These numbers compare\n"
        "these two builds under this judge only.\n");
    t.section("options:");
    t.text("--judge", "JUDGE.gguf", "the judge model, in-process (any GGUF with a chat template)", p.o.judge_path);
    t.text("--judge-url", "URL", "an OpenAI-compatible endpoint instead (http://HOST:PORT/v1, e.g. llama-server)", p.o.judge_url);
    t.text("--judge-model", "NAME", "--judge-url: the \"model\" of each request (default: none; the endpoint's own)", p.o.judge_model);
    t.integer("--timeout", "S", "--judge-url: seconds a request may take (default 120)", 1, 86400, p.o.timeout_s);
    t.integer("--retries", "N", "--judge-url: more attempts of a request that got no reply or HTTP 5xx (default 2)", 0, 100, p.o.retries);
    t.for_mode({"--judge-model", "--timeout", "--retries"}, "an endpoint judge", "--judge-url URL", [&p] { return !p.o.judge_url.empty(); });
    t.text("--rubric", "RUBRIC.json", "also score each answer alone on the rubric's scale", p.o.rubric_path);
    t.integer("--samples", "K", "judge the first K answers of each task (reap eval --tasks --samples; default: every one)", 1, 1 << 16,
              p.o.samples);
    t.text("-o, --output", "JUDGE.json", "where the result goes (the request log beside it)", p.out);
    t.flag("--force", "replace an existing JUDGE.json and its request log (never an input)", p.force);
    t.flag("-q, --quiet", "no progress line", p.quiet);
    t.flag("--verbose", "show llama.cpp's log", p.o.verbose);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (p.answers.size() == 2) {
            err = "more than two answers files given ('" + a + "')";
            return false;
        }
        p.answers.push_back(a);
        return true;
    });
    reap::cli::declare_eval_runtime(t, "the judge's context (default: the longest prompt)", p.given, p.o.rt, false);
    t.require(p.out, "no output given (-o JUDGE.json)");
    int status = 0;
    if (!t.parse(argc, argv, status, false)) return status;
    if (!reap::cli::parse_llama_runtime(t, "judge", p.o.judge_path, p.given, p.o.rt, status)) return status;
    if (!t.check_required(status)) return status;
    if (p.answers.size() != 2) return t.usage_error("give two answers files, A and B");
    if (p.o.judge_path.empty() == p.o.judge_url.empty()) return t.usage_error("give one judge: --judge JUDGE.gguf or --judge-url URL");
    p.o.a_path = p.answers[0], p.o.b_path = p.answers[1];
    p.o.log_path = log_path_of(p.out);
    p.o.progress = !p.quiet && isatty(fileno(stderr));
    const std::vector<std::pair<std::string, std::string>> inputs = {
        {"answers file", p.o.a_path}, {"answers file", p.o.b_path}, {"judge model", p.o.judge_path}, {"rubric", p.o.rubric_path}};
    std::string err;
    // JUDGE.json is written once, whole; the request log is the journal a rerun resumes from
    if (!reap::util::check_output(p.out, inputs, p.force, err) || !reap::util::check_not_input(p.o.log_path, inputs, err) ||
        !reap::util::check_writable_dir(p.o.log_path, err)) {
        return reap::cli::fail("judge", err);
    }
    p.o.fresh = p.force;
    reap::judge_result r;
    if (!reap::run_judge(p.o, r, err)) return reap::cli::fail("judge", err);
    if (!reap::util::write_file_durably(p.out, reap::util::json_text(reap::judge_result_to_json(r), 1) + "\n", err)) {
        return reap::cli::fail("judge", err);
    }
    reap::judge_result_print(stdout, r);
    return 0;
}

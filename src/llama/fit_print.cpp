// reap fit, what it prints and records (fit_stages.h): the space and the cost
// model before the search, a line a pass with the whole run's ETA, the result,
// DIR/fit.json, and the card's section and figure on the search.
#include "llama/fit_stages.h"

#include "gguf/gguf.h"
#include "metrics/kld_record.h"
#include "moe/census.h"
#include "moe/identity.h"
#include "util/memory.h"
#include "util/number_format.h"
#include "util/path.h"
#include "util/svg_chart.h"
#include "util/text_escape.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <map>
#include <sys/stat.h>

namespace reap {

namespace pl = reap::planner;

namespace {

std::string source_name(const fit_result & r, size_t source) {
    for (const fit_candidate & c : r.space) {
        if (c.point.source == source) return util::base_name(c.source_path);
    }
    return "source " + std::to_string(source);
}

// Tokens of one pass and the vocabulary: from the reference's KLD base file
// when it exists (exact), else the held-out bytes (an estimate: 1 token a byte
// is a byte vocabulary's, about 4 bytes a token a BPE vocabulary's).
struct pass_size {
    uint64_t tokens = 0;
    bool     exact = false;
    int      n_ctx = 0;
    int64_t  n_vocab = 0;
};

pass_size pass_size_of(const fit_options & o, const fit_result & r) {
    pass_size ps;
    kld_base_header h;
    std::string err;
    const std::string kld = !r.kld_path.empty() ? r.kld_path : !o.kld_base.empty() ? o.kld_base : o.out_dir + "/reference.kld";
    if (kld_base_read_header(kld, h, err)) {
        ps.tokens = (uint64_t) h.n_chunk * (uint64_t) h.n_ctx;
        ps.exact = true;
        ps.n_ctx = h.n_ctx;
        ps.n_vocab = h.n_vocab;
        return ps;
    }
    gguf::model m;
    if (gguf::open_model(o.sources[0], m, err)) {
        for (const auto & t : m.tensors) {
            if (t.name == "token_embd.weight" && t.n_dims >= 2) ps.n_vocab = t.ne[1];
        }
    }
    struct stat st;
    const uint64_t bytes = ::stat(o.heldout.c_str(), &st) == 0 ? (uint64_t) st.st_size : 0;
    ps.tokens = ps.n_vocab > 0 && ps.n_vocab <= 512 ? bytes : bytes / 4;
    ps.n_ctx = o.rt.window(moe::trained_context(m));
    return ps;
}

// The candidates scored from their written files (fit_candidate::written).
size_t written_candidates(const fit_result & r) {
    return (size_t) std::count_if(r.space.begin(), r.space.end(), [](const fit_candidate & c) { return c.written; });
}

} // namespace

void print_fit_space(FILE * out, const fit_options & o, const fit_result & r) {
    fprintf(out, "reap fit: budget %s (%s); %zu candidates in %zu lines (source x width, each at the largest N that fits; "
            "the full grid of every N that fits: %zu)\n",
            o.budget_text.c_str(), util::format_size(o.budget).c_str(), r.space.size(), r.lines.size(), r.full_grid);
    for (size_t l = 0; l < r.lines.size(); ++l) {
        const std::vector<size_t> & ln = r.lines[l];
        if (ln.empty()) continue;
        const fit_candidate & a = r.space[ln.front()], & b = r.space[ln.back()];
        fprintf(out, "  %-28s %3zu candidates: K %" PRId64 "..%" PRId64 ", N %" PRId64 "..%" PRId64 "\n",
                util::base_name(a.source_path).c_str(), ln.size(), a.point.width, b.point.width, a.point.n_keep, b.point.n_keep);
    }
    if (const size_t n = written_candidates(r)) {
        fprintf(out, "  %zu of them cut channels with down requantised to an importance-matrix type, which a mask does not model: "
                "each is written to %s/measure, its file scored, then removed\n", n, o.out_dir.c_str());
    }
    if (!r.excluded.empty()) {
        fprintf(out, "  pruned away by the budget: %zu (source, K) pairs (the first: %s K=%" PRId64 ": %s)\n", r.excluded.size(),
                util::base_name(r.excluded[0].source_path).c_str(), r.excluded[0].width, r.excluded[0].why.c_str());
    }
}

void print_fit_cost(FILE * out, const fit_options & o, const fit_result & r) {
    const pass_size ps = pass_size_of(o, r);
    eval_runtime rt = o.rt;
    eval_sizes sizes;
    std::string size_err;
    runtime_init(o.verbose);
    if (!size_eval_batches(rt, o.sources[0], ps.n_ctx, std::max<int64_t>(ps.n_vocab, 1), (int64_t) ps.tokens, sizes, size_err)) {
        rt = o.rt;
        settle_batches(rt, ps.n_ctx, std::max<int64_t>(ps.n_vocab, 1));
        sizes.note = size_err;
    }
    const uint64_t ubatches = rt.n_ubatch > 0 ? (ps.tokens + (uint64_t) rt.n_ubatch - 1) / (uint64_t) rt.n_ubatch : 0;
    uint64_t pool = 0;
    for (uint64_t b : r.pool_bytes) pool = std::max(pool, b);
    for (size_t s = 0; r.pool_bytes.empty() && s < o.sources.size(); ++s) {   // before the space: each source's census
        gguf::model m;
        moe::census cen;
        std::string err;
        if (gguf::open_model(o.sources[s], m, err) && moe::take_census(m, {}, cen, err)) pool = std::max(pool, cen.expert_pool_bytes);
    }
    std::vector<pl::fit_point> pts;
    for (const fit_candidate & c : r.space) pts.push_back(c.point);
    const size_t planned = std::min(r.space.size(), fit_passes_left_estimate(pl::fit_search(pts, r.lines, o.max_passes)));
    fprintf(out, "reap fit: cost model: the full grid is %zu passes, the space %zu (+1 for the reference's rows); the search plans about %zu%s\n",
            r.full_grid, r.space.size(), planned, o.max_passes ? (" (--max-passes " + std::to_string(o.max_passes) + ")").c_str() : "");
    fprintf(out, "  a pass: %s%" PRIu64 " tokens of %s in windows of %d, -ub %d: %" PRIu64 " ubatches, each reading up to the expert pool (%s)\n",
            ps.exact ? "" : "about ", ps.tokens, o.heldout.c_str(), ps.n_ctx, rt.n_ubatch, ubatches, util::format_size(pool).c_str());
    fprintf(out, "  -ub %d: %s\n", rt.n_ubatch, sizes.note.c_str());
    uint64_t largest_written = 0;
    for (const fit_candidate & c : r.space) largest_written = std::max(largest_written, c.written ? c.point.bytes : 0);
    if (largest_written > 0) {
        fprintf(out, "  a written candidate also reads its source and writes its file (up to %s, one at a time in %s/measure) before its pass\n",
                util::format_size(largest_written).c_str(), o.out_dir.c_str());
    }
    const std::optional<util::memory_limit> mem = util::available_memory();
    if (mem && !r.space.empty()) {
        gguf::model m;
        std::string err;
        const uint64_t src_bytes = gguf::open_model(r.space[0].source_path, m, err) ? m.file_bytes() : 0;
        if (src_bytes > mem->bytes) {
            fprintf(out, "  the source (%s) exceeds the memory available (%s, %s): it streams, about %s read a pass, %s for the search\n",
                    util::format_size(src_bytes).c_str(), util::format_size(mem->bytes).c_str(), mem->source.c_str(),
                    util::format_size(pool * ubatches).c_str(), util::format_size(pool * ubatches * (planned + 1)).c_str());
        }
    }
}

size_t fit_passes_left_estimate(const pl::fit_search & s) {
    size_t left = 0;
    for (size_t l = 0; l < s.lines().size(); ++l) {
        const std::vector<size_t> & ln = s.lines()[l];
        std::vector<size_t> scored;
        for (size_t pos = 0; pos < ln.size(); ++pos) {
            if (s.score(ln[pos])) scored.push_back(pos);
        }
        if (scored.empty()) {   // ends and middle, then about two halvings a level around the best
            left += std::min<size_t>(ln.size(), 3) + (ln.size() > 3 ? 2 * (size_t) std::ceil(std::log2((double) ln.size() / 2)) : 0);
            continue;
        }
        const std::optional<size_t> b = s.best();
        const double target = b ? s.score(*b)->kld - s.noise() : 0;
        for (size_t k = 0; k + 1 < scored.size(); ++k) {
            const size_t gap = scored[k + 1] - scored[k];
            if (gap > 1 && s.gap_bound(l, scored[k], scored[k + 1]) < target) left += (size_t) std::ceil(std::log2((double) gap));
        }
    }
    return s.n_scored() + left;
}

void print_fit_pass(FILE * out, const fit_result & r, size_t i, size_t planned, double elapsed_s) {
    const fit_candidate & c = r.space[i];
    const pl::fit_score & sc = *r.scores[i];
    const size_t done = r.passes_this_run + r.passes_resumed;
    const double per = r.passes_this_run > 0 ? elapsed_s / (double) r.passes_this_run : 0;
    // what is left of the run in passes: the search's, and the written file's eval
    const size_t left = (planned > done ? planned - done : 0) + 1;
    fprintf(out, "  [%zu/~%zu] %-22s N %4" PRId64 " K %5" PRId64 " %12s  KLD %.6f (halves %.6f %.6f) top-1 %.3f%%  %s; ETA %.0f s\n",
            done, std::max(planned, done), util::base_name(c.source_path).c_str(), c.point.n_keep, c.point.width,
            util::format_size(c.point.bytes).c_str(), sc.kld, sc.kld_half[0], sc.kld_half[1], 100 * sc.top1,
            r.passes_this_run > 0 && done > r.passes_resumed ? "measured" : "from the journal", per * (double) left);
    fflush(out);
}

void print_fit_result(FILE * out, const fit_options & o, const fit_result & r) {
    const fit_candidate & w = r.space[*r.winner];
    const pl::fit_score & ws = *r.scores[*r.winner];
    fprintf(out, "\nreap fit: %zu of %zu candidates scored (%zu this run, %zu from the journal; the full grid: %zu); %s\n",
            r.passes_this_run + r.passes_resumed, r.space.size(), r.passes_this_run, r.passes_resumed, r.full_grid, r.stop_reason.c_str());
    fprintf(out, "  winner: %s N %" PRId64 " K %" PRId64 ", %s (budget %s): %s KLD %.6f, top-1 %.3f%%\n",
            util::base_name(w.source_path).c_str(), w.point.n_keep, w.point.width, util::format_size(w.point.bytes).c_str(),
            o.budget_text.c_str(), w.written ? "its written file's" : "masked", ws.kld, 100 * ws.top1);
    if (r.runner_up) {
        const fit_candidate & u = r.space[*r.runner_up];
        fprintf(out, "  by %.6f nats over %s N %" PRId64 " K %" PRId64 " (noise: %.6f, the split-half disagreement of that difference)\n",
                r.scores[*r.runner_up]->kld - ws.kld, util::base_name(u.source_path).c_str(), u.point.n_keep, u.point.width, r.noise);
    }
    if (r.methods) {
        const fit_method_score & m = r.methods->scores[r.methods->chosen];
        fprintf(out, "  criterion: %s (chosen by measurement among %zu methods: KLD %.6f at the budget)\n", m.method.c_str(),
                r.methods->scores.size(), m.score.kld);
    }
    if (r.best_by_kld) {
        const fit_candidate & b = r.space[*r.best_by_kld];
        fprintf(out, "  the gates moved the choice from %s N %" PRId64 " K %" PRId64 " (KLD %.6f) to the best that passed them\n",
                util::base_name(b.source_path).c_str(), b.point.n_keep, b.point.width, r.scores[*r.best_by_kld]->kld);
    }
    if (!r.eval_path.empty()) {
        fprintf(out, "  the written build: %s, KLD %.6f against the reference (%s: %.6f), top-1 %.3f%%; verified\n",
                util::format_size(r.file_bytes).c_str(), r.file_kld, w.written ? "its file in the search" : "its mask", ws.kld,
                100 * r.file_top1);
        fprintf(out, "  wrote %s, %s, %s, %s/README.md, %s\n", r.plan_path.c_str(), r.build_path.c_str(), r.eval_path.c_str(),
                r.card_dir.c_str(), r.fit_json.c_str());
    }
}

fit_record make_fit_record(const fit_options & o, const fit_result & r) {
    fit_record f;
    f.tool = "reap fit " + o.tool_version;
    f.budget_text = o.budget_text;
    f.budget = o.budget;
    f.sources = o.sources;
    f.reference = o.reference.empty() ? o.sources[0] : o.reference;
    f.heldout = o.heldout;
    f.saliency_file = r.saliency_path;
    f.saliency_sha256 = r.archive_sha256;
    for (size_t i = 0; i < r.space.size(); ++i) {
        const fit_candidate & c = r.space[i];
        f.candidates.push_back({c.source_path, c.point.n_keep, c.point.width, c.point.bytes, r.scores[i], c.written});
    }
    for (const fit_excluded & x : r.excluded) f.excluded.push_back({x.source_path, x.width, x.why});
    f.passes_scored = r.passes_this_run + r.passes_resumed;
    f.full_grid = r.full_grid;
    f.stop_reason = r.stop_reason;
    f.noise = r.noise;
    f.winner = *r.winner;
    f.runner_up = r.runner_up;
    if (r.gate_base) f.gates = fit_record_gates{fit_gates_fingerprint(o), *r.gate_base, r.gates, r.best_by_kld};
    f.methods = r.methods;
    f.build = {r.plan_path, r.build_path, r.eval_path, r.card_dir + "/README.md", r.file_bytes, r.file_kld, r.file_top1};
    return f;
}

std::string fit_card_section(const fit_options & o, const fit_result & r) {
    const fit_candidate & w = r.space[*r.winner];
    const std::string ref = util::markdown_text(util::base_name(o.reference.empty() ? o.sources[0] : o.reference));
    char buf[512];
    std::string s = "## How this build was chosen (`reap fit`)\n\n";
    snprintf(buf, sizeof(buf),
             "Budget %s. %zu candidates fit it (each source quantisation x channel width K, each at the largest expert count N "
             "whose file fits); %zu were scored, one %s pass each against the rows of %s on %s (the full grid of every N that fits: %zu passes). ",
             util::markdown_text(o.budget_text).c_str(), r.space.size(), r.passes_this_run + r.passes_resumed,
             written_candidates(r) ? "masked (or written: below)" : "masked", ref.c_str(),
             util::markdown_text(util::base_name(o.heldout)).c_str(), r.full_grid);
    s += buf;
    if (const size_t n = written_candidates(r)) {
        s += std::to_string(n) + " of them cut channels with the down projection requantised to an importance-matrix type, which a "
             "mask does not model: each was written and its file scored instead (marked *file* below). ";
    }
    s += "The search stopped because " + util::markdown_text(r.stop_reason) + ".\n\n";
    snprintf(buf, sizeof(buf), "The winner, %s with N = %" PRId64 " and K = %" PRId64 ", scored KLD %.6f by %s; its written file %.6f.",
             util::markdown_text(util::base_name(w.source_path)).c_str(), w.point.n_keep, w.point.width, r.scores[*r.winner]->kld,
             w.written ? "its file in the search" : "mask", r.file_kld);
    s += buf;
    if (r.runner_up) {
        snprintf(buf, sizeof(buf), " It beat the runner-up by %.6f nats; the noise of that difference (its split-half disagreement) is %.6f.",
                 r.scores[*r.runner_up]->kld - r.scores[*r.winner]->kld, r.noise);
        s += buf;
    }
    s += "\n\n| source | N | K | file | KLD (mask) | top-1 |\n|---|---:|---:|---:|---:|---:|\n";
    for (size_t i = 0; i < r.space.size(); ++i) {
        if (!r.scores[i]) continue;
        const fit_candidate & c = r.space[i];
        snprintf(buf, sizeof(buf), "| %s%s | %" PRId64 " | %" PRId64 " | %s | %.6f%s | %.3f%% |\n", util::markdown_text(util::base_name(c.source_path)).c_str(),
                 i == *r.winner ? " (winner)" : "", c.point.n_keep, c.point.width, util::format_size(c.point.bytes).c_str(),
                 r.scores[i]->kld, c.written ? " *file*" : "", 100 * r.scores[i]->top1);
        s += buf;
    }
    if (!r.excluded.empty()) s += "\n" + std::to_string(r.excluded.size()) + " (source, K) pairs had no N that fits the budget.\n";
    s += fit_card_methods(r);
    s += fit_card_gates(o, r);
    s += "\n![KLD against file size, one line per source](figures/fit-search.svg)\n\n";
    return s;
}

std::string fit_card_methods(const fit_result & r) {
    if (!r.methods) return "";
    const fit_methods_doc & d = *r.methods;
    const fit_method_score & best = d.scores[d.chosen];
    std::string s = "\n**The criterion, chosen by measurement** (`--methods`): each method's plan at the budget (the first source, "
                    "every channel kept) was scored by mask against the same rows; the search ranked by " + util::markdown_text(best.method) + ".";
    char buf[256];
    if (d.runner_up) {
        const double gap = d.scores[*d.runner_up].score.kld - best.score.kld;
        snprintf(buf, sizeof(buf), " It beat %s by %.6f nats; the split-half noise of that difference is %.6f%s.",
                 util::markdown_text(d.scores[*d.runner_up].method).c_str(), gap, d.noise,
                 gap > d.noise ? "" : " (within it: this text does not tell the two apart)");
        s += buf;
    }
    s += "\n\n| method | ranked with | N | KLD (mask) | top-1 |\n|---|---|---:|---:|---:|\n";
    for (size_t i = 0; i < d.scores.size(); ++i) {
        const fit_method_score & m = d.scores[i];
        snprintf(buf, sizeof(buf), "| %s%s | %s | %" PRId64 " | %.6f | %.3f%% |\n", util::markdown_text(m.method).c_str(),
                 i == d.chosen ? " (chosen)" : "", util::markdown_text(util::base_name(m.archive)).c_str(), m.n_keep, m.score.kld,
                 100 * m.score.top1);
        s += buf;
    }
    return s;
}

std::string fit_card_gates(const fit_options & o, const fit_result & r) {
    if (!r.gate_base) return "";
    const bool gen = !o.generate.prompts_path.empty(), tasks = !o.tasks.tasks_path.empty();
    char buf[512];
    const auto cells = [&](const fit_gate_measure & m) {
        std::string c = o.gate_needle ? std::to_string(m.n_exact) + "/" + std::to_string(m.n_cells) : "-";
        snprintf(buf, sizeof(buf), " | %s | ", c.c_str());
        std::string row = buf;
        if (gen) snprintf(buf, sizeof(buf), "%.1f%% | %.1f%% | ", 100 * m.loop_rate, 100 * m.termination_rate);
        else snprintf(buf, sizeof(buf), "- | - | ");
        row += buf;
        if (tasks) {
            const paired_result p = paired_against(r.gate_base->task_correct, m.task_correct);
            const interval ci = wilson_interval((uint64_t) std::lround(m.task_accuracy() * (double) m.task_correct.size()), m.task_correct.size());
            snprintf(buf, sizeof(buf), "%.2f%% (%.2f-%.2f%%), %" PRIu64 "/%" PRIu64 ", p %.3g | ", 100 * m.task_accuracy(), 100 * ci.low,
                     100 * ci.high, p.right_to_wrong, p.wrong_to_right, p.p_value);
        } else {
            snprintf(buf, sizeof(buf), "- | ");
        }
        return row + buf;
    };
    std::string s = "\n### Gates\n\nThe best candidates by KLD, run by mask before anything was written (" +
                    util::markdown_text(fit_gates_fingerprint(o)) + "); the first that passed is the winner.\n\n";
    s += "| model | N | K | KLD (mask) | needle exact | loop rate | termination rate | task accuracy (95%), right->wrong/wrong->right, McNemar p | verdict |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
    s += "| reference | | | " + cells(*r.gate_base) + " |\n";
    for (const fit_gate_verdict & g : r.gates) {
        const fit_candidate & c = r.space[g.candidate];
        snprintf(buf, sizeof(buf), "| %s | %" PRId64 " | %" PRId64 " | %.6f", util::markdown_text(util::base_name(c.source_path)).c_str(),
                 c.point.n_keep, c.point.width, r.scores[g.candidate]->kld);
        const std::string head = buf;   // cells() writes into buf too
        s += head + cells(g.m) + (g.pass ? std::string(g.candidate == *r.winner ? "passed (winner)" : "passed")
                                        : "failed: " + util::markdown_text(g.why)) + " |\n";
    }
    return s;
}

std::string fit_card_figure(const fit_result & r) {
    util::chart c;
    c.title = "reap fit: KLD of each scored candidate against its file size (each width K at the largest N that fits)";
    c.x_label = "file size (MB)";
    util::chart_panel p;
    p.y_label = "KL divergence from the reference (nats/token, mean)";
    std::map<size_t, util::chart_series> lines;
    for (size_t i = 0; i < r.space.size(); ++i) {
        if (!r.scores[i]) continue;
        util::chart_series & s = lines[r.space[i].point.source];
        s.name = source_name(r, r.space[i].point.source);
        s.x.push_back((double) r.space[i].point.bytes / 1e6);
        s.y.push_back(r.scores[i]->kld);
    }
    for (auto & [src, s] : lines) {   // each line by file size (along K the sizes go up and down)
        std::vector<std::pair<double, double>> xy;
        for (size_t k = 0; k < s.x.size(); ++k) xy.push_back({s.x[k], s.y[k]});
        std::sort(xy.begin(), xy.end());
        for (size_t k = 0; k < xy.size(); ++k) std::tie(s.x[k], s.y[k]) = xy[k];
        p.series.push_back(s);
    }
    c.panels.push_back(p);
    if (r.winner) c.marks.push_back({(double) r.space[*r.winner].point.bytes / 1e6, "winner"});
    return util::render_svg(c);
}

} // namespace reap

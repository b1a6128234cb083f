// reap fit's gates (--needle, --generate, a task file): after the search, before
// anything is written, the best scored candidates by KLD are run by mask through
// reap eval's needle grid, free generation and task scoring (run_needle,
// run_generate, run_choice), a round
// of --gate-top at a time, and the first in KLD order that keeps what the
// reference does (needle: its exact cells less --needle-slack; generation: a
// loop rate at most the reference's + --gate-slack, a termination rate at
// least its - --gate-slack; tasks: an accuracy at least the reference's less
// --task-slack, and not worse than the reference's on the same tasks by
// McNemar's exact test at 5%) becomes the winner. The verdicts go to
// DIR/gates.json, journalled: a resumed fit reads them back.
#include "llama/fit_stages.h"

#include "llama/behaviour_run.h"
#include "llama/eval_models.h"
#include "util/file.h"
#include "util/json.h"
#include "util/json_fields.h"
#include "util/path.h"
#include "util/publish.h"

#include <algorithm>
#include <cinttypes>
#include <map>

namespace reap {

namespace {

bool gates_given(const fit_options & o) { return o.gate_needle || !o.generate.prompts_path.empty() || !o.tasks.tasks_path.empty(); }

// One run of the given gates on `base` (a model file) and masks of it; the
// measures of the base first, then of each mask.
bool measure(const fit_options & o, const std::string & base, const std::vector<eval_candidate> & cands,
             std::vector<fit_gate_measure> & m, std::string & err) {
    behaviour_request req;
    req.eval = fit_eval_options(o, base, "", "");
    req.seed = o.rank.seed;
    if (o.gate_needle) {
        req.needle = o.needle;
        req.needle->haystack_path = o.heldout;
    }
    if (!o.tasks.tasks_path.empty()) req.choice = o.tasks;
    if (!o.generate.prompts_path.empty()) req.generate = o.generate;
    behaviour_result r;
    if (!run_behaviour(req, cands, r, err)) return false;
    m.assign(cands.size() + 1, fit_gate_measure());
    for (size_t i = 0; i < m.size(); ++i) {
        if (r.needle) {
            m[i].n_exact = r.needle->report.models[i].n_exact();
            m[i].n_cells = r.needle->report.cells.size();
        }
        if (r.choice) m[i].task_correct = r.choice->report.models[i].correct;
        if (r.generate) {
            const generation_stats st = r.generate->report.stats(i, -1);
            m[i].loop_rate = st.loop_rate;
            m[i].termination_rate = st.termination_rate;
        }
    }
    return true;
}

// Passed, or the first gate it fails and by how much.
std::string why_failed(const fit_options & o, const fit_gate_measure & base, const fit_gate_measure & c) {
    char buf[256];
    if (o.gate_needle && (int64_t) c.n_exact < (int64_t) base.n_exact - o.needle_slack) {
        snprintf(buf, sizeof(buf), "needle: %zu/%zu exact, below the reference's %zu less --needle-slack %" PRId64, c.n_exact, c.n_cells,
                 base.n_exact, o.needle_slack);
        return buf;
    }
    if (!o.tasks.tasks_path.empty()) {
        const double acc = c.task_accuracy(), ref = base.task_accuracy();
        const paired_result p = paired_against(base.task_correct, c.task_correct);
        if (acc < ref - o.task_slack - 1e-12) {
            snprintf(buf, sizeof(buf), "task accuracy %.2f%%, more than --task-slack %.2f%% below the reference's %.2f%%", 100 * acc,
                     100 * o.task_slack, 100 * ref);
            return buf;
        }
        if (p.p_value < 0.05 && p.right_to_wrong > p.wrong_to_right) {
            snprintf(buf, sizeof(buf), "task accuracy %.2f%% is worse than the reference's %.2f%% by more than chance (%" PRIu64
                     " right -> wrong, %" PRIu64 " wrong -> right, McNemar p = %.3g)", 100 * acc, 100 * ref, p.right_to_wrong,
                     p.wrong_to_right, p.p_value);
            return buf;
        }
    }
    if (!o.generate.prompts_path.empty() && c.loop_rate > base.loop_rate + o.gate_slack + 1e-12) {
        snprintf(buf, sizeof(buf), "loop rate %.1f%%, above the reference's %.1f%% + %.1f%%", 100 * c.loop_rate, 100 * base.loop_rate,
                 100 * o.gate_slack);
        return buf;
    }
    if (!o.generate.prompts_path.empty() && c.termination_rate < base.termination_rate - o.gate_slack - 1e-12) {
        snprintf(buf, sizeof(buf), "termination rate %.1f%%, below the reference's %.1f%% - %.1f%%", 100 * c.termination_rate,
                 100 * base.termination_rate, 100 * o.gate_slack);
        return buf;
    }
    return "";
}

// DIR/gates.json of an earlier run, read back into r: every verdict must name
// a candidate this fit scored.
bool read_gates(const std::string & path, fit_result & r, std::string & err) {
    fit_gates_doc d;
    if (!read_fit_gates(path, r.space.size(), d, err)) return false;
    for (const fit_gate_verdict & g : d.verdicts) {
        if (!r.scores[g.candidate]) {
            err = "fit gates file '" + path + "': candidate " + std::to_string(g.candidate) + " was not scored by this fit";
            return false;
        }
    }
    r.gate_base = d.base;
    r.gates = std::move(d.verdicts);
    return true;
}

bool write_gates(const std::string & path, const fit_result & r, std::string & err) {
    return util::write_file_durably(path, fit_gates_text({*r.gate_base, r.gates}), err);
}

// The scored candidates, best KLD first (ties: the smaller file, the lower index).
std::vector<size_t> by_kld(const fit_result & r) {
    std::vector<size_t> order;
    for (size_t i = 0; i < r.space.size(); ++i) {
        if (r.scores[i]) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&r](size_t a, size_t b) {
        const double ka = r.scores[a]->kld, kb = r.scores[b]->kld;
        if (ka != kb) return ka < kb;
        if (r.space[a].point.bytes != r.space[b].point.bytes) return r.space[a].point.bytes < r.space[b].point.bytes;
        return a < b;
    });
    return order;
}

// Rounds of --gate-top candidates in KLD order, each source's masks in one
// run, until one passes.
bool run_gates(const fit_options & o, fit_result & r, FILE * out, std::string & err) {
    const std::string ref = o.reference.empty() ? o.sources[0] : o.reference;
    fprintf(out, "reap fit: gates on the reference %s\n", util::base_name(ref).c_str());
    std::vector<fit_gate_measure> m;
    if (!measure(o, ref, {}, m, err)) return false;
    r.gate_base = m[0];
    const std::vector<size_t> order = by_kld(r);
    for (size_t start = 0; start < order.size(); start += o.gate_top) {
        const std::vector<size_t> round(order.begin() + (ptrdiff_t) start,
                                        order.begin() + (ptrdiff_t) std::min(order.size(), start + o.gate_top));
        std::map<size_t, fit_gate_measure> got;
        std::map<std::string, std::vector<size_t>> per_source;
        for (size_t i : round) per_source[r.space[i].source_path].push_back(i);
        for (const auto & [source, idx] : per_source) {
            std::vector<eval_candidate> cands;
            for (size_t i : idx) {
                cands.push_back({util::base_name(source) + " N=" + std::to_string(r.space[i].point.n_keep) + " K=" +
                                 std::to_string(r.space[i].point.width), true, &r.space[i].p});
            }
            if (!measure(o, source, cands, m, err)) return false;
            for (size_t k = 0; k < idx.size(); ++k) got[idx[k]] = m[k + 1];
        }
        bool passed = false;
        for (size_t i : round) {
            fit_gate_verdict g;
            g.candidate = i;
            g.m = got[i];
            g.why = why_failed(o, *r.gate_base, g.m);
            g.pass = g.why.empty();
            fprintf(out, "  gate %s N %" PRId64 " K %" PRId64 ": %s\n", util::base_name(r.space[i].source_path).c_str(),
                    r.space[i].point.n_keep, r.space[i].point.width, g.pass ? "passed" : g.why.c_str());
            fflush(out);
            r.gates.push_back(g);
            passed = passed || g.pass;
        }
        if (passed) return true;
    }
    return true;
}

} // namespace

std::string fit_gates_fingerprint(const fit_options & o) {
    if (!gates_given(o)) return "";
    const auto num = [](double x) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%.15g", x);
        return std::string(buf);
    };
    std::string s;
    if (o.gate_needle) {
        s += "needle lengths";
        for (int l : o.needle.lengths) s += " " + std::to_string(l);
        s += " depths";
        for (double d : o.needle.depths) s += " " + num(d);
        s += " needles " + std::to_string(o.needle.needles) + " slack " + std::to_string(o.needle_slack) + "; ";
    }
    if (!o.generate.prompts_path.empty()) {
        s += "generate max-new " + std::to_string(o.generate.max_new) + " temp " + num(o.generate.temperature) + "; ";
    }
    if (!o.tasks.tasks_path.empty()) {
        s += std::string("tasks ") + choice_format_name(o.tasks.format) + " limit " + std::to_string(o.tasks.limit) + " slack " +
             num(o.task_slack) + "; ";
    }
    return s + "gate-slack " + num(o.gate_slack) + " gate-top " + std::to_string(o.gate_top) + " seed " +
           std::to_string(o.rank.seed);
}

bool gate_stage(const fit_options & o, fit_journal & j, fit_result & r, FILE * out, std::string & err) {
    if (!gates_given(o)) return true;
    const std::string path = o.out_dir + "/gates.json";
    if (fit_stage_holds(j, "gates", path)) {
        fprintf(out, "reap fit: gates: done earlier (%s)\n", path.c_str());
        if (!read_gates(path, r, err)) return false;
    } else {
        if (!run_gates(o, r, out, err) || !write_gates(path, r, err) || !fit_mark_stage(j, "gates", path, err)) return false;
    }
    const auto first = std::find_if(r.gates.begin(), r.gates.end(), [](const fit_gate_verdict & g) { return g.pass; });
    if (first == r.gates.end()) {
        err = "no scored candidate passes the gates (" + std::to_string(r.gates.size()) + " tried; the best: " +
              (r.gates.empty() ? std::string("none") : r.gates[0].why) + ")";
        r.differs = true;
        return false;
    }
    if (first->candidate != *r.winner) {
        r.best_by_kld = r.winner;
        r.winner = first->candidate;
    }
    return true;
}

} // namespace reap

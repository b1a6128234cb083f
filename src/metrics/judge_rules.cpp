// reap judge's model-free rules and its file (judge_rules.h).
#include "metrics/judge_rules.h"

#include "util/json.h"
#include "util/json_fields.h"
#include "util/sha256.h"

#include <cinttypes>
#include <cmath>

namespace reap {

namespace {

using ojson = nlohmann::ordered_json;

// The instruction, short: a judge with a small context (the project's own
// models: 256 tokens) must still see the task and both answers.
const char * k_pairwise_question = "Which is better? Reply first or second.";

} // namespace

bool read_judge_rubric(const std::string & path, judge_rubric & out, std::string & err) {
    out = judge_rubric();
    nlohmann::json j;
    if (!util::read_json_file(path, "rubric", 1 << 20, j, err)) return false;
    util::json_fields f(j, "rubric '" + path + "'");
    std::vector<const nlohmann::json *> scale;
    if (!f.has("scale")) {
        err = "rubric '" + path + "' has no \"scale\": give [LOW, HIGH], e.g. [1, 5]";
        return false;
    }
    if (!f.elements("scale", scale) || !f.str("instructions", out.instructions)) {
        err = f.error();
        return false;
    }
    if (scale.size() != 2 || !scale[0]->is_number_integer() || !scale[1]->is_number_integer() || scale[0]->get<int64_t>() < 1 ||
        scale[1]->get<int64_t>() > 9 || scale[1]->get<int64_t>() - scale[0]->get<int64_t>() < 1) {
        err = "rubric '" + path + "': \"scale\" must be [LOW, HIGH], integers within 1..9, LOW < HIGH (one-digit labels)";
        return false;
    }
    if (out.instructions.empty()) {
        err = "rubric '" + path + "': \"instructions\" is empty";
        return false;
    }
    out.low = (int) scale[0]->get<int64_t>();
    out.high = (int) scale[1]->get<int64_t>();
    out.path = path;
    return util::sha256_file(path, out.sha256, err);
}

bool check_answer_pair(const answers_doc & a, const std::string & na, const answers_doc & b, const std::string & nb, std::string & err) {
    if (a.tasks_sha256 != b.tasks_sha256) {
        err = na + " answers the task file " + a.tasks_path + " (sha256 " + a.tasks_sha256.substr(0, 16) + "…), " + nb + " " +
              b.tasks_path + " (" + b.tasks_sha256.substr(0, 16) + "…): not the same tasks";
        return false;
    }
    if (a.prompts.size() != b.prompts.size() || a.prompts.empty()) {
        err = na + " holds " + std::to_string(a.prompts.size()) + " prompts, " + nb + " " + std::to_string(b.prompts.size());
        return false;
    }
    const size_t n = std::max(a.answers.size(), b.answers.size());
    for (size_t i = 0; i < n; ++i) {
        if (i >= a.answers.size() || i >= b.answers.size()) {
            const answers_doc & longer = i >= a.answers.size() ? b : a;
            err = "task '" + longer.answers[i].id + "' sample " + std::to_string(longer.answers[i].sample) + " is missing from " +
                  (i >= a.answers.size() ? na : nb);
            return false;
        }
        if (a.answers[i].id != b.answers[i].id || a.answers[i].sample != b.answers[i].sample) {
            err = "answer " + std::to_string(i) + " is task '" + a.answers[i].id + "' sample " + std::to_string(a.answers[i].sample) +
                  " in " + na + " but task '" + b.answers[i].id + "' sample " + std::to_string(b.answers[i].sample) + " in " + nb;
            return false;
        }
    }
    if (a.answers.size() % a.prompts.size() != 0) {
        err = na + ": " + std::to_string(a.answers.size()) + " answers for " + std::to_string(a.prompts.size()) + " tasks";
        return false;
    }
    return true;
}

nlohmann::json pairwise_messages(const std::string & task, const std::string & first, const std::string & second) {
    const std::string user = "Task: " + task + "\nFirst answer: " + first + "\nSecond answer: " + second + "\n" + k_pairwise_question;
    return nlohmann::json::array({{{"role", "user"}, {"content", user}}});
}

nlohmann::json rubric_messages(const judge_rubric & r, const std::string & task, const std::string & answer) {
    const std::string user = r.instructions + "\nTask: " + task + "\nAnswer: " + answer + "\nReply with one number from " +
                             std::to_string(r.low) + " to " + std::to_string(r.high) + ".";
    return nlohmann::json::array({{{"role", "user"}, {"content", user}}});
}

judge_outcome outcome_of(bool ab_first, bool ba_first) {
    if (ab_first && !ba_first) return judge_outcome::a_wins;   // A shown first, chosen; then A shown second, chosen
    if (!ab_first && ba_first) return judge_outcome::b_wins;
    return judge_outcome::tie;                                  // the verdict followed the position
}

judge_result::summary_t judge_result::summary() const {
    summary_t s;
    for (const auto & p : pairs) {
        for (int v : {p.ab, p.ba}) {
            if (v < 0) continue;
            ++s.verdicts;
            s.verdicts_first += v == 0;
        }
        if (p.ab < 0 || p.ba < 0) continue;
        ++s.judged;
        switch (outcome_of(p.ab == 0, p.ba == 0)) {
            case judge_outcome::a_wins: ++s.wins; break;
            case judge_outcome::b_wins: ++s.losses; break;
            case judge_outcome::tie: ++s.ties; break;
        }
    }
    return s;
}

score_mean rubric_mean(const std::vector<judge_pair> & pairs, bool of_a) {
    score_mean m;
    double sum = 0, sum2 = 0;
    for (const auto & p : pairs) {
        const int s = of_a ? p.score_a : p.score_b;
        if (s <= 0) continue;
        ++m.n;
        sum += s;
        sum2 += (double) s * s;
    }
    if (m.n == 0) return m;
    m.mean = sum / (double) m.n;
    const double var = m.n > 1 ? std::max(0.0, (sum2 - sum * sum / (double) m.n) / (double) (m.n - 1)) : 0;
    const double half = 1.96 * std::sqrt(var / (double) m.n);
    m.low = m.mean - half, m.high = m.mean + half;
    return m;
}

ojson judge_result_to_json(const judge_result & r) {
    ojson j = {{"format", "reap-judge"}, {"version", 1}};
    j["a"] = {{"answers", r.a_path}, {"sha256", r.a_sha256}, {"model", r.a_model}};
    j["b"] = {{"answers", r.b_path}, {"sha256", r.b_sha256}, {"model", r.b_model}};
    j["tasks"] = {{"path", r.tasks_path}, {"sha256", r.tasks_sha256}};
    j["judge"] = {{"kind", r.judge_kind}, {"name", r.judge_name}, {"detail", r.judge_detail}};
    j["rubric"] = r.rubric.path.empty() ? ojson(nullptr)
                                        : ojson{{"path", r.rubric.path}, {"sha256", r.rubric.sha256}, {"scale", {r.rubric.low, r.rubric.high}}};
    j["labels"] = {k_judge_first, k_judge_second};
    j["pairs"] = ojson::array();
    for (const auto & p : r.pairs) {
        ojson jp = {{"id", p.id}, {"sample", p.sample}, {"ab", p.ab}, {"ba", p.ba}};
        if (!r.rubric.path.empty()) jp["score_a"] = p.score_a, jp["score_b"] = p.score_b;
        j["pairs"].push_back(jp);
    }
    const auto s = r.summary();
    j["summary"] = {{"wins", s.wins}, {"losses", s.losses}, {"ties", s.ties}, {"judged", s.judged}, {"failures", r.failures},
                    {"position_first_rate", s.position_first_rate()}};
    if (!r.rubric.path.empty()) {
        for (bool a : {true, false}) {
            const score_mean m = rubric_mean(r.pairs, a);
            j["summary"][a ? "rubric_a" : "rubric_b"] = {{"n", m.n}, {"mean", m.mean}, {"ci95", {m.low, m.high}}};
        }
    }
    j["scope"] = "these numbers compare these two builds under this judge only";
    return j;
}

bool judge_result_from_json(const nlohmann::json & j, const std::string & name, judge_result & out, std::string & err) {
    out = judge_result();
    util::json_fields f(j, "judge file '" + name + "'");
    int64_t version = 0;
    if (!f.header("reap-judge", "a reap judge file", 1, version)) {
        err = f.error();
        return false;
    }
    util::json_fields a = f.child("a"), b = f.child("b"), t = f.child("tasks"), jd = f.child("judge"), sum = f.child("summary");
    bool ok = f.ok() && a.str("answers", out.a_path) && a.sha256("sha256", out.a_sha256) && a.str("model", out.a_model) &&
              b.str("answers", out.b_path) && b.sha256("sha256", out.b_sha256) && b.str("model", out.b_model) &&
              t.str("path", out.tasks_path) && t.sha256("sha256", out.tasks_sha256) && jd.str("kind", out.judge_kind) &&
              jd.str("name", out.judge_name) && jd.str("detail", out.judge_detail);
    if (ok && f.has("rubric") && !j["rubric"].is_null()) {
        util::json_fields rb = f.child("rubric");
        std::vector<const nlohmann::json *> scale;
        ok = rb.str("path", out.rubric.path) && rb.sha256("sha256", out.rubric.sha256) && rb.elements("scale", scale) && scale.size() == 2 &&
             scale[0]->is_number_integer() && scale[1]->is_number_integer();
        if (ok) out.rubric.low = scale[0]->get<int>(), out.rubric.high = scale[1]->get<int>();
        else if (rb.error().empty()) ok = rb.fail("scale", "is not [LOW, HIGH]");
    }
    std::vector<const nlohmann::json *> pairs;
    if (ok) ok = f.elements("pairs", pairs);
    for (size_t i = 0; ok && i < pairs.size(); ++i) {
        util::json_fields p = f.nested(*pairs[i], "pairs[" + std::to_string(i) + "]");
        judge_pair jp;
        int64_t sample = 0, ab = 0, ba = 0, sa = 0, sb = 0;
        ok = p.str("id", jp.id) && p.i64("sample", sample, 0, 1 << 16) && p.i64("ab", ab, -1, 1) && p.i64("ba", ba, -1, 1) &&
             (out.rubric.path.empty() || (p.i64("score_a", sa, 0, out.rubric.high) && p.i64("score_b", sb, 0, out.rubric.high)));
        jp.sample = (int) sample, jp.ab = (int) ab, jp.ba = (int) ba, jp.score_a = (int) sa, jp.score_b = (int) sb;
        out.pairs.push_back(jp);
    }
    uint64_t wins = 0, losses = 0, ties = 0;
    if (ok) ok = sum.u64("wins", wins) && sum.u64("losses", losses) && sum.u64("ties", ties) && sum.u64("failures", out.failures);
    const auto s = out.summary();
    if (ok && (wins != s.wins || losses != s.losses || ties != s.ties)) ok = sum.fail("wins", "losses and ties are not what the pairs' verdicts give");
    if (!ok) {
        err = f.error();   // the readers of its parts share the first problem with it
        if (err.empty()) err = "judge file '" + name + "': malformed";
        return false;
    }
    return true;
}

bool read_judge_result(const std::string & path, judge_result & out, std::string & err) {
    nlohmann::json j;
    if (!util::read_json_file(path, "judge file", 256ull << 20, j, err)) return false;
    return judge_result_from_json(j, path, out, err);
}

void judge_result_print(FILE * out, const judge_result & r) {
    const auto s = r.summary();
    fprintf(out, "judge: %s (%s)\n", r.judge_name.c_str(), r.judge_kind.c_str());
    fprintf(out, "A: %s (%s)\nB: %s (%s)\n", r.a_model.c_str(), r.a_path.c_str(), r.b_model.c_str(), r.b_path.c_str());
    fprintf(out, "pairwise, from A's side, each pair judged in both orders: %" PRIu64 " wins, %" PRIu64 " losses, %" PRIu64
            " ties (%" PRIu64 " pairs)\n", s.wins, s.losses, s.ties, s.judged);
    fprintf(out, "position rate: the judge chose the answer shown first in %.1f%% of %" PRIu64 " verdicts\n",
            100 * s.position_first_rate(), s.verdicts);
    if (r.failures) fprintf(out, "failed replies (no verdict): %" PRIu64 "\n", r.failures);
    if (!r.rubric.path.empty()) {
        for (bool a : {true, false}) {
            const score_mean m = rubric_mean(r.pairs, a);
            fprintf(out, "rubric (%d-%d) %s: mean %.2f, 95%% interval [%.2f, %.2f], %" PRIu64 " answers\n", r.rubric.low, r.rubric.high,
                    a ? "A" : "B", m.mean, m.low, m.high, m.n);
        }
    }
    fprintf(out, "these numbers compare these two builds under this judge only\n");
}

} // namespace reap

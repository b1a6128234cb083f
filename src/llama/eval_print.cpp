// reap eval's reports as JSON (eval.h): one report, several candidates', the smoke test's.
#include "llama/eval.h"
#include "llama/eval_models.h"
#include "llama/eval_windows.h"
#include "llama/runtime.h"
#include "util/json.h"

#include "common.h"
#include "llama.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace reap {

using namespace eval_detail;

std::string eval_report_json(const eval_report & r) { return reap::util::json_text(eval_report_to_json(r), 2); }

std::string eval_candidates_json(const std::vector<eval_candidate> & cands, const std::vector<eval_report> & reports) {
    eval_document d;
    for (size_t i = 0; i < reports.size() && i < cands.size(); ++i) d.entries.push_back({cands[i].path, cands[i].masked(), reports[i]});
    return reap::util::json_text(eval_document_to_json(d), 2);
}

std::string smoke_report_json(const smoke_report & r) {
    nlohmann::ordered_json j;
    j["n_predict_base"]   = r.base_tokens.size();
    j["n_predict_pruned"] = r.pruned_tokens.size();
    j["n_agree"]          = r.n_agree;
    j["base_tokens"]      = r.base_tokens;
    j["pruned_tokens"]    = r.pruned_tokens;
    // Continuations can cut a UTF-8 sequence; keep the JSON valid regardless.
    j["base_text"]   = r.base_text;
    j["pruned_text"] = r.pruned_text;
    return reap::util::json_text(j, 2);
}

void eval_report_print(FILE * out, const eval_report & r) {
    if (!r.pruned_scored) {
        fprintf(out, "wrote KLD base file: %zu windows of %d tokens, %zu tokens scored, base PPL %.4f\n", r.n_windows,
                r.n_ctx, r.overall.n_tokens, r.overall.ppl_base);
        return;
    }
    fprintf(out, "%zu tokens scored in %zu windows of up to %d tokens", r.overall.n_tokens, r.n_windows, r.n_ctx);
    if (r.corpus) {
        fprintf(out, " (%zu samples, %zu too short)", r.n_samples, r.n_samples_skipped);
    }
    if (r.base_masked()) fprintf(out, "; reference: the base masked by %s (not the base)", r.base_mask.c_str());
    if (r.kld_base_mode != "none") {
        fprintf(out, "; base from KLD file (%s; 16-bit log-probs, llama-perplexity rules)", r.kld_base_mode.c_str());
    }
    fprintf(out, "\n\n%-16s %9s %11s %11s %9s %10s %10s %10s %10s %8s\n", "", "tokens", "PPL base", "PPL pruned",
            "ratio", "KLD mean", "median", "p99", "max", "top-1");
    auto row = [&](const std::string & name, const eval_metrics & m) {
        if (m.n_tokens == 0) {
            fprintf(out, "%-16s %9d   (no tokens scored)\n", name.c_str(), 0);
            return;
        }
        fprintf(out, "%-16s %9zu %11.4f %11.4f %9.5f %10.6f %10.6f %10.6f %10.6f %7.3f%%\n", name.c_str(), m.n_tokens,
                m.ppl_base, m.ppl_pruned, m.ppl_ratio, m.kld_mean, m.kld_median, m.kld_p99, m.kld_max,
                100.0 * m.argmax_agree);
    };
    for (const auto & [name, m] : r.domains) {
        row(name, m);
    }
    row("overall", r.overall);
    if (r.mtp_blocks > 0) {
        auto side = [](const std::optional<eval_report::mtp_acceptance> & a) {
            char buf[64];
            if (!a || a->positions == 0) return std::string("-");
            snprintf(buf, sizeof buf, "%.3f%% (%lld/%lld)", 100.0 * a->rate(), (long long) a->accepted, (long long) a->positions);
            return std::string(buf);
        };
        fprintf(out, "\nMTP draft acceptance (greedy, first draft token): base %s, pruned %s\n", side(r.mtp_base).c_str(),
                side(r.mtp_pruned).c_str());
        if (!r.mtp_note.empty()) fprintf(out, "  (%s)\n", r.mtp_note.c_str());
    }
}

} // namespace reap

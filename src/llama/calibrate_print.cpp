// What reap calibrate prints once a run completes (calibrate.h): the
// forward-only timing, or the summary of what was measured and written.
#include "llama/calibrate.h"

namespace reap {

void print_calibrate_result(FILE * out, const calibrate_options & opt, const calibrate_report & rep) {
    if (!opt.collect) {
        fprintf(out, "forward-only: %lld tokens (%zu windows) in %.3f s, %.1f tok/s\n", (long long) rep.n_tokens,
                rep.n_windows, rep.seconds, rep.tokens_per_second);
        return;
    }
    const std::string shard = opt.shard_count > 1
                                  ? ", shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count)
                                  : "";
    fprintf(out, "calibrated %lld tokens (%zu windows, %zu of %zu samples%s) in %.3f s, %.1f tok/s%s\n",
            (long long) rep.n_tokens, rep.n_windows, rep.n_samples, rep.n_samples_total, shard.c_str(), rep.seconds,
            rep.tokens_per_second, rep.resumed ? " (resumed)" : "");
    fprintf(out, "nodes: ffn_moe_topk, %s, %s%s\n", rep.weights_node.c_str(), rep.down_node.c_str(),
            rep.weights_before_ffn ? " (gate applied before the experts)" : "");
    fprintf(out, "decodes: %zu (-b %d -ub %d, at most %d windows a decode, %s), %zu ubatches\n", rep.n_decodes,
            rep.n_batch, rep.n_ubatch, rep.n_seq, row_mode_name(rep.rows), rep.n_ubatches);
    if (!rep.mtp_layers.empty()) {
        std::string ls;
        for (int l : rep.mtp_layers) ls += (ls.empty() ? "" : ",") + std::to_string(l);
        fprintf(out, "MTP blocks %s: measured in llama.cpp's MTP context (token x_p with the model's h_{p-1})\n",
                ls.c_str());
    }
    for (const auto & d : rep.domain_tokens) {
        fprintf(out, "  %-16s %lld tokens\n", d.first.c_str(), (long long) d.second);
    }
    if (opt.until_stable > 0 && opt.collect) {
        int64_t done = 0;
        for (const auto & d : rep.domain_tokens) done += d.second;
        if (rep.stopped_stable) {
            fprintf(out, "stopped at %lld of %lld tokens: the keep-list held at an overlap >= %.3g for two checkpoints "
                    "in a row (the curve is in the archive; reap plan prints it)\n", (long long) done,
                    (long long) rep.n_tokens, opt.until_stable);
        } else if (rep.stability.size() >= 2 && rep.stability.back().stable && rep.stability[rep.stability.size() - 2].stable) {
            fprintf(out, "the keep-list held at an overlap >= %.3g at the last two checkpoints, as the corpus ended\n",
                    opt.until_stable);
        } else {
            fprintf(out, "the keep-list did not hold at an overlap >= %.3g for two checkpoints in a row before the "
                    "corpus ended (%zu checkpoints): more tokens may still move it\n", opt.until_stable, rep.stability.size());
        }
    }
    fprintf(out, "wrote %s\n", opt.out_path.c_str());
}

}  // namespace reap

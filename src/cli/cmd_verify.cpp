// reap verify: the byte audit of a pruned model. Option parsing and printing
// over reap::prune::run_verify (prune/verify_run.h), the verify that reap report
// and reap fit run too: exit 0 only when the output is exactly the
// source pruned by the plan and SHA256SUMS agrees; 1 and the first difference
// when it is not; 2 when the check cannot be made (usage, unreadable inputs).
// It reads under the output folder's shared lock, so a publish into that
// folder (prune --force over OUT) is never seen half done.
#include "cli/args.h"
#include "prune/verify_run.h"

#include <cinttypes>
#include <cstdio>
#include <string>

namespace {

// The command's options, parsed and printed from one table.
void declare_verify_options(reap::cli::options & t, reap::prune::verify_request & p) {
    t.about(
        "Re-reads OUT (a single file, or the first shard of a split set) and proves that\n"
        "it is MODEL pruned by PLAN:\n"
        "  * same tensors in the same order with the same types; shapes equal except the\n"
        "    expert axis of sliced tensors, which is the plan's n_keep;\n"
        "  * byte for byte: every kept expert slab, per-expert bias/scale, router row,\n"
        "    router bias and selection bias is the source's, in plan order (output\n"
        "    expert i == source expert keep[i]); every other tensor is unchanged;\n"
        "  * KVs equal the source's, in order, except <arch>.expert_count (= n_keep),\n"
        "    split.* and the reap.* provenance keys (reap.plan.sha256 must be the hash\n"
        "    of PLAN, reap.source.expert_count the source's expert count, and each\n"
        "    reap.source.expert_ids.L the plan's keep list of layer L, in order);\n"
        "  * SHA256SUMS beside OUT lists every output file with its current hash.\n"
        "A width plan's cut: gate/up rows of the kept channels byte for byte; the down\n"
        "tensors, requantised, equal a fresh requantisation of the source's kept columns\n"
        "(ggml) to OUT's type; they are reported apart from the byte-exact parts. A down\n"
        "type quantised with an importance matrix (iq2_xxs, iq2_xs, iq1_s, iq1_m) is\n"
        "audited only with the source imatrix the cut was given (--imatrix).\n"
        "OUT's folder is read under its shared lock: a publish into it in progress\n"
        "(prune --force over OUT) is waited for (at most 2 minutes), never seen half done.\n"
        "Memory: two 4 MiB buffers, whatever the model's size.\n");
    t.section("options:");
    t.text("-m, --model", "MODEL.gguf", "the source model (or first shard of a split set)", p.model);
    t.text("--plan", "PLAN.json", "the plan OUT was pruned with", p.plan);
    t.text("--sums", "PATH", "the SHA256SUMS file to check (default: beside OUT)", p.sums);
    t.flag("--no-sums", "skip the SHA256SUMS check", p.check_sums, false);
    t.text("--imatrix", "IMATRIX",
           "width cuts: the source model's llama-imatrix file given to reap prune, for auditing down tensors "
           "requantised to a type that needs one", p.imatrix);
    t.flag("--allow-other-model", "accept a plan whose recorded model fingerprint is not MODEL's", p.allow_other_model);
    t.help_row();
    t.positional([&p](const std::string & a, std::string & err) {
        if (!p.output.empty()) {
            err = "more than one output given ('" + p.output + "' and '" + a + "')";
            return false;
        }
        p.output = a;
        return true;
    });
    t.exit_note(reap::cli::exit_differs,
                "OUT is not MODEL pruned by PLAN: a byte, shape or KV differs, OUT is damaged or incomplete, or "
                "SHA256SUMS beside it is missing or disagrees (the first difference is printed)");
    t.require(p.model, "no model given (-m MODEL.gguf)")
     .require(p.plan, "no plan given (--plan PLAN.json)")
     .require(p.output, "no output given (OUT.gguf)");
}

} // namespace

int cmd_verify(int argc, char ** argv) {
    reap::prune::verify_request req;
    reap::cli::options t("verify", "usage: reap verify -m MODEL.gguf --plan PLAN.json OUT.gguf [options]");
    declare_verify_options(t, req);
    if (int status = 0; !t.parse(argc, argv, status)) return status;
    req.on_wait = [](const std::string & dir) {
        fprintf(stderr, "reap verify: waiting for the publish in progress in %s to finish\n", dir.c_str());
    };
    reap::prune::verify_run_result res;
    reap::util::error err;
    const bool ok = reap::prune::run_verify(req, res, err);
    if (!res.warning.empty()) fprintf(stderr, "reap verify: warning: %s\n", res.warning.c_str());
    if (!ok) {
        if (!res.report.differs) return reap::cli::fail("verify", err.message);
        fprintf(stderr, "reap verify: FAILED: %s: %s\n", req.output.c_str(), err.message.c_str());
        return reap::cli::exit_differs;
    }
    const reap::prune::verify_report & rep = res.report;
    printf("reap verify: OK: %s is %s pruned by %s\n", req.output.c_str(), req.model.c_str(), req.plan.c_str());
    printf("  %u file(s), %" PRIu64 " tensors (%" PRIu64 " sliced), %" PRIu64 " bytes compared, %" PRIu64
           " KVs, provenance %s, SHA256SUMS %s\n",
           rep.n_shards, rep.n_tensors, rep.n_sliced, rep.bytes_compared, rep.n_kvs,
           rep.stamped ? "stamped" : "not stamped",
           req.check_sums ? (std::to_string(rep.n_sums_checked) + " file(s) checked").c_str() : "not checked");
    if (rep.n_requantised > 0) {
        printf("  width cut: %" PRIu64 " down tensors (%" PRIu64 " bytes) requantised, equal to a fresh requantisation of "
               "the kept columns; the bytes compared above are byte-exact\n", rep.n_requantised, rep.bytes_requantised);
    }
    return 0;
}

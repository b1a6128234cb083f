// reap verify: the byte audit of a pruned model. A thin layer over
// reap::prune::verify_pruned: exit 0 only when the output is exactly the
// source pruned by the plan and SHA256SUMS agrees; otherwise the first
// difference is named.
#include "cli/args.h"
#include "gguf/gguf.h"
#include "plan/plan.h"
#include "prune/prune.h"

#include <cinttypes>
#include <cstdio>
#include <string>

namespace {

struct verify_params {
    std::string model;
    std::string plan;
    std::string output;
    std::string sums;
    bool        check_sums = true;
};

const char * k_usage_line = "usage: reap verify -m MODEL.gguf --plan PLAN.json OUT.gguf [options]";

void print_usage(FILE * out) {
    fprintf(out,
        "%s\n"
        "\n"
        "Re-reads OUT (a single file, or the first shard of a split set) and proves that\n"
        "it is MODEL pruned by PLAN:\n"
        "  * same tensors in the same order with the same types; shapes equal except the\n"
        "    expert axis of sliced tensors, which is the plan's n_keep;\n"
        "  * byte for byte: every kept expert slab, per-expert bias/scale, router row,\n"
        "    router bias and selection bias is the source's, in plan order (output\n"
        "    expert i == source expert keep[i]); every other tensor is unchanged;\n"
        "  * KVs equal the source's, in order, except <arch>.expert_count (= n_keep),\n"
        "    split.* and the reap.* provenance keys (reap.plan.sha256 must be the hash\n"
        "    of PLAN, reap.source.expert_count the source's expert count);\n"
        "  * SHA256SUMS beside OUT lists every output file with its current hash.\n"
        "Exit status 0 when all holds; otherwise 1 and the first difference.\n"
        "Memory: two 4 MiB buffers, whatever the model's size.\n"
        "\n"
        "options:\n"
        "  -m, --model MODEL.gguf   the source model (or first shard of a split set)\n"
        "  --plan PLAN.json         the plan OUT was pruned with\n"
        "  --sums PATH              the SHA256SUMS file to check (default: beside OUT)\n"
        "  --no-sums                skip the SHA256SUMS check\n"
        "  -h, --help               this help\n",
        k_usage_line);
}

bool parse_args(int argc, char ** argv, verify_params & p, bool & help, std::string & err) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&](std::string & dst) { return reap::cli::take_value(argc, argv, i, dst, err); };
        if (arg == "-h" || arg == "--help") {
            help = true;
            return true;
        } else if (arg == "-m" || arg == "--model") {
            if (!value(p.model)) return false;
        } else if (arg == "--plan") {
            if (!value(p.plan)) return false;
        } else if (arg == "--sums") {
            if (!value(p.sums)) return false;
        } else if (arg == "--no-sums") {
            p.check_sums = false;
        } else if (!arg.empty() && arg[0] == '-') {
            err = "unknown option " + arg;
            return false;
        } else if (p.output.empty()) {
            p.output = arg;
        } else {
            err = "more than one output given ('" + p.output + "' and '" + arg + "')";
            return false;
        }
    }
    if (p.model.empty()) err = "no model given (-m MODEL.gguf)";
    else if (p.plan.empty()) err = "no plan given (--plan PLAN.json)";
    else if (p.output.empty()) err = "no output given (OUT.gguf)";
    return err.empty();
}

} // namespace

int cmd_verify(int argc, char ** argv) {
    verify_params params;
    int status = 0;
    if (!reap::cli::parse_command("verify", argc, argv, params, parse_args, print_usage, k_usage_line, status)) return status;
    std::string err;
    reap::gguf::model model;
    if (!reap::gguf::open_model(params.model, model, err)) return reap::cli::fail("verify", err);
    reap::plan plan;
    if (!reap::read_plan(params.plan, plan, err)) return reap::cli::fail("verify", err);
    reap::prune::verify_options vopts;
    vopts.check_sums = params.check_sums;
    vopts.sums_path = params.sums;
    if (!reap::plan_file_sha256(params.plan, vopts.plan_sha256, err)) return reap::cli::fail("verify", err);
    reap::prune::verify_report rep;
    if (!reap::prune::verify_pruned(model, plan, params.output, vopts, rep, err)) {
        fprintf(stderr, "reap verify: FAILED: %s: %s\n", params.output.c_str(), err.c_str());
        return 1;
    }
    printf("reap verify: OK: %s is %s pruned by %s\n", params.output.c_str(), params.model.c_str(), params.plan.c_str());
    printf("  %u file(s), %" PRIu64 " tensors (%" PRIu64 " sliced), %" PRIu64 " bytes compared, %" PRIu64
           " KVs, provenance %s, SHA256SUMS %s\n",
           rep.n_shards, rep.n_tensors, rep.n_sliced, rep.bytes_compared, rep.n_kvs,
           rep.stamped ? "stamped" : "not stamped",
           params.check_sums ? (std::to_string(rep.n_sums_checked) + " file(s) checked").c_str() : "not checked");
    return 0;
}

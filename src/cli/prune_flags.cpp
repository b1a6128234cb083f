// The option table and --help text of reap prune (prune_flags.h).
#include "cli/prune_flags.h"

#include "plan/planners.h"

#include <string>

namespace reap::cli {

void declare_prune(options & t, prune_params & pp) {
    prune::prune_request & p = pp.req;
    t.about(
        "Writes the pruned copy of MODEL that PLAN describes. In every MoE layer L,\n"
        "output expert i is source expert keep[i] of the plan's entry for L (in that\n"
        "order): the expert slabs (ffn_{gate,up,down,gate_up}_exps), per-expert biases\n"
        "and scales, the router rows (ffn_gate_inp.weight), the router bias and the\n"
        "selection bias (exp_probs_b) are cut byte for byte, so any quantisation works\n"
        "and nothing is requantised. Shared experts and every other tensor are copied\n"
        "unchanged; <arch>.expert_count becomes the plan's n_keep. A tensor whose shape\n"
        "mentions the expert count but that the layout table does not know is an error.\n"
        "A width plan also keeps each expert's listed channels: gate/up rows byte for\n"
        "byte, down columns requantised (ggml; the source's type or --down-type).\n"
        "The plan is validated against the model first (layers, ids, counts, groups).\n"
        "MODEL may be the first shard of a split set. The output appears only when\n"
        "complete (temp file, fsync, rename); it never replaces an input, nor an existing\n"
        "file without --force. Data are streamed through a fixed 1 MiB buffer and hashed\n"
        "as they pass (with --no-sums, copy_file_range): memory is bounded by the metadata\n"
        "(about 100 bytes per kept expert per sliced tensor), whatever the model's size.\n"
        "SHA256SUMS beside the output lists every file written (sha256sum -c format;\n"
        "every other line already in it is kept); the shards and SHA256SUMS appear\n"
        "together or not at all. A plan made for another model (its recorded model\n"
        "fingerprint) is refused unless --allow-other-model.\n");
    t.section("options:");
    t.text("-m, --model", "MODEL.gguf", "source model (or first shard of a split set)", p.model);
    t.text("--plan", "PLAN.json", "keep-list per MoE layer (reap plan writes one)", p.plan);
    t.text("-o, --output", "OUT.gguf", "output; with splitting, OUT-00001-of-0000N.gguf, ...", p.output);
    t.custom("--split-max-size", "SIZE",
             "split the output: shards of at most SIZE bytes of tensor data; K/M/G/T(B) are decimal (as gguf-split), "
             "KiB/MiB/GiB/TiB binary, decimals allowed (1.5G)",
             [&p](const std::string & v, std::string & err) {
                 // The same units as `reap plan --budget/--split-max-size`, so a plan's
                 // size prediction and the prune that follows read one value alike.
                 std::string perr;
                 if (!planner::parse_size(v, p.split_max_bytes, perr) || p.split_max_bytes == 0) {
                     err = "--split-max-size: '" + v + "' is not a positive size (e.g. 50G, 1.5GB, 300MiB)";
                     return false;
                 }
                 return true;
             });
    t.integer("--split-max-tensors", "N", "split the output: at most N tensors per shard", 1, INT64_MAX, p.split_max_tensors);
    t.flag("--no-stamp",
           "do not record provenance (reap.plan.sha256, reap.source.expert_count, reap.version, and per MoE layer L "
           "reap.source.expert_ids.L: the source expert ids kept, in the file's order); an identity plan "
           "then reproduces the source byte for byte",
           p.stamp, false);
    t.flag("--no-sums", "do not write SHA256SUMS", p.sums, false);
    t.flag("--force", "replace existing output files (never an input)", p.force);
    t.flag("--allow-other-model",
           "use a plan made for another model (its recorded model fingerprint differs); the output records it "
           "(reap.plan.other_model)",
           p.allow_other_model);
    t.flag("--dry-run", "print what would be written and the sizes; write nothing", p.dry_run);
    t.text("--down-type", "TYPE",
           "width plans: requantise ffn_down_exps to TYPE (q8_0, q4_K, f16, ...; default its own); iq2_xxs, iq2_xs, "
           "iq1_s and iq1_m need an importance matrix: --imatrix, sliced to each kept expert's channels", p.down_type);
    t.flag("--json", "print one JSON object on stdout (outputs, imatrix coverage); the text goes to stderr", pp.json);
    t.section("importance matrix (prune, then quantise):");
    t.text("--imatrix", "IMATRIX",
           "the source model's llama-imatrix file (GGUF or legacy .dat): also write the pruned model's, every "
           "ffn_*_exps entry cut to the plan's keep lists (a width plan's ffn_down_exps entries also to each kept "
           "expert's channels), the rest unchanged, same format (listed in SHA256SUMS "
           "when beside it); refused when its entries do not fit MODEL (an entry naming no tensor of MODEL, a value "
           "count that is not the tensor's row size times its expert count) or it lacks expert entries. An imatrix "
           "records no model identity (llama-imatrix writes only its datasets and chunk count), so one made on "
           "another model with the same tensor names and shapes cannot be told apart and is accepted",
           p.imatrix);
    t.text("--imatrix-out", "PATH",
           "where the sliced imatrix goes (default: OUT.imatrix.gguf, OUT.imatrix.dat for a legacy input)", p.imatrix_out);
    t.integer("--coverage-threshold", "N",
              "list the kept experts whose activation count in the imatrix is at most N (default 0: those that saw "
              "no token)",
              0, INT64_MAX, pp.coverage_threshold);
    t.integer("--require-coverage", "N",
              "exit 1 and write nothing when a kept expert has fewer than N activations in the imatrix (a legacy "
              "imatrix records only whether an expert saw any token: N at most 1)",
              0, INT64_MAX, p.require_coverage);
    t.for_mode({"--imatrix-out", "--require-coverage"}, "the importance matrix", "--imatrix IMATRIX", [&p] { return !p.imatrix.empty(); });
    t.help_row();
    t.exit_note(exit_differs,
                "--require-coverage: a kept expert has fewer activations than required (nothing written)");
    t.prose("environment:\n"
            "  REAP_NO_COPY_FILE_RANGE=1   copy through the pread/write buffer only (never\n"
            "                              copy_file_range), e.g. to test that path\n");
    t.require(p.model, "no model given (-m MODEL.gguf)")
     .require(p.plan, "no plan given (--plan PLAN.json)")
     .require(p.output, "no output given (-o OUT.gguf)");
}

} // namespace reap::cli

// reap eval's inputs, settled before any pass: the options checked, the base
// file's header and the -f input read (eval_prepare), and what every report's
// receipts name: the base's identity, each plan read once, each pruned file's
// identity (identify_inputs, name_measurement). Used by eval.cpp.
#pragma once

#include "llama/eval.h"
#include "llama/eval_models.h"
#include "llama/mask.h"
#include "metrics/kld_record.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap::eval_detail {

// What the evaluation settles before loading any model.
struct eval_input {
    bool            read_file_mode = false;  // --kld-base names an existing file
    kld_base_header hdr;                     // its header, then
    std::string     text;                    // the -f file's bytes
    bool            is_corpus = false;       // -f is a JSONL corpus
};

// What a run measured, taken before any pass: the base's fingerprint (the
// one prune checks plans against), each plan read once (its bytes hashed as
// parsed, checked against the base like prune checks it), each pruned file's
// identity and stat signature.
struct measured_inputs {
    std::vector<expert_mask>    masks;       // [candidate], masked ones only
    expert_mask                 base_mask;
    size_t                      n_masks = 0;
    std::string                 base_sha256;
    uint64_t                    base_bytes = 0;
    std::string                 base_router_sha256;
    std::vector<file_signature> pruned_sigs;
    std::vector<std::string>    base_shards; // the base's files, in order
    base_bytes_hash             base_hash;   // of the bytes the passes read (started once the sizes hold)
    std::string                 base_files_sha256;
};

// Checks the options, reads the base file's header (when it exists) and the
// input; settles opt.rt.n_ctx (the KLD base file's, else settle_window's on
// the trained context of the model the passes run).
bool eval_prepare(eval_options & opt, const std::vector<eval_candidate> & cands, eval_input & in, std::string & err);

// MTP blocks in the GGUF at `path` (0 when it cannot be read: loading it reports that).
int file_mtp_blocks(const std::string & path);

// The base's identity, every mask read against it, every pruned file's
// identity: the receipts' facts, taken before any pass.
bool identify_inputs(const eval_options & opt, const std::vector<eval_candidate> & cands, std::vector<eval_report> & reports,
                     measured_inputs & ids, std::string & err);

// The report's receipts: what candidate i was, against which base (masked or not), on which text.
void name_measurement(const eval_options & opt, const eval_candidate & c, const measured_inputs & ids, size_t i,
                      const std::string & input_sha, eval_report & r);

}  // namespace reap::eval_detail

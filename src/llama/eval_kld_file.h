// reap eval --kld-base FILE when FILE does not exist: the base's pass over
// the windows written as llama-perplexity's KLD base file (16-bit records,
// metrics/kld_record.h), published whole or not at all.
#pragma once

#include "formats/kld_receipt.h"
#include "llama/eval.h"
#include "llama/eval_windows.h"
#include "llama/mask.h"

#include <string>

namespace reap::eval_detail {

// Runs the base model over the windows and writes the base file; adds the
// base's own negative log-likelihoods (exact logits) to nll / n_scored.
bool write_base_file(llama_model * model, const workload & wl, const eval_options & opt, int n_ctx, progress_line & prog,
                     mask_hook * hook, double & nll, size_t & n_scored, kld_base_receipt & written, std::string & err);

}  // namespace reap::eval_detail

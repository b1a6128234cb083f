// reap eval's inputs (eval_inputs.h): checked, read and identified before
// any model is loaded.
#include "llama/eval_inputs.h"

#include "gguf/gguf.h"
#include "llama/corpus.h"
#include "llama/mtp.h"
#include "moe/identity.h"
#include "plan/plan.h"
#include "util/file.h"

#include <sys/stat.h>

namespace reap::eval_detail {

// Checks the options, reads the base file's header (when it exists) and the
// input; settles opt.rt.n_ctx (the KLD base file's, else settle_window's on
// the trained context of the model the passes run).
bool eval_prepare(eval_options & opt, const std::vector<eval_candidate> & cands, eval_input & in, std::string & err) {
    if (cands.empty() && opt.kld_base_path.empty()) {
        err = "nothing to score: give -p PRUNED.gguf or --mask PLAN.json";
        return false;
    }
    bool any_mask = !opt.base_mask_path.empty();
    for (size_t i = 0; i < cands.size(); ++i) {
        any_mask |= cands[i].masked();
        for (size_t k = 0; k < i; ++k) {
            if (cands[k].masked() == cands[i].masked() && cands[k].path == cands[i].path) {
                err = std::string(cands[i].masked() ? "--mask" : "-p") + " '" + cands[i].path + "' is given twice";
                return false;
            }
        }
    }
    if (any_mask && opt.base_path.empty()) {
        err = "--mask and --base-mask run the base model with experts masked: give -m BASE.gguf";
        return false;
    }
    if (opt.input_path.empty() && opt.kld_base_path.empty()) {
        err = "no input: give -f TEXT_OR_CORPUS";
        return false;
    }
    if (opt.rt.n_ctx < 0 || (opt.rt.n_ctx > 0 && opt.rt.n_ctx < 3)) {
        err = "-c must be at least 3";
        return false;
    }
    if (opt.rt.n_batch < 0 || opt.rt.n_ubatch < 0) {
        err = "-b and -ub must be at least 1 (0: automatic)";
        return false;
    }

    if (!opt.kld_base_path.empty()) {
        struct stat st;
        in.read_file_mode = stat(opt.kld_base_path.c_str(), &st) == 0;
        if (in.read_file_mode) {
            if (!kld_base_read_header(opt.kld_base_path, in.hdr, err)) return false;
            if (opt.rt.n_ctx > 0 && opt.rt.n_ctx != in.hdr.n_ctx) {
                err = "-c " + std::to_string(opt.rt.n_ctx) + " differs from the n_ctx " + std::to_string(in.hdr.n_ctx) +
                      " of KLD base file '" + opt.kld_base_path + "' (omit -c to use the file's)";
                return false;
            }
            opt.rt.n_ctx = in.hdr.n_ctx;
            if (cands.empty()) {
                err = "KLD base file '" + opt.kld_base_path + "' exists: give -p PRUNED.gguf to compare against it";
                return false;
            }
            if (!opt.base_mask_path.empty()) {
                err = "--base-mask with an existing KLD base file: the file already holds the base; "
                      "mask the base when writing the file";
                return false;
            }
        } else if (opt.base_path.empty()) {
            err = "KLD base file '" + opt.kld_base_path + "' does not exist and there is no -m BASE.gguf to write it from";
            return false;
        }
    } else if (opt.base_path.empty()) {
        err = "no base model: give -m BASE.gguf (or --kld-base FILE made by an earlier run or llama-perplexity)";
        return false;
    }
    // the window, on the trained context of the model the passes run (the
    // base, else the first pruned file)
    std::string runs = opt.base_path;
    for (size_t i = 0; runs.empty() && i < cands.size(); ++i) {
        if (!cands[i].masked()) runs = cands[i].path;
    }
    int64_t trained = 0;   // a file that cannot be read is reported where it is loaded
    gguf::model g;
    std::string unread;
    if (!runs.empty() && gguf::open_model(runs, g, unread)) trained = moe::trained_context(g);
    if (!settle_window(opt.rt, trained, runs, err)) {
        if (in.read_file_mode) err = "KLD base file '" + opt.kld_base_path + "' holds windows of " + std::to_string(in.hdr.n_ctx) + " tokens: " + err;
        return false;
    }
    if (!opt.input_path.empty() && !util::read_file(opt.input_path, "input", in.text, err)) {
        return false;
    }
    in.is_corpus = !opt.input_path.empty() && looks_like_jsonl_corpus(opt.input_path, in.text);
    if (in.is_corpus && !opt.kld_base_path.empty()) {
        err = "--kld-base works with a plain text -f only: the llama-perplexity file holds fixed-size chunks, "
              "a corpus has per-sample windows";
        return false;
    }
    return true;
}

// MTP blocks in the GGUF at `path` (0 when it cannot be read: loading it reports that).
int file_mtp_blocks(const std::string & path) {
    gguf::model g;
    std::string e;
    return gguf::open_model(path, g, e) ? mtp_blocks_in_file(g) : 0;
}

bool identify_inputs(const eval_options & opt, const std::vector<eval_candidate> & cands, std::vector<eval_report> & reports,
                     measured_inputs & ids, std::string & err) {
    ids.masks.assign(cands.size(), expert_mask());
    if (!opt.base_path.empty()) {
        gguf::model g;
        if (!gguf::open_model(opt.base_path, g, err)) {
            err = "cannot open base model: " + err;
            return false;
        }
        ids.base_sha256 = model_header_sha256(g);
        ids.base_bytes = g.file_bytes();
        moe::model_identity id;
        if (!moe::identity_of(g, id, err)) return false;
        ids.base_router_sha256 = id.router_sha256;
        for (const auto & sh : g.shards) ids.base_shards.push_back(sh.path);
        const std::string base_name = "base '" + opt.base_path + "'";
        if (!opt.base_mask_path.empty() && !load_mask(opt.base_mask_path, g, base_name, ids.base_mask, err)) {
            err = "--base-mask " + err;
            return false;
        }
        for (size_t i = 0; i < cands.size(); ++i) {
            if (!cands[i].masked()) continue;
            if (cands[i].in_memory ? !mask_from_plan(*cands[i].in_memory, cands[i].path, g, base_name, ids.masks[i], err)
                                   : !load_mask(cands[i].path, g, base_name, ids.masks[i], err)) {
                err = "--mask " + err;
                return false;
            }
            ++ids.n_masks;
        }
    }
    for (size_t i = 0; i < cands.size(); ++i) {
        if (!cands[i].masked() && !pruned_identity(cands[i].path, reports[i].candidate_files, ids.pruned_sigs, err)) return false;
    }
    return true;
}

// The report's receipts: what candidate i was, against which base (masked or not), on which text.
void name_measurement(const eval_options & opt, const eval_candidate & c, const measured_inputs & ids, size_t i,
                      const std::string & input_sha, eval_report & r) {
    r.candidate = c.path;
    r.masked = c.masked();
    r.base_mask = opt.base_mask_path;
    r.base_mask_sha256 = ids.base_mask.plan_sha256;
    r.base_path = opt.base_path;
    r.base_sha256 = ids.base_sha256;
    r.base_bytes = ids.base_bytes;
    r.base_router_sha256 = ids.base_router_sha256;
    r.base_files_sha256 = ids.base_files_sha256;
    r.input_path = opt.input_path;
    r.input_sha256 = input_sha;
    if (c.masked()) r.candidate_sha256 = ids.masks[i].plan_sha256;
    for (const std::string & w : {ids.base_mask.warning, ids.masks[i].warning}) {
        if (!w.empty()) r.warnings.push_back(w);
    }
}

}  // namespace reap::eval_detail

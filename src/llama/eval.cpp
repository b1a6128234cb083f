// reap eval, the library half: the inputs checked and identified, the base's
// side (its rows in a temp file, or the llama-perplexity KLD base file), every
// candidate scored against it, and the receipts. The inputs' checks and
// identities are eval_inputs.cpp's, the sizes of the decodes eval_sizes.cpp's,
// the windows and their decodes eval_windows.cpp's, the KLD base file's writer
// eval_kld_file.cpp's, the smoke test eval_smoke.cpp's, the JSON output
// eval_print.cpp's. See eval.h for the scoring convention and the file layout.
#include "llama/eval.h"

#include "llama/corpus.h"
#include "llama/eval_inputs.h"
#include "llama/eval_kld_file.h"
#include "llama/eval_models.h"
#include "llama/eval_windows.h"
#include "llama/mask.h"
#include "llama/mtp.h"
#include "formats/kld_receipt.h"
#include "metrics/kld_record.h"
#include "metrics/token_metrics.h"
#include "gguf/gguf.h"
#include "moe/identity.h"
#include "util/file.h"
#include "util/parallel.h"
#include "util/path.h"
#include "util/sha256.h"
#include "util/json.h"
#include "llama/runtime.h"

#include "common.h"
#include "llama.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace reap {

using namespace eval_detail;
using util::parallel_for;

namespace {

bool mul_u64(uint64_t a, uint64_t b, uint64_t & out) { return !__builtin_mul_overflow(a, b, &out); }

// The fields of a report that describe the tokens rather than the models.
void fill_report(eval_report & report, const workload & wl, int n_ctx) {
    report.pruned_scored     = true;
    report.corpus            = wl.corpus;
    report.n_ctx             = n_ctx;
    report.n_windows         = wl.windows.size();
    report.n_samples         = wl.n_samples;
    report.n_samples_skipped = wl.n_skipped;
}

// ---- the base side of every scored position ----------------------------------------------

// Hands out the base's log-probabilities and argmax for the scored rows of a
// run, in the order decode_windows hands the rows over (the same for every
// model), from the start again after rewind().
struct base_source {
    bool clip16 = false;  // llama-perplexity's rules against its 16-bit file
    virtual ~base_source() = default;
    virtual bool rewind(std::string & err) = 0;
    // The next rows.size() rows: log-probs into logp (rows x n_vocab), argmaxes into argmax.
    virtual bool next(const std::vector<out_row> & rows, float * logp, int32_t * argmax, std::string & err) = 0;
};

// The base's exact rows (float log-softmax and argmax), written once by the
// base pass into an anonymous temp file (unlinked at once: nothing is left
// behind, even by a killed run) and read back for every model. The page cache
// keeps it in memory when it fits; it needs no more than the disk has.
struct float_rows : base_source {
    int      fd = -1;
    int      n_vocab = 0;
    uint64_t n_written = 0, n_read = 0;
    std::vector<char> buf;

    size_t row_bytes() const { return (size_t) n_vocab * sizeof(float) + sizeof(int32_t); }

    bool open(const std::string & dir, int vocab, uint64_t rows, std::string & err) {
        n_vocab = vocab;
        uint64_t need = 0;
        if (!mul_u64(rows, row_bytes(), need)) {
            err = "the base's rows (" + std::to_string(rows) + " tokens x " + std::to_string(vocab) + " entries) overflow";
            return false;
        }
        struct statvfs vs;
        if (statvfs(dir.c_str(), &vs) == 0) {
            const uint64_t avail = (uint64_t) vs.f_bavail * (uint64_t) vs.f_frsize;
            if (need > avail) {
                err = "keeping the base's log-probabilities of " + std::to_string(rows) + " scored tokens x " +
                      std::to_string(vocab) + " vocabulary entries needs " + std::to_string(need >> 20) + " MiB in '" +
                      dir + "', which has " + std::to_string(avail >> 20) +
                      " MiB free: give --tmp-dir on a larger disk, or score fewer tokens (--chunks, a smaller -f)";
                return false;
            }
        }
        std::string tmpl = dir + "/reap-eval-base.XXXXXX";
        fd = mkstemp(&tmpl[0]);
        if (fd < 0) {
            err = "cannot create a temp file in '" + dir + "' for the base's rows: " + strerror(errno) + " (--tmp-dir)";
            return false;
        }
        unlink(tmpl.c_str());
        return true;
    }
    ~float_rows() override {
        if (fd >= 0) close(fd);
    }
    bool write_rows(const char * data, size_t n, std::string & err) {
        if (!util::write_full(fd, data, n * row_bytes())) {
            err = std::string("cannot write the base's rows to the temp file: ") + strerror(errno);
            return false;
        }
        n_written += n;
        return true;
    }
    bool rewind(std::string &) override {
        n_read = 0;
        return true;
    }
    bool next(const std::vector<out_row> & rows, float * logp, int32_t * argmax, std::string & err) override {
        if (n_read + rows.size() > n_written) {
            err = "internal error: a model scored more tokens than the base";
            return false;
        }
        const size_t rb = row_bytes();
        buf.resize(rb * rows.size());
        if (!util::pread_full(fd, buf.data(), buf.size(), n_read * rb)) {
            err = std::string("cannot read the base's rows back from the temp file: ") + strerror(errno);
            return false;
        }
        for (size_t r = 0; r < rows.size(); ++r) {
            memcpy(logp + r * (size_t) n_vocab, buf.data() + r * rb, (size_t) n_vocab * sizeof(float));
            memcpy(argmax + r, buf.data() + r * rb + (size_t) n_vocab * sizeof(float), sizeof(int32_t));
        }
        n_read += rows.size();
        return true;
    }
};

// A llama-perplexity KLD base file: 16-bit log-probs, llama-perplexity's rules.
struct kld_file_rows : base_source {
    std::string           path;
    kld_base_header       hdr;
    int                   n_threads = 1;
    std::ifstream         in;
    std::vector<uint16_t> records;
    std::vector<char>     bad;

    bool open(const std::string & p, const kld_base_header & h, int threads, std::string & err) {
        path      = p;
        hdr       = h;
        n_threads = threads;
        clip16    = true;
        return rewind(err);
    }
    bool rewind(std::string & err) override {
        in.close();
        in.clear();
        in.open(path, std::ios::binary);
        in.seekg((std::streamoff) hdr.data_offset);
        if (!in) {
            err = "cannot read KLD base file '" + path + "'";
            return false;
        }
        return true;
    }
    bool next(const std::vector<out_row> & rows, float * logp, int32_t * argmax, std::string & err) override {
        const size_t rec = kld_record_u16(hdr.n_vocab);
        records.resize(rec * rows.size());
        if (!in.read((char *) records.data(), (std::streamsize) (records.size() * sizeof(uint16_t)))) {
            err = "cannot read the records of chunk " + std::to_string(rows[0].window_no) + " from '" + path + "'";
            return false;
        }
        bad.assign(rows.size(), 0);
        parallel_for((int) rows.size(), n_threads, [&](int r) {
            float * lp = logp + (size_t) r * (size_t) hdr.n_vocab;
            if (!kld_decompress_row(records.data() + rec * (size_t) r, hdr.n_vocab, lp)) {
                bad[(size_t) r] = 1;
                return;
            }
            argmax[r] = argmax_first(lp, hdr.n_vocab);
        });
        for (size_t r = 0; r < rows.size(); ++r) {
            if (bad[r]) {
                err = "KLD base file '" + path + "' is damaged: chunk " + std::to_string(rows[r].window_no) +
                      ", position " + std::to_string(rows[r].pos) + " has a non-finite scale or offset";
                return false;
            }
        }
        return true;
    }
};

// What every pass over the windows shares.
struct pass_setup {
    const workload * wl = nullptr;
    int         n_ctx = 0, n_seq = 1, n_batch = 1, n_threads = 1, n_vocab = 0;
    llama_token bos = LLAMA_TOKEN_NULL;
};

pass_setup make_pass_setup(const llama_model * model, const workload & wl, const eval_runtime & rt, int n_ctx) {
    pass_setup s;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    s.wl        = &wl;
    s.n_ctx     = n_ctx;
    s.n_seq     = seqs_per_decode(rt, n_ctx);
    s.n_batch   = std::min(rt.n_batch, n_ctx * s.n_seq);
    s.n_threads = rt.threads_batch();
    s.n_vocab   = llama_vocab_n_tokens(vocab);
    s.bos       = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : LLAMA_TOKEN_NULL;
    return s;
}

// The base pass of an exact run: every scored row's log-softmax and argmax into `rows`.
bool base_pass(llama_model * model, const eval_runtime & rt, const pass_setup & s, mask_hook * hook, float_rows & rows,
               progress_line & prog, std::string & err) {
    ctx_ptr ctx = make_context(model, rt, s.n_ctx, s.n_seq, err, hook);
    if (!ctx) return false;
    const size_t rb = rows.row_bytes();
    std::vector<char> slab;
    const bool ok = decode_windows({ctx.get()}, s.wl->windows, s.n_seq, s.n_batch, s.bos, prog,
        ([&](const std::vector<out_row> & out) {
            slab.resize(rb * out.size());
            parallel_for((int) out.size(), s.n_threads, [&](int r) {
                char *    row = slab.data() + rb * (size_t) r;
                float *   lp  = (float *) (void *) row;
                const int ib  = base_logp_row(llama_get_logits_ith(ctx.get(), out[r].idx), s.n_vocab, lp);
                memcpy(row + (size_t) s.n_vocab * sizeof(float), &ib, sizeof(int32_t));
            });
            return rows.write_rows(slab.data(), out.size(), err);
        }), err, hook);
    return ok;
}

// Scores one model (a pruned file, or the base under a mask) against the base rows.
bool score_pass(llama_model * model, const eval_runtime & rt, const pass_setup & s, mask_hook * hook, base_source & base,
                progress_line & prog, eval_report & report, std::string & err) {
    ctx_ptr ctx = make_context(model, rt, s.n_ctx, s.n_seq, err, hook);
    if (!ctx) return false;
    if (!base.rewind(err)) return false;
    const workload &         wl = *s.wl;
    std::vector<metrics_accumulator> acc(wl.domains.size());
    metrics_accumulator      all;
    std::vector<float>       logp;
    std::vector<int32_t>     argmax;
    std::vector<token_stat>  stats;
    double                   half_sum[2] = {0, 0};
    size_t                   half_n[2] = {0, 0};
    const bool ok = decode_windows({ctx.get()}, wl.windows, s.n_seq, s.n_batch, s.bos, prog,
        ([&](const std::vector<out_row> & rows) {
            logp.resize(rows.size() * (size_t) s.n_vocab);
            argmax.resize(rows.size());
            if (!base.next(rows, logp.data(), argmax.data(), err)) return false;
            stats.resize(rows.size());
            parallel_for((int) rows.size(), s.n_threads, [&](int r) {
                const out_row & o = rows[r];
                stats[r] = stat_logp(logp.data() + (size_t) r * (size_t) s.n_vocab, argmax[r],
                                     llama_get_logits_ith(ctx.get(), o.idx), s.n_vocab, o.w->tokens[o.pos + 1], base.clip16);
            });
            for (size_t r = 0; r < rows.size(); ++r) {
                all.add(stats[r]);
                acc[rows[r].w->domain].add(stats[r]);
                const int half = rows[r].window_no < wl.windows.size() / 2 ? 0 : 1;
                half_sum[half] += stats[r].kld;
                ++half_n[half];
            }
            return true;
        }), err, hook);
    if (!ok) return false;
    report.overall = all.finish();
    for (int h = 0; h < 2; ++h) report.kld_half[h] = half_n[h] > 0 ? half_sum[h] / (double) half_n[h] : report.overall.kld_mean;
    if (wl.corpus) {
        for (size_t d = 0; d < wl.domains.size(); ++d) report.domains.emplace_back(wl.domains[d], acc[d].finish());
    }
    fill_report(report, wl, s.n_ctx);
    return true;
}

// The greedy acceptance of a model's MTP head over the scored positions (the
// definition is eval_report's): the windows one at a time, since the MTP
// context follows one sequence; the model's logits and the MTP head's at
// every scored position. With several (chained) MTP heads it is the first
// head's, which drafts the first token. With a mask, both contexts run with its
// removed experts masked (the trunk's routers in the model's context, the MTP
// blocks' in the MTP context), each checked after every decode.
bool mtp_pass(llama_model * model, const eval_runtime & rt, const pass_setup & s, const expert_mask * mask,
              progress_line & prog, std::optional<eval_report::mtp_acceptance> & result, std::string & err) {
    result.reset();
    mask_hook trunk_hook, mtp_hook;
    trunk_hook.active = mtp_hook.active = mask;
    mtp_hook.mtp_context = true;
    const int n_batch = std::min(rt.n_batch, s.n_ctx);
    eval_runtime one = rt;
    one.n_batch = n_batch;
    llama_context_params cp = context_params(one, s.n_ctx, 1);
    if (mask) {
        cp.cb_eval           = mask_hook::callback;
        cp.cb_eval_user_data = &trunk_hook;
        trunk_hook.n_threads = mtp_hook.n_threads = cp.n_threads_batch;
    }
    ctx_ptr ctx(llama_init_from_model(model, cp));
    if (!ctx) {
        err = "failed to create a llama.cpp context for the MTP draft (n_ctx " + std::to_string(s.n_ctx) + ")";
        return false;
    }
    if (mask) cp.cb_eval_user_data = &mtp_hook;
    mtp_runner mtp;
    if (!mtp.init(model, ctx.get(), cp, err)) return false;
    llama_batch batch = llama_batch_init(n_batch, 0, 1);
    struct batch_guard { llama_batch & b; ~batch_guard() { llama_batch_free(b); } } bg{batch};
    eval_report::mtp_acceptance acc;
    for (const window & w : s.wl->windows) {
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        mtp.reset();
        const int first = w.len / 2;
        for (int b = 0; b < w.len; b += n_batch) {
            const int n = std::min(n_batch, w.len - b);
            batch.n_tokens = n;
            for (int k = 0; k < n; ++k) {
                const int p = b + k;
                batch.token[k]     = (p == 0 && s.bos != LLAMA_TOKEN_NULL) ? s.bos : w.tokens[p];  // as decode_windows
                batch.pos[k]       = p;
                batch.n_seq_id[k]  = 1;
                batch.seq_id[k][0] = 0;
                batch.logits[k]    = p >= first && p <= w.len - 2;
            }
            const int rc = llama_decode(ctx.get(), batch);
            if (rc != 0) {
                err = "llama_decode failed (" + std::to_string(rc) + ") in the MTP draft pass";
                return false;
            }
            // (the nextn embeddings make every row run the last layer: routers show in every decode)
            if (mask && !trunk_hook.check(true, err)) return false;
            if (!mtp.feed(batch.token, n, b, batch.logits, /*keep_logits=*/true, err)) return false;
            if (mask && !mtp_hook.check(true, err)) return false;
            for (int k = 0; k < n; ++k) {
                if (!batch.logits[k]) continue;
                const float * lt = llama_get_logits_ith(ctx.get(), k);
                const float * ld = mtp.logits(k);
                if (!lt || !ld) {
                    err = "llama.cpp gave no logits for a scored position in the MTP draft pass";
                    return false;
                }
                ++acc.positions;
                acc.accepted += argmax_first(lt, s.n_vocab) == argmax_first(ld, s.n_vocab);
            }
            prog.add(n);
        }
    }
    result = acc;
    return true;
}

std::string temp_dir_of(const eval_options & opt) {
    if (!opt.tmp_dir.empty()) return opt.tmp_dir;
    const char * t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

} // namespace


namespace {

// One run of run_eval_candidates, in named stages: the inputs checked and
// identified, the base's side (its rows in a temp file, or a KLD base file
// written or read), every candidate scored against it, the receipts.
struct eval_run {
    eval_options                        opt;
    const std::vector<eval_candidate> & cands;
    std::vector<eval_report> &          reports;
    std::string &                       err;

    eval_input      in;
    measured_inputs ids;
    int             n_ctx = 0;
    int             base_mtp = 0;              // MTP blocks of the base (eval.h)
    std::vector<int> cand_mtp;                 // [candidate] MTP blocks of what it runs
    int64_t         n_mtp_passes = 0;
    std::optional<eval_report::mtp_acceptance> mtp_base;
    progress_line   prog;
    workload        wl;
    std::unique_ptr<base_source> base_rows;
    model_ptr       base;
    mask_hook       hook;
    std::string     kld_mode = "none";
    // --kld-base read: the receipt of the file and the file's own hash
    std::optional<kld_base_receipt> rows_receipt;
    util::background_sha256         rows_hash;
    bool                            rows_known = false;
    std::string                     rows_warning;
    bool            base_only_done = false;    // a --kld-base run without candidates: the file was the product
    bool            sized = false;             // -b/-ub settled (size_decodes)

    eval_run(const eval_options & o, const std::vector<eval_candidate> & c, std::vector<eval_report> & r, std::string & e)
        : opt(o), cands(c), reports(r), err(e) {}

    // Options, input, plans and pruned files' identities, before any pass runs:
    // every plan is checked against the base file, every pruned model's
    // vocabulary against the base's (load_base).
    bool prepare() {
        if (!eval_prepare(opt, cands, in, err)) return false;
        n_ctx = opt.rt.n_ctx;
        reports.assign(cands.size(), eval_report());
        if (!identify_inputs(opt, cands, reports, ids, err)) return false;
        base_mtp = opt.base_path.empty() ? 0 : file_mtp_blocks(opt.base_path);
        cand_mtp.assign(cands.size(), 0);
        for (size_t i = 0; i < cands.size(); ++i) {
            cand_mtp[i] = cands[i].masked() ? base_mtp : file_mtp_blocks(cands[i].path);
            n_mtp_passes += cand_mtp[i] > 0;
        }
        prog.enabled = opt.progress;
        return true;
    }

    // -b/-ub for the workload's tokens (size_eval_batches), measured on the
    // model the passes load (the base, else the first pruned file), before
    // any pass; once.
    bool size_decodes(int64_t n_vocab) {
        if (sized) return true;
        std::string on = opt.base_path;
        for (size_t i = 0; on.empty() && i < cands.size(); ++i) {
            if (!cands[i].masked()) on = cands[i].path;
        }
        eval_sizes sizes;
        if (!size_eval_batches(opt.rt, on, n_ctx, n_vocab, (int64_t) wl.n_decode_tokens, sizes, err)) return false;
        sized = true;
        // the base's bytes are hashed beside the passes, which read them anyway;
        // from here, so that a size refused reads none of a model larger than memory
        if (!opt.base_path.empty() && !ids.base_hash.start(ids.base_shards, err)) return false;
        for (auto & r : reports) {
            r.n_batch  = opt.rt.n_batch;
            r.n_ubatch = opt.rt.n_ubatch;
        }
        if (opt.progress) {
            fprintf(stderr, "reap eval: -c %d -b %d -ub %d: %d windows a decode; %s\n", n_ctx, opt.rt.n_batch, opt.rt.n_ubatch,
                    std::max(1, opt.rt.n_batch / n_ctx), sizes.note.c_str());
        }
        return true;
    }

    bool load_base(bool vocab_only) {
        base = load_model("base model", opt.base_path, opt.rt, vocab_only, err);
        if (!base) return false;
        for (const auto & c : cands) {
            if (!c.masked() && !load_pruned(c.path, base.get(), opt.base_path, opt.rt, true, err)) return false;
        }
        return true;
    }

    // the base's MTP draft pass, on the workload the base was scored on
    bool base_mtp_pass(const pass_setup & s) {
        prog.label = "base, MTP draft";
        return mtp_pass(base.get(), opt.rt, s, hook.active, prog, mtp_base, err);
    }

    mask_hook * base_hook() {
        hook.active = ids.base_mask.name.empty() ? nullptr : &ids.base_mask;
        return hook.active ? &hook : nullptr;
    }

    // Exact: the base runs once, its rows go to a temp file.
    // The workload and the sizes need the base's vocabulary only: its weights
    // are loaded after them (a load with weights reads the whole file), so a
    // size refused costs no read of a model larger than memory.
    bool exact_base() {
        if (!load_base(true)) return false;
        if (in.is_corpus ? !corpus_workload(opt.input_path, in.text, base.get(), n_ctx, wl, err)
                         : !plain_workload(opt.input_path, in.text, base.get(), n_ctx, opt.max_chunks, wl, err)) {
            return false;
        }
        if (!size_decodes(llama_vocab_n_tokens(llama_model_get_vocab(base.get()))) || !load_base(false)) return false;
        const pass_setup s = make_pass_setup(base.get(), wl, opt.rt, n_ctx);
        auto rows = std::make_unique<float_rows>();
        if (!rows->open(temp_dir_of(opt), s.n_vocab, scored_rows(wl), err)) return false;
        prog.start(ids.base_mask.name.empty() ? "base" : "base, masked by " + ids.base_mask.name,
                   (int64_t) (1 + cands.size() + n_mtp_passes + (base_mtp > 0)) * (int64_t) wl.n_decode_tokens);
        if (!base_pass(base.get(), opt.rt, s, base_hook(), *rows, prog, err)) return false;
        base_rows = std::move(rows);
        return base_mtp == 0 || base_mtp_pass(s);
    }

    // --kld-base FILE that does not exist yet: the base runs over -f and writes
    // it; without candidates the file is the product and the base's own
    // perplexity the report.
    bool write_kld_base() {
        if (!load_base(true)) return false;   // as exact_base: the weights after the sizes
        if (!plain_workload(opt.input_path, in.text, base.get(), n_ctx, opt.max_chunks, wl, err)) return false;
        if (!size_decodes(llama_vocab_n_tokens(llama_model_get_vocab(base.get()))) || !load_base(false)) return false;
        double nll = 0;
        size_t n_scored = 0;
        kld_base_receipt written;
        if (!write_base_file(base.get(), wl, opt, n_ctx, prog, base_hook(), nll, n_scored, written, err)) return false;
        if (!write_kld_receipt(written)) return false;
        if (base_mtp > 0 && !cands.empty() && !base_mtp_pass(make_pass_setup(base.get(), wl, opt.rt, n_ctx))) return false;
        if (cands.empty()) {
            eval_report r;
            r.kld_base_mode        = "written";
            r.overall.n_tokens     = n_scored;
            r.overall.ppl_base     = n_scored ? std::exp(nll / n_scored) : 0;
            r.n_ctx                = n_ctx;
            r.n_windows            = wl.windows.size();
            r.n_samples            = wl.n_samples;
            reports.push_back(r);
            base_only_done = true;
        }
        return true;
    }

    // Beside the KLD base file just written: what wrote it (the base's
    // identity, its bytes' hash included, its mask, the text).
    bool write_kld_receipt(kld_base_receipt & r) {
        if (!base_bytes_hashed()) return false;
        r.base_path = opt.base_path;
        r.base_sha256 = ids.base_sha256;
        r.base_router_sha256 = ids.base_router_sha256;
        r.base_files_sha256 = ids.base_files_sha256;
        r.base_bytes = ids.base_bytes;
        r.base_mask = opt.base_mask_path;
        r.base_mask_sha256 = ids.base_mask.plan_sha256;
        r.input_path = opt.input_path;
        r.input_sha256 = util::sha256_bytes(in.text.data(), in.text.size());
        return util::write_file_durably(kld_receipt_path(opt.kld_base_path), util::json_text(kld_receipt_to_json(r), 2) + "\n", err);
    }

    // An existing KLD base file: its receipt, when there is one, is read now
    // and held to the file's bytes (hashed while the passes read them) before
    // the eval names the receipt's base as its own; without a receipt (a file
    // of llama-perplexity, or one whose receipt is gone) the base is unknown.
    // Rows whose receipt names another model than -m (its routers differ: not
    // another quantisation of it) are refused here, before the base loads.
    bool read_kld_receipt() {
        kld_base_receipt r;
        bool found = false;
        if (!read_kld_receipt_of(opt.kld_base_path, found, r, err)) return false;
        if (!found) return true;
        if (!opt.base_path.empty() && r.base_router_sha256 != ids.base_router_sha256) {
            err = "KLD base file '" + opt.kld_base_path + "' holds the rows of " + r.base_path + ", another model than -m " +
                  opt.base_path + " (its routers differ; router sha256 " + r.base_router_sha256.substr(0, 16) + "… against " +
                  ids.base_router_sha256.substr(0, 16) + "…): give the base those rows are of, or rows of this base";
            return false;
        }
        rows_receipt = r;
        rows_hash.start({opt.kld_base_path});
        return true;
    }

    // Whose rows were read: the receipt's base when the file is the bytes it
    // describes; nobody's otherwise (a warning says why).
    bool settle_rows_origin() {
        if (kld_mode != "read") return true;
        std::string why;
        if (!rows_receipt) {
            why = "KLD base file '" + opt.kld_base_path + "' has no receipt (" + kld_receipt_path(opt.kld_base_path) +
                  ", written by reap eval beside the files it makes): which model wrote its rows is not recorded";
        } else {
            std::string hex;
            if (!rows_hash.finish(hex, err)) return false;
            if (hex != rows_receipt->sha256) {
                why = "KLD base file '" + opt.kld_base_path + "' is not the file its receipt describes (sha256 " + hex.substr(0, 16) +
                      "…, the receipt's " + rows_receipt->sha256.substr(0, 16) + "…): which model wrote its rows is not known";
            }
        }
        rows_known = why.empty();
        rows_warning = why;   // in each report's warnings (printed by the command, or in its JSON)
        return true;
    }

    // The text, if given with an existing base file, must give the tokens the file was made from.
    bool check_text_gives_file_tokens() {
        model_ptr tok_model = base ? nullptr : load_model("pruned model", cands[0].path, opt.rt, true, err);
        if (!base && !tok_model) return false;
        corpus text;
        if (!read_plain_text(opt.input_path, in.text, base ? base.get() : tok_model.get(), corpus_options(), text, err)) {
            return false;
        }
        static const std::vector<int32_t> none;
        const auto & toks = text.samples.empty() ? none : text.samples[0].tokens;
        const size_t need = in.hdr.tokens.size();
        for (size_t i = 0; i < need; ++i) {
            if (i >= toks.size()) {
                err = "'" + opt.input_path + "' tokenizes to " + std::to_string(toks.size()) +
                      " tokens, but KLD base file '" + opt.kld_base_path + "' holds " + std::to_string(need) + " (" +
                      std::to_string(in.hdr.n_chunk) + " chunks of " + std::to_string(in.hdr.n_ctx) +
                      "): not the text it was made from";
                return false;
            }
            if (toks[i] != in.hdr.tokens[i]) {
                err = "token " + std::to_string(i) + " of '" + opt.input_path + "' is " + std::to_string(toks[i]) +
                      " but KLD base file '" + opt.kld_base_path + "' has " + std::to_string(in.hdr.tokens[i]) +
                      ": not the text (or tokenizer) the file was made from";
                return false;
            }
        }
        return true;
    }

    // With --kld-base: the file (written first when missing) is the base's side.
    bool file_base() {
        kld_mode = in.read_file_mode ? "read" : "written";
        if (!in.read_file_mode) {
            if (!write_kld_base()) return false;
            if (base_only_done) return true;
        }
        if (!kld_base_read_header(opt.kld_base_path, in.hdr, err)) return false;
        if (in.read_file_mode && !read_kld_receipt()) return false;
        if (!base && !opt.base_path.empty() && !load_base(ids.n_masks == 0)) return false;
        if (in.read_file_mode && !opt.input_path.empty() && !check_text_gives_file_tokens()) return false;
        wl = workload();
        file_workload(in.hdr, wl, opt.max_chunks);
        if (!size_decodes(in.hdr.n_vocab)) return false;
        auto rows = std::make_unique<kld_file_rows>();
        if (!rows->open(opt.kld_base_path, in.hdr, opt.rt.threads_batch(), err)) return false;
        base_rows = std::move(rows);
        prog.start("eval", (int64_t) (cands.size() + n_mtp_passes) * (int64_t) wl.n_decode_tokens);
        return true;
    }

    // Candidate i (a pruned file, or the base under masks[i]) scored against the base's rows.
    bool score(size_t i, llama_model * model, const std::string & label) {
        const pass_setup s = make_pass_setup(model, wl, opt.rt, n_ctx);
        if (base_rows->clip16 && in.hdr.n_vocab != s.n_vocab) {
            err = "KLD base file '" + opt.kld_base_path + "' was written for a vocabulary of " +
                  std::to_string(in.hdr.n_vocab) + " tokens, " +
                  (cands[i].masked() ? "base '" + opt.base_path + "'" : "pruned '" + cands[i].path + "'") + " has " +
                  std::to_string(s.n_vocab);
            return false;
        }
        const expert_mask * mask = cands[i].masked() ? &ids.masks[i] : nullptr;
        hook.active = mask;
        prog.label = label;
        if (!score_pass(model, opt.rt, s, mask ? &hook : nullptr, *base_rows, prog, reports[i], err)) return false;
        reports[i].kld_base_mode = kld_mode;
        if (cand_mtp[i] > 0) {
            prog.label = label + ", MTP draft";
            if (!mtp_pass(model, opt.rt, s, mask, prog, reports[i].mtp_pruned, err)) return false;
        }
        return true;
    }

    // Masked passes reuse the loaded base model, which is then freed before
    // the first pruned file loads: one model resident.
    bool score_candidates() {
        for (size_t i = 0; i < cands.size(); ++i) {
            if (cands[i].masked() && !score(i, base.get(), "masked by " + cands[i].path)) return false;
        }
        hook.active = nullptr;
        if (ids.n_masks < cands.size()) base.reset();
        for (size_t i = 0; i < cands.size(); ++i) {
            if (cands[i].masked()) continue;
            model_ptr pruned = load_model("pruned model", cands[i].path, opt.rt, false, err);
            if (!pruned || !score(i, pruned.get(), cands[i].path)) return false;
        }
        return unchanged_since(ids.pruned_sigs, err) && base_bytes_hashed() && settle_rows_origin();
    }

    // The base's hash, once every pass has read it (joins the hashing thread).
    bool base_bytes_hashed() { return !ids.base_hash.active() || ids.base_hash.finish(ids.base_files_sha256, err); }

    // With rows read from a KLD base file, the base is the model that wrote
    // them (its receipt's), not -m: -m only runs the masks and the tokenizer.
    void name_rows_origin(eval_report & r) const {
        r.base_path = rows_known ? rows_receipt->base_path : "";
        r.base_sha256 = rows_known ? rows_receipt->base_sha256 : "";
        r.base_router_sha256 = rows_known ? rows_receipt->base_router_sha256 : "";
        r.base_files_sha256 = rows_known ? rows_receipt->base_files_sha256 : "";
        r.base_bytes = rows_known ? rows_receipt->base_bytes : 0;
        r.base_mask = rows_known ? rows_receipt->base_mask : "";
        r.base_mask_sha256 = rows_known ? rows_receipt->base_mask_sha256 : "";
        if (!rows_known) r.warnings.push_back(rows_warning);
    }

    void write_receipts() {
        const std::string input_sha =
            in.text.empty() && opt.input_path.empty() ? "" : util::sha256_bytes(in.text.data(), in.text.size());
        for (size_t i = 0; i < cands.size(); ++i) {
            name_measurement(opt, cands[i], ids, i, input_sha, reports[i]);
            if (kld_mode == "read") name_rows_origin(reports[i]);
            reports[i].mtp_blocks = std::max(base_mtp, cand_mtp[i]);
            if (reports[i].mtp_blocks > 0) {
                reports[i].mtp_base = mtp_base;
                std::string why;
                if (!mtp_base) why = "the base's rows come from the KLD base file: its MTP head is not run";
                if (why.empty() && cand_mtp[i] == 0) why = "the pruned file has no MTP blocks";
                reports[i].mtp_note = why;
            }
        }
    }
};

} // namespace

bool run_eval_candidates(const eval_options & opt, const std::vector<eval_candidate> & cands,
                         std::vector<eval_report> & reports, std::string & err) {
    reports.clear();
    runtime_init(opt.verbose);
    eval_run run(opt, cands, reports, err);
    if (!run.prepare()) return false;
    if (!(run.opt.kld_base_path.empty() ? run.exact_base() : run.file_base())) return false;
    if (run.base_only_done) return true;
    if (!run.score_candidates()) return false;
    run.write_receipts();
    return true;
}

bool run_eval(const eval_options & opt, eval_report & report, std::string & err) {
    std::vector<eval_candidate> cands;
    if (!opt.pruned_path.empty()) cands.push_back({opt.pruned_path, false});
    std::vector<eval_report> reports;
    if (!run_eval_candidates(opt, cands, reports, err)) return false;
    report = reports.empty() ? eval_report() : reports[0];
    return true;
}

bool run_eval_multi(const eval_options & opt, const std::vector<std::string> & pruned_paths,
                    std::vector<eval_report> & reports, std::string & err) {
    if (pruned_paths.empty()) {
        err = "no pruned model: give -p PRUNED.gguf";
        return false;
    }
    std::vector<eval_candidate> cands;
    for (const auto & p : pruned_paths) cands.push_back({p, false});
    return run_eval_candidates(opt, cands, reports, err);
}

} // namespace reap

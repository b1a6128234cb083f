// The base's pass written as a KLD base file (eval_kld_file.h).
#include "llama/eval_kld_file.h"

#include "llama/eval_models.h"
#include "metrics/kld_record.h"
#include "util/file.h"
#include "util/parallel.h"
#include "util/sha256.h"

#include <algorithm>
#include <vector>

namespace reap::eval_detail {

using util::parallel_for;

bool write_base_file(llama_model * model, const workload & wl, const eval_options & opt, int n_ctx, progress_line & prog,
                     mask_hook * hook, double & nll, size_t & n_scored, kld_base_receipt & written, std::string & err) {
    const llama_vocab * vocab   = llama_model_get_vocab(model);
    const int           n_vocab = llama_vocab_n_tokens(vocab);
    const llama_token   bos     = llama_vocab_get_add_bos(vocab) ? llama_vocab_bos(vocab) : LLAMA_TOKEN_NULL;
    const int n_seq = seqs_per_decode(opt.rt, n_ctx);
    ctx_ptr ctx = make_context(model, opt.rt, n_ctx, n_seq, err, hook);
    if (!ctx) return false;

    // The file appears under its name only once complete: an interrupted run
    // never leaves one that a later run would trust.
    util::durable_file file;
    if (!file.open(opt.kld_base_path, err)) return false;
    util::sha256_stream hash;   // for the receipt: the bytes as written
    struct {
        util::durable_file & f;
        util::sha256_stream & h;
        uint64_t n = 0;
        bool write(const void * p, size_t k, std::string & e) { h.update(p, k); n += k; return f.write(p, k, e); }
    } out{file, hash};
    const int32_t hdr[3] = {n_ctx, n_vocab, (int32_t) wl.windows.size()};
    if (!out.write(k_kld_magic, 8, err) || !out.write(hdr, sizeof(hdr), err)) return false;
    for (const window & w : wl.windows) {
        if (!out.write(w.tokens, sizeof(int32_t) * (size_t) w.len, err)) return false;
    }

    const size_t          rec = kld_record_u16(n_vocab);
    std::vector<uint16_t> records;
    std::vector<double>   row_nll;
    const int             n_batch   = std::min(opt.rt.n_batch, n_ctx * n_seq);
    const int             n_threads = opt.rt.threads_batch();
    prog.start("base -> " + opt.kld_base_path, wl.n_decode_tokens);
    const bool ok = decode_windows({ctx.get()}, wl.windows, n_seq, n_batch, bos, prog,
        ([&](const std::vector<out_row> & rows) {
            records.resize(rec * rows.size());
            row_nll.resize(rows.size());
            parallel_for((int) rows.size(), n_threads, [&](int r) {
                const out_row & o = rows[r];
                row_nll[r] = kld_compress_row(llama_get_logits_ith(ctx.get(), o.idx), n_vocab, o.w->tokens[o.pos + 1],
                                              records.data() + rec * r);
            });
            for (double v : row_nll) nll += v;
            n_scored += rows.size();
            return out.write(records.data(), records.size() * sizeof(uint16_t), err);
        }), err, hook);
    if (!ok || !file.commit(err)) return false;
    written.bytes = out.n;
    written.sha256 = hash.hex();
    return true;
}

}  // namespace reap::eval_detail

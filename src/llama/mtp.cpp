// Runs a model's MTP blocks in llama.cpp's MTP context, fed as llama.cpp's
// MTP draft driver feeds it. See mtp.h.
#include "llama/mtp.h"

#include "moe/layout_gguf.h"
#include "plan/plan.h"

#include "llama-ext.h"   // llama.cpp's staging API: nextn embeddings, the MTP head offset

#include <algorithm>
#include <cstring>

namespace reap {

int mtp_heads(const llama_model * model) {
    return std::max(0, (int) llama_model_n_layer_nextn(model));
}

int mtp_blocks_in_file(const gguf::model & m) {
    std::string err;
    moe::layout lay;
    if (!moe::layout_of(m, lay, err, moe::describe_options())) return 0;
    for (const moe::tensor_role & r : lay.roles) {
        if (lay.is_mtp(r.layer)) return (int) lay.n_mtp;
    }
    return 0;
}

llama_context_params mtp_context_params(llama_context_params cparams, llama_context * target, int n_seq) {
    cparams.ctx_type   = LLAMA_CONTEXT_TYPE_MTP;
    cparams.ctx_other  = target;
    cparams.n_seq_max  = (uint32_t) std::max(1, n_seq);
    cparams.kv_unified = n_seq > 1;
    return cparams;
}

bool mtp_runner::init(llama_model * model, llama_context * target, llama_context_params cparams, std::string & err,
                      int n_seq) {
    n_heads = mtp_heads(model);
    if (n_heads == 0) {
        err = "the model has no MTP blocks";
        return false;
    }
    tgt       = target;
    n_embd    = llama_model_n_embd_out(model);
    n_seq_max = std::max(1, n_seq);
    ctx.reset(llama_init_from_model(model, mtp_context_params(cparams, target, n_seq_max)));
    if (!ctx) {
        err = "llama.cpp could not create an MTP context for the model's " + std::to_string(n_heads) +
              " MTP block(s) (was it loaded with load_mtp?)";
        return false;
    }
    n_batch = (int) llama_n_batch(ctx.get());
    n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_set_embeddings_nextn(target, true, /*masked=*/false);
    tok.resize((size_t) n_batch);
    embd.resize((size_t) n_batch * (size_t) n_embd);
    pos.resize((size_t) n_batch);
    n_seq_id.assign((size_t) n_batch, 1);
    seq_ids.assign((size_t) n_batch, 0);
    seq.resize((size_t) n_batch);
    for (int i = 0; i < n_batch; ++i) seq[(size_t) i] = &seq_ids[(size_t) i];
    out.resize((size_t) n_batch);
    reset();
    return true;
}

void mtp_runner::reset() {
    pending.assign((size_t) n_seq_max * (size_t) n_embd, 0.0f);
    if (ctx) llama_memory_clear(llama_get_memory(ctx.get()), true);
}

bool mtp_runner::feed(const llama_token * toks, int n, int pos0, const int8_t * outputs, bool keep_logits,
                      std::string & err) {
    std::vector<llama_pos>    rpos((size_t) std::max(n, 0));
    std::vector<llama_seq_id> rseq((size_t) std::max(n, 0), 0);
    for (int i = 0; i < n; ++i) rpos[(size_t) i] = pos0 + i;
    return feed_any(toks, rpos.data(), rseq.data(), n, outputs, keep_logits, err);
}

bool mtp_runner::feed_rows(const llama_token * toks, const llama_pos * rpos, const llama_seq_id * rseq, int n,
                           std::string & err) {
    return feed_any(toks, rpos, rseq, n, nullptr, false, err);
}

bool mtp_runner::feed_any(const llama_token * toks, const llama_pos * rpos, const llama_seq_id * rseq, int n,
                          const int8_t * outputs, bool keep_logits, std::string & err) {
    if (n <= 0) return true;
    if (keep_logits && n > n_batch) {
        err = "MTP batch of " + std::to_string(n) + " rows exceeds the context's " + std::to_string(n_batch);
        return false;
    }
    for (int i = 0; i < n; ++i) {
        if (rseq[i] < 0 || rseq[i] >= n_seq_max) {
            err = "MTP row " + std::to_string(i) + " has sequence " + std::to_string(rseq[i]) + " (the context has " +
                  std::to_string(n_seq_max) + ")";
            return false;
        }
    }
    const float * h = llama_get_embeddings_nextn(tgt);
    if (!h) {
        err = "the target context gave no nextn embeddings (the arch's graph has no h_nextn)";
        return false;
    }
    for (int r0 = 0; r0 < n; r0 += n_batch) {
        if (!decode_slice(toks, rpos, rseq, outputs, h, r0, std::min(n_batch, n - r0), keep_logits, err)) return false;
    }
    // each sequence's last h of this batch pairs with its next token in the next one
    const size_t row = (size_t) n_embd * sizeof(float);
    for (int i = 0; i < n; ++i) {
        if (i + 1 == n || rseq[i + 1] != rseq[i]) {
            std::memcpy(pending.data() + (size_t) rseq[i] * n_embd, h + (size_t) i * n_embd, row);
        }
    }
    return true;
}

bool mtp_runner::decode_slice(const llama_token * toks, const llama_pos * rpos, const llama_seq_id * rseq,
                              const int8_t * outputs, const float * h, int r0, int n, bool keep_logits,
                              std::string & err) {
    const size_t row = (size_t) n_embd * sizeof(float);
    for (int k = 0; k < n; ++k) {
        const int i = r0 + k;
        // row i pairs x_p with h_{p-1}: the row before in the same sequence, else
        // the sequence's last h of the previous batch (zeros at position 0)
        const float * hp = rpos[i] == 0                     ? nullptr
                         : (i > 0 && rseq[i - 1] == rseq[i]) ? h + (size_t) (i - 1) * n_embd
                                                             : pending.data() + (size_t) rseq[i] * n_embd;
        if (hp) {
            std::memcpy(embd.data() + (size_t) k * n_embd, hp, row);
        } else {
            std::memset(embd.data() + (size_t) k * n_embd, 0, row);
        }
        tok[(size_t) k]     = toks[i];
        pos[(size_t) k]     = rpos[i];
        seq_ids[(size_t) k] = rseq[i];
        out[(size_t) k]     = outputs ? outputs[i] : 1;
    }
    llama_batch b = {n, tok.data(), embd.data(), pos.data(), n_seq_id.data(), seq.data(), out.data()};
    for (int head = 0; head < n_heads; ++head) {
        if (n_heads > 1) {
            // chained heads: each sequence's positions of this slice leave the memory first
            for (int k = 0; k < n; ++k) {
                if (k == 0 || seq_ids[(size_t) k] != seq_ids[(size_t) k - 1]) {
                    llama_memory_seq_rm(llama_get_memory(ctx.get()), seq_ids[(size_t) k], pos[(size_t) k], -1);
                }
            }
            llama_set_nextn_layer_offset(ctx.get(), head);
        }
        const int rc = llama_decode(ctx.get(), b);
        if (rc != 0) {
            if (n_heads > 1) llama_set_nextn_layer_offset(ctx.get(), 0);
            err = "llama_decode in the MTP context failed (" + std::to_string(rc) + ", head " + std::to_string(head) +
                  ", position " + std::to_string(pos[0]) + ")";
            return false;
        }
        if (head == 0 && n_heads > 1 && keep_logits) {
            head0_row.assign((size_t) n, -1);
            head0.clear();
            for (int k = 0; k < n; ++k) {
                if (!out[(size_t) k]) continue;
                const float * l = llama_get_logits_ith(ctx.get(), k);
                if (!l) {
                    err = "llama.cpp gave no MTP logits for row " + std::to_string(k);
                    return false;
                }
                head0_row[(size_t) k] = (int) (head0.size() / (size_t) n_vocab);
                head0.insert(head0.end(), l, l + n_vocab);
            }
        }
    }
    if (n_heads > 1) llama_set_nextn_layer_offset(ctx.get(), 0);
    return true;
}

const float * mtp_runner::logits(int i) const {
    if (n_heads == 1) return llama_get_logits_ith(ctx.get(), i);
    if (i < 0 || (size_t) i >= head0_row.size() || head0_row[(size_t) i] < 0) return nullptr;
    return head0.data() + (size_t) head0_row[(size_t) i] * (size_t) n_vocab;
}

}  // namespace reap

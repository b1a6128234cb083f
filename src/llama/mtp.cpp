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

bool mtp_runner::init(llama_model * model, llama_context * target, llama_context_params cparams, std::string & err) {
    n_heads = mtp_heads(model);
    if (n_heads == 0) {
        err = "the model has no MTP blocks";
        return false;
    }
    tgt    = target;
    n_embd = llama_model_n_embd_out(model);
    cparams.ctx_type  = LLAMA_CONTEXT_TYPE_MTP;
    cparams.ctx_other = target;
    cparams.n_seq_max = 1;
    ctx.reset(llama_init_from_model(model, cparams));
    if (!ctx) {
        err = "llama.cpp could not create an MTP context for the model's " + std::to_string(n_heads) +
              " MTP block(s) (was it loaded with load_mtp?)";
        return false;
    }
    n_batch = (int) llama_n_batch(ctx.get());
    n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    if ((int) llama_n_batch(target) > n_batch) {
        err = "the MTP context's batch (" + std::to_string(n_batch) + ") is smaller than the target's";
        return false;
    }
    llama_set_embeddings_nextn(target, true, /*masked=*/false);
    tok.resize((size_t) n_batch);
    embd.resize((size_t) n_batch * (size_t) n_embd);
    pos.resize((size_t) n_batch);
    n_seq.assign((size_t) n_batch, 1);
    seq0.assign((size_t) n_batch, 0);
    seq.resize((size_t) n_batch);
    for (int i = 0; i < n_batch; ++i) seq[(size_t) i] = &seq0[(size_t) i];
    out.resize((size_t) n_batch);
    reset();
    return true;
}

void mtp_runner::reset() {
    pending.assign((size_t) n_embd, 0.0f);
    if (ctx) llama_memory_clear(llama_get_memory(ctx.get()), true);
}

bool mtp_runner::feed(const llama_token * toks, int n, int pos0, const int8_t * outputs, bool keep_logits,
                      std::string & err) {
    if (n <= 0) return true;
    if (n > n_batch) {
        err = "MTP batch of " + std::to_string(n) + " rows exceeds the context's " + std::to_string(n_batch);
        return false;
    }
    const float * h = llama_get_embeddings_nextn(tgt);
    if (!h) {
        err = "the target context gave no nextn embeddings (the arch's graph has no h_nextn)";
        return false;
    }
    const size_t row = (size_t) n_embd * sizeof(float);
    // row i pairs x_{pos0+i} with h_{pos0+i-1}: the previous decode's last h for i = 0
    std::memcpy(embd.data(), pending.data(), row);
    if (n > 1) std::memcpy(embd.data() + n_embd, h, row * (size_t) (n - 1));
    for (int i = 0; i < n; ++i) {
        tok[(size_t) i] = toks[i];
        pos[(size_t) i] = pos0 + i;
        out[(size_t) i] = outputs ? outputs[i] : 1;
    }
    std::memcpy(pending.data(), h + (size_t) (n - 1) * n_embd, row);
    llama_batch b = {n, tok.data(), embd.data(), pos.data(), n_seq.data(), seq.data(), out.data()};
    for (int head = 0; head < n_heads; ++head) {
        if (n_heads > 1) {
            llama_memory_seq_rm(llama_get_memory(ctx.get()), 0, pos0, -1);
            llama_set_nextn_layer_offset(ctx.get(), head);
        }
        const int rc = llama_decode(ctx.get(), b);
        if (rc != 0) {
            if (n_heads > 1) llama_set_nextn_layer_offset(ctx.get(), 0);
            err = "llama_decode in the MTP context failed (" + std::to_string(rc) + ", head " + std::to_string(head) +
                  ", position " + std::to_string(pos0) + ")";
            return false;
        }
        if (head == 0 && n_heads > 1 && keep_logits) {
            head0_row.assign((size_t) n, -1);
            head0.clear();
            for (int i = 0; i < n; ++i) {
                if (!out[(size_t) i]) continue;
                const float * l = llama_get_logits_ith(ctx.get(), i);
                if (!l) {
                    err = "llama.cpp gave no MTP logits for row " + std::to_string(i);
                    return false;
                }
                head0_row[(size_t) i] = (int) (head0.size() / (size_t) n_vocab);
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

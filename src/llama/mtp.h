// A model's MTP (multi-token / next-token prediction) blocks, run the way
// llama.cpp runs them. A GGUF with <arch>.nextn_predict_layers = N > 0 has N
// MTP blocks after its trunk (the last N of block_count, with nextn.* tensors
// and, in MoE models, their own routed experts). llama.cpp's main graph never
// runs them; they run in a second context of the same model with
// ctx_type = LLAMA_CONTEXT_TYPE_MTP (the speculative "draft-mtp" path), and
// only when the model was loaded with llama_model_params.load_mtp.
//
// What the MTP context is fed, as llama.cpp's MTP draft driver feeds it while
// the target processes a prompt (common/speculative.cpp,
// common_speculative_impl_draft_mtp::process): at position p the token x_p of
// the text and h_{p-1}, the target's nextn embedding (llama_get_embeddings_nextn:
// the hidden state the arch's graph marks h_nextn) at position p-1; at
// position 0 of a sequence h is all zeros. The MTP head's logits at p then
// predict x_{p+1}, as the target's logits at p do. With several heads (N > 1)
// each head gets the same rows, in turn, with the positions of the batch removed
// from the MTP context's memory first (what the driver does for chained heads).
//
// mtp_runner follows the sequences of a target context through its decodes:
// after each target decode, feed() decodes the same rows (token, position,
// sequence) in the MTP context; init() sets the target context to output nextn
// embeddings for every token of a batch. h_{p-1} of a row is the target's h of
// the row before it in the same sequence, or, for a sequence's first row in a
// decode, the last h that sequence had in the previous one (zeros at position
// 0). Tested against llama.cpp's own driver in tests/test_llama_mtp.cpp.
//
// The MTP context may take fewer rows per decode than the target (its n_batch):
// feed() then decodes the rows in slices. Each slice reads only the MTP blocks'
// experts, a few layers of the model, which is why calibrate bounds the MTP
// context's logits (n_vocab floats per row) by slicing rather than by shrinking
// the target's batch.
#pragma once

#include "gguf/gguf.h"
#include "llama/runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace reap {

// Whether llama.cpp sees MTP blocks in `model` (llama_model_n_layer_nextn > 0).
int mtp_heads(const llama_model * model);

// The MTP blocks the file `m` holds: <arch>.nextn_predict_layers when the file
// has tensors of an MTP block (moe::layout::is_mtp), else 0 (a converter may
// leave the MTP blocks out; llama.cpp then loads the trunk only, and an MTP
// context of that model cannot run).
int mtp_blocks_in_file(const gguf::model & m);

// The parameters of the MTP context beside `target` for n_seq sequences side
// by side, from the target's settings (what mtp_runner::init creates).
llama_context_params mtp_context_params(llama_context_params cparams, llama_context * target, int n_seq);

struct mtp_runner {
    // Creates the MTP context for `model` (loaded with load_mtp) with the
    // settings of `cparams` (n_ctx, n_batch, threads, eval callback ...),
    // against the target context `tgt`, and sets tgt to output nextn
    // embeddings for every token of a batch. n_seq > 1: that many sequences
    // side by side in one unified KV cache (the target's must be unified too,
    // so that its rows come back in batch order).
    bool init(llama_model * model, llama_context * tgt, llama_context_params cparams, std::string & err, int n_seq = 1);

    // New sequences: the MTP context's memory is cleared, h before position 0 is zero.
    void reset();

    // After the target decoded toks[0..n) at positions pos0..pos0+n-1 of
    // sequence 0: decodes the same positions in the MTP context with
    // (h_{p-1}, x_p). outputs[i] != 0: row i is an output row of the MTP
    // context; nullptr = every row. keep_logits: logits(i) is to be read
    // (then n must not exceed the MTP context's n_batch).
    bool feed(const llama_token * toks, int n, int pos0, const int8_t * outputs, bool keep_logits, std::string & err);

    // The same for a batch of several sequences: row i is token toks[i] at
    // position pos[i] of sequence seq[i]; a sequence's rows are consecutive and
    // in position order, as the target decoded them. Every row is an output.
    bool feed_rows(const llama_token * toks, const llama_pos * pos, const llama_seq_id * seq, int n, std::string & err);

    // The first MTP head's logits for output row i of the latest feed (with
    // keep_logits): what the first draft step samples from. With several heads
    // they are copied out right after the first head's decode, before the next
    // head's overwrites them.
    const float * logits(int i) const;

    llama_context * context() const { return ctx.get(); }
    int             heads() const { return n_heads; }

  private:
    llama_context *          tgt = nullptr;
    ctx_ptr                  ctx;
    int                      n_embd = 0, n_heads = 0, n_batch = 0, n_vocab = 0;
    std::vector<float>       head0;    // the first head's logits of the output rows (several heads only)
    std::vector<int>         head0_row;  // batch row -> row of head0 (-1: not an output)
    std::vector<float>       pending;  // per sequence: h at the last position the target decoded (zeros at the start)
    std::vector<llama_token> tok;
    std::vector<float>       embd;
    std::vector<llama_pos>   pos;
    std::vector<int32_t>     n_seq_id;   // 1 for every row
    std::vector<llama_seq_id> seq_ids;
    std::vector<llama_seq_id *> seq;
    std::vector<int8_t>      out;
    int                      n_seq_max = 1;

    // Decodes rows [r0, r0+n) of the caller's arrays (n <= n_batch) through every head.
    bool decode_slice(const llama_token * toks, const llama_pos * rpos, const llama_seq_id * rseq, const int8_t * outputs,
                      const float * h, int r0, int n, bool keep_logits, std::string & err);
    bool feed_any(const llama_token * toks, const llama_pos * rpos, const llama_seq_id * rseq, int n,
                  const int8_t * outputs, bool keep_logits, std::string & err);
};

}  // namespace reap

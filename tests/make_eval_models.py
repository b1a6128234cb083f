#!/usr/bin/env python3
# Test fixture for `reap eval`: writes two tiny random-weight qwen3moe GGUF
# models that share a 259-token byte-level BPE vocabulary (256 GPT-2 byte
# tokens, two merges, one control token used as BOS/EOS; the size is odd so
# that the llama-perplexity KLD record padding gets exercised).
#   base.gguf    the "unpruned" model
#   pruned.gguf  the same weights with some experts perturbed, so KLD > 0
#   othervocab.gguf  base's weights under a vocabulary that differs in one merge
# The weights are scaled so that next-token distributions are far from uniform
# (otherwise every KLD is ~0 and the tests prove nothing).
#
# usage: make_eval_models.py OUT_DIR [--gguf-py PATH_TO_gguf-py]
import argparse
import os
import sys

import numpy as np


def bytes_to_unicode():
    # GPT-2's reversible byte -> printable unicode mapping, which llama.cpp's
    # BPE tokenizer expects for byte-level vocabularies.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def write_model(gguf, path, seed, perturb, other_vocab=False):
    rng = np.random.default_rng(seed)
    n_vocab, n_embd, n_head, n_head_kv, head_dim = 259, 64, 4, 2, 16
    n_layer, n_expert, n_expert_used, n_ff_exp = 2, 8, 2, 32

    def rnd(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    # Draw every tensor in a fixed order so base and pruned share weights.
    tensors = {}
    tensors["token_embd.weight"] = rnd(n_vocab, n_embd, std=1.0)
    tensors["output_norm.weight"] = np.ones(n_embd, dtype=np.float32)
    tensors["output.weight"] = rnd(n_vocab, n_embd, std=0.2)
    for il in range(n_layer):
        p = f"blk.{il}."
        tensors[p + "attn_norm.weight"] = np.ones(n_embd, dtype=np.float32)
        tensors[p + "attn_q.weight"] = rnd(n_head * head_dim, n_embd, std=0.3)
        tensors[p + "attn_k.weight"] = rnd(n_head_kv * head_dim, n_embd, std=0.3)
        tensors[p + "attn_v.weight"] = rnd(n_head_kv * head_dim, n_embd, std=0.3)
        tensors[p + "attn_output.weight"] = rnd(n_embd, n_head * head_dim, std=0.3)
        tensors[p + "attn_q_norm.weight"] = np.ones(head_dim, dtype=np.float32)
        tensors[p + "attn_k_norm.weight"] = np.ones(head_dim, dtype=np.float32)
        tensors[p + "ffn_norm.weight"] = np.ones(n_embd, dtype=np.float32)
        tensors[p + "ffn_gate_inp.weight"] = rnd(n_expert, n_embd, std=0.3)
        # numpy shape is the reverse of ggml's ne: ne = [n_embd, n_ff_exp, n_expert]
        tensors[p + "ffn_gate_exps.weight"] = rnd(n_expert, n_ff_exp, n_embd, std=0.3)
        tensors[p + "ffn_up_exps.weight"] = rnd(n_expert, n_ff_exp, n_embd, std=0.3)
        tensors[p + "ffn_down_exps.weight"] = rnd(n_expert, n_embd, n_ff_exp, std=0.3)

    if perturb:
        prng = np.random.default_rng(seed + 1000)
        for il in range(n_layer):
            for name in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"):
                t = tensors[f"blk.{il}.{name}.weight"]
                for e in (1, 5):  # perturb two experts per layer
                    t[e] += (prng.standard_normal(t[e].shape) * 0.15).astype(np.float32)

    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_name("reap-eval-tiny")
    w.add_context_length(1024)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff_exp)
    w.add_expert_feed_forward_length(n_ff_exp)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_expert_used)
    w.add_file_type(0)

    b2u = bytes_to_unicode()
    # llama.cpp refuses a BPE vocabulary without merges; two real ones suffice.
    merges = ["a n", "h e"] if other_vocab else ["t h", "h e"]
    tokens = [b2u[b] for b in range(256)] + [m.replace(" ", "") for m in merges] + ["<|endoftext|>"]
    types = [1] * 258 + [3]  # NORMAL, CONTROL
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(258)
    w.add_eos_token_id(258)
    w.add_add_bos_token(True)
    w.add_chat_template(
        "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")

    for name, t in tensors.items():
        w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--gguf-py", default=None, help="path of llama.cpp's gguf-py (default: next to this repo)")
    args = ap.parse_args()
    gguf_py = args.gguf_py or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "third_party", "llama.cpp", "gguf-py")
    sys.path.insert(0, gguf_py)
    import gguf  # noqa: E402

    os.makedirs(args.out_dir, exist_ok=True)
    write_model(gguf, os.path.join(args.out_dir, "base.gguf"), seed=1, perturb=False)
    write_model(gguf, os.path.join(args.out_dir, "pruned.gguf"), seed=1, perturb=True)
    write_model(gguf, os.path.join(args.out_dir, "othervocab.gguf"), seed=1, perturb=False, other_vocab=True)


if __name__ == "__main__":
    main()

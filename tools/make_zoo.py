#!/usr/bin/env python3
"""make_zoo.py: write the "arch zoo", one tiny random-weight GGUF model per
Mixture-of-Experts layout that the pinned llama.cpp runs.

The zoo exists for tests: it gives the layout table, the slicer, the auditor and
the llama.cpp-linked code (calibration hooks, evaluation) one real model per
routing flavour without downloading anything:

  qwen3moe      softmax router, top-k renormalised, every layer MoE
  qwen2moe      softmax router without renormalisation, sigmoid-gated shared expert
  deepseek2     sigmoid router + exp_probs_b, shared expert, group-limited routing
                (expert_group_count 4, expert_group_used_count 2), MLA, dense lead layer
  gpt-oss       softmax over the selected logits, router bias, per-expert biases,
                MXFP4 expert slabs
  glm4moe       sigmoid router + exp_probs_b, shared expert, dense lead layer
  llama4        sigmoid weights applied to the expert *input*, MoE every 2nd layer
  kimi-k3       hybrid KDA/MLA, latent MoE (experts at expert_latent_length),
                sigmoid + exp_probs_b, shared expert, attention residuals,
                MXFP4 expert slabs like the published builds
  qwen3moe-q256 qwen3moe with n_embd = expert ffn = 256, the base for K/IQ
                quantised variants (ggml's k-quants need rows of 256)
  qwen3moe-v163840, kimi-k3-v163840, gpt-oss-v163840
                the three at Kimi-K3's 163,840-token vocabulary (padded), for
                what grows with the vocabulary

Weights are seeded per model (crc32 of its name), so the bytes are the same on
every run and machine with the same numpy. Each model NAME.gguf gets NAME.json
beside it (arch, expert counts, MoE layers, router facts) for tests to read;
zoo.json collects them all.

Usage: make_zoo.py --out DIR [--arch NAME ...]   (default: all)
Needs numpy and llama.cpp's gguf-py, found through $REAP_GGUF_PY, or
third_party/llama.cpp/gguf-py next to this script's repository.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from pathlib import Path

import numpy as np

_here = Path(__file__).resolve().parent
_gguf_py = os.environ.get("REAP_GGUF_PY") or str(_here.parent / "third_party" / "llama.cpp" / "gguf-py")
sys.path.insert(0, _gguf_py)
import gguf  # noqa: E402
from gguf.quants import quantize as gguf_quantize  # noqa: E402

F32 = gguf.GGMLQuantizationType.F32
F16 = gguf.GGMLQuantizationType.F16
MXFP4 = gguf.GGMLQuantizationType.MXFP4

# llama.cpp's llama_expert_gating_func_type
GATING_SOFTMAX, GATING_SIGMOID, GATING_SOFTMAX_WEIGHT = 1, 2, 3


# ---- tokenizer ------------------------------------------------------------------

def gpt2_byte_symbols() -> list[str]:
    """The 256 printable stand-ins GPT-2's byte-level BPE uses for bytes 0..255."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out = {}
    extra = 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


# a handful of real merges so that the BPE path is exercised; every merge result is a token
MERGES = [("Ġ", "t"), ("h", "e"), ("i", "n"), ("e", "r"), ("a", "n"), ("Ġ", "a"), ("o", "n"), ("r", "e")]
SPECIALS = ["<|bos|>", "<|eos|>", "<|pad|>"]


def add_vocab(w: gguf.GGUFWriter, n_vocab: int = 0) -> int:
    """The byte-level vocabulary; with n_vocab, padded to that size by unused
    tokens (for a real model's vocabulary size without its tokenizer)."""
    normal = gpt2_byte_symbols() + [a + b for a, b in MERGES]
    n_pad = max(0, n_vocab - len(normal) - len(SPECIALS))
    tokens = normal + [f"<|unused_{i}|>" for i in range(n_pad)] + SPECIALS
    types = ([int(gguf.TokenType.NORMAL)] * len(normal) + [int(gguf.TokenType.UNUSED)] * n_pad +
             [int(gguf.TokenType.CONTROL)] * len(SPECIALS))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in MERGES])
    first_special = len(tokens) - len(SPECIALS)
    w.add_bos_token_id(first_special)
    w.add_eos_token_id(first_special + 1)
    w.add_pad_token_id(first_special + 2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    return len(tokens)


# ---- model writer ---------------------------------------------------------------

class Model:
    """Collects KV pairs and tensors for one zoo model. Shapes are given in
    ggml order (ne0 first), as llama-model.cpp's create_tensor lists them."""

    def __init__(self, name: str, arch: str, path: Path):
        self.name = name
        self.arch = arch
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.w = gguf.GGUFWriter(str(path), arch)
        self.w.add_name("reap-zoo-" + name)
        self.n_vocab = add_vocab(self.w, VOCAB_SIZE.get(name, 0))
        self.facts: dict = {"name": name, "arch": arch, "file": path.name}

    # KV helpers spelled with the full key so the file documents itself
    def u32(self, key: str, v: int) -> None:
        self.w.add_uint32(key.format(arch=self.arch), int(v))

    def f32(self, key: str, v: float) -> None:
        self.w.add_float32(key.format(arch=self.arch), float(v))

    def bool_(self, key: str, v: bool) -> None:
        self.w.add_bool(key.format(arch=self.arch), bool(v))

    def arr(self, key: str, v: list[int]) -> None:
        self.w.add_array(key.format(arch=self.arch), [int(x) for x in v])

    def _put(self, name: str, data: np.ndarray, qtype) -> None:
        if qtype == F32:
            self.w.add_tensor(name, data.astype(np.float32))
        elif qtype == F16:
            self.w.add_tensor(name, data.astype(np.float16))
        else:
            q = gguf_quantize(data.astype(np.float32), qtype)
            self.w.add_tensor(name, q, raw_dtype=qtype)

    def weight(self, name: str, ne: tuple, qtype=F16, scale: float | None = None) -> None:
        """Random matrix; std 1/sqrt(ne0) keeps every matmul output O(1) (ggml reduces over ne0)."""
        if scale is None:
            scale = 1.0 / np.sqrt(ne[0])
        data = self.rng.standard_normal(tuple(reversed(ne))).astype(np.float32) * scale
        self._put(name, data, qtype)

    def ones(self, name: str, ne: tuple) -> None:
        self._put(name, np.ones(tuple(reversed(ne)), dtype=np.float32), F32)

    def vec(self, name: str, ne: tuple, scale: float = 0.02, offset: float = 0.0) -> None:
        data = self.rng.standard_normal(tuple(reversed(ne))).astype(np.float32) * scale + offset
        self._put(name, data, F32)

    def common(self, n_layer: int, n_embd: int, n_head: int, n_head_kv, n_ff: int,
               n_expert: int, n_expert_used: int, head_dim: int | None = None) -> None:
        self.u32("{arch}.context_length", 256)
        self.u32("{arch}.embedding_length", n_embd)
        self.u32("{arch}.block_count", n_layer)
        self.u32("{arch}.feed_forward_length", n_ff)
        self.u32("{arch}.attention.head_count", n_head)
        if isinstance(n_head_kv, list):
            self.arr("{arch}.attention.head_count_kv", n_head_kv)
        else:
            self.u32("{arch}.attention.head_count_kv", n_head_kv)
        if head_dim is not None:
            self.u32("{arch}.attention.key_length", head_dim)
            self.u32("{arch}.attention.value_length", head_dim)
        self.f32("{arch}.attention.layer_norm_rms_epsilon", 1e-6)
        self.f32("{arch}.rope.freq_base", 10000.0)
        self.u32("{arch}.expert_count", n_expert)
        self.u32("{arch}.expert_used_count", n_expert_used)
        self.facts.update(n_layer=n_layer, n_embd=n_embd, n_expert=n_expert, n_expert_used=n_expert_used,
                          n_vocab=self.n_vocab)

    def embeddings(self, n_embd: int) -> None:
        self.weight("token_embd.weight", (n_embd, self.n_vocab), scale=1.0)
        self.ones("output_norm.weight", (n_embd,))
        self.weight("output.weight", (n_embd, self.n_vocab))

    def router_facts(self, gating: str, norm: bool, moe_layers: list[int], n_shared: int = 0,
                     n_group: int = 0, n_group_used: int = 0, weight_before_ffn: bool = False,
                     scale: float = 1.0) -> None:
        self.facts.update(gating=gating, weights_norm=norm, moe_layers=moe_layers, n_expert_shared=n_shared,
                          expert_group_count=n_group, expert_group_used_count=n_group_used,
                          weight_before_ffn=weight_before_ffn, weights_scale=scale)

    def write(self, ftype) -> None:
        self.w.add_file_type(int(ftype))
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()


# ---- shared pieces ---------------------------------------------------------------

def gqa_attention(m: Model, i: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int,
                  qkv_bias: bool = False, qk_norm: bool = False) -> None:
    m.weight(f"blk.{i}.attn_q.weight", (n_embd, n_head * head_dim))
    m.weight(f"blk.{i}.attn_k.weight", (n_embd, n_head_kv * head_dim))
    m.weight(f"blk.{i}.attn_v.weight", (n_embd, n_head_kv * head_dim))
    m.weight(f"blk.{i}.attn_output.weight", (n_head * head_dim, n_embd))
    if qkv_bias:
        m.vec(f"blk.{i}.attn_q.bias", (n_head * head_dim,))
        m.vec(f"blk.{i}.attn_k.bias", (n_head_kv * head_dim,))
        m.vec(f"blk.{i}.attn_v.bias", (n_head_kv * head_dim,))
    if qk_norm:
        m.ones(f"blk.{i}.attn_q_norm.weight", (head_dim,))
        m.ones(f"blk.{i}.attn_k_norm.weight", (head_dim,))


def dense_ffn(m: Model, i: int, n_embd: int, n_ff: int) -> None:
    m.weight(f"blk.{i}.ffn_gate.weight", (n_embd, n_ff))
    m.weight(f"blk.{i}.ffn_up.weight", (n_embd, n_ff))
    m.weight(f"blk.{i}.ffn_down.weight", (n_ff, n_embd))


def expert_slabs(m: Model, i: int, n_in: int, n_ff_exp: int, n_expert: int, qtype=F16, fused=False) -> None:
    if fused:  # gate and up in one tensor, gate's rows first (llama.cpp's ffn_gate_up_exps)
        m.weight(f"blk.{i}.ffn_gate_up_exps.weight", (n_in, 2 * n_ff_exp, n_expert), qtype)
    else:
        m.weight(f"blk.{i}.ffn_gate_exps.weight", (n_in, n_ff_exp, n_expert), qtype)
        m.weight(f"blk.{i}.ffn_up_exps.weight", (n_in, n_ff_exp, n_expert), qtype)
    m.weight(f"blk.{i}.ffn_down_exps.weight", (n_ff_exp, n_in, n_expert), qtype)


def router(m: Model, i: int, n_embd: int, n_expert: int) -> None:
    # a wider spread than the other weights so that routing differs between tokens
    m.weight(f"blk.{i}.ffn_gate_inp.weight", (n_embd, n_expert), F32, scale=2.0 / np.sqrt(n_embd))


def shared_expert(m: Model, i: int, n_embd: int, n_ff_shexp: int) -> None:
    m.weight(f"blk.{i}.ffn_gate_shexp.weight", (n_embd, n_ff_shexp))
    m.weight(f"blk.{i}.ffn_up_shexp.weight", (n_embd, n_ff_shexp))
    m.weight(f"blk.{i}.ffn_down_shexp.weight", (n_ff_shexp, n_embd))


# ---- the archs -------------------------------------------------------------------

def build_qwen3moe(m: Model, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_layer=3,
                   n_expert=16, n_used=4, n_ff_exp=32, fused=False) -> None:
    m.common(n_layer, n_embd, n_head, n_head_kv, 4 * n_embd, n_expert, n_used, head_dim)
    m.u32("{arch}.expert_feed_forward_length", n_ff_exp)
    # qwen3moe always renormalises the top-k weights (build_moe_ffn norm_w = true)
    m.router_facts("softmax", True, list(range(n_layer)))
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.ones(f"blk.{i}.attn_norm.weight", (n_embd,))
        gqa_attention(m, i, n_embd, n_head, n_head_kv, head_dim, qk_norm=True)
        m.ones(f"blk.{i}.ffn_norm.weight", (n_embd,))
        router(m, i, n_embd, n_expert)
        expert_slabs(m, i, n_embd, n_ff_exp, n_expert, fused=fused)
    m.write(gguf.LlamaFileType.MOSTLY_F16)


def build_qwen3moe_fused(m: Model) -> None:
    # the expert layout with gate and up in one tensor (reap score's AIMER test)
    build_qwen3moe(m, fused=True)


def build_qwen3moe_q256(m: Model) -> None:
    # rows of 256 everywhere an expert slab is quantised: gate/up ne0 = n_embd, down ne0 = n_ff_exp
    build_qwen3moe(m, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_layer=2, n_expert=8, n_used=2,
                   n_ff_exp=256)


def build_qwen3moe_v163840(m: Model) -> None:
    # Kimi-K3's vocabulary size: what grows with the vocabulary (logits) is measured on it
    build_qwen3moe(m, n_layer=2, n_expert=8, n_used=2)


def build_kimi_k3_v163840(m: Model) -> None:
    # Kimi-K3's own vocabulary size on its own arch: its graph narrows to the
    # output rows only after the last layer, so calibrate's rows need no logits
    build_kimi_k3(m)


def build_gpt_oss_v163840(m: Model) -> None:
    # gpt-oss narrows to the output rows after its last layer too, and has no
    # recurrent state: its counts do not depend on the ubatch size
    build_gpt_oss(m)


def build_qwen3moe_wide(m: Model) -> None:
    # expert slabs (96 MiB) far larger than everything else: where peak memory
    # says whether one model or two are resident
    build_qwen3moe(m, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_layer=2, n_expert=64, n_used=2,
                   n_ff_exp=512)


def build_qwen2moe(m: Model, n_embd=64, n_head=4, n_head_kv=2, n_layer=2, n_expert=8, n_used=2,
                   n_ff_exp=32, n_ff_shexp=64) -> None:
    head_dim = n_embd // n_head
    m.common(n_layer, n_embd, n_head, n_head_kv, 4 * n_embd, n_expert, n_used)
    m.u32("{arch}.expert_feed_forward_length", n_ff_exp)
    m.u32("{arch}.expert_shared_feed_forward_length", n_ff_shexp)
    # softmax over all experts, top-k weights NOT renormalised
    m.router_facts("softmax", False, list(range(n_layer)), n_shared=1)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.ones(f"blk.{i}.attn_norm.weight", (n_embd,))
        gqa_attention(m, i, n_embd, n_head, n_head_kv, head_dim, qkv_bias=True)
        m.ones(f"blk.{i}.ffn_norm.weight", (n_embd,))
        router(m, i, n_embd, n_expert)
        expert_slabs(m, i, n_embd, n_ff_exp, n_expert)
        # the shared expert's sigmoid gate: one row, not per expert
        m.weight(f"blk.{i}.ffn_gate_inp_shexp.weight", (n_embd,), F32)
        shared_expert(m, i, n_embd, n_ff_shexp)
    m.write(gguf.LlamaFileType.MOSTLY_F16)


def mla_attention(m: Model, i: int, n_embd: int, n_head: int, q_lora: int, kv_lora: int,
                  qk_nope: int, qk_rope: int, v_dim: int, out_gate: bool = False) -> None:
    """DeepSeek-style MLA in its absorbed form (attn_k_b / attn_v_b), as current converters write it."""
    if q_lora > 0:
        m.ones(f"blk.{i}.attn_q_a_norm.weight", (q_lora,))
        m.weight(f"blk.{i}.attn_q_a.weight", (n_embd, q_lora))
        m.weight(f"blk.{i}.attn_q_b.weight", (q_lora, n_head * (qk_nope + qk_rope)))
    else:
        m.weight(f"blk.{i}.attn_q.weight", (n_embd, n_head * (qk_nope + qk_rope)))
    m.ones(f"blk.{i}.attn_kv_a_norm.weight", (kv_lora,))
    m.weight(f"blk.{i}.attn_kv_a_mqa.weight", (n_embd, kv_lora + qk_rope))
    m.weight(f"blk.{i}.attn_k_b.weight", (qk_nope, kv_lora, n_head))
    m.weight(f"blk.{i}.attn_v_b.weight", (kv_lora, v_dim, n_head))
    if out_gate:
        m.weight(f"blk.{i}.attn_gate.weight", (n_embd, n_head * v_dim))
    m.weight(f"blk.{i}.attn_output.weight", (n_head * v_dim, n_embd))


def mla_keys(m: Model, q_lora: int, kv_lora: int, qk_nope: int, qk_rope: int, v_dim: int) -> None:
    if q_lora > 0:
        m.u32("{arch}.attention.q_lora_rank", q_lora)
    m.u32("{arch}.attention.kv_lora_rank", kv_lora)
    # MLA is served as MQA over the compressed latent
    m.u32("{arch}.attention.key_length", kv_lora + qk_rope)
    m.u32("{arch}.attention.value_length", kv_lora)
    m.u32("{arch}.attention.key_length_mla", qk_nope + qk_rope)
    m.u32("{arch}.attention.value_length_mla", v_dim)
    m.u32("{arch}.rope.dimension_count", qk_rope)


def build_deepseek2(m: Model, n_embd=64, n_head=4, n_layer=3, n_expert=16, n_used=4, n_ff_exp=32,
                    n_group=4, n_group_used=2) -> None:
    q_lora, kv_lora, qk_nope, qk_rope, v_dim = 32, 32, 16, 8, 16
    n_dense = 1
    m.common(n_layer, n_embd, n_head, 1, 4 * n_embd, n_expert, n_used)
    mla_keys(m, q_lora, kv_lora, qk_nope, qk_rope, v_dim)
    m.u32("{arch}.leading_dense_block_count", n_dense)
    m.u32("{arch}.expert_feed_forward_length", n_ff_exp)
    m.u32("{arch}.expert_shared_count", 1)
    m.f32("{arch}.expert_weights_scale", 2.5)
    m.bool_("{arch}.expert_weights_norm", True)
    m.u32("{arch}.expert_gating_func", GATING_SIGMOID)
    m.u32("{arch}.expert_group_count", n_group)
    m.u32("{arch}.expert_group_used_count", n_group_used)
    m.router_facts("sigmoid", True, list(range(n_dense, n_layer)), n_shared=1, n_group=n_group,
                   n_group_used=n_group_used, scale=2.5)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.ones(f"blk.{i}.attn_norm.weight", (n_embd,))
        mla_attention(m, i, n_embd, n_head, q_lora, kv_lora, qk_nope, qk_rope, v_dim)
        m.ones(f"blk.{i}.ffn_norm.weight", (n_embd,))
        if i < n_dense:
            dense_ffn(m, i, n_embd, 4 * n_embd)
            continue
        router(m, i, n_embd, n_expert)
        m.vec(f"blk.{i}.exp_probs_b.bias", (n_expert,), scale=0.05)
        expert_slabs(m, i, n_embd, n_ff_exp, n_expert)
        shared_expert(m, i, n_embd, n_ff_exp * 1)
    m.write(gguf.LlamaFileType.MOSTLY_F16)


def build_gpt_oss(m: Model, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_layer=2, n_expert=8,
                  n_used=2, n_ff_exp=32) -> None:
    m.common(n_layer, n_embd, n_head, n_head_kv, 4 * n_embd, n_expert, n_used, head_dim)
    m.u32("{arch}.expert_feed_forward_length", n_ff_exp)
    m.u32("{arch}.attention.sliding_window", 64)
    m.u32("{arch}.rope.dimension_count", head_dim)
    # softmax over the k selected logits (SOFTMAX_WEIGHT): removing unselected experts leaves weights unchanged
    m.router_facts("softmax_weight", False, list(range(n_layer)))
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.ones(f"blk.{i}.attn_norm.weight", (n_embd,))
        m.ones(f"blk.{i}.post_attention_norm.weight", (n_embd,))
        gqa_attention(m, i, n_embd, n_head, n_head_kv, head_dim, qkv_bias=True)
        m.vec(f"blk.{i}.attn_output.bias", (n_embd,))
        m.vec(f"blk.{i}.attn_sinks.weight", (n_head,), scale=0.5)
        router(m, i, n_embd, n_expert)
        m.vec(f"blk.{i}.ffn_gate_inp.bias", (n_expert,), scale=0.1)
        expert_slabs(m, i, n_embd, n_ff_exp, n_expert, MXFP4)
        # per-expert biases: ne = [row, n_expert], expert outermost
        m.vec(f"blk.{i}.ffn_gate_exps.bias", (n_ff_exp, n_expert))
        m.vec(f"blk.{i}.ffn_up_exps.bias", (n_ff_exp, n_expert))
        m.vec(f"blk.{i}.ffn_down_exps.bias", (n_embd, n_expert))
    m.write(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)


def build_glm4moe(m: Model, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_layer=3, n_expert=16,
                  n_used=4, n_ff_exp=32) -> None:
    n_dense = 1
    m.common(n_layer, n_embd, n_head, n_head_kv, 4 * n_embd, n_expert, n_used, head_dim)
    m.u32("{arch}.rope.dimension_count", head_dim // 2)  # partial rotary, as GLM-4.5
    m.u32("{arch}.leading_dense_block_count", n_dense)
    m.u32("{arch}.expert_feed_forward_length", n_ff_exp)
    m.u32("{arch}.expert_shared_count", 1)
    m.f32("{arch}.expert_weights_scale", 1.0)
    m.bool_("{arch}.expert_weights_norm", True)
    m.u32("{arch}.expert_gating_func", GATING_SIGMOID)
    m.router_facts("sigmoid", True, list(range(n_dense, n_layer)), n_shared=1)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.ones(f"blk.{i}.attn_norm.weight", (n_embd,))
        gqa_attention(m, i, n_embd, n_head, n_head_kv, head_dim, qkv_bias=True)
        m.ones(f"blk.{i}.post_attention_norm.weight", (n_embd,))
        if i < n_dense:
            dense_ffn(m, i, n_embd, 4 * n_embd)
            continue
        router(m, i, n_embd, n_expert)
        m.vec(f"blk.{i}.exp_probs_b.bias", (n_expert,), scale=0.05)
        expert_slabs(m, i, n_embd, n_ff_exp, n_expert)
        shared_expert(m, i, n_embd, n_ff_exp)
    m.write(gguf.LlamaFileType.MOSTLY_F16)


def build_llama4(m: Model, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_layer=4, n_expert=8,
                 n_used=2, n_ff_exp=32, step=2) -> None:
    m.common(n_layer, n_embd, n_head, n_head_kv, 2 * n_embd, n_expert, n_used, head_dim)
    m.u32("{arch}.rope.dimension_count", head_dim)
    m.u32("{arch}.expert_feed_forward_length", n_ff_exp)
    m.u32("{arch}.interleave_moe_layer_step", step)
    moe = [i for i in range(n_layer) if (i + 1) % step == 0]
    # sigmoid of the selected logits scales the expert *input* (build_moe_ffn weight_before_ffn)
    m.router_facts("sigmoid", False, moe, n_shared=1, weight_before_ffn=True)
    m.embeddings(n_embd)
    for i in range(n_layer):
        m.ones(f"blk.{i}.attn_norm.weight", (n_embd,))
        gqa_attention(m, i, n_embd, n_head, n_head_kv, head_dim)
        m.ones(f"blk.{i}.ffn_norm.weight", (n_embd,))
        if i not in moe:
            dense_ffn(m, i, n_embd, 2 * n_embd)
            continue
        router(m, i, n_embd, n_expert)
        expert_slabs(m, i, n_embd, n_ff_exp, n_expert)
        shared_expert(m, i, n_embd, n_ff_exp)
    m.write(gguf.LlamaFileType.MOSTLY_F16)


def build_kimi_k3(m: Model, n_embd=64, n_head=4, n_layer=4, n_expert=16, n_used=4, n_ff_exp=32,
                  latent=32, kda_head_dim=16, kv_lora=32, qk_nope=16, qk_rope=8, v_dim=16, n_ff=0,
                  res_block=2) -> None:
    # layers 0..2 are KDA (linear attention, n_head_kv 0), layer 3 is MLA, as K3's 3:1 pattern;
    # layer 0 has a dense FFN (leading_dense_block_count 1). latent 0: the routed experts
    # run at n_embd (no ffn_routed_* projections). The defaults are the zoo's model;
    # bench/k3_ubatch_table.sh passes K3's shape.
    d_conv = 4
    n_dense = 1
    n_ff = n_ff or 2 * n_embd
    d_inner = n_head * kda_head_dim
    head_kv = [1 if (i + 1) % 4 == 0 else 0 for i in range(n_layer)]
    m.common(n_layer, n_embd, n_head, head_kv, n_ff, n_expert, n_used)
    mla_keys(m, 0, kv_lora, qk_nope, qk_rope, v_dim)
    m.u32("{arch}.ssm.conv_kernel", d_conv)
    m.u32("{arch}.kda.head_dim", kda_head_dim)
    m.f32("{arch}.kda.gate_lower_bound", -5.0)
    m.u32("{arch}.expert_feed_forward_length", n_ff_exp)
    m.u32("{arch}.expert_shared_count", 1)
    m.u32("{arch}.leading_dense_block_count", n_dense)
    m.f32("{arch}.expert_weights_scale", 2.5)
    m.bool_("{arch}.expert_weights_norm", True)
    m.u32("{arch}.expert_gating_func", GATING_SIGMOID)
    if latent:
        m.u32("{arch}.expert_latent_length", latent)
    m.f32("{arch}.activation.situ_beta", 4.0)
    m.f32("{arch}.activation.situ_linear_beta", 8.0)
    m.u32("{arch}.attn_res.block_size", res_block)
    m.router_facts("sigmoid", True, list(range(n_dense, n_layer)), n_shared=1, scale=2.5)
    m.facts.update(expert_latent_length=latent)
    m.embeddings(n_embd)
    m.vec("output_res_score.weight", (n_embd,), scale=0.1)
    for i in range(n_layer):
        m.ones(f"blk.{i}.attn_norm.weight", (n_embd,))
        m.ones(f"blk.{i}.ffn_norm.weight", (n_embd,))
        m.vec(f"blk.{i}.attn_res_score.weight", (n_embd,), scale=0.1)
        m.vec(f"blk.{i}.ffn_res_score.weight", (n_embd,), scale=0.1)
        if head_kv[i] == 0:
            for qkv in "qkv":
                m.weight(f"blk.{i}.ssm_conv1d_{qkv}.weight", (d_conv, 1, d_inner, 1), F32, scale=0.5)
                m.weight(f"blk.{i}.attn_{qkv}.weight", (n_embd, d_inner))
            m.weight(f"blk.{i}.ssm_f_a.weight", (n_embd, kda_head_dim))
            m.weight(f"blk.{i}.ssm_f_b.weight", (kda_head_dim, d_inner))
            m.weight(f"blk.{i}.ssm_beta.weight", (n_embd, n_head))
            # -exp(A_log), folded at conversion time
            m.vec(f"blk.{i}.ssm_a", (n_head,), scale=0.1, offset=-1.0)
            m.vec(f"blk.{i}.ssm_dt.bias", (d_inner,), scale=0.1)
            m.weight(f"blk.{i}.ssm_g.weight", (n_embd, d_inner))
            m.ones(f"blk.{i}.ssm_norm.weight", (kda_head_dim,))
            m.weight(f"blk.{i}.attn_output.weight", (d_inner, n_embd))
        else:
            mla_attention(m, i, n_embd, n_head, 0, kv_lora, qk_nope, qk_rope, v_dim, out_gate=True)
        if i < n_dense:
            dense_ffn(m, i, n_embd, n_ff)
            continue
        router(m, i, n_embd, n_expert)
        m.vec(f"blk.{i}.exp_probs_b.bias", (n_expert,), scale=0.05)
        # routed experts live in the latent space: ne0 of gate/up (and ne1 of down) is `latent`
        expert_slabs(m, i, latent or n_embd, n_ff_exp, n_expert, MXFP4)
        if latent:
            m.weight(f"blk.{i}.ffn_routed_down.weight", (n_embd, latent))
            m.weight(f"blk.{i}.ffn_routed_up.weight", (latent, n_embd))
            m.ones(f"blk.{i}.ffn_routed_norm.weight", (latent,))
        shared_expert(m, i, n_embd, n_ff_exp * 1)
    m.write(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)


# name -> (llama.cpp arch, builder)
ZOO = {
    "qwen3moe":      ("qwen3moe",  build_qwen3moe),
    "qwen2moe":      ("qwen2moe",  build_qwen2moe),
    "deepseek2":     ("deepseek2", build_deepseek2),
    "gpt-oss":       ("gpt-oss",   build_gpt_oss),
    "glm4moe":       ("glm4moe",   build_glm4moe),
    "llama4":        ("llama4",    build_llama4),
    "kimi-k3":       ("kimi-k3",   build_kimi_k3),
    "qwen3moe-q256": ("qwen3moe",  build_qwen3moe_q256),
    "qwen3moe-fused": ("qwen3moe", build_qwen3moe_fused),
    "qwen3moe-v163840": ("qwen3moe", build_qwen3moe_v163840),
    "qwen3moe-wide": ("qwen3moe", build_qwen3moe_wide),
    "kimi-k3-v163840": ("kimi-k3", build_kimi_k3_v163840),
    "gpt-oss-v163840": ("gpt-oss", build_gpt_oss_v163840),
}
# Zoo models with a vocabulary padded to a real model's size.
VOCAB_SIZE = {"qwen3moe-v163840": 163840, "kimi-k3-v163840": 163840, "gpt-oss-v163840": 163840}
# Large models (tens of MB), and qwen3moe-fused (a layout for one test), written only when named.
LARGE = {"qwen3moe-v163840", "qwen3moe-wide", "kimi-k3-v163840", "gpt-oss-v163840", "qwen3moe-fused"}


def main() -> int:
    ap = argparse.ArgumentParser(description="write tiny random-weight MoE GGUF models, one per layout")
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--arch", action="append", choices=sorted(ZOO), help="model to write (repeatable; default all but the large ones)")
    args = ap.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.arch or [n for n in ZOO if n not in LARGE]

    manifest_path = out / "zoo.json"
    manifest = {}
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except ValueError:
            manifest = {}

    for name in names:
        arch, build = ZOO[name]
        path = out / f"{name}.gguf"
        # temp name per process: tests running in parallel may build the same model at
        # once; the bytes are identical and the rename is atomic, so either wins
        tmp = out / f".{name}.gguf.{os.getpid()}.tmp"
        m = Model(name, arch, tmp)
        m.facts["file"] = path.name
        build(m)
        os.replace(tmp, path)  # never leave a half-written model under the final name
        manifest[name] = m.facts
        side = out / f".{name}.json.{os.getpid()}.tmp"
        side.write_text(json.dumps(m.facts, indent=1, sort_keys=True) + "\n")
        os.replace(side, out / f"{name}.json")
        print(path)

    tmp = out / f".zoo.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, manifest_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

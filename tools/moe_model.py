"""The project's small MoE transformer, written to match llama.cpp's qwen3moe graph.

One definition serves three users: the trainer (tools/train_moe.py), the GGUF
exporter (same file) and the reference forward pass that checks llama.cpp's
logits and reap's saliency (tools/reference_forward.py). The maths follows
llama.cpp's `qwen3moe` exactly:

  x = tok_embd[t]
  per block: h = x + Wo·attn(RoPE_neox(rmsnorm_head(Wq·n)), RoPE_neox(rmsnorm_head(Wk·n)), Wv·n)
             with n = rmsnorm(x)·attn_norm, causal GQA, scale 1/sqrt(head_dim)
             x = h + Σ_{e in top-k} w_e · down_e(silu(gate_e(m)) * up_e(m)),  m = rmsnorm(h)·ffn_norm
             w = softmax(router·m) restricted to the top-k and renormalised to sum 1
  logits = output · (rmsnorm(x)·output_norm)

The tokenizer is byte level: token b < 256 is byte b; 256 is <|endoftext|>
(BOS and EOS), 257/258 are <|im_start|>/<|im_end|> for the chat template.
"""

import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F

BOS = 256
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
N_VOCAB = 256 + len(SPECIAL_TOKENS)


@dataclass
class Config:
    n_vocab: int = N_VOCAB
    n_ctx: int = 256
    n_embd: int = 192
    n_layer: int = 4
    n_head: int = 6
    n_head_kv: int = 2
    n_expert: int = 32
    n_expert_used: int = 4
    n_ff_exp: int = 128
    rope_base: float = 10000.0
    rms_eps: float = 1e-6

    @property
    def head_dim(self):
        return self.n_embd // self.n_head

    def to_dict(self):
        return asdict(self)


def rmsnorm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope_neox(x, pos, base):
    """NEOX-style rotary embedding: dims i and i + d/2 form a pair. x: [T, H, D]."""
    d = x.shape[-1]
    half = d // 2
    inv = base ** (-torch.arange(0, half, dtype=torch.float32) * 2.0 / d)
    ang = pos.float()[:, None] * inv[None, :]  # [T, half]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class MoE(nn.Module):
    """Routed experts with grouped batched matmuls (no Python loop over experts)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        E, d, f = cfg.n_expert, cfg.n_embd, cfg.n_ff_exp
        self.router = nn.Parameter(torch.randn(E, d) * 0.02)
        self.gate = nn.Parameter(torch.randn(E, f, d) / math.sqrt(d))
        self.up = nn.Parameter(torch.randn(E, f, d) / math.sqrt(d))
        self.down = nn.Parameter(torch.randn(E, d, f) / math.sqrt(f) / math.sqrt(2 * cfg.n_layer))
        # virtual width pruning (reference only): [E, f] of 0/1, the channels each expert keeps; None = all
        self.channel_keep = None

    def route(self, m):
        """Top-k expert ids [T, k], their renormalised weights [T, k], and the full softmax [T, E]."""
        probs = F.softmax(m @ self.router.t(), dim=-1)
        w, idx = torch.topk(probs, self.cfg.n_expert_used, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        return idx, w, probs

    def forward(self, m, trace=None):
        T, d = m.shape
        E, k = self.cfg.n_expert, self.cfg.n_expert_used
        idx, w, probs = self.route(m)
        flat_e = idx.reshape(-1)
        order = torch.argsort(flat_e, stable=True)
        sorted_e = flat_e[order]
        counts = torch.bincount(sorted_e, minlength=E)
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(T * k, device=m.device) - starts[sorted_e]
        tok = order // k
        cap = int(counts.max())
        buf = m.new_zeros(E, cap, d)
        buf[sorted_e, slot] = m[tok]
        h = F.silu(torch.bmm(buf, self.gate.transpose(1, 2))) * torch.bmm(buf, self.up.transpose(1, 2))
        if self.channel_keep is not None:
            h = h * self.channel_keep[:, None, :].to(h.dtype)  # removed channels contribute nothing
        y = torch.bmm(h, self.down.transpose(1, 2))  # [E, cap, d]
        y_sorted = y[sorted_e, slot]  # expert outputs before weighting, one row per (token, slot)
        out = m.new_zeros(T, d).index_add_(0, tok, y_sorted * w.reshape(-1)[order, None])
        if trace is not None:
            # what reap calibrate records: per routed (token, expert) the applied weight and ‖f‖₂
            # and the input of the down projection per (token, expert), for channel saliency
            trace.append({"expert": sorted_e, "token": tok, "weight": w.reshape(-1)[order], "norm": y_sorted.norm(dim=-1),
                          "down_in": h[sorted_e, slot]})
        # Switch-style load balancing: fraction routed × mean router probability
        frac = counts.float() / (T * k)
        aux = E * (frac * probs.mean(0)).sum()
        return out, aux


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg.n_embd, cfg.head_dim
        self.attn_norm = nn.Parameter(torch.ones(d))
        self.wq = nn.Parameter(torch.randn(cfg.n_head * hd, d) / math.sqrt(d))
        self.wk = nn.Parameter(torch.randn(cfg.n_head_kv * hd, d) / math.sqrt(d))
        self.wv = nn.Parameter(torch.randn(cfg.n_head_kv * hd, d) / math.sqrt(d))
        self.wo = nn.Parameter(torch.randn(d, cfg.n_head * hd) / math.sqrt(d) / math.sqrt(2 * cfg.n_layer))
        self.q_norm = nn.Parameter(torch.ones(hd))
        self.k_norm = nn.Parameter(torch.ones(hd))
        self.ffn_norm = nn.Parameter(torch.ones(d))
        self.moe = MoE(cfg)

    def attention(self, n, pos):
        """n: [B, L, d] normalised input; causal attention within each row."""
        cfg = self.cfg
        B, L, _ = n.shape
        hd = cfg.head_dim
        q = (n @ self.wq.t()).view(B * L, cfg.n_head, hd)
        k = (n @ self.wk.t()).view(B * L, cfg.n_head_kv, hd)
        v = (n @ self.wv.t()).view(B, L, cfg.n_head_kv, hd)
        q = rope_neox(rmsnorm(q, self.q_norm, cfg.rms_eps), pos, cfg.rope_base).view(B, L, cfg.n_head, hd)
        k = rope_neox(rmsnorm(k, self.k_norm, cfg.rms_eps), pos, cfg.rope_base).view(B, L, cfg.n_head_kv, hd)
        rep = cfg.n_head // cfg.n_head_kv
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, L, hd]
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        causal = torch.ones(L, L, dtype=torch.bool).tril()
        o = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v
        return o.transpose(1, 2).reshape(B, L, cfg.n_head * hd) @ self.wo.t()

    def forward(self, x, pos, trace=None):
        B, L, d = x.shape
        x = x + self.attention(rmsnorm(x, self.attn_norm, self.cfg.rms_eps), pos)
        y, aux = self.moe(rmsnorm(x, self.ffn_norm, self.cfg.rms_eps).reshape(B * L, d), trace)
        return x + y.view(B, L, d), aux


class MoEModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_embd = nn.Parameter(torch.randn(cfg.n_vocab, cfg.n_embd) * 0.5)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.output_norm = nn.Parameter(torch.ones(cfg.n_embd))
        self.output = nn.Parameter(torch.randn(cfg.n_vocab, cfg.n_embd) / math.sqrt(cfg.n_embd))

    def forward(self, tokens, traces=None):
        """tokens: [B, L], each row its own causal sequence starting at position 0.
        Returns logits [B, L, V] and the summed load-balancing loss.
        traces: optional dict layer -> list, filled with the routing of every token."""
        B, L = tokens.shape
        pos = torch.arange(L).repeat(B)
        x = self.tok_embd[tokens]
        aux = x.new_zeros(())
        for i, blk in enumerate(self.blocks):
            x, a = blk(x, pos, None if traces is None else traces.setdefault(i, []))
            aux = aux + a
        return rmsnorm(x, self.output_norm, self.cfg.rms_eps) @ self.output.t(), aux


# ---- GGUF mapping ---------------------------------------------------------------

def gguf_tensors(model):
    """(name, float32 numpy array in GGUF's reversed-shape order) for every tensor."""
    out = [("token_embd.weight", model.tok_embd), ("output_norm.weight", model.output_norm), ("output.weight", model.output)]
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", b.attn_norm),
            (p + "attn_q.weight", b.wq), (p + "attn_k.weight", b.wk), (p + "attn_v.weight", b.wv),
            (p + "attn_output.weight", b.wo),
            (p + "attn_q_norm.weight", b.q_norm), (p + "attn_k_norm.weight", b.k_norm),
            (p + "ffn_norm.weight", b.ffn_norm),
            (p + "ffn_gate_inp.weight", b.moe.router),
            (p + "ffn_gate_exps.weight", b.moe.gate), (p + "ffn_up_exps.weight", b.moe.up),
            (p + "ffn_down_exps.weight", b.moe.down),
        ]
    return [(n, t.detach().float().contiguous().numpy()) for n, t in out]


def load_from_gguf(path, gguf_module):
    """Builds a MoEModel whose weights are read back from a GGUF written by export (any float type)."""
    r = gguf_module.GGUFReader(path)
    kv = {f.name: f for f in r.fields.values()}

    def scalar(key):
        f = kv[key]
        return f.parts[f.data[0]][0].item()

    arch = "qwen3moe"
    cfg = Config(
        n_vocab=len(kv["tokenizer.ggml.tokens"].data),
        n_ctx=int(scalar(f"{arch}.context_length")),
        n_embd=int(scalar(f"{arch}.embedding_length")),
        n_layer=int(scalar(f"{arch}.block_count")),
        n_head=int(scalar(f"{arch}.attention.head_count")),
        n_head_kv=int(scalar(f"{arch}.attention.head_count_kv")),
        n_expert=int(scalar(f"{arch}.expert_count")),
        n_expert_used=int(scalar(f"{arch}.expert_used_count")),
        n_ff_exp=int(scalar(f"{arch}.expert_feed_forward_length")),
        rope_base=float(scalar(f"{arch}.rope.freq_base")),
        rms_eps=float(scalar(f"{arch}.attention.layer_norm_rms_epsilon")),
    )
    model = MoEModel(cfg)
    by_name = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        by_name[t.name] = torch.from_numpy(t.data.astype("float32").reshape(shape).copy())
    with torch.no_grad():
        for name, param in zip([n for n, _ in gguf_tensors(model)], _params_in_gguf_order(model)):
            if name not in by_name:
                raise SystemExit(f"load_from_gguf: {path} has no tensor {name}")
            if tuple(by_name[name].shape) != tuple(param.shape):
                raise SystemExit(f"load_from_gguf: {name} has shape {tuple(by_name[name].shape)}, expected {tuple(param.shape)}")
            param.copy_(by_name[name])
    return model


def _params_in_gguf_order(model):
    out = [model.tok_embd, model.output_norm, model.output]
    for b in model.blocks:
        out += [b.attn_norm, b.wq, b.wk, b.wv, b.wo, b.q_norm, b.k_norm, b.ffn_norm,
                b.moe.router, b.moe.gate, b.moe.up, b.moe.down]
    return out

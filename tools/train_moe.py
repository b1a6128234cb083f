#!/usr/bin/env python3
"""Trains reap.cpp's test and demo model and exports it to GGUF.

A 4-block qwen3moe-shaped transformer (32 routed experts per block, top-4,
softmax router with top-k renormalisation, byte-level tokenizer) trained on
the train split of tools/build_corpus.py's multi-domain corpus, with a
Switch-style load-balancing loss so that every expert is used. Deterministic
for a seed and thread count. Writes, into --out (a folder):

  reap-moe-tiny.gguf   the model (F32), loadable by the pinned llama.cpp
  train_log.jsonl      step, loss, aux loss, tokens/s
  eval.json            held-out bits per byte per domain, and a unigram baseline
  loss.png             the loss curve

Run (the exact command used for the committed model is in models/README.md):
  make model   (OMP_NUM_THREADS=1 ... tools/train_moe.py --corpus data/corpus --out models --steps 1200 --threads 1)

The shape flags (--n-embd ... --n-layer), --name, --log-prefix, --f16 and the
window mix (--needle-frac, --copy-frac; tools/recall_data.py) make the second
model, reap-moe-wide (`make model-wide`): 256-wide rows that k- and i-quants
accept, and needle and copy windows from step 0, meant to teach retrieval.
--copy-first N trains the first N steps on copy windows alone (of --copy-ctx
tokens), so that copying is learnt before retrieval and language: the third
model, reap-moe-recall (`make model-recall`). --copy-every prints held-out
copy accuracy (recall_data.copy_accuracy) as it goes.
--needle-forms completion keeps the needle windows in the completion form and
--no-chat-template exports without a template, as reap-moe-recall's second
stage does (reap eval --needle then asks it in that form).
At their defaults the run is reap-moe-tiny's, draw for draw.

Interrupted runs resume from --ckpt (written every --ckpt-every steps).
"""

import argparse
import json
import math
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_model import BOS, N_VOCAB, SPECIAL_TOKENS, Config, MoEModel, gguf_tensors, load_from_gguf  # noqa: E402
import recall_data  # noqa: E402

DOMAIN_ORDER = ["en", "code", "ja", "zh", "de", "fr"]

# ChatML, so that `messages` samples render through the model's own template.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message.get('reasoning_content') %}{{ '<think>\\n' + message['reasoning_content'] + '\\n</think>\\n' }}{% endif %}"
    "{{ message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def load_split(corpus, split):
    streams = {}
    with open(os.path.join(corpus, f"{split}.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            streams.setdefault(r["domain"], []).append(r["text"].encode("utf-8"))
    return {d: np.frombuffer(b"\n\n".join(v), dtype=np.uint8) for d, v in streams.items()}


def batch(rng, streams, domains, weights, B, L):
    """B windows: BOS + L-1 bytes as input, the next L bytes as targets."""
    x = np.empty((B, L), dtype=np.int64)
    y = np.empty((B, L), dtype=np.int64)
    ds = rng.choice(len(domains), size=B, p=weights)
    for i, di in enumerate(ds):
        s = streams[domains[di]]
        o = int(rng.integers(0, len(s) - L))
        x[i, 0] = BOS
        x[i, 1:] = s[o:o + L - 1]
        y[i] = s[o:o + L]
    return torch.from_numpy(x), torch.from_numpy(y)


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def heldout_bpb(model, streams, L, max_windows):
    """Bits per byte on non-overlapping windows (BOS + L-1 bytes) of each domain's held-out text."""
    model.eval()
    out = {}
    for d, s in streams.items():
        n = min(max_windows, (len(s) - 1) // L)
        nll, nbytes = 0.0, 0
        for w in range(0, n, 8):
            rows = range(w, min(n, w + 8))
            x = torch.tensor(np.stack([np.concatenate([[BOS], s[r * L:r * L + L - 1]]) for r in rows]), dtype=torch.int64)
            y = torch.tensor(np.stack([s[r * L:r * L + L] for r in rows]), dtype=torch.int64)
            logits, _ = model(x)
            nll += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
            nbytes += y.numel()
        out[d] = {"bpb": nll / nbytes / math.log(2), "bytes": nbytes}
    model.train()
    return out


def unigram_bpb(train, heldout, L, max_windows):
    """Cross-entropy of held-out bytes under the train split's byte frequencies (add-one)."""
    counts = np.ones(256)
    for s in train.values():
        counts += np.bincount(s, minlength=256)
    logp = np.log2(counts / counts.sum())
    out = {}
    for d, s in heldout.items():
        n = min(max_windows, (len(s) - 1) // L)
        seg = s[:n * L]
        out[d] = float(-logp[seg].mean())
    return out


def export_gguf(model, cfg, path, gguf, name="reap-moe-tiny", f16=False, chat_template=True):
    """f16: matrices in F16; norms and the router stay F32 (as llama.cpp's converter keeps them)."""
    arch = "qwen3moe"
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".export.")
    os.close(fd)
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(name)
    w.add_context_length(cfg.n_ctx)
    w.add_embedding_length(cfg.n_embd)
    w.add_block_count(cfg.n_layer)
    w.add_feed_forward_length(cfg.n_ff_exp * cfg.n_expert_used)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_head_kv)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_layer_norm_rms_eps(cfg.rms_eps)
    w.add_expert_count(cfg.n_expert)
    w.add_expert_used_count(cfg.n_expert_used)
    w.add_expert_feed_forward_length(cfg.n_ff_exp)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    # byte-level GPT-2 style vocab: token b is the printable stand-in of byte b
    byte_chars = gguf_byte_chars()
    tokens = [byte_chars[b] for b in range(256)] + SPECIAL_TOKENS
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * 256 + [gguf.TokenType.CONTROL] * len(SPECIAL_TOKENS))
    # llama.cpp requires a merges array and gguf-py refuses an empty one: one merge
    # of two special tokens, which are never symbols inside a word, never fires.
    w.add_token_merges([f"{SPECIAL_TOKENS[1]} {SPECIAL_TOKENS[2]}"])
    w.add_bos_token_id(BOS)
    w.add_eos_token_id(BOS)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if chat_template:
        w.add_chat_template(CHAT_TEMPLATE)
    for tname, arr in gguf_tensors(model):
        if f16 and arr.ndim >= 2 and not tname.endswith("ffn_gate_inp.weight"):
            arr = arr.astype(np.float16)
        w.add_tensor(tname, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.chmod(tmp, 0o644)  # mkstemp creates 0600
    os.replace(tmp, path)


def gguf_byte_chars():
    """GPT-2's byte -> printable character table (the convention llama.cpp's BPE vocab uses)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def plot_loss(log_path, png_path, name="reap-moe-tiny"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [json.loads(l) for l in open(log_path)]
    steps = [r["step"] for r in rows]
    bpb = [r["loss"] / math.log(2) for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot(steps, bpb, lw=0.8, label="train (bits/byte)")
    k = 25
    if len(bpb) > k:
        sm = np.convolve(bpb, np.ones(k) / k, mode="valid")
        ax.plot(steps[k - 1:], sm, lw=1.5, label=f"train, {k}-step mean")
    ax.set_xlabel("step")
    ax.set_ylabel("bits per byte")
    ax.set_title(f"{name} training loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="folder with train.jsonl and heldout.jsonl (tools/build_corpus.py)")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=16, help="sequences per step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--aux", type=float, default=0.01, help="load-balancing loss weight")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ckpt", default="data/train/ckpt.pt", help="checkpoint path (resume from it if present)")
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--eval-windows", type=int, default=48, help="held-out windows per domain for bits per byte")
    ap.add_argument("--bench", type=int, default=0, help="only time this many steps and exit")
    shape = Config()
    for field in ("n_embd", "n_head", "n_head_kv", "n_expert", "n_expert_used", "n_ff_exp", "n_layer"):
        ap.add_argument("--" + field.replace("_", "-"), type=int, default=getattr(shape, field),
                        help=f"model shape (default {getattr(shape, field)})")
    ap.add_argument("--name", default="reap-moe-tiny", help="model name: the GGUF is OUT/NAME.gguf")
    ap.add_argument("--log-prefix", default="", help="prefix of train_log.jsonl, eval.json and loss.png in OUT")
    ap.add_argument("--f16", action="store_true", help="export the matrices in F16 (norms and router F32)")
    ap.add_argument("--needle-frac", type=float, default=0.0, help="share of each batch that is needle windows")
    ap.add_argument("--copy-frac", type=float, default=0.0, help="share of each batch that is copy windows")
    ap.add_argument("--distract", type=float, default=0.0,
                    help="the chance that a needle window's haystack holds look-alikes of the value (capitalised "
                         "words, codes of the values' shapes; tools/recall_data.py)")
    ap.add_argument("--init-from", default="",
                    help="start from this GGUF's weights (one this script wrote, of the same shape) instead of random ones")
    ap.add_argument("--chat-frac", type=float, default=0.0,
                    help="share of each batch that is chat windows: continue the user's text to the end of its "
                         "sentence, then <|im_end|> (tools/recall_data.py)")
    ap.add_argument("--answer-weight", type=float, default=4.0, help="loss weight of a needle answer's tokens")
    ap.add_argument("--needle-every", type=int, default=100, help="held-out needle accuracy every N steps (with --needle-frac)")
    ap.add_argument("--copy-first", type=int, default=0,
                    help="the first N steps train on copy windows alone (copying is learnt first, retrieval and "
                         "language after)")
    ap.add_argument("--copy-ctx", type=int, default=128,
                    help="window length of the --copy-first steps (copying is learnt sooner in short windows)")
    ap.add_argument("--needle-forms", choices=("both", "completion"), default="both",
                    help="needle windows in both forms, or only the completion form (for a model exported "
                         "without a chat template, which reap eval --needle asks in that form)")
    ap.add_argument("--no-chat-template", action="store_true", help="export without tokenizer.chat_template")
    ap.add_argument("--copy-every", type=int, default=0, help="held-out copy accuracy every N steps")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "third_party", "llama.cpp", "gguf-py"))
    import gguf  # noqa: E402  (the pinned llama.cpp's own GGUF writer)

    cfg = Config(n_embd=args.n_embd, n_head=args.n_head, n_head_kv=args.n_head_kv, n_expert=args.n_expert,
                 n_expert_used=args.n_expert_used, n_ff_exp=args.n_ff_exp, n_layer=args.n_layer)
    if cfg.n_embd % cfg.n_head or cfg.n_head % cfg.n_head_kv or not 0 < cfg.n_expert_used <= cfg.n_expert:
        ap.error(f"inconsistent shape: {cfg.to_dict()}")
    n_needle = round(args.batch * args.needle_frac)
    n_copy = round(args.batch * args.copy_frac)
    n_chat = round(args.batch * args.chat_frac)
    if not (0 <= args.needle_frac <= 1 and 0 <= args.copy_frac <= 1 and 0 <= args.chat_frac <= 1 and
            n_needle + n_copy + n_chat <= args.batch):
        ap.error("--needle-frac, --copy-frac and --chat-frac are shares of one batch: each within 0..1, together at most 1")
    mixed = n_needle + n_copy + n_chat + args.copy_first > 0
    train = load_split(args.corpus, "train")
    heldout = load_split(args.corpus, "heldout")
    domains = [d for d in DOMAIN_ORDER if d in train]
    sizes = np.array([len(train[d]) for d in domains], dtype=np.float64)
    weights = sizes / sizes.sum()
    print("train bytes: " + ", ".join(f"{d} {len(train[d])}" for d in domains), flush=True)

    model = MoEModel(cfg)
    if args.init_from:
        model = load_from_gguf(args.init_from, gguf)
        got = dict(model.cfg.to_dict(), rms_eps=cfg.rms_eps)   # the file holds eps as a float32
        if got != cfg.to_dict() or abs(model.cfg.rms_eps - cfg.rms_eps) > 1e-12:
            raise SystemExit(f"--init-from {args.init_from}: its shape {model.cfg.to_dict()} is not {cfg.to_dict()}")
        model.cfg = cfg
        print(f"weights from {args.init_from}", flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters, config {cfg.to_dict()}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)
    log_path = os.path.join(args.out, args.log_prefix + "train_log.jsonl")
    step = 0
    if args.ckpt and os.path.exists(args.ckpt) and not args.bench:
        ck = torch.load(args.ckpt, weights_only=False)
        if ck.get("config", cfg.to_dict()) != cfg.to_dict():
            raise SystemExit(f"{args.ckpt} is a checkpoint of another shape ({ck['config']}): give --ckpt")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        rng.bit_generator.state = ck["rng"]
        torch.set_rng_state(ck["torch_rng"])
        step = ck["step"]
        print(f"resumed from {args.ckpt} at step {step}", flush=True)
        # keep the log consistent with the checkpoint: its rows up to and including the
        # checkpoint's step (that step's row was written before the checkpoint was saved);
        # the rows after it are trained again
        rows = [l for l in open(log_path) if json.loads(l)["step"] <= step] if os.path.exists(log_path) else []
        open(log_path, "w").writelines(rows)
    elif not args.bench:
        open(log_path, "w").close()

    L = cfg.n_ctx
    t_start = time.time()
    tok_done = 0
    while step < args.steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        if step < args.copy_first:
            x, y, wt = recall_data.mixed_batch(rng, train, domains, weights, args.batch, args.copy_ctx, 0, args.batch,
                                               args.answer_weight)
        elif mixed:
            x, y, wt = recall_data.mixed_batch(rng, train, domains, weights, args.batch, L, n_needle, n_copy,
                                               args.answer_weight, args.needle_forms, n_chat, args.distract)
        else:
            x, y = batch(rng, train, domains, weights, args.batch, L)
        t0 = time.time()
        logits, aux = model(x)
        if mixed:
            nll = F.cross_entropy(logits.reshape(-1, cfg.n_vocab), y.reshape(-1), reduction="none")
            loss = (nll * wt.reshape(-1)).sum() / wt.sum()
        else:
            loss = F.cross_entropy(logits.reshape(-1, cfg.n_vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        (loss + args.aux * aux).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.time() - t0
        tok_done += x.numel()
        step += 1
        rate = tok_done / (time.time() - t_start)
        if args.bench:
            print(f"step {step}: {dt:.2f}s, {x.numel() / dt:.0f} tok/s", flush=True)
            if step >= args.bench:
                return
            continue
        with open(log_path, "a") as f:
            f.write(json.dumps({"step": step, "loss": loss.item(), "aux": aux.item() / cfg.n_layer, "tok_per_s": rate}) + "\n")
        if step % 10 == 0 or step == args.steps:
            eta = (args.steps - step) * x.numel() / max(rate, 1e-9)
            print(f"step {step}/{args.steps} loss {loss.item():.3f} ({loss.item() / math.log(2):.3f} bpb) "
                  f"aux {aux.item() / cfg.n_layer:.3f} {rate:.0f} tok/s eta {eta / 60:.1f} min", flush=True)
        if n_needle and args.needle_every and step % args.needle_every == 0:
            acc = recall_data.needle_accuracy(model, heldout, L, (64, 128), (0.15, 0.5, 0.85), 4, 7)
            print(f"step {step}: held-out needles exact, chat {acc['chat']:.2f}, completion {acc['completion']:.2f}",
                  flush=True)
        if args.copy_every and step % args.copy_every == 0:
            c = recall_data.copy_accuracy(model, L, 8, 5)
            print(f"step {step}: held-out copy windows, second copy argmax {c['second_acc']:.3f}, "
                  f"bits per byte first {c['first_bpb']:.2f} second {c['second_bpb']:.2f}", flush=True)
        if args.ckpt and (step % args.ckpt_every == 0 or step == args.steps):
            os.makedirs(os.path.dirname(os.path.abspath(args.ckpt)), exist_ok=True)
            tmp = args.ckpt + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.bit_generator.state,
                        "torch_rng": torch.get_rng_state(), "step": step, "config": cfg.to_dict()}, tmp)
            os.replace(tmp, args.ckpt)

    train_seconds = time.time() - t_start
    gguf_path = os.path.join(args.out, args.name + ".gguf")
    export_gguf(model, cfg, gguf_path, gguf, args.name, args.f16, not args.no_chat_template)
    print(f"wrote {gguf_path}", flush=True)
    ev = heldout_bpb(model, heldout, L, args.eval_windows)
    uni = unigram_bpb(train, heldout, L, args.eval_windows)
    report = {"config": cfg.to_dict(), "n_params": n_params, "steps": args.steps, "batch": args.batch,
              "tokens_seen": args.batch * (min(args.copy_first, args.steps) * args.copy_ctx +
                                           max(0, args.steps - args.copy_first) * L), "seed": args.seed, "threads": args.threads,
              "train_seconds_this_run": train_seconds,
              "heldout": {d: {"bpb": ev[d]["bpb"], "unigram_bpb": uni[d], "bytes": ev[d]["bytes"]} for d in ev}}
    if mixed:
        report["mix"] = {"needle_windows": n_needle, "copy_windows": n_copy, "chat_windows": n_chat,
                         "answer_weight": args.answer_weight}
        report["needle_teacher_forced"] = recall_data.needle_accuracy(model, heldout, L, (64, 128), (0.15, 0.5, 0.85),
                                                                      16, 11)
        report["copy_heldout"] = recall_data.copy_accuracy(model, L, 16, 13)
        if args.copy_first:
            report["mix"]["copy_first_steps"] = args.copy_first
            report["mix"]["copy_first_window"] = args.copy_ctx
    with open(os.path.join(args.out, args.log_prefix + "eval.json"), "w") as f:
        json.dump(report, f, indent=1)
    for d in ev:
        print(f"heldout {d:5s}: {ev[d]['bpb']:.3f} bpb (unigram {uni[d]:.3f})", flush=True)
    plot_loss(log_path, os.path.join(args.out, args.log_prefix + "loss.png"), args.name)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Independent reference for reap.cpp's numbers: the trainer's own PyTorch forward pass.

Reads the model's weights back from a GGUF (so it checks the exported file, not
the training checkpoint) and runs tools/moe_model.py on given token ids.

  logits  --tokens FILE --out FILE     compares with logits dumped by llama.cpp:
          FILE holds int32 n, n int32 token ids, then n*n_vocab float32 logits.
          Prints the max abs difference (exit 1 above --tol).
  saliency --tokens FILE --out JSON    per layer and expert: count, gate_sum,
          reap_sum (Σ g·‖f‖₂), ean_sum (Σ ‖f‖₂), ean_sq_sum (Σ ‖f‖₂², MSAN's),
          max_norm, for one sequence; and from the per-token norms directly, per
          expert: man (mean ‖f‖₂) and msan (mean ‖f‖₂²) over its routed tokens;
          with --channels also per channel c of the down projection's input h:
          ch_energy (Σ h_c²) and ch_reap (Σ g·|h_c|·‖W_down[:,c]‖₂), [expert][channel].
  --keep-channels JSON  {"layer": [[channels expert 0 keeps], ...]}: every other
          channel's activation is zeroed before the down projection (width pruning
          computed without cutting anything).
  perplexity --text FILE [-c N]   perplexity of a text's bytes in windows as
          llama-perplexity cuts them (BOS first, the second half scored), to
          compare with its "Final estimate" on the same file and -c.

Run with Debian's interpreter: /usr/bin/python3 (python3-torch, python3-numpy).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.environ.get("REAP_SOURCE_DIR", os.path.join(HERE, "..")), "third_party", "llama.cpp", "gguf-py"))
import gguf  # noqa: E402
from moe_model import BOS, load_from_gguf  # noqa: E402


def read_dump(path, n_vocab=None):
    raw = open(path, "rb").read()
    n = int(np.frombuffer(raw[:4], dtype=np.int32)[0])
    toks = np.frombuffer(raw[4:4 + 4 * n], dtype=np.int32).astype(np.int64)
    logits = None
    rest = raw[4 + 4 * n:]
    if rest:
        logits = np.frombuffer(rest, dtype=np.float32).reshape(n, -1)
    return toks, logits


def perplexity(model, text_path, n_ctx):
    """llama-perplexity's windows: the text's tokens (BOS + one per byte) cut into n_ctx
    chunks, each chunk's first token replaced by BOS, next-token NLL over its second half."""
    toks = [BOS] + list(open(text_path, "rb").read())
    n_chunks = len(toks) // n_ctx
    if n_chunks < 1:
        sys.exit(f"reference_forward: {text_path} has fewer than {n_ctx} tokens")
    nll, count = 0.0, 0
    first = n_ctx // 2
    for c in range(n_chunks):
        w = torch.tensor([BOS] + toks[c * n_ctx + 1:(c + 1) * n_ctx])[None, :]
        logits, _ = model(w)
        logp = torch.log_softmax(logits[0].double(), dim=-1)
        nll -= float(logp[torch.arange(first, n_ctx - 1), w[0, first + 1:]].sum())
        count += n_ctx - 1 - first
    return {"ppl": float(np.exp(nll / count)), "n_chunks": n_chunks, "n_scored": count}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["logits", "saliency", "perplexity"])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--dump", help="token ids (and llama.cpp's logits) as written by the test (logits, saliency)")
    ap.add_argument("--text", help="the text file (perplexity)")
    ap.add_argument("-c", "--ctx", type=int, default=256, help="window length (perplexity; default 256)")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--out", help="JSON output for saliency")
    ap.add_argument("--channels", action="store_true", help="saliency: per-channel statistics too")
    ap.add_argument("--keep-channels", help="JSON file: the channels each expert of a layer keeps")
    args = ap.parse_args()
    torch.set_num_threads(2)

    if (args.mode == "perplexity") != (args.dump is None) or (args.mode == "perplexity" and not args.text):
        ap.error("perplexity takes --text; logits and saliency take --dump")
    model = load_from_gguf(args.model, gguf)
    model.eval()
    if args.mode == "perplexity":
        with torch.no_grad():
            print(json.dumps(perplexity(model, args.text, args.ctx)))
        return
    if args.keep_channels:
        for layer, experts in json.load(open(args.keep_channels)).items():
            moe = model.blocks[int(layer)].moe
            keep = torch.zeros(moe.down.shape[0], moe.down.shape[2])
            for e, chans in enumerate(experts):
                keep[e, chans] = 1.0
            moe.channel_keep = keep
    toks, ref = read_dump(args.dump)
    with torch.no_grad():
        if args.mode == "logits":
            logits, _ = model(torch.from_numpy(toks)[None, :])
            logits = logits[0].numpy()
            if ref is None or ref.shape != logits.shape:
                sys.exit(f"reference_forward: dump has logits of shape {None if ref is None else ref.shape}, expected {logits.shape}")
            diff = float(np.abs(logits - ref).max())
            print(json.dumps({"max_abs_diff": diff, "n_tokens": int(len(toks)), "max_abs_logit": float(np.abs(logits).max())}))
            sys.exit(0 if diff <= args.tol else 1)
        traces = {}
        model(torch.from_numpy(toks)[None, :], traces)
        E = model.cfg.n_expert
        out = {}
        for layer, tr in traces.items():
            t = tr[0]
            e = t["expert"].numpy()
            w = t["weight"].double().numpy()
            nrm = t["norm"].double().numpy()
            mx = np.zeros(E)
            np.maximum.at(mx, e, nrm)
            out[str(layer)] = {
                "count": np.bincount(e, minlength=E).tolist(),
                "gate_sum": np.bincount(e, weights=w, minlength=E).tolist(),
                "reap_sum": np.bincount(e, weights=w * nrm, minlength=E).tolist(),
                "ean_sum": np.bincount(e, weights=nrm, minlength=E).tolist(),
                "ean_sq_sum": np.bincount(e, weights=nrm * nrm, minlength=E).tolist(),
                "max_norm": mx.tolist(),
                # the criteria themselves, as means over each expert's own routed tokens
                "man": [float(nrm[e == x].mean()) if (e == x).any() else 0.0 for x in range(E)],
                "msan": [float((nrm[e == x] ** 2).mean()) if (e == x).any() else 0.0 for x in range(E)],
            }
            if args.channels:
                h = t["down_in"].double().numpy()                              # [routed rows, n_ff]
                col = model.blocks[layer].moe.down.detach().double().norm(dim=1).numpy()  # [E, n_ff]: ‖W[:, c]‖
                ce = np.zeros((E, h.shape[1]))
                cr = np.zeros((E, h.shape[1]))
                np.add.at(ce, e, h * h)
                np.add.at(cr, e, w[:, None] * np.abs(h) * col[e])
                out[str(layer)]["ch_energy"] = ce.tolist()
                out[str(layer)]["ch_reap"] = cr.tolist()
        text = json.dumps(out)
        if args.out:
            open(args.out, "w").write(text)
        else:
            print(text)


if __name__ == "__main__":
    main()

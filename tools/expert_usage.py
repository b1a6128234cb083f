#!/usr/bin/env python3
"""Do the model's experts specialise by domain? Plot and measure it from reap saliency archives.

Input: archives written by `reap calibrate` over the held-out split: one over
all of it (--full), and two over disjoint random halves (--half-a/--half-b,
`reap calibrate --shard 1/2` and `--shard 2/2`). Routing counts come from
llama.cpp's own router (the ffn_moe_topk nodes), not from the trainer.

Output:
  * a PNG: per domain and MoE layer, the share of routed tokens each expert gets;
  * JSON (stdout or --json): per layer Jensen-Shannon divergence (bits) between
    the usage distributions of every pair of domains, and between the two random
    halves of each domain; the means the model card quotes:
      ja/zh vs en/code   mean JSD over the pairs (ja,en) (ja,code) (zh,en) (zh,code)
      halves             mean JSD between the two halves, over domains
"""

import argparse
import itertools
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("REAP_SOURCE_DIR", os.path.join(HERE, "..")), "third_party", "llama.cpp", "gguf-py"))
import gguf  # noqa: E402


def read_counts(path):
    """{domain: counts[n_layer][n_expert]} from a saliency archive."""
    r = gguf.GGUFReader(path)
    field = r.fields["reap.saliency.domains"]
    domains = [bytes(field.parts[i]).decode() for i in field.data]
    out = {}
    for t in r.tensors:
        if t.name.endswith(".count"):
            d = t.name[: -len(".count")]
            n_expert, n_layer = int(t.shape[0]), int(t.shape[1])
            out[d] = np.asarray(t.data, dtype=np.float64).reshape(n_layer, n_expert)
    missing = [d for d in domains if d not in out]
    if missing:
        sys.exit(f"expert_usage: {path}: no count tensor for domains {missing}")
    return {d: out[d] for d in domains}


def jsd(p, q):
    p = p / p.sum()
    q = q / q.sum()
    m = 0.5 * (p + q)

    def kl(a, b):
        nz = a > 0
        return float((a[nz] * np.log2(a[nz] / b[nz])).sum())

    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def moe_layers(counts):
    any_d = next(iter(counts.values()))
    return [l for l in range(any_d.shape[0]) if any_d[l].sum() > 0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", required=True, help="archive over the whole held-out split")
    ap.add_argument("--half-a", required=True)
    ap.add_argument("--half-b", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("--json", help="write the numbers here as well")
    args = ap.parse_args()

    full = read_counts(args.full)
    ha, hb = read_counts(args.half_a), read_counts(args.half_b)
    layers = moe_layers(full)
    domains = list(full)

    pairs = {}
    for a, b in itertools.combinations(domains, 2):
        pairs[f"{a}|{b}"] = [jsd(full[a][l], full[b][l]) for l in layers]
    halves = {d: [jsd(ha[d][l], hb[d][l]) for l in layers] for d in domains if d in ha and d in hb and ha[d].sum() > 0 and hb[d].sum() > 0}

    def pair_mean(names):
        vals = []
        for a, b in names:
            key = f"{a}|{b}" if f"{a}|{b}" in pairs else f"{b}|{a}"
            if key in pairs:
                vals += pairs[key]
        return float(np.mean(vals)) if vals else float("nan")

    cross = pair_mean([("ja", "en"), ("ja", "code"), ("zh", "en"), ("zh", "code")])
    half_mean = float(np.mean([v for vs in halves.values() for v in vs])) if halves else float("nan")
    result = {
        "layers": layers,
        "tokens": {d: float(full[d][layers[0]].sum()) for d in domains},
        "jsd_pairs": pairs,
        "jsd_halves": halves,
        "mean_jsd_jazh_vs_encode": cross,
        "mean_jsd_halves": half_mean,
        "mean_jsd_all_domain_pairs": float(np.mean([v for vs in pairs.values() for v in vs])),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        open(args.json, "w").write(text)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    vmax = max(float((full[d][l] / full[d][l].sum()).max()) for d in domains for l in layers)
    fig, axes = plt.subplots(len(layers), 1, figsize=(9, 1.2 + 1.3 * len(layers)), dpi=110, squeeze=False)
    for ax, l in zip(axes[:, 0], layers):
        share = np.stack([full[d][l] / full[d][l].sum() for d in domains])
        im = ax.imshow(share, aspect="auto", cmap="magma", vmin=0, vmax=vmax)
        ax.set_yticks(range(len(domains)))
        ax.set_yticklabels(domains, fontsize=8)
        ax.set_xticks(range(0, share.shape[1], 4))
        ax.tick_params(labelsize=7)
        ax.set_ylabel(f"layer {l}", fontsize=8)
    axes[-1, 0].set_xlabel("expert")
    fig.suptitle(f"Share of each domain's routed tokens per expert (llama.cpp routing, held-out split)\n"
                 f"mean JSD ja/zh vs en/code = {cross:.3f} bits, two halves of one domain = {half_mean:.3f} bits", fontsize=9)
    fig.colorbar(im, ax=axes[:, 0].tolist(), shrink=0.6, label="share of tokens")
    fig.savefig(args.png)


if __name__ == "__main__":
    main()

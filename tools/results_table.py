#!/usr/bin/env python3
"""Turns `make demo`'s evaluations into the results table (stdout and docs/results.md).

Reads, for each cut, OUT/eval/NAME.json (`reap eval --json`) and
OUT/plans/NAME.json (`reap plan`), and prints per-domain perplexity of the base
model and of every cut, mean KL divergence and top-1 agreement, then answers
the demo's two questions from the numbers:
  * does a cut calibrated on a language keep that language better than a cut
    calibrated elsewhere (reap-en+code-50 vs reap-ja+zh-50)?
  * does REAP beat frequency and random at the same size?
"""

import argparse
import datetime
import json
import os

DOMAINS = ["en", "code", "ja", "zh", "de", "fr"]


def load(args):
    cuts = [c for c in args.cuts.split(",") if c]
    rows = {}
    for c in cuts:
        with open(os.path.join(args.eval_dir, c + ".json")) as f:
            rows[c] = json.load(f)
        with open(os.path.join(args.plans_dir, c + ".json")) as f:
            rows[c]["plan"] = json.load(f)
    return cuts, rows


def dom(r, d, key):
    v = r.get("domains", {}).get(d, {}).get(key)
    return float("nan") if v is None else float(v)


def per_domain_table(title, cuts, rows, domains, key, fmt, base_key=None):
    """One markdown table: a row per cut (and first the base model when base_key
    is given), a column per domain, then all domains together."""
    out = [f"\n{title}\n", "| cut | experts kept | " + " | ".join(domains) + " | all |", "|" + "---|" * (len(domains) + 3)]
    lines = [(c, rows[c], rows[c]["plan"]["n_keep"], key) for c in cuts]
    if base_key:
        first = rows[cuts[0]]
        lines.insert(0, ("base", first, first["plan"]["model"]["n_expert"], base_key))
    for name, r, kept, k in lines:
        out.append(f"| {name} | {kept} | " + " | ".join(fmt(dom(r, d, k)) for d in domains) + f" | {fmt(r[k])} |")
    return out


def table(cuts, rows, domains):
    out = per_domain_table("**Perplexity** (base model first; per held-out domain)", cuts, rows, domains,
                           "ppl_pruned", lambda v: f"{v:.3f}", base_key="ppl_base")
    out += per_domain_table("**Mean KL divergence** from the base model (nats per token; lower is better)", cuts, rows,
                            domains, "kld_mean", lambda v: f"{v:.4f}")
    out += per_domain_table("**Top-1 agreement** with the base model (higher is better)", cuts, rows, domains,
                            "argmax_agree", lambda v: f"{100 * v:.1f}%")
    out.append("\n**All domains together**: KLD median / p99 / max, PPL ratio\n")
    out.append("| cut | KLD median | KLD p99 | KLD max | PPL ratio |")
    out.append("|---|---|---|---|---|")
    for c in cuts:
        r = rows[c]
        out.append(f"| {c} | {r['kld_median']:.4f} | {r['kld_p99']:.3f} | {r.get('kld_max', float('nan')):.3f} | {r['ppl_ratio']:.3f} |")
    return "\n".join(out).lstrip("\n")


def findings(cuts, rows):
    out = []
    if "reap-en+code-50" in rows and "reap-ja+zh-50" in rows:
        a, b = rows["reap-en+code-50"], rows["reap-ja+zh-50"]
        for d in ["en", "code", "ja", "zh", "de", "fr"]:
            ka, kb = dom(a, d, "kld_mean"), dom(b, d, "kld_mean")
            better = "en+code" if ka < kb else "ja+zh"
            out.append(f"- {d}: mean KLD {ka:.4f} with the en+code cut, {kb:.4f} with the ja+zh cut: the {better} cut keeps {d} better.")
    for pct in ["25", "50", "75"]:
        names = [f"reap-{pct}", f"frequency-{pct}", f"random-{pct}"]
        if all(n in rows for n in names):
            ks = {n: rows[n]["kld_mean"] for n in names}
            order = sorted(names, key=lambda n: ks[n])
            out.append(f"- {pct}% removed, all domains: mean KLD " + ", ".join(f"{n} {ks[n]:.4f}" for n in names) +
                       f"; best: {order[0]}.")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval-dir", required=True)
    ap.add_argument("--plans-dir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cuts", required=True, help="comma-separated cut names, in table order")
    ap.add_argument("--out", help="markdown file to write (docs/results.md)")
    args = ap.parse_args()
    cuts, rows = load(args)
    domains = [d for d in DOMAINS if d in rows[cuts[0]].get("domains", {})]
    t = table(cuts, rows, domains)
    f = findings(cuts, rows)
    print(t)
    print("\nFindings (computed from the table):\n" + f)
    if args.out:
        n_tokens = rows[cuts[0]]["n_tokens"]
        md = f"""# reap.cpp demo results

Made by `make demo` on {datetime.date.today().isoformat()} with `{args.model}` (see models/README.md).
Every number below was measured by `reap eval` in that run; the table is rewritten by each run.

How it was made (scripts/demo.sh):
1. `reap calibrate` over the `calib` split of the corpus (tools/build_corpus.py), all domains.
2. `reap plan --ratio R` for REAP restricted to en+code and to ja+zh (50% of the routed experts
   removed), and REAP, frequency and random (seed 1) over all domains at 25/50/75% removed.
3. `reap prune` and `reap verify` for every plan.
4. `reap eval -c 256` of each cut against the unpruned model on the first 8 kB of every
   domain of the `heldout` split ({n_tokens} scored tokens in all; the second half of
   each 256-token window is scored, as llama-perplexity does).

{t}

## What the numbers say

{f}
"""
        extra = os.path.join(os.path.dirname(args.out), "results-notes.md")
        if os.path.exists(extra):
            md += "\n" + open(extra).read()
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(md)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()

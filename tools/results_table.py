#!/usr/bin/env python3
"""Turns `make demo`'s evaluations into the results table (stdout and docs/results.md).

Reads, for each cut, OUT/eval/NAME.json (`reap eval --json`) and
OUT/plans/NAME.json (`reap plan`), and prints per-domain perplexity of the base
model and of every cut, mean KL divergence and top-1 agreement. With --sweep
(`reap sweep -o`), the REAP rows reap-25/50/75 come from the sweep (scored by
masking, no file written), after checking that the sweep planned the same
experts as the pruned files and that masking computes what the files compute:
OUT/eval/mask-vs-reap-NN.json (`reap eval --base-mask PLAN -p FILE`) must show
a mean KLD between the two of at most 1e-5, top-1 agreement of at least 99.9%
and a perplexity ratio within 1e-4 of 1 over all scored tokens (the worst
domain is shown too: a router tie that float rounding breaks the other way
weighs more in a smaller sample); and the
sweep's row must give the file's row within 1e-4 relative (perplexity, KLD) and
0.1% (top-1). Exit status 1 otherwise. Then it answers the demo's two questions
from the numbers:
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


# How closely a masked run must reproduce the pruned file: the two rows against the
# base (reap sweep vs reap eval -p) ...
TOLERANCE = {"ppl_pruned": ("relative", 1e-4), "kld_mean": ("relative", 1e-4), "argmax_agree": ("absolute", 1e-3)}
# ... and the masked base against the file directly (reap eval --base-mask PLAN -p FILE).
DIRECT = {"kld_mean": 1e-5, "argmax_agree": 0.999, "ppl_ratio": 1e-4}


def direct_ok(m):
    return (m["kld_mean"] <= DIRECT["kld_mean"] and m["argmax_agree"] >= DIRECT["argmax_agree"]
            and abs(m["ppl_ratio"] - 1) <= DIRECT["ppl_ratio"])


def apply_sweep(path, rows, eval_dir):
    """Replaces the reap-NN rows with the sweep's points; returns the agreement table
    (markdown lines) and whether everything agreed."""
    with open(path) as f:
        sweep = json.load(f)
    out = ["\n**Sweep vs pruned files** (`reap sweep` scores each cut by masking the base model; "
           "the same cut pruned to a file and scored by `reap eval -p`):\n",
           "| cut | experts kept | same experts | masked vs file: KLD mean | (worst domain) | top-1 | PPL ratio | "
           "rows: max PPL difference (relative) | max KLD difference (relative) | max top-1 difference |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    ok = True
    for pt in sweep["points"]:
        ratio = pt["request"].get("ratio")
        name = f"reap-{round(float(ratio) * 100)}" if ratio is not None else None
        if name not in rows:
            continue
        pruned = rows[name]
        with open(pt["plan"]) as f:
            swept = json.load(f)
        same = [l["keep"] for l in swept["layers"]] == [l["keep"] for l in pruned["plan"]["layers"]]
        worst = {k: 0.0 for k in TOLERANCE}
        for d in [None] + list(pt["domains"]):
            a = pt["overall"] if d is None else pt["domains"][d]
            b = pruned if d is None else pruned["domains"][d]
            for k, (kind, _) in TOLERANCE.items():
                diff = abs(a[k] / b[k] - 1) if kind == "relative" else abs(a[k] - b[k])
                worst[k] = max(worst[k], diff)
        with open(os.path.join(eval_dir, f"mask-vs-{name}.json")) as f:
            direct = json.load(f)
        worst_domain = max((m["kld_mean"], d) for d, m in direct["domains"].items())
        agree = same and direct_ok(direct) and all(worst[k] <= tol for k, (_, tol) in TOLERANCE.items())
        ok = ok and agree
        out.append(f"| {name} | {pt['n_keep']} | {'yes' if same else 'NO'} | {direct['kld_mean']:.1e} | "
                   f"{worst_domain[0]:.1e} ({worst_domain[1]}) | "
                   f"{100 * direct['argmax_agree']:.2f}% | {direct['ppl_ratio']:.6f} | {worst['ppl_pruned']:.1e} | "
                   f"{worst['kld_mean']:.1e} | {worst['argmax_agree']:.1e} |")
        rows[name] = dict(pt["overall"], domains=pt["domains"], plan=pruned["plan"], source="sweep")
    return out, ok


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


def corpus_line(path):
    """The corpus the run used: tools/build_corpus.py builds it from the Debian packages apt
    serves that day, so another day's package versions give another corpus and other numbers."""
    if not path:
        return ""
    with open(path, encoding="utf-8") as f:
        sha = json.load(f)["sha256"]
    return ("\nCorpus: SHA-256 of its splits calib `" + sha["calib"][:16] + "…`, heldout `" + sha["heldout"][:16] +
            "…`, train `" + sha["train"][:16] + "…` (data/corpus/manifest.json lists the package versions: "
            "another day's versions make another corpus, and other numbers).")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval-dir", required=True)
    ap.add_argument("--plans-dir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cuts", required=True, help="comma-separated cut names, in table order")
    ap.add_argument("--out", help="markdown file to write (docs/results.md)")
    ap.add_argument("--sweep", help="reap sweep's JSON: the REAP rows come from it (checked against the pruned files)")
    ap.add_argument("--corpus-manifest", help="the corpus's manifest.json: its splits' SHA-256 go in the header")
    args = ap.parse_args()
    cuts, rows = load(args)
    agreement, agreed = apply_sweep(args.sweep, rows, args.eval_dir) if args.sweep else ([], True)
    domains = [d for d in DOMAINS if d in rows[cuts[0]].get("domains", {})]
    t = table(cuts, rows, domains) + ("\n" + "\n".join(agreement) if agreement else "")
    f = findings(cuts, rows)
    print(t)
    print("\nFindings (computed from the table):\n" + f)
    if not agreed:
        print("\nresults_table: the sweep does not agree with the pruned files (see the table above)")
    if args.out:
        n_tokens = rows[cuts[0]]["n_tokens"]
        md = f"""# reap.cpp demo results

Made by `make demo` on {datetime.date.today().isoformat()} with `{args.model}` (see models/README.md).
Every number below was measured by `reap eval` in that run; the table is rewritten by each run.{corpus_line(args.corpus_manifest)}

How it was made (scripts/demo.sh):
1. `reap calibrate` over the `calib` split of the corpus (tools/build_corpus.py), all domains.
2. `reap plan --ratio R` for REAP restricted to en+code and to ja+zh (50% of the routed experts
   removed), and REAP, frequency and random (seed 1) over all domains at 25/50/75% removed.
3. `reap prune` and `reap verify` for every plan.
4. `reap eval -c 256` of each cut against the unpruned model on the first 8 kB of every
   domain of the `heldout` split ({n_tokens} scored tokens in all; the second half of
   each 256-token window is scored, as llama-perplexity does).
5. `reap sweep --ratios 0.25,0.5,0.75` (REAP, all domains) on the same text: each cut scored
   by masking its removed experts in the base model, no file written. The REAP rows below
   come from it; the last table shows they agree with the pruned files of step 3.

![KLD and top-1 agreement against the number of experts kept, with the file size](sweep.svg)

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
    if not agreed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

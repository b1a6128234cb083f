#!/usr/bin/env python3
"""The count-against-width table of scripts/width_study.sh (issue 27, item 5).

Reads, for each cut NAME of --cuts, its plan (DIR/plans/NAME.json), its file
(DIR/cuts/NAME.gguf) and its evaluation (DIR/eval-all.json, reap eval with one
-p per cut), and writes:
  --md FILE          the markdown section appended to docs/results.md: per cut
                     the experts and channels kept, the expert pool's share
                     (N*K / (E*n_ff): every expert tensor of this f32 model
                     scales with K), the file size, mean KLD and top-1
                     agreement per domain, and the plan's rerank statistic;
  --chart-data FILE  the numbers the chart is drawn from (width_study_chart):
                     one panel per budget, x = K / n_ff, y = KLD per domain.
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cuts", required=True, help="comma-separated cut names, in table order")
    ap.add_argument("--md", required=True)
    ap.add_argument("--chart-data", required=True)
    a = ap.parse_args()

    with open(os.path.join(a.dir, "eval-all.json"), encoding="utf-8") as f:
        ev = json.load(f)
    by_path = ev["pruned"] if "pruned" in ev else None
    rows = []
    for name in a.cuts.split(","):
        with open(os.path.join(a.dir, "plans", name + ".json"), encoding="utf-8") as f:
            plan = json.load(f)
        path = os.path.join(a.dir, "cuts", name + ".gguf")
        rep = by_path[path] if by_path is not None else ev
        n_expert = plan["model"]["n_expert"]
        width = plan.get("width")
        if width is None:   # a count-only plan keeps every channel: n_ff from its twin plans
            n_ff, k = None, None
        else:
            n_ff, k = width["n_ff"], width["keep"]
        rerank = plan.get("provenance", {}).get("width_rerank")
        rows.append(dict(name=name, n_keep=plan["n_keep"], n_expert=n_expert, n_ff=n_ff, k=k,
                         bytes=os.path.getsize(path), rep=rep, rerank=rerank))
    n_ff = next((r["n_ff"] for r in rows if r["n_ff"]), None)
    if n_ff is None:
        sys.exit("width_study.py: no width plan among the cuts: the experts' width is unknown")
    for r in rows:
        if r["k"] is None:
            r["k"], r["n_ff"] = n_ff, n_ff
        r["share"] = r["n_keep"] * r["k"] / (r["n_expert"] * n_ff)
    domains = list(rows[0]["rep"]["domains"])
    base_bytes = os.path.getsize(a.model)

    def kld(r, d):
        return r["rep"]["kld_mean"] if d is None else r["rep"]["domains"][d]["kld_mean"]

    def top1(r, d):
        return r["rep"]["argmax_agree"] if d is None else r["rep"]["domains"][d]["argmax_agree"]

    out = ["## Count against width at equal bytes", "",
           f"`scripts/width_study.sh` (a step of `make demo`): {os.path.basename(a.model)} ({rows[0]['n_expert']} experts "
           f"of {n_ff} channels per MoE layer, f32, {base_bytes / 1e6:.2f} MB) cut to about 50% and 25% of its expert "
           "pool's bytes three ways: fewer experts at full width (count), every expert at fewer channels (width), "
           "and both (mixed). Experts ranked by REAP, channels by each expert's ch_reap (Σ g·|h_c|·‖W_down[:,c]‖), "
           "from one calibration with `--width-saliency` on the calib split; every cut pruned for real, verified "
           "(down requantised to f32: exact), and scored per domain on held-out text against the base "
           "(`reap eval`). Pool share = N·K / (E·n_ff). Rerank: per layer, Spearman between the kept experts' "
           "full-width saliency (Σ of ch_reap over all channels) and their saliency on the kept channels (Σ over "
           "those); min / median over the layers.", ""]
    out.append("**Mean KL divergence** from the base model (nats per token; lower is better)")
    out.append("")
    out.append("| cut | experts | channels | pool share | file | " + " | ".join(domains) + " | all | rerank min / median |")
    out.append("|" + "---|" * (len(domains) + 7))
    for r in rows:
        rr = r["rerank"]
        rerank = f"{rr['min']:.4f} / {rr['median']:.4f}" if rr and rr.get("min") is not None else "-"
        out.append(f"| {r['name']} | {r['n_keep']} | {r['k']} | {100 * r['share']:.1f}% | {r['bytes'] / 1e6:.2f} MB | "
                   + " | ".join(f"{kld(r, d):.4f}" for d in domains) + f" | {kld(r, None):.4f} | {rerank} |")
    out += ["", "**Top-1 agreement** with the base model (higher is better)", ""]
    out.append("| cut | " + " | ".join(domains) + " | all |")
    out.append("|" + "---|" * (len(domains) + 2))
    for r in rows:
        out.append(f"| {r['name']} | " + " | ".join(f"{top1(r, d):.3f}" for d in domains) + f" | {top1(r, None):.3f} |")
    best = {}
    for r in rows:
        b = round(100 * r["share"] / 25) * 25
        if b not in best or kld(r, None) < kld(best[b], None):
            best[b] = r
    out += ["", "Lowest mean KLD at each budget: " + "; ".join(
        f"{b}%: {best[b]['name']} ({kld(best[b], None):.4f})" for b in sorted(best, reverse=True)) + "."]
    with open(a.md, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")

    panels = []
    for b in sorted({round(100 * r["share"] / 25) * 25 for r in rows}, reverse=True):
        pts = sorted((r for r in rows if round(100 * r["share"] / 25) * 25 == b), key=lambda r: r["k"])
        panels.append({"budget_percent": b,
                       "x": [r["k"] / n_ff for r in pts],
                       "cuts": [r["name"] for r in pts],
                       "kld": {d: [kld(r, d) for r in pts] for d in domains},
                       "kld_all": [kld(r, None) for r in pts]})
    with open(a.chart_data, "w", encoding="utf-8") as f:
        json.dump({"domains": domains, "n_ff": n_ff, "panels": panels}, f, indent=1)
        f.write("\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()

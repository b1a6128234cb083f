#!/usr/bin/env python3
"""The criteria study's section of docs/results.md (scripts/criteria_study.sh).

Reads the sweeps the study wrote (reap-sweep JSON, in --dir):
  NAME.json                  reap sweep --methods on model NAME (tiny, wide, recall)
  NAME-aimer-TYPE.json       AIMER from a TYPE copy's weights, cutting the model itself
  recall-needle-METHOD.json  the recall model's needle grid of METHOD's 50% cut
  tiny-calib-1ofF.json       REAP and MAN from 1/F of the calibration, at 50% removed
and prints the Markdown section; --chart writes the calibration-size curve
(SVG, matplotlib, deterministic). Every number and every sentence of the
findings comes from those files.
"""

import argparse
import glob
import json
import os
import re

MODELS = [("tiny", "reap-moe-tiny"), ("wide", "reap-moe-wide"), ("recall", "reap-moe-recall")]


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def by_method(sweep):
    """{method: {removed %: point}} of a sweep (a single-method sweep: its saliency.method)."""
    out = {}
    for pt in sweep["points"]:
        m = pt.get("method", sweep["saliency"]["method"])
        out.setdefault(m, {})[round(100 * pt["removed_fraction"])] = pt
    return out


def method_table(name, label, sweep, extra):
    pts = by_method(sweep)
    pcts = sorted({p for m in pts.values() for p in m})
    rows = [f"### {label}\n",
            "| criterion | " + " | ".join(f"KLD {p}%" for p in pcts) + " | " + " | ".join(f"top-1 {p}%" for p in pcts) + " |",
            "|---|" + "---:|" * (2 * len(pcts))]
    for m, cells in list(pts.items()) + extra:
        kld = " | ".join(f"{cells[p]['overall']['kld_mean']:.4f}" if p in cells else "-" for p in pcts)
        top = " | ".join(f"{100 * cells[p]['overall']['argmax_agree']:.1f}%" if p in cells else "-" for p in pcts)
        rows.append(f"| {m} | {kld} | {top} |")
    return "\n".join(rows) + "\n", pts, pcts


def findings(name, pts, pcts):
    """Which criterion measured best at each size, and where each loses, from the numbers."""
    out = []
    for p in pcts:
        ranked = sorted((cells[p]["overall"]["kld_mean"], m) for m, cells in pts.items() if p in cells)
        best, worst = ranked[0], ranked[-1]
        aimer = next((k for k, m in ranked if m == "aimer"), None)
        rnd = next((k for k, m in ranked if m == "random"), None)
        s = f"at {p}% removed the lowest KLD is {best[1]}'s ({best[0]:.4f}), the highest {worst[1]}'s ({worst[0]:.4f})"
        if aimer is not None:
            place = [m for _, m in ranked].index("aimer") + 1
            s += f"; AIMER places {place} of {len(ranked)}"
            if rnd is not None:
                s += " (" + ("better than" if aimer < rnd else "no better than") + " random)"
        out.append(s)
    return f"* **{name}**: " + "; ".join(out) + "."


def needle_table(d):
    rows, base = [], None
    for path in sorted(glob.glob(os.path.join(d, "recall-needle-*.json"))):
        s = load(path)
        pt = s["points"][0]
        n = pt.get("needle", {})
        exact = {x["name"]: x for x in s.get("needle", {}).get("exact", [])}
        if "base" in exact:
            base = (exact["base"]["n_exact"], exact["base"]["n_cells"])
        rows.append((s["saliency"]["method"], n.get("n_exact"), n.get("n_cells"), pt["overall"]["kld_mean"]))
    if not rows:
        return ""
    out = ["### Needle cells of every criterion's 50% cut (reap-moe-recall)\n",
           "| criterion | exact cells | KLD |", "|---|---:|---:|"]
    if base:
        out.append(f"| base | {base[0]}/{base[1]} | - |")
    for m, ex, cells, kld in sorted(rows, key=lambda r: (-r[1], r[3])):
        out.append(f"| {m} | {ex}/{cells} | {kld:.4f} |")
    return "\n".join(out) + "\n"


def calibration_curve(d, full_tokens, full_sweep):
    pts = []   # (fraction, method, kld)
    for path in glob.glob(os.path.join(d, "tiny-calib-1of*.json")):
        frac = 1.0 / int(re.search(r"1of(\d+)", path).group(1))
        for m, cells in by_method(load(path)).items():
            pts.append((frac, m, cells[50]["overall"]["kld_mean"]))
    full = by_method(full_sweep)
    for m in ("reap", "man"):
        pts.append((1.0, m, full[m][50]["overall"]["kld_mean"]))
    aimer = full["aimer"][50]["overall"]["kld_mean"]
    return sorted(pts), aimer


def draw_curve(pts, aimer, full_tokens, path):
    import matplotlib
    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "reap-criteria"
    fig, ax = plt.subplots(figsize=(7, 4))
    for m in ("reap", "man"):
        xs = [f * full_tokens for f, mm, _ in pts if mm == m]
        ys = [k for _, mm, k in pts if mm == m]
        ax.plot(xs, ys, marker="o", label=m.upper())
    ax.axhline(aimer, color="grey", linestyle="--", label="AIMER (no calibration)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("calibration tokens per domain")
    ax.set_ylabel("KLD at 50% removed (nats/token)")
    ax.set_title("reap-moe-tiny: how much calibration each criterion needs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--calib-tokens", type=int, required=True)
    ap.add_argument("--chart")
    a = ap.parse_args()
    out = ["", "## Beyond REAP: MAN, MSAN, AIMER and the criterion chosen by measurement", "",
           "Each model's sweep plans every size by each criterion from one calibration (AIMER from the",
           "weights alone, `reap score`: no calibration) and scores every plan by mask against one base",
           "pass over the held-out text (`reap sweep --methods`). EAN is the frequency-weighted sum of",
           "output norms, MAN its mean over routed tokens, MSAN the mean of squared norms. Rows",
           "\"aimer from TYPE\" rank by AIMER of a quantised copy's weights and cut the model itself.", ""]
    notes = []
    for name, label in MODELS:
        path = os.path.join(a.dir, name + ".json")
        if not os.path.exists(path):
            continue
        extra = []
        for q in sorted(glob.glob(os.path.join(a.dir, f"{name}-aimer-*.json"))):
            t = re.search(r"-aimer-(.+)\.json$", q).group(1)
            extra.append((f"aimer from {t}", by_method(load(q))["aimer"]))
        text, pts, pcts = method_table(name, label, load(path), extra)
        out.append(text)
        out.append(f"![{label}: KLD and top-1 of every criterion against N](criteria-{name}.svg)\n")
        notes.append(findings(label, pts, pcts))
    out.append(needle_table(a.dir))
    tiny = os.path.join(a.dir, "tiny.json")
    if os.path.exists(tiny):
        pts, aimer = calibration_curve(a.dir, a.calib_tokens, load(tiny))
        out.append("### Calibration size (reap-moe-tiny, 50% removed)\n")
        out.append("| calibration tokens per domain | REAP KLD | MAN KLD |\n|---:|---:|---:|")
        for f in sorted({f for f, _, _ in pts}):
            k = {m: kld for ff, m, kld in pts if ff == f}
            out.append(f"| {int(f * a.calib_tokens)} | {k.get('reap', float('nan')):.4f} | {k.get('man', float('nan')):.4f} |")
        out.append(f"\nAIMER, with no calibration at all: KLD {aimer:.4f}.\n")
        if a.chart:
            draw_curve(pts, aimer, a.calib_tokens, a.chart)
            out.append(f"![Calibration size against KLD]({os.path.relpath(a.chart, 'docs')})\n")
        reap_span = [k for _, m, k in pts if m == "reap"]
        notes.append(f"* **Calibration size**: REAP's KLD at 50% moves between {min(reap_span):.4f} and {max(reap_span):.4f} "
                     f"from 1/8 to all of the calibration; AIMER's single point is {aimer:.4f}.")
    out.append("### What it shows\n")
    out.extend(notes)
    out.append("")
    out.append("These are small trained models on a small held-out text: the table says which criterion measured "
               "best here, not in general; on a real model the same sweep answers it for that model.")
    print("\n".join(out))


if __name__ == "__main__":
    main()

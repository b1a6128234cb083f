#!/usr/bin/env python3
"""calibrate_on_quants.py: does calibrating on a quantised model change the cut?

Public builds measure saliency on whatever quant fits their machine. On the
project's model (models/reap-moe-tiny.gguf, F32) this script calibrates the F32
model and quantised copies of it (llama-quantize; IQ types get an imatrix made
on the F32 model first), plans a cut from each archive at 25/50/75% removed,
and reports for each quant: the keep-list overlap with the F32 archive's plan
(per layer and mean Jaccard, `reap compare`) and the KLD of the cut applied to
the F32 model against the F32 model (`reap eval --mask`, one base pass for all
cuts). The model's 192- and 128-wide rows make llama-quantize fall back from
k- and i-quants (Q4_K_M and IQ2_XXS become q5_0/iq4_nl/q4_0 mixes): the table
names what each file holds.

usage: scripts/calibrate_on_quants.py OUT_DIR [--bin build-pinned/bin] [--bytes 10000]
Writes OUT_DIR/calibrate_on_quants.md (the table) and prints it.
Needs data/corpus (make corpus).
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUANTS = ["F32", "Q8_0", "Q4_K_M", "IQ2_XXS"]
RATIOS = [0.25, 0.5, 0.75]


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + r.stdout[-2000:] + r.stderr[-4000:])
    return r.stdout


def subset(split, out, per_domain_bytes):
    used = {}
    with open(os.path.join(ROOT, "data/corpus", split + ".jsonl")) as f, open(out, "w") as o:
        for line in f:
            d = json.loads(line)
            if used.get(d["domain"], 0) >= per_domain_bytes:
                continue
            used[d["domain"]] = used.get(d["domain"], 0) + len(line)
            o.write(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-pinned/bin"))
    ap.add_argument("--bytes", type=int, default=10000, help="corpus bytes per domain (calib and held-out)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    reap = os.path.join(a.bin, "reap")
    model = os.path.join(ROOT, "models/reap-moe-tiny.gguf")
    calib, held = os.path.join(a.out, "calib.jsonl"), os.path.join(a.out, "held.jsonl")
    subset("calib", calib, a.bytes)
    subset("heldout", held, a.bytes // 2)
    text = os.path.join(a.out, "calib.txt")
    with open(calib) as f, open(text, "w") as o:
        o.write("\n".join(json.loads(l).get("text", "") for l in f))

    models = {"F32": model}
    imatrix = os.path.join(a.out, "f32.imatrix.gguf")
    for q in QUANTS[1:]:
        path = os.path.join(a.out, q + ".gguf")
        cmd = [os.path.join(a.bin, "llama-quantize")]
        if q.startswith("IQ"):
            if not os.path.exists(imatrix):
                run([os.path.join(a.bin, "llama-imatrix"), "-m", model, "-f", text, "-o", imatrix, "-c", "128", "--no-ppl"])
            cmd += ["--imatrix", imatrix]
        run(cmd + [model, path, q, "2"])
        models[q] = path
    types = {}
    plans = {}
    for q, path in models.items():
        info = json.loads(run([reap, "inspect", path, "--json"]))
        types[q] = ", ".join(sorted(k for k in info["types"]))
        sal = os.path.join(a.out, q + ".sal.gguf")
        run([reap, "calibrate", "-m", path, "--corpus", calib, "-o", sal, "-c", "128", "--force"])
        for r in RATIOS:
            plan = os.path.join(a.out, f"{q}-{int(r * 100)}.json")
            run([reap, "plan", sal, "-m", path, "--ratio", str(r), "-o", plan, "--force"])
            plans[(q, r)] = plan
    # every cut applied to the F32 model, one base pass
    cmd = [reap, "eval", "-m", model, "-f", held, "-c", "128", "--json"]
    for p in plans.values():
        cmd += ["--mask", p]
    ev = json.loads(run(cmd))["masked"]
    rows = []
    for q in QUANTS:
        for r in RATIOS:
            c = json.loads(run([reap, "compare", plans[("F32", r)], plans[(q, r)], "--json"]))
            per = [l["jaccard"] for l in c["layers"]]
            k = ev[plans[(q, r)]]
            rows.append(f"| {q} | {int(r * 100)}% | {sum(per) / len(per):.3f} | "
                        f"{' '.join(f'{x:.2f}' for x in per)} | {k['kld_mean']:.4f} | {100 * k['argmax_agree']:.1f}% |")
    md = ["# Calibrating on a quantised model", "",
          "Made by `scripts/calibrate_on_quants.py` (corpus: " + str(a.bytes) + " bytes per domain of the calib split; "
          "KLD over held-out samples, each cut applied to the F32 model by masking).", "",
          "| calibrated on | tensor types |", "|---|---|"]
    md += [f"| {q} | {types[q]} |" for q in QUANTS]
    md += ["", "| calibrated on | removed | mean Jaccard vs F32 plan | per layer | KLD vs F32 (mean) | top-1 |",
           "|---|---|---|---|---|---|"] + rows
    out = "\n".join(md) + "\n"
    with open(os.path.join(a.out, "calibrate_on_quants.md"), "w") as f:
        f.write(out)
    print(out)


if __name__ == "__main__":
    main()

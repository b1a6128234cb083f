#!/usr/bin/env python3
"""imatrix_slice_study.py: is the imatrix sliced by `reap prune --imatrix` as good as a recomputed one?

The sliced importance matrix holds the statistics the source model measured
before the cut; one recomputed with llama-imatrix on the pruned model measures
what the pruned model itself sees. On the project's model (F32) this script
computes an imatrix over calibration text, plans a REAP-by-frequency cut from
it (`reap imatrix`, `reap plan --ratio`), prunes with `--imatrix` (the sliced
one), recomputes an imatrix on the pruned model over the same text, and then,
for each quantisation type, quantises the pruned model three times (sliced,
recomputed, none). The score is each quantisation's mean KLD against the
unquantised pruned model on held-out text (one `reap eval` pass for all), so
lower is better; the last column is sliced / recomputed.

The model's 192- and 128-wide rows leave only the 32-wide block types (k-quants
and most i-quants fall back), so the types are the legacy ones and IQ4_NL.

usage: scripts/imatrix_slice_study.py OUT_DIR [--bin build-pinned/bin] [--bytes 8000] [--ratio 0.5]
Writes OUT_DIR/imatrix_slice.md (the table) and prints it.
Needs data/corpus (make corpus), llama-imatrix and llama-quantize.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calibrate_on_quants import ROOT, run, subset  # noqa: E402

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"]


def plain_text(jsonl, out):
    with open(jsonl, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        o.write("\n".join(json.loads(line).get("text", "") for line in f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-pinned/bin"))
    ap.add_argument("--bytes", type=int, default=8000, help="calibration bytes per domain (held-out: half)")
    ap.add_argument("--ratio", type=float, default=0.5, help="share of the routed experts removed")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    reap, tool = os.path.join(a.bin, "reap"), lambda t: os.path.join(a.bin, t)
    model = os.path.join(ROOT, "models/reap-moe-tiny.gguf")
    calib, held, text = (os.path.join(a.out, f) for f in ("calib.jsonl", "held.jsonl", "calib.txt"))
    subset("calib", calib, a.bytes)
    subset("heldout", held, a.bytes // 2)
    plain_text(calib, text)

    def imatrix(m, out):
        run([tool("llama-imatrix"), "-m", m, "-f", text, "-o", out, "-c", "128", "--no-ppl", "-t", "2"])

    src_im, sal, plan, cut = (os.path.join(a.out, f) for f in ("src.imatrix.gguf", "sal.gguf", "plan.json", "cut.gguf"))
    imatrix(model, src_im)
    run([reap, "imatrix", "-m", model, src_im, "-o", sal, "--force"])
    run([reap, "plan", sal, "-m", model, "--ratio", str(a.ratio), "-o", plan, "--force"])
    run([reap, "prune", "-m", model, "--plan", plan, "-o", cut, "--imatrix", src_im, "--force"])
    sliced, recomputed = os.path.join(a.out, "cut.imatrix.gguf"), os.path.join(a.out, "re.imatrix.gguf")
    imatrix(cut, recomputed)

    quants = {}
    for t in TYPES:
        for name, im in (("sliced", sliced), ("recomputed", recomputed), ("none", None)):
            q = os.path.join(a.out, f"{t}-{name}.gguf")
            run([tool("llama-quantize")] + (["--imatrix", im] if im else []) + [cut, q, t, "2"])
            quants[(t, name)] = q
    cmd = [reap, "eval", "-m", cut, "-f", held, "-c", "128", "--json", "--quiet"]
    for q in quants.values():
        cmd += ["-p", q]
    ev = json.loads(run(cmd))["pruned"]
    tokens = next(iter(ev.values())).get("n_tokens", "?")

    rows, ratios = [], []
    for t in TYPES:
        k = {n: ev[quants[(t, n)]]["kld_mean"] for n in ("sliced", "recomputed", "none")}
        ratios.append(k["sliced"] / k["recomputed"])
        rows.append(f"| {t} | {k['sliced']:.5f} | {k['recomputed']:.5f} | {k['none']:.5f} | {ratios[-1]:.3f} |")
    md = ["# A sliced imatrix against a recomputed one", "",
          f"Made by `scripts/imatrix_slice_study.py OUT_DIR --bytes {a.bytes} --ratio {a.ratio}` on "
          f"models/reap-moe-tiny.gguf: {int(a.ratio * 100)}% of the routed experts removed; imatrices over "
          f"{a.bytes} bytes per domain of the calib split; mean KLD of each quantisation of the pruned model "
          f"against the unquantised pruned model over {tokens} held-out tokens (lower is better).", "",
          "| type | sliced imatrix | recomputed on the pruned model | no imatrix | sliced / recomputed |",
          "|---|---|---|---|---|"] + rows + [
          "", f"Median sliced / recomputed over the {len(TYPES)} types: {statistics.median(ratios):.3f}."]
    out = "\n".join(md) + "\n"
    with open(os.path.join(a.out, "imatrix_slice.md"), "w", encoding="utf-8") as f:
        f.write(out)
    print(out)


if __name__ == "__main__":
    main()

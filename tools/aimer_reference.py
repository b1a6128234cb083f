#!/usr/bin/env python3
"""Independent reference for `reap score`: AIMER of every routed expert, from the weights.

For expert e of MoE layer L, the e-th slab (outermost axis, ne[2]) of
blk.L.ffn_gate_exps.weight, blk.L.ffn_up_exps.weight (or the fused
blk.L.ffn_gate_up_exps.weight) and blk.L.ffn_down_exps.weight is dequantised by
gguf-py (not ggml, which reap uses), and all their elements w together give

    aimer = mean(|w|) / sqrt(mean(w^2))      in float64 (1 where every w is 0: such an expert
                                             adds nothing and goes first, as reap score decides)

Shared experts (*_shexp) are not scored. Tests compare reap's scores with this.

usage: aimer_reference.py MODEL.gguf [--out JSON]
  MODEL may be a split's shard (PREFIX-00001-of-0000N.gguf): every shard of the set is read.
Prints (or writes to JSON) {"arch", "n_expert", "layers": {"L": [score of expert 0, ...]},
"keep_order": {"L": [expert ids by score ascending, ties to the lower id]}}.
Exit status 2: no routed expert tensors, or a file that is not what it should be.

Run with Debian's interpreter: /usr/bin/python3 (python3-numpy).
"""

import argparse
import json
import math
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("REAP_SOURCE_DIR", os.path.join(HERE, "..")), "third_party", "llama.cpp", "gguf-py"))
import gguf  # noqa: E402

EXPERT_TENSOR = re.compile(r"^blk\.(\d+)\.ffn_(gate|up|down|gate_up)_exps\.weight$")
SHARD = re.compile(r"^(.*)-(\d{5})-of-(\d{5})\.gguf$")


def fail(msg):
    print(f"aimer_reference: {msg}", file=sys.stderr)
    sys.exit(2)


def shard_paths(path):
    """The model's files: every shard of its split set, or the one file."""
    m = SHARD.match(path)
    if not m:
        return [path]
    prefix, n = m.group(1), int(m.group(3))
    paths = [f"{prefix}-{k:05d}-of-{n:05d}.gguf" for k in range(1, n + 1)]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        fail(f"shard(s) of {path} missing: {', '.join(missing)}")
    return paths


def kv(reader, key):
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def open_gguf(path):
    try:
        return gguf.GGUFReader(path)
    except (ValueError, OSError) as err:
        fail(f"{path}: not a GGUF file this gguf-py reads ({err})")


def scores(path):
    readers = [open_gguf(p) for p in shard_paths(path)]
    arch = kv(readers[0], "general.architecture")
    if arch is None:
        fail(f"{path}: no general.architecture")
    n_expert = kv(readers[0], f"{arch}.expert_count")
    experts = [(int(m.group(1)), t) for r in readers for t in r.tensors if (m := EXPERT_TENSOR.match(t.name))]
    if not experts:
        fail(f"{path}: no routed expert tensors (blk.N.ffn_{{gate,up,down,gate_up}}_exps.weight)")
    if not n_expert:
        fail(f"{path}: has expert tensors but no {arch}.expert_count")
    n_expert = int(n_expert)

    # per layer and expert: element count, sum |w|, sum w^2
    sums = {}
    for layer, t in experts:
        if len(t.shape) != 3 or int(t.shape[2]) != n_expert:
            fail(f"{t.name}: shape {list(map(int, t.shape))} is not [*, *, {n_expert}]")
        raw = np.asarray(t.data).reshape(-1).view(np.uint8)
        if raw.size != t.n_bytes or t.n_bytes % n_expert:
            fail(f"{t.name}: {raw.size} bytes read, {t.n_bytes} expected, not a multiple of {n_expert} experts")
        slab = t.n_bytes // n_expert
        acc = sums.setdefault(layer, np.zeros((n_expert, 3)))
        for e in range(n_expert):
            try:
                w = gguf.quants.dequantize(raw[e * slab:(e + 1) * slab], t.tensor_type).astype(np.float64).ravel()
            except NotImplementedError:
                fail(f"{t.name}: gguf-py cannot dequantise {t.tensor_type.name}")
            if w.size * n_expert != t.n_elements:
                fail(f"{t.name}: expert {e} dequantised to {w.size} values, {t.n_elements // n_expert} expected")
            acc[e] += (w.size, np.abs(w).sum(), np.square(w).sum())

    layers, keep_order = {}, {}
    for layer in sorted(sums):
        s = []
        for n, abs_sum, sq_sum in sums[layer]:
            rms = math.sqrt(sq_sum / n)
            s.append(abs_sum / n / rms if rms > 0 else 1.0)
        layers[str(layer)] = s
        keep_order[str(layer)] = sorted(range(n_expert), key=lambda e: (s[e], e))
    return {"arch": arch, "n_expert": n_expert, "layers": layers, "keep_order": keep_order}


def main():
    ap = argparse.ArgumentParser(description="AIMER of every routed expert of a GGUF model (reference for reap score)")
    ap.add_argument("model", help="MODEL.gguf, or the first shard of a split")
    ap.add_argument("--out", help="write the JSON here instead of stdout")
    args = ap.parse_args()
    if not os.path.isfile(args.model):
        fail(f"no file {args.model}")
    doc = scores(args.model)
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()

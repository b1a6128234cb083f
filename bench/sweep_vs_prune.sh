#!/usr/bin/env bash
# bench/sweep_vs_prune.sh: what virtual pruning saves when choosing N. In one
# invocation, on the same saliency archive, model and text, alternating A B A B
# so that a drifting machine moves both:
#   A  reap sweep --keep N1,N2,N3,N4       (base pass + 4 masked passes, no model written)
#   B  for each N: reap plan, reap prune, then one reap eval -p x4
#                                          (4 pruned files written, base pass + 4 passes)
# Prints the median wall time of each, the ratio A/B, and the bytes each wrote
# (sizes of the files it left: the sweep's JSON and chart, or the plans and
# pruned models), and checks that both give the same numbers.
#
# usage: bench/sweep_vs_prune.sh [-m MODEL.gguf] [--keep N,N,N,N] [-n RUNS] [--reap PATH]
#   -m MODEL     default models/reap-moe-tiny.gguf
#   --keep LIST  default 28,24,16,8
#   -n RUNS      timed runs of each (default 3)
#   --reap PATH  the reap binary (default build/bin/reap)
# Needs data/corpus (make corpus). Work files go to out/bench-sweep.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$here/models/reap-moe-tiny.gguf"
keep="28,24,16,8"
runs=3
reap="$here/build/bin/reap"
while [ $# -gt 0 ]; do
    case "$1" in
        -m) model="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        -n) runs="$2"; shift 2 ;;
        --reap) reap="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "sweep_vs_prune.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$reap" ] || { echo "sweep_vs_prune.sh: no reap binary at $reap (build it, or pass --reap)" >&2; exit 1; }
[ -f "$here/data/corpus/calib.jsonl" ] || { echo "sweep_vs_prune.sh: no corpus (make corpus)" >&2; exit 1; }

out="$here/out/bench-sweep"
mkdir -p "$out"
PY=${PYTHON:-/usr/bin/python3}
# calibration and evaluation text: slices of the calib and heldout splits
"$PY" - "$here/data/corpus" "$out" <<'PYEOF'
import json, sys
src, out = sys.argv[1], sys.argv[2]
for split, cap in (("calib", 4000), ("heldout", 3000)):
    used = {}
    with open(f"{src}/{split}.jsonl", encoding="utf-8") as f, open(f"{out}/{split}.jsonl", "w", encoding="utf-8") as o:
        for line in f:
            d = json.loads(line)["domain"]
            if used.get(d, 0) < cap:
                used[d] = used.get(d, 0) + len(line)
                o.write(line)
PYEOF
"$reap" calibrate -m "$model" --corpus "$out/calib.jsonl" -o "$out/saliency.gguf" -c 256 --force --no-progress > /dev/null

run_sweep() {
    rm -rf "$out/a" && mkdir -p "$out/a"
    "$reap" sweep "$out/saliency.gguf" -m "$model" -f "$out/heldout.jsonl" --keep "$keep" -c 256 -q \
        -o "$out/a/sweep.json" > /dev/null
}
run_prune_eval() {
    rm -rf "$out/b" && mkdir -p "$out/b"
    local args=()
    for n in ${keep//,/ }; do
        "$reap" plan "$out/saliency.gguf" -m "$model" --keep "$n" -o "$out/b/keep-$n.json" > /dev/null
        "$reap" prune -m "$model" --plan "$out/b/keep-$n.json" -o "$out/b/keep-$n.gguf" > /dev/null
        args+=(-p "$out/b/keep-$n.gguf")
    done
    "$reap" eval -m "$model" "${args[@]}" -f "$out/heldout.jsonl" -c 256 -q --json > "$out/b/eval.json"
}
now() { date +%s.%N; }

ta=(); tb=()
for ((r = 0; r < runs; ++r)); do
    t0=$(now); run_sweep; t1=$(now); run_prune_eval; t2=$(now)
    ta+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')"); tb+=("$(awk -v a="$t1" -v b="$t2" 'BEGIN {print b - a}')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ma=$(median "${ta[@]}"); mb=$(median "${tb[@]}")
bytes_a=$(find "$out/a" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')
bytes_b=$(find "$out/b" -type f ! -name eval.json -printf '%s\n' | awk '{s+=$1} END {print s+0}')
echo "model $(basename "$model"), keep $keep, $runs runs each, alternating"
printf '  %-36s median %7.2f s   wrote %12d bytes\n' "A: reap sweep (masking)" "$ma" "$bytes_a"
printf '  %-36s median %7.2f s   wrote %12d bytes\n' "B: plan + prune + eval -p, x4" "$mb" "$bytes_b"
awk -v ma="$ma" -v mb="$mb" -v ba="$bytes_a" -v bb="$bytes_b" 'BEGIN {printf "  ratio A/B: time %.3f, bytes %.5f\n", ma / mb, ba / bb}'
# same numbers: each sweep point against the eval of the file pruned from the same N
"$PY" - "$out/a/sweep.json" "$out/b/eval.json" "$out/b" <<'PYEOF'
import json, sys
sw, ev, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["pruned"], sys.argv[3]
worst = 0.0
for p in sw["points"]:
    e = ev[f"{d}/keep-{p['n_keep']}.gguf"]
    worst = max(worst, abs(p["overall"]["kld_mean"] - e["kld_mean"]))
    print(f"  N={p['n_keep']:>3}: KLD sweep {p['overall']['kld_mean']:.6f}, pruned file {e['kld_mean']:.6f}; "
          f"PPL {p['overall']['ppl_pruned']:.4f} vs {e['ppl_pruned']:.4f}")
print(f"  largest KLD difference: {worst:.2e}")
PYEOF

#!/usr/bin/env bash
# bench/prune_vs_cp.sh: how long `reap prune` takes against `cp` of the same
# number of bytes on the same disk, in one run, alternating A B A B so that a
# drifting machine moves both. Prints the median wall time of each and the
# ratio prune / cp (1.0 = as fast as copying the output's bytes), plus the
# ratio against cp followed by an fsync of the copy (reap prune fsyncs its
# output before renaming it into place; cp does not).
#
# usage: bench/prune_vs_cp.sh [-m MODEL.gguf] [-n RUNS] [-d WORKDIR] [--reap PATH]
#   -m MODEL     model to prune (default: a synthetic qwen3moe of about 1 GB,
#                made once with tools/make_zoo.py's builders: 8 layers,
#                n_embd 512, 64 experts of ffn 512, F16)
#   -n RUNS      timed runs of each command (default 7)
#   -d WORKDIR   where the model, plan and outputs go (default ${TMPDIR:-/tmp}/reap-bench);
#                the outputs land on the same file system as the copies
#   --reap PATH  the reap binary (default: build/bin/reap under the repository)
# The plan keeps half of the experts of every layer, in a shuffled order.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model=""
runs=7
work="${TMPDIR:-/tmp}/reap-bench"
reap="$here/build/bin/reap"
python="${REAP_PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3

while [ $# -gt 0 ]; do
    case "$1" in
        -m) model="$2"; shift 2 ;;
        -n) runs="$2"; shift 2 ;;
        -d) work="$2"; shift 2 ;;
        --reap) reap="$2"; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "prune_vs_cp.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$reap" ] || { echo "prune_vs_cp.sh: no reap binary at $reap (build it, or pass --reap)" >&2; exit 1; }
mkdir -p "$work"

if [ -z "$model" ]; then
    model="$work/bench-qwen3moe.gguf"
    if [ ! -f "$model" ]; then
        echo "making $model ..."
        "$python" - "$here/tools" "$model" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import make_zoo
tmp = Path(sys.argv[2] + ".tmp")
m = make_zoo.Model("bench-qwen3moe", "qwen3moe", tmp)
make_zoo.build_qwen3moe(m, n_embd=512, n_head=8, n_head_kv=4, head_dim=64, n_layer=8,
                        n_expert=64, n_used=8, n_ff_exp=512)  # writes the file (F16 slabs)
tmp.rename(sys.argv[2])
PY
    fi
fi

plan="$work/half.plan.json"
"$python" - "$model" "$plan" "$reap" <<'PY'
import json, random, subprocess, sys
model, plan, reap = sys.argv[1:4]
info = json.loads(subprocess.run([reap, "inspect", model, "--json"], check=True, capture_output=True, text=True).stdout)
n, used = info["n_expert"], info["n_expert_used"]
groups = max(info.get("n_expert_groups", 0), 1)
keep = max(n // 2, used)
keep = (keep + groups - 1) // groups * groups
rng = random.Random(1)
layers = []
for layer in info["moe_layers"]:
    ids = []
    per_src, per_out = n // groups, keep // groups
    for g in range(groups):
        grp = list(range(g * per_src, (g + 1) * per_src))
        rng.shuffle(grp)
        ids += grp[:per_out]
    layers.append({"layer": layer, "keep": ids})
doc = {"format": "reap-plan", "version": 1,
       "model": {"arch": info["arch"], "n_layer": info["n_layer"], "n_expert": n, "n_expert_used": used},
       "n_keep": keep, "layers": layers, "provenance": {"method": "bench: random half"}}
json.dump(doc, open(plan, "w"))
PY

out="$work/pruned.gguf"
copy_src="$work/copy-source.bin"
copy_dst="$work/copy-dest.bin"
rm -f "$out" "$work/SHA256SUMS"
"$reap" prune -m "$model" --plan "$plan" -o "$out" --no-sums >/dev/null
bytes=$(stat -c %s "$out")
# a file of exactly the output's size, to copy
head -c "$bytes" "$model" > "$copy_src"
sync

now() { date +%s.%N; }
declare -a t_prune t_cp t_cps
for ((i = 0; i < runs + 1; ++i)); do
    rm -f "$out" "$copy_dst"; sync
    a=$(now); "$reap" prune -m "$model" --plan "$plan" -o "$out" --no-sums >/dev/null; b=$(now)
    rm -f "$copy_dst"; sync
    c=$(now); cp "$copy_src" "$copy_dst"; d=$(now)
    rm -f "$copy_dst"; sync
    e=$(now); cp "$copy_src" "$copy_dst"; sync "$copy_dst"; f=$(now)
    if [ "$i" -gt 0 ]; then   # the first round warms the page cache and is not counted
        t_prune+=("$(echo "$b - $a" | bc -l)")
        t_cp+=("$(echo "$d - $c" | bc -l)")
        t_cps+=("$(echo "$f - $e" | bc -l)")
    fi
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
mp=$(median "${t_prune[@]}"); mc=$(median "${t_cp[@]}"); ms=$(median "${t_cps[@]}")
printf 'model        %s (%s bytes)\n' "$model" "$(stat -c %s "$model")"
printf 'output       %s bytes (keep %s)\n' "$bytes" "$(grep -o '"n_keep": [0-9]*' "$plan" | grep -o '[0-9]*$')"
printf 'runs         %d (median wall seconds)\n' "$runs"
printf 'reap prune   %.3f s   (%s)\n' "$mp" "${t_prune[*]}"
printf 'cp           %.3f s   (%s)\n' "$mc" "${t_cp[*]}"
printf 'cp + fsync   %.3f s   (%s)\n' "$ms" "${t_cps[*]}"
printf 'ratio prune/cp          %.2f\n' "$(echo "$mp / $mc" | bc -l)"
printf 'ratio prune/(cp+fsync)  %.2f\n' "$(echo "$mp / $ms" | bc -l)"
rm -f "$copy_dst"

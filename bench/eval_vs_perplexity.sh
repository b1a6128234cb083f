#!/usr/bin/env bash
# bench/eval_vs_perplexity.sh: `reap eval -m BASE -p CUT` against what it
# replaces, llama-perplexity's two passes (--kl-divergence-base on the base,
# then --kl-divergence on the cut), on the same text, -c and threads, in one
# run, alternating A B A B. Prints the median wall time of each, the ratio
# eval / perplexity (goal: <= 1.0) and both tools' mean KLD (they must agree).
#
# usage: bench/eval_vs_perplexity.sh [-m MODEL.gguf] [-n RUNS] [-c CTX] [-d WORKDIR] [--reap PATH]
#   -m MODEL     the base (default: the project's trained model, models/reap-moe-tiny.gguf)
#   -n RUNS      timed runs of each (default 3)
#   -c CTX       context (default 512)
#   --chunks N   score the first N chunks of the text (default 32: 8,192 scored tokens at -c 512)
#   -d WORKDIR   scratch folder (default ${TMPDIR:-/tmp}/reap-bench-eval)
# The cut keeps a random half of the experts of every layer (fixed seed); the
# text is the held-out split of the project's corpus (data/corpus/heldout.jsonl,
# `make corpus`), its samples joined as plain text.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$here/models/reap-moe-tiny.gguf"
runs=3
ctx=512
chunks=32
work="${TMPDIR:-/tmp}/reap-bench-eval"
reap="$here/build/bin/reap"
python="${REAP_PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3
while [ $# -gt 0 ]; do
    case "$1" in
        -m) model="$2"; shift 2 ;;
        -n) runs="$2"; shift 2 ;;
        -c) ctx="$2"; shift 2 ;;
        --chunks) chunks="$2"; shift 2 ;;
        -d) work="$2"; shift 2 ;;
        --reap) reap="$2"; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "eval_vs_perplexity.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
ppl="$(dirname "$reap")/llama-perplexity"
[ -x "$reap" ] && [ -x "$ppl" ] || { echo "eval_vs_perplexity.sh: needs $reap and $ppl (make build)" >&2; exit 1; }
[ -f "$here/data/corpus/heldout.jsonl" ] || { echo "eval_vs_perplexity.sh: no data/corpus (make corpus)" >&2; exit 1; }
mkdir -p "$work"

text="$work/heldout.txt"
"$python" -c '
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        out.write(json.loads(line)["text"] + "\n")
' "$here/data/corpus/heldout.jsonl" "$text"

plan="$work/half.plan.json"
"$python" - "$model" "$plan" "$reap" <<'PY'
import json, random, subprocess, sys
model, plan, reap = sys.argv[1:4]
info = json.loads(subprocess.run([reap, "inspect", model, "--json"], check=True, capture_output=True, text=True).stdout)
n, used = info["n_expert"], info["n_expert_used"]
rng = random.Random(1)
layers = [{"layer": l, "keep": rng.sample(range(n), max(n // 2, used))} for l in info["moe_layers"]]
json.dump({"format": "reap-plan", "version": 1,
           "model": {"arch": info["arch"], "n_layer": info["n_layer"], "n_expert": n, "n_expert_used": used},
           "n_keep": max(n // 2, used), "layers": layers}, open(plan, "w"))
PY
cut="$work/half.gguf"
"$reap" prune -m "$model" --plan "$plan" -o "$cut" --force --no-sums > /dev/null

now() { date +%s.%N; }
declare -a ta tb
for ((i = 0; i < runs + 1; ++i)); do
    a=$(now)
    "$reap" eval -m "$model" -p "$cut" -f "$text" -c "$ctx" --ctx-past-trained --chunks "$chunks" -t 2 --json -q > "$work/eval.json"
    b=$(now)
    "$ppl" -m "$model" -f "$text" -c "$ctx" --chunks "$chunks" -t 2 --kl-divergence-base "$work/base.kld" > "$work/ppl-base.log" 2>&1
    "$ppl" -m "$cut" -f "$text" -c "$ctx" --chunks "$chunks" -t 2 --kl-divergence-base "$work/base.kld" --kl-divergence > "$work/ppl-kld.log" 2>&1
    c=$(now)
    if [ "$i" -gt 0 ]; then   # the first round warms the page cache
        ta+=("$(echo "$b - $a" | bc -l)")
        tb+=("$(echo "$c - $b" | bc -l)")
    fi
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
ma=$(median "${ta[@]}"); mb=$(median "${tb[@]}")
kld_reap=$("$python" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("kld_mean", j.get("models",[{}])[0].get("kld_mean")))' "$work/eval.json")
kld_ppl=$(grep -m1 -E '^Mean +KLD' "$work/ppl-kld.log" | awk '{print $3}')
printf 'model              %s, cut: half the experts (%s)\n' "$model" "$cut"
printf 'text               %s (%s bytes), -c %s, first %s chunks, -t 2\n' "$text" "$(stat -c %s "$text")" "$ctx" "$chunks"
printf 'runs               %d (median wall seconds)\n' "$runs"
printf 'reap eval          %.2f s   (%s)\n' "$ma" "${ta[*]}"
printf 'llama-perplexity   %.2f s   (%s; base pass + KLD pass)\n' "$mb" "${tb[*]}"
printf 'ratio eval/ppl     %.2f\n' "$(echo "$ma / $mb" | bc -l)"
printf 'mean KLD           reap %s, llama-perplexity %s\n' "$kld_reap" "$kld_ppl"

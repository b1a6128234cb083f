#!/usr/bin/env bash
# bench/tasks_vs_perplexity.sh: task accuracy in reap against what it replaces,
# stock llama-perplexity, on the same task file, -c and threads, in one run,
# alternating A B A B (the first round warms the page cache and is not timed):
#   1. a pruned file: `reap eval -m BASE -p CUT --multiple-choice FILE` (the
#      base and the cut, paired) against llama-perplexity --multiple-choice on
#      BASE and on CUT (goal: ratio <= 1.05);
#   2. k sizes by mask: `reap sweep --keep A,B,C --multiple-choice FILE` against
#      k + 1 llama-perplexity passes (the base and each size's pruned file; the
#      sweep's KLD part scores one window of -c tokens; goal: ratio <= 1.2).
# Prints the median wall time of each, the ratios, and both tools' accuracies
# (they must agree).
#
# usage: bench/tasks_vs_perplexity.sh [-m MODEL.gguf] [-n RUNS] [-c CTX] [-d WORKDIR] [--reap PATH]
#   -m MODEL     the base (default: models/reap-moe-tiny.gguf)
#   -n RUNS      timed runs of each (default 3)
#   -c CTX       context per sequence (default 128)
#   -d WORKDIR   scratch folder (default ${TMPDIR:-/tmp}/reap-bench-tasks)
# The task file is tools/make_choice_tasks.py's multiple-choice set (120 tasks)
# from the held-out split (`make corpus`); the cuts are REAP plans of an archive
# calibrated here on 3,000 bytes of the calibration split.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$here/models/reap-moe-tiny.gguf"
runs=3
ctx=128
work="${TMPDIR:-/tmp}/reap-bench-tasks"
reap="$here/build/bin/reap"
python="${REAP_PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3
while [ $# -gt 0 ]; do
    case "$1" in
        -m) model="$2"; shift 2 ;;
        -n) runs="$2"; shift 2 ;;
        -c) ctx="$2"; shift 2 ;;
        -d) work="$2"; shift 2 ;;
        --reap) reap="$2"; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "tasks_vs_perplexity.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
ppl="$(dirname "$reap")/llama-perplexity"
[ -x "$reap" ] && [ -x "$ppl" ] || { echo "tasks_vs_perplexity.sh: needs $reap and $ppl (make build)" >&2; exit 1; }
[ -f "$here/data/corpus/heldout.jsonl" ] || { echo "tasks_vs_perplexity.sh: no data/corpus (make corpus)" >&2; exit 1; }
mkdir -p "$work"

"$python" "$here/tools/make_choice_tasks.py" --heldout "$here/data/corpus/heldout.jsonl" --out "$work" --tasks 120 > /dev/null
head -c 3000 "$here/data/corpus/calib.jsonl" | head -n -1 > "$work/calib.jsonl"
"$python" -c '
import json, sys
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    out.write(json.loads(line)["text"] + "\n")
' "$here/data/corpus/heldout.jsonl" "$work/heldout.txt"
"$reap" calibrate -m "$model" --corpus "$work/calib.jsonl" -o "$work/sal.gguf" -c 256 -np 1 -t 2 --force --no-progress > /dev/null
sizes=(24 16 8)
for n in "${sizes[@]}"; do
    "$reap" plan "$work/sal.gguf" -m "$model" --keep "$n" --force -o "$work/keep-$n.json" > /dev/null
    "$reap" prune -m "$model" --plan "$work/keep-$n.json" -o "$work/keep-$n.gguf" --force --no-sums > /dev/null
done
cut="$work/keep-16.gguf"
tasks="$work/choice.bin"

now() { date +%s.%N; }
declare -a ta tb tc td
for ((i = 0; i < runs + 1; ++i)); do
    a=$(now)
    "$reap" eval -m "$model" -p "$cut" --multiple-choice "$tasks" -c "$ctx" -t 2 -q --json > "$work/eval.json"
    b=$(now)
    "$ppl" -m "$model" --multiple-choice -f "$tasks" -c "$ctx" -t 2 > "$work/ppl-base.log" 2>&1
    "$ppl" -m "$cut" --multiple-choice -f "$tasks" -c "$ctx" -t 2 > "$work/ppl-cut.log" 2>&1
    c=$(now)
    "$reap" sweep "$work/sal.gguf" -m "$model" -f "$work/heldout.txt" --chunks 1 --keep "$(IFS=,; echo "${sizes[*]}")" \
        --multiple-choice "$tasks" -c "$ctx" -t 2 -q --force -o "$work/sweep.json" > /dev/null
    d=$(now)
    "$ppl" -m "$model" --multiple-choice -f "$tasks" -c "$ctx" -t 2 > /dev/null 2>&1
    for n in "${sizes[@]}"; do "$ppl" -m "$work/keep-$n.gguf" --multiple-choice -f "$tasks" -c "$ctx" -t 2 > /dev/null 2>&1; done
    e=$(now)
    if [ "$i" -gt 0 ]; then
        ta+=("$(echo "$b - $a" | bc -l)"); tb+=("$(echo "$c - $b" | bc -l)")
        tc+=("$(echo "$d - $c" | bc -l)"); td+=("$(echo "$e - $d" | bc -l)")
    fi
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
ma=$(median "${ta[@]}"); mb=$(median "${tb[@]}"); mc=$(median "${tc[@]}"); md=$(median "${td[@]}")
acc_reap=$("$python" -c 'import json,sys; print("%.4f" % (100 * json.load(open(sys.argv[1]))["choice"]["models"][1]["accuracy"]))' "$work/eval.json")
acc_ppl=$(grep -a -m1 'Final result:' "$work/ppl-cut.log" | sed 's/.*Final result: *\([0-9.]*\).*/\1/')
printf 'model                     %s; tasks %s (120), -c %s, -t 2\n' "$model" "$tasks" "$ctx"
printf 'runs                      %d (median wall seconds)\n' "$runs"
printf 'reap eval -p (base+cut)   %.2f s   (%s)\n' "$ma" "${ta[*]}"
printf 'llama-perplexity x2       %.2f s   (%s)\n' "$mb" "${tb[*]}"
printf 'ratio                     %.3f (goal <= 1.05)\n' "$(echo "$ma / $mb" | bc -l)"
printf 'reap sweep, %d sizes       %.2f s   (%s)\n' "${#sizes[@]}" "$mc" "${tc[*]}"
printf 'llama-perplexity x%d       %.2f s   (%s)\n' "$(( ${#sizes[@]} + 1 ))" "$md" "${td[*]}"
printf 'ratio                     %.3f (goal <= 1.2)\n' "$(echo "$mc / $md" | bc -l)"
printf 'accuracy of the cut       reap %s%%, llama-perplexity %s%%\n' "$acc_reap" "$acc_ppl"

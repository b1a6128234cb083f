#!/usr/bin/env bash
# bench/judge_vs_server.sh: the in-process judge against llama.cpp's own
# generation of the same verdict tokens: `reap judge --judge MODEL` against
# the same judgement through the pinned llama-server (`reap judge --judge-url`,
# one token per request under a grammar of the labels, no prompt cache), on the
# same answers files, model and threads, alternating A B A B (the first round
# warms up and is not timed). Prints the median wall time of each, the ratio
# in-process / server (goal: <= 1.1) and whether the verdicts agree.
#
# usage: bench/judge_vs_server.sh [-m JUDGE.gguf] [-n RUNS] [-d WORKDIR] [--reap PATH]
#   -m JUDGE     the judge (default: models/reap-moe-chat.gguf); it also answers
#   -n RUNS      timed runs of each (default 3)
#   -d WORKDIR   scratch folder (default ${TMPDIR:-/tmp}/reap-bench-judge)
# The answers: the judge model and a random half of its experts answering
# tools/make_gen_tasks.py's chat set (20 tasks: 40 verdicts a judgement).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$here/models/reap-moe-chat.gguf"
runs=3
work="${TMPDIR:-/tmp}/reap-bench-judge"
reap="$here/build/bin/reap"
python="${REAP_PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3
while [ $# -gt 0 ]; do
    case "$1" in
        -m) model="$2"; shift 2 ;;
        -n) runs="$2"; shift 2 ;;
        -d) work="$2"; shift 2 ;;
        --reap) reap="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "judge_vs_server.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
server="$(dirname "$reap")/llama-server"
[ -x "$reap" ] && [ -x "$server" ] || { echo "judge_vs_server.sh: needs $reap and $server (make build)" >&2; exit 1; }
mkdir -p "$work"
"$python" "$here/tools/make_gen_tasks.py" --heldout "$here/data/corpus/heldout.jsonl" --out "$work" > /dev/null
"$python" - "$model" "$work/half.json" "$reap" <<'PY'
import json, random, subprocess, sys
model, plan, reap = sys.argv[1:4]
info = json.loads(subprocess.run([reap, "inspect", model, "--json"], check=True, capture_output=True, text=True).stdout)
n, used = info["n_expert"], info["n_expert_used"]
rng = random.Random(1)
layers = [{"layer": l, "keep": sorted(rng.sample(range(n), max(n // 2, used)))} for l in info["moe_layers"]]
json.dump({"format": "reap-plan", "version": 1,
           "model": {"arch": info["arch"], "n_layer": info["n_layer"], "n_expert": n, "n_expert_used": used},
           "n_keep": max(n // 2, used), "layers": layers}, open(plan, "w"))
PY
rm -rf "$work/answers"
"$reap" eval -m "$model" --mask "$work/half.json" --tasks "$work/chat.jsonl" --answers-dir "$work/answers" -t 2 -q > /dev/null
a="$work/answers/base.answers.json"; b="$work/answers/1-half.json.answers.json"

port=$(( 20000 + RANDOM % 20000 ))
"$server" -m "$model" --host 127.0.0.1 --port $port -c 512 -np 1 -t 2 > "$work/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
    "$reap" judge "$a" "$b" --judge-url "http://127.0.0.1:$port/v1" --retries 0 -o "$work/url.json" --force -q > /dev/null 2>&1 && break
    sleep 1
done

now() { date +%s.%N; }
declare -a ta tb
for ((i = 0; i < runs + 1; ++i)); do
    t0=$(now)
    "$reap" judge "$a" "$b" --judge "$model" -t 2 -o "$work/local.json" --force -q > /dev/null
    t1=$(now)
    "$reap" judge "$a" "$b" --judge-url "http://127.0.0.1:$port/v1" -o "$work/url.json" --force -q > /dev/null
    t2=$(now)
    if [ "$i" -gt 0 ]; then
        ta+=("$(echo "$t1 - $t0" | bc -l)"); tb+=("$(echo "$t2 - $t1" | bc -l)")
    fi
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
ma=$(median "${ta[@]}"); mb=$(median "${tb[@]}")
same=$("$python" -c 'import json,sys; a=json.load(open(sys.argv[1]))["pairs"]; b=json.load(open(sys.argv[2]))["pairs"]; print("yes" if [(p["ab"],p["ba"]) for p in a]==[(p["ab"],p["ba"]) for p in b] else "NO")' "$work/local.json" "$work/url.json")
printf 'judge                  %s, 40 verdicts a judgement (20 pairs x 2 orders), -t 2\n' "$model"
printf 'runs                   %d (median wall seconds)\n' "$runs"
printf 'reap judge (in-proc.)  %.2f s   (%s)\n' "$ma" "${ta[*]}"
printf 'llama-server           %.2f s   (%s; reap judge --judge-url, the model loaded once)\n' "$mb" "${tb[*]}"
printf 'ratio                  %.3f (goal <= 1.1)\n' "$(echo "$ma / $mb" | bc -l)"
printf 'verdicts agree         %s\n' "$same"

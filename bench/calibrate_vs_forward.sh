#!/usr/bin/env bash
# bench/calibrate_vs_forward.sh: what reading the graph costs. Runs, in one
# invocation and over the same tokens, `reap calibrate` (eval callback on
# ffn_moe_topk / gate weights / expert outputs, accumulation, archive write)
# and `reap calibrate --forward-only` (the very same decodes, windows and
# flags, no callback), alternating A B A B so that a drifting machine moves
# both. Prints the median decode time of each (as the tools report it) and
# the ratio calibrate / forward (1.00 = calibration is free).
#
# usage: bench/calibrate_vs_forward.sh [-m MODEL.gguf] [--corpus FILE] [--max-tokens N] [-n RUNS]
#                                      [--reap PATH] [-- llama.cpp flags]
#   -m MODEL        default models/reap-moe-tiny.gguf (make model)
#   --corpus FILE   default data/corpus/calib.jsonl (make corpus)
#   --max-tokens N  tokens per run (default 8192)
#   -n RUNS         timed runs of each (default 3)
#   --reap PATH     the reap binary (default build/bin/reap)
#   after --         passed to both runs (default: -c 512 --ctx-past-trained -t <nproc>)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="$here/models/reap-moe-tiny.gguf"
corpus="$here/data/corpus/calib.jsonl"
max_tokens=8192
runs=3
reap="$here/build/bin/reap"
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        -m) model="$2"; shift 2 ;;
        --corpus) corpus="$2"; shift 2 ;;
        --max-tokens) max_tokens="$2"; shift 2 ;;
        -n) runs="$2"; shift 2 ;;
        --reap) reap="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "calibrate_vs_forward.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$reap" ] || { echo "calibrate_vs_forward.sh: no reap binary at $reap (build it, or pass --reap)" >&2; exit 1; }
[ -f "$model" ] || { echo "calibrate_vs_forward.sh: no model $model (make model, or pass -m)" >&2; exit 1; }
[ -f "$corpus" ] || { echo "calibrate_vs_forward.sh: no corpus $corpus (make corpus, or pass --corpus)" >&2; exit 1; }
# (--ctx-past-trained: the project's models are trained at 256; the bench measures the decodes)
[ ${#extra[@]} -gt 0 ] || extra=(-c 512 --ctx-past-trained -t "$(nproc)")

work="$(mktemp -d "${TMPDIR:-/tmp}/reap-calib-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
common=(-m "$model" --corpus "$corpus" --max-tokens "$max_tokens" --no-progress "${extra[@]}")

# the seconds a run reports ("... in S s, ...")
secs() { sed -n 's/.* in \([0-9.]*\) s,.*/\1/p' | head -1; }

cal=(); fwd=()
"$reap" calibrate "${common[@]}" --forward-only > /dev/null   # warm the page cache
for i in $(seq 1 "$runs"); do
    c=$("$reap" calibrate "${common[@]}" -o "$work/s.gguf" --force | secs)
    f=$("$reap" calibrate "${common[@]}" --forward-only | secs)
    echo "run $i: calibrate ${c} s, forward ${f} s"
    cal+=("$c"); fwd+=("$f")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mc=$(median "${cal[@]}"); mf=$(median "${fwd[@]}")
echo "model $(basename "$model"), $max_tokens tokens, flags: ${extra[*]}"
awk -v c="$mc" -v f="$mf" 'BEGIN { printf "median: calibrate %.3f s, forward %.3f s, ratio calibrate/forward %.2f\n", c, f, (f > 0 ? c / f : 0) }'

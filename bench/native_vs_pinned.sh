#!/usr/bin/env bash
# bench/native_vs_pinned.sh: what the instruction set of ggml's CPU code costs.
# The Makefile builds llama.cpp twice: build/ for users (ggml for this machine,
# -march=native) and build-pinned/ for the tests and the demo (x86-64-v3, so
# that their numbers hold on every machine). This runs bench/eval_vs_perplexity.sh
# with each build's reap and llama-perplexity, alternating the builds round by
# round, on an F16 qwen3moe of about 600 MB (random weights, tools/make_zoo.py;
# top-8 of 64 experts, n_embd 512), and prints the four medians: reap eval
# against stock llama-perplexity built the same way, and each built natively
# against pinned.
#
# usage: bench/native_vs_pinned.sh [-n ROUNDS] [--type TYPE] [-d WORKDIR] [--native DIR] [--pinned DIR]
#   -n ROUNDS      alternating rounds (default 3; each runs both builds once, after a warm-up)
#   --type TYPE    the model's weights: F16 (default) or a llama-quantize type (Q4_K_M, Q8_0,
#                  MXFP4_MOE, ...) made from the F16 model by the pinned build's llama-quantize
#   -d WORKDIR     scratch folder (default ${TMPDIR:-/tmp}/reap-bench-isa)
#   --native DIR   the users' build's bin folder (default build/bin: `make build`)
#   --pinned DIR   the tests' build's bin folder (default build-pinned/bin: `make build-pinned`)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=3
work="${TMPDIR:-/tmp}/reap-bench-isa"
native="$here/build/bin"
pinned="$here/build-pinned/bin"
python="${REAP_PYTHON:-/usr/bin/python3}"
type=F16
while [ $# -gt 0 ]; do
    case "$1" in
        -n) rounds="$2"; shift 2 ;;
        --type) type="$2"; shift 2 ;;
        -d) work="$2"; shift 2 ;;
        --native) native="$2"; shift 2 ;;
        --pinned) pinned="$2"; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "native_vs_pinned.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
for b in "$native" "$pinned"; do
    [ -x "$b/reap" ] && [ -x "$b/llama-perplexity" ] || { echo "native_vs_pinned.sh: needs $b/reap and $b/llama-perplexity" >&2; exit 1; }
done
"$python" -c 'import numpy' 2> /dev/null || { echo "native_vs_pinned.sh: $python has no numpy (tools/make_zoo.py)" >&2; exit 1; }
mkdir -p "$work"

model="$work/model-f16.gguf"
if [ ! -f "$model" ]; then
    "$python" - "$here/tools" "$model" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import make_zoo
tmp = Path(sys.argv[2] + ".tmp")
m = make_zoo.Model("bench-isa", "qwen3moe", tmp)
# 4 x 64 experts x 3 slabs x 512 x 768 x F16 = 604 MB of experts
make_zoo.build_qwen3moe(m, n_embd=512, n_head=8, n_head_kv=2, head_dim=64, n_layer=4,
                        n_expert=64, n_used=8, n_ff_exp=768)
tmp.rename(sys.argv[2])
PY
fi

if [ "$type" != F16 ]; then
    quantized="$work/model-$type.gguf"
    [ -f "$quantized" ] || "$pinned/llama-quantize" "$model" "$quantized" "$type" > "$work/quantize-$type.log" 2>&1 ||
        { echo "native_vs_pinned.sh: llama-quantize to $type failed ($work/quantize-$type.log)" >&2; exit 1; }
    model="$quantized"
fi

declare -A times
for ((r = 0; r < rounds; ++r)); do
    for name in native pinned; do
        bin=$native; [ "$name" = pinned ] && bin=$pinned
        log="$work/$name-$type-$r.log"
        "$here/bench/eval_vs_perplexity.sh" -m "$model" -n 1 -d "$work/$name-$type" --reap "$bin/reap" > "$log"
        times[$name-eval]+="$(grep -m1 '^reap eval' "$log" | awk '{print $3}') "
        times[$name-ppl]+="$(grep -m1 '^llama-perplexity' "$log" | awk '{print $2}') "
    done
done
median() { printf '%s\n' $1 | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
# the CPU features ggml was built with, as llama-perplexity's system_info line lists them
isa() { grep -m1 -o 'CPU : .*' "$work/$1-$type/ppl-base.log" | sed 's/^CPU : //' | tr '|' '\n' | grep '= 1' | awk '{print $1}' | xargs; }
printf 'model    %s (%s bytes, %s), -c 512, 32 chunks, -t 2; %d alternating rounds, median wall seconds\n' \
    "$model" "$(stat -c %s "$model")" "$type" "$rounds"
printf 'native   %s\n         %s\n' "$native" "$(isa native)"
printf 'pinned   %s\n         %s\n' "$pinned" "$(isa pinned)"
printf '%-8s %12s %18s %10s\n' build "reap eval" "llama-perplexity" "eval/ppl"
for name in native pinned; do
    e=$(median "${times[$name-eval]}"); p=$(median "${times[$name-ppl]}")
    printf '%-8s %10.2f s %16.2f s %10.2f\n' "$name" "$e" "$p" "$(echo "$e / $p" | bc -l)"
done
printf 'pinned / native: reap eval %.2f, llama-perplexity %.2f\n' \
    "$(echo "$(median "${times[pinned-eval]}") / $(median "${times[native-eval]}")" | bc -l)" \
    "$(echo "$(median "${times[pinned-ppl]}") / $(median "${times[native-ppl]}")" | bc -l)"

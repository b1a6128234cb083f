#!/bin/sh
# prune_then_quantise.sh: the "prune then quantise" path end to end, and the
# other order for comparison, on one model:
#   llama-imatrix (source) -> reap calibrate -> reap plan -> reap prune --imatrix
#   -> llama-quantize --imatrix (sliced) with a per-tensor recipe -> reap inspect
#   -> reap eval against the unpruned source;
#   and: llama-quantize the source (same recipe, source imatrix) -> reap prune.
# Prints the KLD of both against the source.
#
# usage: scripts/prune_then_quantise.sh MODEL.gguf CALIB.txt HELDOUT.txt OUT_DIR [RATIO]
# env:   GATE_UP=iq1_m DOWN=iq2_xxs BASE=Q8_0 (llama-quantize types), CTX=128,
#        BIN=build-pinned/bin (reap, llama-imatrix, llama-quantize)
set -eu
[ $# -ge 4 ] || { sed -n '2,13p' "$0"; exit 2; }
model=$1; calib=$2; held=$3; out=$4; ratio=${5:-0.5}
GATE_UP=${GATE_UP:-iq1_m}; DOWN=${DOWN:-iq2_xxs}; BASE=${BASE:-Q8_0}; CTX=${CTX:-128}
BIN=${BIN:-$(dirname "$0")/../build-pinned/bin}
mkdir -p "$out"
recipe="--tensor-type ffn_gate_exps=$GATE_UP --tensor-type ffn_up_exps=$GATE_UP --tensor-type ffn_down_exps=$DOWN"
q() { "$BIN/llama-quantize" --imatrix "$1" $recipe "$2" "$3" "$BASE" 2 > "$3.log" 2>&1 || { cat "$3.log"; exit 1; }; }

echo "== imatrix and saliency of the source"
"$BIN/llama-imatrix" -m "$model" -f "$calib" -o "$out/src.imatrix.gguf" -c "$CTX" -b "$CTX" -ub "$CTX" --no-ppl > "$out/imatrix.log" 2>&1
"$BIN/reap" calibrate -m "$model" --corpus "$calib" -o "$out/sal.gguf" -c "$CTX" -ub 4096 --force > "$out/calibrate.log" 2>&1
"$BIN/reap" plan "$out/sal.gguf" -m "$model" --ratio "$ratio" -o "$out/plan.json" --force | tail -3

echo "== prune (+ sliced imatrix), then quantise"
"$BIN/reap" prune -m "$model" --plan "$out/plan.json" -o "$out/cut.gguf" --imatrix "$out/src.imatrix.gguf" --force
q "$out/cut.imatrix.gguf" "$out/cut.gguf" "$out/cut-q.gguf"
"$BIN/reap" inspect "$out/cut-q.gguf" | sed -n '/^type/,/^$/p'

echo "== the other order: quantise, then prune"
q "$out/src.imatrix.gguf" "$model" "$out/q.gguf"
"$BIN/reap" prune -m "$out/q.gguf" --plan "$out/plan.json" -o "$out/q-cut.gguf" --force --no-sums > /dev/null

echo "== KLD against the source"
"$BIN/reap" eval -m "$model" -p "$out/cut.gguf" -p "$out/cut-q.gguf" -p "$out/q-cut.gguf" -f "$held" -c "$CTX" 2>/dev/null |
    grep -E '^== |overall|tokens  '

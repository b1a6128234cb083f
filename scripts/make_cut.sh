#!/usr/bin/env bash
# scripts/make_cut.sh: one cut of the demo's, planned, pruned and verified, as
# scripts/demo.sh and scripts/behaviour_study.sh make them (one rule for both).
#
#   make_cut.sh MODEL SALIENCY DIR NAME METHOD RATIO DOMAINS
#
# reap plan SALIENCY --method METHOD --ratio RATIO [--domains DOMAINS, unless
# "all"] [--seed 1 for random] -> DIR/plans/NAME.json (its output NAME.log),
# reap prune -> DIR/cuts/NAME.gguf, reap verify -> DIR/cuts/NAME.verify.log.
# Environment: REAP (the binary).
set -euo pipefail
if [ $# -ne 7 ]; then
    echo "usage: $0 MODEL SALIENCY DIR NAME METHOD RATIO DOMAINS" >&2
    exit 2
fi
REAP=${REAP:-build-pinned/bin/reap}
model=$1 saliency=$2 dir=$3 name=$4 method=$5 ratio=$6 domains=$7
args=(--method "$method" --ratio "$ratio")
[ "$domains" != all ] && args+=(--domains "$domains")
[ "$method" = random ] && args+=(--seed 1)
mkdir -p "$dir/plans" "$dir/cuts"
"$REAP" plan "$saliency" -m "$model" "${args[@]}" -o "$dir/plans/$name.json" --force > "$dir/plans/$name.log"
rm -f "$dir/cuts/$name.gguf"
"$REAP" prune -m "$model" --plan "$dir/plans/$name.json" -o "$dir/cuts/$name.gguf" --force > /dev/null
"$REAP" verify -m "$model" --plan "$dir/plans/$name.json" "$dir/cuts/$name.gguf" > "$dir/cuts/$name.verify.log"

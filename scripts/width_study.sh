#!/usr/bin/env bash
# scripts/width_study.sh: count against width at equal bytes (issue 27, item 5),
# a step of `make demo` (scripts/demo.sh runs it; it can also run alone).
#
# On the project's own model (reap-moe-tiny: f32, 32 experts of 128 channels,
# so any width applies), at two budgets of the expert pool's bytes (50% and
# 25%): count only (fewer experts, full width), width only (every expert, fewer
# channels) and mixed. Each cut is planned from one calibration with channel
# saliency (reap calibrate --width-saliency; ch_reap ranks the channels),
# pruned for real, verified, and evaluated per domain on the held-out text
# (reap eval, KLD and top-1 against the base). tools/width_study.py writes the
# table (appended to docs/results.md) and the chart docs/width-study.svg
# (build-pinned/bin/width_study_chart: reap's own chart code and domain colours).
#
# Environment: REAP, MODEL, CORPUS, OUT (the demo's folder: its
# heldout-eval.jsonl is the evaluation text; made here when missing), CTX,
# WIDTH_CALIB_TOKENS (calibration tokens per domain), EVAL_BYTES.
set -euo pipefail
cd "$(dirname "$0")/.."

REAP=${REAP:-build-pinned/bin/reap}
CHART=${CHART:-$(dirname "$REAP")/width_study_chart}
PY=${PYTHON:-/usr/bin/python3}
MODEL=${MODEL:-models/reap-moe-tiny.gguf}
CORPUS=${CORPUS:-data/corpus}
OUT=${OUT:-out/demo}
CTX=${CTX:-256}
EVAL_BYTES=${EVAL_BYTES:-8000}
WIDTH_CALIB_TOKENS=${WIDTH_CALIB_TOKENS:-4000}
W="$OUT/width"
mkdir -p "$W/plans" "$W/cuts"

if [ ! -f "$OUT/heldout-eval.jsonl" ]; then   # as demo.sh makes it: the first EVAL_BYTES of every domain
    "$PY" tools/heldout_text.py "$CORPUS/heldout.jsonl" "$OUT/heldout-eval.jsonl" "$EVAL_BYTES"
fi

if [ ! -f "$W/saliency.gguf" ]; then
    "$REAP" calibrate -m "$MODEL" --corpus "$CORPUS/calib.jsonl" -o "$W/saliency.gguf" -c "$CTX" -ub 4096 \
        --max-tokens-per-domain "$WIDTH_CALIB_TOKENS" --width-saliency > "$W/calibrate.log" 2>&1
fi

# name      budget  keep  width (0: every channel)
# 24 x 85 channels is 49.8% of 32 x 128, the nearest to half with 3/4 of the experts
CUTS=(
    "count-50   50  16   0"
    "mixed-50   50  24  85"
    "width-50   50  32  64"
    "count-25   25   8   0"
    "mixed-25   25  16  64"
    "width-25   25  32  32"
)
pruned=()
for cut in "${CUTS[@]}"; do
    read -r name budget keep width <<< "$cut"
    args=(--keep "$keep")
    [ "$width" != 0 ] && args+=(--width "$width")
    "$REAP" plan "$W/saliency.gguf" -m "$MODEL" "${args[@]}" -o "$W/plans/$name.json" --force > "$W/plans/$name.log"
    rm -f "$W/cuts/$name.gguf"
    "$REAP" prune -m "$MODEL" --plan "$W/plans/$name.json" -o "$W/cuts/$name.gguf" --force > /dev/null
    "$REAP" verify -m "$MODEL" --plan "$W/plans/$name.json" "$W/cuts/$name.gguf" > "$W/cuts/$name.verify.log"
    printf '  %-9s keep %2s, width %3s: planned, pruned, verified\n' "$name" "$keep" "$([ "$width" = 0 ] && echo 128 || echo "$width")"
    pruned+=(-p "$W/cuts/$name.gguf")
done

# one call: the base runs once, every cut is scored against it
"$REAP" eval -m "$MODEL" "${pruned[@]}" -f "$OUT/heldout-eval.jsonl" -c "$CTX" -b 4096 --json --quiet > "$W/eval-all.json"

"$PY" tools/width_study.py --model "$MODEL" --dir "$W" --cuts "$(printf '%s\n' "${CUTS[@]}" | awk '{print $1}' | paste -sd,)" \
    --md "$W/table.md" --chart-data "$W/chart.json"
"$CHART" "$W/chart.json" docs/width-study.svg
{ echo; cat "$W/table.md"; echo; echo '![KLD per domain against the share of channels each kept expert keeps, at two budgets](width-study.svg)'; } >> docs/results.md
echo "  appended to docs/results.md; chart docs/width-study.svg"

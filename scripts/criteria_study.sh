#!/usr/bin/env bash
# scripts/criteria_study.sh: beyond REAP (issue 53, item 4), a step of `make
# demo` (scripts/demo.sh runs it; it can also run alone).
#
#   criteria     on reap-moe-tiny, reap-moe-wide and reap-moe-recall: REAP, MAN,
#                MSAN, AIMER, EAN, frequency and random at 25/50/75% removed, in
#                one `reap sweep --methods` per model (one base pass, every plan
#                masked), scored on the held-out split: KLD and top-1; AIMER
#                from the model's own weights (F32 / F16) and, for tiny and
#                wide, from a quantised copy (Q4_K_M; IQ4_XS on wide), applied
#                to the same base
#   needles      reap-moe-recall's needle grid (exact cells) of every
#                criterion's 50% cut, one `reap sweep --needle` per method
#   curve        REAP and MAN on reap-moe-tiny from 1/8, 1/4, 1/2 and all of
#                the calibration the demo uses, at 50% removed, against
#                AIMER's single point (no calibration)
# tools/criteria_study.py writes the section of docs/results.md and the chart
# docs/criteria-calibration.svg from the sweeps' JSON, kept in docs/results/criteria/;
# each model's methods chart is docs/criteria-NAME.svg (reap sweep --plot).
#
# Environment: REAP, PYTHON, MODEL, WIDE, RECALL, CORPUS, OUT (the demo's
# folder), CTX, CALIB_TOKENS, EVAL_BYTES.
set -euo pipefail
cd "$(dirname "$0")/.."

REAP=${REAP:-build-pinned/bin/reap}
QUANTIZE=${QUANTIZE:-$(dirname "$REAP")/llama-quantize}
IMATRIX=${IMATRIX:-$(dirname "$REAP")/llama-imatrix}
PY=${PYTHON:-/usr/bin/python3}
MODEL=${MODEL:-models/reap-moe-tiny.gguf}
WIDE=${WIDE:-models/reap-moe-wide.gguf}
RECALL=${RECALL:-models/reap-moe-recall.gguf}
CORPUS=${CORPUS:-data/corpus}
OUT=${OUT:-out/demo}
CTX=${CTX:-256}
CALIB_TOKENS=${CALIB_TOKENS:-20000}
EVAL_BYTES=${EVAL_BYTES:-8000}
C="$OUT/criteria"
J=docs/results/criteria
METHODS=reap,man,msan,aimer,ean,frequency,random
mkdir -p "$C" "$J"

# The held-out text every sweep scores on (the demo's, made here when run alone).
[ -f "$OUT/heldout-eval.jsonl" ] || "$PY" tools/heldout_text.py "$CORPUS/heldout.jsonl" "$OUT/heldout-eval.jsonl" "$EVAL_BYTES"

# calibrate MODEL into DIR/saliency.gguf (TOKENS a domain) unless it is there; SAME, an
# archive the demo made of MODEL with the same tokens, is taken instead when it holds
# squared norms (an MSAN plan of it plans)
calibrate() {
    local model=$1 dir=$2 tokens=$3 same=${4:-}
    mkdir -p "$dir"
    if [ ! -f "$dir/saliency.gguf" ] && [ -n "$same" ] && [ -f "$same" ] &&
        "$REAP" plan "$same" -m "$model" --ratio 0.5 --method msan --dry-run > /dev/null 2>&1; then
        cp "$same" "$dir/saliency.gguf"
    fi
    [ -f "$dir/saliency.gguf" ] || "$REAP" calibrate -m "$model" --corpus "$CORPUS/calib.jsonl" -o "$dir/saliency.gguf" \
        -c "$CTX" -ub 4096 --max-tokens-per-domain "$tokens" > /dev/null
}

# quantise MODEL to TYPE into DIR/TYPE.gguf (an importance matrix first, as the demo's wide copies)
quantise() {
    local model=$1 dir=$2 type=$3
    [ -f "$dir/$type.gguf" ] && return
    "$PY" -c 'import json, sys; sys.stdout.buffer.write("\n\n".join(json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")).encode()[:100000])' \
        "$CORPUS/calib.jsonl" > "$dir/calib.txt"
    [ -f "$dir/imatrix.gguf" ] || "$IMATRIX" -m "$model" -f "$dir/calib.txt" -c "$CTX" -o "$dir/imatrix.gguf" > "$dir/imatrix.log" 2>&1
    "$QUANTIZE" --imatrix "$dir/imatrix.gguf" "$model" "$dir/$type.gguf" "$type" > "$dir/$type.log" 2>&1
}

# one model: calibrate, AIMER from its weights (and from quantised copies), the methods sweep
study_model() {
    local name=$1 model=$2 quants=$3 same=${4:-}
    local dir="$C/$name"
    calibrate "$model" "$dir" "$CALIB_TOKENS" "$same"
    "$REAP" score -m "$model" -o "$dir/scores.gguf" --force -q > /dev/null
    "$REAP" sweep "$dir/saliency.gguf" "$dir/scores.gguf" -m "$model" -f "$OUT/heldout-eval.jsonl" --ratios 0.25,0.5,0.75 \
        --methods "$METHODS" -c "$CTX" -b 4096 -o "$J/$name.json" --plot "docs/criteria-$name.svg" --force --quiet > "$dir/table.txt"
    for q in $quants; do
        quantise "$model" "$dir" "$q"
        "$REAP" score -m "$dir/$q.gguf" -o "$dir/scores-$q.gguf" --force -q > /dev/null
        # AIMER of the copy's weights, cutting the model itself
        "$REAP" sweep "$dir/scores-$q.gguf" -m "$model" -f "$OUT/heldout-eval.jsonl" --ratios 0.25,0.5,0.75 --method aimer \
            -c "$CTX" -b 4096 -o "$J/$name-aimer-$q.json" --plot "$dir/aimer-$q.svg" --force --quiet > /dev/null
    done
    echo "  $name: $METHODS at 25/50/75% removed${quants:+; AIMER from $quants}"
}

study_model tiny "$MODEL" Q4_K_M "$OUT/saliency.gguf"
study_model wide "$WIDE" "Q4_K_M IQ4_XS" "$OUT/frontier-wide/saliency.gguf"
study_model recall "$RECALL" ""

# needles: every criterion's 50% cut of the recall model, one sweep each (the needle
# grid is one source's behaviour, which a methods sweep does not carry)
for m in ${METHODS//,/ }; do
    archive="$C/recall/saliency.gguf"
    [ "$m" = aimer ] && archive="$C/recall/scores.gguf"
    "$REAP" sweep "$archive" -m "$RECALL" -f "$CORPUS/heldout.jsonl" --ratios 0.5 --method "$m" --needle --needles 12 \
        -c "$CTX" -b 4096 -o "$J/recall-needle-$m.json" --plot "$C/recall/needle-$m.svg" --force --quiet > /dev/null
done
echo "  recall: needle grid of every criterion's 50% cut"

# the calibration-size curve: REAP and MAN from a fraction of the calibration, at 50% removed
for frac in 8 4 2; do
    calibrate "$MODEL" "$C/tiny-1of$frac" $((CALIB_TOKENS / frac))
    "$REAP" sweep "$C/tiny-1of$frac/saliency.gguf" -m "$MODEL" -f "$OUT/heldout-eval.jsonl" --ratios 0.5 --methods reap,man \
        -c "$CTX" -b 4096 -o "$J/tiny-calib-1of$frac.json" --plot "$C/tiny-1of$frac/sweep.svg" --force --quiet > /dev/null
done
echo "  tiny: REAP and MAN from 1/8, 1/4, 1/2 and all of the calibration"

"$PY" tools/criteria_study.py --dir "$J" --calib-tokens "$CALIB_TOKENS" --chart docs/criteria-calibration.svg >> docs/results.md
echo "  appended to docs/results.md; chart docs/criteria-calibration.svg"

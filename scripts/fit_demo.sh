#!/usr/bin/env bash
# make demo's last question answered in one command: `reap fit` of reap-moe-wide
# at one budget over its four quantisations (the frontier step's Q8_0, Q6_K,
# Q4_K_M and IQ4_XS copies), scored against the F16 file. Its card goes to
# docs/fit-card/, its search (the printed log, without the ETAs) to
# docs/results.md.
#
# Environment: REAP (binary), WIDE (the F16 reference), SOURCES (folder of the
# copies, TYPE.gguf), CORPUS (folder of calib.jsonl), HELDOUT (plain text),
# OUT (work folder), CTX, CALIB_TOKENS (calibration tokens per domain), BUDGET,
# TASKS (optional: a multiple-choice file, the task gate: the winner loses at
# most 5 points of accuracy against the F16 reference and is not worse by
# McNemar's test on the same tasks).
set -euo pipefail
cd "$(dirname "$0")/.."

REAP=${REAP:-build-pinned/bin/reap}
WIDE=${WIDE:-models/reap-moe-wide.gguf}
CTX=${CTX:-256}
CALIB_TOKENS=${CALIB_TOKENS:-20000}
BUDGET=${BUDGET:-6MB}
TYPES=(Q8_0 Q6_K Q4_K_M IQ4_XS)

# The width axis needs the archive's channel scores (calibrate --width-saliency).
SAL="$OUT/fit-wide-saliency.gguf"
[ -f "$SAL" ] || "$REAP" calibrate -m "$WIDE" --corpus "$CORPUS/calib.jsonl" --width-saliency -o "$SAL" -c "$CTX" -ub 4096 \
    --max-tokens-per-domain "$CALIB_TOKENS" > /dev/null
FOUT="$OUT/fit-wide"
rm -rf "$FOUT"
"$REAP" fit $(for t in "${TYPES[@]}"; do printf -- '-m %s ' "$SOURCES/$t.gguf"; done) --reference "$WIDE" --saliency "$SAL" \
    -f "$HELDOUT" --budget "$BUDGET" -c "$CTX" -b 4096 -o "$FOUT" ${TASKS:+--multiple-choice "$TASKS" --task-slack 0.05 --gate-top 4} \
    --quiet > "$FOUT.log"
rm -rf docs/fit-card
cp -r "$FOUT/card" docs/fit-card
{
    echo
    echo "## The answer in one command: \`reap fit\` (reap-moe-wide at $BUDGET)"
    echo
    echo "The same four quantisations of reap-moe-wide, the F16 file as the reference, one"
    echo "budget: \`reap fit\` plans every source x channel width K at the largest expert"
    echo "count N that fits, scores a few of them by masking (the ends and middle of each"
    echo "source's line, then only the gaps a convexity bound cannot rule out), prunes the"
    echo "winner (the best by KLD that passes the task gate, when one is given), verifies it"
    echo "byte for byte and evaluates the written file. Its card:"
    echo "[fit-card/](fit-card/README.md)."
    echo
    echo '```'
    sed -e 's/; ETA [0-9]* s$//' "$FOUT.log"
    echo '```'
} >> docs/results.md
echo "  appended to docs/results.md; card docs/fit-card/"

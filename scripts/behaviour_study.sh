#!/usr/bin/env bash
# scripts/behaviour_study.sh: what next-token KLD misses, on the demo's cuts
# (issue 25, item 5), a step of `make demo` (scripts/demo.sh runs it; it can
# also run alone).
#
#   needle grid   models/reap-moe-recall.gguf (the model that retrieves):
#                 calibrated on the calib split (CALIB_TOKENS a domain), cut
#                 by REAP at 25/50/75% and at 50% on en,code alone; `reap
#                 eval --needle` on the base, every cut as a mask and every
#                 cut as the pruned file, in one run
#   generation    models/reap-moe-chat.gguf (the model that ends its turn):
#                 calibrated on the calib split, cut as the demo cuts (reap-25/50/75
#                 and reap-en+code-50); `reap eval --generate` on held-out
#                 prompts as user messages, masks and files, in one run
# tools/behaviour_study.py writes the section of docs/results.md from the two
# --json outputs, which are kept in docs/results/ (the test that recomputes
# the section reads them there: DemoResults.BehaviourSection*).
#
# Environment: REAP, PYTHON, RECALL, CHAT, CORPUS, OUT
# (the demo's folder), CTX, CALIB_TOKENS (calibration tokens per domain: the
# recall model's, and the trained model's when its saliency is missing, as
# demo.sh calibrates it), NEEDLES (per cell),
# NEEDLE_SEED, PROMPTS_PER_DOMAIN, PROMPT_BYTES, MAX_NEW.
set -euo pipefail
cd "$(dirname "$0")/.."

REAP=${REAP:-build-pinned/bin/reap}
PY=${PYTHON:-/usr/bin/python3}
RECALL=${RECALL:-models/reap-moe-recall.gguf}
CHAT=${CHAT:-models/reap-moe-chat.gguf}
CORPUS=${CORPUS:-data/corpus}
OUT=${OUT:-out/demo}
CTX=${CTX:-256}
CALIB_TOKENS=${CALIB_TOKENS:-20000}
NEEDLES=${NEEDLES:-12}
NEEDLE_SEED=${NEEDLE_SEED:-0}
PROMPTS_PER_DOMAIN=${PROMPTS_PER_DOMAIN:-8}
PROMPT_BYTES=${PROMPT_BYTES:-96}
MAX_NEW=${MAX_NEW:-128}
B="$OUT/behaviour"
mkdir -p "$B" docs/results

# name  method  ratio  domains: the demo's cuts this study shows (demo.sh's names)
CUTS=(
    "reap-25           reap 0.25 all"
    "reap-50           reap 0.50 all"
    "reap-75           reap 0.75 all"
    "reap-en+code-50   reap 0.50 en,code"
)

# plan, prune and verify one cut as demo.sh does: DIR/plans/NAME.json and DIR/cuts/NAME.gguf
make_cut() { REAP="$REAP" scripts/make_cut.sh "$@"; }

# MODEL's own calibration (DIR/saliency.gguf) and the cuts above of it (DIR/plans,
# DIR/cuts); cut_args: each as --mask PLAN -p FILE, for one eval of all of them
calibrated_cuts() {
    local model=$1 dir=$2 label=$3
    mkdir -p "$dir/plans" "$dir/cuts"
    if [ ! -f "$dir/saliency.gguf" ]; then
        "$REAP" calibrate -m "$model" --corpus "$CORPUS/calib.jsonl" -o "$dir/saliency.gguf" -c "$CTX" -ub 4096 \
            --max-tokens-per-domain "$CALIB_TOKENS" > "$dir/calibrate.log" 2>&1
    fi
    cut_args=()
    for cut in "${CUTS[@]}"; do
        read -r name method ratio domains <<< "$cut"
        make_cut "$model" "$dir/saliency.gguf" "$dir" "$name" "$method" "$ratio" "$domains"
        cut_args+=(--mask "$dir/plans/$name.json" -p "$dir/cuts/$name.gguf")
        printf '  %s %-16s planned, pruned, verified\n' "$label" "$name"
    done
}

# --- the needle grid on the recall model
calibrated_cuts "$RECALL" "$B/recall" recall
"$REAP" eval -m "$RECALL" "${cut_args[@]}" --needle -f "$CORPUS/heldout.jsonl" --needles "$NEEDLES" \
    --seed "$NEEDLE_SEED" --json --quiet > "$B/needle-recall.json"
echo "  needle grid: $B/needle-recall.json"

# --- free generation on the model that ends its turn (models/reap-moe-chat.gguf)
calibrated_cuts "$CHAT" "$B/chat" chat
"$PY" tools/behaviour_study.py prompts --corpus "$CORPUS/heldout.jsonl" --per-domain "$PROMPTS_PER_DOMAIN" \
    --bytes "$PROMPT_BYTES" --chat --out "$B/prompts-chat.jsonl"
"$REAP" eval -m "$CHAT" "${cut_args[@]}" --generate "$B/prompts-chat.jsonl" --max-new "$MAX_NEW" \
    --json --quiet > "$B/generate-chat.json"
echo "  generation: $B/generate-chat.json"

# --- the section, from the JSON kept in docs/results/
for j in needle-recall generate-chat; do
    "$PY" tools/behaviour_study.py compact "$B/$j.json" "docs/results/$j.json"
done
"$PY" tools/behaviour_study.py table --needle docs/results/needle-recall.json --generate docs/results/generate-chat.json \
    --chat --md "$B/table.md" --results docs/results.md > /dev/null
echo "  written into docs/results.md (its JSON in docs/results/)"

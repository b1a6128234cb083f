#!/usr/bin/env bash
# make demo: the whole reap.cpp pipeline on the project's own model.
#
#   calibrate (calib split) -> plan (REAP by domain; REAP, frequency and random
#   at 25/50/75% removed) -> prune -> verify -> eval per domain (heldout split)
#   -> sweep (REAP at 25/50/75% by masking, no files; the chart docs/sweep.svg)
#   -> results table (printed and written to docs/results.md; the REAP rows come
#      from the sweep, checked against the pruned files' rows)
#   -> calibrating on quantised copies (F32, Q8_0, Q4_K_M, IQ2_XXS): how far their
#      keep lists move from the F32 ones (appended to docs/results.md)
#   -> which quantisation to cut for a budget: Q8_0, Q5_0, Q4_0 and IQ4_NL copies
#      (llama-quantize) swept at three budgets against the F32 model's rows
#      (reap sweep with several sources; appended to docs/results.md, chart
#      docs/frontier.svg); the same with real k- and i-quants on reap-moe-wide
#      (Q8_0, Q6_K, Q4_K_M, IQ4_XS; docs/frontier-wide.svg)
#   -> count against width at equal bytes (50% and 25% of the expert pool:
#      fewer experts, narrower experts, both; scripts/width_study.sh, appended
#      to docs/results.md, chart docs/width-study.svg)
#   -> what next-token KLD misses: the needle grid of reap-moe-recall and free
#      generation of this model, base against reap-25/50/75 and a
#      language-targeted cut, as masks and as pruned files
#      (scripts/behaviour_study.sh; its section of docs/results.md, the JSON in
#      docs/results/)
#   -> task evidence: multiple-choice and Winogrande accuracy of every REAP,
#      frequency and random cut paired against the base, generative tasks with
#      cap hits and a recheck, a pairwise judge of two cuts' answers
#      (scripts/task_study.sh; its section of docs/results.md)
#   -> beyond REAP: every criterion (REAP, MAN, MSAN, AIMER, EAN, frequency,
#      random) on three models by one sweep each, AIMER from quantised copies,
#      needles, calibration size (scripts/criteria_study.sh; docs/results.md)
#   -> the answer in one command: reap fit of reap-moe-wide at 6MB over its four
#      quantisations, gated on the multiple-choice set (scripts/fit_demo.sh; its
#      card in docs/fit-card/, its search appended to docs/results.md)
#   -> the model card of the main cut, reap-50 (reap report: docs/demo-card/)
#
# Everything goes to out/demo (git-ignored); the corpus comes from `make corpus`.
# Environment: REAP (binary), OUT (folder), EVAL_BYTES (held-out bytes per domain),
# CALIB_TOKENS (calibration tokens per domain), QUANT_BYTES (calibration bytes per
# domain for each quantised copy).
set -euo pipefail
cd "$(dirname "$0")/.."

REAP=${REAP:-build-pinned/bin/reap}
QUANTIZE=${QUANTIZE:-$(dirname "$REAP")/llama-quantize}
IMATRIX=${IMATRIX:-$(dirname "$REAP")/llama-imatrix}
PY=${PYTHON:-/usr/bin/python3}
MODEL=${MODEL:-models/reap-moe-tiny.gguf}
CORPUS=${CORPUS:-data/corpus}
OUT=${OUT:-out/demo}
EVAL_BYTES=${EVAL_BYTES:-8000}
CALIB_TOKENS=${CALIB_TOKENS:-20000}
QUANT_BYTES=${QUANT_BYTES:-2000}
CTX=256
# calibrate's -ub and eval's, sweep's and fit's -b are given (reap's earlier defaults):
# the automatic ones depend on this machine's memory, and another ubatch sums the same
# values in another order, so the numbers of docs/results.md would move in their last
# digits from machine to machine

mkdir -p "$OUT/plans" "$OUT/cuts" "$OUT/eval"
step() { printf '\n== %s\n' "$*"; }

step "the model"
"$REAP" inspect "$MODEL"

step "calibrate on the calib split ($CALIB_TOKENS tokens per domain)"
if [ ! -f "$OUT/saliency.gguf" ]; then
    "$REAP" calibrate -m "$MODEL" --corpus "$CORPUS/calib.jsonl" -o "$OUT/saliency.gguf" \
        -c $CTX -ub 4096 --max-tokens-per-domain "$CALIB_TOKENS"
fi

# The evaluation text: the first EVAL_BYTES of held-out samples of every domain.
"$PY" tools/heldout_text.py "$CORPUS/heldout.jsonl" "$OUT/heldout-eval.jsonl" "$EVAL_BYTES"

# name  method  ratio  domains
CUTS=(
    "reap-en+code-50   reap      0.50 en,code"
    "reap-ja+zh-50     reap      0.50 ja,zh"
    "reap-25           reap      0.25 all"
    "reap-50           reap      0.50 all"
    "reap-75           reap      0.75 all"
    "frequency-25      frequency 0.25 all"
    "frequency-50      frequency 0.50 all"
    "frequency-75      frequency 0.75 all"
    "random-25         random    0.25 all"
    "random-50         random    0.50 all"
    "random-75         random    0.75 all"
)

step "plan, prune, verify"
for cut in "${CUTS[@]}"; do
    read -r name method ratio domains <<< "$cut"
    REAP="$REAP" scripts/make_cut.sh "$MODEL" "$OUT/saliency.gguf" "$OUT" "$name" "$method" "$ratio" "$domains"
    printf '  %-18s planned, pruned, verified (%s)\n' "$name" "$(du -h "$OUT/cuts/$name.gguf" | cut -f1)"
done

step "evaluate every cut per domain on the heldout split"
# One call: the base runs once, each cut is scored against it; the result is
# split into one single-model object per cut, $OUT/eval/NAME.json.
names=()
pruned=()
for cut in "${CUTS[@]}"; do
    read -r name _ <<< "$cut"
    names+=("$name")
    pruned+=(-p "$OUT/cuts/$name.gguf")
done
"$REAP" eval -m "$MODEL" "${pruned[@]}" -f "$OUT/heldout-eval.jsonl" -c $CTX -b 4096 --json --quiet > "$OUT/eval-all.json"
"$PY" - "$OUT/eval-all.json" "$OUT/cuts" "$OUT/eval" "${names[@]}" <<'EOF'
import json, os, sys
src, cuts, dst, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
with open(src, encoding="utf-8") as f:
    j = json.load(f)
# Several -p give {"pruned": {PATH: report}}; a single -p gives the report itself.
by_path = j["pruned"] if "pruned" in j else {os.path.join(cuts, names[0] + ".gguf"): j}
for name in names:
    with open(os.path.join(dst, name + ".json"), "w", encoding="utf-8") as out:
        json.dump(by_path[os.path.join(cuts, name + ".gguf")], out, indent=2)
        out.write("\n")
    print(f"  {name:<18} done")
EOF

step "sweep: REAP at 25/50/75% removed, scored by masking the base (no model written)"
"$REAP" sweep "$OUT/saliency.gguf" -m "$MODEL" -f "$OUT/heldout-eval.jsonl" --ratios 0.25,0.5,0.75 -c $CTX -b 4096 \
    -o "$OUT/sweep.json" --plot docs/sweep.svg --plans-dir "$OUT/sweep-plans" --force --quiet

step "the sweep's masks against the pruned files of the same cuts (masked base vs file, directly)"
for pct in 25 50 75; do
    n_keep=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["n_keep"])' "$OUT/plans/reap-$pct.json")
    "$REAP" eval -m "$MODEL" --base-mask "$OUT/sweep-plans/keep-$n_keep.json" -p "$OUT/cuts/reap-$pct.gguf" \
        -f "$OUT/heldout-eval.jsonl" -c $CTX -b 4096 --json --quiet > "$OUT/eval/mask-vs-reap-$pct.json"
    printf '  reap-%s: masked base vs pruned file compared\n' "$pct"
done

step "results"
"$PY" tools/results_table.py --eval-dir "$OUT/eval" --plans-dir "$OUT/plans" --model "$MODEL" --sweep "$OUT/sweep.json" --corpus-manifest "$CORPUS/manifest.json" \
    --cuts "$(printf '%s\n' "${CUTS[@]}" | awk '{print $1}' | paste -sd,)" --out docs/results.md

step "does calibrating on a quantised copy change the cut? (scripts/calibrate_on_quants.py, appended to docs/results.md)"
"$PY" scripts/calibrate_on_quants.py "$OUT/quants" --bin "$(dirname "$REAP")" --bytes "$QUANT_BYTES" > /dev/null
{ echo; sed 's/^# /## /' "$OUT/quants/calibrate_on_quants.md"; } >> docs/results.md
echo "  appended to docs/results.md"

step "which quantisation to cut for a budget (reap sweep, several sources; appended to docs/results.md)"
# llama-quantize's k-quants need rows of 256: this model's 192- and 128-wide rows
# make it fall back, so the sources are the types that apply as they are.
mkdir -p "$OUT/frontier"
for t in Q8_0 Q5_0 Q4_0 IQ4_NL; do
    [ -f "$OUT/frontier/$t.gguf" ] || "$QUANTIZE" "$MODEL" "$OUT/frontier/$t.gguf" $t > "$OUT/frontier/$t.log" 2>&1
done
# Scored against the reference's rows, so the text is plain (no domains).
"$PY" -c 'import json, sys; print("\n\n".join(json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")))' \
    "$OUT/heldout-eval.jsonl" > "$OUT/frontier/heldout.txt"
"$REAP" sweep "$OUT/saliency.gguf" $(for t in Q8_0 Q5_0 Q4_0 IQ4_NL; do printf -- '-m %s ' "$OUT/frontier/$t.gguf"; done) \
    --reference "$MODEL" -f "$OUT/frontier/heldout.txt" --budgets 3MB,4.5MB,6MB -c $CTX -b 4096 \
    -o "$OUT/frontier/frontier.json" --plot docs/frontier.svg --force --quiet > "$OUT/frontier/table.txt"
{
    echo
    echo "## Which quantisation to cut for a budget"
    echo
    echo "The same model as four llama-quantize copies (Q8_0, Q5_0, Q4_0, IQ4_NL; the"
    echo "k-quants do not apply to its 192- and 128-wide rows), each cut by one REAP"
    echo "ranking to fit three file-size budgets and scored by masking against the F32"
    echo "model's own rows on the held-out text (\`reap sweep -m Q8_0.gguf -m ... --reference"
    echo "F32.gguf --budgets 3MB,4.5MB,6MB\`). At a budget a smaller type keeps more"
    echo "experts; the last lines name the winner of each budget and its lead."
    echo
    echo '```'
    cat "$OUT/frontier/table.txt"
    echo '```'
    echo
    echo '![KLD against file size, one line per source](frontier.svg)'
} >> docs/results.md
echo "  appended to docs/results.md; chart docs/frontier.svg"

step "the same question with real k- and i-quants: reap-moe-wide (appended to docs/results.md)"
# reap-moe-wide's rows are 256 wide, so llama-quantize applies Q4_K, Q6_K and IQ4_XS
# as asked (its log says when a tensor falls back; the step fails if one does).
# IQ4_XS and the K mixes take an importance matrix from llama-imatrix on calib text.
WIDE=${WIDE:-models/reap-moe-wide.gguf}
WOUT="$OUT/frontier-wide"
mkdir -p "$WOUT"
"$PY" -c 'import json, sys; sys.stdout.buffer.write("\n\n".join(json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")).encode()[:200000])' \
    "$CORPUS/calib.jsonl" > "$WOUT/calib.txt"
[ -f "$WOUT/saliency.gguf" ] || "$REAP" calibrate -m "$WIDE" --corpus "$CORPUS/calib.jsonl" -o "$WOUT/saliency.gguf" \
    -c $CTX -ub 4096 --max-tokens-per-domain "$CALIB_TOKENS" > /dev/null
[ -f "$WOUT/imatrix.gguf" ] || "$IMATRIX" -m "$WIDE" -f "$WOUT/calib.txt" -c $CTX -o "$WOUT/imatrix.gguf" > "$WOUT/imatrix.log" 2>&1
WIDE_TYPES=(Q8_0 Q6_K Q4_K_M IQ4_XS)
for t in "${WIDE_TYPES[@]}"; do
    [ -f "$WOUT/$t.gguf" ] || "$QUANTIZE" --imatrix "$WOUT/imatrix.gguf" "$WIDE" "$WOUT/$t.gguf" $t > "$WOUT/$t.log" 2>&1
    if grep -qE "falling back|required fallback" "$WOUT/$t.log"; then
        echo "demo: llama-quantize fell back from $t on $WIDE (see $WOUT/$t.log)" >&2
        exit 1
    fi
done
"$REAP" sweep "$WOUT/saliency.gguf" $(for t in "${WIDE_TYPES[@]}"; do printf -- '-m %s ' "$WOUT/$t.gguf"; done) \
    --reference "$WIDE" -f "$OUT/frontier/heldout.txt" --budgets 4MB,6MB,8MB -c $CTX -b 4096 \
    -o "$WOUT/frontier.json" --plot docs/frontier-wide.svg --force --quiet > "$WOUT/table.txt"
{
    echo
    echo "## Which quantisation to cut for a budget, with real k- and i-quants (reap-moe-wide)"
    echo
    echo "The same sweep on the second trained model (models/README.md), whose 256-wide"
    echo "rows take llama-quantize's 256-element types without fallback: Q8_0, Q6_K,"
    echo "Q4_K_M and IQ4_XS copies (the last three with an importance matrix from"
    echo "llama-imatrix on 200 kB of calib text), one REAP ranking from its own"
    echo "calibration, three budgets, scored against the F16 file's rows on the same"
    echo "held-out text."
    echo
    echo '```'
    cat "$WOUT/table.txt"
    echo '```'
    echo
    echo '![KLD against file size, one line per source (reap-moe-wide)](frontier-wide.svg)'
} >> docs/results.md
echo "  appended to docs/results.md; chart docs/frontier-wide.svg"

step "count against width at equal bytes: 50% and 25% of the expert pool (scripts/width_study.sh; appended to docs/results.md)"
REAP="$REAP" PYTHON="$PY" MODEL="$MODEL" CORPUS="$CORPUS" OUT="$OUT" CTX=$CTX EVAL_BYTES="$EVAL_BYTES" scripts/width_study.sh

step "what next-token KLD misses: needle grid (reap-moe-recall) and free generation (scripts/behaviour_study.sh; in docs/results.md)"
REAP="$REAP" PYTHON="$PY" MODEL="$MODEL" CORPUS="$CORPUS" OUT="$OUT" CTX=$CTX CALIB_TOKENS="$CALIB_TOKENS" scripts/behaviour_study.sh

step "task evidence: multiple choice and Winogrande of every cut, generative tasks and a pairwise judge (scripts/task_study.sh; in docs/results.md)"
REAP="$REAP" PYTHON="$PY" MODEL="$MODEL" CORPUS="$CORPUS" OUT="$OUT" CTX=$CTX scripts/task_study.sh

step "beyond REAP: MAN, MSAN, AIMER (weights alone), EAN, frequency and random on three models, and calibration size (scripts/criteria_study.sh; in docs/results.md)"
REAP="$REAP" PYTHON="$PY" MODEL="$MODEL" WIDE="$WIDE" CORPUS="$CORPUS" OUT="$OUT" CTX=$CTX CALIB_TOKENS="$CALIB_TOKENS" \
    EVAL_BYTES="$EVAL_BYTES" scripts/criteria_study.sh

step "the answer in one command: reap fit of reap-moe-wide at 6MB over the same four quantisations (scripts/fit_demo.sh; card docs/fit-card/)"
REAP="$REAP" WIDE="$WIDE" SOURCES="$WOUT" CORPUS="$CORPUS" HELDOUT="$OUT/frontier/heldout.txt" OUT="$OUT" CTX=$CTX \
    CALIB_TOKENS="$CALIB_TOKENS" BUDGET=6MB TASKS="$OUT/tasks/choice.bin" scripts/fit_demo.sh

step "the model card of the main cut (reap-50), written and checked from its receipts: docs/demo-card/"
"$REAP" report -m "$MODEL" --plan "$OUT/plans/reap-50.json" "$OUT/cuts/reap-50.gguf" --saliency "$OUT/saliency.gguf" \
    --eval "$OUT/eval/reap-50.json" --sweep "$OUT/sweep.json" --tasks "$OUT/tasks/choice.json" --judge "$OUT/tasks/judge.json" \
    -o docs/demo-card --force

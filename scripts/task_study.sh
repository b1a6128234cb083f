#!/usr/bin/env bash
# make demo's task evidence: what the cuts of reap-moe-tiny do to task accuracy
# and to their answers, by the tools a public card is judged by.
#   * multiple choice (llama-perplexity's binary format) and Winogrande (its CSV)
#     from the held-out split (tools/make_choice_tasks.py): every REAP, frequency
#     and random cut at 25/50/75% removed, its file scored as llama-perplexity
#     scores it, paired against the base (right -> wrong, wrong -> right,
#     McNemar's exact p);
#   * generative tasks (tools/make_gen_tasks.py, the chat set) answered by the
#     REAP and the random 50% cuts, cap hits and a recheck at a larger cap, and
#     reap judge of the two answers files with reap-moe-chat as the judge (the
#     numbers show the mechanics, not quality: a 15M byte-level model judges).
# Appends a "Task evidence" section to docs/results.md; the files stay in
# $OUT/tasks (choice.json is given to the demo card with --tasks, judge.json
# with --judge).
#
# Environment: REAP (binary), PYTHON, MODEL, CORPUS (folder of heldout.jsonl),
# OUT (the demo's work folder, holding cuts/NAME.gguf), CTX.
set -euo pipefail
cd "$(dirname "$0")/.."

REAP=${REAP:-build-pinned/bin/reap}
PY=${PYTHON:-/usr/bin/python3}
MODEL=${MODEL:-models/reap-moe-tiny.gguf}
CHAT=${CHAT:-models/reap-moe-chat.gguf}
CTX=${CTX:-256}
# a task's sequences are -c tokens each: the tasks are about 250 tokens
TCTX=256
T="$OUT/tasks"
mkdir -p "$T"
"$PY" tools/make_choice_tasks.py --heldout "$CORPUS/heldout.jsonl" --out "$T" --tasks 200 > /dev/null
"$PY" tools/make_gen_tasks.py --heldout "$CORPUS/heldout.jsonl" --out "$T" --tasks 20 > /dev/null

cuts=()
for m in reap frequency random; do for p in 25 50 75; do cuts+=(-p "$OUT/cuts/$m-$p.gguf"); done; done
"$REAP" eval -m "$MODEL" "${cuts[@]}" --multiple-choice "$T/choice.bin" -c $TCTX -t 2 --json -q > "$T/choice.json"
"$REAP" eval -m "$MODEL" "${cuts[@]}" --winogrande "$T/winogrande.csv" -c $TCTX -t 2 --json -q > "$T/winogrande.json"

rm -rf "$T/answers"
"$REAP" eval -m "$MODEL" -p "$OUT/cuts/reap-50.gguf" -p "$OUT/cuts/random-50.gguf" --tasks "$T/chat.jsonl" --recheck-cap 96 \
    --answers-dir "$T/answers" -t 2 -q > "$T/generate.txt"
cat > "$T/rubric.json" <<'EOF'
{"scale": [1, 5], "instructions": "Score how well the answer continues the text of the task: 5 fluent and on topic, 1 broken."}
EOF
"$REAP" judge "$T/answers/1-reap-50.gguf.answers.json" "$T/answers/2-random-50.gguf.answers.json" --judge "$CHAT" \
    --rubric "$T/rubric.json" -o "$T/judge.json" -t 2 -q --force > "$T/judge.txt"

"$PY" - "$T" >> docs/results.md <<'PY'
import json, os, sys
t = sys.argv[1]
def table(path, title):
    d = json.load(open(path))["choice"]
    print(f"\n### {title}\n")
    print(f"{d['task_format']}, {len(d['tasks'])} tasks built from the held-out split by tools/make_choice_tasks.py, "
          f"scored as llama-perplexity scores them (-c {d['settings']['n_ctx']}, {d['settings']['n_seq']} sequences); "
          "the 95% interval is Wilson's; the pair columns count the tasks each cut turned, against the base, "
          "and McNemar's exact two-sided p says whether that is more than chance.\n")
    print("| model | accuracy | 95% interval | right -> wrong | wrong -> right | McNemar p |")
    print("|---|---:|---:|---:|---:|---:|")
    for m in d["models"]:
        name = "base" if m["name"] == "base" else os.path.basename(m["name"]).replace(".gguf", "")
        lo, hi = m["ci95"]
        p = m.get("paired")
        cols = f"{p['right_to_wrong']} | {p['wrong_to_right']} | {p['p_value']:.3g}" if p else "| |"
        print(f"| {name} | {100*m['accuracy']:.1f}% | {100*lo:.1f}-{100*hi:.1f}% | {cols} |")
print("\n## Task evidence (reap eval --multiple-choice / --winogrande / --tasks, reap judge)\n")
print("What a public card is judged by, measured inside the tool on this model's own data "
      "(scripts/task_study.sh). The base is weak on these sets (a 15M byte-level model; "
      "the multiple-choice cue is a word its passage already holds), so read the rows "
      "against the base's, not against chance.")
table(os.path.join(t, "choice.json"), "Multiple choice (4 choices; chance 25%)")
table(os.path.join(t, "winogrande.json"), "Winogrande form (2 choices; chance 50%)")
print("\n### Generative tasks and a pairwise judge\n")
print("The chat set (tools/make_gen_tasks.py: continue a held-out text, cap 24 tokens, "
      "recheck at 96), answered greedily by the REAP and the random 50% cuts; then "
      "`reap judge` of the two answers files with reap-moe-chat as the judge, each pair "
      "in both orders. The judge is a 15M byte-level model: these numbers show the "
      "mechanics (a position-biased judge gives ties and a position rate far from "
      "50%), not which cut answers better.\n")
print("```")
print(open(os.path.join(t, "generate.txt")).read().rstrip())
print()
print(open(os.path.join(t, "judge.txt")).read().rstrip())
print("```")
PY
echo "  appended to docs/results.md ($T)"

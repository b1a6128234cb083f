#!/usr/bin/env bash
# bench/memory.sh: peak RSS of every reap command that reads a model, at two
# model sizes (1x and 4x: the same dims, 2 and 8 MoE layers) and two corpus
# sizes, to show which grow and by how much. reap's own data structures must
# not grow with the model's bytes: prune, verify, inspect, plan and imatrix
# import should stay flat; calibrate and eval map the model, so their peak holds
# the pages of the model they touch (llama.cpp's mmap) plus llama.cpp's buffers.
# Peak RSS is GNU time's %M (ru_maxrss of the child, KiB); printed as a
# markdown table.
#
# usage: bench/memory.sh [-d WORKDIR] [--reap PATH]
#   -d WORKDIR   where the models and outputs go (default ${TMPDIR:-/tmp}/reap-bench-memory; ~1 GB)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${TMPDIR:-/tmp}/reap-bench-memory"
reap="$here/build/bin/reap"
bin="$here/build/bin"
python="${REAP_PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3
while [ $# -gt 0 ]; do
    case "$1" in
        -d) work="$2"; shift 2 ;;
        --reap) reap="$2"; bin="$(dirname "$2")"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "memory.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$reap" ] || { echo "memory.sh: no reap binary at $reap (build it, or pass --reap)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "memory.sh: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }
mkdir -p "$work"

# Models: the zoo's qwen3moe builder, n_embd 256, 64 experts of ffn 512 (F16).
for layers in 2 8; do
    m="$work/m$layers.gguf"
    [ -f "$m" ] && continue
    "$python" - "$here/tools" "$m" "$layers" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import make_zoo
tmp = Path(sys.argv[2] + ".tmp")
m = make_zoo.Model("bench-memory", "qwen3moe", tmp)
make_zoo.build_qwen3moe(m, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_layer=int(sys.argv[3]),
                        n_expert=64, n_used=2, n_ff_exp=512)
tmp.rename(sys.argv[2])
PY
done

# Corpora: 1x and 4x the same domain-tagged samples; a plain text for eval and llama-imatrix.
"$python" - "$work" <<'PY'
import json, sys
words = "the router sends every token to a few experts and the rest of the layer never sees it".split()
def sample(i):
    return " ".join(words[(i * 7 + k) % len(words)] for k in range(60))
for name, n in (("c1", 12), ("c4", 48)):
    with open(f"{sys.argv[1]}/{name}.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"domain": ["en", "code", "ja"][i % 3], "text": sample(i)}) + "\n")
    with open(f"{sys.argv[1]}/{name}.txt", "w") as f:
        for i in range(n):
            f.write(sample(i) + "\n")
PY

peak() {  # peak RSS in MiB of a command; its output goes to $work/last.log
    /usr/bin/time -f '%M' -o "$work/rss" "$@" > "$work/last.log" 2>&1 || { cat "$work/last.log" >&2; return 1; }
    echo "scale=1; $(cat "$work/rss") / 1024" | bc
}

declare -A r
for layers in 2 8; do
    m="$work/m$layers.gguf"
    s="$work/s$layers.gguf"; p="$work/p$layers.json"; o="$work/o$layers.gguf"
    r[inspect,$layers]=$(peak "$reap" inspect "$m")
    r[calibrate1,$layers]=$(peak "$reap" calibrate -m "$m" --corpus "$work/c1.jsonl" -o "$s" -c 256 -t 2 --force --no-progress)
    r[calibrate4,$layers]=$(peak "$reap" calibrate -m "$m" --corpus "$work/c4.jsonl" -o "$work/s4-$layers.gguf" -c 256 -t 2 --force --no-progress)
    "$bin/llama-imatrix" -m "$m" -f "$work/c1.txt" -c 256 -t 2 -o "$work/i$layers.gguf" > "$work/imatrix.log" 2>&1
    r[imatrix,$layers]=$(peak "$reap" imatrix "$work/i$layers.gguf" -m "$m" -o "$work/si$layers.gguf" --force)
    r[plan,$layers]=$(peak "$reap" plan "$s" -m "$m" --keep 32 -o "$p" --force)
    rm -f "$o" "$work/SHA256SUMS"
    r[prune,$layers]=$(peak "$reap" prune -m "$m" --plan "$p" -o "$o" --force)
    r[verify,$layers]=$(peak "$reap" verify -m "$m" --plan "$p" "$o")
    r[eval1,$layers]=$(peak "$reap" eval -m "$m" -p "$o" -f "$work/c1.txt" -c 256 -t 2 -q)
    r[eval4,$layers]=$(peak "$reap" eval -m "$m" -p "$o" -f "$work/c4.txt" -c 256 -t 2 -q)
    r[ppl1,$layers]=$(peak "$bin/llama-perplexity" -m "$m" -f "$work/c1.txt" -c 256 -t 2)
done

printf '| command | model 1x (%s MiB) | model 4x (%s MiB) |\n|---|---|---|\n' \
    "$(( $(stat -c %s "$work/m2.gguf") >> 20 ))" "$(( $(stat -c %s "$work/m8.gguf") >> 20 ))"
row() { printf '| %s | %s MiB | %s MiB |\n' "$1" "${r[$2,2]}" "${r[$2,8]}"; }
row "reap inspect" inspect
row "reap calibrate, corpus 1x" calibrate1
row "reap calibrate, corpus 4x" calibrate4
row "reap imatrix (import)" imatrix
row "reap plan --keep 32" plan
row "reap prune (half)" prune
row "reap verify" verify
row "reap eval -p (half), text 1x" eval1
row "reap eval -p (half), text 4x" eval4
row "llama-perplexity, text 1x (reference)" ppl1

#!/usr/bin/env bash
# bench/streamed.sh: the streamed regime, a model larger than memory (issue 28).
# A 2.4 GB qwen3moe (zoo builder: 8 layers, 128 experts of ffn 768, 2 used, F16;
# the expert slabs are 99% of the bytes) runs inside a memory cgroup at a third
# of its file size, so its pages stream from disk: every ubatch reads most of
# the expert pool again, and the number of ubatches sets the time. Every run is
# done twice, in the cgroup ("streamed") and with no limit ("none"), each after
# `sync; echo 3 > /proc/sys/vm/drop_caches`, and measured for wall time, bytes
# read from disk (pgpgin delta of /proc/vmstat, KiB; also the process's own
# block input, GNU time %I x 512, which other users of the disk do not move) and
# peak RSS (GNU time %M). Runs, over the same 8,192 tokens of plain text, -c 512:
#   llama-imatrix at its defaults, and at -b 4096 -ub 4096
#   llama-perplexity -b 4096 -ub 4096          (the reference of issue 28)
#   reap calibrate -np 1                       (one window per decode; the flag is
#                                               left out where the binary lacks it)
#   reap calibrate -b 4096 -ub 4096            (packed windows)
#   reap calibrate -b 4096 -ub 4096 over a JSONL corpus of 24 samples of ~1.5 kB
#   reap sweep --keep 96,64,32 and reap eval --mask (keep 64), -b 4096 -ub 4096
# and, over 32,768 tokens of the same kind of text (text-32k.txt):
#   reap calibrate with no -b/-ub (the largest ubatch that fits the cgroup),
#   and at -ub 8192, 16384 and 32768 given by hand (refused up front where
#   they cannot fit, which the table shows as exit 2)
# Prints a markdown table (and writes it to WORKDIR/table.md), then the checks
# of issue 28's acceptance that these runs can decide.
#
# Needs root (the cgroup and drop_caches): run it as root, e.g. `sudo make bench`.
# Dropping the page cache slows every other program on the machine for a while.
#
# usage: bench/streamed.sh [-d WORKDIR] [--reap PATH] [--quick] [--only LIST]
#                          [--limit-mib N] [--timeout S] [-t N] [--top-k K]
#   -d WORKDIR     model, texts, logs, table (default ${TMPDIR:-/tmp}/reap-bench-streamed; ~2.5 GB)
#   --reap PATH    the reap binary (default build/bin/reap; llama.cpp's tools beside it)
#   --quick        smoke check: only the streamed packed calibrate
#   --only LIST    only these runs, comma-separated: imatrix, imatrix-ub4096, ppl-ub4096,
#                  calibrate-np1, calibrate-ub4096, calibrate-jsonl, sweep, eval-mask,
#                  calibrate-auto, calibrate-ub8192, calibrate-ub16384, calibrate-ub32768,
#                  eval-auto, eval-b4096, sweep-auto (eval --mask / sweep over 32,768 tokens)
#   --limit-mib N  the cgroup limit (default: a third of the model's bytes)
#   --timeout S    kill a run after S seconds and report it as such (default 1200)
#   -t N           threads (default nproc)
#   --top-k K      experts used per token of the model (default 2; the issue-38 model is
#                  top-8, written as model-top8.gguf beside the default one)
# Exit status: 0 all runs done, 1 a run failed or timed out, 2 usage / not root.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${TMPDIR:-/tmp}/reap-bench-streamed"
reap="$here/build/bin/reap"
bin="$here/build/bin"
python="${REAP_PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3
quick=0
only=""
limit_mib=0
run_timeout=1200
threads="$(nproc)"
top_k=2
all_runs="imatrix imatrix-ub4096 ppl-ub4096 calibrate-np1 calibrate-ub4096 calibrate-jsonl sweep eval-mask calibrate-auto calibrate-ub8192 calibrate-ub16384 calibrate-ub32768 eval-auto eval-b4096 sweep-auto"

die() { echo "streamed.sh: $1" >&2; exit "${2:-1}"; }
while [ $# -gt 0 ]; do
    case "$1" in
        -d) [ $# -ge 2 ] || die "-d wants a directory" 2; work="$2"; shift 2 ;;
        --reap) [ $# -ge 2 ] || die "--reap wants a path" 2; reap="$2"; bin="$(dirname "$2")"; shift 2 ;;
        --quick) quick=1; shift ;;
        --only) [ $# -ge 2 ] || die "--only wants a list" 2; only="${2//,/ }"; shift 2 ;;
        --limit-mib) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--limit-mib wants a number of MiB" 2; limit_mib="$2"; shift 2 ;;
        --timeout) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--timeout wants seconds" 2; run_timeout="$2"; shift 2 ;;
        -t) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "-t wants a thread count" 2; threads="$2"; shift 2 ;;
        --top-k) [[ "${2:-}" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] && [ "$2" -le 128 ] || die "--top-k wants 1 to 128" 2; top_k="$2"; shift 2 ;;
        -h|--help) sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" 2 ;;
    esac
done
for r in $only; do
    [[ " $all_runs " == *" $r "* ]] || die "--only: no run named '$r' (runs: $all_runs)" 2
done

if [ "$(id -u)" != 0 ]; then
    die "needs root: it puts each run in a memory cgroup and drops the page cache
(echo 3 > /proc/sys/vm/drop_caches) before each run. Run it as root (sudo bench/streamed.sh)." 2
fi

# ---- what it needs ----------------------------------------------------------------
[ -x "$reap" ] || die "no reap binary at $reap (make build, or pass --reap)"
for tool in llama-imatrix llama-perplexity; do
    [ -x "$bin/$tool" ] || die "no $tool at $bin/$tool (make build builds it)"
done
[ -x /usr/bin/time ] || die "needs GNU time (/usr/bin/time, Debian package time)"
command -v timeout > /dev/null || die "needs timeout (coreutils)"
"$python" -c 'import numpy' 2> /dev/null || die "$python has no numpy (the model is written by tools/make_zoo.py)"

# ---- the cgroup -------------------------------------------------------------------
cg_name="reap-bench-streamed-$$"
if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    cg_ver=1; cg="/sys/fs/cgroup/memory/$cg_name"; cg_limit_file="memory.limit_in_bytes"; cg_unlimited=-1
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    cg_ver=2; cg="/sys/fs/cgroup/$cg_name"; cg_limit_file="memory.max"; cg_unlimited=max
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control ||
        die "cannot enable the memory controller for child cgroups (/sys/fs/cgroup/cgroup.subtree_control)"
else
    die "no memory cgroup: neither v1 (/sys/fs/cgroup/memory) nor v2 with the memory controller (/sys/fs/cgroup)"
fi
run_pid=""
cleanup() {
    [ -z "$run_pid" ] || kill -KILL "$run_pid" 2> /dev/null || true
    if [ -d "$cg" ]; then
        # only processes this script put there can be inside
        local pids
        pids="$(cat "$cg/cgroup.procs" 2> /dev/null || true)"
        [ -z "$pids" ] || kill -KILL $pids 2> /dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2> /dev/null && break; sleep 0.5; done
        [ ! -d "$cg" ] || echo "streamed.sh: could not remove the cgroup $cg" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir "$cg" || die "cannot create the cgroup $cg"

mkdir -p "$work/logs"

# ---- the model: made once ----------------------------------------------------------
model="$work/model.gguf"
[ "$top_k" = 2 ] || model="$work/model-top$top_k.gguf"
if [ ! -f "$model" ]; then
    echo "writing the model $model (~2.4 GB, a minute or two)"
    "$python" - "$here/tools" "$model" "$top_k" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import make_zoo
out = Path(sys.argv[2])
tmp = Path(sys.argv[2] + ".tmp")
m = make_zoo.Model("bench-streamed", "qwen3moe", tmp)
# 8 x 128 experts x 3 slabs x 512 x 768 x F16 = 2.42 GB of experts; the rest ~12 MB
make_zoo.build_qwen3moe(m, n_embd=512, n_head=8, n_head_kv=2, head_dim=64, n_layer=8,
                        n_expert=128, n_used=int(sys.argv[3]), n_ff_exp=768)
tmp.rename(out)
PY
fi
model_bytes=$(stat -c %s "$model")
pool_bytes=$("$reap" inspect "$model" --json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["expert_pool_bytes"])')
[ "$limit_mib" -gt 0 ] || limit_mib=$(( model_bytes / 3 >> 20 ))
limit_bytes=$(( limit_mib << 20 ))

# ---- the texts: synthetic, deterministic --------------------------------------------
# plain text for every run (byte-level vocabulary: ~1 token a byte, so 24 kB is
# more than 8,192 tokens; every run is cut to 16 windows of 512 = 8,192 tokens)
# and a corpus of 24 samples of ~1.5 kB in two domains.
"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
words = ("the router sends every token to a few experts and the rest of the layer never sees it "
         "so a model larger than memory reads its expert pool from disk once for every ubatch "
         "while a large ubatch reads it once for many windows").split()
state = 12345
def rnd(n):
    global state
    state = (state * 1103515245 + 12345) % (1 << 31)
    return state % n
def prose(nbytes):
    out, line = [], []
    size = 0
    while size < nbytes:
        w = words[rnd(len(words))]
        line.append(w)
        size += len(w) + 1
        if len(line) >= 12:
            out.append(" ".join(line).capitalize() + ".")
            line = []
    if line:
        out.append(" ".join(line) + ".")
    return "\n".join(out)
idents = ["n_expert", "ubatch", "pool_bytes", "window", "count", "gate_sum", "layer", "tokens"]
def code(nbytes):
    out, size = [], 0
    while size < nbytes:
        a, b, c = idents[rnd(8)], idents[rnd(8)], rnd(4096)
        s = f"    if ({a} > {c}) {{ {b} += {a} * {c}; }}" if rnd(2) else f"    {a} = {b} / ({c} + 1);"
        out.append(s)
        size += len(s) + 1
    return "int step(void) {\n" + "\n".join(out) + "\n    return 0;\n}"
with open(f"{work}/text.txt", "w") as f:
    f.write(prose(24000) + "\n")
with open(f"{work}/text-32k.txt", "w") as f:
    f.write(prose(36000) + "\n")
with open(f"{work}/corpus.jsonl", "w") as f:
    for i in range(24):
        if i % 2:
            f.write(json.dumps({"domain": "code", "text": code(1500)}) + "\n")
        else:
            f.write(json.dumps({"domain": "prose", "text": prose(1500)}) + "\n")
PY
text="$work/text.txt"
text32k="$work/text-32k.txt"
corpus="$work/corpus.jsonl"
ctx=(-c 512 -t "$threads")
big=(-b 4096 -ub 4096)
tokens=8192
chunks=$(( tokens / 512 ))
# today's binary has no -np (windows per decode): it decodes one window at a time anyway
np1=()
calibrate_help="$("$reap" calibrate --help 2>&1 || true)"
if grep -qE '(^|[ ,])-np([ ,]|$)' <<< "$calibrate_help"; then np1=(-np 1); fi

# ---- one measured run ----------------------------------------------------------------
results="$work/results.tsv"
: > "$results"
failed=0
set_limit() { echo "$1" > "$cg/$cg_limit_file"; }
vm_pgpgin() { awk '$1 == "pgpgin" { print $2 }' /proc/vmstat; }
# measure NAME LIMIT(streamed|none) COMMAND...: appends a line to $results
measure() {
    local name="$1" mode="$2"; shift 2
    local log="$work/logs/$name-$mode.log" tf="$work/logs/$name-$mode.time"
    sync
    echo 3 > /proc/sys/vm/drop_caches
    if [ "$mode" = streamed ]; then set_limit "$limit_bytes"; else set_limit "$cg_unlimited"; fi
    [ "$cg_ver" != 1 ] || echo 0 > "$cg/memory.max_usage_in_bytes"
    local pg0 pg1 rc=0 status=ok
    pg0=$(vm_pgpgin)
    printf '%-18s %-8s ... ' "$name" "$mode"
    # the child joins the cgroup, then becomes GNU time, which runs the command
    # in the background and waited for, so that a signal reaches the trap at once
    timeout -s KILL "$run_timeout" bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
        /usr/bin/time -f '%e %M %I' -o "$tf" "$@" > "$log" 2>&1 &
    run_pid=$!
    wait "$run_pid" || rc=$?
    run_pid=""
    pg1=$(vm_pgpgin)
    if [ "$rc" = 137 ] && ! grep -q . "$tf" 2> /dev/null; then status="timeout after ${run_timeout} s"
    elif grep -q 'terminated by signal 9' "$tf" 2> /dev/null; then status="killed (signal 9; cgroup OOM?)"
    elif [ "$rc" != 0 ]; then status="exit $rc"; fi
    local wall=0 rss=0 inblk=0
    if [ -s "$tf" ]; then read -r wall rss inblk < <(grep -E '^[0-9.]+ [0-9]+ [0-9]+$' "$tf" | tail -1) || true; fi
    local read_b=$(( (pg1 - pg0) * 1024 )) own_b=$(( inblk * 512 ))
    local ntok
    ntok=$(sed -n 's/^calibrated \([0-9]*\) tokens.*/\1/p' "$log" | head -1)
    # eval's tokens: its windows of 512 (its JSON)
    [ -n "$ntok" ] || ntok=$(sed -n 's/^ *"n_windows": \([0-9]*\),*$/\1/p' "$log" | head -1 | awk '{ if ($1 != "") print $1 * 512 }')
    # calibrate's own count of ubatches, where it reports one ("decodes: ..., N ubatches")
    local nub ub
    nub=$(sed -n 's/^decodes: .*, \([0-9]*\) ubatches.*/\1/p' "$log" | head -1)
    # the -ub calibrate ran (its cost line), or eval's and sweep's (their JSON)
    ub=$(sed -n -e 's/^reap calibrate: .* -ub \([0-9]*\), at most.*/\1/p' -e 's/^ *"n_ubatch": \([0-9]*\),*$/\1/p' "$log" | head -1)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$mode" "$status" "$wall" "$read_b" "$own_b" "$rss" \
        "${ntok:-}" "${nub:-}" "${ub:-}" >> "$results"
    if [ "$status" = ok ]; then
        awk -v w="$wall" -v r="$read_b" -v o="$own_b" -v m="$rss" \
            'BEGIN { printf "%8.1f s, read %6.2f GB (process %6.2f GB), peak RSS %7.1f MB\n", w, r/1e9, o/1e9, m*1024/1e6 }'
    else
        echo "FAILED ($status); log $log:"; tail -5 "$log" | sed 's/^/    /'
        failed=1
    fi
}
# both ways, streamed first
measure2() { measure "$1" streamed "${@:2}"; [ "$quick" = 1 ] || measure "$1" none "${@:2}"; }
wanted() { if [ "$quick" = 1 ]; then [ "$1" = calibrate-ub4096 ]; elif [ -n "$only" ]; then [[ " $only " == *" $1 "* ]]; else true; fi; }

echo "model $model: $model_bytes bytes, expert pool $pool_bytes bytes; cgroup v$cg_ver limit $limit_mib MiB;" \
     "$tokens tokens of plain text, -c 512, -t $threads; calibrate's windows-per-decode flag: ${np1[*]:-(none: not in this binary)}"

sal="$work/saliency.gguf"
if wanted imatrix; then
    measure2 imatrix "$bin/llama-imatrix" -m "$model" -f "$text" "${ctx[@]}" --chunks "$chunks" -o "$work/imatrix.gguf"
fi
if wanted imatrix-ub4096; then
    measure2 imatrix-ub4096 "$bin/llama-imatrix" -m "$model" -f "$text" "${ctx[@]}" "${big[@]}" --chunks "$chunks" \
        -o "$work/imatrix-ub4096.gguf"
fi
if wanted ppl-ub4096; then
    measure2 ppl-ub4096 "$bin/llama-perplexity" -m "$model" -f "$text" "${ctx[@]}" "${big[@]}" --chunks "$chunks"
fi
if wanted calibrate-np1; then
    measure2 calibrate-np1 "$reap" calibrate -m "$model" --corpus "$text" -o "$work/saliency-np1.gguf" "${ctx[@]}" --ctx-past-trained \
        "${np1[@]}" --max-tokens "$tokens" --force --no-progress
fi
if wanted calibrate-ub4096; then
    measure2 calibrate-ub4096 "$reap" calibrate -m "$model" --corpus "$text" -o "$sal" "${ctx[@]}" --ctx-past-trained "${big[@]}" \
        --max-tokens "$tokens" --force --no-progress
fi
if wanted calibrate-jsonl; then
    measure2 calibrate-jsonl "$reap" calibrate -m "$model" --corpus "$corpus" -o "$work/saliency-jsonl.gguf" "${ctx[@]}" --ctx-past-trained \
        "${big[@]}" --force --no-progress
fi
if wanted calibrate-auto; then
    measure2 calibrate-auto "$reap" calibrate -m "$model" --corpus "$text32k" -o "$work/saliency-auto.gguf" "${ctx[@]}" --ctx-past-trained \
        --max-tokens 32768 --force --no-progress
fi
for ub in 8192 16384 32768; do
    if wanted "calibrate-ub$ub"; then
        measure2 "calibrate-ub$ub" "$reap" calibrate -m "$model" --corpus "$text32k" -o "$work/saliency-ub$ub.gguf" \
            "${ctx[@]}" --ctx-past-trained -ub "$ub" --max-tokens 32768 --force --no-progress
    fi
done
if wanted sweep || wanted eval-mask || wanted eval-auto || wanted eval-b4096 || wanted sweep-auto; then
    # sweep and eval --mask need an archive and a plan: made unmeasured where no run above made one
    [ -f "$sal" ] || "$reap" calibrate -m "$model" --corpus "$text" -o "$sal" "${ctx[@]}" --ctx-past-trained "${big[@]}" \
        --max-tokens "$tokens" --force --no-progress > "$work/logs/saliency.log" 2>&1 ||
        die "making the saliency archive failed; see $work/logs/saliency.log"
    "$reap" plan "$sal" -m "$model" --keep 64 -o "$work/plan-64.json" --force > "$work/logs/plan.log" 2>&1 ||
        die "reap plan failed; see $work/logs/plan.log"
fi
if wanted sweep; then
    measure2 sweep "$reap" sweep "$sal" -m "$model" -f "$text" --keep 96,64,32 "${ctx[@]}" --ctx-past-trained "${big[@]}" \
        --chunks "$chunks" --tmp-dir "$work" -o "$work/sweep.json" --force -q
fi
if wanted eval-mask; then
    measure2 eval-mask "$reap" eval -m "$model" --mask "$work/plan-64.json" -f "$text" "${ctx[@]}" --ctx-past-trained "${big[@]}" \
        --chunks "$chunks" --tmp-dir "$work" -q
fi
# eval and sweep over the 32,768 tokens: the decodes sized to the memory, and -b 4096 (reap's
# size before it measured); each pass (the base's, then every candidate's) reads the pool per ubatch
if wanted eval-auto; then
    measure2 eval-auto "$reap" eval -m "$model" --mask "$work/plan-64.json" -f "$text32k" "${ctx[@]}" --ctx-past-trained \
        --chunks 64 --tmp-dir "$work" --json -q
fi
if wanted eval-b4096; then
    measure2 eval-b4096 "$reap" eval -m "$model" --mask "$work/plan-64.json" -f "$text32k" "${ctx[@]}" --ctx-past-trained "${big[@]}" \
        --chunks 64 --tmp-dir "$work" --json -q
fi
if wanted sweep-auto; then
    measure2 sweep-auto "$reap" sweep "$sal" -m "$model" -f "$text32k" --keep 64 "${ctx[@]}" --ctx-past-trained \
        --chunks 64 --tmp-dir "$work" -o "$work/sweep-auto.json" --force -q
fi

# ---- the table ---------------------------------------------------------------------------
"$python" - "$results" "$pool_bytes" "$tokens" "$limit_mib" "${np1[*]:-}" > "$work/table.md" <<'PY'
import math, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
pool, tokens, limit_mib, np1 = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
label = {
    "imatrix": "llama-imatrix (defaults: -b 2048 -ub 512)",
    "imatrix-ub4096": "llama-imatrix -b 4096 -ub 4096",
    "ppl-ub4096": "llama-perplexity -b 4096 -ub 4096",
    "calibrate-np1": "reap calibrate " + (np1 or "(today's: one window per decode)"),
    "calibrate-ub4096": "reap calibrate -b 4096 -ub 4096",
    "calibrate-jsonl": "reap calibrate -b 4096 -ub 4096, JSONL 24 x ~1.5 kB",
    "sweep": "reap sweep --keep 96,64,32 -b 4096 -ub 4096",
    "eval-mask": "reap eval --mask (keep 64) -b 4096 -ub 4096",
    "calibrate-auto": "reap calibrate, no -b/-ub (32,768 tokens)",
    "calibrate-ub8192": "reap calibrate -ub 8192 (32,768 tokens)",
    "calibrate-ub16384": "reap calibrate -ub 16384 (32,768 tokens)",
    "calibrate-ub32768": "reap calibrate -ub 32768 (32,768 tokens)",
    "eval-auto": "reap eval --mask (keep 64), no -b/-ub (32,768 tokens, 2 passes)",
    "eval-b4096": "reap eval --mask (keep 64) -b 4096 -ub 4096 (32,768 tokens, 2 passes)",
    "sweep-auto": "reap sweep --keep 64, no -b/-ub (32,768 tokens, 2 passes)",
}
def needed(name, ntok, ub):
    # ubatches the tokens need at the -ub the run used (512: one window per decode)
    per = 512 if name == "calibrate-np1" else int(ub or 4096)
    return str(math.ceil(int(ntok or tokens) / per))
print("| run | limit | wall s | read GB | read GB (process) | peak RSS MB | read ÷ expert pool | "
      "tokens | -ub | ubatches needed | ubatches run |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name, mode, status, wall, read_b, own_b, rss, ntok, nub, ub in rows:
    lim = f"streamed ({limit_mib} MiB)" if mode == "streamed" else "none"
    if status != "ok":
        print(f"| {label[name]} | {lim} | {status} | | | | | | | | |")
        continue
    cal = name.startswith("calibrate")
    passes = name in ("eval-auto", "eval-b4096", "sweep-auto")   # the -ub from their JSON; 2 passes of 32,768 tokens
    print(f"| {label[name]} | {lim} | {float(wall):.1f} | {int(read_b)/1e9:.2f} | {int(own_b)/1e9:.2f} | "
          f"{int(rss)*1024/1e6:.0f} | {int(read_b)/pool:.2f} | {ntok if cal or passes else ''} | {ub if cal or passes else ''} | "
          f"{needed(name, ntok, ub) if cal else (str(2 * math.ceil(int(ntok or 32768) / int(ub))) if passes and ub else '')} | "
          f"{(nub or 'not reported') if cal else ''} |")

# issue 28's acceptance, where these runs decide it
get = {(r[0], r[1]): r for r in rows if r[2] == "ok"}
checks = []
def gb(b): return f"{b/1e9:.2f} GB"
c, p = get.get(("calibrate-ub4096", "streamed")), get.get(("ppl-ub4096", "streamed"))
if c and p:
    ok = int(c[4]) <= 1.5 * int(p[4])
    checks.append(f"streamed packed calibrate reads {gb(int(c[4]))} <= 1.5 x llama-perplexity's {gb(int(p[4]))}: {'yes' if ok else 'NO'}")
j = get.get(("calibrate-jsonl", "streamed"))
if j and j[7]:
    bound = 1.5 * pool * (math.ceil(int(j[7]) / 4096) + 1)
    ok = int(j[4]) <= bound
    checks.append(f"streamed JSONL calibrate ({j[7]} tokens) reads {gb(int(j[4]))} <= 1.5 x pool x (ceil(tokens/4096)+1) = {gb(bound)}: {'yes' if ok else 'NO'}")
a = get.get(("calibrate-auto", "streamed"))
if a and a[7] and a[9]:
    bound = 1.5 * pool * (math.ceil(int(a[7]) / int(a[9])) + 1)
    ok = int(a[4]) <= bound
    checks.append(f"streamed automatic calibrate chose -ub {a[9]} in {limit_mib} MiB and reads {gb(int(a[4]))} <= 1.5 x pool x (ceil(tokens/ub)+1) = {gb(bound)}: {'yes' if ok else 'NO'}")
elif ("calibrate-auto", "streamed") in {(r[0], r[1]) for r in rows}:
    checks.append("streamed automatic calibrate: FAILED (see the table)")
ea = get.get(("eval-auto", "streamed"))
for name in ("eval-auto", "sweep-auto"):
    e = get.get((name, "streamed"))
    # sweep's JSON does not say its -ub: it sizes its passes as eval does (one function), on the same model and tokens
    ubv = (e[9] if e else "") or (ea[9] if ea else "")
    if e and ubv:
        bound = 1.5 * pool * 2 * (math.ceil(int(e[7] or 32768) / int(ubv)) + 1)
        ok = int(e[4]) <= bound
        checks.append(f"streamed {name} (-ub {ubv} in {limit_mib} MiB) reads {gb(int(e[4]))} <= 1.5 x pool x 2 passes x (ceil(32768/ub)+1) = {gb(bound)}: {'yes' if ok else 'NO'}")
    elif (name, "streamed") in {(r[0], r[1]) for r in rows}:
        checks.append(f"streamed {name}: FAILED (see the table)")
n = get.get(("calibrate-ub4096", "none"))
if c and n:
    ok = float(c[3]) <= 1.3 * float(n[3])
    checks.append(f"streamed packed calibrate {float(c[3]):.1f} s <= 1.3 x its unlimited {float(n[3]):.1f} s: {'yes' if ok else 'NO'}")
o, on = get.get(("calibrate-np1", "streamed")), get.get(("calibrate-np1", "none"))
if o and on:
    checks.append(f"one window per decode: streamed {float(o[3]):.1f} s vs unlimited {float(on[3]):.1f} s ({float(o[3])/max(float(on[3]),1e-9):.1f}x)")
for mode in ("streamed", "none"):
    c2, i2 = get.get(("calibrate-ub4096", mode)), get.get(("imatrix-ub4096", mode))
    if c2 and i2:
        ok = float(c2[3]) <= float(i2[3])
        checks.append(f"packed calibrate {float(c2[3]):.1f} s <= llama-imatrix -ub 4096 {float(i2[3]):.1f} s ({mode}): {'yes' if ok else 'NO'}")
if checks:
    print()
    for line in checks:
        print("* " + line)
PY
echo
cat "$work/table.md"
echo
echo "table: $work/table.md; logs: $work/logs"
exit "$failed"

#!/usr/bin/env bash
# bench/score_vs_cat.sh: how `reap score` (AIMER from the weights alone) compares
# with reading the same model once with `cat MODEL > /dev/null`, in one run, inside
# a memory cgroup smaller than the model. `reap score` reads every expert slab once
# and keeps nothing, so it should cost about one sequential read of the file: the
# ratios score/cat of wall time and of bytes read from disk say how close it is.
#
# Each command runs after `sync; echo 3 > /proc/sys/vm/drop_caches`, alternating
# cat, score, cat, score ... so that a drifting machine moves both; each is
# measured for wall seconds and bytes read from disk (the pgpgin delta of
# /proc/vmstat, in KiB, x 1024: other users of the disk move it too). The medians
# over the runs are printed side by side with the ratios score/cat.
# The output of `reap score` goes to WORKDIR/scores.gguf and is removed after each run.
#
# Needs root (the cgroup and drop_caches): run it as root, e.g. `sudo bench/score_vs_cat.sh`.
# Dropping the page cache slows every other program on the machine for a while.
#
# usage: bench/score_vs_cat.sh [--reap PATH] [-m MODEL.gguf] [--limit SIZE] [-n RUNS] [-d WORKDIR]
#        bench/score_vs_cat.sh [REAP [MODEL.gguf [SIZE]]]
#   --reap PATH   the reap binary (default build-pinned/bin/reap under the repository)
#   -m MODEL      the model (default: WORKDIR/model.gguf, the ~2.4 GB qwen3moe of
#                 bench/streamed.sh, made once the same way: tools/make_zoo.py, 8 layers,
#                 128 experts of ffn 768, 2 used, F16)
#   --limit SIZE  the cgroup's memory limit, bytes or with a K/M/G suffix (default 800M)
#   -n RUNS       measured runs of each command (default 3)
#   -d WORKDIR    model and output (default ${TMPDIR:-/tmp}/reap-bench-streamed, the
#                 directory bench/streamed.sh uses, so the two share the model)
#   --timeout S   kill a run after S seconds (default 1200)
# Exit status: 0 all runs done, 1 a run failed, 2 usage / not root / no cgroup.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reap="$here/build-pinned/bin/reap"
model=""
limit="800M"
runs=3
work="${TMPDIR:-/tmp}/reap-bench-streamed"
run_timeout=1200
python="${REAP_PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3

die() { echo "score_vs_cat.sh: $1" >&2; exit "${2:-1}"; }
npos=0
while [ $# -gt 0 ]; do
    case "$1" in
        --reap) [ $# -ge 2 ] || die "--reap wants a path" 2; reap="$2"; shift 2 ;;
        -m) [ $# -ge 2 ] || die "-m wants a model" 2; model="$2"; shift 2 ;;
        --limit) [ $# -ge 2 ] || die "--limit wants a size" 2; limit="$2"; shift 2 ;;
        -n) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "-n wants a number of runs" 2; runs="$2"; shift 2 ;;
        -d) [ $# -ge 2 ] || die "-d wants a directory" 2; work="$2"; shift 2 ;;
        --timeout) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--timeout wants seconds" 2; run_timeout="$2"; shift 2 ;;
        -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown argument $1 (see --help)" 2 ;;
        *)  # positional: REAP, MODEL, SIZE in that order
            case "$npos" in
                0) reap="$1" ;;
                1) model="$1" ;;
                2) limit="$1" ;;
                *) die "too many arguments (see --help)" 2 ;;
            esac
            npos=$((npos + 1)); shift ;;
    esac
done

# the limit in bytes (the cgroup would take the suffix itself; the comparison with the model needs bytes)
[[ "$limit" =~ ^[0-9]+[kKmMgG]?$ ]] || die "--limit wants bytes or a number with K, M or G, not '$limit'" 2
case "$limit" in
    *[kK]) limit_bytes=$(( ${limit%?} << 10 )) ;;
    *[mM]) limit_bytes=$(( ${limit%?} << 20 )) ;;
    *[gG]) limit_bytes=$(( ${limit%?} << 30 )) ;;
    *)     limit_bytes=$limit ;;
esac
[ "$limit_bytes" -gt 0 ] || die "--limit wants more than 0 bytes" 2

if [ "$(id -u)" != 0 ]; then
    die "needs root: it runs each command in a memory cgroup and drops the page cache
(echo 3 > /proc/sys/vm/drop_caches) before each run. Run it as root (sudo bench/score_vs_cat.sh)." 2
fi
[ -x "$reap" ] || die "no reap binary at $reap (make build-pinned, or pass --reap)"
command -v timeout > /dev/null || die "needs timeout (coreutils)"

# ---- the model: the one bench/streamed.sh makes, made once ------------------------------
mkdir -p "$work"
if [ -z "$model" ]; then
    model="$work/model.gguf"
    if [ ! -f "$model" ]; then
        "$python" -c 'import numpy' 2> /dev/null || die "$python has no numpy (the model is written by tools/make_zoo.py)"
        echo "writing the model $model (~2.4 GB, a minute or two)"
        "$python" - "$here/tools" "$model" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import make_zoo
out = Path(sys.argv[2])
tmp = Path(sys.argv[2] + ".tmp")
m = make_zoo.Model("bench-streamed", "qwen3moe", tmp)
# bench/streamed.sh's model: 8 x 128 experts x 3 slabs x 512 x 768 x F16 = 2.42 GB of experts
make_zoo.build_qwen3moe(m, n_embd=512, n_head=8, n_head_kv=2, head_dim=64, n_layer=8,
                        n_expert=128, n_used=2, n_ff_exp=768)
tmp.rename(out)
PY
    fi
fi
[ -f "$model" ] || die "no model at $model" 2
model_bytes=$(stat -L -c %s "$model")
if [ "$limit_bytes" -ge "$model_bytes" ]; then
    echo "score_vs_cat.sh: warning: the limit ($limit_bytes bytes) is not smaller than the model ($model_bytes bytes)" >&2
fi
out="$work/scores.gguf"

# ---- the cgroup (v1 as bench/streamed.sh does it; v2 where there is no v1) --------------
cg_name="reap_score_bench"
if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    cg="/sys/fs/cgroup/memory/$cg_name"; cg_limit_file="memory.limit_in_bytes"
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    cg="/sys/fs/cgroup/$cg_name"; cg_limit_file="memory.max"
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control ||
        die "cannot enable the memory controller for child cgroups (/sys/fs/cgroup/cgroup.subtree_control)" 2
else
    die "no memory cgroup: neither v1 (/sys/fs/cgroup/memory) nor v2 with the memory controller (/sys/fs/cgroup)" 2
fi
# a cgroup left by an earlier run that was killed: reused only when nothing is in it
if [ -d "$cg" ]; then
    [ -z "$(cat "$cg/cgroup.procs" 2> /dev/null)" ] || die "the cgroup $cg exists and has processes in it (another run?)" 2
    rmdir "$cg" || die "cannot remove the stale cgroup $cg" 2
fi
run_pid=""
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    [ -z "$run_pid" ] || kill -KILL "$run_pid" 2> /dev/null || true
    rm -f "$out"
    if [ -d "$cg" ]; then
        # only processes this script put there can be inside
        local pids
        pids="$(cat "$cg/cgroup.procs" 2> /dev/null || true)"
        # shellcheck disable=SC2086  # one pid a word
        [ -z "$pids" ] || kill -KILL $pids 2> /dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cg" 2> /dev/null && break; sleep 0.5; done
        [ ! -d "$cg" ] || echo "score_vs_cat.sh: could not remove the cgroup $cg" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir "$cg" || die "cannot create the cgroup $cg" 2
echo "$limit_bytes" > "$cg/$cg_limit_file" || die "cannot set $cg/$cg_limit_file to $limit_bytes" 2

# ---- one measured run ------------------------------------------------------------------
vm_pgpgin() { awk '$1 == "pgpgin" { print $2 }' /proc/vmstat; }
now() { date +%s.%N; }
failed=0
last_wall=0 last_read=0
# measure NAME COMMAND...: runs it in the cgroup after dropping the page cache; sets last_wall, last_read
measure() {
    local name="$1"; shift
    local log="$work/score_vs_cat-$name.log" rc=0 pg0 pg1 t0 t1
    rm -f "$out"
    sync
    echo 3 > /proc/sys/vm/drop_caches
    pg0=$(vm_pgpgin); t0=$(now)
    # the child shell puts its own pid in the cgroup, then becomes the command
    # shellcheck disable=SC2016  # expanded by the child shell
    timeout -s KILL "$run_timeout" bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$cg" "$@" > "$log" 2>&1 &
    run_pid=$!
    wait "$run_pid" || rc=$?
    run_pid=""
    t1=$(now); pg1=$(vm_pgpgin)
    rm -f "$out"
    last_wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    last_read=$(( (pg1 - pg0) * 1024 ))
    if [ "$rc" != 0 ]; then
        echo "score_vs_cat.sh: $name failed (exit $rc$([ "$rc" != 137 ] || echo ': killed: timeout or cgroup OOM')); log $log:" >&2
        tail -5 "$log" | sed 's/^/    /' >&2
        failed=1
    fi
    printf '  %-6s %9.3f s  %8.3f GB read\n' "$name" "$last_wall" "$(awk -v r="$last_read" 'BEGIN { print r / 1e9 }')"
}

echo "model $model: $model_bytes bytes; cgroup $cg, limit $limit_bytes bytes; $runs runs of each"
declare -a w_cat w_score r_cat r_score
for ((i = 1; i <= runs; ++i)); do
    echo "run $i"
    # shellcheck disable=SC2016  # expanded by the child shell
    measure cat bash -c 'exec cat "$1" > /dev/null' _ "$model"
    w_cat+=("$last_wall"); r_cat+=("$last_read")
    measure score "$reap" score -m "$model" -o "$out"
    w_score+=("$last_wall"); r_score+=("$last_read")
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.6f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mwc=$(median "${w_cat[@]}"); mws=$(median "${w_score[@]}")
mrc=$(median "${r_cat[@]}"); mrs=$(median "${r_score[@]}")
echo
printf '%-22s %12s %14s\n' "median of $runs" "wall s" "read GB"
printf '%-22s %12.3f %14.3f\n' "cat MODEL > /dev/null" "$mwc" "$(awk -v r="$mrc" 'BEGIN { print r / 1e9 }')"
printf '%-22s %12.3f %14.3f\n' "reap score" "$mws" "$(awk -v r="$mrs" 'BEGIN { print r / 1e9 }')"
awk -v a="$mws" -v b="$mwc" -v c="$mrs" -v d="$mrc" 'BEGIN {
    printf "%-22s %12s %14s\n", "ratio score/cat", (b > 0 ? sprintf("%.2f", a / b) : "n/a"), (d > 0 ? sprintf("%.2f", c / d) : "n/a") }'
printf 'model bytes %s; the read bytes of cat / model bytes: %s\n' "$model_bytes" \
    "$(awk -v r="$mrc" -v m="$model_bytes" 'BEGIN { printf "%.2f", r / m }')"
[ "$failed" = 0 ] || echo "score_vs_cat.sh: a run FAILED (above): the medians include it" >&2
exit "$failed"

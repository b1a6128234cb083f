#!/usr/bin/env bash
# Fuzzes each reader of a user's file for a given time:
#   scripts/fuzz.sh [--cpu] SECONDS [HARNESS...]      (default: every harness)
# SECONDS is wall time, or with --cpu the CPU time the fuzzer itself uses (on a
# shared machine the two differ: a watcher asks libFuzzer to stop, with
# SIGUSR1, once the process has used that much; the wall time is then bounded
# at four times it). Needs the fuzz build (make fuzz does it).
# Each harness keeps its working corpus in BUILD/corpus/H (grown over runs,
# seeded from fuzz/seeds/H) and writes any crashing input to BUILD/crashes/H/;
# one line per run goes to BUILD/fuzz-runs.tsv (date, harness, seconds,
# executions, corpus files, crashes, CPU seconds, wall seconds). A crashing
# input belongs in fuzz/regressions/H/ once the reader is fixed.
set -euo pipefail
usage="usage: scripts/fuzz.sh [--cpu] SECONDS [HARNESS...]"
cpu_bound=0
if [ "${1:-}" = "--cpu" ]; then
    cpu_bound=1
    shift
fi
seconds=${1:?$usage}
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz: SECONDS must be a whole number, not '$seconds' ($usage)" >&2; exit 2; }
shift
build=${BUILD_FUZZ:-build-san}
here=$(cd "$(dirname "$0")/.." && pwd)
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
    harnesses=(gguf gguf_split plan archive imatrix_gguf imatrix_legacy corpus kld)
fi
ticks=$(getconf CLK_TCK)

# CPU seconds (user + system) process $1 has used so far; empty once it is gone.
cpu_of() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }   # the fields after the command name, which may hold spaces
    read -r -a f <<< "$stat"
    echo $(( (f[11] + f[12]) / ticks ))   # utime and stime: fields 14 and 15
}

status=0
for h in "${harnesses[@]}"; do
    bin="$build/bin/fuzz_$h"
    [ -x "$bin" ] || { echo "fuzz: no $bin (build the fuzz targets first: make fuzz)" >&2; exit 2; }
    mkdir -p "$build/corpus/$h" "$build/crashes/$h"
    wall_limit=$seconds
    [ $cpu_bound -eq 1 ] && wall_limit=$((4 * seconds))
    echo "fuzz: $h for ${seconds}s$([ $cpu_bound -eq 1 ] && echo " of CPU")"
    log="$build/crashes/$h/last-run.log"
    rm -f "$log.cpu"
    start=$(date +%s)
    # CPU seconds next to wall seconds: on a shared machine they differ.
    /usr/bin/time -f '%U %S' -o "$log.cpu" "$bin" -max_total_time="$wall_limit" -timeout=${FUZZ_TIMEOUT:-60} -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$build/crashes/$h/" "$build/corpus/$h" "$here/fuzz/seeds/$h" > "$log" 2>&1 &
    timer=$!
    if [ $cpu_bound -eq 1 ]; then
        fuzzer=""
        for _ in $(seq 50); do
            fuzzer=$(pgrep -P "$timer" || true)
            [ -n "$fuzzer" ] && break
            sleep 0.1
        done
        while [ -n "$fuzzer" ] && kill -0 "$fuzzer" 2>/dev/null; do
            used=$(cpu_of "$fuzzer")
            if [ -n "$used" ] && [ "$used" -ge "$seconds" ]; then
                kill -USR1 "$fuzzer" 2>/dev/null || true   # libFuzzer stops gracefully, with its final stats
                break
            fi
            sleep 2
        done
    fi
    rc=0
    wait "$timer" || rc=$?
    wall=$(( $(date +%s) - start ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    crashes=$(find "$build/crashes/$h" -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' | wc -l)
    files=$(find "$build/corpus/$h" -type f | wc -l)
    cpu=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%.0f", $1 + $2 }' "$log.cpu" 2>/dev/null)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$h" "$seconds" "${execs:-?}" "$files" "$crashes" "${cpu:-?}" \
        "$wall" >> "$build/fuzz-runs.tsv"
    echo "fuzz: $h: ${execs:-?} executions, $files corpus files, $crashes crashing inputs, ${cpu:-?} CPU seconds in ${wall}s (exit $rc)"
    if [ "$rc" -ne 0 ]; then
        status=1
        tail -40 "$log"
    fi
done
exit $status

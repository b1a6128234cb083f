#!/usr/bin/env bash
# Fuzzes each reader of a user's file for a given time: scripts/fuzz.sh
# SECONDS [HARNESS...] (default: all). Needs the fuzz build (make fuzz does it).
# Each harness keeps its working corpus in BUILD/corpus/H (grown over runs,
# seeded from fuzz/seeds/H) and writes any crashing input to BUILD/crashes/H/;
# one line per run goes to BUILD/fuzz-runs.tsv (date, harness, seconds,
# executions, corpus files, crashes, CPU seconds). A crashing input belongs in
# fuzz/regressions/H/ once the reader is fixed.
set -euo pipefail
seconds=${1:?usage: scripts/fuzz.sh SECONDS [HARNESS...]}
shift
build=${BUILD_FUZZ:-build-fuzz}
here=$(cd "$(dirname "$0")/.." && pwd)
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
    harnesses=(gguf gguf_split plan archive imatrix_gguf imatrix_legacy corpus kld)
fi
status=0
for h in "${harnesses[@]}"; do
    bin="$build/bin/fuzz_$h"
    [ -x "$bin" ] || { echo "fuzz: no $bin (build the fuzz targets first: make fuzz)" >&2; exit 2; }
    mkdir -p "$build/corpus/$h" "$build/crashes/$h"
    echo "fuzz: $h for ${seconds}s"
    log="$build/crashes/$h/last-run.log"
    rc=0
    # CPU seconds next to wall seconds: on a shared machine they differ.
    /usr/bin/time -f '%U %S' -o "$log.cpu" "$bin" -max_total_time="$seconds" -timeout=${FUZZ_TIMEOUT:-60} -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$h/" "$build/corpus/$h" "$here/fuzz/seeds/$h" > "$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    crashes=$(find "$build/crashes/$h" -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' | wc -l)
    files=$(find "$build/corpus/$h" -type f | wc -l)
    cpu=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%.0f", $1 + $2 }' "$log.cpu" 2>/dev/null)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$h" "$seconds" "${execs:-?}" "$files" "$crashes" "${cpu:-?}" \
        >> "$build/fuzz-runs.tsv"
    echo "fuzz: $h: ${execs:-?} executions, $files corpus files, $crashes crashing inputs (exit $rc)"
    if [ "$rc" -ne 0 ]; then
        status=1
        tail -40 "$log"
    fi
done
exit $status

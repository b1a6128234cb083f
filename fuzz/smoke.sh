#!/bin/sh
# One harness's smoke test for ctest (fuzz/CMakeLists.txt): a fixed number of
# inputs from the committed seeds, from a fixed seed, with address
# randomisation off, so that the same command tries the same inputs every
# time, however fast the machine is.
#   fuzz/smoke.sh HARNESS_BINARY WORK_DIR SEEDS_DIR RUNS
# WORK_DIR is emptied first (libFuzzer adds the inputs it finds to it; crashing
# inputs are written there too). Why each flag:
#   -seed=1 -runs=N  what is tried is fixed by the seed and the count, not the clock;
#   -reload=0        libFuzzer rereads its corpus folder every second by default;
#   setarch -R       libFuzzer's mutations use the operands of the comparisons the
#                    reader makes (-use_cmp), pointers among them: with random
#                    addresses two runs drift apart (measured: 1,306 and 1,307
#                    new inputs in fuzz_corpus's 20,000; with setarch -R, the
#                    same inputs every run). Where it is refused (a container that
#                    forbids personality(2)) the run goes on with random addresses.
# What stays: the stack and heap layout still follow the lengths of the paths
# and the environment, so another checkout may try other inputs after the
# first few thousand; it tries as many.
# -timeout (one input) and -rss_limit_mb only catch a hung or bloated input.
set -eu
bin=$1 work=$2 seeds=$3 runs=$4
rm -rf "$work"
mkdir -p "$work"
norand=""
if setarch -R true 2> /dev/null; then
    norand="setarch -R"
else
    echo "fuzz smoke: setarch -R is refused here; addresses stay random, so runs may try different inputs" >&2
fi
exec $norand "$bin" -seed=1 -runs="$runs" -reload=0 -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work" "$seeds"

#!/usr/bin/env bash
# bench/mtp_large_ubatch.sh: an MTP arch calibrated at -ub 32768 with -fa off
# gives the archive of -ub 4096 (issue 38, acceptance 2), on a machine that can
# hold it. An MTP model's windows share one unified KV cache (its MTP context
# reads the target's rows in batch order), so without flash attention its
# attention scores grow with the square of the ubatch: the zoo's glm4moe with an
# MTP block needs about 27 GB at -ub 32768 for 125 windows of 256 (F32 cache).
# The tests check -ub 8192 at -fa off and -ub 32768 at -fa on; this is the run
# they cannot make on a 24 GB machine.
#
# Writes the model with make_arch_models (as the tests do) and a plain text of
# 32,000 byte tokens, runs reap calibrate at -ub 32768 and -ub 4096 (-fa off,
# F32 cache, --memory 64G: only checked against), and compares the two archives
# tensor by tensor (counts exact; sums: largest relative difference).
# Where the memory available is under 30 GB it needs root: it adds a 16 GiB
# swap file beside WORKDIR for the run and removes it after.
#
# usage: bench/mtp_large_ubatch.sh [-d WORKDIR] [--bin DIR]
#   -d WORKDIR   model, text, archives, logs (default ${TMPDIR:-/tmp}/reap-bench-mtp-ub)
#   --bin DIR    reap and make_arch_models (default build-pinned/bin)
# Exit status: 0 the archives are equal, 1 they differ or a run failed, 2 usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${TMPDIR:-/tmp}/reap-bench-mtp-ub"
bin="$here/build-pinned/bin"
python="${REAP_PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3
while [ $# -gt 0 ]; do
    case "$1" in
        -d) [ $# -ge 2 ] || { echo "mtp_large_ubatch.sh: -d wants a directory" >&2; exit 2; }; work="$2"; shift 2 ;;
        --bin) [ $# -ge 2 ] || { echo "mtp_large_ubatch.sh: --bin wants a directory" >&2; exit 2; }; bin="$2"; shift 2 ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "mtp_large_ubatch.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
for b in reap make_arch_models; do
    [ -x "$bin/$b" ] || { echo "mtp_large_ubatch.sh: needs $bin/$b (make build-pinned)" >&2; exit 2; }
done
mkdir -p "$work"

model="$work/glm4moe-mtp.gguf"
[ -f "$model" ] || "$bin/make_arch_models" --arch glm4moe --variant mtp --out "$model" > "$work/make.log" 2>&1
text="$work/text.txt"
"$python" - "$text" <<'PY'
import sys
parts = ["The router picks the top k experts of every token. ", "for (int i = 0; i < n; ++i) s += a[i]; ",
         "Le renard brun saute par-dessus le chien. ", "3.14159 * 2.71828 = 8.53972; ",
         "def f(x): return [y * y for y in range(x)]\n", "Experts that a workload rarely uses are cut. "]
t, i = "", 0
while len(t) < 34000:
    t += parts[(i * 7 + i // 6) % 6] + str(i % 97) + " "
    i += 1
open(sys.argv[1], "w").write(t)
PY

swap=""
avail_kb=$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)
if [ "$avail_kb" -lt $((30 * 1024 * 1024)) ]; then
    [ "$(id -u)" = 0 ] || { echo "mtp_large_ubatch.sh: under 30 GB available: run as root (it adds a swap file)" >&2; exit 2; }
    swap="$work/swapfile"
    trap 'swapoff "$swap" 2> /dev/null || true; rm -f "$swap"' EXIT
    fallocate -l 16G "$swap" && chmod 600 "$swap" && mkswap -q "$swap" && swapon "$swap"
    echo "added a 16 GiB swap file ($swap) for the run"
fi

for ub in 32768 4096; do
    /usr/bin/time -f "%e s, peak RSS %M KB" -o "$work/ub$ub.time" "$bin/reap" calibrate -m "$model" --corpus "$text" \
        -c 256 -ub "$ub" -fa off -ctk f32 -ctv f32 -t "$(nproc)" --memory 64G -o "$work/ub$ub.gguf" --force --no-progress \
        > "$work/ub$ub.log" 2>&1 || { echo "-ub $ub failed:"; tail -5 "$work/ub$ub.log"; exit 1; }
    echo "-ub $ub: $(grep -E '^reap calibrate: -ub' "$work/ub$ub.log" | cut -c17-140)... $(cat "$work/ub$ub.time")"
done

PYTHONPATH="$here/third_party/llama.cpp/gguf-py" "$python" - "$work/ub32768.gguf" "$work/ub4096.gguf" <<'PY'
import sys
import numpy as np
import gguf
a, b = ({t.name: np.array(t.data) for t in gguf.GGUFReader(p).tensors} for p in sys.argv[1:3])
if a.keys() != b.keys():
    sys.exit(f"the archives hold different tensors: {sorted(a)} vs {sorted(b)}")
exact, worst = True, 0.0
for name in sorted(a):
    x, y = a[name], b[name]
    if name.endswith(".count"):
        exact &= bool(np.array_equal(x, y))
    else:
        d = np.abs(x - y) / np.maximum(np.maximum(np.abs(x), np.abs(y)), 1e-300)
        worst = max(worst, float(d.max()))
print(f"-ub 32768 vs -ub 4096 at -fa off: counts {'exact' if exact else 'DIFFER'}, "
      f"sums' largest relative difference {worst:.3g}")
sys.exit(0 if exact and worst <= 2e-3 else 1)
PY

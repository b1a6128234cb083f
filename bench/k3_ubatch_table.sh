#!/usr/bin/env bash
# bench/k3_ubatch_table.sh: the ubatch reap calibrate chooses for Kimi-K3, on
# paper. Writes a GGUF with K3's shape and no weights (the header of a k=1536
# MXFP4 build; the data section is a hole in a sparse file, so the file is
# 1.4 TB long and takes a few MB of disk), then runs `reap calibrate --dry-run`
# on it for a corpus of 264,141 tokens (the public REAP55 build's count) at
# several --memory budgets: llama.cpp lays out the contexts of each candidate
# ubatch for that shape and reports their buffers (pass_size.h), and calibrate
# prints its choice and the reads it implies. Nothing is decoded.
#
# K3's public numbers (docs/cookbook.md): 93 blocks (1 dense, 92 MoE), 896
# routed experts, 16 used, hidden size 7,168, expert length 1,536, vocabulary
# 163,840, 3 KDA blocks to 1 MLA block. Assumed here, as kimi-linear and
# DeepSeek-V3 have them: 64 heads, KDA head dim 128, MLA kv_lora_rank 512,
# qk_nope 128, qk_rope 64, v_head 128, one shared expert, no expert latent,
# dense FFN 18,432, attention-residual blocks of 8.
#
# Two llama.cpp flags a streamed MXFP4 source needs anyway: --no-repack (else
# llama.cpp copies the MXFP4 experts into a repacked CPU buffer: 1.45 TB of
# memory) and --lazy-mode on (else it maps the file with MAP_POPULATE, which
# reads the whole file at load). llama.cpp's scheduler also allocates its
# graph metadata up front, about 100 GB at -ub 32768 for this shape, nearly
# all of it never touched: a machine with less memory than that needs
# vm.overcommit_memory=1 to make the allocation (this script sets it for its
# runs when run as root, and puts the old value back).
#
# usage: bench/k3_ubatch_table.sh [-d WORKDIR] [--reap PATH] [--memory "64G 128G 256G 498G"]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${TMPDIR:-/tmp}/reap-bench-k3"
reap="$here/build/bin/reap"
budgets="64G 128G 256G 498G"
python="${REAP_PYTHON:-/usr/bin/python3}"
while [ $# -gt 0 ]; do
    case "$1" in
        -d) work="$2"; shift 2 ;;
        --reap) reap="$2"; shift 2 ;;
        --memory) budgets="$2"; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "k3_ubatch_table.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$reap" ] || { echo "k3_ubatch_table.sh: needs $reap (make build)" >&2; exit 1; }
mkdir -p "$work"

model="$work/k3-shape.gguf"
if [ ! -f "$model" ]; then
    "$python" - "$here/tools" "$model" <<'PY'
import math, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import make_zoo
from make_zoo import gguf

class ShapeOnly(make_zoo.Model):
    """Tensor infos only: the data section is left as a hole."""
    def __init__(self, path):
        self.name, self.arch = "k3-shape", "kimi-k3"
        self.w = gguf.GGUFWriter(str(path), self.arch)
        self.w.add_name("reap-k3-shape")
        self.n_vocab = make_zoo.add_vocab(self.w, 163840)
        self.facts = {}
        self.data_bytes = 0
    def _info(self, name, ne, qtype):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        nbytes = math.prod(ne) // block * size
        self.w.add_tensor_info(name, tuple(reversed(ne)), None, nbytes, raw_dtype=qtype)
        self.data_bytes += gguf.GGUFWriter.ggml_pad(nbytes, self.w.data_alignment)
    def weight(self, name, ne, qtype=make_zoo.F16, scale=None): self._info(name, ne, qtype)
    def ones(self, name, ne): self._info(name, ne, make_zoo.F32)
    def vec(self, name, ne, scale=0.02, offset=0.0): self._info(name, ne, make_zoo.F32)
    def write(self, ftype):
        self.w.add_file_type(int(ftype))
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_ti_data_to_file()
        f = self.w.fout[0]
        f.seek(0, 2)
        start = gguf.GGUFWriter.ggml_pad(f.tell(), self.w.data_alignment)
        f.truncate(start + self.data_bytes)
        self.w.close()

out = Path(sys.argv[2])
tmp = Path(sys.argv[2] + ".tmp")
m = ShapeOnly(tmp)
make_zoo.build_kimi_k3(m, n_embd=7168, n_head=64, n_layer=93, n_expert=896, n_used=16, n_ff_exp=1536, latent=0,
                       kda_head_dim=128, kv_lora=512, qk_nope=128, qk_rope=64, v_dim=128, n_ff=18432, res_block=8)
tmp.rename(out)
PY
fi

# plain text, more than 264,141 tokens of it (--max-tokens cuts there)
text="$work/text-264141.txt"
if [ ! -f "$text" ]; then
    "$python" -c '
import sys
words = "the router picks the top experts of every token and the rest never see it".split()
out, n, i = [], 0, 0
while n < 264141 * 2:
    w = words[i % len(words)] + str(i % 97)
    out.append(w); n += len(w) + 1; i += 1
open(sys.argv[1], "w").write(" ".join(out) + "\n")
' "$text"
fi

printf 'model  %s (%s bytes long, %s on disk)\n' "$model" "$(stat -c %s "$model")" "$(du -h "$model" | cut -f1)"
overcommit=$(cat /proc/sys/vm/overcommit_memory)
if [ "$(id -u)" = 0 ] && [ "$overcommit" != 1 ]; then
    trap 'echo "$overcommit" > /proc/sys/vm/overcommit_memory' EXIT
    echo 1 > /proc/sys/vm/overcommit_memory
fi
for mem in $budgets; do
    log="$work/dry-run-$mem.log"
    "$reap" calibrate --dry-run -m "$model" --corpus "$text" --max-tokens 264141 -c 4096 --ctx-past-trained --memory "$mem" -t 1 \
        --no-repack --lazy-mode on > "$log" 2>&1 || {
        echo "--memory $mem: reap calibrate failed:"; tail -5 "$log"; continue; }
    echo "== --memory $mem"
    grep -E '^reap calibrate: ' "$log" | sed 's/^reap calibrate: /  /'
done

#!/usr/bin/env python3
"""Writes the fuzzers' seed inputs (fuzz/seeds/HARNESS/*): small, valid files of
every format reap.cpp reads, made from scratch (the model and the imatrix with
llama.cpp's gguf-py, the split set with llama-gguf-split) or by reap itself (the
archive and the plan, from that imatrix and model). Run once; the seeds are
committed. Usage: fuzz/make_seeds.py BUILD_BIN_DIR [GGUF_PY_DIR]"""
import json
import random
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

here = Path(__file__).resolve().parent
bin_dir = Path(sys.argv[1]).resolve()
gguf_py = Path(sys.argv[2]) if len(sys.argv) > 2 else here.parent / "third_party/llama.cpp/gguf-py"
sys.path.insert(0, str(gguf_py))
import gguf  # noqa: E402

N_LAYER, N_EXPERT, N_USED, N_EMBD, N_FF = 3, 16, 4, 8, 4
rng = np.random.default_rng(7)
seeds = here / "seeds"


def out(harness: str, name: str) -> Path:
    d = seeds / harness
    d.mkdir(parents=True, exist_ok=True)
    return d / name


def write_model(path: Path) -> None:
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_block_count(N_LAYER)
    w.add_context_length(64)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(16)
    w.add_expert_feed_forward_length(N_FF)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tensor("token_embd.weight", rng.standard_normal((32, N_EMBD)).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.ffn_gate_inp.weight", rng.standard_normal((N_EXPERT, N_EMBD)).astype(np.float32))
        for slab, shape in (("gate", (N_EXPERT, N_FF, N_EMBD)), ("up", (N_EXPERT, N_FF, N_EMBD)),
                            ("down", (N_EXPERT, N_EMBD, N_FF))):
            w.add_tensor(f"blk.{i}.ffn_{slab}_exps.weight", rng.standard_normal(shape).astype(np.float16))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def counts_row() -> np.ndarray:
    c = rng.integers(0, 40, N_EXPERT).astype(np.float32)
    c[3] = 0  # one expert that saw no token
    return c


def write_imatrix_gguf(path: Path) -> None:
    w = gguf.GGUFWriter(str(path), arch="")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", ["seed.txt"])
    w.add_uint32("imatrix.chunk_count", 4)
    w.add_uint32("imatrix.chunk_size", 64)
    for i in range(N_LAYER):
        counts = counts_row()
        for slab, n_in in (("gate", N_EMBD), ("up", N_EMBD), ("down", N_FF)):
            name = f"blk.{i}.ffn_{slab}_exps.weight"
            sums = (rng.random((N_EXPERT, n_in)) * counts[:, None]).astype(np.float32)
            w.add_tensor(name + ".in_sum2", sums)
            w.add_tensor(name + ".counts", counts.reshape(N_EXPERT, 1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_imatrix_legacy(path: Path) -> None:
    entries = []
    for i in range(N_LAYER):
        vals = (rng.random(N_EXPERT * N_FF) * 5 + 1).astype(np.float32)
        vals[3 * N_FF:4 * N_FF] = 4.0  # ncall in every channel: an expert that saw nothing
        entries.append((f"blk.{i}.ffn_down_exps.weight", 4, vals))
    b = struct.pack("<i", len(entries))
    for name, ncall, vals in entries:
        nb = name.encode()
        b += struct.pack("<i", len(nb)) + nb + struct.pack("<ii", ncall, len(vals)) + vals.tobytes()
    b += struct.pack("<i", 4) + struct.pack("<i", 8) + b"seed.txt"
    path.write_bytes(b)


def write_kld(path: Path) -> None:
    n_ctx, n_vocab, n_chunk = 8, 10, 2
    b = b"_logits_" + struct.pack("<iii", n_ctx, n_vocab, n_chunk)
    b += struct.pack(f"<{n_ctx * n_chunk}i", *[random.Random(k).randrange(n_vocab) for k in range(n_ctx * n_chunk)])
    for _ in range(n_chunk * (n_ctx - 1 - n_ctx // 2)):
        b += struct.pack("<ff", 0.01, -9.0)
        b += struct.pack(f"<{n_vocab}H", *rng.integers(0, 65535, n_vocab).tolist())  # n_vocab is even: no pad
    path.write_bytes(b)


def write_corpus(path: Path) -> None:
    lines = [
        {"domain": "en", "text": "The quick brown fox jumps over the lazy dog."},
        {"domain": "code", "text": "int main() { return 0; }\n"},
        {"domain": "ja", "messages": [{"role": "user", "content": "こんにちは"},
                                      {"role": "assistant", "content": "はい", "reasoning_content": "…"}]},
    ]
    path.write_text("\n".join(json.dumps(l, ensure_ascii=False) for l in lines) + "\n\n")


def run(*args, cwd=None) -> None:
    subprocess.run([str(a) for a in args], check=True, stdout=subprocess.DEVNULL, cwd=cwd)


def main() -> int:
    model = out("gguf", "tiny-moe.gguf")
    write_model(model)
    imat = out("imatrix_gguf", "tiny-moe.imatrix.gguf")
    write_imatrix_gguf(imat)
    write_imatrix_legacy(out("imatrix_legacy", "tiny-moe.imatrix.dat"))
    write_kld(out("kld", "tiny.kld"))
    write_corpus(out("corpus", "corpus.jsonl"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        archive = out("archive", "tiny-moe.saliency.gguf")
        run(bin_dir / "reap", "imatrix", "--domain", f"en={imat}", "-m", model, "-o", archive, "--force")
        # from the archive's folder, so the plan's provenance names it without a machine's path
        run(bin_dir / "reap", "plan", archive.name, "-m", model, "--keep", "8", "-o", out("plan", "keep8.json"), "--force",
            cwd=archive.parent)
        n_tensors = 2 + 5 * N_LAYER
        run(bin_dir / "llama-gguf-split", "--split", "--split-max-tensors", str((n_tensors + 1) // 2), model,
            tmp / "tiny")
        s1 = (tmp / "tiny-00001-of-00002.gguf").read_bytes()
        s2 = (tmp / "tiny-00002-of-00002.gguf").read_bytes()
        out("gguf_split", "tiny-moe-2-shards.bin").write_bytes(struct.pack("<I", len(s1)) + s1 + s2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

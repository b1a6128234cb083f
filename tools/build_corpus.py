#!/usr/bin/env python3
"""Builds reap.cpp's multi-domain corpus from Debian packages.

The project's test model is trained on, calibrated on and evaluated on this
corpus, so it has to exist on every machine without any download but Debian's.
Sources (downloaded with `apt-get download`, unpacked into the output folder,
never installed, never committed):

  en    English man pages            manpages, manpages-dev
  code  C headers and Python stdlib  libc6-dev, linux-libc-dev, libpython3.11-stdlib
  ja    Japanese man pages           manpages-ja, manpages-ja-dev
  zh    Chinese man pages            manpages-zh (zh_CN and zh_TW)
  de    German man pages             manpages-de   (tail language)
  fr    French man pages             manpages-fr   (tail language)

Man pages are rendered to plain text by man-db (`man -l`, then `col -bx`).
Every source file goes to exactly one split, chosen by a hash of its domain and
path: train (90%), calib (5%), heldout (5%). Files are taken in hash order until
the domain's byte cap is reached, and split into samples of at most
--sample-bytes at line boundaries. Output (JSONL in the corpus format of
DESIGN.md): OUT/{train,calib,heldout}.jsonl, plus OUT/manifest.json with the
package versions, per-domain counts and a SHA-256 of each split. The result is
deterministic for a given set of package versions.
"""

import argparse
import concurrent.futures
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

DOMAINS = {
    # domain: (packages, path filter, byte cap)
    "en":   (["manpages", "manpages-dev"], r"/usr/share/man/man[1-8]/", 4_000_000),
    "code": (["libc6-dev", "linux-libc-dev", "libpython3.11-stdlib"], r"(/usr/include/.*\.h|/usr/lib/python3\.11/.*\.py)$", 4_000_000),
    "ja":   (["manpages-ja", "manpages-ja-dev"], r"/usr/share/man/ja/man[1-8]/", 3_000_000),
    "zh":   (["manpages-zh"], r"/usr/share/man/zh_(CN|TW)/man[1-8]/", 3_000_000),
    "de":   (["manpages-de"], r"/usr/share/man/de/man[1-8]/", 1_000_000),
    "fr":   (["manpages-fr"], r"/usr/share/man/fr/man[1-8]/", 1_000_000),
}
SPLITS = (("heldout", 0.05), ("calib", 0.10), ("train", 1.0))


def unit_hash(*parts):
    """A number in [0, 1) fixed by the parts: the same on every machine."""
    h = hashlib.sha256("\0".join(parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def split_of(domain, relpath):
    # zh_CN and zh_TW render the same page: keep both in one split.
    u = unit_hash("split", domain, re.sub(r"/zh_(CN|TW)/", "/zh/", relpath))
    for name, upper in SPLITS:
        if u < upper:
            return name
    raise AssertionError("unreachable")


def fetch_packages(debdir, packages):
    """apt-get download the packages not already in debdir; returns {pkg: (version, deb path)}."""
    os.makedirs(debdir, exist_ok=True)
    have = {}
    for f in os.listdir(debdir):
        if f.endswith(".deb"):
            have[f.split("_")[0]] = f
    missing = [p for p in packages if p not in have]
    if missing:
        subprocess.run(["apt-get", "download", "-q"] + missing, cwd=debdir, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for f in os.listdir(debdir):
            if f.endswith(".deb"):
                have[f.split("_")[0]] = f
    out = {}
    for p in packages:
        if p not in have:
            sys.exit(f"build_corpus: apt-get download {p} produced no .deb")
        out[p] = (have[p].split("_")[1], os.path.join(debdir, have[p]))
    return out


def unpack(deb, dest):
    if not os.path.isdir(dest):
        tmp = dest + ".tmp"
        subprocess.run(["rm", "-rf", tmp], check=True)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
        os.rename(tmp, dest)


def render_man(path):
    """Plain text of a man page: man-db renders, col strips overstrikes."""
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="0")
    try:
        man = subprocess.run(["man", "-E", "UTF-8", "--no-hyphenation", "--no-justification", "-l", path],
                             env=env, capture_output=True, timeout=60)
        col = subprocess.run(["col", "-bx"], input=man.stdout, env=env, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ""
    text = col.stdout.decode("utf-8", errors="replace")
    lines = text.split("\n")
    # Drop the running header and footer that man puts on every page.
    if len(lines) > 4:
        lines = lines[1:-2]
    # man indents body text by 7 columns: that is layout, not language.
    lines = [l[7:] if l.startswith("       ") else l for l in lines]
    text = "\n".join(l.rstrip() for l in lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
    return text if "\ufffd" not in text else ""


def read_code(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
    except (UnicodeDecodeError, OSError):
        return ""
    return re.sub(r"\n{3,}", "\n\n", text.replace("\r\n", "\n")).strip("\n")


def chunk(text, limit):
    """Samples of at most `limit` bytes, cut at line boundaries (a longer line is cut hard)."""
    out, cur, size = [], [], 0
    for line in text.split("\n"):
        b = len(line.encode()) + 1
        if cur and size + b > limit:
            out.append("\n".join(cur))
            cur, size = [], 0
        while b > limit:
            # a single over-long line: cut on characters, never inside one
            part, n = [], 0
            for ch in line:
                cb = len(ch.encode())
                if n + cb > limit - 1:
                    break
                part.append(ch)
                n += cb
            out.append("".join(part))
            line = line[len(part):]
            b = len(line.encode()) + 1
        cur.append(line)
        size += b
    if cur and any(l.strip() for l in cur):
        out.append("\n".join(cur))
    return [s for s in out if len(s.strip()) >= 32]


def list_sources(domain, root, pattern):
    rx = re.compile(pattern)
    files = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            full = os.path.join(dirpath, n)
            rel = "/" + os.path.relpath(full, root)
            if rx.search(rel) and not os.path.islink(full):
                files.append(rel)
    # Hash order: a deterministic sample of the package that does not favour
    # any section or letter of the alphabet.
    files.sort(key=lambda r: (unit_hash("order", domain, r), r))
    return files


def load_text(domain, root, rel):
    path = root + rel
    if domain == "code":
        return read_code(path)
    return render_man(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (created); JSONL splits and manifest.json go here")
    ap.add_argument("--sample-bytes", type=int, default=2048, help="maximum bytes per sample (default 2048)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every domain's byte cap (default 1.0)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="parallel renderers")
    args = ap.parse_args()

    out = os.path.abspath(args.out)
    manifest_path = os.path.join(out, "manifest.json")
    settings = {"sample_bytes": args.sample_bytes, "scale": args.scale, "builder": hashlib.sha256(open(__file__, "rb").read()).hexdigest()}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            old = json.load(f)
        if old.get("settings") == settings:
            print(f"build_corpus: {out} is up to date")
            return
    os.makedirs(out, exist_ok=True)
    debdir = os.path.join(out, "debs")
    versions = {}
    samples = {name: [] for name, _ in SPLITS}
    stats = {}
    for domain, (packages, pattern, cap) in DOMAINS.items():
        cap = int(cap * args.scale)
        debs = fetch_packages(debdir, packages)
        chosen = []  # (root, rel)
        for p, (ver, deb) in debs.items():
            versions[p] = ver
            root = os.path.join(out, "src", p)
            unpack(deb, root)
            chosen += [(root, rel) for rel in list_sources(domain, root, pattern)]
        chosen.sort(key=lambda x: (unit_hash("order", domain, x[1]), x[1]))
        total = 0
        counts = {name: [0, 0] for name, _ in SPLITS}
        # Render in parallel, in order, a window at a time so the cap stops early.
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            window = max(8, 4 * args.jobs)
            for start in range(0, len(chosen), window):
                batch = chosen[start:start + window]
                texts = list(pool.map(lambda x: load_text(domain, *x), batch))
                for (root, rel), text in zip(batch, texts):
                    if total >= cap or not text:
                        continue
                    split = split_of(domain, rel)
                    for s in chunk(text, args.sample_bytes):
                        samples[split].append({"domain": domain, "text": s, "source": rel})
                        counts[split][0] += 1
                        counts[split][1] += len(s.encode())
                        total += len(s.encode())
                if total >= cap:
                    break
        stats[domain] = {k: {"samples": v[0], "bytes": v[1]} for k, v in counts.items()}
        print(f"build_corpus: {domain:5s} " + "  ".join(f"{k} {v[0]} samples / {v[1]} B" for k, v in counts.items()), flush=True)

    digests = {}
    for split, rows in samples.items():
        path = os.path.join(out, f"{split}.jsonl")
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{split}.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
        digests[split] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    manifest = {"packages": versions, "domains": stats, "sha256": digests, "settings": settings}
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".manifest.")
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(tmp, manifest_path)
    print(f"build_corpus: wrote {out}/{{train,calib,heldout}}.jsonl")


if __name__ == "__main__":
    main()

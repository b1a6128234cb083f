#!/usr/bin/env python3
"""check_layers.py: the layering rule of src/, checked from its #include lines.

Each folder of src/ sits on a floor; a file may include its own folder's
headers and those of folders on lower floors only: no arrow up, none sideways
(two folders of one floor that included each other would be a cycle), and no
header that includes itself through others. An include is resolved as the
compiler does: a quoted name against the file's own folder first, then
against src/ (an include directory, so an angle-bracket name that is a src/
file counts too), "../" and all. The core (every floor below llama/) links
ggml-base, OpenSSL and nlohmann/json and nothing else: it may include no
other header than the standard C++ and POSIX ones, ggml's, OpenSSL's,
nlohmann's and the build's generated reap_*.h. A folder that is on no floor
is refused too: a new folder is placed here first.

Usage: check_layers.py [ROOT]   (ROOT: the repository, default the current folder)
Prints every violation and exits 1, or one line of counts and exits 0.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# Lowest first. llama/ and cli/ are the only floors that link libllama.
FLOORS = [
    ["util"],
    ["gguf", "corpus", "metrics"],
    ["moe"],
    ["saliency"],
    ["plan"],
    ["formats", "prune"],
    ["report"],
    ["llama"],
    ["cli"],
]
LINKS_LLAMA = {"llama", "cli"}
# what the core may include besides src/: the standard library (C++ and
# POSIX), ggml, OpenSSL, nlohmann/json, the build's generated headers
CORE_EXTERNAL = re.compile(r'^([a-z_]+|c[a-z]+|[a-z]+\.h|sys/[a-z_]+\.h|ggml[-a-z]*\.h|openssl/.*|nlohmann/.*|reap_[a-z_]+\.h)$')
POSIX_C = {"unistd.h", "fcntl.h", "dirent.h", "signal.h", "errno.h", "time.h", "poll.h", "pthread.h", "stdio.h", "stdlib.h",
           "string.h", "stdint.h", "inttypes.h", "limits.h", "math.h", "assert.h", "float.h", "stddef.h", "stdarg.h", "ctype.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def core_may_include(name: str) -> bool:
    if "/" not in name and name.endswith(".h"):
        return name in POSIX_C or name.startswith("ggml") or name.startswith("reap_")
    return CORE_EXTERNAL.match(name) is not None


def resolve(src: Path, here: Path, quoted: bool, name: str) -> Path | None:
    """The src/ file an include names (as the compiler searches), or None."""
    for base in ([here] if quoted else []) + [src]:
        cand = Path(os.path.normpath(base / name))
        if cand.is_file():
            return cand
    return None


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    src = root / "src"
    floor = {name: i for i, names in enumerate(FLOORS) for name in names}
    problems: list[str] = []
    headers: dict[str, list[str]] = {}   # src-relative header -> the src headers it includes
    n_files = n_edges = 0
    for f in sorted(src.rglob("*")):
        if not f.is_file() or f.suffix not in (".h", ".cpp"):
            continue
        rel = f.relative_to(src).as_posix()
        folder = rel.split("/")[0] if "/" in rel else ""
        if folder not in floor:
            problems.append(f"src/{rel}: its folder '{folder}' is on no floor of scripts/check_layers.py")
            continue
        n_files += 1
        deps = []
        for line_no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(2)
            target_file = resolve(src, f.parent, m.group(1) == '"', name)
            if target_file is None or src.resolve() not in target_file.resolve().parents:
                if folder not in LINKS_LLAMA and not core_may_include(name):
                    problems.append(f"src/{rel}:{line_no}: includes {name}, below llama/: the core includes only the standard "
                                    "library, ggml, OpenSSL, nlohmann/json and the build's reap_*.h (it never links libllama)")
                continue
            target_rel = target_file.resolve().relative_to(src.resolve()).as_posix()
            target = target_rel.split("/")[0] if "/" in target_rel else ""
            n_edges += 1
            deps.append(target_rel)
            if target not in floor:
                problems.append(f"src/{rel}:{line_no}: includes {name} (src/{target_rel}), in no folder of a floor")
            elif target != folder and floor[target] >= floor[folder]:
                way = "up" if floor[target] > floor[folder] else "sideways"
                problems.append(f"src/{rel}:{line_no}: includes {name}: an arrow {way}, from {folder}/ "
                                f"(floor {floor[folder]}) to {target}/ (floor {floor[target]})")
        if f.suffix == ".h":
            headers[rel] = [d for d in deps if d.endswith(".h")]
    # header cycles: a depth-first walk, each cycle reported once by its path
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(h: str) -> None:
        state[h] = 1
        stack.append(h)
        for d in headers.get(h, []):
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                problems.append("a cycle of headers: " + " -> ".join(cycle))
            elif d in headers and d not in state:
                walk(d)
        stack.pop()
        state[h] = 2

    for h in sorted(headers):
        if h not in state:
            walk(h)
    if problems:
        for p in problems:
            print("check_layers: " + p)
        return 1
    print(f"check_layers: {n_files} files, {n_edges} includes of src/ headers, {len(FLOORS)} floors: "
          "no arrow up or sideways, no cycle, nothing outside the core's libraries below llama/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

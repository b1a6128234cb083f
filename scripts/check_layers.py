#!/usr/bin/env python3
"""check_layers.py: the layering rule of src/, checked from its #include lines.

Each folder of src/ sits on a floor; a file may include its own folder's
headers and those of folders on lower floors only: no arrow up, none sideways
(two folders of one floor that included each other would be a cycle), no
header that includes itself through others, and no folder below llama/ that
includes a llama.cpp header (the core links ggml-base, never libllama). A
folder that is on no floor is refused too: a new folder is placed here first.

Usage: check_layers.py [ROOT]   (ROOT: the repository, default the current folder)
Prints every violation and exits 1, or one line of counts and exits 0.
"""

from __future__ import annotations

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
# llama.cpp's own headers, as reap's sources name them
LLAMA_HEADER = re.compile(r'^(llama[-.].*|common\.h|chat\.h|arg\.h|sampling\.h|log\.h)$')
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


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
            base = name.rsplit("/", 1)[-1]
            if folder not in LINKS_LLAMA and LLAMA_HEADER.match(base):
                problems.append(f"src/{rel}:{line_no}: includes llama.cpp's {name}, below llama/ (the core never links libllama)")
            if m.group(1) != '"' or "/" not in name:
                continue
            target = name.split("/")[0]
            if not (src / name).is_file():
                if target in floor:
                    problems.append(f"src/{rel}:{line_no}: includes {name}, which is not in src/")
                continue
            n_edges += 1
            deps.append(name)
            if target != folder and floor[target] >= floor[folder]:
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
    print(f"check_layers: {n_files} files, {n_edges} includes between src/ headers, {len(FLOORS)} floors: "
          "no arrow up or sideways, no cycle, no llama.cpp header below llama/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

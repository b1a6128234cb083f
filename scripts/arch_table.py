#!/usr/bin/env python3
"""The architecture table of docs/architectures.md, from a run of ArchMatrix.

tests/test_llama_archs.cpp writes one row per arch it ran to
BUILD/test-tmp/archs/table/<arch>.tsv (arch, MoE blocks, inspect, calibrate,
gate check, prune, never-routed; tab-separated). This script puts those rows,
in the order `make_arch_models --list` gives the archs, between the table's
markers in the document. Every arch the generator writes must have a row and
every row must be such an arch, so the table is exactly what that run saw.

usage: scripts/arch_table.py [--build DIR] [--doc FILE]   (`make arch-table`)
Exit status: 0 written, 2 a missing or damaged row, or no markers in the doc.
"""
import argparse
import datetime
import os
import subprocess
import sys

BEGIN = "<!-- arch-table begin: scripts/arch_table.py writes this table; do not edit -->"
END = "<!-- arch-table end -->"
COLUMNS = ["arch", "MoE blocks", "inspect (layout table)", "calibrate: Σ count",
           "calibrate: Σ g·f = ffn_moe_out (nodes read)", "random 50% cut, unsorted",
           "pruning the experts a prompt never routes"]


def fail(msg):
    print("arch_table: " + msg, file=sys.stderr)
    sys.exit(2)


def generator_archs(generator):
    """The archs make_arch_models writes, in its order (its 'skip ...' lines left out)."""
    try:
        out = subprocess.run([generator, "--list"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"cannot list the archs with {generator}: {e}")
    return [line for line in out.splitlines() if line and not line.startswith("skip ")]


def read_rows(rows_dir):
    rows = {}
    if not os.path.isdir(rows_dir):
        fail(f"no rows in {rows_dir}: run test_llama_archs (ArchMatrix) first")
    for name in sorted(os.listdir(rows_dir)):
        if not name.endswith(".tsv"):
            continue
        path = os.path.join(rows_dir, name)
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        if len(lines) != 1:
            fail(f"{path}: {len(lines)} lines, expected one row")
        fields = lines[0].split("\t")
        if len(fields) != len(COLUMNS):
            fail(f"{path}: {len(fields)} fields, expected {len(COLUMNS)}")
        if fields[0] + ".tsv" != name:
            fail(f"{path}: the row is for '{fields[0]}'")
        rows[fields[0]] = fields
    return rows


def cell(text):
    return text.replace("|", "\\|")


def table(archs, rows, llama_version):
    missing = [a for a in archs if a not in rows]
    if missing:
        fail("no row for " + ", ".join(missing) + " (did ArchMatrix run for every arch?)")
    extra = sorted(set(rows) - set(archs))
    if extra:
        fail("rows for archs the generator does not write: " + ", ".join(extra) + " (a stale run?)")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    lines = [BEGIN,
             f"Written by scripts/arch_table.py (`make arch-table`) on {when} from the rows ArchMatrix wrote "
             f"(llama.cpp {llama_version}, {len(archs)} archs):",
             "",
             "| " + " | ".join(COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for a in archs:
        lines.append("| " + " | ".join(cell(c) for c in rows[a]) + " |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def llama_version(root):
    """The pinned llama.cpp, as scripts/fetch-llama.sh names it (package-lock.json)."""
    try:
        import json
        with open(os.path.join(root, "package-lock.json"), encoding="utf-8") as f:
            lock = json.load(f)
        return "from node-llama-cpp@" + lock["packages"]["node_modules/node-llama-cpp"]["version"]
    except (OSError, KeyError, ValueError):
        return "(pin unknown)"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(root, "build-pinned"), help="the build folder (default build-pinned/, the tests' build)")
    ap.add_argument("--doc", default=os.path.join(root, "docs", "architectures.md"))
    args = ap.parse_args()
    archs = generator_archs(os.path.join(args.build, "bin", "make_arch_models"))
    if not archs:
        fail("make_arch_models lists no archs")
    rows = read_rows(os.path.join(args.build, "test-tmp", "archs", "table"))
    with open(args.doc, encoding="utf-8") as f:
        doc = f.read()
    begin, end = doc.find(BEGIN), doc.find(END)
    if begin < 0 or end < begin:
        fail(f"{args.doc}: no table markers ({BEGIN} ... {END})")
    new = doc[:begin] + table(archs, rows, llama_version(root)) + doc[end + len(END) + 1:]
    tmp = args.doc + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, args.doc)
    print(f"arch_table: {len(archs)} rows written to {args.doc}")


if __name__ == "__main__":
    main()

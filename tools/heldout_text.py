#!/usr/bin/env python3
"""The evaluation text of make demo: the first CAP bytes of held-out samples of
every domain of a corpus (JSONL, {"domain", "text"}), written as a corpus.

usage: heldout_text.py SRC.jsonl DST.jsonl CAP
"""
import json
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, dst, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
    used = {}
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for line in f:
            r = json.loads(line)
            n = used.get(r["domain"], 0)
            if n >= cap:
                continue
            used[r["domain"]] = n + len(r["text"].encode())
            out.write(json.dumps({"domain": r["domain"], "text": r["text"]}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

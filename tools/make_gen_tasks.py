#!/usr/bin/env python3
"""Generative task files (reap eval --tasks) from the held-out corpus split, for
the project's own models:

  OUT/recall.jsonl  for reap-moe-recall: a stretch of held-out text with the
                    sentence "The secret code is V." put in at a word boundary
                    (V a seeded value like KVX-7391), then the completion lead
                    "\\n\\nThe secret code is"; the answer {"exact": V}, max_tokens 9
                    (the model's trained needle form, completion variant).
  OUT/chat.jsonl    for reap-moe-chat: a user turn of held-out text (chat
                    messages, rendered through the model's template); the
                    model continues the text and ends its turn. The answer
                    {"regex": "\\\\S"} (it wrote something); max_tokens 24, which
                    some continuations reach before they end, so that cap hits
                    and a recheck at a larger cap have something to count.

Deterministic for a given corpus and --seed.

usage: make_gen_tasks.py --heldout HELDOUT.jsonl --out DIR [--tasks N] [--seed S]
"""
import argparse
import json
import os
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    texts = []
    with open(a.heldout, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            t = " ".join(r.get("text", "").split())
            if r.get("domain") in ("en", "code") and t.isascii() and len(t) > 200:
                texts.append(t)
    if len(texts) < 2 * a.tasks:
        raise SystemExit(f"make_gen_tasks: {len(texts)} English and code held-out samples, {2 * a.tasks} needed")
    rng.shuffle(texts)
    os.makedirs(a.out, exist_ok=True)
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    recall, chat = [], []
    for i in range(a.tasks):
        text = texts[i][:90]
        text = text[:text.rfind(" ")]
        words = text.split(" ")
        at = rng.randrange(1, len(words))
        value = "".join(rng.choice(letters) for _ in range(3)) + "-" + str(rng.randrange(1000, 10000))
        prompt = " ".join(words[:at]) + f" The secret code is {value}. " + " ".join(words[at:]) + "\n\nThe secret code is"
        recall.append({"id": f"recall-{i}", "prompt": prompt, "answer": {"exact": value}, "max_tokens": 9})
        user = texts[a.tasks + i][:60]
        user = user[:user.rfind(" ")]
        chat.append({"id": f"chat-{i}", "messages": [{"role": "user", "content": user}], "answer": {"regex": "\\S"}, "max_tokens": 24})
    for name, rows in (("recall.jsonl", recall), ("chat.jsonl", chat)):
        path = os.path.join(a.out, name)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(path + ".tmp", path)
    print(f"make_gen_tasks: {len(recall)} recall and {len(chat)} chat tasks in {a.out}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Multiple-choice task sets from the project's held-out corpus split, written
in the three formats llama-perplexity reads, so that reap eval's task scores can
be checked against stock llama-perplexity on the project's own models.

Every task is a passage of a held-out sample and its true continuation against
distractors taken from other samples of the same domain (never from the
passage's own sample):

  OUT/choice.bin      --multiple-choice: question = the passage, 4 answers (the
                      true next words and 3 distractor spans of the same length
                      in bytes, cut at word boundaries), the true one at a
                      seeded position; binary layout as perplexity.cpp reads
                      it (u32 task count, u32 offsets, then per task the
                      question, mc1 = answers + labels, mc2 = empty).
  OUT/hellaswag.txt   --hellaswag: the same tasks, 6 lines each (passage, the
                      gold index, 4 endings), ended by one newline.
  OUT/winogrande.csv  --winogrande: a word of the passage blanked ("_") between
                      the true word and a word of the same length class from
                      another sample; the answer 1 or 2 at a seeded position;
                      "index,sentence,choice1,choice2,answer" lines, the
                      sentence quoted, ended by an empty line (llama-perplexity
                      drops a last line that is not followed by one).

Whitespace is collapsed to single spaces (the text formats are line-based) and
'"' and ',' are removed from Winogrande's words. Deterministic for a given
corpus and --seed.

usage: make_choice_tasks.py --heldout HELDOUT.jsonl --out DIR [--tasks N] [--seed S]
                            [--domains en,code] [--passage-bytes B] [--answer-bytes A]
"""
import argparse
import json
import os
import random
import re
import struct


def samples_by_domain(path, domains):
    out = {d: [] for d in domains}
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("domain") in out and "text" in r:
                text = re.sub(r"\s+", " ", r["text"]).strip()
                if text.isascii() and len(text) > 400:
                    out[r["domain"]].append(text)
    return out


def word_starts(text):
    return [m.start() for m in re.finditer(r"(?<= )\S", text)]


def span_at(text, start, nbytes):
    """The words from `start` that fill about `nbytes`, ending at a word's end."""
    end = text.find(" ", start + nbytes)
    return text[start:end if end > 0 else len(text)].strip()


def recalls_passage(text, start, passage_bytes, min_word):
    """Whether the word at `start` (min_word+ characters) already occurs in the passage before it."""
    word = text[start:].split(" ", 1)[0]
    return len(word) >= min_word and word in text[max(0, start - passage_bytes):start]


def make_choice_task(rng, text, others, passage_bytes, answer_bytes, min_word):
    # a cut whose next word the passage already holds: a continuation the passage
    # itself tells apart from another sample's words (the model's context at work)
    starts = [s for s in word_starts(text) if passage_bytes <= s < len(text) - 2 * answer_bytes and
              recalls_passage(text, s, passage_bytes, min_word)]
    if not starts:
        return None
    cut = rng.choice(starts)
    question = text[max(0, cut - passage_bytes):cut].strip()
    question = question[question.find(" ") + 1:] if cut > passage_bytes else question
    answer = span_at(text, cut, answer_bytes)
    answers = [answer]
    # distractors: spans of other samples of about the answer's length whose
    # first word the passage does not hold (else the passage would vouch for them too)
    for other in rng.sample(others, len(others)):
        o_starts = [s for s in word_starts(other) if s < len(other) - 2 * answer_bytes]
        rng.shuffle(o_starts)
        for o in o_starts[:40]:
            cand = span_at(other, o, answer_bytes)
            first = cand.split(" ", 1)[0]
            if cand and cand not in answers and abs(len(cand) - len(answer)) <= 2 and first not in question:
                answers.append(cand)
                break
        if len(answers) == 4:
            break
    if len(answers) < 4 or not question:
        return None
    gold = rng.randrange(4)
    answers[0], answers[gold] = answers[gold], answers[0]
    return question, answers, gold


def clean_word(w):
    return w.replace('"', "").replace(",", "")


def make_winogrande_task(rng, text, others, passage_bytes):
    words = text[:passage_bytes * 2].split(" ")
    if len(words) < 24:
        return None
    # blank a word of at least 3 letters in the middle, leaving several words after it
    picks = [i for i in range(8, len(words) - 8) if re.fullmatch(r"[A-Za-z]{3,}", words[i])]
    if not picks:
        return None
    i = rng.choice(picks)
    true_word = words[i]
    pool = [w for o in rng.sample(others, min(len(others), 8)) for w in o.split(" ")
            if re.fullmatch(r"[A-Za-z]{3,}", w) and w != true_word and abs(len(w) - len(true_word)) <= 2]
    if not pool:
        return None
    false_word = rng.choice(pool)
    first = clean_word(" ".join(words[max(0, i - 16):i]))[-100:]
    second = clean_word(" ".join(words[i + 1:i + 10]))[:60]
    sentence = first + " _ " + second
    answer = rng.randrange(2) + 1
    choices = [true_word, false_word] if answer == 1 else [false_word, true_word]
    return sentence, choices, answer


def write_binary(path, tasks):
    def string(s):
        b = s.encode("utf-8")
        return struct.pack("<I", len(b)) + b

    bodies = []
    for question, answers, gold in tasks:
        body = string(question) + struct.pack("<I", len(answers))
        body += b"".join(string(a) for a in answers)
        body += b"".join(struct.pack("<i", 1 if k == gold else 0) for k in range(len(answers)))
        body += struct.pack("<I", 0)   # mc2: no answers
        bodies.append(body)
    offset = 4 + 4 * len(bodies)
    offsets = []
    for b in bodies:
        offsets.append(offset)
        offset += len(b)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<I", len(bodies)) + b"".join(struct.pack("<I", o) for o in offsets) + b"".join(bodies))
    os.replace(path + ".tmp", path)


def write_text(path, text):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--domains", default="en,code")
    ap.add_argument("--passage-bytes", type=int, default=220)
    ap.add_argument("--answer-bytes", type=int, default=1)
    ap.add_argument("--min-word", type=int, default=6)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    by_domain = samples_by_domain(a.heldout, a.domains.split(","))
    choice, wino = [], []
    order = [(d, i) for d, s in sorted(by_domain.items()) for i in range(len(s))]
    rng.shuffle(order)
    for d, i in order * 4:   # a sample may give several tasks, each at its own cut
        samples = by_domain[d]
        others = samples[:i] + samples[i + 1:]
        if len(others) < 4:
            continue
        if len(choice) < a.tasks:
            t = make_choice_task(rng, samples[i], others, a.passage_bytes, a.answer_bytes, a.min_word)
            if t:
                choice.append(t)
        if len(wino) < a.tasks:
            t = make_winogrande_task(rng, samples[i], others, a.passage_bytes)
            if t:
                wino.append(t)
        if len(choice) == a.tasks and len(wino) == a.tasks:
            break
    if len(choice) < a.tasks or len(wino) < a.tasks:
        raise SystemExit(f"make_choice_tasks: only {len(choice)} choice and {len(wino)} winogrande tasks from {a.heldout}")
    os.makedirs(a.out, exist_ok=True)
    write_binary(os.path.join(a.out, "choice.bin"), choice)
    write_text(os.path.join(a.out, "hellaswag.txt"),
               "".join(f"{q}\n{g}\n" + "".join(x + "\n" for x in ans) for q, ans, g in choice))
    write_text(os.path.join(a.out, "winogrande.csv"),
               "".join(f'{k},"{s}",{c[0]},{c[1]},{ans}\n' for k, (s, c, ans) in enumerate(wino)) + "\n")
    print(f"make_choice_tasks: {len(choice)} choice and {len(wino)} winogrande tasks in {a.out}")


if __name__ == "__main__":
    main()

"""Retrieval and copying windows for tools/train_moe.py (the reap-moe-wide model).

`reap eval --needle` (src/llama/needle.cpp, src/metrics/needle_grid.cpp) puts
"The secret code is AAA-9999." into a haystack at a sentence or line boundary
near a depth, then asks for the value, in one of two forms:

  chat        BOS <|im_start|>user\\n HAYSTACK "\\n\\n" QUESTION <|im_end|>\\n <|im_start|>assistant\\n  -> VALUE
  completion  BOS HAYSTACK "\\n\\n" LEAD                                                            -> " " VALUE

A needle window here is one such prompt built the same way (the same boundary
rule, the same spaces around the sentence), its answer, and then corpus text up
to the window's length, so that the rest of the window still teaches language.
Half of the needles use the evaluation's own lead, question and value format;
the others vary all three, so the skill is retrieval and not one sentence.

A chat window is "continue the text" exchanges in the chat template's form
(reap-moe-chat): the user gives a stretch of corpus text, the assistant writes
what follows up to the end of its sentence or line, then <|im_end|>, the
end-of-generation token of `reap eval --generate`, so that generation stops:

  BOS <|im_start|>user\n TEXT <|im_end|>\n <|im_start|>assistant\n  -> NEXT <|im_end|>\n  (and again)

A copy window is random strings each written twice: every byte of a second copy
is predictable only by finding the first, the densest signal for the copying
(induction) heads that retrieval is built from.
"""

import numpy as np
import torch

from moe_model import BOS

IM_START, IM_END = 257, 258

EVAL_LEAD = "The secret code is"
EVAL_QUESTION = "What is the secret code? Answer with the code only."

# (lead, what it names): the question of a variant is "What is the <name>?",
# sometimes followed by "Answer with the <name> only."
VARIANTS = [
    ("The password is", "password"),
    ("The secret code is", "secret code"),
    ("The magic number is", "magic number"),
    ("The access key is", "access key"),
    ("The PIN is", "PIN"),
    ("The serial number is", "serial number"),
    ("The code word is", "code word"),
    ("The ticket number is", "ticket number"),
]

UPPER = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = b"abcdefghijklmnopqrstuvwxyz"
DIGITS = b"0123456789"


def pick(rng, alphabet, n):
    return bytes(alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=n))


def random_value(rng, eval_format):
    """AAA-9999 (the evaluation's format, needle_value in needle_grid.cpp) or another random code."""
    if eval_format:
        return pick(rng, UPPER, 3) + b"-" + pick(rng, DIGITS, 4)
    kind = int(rng.integers(0, 4))
    if kind == 0:
        return pick(rng, DIGITS, int(rng.integers(4, 9)))
    if kind == 1:
        return pick(rng, UPPER + DIGITS, int(rng.integers(4, 10)))
    if kind == 2:
        return pick(rng, UPPER, int(rng.integers(2, 5))) + b"-" + pick(rng, DIGITS, int(rng.integers(2, 6)))
    return pick(rng, LOWER, int(rng.integers(4, 9))) + pick(rng, DIGITS, 2)


def needle_boundary(hay, depth):
    """The insertion point needle_grid.cpp's needle_boundary picks (one byte per token):
    the closest of 0, the end, and every position after '.', '!', '?' or a newline."""
    n = len(hay)
    target = depth * n
    best, best_dist = 0, target
    for i in range(1, n + 1):
        if i < n and hay[i - 1] not in b".!?\n":
            continue
        d = abs(i - target)
        if d < best_dist:
            best, best_dist = i, d
    return best


def text_at(rng, stream, n):
    """n bytes of a corpus stream, starting after a newline where one is near."""
    o = int(rng.integers(0, len(stream) - n - 1024))
    nl = bytes(stream[o:o + 1024]).find(b"\n")
    o = o + nl + 1 if nl >= 0 else o
    return bytes(stream[o:o + n])


def needle_prompt(hay, depth, lead, question, value, chat):
    """(prompt tokens, answer tokens) of one needle, built as needle.cpp builds a cell."""
    at = needle_boundary(hay, depth)
    sentence = lead.encode() + b" " + value + b"."
    if at > 0 and not chr(hay[at - 1]).isspace():
        sentence = b" " + sentence
    if at < len(hay) and not chr(hay[at]).isspace():
        sentence += b" "
    body = list(hay[:at] + sentence + hay[at:])
    if chat:
        prompt = [BOS, IM_START] + list(b"user\n") + body + list(b"\n\n" + question.encode()) + \
            [IM_END] + list(b"\n") + [IM_START] + list(b"assistant\n")
        answer = list(value) + [IM_END] + list(b"\n")
    else:
        prompt = [BOS] + body + list(b"\n\n" + lead.encode())
        answer = list(b" " + value + b".")
    return prompt, answer


def with_distractors(rng, hay, value):
    """`hay` with 1..6 look-alikes of `value` put in at spaces or newlines: capitalised words, codes
    of the values' shapes, and words that begin as the value does (its first 1..3 bytes), never
    after a lead, so that only the needle's own value, copied whole, is the answer."""
    hay = bytearray(hay)
    for _ in range(int(rng.integers(1, 7))):
        gaps = [i for i in range(1, len(hay)) if hay[i - 1] in b" \n"]
        if not gaps:
            break
        at = gaps[int(rng.integers(0, len(gaps)))]
        kind = int(rng.integers(0, 4))
        if kind == 3:
            word = value[:int(rng.integers(1, 4))] + pick(rng, UPPER, int(rng.integers(2, 7)))
        else:
            word = pick(rng, UPPER, int(rng.integers(3, 10))) if kind == 0 else random_value(rng, kind == 1)
        hay[at:at] = word + b" "
    return bytes(hay)


def random_needle(rng, stream, L, forms="both", distract=0.0):
    """One needle window of exactly L + 1 tokens (inputs are the first L) and the answer's span.
    forms: "both" (chat or completion, even odds) or "completion" (the same draws, never chat);
    distract: the chance that the haystack holds look-alikes of the value (with_distractors)."""
    chat = bool(rng.integers(0, 2)) and forms == "both"
    if rng.random() < 0.5:
        lead, question, eval_format = EVAL_LEAD, EVAL_QUESTION, True
    else:
        lead, name = VARIANTS[int(rng.integers(0, len(VARIANTS)))]
        question = f"What is the {name}?" + (f" Answer with the {name} only." if rng.random() < 0.5 else "")
        eval_format = rng.random() < 0.3
    value = random_value(rng, eval_format)
    prompt, answer = needle_prompt(b"", 0.0, lead, question, value, chat)
    overhead = len(prompt) + len(answer) + 2  # + the spaces a haystack may add around the sentence
    n_hay = int(rng.integers(8, L + 1 - overhead))
    hay = text_at(rng, stream, n_hay)
    if distract and rng.random() < distract:
        hay = with_distractors(rng, hay, value)[:n_hay]
    prompt, answer = needle_prompt(hay, float(rng.random()), lead, question, value, chat)
    seq = prompt + answer
    seq += list(b"\n" + text_at(rng, stream, L + 1 - len(seq)))[:L + 1 - len(seq)]
    return seq, len(prompt), len(prompt) + len(answer)


SENTENCE_ENDS = (b".", b"!", b"?", "\u3002".encode(), "\uff01".encode(), "\uff1f".encode())


def answer_end(rest, lo=8, hi=120):
    """Where the answer cut from `rest` ends: after the first sentence end (followed by a space or
    newline) or before the first newline, between lo and hi bytes; else at the last space before hi."""
    for i in range(lo, min(len(rest), hi) + 1):
        if rest[i - 1:i] == b"\n":
            return i - 1
        for e in SENTENCE_ENDS:
            if i >= len(e) and rest[i - len(e):i] == e and (i == len(rest) or rest[i:i + 1] in (b" ", b"\n") or len(e) > 1):
                return i
    sp = rest.rfind(b" ", lo, hi)
    return sp if sp > 0 else min(hi, len(rest))


def chat_exchange(rng, stream):
    """(prompt tokens, answer tokens) of one exchange: the user's 48..160 bytes of text, the
    assistant's continuation to the end of its sentence or line, then <|im_end|>."""
    n = int(rng.integers(48, 161))
    text = text_at(rng, stream, n + 160)
    user, rest = text[:n], text[n:]
    answer = rest[:answer_end(rest)]
    prompt = [IM_START] + list(b"user\n") + list(user) + [IM_END] + list(b"\n") + [IM_START] + list(b"assistant\n")
    return prompt, list(answer) + [IM_END] + list(b"\n")


def chat_window(rng, stream, L):
    """L + 1 tokens of exchanges after BOS, and the answers' spans [a0, a1)."""
    seq, spans = [BOS], []
    while len(seq) < L + 1:
        prompt, answer = chat_exchange(rng, stream)
        spans.append((len(seq) + len(prompt), len(seq) + len(prompt) + len(answer)))
        seq += prompt + answer
    return seq[:L + 1], [(a0, min(a1, L + 1)) for a0, a1 in spans if a0 < L + 1]


def copy_window(rng, L):
    """L + 1 tokens of random strings, each followed by a space and itself again."""
    alphabet = UPPER + LOWER + DIGITS + b"-"
    seq = [BOS]
    while len(seq) < L + 1:
        s = list(pick(rng, alphabet, int(rng.integers(4, 40))))
        seq += s + [0x20] + s + [0x0A]
    return seq[:L + 1]


def mixed_batch(rng, streams, domains, weights, B, L, n_needle, n_copy, answer_weight, forms="both", n_chat=0,
                distract=0.0):
    """B windows: n_needle needle windows, n_copy copy windows, n_chat chat windows, the rest corpus text.
    Returns inputs, targets and per-target loss weights (answer_weight on needle answers)."""
    x = np.empty((B, L), dtype=np.int64)
    y = np.empty((B, L), dtype=np.int64)
    w = np.ones((B, L), dtype=np.float32)
    ds = rng.choice(len(domains), size=B, p=weights)
    for i, di in enumerate(ds):
        s = streams[domains[di]]
        if i < n_needle:
            seq, a0, a1 = random_needle(rng, s, L, forms, distract)
            w[i, a0 - 1:a1 - 1] = answer_weight  # targets at positions a0-1.. are the answer's tokens
        elif i < n_needle + n_copy:
            seq = copy_window(rng, L)
        elif i < n_needle + n_copy + n_chat:
            seq, spans = chat_window(rng, s, L)
            for a0, a1 in spans:
                w[i, a0 - 1:a1 - 1] = answer_weight
        else:
            o = int(rng.integers(0, len(s) - L))
            seq = [BOS] + list(s[o:o + L])
        x[i] = seq[:L]
        y[i] = seq[1:L + 1]
    return torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(w)


@torch.no_grad()
def needle_accuracy(model, streams, L, lengths, depths, trials, seed):
    """Share of needles in the evaluation's exact forms (both) whose whole answer is the
    argmax at every answer position (teacher forced: the same as greedy exact match).
    Haystacks are held-out text, domains in turn. Returns {"chat": r, "completion": r}."""
    model.eval()
    rng = np.random.default_rng(seed)
    domains = sorted(streams)
    out = {}
    for chat in (True, False):
        rows, spans = [], []
        for n in lengths:
            for depth in depths:
                for k in range(trials):
                    hay = text_at(rng, streams[domains[k % len(domains)]], n)
                    prompt, answer = needle_prompt(hay, depth, EVAL_LEAD, EVAL_QUESTION, random_value(rng, True), chat)
                    answer = answer[:9]  # value + <|im_end|>, or " " + value: the 9 tokens reap decodes
                    seq = (prompt + answer)[:L + 1]
                    rows.append(seq + [BOS] * (L + 1 - len(seq)))
                    spans.append((len(prompt), len(prompt) + len(answer)))
        ok = 0
        for b in range(0, len(rows), 16):
            t = torch.tensor(rows[b:b + 16], dtype=torch.int64)
            logits, _ = model(t[:, :L])
            pred = logits.argmax(-1)
            for r, (a0, a1) in enumerate(spans[b:b + 16]):
                ok += bool((pred[r, a0 - 1:a1 - 1] == t[r, a0:a1]).all())
        out["chat" if chat else "completion"] = ok / len(rows)
    model.train()
    return out


@torch.no_grad()
def copy_accuracy(model, L, windows, seed):
    """Held-out copying: on `windows` fresh copy windows, the share of second-copy bytes
    that are the argmax, and the bits per byte of first and of second copies. A model
    that copies predicts the second copy (after its first byte) almost exactly; one that
    does not pays as much for it as for the first."""
    model.eval()
    rng = np.random.default_rng(seed)
    alphabet = UPPER + LOWER + DIGITS + b"-"
    rows, roles = [], []
    for _ in range(windows):
        seq, role = [BOS], [0]
        while len(seq) < L + 1:
            s = list(pick(rng, alphabet, int(rng.integers(4, 40))))
            # role 1: a first copy's bytes; 2: a second copy's bytes after its first (predictable by copying)
            seq += s + [0x20] + s + [0x0A]
            role += [1] * len(s) + [0] + [0] + [2] * (len(s) - 1) + [0]
        rows.append(seq[:L + 1])
        roles.append(role[:L + 1])
    t = torch.tensor(rows, dtype=torch.int64)
    r = torch.tensor(roles)[:, 1:]
    logits, _ = model(t[:, :L])
    y = t[:, 1:]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                            reduction="none").reshape(y.shape) / np.log(2)
    hit = logits.argmax(-1) == y
    model.train()
    return {"second_acc": hit[r == 2].float().mean().item(), "first_bpb": nll[r == 1].mean().item(),
            "second_bpb": nll[r == 2].mean().item()}

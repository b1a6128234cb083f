#!/usr/bin/env python3
"""What next-token KLD misses, on the demo's cuts: the tables of scripts/behaviour_study.sh
(issue 25, item 5).

  prompts  the free-generation prompts (--chat: as user messages): the first --bytes bytes (cut at a
           character boundary, so every domain's prompt fits the 256-token
           context with room for the continuation) of the first --per-domain
           held-out samples of each domain that are longer than 300 bytes;
  compact  a --json output as docs/results/ keeps it (no indentation);
  table    the section of docs/results.md, from the committed `reap eval --json`
           outputs: the needle grid of reap-moe-recall (cells right per length
           x depth for the base and each cut, as the pruned file and as the
           mask, and how many cells the two decoded alike) and the generation
           tables of the generating model (loop rate, termination rate, distinct-4 per
           domain; how many outputs the mask and the file generated alike).
           --results FILE replaces the section in FILE (or appends it).

Cuts are named by their file's or plan's name without the extension
(out/demo/cuts/reap-50.gguf and out/demo/plans/reap-50.json are reap-50).
The numbers are counted here from the decoded texts, expected values and
tokens; tests/test_report.cpp (DemoResults.BehaviourSection*) counts them again.
"""
import argparse
import json
import os
import sys

TITLE = "## What next-token KLD misses: needle retrieval and free generation"


def write_prompts(a):
    per = {}
    out = []
    with open(a.corpus, encoding="utf-8") as f:
        for line in f:
            j = json.loads(line)
            d, t = j["domain"], j["text"]
            raw = t.encode("utf-8")
            if len(raw) <= 300 or per.get(d, 0) >= a.per_domain:
                continue
            per[d] = per.get(d, 0) + 1
            cut = raw[:a.bytes].decode("utf-8", errors="ignore")   # drop a character cut in half
            if a.chat:   # the user's message, rendered through the model's chat template by reap eval
                out.append(json.dumps({"domain": d, "messages": [{"role": "user", "content": cut}]}, ensure_ascii=False))
            else:
                out.append(json.dumps({"domain": d, "text": cut}, ensure_ascii=False))
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print(f"  {len(out)} prompts: " + ", ".join(f"{d} {n}" for d, n in per.items()))


def compact(a):
    """A reap eval --json output kept in docs/results/ without its indentation (one
    token a line made the generation output four times as large): the same JSON."""
    with open(a.src, encoding="utf-8") as f:
        doc = json.load(f)
    tmp = a.dst + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, a.dst)


def stem(name):
    return os.path.splitext(os.path.basename(name))[0]


def split_models(names_masked):
    """[(name, masked)] -> base index, [(cut, file index, mask index)] in the files' order."""
    files = {stem(n): i for i, (n, m) in enumerate(names_masked) if n != "base" and not m}
    masks = {stem(n): i for i, (n, m) in enumerate(names_masked) if m}
    if names_masked[0][0] != "base" or set(files) != set(masks):
        sys.exit("behaviour_study.py: every cut must be run both as a pruned file and as a mask, after the base")
    return [(c, files[c], masks[c]) for c in sorted(files, key=files.get)]


def exact(text, value):
    t = text.strip()
    return t == value or t == value + "."


def needle_section(doc, path):
    nd = doc["needle"]
    cells = nd["cells"]
    models = [(m["name"], m["masked"]) for m in cells[0]["models"]]
    cuts = split_models(models)
    grid = []   # (length, depth) in the cells' order
    for c in cells:
        if (c["length"], c["depth"]) not in grid:
            grid.append((c["length"], c["depth"]))

    def right(mi, key=None):
        return sum(exact(c["models"][mi]["text"], c["value"]) for c in cells
                   if key is None or (c["length"], c["depth"]) == key)

    per = len(cells) // len(grid)
    out = ["### Needle grid: reap-moe-recall", "",
           f"`reap eval --needle` on models/reap-moe-recall.gguf (models/README.md; no chat template, so the "
           f"question is the completion form) with haystacks from `data/corpus/heldout.jsonl`, seed {nd['seed']}, "
           f"{per} needles per length × depth cell, {len(cells)} in all, for the base and each cut, as the pruned "
           f"file and as the mask. The cuts: REAP from `reap calibrate` on the calib split (the demo's tokens per domain), 25/50/75% of the experts "
           f"removed, and a 50% cut ranked on the en and code samples alone (`reap plan --domains en,code`). "
           f"Each cell: needles answered exactly (the decoded text is the value), of {per}. "
           f"Mask = file: cells where the mask decoded the same text as the pruned file. "
           f"JSON: [{os.path.basename(path)}](results/{os.path.basename(path)}).", ""]
    head = [f"{l} tok @ {d:g}" for l, d in grid]
    out.append("| model | " + " | ".join(head) + " | exact (file) | exact (mask) | mask = file |")
    out.append("|" + "---|" * (len(grid) + 4))
    n = len(cells)
    out.append("| base | " + " | ".join(str(right(0, g)) for g in grid) + f" | {right(0)}/{n} | - | - |")
    for name, fi, mi in cuts:
        same = sum(c["models"][fi]["text"] == c["models"][mi]["text"] for c in cells)
        out.append(f"| {name} | " + " | ".join(str(right(fi, g)) for g in grid)
                   + f" | {right(fi)}/{n} | {right(mi)}/{n} | {same}/{n} |")
    return out


def gen_stats(outs, domain):
    n = loop = ended = 0
    grams, n_grams = set(), 0
    for o in outs:
        if domain is not None and o["domain"] != domain:
            continue
        t = o["tokens"]
        n += 1
        loop += ends_in_loop(t)
        ended += o["terminated"]
        for j in range(len(t) - 3):
            grams.add(tuple(t[j:j + 4]))
            n_grams += 1
    return {"loop": loop / n, "ended": ended / n, "d4": len(grams) / n_grams if n_grams else 0.0}


K, R = 8, 3   # the loop rule of reap eval --generate: a span of >= K tokens said R times at the end


def ends_in_loop(t):
    p = K
    while p * R <= len(t):
        last = t[len(t) - p:]
        if all(t[len(t) - c * p:len(t) - (c - 1) * p] == last for c in range(2, R + 1)):
            return True
        p += 1
    return False


def generation_section(doc, path, chat):
    g = doc["generate"]
    if (g["loop_span"], g["loop_repeats"]) != (K, R):
        sys.exit(f"behaviour_study.py: {path} counts loops with k={g['loop_span']}, r={g['loop_repeats']}, "
                 f"not {K}, {R}")
    ms = g["models"]
    cuts = split_models([(m["name"], m["masked"]) for m in ms])
    domains = []
    for o in ms[0]["outputs"]:
        if o["domain"] not in domains:
            domains.append(o["domain"])
    base = ms[0]["outputs"]
    rows = [("base", {d: gen_stats(base, d) for d in domains + [None]})]
    for name, fi, _ in cuts:
        rows.append((name, {d: gen_stats(ms[fi]["outputs"], d) for d in domains + [None]}))
    n_out = len(base)
    per = {d: sum(o["domain"] == d for o in base) for d in domains}
    model = g["measured"]["base"]["file"]
    form = ("as user messages in the chat template's form (the model was trained to continue the user's text to "
            "the end of its sentence and then end its turn), each the first bytes of a held-out sample" if chat else
            "the first bytes of held-out samples")
    out = ["### Free generation: " + os.path.splitext(os.path.basename(model))[0], "",
           f"`reap eval --generate` on {model}, greedy, up to {g['max_new']} "
           f"new tokens, {n_out} prompts {form} ("
           + ", ".join(f"{per[d]} {d}" for d in domains)
           + "), for the base and its cuts reap-25, reap-50, reap-75 and reap-en+code-50 (planned, pruned and "
           "verified as the demo's), as pruned files. Loop rate: the share of outputs that end in a span of at least "
           f"{K} tokens said {R} times back to back; termination rate: the share that emit an end-of-generation "
           "token before the cap; distinct-4: distinct token 4-grams over all 4-grams of the domain's outputs. "
           f"JSON: [{os.path.basename(path)}](results/{os.path.basename(path)}).", ""]
    for title, key, fmt in (("**Loop rate** (lower: fewer runaway repetitions)", "loop", "{:.1f}%"),
                            ("**Termination rate** (the share that stopped on their own)", "ended", "{:.1f}%"),
                            ("**Distinct-4** (distinct token 4-grams over all)", "d4", "{:.3f}")):
        out += [title, "", "| model | " + " | ".join(domains) + " | all |", "|" + "---|" * (len(domains) + 2)]
        for name, st in rows:
            v = [st[d][key] * (100 if key != "d4" else 1) for d in domains + [None]]
            out.append(f"| {name} | " + " | ".join(fmt.format(x) for x in v) + " |")
        out.append("")
    same = [f"{name} {sum(a['tokens'] == b['tokens'] for a, b in zip(ms[fi]['outputs'], ms[mi]['outputs']))}/{n_out}"
            for name, fi, mi in cuts]
    out.append("Mask = file (outputs the mask generated token for token as the pruned file did): "
               + ", ".join(same) + ".")
    return out


def write_table(a):
    with open(a.needle, encoding="utf-8") as f:
        needle = json.load(f)
    with open(a.generate, encoding="utf-8") as f:
        gen = json.load(f)
    out = [TITLE, "",
           "`scripts/behaviour_study.sh` (a step of `make demo`; it can run alone): what teacher-forced KLD cannot "
           "show (issue 25): whether a cut still retrieves a fact from its context, and whether its free "
           "generation runs away into repetition or stops stopping. Every number below is counted again from "
           "the JSON by tests/test_report.cpp (DemoResults.BehaviourSection*).", ""]
    out += needle_section(needle, a.needle) + [""] + generation_section(gen, a.generate, a.chat)
    text = "\n".join(out) + "\n"
    with open(a.md, "w", encoding="utf-8") as f:
        f.write(text)
    if a.results:
        replace_section(a.results, text)
    print(text)


def replace_section(path, section):
    """The section in place of an earlier one (up to the next '## ' heading), or appended."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if TITLE in lines:
        b = lines.index(TITLE)
        e = next((i for i in range(b + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = lines[:b] + section.rstrip("\n").split("\n") + ([""] + lines[e:] if e < len(lines) else [""])
    else:
        new = lines + ([""] if lines and lines[-1] != "" else []) + section.rstrip("\n").split("\n") + [""]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(new).rstrip("\n") + "\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prompts")
    p.add_argument("--corpus", required=True)
    p.add_argument("--per-domain", type=int, default=4)
    p.add_argument("--bytes", type=int, default=96)
    p.add_argument("--out", required=True)
    p.add_argument("--chat", action="store_true", help="each prompt as a user message (the chat template's form)")
    c = sub.add_parser("compact")
    c.add_argument("src")
    c.add_argument("dst")
    t = sub.add_parser("table")
    t.add_argument("--needle", required=True, help="reap eval --needle --json on the recall model")
    t.add_argument("--generate", required=True, help="reap eval --generate --json on the trained model")
    t.add_argument("--md", required=True, help="the section, written alone")
    t.add_argument("--chat", action="store_true", help="the generation prompts were user messages (prompts --chat)")
    t.add_argument("--results", help="docs/results.md: the section replaced there, or appended")
    a = ap.parse_args()
    {"prompts": write_prompts, "compact": compact, "table": write_table}[a.cmd](a)


if __name__ == "__main__":
    main()

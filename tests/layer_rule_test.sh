#!/usr/bin/env bash
# Checks scripts/check_layers.py itself on a small src/ tree made here: a
# clean tree passes; an include up a floor (by its src/ path, through "../",
# and in angle brackets), one sideways, a cycle of headers inside one folder
# (by src/ paths and by bare names), a llama.cpp header below llama/ and a
# folder on no floor each fail the check, named.
# usage: tests/layer_rule_test.sh SOURCE_DIR WORK_DIR
set -eu
src=$1
work=$2/layer_rule
check() { /usr/bin/python3 "$src/scripts/check_layers.py" "$work"; }
fail() { echo "layer_rule_test: $*"; exit 1; }
rm -rf "$work"
mkdir -p "$work/src/util" "$work/src/gguf" "$work/src/corpus" "$work/src/plan" "$work/src/llama"

echo '#pragma once' > "$work/src/util/a.h"
printf '#pragma once\n#include "util/a.h"\n' > "$work/src/gguf/b.h"
printf '#include "gguf/b.h"\n#include "util/a.h"\n#include <vector>\n' > "$work/src/plan/c.cpp"
printf '#include "plan/c.h"\n#include "llama.h"\n' > "$work/src/llama/d.cpp"
echo '#pragma once' > "$work/src/plan/c.h"
out=$(check) || fail "a clean tree failed: $out"
echo "$out" | grep -q "no arrow up or sideways, no cycle" || fail "no summary: $out"

printf '#pragma once\n#include "plan/c.h"\n' > "$work/src/util/up.h"
out=$(check) && fail "an include up passed: $out"
echo "$out" | grep -q "src/util/up.h:2: includes plan/c.h: an arrow up, from util/ (floor 0) to plan/ (floor 4)" || fail "up not named: $out"
rm "$work/src/util/up.h"
printf '#pragma once\n#include "../plan/c.h"\n' > "$work/src/util/up2.h"
out=$(check) && fail "an include up through ../ passed: $out"
echo "$out" | grep -q "src/util/up2.h:2: includes ../plan/c.h: an arrow up" || fail "../ not named: $out"
rm "$work/src/util/up2.h"
printf '#include <plan/c.h>\n' > "$work/src/util/up3.cpp"
out=$(check) && fail "an include up in angle brackets passed: $out"
echo "$out" | grep -q "src/util/up3.cpp:1: includes plan/c.h: an arrow up" || fail "<plan/c.h> not named: $out"
rm "$work/src/util/up3.cpp"

printf '#include "corpus/e.h"\n' > "$work/src/gguf/side.cpp"
echo '#pragma once' > "$work/src/corpus/e.h"
out=$(check) && fail "an include sideways passed: $out"
echo "$out" | grep -q "src/gguf/side.cpp:1: includes corpus/e.h: an arrow sideways" || fail "sideways not named: $out"
rm "$work/src/gguf/side.cpp"

printf '#pragma once\n#include "plan/g.h"\n' > "$work/src/plan/f.h"
printf '#pragma once\n#include "plan/f.h"\n' > "$work/src/plan/g.h"
out=$(check) && fail "a cycle passed: $out"
echo "$out" | grep -q "a cycle of headers: plan/f.h -> plan/g.h -> plan/f.h" || fail "cycle not named: $out"
rm "$work/src/plan/f.h" "$work/src/plan/g.h"
printf '#pragma once\n#include "e2.h"\n' > "$work/src/plan/e1.h"
printf '#pragma once\n#include "e1.h"\n' > "$work/src/plan/e2.h"
out=$(check) && fail "a cycle by bare names passed: $out"
echo "$out" | grep -q "a cycle of headers: plan/e1.h -> plan/e2.h -> plan/e1.h" || fail "bare-name cycle not named: $out"
rm "$work/src/plan/e1.h" "$work/src/plan/e2.h"

for h in '"llama.h"' '<speculative.h>' '"common.h"'; do
    printf '#include %s\n#include <ggml.h>\n#include <nlohmann/json.hpp>\n#include <sys/stat.h>\n' "$h" > "$work/src/plan/h.cpp"
    out=$(check) && fail "$h in plan/ passed: $out"
    echo "$out" | grep -q "src/plan/h.cpp:1: includes .*, below llama/: the core includes only" || fail "$h not named: $out"
    echo "$out" | grep -q "h.cpp:[234]" && fail "a library the core links was refused: $out"
done
rm "$work/src/plan/h.cpp"

mkdir -p "$work/src/newthing" && echo '#pragma once' > "$work/src/newthing/x.h"
out=$(check) && fail "a folder on no floor passed: $out"
echo "$out" | grep -q "its folder 'newthing' is on no floor" || fail "folder not named: $out"
rm -r "$work/src/newthing"
out=$(check) || fail "the clean tree failed again: $out"
echo "layer_rule_test: ok"

#!/usr/bin/env bash
# Checks scripts/check_sizes.sh itself on a small tree made here: a function of
# 121 lines and a cmd file of 151 lines are reported and fail the check, the
# same at 120 and 150 lines pass, and an allow-list entry lets a breach through.
# usage: tests/size_rule_test.sh SOURCE_DIR WORK_DIR
set -eu
src=$1
work=$2/size_rule
check="$src/scripts/check_sizes.sh"
rm -rf "$work"
mkdir -p "$work/src/cli" "$work/src/core" "$work/scripts"

# A function of $2 lines in $1 named $3: signature, body lines, closing brace.
function_of() {
    { echo "int $3() {"; for _ in $(seq 1 $(($2 - 2))); do echo "    (void) 0;"; done; echo "}"; } > "$1"
}
# A file of exactly $2 lines.
file_of() { for _ in $(seq 1 "$2"); do echo "// line"; done > "$1"; }

fail() { echo "size_rule_test: $*"; exit 1; }

function_of "$work/src/core/ok.cpp" 120 at_limit
file_of "$work/src/cli/cmd_ok.cpp" 150
out=$("$check" "$work") || fail "a tree at the limits failed: $out"

function_of "$work/src/core/long.cpp" 121 one_over
out=$("$check" "$work") && fail "a 121-line function passed: $out"
echo "$out" | grep -q "too long: src/core/long.cpp one_over is 121 lines" || fail "not named: $out"
echo "$out" | grep -q "at_limit" && fail "the 120-line function was reported: $out"

file_of "$work/src/cli/cmd_long.cpp" 151
printf '%s\n' "src/core/long.cpp one_over   # why: test" > "$work/scripts/size_exceptions.txt"
out=$("$check" "$work") && fail "a 151-line cmd file passed: $out"
echo "$out" | grep -q "too long: src/cli/cmd_long.cpp is 151 lines" || fail "cmd file not named: $out"
echo "$out" | grep -q "allowed: src/core/long.cpp one_over" || fail "allow-list not applied: $out"
echo "$out" | grep -q "cmd_ok" && fail "the 150-line cmd file was reported: $out"

printf '%s\n' "src/cli/cmd_long.cpp -   # why: test" >> "$work/scripts/size_exceptions.txt"
out=$("$check" "$work") || fail "every breach allowed, yet it failed: $out"
echo "size_rule_test: ok"

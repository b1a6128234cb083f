#!/usr/bin/env bash
# The size rule of the source tree: no function in src/ over 120 lines, no
# src/cli/cmd_*.cpp over 150 lines. Function lengths come from universal-ctags
# (end line - start line + 1, lambdas included, as ctags reports them). Prints
# every breach and exits 1 if any is not in the allow-list; 0 otherwise; 2 when
# ctags is missing or the tree is not found.
#
# usage: scripts/check_sizes.sh [SOURCE_DIR]   (default: the repository root)
# Allow-list: scripts/size_exceptions.txt, one "FILE FUNCTION" per line (FILE
# relative to the root, FUNCTION as ctags names it, or "-" for a cmd file's
# length); '#' starts a comment. Every entry says why it is there.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
max_function=120
max_cmd_file=150
exceptions="$root/scripts/size_exceptions.txt"

if ! command -v ctags >/dev/null 2>&1 || ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
    echo "check_sizes: universal-ctags is needed (apt-get install universal-ctags)" >&2
    exit 2
fi
if [ ! -d "$root/src" ]; then
    echo "check_sizes: no src/ under '$root'" >&2
    exit 2
fi

allowed() {   # FILE FUNCTION: listed in the allow-list?
    [ -f "$exceptions" ] || return 1
    sed 's/#.*//' "$exceptions" | awk -v f="$1" -v n="$2" 'NF >= 2 && $1 == f && $2 == n { found = 1 } END { exit !found }'
}

breaches=0
n_allowed=0
report() {   # FILE FUNCTION LINES LIMIT: FUNCTION is "-" for a cmd file's own length
    local what="$1 $2"
    [ "$2" = "-" ] && what="$1"
    if allowed "$1" "$2"; then
        echo "allowed: $what is $3 lines (limit $4; scripts/size_exceptions.txt)"
        n_allowed=$((n_allowed + 1))
    else
        echo "too long: $what is $3 lines (limit $4)"
        breaches=$((breaches + 1))
    fi
}

cd "$root" || exit 2
# ctags' fields: name, file, pattern, then kind and key:value fields (line:, end:).
while IFS=$'\t' read -r lines file name; do
    report "$file" "$name" "$lines" "$max_function"
done < <(ctags --fields=+ne --c++-kinds=f --kinds-c=f -o - -R src |
         awk -F'\t' -v max="$max_function" '{
             start = ""; end = ""
             for (i = 4; i <= NF; ++i) {
                 if ($i ~ /^line:/) start = substr($i, 6)
                 if ($i ~ /^end:/) end = substr($i, 5)
             }
             if (start != "" && end != "" && end - start + 1 > max) print end - start + 1 "\t" $2 "\t" $1
         }' | sort -t$'\t' -k2,2 -k3,3)

for f in src/cli/cmd_*.cpp; do
    [ -f "$f" ] || continue
    n=$(wc -l < "$f")
    if [ "$n" -gt "$max_cmd_file" ]; then report "$f" "-" "$n" "$max_cmd_file"; fi
done

if [ "$breaches" -gt 0 ]; then
    echo "check_sizes: $breaches over the limit (split them into named stages)"
    exit 1
fi
echo "check_sizes: every function <= $max_function lines, every cmd file <= $max_cmd_file lines" \
     "($n_allowed allowed by scripts/size_exceptions.txt)"

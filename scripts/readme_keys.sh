#!/usr/bin/env bash
# Keeps README.md's job-key table equal to `ringtrain keys`, the one table the parser itself uses.
#   scripts/readme_keys.sh --write [RINGTRAIN]   rewrite the table between the keys markers
#   scripts/readme_keys.sh --check [RINGTRAIN]   exit 1 (showing the diff) when the README is stale
set -euo pipefail
mode=${1:?usage: readme_keys.sh --write|--check [path/to/ringtrain]}
bin=${2:-build/bin/ringtrain}
readme="$(dirname "$0")/../README.md"
begin='<!-- keys:begin (scripts/readme_keys.sh --write) -->' end='<!-- keys:end -->'
grep -qF -- "$begin" "$readme" && grep -qF -- "$end" "$readme" || { echo "README.md lacks the markers: $begin ... $end"; exit 1; }
table=$(mktemp); fresh=$(mktemp); trap 'rm -f "$table" "$fresh"' EXIT
"$bin" keys >"$table"
# Everything up to the begin marker, the table, everything from the end marker on.
awk -v b="$begin" -v e="$end" -v t="$table" '
  $0 == b { print; while ((getline line < t) > 0) print line; skip = 1; next }
  $0 == e { skip = 0 }
  !skip { print }' "$readme" >"$fresh"
case $mode in
  --write) cp "$fresh" "$readme"; echo "README.md: job-key table rewritten from $bin keys" ;;
  --check)
    if ! diff -u "$readme" "$fresh"; then
      echo "README.md's job-key table differs from \`ringtrain keys\`: run scripts/readme_keys.sh --write"; exit 1
    fi
    echo "README.md's job-key table matches \`ringtrain keys\`" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac

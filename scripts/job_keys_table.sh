#!/usr/bin/env bash
# Keeps docs/job-file.md's key table equal to `ringtrain keys`, the one table the parser itself uses.
#   scripts/job_keys_table.sh --write [RINGTRAIN]   rewrite the table between the keys markers
#   scripts/job_keys_table.sh --check [RINGTRAIN]   exit 1 (showing the diff) when the page is stale
set -euo pipefail
mode=${1:?usage: job_keys_table.sh --write|--check [path/to/ringtrain]}
bin=${2:-build/bin/ringtrain}
page="$(dirname "$0")/../docs/job-file.md"
begin='<!-- keys:begin (scripts/job_keys_table.sh --write) -->' end='<!-- keys:end -->'
grep -qF -- "$begin" "$page" && grep -qF -- "$end" "$page" || { echo "docs/job-file.md lacks the markers: $begin ... $end"; exit 1; }
table=$(mktemp); fresh=$(mktemp); trap 'rm -f "$table" "$fresh"' EXIT
"$bin" keys >"$table"
# Everything up to the begin marker, the table, everything from the end marker on.
awk -v b="$begin" -v e="$end" -v t="$table" '
  $0 == b { print; while ((getline line < t) > 0) print line; skip = 1; next }
  $0 == e { skip = 0 }
  !skip { print }' "$page" >"$fresh"
case $mode in
  --write) cp "$fresh" "$page"; echo "docs/job-file.md: job-key table rewritten from $bin keys" ;;
  --check)
    if ! diff -u "$page" "$fresh"; then
      echo "docs/job-file.md's key table differs from \`ringtrain keys\`: run scripts/job_keys_table.sh --write"; exit 1
    fi
    echo "docs/job-file.md's key table matches \`ringtrain keys\`" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac

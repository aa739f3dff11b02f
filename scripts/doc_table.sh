#!/usr/bin/env bash
# Owns keeping a generated table in a docs page: the lines between a begin and an end marker line, rewritten
# from a file, or checked against it. Used by the scripts that generate such tables (job_keys_table.sh,
# test_counts_table.sh).
#   scripts/doc_table.sh --write|--check PAGE BEGIN_MARKER END_MARKER TABLE_FILE
# --check exits 1, showing the diff, when the page's table differs from TABLE_FILE.
set -euo pipefail
mode=$1 page=$2 begin=$3 end=$4 table=$5
grep -qxF -- "$begin" "$page" && grep -qxF -- "$end" "$page" || { echo "$page lacks the markers: $begin ... $end"; exit 1; }
fresh=$(mktemp); trap 'rm -f "$fresh"' EXIT
# Everything up to the begin marker, the table, everything from the end marker on.
awk -v b="$begin" -v e="$end" -v t="$table" '
  $0 == b { print; while ((getline line < t) > 0) print line; skip = 1; next }
  $0 == e { skip = 0 }
  !skip { print }' "$page" >"$fresh"
case $mode in
  --write) cp "$fresh" "$page" ;;
  --check) diff -u "$page" "$fresh" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac

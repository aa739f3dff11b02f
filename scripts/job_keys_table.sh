#!/usr/bin/env bash
# Keeps docs/job-file.md's key table equal to `ringtrain keys`, the one table the parser itself uses.
#   scripts/job_keys_table.sh --write [RINGTRAIN]   rewrite the table between the keys markers
#   scripts/job_keys_table.sh --check [RINGTRAIN]   exit 1 (showing the diff) when the page is stale
set -euo pipefail
mode=${1:?usage: job_keys_table.sh --write|--check [path/to/ringtrain]}
bin=${2:-build/bin/ringtrain}
here=$(dirname "$0")
page="$here/../docs/job-file.md"
begin='<!-- keys:begin (scripts/job_keys_table.sh --write) -->' end='<!-- keys:end -->'
table=$(mktemp); trap 'rm -f "$table"' EXIT
"$bin" keys >"$table"
case $mode in
  --write) bash "$here/doc_table.sh" --write "$page" "$begin" "$end" "$table"
           echo "docs/job-file.md: job-key table rewritten from $bin keys" ;;
  --check)
    if ! bash "$here/doc_table.sh" --check "$page" "$begin" "$end" "$table"; then
      echo "docs/job-file.md's key table differs from \`ringtrain keys\`: run scripts/job_keys_table.sh --write"; exit 1
    fi
    echo "docs/job-file.md's key table matches \`ringtrain keys\`" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac

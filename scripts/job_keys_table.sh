#!/usr/bin/env bash
# Keeps docs/job-file.md's key tables equal to `ringtrain keys` and `ringtrain keys --layers`, the declarations the
# parser itself checks job files against.
#   scripts/job_keys_table.sh --write [RINGTRAIN]   rewrite the tables between the keys and the layers markers
#   scripts/job_keys_table.sh --check [RINGTRAIN]   exit 1 (showing the diff) when the page is stale
set -euo pipefail
mode=${1:?usage: job_keys_table.sh --write|--check [path/to/ringtrain]}
bin=${2:-build/bin/ringtrain}
here=$(dirname "$0")
page="$here/../docs/job-file.md"
table=$(mktemp); trap 'rm -f "$table"' EXIT
# region MARKER ARGS...: the table between MARKER's begin and end lines is `ringtrain keys ARGS`.
region() {
  local marker=$1; shift
  local begin="<!-- $marker:begin (scripts/job_keys_table.sh --write) -->" end="<!-- $marker:end -->"
  "$bin" keys "$@" >"$table"
  case $mode in
    --write) bash "$here/doc_table.sh" --write "$page" "$begin" "$end" "$table"
             echo "docs/job-file.md: $marker table rewritten from $bin keys${*:+ $*}" ;;
    --check)
      if ! bash "$here/doc_table.sh" --check "$page" "$begin" "$end" "$table"; then
        echo "docs/job-file.md's $marker table differs from \`ringtrain keys${*:+ $*}\`: run scripts/job_keys_table.sh --write"
        exit 1
      fi
      echo "docs/job-file.md's $marker table matches \`ringtrain keys${*:+ $*}\`" ;;
    *) echo "unknown mode $mode"; exit 2 ;;
  esac
}
region keys
region layers --layers

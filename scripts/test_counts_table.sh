#!/usr/bin/env bash
# Keeps docs/testing.md's count of CTest tests per label equal to `ctest -N` in a CPU build (RINGTRAIN_CUDA=OFF)
# with every test target built (a test binary not built yet counts as one placeholder test).
#   scripts/test_counts_table.sh --write [BUILD_DIR]   rewrite the table between the counts markers
#   scripts/test_counts_table.sh --check [BUILD_DIR]   exit 1 (showing the diff) when the page is stale
set -euo pipefail
mode=${1:?usage: test_counts_table.sh --write|--check [build dir]}
build=${2:-build}
here=$(dirname "$0")
page="$here/../docs/testing.md"
begin='<!-- counts:begin (scripts/test_counts_table.sh --write) -->' end='<!-- counts:end -->'
table=$(mktemp); trap 'rm -f "$table"' EXIT
count() { ctest --test-dir "$build" -N "$@" | sed -n 's/^Total Tests: //p'; }
{
  echo "| label | tests |"
  echo "|---|---|"
  for label in unit mpi e2e faults fuzz gpu slurm multihost; do echo "| \`$label\` | $(count -L "^$label\$") |"; done
  echo "| all (a test may carry several labels) | $(count) |"
} >"$table"
case $mode in
  --write) bash "$here/doc_table.sh" --write "$page" "$begin" "$end" "$table"
           echo "docs/testing.md: test counts rewritten from ctest -N in $build" ;;
  --check)
    if ! bash "$here/doc_table.sh" --check "$page" "$begin" "$end" "$table"; then
      echo "docs/testing.md's test counts differ from \`ctest -N\` in $build: run scripts/test_counts_table.sh --write"
      exit 1
    fi
    echo "docs/testing.md's test counts match \`ctest -N\` in $build" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac

#!/usr/bin/env bash
# Owns the check that measure_pending.sh's call fits the device tool's carry: the tracked tree travels with the
# carried files, 64 MiB in all. Prints the total of the tree and .gpurt's packed files that PENDING.md's call
# carries (the import bundle where it was made), and exits 1 when it is over.
#   perf/gpu/carry_size.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
limit=$((64 * 1024 * 1024))
# What the device tool copies of the tree: tracked files and untracked ones git does not ignore (a file deleted
# from the work tree counts nothing).
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}' || true)
carried=0
for f in .gpurt/root.tar.xz .gpurt/lib.tar.xz .gpurt/bin.tar.xz .gpurt/env.sh .gpurt/cuda-libs.sh .gpurt/import.tar.xz; do
  [ -f "$f" ] && carried=$((carried + $(stat -c %s "$f")))
done
total=$((tree + carried))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "carry: tree $(mib "$tree") + .gpurt $(mib "$carried") = $(mib "$total") of $(mib "$limit")$([ -f .gpurt/import.tar.xz ] || echo ' (no import.tar.xz yet)')"
[ "$total" -le "$limit" ] || { echo "over the carry by $(mib $((total - limit))): leave out import.tar.xz, or pack fewer models"; exit 1; }

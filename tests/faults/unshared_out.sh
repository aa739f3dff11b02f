#!/usr/bin/env bash
# prepare images with --out on storage the ranks do not share (node-local: a folder of that name on every node),
# emulated on one host by giving rank 1 a mount namespace of its own with a tmpfs over --out's parent. Every rank
# must exit 4 with one message naming --out and the rank that cannot see it, and the folders the prepare made are
# gone; before, each node kept a split of only its own ranks' shards, and the prepare said it had written them all.
# The ranks wait up to 90 s for the folder to appear (a network file system's cache), so this takes about that long.
# Needs unshare and mount (root with CAP_SYS_ADMIN): skipped (77), saying why, where they fail.
# Usage: unshared_out.sh RINGTRAIN
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'umount "$work/probe" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/probe" "$work/local"
if ! unshare -m --propagation private sh -c "mount -t tmpfs none '$work/probe'" 2>"$work/unshare.log"; then
  echo "SKIP: no mount namespace with a tmpfs here ($(head -1 "$work/unshare.log"))"
  exit 77
fi
python3 "$(dirname "$0")/../support/write_png_classes.py" "$work/photos"
args=(prepare images --source "$work/photos" --size 8 --test-fraction 0.34 --out "$work/local/data")
timeout 300 mpirun -np 1 --oversubscribe "$bin" "${args[@]}" : -np 1 --oversubscribe \
  unshare -m --propagation private sh -c "mount -t tmpfs none '$work/local' && exec \"\$0\" \"\$@\"" "$bin" "${args[@]}" \
  >"$work/run.log" 2>&1
rc=$?
want="--out '$work/local/data' is not one folder every rank sees: rank 1 on"
messages=$(grep -cF -- "$want" "$work/run.log")
if [ "$rc" = 4 ] && [ "$messages" = 2 ] && [ ! -e "$work/local/data" ]; then
  echo "ok   unshared --out: exit 4 on both ranks, the folders the prepare made gone: $(grep -m1 -F -- "$want" "$work/run.log" | sed 's/^ *//' | cut -c1-120)"
  exit 0
fi
echo "FAIL unshared --out: exit $rc (want 4), the message on $messages of 2 ranks, $(ls "$work/local" | wc -l) entries left in --out's parent"
sed 's/^/  | /' "$work/run.log" | head -20
exit 1

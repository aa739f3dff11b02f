#!/usr/bin/env bash
# Session 2026-11-26, call 6: the data-parallel equivalence tests on the CUDA backend, 2 and 4 ranks on one GPU, with
# the fp16 test's one-rank run taken as micro-batches of b.
set -u
cd "$(dirname "$0")/.."
rm -rf .gpurt/bin && tar xJf .gpurt/bin.tar.xz -C .gpurt
[ -d .gpurt/root ] || tar xJf .gpurt/root.tar.xz -C .gpurt
[ -d .gpurt/lib ] || tar xJf .gpurt/lib.tar.xz -C .gpurt
rt() { (source .gpurt/env.sh && export LD_LIBRARY_PATH=$PWD/.gpurt/lib:$LD_LIBRARY_PATH &&
        source .gpurt/cuda-libs.sh .gpurt/bin/ringtrain 2>/dev/null && "$@"); }
nvidia-smi -L
for np in 2 4; do
  RINGTRAIN_TEST_DEVICE=cuda rt timeout 80 mpirun -np $np --oversubscribe .gpurt/bin/test_equivalence \
    >"$OUT/equivalence-np$np.log" 2>&1
  echo "equivalence ($np ranks, cuda) exit $?"
  grep -aE "largest|OK \]|FAILED|SKIPPED" "$OUT/equivalence-np$np.log" | sed 's/\x1b\[[0-9;]*m//g' | head -24
done

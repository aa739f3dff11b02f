#!/usr/bin/env bash
# ringtrain's BLAS runs the kernels of this CPU: where OpenBLAS does not know the CPU (it then picks its generic SSE3
# kernels, "Prescott") ringtrain starts again with OPENBLAS_CORETYPE naming the widest set the CPU runs, also as an
# MPI rank, and keeps its process name; started through the dynamic loader it says what to set instead; a user's
# OPENBLAS_CORETYPE is kept; a CPU OpenBLAS knows keeps OpenBLAS's own choice. The oracle is OpenBLAS's own choice in
# a process of its own (Python's ctypes) and the CPU's flags in /proc/cpuinfo, so on every machine the case it has is
# checked, and the output says which.
# Usage: blas_kernel_set.sh RINGTRAIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset OPENBLAS_CORETYPE
own=$(python3 -c 'import ctypes; b = ctypes.CDLL("libopenblas.so.0"); b.openblas_get_corename.restype = ctypes.c_char_p
print(b.openblas_get_corename().decode())')
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
  if has avx512_bf16; then widest=Cooperlake; else widest=SkylakeX; fi
elif has avx2 && has fma; then widest=Haswell
elif has avx; then widest=Sandybridge
else widest=""; fi
if [[ $own == Prescott && -n $widest ]]; then
  expected="($widest by OPENBLAS_CORETYPE,"
  echo "this CPU: OpenBLAS picks its fallback (Prescott); ringtrain must start again with $widest"
else
  expected="($own,"
  echo "this CPU: OpenBLAS picks $own itself; ringtrain must keep it"
fi

line=$("$bin" --version | grep '^  BLAS: ')
[[ $line == *"$expected"* ]] || { echo "FAIL: --version's BLAS line is '$line', expected '$expected'"; exit 1; }
echo "ok   --version: $line"

line=$(OPENBLAS_CORETYPE=Haswell "$bin" --version | grep '^  BLAS: ')
[[ $line == *"(Haswell by OPENBLAS_CORETYPE,"* ]] ||
  { echo "FAIL: with the user's OPENBLAS_CORETYPE=Haswell the BLAS line is '$line'"; exit 1; }
echo "ok   the user's OPENBLAS_CORETYPE is kept: $line"

# Started through the dynamic loader, /proc/self/exe is the loader: no restart, a warning naming the setting instead.
loader=$(readlink -f /lib64/ld-linux-x86-64.so.2)
line=$("$loader" "$bin" --version 2>loader.err | grep '^  BLAS: ') ||
  { echo "FAIL: ringtrain --version through $loader: $(cat loader.err)"; exit 1; }
if [[ $own == Prescott && -n $widest ]]; then
  [[ $line == *"(Prescott,"* ]] && grep -q "Set OPENBLAS_CORETYPE=$widest" loader.err ||
    { echo "FAIL: through the loader: '$line', stderr '$(cat loader.err)'"; exit 1; }
  echo "ok   through the dynamic loader: no restart, and stderr says to set OPENBLAS_CORETYPE=$widest"
else
  [[ $line == *"($own,"* && ! -s loader.err ]] ||
    { echo "FAIL: through the loader: '$line', stderr '$(cat loader.err)'"; exit 1; }
  echo "ok   through the dynamic loader: OpenBLAS's own $own, nothing said"
fi

"$bin" prepare synthetic --shape 1,8,8 --classes 4 --samples 64 --test-samples 8 --out data >/dev/null
mpirun -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=data/train \
  --set data.test=data/test --set train.batch_per_rank=8 --set train.epochs=1 --set train.max_steps_per_epoch=2 \
  --set run.device=cpu --set run.dir=run --set run.progress_every_s=1000 \
  --set 'model.layers=[{type="flatten"},{type="dense",units=4}]' >train.log 2>&1 ||
  { echo "FAIL: the 2-rank run failed: $(tail -5 train.log)"; exit 1; }
python3 - "$expected" <<'PY'
import json, sys
blas = json.load(open("run/versions.json"))["BLAS"]
assert sys.argv[1] in blas, f"the 2-rank run's BLAS is {blas!r}, expected {sys.argv[1]!r}"
print(f"ok   a 2-rank run under mpirun: {blas}")
PY

# Started again or not, the process keeps its name: `ps -C ringtrain` and `pkill ringtrain` find it.
"$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=data/train --set data.test=data/test \
  --set train.batch_per_rank=8 --set train.epochs=1000 --set run.device=cpu --set run.dir=named \
  --set run.progress_every_s=1000 --set 'model.layers=[{type="flatten"},{type="dense",units=4}]' >named.log 2>&1 &
named=$!
for _ in $(seq 300); do [ -e named/metrics.jsonl ] && break; sleep 0.1; done  # long after main's first line
found=$(ps -o pid= -C "$(basename "$bin")" | tr -d ' ' | grep -x "$named" || true)
name=$(ps -o comm= -p "$named" || true)
kill "$named" 2>/dev/null; wait "$named" 2>/dev/null || true  # SIGTERM: it checkpoints and ends with 75
[ -n "$found" ] || { echo "FAIL: pid $named is named '$name', not $(basename "$bin")"; exit 1; }
echo "ok   the running process is named $(basename "$bin") (ps -C finds pid $named)"

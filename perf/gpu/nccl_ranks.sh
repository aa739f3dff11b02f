#!/usr/bin/env bash
# The NCCL path with 2 and 4 ranks on one GPU, each rank its own host to NCCL (gpu.share_device: NCCL_HOSTID
# per rank, NCCL's socket transport over loopback): a miniature of a multi-node job with one GPU's compute.
# Runs, writing logs and nccl-summary.jsonl (the record format of perf/gpu/gpu_summary.py) into $OUT:
#   1. the data-parallel equivalence test on the CUDA backend, 2 and 4 ranks (tests/mpi/test_equivalence.cpp);
#   2. Fashion-MNIST-shaped data on 2 ranks for 2 epochs with the trace on, beside the same job on 1 rank: every
#      epoch's param_checksum agreed across ranks (the trainer refuses to go on otherwise), test accuracy in
#      line, and perf/trace_overlap.py's account of the bucket reductions against backward;
#   3. a rank stopped with SIGSTOP under run.collective_timeout_s = 5: the job ends within the timeout and a few
#      seconds, naming the rank; a rank killed with SIGKILL: the job ends;
#   4. ringtrain-allreduce-bench, NCCL against ringtrain's MPI reducer, fp32 and bf16 on the wire, 2 ranks, 1 to 64 MiB.
# DEVICE=cpu runs the same flow on the CPU twin and MPI (a dry run of the script on a host without a GPU).
# Expects binaries in $BIN (.gpurt/bin: ringtrain, test_equivalence, ringtrain-allreduce-bench) and, where the
# host lacks Open MPI or HDF5, the portable runtime of perf/gpu/pack_carried.sh in .gpurt (env.sh).
# Usage (from the repository root):  perf/gpu/nccl_ranks.sh [OUT_DIR]   (default: $OUT)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-.gpurt/bin}
out=${1:-${OUT:?usage: nccl_ranks.sh OUT_DIR (or set OUT)}}
device=${DEVICE:-cuda}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
note() { echo "[nccl_ranks] $*" | tee -a "$out/summary.txt"; }
checks=()  # JSON objects, one per check
check() {  # check NAME PASSED(true|false) [json fields...]
  local name=$1 passed=$2
  shift 2
  checks+=("{\"check\": \"$name\", \"passed\": $passed${*:+, $*}}")
  note "$([ "$passed" = true ] && echo PASS || echo FAIL) $name"
}

export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-1}
source perf/gpu/carried.sh  # rt: the portable runtime around a command
unpack_carried  # .gpurt/root, lib and bin from the carried archives (the GPU host has no MPI or HDF5)
export CUDA_LIBS_LOG=$out/cuda-libs.log
if [ "$device" = cuda ]; then
  on_device=(--set run.device=cuda --set gpu.share_device=true)
  export RINGTRAIN_TEST_DEVICE=cuda
  reducer=nccl
else
  on_device=(--set run.device=cpu)
  reducer=nonblocking
fi
mpi() { local np=$1; shift; rt timeout 300 mpirun -np "$np" --oversubscribe "$@" </dev/null; }
gpu_name=$(nvidia-smi -L 2>/dev/null | head -1)
note "device: ${gpu_name:-none ($device dry run)}"

ran_ok() { grep -qE "OK \] .*DataParallelEquivalence\.$2 " "$1"; }  # ran_ok LOG TEST

# 1. Equivalence, 2 and 4 ranks.
for np in 2 4; do
  mpi "$np" "$bin/test_equivalence" >"$out/equivalence-np$np.log" 2>&1
  rc=$?
  # The two equivalence tests must have run and passed (a skip, e.g. no GPU visible, is a failure here); other
  # tests may skip where the backend lacks a mode (bf16 precision on CUDA).
  passed=false
  [ "$rc" = 0 ] && ran_ok "$out/equivalence-np$np.log" RanksTimesBatchEqualsOneRankTimesNBatch &&
    ran_ok "$out/equivalence-np$np.log" GradientAccumulationEqualsTheLargerBatch &&
    ran_ok "$out/equivalence-np$np.log" EveryOptimizerKeepsRanksTimesBatchEqualToOneRank && passed=true
  check "equivalence on $device: $np ranks x b == 1 rank x ${np}b after 20 steps, with and without accumulation" "$passed" "\"ranks\": $np"
done

# 2. Fashion-MNIST-shaped data, 2 ranks against 1, 2 epochs.
rt "$bin/ringtrain" prepare synthetic --shape 1,28,28 --classes 10 --samples 12000 --test-samples 2000 --shards 4 \
  --out "$work/data" >"$work/prepare.log" 2>&1 || note "prepare failed: $(tail -2 "$work/prepare.log")"
job=(jobs/fashion_mnist.toml --set data.train="$work/data/train" --set data.test="$work/data/test" --set train.epochs=2
     --set train.max_steps_per_epoch=60 --set run.progress_every_s=1000 "${on_device[@]}")
mpi 2 "$bin/ringtrain" train "${job[@]}" --set run.dir="$work/two" --set run.trace=true >"$out/fmnist-2ranks.log" 2>&1
rc2=$?
mpi 1 "$bin/ringtrain" train "${job[@]}" --set run.dir="$work/one" --set train.batch_per_rank=128 >"$out/fmnist-1rank.log" 2>&1
rc1=$?
cp "$work/two/metrics.jsonl" "$out/fmnist-2ranks-metrics.jsonl" 2>/dev/null
cp "$work/one/metrics.jsonl" "$out/fmnist-1rank-metrics.jsonl" 2>/dev/null
cp "$work/two"/trace-rank*.json "$out/" 2>/dev/null
accuracy() { python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if "\"epoch\"" in l]; print(r[-1]["test_acc"] if r else "nan")' "$1/metrics.jsonl" 2>/dev/null || echo nan; }
a2=$(accuracy "$work/two") a1=$(accuracy "$work/one")
close=$(python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print('true' if abs(a-b) <= 0.03 else 'false')" "$a2" "$a1" 2>/dev/null || echo false)
check "fashion_mnist 2 ranks x 64 vs 1 rank x 128, 2 epochs: both end 0, checksums agreed each epoch, test accuracy within 0.03" \
  "$([ "$rc2" = 0 ] && [ "$rc1" = 0 ] && [ "$close" = true ] && echo true || echo false)" \
  "\"test_acc_2ranks\": $a2, \"test_acc_1rank\": $a1"
python3 perf/trace_overlap.py "$work/two" >"$out/trace-overlap.txt" 2>&1
# "N/M reductions started before backward ended", per rank: every rank must have started some early.
early=$(grep -o '[0-9]*/[0-9]* reductions started before backward ended' "$out/trace-overlap.txt" | cut -d/ -f1 | sort -n | head -1)
check "trace: bucket reductions on their own tracks, started before backward ended (perf/trace_overlap.py)" \
  "$([ "${early:-0}" -gt 0 ] && [ "$(ls "$out"/trace-rank*.json 2>/dev/null | wc -l)" = 2 ] && echo true || echo false)" \
  "\"reductions_started_early_min\": ${early:-0}"

# 3. A stalled rank and a killed rank.
ranks_of() { pgrep -f -- "^$bin/ringtrain train .*run.dir=$1( |\$)"; }
fault_run() {  # fault_run NAME SIGNAL: starts 2 ranks, sends SIGNAL to rank 1 once training runs; sets rc, took
  local d=$work/$1
  mpi 2 "$bin/ringtrain" train "${job[@]}" --set train.epochs=20 --set run.dir="$d" --set run.collective_timeout_s=5 \
    >"$out/$1.log" 2>&1 &
  local launcher=$!
  for _ in $(seq 600); do grep -q "^gradients:" "$out/$1.log" 2>/dev/null && break; sleep 0.1; done
  sleep 2
  local victim; victim=$(ranks_of "$d" | tail -1)
  local start=$SECONDS
  [ -n "$victim" ] && kill "-$2" "$victim"
  wait "$launcher"
  rc=$?
  took=$((SECONDS - start))
  for pid in $(ranks_of "$d"); do kill -KILL "$pid" 2>/dev/null; done
}
fault_run stall STOP
check "a rank stopped with SIGSTOP, collective timeout 5 s: the job ends with exit 6 naming the rank within 15 s" \
  "$([ "$rc" = 6 ] && [ "$took" -le 15 ] && grep -q "rank 1" "$out/stall.log" && echo true || echo false)" \
  "\"exit\": $rc, \"seconds\": $took"
fault_run killed KILL
check "a rank killed with SIGKILL: the job ends non-zero within 15 s" \
  "$([ "$rc" != 0 ] && [ "$took" -le 15 ] && echo true || echo false)" "\"exit\": $rc, \"seconds\": $took"

# 4. NCCL against MPI, 2 ranks.
for mib in 1 16 64; do
  for r in "$reducer" nonblocking; do
    for wire in fp32 bf16; do
      mpi 2 "$bin/ringtrain-allreduce-bench" --mib "$mib" --iters 10 --reducer "$r" --wire "$wire" \
        >>"$out/allreduce.jsonl" 2>>"$out/allreduce.log"
    done
  done
done
note "all-reduce, 2 ranks: $(python3 - "$out/allreduce.jsonl" <<'PY' 2>&1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("; ".join("{} {} {} MiB: {:.2f} ms".format(r["reducer"], r.get("wire", "fp32"), r["bytes"] >> 20, r["median_s"] * 1e3)
                for r in rows))
PY
)"

date=$(date +%F)
{
  for c in "${checks[@]}"; do echo "$c"; done
} | python3 -c '
import json, sys
date, device = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    print(json.dumps({"date": date, "device": device, **json.loads(line)}))' "$date" "${gpu_name:-$device dry run}" \
  >"$out/nccl-summary.jsonl"
failed=$(grep -c '"passed": false' "$out/nccl-summary.jsonl")
note "$failed check(s) failed"
[ "$failed" = 0 ]

#!/usr/bin/env bash
# Session 2026-11-26 (third), call 2: the NHWC batch-norm kernels rewritten (coefficients once per thread, several
# rows in flight); the tests, ResNet-50 bf16 NCHW / NHWC / NHWC profiled, the batch-norm and convolution layer
# benchmarks in both layouts, PyTorch channels_last in the same call, the fusion probe v2 (bf16 and fp16 fused
# graphs, graph API against the legacy API's Find per convolution) with the machine's cuDNN and with PyTorch's newer
# one, ResNet-50 NHWC with PyTorch's cuDNN, the 2-rank equivalence tests.
set -u
cd "$(dirname "$0")/.."
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
w="--set run.timing_warmup_steps=10"
n="--set train.precision=bf16 --set gpu.nhwc=true"
STEPS=40 STAGES="tests variants" \
  VARIANTS="bf16=--set train.precision=bf16 $w;nhwc=$n $w;nhwcprof=$n $w --set run.profile_layers=true" \
  timeout 200 perf/gpu/lease_run.sh
echo "lease_run exit $?"
rt timeout 60 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16(_nhwc)?/(batchnorm|conv)' \
  --benchmark_min_time=0.2 >"$OUT/layers-bf16.txt" 2>&1
echo "layer bench exit $?"
PYTHONUNBUFFERED=1 timeout 60 python3 perf/gpu/compare_pytorch.py --models resnet50 --precisions bf16 --skip-matmul \
  --channels-last --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
rt timeout 90 .gpurt/bin/cudnn_fusion_probe >"$x/fusion.jsonl" 2>"$x/fusion.log"
echo "cudnn_fusion_probe (machine's cuDNN) exit $?"
torch_cudnn=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])" 2>/dev/null)/lib
echo "PyTorch's cuDNN: $torch_cudnn: $(ls "$torch_cudnn" 2>&1 | head -3 | tr '\n' ' ')"
LD_LIBRARY_PATH=$torch_cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} rt timeout 90 .gpurt/bin/cudnn_fusion_probe \
  >"$x/fusion-torch-cudnn.jsonl" 2>"$x/fusion-torch-cudnn.log"
echo "cudnn_fusion_probe (PyTorch's cuDNN) exit $?"
rt .gpurt/bin/ringtrain prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) --test-samples 256 \
  --shards 8 --out "$x/s224" >/dev/null 2>&1
LD_LIBRARY_PATH=$torch_cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} rt timeout 90 mpirun -np 1 -x LD_LIBRARY_PATH \
  .gpurt/bin/ringtrain train jobs/resnet50_synthetic.toml --set run.device=cuda --set data.train="$x/s224/train" \
  --set data.test="$x/s224/test" --set run.dir="$x/v-nhwc-torch-cudnn" --set train.max_steps_per_epoch=40 $n $w \
  >"$x/v-nhwc-torch-cudnn.log" 2>&1
echo "resnet50 nhwc with PyTorch's cuDNN exit $?: $(grep -E '^  cuDNN' "$x/v-nhwc-torch-cudnn.log")" \
  "$(grep -E '^epoch 1/1:' "$x/v-nhwc-torch-cudnn.log" | sed 's/.*acc [0-9.]* | //' | cut -c1-40)" \
  "$(grep -oE '"steady_samples_per_s":[0-9.]*' "$x/v-nhwc-torch-cudnn/metrics.jsonl")"
rm -rf "$x/s224"
RINGTRAIN_TEST_DEVICE=cuda rt timeout 60 mpirun -np 2 --oversubscribe .gpurt/bin/test_equivalence \
  >"$x/equivalence-np2.log" 2>&1
echo "equivalence (2 ranks) exit $?"
for f in fusion fusion-torch-cudnn; do  # compact; the whole lines are in extra.tgz
  echo "== $f"
  python3 - "$x/$f.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "shape" not in d: print(d); continue
    print(d["dtype"], d["shape"], d["graph"], d.get("built", d.get("skipped")), d.get("ms"), d.get("tflop_per_s"),
          d.get("algo", d.get("plan", ""))[:40] if isinstance(d.get("algo", d.get("plan", "")), str) else d.get("algo"))
PY
done
tar czf "$OUT/extra.tgz" -C "$x" .

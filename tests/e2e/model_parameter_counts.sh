#!/usr/bin/env bash
# jobs/mobilenet_v2.toml and jobs/efficientnet_b0.toml are torchvision 0.14's mobilenet_v2() and efficientnet_b0():
# the parameter count each run's header states equals the count of torchvision's model, computed here. Parameter
# counts do not depend on the image side, so each job runs one step of 2 samples on a 3x32x32 synthetic split (the
# models' 32x downsampling leaves 1x1) on the CPU twin. Skips (77) where /usr/bin/python3 has no torchvision.
# Usage: model_parameter_counts.sh RINGTRAIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
counts=$(/usr/bin/python3 -c '
import torchvision
for name in ("mobilenet_v2", "efficientnet_b0"):
    m = getattr(torchvision.models, name)()
    print(name, sum(p.numel() for p in m.parameters()))
' 2>/dev/null) || { echo "SKIP: /usr/bin/python3 cannot import torchvision"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin" prepare synthetic --shape 3,32,32 --classes 1000 --samples 2 --test-samples 2 --out data >/dev/null
while read -r name want; do
  "$bin" train "$src/jobs/$name.toml" --set data.train=data/train --set data.test=data/test \
    --set train.batch_per_rank=2 --set train.max_steps_per_epoch=1 --set train.precision=fp32 --set run.device=cpu \
    --set run.dir="$name" --set run.progress_every_s=1000 >"$name.log" 2>&1 || {
    echo "FAIL: $name: $(tail -5 "$name.log")"; exit 1; }
  got=$(sed -n "s/^model '$name': \([0-9]*\) parameters.*/\1/p" "$name.log")
  [ "$got" = "$want" ] || { echo "FAIL: jobs/$name.toml has ${got:-no stated} parameters, torchvision's $want"; exit 1; }
  echo "ok   jobs/$name.toml: $got parameters, as torchvision's $name()"
done <<<"$counts"

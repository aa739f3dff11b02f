#!/usr/bin/env bash
# data.normalize = "device" changes no number: two 2-rank runs on the CPU twin with the same seed and
# pad_crop_flip augmentation, one normalising on the loader threads (the CPU default) and one handing uint8
# batches to the backend's normalize_pixels, record identical losses, accuracies and parameter checksums in
# every epoch; each run's header says where it normalised.
# Usage: normalize_on_device.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 src=$2 mpiexec=$3
source "$src/tests/support/synthetic_runs.sh"
records() {  # records RUN NORMALIZE
  synthetic_records "$1" "epoch train_loss train_acc test_loss test_acc param_checksum" \
    'model.layers=[{type="conv2d",filters=4,kernel=3,padding=1},{type="batchnorm"},{type="relu"},{type="flatten"},{type="dense",units=5}]' \
    data.augment=pad_crop_flip data.loader_threads=2 data.normalize="$2"
}
a=$(records loader loader); b=$(records device device)
grep -q "normalised on the loader threads" loader.log || { echo "FAIL: the loader run does not say where it normalised"; exit 1; }
grep -q "uint8 batches, normalised on the device" device.log || { echo "FAIL: the device run does not say where it normalised"; exit 1; }
[[ $(wc -l <<<"$a") == 2 && $a == "$b" ]] || { echo "FAIL: the records differ:"; echo "$a"; echo "$b"; exit 1; }
echo "ok   normalising on the device records the same losses, accuracies and checksums as the loader:"
echo "$a"

#!/usr/bin/env bash
# Every program a CUDA build makes starts on a machine with no GPU driver: none may record libcuda.so.1 (the driver)
# as a needed library. The CUDA runtime is linked statically and loads the driver when a device is asked for; a
# program that needs libcuda.so.1 instead fails before main() wherever no driver is installed, as CI's machines are.
# Usage: programs_need_no_driver.sh BIN_DIR
set -euo pipefail
bin_dir=$1
checked=0
failed=0
for program in "$bin_dir"/*; do
  [[ -f $program && -x $program ]] || continue
  head -c 4 "$program" | grep -q $'\x7fELF' || continue
  checked=$((checked + 1))
  if readelf -d "$program" | grep -q 'NEEDED.*\[libcuda\.so'; then
    echo "FAIL: $program needs libcuda.so.1 (the driver) and cannot start where none is installed;" \
      "link it with LINKER:--as-needed (kernels/cuda/CMakeLists.txt gives that to everything linking rt_kernels_cuda)"
    failed=$((failed + 1))
  fi
done
if ((checked == 0)); then
  echo "FAIL: no programs found in $bin_dir"
  exit 1
fi
echo "$checked programs checked, $failed need the driver"
((failed == 0))

#!/bin/bash
# Builds and runs dense_forms.cpp and backward_products.cpp from the repository root, against build-gpu's kernel
# library; dense_forms links DnnlDense as it was at 94c2f53 with its transposed form switchable (RT_NO_TRANSPOSED).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
git show 94c2f53:kernels/cpu/dnnl_dense.cpp |
  sed 's/s.out > s.batch) {/s.out > s.batch \&\& !std::getenv("RT_NO_TRANSPOSED")) {/; s/#include <cstddef>/#include <cstddef>\n#include <cstdlib>/' \
  > "$work/dnnl_dense_switchable.cpp"
flags=(-O2 -std=c++20 -fopenmp -I. -I.venv-onednn/include)
libs=(build-gpu/kernels/librt_kernels_cpu.a build-gpu/common/librt_common.a -L.venv-onednn/lib
      -Wl,-rpath,"$PWD/.venv-onednn/lib" -ldnnl -lopenblas -lfmt)
g++ "${flags[@]}" "$here/dense_forms.cpp" "$work/dnnl_dense_switchable.cpp" "${libs[@]}" -o "$work/dense_forms"
g++ "${flags[@]}" "$here/backward_products.cpp" "${libs[@]}" -o "$work/backward_products"
export OPENBLAS_CORETYPE=Cooperlake OMP_NUM_THREADS=2
date -u
for shape in "544 384 1536" "544 1536 384" "544 384 1152" "64 3136 1024" "32 384 1000" "64 384 1536" "128 384 1536" \
             "256 384 1536" "128 3136 1024" "256 3136 1024" "1088 384 1536"; do
  "$work/dense_forms" $shape
done
for shape in "544 384 1536" "544 1536 384" "544 384 1152" "544 384 384" "64 3136 1024"; do
  "$work/backward_products" $shape
done
date -u
rm -rf "$work"

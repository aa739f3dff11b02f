// Owns the bridge to OpenBLAS: the row-major sgemm CPU kernels call, the BLAS thread count, the library description
// printed in `ringtrain --version` (naming the kernel set, and whether OPENBLAS_CORETYPE chose it).
#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <sstream>
#include <string>

namespace ringtrain::kernels::cpu {
namespace {

CBLAS_TRANSPOSE to_cblas(Transpose t) { return t == Transpose::yes ? CblasTrans : CblasNoTrans; }

std::string describe_openblas() {
  // openblas_get_config() reads "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... Zen MAX_THREADS=64"; the first two
  // words are the name and version, the core name is asked for separately because DYNAMIC_ARCH picks it at run time.
  std::istringstream config(openblas_get_config());
  std::string name, version;
  config >> name >> version;
  const char* threading = "sequential";
  switch (openblas_get_parallel()) {
    case 1: threading = "pthreads"; break;
    case 2: threading = "OpenMP"; break;
    default: break;
  }
  // A kernel set named by OPENBLAS_CORETYPE (the user's, or ringtrain's for a CPU OpenBLAS does not know) says so.
  std::ostringstream out;
  out << (name.empty() ? "OpenBLAS" : name) << ' ' << version << " (" << openblas_get_corename()
      << (std::getenv("OPENBLAS_CORETYPE") ? " by OPENBLAS_CORETYPE" : "") << ", " << threading << ')';
  return out.str();
}

}  // namespace

void sgemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc) {
  // An empty product is legal for callers (batch 0, a layer with no inputs); cblas would reject its leading
  // dimensions, so it is handled here.
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int i = 0; i < m; ++i) {
      float* row = c + static_cast<std::ptrdiff_t>(i) * ldc;
      if (beta == 0.0f)
        std::fill(row, row + n, 0.0f);
      else
        for (int j = 0; j < n; ++j) row[j] *= beta;
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void set_compute_threads(int threads) { openblas_set_num_threads(std::max(1, threads)); }

int compute_threads() { return openblas_get_num_threads(); }

const char* blas_description() {
  static const std::string description = describe_openblas();
  return description.c_str();
}

}  // namespace ringtrain::kernels::cpu

// Owns re-executing ringtrain with OPENBLAS_CORETYPE set; see blas_restart.h.
#include "util/blas_restart.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/stderr_print.h"
#include "kernels/cpu/blas_kernel_set.h"

namespace ringtrain::util {

void restart_with_cpu_blas_kernels(char** argv) noexcept {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  std::string wanted;
  try {
    wanted = kernels::cpu::blas_kernel_set_wanted();
  } catch (...) {
    return;
  }
  if (wanted.empty()) return;
  // The same executable, arguments and environment (the launcher's MPI and Slurm variables, the process's CPU
  // binding and PID are kept across exec), plus the kernel set.
  if (setenv("OPENBLAS_CORETYPE", wanted.c_str(), 1) == 0) execv("/proc/self/exe", argv);
  const int error = errno;
  unsetenv("OPENBLAS_CORETYPE");
  stderr_print("ringtrain: warning: OpenBLAS does not know this CPU and runs its generic SSE3 kernels; starting again "
               "with OPENBLAS_CORETYPE={} failed ({}). Set OPENBLAS_CORETYPE={} in the job's environment: its BLAS "
               "products run several times faster.\n",
               wanted, std::strerror(error), wanted);
}

}  // namespace ringtrain::util

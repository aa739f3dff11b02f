// Owns re-executing ringtrain with OPENBLAS_CORETYPE set; see blas_restart.h.
#include "util/blas_restart.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/stderr_print.h"
#include "kernels/cpu/blas_kernel_set.h"

namespace ringtrain::util {
namespace {

constexpr const char* kSelf = "/proc/self/exe";

// A program started through the dynamic loader (`ld-linux-x86-64.so.2 --library-path L ringtrain ...`) is the loader
// to /proc/self/exe, which would take the arguments as its own.
bool started_by_loader() {
  std::array<char, 4096> path{};
  const ssize_t length = readlink(kSelf, path.data(), path.size() - 1);
  if (length <= 0) return false;
  const std::string_view target(path.data(), static_cast<size_t>(length));
  const std::string_view name = target.substr(target.rfind('/') + 1);
  return name.starts_with("ld-") || name.starts_with("ld.so");
}

void say_not_restarted(const std::string& wanted, const char* why) noexcept {
  stderr_print("ringtrain: warning: OpenBLAS does not know this CPU and runs its generic SSE3 kernels; ringtrain did "
               "not start again with OPENBLAS_CORETYPE={} ({}). Set OPENBLAS_CORETYPE={} in the job's environment: "
               "its BLAS products run several times faster.\n",
               wanted, why, wanted);
}

}  // namespace

void restart_with_cpu_blas_kernels(char** argv) noexcept {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  std::string wanted;
  try {
    wanted = kernels::cpu::blas_kernel_set_wanted();
  } catch (...) {
    return;
  }
  if (wanted.empty()) return;
  if (started_by_loader()) return say_not_restarted(wanted, "started through the dynamic loader");
  // The same executable, arguments and environment (the launcher's MPI and Slurm variables, the process's CPU
  // binding and PID are kept across exec), plus the kernel set.
  if (setenv("OPENBLAS_CORETYPE", wanted.c_str(), 1) == 0) execv(kSelf, argv);
  const int error = errno;
  unsetenv("OPENBLAS_CORETYPE");
  say_not_restarted(wanted, std::strerror(error));
}

}  // namespace ringtrain::util

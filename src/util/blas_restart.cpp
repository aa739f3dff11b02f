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

// This executable's path. Exec'd as "/proc/self/exe" the process would be named "exe" (the kernel names it by the
// path's last part), and `ps -C ringtrain`, `pkill ringtrain` and job monitors would no longer find it.
std::string own_path() {
  std::array<char, 4096> path{};
  const ssize_t length = readlink("/proc/self/exe", path.data(), path.size() - 1);
  return length > 0 ? std::string(path.data(), static_cast<size_t>(length)) : std::string();
}

// A program started through the dynamic loader (`ld-linux-x86-64.so.2 --library-path L ringtrain ...`) has the loader
// as its executable, which would take the arguments as its own.
bool is_loader(std::string_view path) {
  const std::string_view name = path.substr(path.rfind('/') + 1);
  return name.starts_with("ld-") || name.starts_with("ld.so");
}

void say_not_restarted(const std::string& wanted, const char* why) noexcept {
  stderr_print("ringtrain: warning: OpenBLAS does not know this CPU and runs its generic SSE3 kernels; ringtrain did "
               "not start again with OPENBLAS_CORETYPE={} ({}). Set OPENBLAS_CORETYPE={} in the job's environment: "
               "its BLAS products run several times faster.\n",
               wanted, why, wanted);
}

void restart(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string wanted = kernels::cpu::blas_kernel_set_wanted();
  if (wanted.empty()) return;
  const std::string self = own_path();
  if (self.empty()) return say_not_restarted(wanted, "/proc/self/exe cannot be read");
  if (is_loader(self)) return say_not_restarted(wanted, "started through the dynamic loader");
  // The same executable, arguments and environment (the launcher's MPI and Slurm variables, the process's CPU
  // binding and PID are kept across exec), plus the kernel set.
  if (setenv("OPENBLAS_CORETYPE", wanted.c_str(), 1) == 0) execv(self.c_str(), argv);
  const int error = errno;
  unsetenv("OPENBLAS_CORETYPE");
  say_not_restarted(wanted, std::strerror(error));
}

}  // namespace

// Whatever fails here leaves the process as it started: slower BLAS products are no reason not to run.
void restart_with_cpu_blas_kernels(char** argv) noexcept {
  try {
    restart(argv);
  } catch (...) {
  }
}

}  // namespace ringtrain::util

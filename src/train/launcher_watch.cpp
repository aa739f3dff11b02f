// Owns the launcher watch; see launcher_watch.h.
#include "train/launcher_watch.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "common/stderr_print.h"

namespace ringtrain::train {
namespace {

std::atomic<pid_t> g_launcher{0};

}  // namespace

void remember_launcher() noexcept { g_launcher = ::getppid(); }

void watch_launcher(int rank) {
  if (g_launcher == 0) remember_launcher();
  std::thread([rank] {
    const pid_t launcher = g_launcher;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      if (::getppid() == launcher) continue;
      stderr_print("ringtrain: rank {}: its launcher (pid {}) is gone, so is the job; this rank ends now (exit "
                         "{}). The last checkpoint is intact: --resume continues from it\n",
                 rank, launcher, static_cast<int>(ExitCode::fault));
      std::fflush(stderr);
      std::_Exit(static_cast<int>(ExitCode::fault));
    }
  }).detach();
}

}  // namespace ringtrain::train

// Owns formatting and pacing of progress lines.
#include "train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "util/clock.h"

namespace ringtrain::train {

namespace {

// A live bar only on a real terminal. Open MPI hands its ranks a pseudo-terminal even when mpirun's own output
// goes to a file or pipe, so under mpirun plain lines are the default; RINGTRAIN_PROGRESS=bar|lines decides.
bool use_live_bar() {
  if (const char* choice = std::getenv("RINGTRAIN_PROGRESS")) return std::strcmp(choice, "bar") == 0;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("SLURM_JOB_ID")) return false;
  return isatty(STDOUT_FILENO) == 1;
}

}  // namespace

Progress::Progress(double every_s, int64_t total_steps, int epochs, bool enabled)
    : every_s_(every_s), total_steps_(total_steps), epochs_(epochs), enabled_(enabled), tty_(use_live_bar()) {
  last_ = util::now_s();
}

std::string Progress::duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

bool Progress::step(int epoch, int64_t step_in_epoch, int64_t steps_per_epoch, int64_t global_step, double loss,
                    double lr, double samples_per_s, double eta_s) {
  if (!enabled_) return false;
  const double now = util::now_s();
  const bool last_step = global_step + 1 == total_steps_;
  if (now - last_ < every_s_ && !last_step) return false;
  last_ = now;
  const double pct = 100.0 * static_cast<double>(global_step + 1) / static_cast<double>(total_steps_);
  const std::string text =
      fmt::format("epoch {}/{} step {}/{} ({:.1f}%) loss {:.4f} lr {:.4g} {:.0f} samples/s ETA {}", epoch + 1, epochs_,
                  step_in_epoch + 1, steps_per_epoch, pct, loss, lr, samples_per_s, duration(eta_s));
  if (tty_) {
    constexpr int width = 24;
    const int filled = static_cast<int>(pct / 100.0 * width);
    fmt::print("\r[{}{}] {}\x1b[K", std::string(static_cast<size_t>(filled), '#'),
               std::string(static_cast<size_t>(width - filled), '.'), text);
    live_line_open_ = true;
  } else {
    fmt::print("{}\n", text);
  }
  std::fflush(stdout);
  return true;
}

void Progress::finish_line() {
  if (live_line_open_) {
    fmt::print("\n");
    live_line_open_ = false;
  }
}

}  // namespace ringtrain::train

// Owns the process-wide rank label; set once by src/ after MPI_Init, read from any thread.
#include "common/process_label.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace ringtrain {
namespace {
std::mutex label_mutex;
std::string label;
std::atomic<int> rank_value{-1};
}  // namespace

void set_process_label(int rank, int ranks, const std::string& host) {
  std::lock_guard lock(label_mutex);
  label = fmt::format("rank {}/{} on {}", rank, ranks, host);
  rank_value = rank;
}

std::string process_label() {
  std::lock_guard lock(label_mutex);
  if (!label.empty()) return label;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("process {} on {}", static_cast<long>(getpid()), host);
}

int process_rank() noexcept { return rank_value; }

}  // namespace ringtrain

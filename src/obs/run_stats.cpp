// Owns the straggler, starvation and memory rules of the epoch record.
#include "obs/run_stats.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace ringtrain::obs {

namespace {

// The median of the first n values of an ascending list.
double median_of_sorted(const std::vector<double>& sorted, size_t n) {
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

}  // namespace

StepTimeSpread step_time_spread(const std::vector<double>& per_rank_s, double straggler_margin) {
  StepTimeSpread s;
  if (per_rank_s.empty()) return s;
  std::vector<double> sorted = per_rank_s;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.min_s = sorted.front();
  s.max_s = sorted.back();
  s.median_s = median_of_sorted(sorted, n);
  s.slowest_rank = static_cast<int>(std::max_element(per_rank_s.begin(), per_rank_s.end()) - per_rank_s.begin());
  if (n < 2) return s;
  // Measured against the others alone: with 2 ranks the median of all would be halfway to the straggler itself.
  s.others_median_s = median_of_sorted(sorted, n - 1);
  // A relative margin alone would name a straggler among steps of microseconds, where no rank waits noticeably.
  constexpr double kNoticeableS = 1e-3;
  const double others = s.others_median_s;
  if (others > 0 && s.max_s > (1 + straggler_margin) * others && s.max_s - others >= kNoticeableS)
    s.straggler_rank = s.slowest_rank;
  return s;
}

std::string straggler_warning(const StepTimeSpread& spread) {
  if (spread.straggler_rank < 0) return "";
  return fmt::format("straggler: rank {} takes {:.1f} ms per step of its own work, {:.0f} % more than the other "
                     "ranks' median ({:.1f} ms); every other rank waits for it in the all-reduce. Look for a slower "
                     "node, another job sharing its cores or GPU, or a slower path to its data",
                     spread.straggler_rank, spread.max_s * 1e3, (spread.max_s / spread.others_median_s - 1) * 100,
                     spread.others_median_s * 1e3);
}

std::string starvation_warning(double data_wait_s, double step_s, int prefetch_batches, const LoaderLoad& loader,
                               double threshold) {
  if (step_s <= 0 || data_wait_s <= threshold * step_s) return "";
  const bool gpu_decode_slowest =
      loader.device_decode_s > 0 && loader.device_decode_s >= std::max(loader.read_s, loader.convert_s);
  const std::string remedy =
      gpu_decode_slowest
          ? fmt::format("GPU decode is the bottleneck: its thread spends {:.1f} ms a batch decoding against {:.1f} ms "
                        "the loader spends reading shards: store smaller photos (prepare images --max-side 256), or "
                        "decode on the loader threads (data.decode = cpu) where the rank has the cores",
                        loader.device_decode_s * 1e3, loader.read_s * 1e3)
      : loader.convert_s >= loader.read_s
          ? fmt::format("the loader's {} {} {:.1f} ms a batch decoding and augmenting against {:.1f} ms "
                        "reading shards: raise data.loader_threads (now {}) where the rank has idle cores{}",
                        loader.threads, loader.threads == 1 ? "thread spends" : "threads spend", loader.convert_s * 1e3,
                        loader.read_s * 1e3, loader.threads,
                        loader.photos ? ", or store smaller photos (prepare images --max-side)" : "")
          : fmt::format("the loader spends {:.1f} ms a batch reading shards against {:.1f} ms decoding and "
                        "augmenting: put the shards on faster storage (ringtrain-bench BM_ShardReader* shows the "
                        "read rate)",
                        loader.read_s * 1e3, loader.convert_s * 1e3);
  return fmt::format("data starvation: the step waited {:.1f} ms of {:.1f} ms ({:.1f} %) for the next batch. Raise "
                     "data.prefetch_batches (now {}) to ride out slow reads; if the wait stays, {}",
                     data_wait_s * 1e3, step_s * 1e3, data_wait_s / step_s * 100, prefetch_batches, remedy);
}

double peak_rss_mb() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

double current_rss_mb() {
  std::ifstream statm("/proc/self/statm");
  long long pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

}  // namespace ringtrain::obs

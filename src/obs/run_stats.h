// Owns the judgements an epoch record makes about where time and memory went: the spread of per-rank step
// times and the straggler among them, data starvation, and resident memory against what the run needs.
// Pure functions of numbers the trainer gathers, so each rule is tested on its own.
#pragma once
#include <string>
#include <vector>

namespace ringtrain::obs {

struct StepTimeSpread {
  double min_s = 0, median_s = 0, max_s = 0;
  double others_median_s = 0;  // the median of every rank but the slowest: what a straggler is measured against
  int slowest_rank = 0;
  int straggler_rank = -1;  // the slowest rank when it is more than `straggler_margin` slower than the others' median
};

// per_rank_s[r]: rank r's own work per step (everything but the all-reduce wait, which makes every rank's
// wall-clock step equal and so hides who is slow).
StepTimeSpread step_time_spread(const std::vector<double>& per_rank_s, double straggler_margin = 0.10);

// "" or a line naming the straggler, how much slower it is, and where to look.
std::string straggler_warning(const StepTimeSpread& spread);

// Where the loader's own time goes, per batch: the shard reads on its thread, and the decoding, augmenting and
// normalising shared by its `threads`; and, where the device decodes the JPEGs (data.decode = gpu), the time of
// its decoding thread (data/decode_ahead.h) per batch, 0 where it does not.
struct LoaderLoad {
  double read_s = 0, convert_s = 0;
  int threads = 1;
  double device_decode_s = 0;
  bool photos = false;  // the split stores JPEGs (prepare images --store jpeg): smaller stored photos would help
};

// "" or a line saying the step waited for data more than `threshold` of its time, and the remedy for what the
// loader measured: the GPU decode when its thread is the slowest stage (smaller stored photos, or the loader threads
// decoding), more loader threads (or smaller stored photos) when converting is the bottleneck, faster storage when
// reading is.
std::string starvation_warning(double data_wait_s, double step_s, int prefetch_batches, const LoaderLoad& loader,
                               double threshold = 0.05);

// Peak resident set of this process so far (getrusage), and its resident set now (/proc/self/statm), MiB.
double peak_rss_mb();
double current_rss_mb();

}  // namespace ringtrain::obs

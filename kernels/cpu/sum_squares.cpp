// Owns the blocked, thread-count-independent sum of squares declared in sum_squares.h.
#include "kernels/cpu/sum_squares.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/thread_runs.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr int64_t kBlock = int64_t{1} << 16;

// Four running sums break the chain of dependent additions; they are added in a fixed order.
double block_squares(const float* x, int64_t count) {
  double lanes[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= count; i += 4)
    for (int lane = 0; lane < 4; ++lane) lanes[lane] += static_cast<double>(x[i + lane]) * x[i + lane];
  for (; i < count; ++i) lanes[0] += static_cast<double>(x[i]) * x[i];
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

}  // namespace

double sum_squares(int64_t n, const float* x) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  for_each_thread_run(compute_threads(), blocks, [&](int64_t first, int64_t end, int) {
    for (int64_t b = first; b < end; ++b)
      partial[static_cast<size_t>(b)] = block_squares(x + b * kBlock, std::min(kBlock, n - b * kBlock));
  });
  return std::accumulate(partial.begin(), partial.end(), 0.0);
}

}  // namespace ringtrain::kernels::cpu

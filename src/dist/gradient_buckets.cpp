// Owns bucket formation and readiness counting for overlapped gradient reduction.
#include "dist/gradient_buckets.h"

#include <algorithm>

namespace ringtrain::dist {

GradientBuckets::GradientBuckets(const std::vector<std::pair<int64_t, int64_t>>& tensor_ranges, int64_t bucket_floats) {
  Bucket current;
  for (auto it = tensor_ranges.rbegin(); it != tensor_ranges.rend(); ++it) {
    const auto [offset, count] = *it;
    if (count <= 0) continue;
    if (current.count > 0 && current.count + count > bucket_floats) {
      buckets_.push_back(current);
      current = {};
    }
    current.begin = offset;
    current.count += count;
  }
  if (current.count > 0) buckets_.push_back(current);
  reset();
}

void GradientBuckets::reset() {
  pending_.resize(buckets_.size());
  for (size_t i = 0; i < buckets_.size(); ++i) pending_[i] = buckets_[i].count;
}

std::vector<int> GradientBuckets::mark_ready(int64_t offset, int64_t count) {
  std::vector<int> completed;
  const int64_t end = offset + count;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const int64_t lo = std::max(offset, buckets_[i].begin);
    const int64_t hi = std::min(end, buckets_[i].begin + buckets_[i].count);
    if (hi <= lo || pending_[i] == 0) continue;
    pending_[i] -= hi - lo;
    if (pending_[i] == 0) completed.push_back(static_cast<int>(i));
  }
  return completed;
}

bool GradientBuckets::all_ready() const {
  return std::all_of(pending_.begin(), pending_.end(), [](int64_t p) { return p == 0; });
}

}  // namespace ringtrain::dist

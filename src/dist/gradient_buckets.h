// Owns the division of the flat gradient buffer into buckets for overlapped reduction, and tracking which
// buckets backward has finished. Buckets are cut from the end of the buffer because backward produces the
// last layers' gradients first; a parameter tensor is never split, so a tensor larger than the bucket size
// gets a bucket of its own (as PyTorch DDP does).
#pragma once
#include <cstdint>
#include <vector>

namespace ringtrain::dist {

struct Bucket {
  int64_t begin = 0, count = 0;  // floats in the flat gradient buffer
};

class GradientBuckets {
 public:
  // tensor_ranges: (offset, count) of each parameter tensor, in buffer order, tiling [0, total).
  GradientBuckets(const std::vector<std::pair<int64_t, int64_t>>& tensor_ranges, int64_t bucket_floats);

  const std::vector<Bucket>& buckets() const { return buckets_; }  // launch order: end of the buffer first
  void reset();
  // Marks [offset, offset+count) as final; returns the buckets that just became complete, in launch order.
  std::vector<int> mark_ready(int64_t offset, int64_t count);
  bool all_ready() const;

 private:
  std::vector<Bucket> buckets_;
  std::vector<int64_t> pending_;  // floats still awaited per bucket
};

}  // namespace ringtrain::dist

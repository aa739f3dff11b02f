// Proves the CPU twin's denormal flushing (kernels/cpu/denormals.h): after flush_denormals, a denormal float reads as
// zero and a product that would be one comes out zero, on the calling thread and on every thread of the OpenMP pool
// the kernels run on.
#include <gtest/gtest.h>

#include "kernels/cpu/denormals.h"

namespace ringtrain::kernels::cpu {
namespace {

// A denormal times one, and the smallest normal float halved: each a denormal without flushing, zero with it.
bool flushes_arithmetic() {
  volatile float denormal = 1e-39f, smallest_normal = 1.17549435e-38f;
  const float product = denormal * 1.0f, halved = smallest_normal * 0.5f;
  return product == 0.0f && halved == 0.0f;
}

TEST(Denormals, AreFlushedOnTheCallingThreadAndEveryPoolThread) {
#if defined(__x86_64__) || defined(__i386__)
  flush_denormals(4);
  EXPECT_TRUE(flushes_denormals());
  EXPECT_TRUE(flushes_arithmetic());
  EXPECT_EQ(pool_threads_flushing_denormals(4), 4);
#else
  GTEST_SKIP() << "denormal flushing is set only on x86 (MXCSR)";
#endif
}

}  // namespace
}  // namespace ringtrain::kernels::cpu

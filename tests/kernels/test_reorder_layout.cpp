// Proves the NCHW <-> NHWC reorder: value (n, c, p) moves from n*C*HW + c*HW + p to n*HW*C + p*C + c, for 4- and
// 2-byte values, at sizes past the reorder's 32 x 32 tiles, and back to the same bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/reorder_layout.h"

using ringtrain::kernels::ActivationLayout;
using ringtrain::kernels::ElementType;
using ringtrain::kernels::Planes;
using ringtrain::kernels::cpu::reorder_layout;

namespace {

template <class T>
void check(ElementType type) {
  for (const Planes p : {Planes{2, 3, 5, type}, Planes{3, 40, 33, type}, Planes{1, 64, 1, type}}) {
    std::vector<T> nchw(static_cast<size_t>(p.elements())), nhwc(nchw.size()), back(nchw.size());
    for (size_t i = 0; i < nchw.size(); ++i) nchw[i] = static_cast<T>(i * 2654435761u);
    reorder_layout(p, ActivationLayout::nhwc, nchw.data(), nhwc.data());
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t at = 0; at < p.hw; ++at)
          ASSERT_EQ(nhwc[static_cast<size_t>((n * p.hw + at) * p.c + c)],
                    nchw[static_cast<size_t>((n * p.c + c) * p.hw + at)])
              << "n " << n << " c " << c << " position " << at;
    reorder_layout(p, ActivationLayout::nchw, nhwc.data(), back.data());
    EXPECT_EQ(back, nchw);
  }
}

TEST(ReorderLayout, MovesEveryValueToItsNhwcPlaceAndBack) {
  check<uint32_t>(ElementType::f32);
  check<uint16_t>(ElementType::bf16);
}

}  // namespace

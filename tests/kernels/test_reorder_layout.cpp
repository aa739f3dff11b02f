// Proves the NCHW <-> NHWC reorder: value (n, c, p) moves from n*C*HW + c*HW + p to n*HW*C + p*C + c, for 4- and
// 2-byte values, at sizes past the reorder's 32 x 32 tiles, and back to the same bits; and NchwIndex, its inverse.
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

// NchwIndex (what dropout draws by) names, for each storage place of an NHWC tensor, the NCHW index of the value the
// reorder put there; for NCHW storage, and for one position per sample, it is the place itself.
TEST(ReorderLayout, NchwIndexNamesWhereEachStoredValueCameFrom) {
  for (const Planes p : {Planes{2, 3, 5, ElementType::f32}, Planes{3, 40, 33, ElementType::f32}}) {
    std::vector<uint32_t> nchw(static_cast<size_t>(p.elements())), nhwc(nchw.size());
    for (size_t i = 0; i < nchw.size(); ++i) nchw[i] = static_cast<uint32_t>(i);
    reorder_layout(p, ActivationLayout::nhwc, nchw.data(), nhwc.data());
    const auto from_nhwc = ringtrain::kernels::nchw_index(p, ActivationLayout::nhwc);
    const auto from_nchw = ringtrain::kernels::nchw_index(p, ActivationLayout::nchw);
    for (int64_t i = 0; i < p.elements(); ++i) {
      ASSERT_EQ(from_nhwc.of(i), int64_t{nhwc[static_cast<size_t>(i)]}) << "stored at " << i;
      ASSERT_EQ(from_nchw.of(i), i);
    }
  }
  const Planes flat{4, 7, 1, ElementType::f32};
  const auto flat_index = ringtrain::kernels::nchw_index(flat, ActivationLayout::nhwc);
  for (int64_t i = 0; i < flat.elements(); ++i) EXPECT_EQ(flat_index.of(i), i);
}

}  // namespace

// Proves the row resize that pads NHWC channels for tensor cores and crops them back: each row's first values are
// copied bit for bit, the padding is zero bits, cropping a padded row gives the original, for 4- and 2-byte values;
// and the channel count it pads to.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/resize_rows.h"

using ringtrain::kernels::ElementType;
using ringtrain::kernels::ResizedRows;
using ringtrain::kernels::tensor_core_channels;
using ringtrain::kernels::cpu::resize_rows;

namespace {

template <class T>
void check(ElementType type) {
  for (const ResizedRows pad : {ResizedRows{7, 3, 8, type}, ResizedRows{5, 20, 24, type}, ResizedRows{4, 8, 8, type}}) {
    std::vector<T> rows(static_cast<size_t>(pad.rows * pad.from)), padded(static_cast<size_t>(pad.rows * pad.to), 1),
        back(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<T>(i * 2654435761u + 1);
    resize_rows(pad, rows.data(), padded.data());
    for (int64_t r = 0; r < pad.rows; ++r)
      for (int64_t i = 0; i < pad.to; ++i)
        ASSERT_EQ(padded[static_cast<size_t>(r * pad.to + i)],
                  i < pad.from ? rows[static_cast<size_t>(r * pad.from + i)] : T{0})
            << "row " << r << " value " << i;
    resize_rows({pad.rows, pad.to, pad.from, type}, padded.data(), back.data());
    EXPECT_EQ(back, rows);
  }
}

TEST(ResizeRows, PadsWithZerosAndCropsBackBitForBit) {
  check<uint32_t>(ElementType::f32);
  check<uint16_t>(ElementType::bf16);
}

TEST(ResizeRows, ChannelsArePaddedToAMultipleOfEight) {
  EXPECT_EQ(tensor_core_channels(3), 8);
  EXPECT_EQ(tensor_core_channels(8), 8);
  EXPECT_EQ(tensor_core_channels(20), 24);
  EXPECT_EQ(tensor_core_channels(64), 64);
}

}  // namespace

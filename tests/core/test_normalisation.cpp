// Normalisation: (value - mean) / std per channel of a planar sample, with the stand-ins for a split without
// statistics; the loader and predict on image files both rely on it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "data/normalisation.h"

using ringtrain::io::DatasetMeta;
using ringtrain::train::Normalisation;

TEST(Normalisation, EachChannelByItsOwnMeanAndStd) {
  DatasetMeta meta;
  meta.shape = {2, 1, 3};
  meta.mean = {10.0f, 100.0f};
  meta.stddev = {2.0f, 50.0f};
  const std::vector<uint8_t> in{10, 12, 0, 100, 150, 255};
  std::vector<float> out(in.size());
  Normalisation(meta, ringtrain::train::input_norm(meta)).apply(in.data(), out.data());
  const std::vector<float> want{0.0f, 1.0f, -5.0f, 0.0f, 1.0f, 3.1f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(out[i], want[i]) << "value " << i;
}

TEST(Normalisation, WithoutStatisticsScalesTo0To1) {
  DatasetMeta meta;
  meta.shape = {1, 1, 2};
  const std::vector<uint8_t> in{0, 255};
  std::vector<float> out(2);
  Normalisation(meta, ringtrain::train::input_norm(meta)).apply(in.data(), out.data());
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 1.0f);
}

// Owns a split's per-channel normalisation numbers and the one-sample normalisation; see normalisation.h.
#include "data/normalisation.h"

#include <fmt/format.h>

#include <cstddef>
#include <utility>

#include "common/error.h"

#include "kernels/cpu/pixel_norm.h"

namespace ringtrain::train {

InputNorm input_norm(const io::DatasetMeta& meta) {
  const auto channels = static_cast<std::size_t>(meta.shape.channels);
  const bool has_mean = meta.mean.size() == channels, has_stddev = meta.stddev.size() == channels;
  InputNorm norm{std::vector<float>(channels, 0.0f), std::vector<float>(channels, 255.0f)};
  for (std::size_t c = 0; c < channels; ++c) {
    if (has_mean) norm.mean[c] = meta.mean[c];
    if (has_stddev && meta.stddev[c] > 0) norm.stddev[c] = meta.stddev[c];
  }
  return norm;
}

InputNorm input_norm(const io::DatasetMeta& meta, const config::JobConfig::Data& keys) {
  if (keys.mean.empty()) return input_norm(meta);
  const auto channels = static_cast<std::size_t>(meta.shape.channels);
  if (keys.mean.size() != channels || keys.stddev.size() != channels)
    throw JobFileError(fmt::format("data.mean and data.std have {} values each, but the data's samples have {} "
                                   "channel{}; give one value a channel",
                                   keys.mean.size(), channels, channels == 1 ? "" : "s"));
  return {std::vector<float>(keys.mean.begin(), keys.mean.end()),
          std::vector<float>(keys.stddev.begin(), keys.stddev.end())};
}

Normalisation::Normalisation(const io::DatasetMeta& meta, InputNorm norm)
    : shape_(meta.shape),
      norm_(std::move(norm)),
      table_(kernels::cpu::pixel_table(meta.shape.channels, norm_.mean.data(), norm_.stddev.data())) {}

void Normalisation::apply(const uint8_t* in, float* out) const {
  const kernels::PixelShape one{1, shape_.channels, int64_t{shape_.height} * shape_.width};
  kernels::cpu::normalize_pixels(one, table_.data(), in, out);
}

}  // namespace ringtrain::train

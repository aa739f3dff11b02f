// Owns ColumnResampler; see resample_columns.h. Every path computes rounded_blend() (kernels/crop_resample.h) on
// exact integers: the scalar loop calls it, the vector path spells it in lanes.
#include "kernels/cpu/resample_columns.h"

#include <algorithm>

#if defined(__AVX512BW__) && defined(__AVX512VL__)
// The masked (maskz) forms below are the plain ones with every lane kept: GCC 12 warns of an uninitialised source in
// the plain forms' headers.
#include <immintrin.h>
#define RT_RESAMPLE_AVX512 1
#endif

namespace ringtrain::kernels::cpu {

namespace {

constexpr int kBlockColumns = 16;
constexpr int kRegisterPairValues = 64;  // two 512-bit registers of 16-bit values, one permutation's reach

}  // namespace

void ColumnResampler::plan(std::span<const AxisTap> taps, int channels) {
  taps_.assign(taps.begin(), taps.end());
  channels_ = channels;
  blocks_.clear();
  const int width = static_cast<int>(taps.size());
  for (int x0 = 0; x0 < width; x0 += kBlockColumns) {
    Block block{x0, std::min(kBlockColumns, width - x0)};
    int low = taps[static_cast<std::size_t>(x0)].first, high = low;
    for (int x = x0; x < x0 + block.columns; ++x) {
      low = std::min(low, taps[static_cast<std::size_t>(x)].first);
      high = std::max(high, taps[static_cast<std::size_t>(x)].second);
    }
    block.source_base = low;
#if defined(RT_RESAMPLE_AVX512)
    const int span = (high - low + 1) * channels;
    if (channels == 1 || channels == 3)
      block.source_values = span <= kRegisterPairValues ? kRegisterPairValues
                            : span <= 2 * kRegisterPairValues ? 2 * kRegisterPairValues
                                                              : 0;
#endif
    blocks_.push_back(block);
  }
  lane_indices_.assign(blocks_.size() * static_cast<std::size_t>(channels) * 2 * kBlockColumns, 0);
  upper_lanes_.assign(blocks_.size() * static_cast<std::size_t>(channels), 0);
  lane_weights_.assign(blocks_.size() * kBlockColumns, 0);
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const Block& block = blocks_[b];
    if (block.source_values == 0) continue;
    for (int i = 0; i < block.columns; ++i) {
      const AxisTap tap = taps_[static_cast<std::size_t>(block.first_column + i)];
      for (int c = 0; c < channels; ++c) {
        const std::size_t slot = b * static_cast<std::size_t>(channels) + static_cast<std::size_t>(c);
        uint16_t* lanes = lane_indices_.data() + slot * 2 * kBlockColumns;
        lanes[2 * i] = static_cast<uint16_t>((tap.first - block.source_base) * channels + c);
        lanes[2 * i + 1] = static_cast<uint16_t>((tap.second - block.source_base) * channels + c);
        for (const int lane : {2 * i, 2 * i + 1})
          if (lanes[lane] >= kRegisterPairValues) upper_lanes_[slot] |= 1u << lane;
      }
      lane_weights_[b * kBlockColumns + static_cast<std::size_t>(i)] =
          static_cast<uint32_t>(kTapOne - tap.weight) | static_cast<uint32_t>(tap.weight) << 16;
    }
  }
}

void ColumnResampler::run(const uint16_t* blended, std::size_t plane, uint8_t* target) const {
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].source_values > 0)
      run_vector(b, blended, plane, target);
    else
      run_scalar(blocks_[b], blended, plane, target);
  }
}

void ColumnResampler::run_scalar(const Block& block, const uint16_t* blended, std::size_t plane,
                                 uint8_t* target) const {
  const int channels = channels_;
  for (int x = block.first_column; x < block.first_column + block.columns; ++x) {
    const AxisTap tap = taps_[static_cast<std::size_t>(x)];
    const uint16_t* left = blended + tap.first * channels;
    const uint16_t* right = blended + tap.second * channels;
    for (int c = 0; c < channels; ++c)
      target[static_cast<std::size_t>(c) * plane + static_cast<std::size_t>(x)] =
          rounded_blend(left[c], right[c], tap.weight);
  }
}

#if defined(RT_RESAMPLE_AVX512)
// The multiply-add takes signed 16-bit values, and a value blended along y reaches 255 x 256: each is offset by
// -32768 (its top bit flipped), which takes 32768 x kTapOne off every column's sum exactly, and the rounding's
// constant puts it back. The weights, at most kTapOne, fit too, and no sum overflows.
void ColumnResampler::run_vector(std::size_t b, const uint16_t* blended, std::size_t plane, uint8_t* target) const {
  const Block& block = blocks_[b];
  const uint16_t* source = blended + static_cast<std::ptrdiff_t>(block.source_base) * channels_;
  const __m512i offset = _mm512_set1_epi16(static_cast<int16_t>(0x8000));
  const __m512i values0 = _mm512_xor_si512(_mm512_loadu_si512(source), offset);
  const __m512i values1 = _mm512_xor_si512(_mm512_loadu_si512(source + 32), offset);
  const bool wide = block.source_values > kRegisterPairValues;
  const __m512i values2 = wide ? _mm512_xor_si512(_mm512_loadu_si512(source + 64), offset) : values0;
  const __m512i values3 = wide ? _mm512_xor_si512(_mm512_loadu_si512(source + 96), offset) : values1;
  const __m512i weights = _mm512_loadu_si512(lane_weights_.data() + b * kBlockColumns);
  const __m512i rounding = _mm512_set1_epi32((32768 * kTapOne) + (1 << 15));
  const auto mask = static_cast<__mmask16>((1u << block.columns) - 1u);
  for (int c = 0; c < channels_; ++c) {
    const std::size_t slot = b * static_cast<std::size_t>(channels_) + static_cast<std::size_t>(c);
    const __m512i lanes = _mm512_loadu_si512(lane_indices_.data() + slot * 2 * kBlockColumns);
    __m512i pairs = _mm512_permutex2var_epi16(values0, lanes, values1);  // reads each index modulo 64
    if (wide)
      pairs = _mm512_mask_mov_epi16(pairs, upper_lanes_[slot], _mm512_permutex2var_epi16(values2, lanes, values3));
    const __m512i sum = _mm512_add_epi32(_mm512_maskz_madd_epi16(0xffff, pairs, weights), rounding);
    _mm512_mask_cvtepi32_storeu_epi8(
        target + static_cast<std::size_t>(c) * plane + static_cast<std::size_t>(block.first_column), mask,
        _mm512_maskz_srli_epi32(0xffff, sum, 16));
  }
}
#else
void ColumnResampler::run_vector(std::size_t b, const uint16_t* blended, std::size_t plane, uint8_t* target) const {
  run_scalar(blocks_[b], blended, plane, target);
}
#endif

}  // namespace ringtrain::kernels::cpu

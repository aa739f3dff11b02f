// Owns the horizontal pass of the CPU crop-and-resize: one output row's values blended along x from a row already
// blended along y, each value rounded once as blend() (kernels/crop_resample.h) rounds it. The taps are the same for
// every row of a sample, so they are planned once per sample. With AVX-512 (BW and VL), sixteen output columns whose
// taps reach at most 128 interleaved source values are gathered by lane permutations (one per channel and 64 values),
// each column's two taps side by side, and blended by one pairwise multiply-add; columns whose taps spread wider (a
// window over about 2.6x the sample's width for RGB, which the JPEG decode's DCT scaling seldom leaves) take the
// scalar loop. Both give the same bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/crop_resample.h"

namespace ringtrain::kernels::cpu {

class ColumnResampler {
 public:
  // Values the row handed to run() must hold past its last one: the vector path reads a whole block's source span.
  static constexpr std::size_t kRowPadding = 128;

  // `taps[x]` is output column x's source columns and weight; channels of the interleaved row.
  void plan(std::span<const AxisTap> taps, int channels);

  // `blended`: one source row blended along y (interleaved, channels per column, kRowPadding values readable past its
  // end). Writes the row's values into `channels` planes `plane` values apart, starting at `target`.
  void run(const uint16_t* blended, std::size_t plane, uint8_t* target) const;

 private:
  struct Block {
    int first_column = 0, columns = 0;  // the outputs [first_column, first_column + columns), at most 16
    int source_base = 0;                // the lowest source column the block reads
    int source_values = 0;              // the vector path's span: 64 or 128 interleaved values; 0: the scalar loop
  };
  void run_scalar(const Block& block, const uint16_t* blended, std::size_t plane, uint8_t* target) const;
  void run_vector(std::size_t block, const uint16_t* blended, std::size_t plane, uint8_t* target) const;

  std::vector<AxisTap> taps_;
  std::vector<Block> blocks_;
  // Per vector block: per channel 32 lane indices into the block's span, output column i's left tap in lane 2i and
  // its right in 2i + 1, and, per channel, which of them reach its second 64 values; then per column its two weights
  // as one 32-bit lane, the left's in the low half. Kept as plain integers so this header needs no intrinsics.
  std::vector<uint16_t> lane_indices_;
  std::vector<uint32_t> upper_lanes_;
  std::vector<uint32_t> lane_weights_;
  int channels_ = 0;
};

}  // namespace ringtrain::kernels::cpu

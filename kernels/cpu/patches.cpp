// Owns the gather and scatter of patches.h. A patch row is C x R x S values and an image row of a patch is S pixels
// of C channels, so each (patch, kernel row) pairs one contiguous NHWC run of S x C values with the patch row's C
// runs of S; the values are whole-element copies of 2 or 4 bytes.
#include "kernels/cpu/patches.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ringtrain::kernels::cpu {
namespace {

// Calls pair(patch value index, image value index) for every value of every patch, patch rows in NHWC output
// order, image values NHWC.
template <typename Pair>
void for_each_patch_value(const Conv2dShape& s, Pair pair) {
  const int oh = s.out_h(), ow = s.out_w(), channels = s.in_channels, rows = s.kernel_h, cols = s.kernel_w;
  const int64_t row_values = int64_t{channels} * rows * cols;
  int64_t patch_row = 0;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j, patch_row += row_values)
        for (int r = 0; r < rows; ++r) {
          const int64_t h = int64_t{i} * s.stride + r, w = int64_t{j} * s.stride;
          const int64_t pixels = ((n * s.in_h + h) * s.in_w + w) * channels;
          for (int c = 0; c < channels; ++c) {
            const int64_t values = patch_row + (int64_t{c} * rows + r) * cols;
            for (int q = 0; q < cols; ++q) pair(values + q, pixels + int64_t{q} * channels + c);
          }
        }
}

template <typename T>
void gather(const Conv2dShape& s, const T* image, T* patches) {
  for_each_patch_value(s, [&](int64_t p, int64_t x) { patches[p] = image[x]; });
}
template <typename T>
void scatter(const Conv2dShape& s, const T* patches, T* image) {
  for_each_patch_value(s, [&](int64_t p, int64_t x) { image[x] = patches[p]; });
}

bool tiles(const Conv2dShape& s) { return s.out_h() * s.stride == s.in_h && s.out_w() * s.stride == s.in_w; }

}  // namespace

bool conv2d_is_patchwise(const Conv2dShape& s) {
  return s.stride > 1 && s.kernel_h == s.stride && s.kernel_w == s.stride && s.padding == 0 && s.groups == 1;
}

DenseShape conv2d_patch_product(const Conv2dShape& s) {
  return {s.batch * s.out_h() * s.out_w(), s.in_channels * s.kernel_h * s.kernel_w, s.filters, s.data};
}

void gather_patches(const Conv2dShape& s, const void* x, void* patches) {
  if (element_bytes(s.data) == 2)
    return gather(s, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(patches));
  gather(s, static_cast<const uint32_t*>(x), static_cast<uint32_t*>(patches));
}

void scatter_patches(const Conv2dShape& s, const void* patches, void* dx) {
  if (!tiles(s))
    std::memset(dx, 0, static_cast<std::size_t>(s.batch) * s.in_h * s.in_w * s.in_channels * element_bytes(s.data));
  if (element_bytes(s.data) == 2)
    return scatter(s, static_cast<const uint16_t*>(patches), static_cast<uint16_t*>(dx));
  scatter(s, static_cast<const uint32_t*>(patches), static_cast<uint32_t*>(dx));
}

}  // namespace ringtrain::kernels::cpu

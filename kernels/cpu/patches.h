// Owns the rearrangement between NHWC images and the patch rows of a convolution whose stride is its kernel and
// which has no padding (ViT's patch embedding, ConvNeXt's stem): its patches do not overlap, so the convolution is
// a dense product of a patches x (C x R x S) matrix with the K x C x R x S filters, and its output is that product's
// rows in NHWC order. Pure permutations of whole values: any element type moves bit for bit.
#pragma once
#include "kernels/op_shapes.h"

namespace ringtrain::kernels::cpu {

// Whether s is such a convolution: kernel = stride > 1 on both axes, no padding, one group (a 1x1 of stride 1 is one
// too, but its input already is its patch rows).
bool conv2d_is_patchwise(const Conv2dShape& s);
// The dense product that s is: batch x out_h x out_w patch rows of in_channels x kernel_h x kernel_w values, to
// s.filters outputs, in s.data.
DenseShape conv2d_patch_product(const Conv2dShape& s);

// patches (rows in NHWC output order, each row's values in the filters' C x R x S order) = s's patches of x (NHWC,
// in s.data). Pixels past the last whole patch (an image the patches do not tile) are not read.
void gather_patches(const Conv2dShape& s, const void* x, void* patches);
// dx (NHWC, in s.data) = the patch rows put back where gather_patches took them; pixels no patch covers are zero.
void scatter_patches(const Conv2dShape& s, const void* patches, void* dx);

}  // namespace ringtrain::kernels::cpu

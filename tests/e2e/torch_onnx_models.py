"""Writes torchvision classifiers with random weights as ONNX files for `ringtrain import`, and images to run them on.

Every model is seeded (torch.manual_seed), nothing is downloaded; every batch norm gets random running statistics,
scale and shift, and every bias initialised to zeros (squeeze-and-excitation's, a classifier's) random values, so
that they change the logits. The model is put in eval mode and exported with opset 13 at 3 x SIZE x SIZE, the batch
dynamic: "fused" as torch.onnx.export does by default (each batch norm folded into the convolution before it),
"preserve" with TrainingMode.PRESERVE (BatchNormalization nodes of their own), "static" as "fused" with the batch
fixed at 1 (no dynamic_axes: torch folds some of its shape arithmetic into constants). The images: COUNT random RGB PNG
files SIZE x SIZE, their pixels as images.npy (N x 3 x SIZE x SIZE, uint8) and labels 0, 1, ... as labels.npy (for a
split to evaluate on).
"vit" is torchvision's VisionTransformer, small (8 x 8 patches, 2 blocks of 4 heads over 64 features), its class
token, position table, attention in-projection bias and head weight (zeros or near them at first) random.
A "refused" model holds an operator import does not map (Softplus), for the refusal test; "smallnet" is a small CNN
with SiLU and Hardswish (exported as x * Sigmoid(x) and x * HardSigmoid(x)), a padded AvgPool2d counting its padding
(torch's default, exported as a Pad of zeros and an AveragePool), that flattens with x.view(x.size(0), -1),
which torch exports with a dynamic batch as Shape, Gather, Unsqueeze, Concat and Reshape. Any other MODEL is the
torchvision.models function of that name with 10 classes (efficientnet_b0, convnext_tiny: their stochastic depth is
the identity in eval mode, and exports as nothing); every LayerNorm gets random scale and shift and every layer scale
(convnext_tiny's) random factors.

usage: torch_onnx_models.py OUT_DIR [--size 64] [--count 4] MODEL:FORM ... (e.g. resnet18:fused)
"""
import argparse
import os

import numpy as np
import torch
import torchvision
from PIL import Image


def randomise_batch_norms(model):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c) * 0.2)
            m.running_var.copy_(torch.rand(c) + 0.5)
            m.weight.data.copy_(torch.rand(c) + 0.5)
            m.bias.data.copy_(torch.randn(c) * 0.2)


def randomise_norms_and_scales(model):
    """LayerNorm's weight and bias, and ConvNeXt's layer scale (1e-6 at first, which would leave each block's body
    out of the logits): random, so that each reaches them."""
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm):
            m.weight.data.copy_(torch.rand_like(m.weight) + 0.5)
            m.bias.data.copy_(torch.randn_like(m.bias) * 0.2)
        if hasattr(m, "layer_scale") and isinstance(m.layer_scale, torch.nn.Parameter):
            m.layer_scale.data.copy_(torch.rand_like(m.layer_scale) * 0.5 + 0.25)


def randomise_zero_biases(model):
    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.bias is not None and not m.bias.any():
            m.bias.data.copy_(torch.randn_like(m.bias) * 0.2)


def refused_model():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Softplus(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))


class SmallNet(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.BatchNorm2d(8),
                                            torch.nn.SiLU(), torch.nn.Conv2d(8, 8, 3, padding=1),
                                            torch.nn.Hardswish(), torch.nn.AvgPool2d(3, 1, 1), torch.nn.MaxPool2d(2))
        self.fc = torch.nn.Linear(8 * (size // 4) ** 2, 10)

    def forward(self, x):
        x = self.features(x)
        return self.fc(x.view(x.size(0), -1))


def small_vit(size):
    """torchvision's VisionTransformer, small: 8 x 8 patches, 2 encoder blocks of 4 heads over 64 features."""
    return torchvision.models.VisionTransformer(image_size=size, patch_size=8, num_layers=2, num_heads=4,
                                                hidden_dim=64, mlp_dim=128, num_classes=10)


def randomise_vit(model):
    """What a ViT starts at zeros, which the logits would not tell from missing: the class token, the attention's
    in-projection bias and the head's weight (its logits would be its bias whatever the image); the position table
    random too."""
    if not isinstance(model, torchvision.models.VisionTransformer):
        return
    model.class_token.data.copy_(torch.randn_like(model.class_token) * 0.5)
    model.encoder.pos_embedding.data.copy_(torch.randn_like(model.encoder.pos_embedding) * 0.5)
    model.heads.head.weight.data.copy_(torch.randn_like(model.heads.head.weight) * 0.5)
    for m in model.modules():
        if isinstance(m, torch.nn.MultiheadAttention):
            m.in_proj_bias.data.copy_(torch.randn_like(m.in_proj_bias) * 0.2)


def make(name, size):
    if name == "vit":
        return small_vit(size)
    if name == "refused":
        return refused_model()
    if name == "smallnet":
        return SmallNet(size)
    return getattr(torchvision.models, name)(num_classes=10)


def export(name, form, out, size):
    torch.manual_seed(0)
    model = make(name, size)
    with torch.no_grad():
        randomise_batch_norms(model)
        randomise_zero_biases(model)
        randomise_norms_and_scales(model)
        randomise_vit(model)
    model.eval()
    mode = torch.onnx.TrainingMode.PRESERVE if form == "preserve" else torch.onnx.TrainingMode.EVAL
    batch = {} if form == "static" else {"dynamic_axes": {"input": {0: "batch"}, "logits": {0: "batch"}}}
    torch.onnx.export(model, torch.randn(1, 3, size, size), os.path.join(out, f"{name}-{form}.onnx"),
                      opset_version=13, training=mode, input_names=["input"], output_names=["logits"], **batch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--count", type=int, default=4)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (a.count, a.size, a.size, 3), dtype=np.uint8)
    for i, image in enumerate(images):
        Image.fromarray(image).save(os.path.join(a.out, f"image{i}.png"))
    np.save(os.path.join(a.out, "images.npy"), images.transpose(0, 3, 1, 2))
    np.save(os.path.join(a.out, "labels.npy"), np.arange(a.count, dtype=np.int64) % 10)
    for spec in a.models:
        name, form = spec.split(":")
        export(name, form, a.out, a.size)


if __name__ == "__main__":
    main()

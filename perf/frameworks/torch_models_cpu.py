"""Owns the PyTorch side of the model comparison (perf/compare_models_cpu.py): torchvision 0.14's mobilenet_v2()
or its VisionTransformer at ViT-S/16's width, trained with SGD (momentum 0.9) on synthetic batches in one process
of --threads threads. Variants: "default" (NCHW tensors) and "channels_last" (model and input in channels-last
memory, oneDNN's preferred layout for convolutions). --precision bf16 runs the forward pass and the loss under
torch.autocast("cpu", dtype=torch.bfloat16) (oneDNN's bf16 products; weights and optimizer fp32). torch 1.13 has no
torch.compile. Prints one JSON line
(models_common.report): samples/s over the steps after the warm-up.

Run with Debian's python3 (python3-torch, python3-torchvision).
"""
import contextlib
import time

import torch
import torch.nn as nn
import torchvision

import models_common as common


def network(args):
    if args.model == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(num_classes=common.CLASSES)
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=args.size, patch_size=16, num_layers=12, num_heads=6, hidden_dim=384,
                             mlp_dim=1536, num_classes=common.CLASSES)


def main():
    args = common.arguments(__doc__)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    channels_last = args.variant == "channels_last"
    model = network(args).train()
    memory = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=memory)
    data = [(torch.from_numpy(x).contiguous(memory_format=memory), torch.from_numpy(y))
            for x, y in common.batches(args, channels_last=False)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=4e-5)
    loss_fn = nn.CrossEntropyLoss()
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.precision == "bf16" else contextlib.nullcontext

    def step(i):
        x, y = data[i % len(data)]
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for i in range(args.warmup):
        step(i)
    start = time.perf_counter()
    for i in range(args.warmup, args.warmup + args.steps):
        loss = step(i)
    seconds = time.perf_counter() - start
    common.report("pytorch", args, seconds, {"version": torch.__version__, "last_loss": float(loss)})


if __name__ == "__main__":
    main()

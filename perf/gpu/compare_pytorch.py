#!/usr/bin/env python3
"""PyTorch reference for ringtrain's GPU throughput: trains the same two models on synthetic data on this GPU
and prints one JSON line per measurement (also appended to --out):

  kind=matmul  the GPU's dense matmul rate (bf16, tf32, strict fp32), the yardstick of the ">= 60 % of the
               measured bf16 rate" target;
  kind=train   samples/s, step time, peak memory (torch.cuda.max_memory_allocated) and achieved FLOP/s for
               the Fashion-MNIST CNN (batch 64) and ResNet-50 (batch 256), per precision.

Precisions: fp32 (strict: TF32 off, as ringtrain's fp32 path), tf32 (PyTorch's default for convolutions),
bf16 (torch.autocast bf16 with fp32 master weights). Models are defined here, torchvision-free, to match
jobs/fashion_mnist.toml and jobs/resnet50_synthetic.toml layer for layer.

Usage: compare_pytorch.py [--models fmnist,resnet50] [--precisions fp32,bf16] [--steps 50] [--warmup 10]
                          [--channels-last] [--out results.jsonl]
"""
import argparse
import json
import platform
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- models ---------------------------------------------------------------------------------------------

class FashionCnn(nn.Module):
    """jobs/fashion_mnist.toml: conv5x5x32 p2 + BN + ReLU + maxpool2 -> conv5x5x64 p2 + BN + ReLU + maxpool2 ->
    dense 1024 + ReLU -> dense 10 (convolutions without bias: batch norm's beta plays it)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2, bias=False)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 7 * 7, 1024)
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: 1x1 -> 3x3 (stride here) -> 1x1 (x4), projection shortcut when the shape changes."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        blocks, cin = [], 64
        for width, count, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for i in range(count):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


MODELS = {
    # name: (constructor, per-sample shape, classes, batch, SGD settings as in the job files)
    "fmnist": (FashionCnn, (1, 28, 28), 10, 64, dict(lr=0.05, momentum=0.9, weight_decay=5e-4)),
    "resnet50": (ResNet50, (3, 224, 224), 1000, 256, dict(lr=0.1, momentum=0.9, weight_decay=1e-4)),
}


# ---- measurement ----------------------------------------------------------------------------------------

def forward_flops_per_sample(model, shape, device):
    """2 x multiply-adds of convolutions and linear layers for one sample (ringtrain counts the same way;
    a training step is counted as 3x forward)."""
    total = 0

    def conv_hook(m, _inp, out):
        nonlocal total
        total += 2 * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1] * out.numel()

    def linear_hook(m, _inp, out):
        nonlocal total
        total += 2 * m.in_features * out.numel()

    hooks = [m.register_forward_hook(conv_hook) for m in model.modules() if isinstance(m, nn.Conv2d)]
    hooks += [m.register_forward_hook(linear_hook) for m in model.modules() if isinstance(m, nn.Linear)]
    model.eval()
    with torch.no_grad():
        model(torch.zeros((1,) + shape, device=device))
    model.train()
    for h in hooks:
        h.remove()
    return total


def set_precision(precision):
    strict = precision == "fp32"
    torch.backends.cuda.matmul.allow_tf32 = not strict and precision == "tf32"
    torch.backends.cudnn.allow_tf32 = not strict


def matmul_rate(dtype, n=8192, reps=20):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        a @ b
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3
    return 2.0 * n ** 3 * reps / seconds


def train(name, precision, steps, warmup, channels_last):
    make, shape, classes, batch, sgd = MODELS[name]
    set_precision(precision)
    torch.manual_seed(0)
    torch.cuda.empty_cache()
    model = make().cuda()
    fwd_flops = forward_flops_per_sample(model, shape, "cuda")
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    opt = torch.optim.SGD(model.parameters(), **sgd)
    # Synthetic data already on the device, as ringtrain's timing excludes nothing but the data wait.
    x = torch.randn((batch,) + shape, device="cuda").to(memory_format=memory_format)
    y = torch.randint(0, classes, (batch,), device="cuda")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(model(x), y, reduction="sum") / batch
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    samples_per_s = batch * steps / seconds
    return {
        "kind": "train", "framework": "pytorch", "model": name, "precision": precision, "batch": batch,
        "channels_last": channels_last, "steps": steps, "warmup_steps": warmup, "timed_steps": steps,
        "step_ms": 1e3 * seconds / steps, "samples_per_s": samples_per_s,
        "peak_memory_mib": torch.cuda.max_memory_allocated() / 2 ** 20,
        "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2 ** 20,
        "forward_flops_per_sample": fwd_flops, "train_flops_per_sample": 3 * fwd_flops,
        "achieved_flops_per_s": 3 * fwd_flops * samples_per_s, "final_loss": float(loss),
        "params": sum(p.numel() for p in model.parameters()),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="fmnist,resnet50")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--channels-last", action="store_true", help="NHWC activations (PyTorch's fastest bf16 layout)")
    ap.add_argument("--skip-matmul", action="store_true")
    ap.add_argument("--out", help="also append the JSON lines to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("compare_pytorch.py: no CUDA device visible to PyTorch")

    common = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version(), "host": platform.node()}
    out = open(args.out, "a") if args.out else None

    def emit(record):
        line = json.dumps({**record, **common})
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    if not args.skip_matmul:
        for label, dtype, tf32 in [("bf16", torch.bfloat16, False), ("tf32", torch.float32, True),
                                   ("fp32", torch.float32, False)]:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            emit({"kind": "matmul", "precision": label, "n": 8192, "flops_per_s": matmul_rate(dtype)})
    for name in args.models.split(","):
        for precision in args.precisions.split(","):
            emit(train(name, precision, args.steps, args.warmup, args.channels_last))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The PyTorch peer of ringtrain's throughput (issues 38, 41): trains the same models on synthetic data already on the
device, under each of PyTorch's execution modes, and prints one JSON line per measurement (also appended to --out),
then a short table:

  kind=matmul  the device's dense matmul rate (bf16, tf32, strict fp32), the yardstick of the model-FLOP share;
  kind=train   one line per model x precision x mode: status ok | skipped | failed (with its reason; a mode that did
               not run carries no number), samples/s and step time over the timed steps (warm-up excluded, CUDA
               events on a GPU), peak memory (torch.cuda.max_memory_allocated, over the whole run and over the timed
               steps alone), compile seconds, achieved FLOP/s.

Modes (--modes; each builds its model afresh from the same seed, then warms up, then times):
  eager                    today's untuned reference: cudnn.benchmark off, torch.optim.SGD's default implementation
  eager_benchmark          cudnn.benchmark on, SGD --sgd (fused by default)
  compile                  torch.compile (default mode) of forward + loss, cudnn.benchmark on, SGD --sgd
  compile_reduce_overhead  torch.compile mode "reduce-overhead" (Inductor + CUDA graphs), as above
  compile_max_autotune     torch.compile mode "max-autotune": minutes of compile on ResNet-50; only when listed
Every mode not listed is still written, as skipped, so a record always shows all five. The step is the jobs':
forward, cross-entropy, backward, SGD with momentum 0.9 and weight decay (jobs/fashion_mnist.toml,
jobs/resnet50_synthetic.toml). Precisions: fp32 (strict: TF32 off, as ringtrain's fp32 path), tf32, bf16
(torch.autocast bf16 with fp32 master weights). fmnist and resnet50 are defined here, torchvision-free, layer for
layer; efficientnet_b0, vit_s16, convnext_tiny and mobilenet_v2 are torchvision's (issue 41's GPU targets, as the job files match them).

--budget-s bounds the whole script: a mode whose estimated cost no longer fits is skipped with that reason.
Compiled modes of one model run one after the other in this process, so Inductor's on-disk cache serves the second.
--device cpu --tiny runs every path on small shapes for a few steps: a check of the logic, not a measurement.

Usage: compare_pytorch.py [--models fmnist,resnet50] [--precisions fp32,bf16] [--modes eager,...] [--steps 50]
                          [--warmup 10] [--min-timed-s 0] [--channels-last] [--sgd fused|foreach|default] [--budget-s S]
                          [--device cuda|cpu] [--tiny] [--skip-matmul] [--out results.jsonl]
"""
import time

T_PROCESS = time.perf_counter()  # before torch's import, which takes seconds of the caller's budget too

import argparse
import gc
import json
import logging
import math
import platform
import signal
import sys
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from torch._dynamo.utils import counters
except ImportError:  # a torch without Dynamo (Debian's 1.13): the compiled modes fail as rows, the rest run
    counters = None

MODES = ["eager", "eager_benchmark", "compile", "compile_reduce_overhead", "compile_max_autotune"]
DEFAULT_MODES = "eager"  # what the callers written before issue 38 expect (run_gpu_bench.sh)
COMPILE_MODE = {"compile": "default", "compile_reduce_overhead": "reduce-overhead",
                "compile_max_autotune": "max-autotune"}

# Guesses of a mode's whole cost (build, warm-up with its compile, timed steps) in seconds, used only to decide
# whether it still fits --budget-s before any of that model's modes has been measured in this process. Never
# reported as a result. GPU: an H100/H200 with 16 cores for Inductor's compile workers.
PRIOR_COST_S = {
    ("cuda", "fmnist"): {"eager": 5, "eager_benchmark": 5, "compile": 40, "compile_reduce_overhead": 30,
                         "compile_max_autotune": 180},
    ("cuda", "resnet50"): {"eager": 15, "eager_benchmark": 20, "compile": 150, "compile_reduce_overhead": 90,
                           "compile_max_autotune": 900},
    ("cpu", "fmnist"): {"eager": 2, "eager_benchmark": 2, "compile": 60, "compile_reduce_overhead": 40,
                        "compile_max_autotune": 120},
    ("cpu", "resnet50"): {"eager": 10, "eager_benchmark": 10, "compile": 300, "compile_reduce_overhead": 200,
                          "compile_max_autotune": 900},
    ("cuda", "efficientnet_b0"): {"eager": 20, "eager_benchmark": 50, "compile": 200, "compile_reduce_overhead": 120,
                                  "compile_max_autotune": 1200},
    ("cuda", "vit_s16"): {"eager": 15, "eager_benchmark": 15, "compile": 120, "compile_reduce_overhead": 80,
                          "compile_max_autotune": 900},
    ("cuda", "convnext_tiny"): {"eager": 20, "eager_benchmark": 20, "compile": 150, "compile_reduce_overhead": 100,
                                "compile_max_autotune": 900},
    ("cuda", "mobilenet_v2"): {"eager": 15, "eager_benchmark": 40, "compile": 120, "compile_reduce_overhead": 80,
                               "compile_max_autotune": 900},
    ("cpu", "efficientnet_b0"): {"eager": 10, "eager_benchmark": 10, "compile": 300, "compile_reduce_overhead": 200,
                                 "compile_max_autotune": 900},
    ("cpu", "vit_s16"): {"eager": 10, "eager_benchmark": 10, "compile": 200, "compile_reduce_overhead": 150,
                         "compile_max_autotune": 900},
    ("cpu", "convnext_tiny"): {"eager": 10, "eager_benchmark": 10, "compile": 300, "compile_reduce_overhead": 200,
                               "compile_max_autotune": 900},
    ("cpu", "mobilenet_v2"): {"eager": 10, "eager_benchmark": 10, "compile": 200, "compile_reduce_overhead": 150,
                              "compile_max_autotune": 900},
}


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


def efficientnet_b0(_side):
    import torchvision
    return torchvision.models.efficientnet_b0()


def mobilenet_v2(_side):
    import torchvision
    return torchvision.models.mobilenet_v2()


def convnext_tiny(_side):
    import torchvision
    return torchvision.models.convnext_tiny()


def vit_s16(side):
    """ViT-S/16 as jobs/vit_s16.toml: torchvision's VisionTransformer at DeiT-S's width."""
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=side, patch_size=16, num_layers=12, num_heads=6, hidden_dim=384, mlp_dim=1536)


MODELS = {
    # name: (constructor of the input's side, per-sample shape, classes, batch, SGD settings as in the job files).
    # The issue-41 models are torchvision's, as jobs/efficientnet_b0.toml and jobs/vit_s16.toml are checked against
    # (ringtrain trains the ViT job with optimizer.name = "sgd" to compare).
    "fmnist": (lambda _side: FashionCnn(), (1, 28, 28), 10, 64, dict(lr=0.05, momentum=0.9, weight_decay=5e-4)),
    "resnet50": (lambda _side: ResNet50(), (3, 224, 224), 1000, 256, dict(lr=0.1, momentum=0.9, weight_decay=1e-4)),
    "efficientnet_b0": (efficientnet_b0, (3, 224, 224), 1000, 256, dict(lr=0.1, momentum=0.9, weight_decay=1e-5)),
    "vit_s16": (vit_s16, (3, 224, 224), 1000, 256, dict(lr=0.1, momentum=0.9, weight_decay=1e-4)),
    "mobilenet_v2": (mobilenet_v2, (3, 224, 224), 1000, 256, dict(lr=0.1, momentum=0.9, weight_decay=4e-5)),
    "convnext_tiny": (convnext_tiny, (3, 224, 224), 1000, 128, dict(lr=0.1, momentum=0.9, weight_decay=5e-2)),
}
# --tiny: shapes small enough for a 2-core CPU to run every mode (Fashion-MNIST's dense layer fixes its 28x28).
TINY = {"fmnist": ((1, 28, 28), 8), "resnet50": ((3, 32, 32), 4), "efficientnet_b0": ((3, 32, 32), 4),
        "vit_s16": ((3, 32, 32), 4), "convnext_tiny": ((3, 32, 32), 4),
        "mobilenet_v2": ((3, 32, 32), 4)}


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

    # nn.MultiheadAttention runs its projections through F.multi_head_attention_forward, not as modules: the
    # q/k/v and output projections (4 D x D per token) and the two products (2 T x T x D) are counted here.
    # Read from its output (the query's shape), since torchvision passes the inputs by keyword, which hooks miss.
    def attention_hook(m, _inp, out):
        nonlocal total
        attended = out[0]
        tokens = attended.shape[1] if m.batch_first else attended.shape[0]
        samples = attended.shape[0] if m.batch_first else attended.shape[1]
        d = m.embed_dim
        total += 2 * samples * (4 * tokens * d * d + 2 * tokens * tokens * d)

    hooks = [m.register_forward_hook(conv_hook) for m in model.modules() if isinstance(m, nn.Conv2d)]
    hooks += [m.register_forward_hook(linear_hook) for m in model.modules()
              if isinstance(m, nn.Linear) and not isinstance(m, nn.modules.linear.NonDynamicallyQuantizableLinear)]
    hooks += [m.register_forward_hook(attention_hook) for m in model.modules() if isinstance(m, nn.MultiheadAttention)]
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


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def matmul_rate(dtype, device, n, reps):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            a @ b
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1e3
    else:
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        seconds = time.perf_counter() - t0
    return 2.0 * n ** 3 * reps / seconds


def make_sgd(params, sgd, wanted):
    """(optimizer, implementation used, why it differs from the one wanted or None)."""
    params = list(params)  # a refused constructor may have drawn a generator dry
    if wanted == "default":
        return torch.optim.SGD(params, **sgd), "default", None
    if wanted == "fused":
        try:
            return torch.optim.SGD(params, fused=True, **sgd), "fused", None
        except (RuntimeError, ValueError, TypeError) as e:  # a torch or device without the fused kernel
            note = f"fused SGD refused ({type(e).__name__}: {e}); foreach instead"
            return torch.optim.SGD(params, foreach=True, **sgd), "foreach", note
    return torch.optim.SGD(params, foreach=True, **sgd), "foreach", None


class CudagraphSkips(logging.Handler):
    """Inductor's reasons for running a graph of a reduce-overhead compile without CUDA graphs (it only warns), so a
    row never claims CUDA graphs it did not have."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.reasons = []

    def emit(self, record):
        self.reasons.append(record.getMessage()[:200])


def memory_mib(fn, device):
    return fn() / 2 ** 20 if device.type == "cuda" else None


def train(name, precision, mode, args, device):
    make, shape, classes, batch, sgd = MODELS[name]
    if args.tiny:
        shape, batch = TINY[name]
    set_precision(precision)
    # Autotuning's search on the first steps of each shape is warm-up; the untuned reference keeps the default.
    torch.backends.cudnn.benchmark = mode != "eager"
    torch.manual_seed(0)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    model = make(shape[-1]).to(device)
    fwd_flops = forward_flops_per_sample(model, shape, device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    opt, sgd_impl, sgd_note = make_sgd(model.parameters(), sgd, "default" if mode == "eager" else args.sgd)
    # Synthetic data already on the device, as ringtrain's timing excludes nothing but the data wait.
    x = torch.randn((batch,) + shape, device=device).to(memory_format=memory_format)
    y = torch.randint(0, classes, (batch,), device=device)
    bf16 = precision == "bf16"

    def forward_loss(x, y):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            return F.cross_entropy(model(x), y)

    if mode in COMPILE_MODE:
        forward_loss = torch.compile(forward_loss, mode=COMPILE_MODE[mode])
    # CUDA graphs replay into the same output buffers: each step tells the graph trees that the last one is done.
    graphs = mode == "compile_reduce_overhead" and device.type == "cuda"

    def step():
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        loss = forward_loss(x, y)
        loss.backward()
        opt.step()
        return loss

    synchronize(device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    def skipped_graphs():
        return counters["inductor"]["cudagraph_skips"] if counters is not None else 0

    skips, skips_before = CudagraphSkips(), skipped_graphs()
    skip_log = logging.getLogger("torch._inductor.cudagraph_utils.__cudagraphs")
    skip_log.addHandler(skips)
    try:
        t0 = time.perf_counter()
        step()
        synchronize(device)
        first_step_s = time.perf_counter() - t0
        for _ in range(args.warmup - 1):
            step()
        synchronize(device)
        warmup_s = time.perf_counter() - t0
    finally:
        skip_log.removeHandler(skips)
    # Graphs Inductor ran without CUDA graphs (on the CPU: all of them, with no reason logged).
    cudagraph_skips = skipped_graphs() - skips_before
    whole_peak = memory_mib(torch.cuda.max_memory_allocated, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def timed(steps):
        """(device seconds, host seconds, last loss) of `steps` steps: CUDA events on a GPU, the host clock else."""
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t1 = time.perf_counter()
        if device.type == "cuda":
            start.record()
        for _ in range(steps):
            loss = step()
        if device.type == "cuda":
            end.record()
        synchronize(device)
        host = time.perf_counter() - t1
        return (start.elapsed_time(end) / 1e3 if device.type == "cuda" else host), host, loss

    steps, warmup = args.steps, args.warmup
    seconds, host_seconds, loss = timed(steps)
    if seconds < args.min_timed_s:
        # A launch-bound model's 30 steps are a few milliseconds: time a segment long enough to be steady, and
        # count the short one as warm-up.
        warmup += steps
        steps = min(args.max_timed_steps, math.ceil(steps * args.min_timed_s / seconds))
        seconds, host_seconds, loss = timed(steps)
    samples_per_s = batch * steps / seconds
    steady_peak = memory_mib(torch.cuda.max_memory_allocated, device)
    return {
        "status": "ok", "batch": batch, "sgd": sgd_impl, "sgd_note": sgd_note,
        "steps": steps, "warmup_steps": warmup, "timed_steps": steps,
        "timer": "cuda events" if device.type == "cuda" else "host clock",
        "step_ms": 1e3 * seconds / steps, "host_step_ms": 1e3 * host_seconds / steps,
        "samples_per_s": samples_per_s,
        # The first step holds Dynamo's trace and Inductor's compile of forward and backward (and cuDNN's search).
        "first_step_s": first_step_s, "compile_s": first_step_s if mode in COMPILE_MODE else None,
        "warmup_s": warmup_s,
        "peak_memory_mib": max(whole_peak, steady_peak) if whole_peak is not None else None,
        "steady_peak_memory_mib": steady_peak,
        "peak_reserved_mib": memory_mib(torch.cuda.max_memory_reserved, device),
        "forward_flops_per_sample": fwd_flops, "train_flops_per_sample": 3 * fwd_flops,
        "achieved_flops_per_s": 3 * fwd_flops * samples_per_s, "final_loss": float(loss.detach()),
        "params": sum(p.numel() for p in model.parameters()),
        **({"cudagraph_skips": cudagraph_skips, "cudagraph_skip_reasons": skips.reasons}
           if mode == "compile_reduce_overhead" else {}),
    }


def release(device):
    """Drops the compiled graphs (and their CUDA graph pools) of the mode that ran, so the next starts clean."""
    if counters is not None:
        torch._dynamo.reset()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def estimate_s(device, name, mode, spent):
    """A mode's expected cost: what it cost for this model here already (another precision), else what another
    compiled mode of this model cost (Inductor's cache makes the later ones cheaper), else the prior guess."""
    if (name, mode) in spent:
        return spent[(name, mode)], "measured"
    if mode in ("compile", "compile_reduce_overhead"):
        for other in ("compile", "compile_reduce_overhead"):
            if (name, other) in spent:
                return spent[(name, other)], f"measured ({other})"
    return PRIOR_COST_S[(device.type, name)][mode], "guessed"


class KilledByTimeout(BaseException):
    """The caller's SIGTERM: a BaseException, so that no `except Exception` inside torch takes it for its own."""


def table(records):
    lines = [f"{'model':9} {'prec':4} {'layout':6} {'mode':24} {'status':7} {'samples/s':>10} {'step ms':>8} "
             f"{'peak MiB':>9} {'compile s':>9}  note"]
    for r in records:
        def num(key, fmt):
            width = int(fmt.split(".")[0])
            return format(r[key], fmt) if r.get(key) is not None else "-".rjust(width)
        note = r.get("reason") or r.get("note") or r.get("sgd_note") or (f"sgd {r['sgd']}" if r.get("sgd") else "")
        lines.append(f"{r['model']:9} {r['precision']:4} {'nhwc' if r['channels_last'] else 'nchw':6} "
                     f"{r['mode']:24} {r['status']:7} {num('samples_per_s', '10.0f')} {num('step_ms', '8.2f')} "
                     f"{num('peak_memory_mib', '9.0f')} {num('compile_s', '9.1f')}  {note}")
    return lines


def main():
    t_start = T_PROCESS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="fmnist,resnet50")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--modes", default=DEFAULT_MODES, help=f"comma-separated, of {','.join(MODES)}")
    ap.add_argument("--steps", type=int, help="timed steps (default 50; 2 with --tiny)")
    ap.add_argument("--warmup", type=int, help="steps before them, at least 1 (default 10; 1 with --tiny)")
    ap.add_argument("--min-timed-s", type=float, default=0.0,
                    help="when --steps take less device time than this, time a longer segment (fmnist on a GPU)")
    ap.add_argument("--max-timed-steps", type=int, default=2000, help="the longest such segment")
    ap.add_argument("--channels-last", action="store_true", help="NHWC activations (PyTorch's fastest bf16 layout)")
    ap.add_argument("--sgd", choices=["fused", "foreach", "default"], default="fused",
                    help="SGD implementation for every mode but eager (which keeps torch's default)")
    ap.add_argument("--budget-s", type=float, help="skip modes whose estimated cost no longer fits this many seconds")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--tiny", action="store_true", help="small shapes and few steps: checks the logic, not speed")
    ap.add_argument("--skip-matmul", action="store_true")
    ap.add_argument("--out", help="also append the JSON lines to this file")
    args = ap.parse_args()
    args.steps = args.steps if args.steps is not None else (2 if args.tiny else 50)
    args.warmup = max(1, args.warmup if args.warmup is not None else (1 if args.tiny else 10))
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        sys.exit(f"compare_pytorch.py: unknown mode(s) {unknown}; known: {MODES}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("compare_pytorch.py: no CUDA device visible to PyTorch")

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    common = {"device": torch.cuda.get_device_name() if device.type == "cuda" else
              f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)", "torch": torch.__version__, "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version(), "triton": triton_version, "python": platform.python_version(),
              "host": platform.node(), "tiny": args.tiny}
    out = open(args.out, "a") if args.out else None
    trained = []

    def emit(record):
        line = json.dumps({**record, **common})
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    if not args.skip_matmul:
        n, reps = (512, 5) if args.tiny else (8192, 20)
        for label, dtype, tf32 in [("bf16", torch.bfloat16, False), ("tf32", torch.float32, True),
                                   ("fp32", torch.float32, False)]:
            if tf32 and device.type != "cuda":
                emit({"kind": "matmul", "precision": label, "n": n, "status": "skipped",
                      "reason": "TF32 is a GPU tensor-core format"})
                continue
            torch.backends.cuda.matmul.allow_tf32 = tf32
            emit({"kind": "matmul", "precision": label, "n": n, "status": "ok",
                  "flops_per_s": matmul_rate(dtype, device, n, reps)})

    # The caller's `timeout` ends this process with SIGTERM: the mode then running is written as failed, and every
    # later one as skipped, before the table, so a cut-off call still says what ran.
    killed = []

    def on_sigterm(_signum, _frame):
        if killed:  # a second delivery (timeout signals the process and its group): the first is being handled
            return
        killed.append(time.perf_counter() - t_start)
        raise KilledByTimeout(f"SIGTERM after {killed[0]:.0f} s (the caller's timeout)")

    signal.signal(signal.SIGTERM, on_sigterm)
    spent = {}
    for name in args.models.split(","):
        for precision in args.precisions.split(","):
            for mode in MODES:
                head = {"kind": "train", "framework": "pytorch", "model": name, "precision": precision, "mode": mode,
                        "compile_mode": COMPILE_MODE.get(mode), "channels_last": args.channels_last,
                        "cudnn_benchmark": mode != "eager" if device.type == "cuda" else None}
                if killed:
                    record = {**head, "status": "skipped", "reason": f"the run was ended {killed[0]:.0f} s in"}
                elif mode not in modes:
                    why = ("minutes of compile: only when --modes names it" if mode == "compile_max_autotune"
                           else "not in --modes")
                    record = {**head, "status": "skipped", "reason": why}
                elif args.budget_s is not None:
                    left = args.budget_s - (time.perf_counter() - t_start)
                    cost, how = estimate_s(device, name, mode, spent)
                    record = None if cost <= left else {
                        **head, "status": "skipped",
                        "reason": f"--budget-s: {left:.0f} s left, {how} cost {cost:.0f} s"}
                else:
                    record = None
                if record is None:
                    t0 = time.perf_counter()
                    try:
                        record = {**head, **train(name, precision, mode, args, device)}
                        if mode == "compile_reduce_overhead" and device.type != "cuda":
                            record["note"] = "no CUDA graphs off a GPU: Inductor's code alone"
                        elif record.get("cudagraph_skips"):
                            record["note"] = (f"Inductor ran {record['cudagraph_skips']} graph(s) without CUDA graphs: "
                                              + "; ".join(record["cudagraph_skip_reasons"]))
                    # A mode that fails is recorded as failed, and the others still run (or, once killed, are
                    # written as skipped).
                    except (Exception, KilledByTimeout) as e:
                        traceback.print_exc()
                        record = {**head, "status": "failed", "reason": f"{type(e).__name__}: {str(e)[:400]}"}
                    try:
                        release(device)
                    except (Exception, KilledByTimeout) as e:  # a sticky CUDA error, or the kill: rows still written
                        record["release_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                    spent[(name, mode)] = time.perf_counter() - t0
                    record["mode_wall_s"] = spent[(name, mode)]
                emit(record)
                trained.append(record)
    print("\n".join(table(trained)), flush=True)
    print(f"compare_pytorch.py: {time.perf_counter() - t_start:.0f} s in all, torch {torch.__version__}", flush=True)


if __name__ == "__main__":
    main()

"""The PyTorch side of train_like_torch.sh (see its header for what the test proves).

usage: train_like_torch.py make OUT [SEED]
       train_like_torch.py check OUT RUN_DIR SPLIT sgd|adamw LR WEIGHT_DECAY EPOCHS BATCH [nesterov=1]
                           [clip=MAX_NORM] [milestones=E1,E2,... decay=FACTOR]

`make` writes a small seeded CNN as ONNX (the start both sides train from), its state_dict, and random uint8 images
with labels. `check` trains the same network with torch.optim on the same batches and compares it with the
checkpoint ringtrain wrote after every step of RUN_DIR; the recipe knobs as PyTorch spells them: SGD(nesterov=True),
torch.nn.utils.clip_grad_norm_ before each step, and MultiStepLR's drops at the milestones (epochs, as steps
round(epoch x steps per epoch)), each where asked. Two ways:
  - free-running: torch's N steps from the start against ringtrain's last checkpoint, every parameter, running
    statistic and optimizer state tensor (what "trains as torch trains" means to a user);
  - step by step: torch started from ringtrain's own state after step k (parameters, running statistics, optimizer
    state) takes step k + 1. Its optimizer state (SGD's velocity, Adam's moments: linear in the gradient and its
    square) and running statistics are compared with ringtrain's checkpoint k + 1, and ringtrain's new parameters
    with torch.optim's update rule applied to ringtrain's own inputs (the parameters of checkpoint k, the optimizer
    state of checkpoint k + 1).
Why both, and why the update rule apart: fp32 rounding is amplified in two places that have nothing to do with how
ringtrain trains. A ReLU input or a max pool's runner-up within rounding of its kink flips on one side and not on
the other, and Adam's update m / (sqrt(v) + eps) of an element whose gradient is ~1e-6 of its tensor's largest
turns the gradient's last bits into a different step (measured: a gradient of 2e-7 against 0.28 gave a 3e-5
different weight after one step). The step-by-step comparison has neither (every step starts from the same numbers,
and the update rule is checked on the same inputs), so it says whether every step is torch's step. The free-running
one holds only along a trajectory that keeps clear of both, so torch's own fp32 run is first compared with its fp64
run from the same start: if fp32 rounding alone moves torch by more than a tenth of the tolerance, the setup (not
ringtrain) is ill-conditioned and the test says so instead of blaming either side.

Nothing about ringtrain's formats is assumed where it can be read: the start is what import read from the ONNX file
(eval-mode export with TrainingMode.PRESERVE: batch norms stay nodes of their own; the default export folds them into
the convolutions, leaving no batch norm to train), checked bit for bit against torch's state_dict; the normalisation
is the model's, which import wrote into the job file as data.mean and data.std (torchvision's ImageNet values), not
the statistics the train shard carries (a fine-tune feeds a model the inputs it was made for); the tensors are matched by the checkpoint's tensor_names and
tensor_sizes in the model's order.
"""
import math
import os
import sys
import tomllib

import h5py
import numpy as np
import torch

C, SIDE, CLASSES, TRAIN, TEST = 3, 8, 10, 72, 16  # 72 = 4 batches of 16 and 8 left over, which ringtrain drops
TOLERANCE = 1e-4  # of each tensor's largest |value|
BETAS, EPS, MOMENTUM = (0.9, 0.999), 1e-8, 0.9  # what train_like_torch.sh sets (ringtrain's defaults)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(C, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.Flatten(), torch.nn.Linear(16 * (SIDE // 2) ** 2, CLASSES))

    def forward(self, x):
        return self.features(x)


def make(out, seed=0):
    seed = int(seed)
    torch.manual_seed(seed)
    net = Net()
    with torch.no_grad():
        # Random running statistics, scales and shifts: with the defaults (0, 1, 1, 0) a start that lost or swapped
        # them would still start both sides alike.
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c) * 0.2)
                m.running_var.copy_(torch.rand(c) + 0.5)
                m.weight.copy_(torch.rand(c) + 0.5)
                m.bias.copy_(torch.randn(c) * 0.2)
    net.eval()
    torch.onnx.export(net, torch.randn(1, C, SIDE, SIDE), f"{out}/model.onnx", opset_version=13,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    torch.save(net.state_dict(), f"{out}/start.pt")
    rng = np.random.default_rng(seed + 7)
    # Channels of different means and spreads, so that normalising with another channel's statistics, or on 0..1
    # pixels, shows.
    scale = np.array([1.0, 0.5, 0.25]).reshape(1, C, 1, 1)
    shift = np.array([0, 100, 20]).reshape(1, C, 1, 1)
    for name, n in (("train", TRAIN), ("test", TEST)):
        x = (rng.integers(0, 256, (n, C, SIDE, SIDE)) * scale + shift).astype(np.uint8)
        np.save(f"{out}/{name}_x.npy", x)
        np.save(f"{out}/{name}_y.npy", rng.integers(0, CLASSES, n).astype(np.int64))


# Which parameters weight decay applies to, in the model's order: weights (conv, linear), as ringtrain decays them.
DECAYS = [p.dim() > 1 for p in Net().parameters()]
BN_CHANNELS = [m.num_features for m in Net().modules() if isinstance(m, torch.nn.BatchNorm2d)]
SLOTS = {"sgd": [("velocity", "momentum_buffer")], "adamw": [("adam_m", "exp_avg"), ("adam_v", "exp_avg_sq")]}


class State:
    """A training state as named flat arrays, in ringtrain's tensor order: "param i", "<slot> i" (optimizer state
    of parameter i, by ringtrain's dataset name), "batchnorm b running_mean|running_var"."""

    def __init__(self, tensors, labels, step):
        self.tensors, self.labels, self.step = tensors, labels, step

    @staticmethod
    def from_checkpoint(path, optimizer, step):
        with h5py.File(path, "r") as f:
            names = f.attrs["tensor_names"]
            names = (names.decode() if isinstance(names, bytes) else str(names)).split("\n")[:-1]
            sizes = [int(n) for n in f["tensor_sizes"][:]]
            flat = {"param": f["params"][:]}
            for slot, _ in SLOTS[optimizer]:
                if slot in f:  # import's checkpoint has none
                    flat[slot] = f[slot][:]
            states = f["states"][:]
        assert sum(sizes) == flat["param"].size, f"{path}: tensor_sizes sum to {sum(sizes)}"
        tensors, at = {}, 0
        for i, size in enumerate(sizes):
            for kind, values in flat.items():
                tensors[f"{kind} {i}"] = values[at:at + size]
            at += size
        assert 2 * sum(BN_CHANNELS) == states.size, f"{path}: {states.size} running statistics"
        at = 0
        for b, c in enumerate(BN_CHANNELS):  # each batch norm's running mean, then its running variance
            for what in ("running_mean", "running_var"):
                tensors[f"batchnorm {b} {what}"] = states[at:at + c]
                at += c
        return State(tensors, names, step)


class Knobs:
    """The recipe knobs of a case: Nesterov, clipping by global norm (0: off), and the rate's drops."""

    def __init__(self, lr, args, steps_per_epoch):
        given = dict(a.split("=", 1) for a in args)
        self.nesterov = given.get("nesterov") == "1"
        self.clip = float(given.get("clip", 0))
        milestones = [float(e) for e in given["milestones"].split(",")] if "milestones" in given else []
        self.drops = [round(e * steps_per_epoch) for e in milestones]
        self.decay, self.base = float(given.get("decay", 1)), lr

    def lr(self, step):
        """MultiStepLR's rate for optimizer step `step` (0-based): the base times decay per milestone passed."""
        return self.base * self.decay ** sum(1 for d in self.drops if d <= step)


class Torch:
    """The network and torch.optim's optimizer, configured as the job configures ringtrain's."""

    def __init__(self, out, optimizer, lr, wd, dtype=torch.float32, knobs=None):
        self.net = Net()
        self.net.load_state_dict(torch.load(f"{out}/start.pt"))
        self.net.to(dtype).train()
        self.dtype, self.optimizer = dtype, optimizer
        self.params = list(self.net.parameters())
        weights = [p for p, d in zip(self.params, DECAYS) if d]
        others = [p for p, d in zip(self.params, DECAYS) if not d]
        groups = [{"params": weights, "weight_decay": wd}, {"params": others, "weight_decay": 0.0}]
        self.knobs = knobs
        if optimizer == "sgd":
            self.opt = torch.optim.SGD(groups, lr=lr, momentum=MOMENTUM, nesterov=bool(knobs and knobs.nesterov))
        else:
            self.opt = torch.optim.AdamW(groups, lr=lr, betas=BETAS, eps=EPS)
        self.bns = [m for m in self.net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        self.kinks = []
        for m in self.net.modules():
            if isinstance(m, torch.nn.ReLU):
                m.register_forward_hook(lambda _, i, o: self.kinks.append(i[0].detach().abs().min()))
            if isinstance(m, torch.nn.MaxPool2d):
                m.register_forward_hook(lambda _, i, o: self.kinks.append(self.runner_up_gap(i[0].detach())))

    @staticmethod
    def runner_up_gap(x):
        """The smallest gap between a 2x2 window's largest value and its runner-up, over windows whose largest is
        not 0 (after a ReLU, all-zero windows are ties whatever the rounding)."""
        w = x.unfold(2, 2, 2).unfold(3, 2, 2).reshape(*x.shape[:2], x.shape[2] // 2, x.shape[3] // 2, 4)
        top = w.topk(2, dim=-1).values
        gap = (top[..., 0] - top[..., 1])[top[..., 0] > 0]
        return gap.min() if gap.numel() else torch.tensor(math.inf)

    def step(self, x, y, k=0):
        """Optimizer step k (0-based); returns how near its forward pass came to a kink."""
        self.kinks = []
        self.opt.zero_grad()
        torch.nn.functional.cross_entropy(self.net(x.to(self.dtype)), y).backward()
        if self.knobs:
            if self.knobs.clip > 0:
                torch.nn.utils.clip_grad_norm_(self.params, self.knobs.clip)
            for group in self.opt.param_groups:
                group["lr"] = self.knobs.lr(k)
        self.opt.step()
        return min(float(k) for k in self.kinks)

    def load(self, state):
        """Take ringtrain's state (parameters, running statistics, optimizer state after state.step steps)."""
        with torch.no_grad():
            for i, p in enumerate(self.params):
                p.copy_(torch.from_numpy(state.tensors[f"param {i}"].copy()).view_as(p))
            for b, m in enumerate(self.bns):
                m.running_mean.copy_(torch.from_numpy(state.tensors[f"batchnorm {b} running_mean"].copy()))
                m.running_var.copy_(torch.from_numpy(state.tensors[f"batchnorm {b} running_var"].copy()))
        self.opt.state.clear()
        if state.step == 0:
            return
        for i, p in enumerate(self.params):
            for ours, theirs in SLOTS[self.optimizer]:
                self.opt.state[p][theirs] = torch.from_numpy(state.tensors[f"{ours} {i}"].copy()).view_as(p)
            if self.optimizer == "adamw":
                self.opt.state[p]["step"] = torch.tensor(float(state.step))

    def state(self, labels, step):
        tensors = {}
        for i, p in enumerate(self.params):
            tensors[f"param {i}"] = p.detach().double().numpy().ravel()
            for ours, theirs in SLOTS[self.optimizer]:
                if theirs in self.opt.state[p]:
                    tensors[f"{ours} {i}"] = self.opt.state[p][theirs].double().numpy().ravel()
        for b, m in enumerate(self.bns):
            tensors[f"batchnorm {b} running_mean"] = m.running_mean.double().numpy().ravel()
            tensors[f"batchnorm {b} running_var"] = m.running_var.double().numpy().ravel()
        return State(tensors, labels, step)


def update_rule(optimizer, before, after, i, lr, wd, nesterov=False):
    """torch.optim's update of parameter i (torch 1.13's _single_tensor_sgd and _single_tensor_adamw, in float64)
    from ringtrain's parameters and optimizer state `before` the step and its optimizer state `after` it. SGD: p -= lr
    * buf, where buf already holds d = g + wd * p; with Nesterov p -= lr * (d + momentum * buf), d being buf less
    momentum times the buf before; AdamW: p = p (1 - lr wd) - lr / c1 * m / (sqrt(v) / sqrt(c2) + eps)."""
    p = before.tensors[f"param {i}"].astype(np.float64)
    if optimizer == "sgd":
        buf = after.tensors[f"velocity {i}"].astype(np.float64)
        if not nesterov:
            return p - lr * buf
        buf_before = before.tensors.get(f"velocity {i}", np.zeros_like(buf)).astype(np.float64)
        return p - lr * (buf - MOMENTUM * buf_before + MOMENTUM * buf)
    wd_i = wd if DECAYS[i] else 0.0
    t = after.step
    c1, c2 = 1 - BETAS[0] ** t, 1 - BETAS[1] ** t
    m, v = after.tensors[f"adam_m {i}"].astype(np.float64), after.tensors[f"adam_v {i}"].astype(np.float64)
    return p * (1 - lr * wd_i) - lr / c1 * m / (np.sqrt(v) / math.sqrt(c2) + EPS)


def label(key, state):
    """A tensor as ringtrain names it, e.g. "conv2d 3x3x8 s1 p1.weight adam_v"."""
    if key.startswith("batchnorm"):
        return key
    kind, index = key.split(" ")
    return state.labels[int(index)] + ("" if kind == "param" else f" {kind}")


def compare(ours, theirs, keys=None):
    """Over the tensors both hold: the worst (relative difference, line) and the lines beyond the tolerance. The
    difference is relative to the tensor's largest |value| on the reference side."""
    worst, failures = (-1.0, ""), []
    if keys is None:
        assert set(ours.tensors) == set(theirs.tensors), sorted(set(ours.tensors) ^ set(theirs.tensors))
        keys = sorted(ours.tensors)
    for key in keys:
        o, t = ours.tensors[key].astype(np.float64), theirs.tensors[key].astype(np.float64)
        assert o.shape == t.shape, f"{key}: {o.shape} against {t.shape}"
        scale = float(np.max(np.abs(t)))
        diff = float(np.max(np.abs(o - t)))
        rel = diff / scale if scale else diff
        line = f"{label(key, ours)}: max |diff| {diff:.3g} = {rel:.3g} x its largest |value| {scale:.3g}"
        if not rel <= TOLERANCE:  # NaN fails too
            failures.append(line)
        if rel > worst[0]:
            worst = (rel, line)
    return worst, failures


def check(out, run_dir, split, optimizer, lr, wd, epochs, batch, *knob_args):
    lr, wd, epochs, batch = float(lr), float(wd), int(epochs), int(batch)
    shards = sorted(f for f in os.listdir(split) if f.endswith(".h5"))
    assert len(shards) == 1, f"{split}: {shards}"
    with h5py.File(f"{split}/{shards[0]}", "r") as f:
        split_mean = np.asarray(f.attrs["mean"], np.float32)
        shard_images = f["images"][:]
    with open(f"{out}/job.toml", "rb") as f:
        data = tomllib.load(f)["data"]
    mean = np.asarray(data["mean"], np.float32).reshape(1, C, 1, 1)
    std = np.asarray(data["std"], np.float32).reshape(1, C, 1, 1)
    assert np.abs(mean.ravel() - split_mean).max() > 1, "the split's mean is the model's: the test could not tell them apart"
    x = np.load(f"{out}/train_x.npy")
    y = torch.from_numpy(np.load(f"{out}/train_y.npy"))
    assert np.array_equal(shard_images, x), "the train shard does not hold train_x.npy in its order"
    # kernels/pixel_norm.h: (v - mean) / std in fp32 on 0..255 values, the job's mean and std in 0..255 units.
    inputs = torch.from_numpy((x.astype(np.float32) - mean) / std)
    steps = len(x) // batch  # shuffle off, one rank: the split's order every epoch, the last partial batch dropped
    total = epochs * steps
    knobs = Knobs(lr, knob_args, steps)
    batches = [(inputs[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]) for s in range(steps)] * epochs

    def ringtrain(step):
        path = f"{out}/init.h5" if step == 0 else f"{run_dir}/checkpoints/ckpt-s{step:09d}.h5"
        return State.from_checkpoint(path, optimizer, step)

    init = ringtrain(0)
    labels = init.labels
    start = Torch(out, optimizer, lr, wd, knobs=knobs).state(labels, 0)
    (rel, line), _ = compare(init, start)
    if rel != 0:
        sys.exit(f"FAIL {optimizer}: import's checkpoint is not torch's start bit for bit: {line}")

    # Step by step.
    step_worst, step_failures = {}, []
    for k, (bx, by) in enumerate(batches):
        before, after = ringtrain(k), ringtrain(k + 1)
        t = Torch(out, optimizer, lr, wd, knobs=knobs)
        t.load(before)
        t.step(bx, by, k)
        theirs = t.state(labels, k + 1)
        # The gradient's work (optimizer state) and the running statistics: against torch.optim's step.
        not_params = [key for key in after.tensors if not key.startswith("param ")]
        worst, failures = compare(after, theirs, not_params)
        # The update rule: ringtrain's parameters against torch's rule on ringtrain's own inputs.
        rule = State({f"param {i}": update_rule(optimizer, before, after, i, knobs.lr(k), wd, knobs.nesterov)
                      for i in range(len(labels))}, labels, k + 1)
        rule_worst, rule_failures = compare(after, rule, [f"param {i}" for i in range(len(labels))])
        for what, (w, f) in (("state", (worst, failures)), ("rule", (rule_worst, rule_failures))):
            step_failures += [f"step {k + 1}: {line}" for line in f]
            if w[0] > step_worst.get(what, (-1.0,))[0]:
                step_worst[what] = (w[0], f"step {k + 1}: {w[1]}")
    for line in step_failures:
        print(f"FAIL {optimizer} step by step: {line}")

    # Free-running, with torch's own conditioning first: its fp32 run against its fp64 run.
    free, exact = Torch(out, optimizer, lr, wd, knobs=knobs), Torch(out, optimizer, lr, wd, torch.float64, knobs)
    margins, parted = [], None
    for k, (bx, by) in enumerate(batches, 1):
        margins.append(free.step(bx, by, k - 1))
        exact.step(bx, by, k - 1)
        if parted is None and compare(ringtrain(k), free.state(labels, k))[1]:
            parted = k
    conditioning, _ = compare(free.state(labels, total), exact.state(labels, total))
    free_worst, free_failures = compare(ringtrain(total), free.state(labels, total))
    for line in free_failures:
        print(f"FAIL {optimizer} free-running, after {total} steps: {line}")
    print(f"{optimizer}: fp32 rounding alone moves torch's {total} steps by {conditioning[0]:.3g} of a tensor's "
          f"largest value ({conditioning[1]}); nearest kink per step (|ReLU input| or max-pool runner-up gap): "
          + " ".join(f"{m:.2g}" for m in margins))
    if step_failures:
        sys.exit(1)
    if conditioning[0] > TOLERANCE / 10:
        sys.exit(f"FAIL {optimizer}: this setup is ill-conditioned: torch's fp32 run departs from its own fp64 run "
                 f"by {conditioning[0]:.3g}, so no fp32 trainer can be held to {TOLERANCE:g}; change the seed or the "
                 f"rate (train_like_torch.py make OUT SEED)")
    if free_failures:
        sys.exit(f"FAIL {optimizer}: every step from ringtrain's own state is torch's step, but the free-running "
                 f"runs parted at step {parted}, whose forward pass came within {margins[parted - 1]:.2g} of a kink "
                 f"(torch's fp32 and fp64 runs stay within {conditioning[0]:.3g}): look for a kink (a ReLU input or a "
                 f"max-pool tie near 0), or a small gradient under Adam, on ringtrain's trajectory")
    print(f"ok   {optimizer}: {total} steps ({epochs} epochs of {steps}) free-running from the same start: every "
          f"parameter, running statistic and optimizer state within {TOLERANCE:g} of torch's; worst {free_worst[1]}")
    print(f"ok   {optimizer}: each step from ringtrain's own state: optimizer state and running statistics as "
          f"torch.optim's step leaves them, worst {step_worst['state'][1]}; parameters as torch.optim's update rule "
          f"gives them, worst {step_worst['rule'][1]}")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(*sys.argv[2:])
    else:
        check(*sys.argv[2:])

"""Compares a ringtrain model with torchvision's model of the same name (torch_model), two interpreters apart (torch
lives in /usr/bin/python3, onnxruntime in .venv-onnx):
  /usr/bin/python3 torchvision_logits.py count SIDE NAME...
      prints each model's name and parameter count for SIDE x SIDE images (a ViT's position table depends on it);
  .venv-onnx/bin/python3 torchvision_logits.py onnx MODEL.onnx OUT.npz
      runs ringtrain's export on 4 random images of its input shape (pixel values 0..255) and saves the pixels, the
      logits and the graph's input normalisation;
  /usr/bin/python3 torchvision_logits.py torch CHECKPOINT NAME OUT.npz
      loads the checkpoint's parameters (in ringtrain's declaration order, ringtrain_order) and batch-norm running
      statistics into torch_model(NAME), runs it in evaluation on the same normalised pixels, and fails unless every
      logit is within 1e-4 of the largest one of onnxruntime's.
Parameters in declaration order and the export's numbers (tests/e2e/check_onnx.py holds it to `predict`) make this
the check that each layer sits where torchvision has it, with its stride, padding, groups and activation."""
import sys

import numpy as np


def run_onnx(model_path, out):
    import onnx
    import onnxruntime
    from onnx import numpy_helper

    graph = onnx.load(model_path).graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim][1:]
    pixels = np.random.default_rng(0).uniform(0, 255, [4] + dims).astype(np.float32)
    logits = onnxruntime.InferenceSession(model_path).run(["logits"], {"pixels": pixels})[0]
    np.savez(out, pixels=pixels, logits=logits, mean=constants["input_mean"], std=constants["input_std"])


def ringtrain_order(model):
    """The model's parameters in the order ringtrain declares its layers' tensors. torchvision declares them so,
    except where a module registers a parameter of its own before its submodules: ConvNeXt's CNBlock.layer_scale
    (ringtrain's layer_scale is the block body's last layer, so that parameter moves after the block's others) and
    the VisionTransformer's class_token (ringtrain's class_token layer follows the patch convolution)."""
    named = list(model.named_parameters())

    def move_after(own, last_of):
        names = [n for n, _ in named]
        moved = named.pop(names.index(own))
        last = max(i for i, (n, _) in enumerate(named) if n.startswith(last_of))
        named.insert(last + 1, moved)

    for own in [n for n, _ in named if n.endswith(".layer_scale")]:
        move_after(own, own[:-len("layer_scale")])
    if any(n == "class_token" for n, _ in named):
        move_after("class_token", "conv_proj.")
    return [p for _, p in named]


def vit_s16(side):
    """jobs/vit_s16.toml in torch: torchvision's VisionTransformer at DeiT-S's width (torchvision 0.14 names ViT-B and
    larger only), for SIDE x SIDE images."""
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=side, patch_size=16, num_layers=12, num_heads=6, hidden_dim=384, mlp_dim=1536)


def attention_probe(_side):
    """tests/e2e/attention_probe.toml in torch: torch.nn.MultiheadAttention (width 8, 2 heads) over the 8x5x1
    input's 5 positions as tokens, its output flattened channel-major as ringtrain's flatten, a Linear to 3."""
    import torch

    class AttentionProbe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)
            self.head = torch.nn.Linear(8 * 5, 3)

        def forward(self, x):
            tokens = x.flatten(2).transpose(1, 2)  # N x T x D
            y, _ = self.attention(tokens, tokens, tokens, need_weights=False)
            return self.head(y.transpose(1, 2).flatten(1))

    return AttentionProbe()


MODELS_OF_OUR_OWN = {"attention_probe": attention_probe, "vit_s16": vit_s16}


def torch_model(name, side):
    """torchvision.models' NAME(), or NAME of MODELS_OF_OUR_OWN, for SIDE x SIDE images."""
    import torchvision
    return MODELS_OF_OUR_OWN[name](side) if name in MODELS_OF_OUR_OWN else getattr(torchvision.models, name)()


def count(side, names):
    for name in names:
        print(name, sum(p.numel() for p in torch_model(name, side).parameters()))


def run_torch(checkpoint, name, saved):
    import h5py
    import torch

    with h5py.File(checkpoint, "r") as f:
        params, states, sizes = f["params"][:], f["states"][:], f["tensor_sizes"][:]
    s = np.load(saved)
    model = torch_model(name, s["pixels"].shape[-1]).eval()
    with torch.no_grad():
        at = 0
        for i, p in enumerate(ringtrain_order(model)):
            assert p.numel() == sizes[i], f"tensor {i}: torchvision {tuple(p.shape)}, checkpoint {sizes[i]} values"
            p.copy_(torch.from_numpy(params[at:at + p.numel()]).view_as(p))
            at += p.numel()
        at_state = 0
        for bn in (m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)):
            for stat in (bn.running_mean, bn.running_var):  # ringtrain's state order
                stat.copy_(torch.from_numpy(states[at_state:at_state + bn.num_features]))
                at_state += bn.num_features
    assert at == params.size and at_state == states.size, f"the checkpoint holds more than torch's {name}"
    x = (torch.from_numpy(s["pixels"]) - torch.from_numpy(s["mean"])) / torch.from_numpy(s["std"])
    with torch.no_grad():
        want = model(x).numpy()
    diff, peak = float(np.abs(want - s["logits"]).max()), float(np.abs(want).max())
    ok = diff <= 1e-4 * peak and peak > 0
    print(f"{'ok  ' if ok else 'FAIL'} {name}: largest |torch - ringtrain| logit difference {diff:.3g}, "
          f"largest logit {peak:.3g}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if sys.argv[1] == "count":
        count(int(sys.argv[2]), sys.argv[3:])
    elif sys.argv[1] == "onnx":
        run_onnx(sys.argv[2], sys.argv[3])
    else:
        run_torch(sys.argv[2], sys.argv[3], sys.argv[4])

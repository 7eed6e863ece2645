"""TDL002 cuda-call-ignores-input-device: a new tensor moved with ``.cuda()`` next to an
input whose device is at hand."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from ..model import Violation
from .base import Context, Example, Rule


class CudaCallIgnoresInputDevice(Rule):
    code = "TDL002"
    name = "cuda-call-ignores-input-device"
    summary = "a new tensor moved with `.cuda()` while an input's device is at hand"
    triggers = ("@bare-cuda",)  # a `.cuda(` call with no device first (words.TEXT_TESTS)
    needs = (("bare:cuda",),)  # the gate on the code: a `cuda` method called with no device
    fixable = "sometimes"
    fix_summary = '`.to(<input>.device)` (unsafe)'
    what = """
        A bare `.cuda()` on a tensor the function made itself (not a parameter, not
        `self.x`, not a module; what a method of the object returns, `self.blur(mask)`,
        is made, and so is a parameter the function certainly bound again before, to
        something that does not read it: fairseq's quantizers' `if scale is None: scale,
        zero_point = obs.calculate_qparams()`), in a function that asks one of its inputs for its device
        (`p.device`, `p.is_cuda`, `p.get_device()`, `p.new_zeros(...)`), or that makes the
        new tensor from a tensor input, its size or the names its shape gives
        (`torch.tensor(y.size(0)).cuda()`, `dim_k, dim_b = q.shape` then
        `torch.ones(dim_k).cuda()`, `edge = torch.ByteTensor(t.size())` then
        `edge.cuda()`): typical library code such as `scale.cuda()` next to
        `w.device`, or
        `window_sum.cuda() if magnitude.is_cuda else window_sum`. Also any bare `.cuda()`
        under an `if` that tests another tensor's `.is_cuda` (`if
        next(model.parameters()).is_cuda: input = input.cuda()`, as model-complexity
        counters and vocoders write it; or its device's type, `if "cuda" in
        str(self.conv1.weight.device):`, `x.device.type == "cuda"`; one conjunct of an
        `and`, not negated, no `or`; the focal losses' cached weight, `if inputs.is_cuda
        and not self.alpha.is_cuda: self.alpha = self.alpha.cuda()`): the
        code moves there *because* that tensor is on a GPU. Not a flag of an object
        (`if self.is_cuda:`, `if args.is_cuda:`), nor, for an input the function asks, in
        a function that keeps tensors on the CPU itself (`feats[-1] = feats[-1].cpu()`,
        BasicVSR++'s `cpu_cache`): there the inputs may be on the CPU on purpose, and
        `.cuda()` brings data back to the GPU (a bare `.cuda()`, TDL001). A result read
        out to the CPU (`preds = out.argmax(1).cpu()`) is no offload. Not a tensor that a
        collective sends later (`dist.all_gather(counts, local_len)`, a wrapper's
        `allgather(...)`) where no collective sends the input's own data: it goes where
        the communicator is, the current device under NCCL, and the input may be on the
        CPU (where `zs = y.sum(0)` is all-reduced beside it, as data2vec does, the
        input's device is the communicator's: reported). Nor a parameter annotated with a
        type that holds no tensor (`cp_group: ProcessGroup`, whose `.size()` counts ranks).
    """
    why = """
        The input is on the device the caller chose; `.cuda()` sends the new tensor to
        the current device instead (cuda:0 unless set). On any rank but 0, or after
        `model.to("cuda:1")`, the next op mixes devices and fails, or silently runs on
        GPU 0.
    """
    example = """
        def normalize(w, eps):
            scale = torch.tensor(eps).cuda()
            return w / (w.norm() + scale) if w.is_cuda else w
    """
    use_instead = """
        def normalize(w, eps):
            scale = torch.tensor(eps).to(w.device)
            return w / (w.norm() + scale) if w.is_cuda else w
    """
    fix_safety = """
        `.to(<input>.device)`: **unsafe**, since it changes placement when the input is on
        another device than the current one, which is the point.
    """
    VALID = (
        # a negated test says nothing of where the tensor is (a bare `.cuda()`: TDL001)
        "import torch\ndef probe(flag, x, y):\n    if not (flag and x.is_cuda):\n        y = y.cuda()\n    return y\n",
        "import torch\ndef probe(x, y):\n    if not x.is_cuda and y.numel():\n        y = y.cuda()\n    return y\n",
        "import torch\ndef f(x):\n    return x.cuda()\n",  # moves the input itself
        # ... bound again to what it reads (Tacotron's `to_gpu`: still the input's data)
        "import torch\ndef to_gpu(x):\n    x = x.contiguous()\n    if torch.cuda.is_available():\n"
        "        x = x.cuda(non_blocking=True)\n    return x.device, x\n",
        # ... or only perhaps: the argument when one is given
        "import torch\ndef f(w, scale=None):\n    if scale is None:\n        scale = torch.ones(1)\n"
        "    scale = scale.cuda()\n    return w.device, scale\n",
        "import torch\ndef f(x):\n    return torch.zeros(3).to(x.device)\n",
        "import torch\ndef f(n):\n    return torch.zeros(n).cuda()\n",  # no input device at hand
        # a size from a list's length, not from a tensor input's shape
        "import torch\ndef f(items):\n    n = len(items)\n    return torch.zeros(n).cuda()\n",
        # a name bound to what the input gives, not to a new tensor (the input's own data, moved)
        "import torch\ndef f(x):\n    n = x.size(0)\n    y = x.view(n, -1) * 2\n    return y.cuda()\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        self.buf = self.buf.cuda()\n        return x.device\n",
        # a flag of an object, not a tensor's device; a test that is not the tensor's being on a GPU
        "import torch\nclass Evaluator:\n    def run(self):\n        if self.is_cuda:\n"
        "            self.thresholds = self.thresholds.cuda()\n",
        "import torch\ndef f(model, n):\n    x = torch.rand(n)\n    if not next(model.parameters()).is_cuda:\n"
        "        x = x.cuda()\n    return x\n",
        # an offload: the function keeps tensors on the CPU, `.cuda()` brings them back
        "import torch\ndef propagate(feats, flows, cpu_cache):\n    prop = flows.new_zeros(2)\n"
        "    for i in range(len(feats)):\n        if cpu_cache:\n            prop = prop.cuda()\n"
        "        feats[i] = feats[i] + prop\n        if cpu_cache:\n            feats[i] = feats[i].cpu()\n"
        "    return feats\n",
        # the numbers a tensor is made of are no tensor: an attribute of the same name is asked
        # (timm's PrefetchLoader: `mean` a tuple of floats, `self.mean.half()` its tensor's)
        "import torch\nclass PrefetchLoader:\n    def __init__(self, loader, mean=(0.5, 0.5, 0.5), fp16=False):\n"
        "        self.mean = torch.tensor([x * 255 for x in mean]).cuda().view(1, 3, 1, 1)\n"
        "        if fp16:\n            self.mean = self.mean.half()\n",
        "import torch\nclass Head:\n    def reset(self, x):\n        self.scale = torch.ones(1).cuda()\n"
        "        return self.x.device\n",
        # a NumPy array's shape: its `.size` is a number, and it has no device to follow
        # (MMSelfSup's gather_tensors, which all-gathers it through NCCL)
        "import numpy as np\nimport torch\ndef gather_tensors(input_array):\n    myshape = input_array.shape\n"
        "    mycount = input_array.size\n    shape_tensor = torch.Tensor(np.array(myshape)).cuda()\n"
        "    return shape_tensor, mycount\n",
        # a tensor sent by a collective goes where the communicator is (NCCL's: the current
        # device), not to the input's, which may be the CPU (Megatron's sequence lengths)
        "import torch\nimport torch.distributed as dist\ndef global_seqlens(seqlens: torch.Tensor, group):\n"
        "    local_len = torch.tensor([seqlens.shape[0]], dtype=torch.int32).cuda()\n"
        "    counts = [torch.zeros_like(local_len) for _ in range(group.size())]\n"
        "    dist.all_gather(counts, local_len, group=group)\n    return counts\n",
        # ... through a wrapper's name (Bagua's SyncBatchNorm statistics)
        "import torch\ndef forward(input, eps):\n    count = torch.tensor([input.numel() // input.size(1)])\n"
        "    mean, invstd = torch.batch_norm_stats(input, eps)\n"
        "    count, mean = count.cuda(), mean.cuda()\n    allgather(count.unsqueeze(0), counts)\n"
        "    allgather(mean.unsqueeze(0), means)\n    return counts.view(-1).float().to(input.device), means\n",
        # a process group is no tensor: its `.size()` is its number of ranks (Megatron's RoPE)
        "import torch\ndef pos_emb_on_rank(pos_emb, seq_dim, cp_group: torch.distributed.ProcessGroup):\n"
        "    cp_size = cp_group.size()\n    cp_rank = cp_group.rank()\n"
        "    idx = torch.tensor([cp_rank, 2 * cp_size - cp_rank - 1], device='cpu', pin_memory=True).cuda()\n"
        "    return pos_emb.index_select(seq_dim, idx)\n",
    )
    INVALID = (
        # the focal losses' cached class weights: moved once, to wherever the first GPU
        # input was, the current device (pywick's FocalLoss3, as many repositories copy it)
        Example(
            "import torch\nfrom torch import nn\n\n\nclass FocalLoss(nn.Module):\n"
            "    def __init__(self, n):\n        super().__init__()\n        self.alpha = torch.ones(n, 1)\n\n"
            "    def forward(self, inputs, targets):\n"
            "        if inputs.is_cuda and not self.alpha.is_cuda:\n            self.alpha = self.alpha.cuda()\n"
            "        return (self.alpha[targets] * inputs).mean()\n",
            "import torch\nfrom torch import nn\n\n\nclass FocalLoss(nn.Module):\n"
            "    def __init__(self, n):\n        super().__init__()\n        self.alpha = torch.ones(n, 1)\n\n"
            "    def forward(self, inputs, targets):\n"
            "        if inputs.is_cuda and not self.alpha.is_cuda:\n"
            "            self.alpha = self.alpha.to(inputs.device)\n"
            "        return (self.alpha[targets] * inputs).mean()\n",
        ),
        # a name bound to a new tensor sized by the input's shape (Whisper's `dtw_cuda`, as FunASR copies it)
        Example(
            "import numpy as np\nimport torch\ndef dtw_cuda(x):\n    M, N = x.shape\n"
            "    cost = torch.ones(N + M + 2, M + 2) * np.inf\n    cost[0, 0] = 0\n    cost = cost.cuda()\n"
            "    return cost\n",
            "import numpy as np\nimport torch\ndef dtw_cuda(x):\n    M, N = x.shape\n"
            "    cost = torch.ones(N + M + 2, M + 2) * np.inf\n    cost[0, 0] = 0\n    cost = cost.to(x.device)\n"
            "    return cost\n",
        ),
        # ... torch imported under another name
        Example(
            "import torch as T\ndef dtw_cuda(x):\n    M, N = x.shape\n"
            "    cost = T.ones(N + M + 2, M + 2)\n    cost = cost.cuda()\n    return cost\n",
            "import torch as T\ndef dtw_cuda(x):\n    M, N = x.shape\n"
            "    cost = T.ones(N + M + 2, M + 2)\n    cost = cost.to(x.device)\n    return cost\n",
        ),
        # a result read out to the CPU is no offload
        Example(
            "import torch\ndef accuracy(out, target):\n    hits = torch.zeros(1).cuda()\n"
            "    hits += (out.argmax(1) == target).sum().to(out.device)\n    preds = out.argmax(1).cpu()\n"
            "    return hits, preds\n",
            "import torch\ndef accuracy(out, target):\n    hits = torch.zeros(1).to(out.device)\n"
            "    hits += (out.argmax(1) == target).sum().to(out.device)\n    preds = out.argmax(1).cpu()\n"
            "    return hits, preds\n",
        ),
        Example(
            "import torch\ndef istft(magnitude, window):\n    window_sum = torch.ones(4)\n"
            "    window_sum = window_sum.cuda() if magnitude.is_cuda else window_sum\n    return window_sum\n",
            "import torch\ndef istft(magnitude, window):\n    window_sum = torch.ones(4)\n"
            "    window_sum = window_sum.to(magnitude.device) if magnitude.is_cuda else window_sum\n"
            "    return window_sum\n",
        ),
        Example(
            "import torch\ndef quantize(w, bits):\n    scale = torch.tensor(2.0 ** bits).cuda()\n"
            "    return (w * scale).round().to(w.device)\n",
            "import torch\ndef quantize(w, bits):\n    scale = torch.tensor(2.0 ** bits).to(w.device)\n"
            "    return (w * scale).round().to(w.device)\n",
        ),
        # a parameter bound again to what an observer made (fairseq's scalar quantization)
        Example(
            "import torch\ndef emulate_int8(w, scale=None, zero_point=None):\n    if scale is None:\n"
            "        obs = Observer().to(device=w.device)\n        scale, zero_point = obs(w)\n"
            "        scale = scale.cuda().type_as(w)\n    return w / scale, zero_point\n",
            "import torch\ndef emulate_int8(w, scale=None, zero_point=None):\n    if scale is None:\n"
            "        obs = Observer().to(device=w.device)\n        scale, zero_point = obs(w)\n"
            "        scale = scale.to(w.device).type_as(w)\n    return w / scale, zero_point\n",
        ),
        # sized by the names the input's shape gives (SwAV's Sinkhorn iterations)
        Example(
            "import torch\ndef sinkhorn(q: torch.Tensor, iters):\n    dim_k, dim_b = q.shape\n"
            "    r = torch.ones(dim_k).cuda() / dim_k\n    return q * r.unsqueeze(1)\n",
            "import torch\ndef sinkhorn(q: torch.Tensor, iters):\n    dim_k, dim_b = q.shape\n"
            "    r = torch.ones(dim_k).to(q.device) / dim_k\n    return q * r.unsqueeze(1)\n",
        ),
        # what a method of the object makes from an input (MMEditing's GAN loss: a blurred mask)
        Example(
            "import torch\nclass GANLoss(torch.nn.Module):\n    def forward(self, input, mask):\n"
            "        label = self.blur(mask).detach().cuda() if mask.is_cuda else self.blur(mask).detach().cpu()\n"
            "        return (input - label).abs().mean()\n",
            "import torch\nclass GANLoss(torch.nn.Module):\n    def forward(self, input, mask):\n"
            "        label = self.blur(mask).detach().to(mask.device) if mask.is_cuda else "
            "self.blur(mask).detach().cpu()\n"
            "        return (input - label).abs().mean()\n",
        ),
        # sent by a collective beside the input's own data (data2vec's variance): the
        # communicator is on the input's device
        Example(
            "import torch\nimport torch.distributed as dist\ndef compute_var(y):\n"
            "    zc = torch.tensor(y.size(0)).cuda()\n    zs = y.sum(dim=0)\n"
            "    dist.all_reduce(zc)\n    dist.all_reduce(zs)\n    return zs / zc\n",
            "import torch\nimport torch.distributed as dist\ndef compute_var(y):\n"
            "    zc = torch.tensor(y.size(0)).to(y.device)\n    zs = y.sum(dim=0)\n"
            "    dist.all_reduce(zc)\n    dist.all_reduce(zs)\n    return zs / zc\n",
        ),
        # the tensor an `if` tests: the module's parameters (torchreid's FLOP counter)
        Example(
            "import torch\ndef count(model, size):\n    input = torch.rand(size)\n"
            "    if next(model.parameters()).is_cuda:\n        input = input.cuda()\n    return model(input)\n",
            "import torch\ndef count(model, size):\n    input = torch.rand(size)\n"
            "    if next(model.parameters()).is_cuda:\n        input = input.to(next(model.parameters()).device)\n"
            "    return model(input)\n",
        ),
        # a name bound to a legacy CPU constructor sized by the input (pix2pixHD's edge map)
        Example(
            "import torch\nclass Pix2PixHD:\n    def get_edges(self, t):\n        edge = torch.ByteTensor(t.size())\n"
            "        if len(self.gpu_ids):\n            edge = edge.cuda()\n"
            "        edge = edge.zero_()\n"
            "        edge[:, :, :, 1:] = edge[:, :, :, 1:] | (t[:, :, :, 1:] != t[:, :, :, :-1])\n"
            "        return edge.float()\n",
            "import torch\nclass Pix2PixHD:\n    def get_edges(self, t):\n        edge = torch.ByteTensor(t.size())\n"
            "        if len(self.gpu_ids):\n            edge = edge.to(t.device)\n"
            "        edge = edge.zero_()\n"
            "        edge[:, :, :, 1:] = edge[:, :, :, 1:] | (t[:, :, :, 1:] != t[:, :, :, :-1])\n"
            "        return edge.float()\n",
        ),
        # a module made beside it, moved because that tensor is on a GPU (MMAction2's TPN head)
        Example(
            "import torch\nfrom torch import nn\nclass TPNHead(nn.Module):\n    def init_new_cls(self):\n"
            "        self.new_cls = nn.Conv3d(4, 2, 1)\n        if next(self.fc_cls.parameters()).is_cuda:\n"
            "            self.new_cls = self.new_cls.cuda()\n",
            "import torch\nfrom torch import nn\nclass TPNHead(nn.Module):\n    def init_new_cls(self):\n"
            "        self.new_cls = nn.Conv3d(4, 2, 1)\n        if next(self.fc_cls.parameters()).is_cuda:\n"
            "            self.new_cls = self.new_cls.to(next(self.fc_cls.parameters()).device)\n",
        ),
        # ... or its device's type (SwAV's multi-crop forward in Lightning Bolts)
        Example(
            "import torch\nclass ResNet(torch.nn.Module):\n    def forward(self, inputs):\n"
            "        out = torch.cat(inputs)\n        if 'cuda' in str(self.conv1.weight.device):\n"
            "            out = self.backbone(out.cuda(non_blocking=True))\n        return out\n",
            "import torch\nclass ResNet(torch.nn.Module):\n    def forward(self, inputs):\n"
            "        out = torch.cat(inputs)\n        if 'cuda' in str(self.conv1.weight.device):\n"
            "            out = self.backbone(out.to(self.conv1.weight.device, non_blocking=True))\n"
            "        return out\n",
        ),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        for site, verdict in ctx.analysis.devices.sites(self.code):
            device = verdict.device
            assert device is not None
            receiver = site.node.func.value  # type: ignore[union-attr]
            kind = ctx.analysis.torch_kind(receiver, site.scope)
            yield ctx.move_to(
                site, device.code, f"Use `.to({device.code})` ({device.why}'s device)",
                f"`.cuda()` moves this {'' if _held(ctx, site) else 'new '}"
                f"{'module' if kind == 'module' else 'tensor'} "
                "to the current "
                f"device while {device.why}'s device "
                f"is at hand: on another GPU the next op mixes devices; use `.to({device.code})`",
            )


def _held(ctx: Context, site) -> bool:
    """Whether what ``site`` moves is no new tensor but what the function was given or its
    object holds, untouched before the move: a parameter (`input = input.cuda()`), or
    `self.x` that the method does not set first (the focal losses' cached `self.alpha`;
    not MMAction2's `self.new_cls`, made just before)."""
    a = ctx.analysis
    receiver = site.node.func.value
    fn = a.enclosing_function(site.scope)
    if fn is None:
        return False
    at = a.range(site.node).start.line
    if isinstance(receiver, cst.Name):
        return receiver.value in fn.params and not any(  # (the move's own `x = x.cuda()` aside)
            b.kind != "param" and b.order < site.order and (b.value is None or a.range(b.value).start.line < at)
            for b in fn.scope.bindings.get(receiver.value, ()))
    if (isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name)
            and receiver.value.value == "self" and fn.klass is not None):
        return not any(method == fn.name and a.range(value).start.line < at
                       for value, method, _ in fn.klass.self_attr_sets.get(receiver.attr.value, ()))
    return False

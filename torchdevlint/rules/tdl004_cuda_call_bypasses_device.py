"""TDL004 cuda-call-bypasses-device: ``.cuda()`` where the code already chose a device."""

from __future__ import annotations

from typing import Iterable

from ..model import Violation
from .base import Context, Example, Rule


class CudaCallBypassesDevice(Rule):
    code = "TDL004"
    name = "cuda-call-bypasses-device"
    summary = "`.cuda()` ignores the device the code already chose"
    triggers = ("@bare-cuda",)  # a `.cuda(` call with no device first (words.TEXT_TESTS)
    needs = (("bare:cuda",),)  # the gate on the code: a `cuda` method called with no device
    fixable = "always"
    fix_summary = '`.to(<that device>)` (unsafe)'
    what = """
        A bare `.cuda()` where the function or module already chose a device that is
        bound before the site and holds a device: a `device` variable assigned a device
        (`torch.device("cuda" if ... else "cpu")`, `"cuda:1"`, `select_device(...)`), a
        `device` parameter (not defaulting to `None` or a non-device), `self.device`
        assigned in `__init__`, `self.device` that the class's own code already moves
        to (`.to(self.device)`, `device=self.device`) without assigning it in this
        file (a base class elsewhere sets it, or it is a property: BasicSR's models,
        Lightning's and Hugging Face's modules; not in `__init__`, where the base may
        not have set it yet, nor for `self.cuda()`, the object moving itself: such a
        `device` is where it is now), or `args.device` / `opt.device` already in use. A device
        that is exactly the current one (`torch.device("cuda")`) is not a choice that
        `.cuda()` ignores: that is TDL001's safe rewrite. Nor is one chosen on a test
        (`torch.device("cuda") if cuda else torch.device("cpu")`, or the same as an
        `if cuda:`/`else:` statement, as pyro's MuE models write it) at a `.cuda()` under
        that same test (`if cuda:`), where the choice is exactly the current device, nor
        in the `if` arm that itself sets the device to the current one (mmgen's metrics:
        `self.device = "cpu"`, then under `if torch.cuda.is_available():` the network's
        `.cuda()` and `self.device = "cuda"`). Nor a module moved with `.cuda()` into a
        DDP wrapper that names the current device (`device_ids=[torch.cuda.current_device()]`,
        OpenMMLab's `train_model`, whose `device` parameter serves the other branch).
        In code that runs once per rank this code wins over TDL003: the chosen device is
        what the line should use, whatever the rank.
    """
    why = """
        The code picked a device — often with a CPU fallback or a GPU index from the
        command line — and this `.cuda()` goes elsewhere: the CPU path crashes, and on
        a chosen `cuda:1` this tensor lands on `cuda:0` and the next op mixes devices.
    """
    example = """
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        x = torch.randn(8, 3).cuda()
    """
    use_instead = """
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        x = torch.randn(8, 3).to(device)
    """
    fix_safety = """
        `.to(<that device>)`: **unsafe**, since the chosen device may differ from the
        current one (the CPU fallback, an index), and that is the point.
    """
    VALID = (
        "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(1).cuda()\n",  # TDL001, safe
        # the choice as an if/else statement, and a `.cuda()` under the same test (pyro's MuE models)
        "import torch\ndef fit(model, data, is_cuda):\n    if is_cuda:\n        device = torch.device('cuda')\n"
        "    else:\n        device = torch.device('cpu')\n    for x in data:\n        if is_cuda:\n"
        "            x = x.cuda()\n        model(x)\n",
        "import torch\ndef f(x, device=None):\n    return torch.zeros(1).cuda()\n",
        "import torch\nx = torch.zeros(1).cuda()\ndevice = torch.device('cuda:1')\n",
        "import torch\nfor device in devices:\n    pass\nx = torch.zeros(1).cuda()\n",
        # the object moving itself: a `device` read from its own buffer is where it is now, and
        # `self.to(self.device)` would leave it there (dalle2's decoder; TDL001's)
        "import torch\nfrom contextlib import contextmanager\n\n\nclass Decoder(torch.nn.Module):\n"
        "    @property\n    def device(self):\n        return self._dummy.device\n\n"
        "    def sample(self, n):\n        return torch.randn(n, device=self.device)\n\n"
        "    @contextmanager\n    def on_gpu(self):\n        self.cuda()\n        yield\n",
        # what a helper that moves something gives is no device (TDL001's)
        "import torch\nfrom helpers import to_device\n\n\nclass Trainer:\n    def __init__(self, batch):\n"
        "        self.device = to_device(batch)\n\n    def step(self):\n        return torch.zeros(1).cuda()\n",
        # gpytorch's tests: the GPU branch of the choice is the current device, under its own test
        "import torch\ndef test_fit(cuda=False):\n    device = torch.device('cuda') if cuda else torch.device('cpu')\n"
        "    if cuda:\n        model.cuda()\n",
        "import torch\ndef fit(gpu):\n    device = torch.device('cuda' if gpu and torch.cuda.is_available() else 'cpu')\n"
        "    if torch.cuda.is_available() and gpu and verbose:\n        model.cuda()\n",
        # a choice between words, not devices (YOLOX's demo: "cpu" or "gpu", which .to() rejects)
        "import torch\nclass Predictor:\n    def __init__(self, model, device='cpu'):\n        self.model = model\n"
        "        self.device = device\n\n    def inference(self, img):\n        if self.device == 'gpu':\n"
        "            img = img.cuda()\n        return self.model(img)\n",
        "import torch\ndef main(args, model):\n    if args.trt:\n        args.device = 'gpu'\n"
        "    if args.device == 'gpu':\n        model.cuda()\n",
        # under a test, in parentheses, that the chosen device is CUDA (DeepRobust's DeepFool):
        # `.cuda()` is that device (TDL001's, with `.to(self.device)`)
        "import torch\nclass DeepFool:\n    def __init__(self, model, device='cuda'):\n"
        "        self.model, self.device = model, device\n\n    def generate(self, image):\n"
        "        is_cuda = torch.cuda.is_available()\n        if (is_cuda and self.device == 'cuda'):\n"
        "            self.image = image.cuda()\n        return self.model(self.image)\n",
        # `self.device` that the class moves to but a base outside the file sets: not yet in `__init__`
        "import torch\nfrom basicsr.models.sr_model import SRModel\n\n\nclass RealESRNetModel(SRModel):\n"
        "    def __init__(self, opt):\n        super().__init__(opt)\n        self.jpeger = DiffJPEG().cuda()\n\n"
        "    def feed_data(self, data):\n        self.lq = data['lq'].to(self.device)\n",
        # the arm that sets the device to the current one moves the network there (mmgen's metrics)
        "import torch\nclass FID:\n    def __init__(self, net):\n        self.device = 'cpu'\n"
        "        self.net = net\n        if torch.cuda.is_available():\n            self.net = self.net.cuda()\n"
        "            self.device = 'cuda'\n",
        "import torch\ndevice = 'cpu'\nif torch.cuda.is_available():\n    device = 'cuda'\n"
        "    model = Net().cuda()\n",
        # the DDP wrapper names the current device; `device` serves the other branch (OpenMMLab's train_model)
        "import torch\nfrom mmcv.parallel import MMDataParallel, MMDistributedDataParallel\n\n\n"
        "def train_model(model, distributed=False, device='cuda'):\n    if distributed:\n"
        "        model = MMDistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()])\n"
        "    elif device == 'cuda':\n        model = MMDataParallel(model.cuda(0), device_ids=[0])\n"
        "    return model\n",
        # ... nor where the class only asks its type: not passed on as a device
        "import torch\nfrom lib import Base\n\n\nclass Model(Base):\n    def step(self, x):\n"
        "        if self.device.type == 'cuda':\n            x = x.cuda()\n        return x\n",
    )
    INVALID = (
        Example(
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "x = torch.zeros(1).cuda()\n",
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "x = torch.zeros(1).to(device)\n",
        ),
        Example(
            "import torch\ndef step(batch, device):\n    return [t.cuda() for t in batch]\n",
            "import torch\ndef step(batch, device):\n    return [t.to(device) for t in batch]\n",
        ),
        Example(
            "import torch\nclass Trainer:\n    def __init__(self, args):\n        self.device = torch.device(args.gpu)\n"
            "    def step(self, x):\n        return x.cuda()\n",
            "import torch\nclass Trainer:\n    def __init__(self, args):\n        self.device = torch.device(args.gpu)\n"
            "    def step(self, x):\n        return x.to(self.device)\n",
        ),
        Example(
            "import torch\ndef run(args, net):\n    net.to(args.device)\n    return torch.ones(2).cuda()\n",
            "import torch\ndef run(args, net):\n    net.to(args.device)\n    return torch.ones(2).to(args.device)\n",
        ),
        Example(  # chosen on a test, but this `.cuda()` is not under it: the CPU path crashes
            "import torch\ndef fit(cuda):\n    device = torch.device('cuda') if cuda else torch.device('cpu')\n"
            "    if cuda or debug:\n        model.cuda()\n",
            "import torch\ndef fit(cuda):\n    device = torch.device('cuda') if cuda else torch.device('cpu')\n"
            "    if cuda or debug:\n        model.to(device)\n",
        ),
        Example(  # after the arm that chose the current device: the CPU path reaches it
            "import torch\ndevice = 'cpu'\nif torch.cuda.is_available():\n    device = 'cuda'\n"
            "x = torch.zeros(1).cuda()\n",
            "import torch\ndevice = 'cpu'\nif torch.cuda.is_available():\n    device = 'cuda'\n"
            "x = torch.zeros(1).to(device)\n",
        ),
        Example(  # fairseq's trainer: one branch per accelerator, a helper of another module's for the TPU
            "import torch\nfrom fairseq import utils\n\n\nclass Trainer:\n    def __init__(self, cfg):\n"
            "        if torch.cuda.is_available() and not cfg.cpu:\n            self.device = torch.device('cuda')\n"
            "        elif cfg.tpu:\n            self.device = utils.get_tpu_device()\n        else:\n"
            "            self.device = torch.device('cpu')\n\n    def overflow(self):\n"
            "        return torch.tensor(0.0).cuda()\n",
            "import torch\nfrom fairseq import utils\n\n\nclass Trainer:\n    def __init__(self, cfg):\n"
            "        if torch.cuda.is_available() and not cfg.cpu:\n            self.device = torch.device('cuda')\n"
            "        elif cfg.tpu:\n            self.device = utils.get_tpu_device()\n        else:\n"
            "            self.device = torch.device('cpu')\n\n    def overflow(self):\n"
            "        return torch.tensor(0.0).to(self.device)\n",
        ),
        Example(  # Opacus' benchmark: launched per rank (`--local_rank`), but the batch ignores `--device`
            "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--device', default='cpu')\n"
            "p.add_argument('--local_rank', type=int, default=-1)\nargs = p.parse_args()\n"
            "model = torch.nn.Linear(2, 2).to(args.device)\nx = torch.randn(4, 2).cuda()\n",
            "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--device', default='cpu')\n"
            "p.add_argument('--local_rank', type=int, default=-1)\nargs = p.parse_args()\n"
            "model = torch.nn.Linear(2, 2).to(args.device)\nx = torch.randn(4, 2).to(args.device)\n",
        ),
        Example(  # Real-ESRGAN's models: `self.device` is set by BasicSR's base model, and used
            "import torch\nfrom basicsr.models.sr_model import SRModel\n\n\nclass RealESRNetModel(SRModel):\n"
            "    def feed_data(self, data):\n        self.lq = data['lq'].to(self.device)\n\n"
            "    def _dequeue_and_enqueue(self):\n        b, c, h, w = self.lq.size()\n"
            "        self.queue_lr = torch.zeros(180, c, h, w).cuda()\n",
            "import torch\nfrom basicsr.models.sr_model import SRModel\n\n\nclass RealESRNetModel(SRModel):\n"
            "    def feed_data(self, data):\n        self.lq = data['lq'].to(self.device)\n\n"
            "    def _dequeue_and_enqueue(self):\n        b, c, h, w = self.lq.size()\n"
            "        self.queue_lr = torch.zeros(180, c, h, w).to(self.device)\n",
        ),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        for site, verdict in ctx.analysis.devices.sites(self.code):
            device = verdict.device
            assert device is not None
            yield ctx.move_to(
                site, device.code, f"Use `.to({device.code})` (the device the code chose)",
                f"`.cuda()` ignores the device the code already chose ({device.why}): it moves to the "
                f"current device instead (crashes on the CPU path); use `.to({device.code})`",
            )

"""TDL001 bare-cuda-call: ``x.cuda()`` with no device."""

from __future__ import annotations

from typing import Iterable

from ..analysis.receivers import UNPROVEN_RECEIVER
from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule


class BareCudaCall(Rule):
    code = "TDL001"
    name = "bare-cuda-call"
    summary = "`.cuda()` without a device moves to the implicit current device"
    triggers = ("@bare-cuda",)  # a `.cuda(` call with no device first (words.TEXT_TESTS)
    needs = (("bare:cuda",),)  # the gate on the code: a `cuda` method called with no device
    fixable = "always"
    fix_summary = ('`.to(device)` (safe with an exact device in scope, or with a script device defined as '
                   '`torch.device("cuda")`, in a library module defined so in the function; a CPU fallback '
                   'is unsafe)')
    what = """
        A `.cuda()` call with no device (no positional argument, no `device=`, or
        `device=None`) that is merely implicit: none of the bug-grade shapes (TDL002
        an input's device at hand, TDL003 per-rank code before any binding, TDL004 a
        device the code already chose), and not provably right. Quiet inside
        `with torch.cuda.device(...):` (or a helper that enters one: a function of this
        file whose body does, or another module's named for one, as gpytorch's `with
        least_used_cuda_device():`, fairscale's `use_device(d)`, a pipeline's
        `device_placement()`; not a default-device context such as `torch.device(...)`,
        which leaves `.cuda()` on the current device), inside a user-defined `cuda()` override, and after
        a rank- or worker-derived binding on the same path (`set_device(local_rank)` in
        DDP setup or a spawned worker, a launcher that binds each process's device,
        a per-process `CUDA_VISIBLE_DEVICES`), a closure the binding function defines
        after it included (not a thread's target: a thread starts on its own). Quiet too as the module handed to a
        `DistributedDataParallel` wrapper told `device_ids=[torch.cuda.current_device()]`
        (OpenMMLab 1.x's `MMDistributedDataParallel(model.cuda(), device_ids=[...])`, or
        an arm of a conditional there: `model if next(model.parameters()).is_cuda else model.cuda()`):
        the move and the wrapper mean the current device on purpose, and whether each
        rank bound its own is the binding's question, not this line's. Not another
        framework's `cuda` reached through its module (TVM's `tvm.target.cuda()`, a
        compilation target; CuPy, Numba, JAX, TensorFlow ...): no torch device.
    """
    why = """
        `x.cuda()` moves `x` to CUDA's *current device*, which is `cuda:0` unless
        something set it, and which is per thread. The code works on one GPU, but where
        it runs is decided elsewhere and it cannot run on a machine without CUDA. An
        explicit `torch.device` makes placement visible and testable. For CI, this is
        the code to `ignore` when you want bugs only (TDL002-TDL004 are the bugs).
    """
    example = """
        model = Net().cuda()
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    """
    use_instead = """
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    """
    fix_safety = """
        The fix rewrites `.cuda(...)` to `.to(<device>, ...)`, keeping `non_blocking` and
        `memory_format`. It is **safe** only when the device named in scope is provably
        the current device (`device = torch.device("cuda")`: it resolves at call time,
        exactly like `.cuda()`) and the receiver is provably a torch tensor or module.
        Under a test of a device the code names (`if self.device == "cuda":`, `if
        args.device.type == "cuda":`, `if "cuda" in self.device_list[i]:`) it names that
        device: **safe** only where the test makes it the string `"cuda"` itself, else
        **unsafe** (`cuda:1` passes `.type == "cuda"`). Inside `forward` of an `nn.Module`
        it uses the first input's `.device`
        (**unsafe**: the input may be elsewhere), or, where the body unpacks that input
        (`loc_data, conf_data = predictions`: a tuple has no device), the first tensor
        unpacked from it; not where it moves that very input (`obs = obs.cuda()`,
        which `.to(obs.device)` would leave where it is), nor after the body made the
        input a list (`inputs = [inputs]`). When nothing names a device, it
        defines one where the script's own execution starts (after the imports of a
        script: a notebook, or one with a main guard that does more than run the tests (a test module's
        `unittest.main()` makes no script: pytest imports it; nor does a module's own
        self-test, `_test()`, as pytorchcv's model files end, nor calls of its `test_*`
        functions), or whose module level
        does work; at the start of
        the main guard when every use runs in it, so that importing the module asks
        nothing). `fix` defines
        `device = torch.device("cuda")` (**safe**: the very device `.cuda()` uses, resolved
        at each use, and no CUDA query), with a comment that shows the CPU fallback;
        `fix --unsafe-fixes` defines `torch.device("cuda" if torch.cuda.is_available()
        else "cpu")` instead (**unsafe**: the fallback changes behaviour on machines
        without CUDA, and is what makes a legacy script run there). After a plain `fix`,
        `fix --unsafe-fixes` gives the device it defined that fallback (TDL007, which a
        migration selects) and drops the comment that offered it.
        Where every placement of the script sits under a guard that makes CUDA certain
        (`if torch.cuda.is_available():`, or a flag every assignment of which has
        `torch.cuda.is_available()` as a conjunct, such as `args.cuda = not args.no_cuda
        and torch.cuda.is_available()`, or a CUDA-only test's skip decorator), the
        fallback is never taken and `fix` uses it.
        A library module gets no module-level definition (a CUDA query at import time
        in every importer): `fix --unsafe-fixes` defines the device with the CPU fallback
        as the first statement of the function that holds the call (**unsafe**: queried
        when the function runs, where `.cuda()` initialised CUDA anyway), which is what
        makes a legacy repository's model files run on a CPU; `fix` alone defines
        `device = torch.device("cuda")` there instead, under the same comment (**safe**:
        exact, and nothing runs at import) where the receiver is proven. In a CUDA-only
        test (a `def` or class decorated to skip where CUDA is not available:
        `@pytest.mark.skipif(not torch.cuda.is_available(), ...)`, a
        `torch.cuda.device_count() < n` term, `@unittest.skipUnless(...)`, a helper named
        for it such as `@require_torch_gpu`) the fallback is never taken, and `fix`
        applies it (**safe**) where every site of the function moves a proven receiver.
        A module that imports only names from torch (`from torch import nn`) gets
        `import torch` after its leading imports for that definition.
        At a library's module level, or in a body on the `def` line: **display-only**. Also
        display-only when a class in the same file defines its own `cuda` method, and
        when the definition would run before the module's own `CUDA_VISIBLE_DEVICES`
        assignment (see TDL105). Unsafe too when the receiver may be another class with
        its own `.cuda()` (bitsandbytes' `Int8Params` quantizes in it). A receiver is
        proven by what makes it: a torch factory or module class, this file's helpers
        and classes, a tensor's methods, parts (`x[i]`) and rows, a literal or
        comprehension of tensors, and any part of a batch of torch's `DataLoader`
        without a `collate_fn` (`for i, (data, target) in enumerate(train_loader):`, also
        through tqdm or `zip`): `default_collate` makes tensors and refuses other classes.
    """
    VALID = (
        "import torch\nx = torch.zeros(3).cuda(1)\n",
        "import torch\nx = torch.zeros(3).cuda(device=dev)\n",
        "import torch\nwith torch.cuda.device(1):\n    x = torch.zeros(3).cuda()\n",
        # a helper that enters a device block: another module's, named for one (gpytorch's
        # tests), or this file's, whose body enters one
        "import torch\nfrom gpytorch.test.utils import least_used_cuda_device\ndef test_cuda():\n"
        "    with least_used_cuda_device():\n        x = torch.zeros(3).cuda()\n",
        "import torch\nfrom contextlib import contextmanager\n@contextmanager\ndef on_gpu(k):\n"
        "    with torch.cuda.device(k):\n        yield\ndef run():\n    with on_gpu(1):\n"
        "        return torch.zeros(3).cuda()\n",
        "from torch.cuda import device as cuda_device\nwith cuda_device(k):\n    m.cuda()\n",
        "use_cuda = args.cuda\nif args.cuda:\n    pass\n",
        # another framework's `cuda` (hummingbird's TVM backend: a compilation target)
        "import torch\ndef compile_tvm(model, device):\n    import tvm\n"
        "    target = tvm.target.cuda() if device == 'cuda' else 'llvm'\n    return target\n",
        "s = 'x.cuda()'  # a comment about .cuda()\n",
        "x = t.cuda(*args)\n",
        "x = t.to(device)\n",
        # bound per process before the use: provably the intended device
        "import torch\nimport torch.distributed as dist\n"
        "def worker(local_rank):\n    dist.init_process_group('nccl')\n    torch.cuda.set_device(local_rank)\n"
        "    return torch.zeros(2).cuda()\n",
        # ... in a closure the function defines after its binding: whoever calls it, it runs
        # after (NeMo's factory: the broadcast helper its distributed setup defines)
        "import torch\nimport torch.distributed as dist\n\n\nclass Factory:\n    def __init__(self, local_rank):\n"
        "        dist.init_process_group('nccl')\n        torch.cuda.set_device(local_rank)\n\n"
        "        def broadcast(n, src=0):\n            t = torch.zeros(n, dtype=torch.uint8).cuda()\n"
        "            dist.broadcast(t, src)\n            return t\n\n        self.broadcast = broadcast\n",
        "import torch\nclass Params(torch.nn.Parameter):\n    def cuda(self, device=None):\n"
        "        return super().cuda(device)\n",
        # a container's own `cuda()` (mmpose's pixel data): the lambda places where its caller asked
        "import torch\nclass PixelData:\n    def cuda(self):\n"
        "        return self._convert(apply_to=torch.Tensor, func=lambda x: x.cuda())\n",
        # CUDA_VISIBLE_DEVICES chosen before the first CUDA use: cuda:0 is the chosen GPU
        "import os, torch\ndef main(gpus):\n    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\n"
        "    return torch.zeros(1).cuda()\n",
        # the module of a DDP wrapper told the current device (OpenMMLab 1.x's train_model)
        "import torch\nfrom mmcv.parallel import MMDistributedDataParallel\n\n\ndef wrap(model):\n"
        "    return MMDistributedDataParallel(\n        model.cuda(), device_ids=[torch.cuda.current_device()],\n"
        "        broadcast_buffers=False)\n",
        "import torch\nfrom mmcv.parallel import MMDistributedDataParallel\n\n\ndef wrap(model):\n"
        "    return MMDistributedDataParallel(\n        model if next(model.parameters()).is_cuda else model.cuda(),\n"
        "        device_ids=[torch.cuda.current_device()])\n",
    )
    INVALID = (
        # ... but not one a thread runs: a new thread starts on its own current device
        Example("import threading\nimport torch\nimport torch.distributed as dist\n\n\ndef serve(local_rank):\n"
                "    dist.init_process_group('nccl')\n    torch.cuda.set_device(local_rank)\n\n"
                "    def poll():\n        return torch.zeros(1).cuda()\n\n"
                "    threading.Thread(target=poll).start()\n",
                "import threading\nimport torch\nimport torch.distributed as dist\n\n\ndef serve(local_rank):\n"
                "    dist.init_process_group('nccl')\n    torch.cuda.set_device(local_rank)\n\n"
                "    def poll():\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        return torch.zeros(1).to(device)\n\n"
                "    threading.Thread(target=poll).start()\n"),
        # ... nor a closure defined, and handed on, before the binding (it may run before it)
        Example("import torch\nimport torch.distributed as dist\n\n\ndef setup(local_rank):\n"
                "    def probe():\n        return torch.zeros(1).cuda()\n\n    register(probe)\n"
                "    dist.init_process_group('nccl')\n    torch.cuda.set_device(local_rank)\n",
                "import torch\nimport torch.distributed as dist\n\n\ndef setup(local_rank):\n"
                "    def probe():\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        return torch.zeros(1).to(device)\n\n    register(probe)\n"
                "    dist.init_process_group('nccl')\n    torch.cuda.set_device(local_rank)\n"),
        # a DDP wrapper told another device than the current one
        Example("import torch\nfrom torch.nn.parallel import DistributedDataParallel\n\n\ndef wrap(model):\n"
                "    return DistributedDataParallel(model.cuda(), device_ids=[0])\n",
                "import torch\nfrom torch.nn.parallel import DistributedDataParallel\n\n\ndef wrap(model):\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    return DistributedDataParallel(model.to(device), device_ids=[0])\n"),
        # the device a parameter names, under the test that it is CUDA; another backend's type
        # beside it ("mlu") does not make it a mere word (mmcls' wrap_non_distributed_model)
        Example("import torch\n\n\ndef wrap(model, device='cuda'):\n    if device == 'mlu':\n"
                "        model = model.mlu()\n    elif device == 'cuda':\n        model = model.cuda()\n"
                "    return model\n",
                "import torch\n\n\ndef wrap(model, device='cuda'):\n    if device == 'mlu':\n"
                "        model = model.mlu()\n    elif device == 'cuda':\n        model = model.to(device)\n"
                "    return model\n"),
        # a test module (its main guard only runs the tests; pytest imports it): the test
        # asks for the device when it runs, not the module at import
        Example("import unittest\nimport torch\n\n\nclass T(unittest.TestCase):\n    def test_gpu(self):\n"
                "        x = torch.zeros(2).cuda()\n        self.assertEqual(x.sum().item(), 0)\n\n\n"
                "if __name__ == '__main__':\n    unittest.main()\n",
                "import unittest\nimport torch\n\n\nclass T(unittest.TestCase):\n    def test_gpu(self):\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        x = torch.zeros(2).to(device)\n        self.assertEqual(x.sum().item(), 0)\n\n\n"
                "if __name__ == '__main__':\n    unittest.main()\n"),
        # a module's own self-test in its main guard (pytorchcv's model files, which the
        # package imports): the device is defined in the test, not at import
        Example("import torch\nimport torch.nn as nn\n\n\ndef net():\n    return nn.Linear(2, 2)\n\n\n"
                "def _test():\n    model = net().cuda()\n    print(model(torch.zeros(1, 2).cuda()))\n\n\n"
                "if __name__ == '__main__':\n    _test()\n",
                "import torch\nimport torch.nn as nn\n\n\ndef net():\n    return nn.Linear(2, 2)\n\n\n"
                "def _test():\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    model = net().to(device)\n    print(model(torch.zeros(1, 2).to(device)))\n\n\n"
                "if __name__ == '__main__':\n    _test()\n"),
        # ... or its test functions, called one by one (norse's test modules): pytest imports it
        Example("import torch\n\n\ndef test_sum():\n    assert torch.ones(2).cuda().sum().item() == 2\n\n\n"
                "if __name__ == '__main__':\n    test_sum()\n",
                "import torch\n\n\ndef test_sum():\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    assert torch.ones(2).to(device).sum().item() == 2\n\n\n"
                "if __name__ == '__main__':\n    test_sum()\n"),
        # a default-device context is no device block: `.cuda()` still takes the current device
        Example("import torch\nfrom contextlib import contextmanager\n@contextmanager\ndef default_device(d):\n"
                "    with torch.device(d):\n        yield\ndef run():\n    with default_device(\"cuda:1\"):\n"
                "        return torch.zeros(3).cuda()\n",
                "import torch\nfrom contextlib import contextmanager\n@contextmanager\ndef default_device(d):\n"
                "    with torch.device(d):\n        yield\ndef run():\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    with default_device(\"cuda:1\"):\n        return torch.zeros(3).to(device)\n"),
        Example(
            "import torch\nx = torch.zeros(3).cuda()\n",
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.zeros(3).to(device)\n",
        ),
        Example(
            "import torch as T\nx = T.from_numpy(a).float().cuda(non_blocking=True)\n",
            'import torch as T\ndevice = T.device("cuda" if T.cuda.is_available() else "cpu")\n'
            "x = T.from_numpy(a).float().to(device, non_blocking=True)\n",
        ),
        Example(  # a model picked from a registry by name (super-gradients' examples): no storage
            "import torch\nfrom models import MODELS\nmodel = MODELS['resnet']().cuda()\n",
            'import torch\nfrom models import MODELS\n'
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "model = MODELS['resnet']().to(device)\n",
        ),
        Example(
            "import torch\nx = torch.ones(2).cuda(device=None)\n",
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.ones(2).to(device)\n",
        ),
        # in a module's forward: the input's device; the first tensor unpacked from it
        # where the input is a tuple (a detection loss's `predictions`)
        Example("import torch\nclass Loss(torch.nn.Module):\n    def forward(self, predictions, targets):\n"
                "        loc_data, conf_data = predictions\n        loc_t = torch.zeros(loc_data.size())\n"
                "        if self.use_gpu:\n            loc_t = loc_t.cuda()\n        return (loc_data - loc_t).sum()\n",
                "import torch\nclass Loss(torch.nn.Module):\n    def forward(self, predictions, targets):\n"
                "        loc_data, conf_data = predictions\n        loc_t = torch.zeros(loc_data.size())\n"
                "        if self.use_gpu:\n            loc_t = loc_t.to(loc_data.device)\n"
                "        return (loc_data - loc_t).sum()\n"),
        # ... but keyword inputs are a dict, with no device (accelerate's Megatron engine):
        # the function's own device
        Example("import torch\nclass Engine(torch.nn.Module):\n    def forward(self, **batch):\n"
                "        return torch.zeros(2).cuda() + batch['x']\n",
                "import torch\nclass Engine(torch.nn.Module):\n    def forward(self, **batch):\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        return torch.zeros(2).to(device) + batch['x']\n"),
        # ... not where the body made the input a list (SwAV's multi-crop forward): a list
        # has no device
        Example("import torch\nclass MultiCrop(torch.nn.Module):\n    def forward(self, inputs):\n"
                "        if not isinstance(inputs, list):\n            inputs = [inputs]\n"
                "        out = torch.cat(inputs)\n        if self.use_gpu:\n"
                "            out = out.cuda(non_blocking=True)\n        return self.backbone(out)\n",
                "import torch\nclass MultiCrop(torch.nn.Module):\n    def forward(self, inputs):\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        if not isinstance(inputs, list):\n            inputs = [inputs]\n"
                "        out = torch.cat(inputs)\n        if self.use_gpu:\n"
                "            out = out.to(device, non_blocking=True)\n        return self.backbone(out)\n"),
        # ... and so where it moves that very input (tianshou's DataParallelNet): the
        # input's device would move nothing
        Example("import torch\nclass Wrapper(torch.nn.Module):\n    def forward(self, obs):\n"
                "        if not isinstance(obs, torch.Tensor):\n            obs = torch.as_tensor(obs)\n"
                "        obs = obs.cuda()\n        return self.net(obs)\n",
                "import torch\nclass Wrapper(torch.nn.Module):\n    def forward(self, obs):\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        if not isinstance(obs, torch.Tensor):\n            obs = torch.as_tensor(obs)\n"
                "        obs = obs.to(device)\n        return self.net(obs)\n"),
        # an exact current device in scope: safe
        Example(
            "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(1).cuda()\n",
            "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(1).to(device)\n",
        ),
        # under a guard that makes CUDA certain, the CPU fallback is never taken: safe
        Example("import torch\nuse_cuda = not no_cuda and torch.cuda.is_available()\nnet = torch.nn.Linear(2, 2)\n"
                "if use_cuda:\n    net.cuda()\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "use_cuda = not no_cuda and torch.cuda.is_available()\nnet = torch.nn.Linear(2, 2)\n"
                "if use_cuda:\n    net.to(device)\n"),
        # a library module: no definition at import time; one in the function, after
        # its docstring (CPU fallback: unsafe; `fix` alone leaves it)
        Example('import torch\ndef make(n):\n    """Zeros."""\n    return torch.zeros(n).cuda()\n',
                'import torch\ndef make(n):\n    """Zeros."""\n'
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    return torch.zeros(n).to(device)\n"),
        # ... with `import torch` added after the leading imports where the module imports
        # only names from torch (TorchKGE's data loaders: `from torch import empty`), one
        # import for every function that needs it
        Example('"""Loaders."""\nfrom torch import empty\nfrom .data import batches\n\n\n'
                "class Loader:\n    def __init__(self, h):\n        self.h = h.cuda()\n"
                "    def scores(self, n):\n        return empty(n).cuda()\n",
                '"""Loaders."""\nfrom torch import empty\nfrom .data import batches\nimport torch\n\n\n'
                "class Loader:\n    def __init__(self, h):\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        self.h = h.to(device)\n    def scores(self, n):\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        return empty(n).to(device)\n"),
        # ... also when its classes sit in a module-level `try:`, or it calls its own
        # functions at import and keeps the result (a version check, a singleton)
        Example("import torch\ntry:\n    import apex\n    class Opt:\n        def step(self):\n"
                "            return torch.zeros(1).cuda()\nexcept ImportError:\n    apex = None\n",
                "import torch\ntry:\n    import apex\n    class Opt:\n        def step(self):\n"
                '            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "            return torch.zeros(1).to(device)\nexcept ImportError:\n    apex = None\n"),
        Example("import torch\ndef new_enough():\n    return True\nclass Timer:\n    def __init__(self):\n"
                "        self.on = new_enough()\n    def tick(self):\n        return torch.zeros(1).cuda()\n"
                "_timer = Timer()\n",
                "import torch\ndef new_enough():\n    return True\nclass Timer:\n    def __init__(self):\n"
                "        self.on = new_enough()\n    def tick(self):\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        return torch.zeros(1).to(device)\n_timer = Timer()\n"),
        # ... but not in a body on the `def` line
        Example("import torch\ndef make(n): return torch.zeros(n).cuda()\n", None),
        # a script that imports torch only in its main guard: the device is defined there
        Example("if __name__ == '__main__':\n    import torch\n    import torch.nn as nn\n"
                "    net = nn.Linear(2, 2).cuda()\n",
                "if __name__ == '__main__':\n    import torch\n    import torch.nn as nn\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    net = nn.Linear(2, 2).to(device)\n"),
        # ... or only inside the function that uses it: the device goes after that import
        # (CPU fallback: unsafe)
        Example("def main():\n    import torch\n    return torch.zeros(1).cuda()\n\n\nif __name__ == '__main__':\n"
                "    main()\n",
                "def main():\n    import torch\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    return torch.zeros(1).to(device)\n\n\nif __name__ == '__main__':\n    main()\n"),
        # a script without a main guard: a call of its own that is a statement
        Example("import torch\ndef evaluate():\n    return torch.zeros(1).cuda()\nprint(evaluate())\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "def evaluate():\n    return torch.zeros(1).to(device)\nprint(evaluate())\n"),
        Example("class P:\n    def cuda(self):\n        return self\np = P().cuda()\n", None),
        # a library module's import-time use under its own test (SRU's kernel set up): a device
        # defined first would ask CUDA at every import, the test false or not
        Example("import torch\nif check_sru_requirement():\n    tmp_ = torch.rand(1, 1).cuda()\n", None),
        # every use in the main guard (a library module runnable as a demo): the device is
        # defined where the guard starts, not at every import
        Example("import torch\nclass Unet(torch.nn.Module):\n    pass\nif __name__ == '__main__':\n"
                "    model = Unet().cuda()\n    x = torch.randn(2, 3).cuda()\n",
                "import torch\nclass Unet(torch.nn.Module):\n    pass\nif __name__ == '__main__':\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    model = Unet().to(device)\n    x = torch.randn(2, 3).to(device)\n"),
        # ... after the note the guard opens with (Grad-CAM's usage examples)
        Example("import torch\nif __name__ == '__main__':\n    \"\"\"python example.py --use-cuda\"\"\"\n"
                "    model = torch.nn.Linear(2, 2).cuda()\n",
                "import torch\nif __name__ == '__main__':\n    \"\"\"python example.py --use-cuda\"\"\"\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    model = torch.nn.Linear(2, 2).to(device)\n"),
        # a storage's `.to` takes the device as a keyword; a load's `map_location` function
        # is handed storages
        Example("import torch\ns = torch.zeros(2).untyped_storage().cuda()\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "s = torch.zeros(2).untyped_storage().to(device=device)\n"),
        Example("import torch\nnet = Net()\n"
                "net.load_state_dict(torch.load('net.pt', map_location=lambda storage, loc: storage.cuda()))\nprint(net)\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nnet = Net()\n'
                "net.load_state_dict(torch.load('net.pt', map_location=lambda storage, loc: storage.to(device=device)))\n"
                "print(net)\n"),
        # a `device` parameter the code tests for "cuda" (mmaction's test inputs): there it is
        # the device `.cuda()` uses, whatever its default, in a helper nested in the function too
        Example("import torch\ndef demo_inputs(n, device='cpu'):\n    def random_box():\n"
                "        box = torch.rand(n, 4)\n        if device == 'cuda':\n            box = box.cuda()\n"
                "        return box\n    img = torch.rand(n, 3)\n    if device == 'cuda':\n        img = img.cuda()\n"
                "    return img, random_box()\n",
                "import torch\ndef demo_inputs(n, device='cpu'):\n    def random_box():\n"
                "        box = torch.rand(n, 4)\n        if device == 'cuda':\n            box = box.to(device)\n"
                "        return box\n    img = torch.rand(n, 3)\n    if device == 'cuda':\n        img = img.to(device)\n"
                "    return img, random_box()\n"),
        # one statement, one applicability: the unprovable receiver holds the other back
        Example("import torch\ndevice = torch.device('cuda')\ny = (torch.zeros(1).cuda(), batch.cuda())\n",
                "import torch\ndevice = torch.device('cuda')\ny = (torch.zeros(1).to(device), batch.to(device))\n"),
        # ... and so does one `if cuda:` block
        Example("import torch\ndevice = torch.device('cuda')\nif args.cuda:\n    m = torch.nn.Linear(2, 2).cuda()\n"
                "    x = batch.cuda()\n",
                "import torch\ndevice = torch.device('cuda')\nif args.cuda:\n    m = torch.nn.Linear(2, 2).to(device)\n"
                "    x = batch.to(device)\n"),
        # the inserted definition would query CUDA at import, before this assignment
        Example("import os, torch\ndef setup(gpus):\n    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\n"
                "def build():\n    return torch.zeros(1).cuda()\nif __name__ == '__main__':\n    build()\n", None),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        analysis = ctx.analysis
        sites = analysis.devices.sites(self.code)
        if not sites:
            return
        anchor = min(s.order for s, _ in sites)
        own_cuda = analysis.classes_defining_cuda
        kinds, askable = {}, {}  # a receiver's kind, and whether the whole-run index could change it
        for site, _ in sites:
            analysis.project_asked = False
            kinds[site] = analysis.torch_kind(site.node.func.value, site.scope, use_project=True)  # type: ignore
            askable[site] = analysis.project_asked
        # a function whose every site is in a CUDA-only test and moves a proven receiver:
        # its own definition's fallback is never taken (one applicability per definition)
        homes = {site: ctx.defining_function(site) for site, _ in sites}
        skips = {site: analysis.devices.skipped_without_cuda(site) for site, _ in sites}
        cuda_only: dict = {}
        unproven: dict = {}  # a CUDA-only test's first site that moves an unproven receiver
        for site, _ in sites:
            cuda_only[homes[site]] = cuda_only.get(homes[site], True) and bool(skips[site])
            if kinds[site] is None:
                unproven.setdefault(homes[site], site)
        for site, verdict in sites:
            call = site.node
            kind = kinds[site]
            reasons = [] if kind is not None else [UNPROVEN_RECEIVER]
            edits: list = []
            defines: frozenset = frozenset()
            exact: bool = False  # a definition `fix` alone may make exact (no CPU fallback)
            local: bool = False  # that definition is the function's own
            forward = analysis.devices.forward_input(site) if verdict.device is None else None
            # unsafe whatever the receiver (the input's device): the whole-run index, which
            # can prove a receiver, cannot help (not worth a pass)
            settled = forward is not None
            if verdict.device is not None:  # a device in scope, exact or under a test that makes it CUDA
                device_code = verdict.device.code
                if not verdict.device.exact:  # (`if d.type == "cuda":`: d may be cuda:1)
                    reasons.insert(0, f"{verdict.device.why} may not be the current device")
                applicability = Applicability.UNSAFE if reasons else Applicability.SAFE
            elif forward is not None:  # library-safe: no definition, the input's device
                device_code = forward.code
                applicability = Applicability.UNSAFE
                reasons.insert(0, f"{forward.why} may not be on the current device")
            else:
                name, edits, why = ctx.device_definition(anchor)
                script = analysis.devices.entry_point(anchor) is not None
                # a library module, or a script whose functions import torch themselves:
                # a definition in the function, if any
                local = name is None and (not script or analysis.torch_alias is None)
                if local:
                    name, edits, why_local = ctx.local_device_definition(site)
                    why = why if script and name is None else why_local
                device_code = name or analysis.device_name
                if name is None:
                    applicability, reasons = Applicability.DISPLAY, [f"display only: {why}"]
                elif local and cuda_only[homes[site]] and homes[site] not in unproven:  # a CUDA-only test's
                    applicability, settled = Applicability.SAFE, True
                    reasons.insert(0, f"a device defined in the function: "
                                      f"`{skips[site]}` runs it only where CUDA "
                                      "is available, so its CPU fallback is never taken")
                elif local:  # no `defines`: one function's own name, no other fix binds it
                    applicability = Applicability.UNSAFE
                    # a proven receiver: `fix` alone defines the exact device in the function
                    exact = not reasons
                    if cuda_only[homes[site]] and not reasons:  # one applicability per definition
                        line = ctx.start(unproven[homes[site]].node)[0]
                        why = (f"a device defined in the function, which `{skips[site]}` runs only where "
                               f"CUDA is available; the `.cuda()` on line {line} moves a receiver that may "
                               "not be a torch tensor or module, and the function's moves share one "
                               "applicability")
                    elif cuda_only[homes[site]]:
                        why = (f"a device defined in the function, which `{skips[site]}` runs only where "
                               "CUDA is available")
                    reasons.insert(0, why)
                else:
                    defines = frozenset({name})
                    exact = not reasons
                    assured = analysis.devices.cuda_assured(site)
                    if assured and not reasons:  # the fallback is never taken here
                        applicability = Applicability.SAFE
                        reasons.insert(0, f"a device defined where the script starts; `{assured}` makes it CUDA here")
                    else:
                        applicability = Applicability.UNSAFE
                        reasons.insert(0, why)
            if own_cuda:
                names = ", ".join(f"`{c.name}`" for c in own_cuda)
                applicability = Applicability.DISPLAY
                reasons = [f"display only: {names} in this file defines its own `cuda()`"]
            message = f"Use `.to({device_code})` instead"
            if reasons:
                message += f" ({'; '.join(reasons)})"
            move = ctx.cuda_to_device(call, device_code)
            if applicability is Applicability.DISPLAY:
                fix = Fix(applicability, message)
            elif exact and local:
                safe = Fix(Applicability.SAFE, f'Use `.to({device_code})` (`{device_code} = torch.device("cuda")` '
                           "defined in the function: the device `.cuda()` uses, at each use)",
                           tuple(ctx.local_device_definition(site, exact=True)[1]) + (move,))
                fix = Fix(applicability, message, tuple(edits) + (move,), safe=safe)
            elif exact:
                fix = ctx.defined_device_fix(
                    applicability, message,
                    f'Use `.to({device_code})` (`{device_code} = torch.device("cuda")` defined where the script '
                    "starts: the device `.cuda()` uses, at each use)", edits, anchor, (move,), device_code)
            else:
                fix = Fix(applicability, message, tuple(edits) + (move,), defines,
                          frozenset({"receiver"}) if UNPROVEN_RECEIVER in reasons and not settled
                          and askable[site] else frozenset())
            yield ctx.violation(
                call,
                "`.cuda()` without a device uses the implicit current device (cuda:0 unless something "
                "set it); pass an explicit device",
                fix,
            )

"""TDL101 global-set-device: ``torch.cuda.set_device`` outside distributed setup."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from .. import names as N
from ..analysis import dotted_name, gpu_index, is_none
from ..model import Applicability, Edit, Fix, Violation
from .base import Context, Example, Rule
from .device_state import Fallback, Plan, plan_cpu_fallback, plan_device_block, plan_explicit_device


class GlobalSetDevice(Rule):
    code = "TDL101"
    name = "global-set-device"
    summary = "`torch.cuda.set_device` changes a hidden global outside distributed setup"
    triggers = ("set_device",)
    needs = (tuple(f"qual:{q}" for q in sorted(N.SET_DEVICE)),)  # the gate on the code
    fixable = "sometimes"
    fix_summary = 'explicit device object or `with torch.<backend>.device(k):`, or a CPU fallback of the GPU choice (`opt.gpu_ids`) under its own test (unsafe), or display'
    fix_priority = 0
    what = """
        A call of `set_device(...)` of any backend (`torch.cuda`, `torch.xpu`,
        `torch.musa`, `torch.npu`, `torch.mlu`, `torch.accelerator.set_device_index`; any
        import form) that switches the caller's device for good and is not part of a
        distributed or per-process setup. Quiet also for functions handed to a launcher,
        RPC workers and scripts launched per rank, an index from `LOCAL_RANK` or
        horovod's `local_rank()` whatever the module imports, an accelerator wrapper
        method whose index is its own parameter or its `self.<...device>` attribute, a
        function named for setting the device that binds its own parameter and that no
        code of the file calls (classy_vision's `set_cuda_device_index(idx)`: its callers
        choose the index),
        `set_device(current_device())` / `set_device(torch.device("cuda"))`, a
        function that saves the current device and sets it back, and, in a script, a
        device that the same function also passes explicitly (`set_device(device)` beside
        `.to(device)` or `device=device`; `set_device(args.gpu)` beside `.cuda(args.gpu)` or
        a device built from that index, `.to("cuda:{}".format(args.gpu))`: the current
        device agrees with the explicit one).
        Quiet when the same function (or, for a script, the module) initialises a
        process group, directly or through a local helper such as `ddp_setup()`, or calls
        another module's helper named for the distributed setup (`init_distributed_mode`,
        `init_dist`, `setup_ddp`, `init_ddp_connection`) or another library's own
        `init_process_group` (Bagua's); in a helper of the file that
        such a function calls, binding its own parameter (open_clip's
        `set_device(device)`); inside a function started by `mp.spawn`,
        `multiprocessing.Process(target=...)` or a process pool, or a helper it calls; in a
        pool's `initializer` (each worker binds once as it starts, before its tasks);
        when the index derives from `LOCAL_RANK`/`local_rank`/`rank`/`device_id` in a module that
        uses `torch.distributed` (an attribute the function set just before is read as what
        it was set to: `self.trainer.root_gpu = ids[self.trainer.local_rank]`, or what
        an `assert` just before says it equals: `assert self.root_gpu == hvd.local_rank()`).
        Inside a thread it is TDL102 instead.
    """
    why = """
        The current device is a hidden global that every implicit `.cuda()`,
        `device="cuda"`, `torch.cuda.Stream()` and memory query depends on. PyTorch's
        docs discourage `set_device` in favour of an explicit `torch.device`, a
        block-scoped `with torch.cuda.device(i):`, or `CUDA_VISIBLE_DEVICES`. Binding each
        DDP rank with `set_device(local_rank)` is the accepted exception, and stays quiet.
    """
    example = """
        torch.cuda.set_device(1)
        model = Net().cuda()
    """
    use_instead = """
        device = torch.device("cuda", 1) if torch.cuda.is_available() else torch.device("cpu")
        model = Net().to(device)
    """
    fix_safety = """
        When the only current-device dependents in reach (that scope, or every function
        of the module for a module-level call) are bare `.cuda()` calls after it, the fix
        replaces the call with a device object that falls back to the CPU and rewrites
        those calls to `.to(device)` in the same fix. It is always **unsafe**: code in
        other modules may rely on the current device the call set. Where, after the call,
        the code calls a function or class of the program's other modules (`Net()` from
        `model`, whose own `.cuda()` follows the current device) or one of this file's
        whose implicit-device uses the fix would not rewrite, the explicit device would
        move that code to GPU 0: a call alone in its function is then scoped instead,
        the rest of the function in `with torch.cuda.device(k):` (after `if
        torch.cuda.current_device() != k: set_device(k)` the block replaces the `if`: it
        changes nothing where `k` is current already). When other
        implicit-device uses exist (`device="cuda"`, `torch.cuda.current_device()` ...)
        the finding carries a display-only fix naming the alternatives.

        A call that runs only under the code's own test that its GPU choice holds a GPU
        (`if len(opt.gpu_ids) > 0:`, `if args.gpu is not None:`, `if args.gpu >= 0:`),
        as pix2pix-style options do, dies on a CPU-only machine. When it is not rewritten
        as above, the fix (unsafe) lets that choice fall back to the CPU: just before the
        test, `if len(opt.gpu_ids) > 0 and not torch.cuda.is_available(): opt.gpu_ids = []`,
        which is what `--gpu_ids -1` asks for, so every placement that follows the choice
        runs on the CPU. It queries CUDA only where `set_device` initialised it anyway. The
        call stays and the finding with it (display), for code in other modules may rely on it.
    """
    VALID = (
        "import torch\nimport torch.distributed as dist\n"
        "def worker(gpu):\n    dist.init_process_group('nccl')\n    torch.cuda.set_device(gpu)\n",
        # the index an attribute was set to just before: the local rank (Lightning 1.0's DDP
        # accelerator), or the method's own parameter (its DDP2 accelerator's process index)
        "import torch\nimport torch.distributed as dist\nclass DDPAccelerator:\n"
        "    def model_to_device(self, model, process_idx):\n"
        "        self.trainer.root_gpu = self.trainer.data_parallel_device_ids[self.trainer.local_rank]\n"
        "        torch.cuda.set_device(self.trainer.root_gpu)\n        model.cuda(self.trainer.root_gpu)\n",
        "import torch\nclass DDP2Accelerator:\n    def model_to_device(self, model, process_idx):\n"
        "        self.trainer.root_gpu = process_idx\n        torch.cuda.set_device(self.trainer.root_gpu)\n",
        # another library's process group (Bagua's tests' setup_bagua_env: scoping the call
        # would hand every rank's later `.cuda()` back to GPU 0)
        "import os\nimport torch\nimport bagua.torch_api as bagua\n"
        "def setup_bagua_env(rank, env):\n    os.environ['RANK'] = str(rank)\n"
        "    torch.cuda.set_device(rank)\n    bagua.init_process_group()\n",
        "import torch\nimport torch.multiprocessing as mp\n"
        "def run(gpu, args):\n    torch.cuda.set_device(gpu)\nmp.spawn(run, args=(1,), nprocs=2)\n",
        "import os, torch\nimport torch.distributed as dist\n"
        "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n",
        "import torch\nimport torch.distributed as dist\n"
        "def pipeline_pre_init(cfg):\n    torch.cuda.set_device(cfg.device_id)\n",
        "def set_device(i):\n    pass\nset_device(1)\n",
        "import torch\ntorch.cuda.set_device(torch.cuda.current_device())\n",
        "import torch\ntorch.cuda.set_device(torch.device('cuda'))\n",
        "import torch\nclass DeviceGPU:\n    def __init__(self, rank):\n        self._device = torch.device('cuda', rank)\n"
        "        torch.cuda.set_device(self._device)\n",
        "import torch\nclass Accel:\n    def set_device_index(self, index):\n        torch.cuda.set_device(index)\n",
        # ... or a function named for it, binding its own parameter, that no code here calls
        # (classy_vision's distributed utilities: its trainers, in other modules, hand it
        # the local rank, or 0 for one process)
        "import torch\n_cuda_device_index = 0\n\n\ndef set_cuda_device_index(idx):\n"
        "    global _cuda_device_index\n    _cuda_device_index = idx\n    torch.cuda.set_device(_cuda_device_index)\n",
        "import os, torch\ntorch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n",
        "import torch\ndef on(k, f):\n    prev = torch.cuda.current_device()\n    torch.cuda.set_device(k)\n"
        "    try:\n        return f()\n    finally:\n        torch.cuda.set_device(prev)\n",
        "import torch\nimport horovod.torch as hvd\nhvd.init()\ntorch.cuda.set_device(hvd.local_rank())\n",
        # ... or a device built from it just before, on the same path (Determined's context,
        # a horovod process per GPU)
        "import torch\n\n\nclass Context:\n    def _init_device(self):\n        if self.distributed.size > 1:\n"
        "            device = torch.device('cuda', self.distributed.local_rank)\n"
        "            torch.cuda.set_device(device)\n        else:\n            device = torch.device('cuda', 0)\n"
        "        return device\n",
        "import torch\ndef test_hvd():\n    import horovod.torch as hvd\n    lrank = hvd.local_rank()\n"
        "    torch.cuda.set_device(lrank)\n",  # ignite's tests: horovod's rank through a name
        # ... or a call of a name bound to it (nanotron's parallel context)
        "import os\nimport torch\n\n\nclass ParallelContext:\n    def set_device(self):\n"
        "        local_rank = int(os.getenv('LOCAL_RANK', '0'))\n        device_id = local_rank\n"
        "        torch.cuda.set_device(torch.device('cuda', device_id))\n",
        # ... or an attribute asserted to be it just before (Lightning's Horovod training)
        "import torch\nimport horovod.torch as hvd\n\n\nclass Trainer:\n    def horovod_train(self, model):\n"
        "        if torch.cuda.is_available() and self.on_gpu:\n"
        "            assert self.root_gpu == hvd.local_rank()\n            torch.cuda.set_device(self.root_gpu)\n"
        "            model.cuda(self.root_gpu)\n",
        "import torch\ndef main(args):\n    torch.cuda.set_device(args.gpu)\n"
        "def launch(fn, n):\n    pass\nlaunch(main, 2)\n",
        "import torch\ngpu.set_device(1)\n",
        # ColossalAI's memory monitor: each worker thread of its pool binds the parent's
        # device as it starts (a pool's initializer), so its tasks measure the right GPU
        "from concurrent.futures import ThreadPoolExecutor\nimport torch\nclass MemoryMonitor:\n"
        "    def __init__(self):\n        current_device = torch.cuda.current_device()\n"
        "        def _set_cuda_device():\n            torch.cuda.set_device(current_device)\n"
        "        self.executor = ThreadPoolExecutor(max_workers=1, initializer=_set_cuda_device)\n",
        # a process pool's initializer takes each worker's GPU from a queue (positionally)
        "import torch\nimport torch.multiprocessing as mp\ndef bind(queue):\n    torch.cuda.set_device(queue.get())\n"
        "def main(queue, items):\n    with mp.Pool(2, bind, (queue,)) as pool:\n        return pool.map(len, items)\n",
        # a benchmark script makes its explicit device current too (TorchRL's: CUDA events
        # and custom kernels follow the current device)
        "import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--device', default='cuda:1')\n    args = parser.parse_args()\n"
        "    device = torch.device(args.device)\n    if device.type == 'cuda':\n        torch.cuda.set_device(device)\n"
        "    return torch.Generator(device=device).manual_seed(0)\n\n\nif __name__ == '__main__':\n    main()\n",
        # ... or the index of one: PyTorch's examples' single-GPU path, and Brevitas's
        # validation scripts, which build the device string from the same index
        "import argparse\nimport torch\nimport torchvision\n\n\ndef main():\n"
        "    parser = argparse.ArgumentParser()\n    parser.add_argument('--gpu', type=int, default=None)\n"
        "    args = parser.parse_args()\n    model = torchvision.models.resnet18()\n"
        "    if args.gpu is not None:\n        torch.cuda.set_device(args.gpu)\n"
        "        model = model.cuda(args.gpu)\n    return model\n\n\nif __name__ == '__main__':\n    main()\n",
        "import sys\nimport torch\n\n\ndef main(gpu=None):\n    model = torch.nn.Linear(2, 2)\n"
        "    if gpu is not None:\n        loc = 'cuda:{}'.format(gpu)\n        torch.cuda.set_device(gpu)\n"
        "    else:\n        loc = 'cpu'\n    model.to(loc)\n    return model(torch.ones(2, device=loc))\n\n\n"
        "if __name__ == '__main__':\n    main(int(sys.argv[1]) if len(sys.argv) > 1 else None)\n",
        # ... a string, however quoted (TorchRL's GRPO scripts)
        "import torch\n\n\ndef main():\n    torch.set_default_device(\"cuda:0\")\n"
        "    torch.cuda.set_device('cuda:0')\n    return torch.zeros(2)\n\n\nif __name__ == '__main__':\n    main()\n",
        # the setup through another module's helper, named for it (PyTorch Lightning 0.7's
        # spawned `ddp_train`; DeiT's scripts at their module level)
        "import torch\nclass DDPMixin:\n    def ddp_train(self, process_idx, model):\n"
        "        model.init_ddp_connection(process_idx, self.world_size)\n"
        "        self.root_gpu = process_idx\n        torch.cuda.set_device(self.root_gpu)\n"
        "        model.cuda(self.root_gpu)\n",
        "import torch\nimport utils\nargs = utils.parse()\nutils.init_distributed_mode(args)\n"
        "torch.cuda.set_device(args.gpu)\n",
        # open_clip: the distributed setup hands the rank's device to a helper of its own
        "import torch\nimport torch.distributed as dist\ndef set_device(device):\n"
        "    if device.startswith('cuda:'):\n        torch.cuda.set_device(device)\n"
        "def init_distributed_device(local_rank):\n    dist.init_process_group('nccl')\n"
        "    set_device(f'cuda:{local_rank}')\n",
    )
    INVALID = (
        # ... but not a name whose value in effect is another index (the rank's device was
        # replaced before the call)
        Example(
            "import torch\n\n\nclass Context:\n    def _init_device(self, gpu):\n"
            "        device = torch.device('cuda', self.distributed.local_rank)\n"
            "        device = torch.device('cuda', gpu)\n        torch.cuda.set_device(device)\n"
            "        return device\n",
            "import torch\n\n\nclass Context:\n    def _init_device(self, gpu):\n"
            "        device = torch.device('cuda', self.distributed.local_rank)\n"
            "        device = torch.device('cuda', gpu)\n        with torch.cuda.device(device):\n"
            "            return device\n",
        ),
        # ... nor the first of the GPUs a user listed, nor an attribute set again in between
        Example(
            "import torch\n\n\nclass Accelerator:\n    def setup(self, model):\n"
            "        self.trainer.root_gpu = self.trainer.gpus[0]\n"
            "        torch.cuda.set_device(self.trainer.root_gpu)\n        return model.cuda()\n",
            "import torch\n\n\nclass Accelerator:\n    def setup(self, model):\n"
            "        self.trainer.root_gpu = self.trainer.gpus[0]\n"
            '        device = torch.device("cuda", self.trainer.root_gpu) if torch.cuda.is_available() '
            'else torch.device("cpu")\n'
            "        return model.to(device)\n",
        ),
        Example(
            "import torch\nimport torch.distributed as dist\n\n\nclass Accelerator:\n"
            "    def to_device(self, model):\n        self.root_gpu = self.local_rank\n        if model.big:\n"
            "            self.root_gpu = 0\n        torch.cuda.set_device(self.root_gpu)\n",
        ),
        # the model's own `.cuda()` (another module) follows the current device too: the
        # explicit device would leave it on GPU 0, so the block keeps k current for it
        Example(
            "import torch\nfrom model import Net\n\n\ndef main(k):\n    torch.cuda.set_device(k)\n"
            "    x = torch.ones(2).cuda()\n    return Net()(x)\n",
            "import torch\nfrom model import Net\n\n\ndef main(k):\n    with torch.cuda.device(k):\n"
            "        x = torch.ones(2).cuda()\n        return Net()(x)\n",
        ),
        Example(
            "import torch\ntorch.cuda.set_device(1)\nx = torch.zeros(2).cuda()\n",
            'import torch\ndevice = torch.device("cuda", 1) if torch.cuda.is_available() else torch.device("cpu")\n'
            "x = torch.zeros(2).to(device)\n",
        ),
        Example(  # pix2pix's options: the GPU list falls back to the CPU (the call stays)
            "import torch\nclass Options:\n    def parse(self, opt):\n"
            "        opt.gpu_ids = [int(i) for i in opt.gpu_ids.split(',') if int(i) >= 0]\n"
            "        if len(opt.gpu_ids) > 0:\n            torch.cuda.set_device(opt.gpu_ids[0])\n"
            "        return opt\n",
            "import torch\nclass Options:\n    def parse(self, opt):\n"
            "        opt.gpu_ids = [int(i) for i in opt.gpu_ids.split(',') if int(i) >= 0]\n"
            "        if len(opt.gpu_ids) > 0 and not torch.cuda.is_available():  # no GPU here: run on the CPU\n"
            "            opt.gpu_ids = []\n"
            "        if len(opt.gpu_ids) > 0:\n            torch.cuda.set_device(opt.gpu_ids[0])\n"
            "        return opt\n",
        ),
        Example(  # an index tested against None, in a guard with more conjuncts
            "import torch\ndef setup(args):\n    if args.gpu is not None and args.verbose:\n"
            "        torch.cuda.set_device(args.gpu)\n",
            "import torch\ndef setup(args):\n"
            "    if args.gpu is not None and not torch.cuda.is_available():  # no GPU here: run on the CPU\n"
            "        args.gpu = None\n"
            "    if args.gpu is not None and args.verbose:\n        torch.cuda.set_device(args.gpu)\n",
        ),
        Example(  # the list already falls back to the CPU: nothing more to do
            "import torch\ndef parse(opt):\n"
            "    opt.gpu_ids = opt.gpu_ids if torch.cuda.is_available() else []\n"
            "    if opt.gpu_ids:\n        torch.cuda.set_device(opt.gpu_ids[0])\n",
        ),
        Example(  # ids kept as strings
            "import torch\ndef parse(opt):\n    if opt.gpus:\n        torch.cuda.set_device(int(opt.gpus[0]))\n",
            "import torch\ndef parse(opt):\n"
            "    if opt.gpus and not torch.cuda.is_available():  # no GPU here: run on the CPU\n"
            "        opt.gpus = []\n    if opt.gpus:\n        torch.cuda.set_device(int(opt.gpus[0]))\n",
        ),
        Example(  # a global of the module: assigning it in the function would make it local
            "import torch\ngpu_ids = [0]\ndef setup():\n    if gpu_ids:\n        torch.cuda.set_device(gpu_ids[0])\n",
        ),
        Example(  # a setter named for it that the file itself calls with an index of its own
            "import torch\n\n\ndef set_gpu(k):\n    torch.cuda.set_device(k)\n\n\nset_gpu(1)\n",
        ),
        Example(  # a parameter: emptying it here leaves the caller's own value on the GPU
            "import torch\ndef configure_process(opt, device_id):\n    if device_id >= 0:\n"
            "        torch.cuda.set_device(device_id)\n",
        ),
        Example(  # a conditional call is not replaced by a device that code after it needs
            "import torch\ngpus = [1]\nif len(gpus) > 0:\n    torch.cuda.set_device(gpus[0])\n"
            "x = torch.zeros(2).cuda()\n",
            "import torch\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
            "gpus = [1]\nif len(gpus) > 0 and not torch.cuda.is_available():  # no GPU here: run on the CPU\n"
            "    gpus = []\nif len(gpus) > 0:\n    torch.cuda.set_device(gpus[0])\n"
            "x = torch.zeros(2).to(device)\n",
        ),
        # a script that sets one index and places on another (its rank's): not aligned
        Example(
            "import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
            "    parser.add_argument('--gpu', type=int)\n    parser.add_argument('--rank', type=int)\n"
            "    args = parser.parse_args()\n    torch.cuda.set_device(args.gpu)\n"
            "    return torch.nn.Linear(2, 2).to(f'cuda:{args.rank}')\n\n\nif __name__ == '__main__':\n    main()\n",
            "import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
            "    parser.add_argument('--gpu', type=int)\n    parser.add_argument('--rank', type=int)\n"
            "    args = parser.parse_args()\n    with torch.cuda.device(args.gpu):\n"
            "        return torch.nn.Linear(2, 2).to(f'cuda:{args.rank}')\n\n\n"
            "if __name__ == '__main__':\n    main()\n",
        ),
        # the same alignment in a library function changes its caller's current device
        # (MONAI's TensorRT compile): scoped to the function
        Example(
            "import torch\n\n\ndef compile_engine(model, device):\n    torch.cuda.set_device(device)\n"
            "    return model.to(device)\n",
            "import torch\n\n\ndef compile_engine(model, device):\n    with torch.cuda.device(device):\n"
            "        return model.to(device)\n"),
        # an op that switches to its input's GPU unless it is current (mmcv's knn and
        # points_in_boxes): the block is a no-op where it is, and gives the device back after
        Example(
            "import torch\n\n\ndef knn(k, xyz, center_xyz):\n    device = center_xyz.get_device()\n"
            "    if torch.cuda.current_device() != device:\n        torch.cuda.set_device(device)\n\n"
            "    idx = center_xyz.new_zeros((k,)).int()\n    return idx\n",
            "import torch\n\n\ndef knn(k, xyz, center_xyz):\n    device = center_xyz.get_device()\n"
            "    with torch.cuda.device(device):\n        idx = center_xyz.new_zeros((k,)).int()\n"
            "        return idx\n"),
        Example(
            "from torch.cuda import set_device as sd\nimport torch\n"
            "def main(opt):\n    sd(opt.gpu_ids[0])\n    torch.zeros(1, device='cuda')\n",
            "from torch.cuda import set_device as sd\nimport torch\n"
            "def main(opt):\n    with torch.cuda.device(opt.gpu_ids[0]):\n        torch.zeros(1, device='cuda')\n",
        ),
    )

    def _restores(self, ctx: Context, site, fn) -> bool:
        """The function saves the current device before and sets it back after."""
        a = ctx.analysis
        saved = {name for name, _ in self._saves(ctx, fn)}
        for other in a.set_device_sites:
            arg = other.positional(0) or other.keyword("device")
            if (other is not site and other.order > site.order and a.inside(other.scope, fn.node)
                    and arg is not None and isinstance(arg.value, cst.Name) and arg.value.value in saved):
                return True
        return False

    def _is_restore(self, ctx: Context, site, fn) -> bool:
        arg = site.positional(0) or site.keyword("device")
        return (arg is not None and isinstance(arg.value, cst.Name)
                and arg.value.value in {name for name, _ in self._saves(ctx, fn)})

    def _aligns(self, ctx: Context, site, fn) -> bool:
        """In a script (run, not imported: no caller's device to change), the device set
        is the very one the same code places on explicitly: passed as its explicit device
        (`device = torch.device(args.device)`, `set_device(device)`,
        `torch.Generator(device=device)`; `torch.set_default_device("cuda:0")` beside
        `set_device("cuda:0")`), or the index of one (PyTorch's examples' single-GPU path:
        `set_device(args.gpu)` beside `model.cuda(args.gpu)`; `loc =
        "cuda:{}".format(args.gpu)` and `model.to(loc)`). The current device then agrees
        with the explicit placements, for what only follows the current device (CUDA
        events, custom kernels, library code)."""
        a = ctx.analysis
        arg = site.positional(0) or site.keyword("device")
        if arg is None or not a.devices.is_script:
            return False
        wanted = _spelled(a, arg.value)
        if wanted is None:
            return False

        def places_there(value, scope) -> bool:
            if _spelled(a, value) == wanted or _spelled(a, gpu_index(value)) == wanted:
                return True
            held = a.values_of(value.value, scope) if isinstance(value, cst.Name) else None
            return any(_spelled(a, gpu_index(v)) == wanted for v, _ in held or ())

        return any(other is not site and a.enclosing_function(other.scope) is fn
                   and any(places_there(d, other.scope) for d in _placements(other))
                   for other in a.calls)

    def _saves(self, ctx: Context, fn):
        a = ctx.analysis
        for name, bindings in fn.scope.bindings.items():
            for b in bindings:
                if (b.kind == "assign" and isinstance(b.value, cst.Call)
                        and (a.qualname(b.value.func, fn.scope) or "").endswith(("current_device", "current_device_index"))):
                    yield name, b

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        for site in a.set_device_sites:
            if a.binding_context(site) is not None or a.devices.is_current_device_noop(site):
                continue
            fn = a.enclosing_function(site.scope)
            if fn is not None and (self._restores(ctx, site, fn) or self._is_restore(ctx, site, fn)):
                continue  # prev = current_device(); set_device(k); ...; set_device(prev)
            owner = fn.node if fn is not None else a.module
            if self._aligns(ctx, site, fn):
                continue  # a script's current device made the one its code places on explicitly
            plan = plan_explicit_device(ctx, site, owner, include_nested=fn is None)
            alone = fn is not None and not any(
                s is not site and a.inside(s.scope, fn.node) for s in a.set_device_sites)
            block = plan_device_block(ctx, site, fn) if alone and not isinstance(plan, Plan) else None
            fallback = (plan_cpu_fallback(ctx, site, owner)
                        if not isinstance(plan, Plan) and not isinstance(block, Edit) else None)
            if isinstance(plan, Plan):
                fix = Fix(Applicability.UNSAFE,
                          f"Replace it with an explicit `{plan.name}` and pass it to the "
                          f"{plan.rewritten} `.cuda()` call{'s' if plan.rewritten != 1 else ''} that depend on it",
                          tuple(plan.edits), frozenset({plan.name}))
            elif isinstance(block, Edit):
                backend = (site.qualname or "torch.cuda.set_device").rsplit(".", 1)[0]
                fix = Fix(Applicability.UNSAFE,
                          f"Scope it: wrap the rest of `{fn.name}` in `with {backend}.device(k):`, which "
                          f"restores the caller's device (not rewritten explicitly: {plan})", (block,))
            elif isinstance(fallback, Fallback):
                fix = Fix(Applicability.UNSAFE,
                          f"Let `{fallback.choice}` fall back to the CPU: set it to `{fallback.empty}` "
                          "before this test when no GPU is available, so that the program and every "
                          f"placement that follows `{fallback.choice}` run on a CPU-only machine; "
                          f"`set_device` stays, as {plan} (a CPU fallback: where the program died "
                          "without a GPU, it now runs on the CPU)", tuple(fallback.edits))
            else:
                fix = Fix(Applicability.DISPLAY,
                          f"Not rewritten: {plan}. Use an explicit `torch.device` with `.to(device)`, "
                          "`with torch.cuda.device(k):` around the work, or CUDA_VISIBLE_DEVICES")
            yield ctx.violation(
                site.node,
                "`set_device` changes the current device for all later implicit-device code in "
                "this process; prefer an explicit `torch.device` (or `with torch.cuda.device(k):`)",
                fix,
            )


def _spelled(a, node) -> object:
    """A device or an index as ``_aligns`` compares them: a string by its value ("cuda:0"
    is 'cuda:0'), a name or an attribute chain by its code (`args.gpu`); None for
    anything else (a call's result may differ from one call to the next)."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    return a.code(node) if node is not None and dotted_name(node) else None


def _placements(site) -> list:
    """The devices a call places on: what it takes as a device, and the device of a
    `.cuda(k)` move."""
    out = list(site.device_arguments())
    if site.method == "cuda" and site.qualname is None:
        arg = site.positional(0) or site.keyword("device")
        out += [arg.value] if arg is not None and not is_none(arg.value) else []
    return out

"""TDL007 hardcoded-gpu-device (opt-in): ``torch.device("cuda:0")``, ``.cuda(0)``,
``.to("cuda")``, ``device="cuda"``: a GPU with no CPU fallback."""

from __future__ import annotations

import re

from typing import Iterable, List, Optional, Tuple

import libcst as cst

from .. import names as N
from ..analysis import Binding, CallSite, compared, is_none, takes_gpu_ordinal
from ..model import Applicability, Edit, Fix, Violation
from .base import FALLBACK_COMMENT, Context, Example, Rule, Uninsertable
from .portability import (Held, LibraryLevel, asks_for_cuda, beside_unconditional, evaluated, guard_statement,
                          held_device, meant_for_gpus, option_site, option_strings, stands_alone, string_quote,
                          string_quote_of, torch_for_test, unconditional)


class HardcodedGpuDevice(Rule):
    code = "TDL007"
    name = "hardcoded-gpu-device"
    summary = ('a GPU the code names (`torch.device("cuda:0")`, `.cuda(0)`, `.to(f"cuda:{gpu}")`) with no CPU '
               "fallback: the code cannot run without CUDA (opt-in)")
    opt_in = True
    # "cuda"; a process's GPU index used as a device (`.to(rank)`) in a file that never
    # spells "cuda" (words.TEXT_TESTS); or an option whose help gives the CPU's value
    # ("add_argument" and "cpu")
    triggers = ("cuda", "@rank-device", "add_argument", "@gpu-ordinal")
    also_requires = ("cuda", "@rank-device", "cpu", "CPU", "@gpu-ordinal")
    # the gate on the code: a `cuda` method called (`.cuda(0)`), a string that starts with
    # "cuda" (`torch.device("cuda")`, `.to("cuda")`, `device="cuda:0"`), a rank's index as a
    # device (`place:rank`), or an option's help that names the CPU
    needs = (("call:cuda", "str^cuda", "place:rank", "help~cpu", "place:cuda"),)
    fixable = "sometimes"
    fix_summary = ('`"cuda:0" if torch.cuda.is_available() else "cpu"` in place of the GPU (`.cuda(0)` becomes '
                   "`.to(...)`, `.cuda(gpu)` runs only with CUDA; unsafe); display at a library's module level")
    what = """
        A GPU the code names: `torch.device("cuda")`, `torch.device("cuda:1")`,
        `torch.device("cuda", 1)` or `("cuda", gpu)`, `.cuda(1)` / `.cuda(device=1)`,
        `.cuda(args.gpu)` (any device that is an expression), a process's GPU index as a
        device (`.to(rank)`, `device=local_rank` of torch's calls or this file's, as the DDP
        tutorial writes), a bare
        `.cuda()` where a binding named the GPU (in a `with torch.cuda.device(k):` block, after a rank's
        `torch.cuda.set_device(rank)`: TDL001 is quiet there), `DistributedDataParallel`'s
        `device_ids=[rank]` and `output_device=` (they raise for a module on the CPU; not
        a list the code makes None on its CPU path: a name it tests or binds to None, a
        method of the file's that returns None, as Lightning's `determine_ddp_device_ids()`), a
        process group's `device_id=torch.device("cuda", rank)` (so does the CPU there:
        none without CUDA), `.to("cuda")`, a
        `device="cuda:0"` argument (`torch.zeros(2, device="cuda")`), a load's
        `map_location="cuda:0"` (or a location map's value: "Attempting to deserialize object
        on a CUDA device"), the default device of every factory call
        (`torch.set_default_device("cuda")`, or a block's: `with torch.device("cuda"):`), a
        GPU's ordinal as a device (`torch.zeros(n, device=0)`, `pipeline(task,
        device=0)`, a method's or this file's function's where the file imports torch; not a
        `torch.cuda` query's, nor another package's device index), a device string built
        at run time (`f"cuda:{gpu}"`, `"cuda:" + str(gpu)`, `"cuda:{}".format(gpu)`,
        `"cuda:%d" % gpu`) in those places, a `"cuda"` string a name holds where the name is
        used as a device (`device = "cuda"` ... `.to(device)`: reported where it is bound,
        also when a branch rebinds it only to another GPU, a distributed run's `device =
        f"cuda:{local_rank}"` under `if ddp:`; so is an attribute's, `self.device =
        "cuda"` set once in the class's methods, `args.device = "cuda"` once in the file,
        read as `args.device` or through a name, `device = args.device`; a
        configuration's device, an attribute called `device` in any case set once to a GPU
        on a name of the file, yacs' `_C.MODEL.DEVICE = "cuda"`, read by other files),
        a command line's default (`add_argument("--device", default="cuda")`; a GPU index,
        `add_argument("-gpu", default=0, help="... for CPU mode set -gpu = c")`, where the
        help gives the project's own value for the CPU: "use -1 for CPU", as pix2pix's
        `--gpu_ids` says, "-1 means CPU"), or a choice
        on a flag whose default is the GPU (`"cpu" if args.cpu else "cuda"` with `--cpu`
        a `store_true` flag, as EDSR-style trainers have; `"cuda" if not args.no_cuda else
        "cpu"`; a flag derived from one, `opt.cuda = not opt.no_cuda`, `use_cuda = not
        args.no_cuda`; declared in another file, a flag named for the CPU, `--cpu`,
        `--no-cuda`, is taken as off, and one that lists the GPUs to use, `--gpu_ids`,
        `opt['gpu_ids'] is not None` of a JSON configuration (BasicSR), as given; a switch
        the script sets once in its text, `cuda = True`): what the script does when run as
        written, chosen
        unconditionally in a statement (not under an `if`, not one side of `a if c else b`
        or of `a or b`, not a parameter's default, unless a call in the file leaves
        the argument to it: `def sample(self, n, device="cuda")` called as
        `diffusion.sample(8)` is what the script does as written; so is
        `device=torch.device("cuda:0")`; a bare `.cuda()` a binding made right also under
        `if`s that do not choose the CPU as written, a switch that is on as written,
        `if use_cuda:` after `use_cuda = True`, or a test whose other branch places on a
        GPU too, `if ngpus > 1: ... DataParallel(model).cuda()` `else: model.cuda()`, as
        pytorch-yolo2's script has them after its `CUDA_VISIBLE_DEVICES`; an `if` that tests
        the distributed mode, `if args.distributed:`, `if local_rank == 0:` (so the GPU a
        name or `args.device` is rebound to there is rewritten too), or a spawned
        process's index, `if args.gpu is not None:` after `args.gpu = gpu` in an `mp.spawn`
        target (the ImageNet trainer's), is no condition either: a launcher runs either
        way on a CPU machine; nor, in a function that names a GPU on no condition
        elsewhere, is an `if` on the data, `if local_size != max_size:` in DETR's
        `all_gather`, which a fix would otherwise leave half converted), in code that never asks whether CUDA
        is there (no `torch.cuda.is_available()` or `device_count()` in its function, or
        in the module for module-level code, or in an `if` around it; a
        `range(torch.cuda.device_count())` that lists the GPUs for `DataParallel` asks
        nothing, nor does a count kept and tested only for several GPUs (`n_gpu =
        torch.cuda.device_count()`, `if n_gpu > 1:`), an answer kept and never read
        (`use_cuda = torch.cuda.is_available()` once TDL008 removed its `assert
        use_cuda`), nor a question that picks one value, `dtype = "bfloat16" if
        torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"`), and
        that does not tell the CPU from CUDA itself (`if device.type == "cpu":`; for a name
        or attribute that holds the GPU, a test of it alone, `if device == "cuda":`, or of
        a name derived from it alone, `device_type = "cuda" if "cuda" in device else
        "cpu"` then `if device_type == "cuda":`, follows the choice and does not make one), outside functions and
        classes named or decorated for CUDA, ROCm or a GPU, and outside modules that stop as
        they are imported without CUDA (`assert torch.cuda.is_available()` at their top
        level: GPU-only by the author's word, until TDL008 removes the assertion, as a
        migration does in the same `fix`). Per-rank code too (`.cuda(rank)`,
        `f"cuda:{local_rank}"`): with TDL008's fallback of the NCCL backend to gloo, a
        DDP program runs on the CPU as well. Not a rank-independent device in per-rank
        code (TDL003's bug: its fix comes first), nor an implicit bare `.cuda()`
        (TDL001's), nor a `.cuda(*args)` that passes on its caller's device.

        Not on by default: choosing a GPU is a legitimate decision for code that only ever
        runs on GPUs. Select it (`--extend-select TDL007`, or in `[tool.torchdevlint]`
        `extend-select = ["TDL007"]`) when the code must also run on a machine without
        CUDA: a laptop, a CPU-only CI job. Selecting the whole prefix (`TDL`, `TDL0`) does
        not turn it on; `ALL` and the code itself do, and so does a one-shot migration,
        `torchdevlint fix --unsafe-fixes .`, unless the rules were chosen (`--select`, or a
        `select` other than the default in the config).
    """
    why = """
        The device is the program's one GPU assumption that `.cuda()` fixes cannot reach:
        every tensor moved to it fails with "Torch not compiled with CUDA enabled" or "no
        CUDA GPUs are available" on a machine without CUDA, so the whole program does.
    """
    example = """
        device = torch.device("cuda:0")
        model = nn.Linear(4, 2).to(device)
    """
    use_instead = """
        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(4, 2).to(device)
    """
    fix_safety = """
        The GPU becomes `"cuda:1" if torch.cuda.is_available() else "cpu"` where it is
        named (`.cuda(1)` becomes `.to(...)` of it, keeping `non_blocking`); a string built
        at run time keeps its expression (`f"cuda:{gpu}" if torch.cuda.is_available() else
        "cpu"`), and `torch.device("cuda", gpu)` the whole call (`torch.device("cuda",
        gpu) if torch.cuda.is_available() else torch.device("cpu")`), and `.cuda(gpu)`
        the call or its receiver as it is (`x.cuda(gpu) if torch.cuda.is_available() else
        x`; a statement of its own, `model.cuda(args.gpu)`, goes under `if
        torch.cuda.is_available():`; display when the receiver spans lines); an option's
        GPU index falls back to the CPU's value its help gives (`default=0 if
        torch.cuda.is_available() else "c"`: the program's own CPU path, which the rest of
        its plumbing follows). A name's
        string changes where it is bound, once for all its uses; a default in place (it
        is evaluated where the `def` runs: display-only in a library module). Unsafe: on a
        machine without CUDA the program now runs on the CPU instead of failing (which is
        the point, but changes behaviour). `is_available()` initialises CUDA: the fix is
        display-only at the module level of a module that is not a script (it would run
        at every import), in a module that sets `CUDA_VISIBLE_DEVICES` (the query would
        come first and freeze the devices), and in TorchScript.
    """
    VALID = (
        # a test that runs only on AMD GPUs (ultralytics' tests/test_rocm.py)
        "import pytest\nROCM = rocm_is_available()\n@pytest.mark.skipif(not ROCM, reason='ROCm/HIP not available')\n"
        "def test_export(tmp_path):\n    assert YOLO('m.pt').export(format='onnx', device=0)\n",
        'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
        # the CPU's own ordinal for a pipeline; a torch.cuda query's device (TDL008's call)
        'from transformers import pipeline\nclf = pipeline("text-classification", device=-1)\n',
        'import torch\nfree, total = torch.cuda.mem_get_info(device=0)\n',
        # a Chainer trainer (ESPnet's chainer_backend): no torch here, and -1 is Chainer's CPU
        "import chainer\n\n\nclass LMEvaluator(chainer.training.extensions.Evaluator):\n    pass\n\n\n"
        "def train(args, it, model):\n    gpu_id = 0 if args.ngpu == 1 else -1\n"
        "    return LMEvaluator(it, model, device=gpu_id), LMEvaluator(it, model, device=0)\n",
        # another package's `device=`, in a torch file
        "import torch\nfrom espnet.utils.training.evaluator import BaseEvaluator\n\n\n"
        "def evaluator(it, model, gpu_id):\n    return BaseEvaluator(it, model, device=gpu_id)\n",
        # another package's device index: an audio device
        'import torch\nimport sounddevice as sd\nsd.play(torch.zeros(8).numpy(), 8000, device=0)\n',
        'import torch\ndef build(n):\n    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):\n'
        '        return torch.zeros(n)\n',
        # DDP's device list that is None for a module on the CPU (Lightning's DDP strategy, ignite's tests)
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nx = torch.zeros(1).cuda()\n"
        "def wrap(self, model):\n    device_ids = self.determine_ddp_device_ids()\n"
        "    if device_ids is not None:\n        print(device_ids)\n    return DDP(model, device_ids=device_ids)\n",
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nx = torch.zeros(1).cuda()\n"
        "def wrap(model, device):\n    device_ids = None if 'cpu' in device.type else [device]\n"
        "    return DDP(model.to(device), device_ids=device_ids)\n",
        # ... or a method of the file's that gives None on the CPU (Lightning 1.3's DDP plugin)
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nx = torch.zeros(1).cuda()\n"
        "class DDPPlugin:\n    def configure_ddp(self):\n"
        "        self.model = DDP(self.model, device_ids=self.determine_ddp_device_ids())\n\n"
        "    def determine_ddp_device_ids(self):\n        if self.root_device.type == 'cpu':\n            return None\n"
        "        return [self.root_device.index]\n",
        'import torch\ndef f():\n    if torch.cuda.is_available():\n        return torch.device("cuda:0")\n'
        '    return torch.device("cpu")\n',
        'import torch\ndevice = torch.device("cpu")\n',
        'import torch\nd = torch.device("cuda")\nassert torch.cuda.device_count() > 0\n',
        'import torch\ndevice = "cuda:0"\n',
        'import torch\ndef f(group):\n    if backend(group) == "nccl":\n        return torch.device("cuda")\n'
        '    return torch.device("cpu")\n',
        'import torch\ndef f(g):\n    return (g() or torch.device("cuda")).type\n',
        'import torch\ndef f(use_gpu):\n    return torch.device("cuda:1") if use_gpu else torch.device("cpu")\n',
        'import torch\nclass T:\n    if torch.cuda.is_available():\n        def test(self):\n'
        '            return torch.device("cuda", 0)\n',
        'import torch\nclass Trainer:\n    def __init__(self, device=torch.device("cuda:0")):\n'
        '        self.device = device\n',
        "import torch\ndef f(x, gpu):\n    return x.to('cuda' if gpu else 'cpu'), x.cuda()\n",
        # a flag whose default is the CPU, or not one of this file's parser
        "import argparse, torch\np = argparse.ArgumentParser()\np.add_argument('--cuda', action='store_true')\n"
        "args = p.parse_args()\ndevice = torch.device('cuda' if args.cuda else 'cpu')\n",
        "import torch\ndef build(args):\n    return torch.device('cuda' if args.gpu else 'cpu')\n",
        # a GPU index as an option's default with no CPU value in its help, or one the
        # option's type cannot hold, or an option that is not a GPU's
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--gpu', type=int, default=0)\n"
        "args = p.parse_args()\n",
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_argument('-gpu', type=int, default=0, help='for CPU mode set -gpu = c')\nargs = p.parse_args()\n",
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_argument('--workers', type=int, default=0, help='use -1 for CPU count')\nargs = p.parse_args()\n",
        "import argparse\np = argparse.ArgumentParser()\n"
        "p.add_argument('--gpu', type=int, default=0, help='gpu to use, -1 = all gpus, cpu not supported')\n"
        "args = p.parse_args()\n",
        # a configuration's device with its fallback, set twice, or on another module's object
        "import torch\nfrom yacs.config import CfgNode as CN\n_C = CN()\n"
        "_C.DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
        "def get_config(cpu):\n    config = Config()\n    config.device = 'cuda'\n    if cpu:\n"
        "        config.device = 'cpu'\n    return config\n",
        "import settings\nsettings.device = 'cuda'\n",
        # a rank's index on one side of a choice (fairscale's benchmark, OpenNMT's iterator)
        "import torch\ndef run(rank, args):\n    return torch.device('cpu') if args.cpu else torch.device(rank)\n",
        # a configuration's switch whose value is not known here
        "import torch\nclass Model:\n    def __init__(self, opt):\n"
        "        self.device = torch.device('cuda' if opt['use_gpu'] else 'cpu')\n",
        "import torch\ndef make(device_id):\n"
        "    return torch.device(device_id) if device_id >= 0 else torch.device('cpu')\n",
        # a rank-named parameter or attribute that holds a device string (OpenNMT's noise models)
        "import torch\nclass Noise:\n    def __init__(self, prob, device_id='cpu'):\n"
        "        self.device_id = device_id\n"
        "    def to_device(self, t):\n        return t.to(torch.device(self.device_id))\n"
        "class Infilling(Noise):\n    def poisson(self, ps):\n"
        "        return torch.tensor(ps, device=torch.device(self.device_id))\n",
        "import torch\ndef noise(t, device_id='cpu'):\n    return t.to(device_id)\n",
        # a switch set to the CPU in the script's text, or assigned more than once
        "import torch\ncuda = False\ndevice = torch.device('cuda' if cuda else 'cpu')\n",
        "import sys, torch\ncuda = True\nif '--cpu' in sys.argv:\n    cuda = False\n"
        "device = torch.device('cuda' if cuda else 'cpu')\n",
        # derived flags that already ask, or from a flag whose default is the CPU
        "import torch\ndef build(args):\n    use_cuda = not args.no_cuda and torch.cuda.is_available()\n"
        "    return torch.device('cuda' if use_cuda else 'cpu')\n",
        "import argparse, torch\np = argparse.ArgumentParser()\np.add_argument('--gpu', action='store_true')\n"
        "args = p.parse_args()\nuse_cuda = args.gpu\ndevice = torch.device('cuda' if use_cuda else 'cpu')\n",
        "import torch\ndef build(args):\n    use_cuda = not args.no_cuda\n    if args.fast:\n        use_cuda = False\n"
        "    return torch.device('cuda' if use_cuda else 'cpu')\n",
        # the caller's device passed on (an override), or chosen on a condition
        "import torch\nclass P(torch.nn.Parameter):\n    def move(self, *args):\n        return super().cuda(*args)\n",
        "import torch\ndef f(x, args):\n    if args.gpu is not None:\n        x = x.cuda(args.gpu)\n    return x\n",
        # a bound `.cuda()` under a switch not known to be on, or an `if` whose other branch is the CPU's
        "import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\ndef f(x, args):\n    if args.cuda:\n"
        "        x = x.cuda()\n    return x\n",
        "import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\ndef f(x, big):\n    if big:\n"
        "        x = x.cuda()\n    else:\n        x = x.float()\n    return x\n",
        # an `if` on the data in a function that names no GPU on no condition: the
        # author's choice, as far as this function shows
        "import torch\ndef pad(local_size, max_size):\n    if local_size != max_size:\n"
        "        return torch.empty(max_size - local_size, dtype=torch.uint8, device='cuda')\n",
        # `if args.gpu is not None:` where `args.gpu` is the user's option, not a spawned index
        "import torch\ndef main_worker(model, args):\n    if args.gpu is not None:\n"
        "        model.cuda(args.gpu)\n    return model\n",
        # a string a name holds, chosen on a condition, or never used as a device
        "import torch\nif torch.cuda.is_available():\n    device = 'cuda'\nelse:\n    device = 'cpu'\n"
        "x = torch.zeros(1).to(device)\n",
        "import torch\nname = 'cuda'\nprint(name.upper())\n",
        # a parameter's default that every call here passes, or that no call here leaves to
        # it (a library's API), or a parent's that a subclass passes on
        "import torch\ndef f(x, device='cuda'):\n    return x.to(device)\nprint(f(torch.zeros(1), device='cpu'))\n",
        "import torch\ndef f(x, device='cuda'):\n    return x.to(device)\n",
        "import torch\nclass A(torch.nn.Module):\n    def __init__(self, device='cuda'):\n        super().__init__()\n"
        "        self.device = device\nclass B(A):\n    def __init__(self):\n        super().__init__('cpu')\n"
        "print(B())\n",
        # ... an attribute chosen on a condition, assigned in two methods, or another module's
        "import torch\nclass T:\n    def __init__(self, gpu):\n        self.device = 'cuda' if gpu else 'cpu'\n"
        "    def f(self, x):\n        return x.to(self.device)\n",
        "import torch\nclass T:\n    def __init__(self):\n        self.device = 'cuda'\n    def cpu(self):\n"
        "        self.device = 'cpu'\n    def f(self, x):\n        return x.to(self.device)\n",
        "import torch\nfrom config import cfg\ncfg.device = 'cuda'\nprint(torch.zeros(1).to(cfg.device))\n",
        # a device compared, itself or its type: a test, no placement
        "import torch\ndef seed(self, s):\n"
        "    return set_seed(s, using_cuda=self.device.type == torch.device('cuda').type)\n",
        "import torch\ndef f(device):\n    if device == torch.device('cuda'):\n        return 1\n",
        # a GPU count tested for none (a question of CUDA), unlike `> 1` (of several GPUs)
        "import torch\nn_gpu = torch.cuda.device_count()\ndevice = torch.device('cuda')\nif n_gpu > 0:\n"
        "    torch.cuda.manual_seed_all(0)\nprint(torch.zeros(1).to(device))\n",
        # a branch that binds the CPU: the code's own CPU path (`--cpu`)
        "import torch\ndevice = 'cuda'\nif args.cpu:\n    device = 'cpu'\nprint(torch.zeros(1).to(device))\n",
        # a test of the name with more to it than its own device: the code decides for itself
        "import torch\ndevice = 'cuda'\nnet = torch.nn.Linear(2, 2).to(device)\nif device == 'cuda' or fast:\n"
        "    net = torch.nn.DataParallel(net)\nprint(net)\n",
        # a module that stops without CUDA as it is imported: GPU-only by the author's word
        "import torch\nassert torch.cuda.is_available(), 'You need an Nvidia GPU'\nclass Trainer:\n"
        "    def init(self, rank):\n        self.rank = rank\n        self.net = torch.nn.Linear(2, 2).cuda(self.rank)\n"
        "        self.x = torch.zeros(1, device=f'cuda:{self.rank}')\n",
        # another class's `cuda` method: not torch's signature
        "import torch\ndef f(quantizer, q, meta, x):\n    quantizer.cuda(q, meta=meta, device=x.device)\n",
        "import torch\ndef f(x):\n    if x.is_cuda:\n        return torch.ones(1, device='cuda:0')\n",
        "import torch\ndef f(x):\n    return x.to('cuda') if torch.cuda.is_available() else x\n",
        # per-rank code before any binding: TDL003's
        "import torch\nimport torch.multiprocessing as mp\ndef worker(rank):\n    return torch.zeros(1).cuda(0)\n"
        "mp.spawn(worker, nprocs=2)\n",
        # a command line's "cuda" that is no device (stanza's profiler column to sort by)
        "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--profile_sort', default='cuda', choices=['cpu', 'cuda'])\nargs = parser.parse_args()\n"
        "sort_by = 'cuda_time_total' if args.profile_sort == 'cuda' else 'self_cpu_time_total'\n",
    )
    INVALID = (
        # the device a plain `fix` defined: its comment, which offers the fallback, goes with it
        Example('import torch\n# the device of `.cuda()`; for a CPU fallback: torch.device("cuda" if '
                'torch.cuda.is_available() else "cpu")\ndevice = torch.device("cuda")\n\n\ndef main():\n'
                '    print(torch.zeros(2).to(device))\n\n\nif __name__ == "__main__":\n    main()\n',
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n\n'
                'def main():\n    print(torch.zeros(2).to(device))\n\n\nif __name__ == "__main__":\n    main()\n'),
        Example('import torch\n\n\ndef main():\n    device = torch.device("cuda:0")\n    return device\n',
                'import torch\n\n\ndef main():\n    device = torch.device("cuda:0" if torch.cuda.is_available() '
                'else "cpu")\n    return device\n'),
        Example("import torch\nimport torch.nn as nn\nnet = nn.Linear(2, 2).to(torch.device('cuda', 1))\n"
                "for _ in range(3):\n    net(torch.zeros(1, 2, device=net.weight.device))\n",
                "import torch\nimport torch.nn as nn\nnet = nn.Linear(2, 2).to(torch.device('cuda:1' if "
                "torch.cuda.is_available() else 'cpu'))\nfor _ in range(3):\n"
                "    net(torch.zeros(1, 2, device=net.weight.device))\n"),
        Example('import torch\nDEVICE = torch.device("cuda")\n'),  # a library's module level: display
        # the default device of every factory call (gpt-fast's and many LLM scripts' setup)
        Example('import torch\nif __name__ == "__main__":\n    torch.set_default_device("cuda")\n'
                '    print(torch.zeros(2))\n',
                'import torch\nif __name__ == "__main__":\n    torch.set_default_device("cuda" if '
                'torch.cuda.is_available() else "cpu")\n    print(torch.zeros(2))\n'),
        # a GPU's ordinal as a device (a file with no "cuda" in it: Hugging Face's pipelines)
        Example('from transformers import pipeline\nif __name__ == "__main__":\n'
                '    clf = pipeline("text-classification", device=0)\n',
                'from transformers import pipeline\nimport torch\nif __name__ == "__main__":\n'
                '    clf = pipeline("text-classification", device=0 if torch.cuda.is_available() else "cpu")\n'),
        # ... or of a block's (a device as a context manager: DeepSeek's and gpt-fast's model setup)
        Example('import torch\ndef build(n):\n    with torch.device("cuda"):\n        return torch.zeros(n)\n',
                'import torch\ndef build(n):\n    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):\n'
                '        return torch.zeros(n)\n'),
        # a string a name holds, where it is bound; a test of that name alone follows the
        # choice (the CIFAR trainers' `if device == 'cuda':` around DataParallel)
        Example("import torch\ndevice = 'cuda'\nnet = torch.nn.Linear(2, 2).to(device)\nif device == 'cuda':\n"
                "    net = torch.nn.DataParallel(net)\nprint(net)\n",
                "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                "net = torch.nn.Linear(2, 2).to(device)\nif device == 'cuda':\n"
                "    net = torch.nn.DataParallel(net)\nprint(net)\n"),
        # ... rebound only under a branch to another GPU (a distributed run's rank: the
        # launcher's RANK, so that branch gets its fallback too), with a name derived from it
        # tested, a dtype chosen on the question, the work in a module-level block (a
        # script: its loop runs at import)
        Example("import os\nimport torch\ndevice = 'cuda'\n"
                "dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'\n"
                "if 'RANK' in os.environ:\n    device = f\"cuda:{os.environ['LOCAL_RANK']}\"\n"
                "device_type = 'cuda' if 'cuda' in device else 'cpu'\nnet = torch.nn.Linear(2, 2).to(device)\n"
                "with torch.no_grad():\n    for _ in range(2):\n        x = torch.zeros(1, 2)\n"
                "        if device_type == 'cuda':\n            x = x.pin_memory()\n        net(x.to(device))\n",
                "import os\nimport torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                "dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'\n"
                "if 'RANK' in os.environ:\n"
                "    device = f\"cuda:{os.environ['LOCAL_RANK']}\" if torch.cuda.is_available() else \"cpu\"\n"
                "device_type = 'cuda' if 'cuda' in device else 'cpu'\nnet = torch.nn.Linear(2, 2).to(device)\n"
                "with torch.no_grad():\n    for _ in range(2):\n        x = torch.zeros(1, 2)\n"
                "        if device_type == 'cuda':\n            x = x.pin_memory()\n        net(x.to(device))\n"),
        # ... beside a GPU count tested only for several GPUs (DataParallel)
        Example("import torch\nn_gpu = torch.cuda.device_count()\ndevice = torch.device('cuda')\n"
                "net = torch.nn.Linear(2, 2).to(device)\nif n_gpu > 1:\n    net = torch.nn.DataParallel(net)\n"
                "print(net)\n",
                "import torch\nn_gpu = torch.cuda.device_count()\n"
                "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "net = torch.nn.Linear(2, 2).to(device)\nif n_gpu > 1:\n    net = torch.nn.DataParallel(net)\n"
                "print(net)\n"),
        # ... beside an availability kept and never read (what an assertion's removal left)
        Example("import torch\nif __name__ == '__main__':\n    use_cuda = torch.cuda.is_available()\n"
                "    device = torch.device('cuda')\n    print(torch.zeros(1, device=device))\n",
                "import torch\nif __name__ == '__main__':\n    use_cuda = torch.cuda.is_available()\n"
                "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "    print(torch.zeros(1, device=device))\n"),
        # ... or an attribute: `self.device` set once in the class, `args.device` once in the file
        Example("import torch\nclass Agent:\n    def __init__(self):\n        self.device = 'cuda'\n"
                "        self.net = torch.nn.Linear(2, 2).to(self.device)\n",
                "import torch\nclass Agent:\n    def __init__(self):\n"
                "        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                "        self.net = torch.nn.Linear(2, 2).to(self.device)\n"),
        Example('import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\nargs.device = "cuda"\n'
                "x = torch.zeros(1).to(args.device)\n",
                'import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n'
                'args.device = "cuda" if torch.cuda.is_available() else "cpu"\nx = torch.zeros(1).to(args.device)\n'),
        # a parameter's default that a call here leaves to it: where the `def` runs (in a
        # script; display in a library module, whose `def`s run at import)
        Example("import torch\nclass Diffusion:\n    def sample(self, n, device=\"cuda\"):\n"
                "        return torch.randn(n, device=device)\nif __name__ == '__main__':\n"
                "    print(Diffusion().sample(2))\n",
                "import torch\nclass Diffusion:\n"
                "    def sample(self, n, device=\"cuda\" if torch.cuda.is_available() else \"cpu\"):\n"
                "        return torch.randn(n, device=device)\nif __name__ == '__main__':\n"
                "    print(Diffusion().sample(2))\n"),
        Example("import torch\ndef noise(n, device='cuda'):\n    return torch.randn(n, device=device)\n"
                "def batch():\n    return noise(4)\n", None),
        Example("import torch\nclass Runner:\n    def __init__(self, device=torch.device('cuda:0')):\n"
                "        self.net = torch.nn.Linear(2, 2).to(device)\nprint(Runner().net)\n",
                "import torch\nclass Runner:\n"
                "    def __init__(self, device=torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')):\n"
                "        self.net = torch.nn.Linear(2, 2).to(device)\nprint(Runner().net)\n"),
        # ... read where the options are handed on (the diffusion tutorials' `launch()`)
        Example("import torch\ndef train(args):\n    device = args.device\n    return torch.zeros(1).to(device)\n"
                "def launch():\n    import argparse\n    args = argparse.ArgumentParser().parse_args()\n"
                '    args.device = "cuda"\n    train(args)\nif __name__ == "__main__":\n    launch()\n',
                "import torch\ndef train(args):\n    device = args.device\n    return torch.zeros(1).to(device)\n"
                "def launch():\n    import argparse\n    args = argparse.ArgumentParser().parse_args()\n"
                '    args.device = "cuda" if torch.cuda.is_available() else "cpu"\n    train(args)\n'
                'if __name__ == "__main__":\n    launch()\n'),
        # a script (it prints): in place, after its own CUDA_VISIBLE_DEVICES; display before it
        Example("import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\ndevice = torch.device('cuda')\n"
                "print(torch.zeros(1, device=device))\n",
                "import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
                "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "print(torch.zeros(1, device=device))\n"),
        Example("import os\nimport torch\ndevice = torch.device('cuda')\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
                "print(torch.zeros(1, device=device))\n"),
        # an index or a string that is an expression: the whole choice gets the fallback
        Example('import torch\ndef f(gpu):\n    return torch.device("cuda", gpu)\n',
                'import torch\ndef f(gpu):\n    return torch.device("cuda", gpu) if torch.cuda.is_available() '
                'else torch.device("cpu")\n'),
        Example("import torch\ndef f(args, x):\n    d = torch.device('cuda', args.gpu).type\n"
                "    return x.to(f'cuda:{args.gpu}'), torch.zeros(1, device='cuda:%d' % args.gpu), d\n",
                "import torch\ndef f(args, x):\n    d = (torch.device('cuda', args.gpu) if torch.cuda.is_available() "
                "else torch.device('cpu')).type\n"
                "    return x.to(f'cuda:{args.gpu}' if torch.cuda.is_available() else 'cpu'), "
                "torch.zeros(1, device='cuda:%d' % args.gpu if torch.cuda.is_available() else 'cpu'), d\n"),
        # an index, a string argument: the same fallback where the GPU is named
        Example("import torch\n\n\ndef main(batch):\n    net = torch.nn.Linear(4, 2).cuda(0)\n"
                "    x = batch.to('cuda:0', non_blocking=True)\n    return net(x), torch.ones(2, device='cuda')\n",
                "import torch\n\n\ndef main(batch):\n"
                '    net = torch.nn.Linear(4, 2).to("cuda:0" if torch.cuda.is_available() else "cpu")\n'
                "    x = batch.to('cuda:0' if torch.cuda.is_available() else 'cpu', non_blocking=True)\n"
                "    return net(x), torch.ones(2, device='cuda' if torch.cuda.is_available() else 'cpu')\n"),
        # a GPU that is an expression (an index, a string or a device): the call when CUDA is
        # there, else the receiver as it is -- a statement of its own runs under a test
        Example("import torch\n\n\ndef main(args, batch):\n    net = torch.nn.Linear(4, 2)\n    net.cuda(args.gpu)\n"
                "    x = batch.cuda(args.gpu, non_blocking=True)\n    return net(x)\n",
                "import torch\n\n\ndef main(args, batch):\n    net = torch.nn.Linear(4, 2)\n"
                "    if torch.cuda.is_available():\n        net.cuda(args.gpu)\n"
                "    x = batch.cuda(args.gpu, non_blocking=True) if torch.cuda.is_available() else batch\n"
                "    return net(x)\n"),
        Example("import torch\ndef f(x, gpu):\n    return x.cuda(gpu).sum()\n",
                "import torch\ndef f(x, gpu):\n    return (x.cuda(gpu) if torch.cuda.is_available() else x).sum()\n"),
        # a bare `.cuda()` in a device block places on the GPU the block names
        Example("import torch\n\n\ndef main(x):\n    with torch.cuda.device(1):\n"
                "        return x.cuda(non_blocking=True) * 2\n",
                "import torch\n\n\ndef main(x):\n    with torch.cuda.device(1):\n"
                '        return x.to("cuda" if torch.cuda.is_available() else "cpu", non_blocking=True) * 2\n'),
        # per-rank code: the rank's GPU, what its binding named, DDP's device list
        Example("import torch\nimport torch.multiprocessing as mp\nfrom torch.nn.parallel import "
                "DistributedDataParallel as DDP\n\n\ndef worker(rank):\n    torch.cuda.set_device(rank)\n"
                "    net = DDP(torch.nn.Linear(2, 2).cuda(), device_ids=[rank], output_device=rank)\n"
                "    return net(torch.zeros(1, 2).cuda(rank, non_blocking=True))\n\n\n"
                "if __name__ == '__main__':\n    mp.spawn(worker, nprocs=2)\n",
                "import torch\nimport torch.multiprocessing as mp\nfrom torch.nn.parallel import "
                "DistributedDataParallel as DDP\n\n\ndef worker(rank):\n    torch.cuda.set_device(rank)\n"
                '    net = DDP(torch.nn.Linear(2, 2).to("cuda" if torch.cuda.is_available() else "cpu"), '
                "device_ids=[rank] if torch.cuda.is_available() else None, "
                "output_device=rank if torch.cuda.is_available() else None)\n"
                "    return net(torch.zeros(1, 2).cuda(rank, non_blocking=True) if torch.cuda.is_available() "
                "else torch.zeros(1, 2))\n\n\nif __name__ == '__main__':\n    mp.spawn(worker, nprocs=2)\n"),
        # a bare `.cuda()` after a script's CUDA_VISIBLE_DEVICES, under a switch on as written and
        # an `if` that picks how, not whether (pytorch-yolo2's `if ngpus > 1:`)
        Example("import os\nimport torch\n\nuse_cuda = True\ngpus = '0'\nif use_cuda:\n"
                "    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\nmodel = torch.nn.Linear(2, 2)\nif use_cuda:\n"
                "    if len(gpus.split(',')) > 1:\n        model = model.cuda().half()\n    else:\n"
                "        model = model.cuda()\nfor step in range(2):\n    print(model)\n",
                "import os\nimport torch\n\nuse_cuda = True\ngpus = '0'\nif use_cuda:\n"
                "    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\nmodel = torch.nn.Linear(2, 2)\nif use_cuda:\n"
                "    if len(gpus.split(',')) > 1:\n"
                "        model = model.to(\"cuda\" if torch.cuda.is_available() else \"cpu\").half()\n"
                "    else:\n        model = model.to(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
                "for step in range(2):\n    print(model)\n"),
        # under a test of the distributed mode (pytorch_toolbelt's broadcast of a pickled object)
        Example("import torch\nimport torch.distributed as dist\n\n\ndef broadcast_bytes(data, n, local_rank):\n"
                "    if local_rank == 0:\n        payload = torch.tensor(data, dtype=torch.uint8).to('cuda')\n"
                "    else:\n        payload = torch.empty(n, dtype=torch.uint8, device='cuda')\n"
                "    dist.broadcast(payload, 0)\n    return payload\n",
                "import torch\nimport torch.distributed as dist\n\n\ndef broadcast_bytes(data, n, local_rank):\n"
                "    if local_rank == 0:\n"
                "        payload = torch.tensor(data, dtype=torch.uint8).to('cuda' if torch.cuda.is_available() "
                "else 'cpu')\n"
                "    else:\n"
                "        payload = torch.empty(n, dtype=torch.uint8, device='cuda' if torch.cuda.is_available() "
                "else 'cpu')\n"
                "    dist.broadcast(payload, 0)\n    return payload\n"),
        # a GPU string a name holds, used as a device: where it is bound, once for every use
        Example("import torch\ndevice = 'cuda:0'\nnet = torch.nn.Linear(2, 2).to(device)\n"
                "print(net(torch.zeros(1, 2, device=device)))\n",
                "import torch\ndevice = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n"
                "net = torch.nn.Linear(2, 2).to(device)\nprint(net(torch.zeros(1, 2, device=device)))\n"),
        # a flag whose default picks the GPU: the flag's test gets the fallback
        Example("import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--cpu', action='store_true', help='use cpu only')\nargs = parser.parse_args()\n"
                "device = torch.device('cpu' if args.cpu else 'cuda')\nprint(torch.zeros(1, device=device))\n",
                "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--cpu', action='store_true', help='use cpu only')\nargs = parser.parse_args()\n"
                "device = torch.device('cpu' if args.cpu or not torch.cuda.is_available() else 'cuda')\n"
                "print(torch.zeros(1, device=device))\n"),
        Example("import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
                "    parser.add_argument('--no-cuda', action='store_true')\n    args = parser.parse_args()\n"
                "    return torch.zeros(1).to('cuda' if not args.no_cuda else 'cpu')\n",
                "import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
                "    parser.add_argument('--no-cuda', action='store_true')\n    args = parser.parse_args()\n"
                "    return torch.zeros(1).to('cuda' if not args.no_cuda and torch.cuda.is_available() else 'cpu')\n"),
        # ... derived from a flag (attention is all you need; pytorch/examples before `and
        # torch.cuda.is_available()` was added)
        Example("import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
                "    parser.add_argument('-no_cuda', action='store_true')\n    opt = parser.parse_args()\n"
                "    opt.cuda = not opt.no_cuda\n    device = torch.device('cuda' if opt.cuda else 'cpu')\n"
                "    return torch.zeros(1, device=device)\n",
                "import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
                "    parser.add_argument('-no_cuda', action='store_true')\n    opt = parser.parse_args()\n"
                "    opt.cuda = not opt.no_cuda\n"
                "    device = torch.device('cuda' if opt.cuda and torch.cuda.is_available() else 'cpu')\n"
                "    return torch.zeros(1, device=device)\n"),
        Example("import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
                "    parser.add_argument('--no-cuda', action='store_true', default=False)\n    args = parser.parse_args()\n"
                "    use_cuda = not args.no_cuda\n    return torch.zeros(1).to('cuda' if use_cuda else 'cpu')\n",
                "import argparse\nimport torch\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
                "    parser.add_argument('--no-cuda', action='store_true', default=False)\n    args = parser.parse_args()\n"
                "    use_cuda = not args.no_cuda\n"
                "    return torch.zeros(1).to('cuda' if use_cuda and torch.cuda.is_available() else 'cpu')\n"),
        # ... declared in another file (EDSR's option.py): a flag named for the CPU is off
        Example("import torch\n\n\nclass Trainer:\n    def __init__(self, args, model):\n        self.args = args\n"
                "        self.device = torch.device('cpu' if self.args.cpu else 'cuda')\n"
                "        self.model = model.to(self.device)\n",
                "import torch\n\n\nclass Trainer:\n    def __init__(self, args, model):\n        self.args = args\n"
                "        self.device = torch.device('cpu' if self.args.cpu or not torch.cuda.is_available() else 'cuda')\n"
                "        self.model = model.to(self.device)\n"),
        # nanoGPT: the rank's GPU under `if ddp:` (a launcher runs it on a CPU too), where it is bound
        Example("import os\n\nimport torch\n\ndevice = 'cuda'\nddp = int(os.environ.get('RANK', -1)) != -1\n"
                "if ddp:\n    device = f'cuda:{os.environ[\"LOCAL_RANK\"]}'\n    torch.cuda.set_device(device)\n"
                "device_type = 'cuda' if 'cuda' in device else 'cpu'\n\n\ndef get_batch(data):\n"
                "    if device_type == 'cuda':\n        return data.pin_memory().to(device, non_blocking=True)\n"
                "    return data.to(device)\n\n\nprint(get_batch(torch.zeros(2)))\n",
                "import os\n\nimport torch\n\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                "ddp = int(os.environ.get('RANK', -1)) != -1\nif ddp:\n"
                "    device = f'cuda:{os.environ[\"LOCAL_RANK\"]}' if torch.cuda.is_available() else 'cpu'\n"
                "    torch.cuda.set_device(device)\n"
                "device_type = 'cuda' if 'cuda' in device else 'cpu'\n\n\ndef get_batch(data):\n"
                "    if device_type == 'cuda':\n        return data.pin_memory().to(device, non_blocking=True)\n"
                "    return data.to(device)\n\n\nprint(get_batch(torch.zeros(2)))\n"),
        Example("import os\nimport torch\ndevice = 'cuda'\nif int(os.environ.get('LOCAL_RANK', 0)) == 1:\n"
                "    device = 'cuda:1'\nprint(torch.zeros(1).to(device))\n",
                "import os\nimport torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                "if int(os.environ.get('LOCAL_RANK', 0)) == 1:\n"
                "    device = 'cuda:1' if torch.cuda.is_available() else 'cpu'\nprint(torch.zeros(1).to(device))\n"),
        # ... and an option that lists the GPUs is given (BasicSR's JSON options, `"gpu_ids": [0]`)
        Example("import torch\n\n\nclass BaseModel:\n    def __init__(self, opt):\n"
                "        self.device = torch.device('cuda' if opt['gpu_ids'] is not None else 'cpu')\n",
                "import torch\n\n\nclass BaseModel:\n    def __init__(self, opt):\n"
                "        self.device = torch.device('cuda' if opt['gpu_ids'] is not None and torch.cuda.is_available() "
                "else 'cpu')\n"),
        # ... or the script's own switch, set in its text (PyTorch-GAN's scripts, edited)
        Example("import torch\ncuda = True\ndevice = torch.device('cuda' if cuda else 'cpu')\n"
                "print(torch.zeros(1, device=device))\n",
                "import torch\ncuda = True\n"
                "device = torch.device('cuda' if cuda and torch.cuda.is_available() else 'cpu')\n"
                "print(torch.zeros(1, device=device))\n"),
        # a rank's GPU index as a device, in a file that never spells "cuda"
        Example("import torch\nimport torch.distributed as dist\n\n\ndef worker(rank, world):\n"
                "    dist.init_process_group('gloo', rank=rank, world_size=world)\n"
                "    return torch.nn.Linear(2, 2).to(rank)\n",
                "import torch\nimport torch.distributed as dist\n\n\ndef worker(rank, world):\n"
                "    dist.init_process_group('gloo', rank=rank, world_size=world)\n"
                "    return torch.nn.Linear(2, 2).to(rank if torch.cuda.is_available() else \"cpu\")\n"),
        # a GPU index as an option's default, where the help gives the CPU's value (pix2pix's
        # `--gpu_ids`): the project's own CPU path becomes the default without CUDA
        Example("import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--gpu_ids', type=str, default='0',\n"
                "                    help='gpu ids: e.g. 0  0,1,2, 0,2. use -1 for CPU')\n"
                "opt = parser.parse_args()\nprint(opt.gpu_ids)\n",
                "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--gpu_ids', type=str, default='0' if torch.cuda.is_available() else '-1',\n"
                "                    help='gpu ids: e.g. 0  0,1,2, 0,2. use -1 for CPU')\n"
                "opt = parser.parse_args()\nprint(opt.gpu_ids)\n"),
        # ... as the A3C family writes it: a list of GPU indices, "[-1 CPU only]"
        Example("import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--gpu-ids', type=int, default=[0], nargs='+',\n"
                "                    help='GPUs to use [-1 CPU only] (default: -1)')\n"
                "args = parser.parse_args()\nprint(args.gpu_ids)\n",
                "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--gpu-ids', type=int, default=[0] if torch.cuda.is_available() else [-1], "
                "nargs='+',\n"
                "                    help='GPUs to use [-1 CPU only] (default: -1)')\n"
                "args = parser.parse_args()\nprint(args.gpu_ids)\n"),
        # DETR's pickled `all_gather`: the padding under an `if` on the data is no choice
        # of the author's where the rest of the function is on the GPU (not half converted)
        Example("import torch\n\n\ndef gather_sizes(tensor, max_size):\n"
                "    local_size = torch.tensor([tensor.numel()], device='cuda')\n"
                "    if local_size != max_size:\n"
                "        padding = torch.empty(size=(max_size - local_size,), dtype=torch.uint8, device='cuda')\n"
                "        tensor = torch.cat((tensor, padding), dim=0)\n    return tensor\n",
                "import torch\n\n\ndef gather_sizes(tensor, max_size):\n"
                "    local_size = torch.tensor([tensor.numel()], device='cuda' if torch.cuda.is_available() "
                "else 'cpu')\n"
                "    if local_size != max_size:\n"
                "        padding = torch.empty(size=(max_size - local_size,), dtype=torch.uint8, "
                "device='cuda' if torch.cuda.is_available() else 'cpu')\n"
                "        tensor = torch.cat((tensor, padding), dim=0)\n    return tensor\n"),
        # ... but an `if` on a device flag stays the author's choice there
        Example("import torch\n\n\ndef f(x, flag):\n    y = torch.zeros(1, device='cuda')\n    if flag.use_gpu:\n"
                "        x = x.to('cuda')\n    return x, y\n",
                "import torch\n\n\ndef f(x, flag):\n"
                "    y = torch.zeros(1, device='cuda' if torch.cuda.is_available() else 'cpu')\n    if flag.use_gpu:\n"
                "        x = x.to('cuda')\n    return x, y\n"),
        # ... or the trainer's own attribute, set in one method
        Example("import os\n\nimport torch\n\n\nclass Trainer:\n    def __init__(self, distributed):\n"
                "        self.device = 'cuda'\n        if distributed:\n"
                "            self.device = f'cuda:{int(os.environ[\"LOCAL_RANK\"])}'\n\n"
                "    def step(self, x):\n        return x.to(self.device)\n",
                "import os\n\nimport torch\n\n\nclass Trainer:\n    def __init__(self, distributed):\n"
                "        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n        if distributed:\n"
                "            self.device = f'cuda:{int(os.environ[\"LOCAL_RANK\"])}' if torch.cuda.is_available() "
                "else 'cpu'\n\n"
                "    def step(self, x):\n        return x.to(self.device)\n"),
        # a location built at run time, held by a name (the ImageNet trainer's resume)
        Example("import torch\n\n\ndef resume(model, path, args):\n    loc = 'cuda:{}'.format(args.gpu)\n"
                "    model.load_state_dict(torch.load(path, map_location=loc))\n",
                "import torch\n\n\ndef resume(model, path, args):\n"
                "    loc = 'cuda:{}'.format(args.gpu) if torch.cuda.is_available() else \"cpu\"\n"
                "    model.load_state_dict(torch.load(path, map_location=loc))\n"),
        # another object's attribute, rebound per rank under a test of the distributed mode
        # (timm's train.py: `args.device`), where each is set
        Example("import os\n\nimport torch\n\n\ndef main(args):\n    args.device = 'cuda:0'\n"
                "    if args.distributed:\n        args.local_rank = int(os.environ['LOCAL_RANK'])\n"
                "        args.device = 'cuda:%d' % args.local_rank\n    return torch.zeros(1).to(args.device)\n",
                "import os\n\nimport torch\n\n\ndef main(args):\n"
                "    args.device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n"
                "    if args.distributed:\n        args.local_rank = int(os.environ['LOCAL_RANK'])\n"
                "        args.device = 'cuda:%d' % args.local_rank if torch.cuda.is_available() else 'cpu'\n"
                "    return torch.zeros(1).to(args.device)\n"),
        # a checkpoint restored onto a GPU
        Example("import torch\n\n\ndef resume(model, path):\n"
                "    model.load_state_dict(torch.load(path, map_location='cuda:0'))\n",
                "import torch\n\n\ndef resume(model, path):\n"
                "    model.load_state_dict(torch.load(path, map_location='cuda:0' if torch.cuda.is_available() else 'cpu'))\n"),
        # ... or onto the rank's GPU (the DDP tutorial's location map: its values)
        Example("import torch\n\n\ndef resume(model, path, rank):\n"
                "    model.load_state_dict(torch.load(path, map_location={'cuda:%d' % 0: 'cuda:%d' % rank}))\n",
                "import torch\n\n\ndef resume(model, path, rank):\n"
                "    model.load_state_dict(torch.load(path, map_location={'cuda:%d' % 0: 'cuda:%d' % rank "
                "if torch.cuda.is_available() else 'cpu'}))\n"),
        Example("import torch\n\n\ndef demo(model, rank):\n    map_location = {'cuda:%d' % 0: 'cuda:%d' % rank}\n"
                "    model.load_state_dict(torch.load('ckpt', map_location=map_location))\n",
                "import torch\n\n\ndef demo(model, rank):\n"
                "    map_location = {'cuda:%d' % 0: 'cuda:%d' % rank if torch.cuda.is_available() else 'cpu'}\n"
                "    model.load_state_dict(torch.load('ckpt', map_location=map_location))\n"),
        # a configuration's device, read by other files: where it is set (a function that
        # builds the configuration: the question is asked when it runs; unsafe)
        Example("import ml_collections\n\n\ndef get_config():\n    config = ml_collections.ConfigDict()\n"
                "    config.device = 'cuda:0'\n    return config\n",
                "import ml_collections\nimport torch\n\n\ndef get_config():\n"
                "    config = ml_collections.ConfigDict()\n"
                "    config.device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n    return config\n"),
        # ... display at a library's module level (yacs' defaults: the question would be
        # asked at every import)
        Example("from yacs.config import CfgNode as CN\n_C = CN()\n_C.MODEL = CN()\n"
                "# Using cuda or cpu for training\n_C.MODEL.DEVICE = \"cuda\"\n_C.MODEL.DEVICE_ID = '0'\n"),
        # a command line's default: what the script does when run as written
        Example("import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--device', default='cuda')\nargs = parser.parse_args()\n"
                "x = torch.zeros(1).to(args.device)\n",
                "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\n"
                "args = parser.parse_args()\nx = torch.zeros(1).to(args.device)\n"),
        # ... an option not named for a device, that this file uses as one
        Example("import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--run-on', default='cuda')\nargs = parser.parse_args()\n"
                "x = torch.zeros(1).to(args.run_on)\n",
                "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--run-on', default='cuda' if torch.cuda.is_available() else 'cpu')\n"
                "args = parser.parse_args()\nx = torch.zeros(1).to(args.run_on)\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        devices = a.devices
        rank_independent = {node for _, node, _ in devices.fixed_placements}  # TDL003's (its fix comes first)
        choices = [(site, node, rewrite) for site, node, rewrite in _gpu_choices(a) if node not in rank_independent]
        needed = [self._needs_cuda(ctx, site, node, rewrite) for site, node, rewrite in choices]
        beside = beside_unconditional(a, [(site, needs) for (site, _, _), needs in zip(choices, needed)])
        for (site, node, rewrite), needs in zip(choices, needed):
            fn = a.enclosing_function(site.scope)
            if not needs and not ((id(fn.node) if fn is not None else 0) in beside
                                  and self._needs_cuda(ctx, site, node, rewrite, data_too=True)):
                continue
            a_fix = self._fix(ctx, site, node, rewrite)
            method = isinstance(node, cst.Call) and not isinstance(site, Held) and site.method == "cuda"  # `.cuda(0)`
            shown = "." + a.code(node.with_changes(func=node.func.attr)) if method else a.code(node)
            if rewrite.kind == "ids":  # device_ids=[rank]
                shown = f"{rewrite.device}={shown}"
            elif isinstance(node, cst.Integer) and getattr(site.keyword("device"), "value", None) is node:
                shown = f"device={shown}"  # device=0: GPU 0
            if rewrite.kind == "flag":
                what = "picks a GPU unless its options say otherwise: run as written,"
            elif rewrite.kind == "option":  # a GPU index as an option's default
                shown = f"{_option_name(site)}={shown}"
                what = (f"picks a GPU by default (its help gives `{rewrite.device}` for the CPU): run as written,")
            elif rewrite.kind == "setting":  # _C.MODEL.DEVICE = "cuda"
                shown = f"{site.name} = {shown}"
                what = "sets a configuration's device to a GPU with no CPU fallback:"
            elif rewrite.kind == "default":  # def sample(self, n, device="cuda"), called as sample(8)
                shown = f"{site.name}={shown}"
                what = "is a default that a call here relies on, and names a GPU with no CPU fallback:"
            elif rewrite.kind == "bound":  # a bare `.cuda()` a binding made right
                why = devices.verdicts[node].why  # type: ignore[index]
                line = re.fullmatch(r"a binding on line (\d+) runs first", why)
                what = (f"places on the GPU bound on line {line.group(1)}, with no CPU fallback:" if line
                        else f"places on the current GPU ({why}), with no CPU fallback:")
            else:
                what = "names a GPU with no CPU fallback:"
            yield ctx.violation(
                node, f"`{shown}` {what} this code cannot run where CUDA is not available",
                ctx.guarded(a_fix))

    @staticmethod
    def _needs_cuda(ctx: Context, site: CallSite, node: cst.CSTNode, rewrite: "_Rewrite",
                    data_too: bool = False) -> bool:
        """Whether the GPU named at ``site`` is needed on no condition (``unconditional``;
        ``data_too``: an ``if`` on the data is none either), or is a binding's bare
        ``.cuda()`` in code that runs as written."""
        a = ctx.analysis
        header = rewrite.kind == "default" or site.node in a.with_items  # `with torch.device("cuda"):`
        return unconditional(ctx, site, node, header=header, data_too=data_too) or (
            rewrite.kind == "bound" and site.line is not None and evaluated(site.line, node) is not False
            and _runs_as_written(a, site) and not asks_for_cuda(ctx, site, stops_only=False))

    def _fix(self, ctx: Context, site: CallSite, node: cst.CSTNode, rewrite: "_Rewrite") -> Fix:
        a = ctx.analysis
        try:
            torch, imports = torch_for_test(ctx, site, new_query=True, whole_run=True)
        except Uninsertable as exc:  # a library's module level: a CLI run's index may allow it
            return Fix(Applicability.DISPLAY, f"{_MESSAGE} (display only: {exc})",
                       blocked_by=frozenset({"importers"}) if isinstance(exc, LibraryLevel) else frozenset())
        test, q = f"{torch}.cuda.is_available()", rewrite.quote
        if rewrite.kind in ("literal", "default", "setting"):  # torch.device("cuda:1"), .to("cuda"), device="cuda:0"
            text = f"{q}{rewrite.device}{q} if {test} else {q}cpu{q}"
            edit = ctx.replace(node, f"{a.code(node.func)}({text})" if isinstance(node, cst.Call) else text)
            imports = [*imports, *_stale_comment(ctx, site, edit)]
        elif rewrite.kind in ("index", "bound"):  # .cuda(1) -> .to("cuda:1" if ... else "cpu"), keeping non_blocking
            edit = ctx.cuda_to_device(node, f"{q}{rewrite.device}{q} if {test} else {q}cpu{q}")  # type: ignore[arg-type]
        elif rewrite.kind == "expression":  # f"cuda:{gpu}" -> f"cuda:{gpu}" if ... else "cpu"
            edit = ctx.replace(node, f"{a.code(node)} if {test} else {q}cpu{q}")
        elif rewrite.kind == "receiver":  # .cuda(gpu): the call when CUDA is there, else the receiver as it is
            if site.expr_stmt is not None and site.line is not None and len(site.line.body) == 1:
                edit = guard_statement(ctx, site.line, torch)  # model.cuda(args.gpu) on a line of its own
            else:
                receiver = a.code(node.func.value)  # type: ignore[attr-defined]
                if "\n" in receiver:
                    return Fix(Applicability.DISPLAY, f"{_MESSAGE} (display only: the receiver spans lines, and "
                                                      "the fallback would repeat it)")
                text = f"{a.code(node)} if {test} else {receiver}"
                edit = ctx.replace(node, text if stands_alone(site) else f"({text})")
        elif rewrite.kind == "flag":  # "cpu" if args.cpu else "cuda": the flag's test gets the fallback
            flag = node.test  # type: ignore[attr-defined]
            joined = "and" if rewrite.device == "and" else "or not"
            edit = ctx.replace(flag, f"{a.code(flag)} {joined} {test}")
        elif rewrite.kind == "option":  # default=0 -> 0 if ... else "c": the project's own CPU value
            edit = ctx.replace(node, f"{a.code(node)} if {test} else {rewrite.device}")
        elif rewrite.kind == "ids":  # DistributedDataParallel(device_ids=[rank]): none on the CPU
            edit = ctx.replace(node, f"{a.code(node)} if {test} else None")
        else:  # torch.device("cuda", gpu): the whole call, or the CPU
            text = f"{a.code(node)} if {test} else {a.code(node.func)}({q}cpu{q})"  # type: ignore[attr-defined]
            edit = ctx.replace(node, text if stands_alone(site) else f"({text})")
        message = _MESSAGE
        if a.enclosing_function(site.scope) is None and not a.devices.is_script:  # (the run's index allowed it)
            message += " (only the run's scripts import this module: the question runs where they start)"
        return Fix(Applicability.UNSAFE, message, tuple(imports) + (edit,))


_MESSAGE = "Fall back to the CPU when CUDA is not available"


def _stale_comment(ctx: Context, site: CallSite, edit: Edit) -> List[Edit]:
    """The line of ``fix``'s comment above the device it defined (``# the device of
    `.cuda()`; for a CPU fallback: X``), removed where ``edit`` makes that very line X: a
    plain ``fix`` then ``fix --unsafe-fixes`` would leave a comment that offers what the
    line now does."""
    a = ctx.analysis
    row = edit.start[0]
    if site.line is None or row < 2 or row != edit.end[0]:
        return []
    above, line = a.lines[row - 2], a.lines[row - 1]
    new = line[:edit.start[1]] + edit.content + line[edit.end[1]:]
    stripped = above.strip()
    if not stripped.startswith(FALLBACK_COMMENT) or stripped[len(FALLBACK_COMMENT):] not in new:
        return []
    return [Edit((row - 1, 0), (row, 0), "", above)]


class _Rewrite:
    """How a GPU choice gets its fallback: ``literal`` (the string names the GPU:
    ``device``), ``index`` (``.cuda(1)``: ``device`` is ``cuda:1``), ``expression`` (a
    string built at run time: the expression itself), ``call`` (``torch.device("cuda",
    gpu)``: the whole call), ``receiver`` (``.cuda(gpu)``: the call, or the receiver as it
    is), ``bound`` (a bare ``.cuda()`` whose GPU a binding chose: as ``index``, with
    ``cuda``), ``ids`` (``DistributedDataParallel``'s ``device_ids``/``output_device``, the keyword
    in ``device``: the value, or None), ``flag`` (``"cpu" if args.cpu else "cuda"``: the
    flag's test, ``and`` or ``or not`` CUDA's availability, in ``device``); ``quote`` is
    the code's own."""

    def __init__(self, kind: str, device: str = "", quote: str = '"'):
        self.kind, self.device, self.quote = kind, device, quote


def _gpu_choices(a) -> List[Tuple[CallSite, cst.CSTNode, _Rewrite]]:
    """Every place a call names a GPU: the placements with literals the analysis knows
    (``devices.gpu_placements``, which TDL003 reads too), then what only this rule
    rewrites -- ``torch.device("cuda", gpu)`` and its keyword forms, ``.cuda(gpu)``, a bare
    ``.cuda()`` where a binding named the GPU, DDP's device list and a process group's
    ``device_id``, a rank's GPU index as a device, a choice on a flag, a command line's
    ``default="cuda"``, strings built at run time, and a ``"cuda"`` string a name used as a
    device holds (once per binding) -- with the node to rewrite and how."""
    found: List[Tuple[CallSite, cst.CSTNode, _Rewrite]] = []
    placed = set()
    group_devices = _process_group_devices(a)
    for site, node, _ in a.devices.gpu_placements:
        placed.add(node)
        if node in group_devices:  # init_process_group(device_id=torch.device("cuda", 0))
            found.append((site, node, _Rewrite("ids", "device_id")))
        elif isinstance(node, cst.SimpleString):  # .to("cuda"), device="cuda:0"
            found.append((site, node, _Rewrite("literal", node.evaluated_value, node.quote[-1])))  # type: ignore[arg-type]
        elif site.qualname == "torch.device":
            found.append((site, node, _gpu_literal(site)))  # type: ignore[arg-type]
        elif isinstance(node, cst.Integer):  # device=0, .to(1): the ordinal itself when CUDA is there
            found.append((site, node, _Rewrite("expression", quote='"')))
        else:  # .cuda(1), .cuda(device=1)
            arg = site.positional(0) or site.keyword("device")
            found.append((site, node, _Rewrite("index", f"cuda:{int(arg.value.value, 0)}")))  # type: ignore[union-attr]
    held: set = set()
    for site in a.calls:
        if site.qualname == "torch.device":
            if site.node in placed or compared(site):  # `device.type == torch.device("cuda").type`: a test
                continue
            if site.node in group_devices:  # device_id=torch.device("cuda", local_rank): None on the CPU
                found.append((site, site.node, _Rewrite("ids", "device_id")))
                continue
            literal = _gpu_literal(site)
            first = site.positional(0)
            if literal is not None:  # an index that is an expression, keywords
                found.append((site, site.node, literal))
            elif len(site.node.args) == 1 and first is not None and _gpu_string(first.value):
                found.append((site, first.value, _Rewrite("expression", quote=string_quote(site))))
        elif site.method == "cuda" and site.qualname is None and site.node not in placed and _gpu_argument(site):
            found.append((site, site.node, _Rewrite("receiver")))  # .cuda(args.gpu): index, string or device
        elif site.method == "cuda" and site.qualname is None and _bound_bare(a, site):
            # `with torch.cuda.device(1): x.cuda()`, a rank's `set_device(rank)` then `x.cuda()`:
            # the binding named the GPU (TDL001 is quiet there)
            found.append((site, site.node, _Rewrite("bound", "cuda")))
        elif site.qualname == _DDP:  # DistributedDataParallel(model, device_ids=[rank])
            for index, keyword in enumerate(("device_ids", "output_device"), 1):
                arg = site.positional(index) or site.keyword(keyword)
                if arg is not None and not isinstance(arg.value, cst.IfExp) and not (
                        isinstance(arg.value, cst.Name) and arg.value.value == "None") \
                        and not _tested_for_none(a, site, arg.value) and not _may_return_none(a, site, arg.value):
                    found.append((site, arg.value, _Rewrite("ids", keyword)))
        elif site.method == "add_argument":  # parser.add_argument("--device", default="cuda")
            default = site.keyword("default")
            text = _cuda_text(default.value) if default is not None else None
            if text is not None and _device_option(a, site):
                found.append((site, default.value, _Rewrite("literal", text, default.value.quote[-1])))  # type: ignore[union-attr]
            elif default is not None:  # parser.add_argument("-gpu", default=0, help="... for CPU mode set -gpu = c")
                cpu = _cpu_value(site, default.value)
                if cpu is not None:
                    found.append((site, default.value, _Rewrite("option", cpu)))
        for value in site.device_values():
            flag = _flag_choice(a, value) if isinstance(value, cst.IfExp) else None
            if flag is not None:  # torch.device("cpu" if args.cpu else "cuda")
                found.append((site, value, flag))
            elif (_gpu_string(value) and site.qualname != "torch.device") or _rank_index(a, site, value):
                # f"cuda:{k}", .to(rank)
                found.append((site, value, _Rewrite("expression", quote=string_quote(site, value))))
            elif isinstance(value, (cst.Name, cst.Attribute)):  # device = "cuda" ... .to(device); self.device
                bound = held_device(a, site, value, _names_gpu)
                devices = (_held_devices(a, bound, location=site.keyword("map_location") is not None)
                           if bound is not None and bound.node not in held else [])
                if devices:
                    held.add(bound.node)  # type: ignore[union-attr]
                    found += devices
                    found += _branch_devices(a, site, value, held)
    found += _used_defaults(a)
    return found + _settings(a, {node for _, node, _ in found})


def _settings(a, seen: set) -> List[Tuple[Held, cst.CSTNode, "_Rewrite"]]:
    """A configuration's device, set once to a GPU (yacs' ``_C.MODEL.DEVICE = "cuda"``,
    ``cfg.device = "cuda:0"`` in a ``get_config()``): the programs that read it are other
    files, which cannot see the GPU named here. Held where it is set; an attribute of a
    name this file binds (not another module's object), not one found through a use."""
    found: List[Tuple[Held, cst.CSTNode, _Rewrite]] = []
    for key, sets in a.attr_sets.items():
        if key.rsplit(".", 1)[-1].lower() != "device" or len(sets) != 1:
            continue
        binding, scope = sets[0]
        text = _cuda_text(binding.value) if binding.value is not None else None
        root = key.split(".", 1)[0]
        line = a.statement_line(binding.value) if text is not None else None
        if line is None or binding.value in seen or a.lookup(root, scope)[1] is not None:
            continue
        held = Held(binding.value, scope, binding.order, line, binding.cond, key)
        found.append((held, binding.value, _Rewrite("setting", text, binding.value.quote[-1])))
    return found


def _used_defaults(a) -> List[Tuple[Held, cst.CSTNode, "_Rewrite"]]:
    """A parameter's GPU default (``def sample(self, n, device="cuda")``) that a call in
    this file leaves to it (``diffusion.sample(8)``): what the code does when run as
    written. Held where the ``def`` runs (its default is evaluated there, once). Not in a
    function named or decorated for GPUs, nor one no call here leaves it to (a library's
    API: its callers choose)."""
    found: List[Tuple[Held, cst.CSTNode, _Rewrite]] = []
    candidates = []
    for info in a.functions.values():
        if isinstance(info.node, cst.FunctionDef):
            params = info.node.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                literal = _default_string(a, info, param.default) if param.default is not None else None
                text = _cuda_text(literal) if literal is not None else None
                if text is not None:
                    candidates.append((info, param, text, literal.quote[-1]))  # type: ignore[union-attr]
    omitted = _omitted_parameters(a) if candidates else set()
    for info, param, text, quote in candidates:
        outer = info.scope.parent
        if (info.node, param.name.value) not in omitted or outer is None or meant_for_gpus(a, info.scope):
            continue
        binding = next((b for b in outer.bindings.get(info.name, ()) if b.value is info.node), None)
        if binding is not None:
            held = Held(param.default, outer, binding.order, None, binding.cond, param.name.value)  # type: ignore[arg-type]
            found.append((held, param.default, _Rewrite("default", text, quote)))
    return found


def _default_string(a, info, default: cst.BaseExpression) -> Optional[cst.SimpleString]:
    """The string a parameter's default names a device with: the default itself, or the
    one argument of ``torch.device("cuda:0")`` (resolved where the ``def`` runs)."""
    if (isinstance(default, cst.Call) and len(default.args) == 1 and default.args[0].keyword is None
            and info.scope.parent is not None and a.qualname(default.func, info.scope.parent) == "torch.device"):
        default = default.args[0].value
    return default if isinstance(default, cst.SimpleString) else None


def _omitted_parameters(a) -> set:
    """(function node, parameter name) for every parameter with a default that some call
    of the function in this file leaves out: no keyword of that name, too few positional
    arguments, no ``*args``/``**kwargs``. A call's function is resolved as the analysis
    does (``f()``, ``self.f()``, ``Cls()``), or, for a method called on another object
    (``diffusion.sample(8)``), by its name among this file's classes' methods (not a
    special method, ``super().__init__()``: a parent's, called as the parent wants)."""
    out = set()
    for site in a.calls:
        if site.has_star_args:
            continue
        callee = a.process.callee(site)
        func = site.node.func
        if callee is not None:
            callees = [callee]
        elif (isinstance(func, cst.Attribute) and site.qualname is None and not func.attr.value.startswith("__")
              and not (isinstance(func.value, cst.Call) and a.code(func.value.func) == "super")):
            callees = [m for k in a.classes for name, m in k.methods.items() if name == func.attr.value]
        else:
            continue
        given = sum(1 for arg in site.node.args if arg.keyword is None)
        keywords = {arg.keyword.value for arg in site.node.args if arg.keyword is not None}
        for fn in callees:
            node = fn.node
            if not isinstance(node, cst.FunctionDef):
                continue
            positional = [*node.params.posonly_params, *node.params.params]
            static = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
                         for d in node.decorators)
            if fn.klass is not None and positional and not static:
                positional = positional[1:]  # `self`, bound by the call (`obj.f()`, `Cls()`)
            for index, param in enumerate(positional):
                if param.default is not None and index >= given and param.name.value not in keywords:
                    out.add((node, param.name.value))
            for param in node.params.kwonly_params:
                if param.default is not None and param.name.value not in keywords:
                    out.add((node, param.name.value))
    return out


_DDP = "torch.nn.parallel.DistributedDataParallel"
# what a process's GPU index is called, as a device (`.to(rank)`, the DDP tutorial's)


def _rank_index(a, site: CallSite, value: cst.BaseExpression) -> bool:
    """A process's GPU index used as a device: ``.to(rank)``, ``device=local_rank``,
    ``.to(args.local_rank)``, ``.to(self.rank)`` -- an integer names a GPU. Not a name
    that holds a string or a ``torch.device`` (where that is bound decides: OpenNMT's
    ``self.device_id = device_id`` of a parameter ``device_id="cpu"``), nor another
    package's ``device=``, nor one of a file that never imports torch (ESPnet's Chainer
    trainers: their evaluators' ``device=gpu_id``, where -1 is the CPU)."""
    leaf = value.attr.value if isinstance(value, cst.Attribute) else value.value if isinstance(value, cst.Name) else None
    if leaf is None or leaf.lower() not in N.RANK_INDEX_NAMES:
        return False
    device = site.keyword("device")
    if device is not None and value is device.value and not (
            takes_gpu_ordinal(site.qualname) and (site.qualname is not None or a.torch_imports)):
        return False
    values = a.held_values(value, site.scope)
    return not any(isinstance(v, (cst.SimpleString, cst.FormattedString, cst.IfExp))
                   or (isinstance(v, cst.Call) and a.qualname(v.func, s) == "torch.device") for v, s in values or ())


def _process_group_devices(a) -> set:
    """The devices given as ``init_process_group(..., device_id=torch.device("cuda", k))``
    (as TDL106's fix writes them): the CPU is no ``device_id`` ("must be an accelerator
    with an index"), so without CUDA there is none."""
    out = set()
    for site in a.calls:
        if site.qualname in N.INIT_PROCESS_GROUP_TORCH:
            arg = site.keyword("device_id")
            if arg is not None and isinstance(arg.value, cst.Call):
                out.add(arg.value)
    return out


def _bound_bare(a, site: CallSite) -> bool:
    """A bare ``.cuda()`` whose current device a binding made the intended one (a ``with
    torch.cuda.device(k):`` block, a rank's ``set_device``, a launcher that binds each
    process's GPU): TDL001 is quiet there, and the GPU is still a GPU. Not in a class's
    own ``cuda()`` override (its caller chose)."""
    verdict = a.devices.verdicts.get(site.node)
    return verdict is not None and verdict.code is None and not a.devices.in_cuda_override(site)


def _runs_as_written(a, site: CallSite) -> bool:
    """Whether the ``if``s around ``site`` let it run as the script is written: each a
    switch that is on for its branch as written (``if use_cuda:`` after ``use_cuda =
    True``, ``_as_written``), or a test whose other branch places on a GPU too (``if
    ngpus > 1: model = DataParallel(model).cuda()`` ``else: model = model.cuda()``: it
    picks how, not whether), or the main guard. pytorch-yolo2's script, whose binding
    is its ``CUDA_VISIBLE_DEVICES``, has both around its ``.cuda()``."""
    guard = id(a.devices.main_guard)
    for key, part in site.cond:
        if part not in ("body", "orelse") or (key, part) == (guard, "body"):
            continue  # (loops and `try`s are not choices, as for `unconditional`)
        test = a.ifs.get(key)
        if test is None:
            return False  # a `match` case
        truth = _as_written(a, test.test)
        if truth is not None:
            if truth != (part == "body"):
                return False
            continue
        other = test.orelse if part == "body" else test.body
        if other is None or ".cuda(" not in a.code(other):
            return False
    return True


def _flag_choice(a, expr: cst.IfExp) -> Optional[_Rewrite]:
    """A choice between a GPU and the CPU on a command-line flag whose default picks the
    GPU: ``"cpu" if args.cpu else "cuda"`` (``--cpu`` is ``store_true``), ``"cuda" if
    args.cuda else "cpu"`` (``default=True``), ``"cuda" if not args.no_cuda else "cpu"``.
    The flag is ``args.<name>`` (``self.args.<name>``, ``opt``, ``cfg``...), or a name
    assigned one once (``use_cuda = not args.no_cuda``), and its default
    what this file's parser says; without a parser here, a flag that asks for the CPU by
    its name (``--cpu``, ``--no-cuda``, as EDSR's ``option.py`` declares them) is off.
    The script, run as written, needs CUDA. How the test gets the fallback: ``and`` CUDA is
    available (the GPU is the first branch), ``or not`` (the second); None otherwise (an
    unknown default, a default that picks the CPU)."""
    gpu_first = _cuda_text(expr.body) is not None and _cpu_text(expr.orelse)
    if not gpu_first and not (_cuda_text(expr.orelse) is not None and _cpu_text(expr.body)):
        return None
    truth = _as_written(a, expr.test)
    if truth is None or truth != gpu_first:
        return None  # unknown, or the CPU unless asked
    return _Rewrite("flag", "and" if gpu_first else "or")


def _as_written(a, test: cst.BaseExpression) -> Optional[bool]:
    """The value of a switch, ``flag`` or ``not flag``, when the command line sets
    nothing: a name assigned a literal once (``cuda = True``: the script's own switch),
    or ``args.<name>`` (``self.args``, ``opt``, ``cfg``...) by its option's default, or a
    name assigned one once (``use_cuda = not args.no_cuda``); None when it is not such a
    switch or its value is unknown."""
    negated = False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negated = test.expression, True
    test, given = _given(test)  # opt['gpu_ids'] is not None, len(opt.gpu_ids) > 0: the option's value
    negated = negated != (given is False)
    if isinstance(test, cst.Subscript):  # opt['gpu_ids'] (a configuration read from JSON or YAML)
        key = test.slice[0].slice if len(test.slice) == 1 else None
        name = key.value.evaluated_value if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString) \
            else None
        config = test.value.attr if isinstance(test.value, cst.Attribute) and a.code(test.value.value) == "self" \
            else test.value  # self.opt['gpu_ids']
        if not (isinstance(name, str) and isinstance(config, cst.Name) and config.value in N.CONFIG_NAMES):
            return None
        default = _flag_default(a, config.value, name)
        return None if default is None else default != negated
    if isinstance(test, cst.Name):  # use_cuda = not args.no_cuda (its one assignment in the file)
        derived = _derived_flag(a, test.value)
        constant = _constant_flag(a, test.value)
        if constant is not None:  # cuda = True: the script's own switch, as written
            default: Optional[bool] = constant
        elif derived is None or derived[0] not in N.CONFIG_NAMES:
            return None
        else:
            config, name, negated_there = derived
            default = _flag_default(a, config, name)
            default = None if default is None else default != negated_there
    else:
        config = test.value if isinstance(test, cst.Attribute) else None
        if isinstance(config, cst.Attribute) and isinstance(config.value, cst.Name) and config.value.value == "self":
            config = config.attr  # self.args.cpu
        if not (isinstance(config, cst.Name) and config.value in N.CONFIG_NAMES):
            return None
        default = _flag_default(a, a.code(config), test.attr.value)  # type: ignore[union-attr]
    return None if default is None else default != negated


def _flag_default(a, config: str, name: str, depth: int = 0) -> Optional[bool]:
    """The value of the flag ``<config>.<name>`` when the command line does not set it:
    its option's default, a flag named for the CPU when no parser here says otherwise,
    or a flag the code derives from one (``opt.cuda = not opt.no_cuda``: attention is
    all you need's trainer)."""
    default = _option_default(a, name)
    if default is None and name.lower() in (_CPU_FLAGS | _GPU_LISTS) and not _declares_options(a):
        default = name.lower() in _GPU_LISTS
    derived = _derived_flag(a, f"{config}.{name}") if default is None and depth < 2 else None
    if derived is not None and derived[0] == config:
        value = _flag_default(a, config, derived[1], depth + 1)
        if value is not None:
            default = value != derived[2]
    return default


def _constant_flag(a, flag: str) -> Optional[bool]:
    """``True``/``False`` when the one assignment of the name ``flag`` in the file is that
    literal (``cuda = True`` at a GAN script's top, switched by editing the script)."""
    values = a.devices.flag_values(flag)
    return {"True": True, "False": False}.get(values[0].strip()) if len(values) == 1 else None


def _derived_flag(a, flag: str) -> Optional[Tuple[str, str, bool]]:
    """``(config, name, negated)`` when the one assignment of ``flag`` in the file is
    ``<config>.<name>`` or ``not <config>.<name>`` (``opt.cuda = not opt.no_cuda``)."""
    values = a.devices.flag_values(flag)
    m = re.fullmatch(r"(not\s+)?(\w+)\.(\w+)", values[0].strip()) if len(values) == 1 else None
    return (m.group(2), m.group(3), bool(m.group(1))) if m else None


# flags that ask for the CPU by their name: off unless given
_CPU_FLAGS = frozenset({"cpu", "use_cpu", "no_cuda", "no_gpu", "nocuda", "disable_cuda", "cpu_only", "force_cpu"})
# ... and options that list the GPUs to use: given (pix2pix's `--gpu_ids` default '0', BasicSR's
# JSON `"gpu_ids": [0]`; a project's own way to ask for the CPU is an empty list or -1)
_GPU_LISTS = frozenset({"gpu_ids", "gpus", "gpu_list"})


def _given(test: cst.BaseExpression) -> Tuple[cst.BaseExpression, Optional[bool]]:
    """``X is not None`` or ``len(X) > 0`` (True), ``X is None`` or ``len(X) == 0``
    (False): (X, whether the test asks that X is given); (test, None) otherwise."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        op, right = test.comparisons[0].operator, test.comparisons[0].comparator
        left = test.left
        if isinstance(right, cst.Name) and right.value == "None" and isinstance(op, (cst.Is, cst.IsNot)):
            return left, isinstance(op, cst.IsNot)
        if (isinstance(left, cst.Call) and isinstance(left.func, cst.Name) and left.func.value == "len"
                and len(left.args) == 1 and isinstance(right, cst.Integer) and right.value == "0"
                and isinstance(op, (cst.GreaterThan, cst.NotEqual, cst.Equal))):
            return left.args[0].value, not isinstance(op, cst.Equal)
    return test, None


def _declares_options(a) -> bool:
    """Whether this file declares command-line options itself (then their defaults are
    what counts, not names)."""
    return any(site.method == "add_argument" for site in a.calls)


# option names that hold a GPU index (or a list of them)
def _tested_for_none(a, site: CallSite, value: cst.BaseExpression) -> bool:
    """``device_ids=device_ids`` where the function tests ``device_ids is not None``
    (Lightning's DDP strategy: none for a module on the CPU) or binds it to None on a
    branch (``device_ids = None if device.type == "cpu" else [device]``): the code has
    its CPU path."""
    if not isinstance(value, cst.Name):
        return False
    fn = a.enclosing_function(site.scope)
    body = a.code(fn.node) if fn is not None else a.text
    name = re.escape(value.value)
    return re.search(rf"(?<![\w.]){name}\s+is\s+(?:not\s+)?None\b|^\s*{name}\s*=\s*(?:None\s+if\b|.*\belse\s+None\s*$)",
                     body, re.M) is not None


def _may_return_none(a, site: CallSite, value: cst.BaseExpression) -> bool:
    """``device_ids=self.determine_ddp_device_ids()`` where that function of this file
    returns None on some path (Lightning's DDP plugin: ``if self.root_device.type ==
    "cpu": return None``): the code has its CPU path."""
    fn = a.local_function(value.func, site.scope) if isinstance(value, cst.Call) else None
    return fn is not None and any(r is None or is_none(r) for r in fn.returns)


_GPU_OPTION = re.compile(r"(?:gpus?|gpu_?ids?|cuda_device|devices?|device_ids?)")
# the CPU's value, as an option's help spells it: "use -1 for CPU" (pix2pix's `--gpu_ids`),
# "for CPU mode set -gpu = c" (neural-style's), "-1 means CPU", "'cpu' for the CPU",
# "-1 to use CPU", "[-1 CPU only]"
_CPU_IN_HELP = (
    re.compile(r"(?:use|set|pass|give|specify)\s+(?:it\s+)?(?:to\s+)?(?:-{1,2}[\w-]+\s*=?\s*)?['\"]?(-1|c|cpu)['\"]?"
               r"\s+(?:for|to use|to run on)\s+(?:the\s+)?cpu\b"),
    re.compile(r"for\s+(?:the\s+)?cpu(?:\s+mode|\s+only)?\s*,?\s*(?:set|use|pass)\s+(?:-{1,2}[\w-]+\s*=?\s*)?"
               r"['\"]?(-1|c|cpu)['\"]?(?![\w-])"),
    # "-1 means CPU", "-1 to use CPU", "[-1 CPU only]" (the A3C family's `--gpu-ids`)
    re.compile(r"(?<![\w-])['\"]?(-1|cpu)['\"]?\s*(?:=|:|means|for|->|is|to use|to run on)?\s*(?:the\s+)?cpu\b"),
)


def _cpu_value(site: CallSite, default: cst.BaseExpression) -> Optional[str]:
    """The CPU's value of a command-line option whose default is a GPU index (``-gpu``
    with ``default=0``, ``--gpu_ids`` with ``default='0'`` or ``'0,1'``, ``type=int,
    nargs='+'`` with ``default=[0]``), when its help
    spells it (``_CPU_IN_HELP``), written as the default is (a number, or a string in
    its quotes); None otherwise (the project knows no CPU, or does not say how)."""
    name = _option_name(site)
    if name is None or not _GPU_OPTION.fullmatch(name.lstrip("-").replace("-", "_").lower()):
        return None
    given = site.keyword("help")
    help_text = given.value.evaluated_value if given is not None and isinstance(
        given.value, (cst.SimpleString, cst.ConcatenatedString)) else None
    if not isinstance(help_text, str):
        return None
    text = " ".join(help_text.lower().split())
    found = next((m.group(1) for pattern in _CPU_IN_HELP for m in [pattern.search(text)] if m), None)
    if found is None:
        return None
    kind = site.keyword("type")
    numeric = kind is not None and isinstance(kind.value, cst.Name) and kind.value.value == "int"
    if isinstance(default, cst.Integer) and default.value.isdigit():
        return found if found == "-1" else (None if numeric else f'"{found}"')
    if (isinstance(default, cst.List) and default.elements and found == "-1" and numeric  # nargs="+", default=[0]
            and all(isinstance(e.value, cst.Integer) and e.value.value.isdigit() for e in default.elements)):
        return "[-1]"
    if (isinstance(default, cst.SimpleString) and re.fullmatch(r"\d+(?:,\d+)*", str(default.evaluated_value))
            and not numeric):
        return f"{default.quote}{found}{default.quote}"
    return None


def _device_option(a, site: CallSite) -> bool:
    """Whether a command-line option whose default is ``"cuda"`` holds a device: its
    names say so (``--device``, ``--policy-device``, ``--gpu``, ``--accelerator``,
    ``--map_location``), or this file uses ``args.<dest>`` as a device. Not stanza's
    ``--profile_sort``, ``default='cuda'``: which profiler column to sort by."""
    given = site.keyword("dest")
    names = [n.lstrip("-").replace("-", "_") for n in option_strings(site)] + option_strings(
        site, [given.value] if given is not None else [])
    if any(_DEVICE_WORDS.search(n) for n in names):
        return True
    return any(isinstance(value, cst.Attribute) and value.attr.value in names
               for other in a.calls for value in other.device_values())


_DEVICE_WORDS = re.compile(r"(?i)dev|cuda|gpu|accel|location")


def _option_name(site: CallSite) -> Optional[str]:
    """The longest of an ``add_argument``'s option strings (``--gpu_ids`` of ``-g``,
    ``--gpu_ids``), or None."""
    names = option_strings(site)
    return max(names, key=len) if names else None


def _cpu_text(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.SimpleString) and value.evaluated_value == "cpu"


def _option_default(a, dest: str) -> Optional[bool]:
    """The default of the command-line option that ``args.<dest>`` holds, when this file's
    parser declares it as a flag: ``action="store_true"`` (False) or ``"store_false"``
    (True) unless an explicit ``default=True``/``False`` says otherwise, an option with
    ``default=True``/``False``, or with no default (None: false); else None."""
    site = option_site(a, dest)
    if site is None:
        return None
    action, default = site.keyword("action"), site.keyword("default")
    given = (({"True": True, "False": False}.get(default.value.value) if isinstance(default.value, cst.Name)
              else None) if default is not None else None)
    if action is not None:
        kind = action.value.evaluated_value if isinstance(action.value, cst.SimpleString) else None
        implied = {"store_true": False, "store_false": True}.get(kind)  # type: ignore[arg-type]
        return implied if default is None else (given if implied is not None else None)
    return False if default is None else given


def _gpu_argument(site: CallSite) -> bool:
    """``.cuda(gpu)``, ``.cuda(args.gpu, non_blocking=True)``, ``.cuda(device=dev)``: a
    device that is an expression (not a literal index: those are placements; not
    ``None``, which is TDL001's bare call; not forwarded ``*args``) in a call that fits
    torch's signature, ``cuda(device=None, non_blocking=False, memory_format=...)`` (HQQ's
    ``quantizer.cuda(tensor, meta=meta, device=d)`` is another method)."""
    arg = site.positional(0) or site.keyword("device")
    keywords = [a.keyword.value for a in site.node.args if a.keyword is not None]
    return (arg is not None and not site.has_star_args and not isinstance(arg.value, cst.Integer)
            and not (isinstance(arg.value, cst.Name) and arg.value.value == "None")
            and len(site.node.args) - len(keywords) <= 2 and set(keywords) <= _CUDA_KEYWORDS
            and not (site.positional(0) is not None and "device" in keywords))


_CUDA_KEYWORDS = frozenset({"device", "non_blocking", "memory_format"})


def _names_gpu(value: cst.BaseExpression) -> bool:
    """A GPU string, literal or built at run time (``"cuda:0"``, ``f"cuda:{local_rank}"``):
    what a name that holds ``"cuda"`` may be bound to under a branch and still hold a GPU
    on every path (nanoGPT's ``if ddp:``)."""
    return _cuda_text(value) is not None or _gpu_string(value)


def _cuda_text(value: cst.BaseExpression) -> Optional[str]:
    """``"cuda"`` or ``"cuda:1"`` when ``value`` is that string literal, else None."""
    text = value.evaluated_value if isinstance(value, cst.SimpleString) else None
    if isinstance(text, str) and (text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit())):
        return text
    return None


def _branch_devices(a, site: CallSite, value: cst.BaseExpression,
                    seen: set) -> List[Tuple[Held, cst.CSTNode, "_Rewrite"]]:
    """The GPU strings a name (or another object's attribute) used as a device is bound to
    under a branch, beside the one it holds as written (nanoGPT's ``device =
    f'cuda:{ddp_local_rank}'`` under ``if ddp:``, timm's ``args.device = 'cuda:%d' %
    args.local_rank`` under ``if args.distributed:``), each where it is bound: ``check``
    reports those a launcher runs (a branch on the distributed mode, ``unconditional``),
    and leaves the rest to the author."""
    if isinstance(value, cst.Name):
        scope, _ = a.lookup(value.value, site.scope)
        bindings = [(b, scope) for b in scope.bindings.get(value.value, ())] if scope is not None else []
    elif isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value != "self":
        bindings = a.attr_sets.get(f"{value.value.value}.{value.attr.value}", [])  # args.device (timm's train.py)
    elif isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):  # self.device, per rank
        klass, attr = a.enclosing_class(site.scope), value.attr.value
        methods = klass.methods if klass is not None else {}
        bindings = [(Binding(attr, "assign", v, order, klass.self_attr_conds.get((attr, order), ())),  # type: ignore
                     methods[m].scope) for v, m, order in (klass.self_attr_sets.get(attr, ()) if klass else ())
                    if m in methods]
    else:
        return []
    found: List[Tuple[Held, cst.CSTNode, "_Rewrite"]] = []
    for b, scope in bindings:
        line = a.statement_line(b.value) if b.kind == "assign" and b.value is not None and b.cond else None
        if line is None or b.value in seen or not _names_gpu(b.value):
            continue
        seen.add(b.value)
        text = _cuda_text(b.value)
        found.append((Held(b.value, scope, b.order, line, b.cond, a.code(value)), b.value,
                      _Rewrite("literal", text, b.value.quote[-1]) if text is not None  # type: ignore[attr-defined]
                      else _Rewrite("expression", quote=string_quote_of(b.value) or '"')))
    return found


def _held_devices(a, held: Held, location: bool) -> List[Tuple[Held, cst.CSTNode, "_Rewrite"]]:
    """What a name used as a device holds, where it is bound (once for every use): a GPU
    string literal (``device = "cuda:0"``) or one built at run time (``loc =
    "cuda:{}".format(args.gpu)``), a choice on a flag (``_flag_choice``: ``device
    = "cpu" if args.cpu else "cuda"``), or, used as a load's ``location``, a location
    map's GPU values (``map_location = {"cuda:0": "cuda:%d" % rank}``, the DDP tutorial)."""
    value = held.node
    if location and isinstance(value, cst.Dict):
        return [(held, e.value, _Rewrite("expression", quote=string_quote_of(e.value) or '"'))
                for e in value.elements if isinstance(e, cst.DictElement) and _gpu_string(e.value)]
    if _gpu_string(value):  # loc = 'cuda:{}'.format(args.gpu) (the ImageNet trainer's map_location)
        return [(held, value, _Rewrite("expression", quote=string_quote_of(value) or '"'))]
    text = _cuda_text(value)
    flag = _flag_choice(a, value) if isinstance(value, cst.IfExp) else None
    if text is None and flag is None:
        return []
    return [(held, value, flag or _Rewrite("literal", text, value.quote[-1]))]  # type: ignore[union-attr,arg-type]


def _gpu_literal(site: CallSite) -> Optional[_Rewrite]:
    """How ``torch.device(...)`` names a GPU with a string literal: ``"cuda"``,
    ``"cuda:1"``, ``"cuda", 1`` (``literal``), or with keywords or an index that is an
    expression (``call``); None for a CPU, a variable, a conditional."""
    args = site.node.args
    first = site.positional(0)
    kind = site.keyword("type")
    value = first.value if first is not None else (kind.value if kind is not None else None)
    if not isinstance(value, cst.SimpleString):
        return None
    text = _cuda_text(value)
    if text is None:
        return None
    quote = value.quote[-1]
    if first is not None and len(args) == 1:
        return _Rewrite("literal", text, quote)
    index = site.positional(1)
    if (first is not None and len(args) == 2 and index is not None and text == "cuda"
            and isinstance(index.value, cst.Integer) and index.value.value.isdigit()):
        return _Rewrite("literal", f"cuda:{int(index.value.value)}", quote)
    return _Rewrite("call", quote=quote)


def _gpu_string(expr: cst.BaseExpression) -> bool:
    """A device string built at run time that names a GPU: ``f"cuda:{gpu}"``,
    ``"cuda:" + str(gpu)``, ``"cuda:%d" % gpu``, ``"cuda:{}".format(gpu)``."""
    if isinstance(expr, cst.FormattedString):
        first = expr.parts[0] if expr.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda")
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Modulo)):
        left = expr.left
        while isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Add):
            left = left.left
        return isinstance(left, cst.SimpleString) and str(left.evaluated_value).startswith("cuda")
    if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format"
            and isinstance(expr.func.value, cst.SimpleString)):
        return str(expr.func.value.evaluated_value).startswith("cuda")
    return False



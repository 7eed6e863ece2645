"""TDL008 cuda-only-call (opt-in): ``torch.cuda.synchronize()`` and the other
``torch.cuda`` calls that raise without CUDA, called where nothing checks for it."""

from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, Union

import libcst as cst

from .. import names as N
from ..analysis import CallSite, names_in, walk
from ..model import Applicability, Edit, Fix, Violation
from .base import Context, Example, Rule, Uninsertable
from .portability import (beside_unconditional, chosen_conditionally, device_words, evaluated, guard_statement,
                          held_device, meant_for_gpus, option_site, stands_alone, string_quote, torch_for_test,
                          unconditional)


# besides ``names.CUDA_ONLY``: a device block, a rank's ``set_device``, SyncBatchNorm, a
# process count that is the GPU count, an NCCL process group
_ALSO = frozenset({"torch.cuda.device", "torch.cuda.set_device", N.CONVERT_SYNC_BATCHNORM,
                   "torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"}) | N.INIT_PROCESS_GROUP_TORCH


# the GPU count: a factor of a batch size or a learning rate, a divisor of steps (`_factor`)
_COUNT = "torch.cuda.device_count"
# ... where a zero does no harm: no worker processes
_HARMLESS_FACTOR = ("num_workers", "workers")
# the longest receiver a fix writes twice (`x.pin_memory() if ... else x`)
_REPEATABLE = 40
_NEEDS = "needs CUDA and nothing here checks for it: this code cannot run where CUDA is not available"


class CudaOnlyCall(Rule):
    code = "TDL008"
    name = "cuda-only-call"
    summary = ("a `torch.cuda` call that raises without CUDA (`synchronize()`, `Event`, `current_device()`, a "
               "`set_device`), an NCCL process group, SyncBatchNorm, one process per GPU, the GPU count as a "
               "factor, pinned memory, "
               "with nothing checking for CUDA; `assert torch.cuda.is_available()` or a script's stop without it (opt-in)")
    opt_in = True
    triggers = ("cuda", "nccl", "SyncBatchNorm", "pin_memory", "nn.parallel")
    also_requires = ("synchronize", "Event", "Stream", "current_device", "get_device_", "current_stream",
                     "default_stream", "CUDAGraph", "reset_", "ipc_collect", "get_rng_state", "mem_get_info",
                     "memory_summary", "init", "set_per_process_memory_fraction", "nvtx", "device(", "set_device",
                     "convert_sync_batchnorm", "spawn", "start_processes", "pin_memory", "is_available",
                     "device_count", "replicate", "scatter", "gather", "parallel_apply", "data_parallel",
                     "utilization", "temperature", "power_draw", "clock_rate", "memory_usage")
    # the gate on the code (`with torch.cuda.device(k):` is a call of it too)
    needs = (tuple(f"qual:{q}" for q in sorted(N.CUDA_ONLY | _ALSO))
             + ("call:pin_memory", "name:pin_memory", "stmt:torch.cuda.is_available", "factor:count"),)
    fixable = "sometimes"
    fix_summary = ("the statement under `if torch.cuda.is_available():` (unsafe) when it is an expression "
                   "statement, a device block's index `k if torch.cuda.is_available() else -1` (a no-op), the "
                   "backend `\"nccl\" if torch.cuda.is_available() else \"gloo\"`, pinning only when CUDA is available, "
                   "`assert torch.cuda.is_available()` (or a script's stop without CUDA) removed, a kept current "
                   "device used as a device or device name `... else \"cpu\"`; else display")
    what = """
        A call of a `torch.cuda` function that raises where CUDA is not available
        ("Torch not compiled with CUDA enabled"): `synchronize()`, `current_device()`,
        `get_device_name()`, `get_device_properties()`, `get_device_capability()`,
        `current_stream()`, `default_stream()`, `Stream()`, `Event()`, `CUDAGraph()`,
        `reset_peak_memory_stats()` (and the older `reset_max_memory_*`), `ipc_collect()`,
        `get_rng_state()`, `initial_seed()`, `mem_get_info()`, `memory_summary()`, `init()`,
        `set_per_process_memory_fraction()`, the `torch.cuda.nvtx` markers, NVML's
        readings (`utilization()`, `temperature()`, `power_draw()`, `clock_rate()`,
        `memory_usage()`: they need pynvml and a GPU), and data
        parallelism by hand, `torch.nn.parallel`'s `replicate`, `scatter`, `gather`,
        `parallel_apply` and `data_parallel` (the CPU build has no broadcast, scatter or
        gather; `data_parallel` finds no device type). Only where it
        runs unconditionally (not under an `if`, not one side of `a if c else b` or of
        `a or b`; an `if` on the distributed mode, `if args.distributed:`, `if rank == 0:`,
        `if ddp:` of `ddp = int(os.environ.get("RANK", -1)) != -1`, `if 'SLURM_PROCID' in
        os.environ:`, `if args.gpu is not
        None:` where `args.gpu` holds the index `mp.spawn` hands a process, is none: a
        launcher runs it on a CPU machine too; nor, in a function that holds a CUDA-only
        call on no condition, is an `if` on the data, DINO's `if
        utils.has_batchnorms(student):`), in code that does not stop without CUDA (no `assert
        torch.cuda.is_available()` or `if not torch.cuda.is_available():` exit in its
        function, or in the module for module-level code; no `if` around it that asks),
        outside functions and classes whose decorators name CUDA or a GPU
        (`@unittest.skipIf(not torch.cuda.is_available(), ...)`, `@requires_cuda`). A
        device with a CPU fallback in the same function does not count: the call still
        raises on the CPU path. Not the calls that are harmless without CUDA
        (`empty_cache()`, `manual_seed()`, `memory_allocated()`, `device_count()`).

        `torch.cuda.set_device(k)`, wherever it runs: a rank's (a spawned worker, a rank's
        setup, a thread that binds its own device and works there: correct code that still
        raises), or a global one (TDL101's finding too, for the current device it changes:
        a script that starts with `torch.cuda.set_device(args.gpu)` stops there without
        CUDA, however its placements fall back); a pool task's or an idle thread's is
        TDL102's, which moves it. Per-rank code too:
        `nn.SyncBatchNorm.convert_sync_batchnorm(model)` (its batch
        norms then raise on CPU tensors across ranks), a process group on the NCCL
        backend, `init_process_group("nccl")` or `backend="nccl"` ("Distributed package
        doesn't have NCCL built in"; or a name or an attribute that holds `"nccl"`,
        `args.dist_backend = "nccl"`, reported where it is bound; not a parameter, nor `"cpu:gloo,cuda:nccl"`), and one
        process per GPU, `mp.spawn(worker, nprocs=torch.cuda.device_count())` (or a name
        bound to that count): without CUDA it starts none and returns, the program does
        nothing (not where the count is asserted: `assert world_size >= 2`).

        A test that calls one of them whenever it is evaluated (`if
        torch.cuda.get_device_capability()[0] >= 8:` to turn TF32 on, `dtype =
        torch.bfloat16 if torch.cuda.get_device_capability()[0] >= 8 else torch.float16`
        as VGGT's demo writes), where the test itself runs unconditionally; not behind
        another test (`torch.cuda.is_available() and ...`), nor an `elif`'s.

        The GPU count as a factor or a divisor, `batch_size=args.batch_size *
        torch.cuda.device_count()`, `lr = 0.1 * torch.cuda.device_count()`, `steps //
        (bs * torch.cuda.device_count())`, `rank % torch.cuda.device_count()` (a
        modulus's divisor only), or a name bound once to the count whose every
        use is one (`ngpu = torch.cuda.device_count()` ... `batch_size=2 * ngpu`): zero
        without CUDA, a batch size the loader rejects, a learning rate of 0, a division
        by zero. Not a workers count (`num_workers=4 * ngpu`: none on the CPU is fine),
        nor a count that is tested (`if ngpu > 1:`) or kept from zero (`max(1, ...)`).

        Pinned memory: `x.pin_memory()` and a torch allocation with `pin_memory=True`
        raise without an accelerator ("Cannot access accelerator device"); not a
        `DataLoader`'s `pin_memory=True` (it warns and does not pin), nor `.pin_memory()`
        in a module whose classes define their own (a custom batch's: the loader calls it
        only when it pins).

        An assertion that CUDA is there, `assert torch.cuda.is_available()` (with a
        message or not; or through a name bound to it, `use_cuda =
        torch.cuda.is_available()` then `assert use_cuda`, `is True`, `== True`, later
        in the same block), and in a script (a file that is run, not imported) `if not
        torch.cuda.is_available():` (or `if not use_cuda:` after such a binding) whose
        body only reports and stops (`raise ...`, `print(...)` then `sys.exit(1)`), or
        an `else` that only reports and stops after `elif torch.cuda.is_available():` in
        a script or in a function that starts a process group (DINO's
        `init_distributed_mode`: the launcher's environment, else SLURM's, else one GPU,
        else "Does not support training without GPU."), where it runs whatever
        happens (at a module's top level, in a function; not under an `if`: `if
        args.cuda: assert ...` checks what the user asked for; not in a `try`; not a
        count, `assert torch.cuda.device_count() >= 2`, a requirement of
        its own; not in a function or class named or decorated for GPUs; not an
        assertion in test code, a module that imports pytest or unittest): the program
        stops on the CPU by the author's word, though its code could run there. While it
        stands, TDL007 takes the module (or function) for GPU-only and names none of its
        GPUs; once it is removed, TDL007 gives them their CPU fallbacks (in the same
        `fix`). A library's `if not torch.cuda.is_available(): raise ...` is kept: it
        guards kernels that need CUDA (a quantizer, a fused optimizer).

        Entering `with torch.cuda.device(k):` raises too (not `torch.cuda.device_of(t)`,
        nor a negative index or `None`: no-ops; nor a tensor's `.device`: the block
        follows its data, in kernels that need CUDA anyway); called as a plain statement
        it is TDL103's.

        Not on by default, like TDL007: code meant only for GPUs may call these freely.
        Select it (`--extend-select TDL008`) when the code must also run without CUDA; a
        one-shot migration (`torchdevlint fix --unsafe-fixes .`) selects it itself unless
        the rules were chosen (`--select`, or a `select` other than the default).
    """
    why = """
        Timing code (`torch.cuda.synchronize()` around a step), memory reports, device
        names in a log line: the lines a CPU run does not need are the ones that stop it.
        Once every placement falls back to the CPU, these calls are what still fails.
    """
    example = """
        start = time.time()
        loss = train_step(model, batch)
        torch.cuda.synchronize()
        print(torch.cuda.get_device_name(0), time.time() - start)
    """
    use_instead = """
        start = time.time()
        loss = train_step(model, batch)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        if torch.cuda.is_available():
            print(torch.cuda.get_device_name(0), time.time() - start)
    """
    fix_safety = """
        When the call is an expression statement on a line of its own, or a method
        called on its result, or what such a statement reports (`torch.cuda.synchronize()`,
        `print(torch.cuda.get_device_name(0))`, a logger's line, a stream's ordering,
        `x.record_stream(torch.cuda.current_stream())`), the fix puts that
        statement under `if torch.cuda.is_available():`; display-only where the statement
        does more with it (`torch.save({..., "cuda_rng_state": torch.cuda.get_rng_state()},
        path)`: skipping it would lose the checkpoint). Unsafe: without CUDA
        the statement is skipped instead of failing (which is the point, but a log line
        disappears). With CUDA it runs as before: the call itself initialised CUDA at
        that point. A device block's index gets the fallback torch documents as a no-op:
        `with torch.cuda.device(k if torch.cuda.is_available() else -1):` (unsafe, as
        above; what the block places with `.cuda()` is TDL007's). The NCCL backend becomes
        `"nccl" if torch.cuda.is_available() else "gloo"` (gloo runs the same collectives
        on CPU tensors), and SyncBatchNorm's conversion `... if torch.cuda.is_available()
        else model` (plain batch norms on the CPU), and the process count
        `torch.cuda.device_count() or 1` (one process on the CPU; the same count with
        GPUs), and so a count that is a factor or a divisor (`args.batch_size *
        (torch.cuda.device_count() or 1)`, `rank % (torch.cuda.device_count() or 1)`), a test that calls CUDA
        `torch.cuda.is_available() and <test>` (false without CUDA: the code's other
        branch, as on a GPU that fails the test), pinning `x.pin_memory() if
        torch.cuda.is_available() else x` and `pin_memory=torch.cuda.is_available()`, all
        unsafe; with TDL007's fallbacks of
        the rank's placements, a DDP program then runs on the CPU too. An assertion that
        CUDA is available, or a script's stop without it, is removed (`pass` where it is
        its block's only statement; the import of `sys`, `os`, `logging` or `warnings`
        goes too where only the stop read it; unsafe: without CUDA the program goes on, on the
        CPU, instead of stopping; with CUDA nothing changes but one query less); an
        `elif torch.cuda.is_available():` whose `else` stops becomes `else:`, the stop
        gone (the branch meant for one GPU runs on the CPU, with the fallbacks; display
        where the branch names a GPU itself).

        A kept result with a CPU counterpart falls back to it: the current device used as
        a device, `.to(torch.cuda.current_device())`, `device=...`, `map_location=...`,
        `torch.device(...)`, or a name bound once to it whose every use is one, becomes
        `torch.cuda.current_device() if torch.cuda.is_available() else "cpu"`; a device's
        name that is kept (`name = torch.cuda.get_device_name(0)`, for a log line or a
        run's config) `... else "cpu"` (unsafe, as above; with CUDA the same value).
        Display-only when any other result is kept (`start =
        torch.cuda.Event(enable_timing=True)`, `index = torch.cuda.current_device()` used
        as a number, `.cuda(torch.cuda.current_device())`, whose device must be a GPU:
        what uses it needs a CPU path written by hand), with other statements on the line,
        at the module level of a module that is not a script (the test would run at every
        import), and in TorchScript.
    """
    VALID = (
        # ... or after a test of the device: the CPU has its own path, the stop answers a missing GPU
        "import sys\nimport torch\n\n\ndef main():\n    if sys.argv[1:] == ['--cpu']:\n        device = 'cpu'\n"
        "    elif torch.cuda.is_available():\n        device = 'cuda'\n    else:\n        print('no GPU')\n"
        "        sys.exit(1)\n    print(torch.zeros(1).to(device))\n\n\nif __name__ == '__main__':\n    main()\n",
        # a stop after asking, in a library's function that starts no process group (a
        # kernel's guard), or an `else` that does more than report and stop
        "import sys\nimport torch\ndef kernel(x):\n    if x.is_sparse:\n        return x\n"
        "    elif torch.cuda.is_available():\n        return x.cuda()\n    else:\n"
        "        print('needs a GPU')\n        sys.exit(1)\n",
        "import sys\nimport torch\nimport torch.distributed as dist\ndef setup(args):\n"
        "    if args.rank:\n        pass\n    elif torch.cuda.is_available():\n        args.rank = 0\n"
        "    else:\n        args.rank = -1\n        sys.exit(1)\n    dist.init_process_group('gloo')\n",
        # an `if` on the data with no CUDA-only call beside it on no condition: the author's choice
        "import torch.nn as nn\ndef build(model, cfg):\n    if cfg.sync_bn:\n"
        "        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)\n    return model\n",
        "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
        "import torch\ndef step(x):\n    y = x * 2\n    if x.is_cuda:\n        torch.cuda.synchronize()\n"
        "    return y\n",
        "import torch\ndef report():\n    if torch.cuda.device_count() == 0:\n        return None\n"
        "    torch.cuda.synchronize()\n    return torch.cuda.get_device_name()\n",
        "import torch\ndef tidy():\n    torch.cuda.empty_cache()\n    torch.cuda.manual_seed(0)\n"
        "    return torch.cuda.memory_allocated()\n",
        "import torch\ndef name(x):\n    return torch.cuda.get_device_name() if x.is_cuda else 'cpu'\n",
        # a helper defined under a test that tells CUDA from the CPU (cellpose's memory check)
        "import torch\ndef check(masks, device):\n    if device is not None and device.type == 'cuda':\n"
        "        def mem_info():\n            return torch.cuda.mem_get_info(device.index)\n"
        "        return mem_info()\n",
        "import torch\nimport unittest\n@unittest.skipIf(not torch.cuda.is_available(), 'needs a GPU')\n"
        "class T(unittest.TestCase):\n    def test_sync(self):\n        torch.cuda.synchronize()\n",
        "import torch\nimport pytest\n@pytest.mark.gpu\ndef test_stream():\n    s = torch.cuda.Stream()\n"
        "    s.synchronize()\n",
        "import cupy\ndef f():\n    cupy.cuda.Stream.null.synchronize()\n",
        # a backend that is a parameter, mixed, or chosen on a condition
        "import torch.distributed as dist\ndef setup(backend):\n    dist.init_process_group(backend)\n",
        "import torch.distributed as dist\nimport sys\nif sys.argv[1:]:\n    BACKEND = 'nccl'\n"
        "def setup():\n    dist.init_process_group(BACKEND)\n",
        "import torch.distributed as dist\ndef setup():\n    dist.init_process_group('cpu:gloo,cuda:nccl')\n",
        "import torch\nimport torch.distributed as dist\ndef setup():\n"
        "    dist.init_process_group('nccl' if torch.cuda.is_available() else 'gloo')\n",
        # ... on a test of the GPUs, however it is named (the distributed mode as the GPU count)
        "import torch\nimport torch.distributed as dist\nargs.distributed = torch.cuda.device_count() > 1\n"
        "if args.distributed:\n    dist.init_process_group(backend='nccl')\n"
        "    torch.cuda.set_device(args.local_rank)\n",
        "import os\nimport torch\nimport torch.distributed as dist\n\n\ndef run(rank, world_size):\n"
        "    is_ddp = world_size > 1\n    if is_ddp:\n        os.environ['MASTER_PORT'] = '12355'\n"
        "        dist.init_process_group('nccl', rank=rank, world_size=world_size)\n",
        "import torch\nimport torch.distributed as dist\ndef setup(opts, local_rank):\n"
        "    if opts['distributed_backend'] == 'nccl':\n        torch.cuda.set_device(local_rank)\n",
        # a process count the author asserts, or that is kept from zero
        "import torch\nimport torch.multiprocessing as mp\ndef w(r):\n    pass\nif __name__ == '__main__':\n"
        "    n = torch.cuda.device_count()\n    assert n >= 2, 'needs 2 GPUs'\n    mp.spawn(w, nprocs=n)\n",
        "import torch\nimport torch.multiprocessing as mp\ndef w(r):\n    pass\nif __name__ == '__main__':\n"
        "    mp.spawn(w, nprocs=max(torch.cuda.device_count(), 1))\n",
        # an assertion through a name under a condition, or of more than the name
        "import torch\ndef main(args):\n    use_cuda = torch.cuda.is_available()\n    if args.gpu:\n"
        "        assert use_cuda\n    assert use_cuda or args.cpu\n",
        # a test that asks first, or an `elif`'s (run only when the `if` fails)
        "import torch\ndef setup():\n    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:\n"
        "        torch.backends.cuda.matmul.allow_tf32 = True\n",
        "import torch\ndef setup(cpu):\n    if cpu:\n        return 'cpu'\n"
        "    elif torch.cuda.get_device_capability()[0] >= 8:\n        return 'ampere'\n",
        # a GPU count that is tested, kept from zero, or counts workers
        "import torch\ndef loader(ds, bs):\n    n = torch.cuda.device_count()\n    if n > 1:\n        bs = bs * n\n"
        "    return torch.utils.data.DataLoader(ds, batch_size=bs * max(1, torch.cuda.device_count()),\n"
        "                                       num_workers=4 * torch.cuda.device_count())\n",
        # a conversion under a test, or of a module built in place
        "import torch\ndef build(model, sync_bn):\n    if sync_bn:\n"
        "        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n    return model\n",
        "import torch\ndef build():\n    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(torch.nn.BatchNorm1d(2))\n",
        # set_device in an idle thread or a pool task (TDL102's)
        "import threading, torch\ndef work(k):\n    torch.cuda.set_device(k)\n"
        "threading.Thread(target=work, args=(1,)).start()\n",
        "import torch\nfrom concurrent.futures import ThreadPoolExecutor\ndef task(k, x):\n"
        "    torch.cuda.set_device(k)\n    return x.sum()\nThreadPoolExecutor(2).submit(task, 1, None)\n",
        "import sys\nimport torch\nif not torch.cuda.is_available():\n    sys.exit('a GPU is required')\n"
        "torch.cuda.synchronize()\n",
        # a device block that is a no-op without CUDA, or entered on a condition
        "import torch\ndef f(x):\n    with torch.cuda.device_of(x):\n        return x * 2\n",
        "import torch\ndef f(x, k):\n    with torch.cuda.device(k if torch.cuda.is_available() else -1):\n"
        "        return x * 2\n",
        "import torch\ndef f(x):\n    with torch.cuda.device(-1), torch.cuda.device(None):\n        return x * 2\n",
        "import torch\ndef step(p, kernel):\n    with torch.cuda.device(p.device):\n        kernel(p)\n",
        "import torch\ndef f(x):\n    if x.is_cuda:\n        with torch.cuda.device(x.device):\n            return x * 2\n"
        "    return x\n",
        # a loader's pinning (it warns and does not pin without CUDA); a custom batch's own
        "import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=2, pin_memory=True)\n",
        "import torch\nclass Batch:\n    def pin_memory(self):\n        self.inp = self.inp.pin_memory()\n        return self\n"
        "def collate(b):\n    return Batch(b).pin_memory()\n",
        "import torch\ndef f(x, pin):\n    if pin:\n        x = x.pin_memory()\n    return x\n",
        # an assertion of what the user asked for, of a count, in a test meant for GPUs
        "import torch\ndef main(args):\n    if args.cuda:\n        assert torch.cuda.is_available(), 'no GPU'\n",
        "import torch\nassert torch.cuda.device_count() >= 2, 'needs two GPUs'\n",
        "import torch\ndef test_gpu_kernel():\n    assert torch.cuda.is_available()\n    return 1\n",
        "import pytest\nimport torch\ndef _check_local_rank():\n    assert torch.cuda.is_available()\n"
        "    return torch.cuda.current_device()\n",
        "import torch\ndef f():\n    assert not torch.cuda.is_available()\n",
        "import torch\ntry:\n    assert torch.cuda.is_available()\n    GPU = True\nexcept AssertionError:\n"
        "    GPU = False\n",
        # a library's guard of a CUDA kernel; a warning that does not stop; a check of what was asked
        "import torch\ndef quantize(w):\n    if not torch.cuda.is_available():\n"
        "        raise RuntimeError('the kernel needs CUDA')\n    return w\n",
        "import torch\nif not torch.cuda.is_available():\n    print('no GPU: this will be slow')\n"
        "x = torch.ones(2)\nprint(x)\n",
        "import sys\nimport torch\ndef main(args):\n    if args.gpu:\n        if not torch.cuda.is_available():\n"
        "            sys.exit('--gpu needs CUDA')\nif __name__ == '__main__':\n    main(sys.argv)\n",
        # ... through a name: one bound twice, one whose stop has an else, a library's
        "import sys\nimport torch\nuse_cuda = torch.cuda.is_available()\nif '--cpu' in sys.argv:\n"
        "    use_cuda = True\nif not use_cuda:\n    sys.exit('a GPU is required')\n",
        "import sys\nimport torch\nuse_cuda = torch.cuda.is_available()\nif not use_cuda:\n    sys.exit(1)\n"
        "else:\n    print('GPU')\n",
        "import torch\ndef kernel(w):\n    ok = torch.cuda.is_available()\n    if not ok:\n"
        "        raise RuntimeError('the kernel needs CUDA')\n    return w\n",
    )
    INVALID = (
        Example("import time\nimport torch\n\n\ndef timed(step, batch):\n    start = time.time()\n"
                "    out = step(batch)\n    torch.cuda.synchronize()  # wait for the kernels\n"
                "    return out, time.time() - start\n",
                "import time\nimport torch\n\n\ndef timed(step, batch):\n    start = time.time()\n"
                "    out = step(batch)\n    if torch.cuda.is_available():\n"
                "        torch.cuda.synchronize()  # wait for the kernels\n"
                "    return out, time.time() - start\n"),
        Example("from torch.cuda import get_device_name\n\n\ndef main():\n"
                "    print('training on', get_device_name(0))\n",
                "from torch.cuda import get_device_name\nimport torch\n\n\ndef main():\n"
                "    if torch.cuda.is_available():\n        print('training on', get_device_name(0))\n"),
        # a report of the call (a logger's line, a method on its result) is what skipping loses ...
        Example("import logging\nimport torch\nlogger = logging.getLogger(__name__)\n\n\ndef report():\n"
                "    logger.info('memory: %s', torch.cuda.memory_summary())\n"
                "    torch.cuda.current_stream().synchronize()\n",
                "import logging\nimport torch\nlogger = logging.getLogger(__name__)\n\n\ndef report():\n"
                "    if torch.cuda.is_available():\n        logger.info('memory: %s', torch.cuda.memory_summary())\n"
                "        torch.cuda.current_stream().synchronize()\n"),
        # ... and so is a stream's ordering (YOLOX's prefetcher) ...
        Example("import torch\n\n\ndef wait(batch):\n    batch.record_stream(torch.cuda.current_stream())\n",
                "import torch\n\n\ndef wait(batch):\n    if torch.cuda.is_available():\n"
                "        batch.record_stream(torch.cuda.current_stream())\n"),
        # ... but not a statement that does more with the result (FARM's checkpoint: skipping
        # it would lose the save): display only
        Example("import torch\n\n\ndef save(model, path):\n"
                "    torch.save({'model': model.state_dict(), 'cuda_rng_state': torch.cuda.get_rng_state()}, path)\n"),
        # what a docstring or a comment says asks nothing
        Example('import torch\n\n\ndef timed(step):\n    """Callers check torch.cuda.is_available() first."""\n'
                "    out = step()  # see torch.cuda.device_count()\n    torch.cuda.synchronize()\n    return out\n",
                'import torch\n\n\ndef timed(step):\n    """Callers check torch.cuda.is_available() first."""\n'
                "    out = step()  # see torch.cuda.device_count()\n    if torch.cuda.is_available():\n"
                "        torch.cuda.synchronize()\n    return out\n"),
        # a device that falls back to the CPU does not keep the call from raising there
        Example("import torch\ndef main():\n    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "    torch.cuda.synchronize(device)\n    return device\n",
                "import torch\ndef main():\n    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "    if torch.cuda.is_available():\n        torch.cuda.synchronize(device)\n    return device\n"),
        # a script's main guard is where it starts, not a condition
        Example("if __name__ == '__main__':\n    import torch\n    y = torch.ones(3) * 2\n"
                "    torch.cuda.synchronize()\n",
                "if __name__ == '__main__':\n    import torch\n    y = torch.ones(3) * 2\n"
                "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"),
        # a device block: entering it raises without CUDA; a negative index is a no-op
        Example("import torch\n\n\ndef evaluate(model, x, gpu):\n    with torch.cuda.device(gpu), torch.no_grad():\n"
                "        return model(x)\n",
                "import torch\n\n\ndef evaluate(model, x, gpu):\n"
                "    with torch.cuda.device(gpu if torch.cuda.is_available() else -1), torch.no_grad():\n"
                "        return model(x)\n"),
        # a rank's process group and GPU binding (spawned workers, a torchrun script)
        Example("import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
                "def worker(rank, world):\n    dist.init_process_group('nccl', rank=rank, world_size=world)\n"
                "    torch.cuda.set_device(rank)\n\n\nif __name__ == '__main__':\n"
                "    mp.spawn(worker, args=(2,), nprocs=2)\n",
                "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
                "def worker(rank, world):\n"
                "    dist.init_process_group('nccl' if torch.cuda.is_available() else 'gloo', rank=rank, world_size=world)\n"
                "    if torch.cuda.is_available():\n        torch.cuda.set_device(rank)\n\n\n"
                "if __name__ == '__main__':\n    mp.spawn(worker, args=(2,), nprocs=2)\n"),
        Example("import os\nimport torch\nimport torch.distributed as dist\n"
                "local_rank = int(os.environ['LOCAL_RANK'])\ndist.init_process_group(backend=\"nccl\")\n"
                "torch.cuda.set_device(local_rank)\nprint(dist.get_rank())\n",
                "import os\nimport torch\nimport torch.distributed as dist\n"
                "local_rank = int(os.environ['LOCAL_RANK'])\n"
                "dist.init_process_group(backend=\"nccl\" if torch.cuda.is_available() else \"gloo\")\n"
                "if torch.cuda.is_available():\n    torch.cuda.set_device(local_rank)\nprint(dist.get_rank())\n"),
        # ... under a test of the distributed mode, which a launcher runs on a CPU machine too
        # (maskrcnn-benchmark's trainer: `args.distributed = num_gpus > 1` of WORLD_SIZE)
        Example("import torch\nimport torch.distributed as dist\n\n\ndef setup(args):\n    if args.distributed:\n"
                "        torch.cuda.set_device(args.local_rank)\n"
                "        dist.init_process_group(backend='nccl', init_method='env://')\n",
                "import torch\nimport torch.distributed as dist\n\n\ndef setup(args):\n    if args.distributed:\n"
                "        if torch.cuda.is_available():\n            torch.cuda.set_device(args.local_rank)\n"
                "        dist.init_process_group(backend='nccl' if torch.cuda.is_available() else 'gloo', "
                "init_method='env://')\n"),
        # ... or on a name the launcher's environment sets (nanoGPT's `ddp`)
        Example("import os\nimport torch\nfrom torch.distributed import init_process_group\n\n"
                "ddp = int(os.environ.get('RANK', -1)) != -1\nif ddp:\n    init_process_group(backend='nccl')\n"
                "    torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\nprint(torch.zeros(1))\n",
                "import os\nimport torch\nfrom torch.distributed import init_process_group\n\n"
                "ddp = int(os.environ.get('RANK', -1)) != -1\nif ddp:\n"
                "    init_process_group(backend='nccl' if torch.cuda.is_available() else 'gloo')\n"
                "    if torch.cuda.is_available():\n        torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
                "print(torch.zeros(1))\n"),
        # ... even where a function tests the device (nanoGPT's get_batch): that guards its own body
        Example("import os\n\nimport torch\n\ndevice = 'cuda'\nddp = int(os.environ.get('RANK', -1)) != -1\n"
                "if ddp:\n    device = f'cuda:{os.environ[\"LOCAL_RANK\"]}'\n    torch.cuda.set_device(device)\n"
                "device_type = 'cuda' if 'cuda' in device else 'cpu'\n\n\ndef get_batch(data):\n"
                "    if device_type == 'cuda':\n        return data.pin_memory().to(device, non_blocking=True)\n"
                "    return data.to(device)\n\n\nprint(get_batch(torch.zeros(2)))\n",
                "import os\n\nimport torch\n\ndevice = 'cuda'\nddp = int(os.environ.get('RANK', -1)) != -1\n"
                "if ddp:\n    device = f'cuda:{os.environ[\"LOCAL_RANK\"]}'\n"
                "    if torch.cuda.is_available():\n        torch.cuda.set_device(device)\n"
                "device_type = 'cuda' if 'cuda' in device else 'cpu'\n\n\ndef get_batch(data):\n"
                "    if device_type == 'cuda':\n        return data.pin_memory().to(device, non_blocking=True)\n"
                "    return data.to(device)\n\n\nprint(get_batch(torch.zeros(2)))\n"),
        # a script's global binding (TDL101's too): the migration has to get past it
        Example("import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--gpu', type=int, default=0)\nargs = parser.parse_args()\n"
                "torch.cuda.set_device(args.gpu)\nprint(torch.zeros(1))\n",
                "import argparse\nimport torch\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--gpu', type=int, default=0)\nargs = parser.parse_args()\n"
                "if torch.cuda.is_available():\n    torch.cuda.set_device(args.gpu)\nprint(torch.zeros(1))\n"),
        # a thread that binds its own device and works there
        Example("import threading\nimport torch\n\n\nclass Prefetch(threading.Thread):\n    def __init__(self, gpu, data):\n"
                "        super().__init__()\n        self.gpu, self.data = gpu, data\n\n    def run(self):\n"
                "        torch.cuda.set_device(self.gpu)\n        self.out = [t.sum() for t in self.data]\n",
                "import threading\nimport torch\n\n\nclass Prefetch(threading.Thread):\n    def __init__(self, gpu, data):\n"
                "        super().__init__()\n        self.gpu, self.data = gpu, data\n\n    def run(self):\n"
                "        if torch.cuda.is_available():\n            torch.cuda.set_device(self.gpu)\n"
                "        self.out = [t.sum() for t in self.data]\n"),
        # one process per GPU: none without CUDA (one process on the CPU after the fix)
        Example("import torch\nimport torch.multiprocessing as mp\n\n\ndef worker(rank, world):\n    print(rank)\n\n\n"
                "if __name__ == '__main__':\n    world = torch.cuda.device_count()\n"
                "    mp.spawn(worker, args=(world,), nprocs=world, join=True)\n",
                "import torch\nimport torch.multiprocessing as mp\n\n\ndef worker(rank, world):\n    print(rank)\n\n\n"
                "if __name__ == '__main__':\n    world = torch.cuda.device_count() or 1\n"
                "    mp.spawn(worker, args=(world,), nprocs=world, join=True)\n"),
        # a backend a name holds: where it is bound, once for every use
        # an assertion through a name: the assertion goes, the answer stays
        Example("import torch\n\n\ndef main():\n    use_cuda = torch.cuda.is_available()\n"
                "    assert use_cuda == True, 'This tutorial needs a CUDA device'\n    return use_cuda\n",
                "import torch\n\n\ndef main():\n    use_cuda = torch.cuda.is_available()\n    return use_cuda\n"),
        # a test that calls CUDA: asked first (an `if`'s, a conditional expression's)
        Example("import torch\ndef setup():\n    if torch.cuda.get_device_capability()[0] >= 8:\n"
                "        torch.backends.cuda.matmul.allow_tf32 = True\n",
                "import torch\ndef setup():\n"
                "    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:\n"
                "        torch.backends.cuda.matmul.allow_tf32 = True\n"),
        Example("import torch\ndef dtype():\n"
                "    return torch.bfloat16 if torch.cuda.get_device_capability()[0] >= 8 else torch.float16\n",
                "import torch\ndef dtype():\n    return torch.bfloat16 if torch.cuda.is_available() "
                "and torch.cuda.get_device_capability()[0] >= 8 else torch.float16\n"),
        # a GPU count as a factor: inline, or through a name all of whose uses are factors
        Example("import torch\ndef loader(ds, args):\n"
                "    return torch.utils.data.DataLoader(ds, batch_size=args.batch_size * torch.cuda.device_count())\n",
                "import torch\ndef loader(ds, args):\n"
                "    return torch.utils.data.DataLoader(ds, batch_size=args.batch_size "
                "* (torch.cuda.device_count() or 1))\n"),
        Example("import torch\ndef schedule(n, bs):\n    ngpu = torch.cuda.device_count()\n"
                "    return n // (bs * ngpu), 0.1 * ngpu\n",
                "import torch\ndef schedule(n, bs):\n    ngpu = torch.cuda.device_count() or 1\n"
                "    return n // (bs * ngpu), 0.1 * ngpu\n"),
        Example("import torch\nimport torch.distributed as dist\n\nBACKEND = 'nccl'\n\n\ndef setup(rank, world):\n"
                "    dist.init_process_group(BACKEND, rank=rank, world_size=world)\n\n\ndef again():\n"
                "    dist.init_process_group(backend=BACKEND)\n\n\nif __name__ == '__main__':\n    setup(0, 1)\n",
                "import torch\nimport torch.distributed as dist\n\nBACKEND = 'nccl' if torch.cuda.is_available() else 'gloo'\n"
                "\n\ndef setup(rank, world):\n"
                "    dist.init_process_group(BACKEND, rank=rank, world_size=world)\n\n\ndef again():\n"
                "    dist.init_process_group(backend=BACKEND)\n\n\nif __name__ == '__main__':\n    setup(0, 1)\n"),
        # ... or an attribute (DETR's `init_distributed_mode`: a GPU count in another branch
        # asks nothing that stops without CUDA)
        Example("import os\nimport torch\n\n\ndef init_distributed_mode(args):\n"
                "    if 'SLURM_PROCID' in os.environ:\n"
                "        args.gpu = int(os.environ['SLURM_PROCID']) % torch.cuda.device_count()\n"
                "    else:\n        args.gpu = int(os.environ['LOCAL_RANK'])\n    torch.cuda.set_device(args.gpu)\n"
                "    args.dist_backend = 'nccl'\n"
                "    torch.distributed.init_process_group(backend=args.dist_backend, init_method='env://')\n",
                "import os\nimport torch\n\n\ndef init_distributed_mode(args):\n"
                "    if 'SLURM_PROCID' in os.environ:\n"
                "        args.gpu = int(os.environ['SLURM_PROCID']) % (torch.cuda.device_count() or 1)\n"
                "    else:\n        args.gpu = int(os.environ['LOCAL_RANK'])\n"
                "    if torch.cuda.is_available():\n        torch.cuda.set_device(args.gpu)\n"
                "    args.dist_backend = 'nccl' if torch.cuda.is_available() else 'gloo'\n"
                "    torch.distributed.init_process_group(backend=args.dist_backend, init_method='env://')\n"),
        # a spawned process's index as `args.gpu`: `if args.gpu is not None:` tests the rank, and
        # the statements guarded in a row share one block
        Example("import torch\nimport torch.multiprocessing as mp\n\n\ndef main_worker(gpu, model, args):\n"
                "    args.gpu = gpu\n    if args.gpu is not None:\n"
                "        torch.cuda.set_device(args.gpu)\n        torch.cuda.synchronize()\n"
                "    return model\n\n\nif __name__ == '__main__':\n"
                "    mp.spawn(main_worker, nprocs=2, args=(None, None))\n",
                "import torch\nimport torch.multiprocessing as mp\n\n\ndef main_worker(gpu, model, args):\n"
                "    args.gpu = gpu\n    if args.gpu is not None:\n        if torch.cuda.is_available():\n"
                "            torch.cuda.set_device(args.gpu)\n            torch.cuda.synchronize()\n"
                "    return model\n\n\nif __name__ == '__main__':\n"
                "    mp.spawn(main_worker, nprocs=2, args=(None, None))\n"),
        # a distributed mode the launcher's environment gives (a world size also multiplied
        # by the GPU count, MoCo's): no question to CUDA
        Example("import argparse\nimport os\n\nimport torch\nimport torch.distributed as dist\n\n"
                "parser = argparse.ArgumentParser()\n"
                "parser.add_argument('--world-size', default=-1, type=int)\n"
                "parser.add_argument('--multiprocessing-distributed', action='store_true')\n\n\n"
                "def main(args):\n    if args.world_size == -1:\n"
                "        args.world_size = int(os.environ['WORLD_SIZE'])\n"
                "    args.distributed = args.world_size > 1 or args.multiprocessing_distributed\n"
                "    args.world_size = torch.cuda.device_count() * args.world_size\n"
                "    if args.distributed:\n"
                "        dist.init_process_group('nccl', world_size=args.world_size)\n\n\n"
                "if __name__ == '__main__':\n    main(parser.parse_args())\n",
                "import argparse\nimport os\n\nimport torch\nimport torch.distributed as dist\n\n"
                "parser = argparse.ArgumentParser()\n"
                "parser.add_argument('--world-size', default=-1, type=int)\n"
                "parser.add_argument('--multiprocessing-distributed', action='store_true')\n\n\n"
                "def main(args):\n    if args.world_size == -1:\n"
                "        args.world_size = int(os.environ['WORLD_SIZE'])\n"
                "    args.distributed = args.world_size > 1 or args.multiprocessing_distributed\n"
                "    args.world_size = (torch.cuda.device_count() or 1) * args.world_size\n"
                "    if args.distributed:\n"
                "        dist.init_process_group('nccl' if torch.cuda.is_available() else 'gloo', "
                "world_size=args.world_size)\n"
                "\n\nif __name__ == '__main__':\n    main(parser.parse_args())\n"),
        # an `if` on the data beside a CUDA-only call on no condition (DINO's SyncBatchNorm under
        # `if utils.has_batchnorms(student):`): no choice of the author's either
        Example("import torch\nimport torch.nn as nn\n\n\ndef build(model, has_batchnorms):\n"
                "    if has_batchnorms(model):\n        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
                "    torch.cuda.synchronize()\n    return model\n",
                "import torch\nimport torch.nn as nn\n\n\ndef build(model, has_batchnorms):\n"
                "    if has_batchnorms(model):\n"
                "        model = nn.SyncBatchNorm.convert_sync_batchnorm(model) if torch.cuda.is_available() "
                "else model\n"
                "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    return model\n"),
        # a distributed setup that refuses the CPU after asking (DINO's init_distributed_mode):
        # the branch meant for one GPU runs without one too
        Example("import os\nimport sys\n\nimport torch\nimport torch.distributed as dist\n\n\n"
                "def init_distributed_mode(args):\n    if 'RANK' in os.environ:\n"
                "        args.rank = int(os.environ['RANK'])\n    # launched naively\n"
                "    elif torch.cuda.is_available():  # one GPU\n        print('Will run the code on one GPU.')\n"
                "        args.rank = 0\n    else:\n        print('Does not support training without GPU.')\n"
                "        sys.exit(1)\n"
                "    dist.init_process_group(backend='gloo', init_method='env://', world_size=1, rank=args.rank)\n",
                "import os\n\nimport torch\nimport torch.distributed as dist\n\n\n"
                "def init_distributed_mode(args):\n    if 'RANK' in os.environ:\n"
                "        args.rank = int(os.environ['RANK'])\n    # launched naively\n"
                "    else:  # one GPU\n        print('Will run the code on one GPU.')\n"
                "        args.rank = 0\n"
                "    dist.init_process_group(backend='gloo', init_method='env://', world_size=1, rank=args.rank)\n"),
        # ... in a script; display where the branch names a GPU itself (it needs a CPU path by hand)
        Example("import os\nimport sys\nimport torch\n\n\ndef main():\n    if 'RANK' in os.environ:\n"
                "        rank = int(os.environ['RANK'])\n    elif torch.cuda.is_available():\n        rank = 0\n"
                "    else:\n        print('no GPU')\n        sys.exit(1)\n    print(torch.zeros(1) + rank)\n\n\n"
                "if __name__ == '__main__':\n    main()\n",
                "import os\nimport torch\n\n\ndef main():\n    if 'RANK' in os.environ:\n"
                "        rank = int(os.environ['RANK'])\n    else:\n        rank = 0\n"
                "    print(torch.zeros(1) + rank)\n\n\n"
                "if __name__ == '__main__':\n    main()\n"),
        Example("import sys\nimport torch\n\n\ndef main():\n    if sys.argv[1:] == ['--fast']:\n"
                "        device = 'cuda:0'\n    elif torch.cuda.is_available():\n        device = 'cuda'\n"
                "    else:\n        print('no GPU')\n        sys.exit(1)\n    print(torch.zeros(1).to(device))\n\n\n"
                "if __name__ == '__main__':\n    main()\n"),
        # the command line's default backend (pytorch/examples' ImageNet trainer)
        Example("import argparse\nimport torch\nimport torch.distributed as dist\n"
                "parser = argparse.ArgumentParser()\n"
                "parser.add_argument('--dist-backend', default='nccl', type=str)\n"
                "args = parser.parse_args()\ndist.init_process_group(backend=args.dist_backend)\n",
                "import argparse\nimport torch\nimport torch.distributed as dist\n"
                "parser = argparse.ArgumentParser()\n"
                "parser.add_argument('--dist-backend', default='nccl' if torch.cuda.is_available() else 'gloo', "
                "type=str)\n"
                "args = parser.parse_args()\ndist.init_process_group(backend=args.dist_backend)\n"),
        # ... or a divisor, the rank's GPU on a scheduler's path (DETR's SLURM branch: a test of
        # the launcher's environment is no condition); a count modulo something is no divisor
        Example("import os\nimport torch\n\n\ndef init(args):\n    if 'SLURM_PROCID' in os.environ:\n"
                "        args.rank = int(os.environ['SLURM_PROCID'])\n"
                "        args.gpu = args.rank % torch.cuda.device_count()\n"
                "    return args, torch.cuda.device_count() % 2\n",
                "import os\nimport torch\n\n\ndef init(args):\n    if 'SLURM_PROCID' in os.environ:\n"
                "        args.rank = int(os.environ['SLURM_PROCID'])\n"
                "        args.gpu = args.rank % (torch.cuda.device_count() or 1)\n"
                "    return args, torch.cuda.device_count() % 2\n"),
        # SyncBatchNorm: plain batch norms on the CPU
        Example("import torch\nimport torch.nn as nn\n\n\ndef build(rank):\n    model = nn.Sequential(nn.Conv2d(3, 8, 3), "
                "nn.BatchNorm2d(8))\n    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)\n    return model\n",
                "import torch\nimport torch.nn as nn\n\n\ndef build(rank):\n    model = nn.Sequential(nn.Conv2d(3, 8, 3), "
                "nn.BatchNorm2d(8))\n    model = nn.SyncBatchNorm.convert_sync_batchnorm(model) if torch.cuda.is_available() "
                "else model\n    return model\n"),
        # the result is kept: what uses it needs a CPU path of its own (display) ...
        Example("import torch\ndef timer():\n    start = torch.cuda.Event(enable_timing=True)\n"
                "    start.record()\n    return start\n"),
        Example("import torch\ndef rank_of(world):\n    index = torch.cuda.current_device()\n"
                "    return index % world\n"),
        # ... unless it has a CPU counterpart: the current device used as a device, a device's name
        Example("import torch\n\n\ndef step(model, batch):\n    dev = torch.cuda.current_device()\n"
                "    model = model.to(dev)\n    loss = torch.zeros((), device=torch.cuda.current_device())\n"
                "    return model(batch.to(dev)) + loss\n",
                "import torch\n\n\ndef step(model, batch):\n"
                "    dev = torch.cuda.current_device() if torch.cuda.is_available() else \"cpu\"\n"
                "    model = model.to(dev)\n"
                "    loss = torch.zeros((), device=torch.cuda.current_device() if torch.cuda.is_available() "
                "else \"cpu\")\n"
                "    return model(batch.to(dev)) + loss\n"),
        Example("import torch\n\n\ndef describe(config):\n    config[\"gpu\"] = torch.cuda.get_device_name(0)\n"
                "    return config\n",
                "import torch\n\n\ndef describe(config):\n"
                "    config[\"gpu\"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"cpu\"\n"
                "    return config\n"),
        # pinned memory: kept as it is on the CPU
        Example("import torch\n\n\ndef gather_buffer(n):\n    buf = torch.ByteTensor(n).pin_memory()\n"
                "    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)\n    return buf, host\n",
                "import torch\n\n\ndef gather_buffer(n):\n"
                "    buf = torch.ByteTensor(n).pin_memory() if torch.cuda.is_available() else torch.ByteTensor(n)\n"
                "    host = torch.empty(n, dtype=torch.uint8, pin_memory=torch.cuda.is_available())\n    return buf, host\n"),
        Example("import torch\n\n\ndef prefetch(batch, device):\n"
                "    return [t.pin_memory().to(device, non_blocking=True) for t in batch]\n",
                "import torch\n\n\ndef prefetch(batch, device):\n"
                "    return [(t.pin_memory() if torch.cuda.is_available() else t).to(device, non_blocking=True) for t in batch]\n"),
        # an assertion that CUDA is there: removed (the module's GPUs are then TDL007's)
        Example("import torch\n\nassert torch.cuda.is_available(), 'You need an Nvidia GPU with CUDA installed.'\n\n\n"
                "class Trainer:\n    def __init__(self, rank):\n        self.net = torch.nn.Linear(2, 2).cuda(rank)\n",
                "import torch\n\n\nclass Trainer:\n    def __init__(self, rank):\n"
                "        self.net = torch.nn.Linear(2, 2).cuda(rank)\n"),
        Example("import torch\n\n\ndef init_distributed():\n    assert torch.cuda.is_available(), (\n"
                "        'Distributed mode requires CUDA.')\n\n\ndef setup(rank):\n"
                "    assert torch.cuda.is_available()  # GPUs only\n    return rank\n",
                "import torch\n\n\ndef init_distributed():\n    pass\n\n\ndef setup(rank):\n    return rank\n"),
        # the test in brackets over three lines (YOLOX's worker): the message quotes it on one
        Example("import torch\n\n\ndef _distributed_worker(local_rank, main_func):\n    assert (\n"
                "        torch.cuda.is_available()\n    ), 'cuda is not available. Please check your installation.'\n"
                "    main_func(local_rank)\n",
                "import torch\n\n\ndef _distributed_worker(local_rank, main_func):\n    main_func(local_rank)\n"),
        # a script that refuses to start without CUDA: the stop removed
        Example("import sys\n\nimport torch\n\n\ndef main():\n    if not torch.cuda.is_available():\n"
                "        print('no gpu device available')\n        sys.exit(1)\n    print(torch.ones(2).sum())\n\n\n"
                "if __name__ == '__main__':\n    if not torch.cuda.is_available(): raise RuntimeError('requires CUDA')\n"
                "    main()\n",
                "import torch\n\n\ndef main():\n    print(torch.ones(2).sum())\n\n\n"
                "if __name__ == '__main__':\n    main()\n"),
        # ... the modules the stop used stay where other code reads them too
        Example("import logging\nimport sys\n\nimport torch\n\n\ndef main():\n    if not torch.cuda.is_available():\n"
                "        logging.info('no gpu device available')\n        sys.exit(1)\n"
                "    logging.info('on %s', sys.platform)\n\n\nif __name__ == '__main__':\n    main()\n",
                "import logging\nimport sys\n\nimport torch\n\n\ndef main():\n"
                "    logging.info('on %s', sys.platform)\n\n\nif __name__ == '__main__':\n    main()\n"),
        # ... through the name that holds the answer (the name stays: other code may read it)
        Example("import torch\n\nuse_cuda = torch.cuda.is_available()\nif not use_cuda:\n"
                "    exit('Please run on a machine with a GPU')\nprint(torch.ones(2).sum())\n",
                "import torch\n\nuse_cuda = torch.cuda.is_available()\nprint(torch.ones(2).sum())\n"),
        # data parallelism by hand: no CPU counterpart to write (display)
        Example("import torch.nn as nn\n\n\ndef loss_over(generator, out, devices):\n"
                "    replicas = nn.parallel.replicate(generator, devices)\n"
                "    chunks = nn.parallel.scatter(out, target_gpus=devices)\n"
                "    return nn.parallel.gather(nn.parallel.parallel_apply(replicas, chunks), devices[0])\n"),
        # NVML's readings in a log line: the line runs only where CUDA is
        Example("import torch\n\n\ndef log(step):\n    print(step, torch.cuda.utilization())\n",
                "import torch\n\n\ndef log(step):\n    if torch.cuda.is_available():\n"
                "        print(step, torch.cuda.utilization())\n"),
        # a library's module level: the test would run at every import (display)
        Example("import torch\nCAPABILITY = torch.cuda.get_device_capability()\n"),
        Example("import torch\ntorch.cuda.synchronize()\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        entered = _entered_device_blocks(a)
        counted = set()  # a count or a backend that two calls read is reported once, where it is bound
        for site in a.calls:
            branch = _stopping_else(ctx, site)
            if branch is not None:  # elif torch.cuda.is_available(): ... else: sys.exit(1) -> else: ...
                yield ctx.violation(
                    branch.orelse, f"`else: {_exit_of(branch.orelse)}` after `elif {a.code(site.node)}:` stops the "
                                   "program where CUDA is not available: nothing after it runs on the CPU",
                    self._run_branch(ctx, branch))
                continue
            stop = _cuda_stop(ctx, site)
            if stop is not None:  # assert torch.cuda.is_available() -> removed
                spelled = (f"assert {a.code(stop.test)}" if isinstance(stop, cst.Assert)
                           else f"if {a.code(stop.test)}: {_exit_of(stop)}")
                yield ctx.violation(stop, f"`{spelled}` stops the program where CUDA is not available: "
                                          "nothing after it runs on the CPU", self._remove(ctx, site, stop))
                continue
            block = site.node in entered
            named, sync_bn, count, factor, pinned = _what(a, site)
            backend = named[1] if named is not None else None
            test = _tested(a, site) if site.qualname in N.CUDA_ONLY else None
            if test is not None:  # if torch.cuda.get_device_capability()[0] >= 8: -> if ... and ...
                if unconditional(ctx, site, site.node, stops_only=True, header=site.line is None):
                    yield ctx.violation(site.node, f"`{a.code(site.node.func)}()` in a test {_NEEDS}",
                                        self._and_available(ctx, site, test))
                continue
            if (count is not None and count in counted) or (backend is not None and backend in counted) or (
                    named is not None and named[0] is not site
                    and not unconditional(ctx, named[0], backend, stops_only=True)):
                continue  # (reported at the binding two calls share; a backend chosen on a condition)
            if not (backend is not None or _cuda_only(a, site, entered)) or not (
                    unconditional(ctx, site, site.node, stops_only=True, header=block)
                    or _beside_unconditional(ctx, site, entered)):
                continue
            func = a.code(site.node.func)
            if count is not None:  # nprocs=torch.cuda.device_count() -> ... or 1
                counted.add(count)
                yield ctx.violation(
                    count, f"`{func}()` starts one process per GPU (`{a.code(count)}`): without CUDA it starts none, "
                           "and the work it hands them does not run",
                    self._one_process(ctx, site, count))
            elif factor is not None:  # batch_size * torch.cuda.device_count() -> (... or 1)
                yield ctx.violation(
                    site.node, f"`{func}()` is a divisor (`{a.code(factor)}`): zero without CUDA (a division by zero)"
                    if isinstance(factor.operator, cst.Modulo) else
                    f"`{func}()` is a factor (`{a.code(factor)}`): zero without CUDA (a batch size of 0, a learning "
                    "rate of 0, a division by zero)",
                    self._at_least_one(ctx, site, parens=site.node in (factor.left, factor.right)))
            elif backend is not None:  # "nccl" -> "nccl" if ... else "gloo", where it is written
                counted.add(backend)
                q = backend.quote
                yield ctx.violation(
                    backend, f"`{func}({a.code(backend)})`: the NCCL backend {_NEEDS}",
                    self._or_else(ctx, named[0], backend, f"{q}gloo{q}", new_query=True,  # type: ignore[index]
                                  message="Use NCCL when CUDA is available, else gloo (the same collectives on the CPU)"))
            elif sync_bn is not None:  # convert_sync_batchnorm(model) -> ... else model
                yield ctx.violation(
                    site.node, f"`{func}()`: SyncBatchNorm (\"expected input tensor to be on GPU\") {_NEEDS}",
                    self._or_else(ctx, site, site.node, a.code(sync_bn), new_query=True, parens=not stands_alone(site),
                                  message="Convert only when CUDA is available (plain batch norms on the CPU)"))
            elif isinstance(pinned, cst.Arg):  # pin_memory=True -> pin_memory=torch.cuda.is_available()
                yield ctx.violation(
                    pinned, f"`{func}(..., pin_memory=True)`: pinned memory {_NEEDS}",
                    self._when_available(ctx, site, pinned.value, lambda torch: f"{torch}.cuda.is_available()",
                                         new_query=False, message="Pin only when CUDA is available"))
            elif pinned is not None:  # x.pin_memory() -> x.pin_memory() if ... else x
                message = "Pin only when CUDA is available (the tensor as it is on the CPU)"
                receiver = a.code(pinned)
                yield ctx.violation(
                    site.node, f"`{func}()`: pinned memory {_NEEDS}",
                    Fix(Applicability.DISPLAY, f"{message} (display only: name the tensor first, not to write "
                                               "its expression twice)")
                    if len(receiver) > _REPEATABLE or "\n" in receiver else
                    self._or_else(ctx, site, site.node, receiver, new_query=False, parens=not stands_alone(site),
                                  message=message))
            elif block:  # with torch.cuda.device(k): -> k if ... else -1, a no-op (as torch documents)
                arg = site.positional(0) or site.keyword("device")
                yield ctx.violation(
                    site.node, f"`{func}()` {_NEEDS}",
                    self._or_else(ctx, site, arg.value, "-1", new_query=False,  # type: ignore[union-attr]
                                  message="Enter the device only when CUDA is available (a negative index is a no-op)"))
            else:
                yield ctx.violation(site.node, f"`{func}()` {_NEEDS}", self._fix(ctx, site))

    def _remove(self, ctx: Context, site: CallSite, stop: Union[cst.Assert, cst.If]) -> Fix:
        """The stop's lines removed (``pass`` where it is its block's only statement)."""
        what = "assertion" if isinstance(stop, cst.Assert) else "stop"
        message = f"Remove the {what}: without CUDA the code runs on the CPU (with the migration's CPU fallbacks)"
        a = ctx.analysis
        line = (_held_stop(ctx, site)[1] or site.line) if isinstance(stop, cst.Assert) else stop
        assert line is not None  # (an assertion's test: a statement line)
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) > 1:
            return Fix(Applicability.DISPLAY, f"{message} (display only: the line holds other statements: "
                                              "split it first)")
        unused = _imports_only_in(ctx, stop)
        if _alone_in_block(a, line):
            return Fix(Applicability.UNSAFE, message, (ctx.replace(stop, "pass"), *unused))
        gone = ctx.remove_lines(line)
        assert gone is not None  # (one statement on its line: tested above)
        return Fix(Applicability.UNSAFE, message, (gone, *unused))

    def _run_branch(self, ctx: Context, branch: cst.If) -> Fix:
        """``elif torch.cuda.is_available():`` becomes ``else:``, and the ``else`` that
        stopped goes: without CUDA the program takes the branch meant for one GPU. One
        edit, from ``elif`` to the end of the ``else`` (its body as written)."""
        a = ctx.analysis
        message = ("Take the branch meant for CUDA without it too, and remove the stop (on the CPU, with the "
                   "migration's CPU fallbacks)")
        if "cuda" in a.code(branch.body).lower():
            return Fix(Applicability.DISPLAY, f"{message} (display only: the branch names a GPU itself: give it a "
                                              "CPU path by hand)")
        start, end = ctx.start(branch), ctx.end(branch.orelse)
        body = _written(a, ctx.end(branch.test), ctx.end(branch.body.body[-1]))  # `:` ... the branch's last line
        return Fix(Applicability.UNSAFE, message, (Edit(start, end, f"else{body}", _written(a, start, end)),
                                                   *_imports_only_in(ctx, branch.orelse)))

    def _one_process(self, ctx: Context, site: CallSite, count: cst.Call) -> Fix:
        """``torch.cuda.device_count()`` -> ``torch.cuda.device_count() or 1`` (an
        assignment's value or ``nprocs``: no parentheses needed): one process, on the CPU,
        where there is no GPU; the same count where there are."""
        message = "Start one process where there is no GPU: `torch.cuda.device_count() or 1`"
        try:  # (no new query: device_count() is called there anyway)
            torch_for_test(ctx, site, new_query=False)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{message} (display only: {exc})")
        return Fix(Applicability.UNSAFE, message, (ctx.replace(count, f"{ctx.analysis.code(count)} or 1"),))

    def _at_least_one(self, ctx: Context, site: CallSite, parens: bool) -> Fix:
        """``torch.cuda.device_count()`` -> ``(torch.cuda.device_count() or 1)`` (no
        parentheses as an assignment's value): one where there is no GPU, the same count
        where there are."""
        message = "Count one where there is no GPU: `torch.cuda.device_count() or 1`"
        try:  # (no new query: device_count() is called there anyway)
            torch_for_test(ctx, site, new_query=False)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{message} (display only: {exc})")
        code = f"{ctx.analysis.code(site.node)} or 1"
        return Fix(Applicability.UNSAFE, message, (ctx.replace(site.node, f"({code})" if parens else code),))

    def _and_available(self, ctx: Context, site: CallSite, test: cst.BaseExpression) -> Fix:
        """A test that calls CUDA -> ``torch.cuda.is_available() and (test)``: false
        without CUDA (the code's other branch), the same test with it."""
        code = ctx.analysis.code(test)
        if isinstance(test, (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.NamedExpr)) and not test.lpar:
            code = f"({code})"
        return self._when_available(ctx, site, test, lambda torch: f"{torch}.cuda.is_available() and {code}",
                                    message="Ask for CUDA first: the test is false without it", new_query=False)

    def _or_else(self, ctx: Context, site: CallSite, node: cst.BaseExpression, otherwise: str, message: str,
                 new_query: bool, parens: bool = False) -> Fix:
        """``node`` -> ``node if torch.cuda.is_available() else otherwise``. ``new_query``:
        the test is the first CUDA query there (not where the call initialised CUDA anyway)."""
        code = ctx.analysis.code(node)
        code = f"({code})" if isinstance(node, cst.NamedExpr) else code
        return self._when_available(
            ctx, site, node, lambda torch: f"{'(' if parens else ''}{code} if {torch}.cuda.is_available() "
                                           f"else {otherwise}{')' if parens else ''}", message, new_query)

    def _when_available(self, ctx: Context, site: CallSite, node: cst.BaseExpression, text: Callable[[str], str],
                        message: str, new_query: bool) -> Fix:
        """``node`` -> ``text(torch)``, an expression that asks ``torch.cuda.is_available()``."""
        try:
            torch, imports = torch_for_test(ctx, site, new_query=new_query)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{message} (display only: {exc})")
        return Fix(Applicability.UNSAFE, message, tuple(imports) + (ctx.replace(node, text(torch)),))

    def _fix(self, ctx: Context, site: CallSite) -> Fix:
        """The statement under ``if torch.cuda.is_available():``, or the call's CPU
        counterpart where its result is kept and has one."""
        message = "Run the statement only when CUDA is available"
        line = site.line
        assert line is not None  # (unconditional: the call is in a statement line)
        kept = not isinstance(line.body[0], cst.Expr)
        counterpart = _cpu_counterpart(ctx.analysis, site, kept)
        if counterpart is not None:
            q = string_quote(site.parent or site)
            return self._or_else(ctx, site, site.node, f"{q}cpu{q}", new_query=False, parens=not stands_alone(site),
                                 message=f"{counterpart} where CUDA is not available: `... else {q}cpu{q}`")
        if len(line.body) > 1:
            return Fix(Applicability.DISPLAY, f"{message} (display only: the line holds other statements: "
                                              "split it first)")
        if kept:
            return Fix(Applicability.DISPLAY, f"{message} (display only: its result is kept: give what uses "
                                              "it a CPU path by hand)")
        outer = _does_more(line.body[0].value, site.node)
        if outer is not None:
            return Fix(Applicability.DISPLAY, f"{message} (display only: the statement does more with its "
                                              f"result, `{ctx.analysis.code(outer.func)}(...)`, which skipping "
                                              "it would lose: give it a CPU path by hand)")
        try:  # (no new query: the call it guards initialised CUDA at this point anyway)
            torch, imports = torch_for_test(ctx, site, new_query=False)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{message} (display only: {exc})")
        return Fix(Applicability.UNSAFE, message, tuple(imports) + (guard_statement(ctx, line, torch),))


# modules a stop reports and exits with, whose import does nothing else: once the stop is
# gone and nothing else reads them, their import goes too (flake8's F401 would say it)
_STOP_MODULES = frozenset({"sys", "os", "logging", "warnings"})


def _imports_only_in(ctx: Context, removed: cst.CSTNode) -> List[Edit]:
    """The edits that remove the module-level ``import sys`` (a line of its own, no
    alias) of each module in ``_STOP_MODULES`` that ``removed`` reads and no other code of
    the module names (any name so spelled counts: a parameter, an attribute's owner)."""
    a = ctx.analysis
    inside = Counter(names_in(removed))
    read = set(inside) & _STOP_MODULES
    if not read:
        return []
    everywhere = Counter(names_in(a.module))
    edits: List[Edit] = []
    for stmt in a.module.body:
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                and isinstance(stmt.body[0], cst.Import) and len(stmt.body[0].names) == 1):
            continue
        alias = stmt.body[0].names[0]
        name = a.code(alias.name)
        if alias.asname is None and name in read and everywhere[name] - inside[name] == 1:  # the import's own
            gone = ctx.remove_lines(stmt)
            if gone is not None:
                edits.append(gone)
    return edits


def _cuda_stop(ctx: Context, site: CallSite) -> Union[cst.Assert, cst.If, None]:
    """Where the code stops without CUDA by the author's word alone: ``assert
    torch.cuda.is_available()`` (a message or not), or, in a script, ``if not
    torch.cuda.is_available():`` whose body only reports and stops (``raise``,
    ``sys.exit(...)``; a library's guards kernels that need CUDA), where it runs whatever
    happens: not under an ``if`` (``if args.cuda: assert ...`` checks what the user asked
    for), not in a ``try`` (a handler may catch it), not in a function or class named or
    decorated for GPUs, not an assertion in test code (a module that imports pytest or
    unittest: a test's helper asserting what it needs). Not a count or a combined test
    (``assert torch.cuda.device_count() >= 2``: a requirement of its own)."""
    if site.qualname != "torch.cuda.is_available" or site.node.args:
        return None
    line = site.line
    if line is not None and isinstance(line.body[0], cst.Assert) and line.body[0].test is site.node:
        stop: Union[cst.Assert, cst.If, None] = line.body[0]
    else:
        stop = _held_stop(ctx, site)[0] or _stop_ifs(ctx).get(site.node)
    if isinstance(stop, cst.Assert) and ctx.analysis.test_code:
        return None
    if stop is None or chosen_conditionally(ctx, site, site.node) or meant_for_gpus(ctx.analysis, site.scope) or any(
            part in ("try", "handler") for _, part in site.cond):
        return None
    return stop


def _beside_unconditional(ctx: Context, site: CallSite, entered: set) -> bool:
    """Whether ``site`` needs CUDA once an ``if`` on the data is no condition, in a
    function that holds a CUDA-only call on no condition (``beside_unconditional``, as
    TDL007 reads it: DINO's ``convert_sync_batchnorm`` under ``if
    utils.has_batchnorms(student):`` beside the rank's ``.cuda()`` calls and NCCL's
    collectives is no choice of the author's either)."""
    a = ctx.analysis
    if not unconditional(ctx, site, site.node, stops_only=True, header=site.node in entered, data_too=True):
        return False
    beside = a.memo.get("tdl008_beside")
    if beside is None:
        beside = a.memo["tdl008_beside"] = beside_unconditional(a, [
            (s, unconditional(ctx, s, s.node, stops_only=True, header=s.node in entered))
            for s in a.calls if _cuda_only(a, s, entered)])
    fn = a.enclosing_function(site.scope)
    return (id(fn.node) if fn is not None else 0) in beside


def _cuda_only(a, site: CallSite, entered: set) -> bool:
    """Whether the call at ``site`` needs CUDA by what it is (the candidates of ``check``,
    but for a backend a name holds, judged where it is bound)."""
    named, sync_bn, count, factor, pinned = _what(a, site)
    return (site.qualname in N.CUDA_ONLY or site.node in entered or (named is not None and named[0] is site)
            or sync_bn is not None or count is not None or factor is not None or pinned is not None
            or _binds_a_gpu(a, site))


def _what(a, site: CallSite) -> tuple:
    """What makes the call at ``site`` CUDA-only, once per site (``check`` and
    ``_cuda_only`` both ask): the NCCL backend it names (and where it is set), the module
    it converts to SyncBatchNorm, the GPU count it starts processes by, the count it
    multiplies or divides by, what it pins."""
    memo = a.memo.setdefault("tdl008_what", {})
    found = memo.get(site.node)
    if found is None:
        count = _gpu_count_processes(a, site)
        found = memo[site.node] = (_nccl_backend(a, site), _sync_batchnorm_module(site), count,
                                   _factor(a, site) if count is None else None, _pinned(a, site))
    return found


def _written(a, start: Tuple[int, int], end: Tuple[int, int]) -> str:
    """The source between two positions, as written (lines joined by the module's own
    line break)."""
    lines = a.lines[start[0] - 1:end[0]]
    if len(lines) == 1:
        return lines[0][start[1]:end[1]]
    return a.module.default_newline.join([lines[0][start[1]:]] + lines[1:-1] + [lines[-1][:end[1]]])


def _stopping_else(ctx: Context, site: CallSite) -> Optional[cst.If]:
    """The ``elif`` that ``torch.cuda.is_available()`` at ``site`` is the whole test of,
    when its ``else`` only reports and stops (DINO's ``init_distributed_mode``: a launcher's
    environment, else SLURM's, ``elif torch.cuda.is_available():`` one process on one GPU,
    ``else: print('Does not support training without GPU.'); sys.exit(1)``), after
    tests that name nothing of a device (``if args.cpu:`` before it is the CPU's path:
    the stop is then the author's answer to a missing GPU); in a script,
    or in a function that starts a process group (a distributed setup that refuses the
    CPU, not a library's kernel guard); the chain under no other condition, not in a
    ``try``, nor in code named or decorated for GPUs."""
    if site.qualname != "torch.cuda.is_available" or site.node.args:
        return None
    a = ctx.analysis
    chains = a.memo.get("tdl008_elif_stops")
    if chains is None:
        chains = a.memo["tdl008_elif_stops"] = {}
        for root in a.ifs.values():
            chain, branch = [id(root)], root.orelse
            while isinstance(branch, cst.If) and not device_words(a.code(a.ifs[chain[-1]].test)):
                chain.append(id(branch))  # (not after a test of the device: `if args.cpu:` is the CPU's path)
                smalls = _smalls(branch.orelse) if isinstance(branch.orelse, cst.Else) else []
                if smalls and _exit_of(branch.orelse) and all(  # (only reports, then stops)
                        isinstance(x, cst.Expr) and isinstance(x.value, cst.Call) for x in smalls[:-1]):
                    chains.setdefault(branch.test, (branch, frozenset(chain)))  # (from the chain's first `if`)
                branch = branch.orelse
    branch, chain = chains.get(site.node, (None, frozenset()))
    if branch is None or meant_for_gpus(a, site.scope) or any(
            part in ("try", "handler") or (part in ("body", "orelse", "case") and key not in chain)
            for key, part in site.cond):
        return None
    if not a.devices.is_script:  # (a library: only in a function that starts a process group)
        fn = a.enclosing_function(site.scope)
        if fn is None or not any(s.qualname in N.INIT_PROCESS_GROUP_TORCH and a.enclosing_function(s.scope) is fn
                                 for s in a.calls):
            return None
    return branch


def _held_stop(ctx: Context, site: CallSite) -> Tuple[Union[cst.Assert, cst.If, None], Optional[cst.BaseStatement]]:
    """``use_cuda = torch.cuda.is_available()`` (the call at ``site``, the name's one
    binding) then, later in the same block, ``assert use_cuda`` (``is True``, ``== True``;
    a message or not) or, in a script, ``if not use_cuda:`` that only reports and stops
    (``_stop_ifs``): the stop and its statement, the stops through a name that scripts
    write; (None, None) otherwise."""
    memo = ctx.analysis.memo.setdefault("tdl008_held_stops", {})
    if site.node not in memo:
        memo[site.node] = _find_held_stop(ctx, site)
    return memo[site.node]


def _find_held_stop(ctx: Context,
                    site: CallSite) -> Tuple[Union[cst.Assert, cst.If, None], Optional[cst.BaseStatement]]:
    a = ctx.analysis
    line = site.line
    small = line.body[0] if line is not None and len(line.body) == 1 else None
    if not (isinstance(small, cst.Assign) and small.value is site.node and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)):
        return None, None
    name = small.targets[0].target.value
    scope, _ = a.lookup(name, site.scope)
    if scope is None or len(scope.bindings.get(name, ())) != 1:
        return None, None
    block, _ = _block_of(a, line)
    at = next((i for i, stmt in enumerate(block) if stmt is line), None)  # (a block it cannot see: none)
    stop_ifs = _stop_ifs(ctx)
    for later in block[at + 1:] if at is not None else ():
        tested = later.test.expression if isinstance(later, cst.If) and isinstance(later.test, cst.UnaryOperation) \
            else None  # `if not use_cuda:`, a stop when `_stop_ifs` has it under the name it tests
        if isinstance(tested, cst.Name) and tested.value == name and stop_ifs.get(tested) is later:
            return later, later  # type: ignore[return-value]
        test = later.body[0].test if isinstance(later, cst.SimpleStatementLine) and isinstance(
            later.body[0], cst.Assert) else None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(
                test.comparisons[0].operator, (cst.Is, cst.Equal)) and a.code(test.comparisons[0].comparator) == "True":
            test = test.left
        if isinstance(test, cst.Name) and test.value == name:
            return later.body[0], later  # type: ignore[return-value]
    return None, None


def _stop_ifs(ctx: Context) -> dict:
    """In a script, each ``if not <call>:`` or ``if not <name>:`` (no ``else``) whose
    body only reports and stops, by the call or name it tests (once per module)."""
    a = ctx.analysis
    if "tdl008_stop_ifs" not in a.memo:
        found = a.memo["tdl008_stop_ifs"] = {}
        for stmt in a.statements if a.devices.is_script else ():
            if not (isinstance(stmt, cst.If) and isinstance(stmt.test, cst.UnaryOperation)
                    and isinstance(stmt.test.operator, cst.Not)
                    and isinstance(stmt.test.expression, (cst.Call, cst.Name))):
                continue
            smalls = _smalls(stmt)
            if (stmt.orelse is None and smalls and _exit_of(stmt)
                    and all(isinstance(x, cst.Expr) and isinstance(x.value, cst.Call) for x in smalls[:-1])):
                found[stmt.test.expression] = stmt
    return a.memo["tdl008_stop_ifs"]


def _smalls(stop: Union[cst.If, cst.Else]) -> list:
    """The small statements of an ``if``'s (or an ``else``'s) body, when it holds nothing else (one per line,
    or one line after the colon); [] otherwise."""
    if isinstance(stop.body, cst.SimpleStatementSuite):
        return list(stop.body.body)
    lines = stop.body.body
    if all(isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 for line in lines):
        return [line.body[0] for line in lines]  # type: ignore[union-attr]
    return []


def _exit_of(stop: Union[cst.If, cst.Else]) -> Optional[str]:
    """How the body of ``stop`` ends the program: ``raise ...`` or ``sys.exit(...)``
    (``exit``, ``quit``, ``os._exit``), as the message spells it; None otherwise."""
    smalls = _smalls(stop)
    small = smalls[-1] if smalls else None
    if isinstance(small, cst.Raise):
        return "raise ..."
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name in ("exit", "quit", "_exit"):
            return f"{cst.Module([]).code_for_node(func)}(...)"
    return None


def _alone_in_block(a, line: cst.BaseStatement) -> bool:
    """Whether ``line`` is the only statement of an indented block (removing it would
    leave the block empty)."""
    block, indented = _block_of(a, line)
    return indented and len(block) == 1


def _block_of(a, line: cst.BaseStatement) -> Tuple[Sequence[cst.BaseStatement], bool]:
    """The statements of the block that holds ``line``, and whether it is an indented
    block (else the module's own)."""
    for stmt in a.statements:
        parts = [stmt] + [c for c in stmt.children if isinstance(c, (cst.Else, cst.Finally, cst.ExceptHandler,
                                                                      cst.ExceptStarHandler, cst.MatchCase))]
        for part in parts:
            body = getattr(part, "body", None)
            if isinstance(body, cst.IndentedBlock) and any(s is line for s in body.body):
                return body.body, True
    return a.module.body, False


def _nccl_backend(a, site: CallSite):
    """Where a ``torch.distributed.init_process_group`` call names the NCCL backend
    (first argument or ``backend=``), as (the site to judge the fix at, the ``"nccl"``
    string): the call's own literal, or the one a name or an attribute holds where it is
    bound (``BACKEND = "nccl"``, ``args.dist_backend = 'nccl'``), or the default of the
    command-line option an attribute holds (``add_argument('--dist-backend',
    default='nccl')``, pytorch/examples' ImageNet trainer and MoCo); not a conditional, a parameter, nor a mixed
    ``"cpu:gloo,cuda:nccl"`` (gloo serves the CPU there)."""
    if site.qualname not in N.INIT_PROCESS_GROUP_TORCH or site.has_star_args:
        return None
    arg = site.positional(0) or site.keyword("backend")
    value = arg.value if arg is not None else None
    where = site
    if isinstance(value, (cst.Name, cst.Attribute)):  # BACKEND, args.dist_backend (DETR's init_distributed_mode)
        held = held_device(a, site, value)
        option = option_site(a, value.attr.value) if held is None and isinstance(value, cst.Attribute) else None
        default = option.keyword("default") if option is not None else None
        where, value = (held, held.node) if held is not None else (option, default.value) if default else (None, None)
    if isinstance(value, cst.SimpleString) and str(value.evaluated_value).lower() == "nccl":
        return where, value
    return None


def _sync_batchnorm_module(site: CallSite) -> Optional[cst.BaseExpression]:
    """The module that ``torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)`` converts,
    when it is a name or an attribute chain (``model``, ``self.net``): what the CPU path
    keeps as it is."""
    if site.qualname != N.CONVERT_SYNC_BATCHNORM or site.has_star_args:
        return None
    arg = site.positional(0) or site.keyword("module")
    value = arg.value if arg is not None else None
    chain = value
    while isinstance(chain, cst.Attribute):
        chain = chain.value
    return value if isinstance(chain, cst.Name) else None


def _gpu_count_processes(a, site: CallSite) -> Optional[cst.Call]:
    """``mp.spawn(fn, nprocs=torch.cuda.device_count())``, or ``nprocs=world_size`` whose
    one binding in reach is ``world_size = torch.cuda.device_count()`` (or a name bound
    so, ``world_size = n_gpus``): the
    ``device_count()`` call that decides how many processes start (none without CUDA:
    ``spawn`` then returns at once). Not where the count is asserted (``assert world_size
    >= 2``: the author requires GPUs), nor a count already kept from zero."""
    if site.qualname not in N.INDEX_LAUNCHERS or site.has_star_args:
        return None
    arg = site.keyword("nprocs") or site.positional(2)
    value = arg.value if arg is not None else None
    for _ in range(3):  # nprocs=world_size, world_size = n_gpus, n_gpus = torch.cuda.device_count()
        if not isinstance(value, cst.Name):
            break
        scope, _ = a.lookup(value.value, site.scope)
        bindings = scope.bindings.get(value.value, ()) if scope is not None else ()
        if len(bindings) != 1 or bindings[0].kind != "assign":
            return None
        if re.search(rf"(?m)^[ \t]*assert\b[^\n]*\b{re.escape(value.value)}\b", a.text):
            return None
        value = bindings[0].value
    if isinstance(value, cst.Call) and not value.args and a.qualname(value.func, site.scope) == "torch.cuda.device_count":
        return value
    return None


def _tested(a, site: CallSite) -> Optional[cst.BaseExpression]:
    """The test a CUDA-only call is evaluated in whenever the test is: an ``if``
    statement's (``if torch.cuda.get_device_capability()[0] >= 8:``),
    or a conditional expression's in its statement (``torch.bfloat16 if
    torch.cuda.get_device_capability()[0] >= 8 else torch.float16``, VGGT's dtype). Not
    behind another test (``torch.cuda.is_available() and ...``: already asked)."""
    if site.line is not None:
        found: List[cst.IfExp] = []

        class Tests(cst.CSTVisitor):
            def visit_IfExp(self, node: cst.IfExp) -> None:
                if evaluated(node.test, site.node):
                    found.append(node)

        walk(site.line, Tests())
        return found[0].test if found else None
    return next((node.test for node in a.ifs.values() if evaluated(node.test, site.node)), None)


def _factor(a, site: CallSite) -> Optional[cst.BinaryOperation]:
    """Where ``torch.cuda.device_count()`` at ``site`` is multiplied or divided by (the
    arithmetic around it: ``args.batch_size * torch.cuda.device_count()``, ``steps //
    (bs * torch.cuda.device_count())``, ``rank % torch.cuda.device_count()``), or, as the
    value of ``n_gpu = ...`` (its one binding), the first of that name's uses, all of
    which are factors (``batch_size=2 * n_gpu``): without CUDA the product is zero. Not a
    product a keyword argument names workers with (``num_workers=4 * n_gpu``: none on the
    CPU does no harm), nor one a CUDA-only call takes (``torch.cuda.set_device(rank %
    num_gpus)``, mmcv's and BasicSR's: that call's own fix keeps it from running)."""
    if site.qualname != _COUNT or site.node.args or site.line is None:
        return None
    found = _uses_of_result(a, site)
    if found is None:
        found = _Uses(lambda n: n is site.node)
        walk(site.line, found)
    factor = found.factor()
    if factor is not None and any(
            (s.qualname in N.CUDA_ONLY or s.qualname in N.SET_DEVICE) and any(
                evaluated(arg.value, factor) is not None for arg in s.node.args) for s in a.calls):
        return None
    return factor


# calls a statement may be skipped with: reports of what they are given, and the ordering
# of CUDA streams and events (`x.record_stream(torch.cuda.current_stream())`: CUDA's own)
_SKIPPABLE = frozenset({"print", "pprint", "info", "debug", "warning", "warn", "error", "critical", "exception",
                        "log", "write", "add_scalar", "add_scalars", "add_text", "set_postfix", "set_postfix_str",
                        "set_description", "echo", "secho",
                        "record_stream", "wait_stream", "wait_event", "record_event", "record", "wait",
                        "synchronize"})


def _does_more(value: cst.BaseExpression, call: cst.Call) -> Optional[cst.Call]:
    """The outer call of an expression statement that does more with the CUDA call's
    result than report it (farm's checkpoint: `torch.save({..., "cuda_rng_state":
    torch.cuda.get_rng_state()}, path)`), which skipping the statement would lose; None
    where the statement is the call, a method called on its result
    (`torch.cuda.current_stream().synchronize()`), a report (`print(...)`,
    `logger.info(...)`), or a stream's ordering (YOLOX's prefetcher:
    `input.record_stream(torch.cuda.current_stream())`); not TensorRT's
    `context.execute_async_v2(..., stream_handle=torch.cuda.current_stream().cuda_stream)`."""
    while isinstance(value, cst.Await):
        value = value.expression
    node: cst.BaseExpression = value
    while node is not call:  # down the method chain
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            break
    if node is call or not isinstance(value, cst.Call):
        return None
    func = value.func
    name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    return None if name in _SKIPPABLE else value


def _cpu_counterpart(a, site: CallSite, kept: bool) -> Optional[str]:
    """What a CUDA query's result stands for on the CPU, where it has a counterpart there
    (said as the fix's message; the fix writes ``... else "cpu"``): the current device
    used as a device (``.to(torch.cuda.current_device())``, ``device=...``, ``map_location=``,
    ``torch.device(...)``, or through a name bound once to it whose every use is one;
    not ``.cuda(...)``, whose device must be a GPU), and the device's name when the
    result is kept (``name = torch.cuda.get_device_name(0)``, for a log line: "cpu").
    Else None: what uses it needs a CPU path by hand (an event, a stream, properties)."""
    if site.qualname == "torch.cuda.get_device_name":
        return "Name the CPU" if kept else None
    if site.qualname != "torch.cuda.current_device" or site.node.args:
        return None
    if site.parent is not None and any(value is site.node for value in site.parent.device_values()):
        return "Use the CPU"
    uses = _uses_of_result(a, site)
    if uses is None or not uses.nodes:
        return None
    if "device_values" not in a.memo:
        a.memo["device_values"] = {value for call in a.calls for value in call.device_values()}
    return "Use the CPU" if all(node in a.memo["device_values"] for node in uses.nodes) else None


def _uses_of_result(a, site: CallSite) -> Optional["_Uses"]:
    """The uses of the name that holds the call's result, where the call is the value of
    ``name = ...``, that name's one binding in its scope; else None."""
    line = site.line
    small = line.body[0] if line is not None and len(line.body) == 1 else None
    if not (isinstance(small, cst.Assign) and small.value is site.node and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)):
        return None
    target = small.targets[0].target
    scope, _ = a.lookup(target.value, site.scope)
    if scope is None or len(scope.bindings.get(target.value, ())) != 1:
        return None
    found = _Uses(lambda n: isinstance(n, cst.Name) and n.value == target.value and n is not target)
    walk(scope.node, found)
    return found


# (not `%`: `rank % torch.cuda.device_count()` is a rank's GPU index, its `set_device`'s finding)
_ARITHMETIC = (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo)


class _Uses(cst.CSTVisitor):
    """The uses of one node or name (``is_use``) in the code walked (``nodes``): each an
    operand of ``*``, ``/``, ``//`` or the divisor of ``%`` (the operation) or anything
    else (None)."""

    def __init__(self, is_use: Callable[[cst.CSTNode], bool]) -> None:
        self.is_use = is_use
        self.nodes: List[cst.CSTNode] = []
        self.uses: List[Optional[cst.BinaryOperation]] = []
        self.operands: set = set()
        self.workers: set = set()  # the values of `num_workers=`/`workers=` arguments

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value in _HARMLESS_FACTOR:
            self.workers.add(node.value)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, _ARITHMETIC):
            # (a modulus only as the divisor: `rank % torch.cuda.device_count()`, DETR's SLURM path)
            for side in (node.right,) if isinstance(node.operator, cst.Modulo) else (node.left, node.right):
                if self.is_use(side):
                    self.uses.append(node)
                    self.operands.add(side)

    def visit_Attribute(self, node: cst.Attribute) -> bool:  # `x.n_gpu` is not the name
        walk(node.value, self)
        return False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.is_use(node):
            self.nodes.append(node)
            if node not in self.operands:
                self.uses.append(None)
        return super().on_visit(node)

    def factor(self) -> Optional[cst.BinaryOperation]:
        """The first use, when every use is a factor and none a workers count."""
        if self.uses and all(u is not None and u not in self.workers for u in self.uses):
            return self.uses[0]
        return None


def _pinned(a, site: CallSite) -> Union[cst.BaseExpression, cst.Arg, None]:
    """What pins memory at ``site``: the receiver of ``x.pin_memory()`` (a method call
    with no arguments, in a module whose classes define no ``pin_memory`` of their own: a
    custom batch pins its tensors only when a loader asks it to), or the
    ``pin_memory=True`` argument of a torch call other than a ``DataLoader`` (which only
    warns without CUDA)."""
    if site.method == "pin_memory" and site.qualname is None and not site.node.args:
        if any("pin_memory" in c.methods for c in a.classes):
            return None
        return site.node.func.value  # type: ignore[union-attr]
    arg = site.keyword("pin_memory")
    if (arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "True" and site.qualname
            and site.qualname.startswith("torch.") and not site.qualname.endswith("DataLoader")):
        return arg
    return None


def _binds_a_gpu(a, site: CallSite) -> bool:
    """``torch.cuda.set_device(k)``, which raises without CUDA: a process's binding or a
    thread's own (correct code), or a global one (TDL101's finding too, for the current
    device it changes, with no rewrite of its own where other code depends on it: a
    migration still has to get past it). Not a pool task's or an idle thread's (TDL102
    rewrites the binding itself), nor ``set_device(current_device())``, a no-op."""
    return (site.qualname == "torch.cuda.set_device" and not site.has_star_args
            and a.thread_binding(site) in (None, "own") and not a.devices.is_current_device_noop(site))


def _entered_device_blocks(a) -> set:
    """``with torch.cuda.device(k):`` items that select a GPU: entering one raises without
    CUDA (``torch.cuda.device_of(t)`` does not: a CPU tensor makes it a no-op; nor an
    index that is a negative literal or ``None``); not an index chosen on a condition
    (``k if torch.cuda.is_available() else -1``, what the fix writes); not a tensor's
    device (``torch.cuda.device(p.device)``: the block follows its data, as kernels that
    need CUDA anyway do -- fairseq's FusedAdam, a CUDA-only attention op)."""
    items = [item.item for stmt in a.statements if isinstance(stmt, cst.With) for item in stmt.items]
    out = set()
    for call in items:
        site = a.site_of.get(call) if isinstance(call, cst.Call) else None
        if site is None or site.qualname != "torch.cuda.device" or site.has_star_args:
            continue
        arg = site.positional(0) or site.keyword("device")
        value = arg.value if arg is not None else None
        if value is None or (isinstance(value, cst.Name) and value.value == "None") or isinstance(
                value, (cst.UnaryOperation, cst.IfExp)) or (
                isinstance(value, cst.Attribute) and value.attr.value == "device"):
            continue
        out.add(call)
    return out

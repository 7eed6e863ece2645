"""TDL104 thread-uses-implicit-device: a thread does CUDA work and never binds a device."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from ..model import Violation
from .base import Context, Example, Rule
from .device_state import describe_uses

_KINDS = ("bare-cuda", "device-string", "device-object")


class ThreadUsesImplicitDevice(Rule):
    code = "TDL104"
    name = "thread-uses-implicit-device"
    summary = "a thread does CUDA work on the implicit device: it runs on cuda:0"
    triggers = ("Thread", "Executor", "run_in_executor", "to_thread")
    also_requires = (".cuda(", "cuda'", 'cuda"')
    # the gate on the code: a thread or executor, and a use of the implicit device
    needs = (("name~Thread", "name~Executor", "name:to_thread", "name:run_in_executor", "name:Pool"),
             ("thread:cuda",))  # (a function handed to a call that uses the implicit device)
    fixable = "never"
    fix_summary = 'none'
    what = """
        A thread target (as in TDL102) that does CUDA work with an implicit device
        (`.cuda()`, `device="cuda"`, `torch.device("cuda")`) and never binds a device
        (no `set_device`, no `with torch.cuda.device(...)`, in it or in the pool's
        `initializer`, which runs first on each worker thread). Not `pin_memory()` or
        `pin_memory=True`: torch pins host memory under whichever GPU already has a
        context (the current one first), so a thread that only pins creates none on
        GPU 0 (pytorch/pytorch#21081).
    """
    why = """
        CUDA's current device is per host thread and a new thread starts on device 0,
        whatever its parent thread set. So a worker thread of a process that runs on
        GPU 1 silently allocates on GPU 0: extra memory on the wrong card, or a
        "tensors on different devices" error far from the cause.
    """
    example = """
        def loader(queue, batch):
            queue.put(batch.cuda())

        threading.Thread(target=loader, args=(q, batch)).start()
    """
    use_instead = """
        def loader(queue, batch, device):
            queue.put(batch.to(device))

        threading.Thread(target=loader, args=(q, batch, device)).start()
    """
    fix_safety = """
        No fix: the device has to come from the parent thread, which only the author
        can wire up.
    """
    VALID = (
        "import torch, threading\ndef work(x, device):\n    return x.to(device)\n"
        "threading.Thread(target=work, args=(1, 2)).start()\n",
        "import torch, threading\ndef work(x, k):\n    torch.cuda.set_device(k)\n    return x.cuda()\n"
        "threading.Thread(target=work, args=(1, 2)).start()\n",
        "import torch, threading\ndef work(x, k):\n    with torch.cuda.device(k):\n        return x.cuda()\n"
        "threading.Thread(target=work, args=(1, 2)).start()\n",
        "import torch\ndef not_a_thread(x):\n    return x.cuda()\nThread = None\n",
        # pinning host memory uses an existing context, not the thread's device 0
        "from concurrent.futures import ThreadPoolExecutor\nimport torch\n"
        "pool = ThreadPoolExecutor(2)\npool.map(lambda t: t.pin_memory(), [torch.zeros(1)])\n",
        # each worker thread binds the parent's device as it starts, before any task
        "from concurrent.futures import ThreadPoolExecutor\nimport torch\n\n\ndef bind(k):\n"
        "    torch.cuda.set_device(k)\n\n\ndef copy(batch):\n    return batch.cuda(non_blocking=True)\n\n\n"
        "def run(batches):\n    k = torch.cuda.current_device()\n"
        "    with ThreadPoolExecutor(2, initializer=bind, initargs=(k,)) as pool:\n"
        "        return list(pool.map(copy, batches))\n",
    )
    INVALID = (
        Example("import threading\ndef work(x):\n    return x.cuda()\n"
                "threading.Thread(target=work, args=(1,)).start()\n"),
        Example("import threading, torch\nclass Loader(threading.Thread):\n    def run(self):\n"
                "        self.out = torch.zeros(2, device='cuda')\n"),
        Example("from concurrent.futures import ThreadPoolExecutor\nimport torch\n"
                "pool = ThreadPoolExecutor(2)\npool.map(lambda t: t.pin_memory().cuda(), [torch.zeros(1)])\n"),
        # the same task also runs on a pool whose workers never bind
        Example("from concurrent.futures import ThreadPoolExecutor\nimport torch\n\n\ndef bind(k):\n"
                "    torch.cuda.set_device(k)\n\n\ndef copy(batch):\n    return batch.cuda()\n\n\n"
                "def run(batches, k):\n    with ThreadPoolExecutor(2, initializer=bind, initargs=(k,)) as pool:\n"
                "        bound = list(pool.map(copy, batches))\n"
                "    with ThreadPoolExecutor(2) as pool:\n        return bound + list(pool.map(copy, batches))\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        seen = set()
        for target in a.targets:
            fn = target.function
            if target.kind != "thread" or fn.node in seen:
                continue
            if a.target_of(fn, "process") is not None:
                continue
            binders = [fn.node] + ([target.setup.node] if target.setup is not None else [])
            if any(a.inside(s.scope, node) for s in a.set_device_sites for node in binders):
                continue  # it binds, or its pool's initializer bound the worker first
            seen.add(fn.node)
            uses = [u for u in a.implicit_uses(fn.node, include_nested=True) if u.kind in _KINDS]
            if not uses:
                continue
            anchor = fn.node.name if isinstance(fn.node, cst.FunctionDef) else fn.node
            yield ctx.violation(
                anchor,
                f"thread target `{fn.name}` (run via {target.via}) uses the implicit device "
                f"({describe_uses(ctx, uses)}) but never binds one: a new thread starts on "
                "cuda:0 whatever its parent set; pass the device in and use `.to(device)`",
            )

"""TDL102 set-device-in-thread: ``set_device`` inside a function run on a thread."""

from __future__ import annotations

from typing import Iterable

from ..model import Applicability, Edit, Fix, Violation
from .base import Context, Example, Rule
from .device_state import Plan, plan_device_block, plan_explicit_device


class SetDeviceInThread(Rule):
    code = "TDL102"
    name = "set-device-in-thread"
    summary = "`set_device` in a thread binds only that thread: make the device explicit"
    triggers = ("set_device",)
    fixable = "sometimes"
    fix_priority = 0
    what = """
        `torch.cuda.set_device(...)` inside a function that runs on a thread:
        `threading.Thread(target=f)` (also a lambda or `functools.partial` target), the
        `run` method of a `threading.Thread` subclass, `ThreadPoolExecutor.submit(f, ...)`
        / `.map(f, ...)`, `loop.run_in_executor(ex, f, ...)`, `asyncio.to_thread(f)`.
        A process target that binds its own device is quiet (that is the DDP idiom).
    """
    why = """
        CUDA's current device is per host thread, and a new thread starts on device 0.
        `set_device` in a thread therefore binds only that thread: correct, but easy to
        misread as global, and every implicit use in the thread silently depends on it.
        The explicit form says which device each tensor goes to.
    """
    example = """
        def worker(rank, batch):
            torch.cuda.set_device(rank)
            return model(batch.cuda())

        threading.Thread(target=worker, args=(1, batch)).start()
    """
    use_instead = """
        def worker(rank, batch):
            device = torch.device("cuda", rank)
            return model(batch.to(device))
    """
    fix_safety = """
        When every current-device dependent in the thread function is a bare `.cuda()`
        after the call, the explicit-device rewrite of TDL101 (**unsafe**: functions the
        thread calls may rely on the binding). Otherwise, when the call is a top-level
        statement of the function, an **unsafe** fix that wraps the rest of the body in
        `with torch.cuda.device(k):` (the block-scoped form, same effect for the thread).
        Otherwise display only.
    """
    VALID = (
        "import torch, threading\ndef work():\n    with torch.cuda.device(1):\n        pass\n"
        "threading.Thread(target=work).start()\n",
        "import torch\nimport multiprocessing as mp\ndef work(i):\n    torch.cuda.set_device(i)\n"
        "mp.Process(target=work, args=(1,)).start()\n",
        "import torch\ndef not_a_thread(i):\n    torch.cuda.set_device(i)\n"
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n",
    )
    INVALID = (
        Example(
            "import torch, threading\ndef work(i, x):\n    torch.cuda.set_device(i)\n    return x.cuda()\n"
            "threading.Thread(target=work, args=(1, None)).start()\n",
            "import torch, threading\ndef work(i, x):\n"
            '    device = torch.device("cuda", i) if torch.cuda.is_available() else torch.device("cpu")\n'
            "    return x.to(device)\n"
            "threading.Thread(target=work, args=(1, None)).start()\n",
        ),
        Example(
            "import torch\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "def work(i):\n    torch.cuda.set_device(i)\n    s = torch.cuda.Stream()\n    return s\n"
            "with ThreadPoolExecutor() as ex:\n    ex.submit(work, 1)\n",
            "import torch\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "def work(i):\n    with torch.cuda.device(i):\n        s = torch.cuda.Stream()\n        return s\n"
            "with ThreadPoolExecutor() as ex:\n    ex.submit(work, 1)\n",
        ),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        for site in a.set_device_sites:
            if a.binding_context(site) != "thread":
                continue
            fn = a.enclosing_function(site.scope)
            assert fn is not None
            target = a.target_of(fn, "thread")
            plan = plan_explicit_device(ctx, site, fn.node, include_nested=True)
            if isinstance(plan, Plan):
                fix = Fix(Applicability.UNSAFE,
                          f"Use an explicit `{plan.name}` in this thread instead of binding it",
                          tuple(plan.edits), frozenset({plan.name}))
            else:
                block = plan_device_block(ctx, site, fn)
                if isinstance(block, Edit):
                    fix = Fix(Applicability.UNSAFE,
                              "Wrap the thread's work in `with torch.cuda.device(k):` "
                              f"(not rewritten explicitly: {plan})", (block,))
                else:
                    fix = Fix(Applicability.DISPLAY,
                              f"Not rewritten: {plan}; {block}. Pass an explicit `torch.device` "
                              "into the thread, or use `with torch.cuda.device(k):` around its work")
            via = target.via if target else "a thread"
            yield ctx.violation(
                site.node,
                f"`set_device` in `{fn.name}` (run via {via}) binds only this thread: CUDA's "
                "current device is per host thread; use an explicit `torch.device` or "
                "`with torch.cuda.device(k):`",
                fix,
            )

"""TDL102 set-device-in-thread: a thread's device binding that leaks, or that binds the
wrong thread."""

from __future__ import annotations

from typing import Iterable


from ..analysis import CallSite
from .. import names as N
from ..model import Applicability, Edit, Fix, Violation
from .base import Context, Example, Rule
from .device_state import Plan, plan_device_block, plan_explicit_device



class SetDeviceInThread(Rule):
    code = "TDL102"
    name = "set-device-in-thread"
    summary = "a thread's `set_device` leaks into later pool tasks, or binds a thread that does no CUDA work"
    triggers = ("set_device",)
    needs = (tuple(f"qual:{q}" for q in sorted(N.SET_DEVICE)),)  # the gate on the code
    fixable = "sometimes"
    fix_summary = '`with torch.cuda.device(k):` (unsafe) or display'
    fix_priority = 0
    what = """
        `torch.cuda.set_device(...)` (any backend's `set_device`,
        `torch.accelerator.set_device_index`) in a function run on a thread, in two shapes:
        - a task submitted to a pool: `ThreadPoolExecutor.submit(f, ...)` / `.map(f, ...)`,
          `loop.run_in_executor(ex, f, ...)`, `asyncio.to_thread(f)`: the pool thread keeps
          the binding, so later tasks on it inherit a device they never chose;
        - a dedicated thread that binds a device and then does no CUDA work itself: the
          binding was meant for another thread, which stays on cuda:0.
        Quiet for the per-thread idiom: a dedicated thread (`Thread(target=f)`, a
        `Thread` subclass's `run`) that binds its own argument's or its parent's device
        and then does its work, and a pool's `initializer`, which binds each worker
        thread once as it starts, for all the tasks it runs. A process target binding its own device is quiet too.
    """
    why = """
        CUDA's current device is per host thread, and a new thread starts on device 0.
        A dedicated thread binding its device is correct (the remedy TDL104 asks for). A
        pool thread is reused: the next task submitted to it runs on the previous task's
        device. A binding in a thread that does no CUDA work changes nothing where the
        work happens.
    """
    example = """
        from concurrent.futures import ThreadPoolExecutor

        def copy_job(gpu, batch):
            torch.cuda.set_device(gpu)
            return batch.cuda(non_blocking=True)

        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(copy_job, g, b) for g, b in jobs]
    """
    use_instead = """
        def copy_job(gpu, batch):
            with torch.cuda.device(gpu):
                return batch.cuda(non_blocking=True)
    """
    fix_safety = """
        For a pool task: when every current-device dependent in the task is a bare
        `.cuda()` after the call, the explicit-device rewrite of TDL101; otherwise, when
        the call is a top-level statement of the function, wrapping the rest of the body
        in `with torch.cuda.device(k):` (restored when the task ends). Both **unsafe**:
        functions the task calls may rely on the binding. Otherwise display only.
    """
    VALID = (
        "import torch, threading\ndef work():\n    with torch.cuda.device(1):\n        pass\n"
        "threading.Thread(target=work).start()\n",
        # a pool's initializer: each worker thread binds once as it starts, for all its tasks
        "import torch\nfrom concurrent.futures import ThreadPoolExecutor\ndef bind(k):\n    torch.cuda.set_device(k)\n"
        "def work(x):\n    return x.sum()\npool = ThreadPoolExecutor(2, 'copy', bind, (1,))\n"
        "pool.submit(work, None)\n",
        "import torch\nimport multiprocessing as mp\ndef work(i):\n    torch.cuda.set_device(i)\n"
        "mp.Process(target=work, args=(1,)).start()\n",
        "import torch\ndef not_a_thread(i):\n    torch.cuda.set_device(i)\n"
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n",
        # the per-thread idiom: a dedicated thread binds its own argument's device
        "import torch, threading\ndef work(i, x):\n    torch.cuda.set_device(i)\n    return x.cuda()\n"
        "threading.Thread(target=work, args=(1, None)).start()\n",
        # ... or its parent's device
        "import torch, threading\ndef spawn_loader(q):\n    parent = torch.cuda.current_device()\n"
        "    def load():\n        torch.cuda.set_device(parent)\n        q.put(torch.zeros(1).cuda())\n"
        "    threading.Thread(target=load).start()\n",
    )
    INVALID = (
        Example(
            "import torch\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "def work(i):\n    torch.cuda.set_device(i)\n    s = torch.cuda.Stream()\n    return s\n"
            "with ThreadPoolExecutor() as ex:\n    ex.submit(work, 1)\n",
            "import torch\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "def work(i):\n    with torch.cuda.device(i):\n        s = torch.cuda.Stream()\n        return s\n"
            "with ThreadPoolExecutor() as ex:\n    ex.submit(work, 1)\n",
        ),
        Example(
            "import torch, threading\ndef bind(gpu):\n    torch.cuda.set_device(gpu)\n    print('bound', gpu)\n"
            "threading.Thread(target=bind, args=(1,)).start()\n",
        ),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        for site in a.set_device_sites:
            kind = a.thread_binding(site)
            if kind is None or kind == "own":
                continue  # (a thread that binds its own device, then works: the idiom)
            fn = a.enclosing_function(site.scope)
            assert fn is not None
            target = a.target_of(fn, "thread")
            via = target.via if target else "a thread"
            if kind == "pooled":
                yield ctx.violation(
                    site.node,
                    f"`set_device` in `{fn.name}` (a task run via {via}) leaks: the pool thread keeps "
                    "this device, and later tasks on it inherit it; use `with torch.cuda.device(k):` "
                    "around the work (restored when the task ends) or an explicit `torch.device`",
                    self._pool_fix(ctx, site, fn),
                )
            else:  # idle
                yield ctx.violation(
                    site.node,
                    f"`set_device` in `{fn.name}` (run via {via}) binds only this thread, and this thread "
                    "does no CUDA work: the thread that does stays on cuda:0 (the current device is per "
                    "thread); bind it where the work runs",
                    Fix(Applicability.DISPLAY, "Move the binding into the thread that does the CUDA work, "
                        "or pass it an explicit `torch.device`"),
                )

    def _pool_fix(self, ctx: Context, site: CallSite, fn) -> Fix:
        plan = plan_explicit_device(ctx, site, fn.node, include_nested=True)
        if isinstance(plan, Plan):
            return Fix(Applicability.UNSAFE,
                       f"Use an explicit `{plan.name}` in this task instead of binding the pool thread",
                       tuple(plan.edits), frozenset({plan.name}))
        block = plan_device_block(ctx, site, fn)
        if isinstance(block, Edit):
            return Fix(Applicability.UNSAFE,
                       "Wrap the task's work in `with torch.cuda.device(k):` "
                       f"(not rewritten explicitly: {plan})", (block,))
        return Fix(Applicability.DISPLAY,
                   f"Not rewritten: {plan}; {block}. Pass an explicit `torch.device` into the task, "
                   "or use `with torch.cuda.device(k):` around its work")



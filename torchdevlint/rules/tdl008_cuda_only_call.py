"""TDL008 cuda-only-call (opt-in): ``torch.cuda.synchronize()`` and the other
``torch.cuda`` calls that raise without CUDA, called where nothing checks for it."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from .. import names as N
from ..analysis import CallSite
from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule, Uninsertable
from .portability import guard_statement, torch_for_test, unconditional


class CudaOnlyCall(Rule):
    code = "TDL008"
    name = "cuda-only-call"
    summary = ("a `torch.cuda` call that raises without CUDA (`synchronize()`, `Event`, `current_device()`), "
               "with nothing checking for CUDA (opt-in)")
    opt_in = True
    triggers = ("cuda",)
    also_requires = ("synchronize", "Event", "Stream", "current_device", "get_device_", "current_stream",
                     "default_stream", "CUDAGraph", "reset_", "ipc_collect", "get_rng_state", "mem_get_info",
                     "memory_summary", "init", "set_per_process_memory_fraction", "nvtx")
    needs = (tuple(f"qual:{q}" for q in sorted(N.CUDA_ONLY)),)  # the gate on the code
    fixable = "sometimes"
    fix_summary = ("the statement under `if torch.cuda.is_available():` (unsafe) when it is an expression "
                   "statement; else display")
    what = """
        A call of a `torch.cuda` function that raises where CUDA is not available
        ("Torch not compiled with CUDA enabled"): `synchronize()`, `current_device()`,
        `get_device_name()`, `get_device_properties()`, `get_device_capability()`,
        `current_stream()`, `default_stream()`, `Stream()`, `Event()`, `CUDAGraph()`,
        `reset_peak_memory_stats()` (and the older `reset_max_memory_*`), `ipc_collect()`,
        `get_rng_state()`, `mem_get_info()`, `memory_summary()`, `init()`,
        `set_per_process_memory_fraction()`, the `torch.cuda.nvtx` markers. Only where it
        runs unconditionally (not under an `if`, not one side of `a if c else b` or of
        `a or b`), in code that does not stop without CUDA (no `assert
        torch.cuda.is_available()` or `if not torch.cuda.is_available():` exit in its
        function, or in the module for module-level code; no `if` around it that asks),
        outside functions and classes whose decorators name CUDA or a GPU
        (`@unittest.skipIf(not torch.cuda.is_available(), ...)`, `@requires_cuda`). A
        device with a CPU fallback in the same function does not count: the call still
        raises on the CPU path. Not the calls that are harmless without CUDA
        (`empty_cache()`, `manual_seed()`, `memory_allocated()`, `device_count()`), nor
        `set_device` (TDL101, TDL102) or `torch.cuda.device(k)` (a context manager).

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
        When the call is part of an expression statement on a line of its own
        (`torch.cuda.synchronize()`, `print(torch.cuda.get_device_name(0))`), the fix
        puts that statement under `if torch.cuda.is_available():`. Unsafe: without CUDA
        the statement is skipped instead of failing (which is the point, but a log line
        disappears). With CUDA it runs as before: the call itself initialised CUDA at
        that point. Display-only when the result is kept (`start =
        torch.cuda.Event(enable_timing=True)`, `return torch.cuda.current_device()`: what
        uses it needs a CPU path written by hand), with other statements on the line, at
        the module level of a module that is not a script (the test would run at every
        import), and in TorchScript.
    """
    VALID = (
        "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
        "import torch\ndef step(x):\n    y = x * 2\n    if x.is_cuda:\n        torch.cuda.synchronize()\n"
        "    return y\n",
        "import torch\ndef report():\n    if torch.cuda.device_count() == 0:\n        return None\n"
        "    torch.cuda.synchronize()\n    return torch.cuda.get_device_name()\n",
        "import torch\ndef tidy():\n    torch.cuda.empty_cache()\n    torch.cuda.manual_seed(0)\n"
        "    return torch.cuda.memory_allocated()\n",
        "import torch\ndef name(x):\n    return torch.cuda.get_device_name() if x.is_cuda else 'cpu'\n",
        "import torch\nimport unittest\n@unittest.skipIf(not torch.cuda.is_available(), 'needs a GPU')\n"
        "class T(unittest.TestCase):\n    def test_sync(self):\n        torch.cuda.synchronize()\n",
        "import torch\nimport pytest\n@pytest.mark.gpu\ndef test_stream():\n    s = torch.cuda.Stream()\n"
        "    s.synchronize()\n",
        "import cupy\ndef f():\n    cupy.cuda.Stream.null.synchronize()\n",
        "import torch\ndef f():\n    torch.cuda.set_device(0)\n",
        "import sys\nimport torch\nif not torch.cuda.is_available():\n    sys.exit('a GPU is required')\n"
        "torch.cuda.synchronize()\n",
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
        # the result is kept: what uses it needs a CPU path of its own (display)
        Example("import torch\ndef timer():\n    start = torch.cuda.Event(enable_timing=True)\n"
                "    start.record()\n    return start\n"),
        # a library's module level: the test would run at every import (display)
        Example("import torch\nCAPABILITY = torch.cuda.get_device_capability()\n"),
        Example("import torch\ntorch.cuda.synchronize()\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        for site in a.calls:
            if site.qualname not in N.CUDA_ONLY or not unconditional(ctx, site, site.node, stops_only=True):
                continue
            shown = f"{a.code(site.node.func)}()"
            yield ctx.violation(
                site.node,
                f"`{shown}` needs CUDA and nothing here checks for it: this code cannot run where "
                "CUDA is not available",
                self._fix(ctx, site),
            )

    def _fix(self, ctx: Context, site: CallSite) -> Fix:
        message = "Run the statement only when CUDA is available"
        line = site.line
        assert line is not None  # (unconditional: the call is in a statement line)
        if len(line.body) > 1:
            return Fix(Applicability.DISPLAY, f"{message} (display only: the line holds other statements: "
                                              "split it first)")
        if not isinstance(line.body[0], cst.Expr):
            return Fix(Applicability.DISPLAY, f"{message} (display only: its result is kept: give what uses "
                                              "it a CPU path by hand)")
        try:  # (no new query: the call it guards initialised CUDA at this point anyway)
            torch, imports = torch_for_test(ctx, site, new_query=False)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{message} (display only: {exc})")
        return Fix(Applicability.UNSAFE, message, tuple(imports) + (guard_statement(ctx, line, torch),))

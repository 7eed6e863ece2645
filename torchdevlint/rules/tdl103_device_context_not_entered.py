"""TDL103 device-context-not-entered: ``torch.cuda.device(i)`` called as a statement."""

from __future__ import annotations

from typing import Iterable

from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule
from .. import names as N


class DeviceContextNotEntered(Rule):
    code = "TDL103"
    name = "device-context-not-entered"
    summary = "`torch.cuda.device(i)` is a context manager: called alone it does nothing"
    # a call of `device(`, `device_of(` or `device_index(` that starts a statement, through
    # any import form (words.TEXT_TESTS); the gate: one of them called as a whole statement
    triggers = ("@device-context",)
    needs = (tuple(f"expr:{q}" for q in sorted(N.DEVICE_CONTEXTS)),)
    fixable = "never"
    fix_summary = 'display'
    what = """
        `torch.cuda.device(i)`, `torch.cuda.device_of(t)` or
        `torch.accelerator.device_index(i)` called as a bare expression statement.
    """
    why = """
        These are context managers: they switch the current device in `__enter__` and
        restore it in `__exit__`. Called alone, they construct an object and throw it
        away, so nothing changes (a real bug in two pytorch/examples scripts).
    """
    example = """
        torch.cuda.device(1)
        x = torch.zeros(3).cuda()   # still on cuda:0
    """
    use_instead = """
        with torch.cuda.device(1):
            x = torch.zeros(3).cuda()
        # or, better: x = torch.zeros(3, device=torch.device("cuda", 1))
    """
    fix_safety = """
        Display only: which statements belong in the block is the author's decision.
    """
    VALID = (
        "import torch\nwith torch.cuda.device(1):\n    pass\n",
        "import torch\nctx = torch.cuda.device(1)\n",
        "import torch\nd = torch.device('cuda', 1)\n",
        "device(1)\n",
    )
    INVALID = (
        Example("import torch\ntorch.cuda.device(1)\n"),
        Example("from torch.cuda import device_of\ndef f(t):\n    device_of(t)\n"),
        Example("import torch\ntorch.accelerator.device_index(0)\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        for site in ctx.analysis.calls:
            if site.qualname in N.DEVICE_CONTEXTS and site.expr_stmt is not None:
                code = ctx.analysis.code(site.node)
                yield ctx.violation(
                    site.node,
                    f"`{site.qualname}(...)` is a context manager: called as a statement it "
                    "does nothing; use it in a `with` block",
                    Fix(Applicability.DISPLAY, f"Use `with {code}:` around the work it should scope"),
                )

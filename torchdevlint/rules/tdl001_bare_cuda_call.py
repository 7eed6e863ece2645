"""TDL001 bare-cuda-call: ``x.cuda()`` with no device."""

from __future__ import annotations

from typing import Iterable

from ..analysis import is_bare_cuda
from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule


class BareCudaCall(Rule):
    code = "TDL001"
    name = "bare-cuda-call"
    summary = "`.cuda()` without a device moves to the implicit current device"
    triggers = (".cuda(",)
    fixable = "always"
    what = """
        A `.cuda()` call with no device: no positional argument, no `device=`, or
        `device=None`, on any receiver (tensors, modules, call chains, lambdas,
        comprehensions), outside a `with torch.cuda.device(...):` block.
    """
    why = """
        `x.cuda()` moves `x` to CUDA's *current device*, which is `cuda:0` unless
        something set it, and which is per thread. In multi-GPU code that is how every
        rank ends up allocating on GPU 0, and the script cannot run on a machine without
        CUDA at all. An explicit `torch.device` makes placement visible and testable.
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
        `memory_format`. The device is the one the code already names (a `device`
        variable or parameter in scope, `self.device`, the input's device inside
        `forward`); when none exists, one module-level definition that falls back to the
        CPU is inserted after the imports. It is **safe** when the receiver is provably a
        torch tensor or module (a torch factory or constructor, an `nn.Module` subclass of
        this file, a name assigned only from those) and the device is provably the
        current device (`torch.device("cuda")` resolves it at call time, exactly like
        `.cuda()`). It is **unsafe** when the receiver may be another class with its own
        `.cuda()` (bitsandbytes' `Int8Params` quantizes in it) or when the device named
        in scope may differ from the current one. It is **display-only** when a class in
        the same file defines its own `cuda` method, and when the definition it would
        insert (a CUDA query at import) would run before the module's own
        `CUDA_VISIBLE_DEVICES` assignment (see TDL105).
    """
    VALID = (
        "import torch\nx = torch.zeros(3).cuda(1)\n",
        "import torch\nx = torch.zeros(3).cuda(device=dev)\n",
        "import torch\nwith torch.cuda.device(1):\n    x = torch.zeros(3).cuda()\n",
        "from torch.cuda import device as cuda_device\nwith cuda_device(k):\n    m.cuda()\n",
        "use_cuda = args.cuda\nif args.cuda:\n    pass\n",
        "s = 'x.cuda()'  # a comment about .cuda()\n",
        "x = t.cuda(*args)\n",
        "x = t.to(device)\n",
    )
    INVALID = (
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
        Example(
            "def step(batch, device):\n    return [t.cuda() for t in batch]\n",
            "def step(batch, device):\n    return [t.to(device) for t in batch]\n",
        ),
        Example(
            "import torch\nx = torch.ones(2).cuda(device=None)\n",
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.ones(2).to(device)\n",
        ),
        Example("class P:\n    def cuda(self):\n        return self\np = P().cuda()\n", None),
        # the inserted definition would query CUDA at import, before this assignment
        Example("import os, torch\ndef main(gpus):\n    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\n"
                "    return torch.zeros(1).cuda()\n", None),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        analysis = ctx.analysis
        claimed = analysis.data_parallel_moves  # reported as TDL201
        sites = [s for s in analysis.calls
                 if is_bare_cuda(s.node) and not s.in_device_context and s.node not in claimed]
        if not sites:
            return
        anchor = sites[0].order
        own_cuda = analysis.classes_defining_cuda
        for site in sites:
            call = site.node
            receiver = call.func.value  # type: ignore[union-attr]
            device, edits, defines = ctx.device_for(site, anchor)
            edits = edits + [ctx.cuda_to_device(call, device.code)]
            kind = analysis.torch_kind(receiver, site.scope)
            hazard = ctx.module_query_hazard() if defines else None
            if own_cuda:
                names = ", ".join(f"`{c.name}`" for c in own_cuda)
                applicability = Applicability.DISPLAY
                note = f"display only: {names} in this file defines its own `cuda()`"
            elif hazard:
                applicability = Applicability.DISPLAY
                note = f"display only: {hazard}"
            else:
                reasons = []
                if kind is None:
                    reasons.append("the receiver may not be a torch tensor or module")
                if not device.exact:
                    reasons.append(f"{device.why} may not be the current device")
                applicability = Applicability.UNSAFE if reasons else Applicability.SAFE
                note = "; ".join(reasons)
            message = f"Use `.to({device.code})` instead"
            if note:
                message += f" ({note})"
            fix = Fix(applicability, message, tuple(edits), defines)
            yield ctx.violation(
                call,
                "`.cuda()` without a device moves to the current device (cuda:0 unless set); "
                "pass an explicit device",
                fix,
            )

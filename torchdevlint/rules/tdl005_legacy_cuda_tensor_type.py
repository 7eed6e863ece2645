"""TDL005 legacy-cuda-tensor-type: ``torch.cuda.FloatTensor(...)`` and friends."""

from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

import libcst as cst

from ..analysis import CallSite
from ..model import Applicability, Edit, Fix, Violation
from .base import Context, Example, Rule

DTYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8",
    "ShortTensor": "int16", "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool",
}
LEGACY = {f"torch.cuda.{name}": dtype for name, dtype in DTYPES.items()}


class LegacyCudaTensorType(Rule):
    code = "TDL005"
    name = "legacy-cuda-tensor-type"
    summary = "a legacy `torch.cuda.<T>Tensor` type allocates or converts on the implicit current device"
    triggers = ("Tensor",)
    also_requires = ("cuda",)
    fixable = "sometimes"
    fix_summary = ('`torch.empty`/`torch.tensor(..., dtype=, device=)`, `.to(device, dtype)` (safe with an exact '
                   'device, else unsafe); display for the alias idiom')
    what = """
        The pre-1.0 typed-tensor API used to allocate or convert: a call of
        `torch.cuda.FloatTensor(...)` (any of the ten types), `x.type(torch.cuda.FloatTensor)`,
        and a module-level alias such as `Tensor = torch.cuda.FloatTensor if cuda else
        torch.FloatTensor`. Not `isinstance(x, torch.cuda.FloatTensor)` or type
        comparisons: those only test.
    """
    why = """
        These constructors allocate on the implicit current device (cuda:0 unless
        something set it), and they fail outright on a machine without CUDA ("type
        torch.cuda.FloatTensor not available"), which a `device` with a CPU fallback
        elsewhere in the script cannot rescue. Their dtype is spelled in the type name,
        where modern code passes `dtype=` and `device=`.
    """
    example = """
        noise = torch.cuda.FloatTensor(batch, 100).normal_()
        labels = torch.cuda.LongTensor([1, 0, 1])
        x = x.type(torch.cuda.FloatTensor)
    """
    use_instead = """
        noise = torch.empty(batch, 100, dtype=torch.float32, device=device).normal_()
        labels = torch.tensor([1, 0, 1], dtype=torch.int64, device=device)
        x = x.to(device, torch.float32)
    """
    fix_safety = """
        Sizes become `torch.empty(*sizes, dtype=..., device=...)`, a list or tuple of
        data `torch.tensor(data, dtype=..., device=...)`, `.type(T)` becomes
        `.to(device, dtype)`. With `torch.device("cuda")` in scope (or no device at all in
        a library module, where the fix spells `device="cuda"`) the rewrite is exactly
        the old behaviour: **safe**. With another device in scope, or a device definition
        inserted where the script starts (with its CPU fallback), it is **unsafe**: that
        is what makes a legacy script run without CUDA. A call whose argument may be
        either a size or data (a name), and the alias idiom, are display-only.
    """
    VALID = (
        "import torch\nok = isinstance(x, torch.cuda.FloatTensor)\n",
        "import torch\nok = type(x) == torch.cuda.FloatTensor\n",
        "import torch\nx = torch.FloatTensor(3)\n",
        "import torch\nx = torch.empty(3, device='cuda')\n",
    )
    INVALID = (
        # a script: the device is defined where it starts (CPU fallback: unsafe)
        Example("import torch\nx = torch.cuda.FloatTensor(2, 3)\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "x = torch.empty(2, 3, dtype=torch.float32, device=device)\n"),
        # a library function: exactly the old placement, spelled out (safe)
        Example("import torch\ndef labels():\n    return torch.cuda.LongTensor([1, 0, 1])\n",
                'import torch\ndef labels():\n    return torch.tensor([1, 0, 1], dtype=torch.int64, device="cuda")\n'),
        Example("import torch\ndevice = torch.device('cuda')\nx = t.type(torch.cuda.HalfTensor)\n",
                "import torch\ndevice = torch.device('cuda')\nx = t.to(device, torch.float16)\n"),
        Example("import torch\ndef noise(batch):\n    return torch.cuda.FloatTensor(batch, 100).normal_()\n",
                "import torch\ndef noise(batch):\n    return torch.empty(batch, 100, dtype=torch.float32, "
                'device="cuda").normal_()\n'),
        Example("import torch\ndef f():\n    return torch.cuda.FloatTensor()\n",
                'import torch\ndef f():\n    return torch.empty(0, dtype=torch.float32, device="cuda")\n'),
        Example("import torch\ndef f(n):\n    return torch.cuda.FloatTensor(n)\n"),
        Example("import torch\nTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        sites: List[Tuple[CallSite, str, str]] = []  # (site, kind, dtype)
        for site in a.calls:
            if site.qualname in LEGACY:
                sites.append((site, "call", LEGACY[site.qualname]))
            elif site.method == "type" and len(site.node.args) == 1 and site.node.args[0].keyword is None:
                q = a.qualname(site.node.args[0].value, site.scope)
                if q in LEGACY:
                    sites.append((site, "type", LEGACY[q]))
        anchor = min((s.order for s, _, _ in sites), default=0)
        for site, kind, dtype in sites:
            type_name = a.code(site.node.func if kind == "call" else site.node.args[0].value)
            message = (f"`{type_name}` allocates on the implicit current device and fails without CUDA; "
                       f"use `dtype=torch.{dtype}` with an explicit `device=`")
            yield ctx.violation(site.node, message, self._fix(ctx, site, kind, dtype, anchor))
        yield from self._aliases(ctx)

    def _aliases(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        for stmt in a.module.body:
            if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                    and isinstance(stmt.body[0], cst.Assign)):
                continue
            value = stmt.body[0].value
            options = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
            legacy = [o for o in options if a.qualname(o, a.module_scope) in LEGACY]
            if not legacy:
                continue
            dtype = LEGACY[a.qualname(legacy[0], a.module_scope)]  # type: ignore[index]
            target = a.code(stmt.body[0].targets[0].target)
            yield ctx.violation(value, (
                f"`{target}` aliases a legacy CUDA tensor type: every `{target}(...)` allocates on the "
                "implicit current device and fails without CUDA"), Fix(
                Applicability.DISPLAY,
                f"Replace the alias by `dtype = torch.{dtype}` and allocate with `torch.empty(..., "
                f"dtype=dtype, device=device)` / `torch.tensor(data, dtype=dtype, device=device)`"))

    def _fix(self, ctx: Context, site: CallSite, kind: str, dtype: str, anchor: int) -> Fix:
        a = ctx.analysis
        torch = a.torch_name_at(site.scope, site.order)
        if torch is None:
            return Fix(Applicability.DISPLAY, f"Use `dtype=torch.{dtype}` and an explicit `device=`")
        device, edits, applicability, why = self._device(ctx, site, anchor)
        if kind == "type":
            edit = ctx.rename_call(site.node, "to", [cst.Arg(cst.parse_expression(device)),
                                                     cst.Arg(cst.parse_expression(f"{torch}.{dtype}"))])
            what = f"`.to({device}, {torch}.{dtype})`"
        else:
            args = _constructor(a, site.node)
            if args is None:
                return Fix(Applicability.DISPLAY, (
                    f"Use `torch.empty(size, dtype=torch.{dtype}, device=...)` for a size or "
                    f"`torch.tensor(data, dtype=torch.{dtype}, device=...)` for data (the argument "
                    "may be either)"))
            factory, head = args
            text = f"{torch}.{factory}({head}{', ' if head else ''}dtype={torch}.{dtype}, device={device})"
            edit = ctx.replace(site.node, text)
            what = f"`{torch}.{factory}(..., dtype={torch}.{dtype}, device={device})`"
        message = f"Use {what}" + (f" ({why})" if why else "")
        return ctx.guarded(Fix(applicability, message, tuple(edits) + (edit,)))

    def _device(self, ctx: Context, site: CallSite, anchor: int) -> Tuple[str, List[Edit], Applicability, str]:
        """The device the rewrite names: the one in scope; else a definition where the
        script starts (CPU fallback: unsafe); else (a library module) "cuda" itself."""
        a = ctx.analysis
        choice = a.devices.chosen_device(site)
        if choice is not None:
            if choice.exact:
                return choice.code, [], Applicability.SAFE, ""
            return choice.code, [], Applicability.UNSAFE, f"{choice.why} may not be the current device"
        name, edits, why = ctx.device_definition(anchor)
        if name is not None:
            return name, edits, Applicability.UNSAFE, why
        return '"cuda"', [], Applicability.SAFE, ""


def _constructor(a, call: cst.Call) -> Optional[Tuple[str, str]]:
    """(factory, leading arguments) for a legacy constructor call, or None when its
    arguments could be either sizes or data."""
    args = list(call.args)
    if any(arg.keyword is not None or arg.star for arg in args):
        return None
    if not args:
        return "empty", "0"
    if len(args) >= 2 or isinstance(args[0].value, cst.Integer):  # sizes (data is one sequence)
        return "empty", ", ".join(a.code(arg.value) for arg in args)
    if len(args) == 1 and isinstance(args[0].value, (cst.List, cst.Tuple)):
        return "tensor", a.code(args[0].value)
    return None


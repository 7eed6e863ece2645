"""TDL007 hardcoded-gpu-device (opt-in): ``torch.device("cuda:0")``, ``.cuda(0)``,
``.to("cuda")``, ``device="cuda"``: a GPU with no CPU fallback."""

from __future__ import annotations

import ast
from typing import Iterable, Optional

import libcst as cst

from ..analysis import CallSite
from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule, Uninsertable
from .portability import refusal, unconditional


class HardcodedGpuDevice(Rule):
    code = "TDL007"
    name = "hardcoded-gpu-device"
    summary = ('a GPU named with literals (`torch.device("cuda:0")`, `.cuda(0)`, `.to("cuda")`) with no CPU '
               "fallback: the code cannot run without CUDA (opt-in)")
    opt_in = True
    triggers = ("cuda",)
    # the gate on the code: a `cuda` method called (`.cuda(0)`), or a string that starts
    # with "cuda" (`torch.device("cuda")`, `.to("cuda")`, `device="cuda:0"`)
    needs = (("call:cuda", "str^cuda"),)
    fixable = "sometimes"
    fix_summary = ('`"cuda:0" if torch.cuda.is_available() else "cpu"` in place of the GPU (`.cuda(0)` becomes '
                   "`.to(...)`; unsafe); display at a library's module level")
    what = """
        A GPU named with literals: `torch.device("cuda")`, `torch.device("cuda:1")`,
        `torch.device("cuda", 1)`, `.cuda(1)` / `.cuda(device=1)`, `.to("cuda")`, a
        `device="cuda:0"` argument (`torch.zeros(2, device="cuda")`), chosen
        unconditionally in a statement (not under an `if`, not one side of `a if c else b`
        or of `a or b`, not a parameter's default), in code that never asks whether CUDA
        is there (no `torch.cuda.is_available()` or `device_count()` in its function, or
        in the module for module-level code, or in an `if` around it). Per-rank code
        before any binding is TDL003's (every rank on one GPU is the worse bug); a bare
        `.cuda()` is TDL001's.

        Not on by default: choosing a GPU is a legitimate decision for code that only ever
        runs on GPUs. Select it (`--extend-select TDL007`, or in `[tool.torchdevlint]`
        `extend-select = ["TDL007"]`) when the code must also run on a machine without
        CUDA: a laptop, a CPU-only CI job, a one-shot migration of a legacy repository
        (`torchdevlint fix --unsafe-fixes --extend-select TDL007 .`). Selecting the whole
        prefix (`TDL`, `TDL0`) does not turn it on; `ALL` and the code itself do.
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
        named (`.cuda(1)` becomes `.to(...)` of it, keeping `non_blocking`). Unsafe: on a
        machine without CUDA the program now runs on the CPU instead of failing (which is
        the point, but changes behaviour). `is_available()` initialises
        CUDA: the fix is display-only at the module level of a module that is not a script
        (it would run at every import), in a module that sets `CUDA_VISIBLE_DEVICES` (the
        query would come first and freeze the devices), in TorchScript, and when the index
        is an expression or a keyword (write the fallback by hand).
    """
    VALID = (
        'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
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
        "import torch\ndef f(x, gpu):\n    return x.to('cuda' if gpu else 'cpu'), x.cuda(gpu), x.cuda()\n",
        "import torch\ndef f(x):\n    if x.is_cuda:\n        return torch.ones(1, device='cuda:0')\n",
        "import torch\ndef f(x):\n    return x.to('cuda') if torch.cuda.is_available() else x\n",
        # per-rank code before any binding: TDL003's
        "import torch\nimport torch.multiprocessing as mp\ndef worker(rank):\n    return torch.zeros(1).cuda(0)\n"
        "mp.spawn(worker, nprocs=2)\n",
    )
    INVALID = (
        Example('import torch\n\n\ndef main():\n    device = torch.device("cuda:0")\n    return device\n',
                'import torch\n\n\ndef main():\n    device = torch.device("cuda:0" if torch.cuda.is_available() '
                'else "cpu")\n    return device\n'),
        Example("import torch\nimport torch.nn as nn\nnet = nn.Linear(2, 2).to(torch.device('cuda', 1))\n"
                "for _ in range(3):\n    net(torch.zeros(1, 2, device=net.weight.device))\n",
                "import torch\nimport torch.nn as nn\nnet = nn.Linear(2, 2).to(torch.device('cuda:1' if "
                "torch.cuda.is_available() else 'cpu'))\nfor _ in range(3):\n"
                "    net(torch.zeros(1, 2, device=net.weight.device))\n"),
        Example('import torch\nDEVICE = torch.device("cuda")\n'),  # a library's module level: display
        Example('import torch\ndef f(rank):\n    return torch.device("cuda", rank)\n'),  # an expression: display
        # an index, a string argument: the same fallback where the GPU is named
        Example("import torch\n\n\ndef main(batch):\n    net = torch.nn.Linear(4, 2).cuda(0)\n"
                "    x = batch.to('cuda:0', non_blocking=True)\n    return net(x), torch.ones(2, device='cuda')\n",
                "import torch\n\n\ndef main(batch):\n"
                '    net = torch.nn.Linear(4, 2).to("cuda:0" if torch.cuda.is_available() else "cpu")\n'
                "    x = batch.to('cuda:0' if torch.cuda.is_available() else 'cpu', non_blocking=True)\n"
                "    return net(x), torch.ones(2, device='cuda' if torch.cuda.is_available() else 'cpu')\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        per_rank = {node for _, node, _ in a.devices.fixed_placements}  # TDL003's
        for site in a.calls:
            if site.qualname != "torch.device" or site.node in per_rank:
                continue
            literal = _gpu_literal(site)
            if literal is None or not unconditional(ctx, site, site.node):
                continue
            yield self._report(ctx, site, site.node, self._fix(ctx, site, literal))
        for site, node, code in a.devices.gpu_placements:
            if site.qualname == "torch.device" or node in per_rank or not unconditional(ctx, site, node):
                continue
            yield self._report(ctx, site, node, self._placement_fix(ctx, site, node))

    def _report(self, ctx: Context, site: CallSite, node: cst.CSTNode, fix: Fix) -> Violation:
        a = ctx.analysis
        method = isinstance(node, cst.Call) and site.method == "cuda"  # `.cuda(0)`, not its receiver
        shown = "." + a.code(node.with_changes(func=node.func.attr)) if method else a.code(node)
        return ctx.violation(
            node, f"`{shown}` names a GPU with no CPU fallback: this code cannot run where CUDA is not available",
            ctx.guarded(fix, node if isinstance(node, cst.Call) else None))

    def _fix(self, ctx: Context, site: CallSite, literal: "_Literal") -> Fix:
        a = ctx.analysis
        reason = _refusal(ctx, site, literal.by_hand)
        if reason is not None:
            return Fix(Applicability.DISPLAY, f"{_MESSAGE} (display only: {reason})")
        try:
            torch, imports = ctx.torch_for(site)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{_MESSAGE} (display only: {exc})")
        call = site.node
        edit = ctx.replace(call, f"{a.code(call.func)}({_fallback(torch, literal.device, literal.quote)})")
        return Fix(Applicability.UNSAFE, _MESSAGE, tuple(imports) + (edit,))

    def _placement_fix(self, ctx: Context, site: CallSite, node: cst.CSTNode) -> Fix:
        """``.cuda(1)`` -> ``.to("cuda:1" if torch.cuda.is_available() else "cpu")`` (keeping
        ``non_blocking``); a ``"cuda"`` string argument -> the same conditional expression."""
        reason = _refusal(ctx, site, False)
        if reason is not None:
            return Fix(Applicability.DISPLAY, f"{_MESSAGE} (display only: {reason})")
        try:
            torch, imports = ctx.torch_for(site)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{_MESSAGE} (display only: {exc})")
        if isinstance(node, cst.Call):  # .cuda(<int>), or .cuda(device=<int>)
            arg = site.positional(0) or site.keyword("device")
            assert arg is not None and isinstance(arg.value, cst.Integer)
            edit = ctx.cuda_to_device(node, _fallback(torch, f"cuda:{int(arg.value.value, 0)}", '"'))
        else:
            assert isinstance(node, cst.SimpleString)
            edit = ctx.replace(node, _fallback(torch, node.evaluated_value, node.quote[-1]))
        return Fix(Applicability.UNSAFE, _MESSAGE, tuple(imports) + (edit,))


_MESSAGE = "Fall back to the CPU when CUDA is not available"


def _fallback(torch: str, device: str, quote: str) -> str:
    return f"{quote}{device}{quote} if {torch}.cuda.is_available() else {quote}cpu{quote}"


class _Literal:
    """A GPU device spelled with literals: its string (``cuda``, ``cuda:1``), the quote
    the code uses, and whether the call says it in a form the fix does not rewrite
    (keywords, an index that is an expression)."""

    def __init__(self, device: str, quote: str, by_hand: bool):
        self.device, self.quote, self.by_hand = device, quote, by_hand


def _gpu_literal(site: CallSite) -> Optional[_Literal]:
    """The GPU a ``torch.device(...)`` call names with a string literal (``"cuda"``,
    ``"cuda:1"``, ``"cuda", 1``), or None (a CPU, a variable, a conditional)."""
    args = site.node.args
    first = site.positional(0)
    kind = site.keyword("type")
    value = first.value if first is not None else (kind.value if kind is not None else None)
    if not isinstance(value, cst.SimpleString):
        return None
    try:
        text = ast.literal_eval(value.value)
    except (ValueError, SyntaxError):  # pragma: no cover - LibCST parsed it as a string
        return None
    if not isinstance(text, str) or not (text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit())):
        return None
    quote = value.quote[-1]
    if first is not None and len(args) == 1:
        return _Literal(text, quote, False)
    index = site.positional(1)
    if (first is not None and len(args) == 2 and index is not None and text == "cuda"
            and isinstance(index.value, cst.Integer) and index.value.value.isdigit()):
        return _Literal(f"cuda:{int(index.value.value)}", quote, False)
    return _Literal(text, quote, True)


def _refusal(ctx: Context, site: CallSite, by_hand: bool) -> Optional[str]:
    """Why the fallback cannot be written in place, or None."""
    if by_hand:
        return "the index is an expression or a keyword: write the fallback by hand"
    if ctx.analysis.enclosing_function(site.scope) is None and ctx.analysis.devices.is_script:
        hazard = ctx.module_query_hazard()  # a new query at a script's module level
        if hazard:
            return hazard
    return refusal(ctx, site)

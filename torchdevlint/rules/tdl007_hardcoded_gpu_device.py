"""TDL007 hardcoded-gpu-device (opt-in): ``torch.device("cuda:0")`` with no CPU fallback."""

from __future__ import annotations

import ast
from typing import Iterable, Optional

import libcst as cst

from ..analysis import CallSite, walk
from ..model import Applicability, Fix, Violation
from .base import _LIBRARY, Context, Example, Rule, Uninsertable


class HardcodedGpuDevice(Rule):
    code = "TDL007"
    name = "hardcoded-gpu-device"
    summary = "a device that names a GPU with no CPU fallback: the code cannot run without CUDA (opt-in)"
    opt_in = True
    triggers = ("cuda",)
    also_requires = ("device",)
    # the gate on the code: torch.device called, and a string that starts with "cuda"
    needs = (("qual:torch.device",), ("str^cuda",))
    fixable = "sometimes"
    fix_summary = ('`torch.device("cuda:0" if torch.cuda.is_available() else "cpu")` (unsafe); display at a '
                   "library's module level")
    what = """
        `torch.device("cuda")`, `torch.device("cuda:1")` or `torch.device("cuda", 1)`,
        chosen unconditionally in a statement (not under an `if`, not one side of
        `a if c else b` or of `a or b`, not a parameter's default), in code that never
        asks whether CUDA is there (no `torch.cuda.is_available()` or `device_count()` in
        its function, or in the module for module-level code, or in an `if` around it).

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
        Unsafe: on a machine without CUDA the program now runs on the CPU instead of
        failing (which is the point, but changes behaviour). `is_available()` initialises
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
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        for site in a.calls:
            if site.qualname != "torch.device" or site.line is None:
                continue  # (not in a statement: a parameter's default, which the caller may override)
            literal = _gpu_literal(site)
            if literal is None or _checks_for_cuda(ctx, site) or _chosen_conditionally(site):
                continue
            shown = a.code(site.node)
            yield ctx.violation(
                site.node,
                f"`{shown}` names a GPU with no CPU fallback: this code cannot run where CUDA is not available",
                self._fix(ctx, site, literal),
            )

    def _fix(self, ctx: Context, site: CallSite, literal: "_Literal") -> Fix:
        a = ctx.analysis
        message = "Fall back to the CPU when CUDA is not available"
        reason = _refusal(ctx, site, literal)
        if reason is not None:
            return Fix(Applicability.DISPLAY, f"{message} (display only: {reason})")
        try:
            torch, imports = ctx.torch_for(site)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{message} (display only: {exc})")
        quote, value = literal.quote, literal.device
        args = f"{quote}{value}{quote} if {torch}.cuda.is_available() else {quote}cpu{quote}"
        call = site.node
        edit = ctx.replace(call, f"{a.code(call.func)}({args})")
        return Fix(Applicability.UNSAFE, message, tuple(imports) + (edit,))


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


def _chosen_conditionally(site: CallSite) -> bool:
    """Whether the code picks this GPU on a condition: under an ``if``/``elif``/``else`` or
    a ``match`` case (``if backend == "nccl": d = torch.device("cuda")``), or as one side
    of a conditional expression or of ``and``/``or`` (``current() or torch.device("cuda")``).
    The author decided when it applies; the rule speaks of unconditional choices only."""
    if any(part in ("body", "orelse", "case") for _, part in site.cond):
        return True
    found = []

    class Choices(cst.CSTVisitor):
        def __init__(self) -> None:
            self.depth = 0

        def visit_IfExp(self, node: cst.IfExp) -> None:
            self.depth += 1

        def leave_IfExp(self, node: cst.IfExp) -> None:
            self.depth -= 1

        def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
            self.depth += 1

        def leave_BooleanOperation(self, node: cst.BooleanOperation) -> None:
            self.depth -= 1

        def visit_Call(self, node: cst.Call) -> None:
            if node is site.node:
                found.append(self.depth > 0)

    walk(site.line, Choices())  # (the rule looks at calls in statement lines only)
    return bool(found and found[0])


_ASKS = ("is_available", "device_count")


def _checks_for_cuda(ctx: Context, site: CallSite) -> bool:
    """Whether the code around the site already asks for CUDA: its function (or the
    module, for module-level code) does, or an ``if`` around it, however far out (a test
    method defined under ``if torch.cuda.is_available():``). The author decided what
    happens without it."""
    a = ctx.analysis
    fn = a.enclosing_function(site.scope)
    text = a.code(fn.node) if fn is not None else a.text
    if any(word in text for word in _ASKS):
        return True
    line = a.range(site.node).start.line
    return any(header.startswith(("if ", "elif ")) and any(word in header for word in _ASKS)
               for _, header in a.devices.outline.headers(line, 1))


def _refusal(ctx: Context, site: CallSite, literal: _Literal) -> Optional[str]:
    """Why the fallback cannot be written in place, or None."""
    a = ctx.analysis
    if literal.by_hand:
        return "the index is an expression or a keyword: write the fallback by hand"
    fn = a.enclosing_function(site.scope)
    if fn is None:
        if not a.devices.is_script:
            return _LIBRARY
        hazard = ctx.module_query_hazard()
        if hazard:
            return hazard
    elif ctx.torchscript(fn.node):
        return "the function is compiled by TorchScript"
    return None

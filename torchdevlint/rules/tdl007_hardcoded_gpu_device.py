"""TDL007 hardcoded-gpu-device (opt-in): ``torch.device("cuda:0")``, ``.cuda(0)``,
``.to("cuda")``, ``device="cuda"``: a GPU with no CPU fallback."""

from __future__ import annotations

from typing import Iterable, List, Optional, Tuple

import libcst as cst

from ..analysis import CallSite
from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule, Uninsertable
from .portability import torch_for_test, unconditional


class HardcodedGpuDevice(Rule):
    code = "TDL007"
    name = "hardcoded-gpu-device"
    summary = ('a GPU the code names (`torch.device("cuda:0")`, `.cuda(0)`, `.to(f"cuda:{gpu}")`) with no CPU '
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
        A GPU the code names: `torch.device("cuda")`, `torch.device("cuda:1")`,
        `torch.device("cuda", 1)` or `("cuda", gpu)`, `.cuda(1)` / `.cuda(device=1)`,
        `.to("cuda")`, a `device="cuda:0"` argument (`torch.zeros(2, device="cuda")`), or
        a device string built at run time (`f"cuda:{gpu}"`, `"cuda:" + str(gpu)`,
        `"cuda:{}".format(gpu)`, `"cuda:%d" % gpu`) in those places, chosen
        unconditionally in a statement (not under an `if`, not one side of `a if c else b`
        or of `a or b`, not a parameter's default), in code that never asks whether CUDA
        is there (no `torch.cuda.is_available()` or `device_count()` in its function, or
        in the module for module-level code, or in an `if` around it), and that does not
        tell the CPU from CUDA itself (`if device.type == "cpu":`), outside functions and
        classes named or decorated for CUDA or a GPU. Not in per-rank code (spawned
        workers, scripts launched per rank: GPU code by design, where a rank-independent
        device is TDL003's bug), nor a bare `.cuda()` (TDL001's) or `.cuda(gpu)` (the
        argument may be an index, a string or a device).

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
        named (`.cuda(1)` becomes `.to(...)` of it, keeping `non_blocking`); a string built
        at run time keeps its expression (`f"cuda:{gpu}" if torch.cuda.is_available() else
        "cpu"`), and `torch.device("cuda", gpu)` the whole call (`torch.device("cuda",
        gpu) if torch.cuda.is_available() else torch.device("cpu")`). Unsafe: on a
        machine without CUDA the program now runs on the CPU instead of failing (which is
        the point, but changes behaviour). `is_available()` initialises CUDA: the fix is
        display-only at the module level of a module that is not a script (it would run
        at every import), in a module that sets `CUDA_VISIBLE_DEVICES` (the query would
        come first and freeze the devices), and in TorchScript.
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
        "import torch\ndef f(x, args):\n    return x.cuda(args.gpu)\n",
        "import os, torch\nimport torch.distributed as dist\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
        "dist.init_process_group('nccl')\ntorch.cuda.set_device(local_rank)\n"
        "device = torch.device(f'cuda:{local_rank}')\n",
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
        # an index or a string that is an expression: the whole choice gets the fallback
        Example('import torch\ndef f(gpu):\n    return torch.device("cuda", gpu)\n',
                'import torch\ndef f(gpu):\n    return torch.device("cuda", gpu) if torch.cuda.is_available() '
                'else torch.device("cpu")\n'),
        Example("import torch\ndef f(args, x):\n    d = torch.device('cuda', args.gpu).type\n"
                "    return x.to(f'cuda:{args.gpu}'), torch.zeros(1, device='cuda:%d' % args.gpu), d\n",
                "import torch\ndef f(args, x):\n    d = (torch.device('cuda', args.gpu) if torch.cuda.is_available() "
                "else torch.device('cpu')).type\n"
                "    return x.to(f'cuda:{args.gpu}' if torch.cuda.is_available() else 'cpu'), "
                "torch.zeros(1, device='cuda:%d' % args.gpu if torch.cuda.is_available() else 'cpu'), d\n"),
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
        devices = a.devices
        per_rank = {node for _, node, _ in devices.fixed_placements}  # TDL003's
        for site, node, rewrite in _gpu_choices(a):
            if node in per_rank or devices.per_rank(site) is not None or not unconditional(ctx, site, node):
                continue  # (per-rank code is GPU code by design: what matters there is TDL003's)
            a_fix = self._fix(ctx, site, node, rewrite)
            method = isinstance(node, cst.Call) and site.method == "cuda"  # `.cuda(0)`, not its receiver
            shown = "." + a.code(node.with_changes(func=node.func.attr)) if method else a.code(node)
            yield ctx.violation(
                node, f"`{shown}` names a GPU with no CPU fallback: this code cannot run where CUDA is not available",
                ctx.guarded(a_fix, node if isinstance(node, cst.Call) else None))

    def _fix(self, ctx: Context, site: CallSite, node: cst.CSTNode, rewrite: "_Rewrite") -> Fix:
        a = ctx.analysis
        try:
            torch, imports = torch_for_test(ctx, site, new_query=True)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{_MESSAGE} (display only: {exc})")
        test, q = f"{torch}.cuda.is_available()", rewrite.quote
        if rewrite.kind == "literal":  # torch.device("cuda:1"), .to("cuda"), device="cuda:0"
            text = f"{q}{rewrite.device}{q} if {test} else {q}cpu{q}"
            edit = ctx.replace(node, f"{a.code(node.func)}({text})" if isinstance(node, cst.Call) else text)
        elif rewrite.kind == "index":  # .cuda(1) -> .to("cuda:1" if ... else "cpu"), keeping non_blocking
            edit = ctx.cuda_to_device(node, f"{q}{rewrite.device}{q} if {test} else {q}cpu{q}")  # type: ignore[arg-type]
        elif rewrite.kind == "expression":  # f"cuda:{gpu}" -> f"cuda:{gpu}" if ... else "cpu"
            edit = ctx.replace(node, f"{a.code(node)} if {test} else {q}cpu{q}")
        else:  # torch.device("cuda", gpu): the whole call, or the CPU
            text = f"{a.code(node)} if {test} else {a.code(node.func)}({q}cpu{q})"  # type: ignore[attr-defined]
            edit = ctx.replace(node, text if _stands_alone(site) else f"({text})")
        return Fix(Applicability.UNSAFE, _MESSAGE, tuple(imports) + (edit,))


_MESSAGE = "Fall back to the CPU when CUDA is not available"


class _Rewrite:
    """How a GPU choice gets its fallback: ``literal`` (the string names the GPU:
    ``device``), ``index`` (``.cuda(1)``: ``device`` is ``cuda:1``), ``expression`` (a
    string built at run time: the expression itself), ``call`` (``torch.device("cuda",
    gpu)``: the whole call); ``quote`` is the code's own."""

    def __init__(self, kind: str, device: str = "", quote: str = '"'):
        self.kind, self.device, self.quote = kind, device, quote


def _gpu_choices(a) -> List[Tuple[CallSite, cst.CSTNode, _Rewrite]]:
    """Every place a call names a GPU: the placements with literals the analysis knows
    (``devices.gpu_placements``, which TDL003 reads too), then what only this rule
    rewrites -- ``torch.device("cuda", gpu)`` and its keyword forms, and strings built at
    run time -- with the node to rewrite and how."""
    found: List[Tuple[CallSite, cst.CSTNode, _Rewrite]] = []
    placed = set()
    for site, node, _ in a.devices.gpu_placements:
        placed.add(node)
        if isinstance(node, cst.SimpleString):  # .to("cuda"), device="cuda:0"
            found.append((site, node, _Rewrite("literal", node.evaluated_value, node.quote[-1])))  # type: ignore[arg-type]
        elif site.qualname == "torch.device":
            found.append((site, node, _gpu_literal(site)))  # type: ignore[arg-type]
        else:  # .cuda(1), .cuda(device=1)
            arg = site.positional(0) or site.keyword("device")
            found.append((site, node, _Rewrite("index", f"cuda:{int(arg.value.value, 0)}")))  # type: ignore[union-attr]
    for site in a.calls:
        if site.qualname == "torch.device":
            if site.node in placed:
                continue
            literal = _gpu_literal(site)
            first = site.positional(0)
            if literal is not None:  # an index that is an expression, keywords
                found.append((site, site.node, literal))
            elif len(site.node.args) == 1 and first is not None and _gpu_string(first.value):
                found.append((site, first.value, _Rewrite("expression", quote=_quote(site))))
            continue
        for arg in site.node.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if (keyword == "device" or (keyword is None and not arg.star and site.method == "to"
                                        and site.qualname is None and arg is site.node.args[0])) and _gpu_string(
                    arg.value):
                found.append((site, arg.value, _Rewrite("expression", quote=_quote(site))))
    return found


def _gpu_literal(site: CallSite) -> Optional[_Rewrite]:
    """How ``torch.device(...)`` names a GPU with a string literal: ``"cuda"``,
    ``"cuda:1"``, ``"cuda", 1`` (``literal``), or with keywords or an index that is an
    expression (``call``); None for a CPU, a variable, a conditional."""
    args = site.node.args
    first = site.positional(0)
    kind = site.keyword("type")
    value = first.value if first is not None else (kind.value if kind is not None else None)
    if not isinstance(value, cst.SimpleString):
        return None
    text = value.evaluated_value
    if not isinstance(text, str) or not (text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit())):
        return None
    quote = value.quote[-1]
    if first is not None and len(args) == 1:
        return _Rewrite("literal", text, quote)
    index = site.positional(1)
    if (first is not None and len(args) == 2 and index is not None and text == "cuda"
            and isinstance(index.value, cst.Integer) and index.value.value.isdigit()):
        return _Rewrite("literal", f"cuda:{int(index.value.value)}", quote)
    return _Rewrite("call", quote=quote)


def _gpu_string(expr: cst.BaseExpression) -> bool:
    """A device string built at run time that names a GPU: ``f"cuda:{gpu}"``,
    ``"cuda:" + str(gpu)``, ``"cuda:%d" % gpu``, ``"cuda:{}".format(gpu)``."""
    if isinstance(expr, cst.FormattedString):
        first = expr.parts[0] if expr.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda")
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Modulo)):
        left = expr.left
        while isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Add):
            left = left.left
        return isinstance(left, cst.SimpleString) and str(left.evaluated_value).startswith("cuda")
    if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format"
            and isinstance(expr.func.value, cst.SimpleString)):
        return str(expr.func.value.evaluated_value).startswith("cuda")
    return False


def _quote(site: CallSite) -> str:
    """The quote the call's own strings use (for the ``"cpu"`` the fix writes)."""
    for arg in site.node.args:
        value = arg.value
        if isinstance(value, cst.SimpleString):
            return value.quote[-1]
        if isinstance(value, cst.FormattedString):
            return value.start[-1]
        if isinstance(value, cst.BinaryOperation) and isinstance(value.left, cst.SimpleString):
            return value.left.quote[-1]
    return '"'


def _stands_alone(site: CallSite) -> bool:
    """Whether a conditional expression may replace the call without parentheses: it is
    the value of an assignment or a ``return``, or an argument of another call."""
    if site.parent is not None and any(arg.value is site.node for arg in site.parent.node.args):
        return True
    line = site.line
    stmt = line.body[0] if line is not None and len(line.body) == 1 else None
    return isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.Return)) and stmt.value is site.node

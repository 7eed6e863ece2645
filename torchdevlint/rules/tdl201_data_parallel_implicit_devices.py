"""TDL201 data-parallel-implicit-devices: ``DataParallel(m).cuda()`` without ``device_ids``."""

from __future__ import annotations

from typing import Iterable, List, Optional

import libcst as cst

from ..analysis import DataParallelWrap
from .. import names as N
from ..model import Applicability, Edit, Fix, Violation
from .base import Context, Example, Rule, Uninsertable

_SIMPLE = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


class DataParallelImplicitDevices(Rule):
    code = "TDL201"
    name = "data-parallel-implicit-devices"
    summary = "`DataParallel` moved with `.cuda()` while its devices are implicit"
    triggers = ("@data-parallel",)  # the word `DataParallel` (not DistributedDataParallel)
    # the gate on the code: DataParallel (or a subclass's base), and a move to CUDA:
    # a `.cuda(...)` call, or a "cuda" string (`.to("cuda")`, a device so bound)
    needs = ((f"qual:{N.DATA_PARALLEL}",), ("call:cuda", "str^cuda"))
    fixable = "sometimes"
    fix_summary = 'move before wrapping, explicit `device_ids` (unsafe)'
    fix_priority = 0
    what = """
        A torch `DataParallel` (`torch.nn.DataParallel`, `nn.DataParallel`,
        `torch.nn.parallel.DataParallel`, any alias, or a subclass defined in the file)
        without `device_ids`, whose result is moved with `.cuda()`: chained
        (`DP(m).cuda()`), in a later statement on the same name or attribute
        (`self.model = DP(self.model)` ... `self.model.cuda()`, not in the other arm of the
        `if` that wraps), or through the parent module (`model.features =
        DP(model.features); model.cuda()`). Also literal
        `device_ids` while the module is moved to the current device
        (`DP(m, device_ids=[1, 2]).cuda()`). Not `DistributedDataParallel`, nor a wrapper
        whose `device_ids` the program computes.
    """
    why = """
        `DataParallel` scatters over every visible GPU unless `device_ids` says
        otherwise, gathers on `device_ids[0]`, and requires the module's parameters on
        `device_ids[0]` before forward. `.cuda()` moves them to the *current* device, so
        the code works only while that happens to be 0: after `set_device(1)` forward
        fails, and card 0 always carries the gather. DistributedDataParallel (one
        process per GPU) avoids all of this and is faster.
    """
    example = """
        model = nn.DataParallel(model).cuda()
    """
    use_instead = """
        device_ids = list(range(torch.cuda.device_count()))
        primary_device = torch.device("cuda", device_ids[0]) if device_ids else torch.device("cpu")
        model = nn.DataParallel(model.to(primary_device), device_ids=device_ids)
        # better still: torch.nn.parallel.DistributedDataParallel, one process per GPU
    """
    fix_safety = """
        Without `device_ids`, the fix defines `device_ids` (every visible GPU, as
        `DataParallel` does by default) and the primary device once after the imports,
        moves the module there before wrapping, passes `device_ids` explicitly and drops
        the `.cuda()` (or turns a later one into `.to(primary_device)`). On a machine
        without CUDA `DataParallel` is a pass-through and `device_ids` is empty, so the
        program still runs where `.cuda()` failed: a behaviour change, so the fix is
        **unsafe** (also when the file changes the current device, or for a subclass of
        `DataParallel`). It is display-only in a library module (the inserted
        `device_count()` would query CUDA at import in every importer), and in a module
        that sets `CUDA_VISIBLE_DEVICES`. With literal `device_ids` that start at 0 the
        module moves to `cuda:0` before wrapping (`DP(m.to("cuda:0"), device_ids=[0, 1])`;
        a later `.cuda()` becomes `.to("cuda:0")`): where `.cuda()` put it unless code
        elsewhere changed the current device (unsafe); a migration's TDL007 then gives that
        GPU its CPU fallback. Other literal `device_ids` (`[1, 2]`), or a file that changes
        the current device: the module moves to `device_ids[0]` (`DP(m.to("cuda:1"),
        device_ids=[1, 2])`), where every run of the original that worked had it, for a
        forward fails elsewhere (unsafe: the runs that failed now work).
    """
    VALID = (
        "import torch.nn as nn\nmodel = nn.DataParallel(model.to(device), device_ids=device_ids)\n",
        "import torch.nn as nn\nmodel = nn.DataParallel(model, device_ids=[args.gpu]).cuda(args.gpu)\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model).cuda()\n",
        "class MyDataParallel:\n    pass\nmodel = MyDataParallel(model).cuda()\n",
        "import torch.nn as nn\nmodel = nn.DataParallel(model.cuda())\n",
        # the `.cuda()` in the other arm moves the unwrapped module (openprompt's model_to_device)
        "import torch\n\n\ndef model_to_device(model, config):\n    if config.num_gpus > 1:\n"
        "        device = 'cuda:{}'.format(config.local_rank)\n"
        "        model = torch.nn.DataParallel(model.to(device), output_device=device)\n"
        "    elif config.num_gpus > 0:\n        model = model.cuda()\n    return model\n",
    )
    INVALID = (
        # after the `if` that wraps, the move takes the wrapper on that path (display: a library)
        Example("import torch\nimport torch.nn as nn\n\n\ndef to_device(model, n):\n    if n > 1:\n"
                "        model = nn.DataParallel(model)\n    model.cuda()\n    return model\n", None),
        Example(
            "import torch\nimport torch.nn as nn\nmodel = nn.DataParallel(nn.Linear(2, 2)).cuda()\n",
            "import torch\nimport torch.nn as nn\n"
            "device_ids = list(range(torch.cuda.device_count()))\n"
            'primary_device = torch.device("cuda", device_ids[0]) if device_ids else torch.device("cpu")\n'
            "model = nn.DataParallel(nn.Linear(2, 2).to(primary_device), device_ids=device_ids)\n",
        ),
        # literal device_ids: the module moves to device_ids[0], where DataParallel needs it
        Example("from torch.nn import DataParallel as DP\nmodel = DP(model, device_ids=[1, 2]).cuda()\n",
                'from torch.nn import DataParallel as DP\nmodel = DP(model.to("cuda:1"), device_ids=[1, 2])\n'),
        Example("from torch.nn import DataParallel as DP\nmodel = DP(model, device_ids=[0, 1]).cuda()\n",
                'from torch.nn import DataParallel as DP\nmodel = DP(model.to("cuda:0"), device_ids=[0, 1])\n'),
        Example("import torch.nn as nn\n\n\nclass Trainer:\n    def __init__(self, net):\n"
                "        self.net = nn.DataParallel(net, device_ids=[0, 1])\n        self.net.cuda()\n",
                "import torch.nn as nn\n\n\nclass Trainer:\n    def __init__(self, net):\n"
                '        self.net = nn.DataParallel(net.to("cuda:0"), device_ids=[0, 1])\n'
                '        self.net.to("cuda:0")\n'),
        Example(
            "import torch\nimport torch.nn as nn\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.DataParallel(nn.Linear(2, 2)).to(device)\n",
            "import torch\nimport torch.nn as nn\n"
            "device_ids = list(range(torch.cuda.device_count()))\n"
            'primary_device = torch.device("cuda", device_ids[0]) if device_ids else torch.device("cpu")\n'
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.DataParallel(nn.Linear(2, 2).to(primary_device), device_ids=device_ids)\n",
        ),
        # the script's own CUDA_VISIBLE_DEVICES write comes first: the GPUs are asked for after it
        Example(
            "import os\nimport torch\nimport torch.nn as nn\nos.environ['CUDA_VISIBLE_DEVICES'] = '0,1'\n"
            "model = nn.DataParallel(nn.Linear(2, 2)).cuda()\n",
            "import os\nimport torch\nimport torch.nn as nn\nos.environ['CUDA_VISIBLE_DEVICES'] = '0,1'\n"
            "device_ids = list(range(torch.cuda.device_count()))\n"
            'primary_device = torch.device("cuda", device_ids[0]) if device_ids else torch.device("cpu")\n'
            "model = nn.DataParallel(nn.Linear(2, 2).to(primary_device), device_ids=device_ids)\n",
        ),
        Example(
            "import os\nimport torch\nimport torch.nn as nn\n\n\ndef main(gpus):\n"
            "    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\n    model = nn.DataParallel(nn.Linear(2, 2)).cuda()\n",
            "import os\nimport torch\nimport torch.nn as nn\n\n\ndef main(gpus):\n"
            "    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\n"
            "    device_ids = list(range(torch.cuda.device_count()))\n"
            '    primary_device = torch.device("cuda", device_ids[0]) if device_ids else torch.device("cpu")\n'
            "    model = nn.DataParallel(nn.Linear(2, 2).to(primary_device), device_ids=device_ids)\n",
        ),
        # ... but a write after the wrap: a question first would freeze it (display)
        Example(
            "import os\nimport torch\nimport torch.nn as nn\n\n\ndef main(gpus):\n"
            "    model = nn.DataParallel(nn.Linear(2, 2)).cuda()\n    os.environ['CUDA_VISIBLE_DEVICES'] = gpus\n",
            None,
        ),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        wraps = a.data_parallel_wraps
        if not wraps:
            return
        anchor = min(w.wrap.order for w in wraps)
        changes_device = bool(a.set_device_sites) or any(
            s.in_device_context for s in a.calls)
        # a function that sets CUDA_VISIBLE_DEVICES itself and wraps after it: the lines
        # that ask CUDA go there, once, before the first wrap
        places = [ctx.function_query_place(w.wrap.node) for w in wraps] if a.torch_alias is not None else [None]
        local = min(places, key=lambda p: a.first_line(p)) if all(places) else None
        for wrap in wraps:
            if wrap.literal_ids is not None:
                ids = ", ".join(map(str, wrap.literal_ids)) or ""
                first = wrap.literal_ids[0] if wrap.literal_ids else 0
                fix = self._literal_fix(ctx, wrap, first, changes_device)
                message = (f"`DataParallel` with device_ids=[{ids}] is moved with `.cuda()` to the "
                           f"current device, not cuda:{first}: forward fails unless they match; "
                           "move the module to device_ids[0] before wrapping (or use DistributedDataParallel)")
            else:
                fix = self._fix(ctx, wrap, anchor, changes_device, local)
                message = ("`DataParallel` without `device_ids` moved with `.cuda()` (or `.to(\"cuda\")`): it "
                           "spreads over every visible GPU and needs the module on device_ids[0], but the move "
                           "picks the current device; make `device_ids` explicit and move the module before "
                           "wrapping (or use DistributedDataParallel)")
            yield ctx.violation(wrap.move.node, message, fix)

    def _literal_fix(self, ctx: Context, wrap: DataParallelWrap, first: int, changes_device: bool) -> Fix:
        """``DP(m, device_ids=[k, ...]).cuda()`` -> ``DP(m.to("cuda:k"), device_ids=[k, ...])``:
        the module goes where DataParallel needs it. For ``k == 0`` in a file that does not
        change the current device, where `.cuda()` put it unless code elsewhere changed the
        current device; otherwise where every run of the original that worked had it (a
        forward fails unless the module is on device_ids[0]), and where the others failed.
        Unsafe either way; display only where the module is not an argument to move."""
        if (wrap.wrap.keyword("module") or wrap.wrap.positional(0)) is None:
            ids = ", ".join(map(str, wrap.literal_ids or []))
            return Fix(Applicability.DISPLAY,
                       f"Move the module to cuda:{first} before wrapping, e.g. "
                       f"`DataParallel(module.to(\"cuda:{first}\"), device_ids=[{ids}])`, and drop `.cuda()`")
        if first == 0 and not changes_device:
            message = ("Move the module to cuda:0 before wrapping, and drop `.cuda()` (where `.cuda()` put it, "
                       "unless code elsewhere changed the current device)")
        else:
            message = (f"Move the module to cuda:{first} before wrapping, and drop `.cuda()` (DataParallel needs it "
                       f"on device_ids[0]; `.cuda()` put it there only where the current device was cuda:{first})")
        return Fix(Applicability.UNSAFE, message, tuple(self._moved(ctx, wrap, f'"cuda:{first}"')))

    def _moved(self, ctx: Context, wrap: DataParallelWrap, target: str, ids: Optional[str] = None) -> List[Edit]:
        """The edits that move the wrapped module to ``target`` before wrapping (passing
        ``device_ids=<ids>`` when given) and drop or retarget the move after it."""
        a = ctx.analysis
        call = wrap.wrap.node
        module_arg = wrap.wrap.keyword("module") or wrap.wrap.positional(0)
        value = module_arg.value  # type: ignore[union-attr]
        moved = a.code(value) if isinstance(value, _SIMPLE) else f"({a.code(value)})"
        new_args: List[cst.Arg] = []
        for arg in call.args:
            if arg is module_arg:
                arg = arg.with_changes(value=cst.parse_expression(f"{moved}.to({target})"))
            new_args.append(arg)
        if ids is not None:
            last = new_args[-1]
            if last.comma is cst.MaybeSentinel.DEFAULT:
                new_args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            new_args.append(cst.Arg(cst.Name(ids), keyword=cst.Name("device_ids"),
                                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
        new_call = a.code(call.with_changes(args=new_args, lpar=[], rpar=[]))
        if wrap.shape == "chained":
            return [ctx.replace(wrap.move.node, new_call)]
        return [ctx.replace(call, new_call), ctx.cuda_to_device(wrap.move.node, target)]

    def _fix(self, ctx: Context, wrap: DataParallelWrap, anchor: int, changes_device: bool,
             local: Optional[cst.CSTNode]) -> Fix:
        a = ctx.analysis
        module_arg = wrap.wrap.keyword("module") or wrap.wrap.positional(0)
        if module_arg is None:
            return Fix(Applicability.DISPLAY, "Pass the module and `device_ids` explicitly")
        ids = a.free_name("device_ids")
        primary = a.free_name("primary_device", taken=(ids,))
        torch = a.torch_alias or "torch"
        lines = [f"{ids} = list(range({torch}.cuda.device_count()))",
                 f'{primary} = {torch}.device("cuda", {ids}[0]) if {ids} else {torch}.device("cpu")']
        after, hazard = ctx.module_query_place(anchor)
        try:
            if local is not None:  # after the function's own CUDA_VISIBLE_DEVICES write,
                hazard, edits = None, [ctx.lines_before(local, lines)]  # asked when the function runs
            else:
                edits = ctx.insert_module_lines(lines, anchor, need_torch=a.torch_alias is None, after=after)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"Not rewritten: {exc}")
        edits += self._moved(ctx, wrap, primary, ids)
        local_subclass = wrap.wrap.qualname is None
        reasons = []
        if changes_device:
            reasons.append("this file changes the current device")
        if local_subclass:
            reasons.append("the wrapper is a subclass defined here")
        # without GPUs the rewrite runs on the CPU where `.cuda()` failed: a behaviour change
        reasons.insert(0, "falls back to the CPU without GPUs")
        applicability = Applicability.UNSAFE
        if hazard is None and local is None and a.devices.entry_point(anchor) is None:
            hazard = ("this looks like a library module: the inserted `device_count()` would query "
                      "CUDA at import in every importer")
        if hazard:  # the inserted device_count() would run at import
            applicability, reasons = Applicability.DISPLAY, reasons + [f"display only: {hazard}"]
        note = f" ({'; '.join(reasons)})" if reasons else ""
        return Fix(applicability,
                   f"Move the module to `{primary}` before wrapping and pass `device_ids={ids}`{note}",
                   tuple(edits), frozenset({ids, primary}))

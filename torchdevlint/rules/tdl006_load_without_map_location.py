"""TDL006 load-without-map-location: ``torch.load`` without ``map_location``."""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from ..analysis import CallSite, walk
from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule

# loader -> the position of map_location among its positional parameters
LOADERS = {
    "torch.load": 1,
    "torch.serialization.load": 1,
    "torch.jit.load": 1,
    "torch.hub.load_state_dict_from_url": 2,
}


class LoadWithoutMapLocation(Rule):
    code = "TDL006"
    name = "load-without-map-location"
    summary = "`torch.load` without `map_location` restores tensors onto the GPU they were saved from"
    triggers = ("@load",)  # the word `load` after a dot or in an import list (see catalogue)
    also_requires = ("torch",)
    # the gate on the code: a call of one of the loaders that passes no map_location
    needs = (tuple(f"nomap@{position}:{q}" for q, position in LOADERS.items()),)
    fixable = "sometimes"
    fix_summary = ('`map_location=<device in scope>`, `"cpu"` for state dicts and CPU-only scripts, or a '
                   'script\'s device (unsafe); display in library modules')
    what = """
        `torch.load`, `torch.jit.load` and `torch.hub.load_state_dict_from_url` called
        without `map_location` (neither by keyword nor in its position), and without
        `**kwargs` that could carry it.
    """
    why = """
        Without `map_location`, every tensor goes back to the device it was saved from:
        a checkpoint written on `cuda:0` fails to load on a machine without CUDA
        ("Attempting to deserialize object on a CUDA device"), and in a multi-GPU job
        every rank materialises its copy on GPU 0 — memory on the first card, and a
        CUDA context there for every process.
    """
    example = """
        checkpoint = torch.load("model.pt")
        model.load_state_dict(torch.load("weights.pt"))
    """
    use_instead = """
        checkpoint = torch.load("model.pt", map_location=device)
        model.load_state_dict(torch.load("weights.pt", map_location="cpu"))
    """
    fix_safety = """
        Always **unsafe**: where the tensors land changes on purpose. With a device bound
        in scope (the names TDL004 recognises), `map_location=<that device>`. Without
        one, `map_location="cpu"` where the result only feeds `load_state_dict`
        (directly, an entry of it, `torch.load(p)["state_dict"]`, or through a name used
        only there, but for its metadata: a membership test `'version' in ckpt`, an
        entry read by its key for a message,
        `print(ckpt['version'])`, `f"{ckpt['epoch']}"`, or into a name that only
        messages use, `saved_version = ckpt['version']`): `load_state_dict` copies into
        the model's own tensors wherever they live, so the CPU detour changes nothing
        but the peak GPU memory. Otherwise, in a script that places work on the GPU
        itself (a bare `.cuda()`, a legacy CUDA type), `map_location=device` with the
        device defined where the script starts (the one definition TDL001 and TDL005
        use, CPU fallback included): the checkpoint lands on the device the script
        computes on, GPU 0 on a GPU machine as before, and it loads without CUDA; in a
        script that places nothing on a GPU (a checkpoint converter), `map_location="cpu"`.
        In a library module it is display-only: the caller may rely on the tensors being
        on the GPU.
    """
    VALID = (
        "import torch\nx = torch.load('a.pt', map_location='cpu')\n",
        "import torch\nx = torch.load('a.pt', 'cpu')\n",
        "import torch\nx = torch.jit.load('m.pt', map_location=device)\n",
        "import torch\nsd = torch.hub.load_state_dict_from_url(url, None, 'cpu')\n",
        "import torch\ndef f(path, **kw):\n    return torch.load(path, **kw)\n",
        "import json\nx = json.load(open('a.json'))\n",
        "import pickle\nimport torch\nx = pickle.load(fh)\n",
    )
    INVALID = (
        Example(
            "import torch\nmodel.load_state_dict(torch.load('weights.pt'))\n",
            "import torch\nmodel.load_state_dict(torch.load('weights.pt', map_location=\"cpu\"))\n",
        ),
        Example(
            "import torch\ndef load(model, path):\n    model.load_state_dict(torch.load(path)['state_dict'])\n",
            "import torch\ndef load(model, path):\n"
            "    model.load_state_dict(torch.load(path, map_location=\"cpu\")['state_dict'])\n",
        ),
        Example(
            "import torch\ndevice = torch.device('cuda:1')\nckpt = torch.load('c.pt')\n",
            "import torch\ndevice = torch.device('cuda:1')\nckpt = torch.load('c.pt', map_location=device)\n",
        ),
        Example(
            "import torch\ndef resume(model, opt, path):\n    ckpt = torch.load(path)\n"
            "    model.load_state_dict(ckpt['model'])\n    opt.load_state_dict(ckpt['opt'])\n",
            "import torch\ndef resume(model, opt, path):\n    ckpt = torch.load(path, map_location=\"cpu\")\n"
            "    model.load_state_dict(ckpt['model'])\n    opt.load_state_dict(ckpt['opt'])\n",
        ),
        Example("import torch\ndef resume(path):\n    ckpt = torch.load(path)\n    return ckpt['epoch']\n"),
        # a script that computes on the GPU: its device, defined where it starts
        Example("import torch\ndef main(path):\n    ckpt = torch.load(path)\n    net = ckpt['model'].cuda()\n"
                "    return net, ckpt['epoch']\nif __name__ == '__main__':\n    main('c.pt')\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "def main(path):\n    ckpt = torch.load(path, map_location=device)\n    net = ckpt['model'].to(device)\n"
                "    return net, ckpt['epoch']\nif __name__ == '__main__':\n    main('c.pt')\n"),
        # a script that places nothing on a GPU (a checkpoint converter): the CPU
        Example("import torch\ndef main(src, dst):\n    ckpt = torch.load(src)\n    ckpt['meta'] = 1\n"
                "    torch.save(ckpt, dst)\nif __name__ == '__main__':\n    main('a.pt', 'b.pt')\n",
                "import torch\ndef main(src, dst):\n    ckpt = torch.load(src, map_location=\"cpu\")\n    ckpt['meta'] = 1\n"
                "    torch.save(ckpt, dst)\nif __name__ == '__main__':\n    main('a.pt', 'b.pt')\n"),
        Example("from torch import jit\nm = jit.load('m.pt')\n", "from torch import jit\nm = jit.load('m.pt', map_location=\"cpu\")\n"),
        # a checkpoint's metadata read for a message: still only state dicts are loaded
        Example("import torch\n\n\ndef load(gan, path):\n    data = torch.load(path)\n    if 'version' in data:\n"
                "        print(f\"loading from version {data['version']}\")\n    gan.load_state_dict(data['GAN'])\n",
                "import torch\n\n\ndef load(gan, path):\n    data = torch.load(path, map_location=\"cpu\")\n"
                "    if 'version' in data:\n        print(f\"loading from version {data['version']}\")\n"
                "    gan.load_state_dict(data['GAN'])\n"),
        # ... into a name only a message uses (lightweight-gan's failed resume)
        Example("import torch\n\n\ndef load(gan, path):\n    data = torch.load(path)\n    try:\n"
                "        gan.load_state_dict(data['GAN'])\n    except Exception:\n"
                "        saved = data['version']\n        print(f'saved by version {saved}')\n        raise\n",
                "import torch\n\n\ndef load(gan, path):\n    data = torch.load(path, map_location=\"cpu\")\n    try:\n"
                "        gan.load_state_dict(data['GAN'])\n    except Exception:\n"
                "        saved = data['version']\n        print(f'saved by version {saved}')\n        raise\n"),
        # ... but an entry the code goes on with (display: no device is bound here)
        Example("import torch\n\n\ndef load(gan, path):\n    data = torch.load(path)\n    print(data['version'])\n"
                "    gan.load_state_dict(data['GAN'])\n    return data['ema']\n", None),
        Example("import torch\n\n\ndef load(gan, path):\n    data = torch.load(path)\n    ema = data['ema']\n"
                "    gan.load_state_dict(data['GAN'])\n    return ema\n", None),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        sites = [s for s in a.calls if s.qualname in LOADERS and not _has_map_location(s.node, LOADERS[s.qualname])]
        anchor = min((s.order for s in sites), default=0)
        for site in sites:
            loader = site.qualname.replace("torch.serialization.load", "torch.load")  # type: ignore[union-attr]
            message = (f"`{loader}` without `map_location` restores every tensor onto the device it "
                       "was saved from (GPU 0 for most checkpoints): it fails without CUDA and puts "
                       "every rank's copy on GPU 0; pass `map_location`")
            yield ctx.violation(site.node, message, self._fix(ctx, site, anchor))

    def _fix(self, ctx: Context, site: CallSite, anchor: int) -> Fix:
        a = ctx.analysis
        choice = a.devices.chosen_device(site)
        definition: list = []
        if choice is not None:
            value, why = choice.code, f"the device already chosen here, {choice.why}"
        elif _feeds_only_load_state_dict(a, site):
            value, why = '"cpu"', "the result only feeds `load_state_dict`, which copies into the model's tensors"
        elif a.devices.entry_point(anchor) is None:
            return Fix(Applicability.DISPLAY,
                       "Pass `map_location=` the device the tensors should live on (no device is "
                       "bound here, and the result is used beyond `load_state_dict`)")
        elif a.devices.sites("TDL001") or a.devices.legacy_types:
            # a script that computes on the GPU: the one device definition TDL001 and TDL005 use
            name, definition, why_not = ctx.device_definition(anchor)
            if name is None:
                return Fix(Applicability.DISPLAY, f"Pass `map_location=` the script's device (display only: {why_not})")
            value, why = name, "a device defined where the script starts (falls back to the CPU): the tensors land there"
        else:  # a script that places nothing on a GPU itself (a checkpoint converter)
            value, why = '"cpu"', "this script places nothing on a GPU itself"
        edits = ctx.add_keyword(site.node, f"map_location={value}")
        if edits is None:
            return Fix(Applicability.DISPLAY, f"Pass `map_location={value}` (the call's layout is unusual)")
        return ctx.guarded(Fix(Applicability.UNSAFE, f"Pass `map_location={value}` ({why})",
                               tuple(definition) + tuple(edits), frozenset({value}) if definition else frozenset()))


def _has_map_location(call: cst.Call, position: int) -> bool:
    positional = 0
    for arg in call.args:
        if arg.star:  # *args or **kwargs may carry it
            return True
        if arg.keyword is not None:
            if arg.keyword.value == "map_location":
                return True
        else:
            positional += 1
    return positional > position


def _feeds_only_load_state_dict(a, site: CallSite) -> bool:
    """``m.load_state_dict(torch.load(p))`` (or an entry of it, ``torch.load(p)["model"]``),
    or ``sd = torch.load(p)`` where every later use of ``sd`` in the scope is
    ``x.load_state_dict(sd)`` / ``x.load_state_dict(sd[k])``."""
    parent = site.parent
    if parent is not None and any(_entry_of(arg.value) is site.node and arg.keyword is None
                                  for arg in parent.node.args):
        return _is_load_state_dict(parent.node)
    line = site.line
    if line is None or len(line.body) != 1 or not isinstance(line.body[0], cst.Assign):
        return False
    assign = line.body[0]
    if assign.value is not site.node or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return False
    name = assign.targets[0].target.value
    fn = a.enclosing_function(site.scope)
    body = fn.node if fn is not None else a.module
    uses = _Uses(name, body)
    walk(body, uses)
    return uses.feeding > 0 and uses.other == 1  # the assignment's own target is the one other


def _entry_of(value: cst.BaseExpression) -> cst.BaseExpression:
    """What ``value`` reads entries of (``x`` of ``x["model"]["ema"]``), or ``value``."""
    while isinstance(value, cst.Subscript):
        value = value.value
    return value


def _is_load_state_dict(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict"


_MESSAGES = frozenset({"print", "debug", "info", "warning", "warn", "error", "log", "write"})


def _called(call: cst.Call) -> str:
    """The last name of what ``call`` calls (``print``, ``logger.info`` -> ``info``)."""
    func = call.func
    return func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""


class _Uses(cst.CSTVisitor):
    """Counts the uses of a name inside ``load_state_dict(...)`` arguments (bare or
    subscripted) and everywhere else but where a checkpoint's metadata is read: a
    membership test (``'version' in ckpt``), an entry read by its key for a message
    (``print(ckpt['version'])``, ``f"{ckpt['epoch']}"``, ``logger.info(...)``), or into
    a name that only messages use, if any (``saved_version = ckpt['version']``, for the
    message of a failed load: lightweight-gan's resume)."""

    def __init__(self, name: str, body: cst.CSTNode):
        self.name, self.body = name, body
        self.feeding = 0
        self.other = 0
        self._ok: set = set()  # ids of the Name nodes that are state-dict arguments

    def visit_Call(self, node: cst.Call) -> Optional[bool]:
        if _is_load_state_dict(node):
            for arg in node.args:
                value = _entry_of(arg.value)
                if isinstance(value, cst.Name) and value.value == self.name and arg.keyword is None:
                    self.feeding += 1
                    self._ok.add(id(value))
        if _called(node) in _MESSAGES:
            for arg in node.args:
                walk(arg.value, _KeyReads(self.name, self._ok))
        return True

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        walk(node.expression, _KeyReads(self.name, self._ok))

    def visit_Assign(self, node: cst.Assign) -> None:
        target = node.targets[0].target if len(node.targets) == 1 else None
        if isinstance(target, cst.Name) and target.value != self.name:
            reads = _KeyReads(self.name, set())
            walk(node.value, reads)
            if isinstance(node.value, cst.Subscript) and reads.ok:
                messages = _MessageUses(target.value)
                walk(self.body, messages)
                if messages.assigned == 1 and messages.other == 0:
                    self._ok |= reads.ok

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for target in node.comparisons:
            value = target.comparator
            if isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(value, cst.Name) \
                    and value.value == self.name:
                self._ok.add(id(value))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self._ok:
            self.other += 1

    def visit_Attribute(self, node: cst.Attribute) -> Optional[bool]:
        walk(node.value, self)  # `x.name` is an attribute, not a use of the name
        return False


class _KeyReads(cst.CSTVisitor):
    """Marks ``name['key']`` reads (a string key) as harmless: metadata for a message."""

    def __init__(self, name: str, ok: set):
        self.name, self.ok = name, ok

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == self.name and all(
                isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.SimpleString) for e in node.slice):
            self.ok.add(id(node.value))


class _MessageUses(cst.CSTVisitor):
    """How often a name is bound (``assigned``), and used other than in a message's
    arguments or an f-string's expression (``other``)."""

    def __init__(self, name: str):
        self.name = name
        self.assigned = self.other = 0

    def visit_AssignTarget(self, node: cst.AssignTarget) -> Optional[bool]:
        if isinstance(node.target, cst.Name) and node.target.value == self.name:
            self.assigned += 1
            return False
        return True

    def visit_Call(self, node: cst.Call) -> Optional[bool]:
        if _called(node) in _MESSAGES:
            walk(node.func, self)
            return False  # its arguments are the message
        return True

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> Optional[bool]:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.other += 1

    def visit_Attribute(self, node: cst.Attribute) -> Optional[bool]:
        walk(node.value, self)  # `x.name` is an attribute, not a use of the name
        return False

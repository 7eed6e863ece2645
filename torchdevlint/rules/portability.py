"""What the opt-in portability rules (TDL007 a GPU named with no CPU fallback, TDL008 a
CUDA-only call) share: whether code needs CUDA *unconditionally*, and where a fix may
write a ``torch.cuda.is_available()`` test.

Code that already decides what happens without CUDA is left alone: a site under an
``if``/``else``/``case`` (not an ``if`` on the distributed mode, ``if args.distributed:``,
``if args.gpu is not None:`` of a spawned process's index, ``if 'SLURM_PROCID' in
os.environ:``: a launcher runs either branch on a CPU machine; nor, in a function that
needs CUDA on no condition elsewhere, an ``if`` on the data: the fix would half convert
the function), one side of ``a if c else b`` or of ``a or b``, a function (or, at module
level, a module) that asks ``is_available()``/``device_count()`` or tells the CPU from
CUDA itself (``if device.type == "cpu": return``), an ``if`` around it that
asks, or an enclosing function or class named or decorated for CUDA, ROCm or a GPU (``class
CudaTimer``, ``@unittest.skipIf(not torch.cuda.is_available(), ...)``,
``@requires_cuda``, ``@pytest.mark.gpu``): code meant for GPUs only.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Callable, FrozenSet, List, Optional, Sequence, Set, Tuple

import libcst as cst

from ..analysis import CallSite, Scope, names_in
from ..model import Edit
from .base import _LIBRARY, Context, Uninsertable

ASKS = ("is_available", "device_count")
_GUARD = re.compile(r"^[ \t]*(?:el)?if[ \t]+[\w.]*\.is_available\(\)[ \t]*:", re.MULTILINE)
# a value chosen on the question, in a conditional expression: `"cuda" if torch.cuda.is_available()
# else "cpu"`, `"bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else
# "float16"` (nanoGPT's dtype): it decides that value, not what the code around it does
_CHOICE = re.compile(r"(?:\bif\b[^\n:]*?\.is_available\(\)[^\n:]*?"
                     r"|(?:\band|\bor[ \t]+not)[ \t]+[\w.]*\.is_available\(\)[ \t]+)\belse\b")
# every visible GPU, listed (`device_ids=range(torch.cuda.device_count())`: DataParallel's,
# empty without CUDA): a count, not a question
_ENUMERATION = re.compile(r"\brange\([ \t]*[\w.]*\.device_count\(\)[ \t]*\)"
                          # ... or a factor (`batch_size * torch.cuda.device_count()`, `(... or 1)`)
                          r"|[*/][ \t]*\(?[ \t]*[\w.]*\.device_count\(\)|[\w.]*\.device_count\(\)[ \t]*[*/]")
# a GPU count kept under a name (`n_gpu = torch.cuda.device_count()`), and what a test of
# that name asks about several GPUs, not about CUDA (`if n_gpu > 1:` around DataParallel)
_KEPT_COUNT = re.compile(r"^[ \t]*([\w.]+)[ \t]*=[ \t]*[\w.]*\.device_count\(\)[ \t]*$", re.MULTILINE)
_SEVERAL = r"[ \t]*(?:>[ \t]*1|>=[ \t]*2)(?![\w.])"
# ... or the answer kept under a name (`use_cuda = torch.cuda.is_available()`) that nothing
# reads: what was left of `assert use_cuda` once TDL008 removed it
_KEPT_ANSWER = re.compile(r"^[ \t]*([\w.]+)[ \t]*=[ \t]*[\w.]*\.is_available\(\)[ \t]*$", re.MULTILINE)
# a question whose answer stops the code without CUDA: `assert torch.cuda.is_available()`,
# `if not torch.cuda.is_available(): sys.exit(...)`, `if not enabled or not
# torch.cuda.is_available(): return`, `if torch.cuda.device_count() == 0:`
_STOP = re.compile(r"^[ \t]*(?:assert\b[^\n]*(?:is_available|device_count)"
                   r"|(?:el)?if\b[^\n]*\bnot\b[^\n]*(?:is_available|device_count)"
                   r"|(?:el)?if\b[^\n]*(?:is_available\(\)[ \t]*is[ \t]+False"
                   r"|device_count\(\)[ \t]*(?:==[ \t]*0|<[ \t]*1)))", re.MULTILINE)
# ... asked by the module itself as it is imported: `assert torch.cuda.is_available(), "..."`,
# `if not torch.cuda.is_available():` then `raise`/`sys.exit(...)`: nothing of it runs without CUDA
_MODULE_STOP = re.compile(r"^(?:assert\b[^\n]*(?:is_available|device_count)"
                          r"|if\b[^\n]*\bnot\b[^\n]*(?:is_available|device_count)[^\n]*:[ \t]*(?:#[^\n]*)?"
                          r"(?:\n[ \t]+|[ \t]*)(?:raise|sys\.exit|exit|quit)\b)", re.MULTILINE)
# code that tells the CPU from CUDA itself: `if device.type == "cpu": return batch_size`,
# `if torch_device != "cuda":`, `if x.is_cuda:`
_DEVICE_TEST = re.compile(r"^[ \t]*(?:el)?if\b[^\n]*(?:[=!]=[ \t]*['\"](?:cpu|cuda)['\"]"
                          r"|['\"](?:cpu|cuda)['\"][ \t]*[=!]=|\.is_cuda\b)", re.MULTILINE)
# words that mark a function or class as meant for GPUs only, in its name or a decorator
# (ROCm: AMD's GPUs, which torch names "cuda" too; ultralytics' `@pytest.mark.skipif(not
# ROCM_IS_AVAILABLE, ...)` on `test_rocm_...`)
_GPU_WORDS = ("cuda", "gpu", "rocm")
# a test of the distributed mode, not of the device (`if args.distributed:`, `if
# args.local_rank != -1:`, `if rank == 0:`, `if dist.is_initialized():`): each branch is a
# way the program runs, and a CPU machine runs either (a launcher starts gloo ranks there).
# `if ddp:` or `if world_size > 1:` only where the name is read from the launcher's
# environment (nanoGPT's `ddp = int(os.environ.get('RANK', -1)) != -1`): as often the GPU
# count (stylegan2's `is_ddp = world_size > 1` of `world_size = torch.cuda.device_count()`)
_MODE_TEST = re.compile(r"[\w.]*(?:distributed|launcher)\w*|[\w.]*rank\b|\bdist\.is_initialized\b"
                        # a launcher's or a scheduler's variables (`'SLURM_PROCID' in os.environ`)
                        r"|\b(?:SLURM|OMPI_COMM_WORLD|PMI)_\w+|\bMASTER_(?:ADDR|PORT)\b", re.I)
_MODE_IF_LAUNCHED = re.compile(r"[\w.]*(?:ddp|world_size)\w*", re.I)
_ENVIRONMENT = re.compile(r"\benviron\b|\bgetenv\b")
_ASKS_CUDA = re.compile(r"\bcuda\b|device_count|is_available|\bnccl\b", re.I)
# a question to CUDA in an assignment's value (`use_cuda = args.cuda`, `n = torch.cuda.device_count()`),
# not a string that names a GPU (`torch.tensor([n], device="cuda")`)
_QUESTION = re.compile(r"is_available|device_count|\bis_cuda\b|(?<!['\"])\bcuda\b(?!['\"])|\bnccl\b", re.I)
_DEVICE_WORDS = re.compile(r"cuda|gpu|device|cpu|is_available|mps|xpu|npu|hpu|tpu|accelerat|nccl|backend", re.I)


def unconditional(ctx: Context, site: CallSite, node: cst.CSTNode, stops_only: bool = False,
                  header: bool = False, data_too: bool = False) -> bool:
    """Whether ``node`` (the call, or the string that names a GPU, at ``site``) needs
    CUDA whatever happens: in a statement line (not a parameter's default, which the
    caller may override) or, ``header``, the whole of a part of a compound statement's
    header (a ``with`` item; a parameter's default that a call leaves to it), chosen on
    no condition, in code that never asks for CUDA. ``stops_only``: only a question that
    stops the code without CUDA counts (an assertion, an early exit under ``if not
    ...is_available()``); a flag or a conditional device does not keep a CUDA-only call
    from raising. ``data_too``: an ``if`` on the data is no condition (``chosen_conditionally``)."""
    return ((site.line is not None or header) and not chosen_conditionally(ctx, site, node, data_too)
            and not asks_for_cuda(ctx, site, stops_only))


class LibraryLevel(Uninsertable):
    """The module level of a module that is not a script: what the whole-run index of a
    CLI run may still allow (``torch_for_test``'s ``whole_run``)."""


def torch_for_test(ctx: Context, site: CallSite, new_query: bool,
                   whole_run: bool = False) -> Tuple[str, List[Edit]]:
    """The name of torch to write ``torch.cuda.is_available()`` with at ``site``, and the
    edits that import it if nothing binds it there. Raises ``Uninsertable`` (the reason)
    at the module level of a module that is not a script (the test would run at every
    import: ``LibraryLevel``) -- unless, ``whole_run``, the run's index says that only
    the run's scripts import the module (a yacs configuration's defaults: its import is
    where they start) --, in a function TorchScript compiles, and, for a ``new_query``
    (one that does not replace a call that initialised CUDA at the same point anyway), at
    a script's module level when the module sets ``CUDA_VISIBLE_DEVICES``."""
    a = ctx.analysis
    fn = a.enclosing_function(site.scope)
    if fn is None and not a.devices.is_script and not (
            whole_run and a.project is not None and a.project.imported_by_scripts):
        raise LibraryLevel(_LIBRARY)
    if fn is None and new_query:
        hazard = ctx.module_query_hazard(at=site.node)
        if hazard:
            raise Uninsertable(hazard)
    if fn is not None and ctx.torchscript(fn.node):
        raise Uninsertable("the function is compiled by TorchScript")
    return ctx.torch_for(site)


@dataclass(frozen=True)
class Held:
    """A value a name holds where it is bound (``device = "cuda"``, ``BACKEND = "nccl"``):
    what ``unconditional`` and ``torch_for_test`` read of a call site (the statement line,
    its scope and branches, its place in execution order), so that a fix of the value is
    judged where it is written, once for every use of the name."""

    node: cst.BaseExpression
    scope: Scope
    order: int
    line: Optional[cst.SimpleStatementLine]
    cond: tuple
    name: str = ""  # what holds it, as the code spells it: `device`, `self.device`, `args.device`


def held_value(a, site: CallSite, name: str,
               alternative: Optional[Callable[[cst.BaseExpression], bool]] = None) -> Optional[Held]:
    """What ``name``, used at ``site``, holds: its only binding, a plain assignment in a
    statement line, in the scope the use resolves to (not a ``global``/``nonlocal`` name).
    With ``alternative``, also its only unconditional binding when every other one is an
    assignment under a branch of a value ``alternative`` accepts (nanoGPT's ``device =
    'cuda'``, then ``device = f'cuda:{ddp_local_rank}'`` under ``if ddp:``): what the name
    holds when the script runs as written, no branch taken."""
    scope, _ = a.lookup(name, site.scope)
    if scope is None or name in scope.declared:
        return None
    bindings = scope.bindings.get(name, ())
    if alternative is not None and len(bindings) > 1 and all(
            b.kind == "assign" and b.value is not None and alternative(b.value) for b in bindings if b.cond):
        bindings = [b for b in bindings if not b.cond]
    if len(bindings) != 1 or bindings[0].kind != "assign":
        return None
    value = bindings[0].value
    line = a.statement_line(value) if value is not None else None
    if line is None:
        return None
    return Held(value, scope, bindings[0].order, line, bindings[0].cond, name)  # type: ignore[arg-type]


def held_device(a, site: CallSite, value: cst.BaseExpression,
                alternative: Optional[Callable[[cst.BaseExpression], bool]] = None) -> Optional[Held]:
    """What a name or an attribute used at ``site`` holds (``held_value``, with its
    ``alternative``; ``held_attribute``), through one name that holds an attribute
    (``device = args.device`` then ``.to(device)``)."""
    if isinstance(value, cst.Name):
        held = held_value(a, site, value.value, alternative)
        if held is None or not isinstance(held.node, cst.Attribute):
            return held
        value = held.node
    return held_attribute(a, site, value, alternative) if isinstance(value, cst.Attribute) else None


def held_attribute(a, site: CallSite, attribute: cst.Attribute,
                   alternative: Optional[Callable[[cst.BaseExpression], bool]] = None) -> Optional[Held]:
    """What an attribute used at ``site`` holds, where it is assigned: ``self.device``, the
    one assignment to it in the methods of the class around the use (``self.device =
    "cuda"`` in ``__init__``); ``args.device`` or ``cfg.device``, the one assignment to that
    attribute of a name so spelled in the file, in a statement line (``args.device =
    "cuda"`` in ``launch()``, read by ``train(args)``: the diffusion tutorials' plumbing),
    not of a name the use imports (another module's object may be changed anywhere). With
    ``alternative``, also its one unconditional assignment where every other one is in
    the same function, under a branch, of a value ``alternative`` accepts (timm's
    ``args.device = 'cuda:0'``, then ``'cuda:%d' % args.local_rank`` under ``if
    args.distributed:``)."""
    base, attr = attribute.value, attribute.attr.value
    if not isinstance(base, cst.Name):
        return None
    if base.value == "self":
        klass = a.enclosing_class(site.scope)
        sets = klass.self_attr_sets.get(attr, ()) if klass is not None else ()
        if alternative is not None and len(sets) > 1:  # (`self.device = 'cuda'`, then per rank under an `if`)
            conds = {order: klass.self_attr_conds.get((attr, order), ()) for _, _, order in sets}  # type: ignore
            plain = [s for s in sets if not conds[s[2]]]
            if len(plain) == 1 and all(m == plain[0][1] and alternative(v) for v, m, o in sets if conds[o]):
                sets = plain
        method = klass.methods.get(sets[0][1]) if len(sets) == 1 else None  # type: ignore[union-attr]
        if method is None:
            return None
        value, _, order = sets[0]
        scope, cond = method.scope, klass.self_attr_conds.get((attr, order), ())  # type: ignore[union-attr]
    else:
        sets = a.attr_sets.get(f"{base.value}.{attr}", ())
        if alternative is not None and len(sets) > 1:
            plain = [(b, scope) for b, scope in sets if not b.cond]
            if len(plain) == 1 and all(scope is plain[0][1] and b.value is not None and alternative(b.value)
                                       for b, scope in sets if b.cond):
                sets = plain
        if len(sets) != 1 or sets[0][0].value is None:
            return None
        binding, scope = sets[0]
        if a.lookup(base.value, site.scope)[1] is not None or a.lookup(base.value, scope)[1] is not None:
            return None
        value, order, cond = binding.value, binding.order, binding.cond
    line = a.statement_line(value)
    if line is None:
        return None
    return Held(value, scope, order, line, cond, f"{base.value}.{attr}")


def option_site(a, dest: str) -> Optional[CallSite]:
    """The ``add_argument`` call of this file that declares the command-line option
    ``args.<dest>`` holds (``--dist-backend``, ``--gpu_ids``, or ``dest=``), or None."""
    for site in a.calls:
        if site.method != "add_argument" or site.has_star_args:
            continue
        given = site.keyword("dest")
        if any(name.lstrip("-").replace("-", "_") == dest
               for name in option_strings(site, [given.value] if given is not None else None)):
            return site
    return None


def option_strings(site: CallSite, values: Optional[List[cst.BaseExpression]] = None) -> List[str]:
    """The strings among ``values`` (default: an ``add_argument``'s positional arguments,
    its option strings) that are string literals."""
    values = [arg.value for arg in site.node.args if arg.keyword is None] if values is None else values
    found = [v.evaluated_value for v in values if isinstance(v, cst.SimpleString)]
    return [n for n in found if isinstance(n, str)]


def guard_statement(ctx: Context, line: cst.SimpleStatementLine, torch: str) -> Edit:
    """The edit that runs the one statement of ``line`` only when CUDA is available
    (``if torch.cuda.is_available():`` above it, indented by the file's own unit; a
    comment after it stays on its line)."""
    a = ctx.analysis
    stmt = line.body[0]
    text = a.lines[a.first_line(line) - 1]
    indent = text[:len(text) - len(text.lstrip())]
    unit = "\t" if "\t" in indent else "    "
    body = _indented(ctx, stmt, unit) or a.code(stmt)
    return ctx.replace(stmt, f"if {torch}.cuda.is_available():{a.module.default_newline}{indent}{unit}{body}")


def _indented(ctx: Context, stmt: cst.CSTNode, unit: str) -> Optional[str]:
    """A statement of several lines as written, its continuation lines indented one
    ``unit`` more, to stand in a block of its own (LibCST writes them without the
    indentation of the block around); None for one line, or where a line break is inside
    a string (indenting that line would change the string)."""
    (first, column), (last, end) = ctx.start(stmt), ctx.end(stmt)
    if first == last:
        return None
    lines = ctx.analysis.lines[first - 1:last]
    written = ctx.analysis.module.default_newline.join([lines[0][column:]] + lines[1:-1] + [lines[-1][:end]])
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(written).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    if any(t.start[0] != t.end[0] and t.type not in (tokenize.NL, tokenize.NEWLINE) for t in tokens):
        return None  # (a string, or an f-string's part, across lines)
    return re.sub(r"(\r?\n)(?=[^\r\n])", lambda m: m.group(1) + unit, written)


def stands_alone(site: CallSite) -> bool:
    """Whether a conditional expression may replace the call without parentheses: it is
    the value of an assignment or a ``return``, or an argument of another call."""
    if site.parent is not None and any(arg.value is site.node for arg in site.parent.node.args):
        return True
    line = site.line
    stmt = line.body[0] if line is not None and len(line.body) == 1 else None
    return isinstance(stmt, (cst.Assign, cst.AnnAssign, cst.Return)) and stmt.value is site.node


def chosen_conditionally(ctx: Context, site: CallSite, node: cst.CSTNode, data_too: bool = False) -> bool:
    """Under an ``if``/``elif``/``else`` or a ``match`` case (``if backend == "nccl": d =
    torch.device("cuda")``), or behind a test in its statement: one side of a conditional
    expression or the right of ``and``/``or`` (``current() or torch.device("cuda")``,
    ``.to("cuda" if gpu else "cpu")``; not their test): the author decided when it
    applies. A script's main guard is where it starts, not a condition, and so is a test
    of the distributed mode (``mode_test``): both ways run on a CPU machine. With
    ``data_too``, so is an ``if`` on the data (``data_test``: ``if local_size !=
    max_size:``), which a rule asks only where the code around already needs CUDA on no
    condition (``beside_unconditional``)."""
    a = ctx.analysis
    guard = id(a.devices.main_guard)
    kinds = a.memo.setdefault("if_tests", {})  # (each `if` read once)
    for key, part in site.cond:
        if part not in ("body", "orelse", "case") or (key, part) == (guard, "body"):
            continue
        if part != "case" and key in a.ifs and key not in kinds:
            test = a.code(a.ifs[key].test)
            kinds[key] = ("mode" if mode_test(a.text, test, spawn_ranks(a)) else "data" if data_test(a.text, test)
                          else "choice")
        kind = kinds.get(key, "choice")
        if kind == "choice" or (kind == "data" and not data_too):
            return True
    # (a `with` item, `with torch.device(...):`, has no statement line: the call is the whole item)
    return evaluated(site.line if site.line is not None else site.node, node) is False


def spawn_ranks(a) -> FrozenSet[str]:
    """The names that hold the process index ``mp.spawn`` (or ``start_processes``) hands
    its target: the target's first parameter, and what the target assigns it to
    (``args.gpu = gpu``), by name across the module."""
    found = a.memo.get("spawn_ranks")
    if found is None:
        names = set()
        for node, index in a.devices.index_targets.items():
            fn = a.functions.get(node)
            if fn is not None:
                names.add(index)
                names.update(re.findall(rf"(?m)^[ \t]*([A-Za-z_][\w.]*)[ \t]*=[ \t]*{re.escape(index)}[ \t]*$",
                                        a.code(fn.node)))
        found = a.memo["spawn_ranks"] = frozenset(names)
    return found


def beside_unconditional(a, sites: Sequence[Tuple[CallSite, bool]]) -> Set[int]:
    """Of ``sites`` (each with whether it needs CUDA on no condition), the functions (by
    id; the module as 0) that hold one that does: there, a site under an ``if`` on the
    data is no choice of the author's either (DETR's ``all_gather``: five tensors on
    ``"cuda"``, and the padding under ``if local_size != max_size:``), and a fix that left
    it would half convert the function."""
    found = set()
    for site, needs in sites:
        if needs:
            fn = a.enclosing_function(site.scope)
            found.add(id(fn.node) if fn is not None else 0)
    return found


def mode_test(text: str, test: str, ranks: FrozenSet[str] = frozenset()) -> bool:
    """Whether an ``if``'s test (its code) picks how the program is distributed, not
    whether it has a GPU: it names a rank or the distributed mode (or a name the
    launcher's environment sets), nothing of a device, and what it names is not assigned,
    in the module's ``text``, from a question to CUDA (``args.distributed =
    torch.cuda.device_count() > 1``, or through a name so assigned). maskrcnn-benchmark's
    trainer: ``set_device(args.local_rank)`` and an NCCL group under ``if
    args.distributed:`` (``num_gpus > 1`` of the launcher's ``WORLD_SIZE``), which a
    launcher on a CPU machine runs. ``ranks``: names that hold the index ``mp.spawn``
    hands its processes (``spawn_ranks``), a rank whatever they are called: the
    ImageNet trainer's ``if args.gpu is not None:`` after ``args.gpu = gpu``."""
    spawned = [name for name in re.findall(r"[A-Za-z_][\w.]*", test) if name in ranks]
    if spawned:  # (a rank's name says nothing of a device: `args.gpu` of `args.gpu = gpu`)
        test = re.sub(rf"(?<![\w.])(?:{'|'.join(map(re.escape, spawned))})(?![\w.])", "_", test)
    names = [m.group(0) for m in _MODE_TEST.finditer(test)]
    launched = [m.group(0) for m in _MODE_IF_LAUNCHED.finditer(test)]
    if not names and not spawned and not any(_assigned(text, name, _ENVIRONMENT) for name in launched):
        return False
    return not device_words(test) and not any(
        _assigned(text, n, _ASKS_CUDA, unless=_ENVIRONMENT) for n in names + launched)


def device_words(code: str) -> bool:
    """Whether ``code`` names anything of a device (``cuda``, ``gpu``, ``cpu``, ``device``,
    a backend ...)."""
    return _DEVICE_WORDS.search(code) is not None


def data_test(text: str, test: str) -> bool:
    """Whether an ``if``'s test (its code) asks about the data, not the device: it names
    nothing of a device, and nothing it names is assigned, in the module's ``text``, a
    question to CUDA (``local_size != max_size`` of ``local_size =
    torch.tensor([n], device="cuda")``: a tensor on a GPU, not a question;
    ``has_batchnorms(student)`` of ``student = ....to(device)``, whatever ``device`` asked)."""
    return not device_words(test) and not any(  # (its own assignments only: a model moved to
        _assigned(text, name, _QUESTION, depth=2)   # a device chosen on a question is no flag)
        for name in re.findall(r"[A-Za-z_][\w.]*", test))


def _assigned(text: str, name: str, what: "re.Pattern[str]", depth: int = 0,
              unless: "Optional[re.Pattern[str]]" = None) -> bool:
    """Whether an assignment of ``name`` in ``text`` has ``what`` in its value, itself or
    through a name it reads (two deep); with ``unless``, not through a name one of whose
    assignments has that in its value (a world size the launcher's environment gives,
    though a script also multiplies it by the GPU count: MoCo's ``args.world_size``)."""
    values = re.findall(rf"^[ \t]*{re.escape(name)}[ \t]*=(?!=)([^\n]*)", text, re.M)
    if unless is not None and any(unless.search(value) for value in values):
        return False
    for value in values:
        if what.search(value) or (depth < 2 and any(
                _assigned(text, word, what, depth + 1, unless)
                for word in re.findall(r"[A-Za-z_][\w.]*", value) if word != name)):
            return True
    return False


def evaluated(code: cst.CSTNode, node: cst.CSTNode) -> Optional[bool]:
    """Whether ``node`` is evaluated whenever ``code`` is: ``code`` itself, or in it but
    not behind a test (False behind one: the right of ``and``/``or``, a conditional
    expression's sides); None when ``node`` is not in ``code``."""
    if code is node:
        return True
    if isinstance(code, cst.BooleanOperation):
        first, behind = code.left, (code.right,)
    elif isinstance(code, cst.IfExp):
        first, behind = code.test, (code.body, code.orelse)
    else:
        return next((found for found in (evaluated(child, node) for child in code.children) if found is not None),
                    None)
    found = evaluated(first, node)
    if found is not None:
        return found
    return False if any(evaluated(side, node) is not None for side in behind) else None


def asks_for_cuda(ctx: Context, site: CallSite, stops_only: bool) -> bool:
    """Whether the code around the site already asks for CUDA: its function (or the
    module, for module-level code) does (``stops_only``: in a way that stops without
    it), or tells the CPU from CUDA itself, or an ``if`` around it asks or tells, however
    far out (a test method defined under ``if torch.cuda.is_available():``, cellpose's
    memory helper defined under ``if device.type == "cuda":``), or an enclosing
    function or class is named for CUDA or a GPU, or decorated so."""
    a = ctx.analysis
    fn = a.enclosing_function(site.scope)
    if _text_asks(ctx, fn.node if fn is not None else None, stops_only, _followers(a, site)):
        return True
    if fn is not None and _module_stops(ctx):
        return True
    if meant_for_gpus(a, site.scope):
        return True
    line = a.range(site.node).start.line
    tells = not _followers(a, site)  # (a held device's own test follows its choice: `_text_asks`)
    return any(header.startswith(("if ", "elif ")) and (any(word in header for word in ASKS)
                                                        or (tells and _DEVICE_TEST.match(header) is not None))
               for _, header in a.devices.outline.headers(line, 1))


def meant_for_gpus(a, scope: Optional[Scope]) -> bool:
    """Whether ``scope`` or one around it is a function or class named or decorated for
    CUDA or a GPU (``class CudaTimer``, ``def _replay_cuda_graph``, ``@requires_gpu``)."""
    while scope is not None:
        node = scope.node
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and any(
                word in part for part in [node.name.value.lower()] + [a.code(d.decorator).lower()
                                                                      for d in node.decorators]
                for word in _GPU_WORDS):
            return True
        scope = scope.parent
    return False


def _followers(a, site: CallSite) -> Tuple[str, ...]:
    """For a device a name or attribute holds (``Held``), that name and the names derived
    from it alone, each bound once beside it (nanoGPT's ``device_type = 'cuda' if 'cuda'
    in device else 'cpu'``, ``use_cuda = device == "cuda"``): a test of one of them
    follows the choice. Nothing for any other site."""
    if not isinstance(site, Held):
        return ()
    names = [site.name]
    if "." not in site.name:
        for name, bindings in site.scope.bindings.items():
            if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
                read = set(names_in(bindings[0].value)) - {"str"}
                if read == {site.name} and name != site.name:
                    names.append(name)
    return tuple(names)


def _text_asks(ctx: Context, fn: Optional[cst.CSTNode], stops_only: bool, held: Tuple[str, ...] = ()) -> bool:
    """The text tests of ``asks_for_cuda`` on a function's code (None: the module's),
    once per function: a plain ``if torch.cuda.is_available():`` guards its own body
    only, and a device chosen as ``"cuda" if torch.cuda.is_available() else "cpu"`` (or
    ``if flag and torch.cuda.is_available()``, ``if flag or not ...``) only its own uses
    (both are what the fixes write), and ``range(torch.cuda.device_count())`` lists the
    GPUs without asking: the code asks for itself when it tests otherwise (a flag, an
    early exit, an assertion), or tells the CPU from CUDA -- but for a device a name
    holds, a test of that name alone or of one derived from it (``_followers``: ``device
    = "cuda"`` then ``if device == "cuda":``, the CIFAR trainers' idiom; ``if device_type
    == 'cuda':``, nanoGPT's) follows the choice and does not make it."""
    a = ctx.analysis
    memo = a.memo.setdefault("portability_asks", {})
    key = (fn, stops_only, held)
    if key not in memo:
        text = _code_only(a.code(fn)) if fn is not None else _module_code(ctx)
        names = "|".join(map(re.escape, held))
        own = re.compile(rf"[ \t]*(?:el)?if[ \t]+(?:{names})[ \t]*[=!]=[ \t]*['\"](?:cpu|cuda)['\"][ \t]*:")
        # (a function's test tells for its own code: nanoGPT's get_batch tests device_type, and
        # that keeps no module-level set_device from raising)
        told = text if fn is not None else _code_only("".join(
            a.code(stmt) for stmt in a.module.body if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef))))
        tells = any(not held or not own.match(told, m.start()) for m in _DEVICE_TEST.finditer(told))
        memo[key] = bool(_STOP.search(text) or tells) or (
            not stops_only and sum(text.count(word) for word in ASKS) > len(_GUARD.findall(text)) + len(
                _CHOICE.findall(text)) + len(_ENUMERATION.findall(text)) + _unasked(text))
    return memo[key]


def _unasked(text: str) -> int:
    """How many questions ``text`` keeps under a name and then does not ask: a GPU count
    it tests only for more than one GPU (``n_gpu = torch.cuda.device_count()`` ... ``if
    n_gpu > 1:``), an availability it never reads (``use_cuda =
    torch.cuda.is_available()``, its ``assert use_cuda`` removed)."""
    found = 0
    for pattern, several in ((_KEPT_COUNT, True), (_KEPT_ANSWER, False)):
        for m in pattern.finditer(text):
            name = re.escape(m.group(1))
            uses = [u for u in re.finditer(rf"(?<![\w.]){name}(?![\w])", text) if u.start() != m.start(1)]
            if (uses and all(re.match(_SEVERAL, text[u.end():]) for u in uses)) if several else not uses:
                found += 1
    return found


def _code_only(text: str) -> str:
    """``text`` with its comments and docstrings (strings that are statements of their
    own) blanked, lines kept: a docstring that says "call torch.cuda.is_available()"
    asks nothing. The text as it is when it does not tokenize."""
    lines = text.splitlines(keepends=True)
    blank: List[Tuple[Tuple[int, int], Tuple[int, int]]] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return text
    starts = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.COMMENT:
            blank.append((tok.start, tok.end))
        elif (tok.type == tokenize.STRING and (i == 0 or tokens[i - 1].type in starts)
              and i + 1 < len(tokens) and tokens[i + 1].type in (tokenize.NEWLINE, tokenize.ENDMARKER)):
            blank.append((tok.start, tok.end))
    if not blank:
        return text
    for (r0, c0), (r1, c1) in blank:
        for row in range(r0, r1 + 1):
            line = lines[row - 1]
            lo = c0 if row == r0 else 0
            hi = c1 if row == r1 else len(line.rstrip("\r\n"))
            lines[row - 1] = line[:lo] + " " * (hi - lo) + line[hi:]
    return "".join(lines)


def _module_stops(ctx: Context) -> bool:
    """The module stops as it is imported where CUDA is not available (an assertion, an
    exit, at its top level): every function of it is meant for GPUs only."""
    a = ctx.analysis
    if "module_stops" not in a.memo:
        a.memo["module_stops"] = bool(_MODULE_STOP.search(_module_code(ctx)))
    return a.memo["module_stops"]


def _module_code(ctx: Context) -> str:
    """The module's text without comments and docstrings (``_code_only``), once."""
    memo = ctx.analysis.memo
    if "code_only" not in memo:
        memo["code_only"] = _code_only(ctx.analysis.text)
    return memo["code_only"]


def string_quote(site: CallSite, value: Optional[cst.BaseExpression] = None) -> str:
    """The quote of the device string itself, else of the call's own strings (for the
    ``"cpu"`` the fix writes)."""
    for found in [value] + [arg.value for arg in site.node.args]:
        quote = string_quote_of(found)
        if quote is not None:
            return quote
    return '"'


def string_quote_of(value: Optional[cst.BaseExpression]) -> Optional[str]:
    """The quote a string (a literal, an f-string, ``"cuda:%d" % k``) is written with."""
    if isinstance(value, cst.SimpleString):
        return value.quote[-1]
    if isinstance(value, cst.FormattedString):
        return value.start[-1]
    if isinstance(value, cst.BinaryOperation) and isinstance(value.left, cst.SimpleString):
        return value.left.quote[-1]
    return None

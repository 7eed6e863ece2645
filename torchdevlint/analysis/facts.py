"""The facts the analysis records and shares: scopes, bindings, classes, functions,
call sites, thread/process targets, implicit uses, DataParallel wraps, device choices;
and small helpers over LibCST nodes that every part of the analysis uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

import libcst as cst

from .. import names as N
from .treewalk import walk

FunctionNode = Union[cst.FunctionDef, cst.Lambda]


@dataclass(eq=False)
class Binding:
    name: str
    kind: str  # assign | param | for | with | walrus | def | class | import | other
    value: Optional[cst.BaseExpression]
    order: int
    # the branches it runs under: (id of an if/loop/try/match, which part), outermost
    # first; () when it runs whenever its scope's body runs (see ``definitely_bound``)
    cond: Tuple[Tuple[int, str], ...] = ()
    # a loop target's (kind ``for``): what it iterates, and where in each item the name
    # sits (``for i, (x, y) in enumerate(loader)``: y is at (1, 1) of enumerate's items);
    # an unpacking's (kind ``other``): the value unpacked (``a, b = f()``: b at (1,) of f())
    source: Optional[Tuple[cst.BaseExpression, Tuple[int, ...]]] = None


@dataclass(eq=False)
class Scope:
    kind: str  # module | class | function | lambda | comprehension
    node: cst.CSTNode
    parent: Optional["Scope"]
    name: str = ""
    imports: Dict[str, str] = field(default_factory=dict)
    bindings: Dict[str, List[Binding]] = field(default_factory=dict)
    function: Optional["FunctionInfo"] = None
    klass: Optional["ClassInfo"] = None
    # names a `global`/`nonlocal` statement here hands to another scope
    declared: Dict[str, "Scope"] = field(default_factory=dict)

    def bind(self, binding: Binding) -> None:
        self.bindings.setdefault(binding.name, []).append(binding)

    @property
    def is_function(self) -> bool:
        return self.kind in ("function", "lambda")


@dataclass(eq=False)
class ClassInfo:
    node: cst.ClassDef
    name: str
    scope: Scope  # the class body's scope
    outer: Scope
    bases: List[cst.BaseExpression]  # as the classes they name: `Loader[T]` is `Loader`
    methods: Dict[str, "FunctionInfo"] = field(default_factory=dict)
    self_attrs: Dict[str, List[cst.BaseExpression]] = field(default_factory=dict)
    # self.<attr> = value: (value, the method that assigns it, document order)
    self_attr_sets: Dict[str, List[Tuple[cst.BaseExpression, str, int]]] = field(default_factory=dict)
    self_attr_conds: Dict[Tuple[str, int], Tuple[Tuple[int, str], ...]] = field(default_factory=dict)


@dataclass(eq=False)
class FunctionInfo:
    node: FunctionNode
    name: str
    scope: Scope  # the function's own scope
    klass: Optional[ClassInfo]
    params: List[str]
    # what its own ``return`` statements give (None: a bare ``return``); a lambda's body
    returns: List[Optional[cst.BaseExpression]] = field(default_factory=list)
    generator: bool = False  # it yields: a call gives a generator, not its returns

    def default(self, param: str) -> Optional[cst.BaseExpression]:
        """The default of the parameter ``param`` (None: no default, or no such parameter)."""
        params = self.node.params
        for p in (*params.posonly_params, *params.params, *params.kwonly_params):
            if p.name.value == param:
                return p.default
        return None


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    qualname: Optional[str]
    scope: Scope
    # the active with-item calls: CallSites while collecting, then (``Analysis``) their
    # qualnames, or ``names.DEVICE_BLOCK`` for a helper that enters a device block
    withs: Tuple[Optional[str], ...]
    order: int
    line: Optional[cst.SimpleStatementLine]  # the statement line that holds the call
    expr_stmt: Optional[cst.Expr]  # set when the call is a whole expression statement
    end_order: int = 0
    parent: Optional["CallSite"] = None  # the call whose parentheses hold this one
    cond: Tuple[Tuple[int, str], ...] = ()  # the branches it runs under, as Binding.cond

    @property
    def method(self) -> Optional[str]:
        func = self.node.func
        return func.attr.value if isinstance(func, cst.Attribute) else None

    @property
    def in_device_context(self) -> bool:
        return any(q in N.DEVICE_CONTEXTS or q == N.DEVICE_BLOCK for q in self.withs)

    def keyword(self, name: str) -> Optional[cst.Arg]:
        for arg in self.node.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg
        return None

    def positional(self, index: int) -> Optional[cst.Arg]:
        pos = [a for a in self.node.args if a.keyword is None and not a.star]
        return pos[index] if index < len(pos) else None

    def device_arguments(self) -> List[cst.BaseExpression]:
        """What the call takes as a device: ``device=...``, a load's ``map_location=...``
        (``torch.load(path, map_location="cuda:0")``: where every tensor it restores goes;
        of a dict, ``{"cuda:1": "cuda:0"}``, its values), the first argument of a
        ``.to(...)`` method (not ``torch.to``), and of ``torch.set_default_device(...)``
        (where every factory call allocates from then on)."""
        out: List[cst.BaseExpression] = []
        for arg in self.node.args:
            if arg.keyword is not None and arg.keyword.value in ("device", "map_location"):
                value = arg.value
                out += ([e.value for e in value.elements if isinstance(e, cst.DictElement)]
                        if isinstance(value, cst.Dict) and arg.keyword.value == "map_location" else [value])
        first = self.node.args[0] if self.node.args else None
        if first is not None and first.keyword is None and not first.star and (
                (self.method == "to" and self.qualname is None) or self.qualname == "torch.set_default_device"):
            out.append(first.value)
        return out

    def device_values(self) -> List[cst.BaseExpression]:
        """What the call takes as a device (``device_arguments``), and the first argument
        of ``torch.device(...)``."""
        first = self.positional(0) if self.qualname == "torch.device" else None
        return self.device_arguments() + ([first.value] if first is not None else [])

    @property
    def has_star_args(self) -> bool:
        return any(a.star for a in self.node.args)


@dataclass(eq=False)
class Target:
    """A function (or lambda) that runs on a new thread or process."""

    function: FunctionInfo
    kind: str  # thread | process
    via: str  # how it was started, for messages
    site: Optional[CallSite]
    setup: Optional[FunctionInfo] = None  # a pool's initializer: runs first on the task's worker


@dataclass(eq=False)
class ImplicitUse:
    """A use that depends on CUDA's current device."""

    node: cst.CSTNode
    kind: str  # bare-cuda | device-string | current-device-query | device-object
    site: CallSite
    rewritable: bool  # a bare .cuda() the explicit-device rewrite handles


@dataclass(eq=False)
class DataParallelWrap:
    """``DataParallel(module, ...)`` whose result is moved with ``.cuda()``."""

    wrap: CallSite
    move: CallSite  # the bare .cuda() that moves the wrapper (or its parent)
    shape: str  # chained | later | parent
    literal_ids: Optional[List[int]]  # device_ids given as int literals, else None (absent)


@dataclass(frozen=True)
class DeviceChoice:
    code: str  # the expression to pass to .to(...)
    exact: bool  # provably the current device on a GPU machine
    why: str  # where it came from, for fix messages
    exact_if: Optional[str] = None  # a test under which it is exactly the current device


_CURRENT_DEVICE_QUERIES = frozenset(
    "torch.cuda." + n for n in (
        "current_device", "Stream", "Event", "synchronize", "memory_allocated",
        "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
        "reset_peak_memory_stats", "mem_get_info", "get_device_name",
        "get_device_properties", "get_device_capability", "current_stream",
        "default_stream", "memory_summary", "utilization")
)


def _is_cuda_string(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.SimpleString) and expr.evaluated_value == "cuda"


def is_none(expr: cst.BaseExpression) -> bool:
    """Whether ``expr`` is the literal ``None``."""
    return isinstance(expr, cst.Name) and expr.value == "None"


def is_bare_cuda(call: cst.Call) -> bool:
    """``x.cuda()`` with no device: no positional, no ``device=``, or ``None``."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "cuda"):
        return False
    for i, arg in enumerate(call.args):
        if arg.star:
            return False  # *args / **kwargs may carry a device
        name = arg.keyword.value if arg.keyword is not None else None
        if name is None and i == 0 or name == "device":
            if not is_none(arg.value):
                return False
    return True


def _int_list(expr: cst.BaseExpression) -> Optional[List[int]]:
    if not isinstance(expr, (cst.List, cst.Tuple)):
        return None
    out = []
    for el in expr.elements:
        if not isinstance(el.value, cst.Integer):
            return None
        out.append(int(el.value.evaluated_value))
    return out


def dotted_name(expr: cst.BaseExpression) -> str:
    """A dotted name as spelled (``unittest.main``, ``torch.cuda``); "" for anything
    that is not a chain of attributes on a name."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        head = dotted_name(expr.value)
        return f"{head}.{expr.attr.value}" if head else ""
    return ""


def gpu_index(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The index a GPU device built at run time names: ``X`` of ``torch.device("cuda",
    X)`` (any spelling of the call), ``f"cuda:{X}"``, ``"cuda:{}".format(X)``, ``"cuda:"
    + str(X)`` and ``"cuda:%d" % X``; None for anything else."""
    if isinstance(expr, cst.Call) and called_name(expr.func) == "device" and len(expr.args) == 2:
        kind, index = expr.args
        if kind.keyword is None and _is_cuda_string(kind.value) and not index.star and (
                index.keyword is None or index.keyword.value == "index"):
            return index.value
    if isinstance(expr, cst.FormattedString) and len(expr.parts) == 2:
        head, tail = expr.parts
        if isinstance(head, cst.FormattedStringText) and head.value == "cuda:" \
                and isinstance(tail, cst.FormattedStringExpression):
            return tail.expression
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format" \
            and isinstance(expr.func.value, cst.SimpleString) and len(expr.args) == 1:
        index = expr.args[0]
        if expr.func.value.evaluated_value in ("cuda:{}", "cuda:{0}") and index.keyword is None and not index.star:
            return index.value
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.left, cst.SimpleString):
        head = expr.left.evaluated_value
        right = expr.right
        if isinstance(expr.operator, cst.Modulo) and head == "cuda:%d":
            return right
        if isinstance(expr.operator, cst.Add) and head == "cuda:" and isinstance(right, cst.Call) \
                and called_name(right.func) == "str" and len(right.args) == 1:
            return right.args[0].value
    return None


def param_annotation(fn: cst.CSTNode, name: str) -> Optional[cst.BaseExpression]:
    """The annotation of the parameter ``name`` of the function ``fn`` (None for a
    lambda, an unannotated parameter or none of that name)."""
    if not isinstance(fn, cst.FunctionDef):
        return None
    params = fn.params
    for p in (*params.posonly_params, *params.params, *params.kwonly_params):
        if p.name.value == name:
            return p.annotation.annotation if p.annotation is not None else None
    return None


def called_name(func: cst.BaseExpression) -> Optional[str]:
    """The name a call is made by: ``f`` of ``f(...)``, ``m`` of ``obj.m(...)``."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


# verbs too bare to say what a method sets up: the object it is called on says it
_BARE_SETUP_VERBS = frozenset({"init", "initialize", "setup"})


def setup_call_name(func: cst.BaseExpression) -> Optional[str]:
    """The name a call is made by as the setup-helper names read it (``called_name``), but
    for a bare verb called on an object, the object's name joined to it: ESPnet2's
    ``distributed_option.init()`` reads ``distributed_option_init``."""
    name = called_name(func)
    if name in _BARE_SETUP_VERBS and isinstance(func, cst.Attribute):
        owner = called_name(func.value) if isinstance(func.value, (cst.Name, cst.Attribute)) else None
        return f"{owner}_{name}" if owner else name
    return name


def _arg_value(arg: Optional[cst.Arg]) -> Optional[cst.BaseExpression]:
    return arg.value if arg is not None else None


def _kw_value(site: CallSite, name: str) -> Optional[cst.BaseExpression]:
    return _arg_value(site.keyword(name))


def compared(site: CallSite) -> bool:
    """Whether the call (``torch.device("cuda")``) is an operand of a comparison, itself or
    its ``.type`` (``self.device.type == th.device("cuda").type``, Stable-Baselines3's
    seeding; ``if device == torch.device("cuda"):``): a test of another device, no placement."""
    found = []

    class Operands(cst.CSTVisitor):
        def visit_Comparison(self, node: cst.Comparison) -> None:
            for operand in [node.left] + [c.comparator for c in node.comparisons]:
                if isinstance(operand, cst.Attribute) and operand.attr.value == "type":
                    operand = operand.value
                if operand is site.node:
                    found.append(node)

    walk(site.line if site.line is not None else site.scope.node, Operands())
    return bool(found)


def is_docstring(stmt: cst.CSTNode) -> bool:
    """A statement that is a string alone: a docstring, or a block's leading note."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def names_in(expr: cst.CSTNode) -> List[str]:
    """The names ``expr`` reads (``x`` of ``x.y``, not ``y``), in order, repeated."""
    found: List[str] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            walk(node.value, self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            found.append(node.value)

    walk(expr, V())
    return found


def definitely_bound(conds: List[Tuple[Tuple[int, str], ...]], site: Tuple[Tuple[int, str], ...],
                     complete_ifs: "set[int]") -> bool:
    """Whether bindings made under ``conds`` (all earlier than the site, in its scope)
    bind the name on every path to a site under ``site``: one of them runs on the
    site's own path, or an earlier ``if``/``else`` (with an else) binds it in every
    branch. Loops, ``try`` and ``match`` branches may not run: they never count."""
    def covered(prefix: Tuple[Tuple[int, str], ...]) -> bool:
        if prefix in conds:
            return True
        n = len(prefix)
        ifs = {c[n][0] for c in conds if len(c) > n and c[:n] == prefix and c[n][0] in complete_ifs}
        return any(covered(prefix + ((x, "body"),)) and covered(prefix + ((x, "orelse"),)) for x in ifs)

    return any(covered(site[:k]) for k in range(len(site) + 1))


def binding_in_force(bindings: List[Binding], site: "CallSite") -> Optional[Binding]:
    """The one binding of a name (``bindings``: the name's in the site's own scope) that
    holds at ``site``, or None when that is not certain: the last one before it, made on
    the site's own path (in no branch, or in a branch the site is in too: fairseq's
    ``centroids = torch.rand(...)`` under the ``if`` that then moves it), and no later
    binding can come round again (the site is in no loop). The site's own statement
    (``labels = Variable(LongTensor(labels))``) binds after it."""
    own = {id(s.value) for s in (site.line.body if site.line is not None else ()) if isinstance(s, cst.Assign)}
    prior = [b for b in bindings if b.order < site.order and id(b.value) not in own]
    if not prior or site.cond[:len(prior[-1].cond)] != prior[-1].cond:
        return None
    if len(prior) < len(bindings) and any(part.startswith("loop") for _, part in site.cond):
        return None
    return prior[-1]


def exclusive(first: Tuple[Tuple[int, str], ...], second: Tuple[Tuple[int, str], ...]) -> bool:
    """Whether code under branches ``first`` and code under ``second`` (as
    ``CallSite.cond``, of one scope) never both run in one pass: they part in the two arms
    of one ``if`` (an ``elif`` is an ``if`` in the ``orelse``), and no loop around that
    ``if`` runs it again."""
    for x, y in zip(first, second):
        if x != y:
            return x[0] == y[0] and {x[1], y[1]} == {"body", "orelse"}
        if x[1] == "loop":
            return False  # the next iteration may take the other arm
    return False


def _function_scope(scope: Scope) -> Optional[Scope]:
    current: Optional[Scope] = scope
    while current is not None and not current.is_function:
        current = current.parent
    return current

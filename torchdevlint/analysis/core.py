"""Shared analysis: computed once per module, reused by every rule.

One pass over the LibCST tree records scopes, imports, bindings, classes, functions
and every call site with its context (enclosing scope, active ``with`` contexts,
statement). Everything else is derived lazily from those facts and cached:

- ``qualname``: the canonical qualified name of an expression through any import form;
- ``thread_targets`` / ``process_targets``: functions run on a new thread / process;
- ``distributed``: which scopes initialise a process group (DDP setup);
- ``torch_kind``: whether an expression is provably a torch tensor or module;
- ``infer_device``: which expression names the right device at a call site;
- ``implicit_uses``: the current-device-dependent uses inside a scope.

Ordering facts use ``order``: the pre-order index of a node in the tree (document
order), so no positions are needed until a rule reports something.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from .. import names as N

FunctionNode = Union[cst.FunctionDef, cst.Lambda]


@dataclass(eq=False)
class Binding:
    name: str
    kind: str  # assign | param | for | with | walrus | def | class | import | other
    value: Optional[cst.BaseExpression]
    order: int


@dataclass(eq=False)
class Scope:
    kind: str  # module | class | function | lambda
    node: cst.CSTNode
    parent: Optional["Scope"]
    name: str = ""
    imports: Dict[str, str] = field(default_factory=dict)
    bindings: Dict[str, List[Binding]] = field(default_factory=dict)
    function: Optional["FunctionInfo"] = None
    klass: Optional["ClassInfo"] = None

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
    bases: List[cst.BaseExpression]
    methods: Dict[str, "FunctionInfo"] = field(default_factory=dict)
    self_attrs: Dict[str, List[cst.BaseExpression]] = field(default_factory=dict)
    # self.<attr> = value: (value, the method that assigns it, document order)
    self_attr_sets: Dict[str, List[Tuple[cst.BaseExpression, str, int]]] = field(default_factory=dict)


@dataclass(eq=False)
class FunctionInfo:
    node: FunctionNode
    name: str
    scope: Scope  # the function's own scope
    klass: Optional[ClassInfo]
    params: List[str]


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    qualname: Optional[str]
    scope: Scope
    withs: Tuple[Optional[str], ...]  # qualnames of the active with-item calls
    order: int
    line: Optional[cst.SimpleStatementLine]  # the statement line that holds the call
    expr_stmt: Optional[cst.Expr]  # set when the call is a whole expression statement
    end_order: int = 0

    @property
    def method(self) -> Optional[str]:
        func = self.node.func
        return func.attr.value if isinstance(func, cst.Attribute) else None

    @property
    def in_device_context(self) -> bool:
        return any(q in N.DEVICE_CONTEXTS for q in self.withs)

    def keyword(self, name: str) -> Optional[cst.Arg]:
        for arg in self.node.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg
        return None

    def positional(self, index: int) -> Optional[cst.Arg]:
        pos = [a for a in self.node.args if a.keyword is None and not a.star]
        return pos[index] if index < len(pos) else None

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


@dataclass(eq=False)
class ImplicitUse:
    """A use that depends on CUDA's current device."""

    node: cst.CSTNode
    kind: str  # bare-cuda | device-string | current-device-query | pin-memory | device-object
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


# torch functions that do not return a tensor (everything else torch.<lower> does).
_NOT_TENSOR_FUNCS = frozenset(
    {"load", "save", "compile", "device", "no_grad", "enable_grad", "set_grad_enabled",
     "manual_seed", "is_tensor", "numel", "set_default_device", "set_default_dtype",
     "get_default_dtype", "set_num_threads", "get_num_threads", "set_printoptions",
     "inference_mode", "autocast", "dtype", "finfo", "iinfo", "typename", "is_storage",
     "use_deterministic_algorithms", "seed", "initial_seed", "get_rng_state",
     "set_rng_state", "vmap", "cond", "export", "is_grad_enabled", "Generator", "Size"}
)
# Tensor methods that return a tensor.
TENSOR_METHODS = frozenset(
    {"cuda", "cpu", "to", "float", "double", "half", "bfloat16", "int", "long", "short",
     "bool", "byte", "char", "type", "view", "reshape", "permute", "transpose", "t",
     "contiguous", "clone", "detach", "detach_", "squeeze", "unsqueeze", "flatten",
     "expand", "repeat", "requires_grad_", "pin_memory", "share_memory_", "abs", "sum",
     "mean", "mul", "add", "sub", "div", "exp", "log", "sqrt", "pow", "neg", "relu",
     "softmax", "zero_", "fill_", "normal_", "uniform_", "copy_", "narrow", "select",
     "index_select", "masked_fill", "float_", "numpy_", "new_tensor", "new_zeros",
     "new_ones", "new_empty", "new_full", "chunk", "split", "data", "sign", "round"}
)
# Module methods that return the module itself.
MODULE_METHODS = frozenset(
    {"cuda", "cpu", "to", "float", "double", "half", "bfloat16", "train", "eval",
     "requires_grad_", "share_memory", "type", "to_empty", "apply", "zero_grad"}
)
_FACTORY_PREFIXES = ("torch.nn.functional.", "torch.fft.", "torch.linalg.", "torch.special.")
_TENSOR_CLASSES = frozenset(
    {"torch.Tensor", "torch.tensor", "torch.FloatTensor", "torch.LongTensor",
     "torch.DoubleTensor", "torch.HalfTensor", "torch.IntTensor", "torch.ByteTensor",
     "torch.BoolTensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"}
)
_MODULE_CONSTRUCTOR_PREFIXES = ("torch.nn.", "torchvision.models.", "timm.create_model")
_NOT_MODULE_CONSTRUCTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter",
                                      "torch.nn.init", "torch.nn.functional", "torch.nn.utils"})
_CYCLE = "<cycle>"  # a name whose value depends on itself, while it is being typed
_LOCAL_RANK_HINTS = ("local_rank", "localrank", "rank", "device_id")  # device_id: fairseq, deepspeed
_LOCAL_RANK_EXPLICIT = __import__("re").compile(r"LOCAL_RANK|local_rank|localrank|SLURM_LOCALID")


class Analysis:
    """Facts about one module. Build with ``Analysis(module)``."""

    def __init__(self, module: cst.Module, device_name: str = "device", text: Optional[str] = None):
        self.module = module
        self.text = module.code if text is None else text  # LibCST round-trips exactly
        self.device_name = device_name
        collector = _Collector()
        module.visit(collector)
        self.module_scope: Scope = collector.module_scope
        self.calls: List[CallSite] = collector.calls
        self.functions: Dict[cst.CSTNode, FunctionInfo] = collector.functions
        self.classes: List[ClassInfo] = collector.classes
        self.names_used: Set[str] = collector.names_used
        self.order: Dict[cst.CSTNode, int] = collector.order
        self.site_of: Dict[cst.Call, CallSite] = {c.node: c for c in self.calls}
        self._typing: Set[Tuple[str, int]] = set()
        self._top_of: Dict[cst.CSTNode, cst.CSTNode] = collector.top_of
        self._ranges: Dict[cst.CSTNode, Dict] = {}
        self.memo: Dict[str, Dict] = {}  # per-module caches for fix helpers
        for site in self.calls:  # document order: a with-item call precedes its block
            site.qualname = self.qualname(site.node.func, site.scope)
            site.withs = tuple(w.qualname if isinstance(w, CallSite) else w for w in site.withs)

    @cached_property
    def process(self):
        """Process-level facts in execution order (``process.ProcessFlow``)."""
        from .process import ProcessFlow

        return ProcessFlow(self)

    @cached_property
    def devices(self):
        """Device facts at call sites (``devices.DeviceFacts``): per-rank code, binding
        state, chosen and input devices, the verdict for each bare ``.cuda()``."""
        from .devices import DeviceFacts

        return DeviceFacts(self)

    # ------------------------------------------------------------------ positions
    # Positions are computed lazily, per top-level statement that holds a reported node:
    # LibCST's PositionProvider over a whole large module costs more than its parse.
    @cached_property
    def positions(self):
        return MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)

    @cached_property
    def _top_lines(self) -> Optional[Dict[cst.CSTNode, int]]:
        """The first line (leading comments included) of every top-level statement."""
        module = self.module
        header = module.code_for_node(module.with_changes(body=[], footer=[]))
        if module.body and not module.header and header.strip():
            return None  # pragma: no cover - an unexpected codegen shape: use the slow path
        offset = len(header) if module.header else 0
        line = 1 + self.text.count("\n", 0, offset) if offset else 1
        out: Dict[cst.CSTNode, int] = {}
        for stmt in module.body:
            code = module.code_for_node(stmt)
            if self.text[offset:offset + len(code)] != code:
                return None  # pragma: no cover - never seen; correctness first
            out[stmt] = line
            line += code.count("\n")
            offset += len(code)
        return out

    def range(self, node: cst.CSTNode) -> CodeRange:
        top = self._top_of.get(node)
        if top is None or len(self._ranges) >= 64 or "positions" in self.__dict__:
            return self.positions[node]  # dense findings: one pass over the module is cheaper
        lines = self._top_lines
        if lines is None:
            return self.positions[node]
        cached = self._ranges.get(top)
        if cached is None:
            mini = self.module.with_changes(body=[top], header=[], footer=[])
            cached = MetadataWrapper(mini, unsafe_skip_copy=True).resolve(PositionProvider)
            self._ranges[top] = cached
        rng = cached[node]
        delta = lines[top] - 1
        return CodeRange((rng.start.line + delta, rng.start.column), (rng.end.line + delta, rng.end.column))

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    # ------------------------------------------------------------- name resolution
    def lookup(self, name: str, scope: Scope) -> Tuple[Optional[Scope], Optional[str]]:
        """The scope that binds ``name`` as seen from ``scope``, and its import, if any."""
        current: Optional[Scope] = scope
        first = True
        while current is not None:
            if current.kind != "class" or first:
                if name in current.imports:
                    kinds = {b.kind for b in current.bindings.get(name, ())}
                    if not kinds & {"def", "class", "param"}:
                        return current, current.imports[name]
                if name in current.bindings:
                    return current, None
            first = False
            current = current.parent
        return None, None

    def qualname(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        parts: List[str] = []
        while isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        if not isinstance(expr, cst.Name):
            return None
        _, imported = self.lookup(expr.value, scope)
        if imported is None:
            return None
        return N.canonical(".".join([imported] + parts[::-1]))

    def local_function(self, expr: cst.BaseExpression, scope: Scope) -> Optional[FunctionInfo]:
        """The function of this file that ``expr`` names (``f``, ``self.f``, ``partial(f)``)."""
        if isinstance(expr, cst.Lambda):
            return self.functions.get(expr)
        if isinstance(expr, cst.Call) and self.qualname(expr.func, scope) == N.PARTIAL:
            return self.local_function(expr.args[0].value, scope) if expr.args else None
        if isinstance(expr, cst.Name):
            owner, imported = self.lookup(expr.value, scope)
            if owner is None or imported is not None:
                return None
            for b in reversed(owner.bindings[expr.value]):
                if b.kind == "def" and b.value is not None:
                    return self.functions.get(b.value)
            return None
        if (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)
                and expr.value.value in ("self", "cls")):
            klass = self.enclosing_class(scope)
            if klass is not None:
                return self.method(klass, expr.attr.value)
        return None

    def local_class(self, expr: cst.BaseExpression, scope: Scope) -> Optional[ClassInfo]:
        if not isinstance(expr, cst.Name):
            return None
        owner, imported = self.lookup(expr.value, scope)
        if owner is None or imported is not None:
            return None
        for b in reversed(owner.bindings[expr.value]):
            if b.kind == "class":
                return next((c for c in self.classes if c.node is b.value), None)
        return None

    def method(self, klass: ClassInfo, name: str, _seen=None) -> Optional[FunctionInfo]:
        if name in klass.methods:
            return klass.methods[name]
        seen = _seen or set()
        seen.add(klass.node)
        for base in klass.bases:
            parent = self.local_class(base, klass.outer)
            if parent is not None and parent.node not in seen:
                found = self.method(parent, name, seen)
                if found:
                    return found
        return None

    def enclosing_function(self, scope: Scope) -> Optional[FunctionInfo]:
        current: Optional[Scope] = scope
        while current is not None and not current.is_function:
            current = current.parent
        return current.function if current is not None else None

    def enclosing_class(self, scope: Scope) -> Optional[ClassInfo]:
        fn = self.enclosing_function(scope)
        while fn is not None and fn.klass is None:
            fn = self.enclosing_function(fn.scope.parent) if fn.scope.parent else None
        return fn.klass if fn is not None else None

    def subclasses(self, klass: ClassInfo, qualname: str, _seen=None) -> bool:
        """Whether ``klass`` derives from ``qualname`` (through classes of this file too)."""
        seen = _seen or set()
        seen.add(klass.node)
        for base in klass.bases:
            q = self.qualname(base, klass.outer)
            if q == qualname:
                return True
            parent = self.local_class(base, klass.outer)
            if parent is not None and parent.node not in seen:
                if self.subclasses(parent, qualname, seen):
                    return True
        return False

    def is_module_class(self, klass: ClassInfo, _seen=None) -> bool:
        seen = _seen or set()
        seen.add(klass.node)
        for base in klass.bases:
            q = self.qualname(base, klass.outer)
            if q and _is_module_constructor(q):
                return True
            parent = self.local_class(base, klass.outer)
            if parent is not None and parent.node not in seen and self.is_module_class(parent, seen):
                return True
        return False

    @cached_property
    def classes_defining_cuda(self) -> List[ClassInfo]:
        return [c for c in self.classes if "cuda" in c.methods]

    # ------------------------------------------------------------- value typing
    def torch_kind(self, expr: cst.BaseExpression, scope: Scope, _depth: int = 0) -> Optional[str]:
        """'tensor' or 'module' when ``expr`` is provably one, else None."""
        if _depth > 12:
            return None
        if isinstance(expr, cst.Call):
            func = expr.func
            q = self.qualname(func, scope)
            if q is not None:
                return _kind_of_torch_callable(q)
            klass = self.local_class(func, scope)
            if klass is not None:
                return "module" if self.is_module_class(klass) else None
            if isinstance(func, cst.Attribute):
                inner = self.torch_kind(func.value, scope, _depth + 1)
                method = func.attr.value
                if inner == _CYCLE and method in TENSOR_METHODS | MODULE_METHODS:
                    return _CYCLE
                if inner == "tensor" and method in TENSOR_METHODS:
                    return "tensor"
                if inner == "module" and method in MODULE_METHODS:
                    return "module"
            return None
        if isinstance(expr, cst.Name):
            key = (expr.value, id(scope))
            if key in self._typing:
                return _CYCLE  # x = x.float(): the other bindings decide
            self._typing.add(key)
            try:
                return self._kind_of_bindings(self.values_of(expr.value, scope), _depth)
            finally:
                self._typing.discard(key)
        if (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)
                and expr.value.value == "self"):
            klass = self.enclosing_class(scope)
            if klass is not None and expr.attr.value in klass.self_attrs:
                values = [(v, klass.scope) for v in klass.self_attrs[expr.attr.value]]
                return self._kind_of_bindings(values, _depth)
        return None

    def values_of(self, name: str, scope: Scope) -> Optional[List[Tuple[cst.BaseExpression, Scope]]]:
        owner, imported = self.lookup(name, scope)
        if owner is None or imported is not None:
            return None
        values = []
        for b in owner.bindings[name]:
            if b.kind not in ("assign", "walrus") or b.value is None:
                return None
            values.append((b.value, owner))
        return values

    def _kind_of_bindings(self, values, depth: int) -> Optional[str]:
        if not values:
            return None
        kinds = {self.torch_kind(v, s, depth + 1) for v, s in values}
        kinds.discard(_CYCLE)
        return kinds.pop() if len(kinds) == 1 else None

    # ------------------------------------------------------------ device inference
    def is_current_device_expr(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """``"cuda"``, ``torch.device("cuda")``, ``... if torch.cuda.is_available() else "cpu"``."""
        if isinstance(expr, cst.SimpleString):
            return expr.evaluated_value == "cuda"
        if isinstance(expr, cst.IfExp):
            test = expr.test
            return (isinstance(test, cst.Call) and not test.args
                    and self.qualname(test.func, scope) == "torch.cuda.is_available"
                    and self.is_current_device_expr(expr.body, scope))
        if isinstance(expr, cst.Call) and self.qualname(expr.func, scope) == "torch.device":
            args = [a for a in expr.args if not a.star]
            if len(args) == 1 and args[0].keyword is None:
                return self.is_current_device_expr(args[0].value, scope)
            if len(args) == 2 and isinstance(args[1].value, cst.Call):
                inner = args[1].value
                return (self.qualname(inner.func, scope) == "torch.cuda.current_device"
                        and isinstance(args[0].value, cst.SimpleString)
                        and args[0].value.evaluated_value == "cuda")
        return False

    def infer_device(self, site: CallSite) -> Optional[DeviceChoice]:
        """The device the surrounding code already names at ``site``, if any."""
        name = self.device_name
        owner, imported = self.lookup(name, site.scope)
        if owner is not None and imported is None:
            bindings = owner.bindings[name]
            if any(b.kind == "param" for b in bindings):
                return DeviceChoice(name, False, f"the `{name}` parameter")
            values = [b.value for b in bindings if b.kind in ("assign", "walrus")]
            if values and all(v is not None for v in values):
                if owner.is_function and owner is _function_scope(site.scope):
                    if not any(b.order < site.order for b in bindings):
                        values = []  # assigned only after this call in the same function
                if values:
                    exact = all(self.is_current_device_expr(v, owner) for v in values)
                    return DeviceChoice(name, exact, f"`{name}`")
        klass = self.enclosing_class(site.scope)
        if klass is not None and name in klass.self_attrs:
            values = klass.self_attrs[name]
            exact = all(self.is_current_device_expr(v, klass.scope) for v in values)
            return DeviceChoice(f"self.{name}", exact, f"`self.{name}`")
        fn = self.enclosing_function(site.scope)
        if (fn is not None and fn.klass is not None and fn.name == "forward"
                and self.is_module_class(fn.klass) and len(fn.params) >= 2
                and fn.params[0] == "self"):
            return DeviceChoice(f"{fn.params[1]}.device", False, f"the input `{fn.params[1]}`")
        return None

    def free_name(self, preferred: str, taken: Sequence[str] = ()) -> str:
        candidates = [preferred, f"torch_{preferred}", f"default_{preferred}"]
        candidates += [f"{preferred}_{i}" for i in range(2, 100)]
        for candidate in candidates:
            if candidate not in self.names_used and candidate not in taken:
                return candidate
        raise RuntimeError("no free name")  # pragma: no cover

    @cached_property
    def torch_alias(self) -> Optional[str]:
        """A module-level name bound to ``torch`` itself, if any."""
        for name, q in self.module_scope.imports.items():
            if q == "torch" and not {b.kind for b in self.module_scope.bindings.get(name, ())} - {"import"}:
                return name
        return None

    # ------------------------------------------------------------ threads, processes
    @cached_property
    def targets(self) -> List[Target]:
        found: List[Target] = []

        def add(expr: Optional[cst.BaseExpression], kind: str, via: str, site: Optional[CallSite]):
            if expr is None:
                return
            fn = self.local_function(expr, site.scope if site else self.module_scope)
            if fn is not None:
                found.append(Target(fn, kind, via, site))
                if isinstance(fn.node, cst.Lambda) and isinstance(fn.node.body, cst.Call):
                    inner = self.local_function(fn.node.body.func, fn.scope)
                    if inner is not None:
                        found.append(Target(inner, kind, via, site))

        for site in self.calls:
            q = site.qualname
            target = site.keyword("target")
            if q == N.THREAD or self._is_local_subclass_call(site, N.THREAD):
                add(target.value if target else _arg_value(site.positional(1)), "thread",
                    "threading.Thread(target=...)", site)
            elif q == N.PROCESS or (site.method == "Process" and target is not None):
                add(target.value if target else _arg_value(site.positional(1)), "process",
                    "multiprocessing.Process(target=...)", site)
            elif q in N.PROCESS_SPAWNERS:
                add(_arg_value(site.positional(0)) or _kw_value(site, "fn"), "process", q, site)
            elif q == N.TO_THREAD:
                add(_arg_value(site.positional(0)), "thread", "asyncio.to_thread", site)
            elif site.method == "run_in_executor":
                kind = self._executor_kind(_arg_value(site.positional(0)), site.scope) or "thread"
                add(_arg_value(site.positional(1)), kind, "loop.run_in_executor", site)
            elif site.method in N.EXECUTOR_METHODS:
                receiver = site.node.func.value  # type: ignore[union-attr]
                kind = self._executor_kind(receiver, site.scope)
                if kind is not None:
                    add(_arg_value(site.positional(0)), kind, f"executor.{site.method}", site)
        for klass in self.classes:
            for base_q, kind in ((N.THREAD, "thread"), (N.PROCESS, "process")):
                if "run" in klass.methods and self.subclasses(klass, base_q):
                    found.append(Target(klass.methods["run"], kind, f"{base_q} subclass", None))
        return found

    def _is_local_subclass_call(self, site: CallSite, base: str) -> bool:
        klass = self.local_class(site.node.func, site.scope)
        return klass is not None and self.subclasses(klass, base)

    def _executor_kind(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[str]:
        if expr is None:
            return None
        if isinstance(expr, cst.Name) and expr.value == "None":
            return "thread"  # the event loop's default executor is a thread pool
        if isinstance(expr, cst.Call):
            q = self.qualname(expr.func, scope)
            if q in N.THREAD_EXECUTORS:
                return "thread"
            if q in N.PROCESS_EXECUTORS or (q and q.endswith(".Pool")):
                return "process"
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("Pool", "ProcessPoolExecutor"):
                return "process"
            return None
        if isinstance(expr, cst.Name):
            owner, imported = self.lookup(expr.value, scope)
            if owner is None or imported is not None:
                return None
            kinds = {self._executor_kind(b.value, owner) for b in owner.bindings[expr.value]
                     if b.kind in ("assign", "with")}
            kinds.discard(None)
            return kinds.pop() if len(kinds) == 1 else None
        return None

    def target_of(self, fn: Optional[FunctionInfo], kind: str) -> Optional[Target]:
        if fn is None:
            return None
        return next((t for t in self.targets if t.function is fn and t.kind == kind), None)

    # ------------------------------------------------------------------ distributed
    @cached_property
    def uses_distributed(self) -> bool:
        return any(site.qualname and site.qualname.startswith(("torch.distributed", "deepspeed"))
                   for site in self.calls) or any(
            q.startswith("torch.distributed") for s in self._all_scopes for q in s.imports.values())

    @cached_property
    def _all_scopes(self) -> List[Scope]:
        scopes = {id(s): s for s in [self.module_scope] + [c.scope for c in self.calls]}
        scopes.update({id(f.scope): f.scope for f in self.functions.values()})
        return list(scopes.values())

    @cached_property
    def dist_setup_functions(self) -> Set[cst.CSTNode]:
        """Functions that initialise a process group, directly or through a local helper."""
        direct: Dict[cst.CSTNode, Set[cst.CSTNode]] = {}
        setup: Set[cst.CSTNode] = set()
        for site in self.calls:
            fn = self.enclosing_function(site.scope)
            if fn is None:
                continue
            if site.qualname in N.INIT_PROCESS_GROUP:
                setup.add(fn.node)
            callee = self.local_function(site.node.func, site.scope)
            if callee is not None:
                direct.setdefault(fn.node, set()).add(callee.node)
        changed = True
        while changed:
            changed = False
            for caller, callees in direct.items():
                if caller not in setup and callees & setup:
                    setup.add(caller)
                    changed = True
        return setup

    @cached_property
    def module_inits_process_group(self) -> bool:
        """Module-level code (a script) initialises a process group, possibly via a helper."""
        for site in self.calls:
            if self.enclosing_function(site.scope) is not None:
                continue
            if site.qualname in N.INIT_PROCESS_GROUP:
                return True
            callee = self.local_function(site.node.func, site.scope)
            if callee is not None and callee.node in self.dist_setup_functions:
                return True
        return False

    def mentions_rank(self, expr: cst.BaseExpression, scope: Scope, _depth: int = 0) -> bool:
        """Whether a device index derives from LOCAL_RANK / local_rank / rank / gpu."""
        if _depth > 6:
            return False
        code = self.code(expr).lower()
        if any(h in code for h in _LOCAL_RANK_HINTS):
            return True
        for node in _names_in(expr):
            values = self.values_of(node, scope)
            if values and any(self.mentions_rank(v, s, _depth + 1) for v, s in values):
                return True
        return False

    @cached_property
    def process_callees(self) -> Set[cst.CSTNode]:
        """Functions of this file called directly from a process target."""
        process_fns = {t.function.node for t in self.targets if t.kind == "process"}
        out: Set[cst.CSTNode] = set()
        for site in self.calls:
            fn = self.enclosing_function(site.scope)
            if fn is not None and fn.node in process_fns:
                callee = self.local_function(site.node.func, site.scope)
                if callee is not None:
                    out.add(callee.node)
        return out

    @cached_property
    def set_device_sites(self) -> List[CallSite]:
        return [s for s in self.calls if s.qualname in N.SET_DEVICE]

    def binding_context(self, site: CallSite) -> Optional[str]:
        """Why binding a device at ``site`` is per process or per thread, or None when it
        is a global side effect. A process wins over a thread: a process target that
        binds its own device is the accepted idiom."""
        fn = self.enclosing_function(site.scope)
        if fn is not None:
            if self.target_of(fn, "process") is not None:
                return "process"
            if self.target_of(fn, "thread") is not None:
                return "thread"
            if fn.node in self.dist_setup_functions:
                return "distributed-setup"
            if fn.node in self.process_callees:
                return "process"
        elif self.module_inits_process_group:
            return "distributed-setup"
        arg = site.positional(0) or site.keyword("device")
        if arg is not None and self.uses_distributed and self.mentions_rank(arg.value, site.scope):
            return "rank"
        if arg is not None and _LOCAL_RANK_EXPLICIT.search(self.code(arg.value)):
            return "rank"  # LOCAL_RANK / local_rank / hvd.local_rank(), whatever the module imports
        if fn is not None:
            if self.devices.per_rank(site) is not None:
                return "process"  # a launcher-handed function, an RPC worker, a per-rank script
            if arg is not None and fn.klass is not None and isinstance(arg.value, cst.Name) \
                    and arg.value.value in fn.params[1:]:
                return "wrapper"  # an accelerator wrapper's method: the caller chooses the index
        elif self.devices.rank_script:
            return "rank"
        return None

    # ------------------------------------------------------------- DataParallel
    def is_data_parallel(self, site: CallSite) -> bool:
        if site.qualname == N.DATA_PARALLEL:
            return True
        klass = self.local_class(site.node.func, site.scope)
        return klass is not None and self.subclasses(klass, N.DATA_PARALLEL)

    @cached_property
    def data_parallel_wraps(self) -> List[DataParallelWrap]:
        """DataParallel wrappers moved with ``.cuda()`` while ``device_ids`` is implicit
        (or literal): chained, in a later statement, or through the parent module."""
        found: List[DataParallelWrap] = []
        cuda_sites = [s for s in self.calls if is_bare_cuda(s.node) or self._to_implicit_cuda(s)]
        for wrap in self.calls:
            if not self.is_data_parallel(wrap) or wrap.has_star_args:
                continue
            ids_arg = wrap.keyword("device_ids") or wrap.positional(1)
            literal = None
            if ids_arg is not None:
                literal = _int_list(ids_arg.value)
                if literal is None:
                    continue  # device_ids computed by the program: explicit
            for move, shape in self._moves_of(wrap, cuda_sites):
                found.append(DataParallelWrap(wrap, move, shape, literal))
                break
        return found

    def _moves_of(self, wrap: CallSite, cuda_sites: List[CallSite]):
        for site in cuda_sites:
            if site.node.func.value is wrap.node:  # type: ignore[union-attr]
                yield site, "chained"
        line = wrap.line
        if line is None or len(line.body) != 1 or not isinstance(line.body[0], cst.Assign):
            return
        assign = line.body[0]
        if assign.value is not wrap.node or len(assign.targets) != 1:
            return
        target = assign.targets[0].target
        target_code = self.code(target)
        parent_code = self.code(target.value) if isinstance(target, cst.Attribute) else None
        for site in cuda_sites:
            if site.order <= wrap.end_order or not self._same_owner(site.scope, wrap.scope, target):
                continue
            receiver = self.code(site.node.func.value)  # type: ignore[union-attr]
            if receiver == target_code:
                yield site, "later"
            elif parent_code is not None and receiver == parent_code:
                yield site, "parent"

    def _to_implicit_cuda(self, site: CallSite) -> bool:
        """``.to(d)`` where ``d`` is an index-less CUDA device: ``"cuda"``,
        ``torch.device("cuda")``, or a cuda-or-cpu choice (the same implicit primary)."""
        if site.method != "to" or site.qualname is not None or len(site.node.args) != 1:
            return False
        arg = site.node.args[0]
        if arg.keyword is not None and arg.keyword.value != "device":
            return False
        return self._indexless_cuda(arg.value, site.scope, 0)

    def _indexless_cuda(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        if depth > 4:
            return False
        if isinstance(expr, cst.SimpleString):
            return expr.evaluated_value == "cuda"
        if isinstance(expr, cst.IfExp):
            return self._indexless_cuda(expr.body, scope, depth + 1)
        if isinstance(expr, cst.Call) and self.qualname(expr.func, scope) == "torch.device":
            args = [a for a in expr.args if not a.star]
            return len(args) == 1 and self._indexless_cuda(args[0].value, scope, depth + 1)
        if isinstance(expr, cst.Name):
            values = self.values_of(expr.value, scope)
            return bool(values) and all(self._indexless_cuda(v, s, depth + 1) for v, s in values)
        return False

    def _same_owner(self, a: Scope, b: Scope, target: cst.BaseExpression) -> bool:
        if (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == "self"):
            ka, kb = self.enclosing_class(a), self.enclosing_class(b)
            return ka is not None and ka is kb
        return _function_scope(a) is _function_scope(b)

    @cached_property
    def data_parallel_moves(self) -> Set[cst.Call]:
        return {w.move.node for w in self.data_parallel_wraps}

    # ------------------------------------------------------------ implicit devices
    def implicit_uses(self, scope_node: cst.CSTNode, include_nested: bool) -> List[ImplicitUse]:
        """Current-device-dependent uses in a function (or the module) body."""
        uses: List[ImplicitUse] = []
        for site in self.calls:
            if site.in_device_context:
                continue
            fn = self.enclosing_function(site.scope)
            owner = fn.node if fn is not None else self.module
            if owner is not scope_node and not (include_nested and self.inside(site.scope, scope_node)):
                continue
            uses.extend(self.implicit_uses_of(site))
        return uses

    def inside(self, scope: Scope, node: cst.CSTNode) -> bool:
        current: Optional[Scope] = scope
        while current is not None:
            if current.node is node:
                return True
            current = current.parent
        return False

    def implicit_uses_of(self, site: CallSite) -> Iterator[ImplicitUse]:
        q = site.qualname
        call = site.node
        if is_bare_cuda(call):
            yield ImplicitUse(call, "bare-cuda", site, True)
        elif site.method == "pin_memory" and not call.args:
            yield ImplicitUse(call, "pin-memory", site, False)
        elif q in _CURRENT_DEVICE_QUERIES and not [a for a in call.args if a.keyword is None or a.keyword.value == "device"]:
            yield ImplicitUse(call, "current-device-query", site, False)
        elif q == "torch.device" and site.positional(0) is not None and len(call.args) == 1:
            if _is_cuda_string(site.positional(0).value):
                yield ImplicitUse(call, "device-string", site, False)
            return
        for arg in call.args:
            value = arg.value
            kw = arg.keyword.value if arg.keyword is not None else None
            if kw == "pin_memory" and isinstance(value, cst.Name) and value.value == "True":
                yield ImplicitUse(arg, "pin-memory", site, False)
            elif (kw == "device" or (kw is None and site.method == "to")) and _is_cuda_string(value):
                yield ImplicitUse(arg, "device-string", site, False)
            elif (kw == "device" or (kw is None and site.method == "to")) and isinstance(value, cst.Name):
                values = self.values_of(value.value, site.scope)
                if values and all(self.is_current_device_expr(v, s) for v, s in values):
                    yield ImplicitUse(arg, "device-object", site, False)


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
            if not (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
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


def _arg_value(arg: Optional[cst.Arg]) -> Optional[cst.BaseExpression]:
    return arg.value if arg is not None else None


def _kw_value(site: CallSite, name: str) -> Optional[cst.BaseExpression]:
    return _arg_value(site.keyword(name))


def _names_in(expr: cst.CSTNode) -> List[str]:
    found: List[str] = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            found.append(node.value)

    expr.visit(V())
    return found


def _function_scope(scope: Scope) -> Optional[Scope]:
    current: Optional[Scope] = scope
    while current is not None and not current.is_function:
        current = current.parent
    return current


def _is_module_constructor(q: str) -> bool:
    if any(q == n or q.startswith(n + ".") for n in _NOT_MODULE_CONSTRUCTORS):
        return False
    if q.startswith(("torch.nn.", "torchvision.models.")):
        last = q.rsplit(".", 1)[-1]
        return q.startswith("torchvision.models.") or last[:1].isupper()
    return q == "timm.create_model"


def _kind_of_torch_callable(q: str) -> Optional[str]:
    if q in _TENSOR_CLASSES:
        return "tensor"
    if _is_module_constructor(q):
        return "module"
    if q.startswith(_FACTORY_PREFIXES):
        return "tensor"
    parts = q.split(".")
    if len(parts) == 2 and parts[0] == "torch" and parts[1][:1].islower() and parts[1] not in _NOT_TENSOR_FUNCS:
        return "tensor"
    return None


class _Collector(cst.CSTVisitor):
    """The single pass that records raw facts."""

    def __init__(self) -> None:
        self.module_scope: Scope = None  # type: ignore[assignment]
        self.scopes: List[Scope] = []
        self.withs: List[List[Optional[str]]] = [[]]
        self.lines: List[cst.SimpleStatementLine] = []
        self.exprs: Dict[cst.CSTNode, cst.Expr] = {}
        self.calls: List[CallSite] = []
        self.functions: Dict[cst.CSTNode, FunctionInfo] = {}
        self.classes: List[ClassInfo] = []
        self.names_used: Set[str] = set()
        self.skip_names: Set[cst.CSTNode] = set()
        self.order: Dict[cst.CSTNode, int] = {}
        self.top_level: Set[cst.CSTNode] = set()
        self.top_of: Dict[cst.CSTNode, cst.CSTNode] = {}
        self.current_top: Optional[cst.CSTNode] = None
        self.counter = 0
        self.open_calls: List[CallSite] = []

    # every node gets a document-order index; only top-level statements keep theirs
    def on_visit(self, node: cst.CSTNode) -> bool:
        self.counter += 1
        if node in self.top_level:
            self.order[node] = self.counter
            self.current_top = node
        if self.current_top is not None:
            self.top_of[node] = self.current_top
        return super().on_visit(node)

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def _push(self, scope: Scope) -> None:
        self.scopes.append(scope)
        self.withs.append([])

    def _pop(self) -> None:
        self.scopes.pop()
        self.withs.pop()

    def _bind(self, name: str, kind: str, value, scope: Optional[Scope] = None) -> None:
        (scope or self.scope).bind(Binding(name, kind, value, self.counter))

    def visit_Module(self, node: cst.Module) -> None:
        self.top_level = set(node.body)
        self.module_scope = Scope("module", node, None, "<module>")
        self._push(self.module_scope)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        outer = self.scope
        self._bind(node.name.value, "class", node)
        scope = Scope("class", node, outer, node.name.value)
        info = ClassInfo(node, node.name.value, scope, outer, [a.value for a in node.bases if a.keyword is None])
        scope.klass = info
        self.classes.append(info)
        self._push(scope)
        self.skip_names.add(node.name)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._pop()

    def _function(self, node: FunctionNode, name: str) -> None:
        outer = self.scope
        klass = outer.klass if outer.kind == "class" else None
        scope = Scope("function" if isinstance(node, cst.FunctionDef) else "lambda", node, outer, name)
        params = _param_names(node.params)
        info = FunctionInfo(node, name, scope, klass, params)
        scope.function = info
        self.functions[node] = info
        if klass is not None and isinstance(node, cst.FunctionDef):
            klass.methods[name] = info
        self._push(scope)
        for p in params:
            self._bind(p, "param", None)
            self.names_used.add(p)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind(node.name.value, "def", node)
        self.names_used.add(node.name.value)
        self.skip_names.add(node.name)
        self._function(node, node.name.value)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._function(node, "<lambda>")

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._pop()

    def visit_Param(self, node: cst.Param) -> None:
        self.skip_names.add(node.name)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = _dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
                self.scope.imports[local] = dotted
            else:
                local = dotted.split(".")[0]
                self.scope.imports[local] = local
            self._bind(local, "import", None)
            self.names_used.add(local)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        base = _dotted(node.module)
        for alias in node.names:
            name = _dotted(alias.name)
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            self.scope.imports[local] = f"{base}.{name}"
            self._bind(local, "import", None)
            self.names_used.add(local)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip_names.add(node.attr)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip_names.add(node.keyword)

    def visit_Name(self, node: cst.Name) -> None:
        if node not in self.skip_names:
            self.names_used.add(node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, "other", None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, "walrus", node.value)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target, None, kind="for")

    def visit_CompFor(self, node: cst.CompFor) -> None:
        pass  # comprehension variables are local to the comprehension

    def _target(self, target: cst.BaseExpression, value, kind: str = "assign") -> None:
        if isinstance(target, cst.Name):
            self._bind(target.value, kind, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else None
            if values is not None and (len(values) != len(target.elements) or any(
                    isinstance(e, cst.StarredElement) for e in list(values) + list(target.elements))):
                values = None
            for i, el in enumerate(target.elements):
                if isinstance(el, cst.StarredElement):
                    self._target(el.value, None, "other")
                elif values is not None:  # a, b = x.cuda(), y.cuda(): pair them up
                    self._target(el.value, values[i].value, kind)
                else:
                    self._target(el.value, None, "other")
        elif (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
              and target.value.value == "self" and value is not None):
            klass = self._method_class()
            if klass is not None:
                klass.self_attrs.setdefault(target.attr.value, []).append(value)
                method = next((sc.name for sc in reversed(self.scopes) if sc.kind == "function"), "")
                klass.self_attr_sets.setdefault(target.attr.value, []).append((value, method, self.counter))

    def _method_class(self) -> Optional[ClassInfo]:
        for scope in reversed(self.scopes):
            if scope.kind == "function":
                return scope.function.klass if scope.function else None
        return None

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            q_expr = item.item
            self.withs[-1].append(None)  # resolved later from the call site's qualname
            if item.asname is not None and isinstance(item.asname.name, cst.Name):
                self._bind(item.asname.name.value, "with", q_expr)

    def leave_With(self, node: cst.With) -> None:
        for _ in node.items:
            self.withs[-1].pop()

    def leave_WithItem(self, node: cst.WithItem) -> None:
        # the item is evaluated before the block: the block runs in its context
        item = node.item
        if isinstance(item, cst.Call):
            site = next((c for c in reversed(self.calls) if c.node is item), None)
            if site is not None:
                # position of this item in the current with list: the last None slot
                for i in range(len(self.withs[-1]) - 1, -1, -1):
                    if self.withs[-1][i] is None:
                        self.withs[-1][i] = site  # type: ignore[assignment]
                        break

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.lines.append(node)

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.lines.pop()

    def visit_Expr(self, node: cst.Expr) -> None:
        self.exprs[node.value] = node

    def visit_Call(self, node: cst.Call) -> None:
        active = tuple(w for ws in [self.withs[-1]] for w in ws if w is not None)
        site = CallSite(
            node=node,
            qualname=None,
            scope=self.scope,
            withs=active,  # CallSites for now; replaced by qualnames in Analysis
            order=self.counter,
            line=self.lines[-1] if self.lines else None,
            expr_stmt=self.exprs.get(node),
        )
        self.calls.append(site)
        self.open_calls.append(site)

    def leave_Call(self, node: cst.Call) -> None:
        site = self.open_calls.pop()
        site.end_order = self.counter


def _param_names(params: cst.Parameters) -> List[str]:
    out = [p.name.value for p in params.posonly_params] + [p.name.value for p in params.params]
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg.name.value)
    out += [p.name.value for p in params.kwonly_params]
    if params.star_kwarg is not None:
        out.append(params.star_kwarg.name.value)
    return out


def _dotted(node: Union[cst.Attribute, cst.Name]) -> str:
    if isinstance(node, cst.Name):
        return node.value
    return f"{_dotted(node.value)}.{node.attr.value}"  # type: ignore[arg-type]

"""Process-level facts, in execution order.

Two mistakes decide where a whole process runs: ``CUDA_VISIBLE_DEVICES`` assigned after
CUDA started (the variable is read once, when CUDA initialises), and an NCCL process
group whose rank never bound its GPU. Both need the order in which a process executes
its code, not document order, so this module walks statement lists the way Python runs
them:

- the module body from top to bottom (a script), and each function as an entry of its
  own (``main()`` or a library function called from elsewhere);
- a call of a function (or class) of this file runs its body at that point, so a CUDA
  query in a helper called first counts, and so does a write in a helper called later;
- the branches of ``if``/``match`` start from the same state and merge afterwards (a
  call in either branch *may* have run); loop bodies are walked once; function and
  class bodies run only when called.

``ProcessFlow`` is built lazily by ``Analysis.process`` and shared by the rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from .. import names as N
from .core import Analysis
from .facts import CallSite, ClassInfo, FunctionInfo, called_name, setup_call_name
from .treewalk import walk

VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"

# torch.cuda functions that initialise CUDA (and so freeze CUDA_VISIBLE_DEVICES).
# Not here: manual_seed*, memory_allocated/empty_cache (they check is_initialized
# first), torch.device(...) (a plain value).
CUDA_INIT_FUNCTIONS = frozenset(
    "torch.cuda." + n for n in (
        "is_available", "device_count", "current_device", "set_device", "init",
        "get_device_name", "get_device_properties", "get_device_capability",
        "mem_get_info", "synchronize", "Stream", "current_stream", "default_stream",
        "ipc_collect", "get_arch_list", "is_bf16_supported", "utilization",
        "device", "device_of",  # entering the context sets the device
        "amp.GradScaler",  # checks is_available() when constructed
    )
) | frozenset({"torch.amp.GradScaler", "torch.accelerator.set_device_index", "torch.accelerator.current_device_index",
               "torch.accelerator.device_count", "torch.accelerator.is_available",
               "torch.backends.cudnn.version", N.DATA_PARALLEL})
_MAX_DEPTH = 8  # how deep helper calls are followed
# Library entry points that bind the process's device to its local rank when constructed
# (accelerate's PartialState does set_device; TrainingArguments goes through it).
_BINDING_APIS = frozenset({
    "accelerate.Accelerator", "accelerate.PartialState", "accelerate.state.PartialState",
    "accelerate.accelerator.Accelerator", "transformers.TrainingArguments",
    "transformers.Seq2SeqTrainingArguments", "transformers.training_args.TrainingArguments",
    # colossalai's launchers set_device(local_rank) after creating the process group
    "colossalai.launch", "colossalai.launch_from_torch", "colossalai.initialize.launch",
    "colossalai.initialize.launch_from_torch", "colossalai.legacy.initialize.launch",
    "colossalai.legacy.initialize.launch_from_torch", "colossalai.legacy.launch",
})


@dataclass(frozen=True)
class CudaInit:
    """A call that initialises CUDA."""

    node: cst.Call
    what: str  # e.g. "`torch.cuda.device_count()`"


@dataclass(frozen=True)
class EnvWrite:
    """A write of ``CUDA_VISIBLE_DEVICES`` (assignment, update, setdefault, putenv, del)."""

    node: cst.CSTNode  # the statement's target or the call


@dataclass(frozen=True)
class LateWrite:
    write: EnvWrite
    init: CudaInit


State = Optional[CudaInit]  # the first CUDA initialisation on the path so far
Owner = Union[FunctionInfo, None]  # None: module-level code


class ProcessFlow:
    def __init__(self, analysis: Analysis):
        self.a = analysis

    # ---------------------------------------------------------------- call graph
    def owner(self, site: CallSite) -> Owner:
        return self.a.enclosing_function(site.scope)

    def callee(self, site: CallSite) -> Optional[FunctionInfo]:
        """The function of this file a call runs: ``f()``, ``self.f()``, ``Cls()`` (its
        ``__init__``)."""
        fn = self.a.local_function(site.node.func, site.scope)
        if fn is not None and not isinstance(fn.node, cst.Lambda):
            return fn
        klass = self.a.local_class(site.node.func, site.scope)
        if klass is not None:
            return self.a.method(klass, "__init__")
        return None

    @cached_property
    def _edges(self) -> Tuple[Dict[object, Set[object]], Dict[object, Set[object]]]:
        """(callees, callers) of every function node; key None is module-level code."""
        down: Dict[object, Set[object]] = {}
        up: Dict[object, Set[object]] = {}
        for site in self.a.calls:
            callee = self.callee(site)
            if callee is None:
                continue
            fn = self.owner(site)
            caller = fn.node if fn is not None else None
            down.setdefault(caller, set()).add(callee.node)
            up.setdefault(callee.node, set()).add(caller)
        return down, up

    def is_used(self, node: object) -> bool:
        """Whether code of this file calls the function ``node`` or hands it on as a value."""
        return node in self._edges[1] or node in self._callbacks[1]

    def reach(self, start: Set[object], upward: bool) -> Set[object]:
        edges = self._edges[1] if upward else self._edges[0]
        seen = set(start)
        todo = list(start)
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    def setup_path(self, site: CallSite) -> Set[object]:
        """The code that runs with ``site`` in one process: its function, the functions
        that call it (transitively), and everything any of those calls; where one of
        them calls a function it was handed (``def run(fn, rank): setup(rank); fn(rank)``,
        or a decorator's ``wrapped`` that calls the ``func`` it closes over), every
        function of this file handed on as a value or decorated by one of its functions,
        and what those call. In a method, the object's life too: every method of its
        class, of the classes of this file it derives from and of those deriving from it
        (rl_games' trainer opens the group in ``__init__`` and binds in ``train()``,
        which whoever built it calls next)."""
        fn = self.owner(site)
        here = {fn.node if fn is not None else None}
        method = self.a.enclosing_method(site.scope)
        if method is not None and method.klass is not None:
            here |= {m.node for k in self._lineage(method.klass) for m in k.methods.values()}
        path = self.reach(self.reach(here, upward=True), upward=False)
        callers, handed = self._callbacks
        return path | self.reach(handed, upward=False) if path & callers else path

    def _lineage(self, klass: ClassInfo) -> List[ClassInfo]:
        """``klass``, the classes of this file it derives from, and those that derive
        from it (transitively; not its siblings: no object is of both)."""
        a = self.a
        parents = {c.node: a.local_parents(c) for c in a.classes}
        children: Dict[object, List[ClassInfo]] = {}
        for c in a.classes:
            for p in parents[c.node]:
                children.setdefault(p.node, []).append(c)
        found: Dict[object, ClassInfo] = {klass.node: klass}
        for edges in (parents, children):
            todo = [klass]
            while todo:
                for other in edges.get(todo.pop().node, ()):
                    if other.node not in found:
                        found[other.node] = other
                        todo.append(other)
        return list(found.values())

    @cached_property
    def _callbacks(self) -> Tuple[Set[object], Set[object]]:
        """(the functions that call a parameter, their own or one of an enclosing
        function they close over, the functions of this file passed as an argument:
        ``mp.spawn(worker)``, ``partial(wrapper, fn)``, ``self._spawn(test_sync)``, or
        decorated by one of its functions: ``@manage_process_group``), read in one pass
        over the calls and the definitions."""
        a = self.a
        callers: Set[object] = set()
        handed: Set[object] = set()
        for site in a.calls:
            fn = self.owner(site)
            func = site.node.func
            if fn is not None and isinstance(func, cst.Name) and a.parameter_of(func.value, site.scope):
                callers.add(fn.node)
            for arg in site.node.args:
                if isinstance(arg.value, (cst.Name, cst.Attribute)):
                    value = a.local_function(arg.value, site.scope)
                    if value is not None and not isinstance(value.node, cst.Lambda):
                        handed.add(value.node)
        for info in a.functions.values():
            node, outer = info.node, info.scope.parent
            if isinstance(node, cst.FunctionDef) and outer is not None and any(
                    a.local_function(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator, outer)
                    is not None for d in node.decorators):
                handed.add(node)
        return callers, handed

    def binds_device_in(self, path: Set[object]) -> bool:
        """Whether code on ``path`` (function nodes; None: module level) binds a device."""
        return (any(self.owner_node(s.node) in path for s in self.binding_sites)
                or any(self.owner_node(t) in path for t in self._env_targets))

    # ---------------------------------------------------------------- CUDA init
    def cuda_init(self, site: CallSite) -> Optional[CudaInit]:
        """Whether this call initialises CUDA (and so reads CUDA_VISIBLE_DEVICES)."""
        q = site.qualname
        call = site.node
        if q in CUDA_INIT_FUNCTIONS:
            return CudaInit(call, f"`{_short(self.a.code(call.func))}()`")
        if site.method == "cuda" and q is None:
            return CudaInit(call, "`.cuda()`")
        if site.method == "pin_memory" and q is None:
            return CudaInit(call, "`.pin_memory()`")
        for arg in call.args:
            kw = arg.keyword.value if arg.keyword is not None else None
            if kw == "device" or (kw is None and site.method == "to" and q is None):
                if self.is_cuda_device(arg.value, site):
                    return CudaInit(call, f"`{_short(self.a.code(call))}`")
        return None

    def is_cuda_device(self, expr: cst.BaseExpression, site: CallSite, _depth: int = 0) -> bool:
        """A literal CUDA device: ``"cuda"``, ``"cuda:1"``, ``torch.device("cuda", k)``,
        or a name bound only to those."""
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))
        if isinstance(expr, cst.Call) and self.a.qualname(expr.func, site.scope) == "torch.device":
            first = expr.args[0].value if expr.args else None
            return first is not None and self.is_cuda_device(first, site, _depth + 1)
        if isinstance(expr, cst.Name) and _depth < 4:
            values = self.a.values_of(expr.value, site.scope)
            return bool(values) and all(self.is_cuda_device(v, site, _depth + 1) for v, _ in values)
        return False

    # ---------------------------------------------------------------- env writes
    def is_key(self, expr: Optional[cst.BaseExpression], scope) -> bool:
        """The string "CUDA_VISIBLE_DEVICES", or a name bound only to it."""
        if _is_key(expr):
            return True
        if isinstance(expr, cst.Name):
            values = self.a.values_of(expr.value, scope)
            return bool(values) and all(_is_key(v) for v, _ in values)
        return False

    def env_write_call(self, site: CallSite) -> bool:
        q = site.qualname
        if q in ("os.environ.setdefault", "os.putenv", "os.environ.__setitem__", "os.environ.pop",
                 "os.unsetenv", "os.environ.__delitem__"):
            first = site.positional(0)
            return first is not None and self.is_key(first.value, site.scope)
        if q == "os.environ.update":
            if site.keyword(VISIBLE_DEVICES) is not None:
                return True
            first = site.positional(0)
            if first is not None and isinstance(first.value, cst.Dict):
                return any(isinstance(el, cst.DictElement) and self.is_key(el.key, site.scope)
                           for el in first.value.elements)
        return False

    def env_target(self, target: cst.BaseExpression, scope) -> bool:
        """``os.environ["CUDA_VISIBLE_DEVICES"]`` as an assignment or ``del`` target."""
        if not isinstance(target, cst.Subscript) or len(target.slice) != 1:
            return False
        index = target.slice[0].slice
        return (isinstance(index, cst.Index) and self.is_key(index.value, scope)
                and self.a.qualname(target.value, scope) == "os.environ")

    @cached_property
    def env_writes(self) -> List[EnvWrite]:
        if VISIBLE_DEVICES not in self.a.text:
            return []
        out = [EnvWrite(s.node) for s in self.a.calls if self.env_write_call(s)]
        out += [EnvWrite(t) for t in self._env_targets]
        return out

    @cached_property
    def _env_targets(self) -> List[cst.CSTNode]:
        if VISIBLE_DEVICES not in self.a.text or "environ" not in self.a.text:
            return []
        return [t for t, scope in self._statement_scopes.items() if self.env_target(t, scope)]

    @cached_property
    def _statement_scopes(self) -> Dict[cst.CSTNode, object]:
        """Assignment/del targets -> the scope they run in (the call sites' scopes)."""
        out: Dict[cst.CSTNode, object] = {}
        a = self.a

        class V(cst.CSTVisitor):
            def __init__(self) -> None:
                self.stack = [a.module_scope]

            def _enter(self, node) -> None:
                fn = a.functions.get(node)
                self.stack.append(fn.scope if fn is not None else self.stack[-1])

            def visit_FunctionDef(self, node) -> None:
                self._enter(node)

            def leave_FunctionDef(self, node) -> None:
                self.stack.pop()

            def visit_Lambda(self, node) -> None:
                self._enter(node)

            def leave_Lambda(self, node) -> None:
                self.stack.pop()

            def visit_ClassDef(self, node) -> None:
                klass = next((c for c in a.classes if c.node is node), None)
                self.stack.append(klass.scope if klass is not None else self.stack[-1])

            def leave_ClassDef(self, node) -> None:
                self.stack.pop()

            def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
                out[node.target] = self.stack[-1]

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                out[node.target] = self.stack[-1]

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                out[node.target] = self.stack[-1]

            def visit_Del(self, node: cst.Del) -> None:
                targets = node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]
                for t in targets:
                    out[t.value if isinstance(t, cst.Element) else t] = self.stack[-1]

        walk(a.module, V())
        return out

    # ---------------------------------------------------------------- the walk
    @cached_property
    def late_env_writes(self) -> List[LateWrite]:
        """``CUDA_VISIBLE_DEVICES`` writes that run after CUDA was initialised on the
        same path: module level in execution order, and each function as an entry."""
        writes = {w.node: w for w in self.env_writes}
        if not writes:
            return []
        walker = _Walker(self, writes)
        walker.walk(self.a.module.body, None, 0)  # run as a script
        # functions as entries (called from elsewhere, after this module was imported:
        # what its import ran comes first), only those whose reach holds a write
        imported = _Walker(self, writes, skip_main_guard=True).walk(self.a.module.body, None, 0)
        start = None if imported is DEAD else imported
        holders = {self.owner_node(w.node) for w in writes.values()}
        relevant = self.reach(holders, upward=True)
        for fn in self.a.functions.values():
            if fn.node in relevant and isinstance(fn.node, cst.FunctionDef):
                walker.walk(_body(fn.node), start, 0)
        return sorted(walker.found.values(), key=lambda lw: self.a.range(lw.write.node).start.line)

    def owner_node(self, node: cst.CSTNode) -> object:
        """The function (its node) whose code holds ``node``; None at module or class level."""
        site = self.a.site_of.get(node)  # type: ignore[arg-type]
        if site is not None:
            fn = self.owner(site)
        else:
            scope = self._statement_scopes.get(node)
            fn = self.a.enclosing_function(scope) if scope is not None else None  # type: ignore[arg-type]
        return fn.node if fn is not None else None

    # ---------------------------------------------------------------- bindings
    @cached_property
    def binding_sites(self) -> List[CallSite]:
        """Calls that bind this process's (or thread's) device: ``set_device`` of any
        backend, ``with torch.cuda.device(k)``, ``CUDA_VISIBLE_DEVICES`` writes, and
        helpers of other modules whose name says they bind one, or that set up this
        process's environment with its rank (``_ENV_SETUP``)."""
        out = []
        for site in self.a.calls:
            q = site.qualname
            if (q in N.SET_DEVICE or q in N.DEVICE_CONTEXTS or q in _BINDING_APIS
                    or self.env_write_call(site)):
                out.append(site)
            elif (q is None or not N.is_torch(q)) and self.callee(site) is None:
                name = called_name(site.node.func)  # local helpers are read, not guessed
                setup = setup_call_name(site.node.func)
                if name is not None and (_binder_name(setup) or _rank_env_setup(name, site)):
                    out.append(site)
        return out

    # ---------------------------------------------------------------- local rank
    def local_rank_expr(self, site: CallSite) -> Optional[str]:
        """An expression for this process's local rank, visible at ``site``: a
        ``local_rank`` variable bound before it, ``args.local_rank`` (``args`` a parameter or
        bound before it), the index an
        ``mp.spawn`` target receives (or the parameter it passes that index to), a name
        the function itself uses as its GPU's index (``DDP(m, device_ids=[rank])``,
        ``device="cuda:{}".format(device_id)``: cogdl's trainer, PyText's ``dist_init``), or
        ``int(os.environ["LOCAL_RANK"])`` where the code reads it from the launcher."""
        a = self.a
        for name in _LOCAL_RANK_NAMES:
            owner, imported = a.lookup(name, site.scope)
            if owner is not None and imported is None and _bound_before(owner, name, site):
                return name
        fn = a.enclosing_function(site.scope)
        if fn is not None:
            body = a.code(fn.node)
            for p in fn.scope.bindings:  # args.local_rank, opt.local_rank ...: a parameter, or
                # bound before the call (`args = get_args()`, retinaface's inference); through
                # `self`, as the function read it before the call (simpletransformers: `if
                # self.args.local_rank != -1:`, where `args` is a parameter that may be None)
                if p == "self":
                    read = "".join(a.lines[a.first_line(fn.node) - 1:a.range(site.node).start.line])
                    m = re.search(r"(?<![\w.])self(?:\.\w+)?\.local_rank\b", read)
                else:
                    m = re.search(rf"(?<![\w.]){re.escape(p)}\.local_rank\b", body)
                if m and _bound_before(fn.scope, p, site):
                    return m.group(0)
            spawn_index = self._spawn_index_param(fn)
            if spawn_index is not None:
                return spawn_index
            for m in _GPU_INDEX.finditer(body):  # the GPU the function itself puts this rank's work on
                name = next(g for g in m.groups() if g)  # (an index, not a device object: `.cuda(device)`)
                if (name in fn.scope.bindings and _bound_before(fn.scope, name, site)
                        and not re.fullmatch(r"(?:\w*_)?dev(?:ice)?s?", name)):
                    return name
        body = a.code(fn.node) if fn is not None else a.text
        if "LOCAL_RANK" in body and a.module_scope.imports.get("os") == "os":
            return 'int(os.environ["LOCAL_RANK"])'  # what the launcher (torchrun, elastic agent) sets
        return None

    def _spawn_index_param(self, fn: FunctionInfo) -> Optional[str]:
        """The parameter holding the process index ``mp.spawn`` passes: the first one of
        a spawn target, or the one a spawn target passes its index to."""
        a = self.a
        if not fn.params:
            return None
        spawned = a.devices.index_targets
        if fn.node in spawned:
            return spawned[fn.node]
        found: List[str] = []
        for call in a.calls:
            if self.callee(call) is not fn:
                continue
            caller = a.enclosing_function(call.scope)
            if caller is None or caller.node not in spawned:
                return None
            positional = [arg for arg in call.node.args if arg.keyword is None and not arg.star]
            index = next((i for i, arg in enumerate(positional) if isinstance(arg.value, cst.Name)
                          and arg.value.value == spawned[caller.node]), None)
            if index is None or index >= len(fn.params):
                return None
            found.append(fn.params[index])
        return found[0] if found and len(set(found)) == 1 else None


# a binder by its name: the verb and the device alone (`get_device`, `select_device`), or a
# verb that sets it with more said after (`set_device_index`, `set_device_based_on_group`);
# not a query (`get_device_name`, `get_device_properties`), nor another thing of the device's
# that is set (RPC's `set_device_map`, `init_device_mesh`, `set_device_states` of RNG states)
_BINDER = re.compile(r"(?:^|_)(?:get|set|select|setup|init|bind|pin)_?(?:cuda_|gpu_|local_)?device$"
                     r"|(?:^|_)(?:set|select|setup|bind)_?(?:cuda_|gpu_|local_)?device_"
                     r"(?!(?:map|mesh|states?|rng|hook|cache)(?:_|$))|device_setup")


def _binder_name(name: str) -> bool:
    """A helper of another module whose name says it binds the device (torchtune's
    ``get_device``, yolov5's ``select_device``, ``setup_device``...), or sets up the
    distributed run, binding the rank's GPU first (``names.DIST_SETUP_HELPER``)."""
    name = name.lower()
    return bool(_BINDER.search(name) or N.DIST_SETUP_HELPER.search(name))


# a helper of another module that sets up this process's environment and is handed its
# rank (Bagua's tests: `setup_bagua_env(rank, env)`, `init_env(rank, env)`, which call
# `set_device(rank)`); without the rank, an `init_env()` is as likely a simulator's
_ENV_SETUP = re.compile(r"(?:^|_)(?:setup|init)_(?:\w+_)?env$")
_RANK_ARG = re.compile(r"rank|^(?:gpu|gpu_id|device_id|proc_id|process_id)$", re.I)


def _rank_env_setup(name: str, site: CallSite) -> bool:
    """A call of an environment's setup (``_ENV_SETUP``) handed a name for the rank."""
    return bool(_ENV_SETUP.search(name.lower())) and any(
        isinstance(arg.value, cst.Name) and _RANK_ARG.search(arg.value.value) for arg in site.node.args)


_LOCAL_RANK_NAMES = ("local_rank", "LOCAL_RANK", "localrank", "local_rank_id", "lrank")
# a name used as the index of this process's GPU: DDP's device list, a CUDA device built
# from it, `.cuda(k)`, a "cuda:{}" string formatted with it
_GPU_INDEX = re.compile(r"device_ids\s*=\s*\[\s*(\w+)\s*\]|device\(\s*[\"']cuda[\"']\s*,\s*(\w+)\s*\)"
                        r"|\.cuda\(\s*(\w+)\s*\)|[\"']cuda:\{\}[\"']\.format\(\s*(\w+)\s*\)"
                        r"|f[\"']cuda:\{(\w+)\}[\"']")


def _bound_before(owner, name: str, site: CallSite) -> bool:
    bindings = owner.bindings[name]
    if any(b.kind == "param" for b in bindings):
        return True
    if owner.is_function and owner is not site.scope:
        return True  # bound in an enclosing function: a closure
    return any(b.order < site.order for b in bindings)


def _is_key(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.SimpleString) and expr.evaluated_value == VISIBLE_DEVICES


def _short(code: str, limit: int = 50) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."


def _body(node: cst.FunctionDef) -> Sequence[cst.BaseStatement]:
    body = node.body
    if isinstance(body, cst.IndentedBlock):
        return body.body
    return [cst.SimpleStatementLine(body=body.body)]  # def f(): a; b


class _Dead:
    """The state of a path that ended (``return``, ``raise``, ``sys.exit()``,
    ``break``/``continue`` inside a loop body): nothing after it runs on that path."""

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "<dead>"


DEAD = _Dead()
_EXITS = frozenset({"sys.exit", "os._exit", "exit", "quit"})


def _earliest(analysis: Analysis, *states) -> object:
    """Merge paths: the earliest CUDA init of the live ones; DEAD when none is live."""
    live = [s for s in states if s is not DEAD]
    if not live:
        return DEAD
    inits = [s for s in live if s is not None]
    if not inits:
        return None
    return min(inits, key=lambda s: analysis.site_of[s.node].order)


class _Walker:
    """Walks statement lists in execution order, carrying the first CUDA init
    (``None`` before it; ``DEAD`` once the path has ended)."""

    def __init__(self, flow: ProcessFlow, writes: Dict[cst.CSTNode, EnvWrite],
                 skip_main_guard: bool = False):
        self.flow = flow
        self.skip_main_guard = skip_main_guard  # an import does not run `if __name__ == "__main__":`
        self.a = flow.a
        self.writes = writes
        self.found: Dict[cst.CSTNode, LateWrite] = {}
        self.active: Set[cst.CSTNode] = set()  # functions on the walk's call stack
        self.done: Dict[Tuple[cst.CSTNode, bool], State] = {}  # (function, entered initialised)
        self.returns: List[List[State]] = []  # per function being entered: states at its returns

    def walk(self, body: Sequence[cst.CSTNode], state, depth: int):
        for stmt in body:
            if state is DEAD:
                break  # unreachable on this path
            state = self.statement(stmt, state, depth)
        return state

    def loop_body(self, body: Sequence[cst.CSTNode], state, depth: int):
        """A loop body runs zero or more times: twice finds a write that runs after an
        initialisation made in an earlier iteration."""
        first = self.walk(body, state, depth)
        second = self.walk(body, first, depth) if first is not DEAD else DEAD
        return _earliest(self.a, state, first, second)

    def statement(self, stmt: cst.CSTNode, state, depth: int):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if state is DEAD:
                    break
                state = self.small(small, state, depth)
            return state
        if isinstance(stmt, cst.FunctionDef):
            for dec in stmt.decorators:
                state = self.expr(dec.decorator, state, depth)
            for param in _params(stmt.params):  # defaults run when the def runs
                if param.default is not None:
                    state = self.expr(param.default, state, depth)
            return state
        if isinstance(stmt, cst.ClassDef):
            for dec in stmt.decorators:
                state = self.expr(dec.decorator, state, depth)
            return self.walk(stmt.body.body, state, depth)  # a class body runs at once
        if isinstance(stmt, cst.If):
            if self.skip_main_guard and _is_main_guard(stmt.test):
                return state
            state = self.expr(stmt.test, state, depth)
            then = self.walk(stmt.body.body, state, depth)
            other = state
            if isinstance(stmt.orelse, cst.If):
                other = self.statement(stmt.orelse, state, depth)
            elif isinstance(stmt.orelse, cst.Else):
                other = self.walk(stmt.orelse.body.body, state, depth)
            return _earliest(self.a, then, other)
        if isinstance(stmt, (cst.For, cst.While)):
            state = self.expr(stmt.iter if isinstance(stmt, cst.For) else stmt.test, state, depth)
            state = self.loop_body(stmt.body.body, state, depth)
            if stmt.orelse is not None and state is not DEAD:
                state = self.walk(stmt.orelse.body.body, state, depth)
            return state
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                state = self.expr(item.item, state, depth)
            return self.walk(stmt.body.body, state, depth)
        if isinstance(stmt, (cst.Try, getattr(cst, "TryStar", cst.Try))):
            before = state
            body = self.walk(stmt.body.body, state, depth)
            merged = body
            for handler in stmt.handlers:  # the body may have stopped anywhere: start from
                start = _earliest(self.a, before, body)  # what it may have run
                merged = _earliest(self.a, merged, self.walk(handler.body.body, start, depth))
            state = merged
            if stmt.orelse is not None and body is not DEAD:
                state = _earliest(self.a, state, self.walk(stmt.orelse.body.body, body, depth))
            if stmt.finalbody is not None:
                start = _earliest(self.a, before, state) if state is DEAD else state
                final = self.walk(stmt.finalbody.body.body, start, depth)
                state = DEAD if state is DEAD else final
            return state
        match = getattr(cst, "Match", None)
        if match is not None and isinstance(stmt, match):
            state = self.expr(stmt.subject, state, depth)
            merged = DEAD
            for case in stmt.cases:
                merged = _earliest(self.a, merged, self.walk(case.body.body, state, depth))
            return _earliest(self.a, merged, state)  # no case may match
        return self.expr(stmt, state, depth)  # anything else: its calls in order

    def small(self, small: cst.CSTNode, state, depth: int):
        targets: List[cst.CSTNode] = []
        value: Optional[cst.CSTNode] = small
        if isinstance(small, cst.Assign):
            targets, value = [t.target for t in small.targets], small.value
        elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
            targets, value = [small.target], small.value
        elif isinstance(small, cst.Del):
            t = small.target
            targets = [e.value for e in t.elements] if isinstance(t, cst.Tuple) else [t]
            value = None
        elif isinstance(small, (cst.Return, cst.Raise)):
            state = self.expr(small, state, depth)
            if isinstance(small, cst.Return) and self.returns and state is not DEAD:
                self.returns[-1].append(state)
            return DEAD
        elif isinstance(small, (cst.Break, cst.Continue)):
            return DEAD  # this iteration's path ends; the loop merges the state before it
        if value is not None:
            state = self.expr(value, state, depth)
        for target in targets:
            if target in self.writes:
                self.note(target, state)
        return state

    def note(self, node: cst.CSTNode, state) -> None:
        if state is not None and state is not DEAD and node not in self.found:
            self.found[node] = LateWrite(self.writes[node], state)

    def expr(self, node: cst.CSTNode, state, depth: int):
        for call in _calls_in_order(node):
            site = self.a.site_of.get(call)
            if site is None:
                continue
            if call in self.writes:
                self.note(call, state)
            init = self.flow.cuda_init(site)
            if init is not None and state is None:
                state = init
            if site.qualname in _EXITS or (
                    isinstance(call.func, cst.Name) and call.func.value in ("exit", "quit")
                    and self.a.lookup(call.func.value, site.scope)[0] is None):
                return DEAD
            callee = self.flow.callee(site)
            if callee is not None and isinstance(callee.node, cst.FunctionDef):
                state = self.enter(callee.node, state, depth)
        return state

    def enter(self, fn: cst.FunctionDef, state, depth: int):
        """A call of a function of this file: its body runs now; the caller goes on with
        what any of its returns (or its end) carried."""
        if fn in self.active or depth >= _MAX_DEPTH:
            return state
        key = (fn, state is not None)
        if key in self.done:
            return state if state is not None else self.done[key]
        self.active.add(fn)
        self.returns.append([])
        try:
            end = self.walk(_body(fn), state, depth + 1)
            out = _earliest(self.a, end, *self.returns[-1])
        finally:
            self.returns.pop()
            self.active.discard(fn)
        if out is DEAD:
            out = state  # it always raises: the caller's next statements do not run, but
            # the caller may catch it; keep what the caller had
        self.done[key] = out
        return out


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [x for x in sides if isinstance(x, cst.Name) and x.value == "__name__"]
    strings = [x for x in sides if isinstance(x, cst.SimpleString) and x.evaluated_value == "__main__"]
    return len(names) == 1 and len(strings) == 1


def _params(params: cst.Parameters) -> List[cst.Param]:
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    return out


def _calls_in_order(node: cst.CSTNode) -> List[cst.Call]:
    """The calls an expression (or simple statement) makes, in evaluation order:
    arguments before the call that takes them; nothing inside lambdas or nested
    function and class bodies."""
    out: List[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Lambda(self, node) -> bool:
            return False

        def visit_FunctionDef(self, node) -> bool:
            return False

        def visit_ClassDef(self, node) -> bool:
            return False

        def leave_Call(self, original_node: cst.Call) -> None:
            out.append(original_node)

    walk(node, V())
    return out


__all__ = ["ProcessFlow", "CudaInit", "EnvWrite", "LateWrite", "VISIBLE_DEVICES"]

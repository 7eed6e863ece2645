"""Concurrency: functions run on threads or processes (targets), distributed setup, and
why a device binding is per process, per thread, or global."""

from __future__ import annotations

from functools import cached_property
from typing import Dict, List, Optional, Set

import libcst as cst

from .. import names as N
from .facts import (  # noqa: F401
    CallSite,
    FunctionInfo,
    Scope,
    Target,
    _arg_value,
    _kw_value,
    called_name,
    names_in,
    setup_call_name,
)

import re


_LOCAL_RANK_HINTS = ("local_rank", "localrank", "rank", "device_id")  # device_id: fairseq, deepspeed
_DISTRIBUTED = ("torch.distributed", "deepspeed", "horovod")  # a module that uses one runs per rank
_LOCAL_RANK_EXPLICIT = re.compile(r"LOCAL_RANK|local_rank|localrank|SLURM_LOCALID")
# how a function reaches a pool thread (`Target.via`), and calls that are no CUDA work
_POOLED = ("executor.", "loop.run_in_executor", "asyncio.to_thread")
_NOT_CUDA_WORK = ("print", "len", "str", "repr", "format", "logging.", "logger.", "log.", "time.")
# where a pool takes its initializer positionally (`ThreadPool(n, init)`,
# `ThreadPoolExecutor(n, prefix, init)`), for the pools `_executor_kind` knows
_POOL_INITIALIZER_AT = {"ThreadPoolExecutor": 2, "ProcessPoolExecutor": 2, "ThreadPool": 1, "Pool": 1}
_INITIALIZER = "a pool's initializer"


class ConcurrencyMixin:
    # ------------------------------------------------------------ threads, processes
    @cached_property
    def targets(self) -> List[Target]:
        found: List[Target] = []

        def add(expr: Optional[cst.BaseExpression], kind: str, via: str, site: Optional[CallSite],
                setup: Optional[FunctionInfo] = None):
            if expr is None:
                return
            fn = self.local_function(expr, site.scope if site else self.module_scope)
            if fn is not None:
                found.append(Target(fn, kind, via, site, setup))
                if isinstance(fn.node, cst.Lambda) and isinstance(fn.node.body, cst.Call):
                    inner = self.local_function(fn.node.body.func, fn.scope)
                    if inner is not None:
                        found.append(Target(inner, kind, via, site, setup))

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
                    add(_arg_value(site.positional(0)), kind, f"executor.{site.method}", site,
                        self._pool_initializer(receiver, site.scope))
            elif called_name(site.node.func) in _POOL_INITIALIZER_AT:
                # a pool's initializer runs as each worker starts, before any of its tasks
                setup = self._pool_initializer(site.node, site.scope)
                if setup is not None:
                    found.append(Target(setup, self._executor_kind(site.node, site.scope) or "thread",
                                        _INITIALIZER, site))
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

    def _pool_initializer(self, expr: Optional[cst.BaseExpression], scope: Scope) -> Optional[FunctionInfo]:
        """The function of this file that a pool runs as each worker starts (its
        ``initializer``: ``ThreadPoolExecutor(1, initializer=bind)``, ``Pool(n, bind)``),
        for the pool's constructor call or a name bound once to one."""
        if isinstance(expr, cst.Name):
            owner, imported = self.lookup(expr.value, scope)
            if owner is None or imported is not None:
                return None
            values = [b.value for b in owner.bindings[expr.value] if b.kind in ("assign", "with")]
            return self._pool_initializer(values[0], owner) if len(values) == 1 else None
        site = self.site_of.get(expr) if isinstance(expr, cst.Call) else None
        if site is None or self._executor_kind(expr, scope) is None:
            return None
        at = _POOL_INITIALIZER_AT.get(called_name(expr.func) or "")
        arg = site.keyword("initializer") or (site.positional(at) if at is not None else None)
        return self.local_function(arg.value, scope) if arg is not None else None

    def target_of(self, fn: Optional[FunctionInfo], kind: str) -> Optional[Target]:
        if fn is None:
            return None
        return next((t for t in self.targets if t.function is fn and t.kind == kind), None)

    # ------------------------------------------------------------------ distributed
    @cached_property
    def uses_distributed(self) -> bool:
        return any(site.qualname and site.qualname.startswith(_DISTRIBUTED)
                   for site in self.calls) or any(
            q.startswith(_DISTRIBUTED) for s in self._all_scopes for q in s.imports.values())

    @cached_property
    def _all_scopes(self) -> List[Scope]:
        scopes = {id(s): s for s in [self.module_scope] + [c.scope for c in self.calls]}
        scopes.update({id(f.scope): f.scope for f in self.functions.values()})
        return list(scopes.values())

    @cached_property
    def dist_setup_functions(self) -> Set[cst.CSTNode]:
        """Functions that initialise a process group, directly or through a local helper,
        or call another module's helper whose name says it sets up the distributed run
        (``utils.init_distributed_mode(args)``, Lightning's ``model.init_ddp_connection(...)``)."""
        direct: Dict[cst.CSTNode, Set[cst.CSTNode]] = {}
        setup: Set[cst.CSTNode] = set()
        for site in self.calls:
            fn = self.enclosing_function(site.scope)
            if fn is None:
                continue
            callee = self.local_function(site.node.func, site.scope)
            if site.qualname in N.INIT_PROCESS_GROUP or (callee is None and _dist_setup_helper(site)):
                setup.add(fn.node)
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
            if callee is None and _dist_setup_helper(site):
                return True
        return False

    def _names_local_rank(self, index: cst.BaseExpression, site: CallSite) -> bool:
        """Whether a device index says the local rank itself (``LOCAL_RANK``,
        ``local_rank``, ``hvd.local_rank()``), or is a name whose assignment in effect at
        ``site`` (the last one before it, on its own path) does (Determined's ``device =
        torch.device("cuda", self.distributed.local_rank)``, then ``set_device(device)``),
        or a call of such names (nanotron's ``set_device(torch.cuda.device(device_id))``
        after ``device_id = local_rank``)."""
        if _LOCAL_RANK_EXPLICIT.search(self.code(index)):
            return True
        names = [index.value] if isinstance(index, cst.Name) else (
            names_in(index) if isinstance(index, cst.Call) else [])
        for name in dict.fromkeys(names):
            owner, imported = self.lookup(name, site.scope)
            if owner is not site.scope or imported is not None:
                continue
            before = [b for b in owner.bindings[name] if b.order < site.order and site.cond[:len(b.cond)] == b.cond]
            last = max(before, key=lambda b: b.order) if before else None
            if (last is not None and last.kind == "assign" and last.value is not None
                    and _LOCAL_RANK_EXPLICIT.search(self.code(last.value))):
                return True
        return False

    def mentions_rank(self, expr: cst.BaseExpression, scope: Scope, _depth: int = 0) -> bool:
        """Whether a device index derives from LOCAL_RANK / local_rank / rank / gpu."""
        if _depth > 6:
            return False
        code = self.code(expr).lower()
        if any(h in code for h in _LOCAL_RANK_HINTS):
            return True
        for node in names_in(expr):
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
    def dist_setup_callees(self) -> Set[cst.CSTNode]:
        """Functions of this file called directly from one that initialises a process
        group (``dist_setup_functions``): open_clip's ``set_device(device)`` helper, which
        its ``init_distributed_device`` calls with the rank's device."""
        out: Set[cst.CSTNode] = set()
        for site in self.calls:
            fn = self.enclosing_function(site.scope)
            if fn is not None and fn.node in self.dist_setup_functions:
                callee = self.local_function(site.node.func, site.scope)
                if callee is not None and callee.node is not fn.node:
                    out.add(callee.node)
        return out

    @cached_property
    def set_device_sites(self) -> List[CallSite]:
        return [s for s in self.calls if s.qualname in N.SET_DEVICE]

    def thread_binding(self, site: CallSite) -> Optional[str]:
        """What a ``set_device`` in a thread's function (``binding_context`` "thread") is:
        "pooled" (a task on a pool thread: the binding leaks to later tasks), "idle" (the
        thread does no CUDA work after it: the thread that does stays on cuda:0), or
        "own" (a thread that binds its own device and then works: the accepted idiom);
        None outside threads."""
        if self.binding_context(site) != "thread":
            return None
        fn = self.enclosing_function(site.scope)
        target = self.target_of(fn, "thread")
        if target is not None and target.via == _INITIALIZER:
            return "own"  # each worker thread binds its device once, for all its tasks
        if target is not None and target.via.startswith(_POOLED):
            return "pooled"
        for call in self.calls:  # any call after it but printing/logging/timing is work
            if call.order <= site.end_order or not self.inside(call.scope, fn.node):  # type: ignore[union-attr]
                continue
            if not (self.code(call.node.func).startswith(_NOT_CUDA_WORK)
                    or (call.qualname or "").startswith(_NOT_CUDA_WORK)):
                return "own"
        return "idle"

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
        # the index as given, or what the function set that attribute to just before
        # (Lightning's `self.trainer.root_gpu = ...[self.trainer.local_rank]`)
        index = arg.value if arg is not None else None
        if index is not None and fn is not None:
            earlier = self.value_set_before(index, site, fn)
            index = earlier if earlier is not None else index
        if index is not None and self.uses_distributed and self.mentions_rank(index, site.scope):
            return "rank"
        if index is not None and self._names_local_rank(index, site):
            return "rank"  # LOCAL_RANK / local_rank / hvd.local_rank(), whatever the module imports
        if fn is not None:
            if self.devices.per_rank(site) is not None:
                return "process"  # a launcher-handed function, an RPC worker, a per-rank script
            if (arg is not None and isinstance(arg.value, cst.Name) and arg.value.value in fn.params
                    and fn.node in self.dist_setup_callees):
                return "distributed-setup"  # a helper that the setup hands the rank's device
            if arg is not None and fn.klass is not None and (
                    (isinstance(index, cst.Name) and index.value in fn.params[1:])
                    or (isinstance(arg.value, cst.Attribute) and isinstance(arg.value.value, cst.Name)
                        and arg.value.value.value == "self" and "device" in arg.value.attr.value)):
                return "wrapper"  # a device/accelerator wrapper's method: its owner chooses the index
            if (fn.klass is None and isinstance(index, cst.Name) and index.value in fn.params
                    and N.DEVICE_SETTER.search(fn.name) and not self.process.is_used(fn.node)):
                return "wrapper"  # a setter named for it that no code here calls: its callers choose
        elif self.devices.rank_script:
            return "rank"
        return None


def _dist_setup_helper(site: CallSite) -> bool:
    """A call of another module's helper (not torch's) whose name says it sets up the
    distributed run (``names.DIST_SETUP_HELPER``), or another library's own
    ``init_process_group`` (Bagua's ``bagua.init_process_group()``: the ``set_device``
    before it binds the rank's GPU for it, and is no global switch)."""
    name = setup_call_name(site.node.func)
    return (name is not None and not (site.qualname is not None and N.is_torch(site.qualname))
            and (bool(N.DIST_SETUP_HELPER.search(name.lower())) or name == "init_process_group"))

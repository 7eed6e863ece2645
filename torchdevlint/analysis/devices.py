"""Device facts at a call site: which code runs once per process/rank/worker, whether the
current device is provably the intended one there, which device the code already chose,
and which input's device is at hand. ``classify`` turns them into the one code a bare
``.cuda()`` gets (the most specific wins):

- ``TDL003`` per-rank code, nothing bound yet: every rank lands on GPU 0;
- ``TDL002`` a new tensor moved with ``.cuda()`` while an input's device is at hand;
- ``TDL004`` the code already chose a device (bound before the site) and ``.cuda()``
  ignores it;
- ``TDL001`` everything else that is merely implicit;
- quiet: the current device is provably right (a rank/worker binding earlier on the
  path, a ``with torch.cuda.device(...)`` block, a user-defined ``cuda()`` override).

Built lazily by ``Analysis.devices``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst

from .. import names as N
from .core import Analysis
from ..source import Outline, count_breaks
from .treewalk import walk
from .facts import (CallSite, DeviceChoice, FunctionInfo, Scope, _function_scope, binding_in_force, called_name,
                    compared, definitely_bound, dotted_name, is_bare_cuda, is_docstring, names_in,
                    param_annotation)
from .process import _is_main_guard
from ..notebook import is_notebook_module

# Functions handed to these run once per process (see names.LAUNCHERS)
_BINDING_LAUNCHERS = N.BINDING_LAUNCHERS
_LAUNCHERS = N.LAUNCHERS
# a function that moves a tensor it keeps to the CPU in place (``feats[-1] =
# feats[-1].cpu()``, ``hr = hr.cpu()``: BasicVSR++'s cpu_cache; not ``preds =
# out.argmax(1).cpu()``, a result read out) moves between host and GPU on purpose; its
# inputs may be on the CPU, and a bare `.cuda()` there brings data back to the GPU
_KEEPS_ON_CPU = re.compile(r"(?m)^[ \t]*([\w.\[\]'\"-]+)[ \t]*=[ \t]*\1\.cpu\(\)[ \t]*(?:#.*)?$")
# Names that hold a configuration, whose ``.device`` is a device the user chose.
_CONFIG_NAMES = N.CONFIG_NAMES


# a main guard's test runner: ``unittest.main()``, ``pytest.main([__file__])``,
# ``absltest.main()``, torch's ``run_tests()`` (also as ``sys.exit(...)``)
# a test runner, the module's own self-test (pytorchcv's ~400 model files end in
# `if __name__ == "__main__": _test()`: modules that the package imports, not scripts),
# or its test functions called one by one (norse's `test_lift_conv()`: pytest imports it)
_TEST_RUNNERS = re.compile(r"(?:(?:unittest|pytest|absltest|googletest)\.main|(?:\w+\.)*run_tests"
                           r"|_tests?|_?self_?tests?|test_\w+)$")


# a decorator named for a CUDA-only test (Hugging Face's `require_torch_gpu`, whisper's
# `pytest.mark.requires_cuda`): it skips the test where CUDA is not available
_REQUIRES_CUDA = re.compile(r"requires?_(?:torch_)?(?:cuda|gpu)s?")


def _runs_tests_only(guard: cst.If) -> bool:
    """Whether a main guard's body only runs a test runner (a test module's) or the
    module's own self-test."""
    body = guard.body.body if isinstance(guard.body, cst.IndentedBlock) else [guard.body]
    smalls = [small for stmt in body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body]
    if len(smalls) != sum(len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1 for stmt in body):
        return False  # a compound statement: more than a runner
    for small in smalls:
        call = small.value if isinstance(small, cst.Expr) else None
        if isinstance(call, cst.Call) and isinstance(call.func, (cst.Name, cst.Attribute)) and \
                dotted_name(call.func) in ("sys.exit", "exit") and call.args:
            call = call.args[0].value  # sys.exit(pytest.main(...))
        if not (isinstance(call, cst.Call) and _TEST_RUNNERS.match(dotted_name(call.func))):
            return False
    return bool(smalls)


def _conjuncts(test: str) -> Optional[List[str]]:
    """The ``and`` conjuncts of a test's text, each with its whitespace normalised, in
    order, parentheses around the whole test dropped (DeepRobust's ``if (is_cuda and
    self.device == 'cuda'):``); None when it has an ``or`` (read from text: a guard's
    header)."""
    if re.search(r"\bor\b", test):
        return None
    test = test.strip()
    while test.startswith("(") and _closing(test) == len(test) - 1:
        test = test[1:-1].strip()
    return [" ".join(part.split()) for part in re.split(r"\band\b", test)]


def _closing(text: str) -> int:
    """The index of the bracket that closes ``text``'s first one (-1 if none does)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch in "([{") - (ch in ")]}")
        if depth == 0:
            return i
    return -1


_RANK_MARKERS = N.RANK_MARKERS
_CONFIG_DEVICE = re.compile(r"\b([A-Za-z_]\w*)\.device\b(?!\s*=[^=])")
_DEVICE_WORDS = ("cuda", "cpu", "mps", "xpu", "npu", "hpu", "meta")
# every device type torch's device strings may name, backends' own included (a comparison
# with "mlu" or "ipu" still treats the name as a device: mmcls' wrap_non_distributed_model)
_DEVICE_TYPES = frozenset(_DEVICE_WORDS + ("ipu", "xla", "mlu", "musa", "hip", "ve", "lazy", "vulkan", "mtia",
                                           "maia", "fpga", "opengl", "opencl", "ideep", "mkldnn", "privateuseone"))
_INPUT_DEVICE_ATTRS = ("device", "is_cuda", "get_device")


@dataclass(frozen=True)
class Verdict:
    """What a bare ``.cuda()`` is: a code, or quiet (code None) with the reason."""

    code: Optional[str]
    why: str
    device: Optional[DeviceChoice] = None  # TDL004: the chosen device; TDL002: the input's
    rank: Optional[str] = None  # TDL003: the local rank expression, when the code names one


class DeviceFacts:
    def __init__(self, analysis: Analysis):
        self.a = analysis
        self.flow = analysis.process
        # a function handed to a launcher beside the entry it passes it to
        self.handed: Dict[object, object] = {}
        self._config_bases: Dict[object, List[str]] = {}  # function -> args-like names using .device
        self._words_spelled: Dict[str, bool] = {}  # a chosen device's code -> set to a word, not a device
        self._self_devices: Dict[str, Tuple[Set[int], Set[int]]] = {}  # name -> class lines (_self_device_classes)
        self._entries: Dict[int, Optional[str]] = {}
        self._flags: Dict[str, Tuple[str, ...]] = {}  # flag -> the values of its assignments
        self._first_call_into: Dict[Tuple[object, object], Optional[int]] = {}
        self._reach_of: Dict[object, Set[object]] = {}  # per-process root -> what it runs

    # ------------------------------------------------------------ per-process code
    @cached_property
    def per_process(self) -> Dict[object, str]:
        """Function nodes that run once per process/rank/worker -> how they are started.
        Callees of those run per process too."""
        a = self.a
        roots: Dict[object, str] = {}
        for t in a.targets:
            if t.kind == "process":
                roots.setdefault(t.function.node, t.via)
        for site in a.calls:
            name = called_name(site.node.func)
            q = site.qualname or ""
            if name in _LAUNCHERS and not q.startswith(("gevent", "eventlet", "pexpect", "subprocess")):
                entry = None
                for arg in site.node.args:
                    fn = a.local_function(arg.value, site.scope)
                    if fn is not None:
                        roots.setdefault(fn.node, f"`{name}(...)`")
                        if entry is None:
                            entry = fn.node
                        else:  # spawn(run_dist, ..., func_to_run=check): run_dist calls it
                            self.handed.setdefault(fn.node, entry)
            if q == "torch.distributed.rpc.init_rpc":
                fn = a.enclosing_function(site.scope)
                if fn is not None:
                    roots.setdefault(fn.node, "an RPC worker")
        out: Dict[object, str] = {}
        for root, why in roots.items():
            reach = self.flow.reach({root}, upward=False)
            self._reach_of[root] = reach
            for node in reach:
                if node is not None:
                    out.setdefault(node, why)
        return out

    def spawn_root(self, site: CallSite) -> Optional[FunctionInfo]:
        """The one per-process function that runs ``site`` (itself or through what it
        calls), when it is a plain function handed to ``torch.multiprocessing.spawn`` /
        ``start_processes``: those call it with the process index first, the local rank.
        None when another per-process entry reaches the site too, or none does."""
        owner = self._owner(site)
        if owner not in self.per_process:
            return None
        roots = [root for root, reach in self._reach_of.items() if owner in reach]
        if len(roots) != 1 or roots[0] not in self.index_targets:
            return None
        return self.a.functions.get(roots[0])

    @cached_property
    def index_targets(self) -> Dict[object, str]:
        """Functions handed to a launcher that calls them with the process index first ->
        the parameter that receives it (``Analysis.first_free_parameter``); plain
        functions of this file only, each handed with one such parameter."""
        out: Dict[object, str] = {}
        for site in self.a.calls:
            if site.qualname not in N.INDEX_LAUNCHERS:
                continue
            first = site.node.args[0] if site.node.args and site.node.args[0].keyword is None else None
            handed = first or site.keyword("fn")  # spawn(fn, args=...), spawn(fn=worker)
            if handed is not None:
                value = handed.value
                fn = self.a.local_function(value, site.scope)
                index = self.a.first_free_parameter(value, site.scope)
                if fn is not None and index is not None and out.setdefault(fn.node, index) != index:
                    out[fn.node] = ""  # handed twice, with the index in two places
        return {node: index for node, index in out.items() if index}

    @cached_property
    def launcher_bound(self) -> Set[object]:
        """Functions handed to a launcher that binds the device before calling them."""
        a = self.a
        out: Set[object] = set()
        for site in a.calls:
            if called_name(site.node.func) in _BINDING_LAUNCHERS:
                for arg in site.node.args:
                    fn = a.local_function(arg.value, site.scope)
                    if fn is not None:
                        out |= self.flow.reach({fn.node}, upward=False)
        return out

    @cached_property
    def module_reach(self) -> Set[object]:
        """Module-level code and what it calls (None stands for module level)."""
        return self.flow.reach({None}, upward=False)

    @cached_property
    def rank_script(self) -> bool:
        """A script launched once per rank (torchrun, torch.distributed.launch, horovodrun):
        what runs from its module level reads LOCAL_RANK/RANK/WORLD_SIZE, takes
        ``--local_rank``, asks horovod for its local rank, or initialises a process group."""
        a = self.a
        # (a statement's code is its source text, indented afresh: where the text shows no
        # marker, none of them does, and none is written out)
        if _RANK_MARKERS.search(a.text) is not None:
            texts = [a.code(stmt) for stmt in a.module.body
                     if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef))]
            texts += [a.code(fn.node) for fn in a.functions.values() if fn.node in self.module_reach]
            if any(_RANK_MARKERS.search(t) for t in texts):
                return True
        return any(site.qualname in N.INIT_PROCESS_GROUP and self._owner(site) in self.module_reach
                   and not one_process_group(site) for site in a.calls)

    def per_rank(self, site: CallSite) -> Optional[str]:
        """Why ``site`` runs once per process/rank/worker, or None."""
        owner = self._owner(site)
        if owner in self.per_process:
            return f"runs once per process (started via {self.per_process[owner]})"
        if self.rank_script and owner in self.module_reach:
            return "runs once per rank (this script is launched per rank)"
        return None

    # ------------------------------------------------------------ binding state
    @cached_property
    def _rank_bindings(self) -> List[CallSite]:
        """Bindings that make the current device the intended one for what follows:
        rank/worker-derived ``set_device`` (any backend), a per-process
        ``CUDA_VISIBLE_DEVICES``, library entry points that bind the local rank."""
        a = self.a
        out = []
        for site in self.flow.binding_sites:
            if site.qualname in N.DEVICE_CONTEXTS:
                continue  # block-scoped: `in_device_context` covers its block
            if site.qualname in N.SET_DEVICE:
                if self.is_current_device_noop(site):
                    continue
                owner = self._owner(site)
                if (a.binding_context(site) in (None, "wrapper") and owner not in self.per_process
                        and not (self.rank_script and owner in self.module_reach)):
                    continue  # a global set_device(1): TDL101's business, not a rank binding
            out.append(site)
        return out

    def is_current_device_noop(self, site: CallSite) -> bool:
        """``set_device(current_device())`` or ``set_device(torch.device("cuda"))``: the
        current device, unchanged."""
        arg = site.positional(0) or site.keyword("device")
        if arg is None:
            return False
        value = arg.value
        if isinstance(value, cst.Call) and self.a.qualname(value.func, site.scope) in (
                "torch.cuda.current_device", "torch.accelerator.current_device_index"):
            return True
        return self.is_exact_current(value, site.scope)

    def bound(self, site: CallSite) -> Optional[str]:
        """Why the current device is provably the intended one at ``site``, or None."""
        a = self.a
        if site.in_device_context:
            return "inside `with torch.cuda.device(...)`"
        fn = a.enclosing_function(site.scope)
        if self.in_cuda_override(site):
            return "inside a user-defined `cuda()` override"
        owner = fn.node if fn is not None else None
        if owner in self.launcher_bound:
            return "the launcher binds each process's device before calling it"
        ancestors = self.flow.reach({owner}, upward=True)
        site_line = None
        for b_node, b_owner, b_order in self._binding_points:
            if b_owner is owner:
                if b_order is not None:
                    first = b_order < site.order
                else:  # an assignment statement: compare lines
                    site_line = site_line or a.range(site.node).start.line
                    first = a.range(b_node).start.line < site_line
                if not first:
                    continue
            elif not ((b_owner in ancestors and self._binds_before_calling(b_owner, b_order, owner))
                      or (b_owner is None and owner is not None)
                      or self._called_before(b_owner, owner, site)
                      or self._caller_binds_first(b_owner, owner, ancestors)
                      or self._defined_after(owner, b_owner, b_order)):
                continue
            return f"a binding on line {a.range(b_node).start.line} runs first"
        for node in ancestors:  # a pool's task, where every pool that runs it binds first
            lines = [self._setup_binding(t) for t in a.targets if t.function.node is node]
            if lines and all(lines):
                return f"the pool's initializer binds each worker's device first (line {lines[0]})"
        self.per_process  # noqa: B018 - fills `handed`
        for node in ancestors:
            entry = self.handed.get(node)
            if entry is None:
                continue
            reach = self.flow.reach({entry}, upward=False)
            for b_node, b_owner, _ in self._binding_points:
                if b_owner in reach:
                    return (f"the process entry that runs it binds its device first "
                            f"(line {a.range(b_node).start.line})")
        return None

    def _binds_before_calling(self, b_owner: object, b_order: Optional[int], owner: object) -> bool:
        """Whether the binding at ``b_order`` in ``b_owner``, which calls (transitively) into
        ``owner``, runs before its first such call: a worker that builds its model with a
        helper's ``.cuda()`` and only then binds its rank (``model = build()``,
        ``set_device(rank)``) built it on GPU 0. A binding of unknown order (an
        environment assignment), or a function reached other than by a call (handed on
        as a callback), counts as before, as it did."""
        first = self._first_call_into_from(owner, b_owner)
        return b_order is None or first is None or b_order < first

    def _defined_after(self, owner: object, b_owner: object, b_order: Optional[int]) -> bool:
        """Whether ``owner`` is a function nested in ``b_owner`` (a closure, at any depth)
        whose ``def`` runs after the binding at ``b_order`` there: whoever calls it does so
        after the ``def`` ran, so after the binding (NeMo's ``torch_broadcast_wrapper``,
        defined after ``set_device(self._local_rank)``). Not a thread's or process's
        target: those start with a current device of their own."""
        if b_order is None or b_owner is None or not isinstance(owner, cst.FunctionDef):
            return False
        if any(t.function.node is owner for t in self.a.targets):
            return False
        node, scope = owner, self.a.functions[owner].scope.parent
        while scope is not None:
            if scope.node is b_owner:
                return any(b.kind == "def" and b.value is node and b.order > b_order
                           for b in scope.bindings.get(node.name.value, ()))
            if not isinstance(scope.node, cst.FunctionDef):
                return False  # (a class's method, a lambda: not a closure of ``b_owner``)
            node, scope = scope.node, scope.parent
        return False

    def _setup_binding(self, target) -> Optional[int]:
        """The line of a binding that the pool running ``target`` makes as each worker
        starts (in its ``initializer`` or what that calls), or None."""
        if target.setup is None:
            return None
        reach = self.flow.reach({target.setup.node}, upward=False)
        return next((self.a.range(b_node).start.line for b_node, b_owner, _ in self._binding_points
                     if b_owner in reach), None)

    def in_cuda_override(self, site: CallSite) -> bool:
        """Inside a class's own ``cuda()`` method, a lambda or helper nested in it included
        (``super().cuda()``, a container's ``self._convert(func=lambda x: x.cuda())``:
        they place where its caller asked)."""
        method = self.a.enclosing_method(site.scope)
        return method is not None and method.name == "cuda"

    @cached_property
    def _binding_points(self) -> List[Tuple[cst.CSTNode, object, Optional[int]]]:
        """(node, owner function node or None, call order or None) of every rank
        binding, per-process ``CUDA_VISIBLE_DEVICES`` assignments included."""
        out = [(b.node, self._owner(b), b.order) for b in self._rank_bindings]
        out += [(t, self.flow.owner_node(t), None) for t in self.flow._env_targets]
        return out

    def _called_before(self, target: object, owner: object, site: CallSite) -> bool:
        """Whether code in ``owner`` calls (transitively) into ``target`` before ``site``."""
        first = self._first_call_into_from(target, owner)
        return first is not None and first < site.order

    def _caller_binds_first(self, target: object, owner: object, ancestors: Set[object]) -> bool:
        """Whether a caller of ``owner`` calls into ``target`` (where a binding is) before
        it calls into ``owner``: ``init_distributed(...)`` then ``load_model(...)`` in
        ``train()`` (Tacotron 2). A binding in a distributed setup that the caller runs
        only on a flag still counts: where it does not run there is one process."""
        for caller in ancestors:
            if caller is owner:
                continue
            binds = self._first_call_into_from(target, caller)
            runs = self._first_call_into_from(owner, caller)
            if binds is not None and runs is not None and binds < runs:
                return True
        return False

    def _first_call_into_from(self, target: object, owner: object) -> Optional[int]:
        """The order of the first call in ``owner`` that reaches ``target`` (transitively),
        or None; computed once per (target, owner), not once per site."""
        first = self._first_call_into.get((target, owner), -1)
        if first == -1:
            first = None
            for call in self.a.calls:
                if self._owner(call) is not owner:
                    continue
                callee = self.flow.callee(call)
                if callee is not None and target in self.flow.reach({callee.node}, upward=False):
                    first = call.order  # calls are in document order: the first one found
                    break
            self._first_call_into[(target, owner)] = first
        return first

    def _owner(self, site: CallSite) -> object:
        fn = self.a.enclosing_function(site.scope)
        return fn.node if fn is not None else None

    # ------------------------------------------------------------ chosen devices
    def is_device_value(self, expr: Optional[cst.BaseExpression], scope: Scope, depth: int = 0) -> bool:
        """An expression that holds a device: a device string, ``torch.device(...)``,
        ``x.device``, a ``select_device``/``get_device`` result, a conditional of those."""
        if expr is None or depth > 4:
            return False
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            return isinstance(value, str) and value.split(":")[0] in _DEVICE_WORDS
        if isinstance(expr, cst.FormattedString):
            head = expr.parts[0] if expr.parts else None
            return isinstance(head, cst.FormattedStringText) and head.value.split(":")[0] in _DEVICE_WORDS
        if isinstance(expr, cst.IfExp):
            return (self.is_device_value(expr.body, scope, depth + 1)
                    and self.is_device_value(expr.orelse, scope, depth + 1))
        if isinstance(expr, cst.Call):
            q = self.a.qualname(expr.func, scope)
            if q == "torch.device":
                return True
            # a helper that gives one, this file's or another module's (fairseq's
            # `utils.get_tpu_device()`); not torch's (`torch.cuda.device` is a context),
            # nor one that moves something to a device (`to_device(x, d)`)
            name = called_name(expr.func) or ""
            return ((q is None or q.split(".")[0] != "torch") and name.endswith("device")
                    and name != "set_device" and not name.startswith(("to_", "move")))
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "device"
        if isinstance(expr, cst.Name):
            values = self.a.values_of(expr.value, scope)
            if values is None:  # a parameter named for a device: `self.device = device`
                fn = self.a.parameter_of(expr.value, scope)
                if fn is None:
                    return False
                default = fn.default(expr.value)
                if default is not None:
                    return self.is_device_value(default, fn.scope, depth + 1)
                return "device" in expr.value.lower()
            return bool(values) and all(self.is_device_value(v, s, depth + 1) for v, s in values)
        return False

    def is_exact_current(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """Provably the current device on every machine: ``"cuda"``, ``torch.device("cuda")``,
        ``torch.device("cuda", torch.cuda.current_device())`` (no CPU fallback)."""
        if isinstance(expr, cst.SimpleString):
            return expr.evaluated_value == "cuda"
        if isinstance(expr, cst.Call) and self.a.qualname(expr.func, scope) == "torch.device":
            args = [x for x in expr.args if not x.star]
            if len(args) == 1 and args[0].keyword is None:
                return self.is_exact_current(args[0].value, scope)
            return len(args) == 2 and self.a.is_current_device_expr(expr, scope)
        return False

    def _exact_if(self, values: Sequence[Optional[cst.BaseExpression]], scope: Scope) -> Optional[str]:
        """The test ``T`` when every value chooses the exact current device on it:
        ``torch.device("cuda") if T else torch.device("cpu")``, ``torch.device("cuda" if T
        else "cpu")`` (gpytorch's tests: ``torch.device("cuda") if cuda else ...``)."""
        tests = set()
        for value in values:
            if (isinstance(value, cst.Call) and self.a.qualname(value.func, scope) == "torch.device"
                    and len(value.args) == 1 and value.args[0].keyword is None):
                value = value.args[0].value
            if not isinstance(value, cst.IfExp) or not self.is_exact_current(value.body, scope):
                return None
            tests.add(" ".join(self.a.code(value.test).split()))
        return tests.pop() if len(tests) == 1 else None

    def chosen_device(self, site: CallSite) -> Optional[DeviceChoice]:
        """The device the surrounding code already chose and that is usable at ``site``:
        bound before it in execution order and holding a device (not None, not "gpu").
        ``exact`` when it is provably the current device (``torch.device("cuda")``)."""
        a = self.a
        name = a.device_name
        choice = None
        owner, imported = a.lookup(name, site.scope)
        if owner is not None and imported is None:
            choice = self._named_device(name, owner, site)
        klass = a.enclosing_class(site.scope)
        if choice is None and klass is not None:
            choice = (self._self_device(klass, name, site) if name in klass.self_attr_sets
                      else self._used_self_device(klass, name, site))
        if choice is None:
            choice = self._config_device(site)
        if choice is None:
            choice = self._guard_device(site)
        if choice is None or self._spelled_as_word(choice.code):
            return None
        if not choice.exact and self._guarded_cuda(site, choice.code, equal=True):
            # under `if device == "cuda":` the device is the string "cuda": `.to(device)` is `.cuda()`
            return DeviceChoice(choice.code, True, choice.why, choice.exact_if)
        return choice

    def _guard_device(self, site: CallSite) -> Optional[DeviceChoice]:
        """The device an enclosing ``if`` finds on a GPU, innermost first: ``if "cuda" in
        self.device_list[i]:`` (neural-style's per-layer placement), ``if d.type ==
        "cuda":``, ``if "cuda" in str(d):``: the code's own name for the GPU it means
        there. ``"cuda" in d`` only where ``d`` is one device (an item, or a name that
        says device: not a list of backends); not a tensor's ``.is_cuda`` (the input's
        device is ``forward_input``'s and ``input_device``'s to name)."""
        for header in self.guard_tests(site):
            for conjunct in _conjuncts(header.split(None, 1)[1].rstrip().rstrip(":").strip()) or ():
                if re.search(r"\bnot\b", conjunct) or _CUDA_TENSOR_TEST.fullmatch(conjunct):
                    continue
                device = cuda_tested(conjunct)
                if device is None or device in _CONFIG_NAMES:
                    continue
                plain_in = re.fullmatch(r"""['"]cuda['"]\s+in\s+(?!str\().+""", conjunct) is not None
                if plain_in and not (device.endswith("]") or re.search(r"dev(?:ice)?$", device)):
                    continue
                return DeviceChoice(device, False, f"the device `{device}` this `if` tests")
        return None

    def _spelled_as_word(self, code: str) -> bool:
        """Whether the file compares ``code`` with, or sets it to, a string that names no
        device (YOLOX's demo: ``if args.device == "gpu":``, ``self.device = device`` of a
        ``device="cpu"`` parameter that the same test reads): a choice between words that
        ``.to()`` would reject, not a device."""
        found = self._words_spelled.get(code)
        if found is None:
            name = rf"(?<![\w.]){re.escape(code)}"
            words = re.findall(rf"""{name}\s*(?:==|!=|=(?!=))\s*[rbuf]?['"]([^'"]*)['"]"""
                               rf"""|['"]([^'"]*)['"]\s*(?:==|!=)\s*{name}\b""", self.a.text)
            found = self._words_spelled[code] = any(
                (w or v).split(":")[0] not in _DEVICE_TYPES for w, v in words)
        return found

    def _named_device(self, name: str, owner: Scope, site: CallSite) -> Optional[DeviceChoice]:
        a = self.a
        bindings = owner.bindings[name]
        kinds = {b.kind for b in bindings}
        if kinds == {"param"}:
            if self._guarded_cuda(site, name):  # `if device == "cuda":`, whatever its default
                return DeviceChoice(name, False, f"the `{name}` parameter, a CUDA device under this `if`")
            fn = owner.function
            default = fn.default(name) if fn is not None else None
            if default is not None and not self.is_device_value(default, owner):
                return None  # device=None, device="gpu": not a device to pass on
            if default is not None and _cpu_only(a.code(default)):
                return None  # device="cpu": where results go, not where the work runs
            return DeviceChoice(name, False, f"the `{name}` parameter")
        if not kinds <= {"assign", "walrus"} or any(b.value is None for b in bindings):
            return None  # rebound by a loop, a with, an unpacking...
        if not all(self.is_device_value(b.value, owner) for b in bindings):
            return None
        if all(_cpu_only(a.code(b.value)) for b in bindings):
            return None  # device = "cpu": `.cuda()` asked for a GPU; this is not that
        # bound on every path that reaches the site (an `if` without `else`, a loop or
        # a `try` may skip the assignment: NameError/UnboundLocalError after the fix)
        if owner is _function_scope(site.scope) or (not owner.is_function
                                                    and a.enclosing_function(site.scope) is None):
            earlier = [b.cond for b in bindings if b.order < site.order]
            if not definitely_bound(earlier, site.cond, a.complete_ifs):
                return None  # assigned only later, or only on some paths
        elif not definitely_bound([b.cond for b in bindings], (), a.complete_ifs):
            return None  # the enclosing function or module binds it only on some paths
            # (the script's main guard included: importers never run it)
        exact = all(self.is_exact_current(b.value, owner) for b in bindings)
        exact_if = self._exact_if([b.value for b in bindings], owner) or self._exact_if_branches(bindings, owner)
        return DeviceChoice(name, exact, f"`{name}`", exact_if)

    def _exact_if_branches(self, bindings, scope: Scope) -> Optional[str]:
        """The test ``T`` of ``if T: device = torch.device("cuda")`` / ``else: device =
        torch.device("cpu")`` (pyro's MuE models): the statement form of ``_exact_if``."""
        a = self.a
        exact = [b for b in bindings if self.is_exact_current(b.value, scope)]
        cpu = [b for b in bindings if _cpu_only(a.code(b.value))]
        if len(exact) != 1 or len(cpu) != 1 or len(bindings) != 2:
            return None
        on, off = exact[0].cond, cpu[0].cond
        if not on or not off or on[:-1] != off[:-1] or on[-1][0] != off[-1][0] \
                or (on[-1][1], off[-1][1]) != ("body", "orelse"):
            return None
        fn = a.enclosing_function(scope)
        top = a.first_line(fn.node) if fn is not None else 1
        text = next((t for _, t in self.outline.headers(a.range(exact[0].value).start.line, top)), "")
        return " ".join(text[3:].rstrip().rstrip(":").split()) if text.startswith("if ") else None

    def _self_device(self, klass, name: str, site: CallSite) -> Optional[DeviceChoice]:
        a = self.a
        if not self._has_self(site):
            return None
        sets = klass.self_attr_sets[name]

        def scope_of(method: str) -> Scope:
            fn = klass.methods.get(method)
            return fn.scope if fn is not None else klass.scope

        if not all(self.is_device_value(v, scope_of(m)) for v, m, _ in sets):
            return None
        fn = a.enclosing_function(site.scope)
        in_init = [o for _, method, o in sets if method == "__init__"]
        conds = klass.self_attr_conds
        if fn is not None and fn.name == "__init__":
            earlier = [conds.get((name, o), ()) for o in in_init if o < site.order]
            if not definitely_bound(earlier, site.cond, a.complete_ifs):
                return None  # assigned after this call, or only on some paths: AttributeError
        elif not definitely_bound([conds.get((name, o), ()) for o in in_init], (), a.complete_ifs):
            return None  # assigned only in another method, or only on some paths of __init__
        exact = all(self.is_exact_current(v, scope_of(m)) for v, m, _ in sets)
        tests = {self._exact_if([v], scope_of(m)) for v, m, _ in sets}
        return DeviceChoice(f"self.{name}", exact, f"`self.{name}`", tests.pop() if len(tests) == 1 else None)

    def _used_self_device(self, klass, name: str, site: CallSite) -> Optional[DeviceChoice]:
        """``self.<name>`` that the class's own code passes on as a device
        (``.to(self.device)``, ``device=self.device``) and never assigns in this file: a
        base class elsewhere sets it, or it is a property (Lightning's and Hugging Face's
        modules, BasicSR's models), and the class relies on it. Not in ``__init__``, where
        the base may not have set it yet (a Hugging Face model's ``device`` reads
        parameters not made yet), nor where there is no ``self``. Nor for ``self.cuda()``
        itself: such a ``device`` tells where the object is now (dalle2's decoder reads it
        from a buffer of its own), and moving the object there would leave it in place
        (its ``one_unet_in_gpu`` moves itself to the GPU on purpose)."""
        a = self.a
        receiver = site.node.func.value if isinstance(site.node.func, cst.Attribute) else None
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            return None
        moved_to, assigned = self._self_device_classes(name)
        line = a.first_line(klass.node)
        if line not in moved_to or line in assigned:
            return None
        method = a.enclosing_method(site.scope)
        if method is None or method.name == "__init__" or not self._has_self(site):
            return None
        return DeviceChoice(f"self.{name}", False, f"`self.{name}`, which this class already moves to")

    def _has_self(self, site: CallSite) -> bool:
        """Whether ``self`` at ``site`` is a method's own parameter (not in a staticmethod,
        as torchattacks' ``Attack.load``, nor a classmethod)."""
        owner, _ = self.a.lookup("self", site.scope)
        return owner is not None and any(b.kind == "param" for b in owner.bindings.get("self", ()))

    def _self_device_classes(self, name: str) -> Tuple[Set[int], Set[int]]:
        """The lines of the ``class`` headers (the innermost around each use, by
        indentation) whose code moves something to ``self.<name>``, and of those whose
        code assigns it: read from the module's text once per name."""
        found = self._self_devices.get(name)
        if found is None:
            attr = rf"self\.{re.escape(name)}"
            found = self._self_devices[name] = (  # type: ignore[assignment]
                self._classes_around(rf"(?:\.to\(\s*|\bdevice\s*=\s*){attr}(?![\w.(\[])"),
                self._classes_around(rf"(?<![\w.]){attr}\s*(?::[^=\n]*)?=(?!=)"))
        return found  # type: ignore[return-value]

    def _classes_around(self, pattern: str) -> Set[int]:
        """The lines of the innermost ``class`` headers around the pattern's matches in
        the module's text (0: a match in no class)."""
        text, out, line, at = self.a.text, set(), 1, 0
        for m in re.finditer(pattern, text):
            line, at = line + count_breaks(text, at, m.start()), m.start()
            out.add(next((n for n, header in self.outline.headers(line) if header.startswith("class ")), 0))
        return out

    @staticmethod
    def _config_bases_in(text: str) -> List[str]:
        """The configuration names (``args``, ``opt``, ``cfg``) whose ``.device`` the text
        reads (not assigns), in order."""
        return list(dict.fromkeys(m.group(1) for m in _CONFIG_DEVICE.finditer(text) if m.group(1) in _CONFIG_NAMES))

    def _config_device(self, site: CallSite) -> Optional[DeviceChoice]:
        """``args.device`` / ``opt.device``: the device the command line chose, when the
        function (or module) already uses it."""
        a = self.a
        fn = a.enclosing_function(site.scope)
        key = fn.node if fn is not None else None
        if key not in self._config_bases:
            # (a function's code is its source text, indented afresh: a name the whole
            # text does not use so is not used in it, and its code is not written out)
            if None not in self._config_bases:  # (the module's: its whole text)
                self._config_bases[None] = self._config_bases_in(a.text)
            if key is not None:
                self._config_bases[key] = self._config_bases_in(a.code(fn.node)) if self._config_bases[None] else []
        for base in self._config_bases[key]:
            scope_owner, imported = a.lookup(base, site.scope)
            if scope_owner is None or imported is not None:
                continue
            return DeviceChoice(f"{base}.device", False, f"`{base}.device`")
        return None

    @cached_property
    def _last_guard(self) -> Optional[cst.If]:
        """The module's last ``if __name__ == "__main__":``, whatever it runs."""
        guards = [s for s in self.a.module.body if isinstance(s, cst.If) and _is_main_guard(s.test)]
        return guards[-1] if guards else None

    @cached_property
    def _guard_span(self) -> Tuple[int, int]:
        """Where the module's (last) main guard runs, in execution order; one that only
        runs the tests or a self-test included (what it calls is no script's work)."""
        guard = self._last_guard
        if guard is None:
            return (1 << 60, 1 << 60)
        return self.a.order.get(guard, 1 << 60), _next_order(self.a, guard)

    # ------------------------------------------------------------ entry points
    @cached_property
    def main_guard(self) -> Optional[cst.If]:
        """The module's (last) ``if __name__ == "__main__":``; None where it only runs the
        tests (``unittest.main()``): a test module, which pytest imports, is no script."""
        guard = self._last_guard
        return guard if guard is not None and not _runs_tests_only(guard) else None

    def starts_in_main_guard(self, order: int) -> Optional[cst.BaseStatement]:
        """The first statement of the main guard (after a leading string, a note as
        Grad-CAM's examples write one) when the code at ``order`` runs in it and the guard
        is the module's last statement (so nothing at module level runs after it): where a
        device those uses need is defined without running at import."""
        guard = self.main_guard
        start, end = self._guard_span
        if (guard is None or not start < order < end or not isinstance(guard.body, cst.IndentedBlock)
                or guard is not self.a.module.body[-1]):
            return None
        body = guard.body.body
        return body[1] if len(body) > 1 and is_docstring(body[0]) else body[0]

    def guard_torch_import(self, order: int) -> Optional[Tuple[str, cst.SimpleStatementLine]]:
        """A script that imports torch only in its main guard (``if __name__ ==
        "__main__":`` then ``import torch``): the name that import binds and its line,
        when the code at ``order`` runs in that guard after it (the guard's body is the
        module's scope: a definition placed after that import serves the rest of it)."""
        guard = self.main_guard
        start, end = self._guard_span
        if guard is None or not start < order < end or not isinstance(guard.body, cst.IndentedBlock):
            return None
        return self.block_torch_import(guard.body.body, self.a.module_scope.bindings, start, order)

    def block_torch_import(self, body, bindings, after: int = -1,
                           before: int = 1 << 60) -> Optional[Tuple[str, cst.SimpleStatementLine]]:
        """An ``import torch`` among the statements of ``body`` (a block's own: the main
        guard's, a function's) whose name ``bindings`` bind only by import, once between
        the orders ``after`` and ``before``: that name and the line."""
        lines = {id(line): (line, names) for line, _, names in self.a.torch_imports if names}
        for stmt in body:
            line, names = lines.get(id(stmt), (None, ()))
            for name in names:
                kinds = {b.kind for b in bindings.get(name, ())}
                if kinds == {"import"} and any(after < b.order < before for b in bindings[name]):
                    return name, line  # type: ignore[return-value]
        return None

    @cached_property
    def is_notebook(self) -> bool:
        """A notebook's code cells: run top to bottom, never imported."""
        return is_notebook_module(self.a.text)

    @cached_property
    def is_script(self) -> bool:
        """Whether this file is run rather than imported: a notebook, or it has a main guard, a
        module-level loop (in the module's own blocks too: nanoGPT's sampling loop in
        ``with torch.no_grad():``), parses its command line at module level, or its
        module's own statements print (``print(net(x))``, not under a ``try``: a library
        may print a missing optional import) or run its own functions (``main()``)."""
        a = self.a
        return self.is_notebook or self.main_guard is not None or _has_module_loop(a.module.body) or any(
            site.method == "parse_args" and a.enclosing_function(site.scope) is None for site in a.calls) or any(
            isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
            and isinstance(small.value.func, cst.Name) and small.value.func.value == "print"
            for stmt in a.module.body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body) or bool(
            self._called_from_module_outside_guard)

    def entry_point(self, anchor: int) -> Optional[str]:
        """``"module"`` when this file is a script, whose own execution starts at its top
        (it has a main guard, or its module level does work: calls its own functions or
        holds the use at ``anchor``); None for a library module, which others import. A
        module of a package (it imports relatively: ``from .solver import Solver``) is
        imported even when it has a main guard (``python -m demucs.train``, Dora's
        launcher importing ``demucs.train``): a library's, unless the use is module-level
        code itself."""
        if anchor not in self._entries:
            if self._runs_at_import(anchor):
                self._entries[anchor] = "module"
            elif any(m.startswith(".") for m in self.a.imported_modules):
                self._entries[anchor] = None
            elif self.is_notebook or self.main_guard is not None or self._called_from_module_outside_guard:
                self._entries[anchor] = "module"
            else:
                self._entries[anchor] = None
        return self._entries[anchor]

    def _runs_at_import(self, anchor: int) -> bool:
        """Whether the use at ``anchor`` is module-level code itself: not in a function or
        class body, however deep in module-level ``try``/``if``/``with`` blocks; in a
        script, a lambda there counts as its place (``torch.load(path, map_location=lambda
        storage, loc: storage.cuda())``: what runs it runs at that point)."""
        site = next((s for s in self.a.calls if s.order == anchor), None)
        if site is None:
            top = self.top_statement(anchor)
            return top is not None and not isinstance(top, (cst.FunctionDef, cst.ClassDef))
        scope = site.scope
        while scope is not None:
            if scope.kind in ("function", "class") or (scope.kind == "lambda" and not self.is_script):
                return False
            scope = scope.parent
        return True

    def top_statement(self, order: int) -> Optional[cst.CSTNode]:
        """The top-level statement that holds the node at ``order``."""
        found = None
        for stmt in self.a.module.body:
            if self.a.order[stmt] > order:
                break
            found = stmt
        return found

    @cached_property
    def _called_from_module_outside_guard(self) -> Set[cst.CSTNode]:
        """Top-level defs that module-level code outside the main guard runs as a script
        does: calls in a statement of their own (``main()``, ``print(evaluate())``), and
        what they reach. A library's import-time calls keep their results (``_ok =
        check_version()``, a singleton ``_detector = Detector()``): no sign of a script."""
        a = self.a
        lo, hi = self._guard_span
        statements: Set[cst.CSTNode] = set()  # the calls in statements that discard their value

        class Calls(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                statements.add(node)

            def visit_Lambda(self, node: cst.Lambda) -> bool:
                return False

        for stmt in _module_level_statements(a.module.body):
            for small in stmt.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    walk(small, Calls())
        roots = set()
        for site in a.calls:
            if site.node in statements and not (lo <= site.order < hi):
                callee = self.flow.callee(site)
                if callee is not None:
                    roots.add(callee.node)
        reached = self.flow.reach(roots, upward=False) if roots else set()
        tops = set()
        for stmt in a.module.body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                if any(n is not None and _contains(a, stmt, n) for n in reached):
                    tops.add(stmt)
        return tops

    def forward_input(self, site: CallSite) -> Optional[DeviceChoice]:
        """Inside ``forward`` of an ``nn.Module`` subclass: the first input's device; when
        the body unpacks that input (``loc_data, conf_data = predictions``, SSD's loss: a
        tuple of tensors, which has no device), the first tensor unpacked from it. None
        where the site moves that very input (``obs = obs.cuda()``, tianshou's
        ``DataParallelNet``: ``obs.to(obs.device)`` would move nothing), or where the body
        has rebound the input to a collection before it (``inputs = [inputs]``)."""
        a = self.a
        fn = a.enclosing_function(site.scope)
        if not (fn is not None and fn.klass is not None and fn.name == "forward" and a.is_module_class(fn.klass)):
            return None
        positional = [p.name.value for p in (*fn.node.params.posonly_params, *fn.node.params.params)]  # type: ignore[union-attr]
        if len(positional) < 2 or positional[0] != "self":
            return None  # no input tensor of its own (`forward(self, **batch)`: a dict)
        first = positional[1]
        if any(b.order < site.order and isinstance(b.value, _COLLECTIONS) for b in fn.scope.bindings.get(first, ())):
            return None  # `inputs = [inputs]` (SwAV's multi-crop forward): a list has no device
        line = a.range(site.node).start.line
        for stmt in fn.node.body.body:  # type: ignore[union-attr]
            if a.range(stmt).start.line >= line:
                break
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if (isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value == first
                        and len(small.targets) == 1 and isinstance(small.targets[0].target, (cst.Tuple, cst.List))):
                    head = small.targets[0].target.elements[0].value if small.targets[0].target.elements else None
                    if not isinstance(head, cst.Name) or _moves(site, head.value):
                        return None
                    return DeviceChoice(f"{head.value}.device", False, f"the first tensor of the input `{first}`")
        return None if _moves(site, first) else DeviceChoice(f"{first}.device", False, f"the input `{first}`")

    # ------------------------------------------------------------ input devices
    def input_device(self, site: CallSite, made_of: Optional[cst.CSTNode] = None) -> Optional[str]:
        """An input tensor whose device is at hand: a parameter of the enclosing function
        that the function asks for its device (``p.device``, ``p.is_cuda``,
        ``p.get_device()``), or one the new tensor is made from (``made_of``: by default
        the receiver of the ``.cuda()`` at ``site``; TDL005 gives the legacy constructor
        call), preferring the one a conditional around the site tests. None where what the
        site makes is sent by a collective apart from the input's data (``_sent_apart``)."""
        a = self.a
        fn = a.enclosing_function(site.scope)
        if fn is None or isinstance(fn.node, cst.Lambda):
            return None
        params = [p for p in fn.params if p not in ("self", "cls") and p not in _CONFIG_NAMES]
        if not params:
            return None
        body = a.code(fn.node)
        if _KEEPS_ON_CPU.search(body):  # an offload: the inputs may be on the CPU on purpose
            return None
        asked = [p for p in params
                 if re.search(rf"(?<![\w.]){re.escape(p)}\.(?:device\b|is_cuda\b|get_device\("
                              r"|new_(?:zeros|ones|empty|full|tensor)\()",
                              body)]  # (the parameter itself: not `self.<p>`, an attribute of that name)
        if not asked:  # the new tensor is made from a tensor input: torch.tensor(y.size(0)).cuda(),
            # or sized by names its shape gives (`dim_k, dim_b = q.shape`, `n = x.size(0)`)
            made = (a.code(site.node.func.value) + " " + self._factory_behind(site, fn)  # type: ignore[union-attr]
                    if made_of is None else a.code(made_of))
            named = set(re.findall(r"(?<![\w.])[A-Za-z_]\w*\b", made))
            asked = [p for p in params if (p in named or named & _dimensions_of(body, p)) and (
                _annotated_tensor(fn, p) or not _annotated_other(fn, p) and re.search(
                    rf"(?<![\w.]){re.escape(p)}\.(?:(?:size|dim|numel|detach|type_as|element_size|float|half|contiguous|unsqueeze)\(|shape\b)",
                    body) and not _numpy_array(body, p))]
        if not asked:
            return None
        tests = [a.code(site.line) if site.line is not None else ""] + self.guard_tests(site)
        held = next((p for test in tests for p in asked  # `x.cuda() if p.is_cuda else x`, `if p.is_cuda:`
                     if re.search(rf"(?<![\w.]){re.escape(p)}\.is_cuda\b", test)), asked[0])
        return None if self._sent_apart(site, held) else held  # a collective's tensor: the communicator's

    def _factory_behind(self, site: CallSite, fn: FunctionInfo) -> str:
        """The value a receiver name was last bound to before ``site`` in ``fn``, when that
        makes a new tensor with a torch factory (Whisper's ``dtw_cuda``: ``cost =
        torch.ones(N + M + 2, M + 2) * np.inf``, then ``cost = cost.cuda()``); else ``""``."""
        receiver = site.node.func.value  # type: ignore[union-attr]
        if not isinstance(receiver, cst.Name):
            return ""
        earlier = [b for b in fn.scope.bindings.get(receiver.value, ()) if b.order < site.order]
        if not earlier or earlier[-1].kind != "assign" or earlier[-1].value is None:
            return ""
        value = earlier[-1].value
        if site.line is not None and value in (getattr(s, "value", None) for s in site.line.body):
            if len(earlier) < 2 or earlier[-2].kind != "assign" or earlier[-2].value is None:
                return ""
            value = earlier[-2].value  # `cost = cost.cuda()` itself binds it again: the binding before
        calls: List[cst.Call] = []

        class Calls(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                calls.append(node)

        walk(value, Calls())  # a torch factory however torch is imported (`import torch as T`)
        made = any(self.a.qualname(c.func, site.scope) in _NEW_TENSOR for c in calls)
        return self.a.code(value) if made else ""

    def tested_tensor(self, site: CallSite) -> Optional[str]:
        """The tensor whose ``.is_cuda`` the innermost ``if`` around the site tests (``if
        next(self.parameters()).is_cuda:``, a conjunct of an ``and``, not negated
        (another conjunct may be: the cached-weight idiom ``if inputs.is_cuda and not
        self.alpha.is_cuda: self.alpha = self.alpha.cuda()``); no ``or``; or its device's
        type, ``"cuda" in str(self.conv1.weight.device)`` as SwAV's multi-crop forward
        asks, ``x.device.type == "cuda"``) when the site moves
        something else: the code moves to CUDA *because* that tensor is there, and its
        device is the one meant. Not ``self.is_cuda`` or ``args.is_cuda`` (nor
        ``str(self.device)``): a flag or a setting of an object, not a tensor's device."""
        headers = self.guard_tests(site)[:1]
        test = headers[0].split(None, 1)[1].rstrip().rstrip(":") if headers else ""
        parts = _conjuncts(test) if test else None
        if parts and re.search(r"\bnot\b", test) and any(p.count("(") != p.count(")") for p in parts):
            parts = None  # `not (a and b)`: the text's split says nothing
        receiver = "".join(self.a.code(site.node.func.value).split())  # type: ignore[union-attr]
        for conjunct in parts or ():
            if re.search(r"\bnot\b", conjunct):
                continue
            tested = cuda_tested(conjunct) or ""
            tensor = tested[:-len(".device")] if tested.endswith(".device") else ""
            if tensor and tensor != receiver and tensor not in ("self", "cls") and tensor not in _CONFIG_NAMES:
                return tensor
        return None

    def guard_tests(self, site: CallSite) -> List[str]:
        """The ``if``/``elif`` lines that enclose ``site`` in its function, innermost first
        (read from the source text by indentation)."""
        a = self.a
        line = a.range(site.node).start.line
        fn = a.enclosing_function(site.scope)
        while fn is not None and isinstance(fn.node, cst.Lambda):  # a lambda's guards are its def's
            fn = a.enclosing_function(fn.scope.parent) if fn.scope.parent is not None else None
        top = a.first_line(fn.node) if fn is not None else 1
        return [text for _, text in self.outline.headers(line, top) if text.startswith(("if ", "elif "))]

    @cached_property
    def outline(self) -> Outline:
        return Outline(self.a.lines)

    def cuda_assured(self, site: CallSite) -> Optional[str]:
        """The guard that makes CUDA certainly available at ``site`` (its ``if`` line), or
        None: a test whose conjuncts include ``torch.cuda.is_available()``, directly or
        through a flag every assignment of which has it as a conjunct (``cuda = True if
        torch.cuda.is_available() else False``, ``args.cuda = not args.no_cuda and
        torch.cuda.is_available()``). There a CPU fallback is never taken."""
        for test in self.guard_tests(site):
            if test.startswith("if ") and self.assures(test[3:].rstrip().rstrip(":")):
                return test.rstrip().rstrip(":")
        return self.skipped_without_cuda(site)

    def skipped_without_cuda(self, site: CallSite) -> Optional[str]:
        """The decorator of a ``def`` or ``class`` around ``site`` that runs it only where
        CUDA is available (a CUDA-only test), as written up to its condition; or None:
        ``skipif``/``skipIf`` one of whose ``or`` terms is ``not <availability>`` or
        ``torch.cuda.device_count() < n`` (``== 0``), ``skipUnless(<availability>)``,
        or a helper named for it (Hugging Face's ``require_torch_gpu``, ``requires_cuda``)."""
        scope: Optional[Scope] = site.scope
        while scope is not None:
            if isinstance(scope.node, (cst.FunctionDef, cst.ClassDef)):
                for decorator in scope.node.decorators:
                    written = self._cuda_only(decorator.decorator)
                    if written is not None:
                        return written
            scope = scope.parent
        return None

    def _cuda_only(self, expr: cst.BaseExpression) -> Optional[str]:
        """``expr`` as written (condition kept, other arguments elided) when it is a skip
        decorator that skips where CUDA is not available (see ``skipped_without_cuda``)."""
        a = self.a
        func = expr.func if isinstance(expr, cst.Call) else expr
        last = dotted_name(func).rsplit(".", 1)[-1] if isinstance(func, (cst.Name, cst.Attribute)) else ""
        if _REQUIRES_CUDA.fullmatch(last):
            return "@" + a.code(expr)
        if not isinstance(expr, cst.Call) or last not in ("skipif", "skipIf", "skipUnless") or not expr.args:
            return None
        condition = next((arg.value for arg in expr.args if arg.keyword and arg.keyword.value == "condition"),
                         expr.args[0].value if expr.args[0].keyword is None else None)
        if condition is None:
            return None
        if last == "skipUnless":
            assured = self.assures(a.code(condition))
        else:
            assured = any(self._unavailable(a.code(t)) for t in _or_terms(condition))
        if not assured:
            return None
        more = ", ..." if len(expr.args) > 1 else ""
        return f"@{a.code(func)}({a.code(condition)}{more})"

    def _unavailable(self, term: str) -> bool:
        """Whether the test ``term`` holds wherever CUDA is not available: ``not
        <availability>``, or too few GPUs (``torch.cuda.device_count() < 2``, ``== 0``)."""
        term = " ".join(term.split())
        m = re.fullmatch(r"not\b\s*(.+)", term)  # (`not a and b` negates `a` alone)
        if m and not re.search(r"\b(?:and|or)\b", m.group(1)) and self.assures(m.group(1)):
            return True
        m = re.fullmatch(r"([A-Za-z_]\w*)\.cuda\.device_count\(\s*\)\s*(<|==|<=)\s*(\d+)", term)
        return bool(m) and m.group(1) == (self.a.torch_alias or "torch") and (
            int(m.group(3)) >= 1 if m.group(2) == "<" else int(m.group(3)) == 0)

    def flag_values(self, flag: str) -> Tuple[str, ...]:
        """The right-hand sides of every ``flag = ...`` line of the file (a name or
        ``args.name``), read once per flag."""
        if flag not in self._flags:
            self._flags[flag] = tuple(re.findall(
                rf"(?m)^[ \t]*{re.escape(flag)}[ \t]*=(?!=)[ \t]*([^#\n]+)", self.a.text))
        return self._flags[flag]

    def is_availability(self, expr: str, depth: int = 0) -> bool:
        """Whether ``expr`` is exactly CUDA's availability: ``torch.cuda.is_available()``,
        ``True if torch.cuda.is_available() else False``, or a flag every assignment of
        which is one of those."""
        expr = "".join(expr.split())
        m = re.fullmatch(r"Trueif(.+)elseFalse", expr) or re.fullmatch(r"bool\((.+)\)", expr)
        if m:
            expr = m.group(1)
        if expr == f"{self.a.torch_alias or 'torch'}.cuda.is_available()":
            return True
        if depth == 0 and re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?", expr):
            values = self.flag_values(expr)
            return bool(values) and all(self.is_availability(v, depth + 1) for v in values)
        return False

    def assures(self, expr: str, depth: int = 0) -> bool:
        """Whether the test ``expr`` is true only where CUDA is available (see
        ``cuda_assured``)."""
        expr = expr.strip()
        while expr.startswith("(") and expr.endswith(")"):
            expr = expr[1:-1].strip()
        if re.fullmatch(r"True\s+if\s+(.+?)\s+else\s+False", expr):
            expr = re.fullmatch(r"True\s+if\s+(.+?)\s+else\s+False", expr).group(1)  # type: ignore[union-attr]
        if re.search(r"\bor\b|\bif\b|\blambda\b", expr):
            return False
        for part in re.split(r"\band\b", expr):
            part = part.strip()
            if re.fullmatch(r"[A-Za-z_]\w*\.cuda\.is_available\(\s*\)", part):
                return part.split(".")[0] == (self.a.torch_alias or "torch")
            if depth == 0 and re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?", part):
                values = self.flag_values(part)
                if values and all(self.assures(v, depth + 1) for v in values):
                    return True
        return False

    def _receiver_is_input(self, site: CallSite) -> bool:
        """``.cuda()`` on a parameter itself (moving the input), on ``self.x``, or on a
        module: not a new tensor. Not a parameter that the function certainly bound again
        before the site to something that does not read it (fairseq's quantizers: ``if
        scale is None: scale, zero_point = obs.calculate_qparams()``, then
        ``scale.cuda()``: what the function made; ``x = x.contiguous()`` is still the input)."""
        a = self.a
        receiver = site.node.func.value  # type: ignore[union-attr]
        root = receiver
        while isinstance(root, (cst.Attribute, cst.Subscript, cst.Call)):
            if isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute) and \
                    isinstance(root.func.value, cst.Name) and root.func.value.value in ("self", "cls"):
                return False  # what a method of the object makes (`self.gaussian_blur(mask)`): a new tensor
            root = root.value if not isinstance(root, cst.Call) else root.func
        fn = a.enclosing_function(site.scope)
        if isinstance(root, cst.Name) and root.value in ("self", "cls"):
            return True
        if isinstance(root, cst.Name) and fn and root.value in fn.params:
            rebound = (binding_in_force(fn.scope.bindings.get(root.value, []), site)
                       if site.scope is fn.scope else None)
            if rebound is None or rebound.kind == "param":
                return True
            value = rebound.value if rebound.value is not None else (rebound.source or (None,))[0]
            return value is None or root.value in names_in(value)
        return a.torch_kind(receiver, site.scope) == "module"

    # ------------------------------------------------------------ the verdict
    def classify(self, site: CallSite) -> Verdict:
        """The one code a bare ``.cuda()`` gets (see the module docstring)."""
        why = self.bound(site)
        if why is not None:
            return Verdict(None, why)
        chosen = self._chosen(site)
        rank = self.per_rank(site)
        if rank is not None and not self._elsewhere(site, chosen):  # else TDL004: `.to(<the chosen device>)`
            return Verdict("TDL003", rank, rank=self.flow.local_rank_expr(site))
        if not self._receiver_is_input(site):
            p = self.input_device(site)
            if p is not None:
                return Verdict("TDL002", f"the input `{p}`", DeviceChoice(f"{p}.device", False, f"the input `{p}`"))
        tested = self.tested_tensor(site)  # if next(self.parameters()).is_cuda: x = x.cuda()
        if tested is not None and not self._sent_apart(site, tested):
            return Verdict("TDL002", f"`{tested}`", DeviceChoice(f"{tested}.device", False, f"`{tested}`"))
        if site.node in self._handed_to_current_device_ddp:  # (whatever device the code chose elsewhere)
            return Verdict(None, "the DDP wrapper it is handed to names it too: "
                                 "`device_ids=[torch.cuda.current_device()]`")
        if self._elsewhere(site, chosen):
            return Verdict("TDL004", chosen.why, chosen)  # type: ignore[union-attr]
        return Verdict("TDL001", "implicit current device", chosen)

    @cached_property
    def _handed_to_current_device_ddp(self) -> Set[cst.CSTNode]:
        """The ``.cuda()`` calls written as the module of a ``...DistributedDataParallel``
        wrapper (torch's, MMCV's ``MMDistributedDataParallel``) whose ``device_ids`` is
        ``[torch.cuda.current_device()]``: OpenMMLab 1.x's ``MMDistributedDataParallel(
        model.cuda(), device_ids=[torch.cuda.current_device()])``, or one arm of a
        conditional there (MMSelfSup's ``model if next(model.parameters()).is_cuda else
        model.cuda()``). The move and the wrapper name the same device, the current one, on
        purpose; whether each rank bound its own is the binding's question (TDL106,
        TDL003), not this line's."""
        a = self.a
        found: Set[cst.CSTNode] = set()
        for wrap in a.calls:
            name = wrap.qualname or dotted_name(wrap.node.func)
            module, ids = wrap.positional(0) or wrap.keyword("module"), wrap.keyword("device_ids")
            if (not name.rsplit(".", 1)[-1].endswith("DistributedDataParallel") or module is None or ids is None
                    or not isinstance(ids.value, cst.List) or len(ids.value.elements) != 1):
                continue
            arms = ([module.value.body, module.value.orelse] if isinstance(module.value, cst.IfExp)
                    else [module.value])
            moves = [arm for arm in arms if isinstance(arm, cst.Call) and is_bare_cuda(arm)]
            only = ids.value.elements[0].value
            if moves and isinstance(only, cst.Call) and not only.args and \
                    a.qualname(only.func, wrap.scope) == "torch.cuda.current_device":
                found.update(moves)
        return found

    def _sent_apart(self, site: CallSite, tensor: str) -> bool:
        """Whether a collective later in the function sends what the ``.cuda()`` at ``site``
        makes (the names its statement binds it to), and none of its collectives sends
        ``tensor``'s own data where it lies (``tensor`` itself, or a name last bound to a
        value read from it without a move). Megatron's ``local_len =
        torch.tensor([seqlens.shape[0]]).cuda()`` then ``all_gather(counts, local_len)``,
        Bagua's SyncBatchNorm statistics: such a tensor goes where the process group's
        communicator is (NCCL's: the current device), and the input may be on the CPU; an
        implicit device (TDL001), not TDL002's mix. Where the input's data is sent too
        (data2vec's ``zs = y.sum(0)`` beside ``zc``), the code's own collectives put the
        communicator on the input's device, and ``.to(y.device)`` is the device meant."""
        a = self.a
        line = site.line
        made: Set[str] = set()
        for small in line.body if line is not None else ():
            if not isinstance(small, cst.Assign):
                continue
            for target in small.targets:
                t, v = target.target, small.value
                if isinstance(t, (cst.Tuple, cst.List)) and isinstance(v, (cst.Tuple, cst.List)) \
                        and len(t.elements) == len(v.elements):  # `a, b = x.cuda(), y.cuda()`: its own
                    pairs = [(te.value, ve.value) for te, ve in zip(t.elements, v.elements)]
                else:
                    pairs = [(t, v)]
                made.update(te.value for te, ve in pairs if isinstance(te, cst.Name) and _holds(ve, site.node))
        if not made:
            return False
        fn = a.enclosing_function(site.scope)
        sent = [(other, n) for other in a.calls
                if other.order > site.order and a.enclosing_function(other.scope) is fn and (
                    called_name(other.node.func) in N.COLLECTIVE_NAMES
                    or N.canonical(other.qualname or "") in N.COLLECTIVES)
                for arg in other.node.args for n in names_in(arg.value)]
        if not made & {n for _, n in sent}:
            return False
        roots = set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", tensor)) - {"next", "self"}
        scope = fn.scope if fn is not None else a.module_scope
        for other, n in sent:
            if n in made:
                continue  # the new tensor itself, however it is sized
            if n in roots:
                return False
            earlier = [b for b in scope.bindings.get(n, ()) if b.order < other.order]
            value = earlier[-1].value if earlier and earlier[-1].kind == "assign" else None
            if value is not None and roots & set(names_in(value)) and not re.search(
                    r"\.(?:cuda|to)\(", a.code(value)):
                return False
        return True

    def _chosen(self, site: CallSite) -> Optional[DeviceChoice]:
        """The device the code chose before ``site``; exact under the test it was chosen on,
        and none in the branch that chooses the current device after ``site``."""
        chosen = self.chosen_device(site)
        if chosen is not None and not chosen.exact and chosen.exact_if and self._guarded_by(site, chosen.exact_if):
            chosen = DeviceChoice(chosen.code, True, chosen.why)  # `if cuda:` under `device = ... if cuda`
        if chosen is not None and not chosen.exact:
            here = self._chosen_in_branch(site, chosen.code)
            if here is not None:  # the branch's own choice is the current device: exact once made
                chosen = DeviceChoice(chosen.code, True, chosen.why) if here < site.order else None
        return chosen

    def _chosen_in_branch(self, site: CallSite, code: str) -> Optional[int]:
        """Where (its order) an ``if`` arm around ``site`` binds the chosen device ``code``
        (a name of the site's function, or ``self.<attr>`` in its method) to exactly the
        current device: mmgen's metrics, ``self.device = "cpu"`` then ``if
        torch.cuda.is_available():`` ``self.inception_net = self.inception_net.cuda()``
        ``self.device = "cuda"``. In that arm ``.cuda()`` is the code's own choice, not a
        bypass of it; before the binding the name still holds the other device."""
        a = self.a
        found: List[Tuple[object, Tuple[Tuple[int, str], ...], int, Scope]] = []
        if code.startswith("self."):
            klass = a.enclosing_class(site.scope)
            method = a.enclosing_method(site.scope)
            if klass is None or method is None or a.enclosing_function(site.scope) is not method:
                return None
            found = [(v, klass.self_attr_conds.get((code[5:], o), ()), o, method.scope)
                     for v, m, o in klass.self_attr_sets.get(code[5:], ()) if m == method.name]
        else:
            owner, imported = a.lookup(code, site.scope)
            if owner is None or imported is not None or owner is not (_function_scope(site.scope) or a.module_scope):
                return None
            found = [(b.value, b.cond, b.order, owner) for b in owner.bindings.get(code, ()) if b.value is not None]
        for value, cond, order, scope in found:
            if cond and cond[-1][1] in ("body", "orelse") and site.cond[:len(cond)] == cond \
                    and self.is_exact_current(value, scope):  # type: ignore[arg-type]
                return order
        return None

    def _elsewhere(self, site: CallSite, chosen: Optional[DeviceChoice]) -> bool:
        """Whether ``.cuda()`` at ``site`` may go elsewhere than the chosen device (TDL004's)."""
        return chosen is not None and not chosen.exact and not self._guarded_cuda(site, chosen.code)

    @cached_property
    def fixed_placements(self) -> List[Tuple[CallSite, cst.CSTNode, str]]:
        """Per-rank placements on a rank-independent device before any binding (TDL003's).
        Not an index-less device object bound to a name (``device = torch.device("cuda" if
        torch.cuda.is_available() else "cpu")``) in a file that binds the rank's device:
        it resolves to the current device where it is used, after that binding."""
        return [(site, node, code) for site, node, code in self.gpu_placements
                if self.per_rank(site) is not None and self.bound(site) is None
                and not (self._rank_bindings and self._names_current_device(site))]

    def _names_current_device(self, site: CallSite) -> bool:
        """``name = torch.device("cuda")`` or ``name = torch.device("cuda" if ... else
        ...)``: a definition of the current device, not a placement."""
        line = site.line
        stmt = line.body[0] if line is not None and len(line.body) == 1 else None
        return (site.qualname == "torch.device" and isinstance(stmt, cst.Assign) and stmt.value is site.node
                and all(isinstance(t.target, cst.Name) for t in stmt.targets)
                and (self.is_exact_current(site.node, site.scope)
                     or self._exact_if([site.node], site.scope) is not None))

    @cached_property
    def gpu_placements(self) -> List[Tuple[CallSite, cst.CSTNode, str]]:
        """Placements on a GPU that literals name, other than a bare ``.cuda()``:
        ``.cuda(0)``, ``.to("cuda")``, ``device="cuda:0"``, ``torch.device("cuda")``,
        ``torch.device("cuda", 1)``, a GPU's ordinal as a device (``device=0``; not a
        ``torch.cuda`` query's) (site, the node to replace, its code)."""
        a = self.a
        out: List[Tuple[CallSite, cst.CSTNode, str]] = []
        for site in a.calls:
            q = site.qualname
            if q in N.SET_DEVICE or q in N.DEVICE_CONTEXTS or is_bare_cuda(site.node):
                continue  # bindings are TDL101's; bare .cuda() has its verdict
            found: List[cst.CSTNode] = []
            if site.method == "cuda" and q is None:
                arg = site.positional(0) or site.keyword("device")
                if arg is not None and isinstance(arg.value, cst.Integer):
                    found.append(site.node)
            elif q == "torch.device":
                first = site.positional(0)
                second = site.positional(1) or site.keyword("index")
                if first is not None and _fixed_cuda(first.value) and (
                        second is None or isinstance(second.value, cst.Integer)) and not compared(site):
                    found.append(site.node)
                elif first is not None and second is None and isinstance(first.value, cst.IfExp):
                    found += _fixed_cuda_strings(first.value)
            else:
                for value in site.device_arguments():
                    found += _fixed_cuda_strings(value)
                    device = site.keyword("device")
                    if isinstance(value, cst.Integer) and device is not None and value is device.value \
                            and takes_gpu_ordinal(q) and (q is not None or a.torch_imports):
                        # (a method's or this file's function's, in a file that imports torch:
                        # not a Chainer trainer's `device=0`)
                        found.append(value)  # torch.zeros(n, device=0): cuda:0
            for node in found:
                out.append((site, node, f"device={a.code(node)}" if isinstance(node, cst.Integer) else a.code(node)))
        return out

    def _guarded_cuda(self, site: CallSite, device: str, equal: bool = False) -> bool:
        """Under ``if device == "cuda":`` (or ``device.type == "cuda"``, ``"cuda" in
        str(device)``, one of the test's ``and`` conjuncts) a bare ``.cuda()`` is what the
        chosen device says. ``equal``: under ``device == "cuda"`` itself, where
        ``.to(device)`` is exactly ``.cuda()`` (not ``cuda:1``)."""
        device = "".join(device.split())
        for header in self.guard_tests(site):
            conjuncts = _conjuncts(header.split(None, 1)[1].rstrip().rstrip(":").strip())
            if conjuncts is not None and any(cuda_tested(c) == device and (not equal or _equals_cuda(c, device))
                                             for c in conjuncts):
                return True
        return False

    def _guarded_by(self, site: CallSite, test: str) -> bool:
        """Under ``if test:``: every ``and`` conjunct of ``test`` is one of the guard's
        (neither has an ``or``)."""
        wanted = _conjuncts(test)
        for header in self.guard_tests(site):
            if wanted and header.startswith("if "):
                have = _conjuncts(header[3:].rstrip().rstrip(":").strip())
                if have is not None and set(wanted) <= set(have):
                    return True
        return False

    @cached_property
    def verdicts(self) -> Dict[cst.Call, Verdict]:
        """Every bare ``.cuda()`` outside a device block that TDL201 does not claim, nor
        TDL009 (a move whose result is dropped: it places nothing)."""
        a = self.a
        claimed = a.data_parallel_moves | set(a.discarded_moves)
        return {s.node: self.classify(s) for s in a.calls
                if is_bare_cuda(s.node) and s.node not in claimed and not self._other_framework(s)}

    def _other_framework(self, site: CallSite) -> bool:
        """Another framework's ``cuda``, reached through its module (TVM's
        ``tvm.target.cuda()``, a compilation target): no torch device at all."""
        q = site.qualname
        return q is not None and q.split(".")[0] in N.OTHER_FRAMEWORKS

    def sites(self, code: str) -> List[Tuple[CallSite, Verdict]]:
        return [(self.a.site_of[node], v) for node, v in self.verdicts.items() if v.code == code]

    @cached_property
    def legacy_types(self) -> List[Tuple[CallSite, str, str]]:
        """Every allocation or conversion by a legacy CUDA type (TDL005): (site, "call" for
        ``torch.cuda.FloatTensor(...)``, "type" for ``x.type(torch.cuda.FloatTensor)``, or
        "default" for ``torch.set_default_tensor_type(torch.cuda.FloatTensor)``, dtype); a
        type may be named by its string (``"torch.cuda.FloatTensor"``) in the last two, and
        the default chosen on a flag between the CUDA type and its CPU twin
        (``torch.cuda.FloatTensor if args.cuda else torch.FloatTensor``)."""
        found: List[Tuple[CallSite, str, str]] = []
        for site in self.a.calls:
            if site.qualname in N.LEGACY_CUDA_TYPES:
                found.append((site, "call", N.LEGACY_CUDA_TYPES[site.qualname]))
                continue
            only = site.node.args[0] if len(site.node.args) == 1 else None
            if only is None or only.keyword is not None or only.star:
                continue
            value = only.value
            if isinstance(value, cst.IfExp) and site.qualname == "torch.set_default_tensor_type":
                sides = {self.type_named(value.body, site), self.type_named(value.orelse, site)}
                cuda = sides & set(N.LEGACY_CUDA_TYPES)
                if len(cuda) == 1 and {n.replace("torch.cuda.", "torch.") for n in cuda} | cuda == sides:
                    found.append((site, "default", N.LEGACY_CUDA_TYPES[cuda.pop()]))
                continue
            named = self.type_named(value, site)
            if named not in N.LEGACY_CUDA_TYPES:
                continue
            if site.method == "type":
                found.append((site, "type", N.LEGACY_CUDA_TYPES[named]))
            elif site.qualname == "torch.set_default_tensor_type":
                found.append((site, "default", N.LEGACY_CUDA_TYPES[named]))
        return found

    def type_named(self, value: cst.BaseExpression, site: CallSite) -> Optional[str]:
        """The tensor type ``value`` names: by its string or its qualified name."""
        text = value.evaluated_value if isinstance(value, cst.SimpleString) else self.a.qualname(value, site.scope)
        return text if isinstance(text, str) else None

    @cached_property
    def all_assured(self) -> bool:
        """Whether every implicit placement a device definition may serve (a TDL001
        ``.cuda()``, a legacy CUDA type) sits under a guard that makes CUDA certain: then a
        definition with a CPU fallback is itself behaviour-preserving, and ``fix`` uses it;
        otherwise ``fix`` defines the exact ``torch.device("cuda")`` (see ``Context.exact_definition``)."""
        sites = [s for s, _ in self.sites("TDL001")] + [s for s, _, _ in self.legacy_types]
        return bool(sites) and all(self.cuda_assured(s) for s in sites)


def _fixed_cuda(expr: cst.BaseExpression) -> bool:
    """``"cuda"`` or ``"cuda:<int>"``: a device that does not depend on the rank."""
    if not isinstance(expr, cst.SimpleString):
        return False
    value = expr.evaluated_value
    return isinstance(value, str) and (value == "cuda" or re.fullmatch(r"cuda:\d+", value) is not None)


def _fixed_cuda_strings(expr: cst.BaseExpression) -> List[cst.CSTNode]:
    if _fixed_cuda(expr):
        return [expr]
    if isinstance(expr, cst.IfExp):  # "cuda" if torch.cuda.is_available() else "cpu"
        return _fixed_cuda_strings(expr.body) + _fixed_cuda_strings(expr.orelse)
    return []


def takes_gpu_ordinal(qualname: Optional[str]) -> bool:
    """Whether an integer ``device=`` of a call to ``qualname`` is a GPU's ordinal: a call
    of this file's own functions or a method (None), torch's (not a ``torch.cuda`` query,
    TDL008's call) or Hugging Face's (``pipeline(task, device=0)``); not another package's
    device index (``sounddevice.play(x, device=0)`` is an audio device)."""
    if qualname is None:
        return True
    head = qualname.split(".")[0]
    return (head == "torch" and not qualname.startswith("torch.cuda.")) or head == "transformers"


# a torch factory call: what makes a new tensor (sized by the caller)
_NEW_TENSOR = frozenset(f"torch.{name}" for name in (
    "ones", "zeros", "empty", "full", "rand", "randn", "randint", "arange", "linspace", "eye", "tensor",
    "Tensor", *N.DTYPES))  # (and the legacy CPU constructors: pix2pixHD's `torch.ByteTensor(t.size())`)


# the spellings of a test that finds a device on a GPU (group 1: the device), and of one
# that finds a tensor there (`x.is_cuda`: group 1 the tensor)
_CUDA_DEVICE_TESTS = tuple(re.compile(p) for p in (
    r"""(.+?)(?:\.type)?\s*==\s*['"]cuda['"]""", r"""['"]cuda['"]\s*==\s*(.+?)(?:\.type)?""",
    r"""['"]cuda['"]\s+in\s+str\(\s*(.+?)\s*\)""", r"""['"]cuda['"]\s+in\s+(.+?)(?:\.type)?"""))
_CUDA_TENSOR_TEST = re.compile(r"\(?\s*(.+?)\.is_cuda\s*\)?")


def _equals_cuda(conjunct: str, device: str) -> bool:
    """Whether the conjunct is ``device == "cuda"`` (either way round): the device is
    the string ``"cuda"``, and ``.to(device)`` is exactly ``.cuda()``."""
    flat = "".join(conjunct.split())
    return any(flat == form.format(device, q) for form in ("{0}=={1}cuda{1}", "{1}cuda{1}=={0}") for q in "'\"")


def cuda_tested(conjunct: str) -> Optional[str]:
    """What a test's conjunct finds on a GPU, as code without whitespace: the device of
    ``d == "cuda"``, ``d.type == "cuda"``, ``"cuda" in d``, ``"cuda" in str(d)``, ``"cuda"
    in d.type``; for ``t.is_cuda``, the tensor's, ``t.device``. None for any other test."""
    m = _CUDA_TENSOR_TEST.fullmatch(conjunct)
    if m:
        return "".join(m.group(1).split()) + ".device"
    m = next(filter(None, (p.fullmatch(conjunct) for p in _CUDA_DEVICE_TESTS)), None)
    return "".join(m.group(1).split()) if m else None


def _numpy_array(body: str, param: str) -> bool:
    """Whether the code reads ``param`` as a NumPy array: its ``.size`` as a number, not a
    call (``mycount = input_array.size``, MMSelfSup's ``gather_tensors``), or
    ``.astype(...)``. Its shape sizes a new tensor, but it has no device to follow."""
    return re.search(rf"(?<![\w.]){re.escape(param)}\.(?:size\b(?!\s*\()|astype\()", body) is not None


def _or_terms(expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The terms of ``a or b or c`` (``expr`` itself when it is no ``or``)."""
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        return _or_terms(expr.left) + _or_terms(expr.right)
    return [expr]


def _dimensions_of(body: str, tensor: str) -> Set[str]:
    """The names a function binds to ``tensor``'s dimensions: ``dim_k, dim_b = q.shape``,
    ``n = x.size(0)``, ``b, c = x.shape[:2]``, ``h = x.shape[2]``; or to a number read
    from it (``max_len = torch.max(lengths).item()``, Tacotron's mask of lengths)."""
    found: Set[str] = set()
    for m in re.finditer(rf"(?m)^[ \t]*([\w \t,()]+?)[ \t]*=[ \t]*{re.escape(tensor)}\.(?:shape\b|size\()", body):
        found.update(n for n in re.split(r"[\s,()]+", m.group(1)) if n)
    found.update(re.findall(rf"(?m)^[ \t]*(\w+)[ \t]*=[^=\n#][^\n#]*(?<![\w.]){re.escape(tensor)}\b[^\n#]*"
                            r"\.item\(\)[ \t]*(?:#.*)?$", body))
    return found


# what a name bound to holds no device of its own
_COLLECTIONS = (cst.List, cst.Tuple, cst.Set, cst.Dict, cst.ListComp, cst.SetComp, cst.DictComp)


def _moves(site: CallSite, name: str) -> bool:
    """Whether the call at ``site`` is a method of ``name`` itself or of what it reaches
    (``x.cuda()``, ``x.float().cuda()``, ``x[0].data.type(...)``)."""
    expr = site.node.func.value if isinstance(site.node.func, cst.Attribute) else None
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        if isinstance(expr, cst.Call):
            if not isinstance(expr.func, cst.Attribute):
                return False  # a plain function's result (`zeros(n).cuda()`): a new tensor
            expr = expr.func
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value == name


def _annotated_tensor(fn: FunctionInfo, name: str) -> bool:
    ann = param_annotation(fn.node, name)
    return (ann.attr.value if isinstance(ann, cst.Attribute) else getattr(ann, "value", "")) == "Tensor"


def _annotated_other(fn: FunctionInfo, name: str) -> bool:
    """Whether the parameter is annotated with a type that holds no tensor (``cp_group:
    ProcessGroup``, whose ``.size()`` is its number of ranks; ``n: int``)."""
    ann = param_annotation(fn.node, name)
    return ann is not None and "Tensor" not in _NO_MODULE.code_for_node(ann)


_NO_MODULE = cst.Module([])  # renders a node alone (an annotation) as code


def one_process_group(site: CallSite) -> bool:
    """An ``init_process_group(...)`` that makes no group of several processes:
    ``world_size=1`` (lightweight-gan's group for SyncBatchNorm on one GPU), or the
    ``"fake"`` backend (torch's FakeProcessGroup: one process posing as a rank of many to
    trace or compile, as torchtitan's single-process precompile does)."""
    size = site.keyword("world_size")
    if size is not None and isinstance(size.value, cst.Integer) and size.value.evaluated_value == 1:
        return True
    backend = site.keyword("backend") or site.positional(0)
    return (backend is not None and isinstance(backend.value, cst.SimpleString)
            and backend.value.evaluated_value == "fake")


def _cpu_only(code: str) -> bool:
    return "cpu" in code and "cuda" not in code


def _has_module_loop(body) -> bool:
    """Whether a ``for`` or ``while`` loop runs at import (``_module_level``)."""
    return any(isinstance(stmt, (cst.For, cst.While)) for stmt in _module_level(body))


def _module_level_statements(body) -> List[cst.SimpleStatementLine]:
    """The simple statement lines that run at import (``_module_level``)."""
    return [stmt for stmt in _module_level(body) if isinstance(stmt, cst.SimpleStatementLine)]


def _module_level(body) -> Iterator[cst.CSTNode]:
    """The statements that run at import, in order: the module's own, and those in its
    top-level ``if``/``try``/``with``/``for``/``while`` blocks (not in defs or classes)."""
    for stmt in body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        yield stmt
        if isinstance(stmt, cst.BaseCompoundStatement):
            for child in stmt.children:
                if isinstance(child, cst.BaseSuite):
                    yield from _module_level(getattr(child, "body", ()))
                elif isinstance(child, cst.If):
                    yield from _module_level([child])
                elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally)):
                    yield from _module_level(getattr(child.body, "body", ()))


def _holds(expr: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether ``node`` is ``expr`` or inside it."""
    found: List[bool] = []

    class Find(cst.CSTVisitor):
        def on_visit(self, visited: cst.CSTNode) -> bool:
            if visited is node:
                found.append(True)
            return not found

    walk(expr, Find())
    return bool(found)


def _contains(a: Analysis, top: cst.CSTNode, node: object) -> bool:
    fn = a.functions.get(node)  # type: ignore[arg-type]
    if fn is None:
        return False
    return a.inside(fn.scope, top)


def _next_order(a: Analysis, stmt: cst.CSTNode) -> int:
    body = list(a.module.body)
    i = body.index(stmt)
    return a.order[body[i + 1]] if i + 1 < len(body) else 1 << 60

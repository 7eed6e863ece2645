"""Receivers: whether an expression is provably a torch tensor or module, and the values a
name is bound to."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from ..names import DTYPE_NAMES, is_module_constructor
from ..project import outside_program
from .facts import (  # noqa: F401
    CallSite,
    Scope,
    binding_in_force,
    called_name,
    is_none,
)


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
_ELEMENTWISE_COMPARISONS = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual,
                            cst.Equal, cst.NotEqual)
_FACTORY_PREFIXES = ("torch.nn.functional.", "torch.fft.", "torch.linalg.", "torch.special.")
_TENSOR_CLASSES = frozenset(
    {"torch.Tensor", "torch.tensor", "torch.FloatTensor", "torch.LongTensor",
     "torch.DoubleTensor", "torch.HalfTensor", "torch.IntTensor", "torch.ByteTensor",
     "torch.BoolTensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter",
     "torch.autograd.Variable", "torch.autograd.variable.Variable"}
)
# torch's own loaders: without a `collate_fn` each batch is made by `default_collate`,
# which gives tensors (and lists, dicts, tuples, strings of them) and refuses anything else
_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_LOADER_HOOKS = frozenset({"collate_fn", "batch_size"})  # (`batch_size=None` turns collation off)
# progress bars that hand on the items of what they wrap
_PASS_THROUGH = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm"})
UNPROVEN_RECEIVER = "the receiver may not be a torch tensor or module"  # a fix's reason
_CYCLE = "<cycle>"  # a name whose value depends on itself, while it is being typed
# the tensor methods that return the tensor on another device, leaving the receiver where it is
# (not `.cpu()`, nor `.to("cpu")`: dropped, a copy to the host is the idiom that waits for the
# GPU, `y.data.cpu()  # synchronize` in timing code)
MOVES = ("cuda", "to")


def _names_cpu(expr: cst.BaseExpression) -> bool:
    """``"cpu"`` or ``torch.device("cpu")`` (any call of ``device`` given the string)."""
    if isinstance(expr, cst.Call) and expr.args and called_name(expr.func) == "device":
        expr = expr.args[0].value
    return isinstance(expr, cst.SimpleString) and expr.evaluated_value == "cpu"


def _is_dtype(expr: cst.BaseExpression) -> bool:
    """``torch.float16`` and the other dtypes, as an attribute of ``torch`` (or an alias)."""
    return isinstance(expr, cst.Attribute) and expr.attr.value in DTYPE_NAMES and isinstance(expr.value, cst.Name)


def held_root(expr: cst.BaseExpression) -> Optional[cst.Name]:
    """The name a receiver that outlives its statement is reached from: a name, or an
    attribute or item chain on one (``x``, ``self.mean``, ``batch[i]``); None for what a
    call or an operator makes (``torch.zeros(1)``: a temporary)."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr if isinstance(expr, cst.Name) else None


def _kind_of_torch_callable(q: str) -> Optional[str]:
    if q in _TENSOR_CLASSES:
        return "tensor"
    if is_module_constructor(q):
        return "module"
    if q.startswith(_FACTORY_PREFIXES):
        return "tensor"
    parts = q.split(".")
    if len(parts) == 2 and parts[0] == "torch" and parts[1][:1].islower() and parts[1] not in _NOT_TENSOR_FUNCS:
        return "tensor"
    return None


def _is_number(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float))


def _keeps_collation(option: str, value: cst.BaseExpression) -> bool:
    """Whether a DataLoader option leaves `default_collate` at work: any but a
    `collate_fn` (unless None) or a `batch_size` of None (no collation at all)."""
    return option not in _LOADER_HOOKS or (option == "collate_fn") == is_none(value)


def _plain_options(value: cst.BaseExpression) -> bool:
    """A dict of a DataLoader's options, written out, that leaves collation as it is
    (either of a conditional's two)."""
    if isinstance(value, cst.IfExp):
        return _plain_options(value.body) and _plain_options(value.orelse)
    return isinstance(value, cst.Dict) and all(
        isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
        and _keeps_collation(str(el.key.evaluated_value), el.value) for el in value.elements)


class ReceiversMixin:
    project_asked: bool = False  # see torch_kind
    # every question put to the index (or that would have been, with none): see
    # ``ProjectIndex.module_kind``
    project_questions: Set[Tuple]
    # ------------------------------------------------------------- value typing
    def torch_kind(self, expr: cst.BaseExpression, scope: Scope, _depth: int = 0,
                   use_project: bool = False) -> Optional[str]:
        """'tensor' or 'module' when ``expr`` is provably one, else None. With
        ``use_project``, classes of the run's other files count too (fix applicability
        only: what is found never depends on other files), and ``project_asked`` is set
        when the answer turned on a name the run's files may define (one the index can
        tell; not torch's, numpy's, the standard library's)."""
        if _depth > 12:
            return None
        if isinstance(expr, cst.Call):
            func = expr.func
            q = self.qualname(func, scope)
            if q is not None:
                kind = _kind_of_torch_callable(q)
                if kind is None and use_project:
                    self.project_asked |= not outside_program(q)
                    kind = self._ask(("lookup", q))
                return kind
            klass = self.local_class(func, scope)
            if klass is not None:
                return "module" if self.is_module_class(klass) else None
            fn = self.local_function(func, scope)
            if fn is not None:  # a helper of this file: what every one of its returns is
                return self._kind_of_returns(fn, _depth, use_project)
            if use_project and isinstance(func, cst.Name) and self.star_imports:
                owner, _ = self.lookup(func.value, scope)
                if owner is None:
                    self.project_asked = True
                    kind = self._ask(("star", tuple(self.star_imports), func.value))
                    if self.project is not None:
                        return kind
            if isinstance(func, cst.Attribute):
                inner = self.torch_kind(func.value, scope, _depth + 1, use_project)
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
                return self._kind_of_name(expr.value, scope, _depth, use_project)
            finally:
                self._typing.discard(key)
        if isinstance(expr, cst.Subscript):  # `self.h[i:j]`, `torch.max(x, 1)[1]`: a tensor's part is one
            kind = self.torch_kind(expr.value, scope, _depth + 1, use_project)
            return kind if kind in ("tensor", _CYCLE) else None
        if isinstance(expr, cst.BinaryOperation):  # `torch.ones(n) * (1 - t)`: the tensor's own operator
            # (after a number, `2 * (x / m) - 1`, the right operand's: the number's gives way)
            operand = expr.right if _is_number(expr.left) else expr.left
            kind = self.torch_kind(operand, scope, _depth + 1, use_project)
            return kind if kind in ("tensor", _CYCLE) else None
        if (isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1
                and isinstance(expr.comparisons[0].operator, _ELEMENTWISE_COMPARISONS)):
            # `label > 0.8`: a tensor of booleans (one operator: a chain would ask for a bool)
            kind = self.torch_kind(expr.left, scope, _depth + 1, use_project)
            return kind if kind in ("tensor", _CYCLE) else None
        if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
            kind = self.torch_kind(expr.expression, scope, _depth + 1, use_project)
            return kind if kind in ("tensor", _CYCLE) else None
        if (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)
                and expr.value.value == "self"):
            klass = self.enclosing_class(scope)
            values = self._self_attr_values(klass, expr.attr.value) if klass is not None else None
            # `self.new_cls = None` in `__init__` holds the place: where a method is called
            # on the attribute, it holds one of the other values (on None the call fails alike)
            values = [(v, s) for v, s in values or () if not is_none(v)]
            if values:
                key = (f"self.{expr.attr.value}", id(klass.node))  # type: ignore[union-attr]
                if key in self._typing:
                    return _CYCLE  # self.h = self.h.cuda(): the other assignments decide
                self._typing.add(key)
                try:
                    return self._kind_of_bindings(values, _depth, use_project)
                finally:
                    self._typing.discard(key)
        return None

    def kind_at(self, expr: cst.BaseExpression, site: CallSite) -> Optional[str]:
        """``torch_kind`` of ``expr`` at ``site``: a name of the site's own scope through
        the binding in force there (fairseq's ``centroids``, a tensor of unknown origin
        rebound to ``torch.rand(...)`` under the ``if`` that then moves it), else every
        binding's kind, as ``torch_kind``."""
        if isinstance(expr, cst.Name):
            owner, imported = self.lookup(expr.value, site.scope)  # type: ignore[attr-defined]
            if owner is site.scope and imported is None:
                held = binding_in_force(owner.bindings.get(expr.value, []), site)
                if held is not None and held.kind in ("assign", "walrus") and held.value is not None:
                    kind = self.torch_kind(held.value, owner)
                    return kind if kind != _CYCLE else None
        return self.torch_kind(expr, site.scope)

    @cached_property
    def discarded_moves(self) -> Dict[cst.Call, cst.BaseExpression]:
        """Every ``.cuda()`` or ``.to(<device>)`` (not to the CPU: a drop there waits for
        the GPU; not a dtype alone) that is a whole expression statement on a tensor that
        outlives it (a name, or an attribute or item chain on one), provably a tensor at
        that point: the method returns a moved copy, and the statement drops it (a module
        moves itself; a temporary is nobody's). Call -> its receiver (TDL009's)."""
        found: Dict[cst.Call, cst.BaseExpression] = {}
        for site in self.calls:  # type: ignore[attr-defined]
            if site.expr_stmt is None or site.method not in MOVES:
                continue
            target = site.positional(0) or site.keyword("device")
            if site.method == "to" and (target is None or _names_cpu(target.value) or _is_dtype(target.value)):
                continue  # to the host, or a dtype only (`x.to(torch.float16)`, `x.to(dtype=d)`): no move
            receiver = site.node.func.value  # type: ignore[attr-defined]
            if held_root(receiver) is not None and self.kind_at(receiver, site) == "tensor":
                found[site.node] = receiver
        return found

    def _kind_of_name(self, name: str, scope: Scope, depth: int, use_project: bool) -> Optional[str]:
        """What every binding of ``name`` seen from ``scope`` gives: an assignment's value,
        a loop target's part of the items it iterates (None when any is unknown)."""
        owner, imported = self.lookup(name, scope)
        if owner is None or imported is not None:
            return None
        kinds = set()
        for b in owner.bindings[name]:
            if b.kind in ("assign", "walrus") and b.value is not None:
                kinds.add(self.torch_kind(b.value, owner, depth + 1, use_project))
            elif b.kind == "for" and b.source is not None:
                kinds.add(self._kind_of_items(b.source[0], b.source[1], owner, depth + 1, use_project))
            else:
                return None
        kinds.discard(_CYCLE)
        return kinds.pop() if len(kinds) == 1 else None

    def _kind_of_items(self, iterable: cst.BaseExpression, path: Tuple[int, ...], scope: Scope, depth: int,
                       use_project: bool) -> Optional[str]:
        """The kind of the part at ``path`` of each item that iterating ``iterable`` gives
        (``for i, (x, y) in enumerate(loader)``: y is at (1, 1)): 'tensor' for a tensor's
        rows and a literal or comprehension of tensors, and for any part of a batch of
        torch's ``DataLoader`` that collates by default (what has ``.cuda()`` there is a
        tensor); through ``enumerate``, ``zip`` and tqdm's bars."""
        if depth > 12:
            return None
        if isinstance(iterable, cst.Call):
            func, args = iterable.func, iterable.args
            positional = [a.value for a in args if a.keyword is None and not a.star]
            builtin = (func.value if isinstance(func, cst.Name) and self.lookup(func.value, scope)[0] is None
                       else None)
            if builtin in ("enumerate", "zip") and len(positional) == len(args) and positional and path:
                if builtin == "enumerate":  # (index, item)
                    return (self._kind_of_items(positional[0], path[1:], scope, depth + 1, use_project)
                            if path[0] == 1 and len(positional) <= 2 else None)
                return (self._kind_of_items(positional[path[0]], path[1:], scope, depth + 1, use_project)
                        if path[0] < len(positional) else None)
            q = self.qualname(func, scope)
            if q in _PASS_THROUGH and positional and args[0].keyword is None:
                return self._kind_of_items(positional[0], path, scope, depth + 1, use_project)
            if q in _LOADERS:
                return "tensor" if self._collates_by_default(iterable, scope) else None
        if isinstance(iterable, (cst.List, cst.Tuple)) and not path and iterable.elements:
            if any(isinstance(e, cst.StarredElement) for e in iterable.elements):
                return None
            return self._kind_of_bindings([(e.value, scope) for e in iterable.elements], depth, use_project)
        if isinstance(iterable, (cst.ListComp, cst.GeneratorExp)) and not path and iterable in self.comprehensions:
            kind = self.torch_kind(iterable.elt, self.comprehensions[iterable], depth + 1, use_project)
            return kind if kind in ("tensor", "module") else None
        if isinstance(iterable, (cst.Name, cst.Attribute)):
            if self.torch_kind(iterable, scope, depth + 1, use_project) == "tensor":
                return "tensor"  # a tensor's rows, and their parts
            values = self.held_values(iterable, scope)
            if values:
                kinds = {self._kind_of_items(v, path, s, depth + 1, use_project) for v, s in values}
                return kinds.pop() if len(kinds) == 1 else None
            return None
        return "tensor" if self.torch_kind(iterable, scope, depth + 1, use_project) == "tensor" else None

    def _collates_by_default(self, call: cst.Call, scope: Scope) -> bool:
        """Whether a ``DataLoader(...)`` makes its batches with ``default_collate``: no
        ``collate_fn`` (nor more than the dataset and batch size by position), and a
        batch size that is not None; options unpacked from a dict (``**kwargs``, the
        PyTorch examples' ``{'num_workers': 1, 'pin_memory': True} if args.cuda else {}``)
        only where every dict it holds is written out and never changed."""
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) > 2 or (len(positional) == 2 and is_none(positional[1].value)):
            return False
        for arg in call.args:
            if arg.star == "*":
                return False
            if arg.star == "**":
                values = self.held_values(arg.value, scope)
                if values is None or not isinstance(arg.value, cst.Name) or not all(
                        _plain_options(v) for v, _ in values) or re.search(
                        rf"(?<![\w.]){re.escape(arg.value.value)}\s*(?:\[|\.\s*(?:update|setdefault)\b)", self.text):
                    return False
            elif arg.keyword is not None and not _keeps_collation(arg.keyword.value, arg.value):
                return False
        return True

    def _kind_of_returns(self, fn, depth: int, use_project: bool) -> Optional[str]:
        node = fn.node
        if fn.generator or (isinstance(node, cst.FunctionDef) and node.asynchronous is not None):
            return None
        if not fn.returns or any(r is None for r in fn.returns):
            return None  # falls off the end, or a bare `return`: None
        key = ("<returns>", id(node))
        if key in self._typing:
            return _CYCLE  # recursion: the other returns decide
        self._typing.add(key)
        try:
            return self._kind_of_bindings([(r, fn.scope) for r in fn.returns], depth, use_project)
        finally:
            self._typing.discard(key)

    def _ask(self, question: Tuple) -> Optional[str]:
        self.project_questions.add(question)
        return self.project.module_kind(question) if self.project is not None else None

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

    def value_set_before(self, expr: cst.BaseExpression, site, fn) -> Optional[cst.BaseExpression]:
        """What an attribute chain (``self.trainer.root_gpu``) or a name (a global the
        function declares: ``_cuda_device_index = idx``) was set to by the function
        ``fn`` itself, straight before the statement of ``site``: the nearest assignment
        to the same chain among the statements of its block that precede it, or an
        ``assert <chain> == <value>`` there (Lightning's Horovod training: ``assert
        self.root_gpu == hvd.local_rank()``, then ``set_device(self.root_gpu)``), with no
        other statement between that mentions the chain. None otherwise (the chain is
        set elsewhere: another object's attribute holds anything)."""
        if not isinstance(expr, (cst.Attribute, cst.Name)) or not isinstance(fn.node.body, cst.IndentedBlock):
            return None  # (a lambda's body, a one-line def's suite)
        body = _block_holding(fn.node.body, site.line)
        at = next((i for i, stmt in enumerate(body) if stmt is site.line), None)
        chain = self.code(expr)
        for stmt in reversed(body[:at] if at is not None else ()):
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if (isinstance(small, cst.Assign) and len(small.targets) == 1
                            and self.code(small.targets[0].target) == chain):
                        return small.value
                    test = small.test if isinstance(small, cst.Assert) else None
                    if (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
                            and isinstance(test.comparisons[0].operator, cst.Equal)):
                        left, right = test.left, test.comparisons[0].comparator
                        if self.code(left) == chain:
                            return right
                        if self.code(right) == chain:
                            return left
            if chain in self.code(stmt):
                return None
        return None

    def held_values(self, expr: cst.BaseExpression, scope: Scope,
                    _depth: int = 0) -> Optional[List[Tuple[cst.BaseExpression, Scope]]]:
        """What a name or ``self.<attr>`` holds as far as this module shows: a name's
        assignments, a parameter's default, what the methods of the enclosing class (and
        of its bases in this file) assign to ``self.<attr>``; a value that is itself such
        a name is followed (``self.device_id = device_id``, ``device_id="cpu"``). None
        where something is unknown: a parameter without a default, a loop variable, an
        import, another object's attribute."""
        if _depth > 3:
            return None
        if isinstance(expr, cst.Name):
            values = self.values_of(expr.value, scope)
            if values is None:
                fn = self.parameter_of(expr.value, scope)
                if fn is None:
                    return None
                default = fn.default(expr.value)
                values = [(default, fn.scope)] if default is not None else None
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            klass = self.enclosing_class(scope)
            values = (self._self_attr_values(klass, expr.attr.value) or None) if klass is not None else None
        else:
            return None
        if values is None:
            return None
        out: List[Tuple[cst.BaseExpression, Scope]] = []
        for value, owner in values:
            if isinstance(value, (cst.Name, cst.Attribute)) and not (isinstance(value, cst.Name)
                                                                       and value.value in ("None", "True", "False")):
                further = self.held_values(value, owner, _depth + 1)
                if further is None:
                    return None
                out.extend(further)
            else:
                out.append((value, owner))
        return out

    def _self_attr_values(self, klass, attr: str, _seen=None) -> List[Tuple[cst.BaseExpression, Scope]]:
        """What the methods of ``klass`` and of its base classes in this file assign to
        ``self.<attr>``, each with the scope of the method that assigns it."""
        seen = _seen or set()
        seen.add(klass.node)
        methods = klass.methods
        out = [(v, methods[m].scope if m in methods else klass.scope) for v, m, _ in klass.self_attr_sets.get(attr, ())]
        for parent in self.local_parents(klass):
            if parent.node not in seen:
                out += self._self_attr_values(parent, attr, seen)
        return out

    def _kind_of_bindings(self, values, depth: int, use_project: bool = False) -> Optional[str]:
        if not values:
            return None
        kinds = {self.torch_kind(v, s, depth + 1, use_project) for v, s in values}
        kinds.discard(_CYCLE)
        return kinds.pop() if len(kinds) == 1 else None


def _block_holding(block: cst.IndentedBlock, line) -> Sequence[cst.BaseStatement]:
    """The statements of the block, among ``block`` and the blocks nested in its
    compound statements (not in nested functions or classes), that holds ``line``
    itself; ``block``'s own where none does."""
    todo = [block]
    while todo:
        current = todo.pop()
        if any(stmt is line for stmt in current.body):
            return current.body
        for stmt in current.body:
            if isinstance(stmt, cst.BaseCompoundStatement) and not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                todo.extend(_suites(stmt))
    return block.body


def _suites(stmt: cst.BaseCompoundStatement) -> List[cst.IndentedBlock]:
    """The indented blocks of a compound statement: its body, its ``elif``/``else``, a
    ``try``'s handlers and ``finally``, a ``match``'s cases."""
    found: List[cst.IndentedBlock] = []
    parts: list = [stmt]
    while parts:
        part = parts.pop()
        if part is None:
            continue
        inner = getattr(part, "body", None)
        if isinstance(inner, cst.IndentedBlock):
            found.append(inner)
        parts += [getattr(part, "orelse", None), getattr(part, "finalbody", None),
                  *getattr(part, "handlers", ()), *getattr(part, "cases", ())]
    return found

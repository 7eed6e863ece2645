"""Name resolution: the scope and import behind a name, qualified names through any
import alias, the functions and classes of this file that an expression names."""

from __future__ import annotations

from functools import cached_property
from typing import List, Optional, Sequence, Tuple

import libcst as cst

from .. import names as N
from .facts import (  # noqa: F401
    ClassInfo,
    FunctionInfo,
    Scope,
    names_in,
)
from .collector import ident


class ResolutionMixin:
    # ------------------------------------------------------------- name resolution
    @cached_property
    def test_code(self) -> bool:
        """Whether the module imports a test framework (pytest, unittest): test code."""
        return any(dotted.split(".")[0] in ("pytest", "unittest") for dotted in self.module_scope.imports.values())

    def lookup(self, name: str, scope: Scope) -> Tuple[Optional[Scope], Optional[str]]:
        """The scope that binds ``name`` as seen from ``scope``, and its import, if any.
        Class scopes are seen only from their own body (not from its functions and
        comprehensions), as in Python."""
        name = ident(name)
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

    def parameter_of(self, name: str, scope: Scope) -> Optional[FunctionInfo]:
        """The function (or lambda) whose parameter ``name`` is, as seen from ``scope``
        (its own, or one it closes over), when nothing in it rebinds the name; else None."""
        owner, imported = self.lookup(name, scope)
        if owner is None or imported is not None or owner.function is None:
            return None
        return owner.function if {b.kind for b in owner.bindings[ident(name)]} == {"param"} else None

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

    def first_free_parameter(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        """The parameter of the function of this file ``expr`` names that a caller's first
        positional argument lands in: its first, or the first after those a
        ``partial(f, a, ...)`` binds (``mp.spawn(partial(wrapper, test_fn))`` hands the
        process index to ``wrapper``'s second). None for a method, a lambda, or no such
        parameter."""
        fn = self.local_function(expr, scope)
        if fn is None or fn.klass is not None or not isinstance(fn.node, cst.FunctionDef):
            return None
        bound = 0
        while isinstance(expr, cst.Call) and self.qualname(expr.func, scope) == N.PARTIAL and expr.args:
            positional = [arg for arg in expr.args[1:] if arg.keyword is None]
            if any(arg.star for arg in positional):
                return None
            bound += len(positional)
            expr = expr.args[0].value
        params = fn.node.params
        names = [p.name.value for p in (*params.posonly_params, *params.params)]
        return names[bound] if bound < len(names) else None

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

    def local_parents(self, klass: ClassInfo) -> List[ClassInfo]:
        """The classes of this file that ``klass`` names as its bases, in order."""
        return [p for p in (self.local_class(b, klass.outer) for b in klass.bases) if p is not None]

    def method(self, klass: ClassInfo, name: str, _seen=None) -> Optional[FunctionInfo]:
        if name in klass.methods:
            return klass.methods[name]
        seen = _seen or set()
        seen.add(klass.node)
        for parent in self.local_parents(klass):
            if parent.node not in seen:
                found = self.method(parent, name, seen)
                if found:
                    return found
        return None

    def enclosing_function(self, scope: Scope) -> Optional[FunctionInfo]:
        current: Optional[Scope] = scope
        while current is not None and not current.is_function:
            current = current.parent
        return current.function if current is not None else None

    def enclosing_method(self, scope: Scope) -> Optional[FunctionInfo]:
        """The method of a class that ``scope`` is in, through the functions and lambdas
        nested in it (None outside any)."""
        fn = self.enclosing_function(scope)
        while fn is not None and fn.klass is None:
            fn = self.enclosing_function(fn.scope.parent) if fn.scope.parent else None
        return fn

    def enclosing_class(self, scope: Scope) -> Optional[ClassInfo]:
        method = self.enclosing_method(scope)
        return method.klass if method is not None else None

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
            if q and N.is_module_constructor(q):
                return True
            parent = self.local_class(base, klass.outer)
            if parent is not None and parent.node not in seen and self.is_module_class(parent, seen):
                return True
        return False

    @cached_property
    def classes_defining_cuda(self) -> List[ClassInfo]:
        return [c for c in self.classes if "cuda" in c.methods]

    def free_name(self, preferred: str, taken: Sequence[str] = (), within: Optional[cst.CSTNode] = None) -> str:
        """A name to bind a new value to: ``preferred`` unless the module names it
        anywhere (then ``torch_<preferred>``, ...). ``within``: a local of that
        function, which only has to be a name the function (with what it nests) never
        names: another function's ``device`` is no conflict (YOLOv3's two aliases)."""
        used = set(names_in(within)) if within is not None else self.names_used
        candidates = [preferred, f"torch_{preferred}", f"default_{preferred}"]
        candidates += [f"{preferred}_{i}" for i in range(2, 100)]
        for candidate in candidates:
            if candidate not in used and candidate not in taken:
                return candidate
        raise RuntimeError("no free name")  # pragma: no cover

    @cached_property
    def torch_import(self) -> Tuple[Optional[str], Optional[cst.CSTNode]]:
        """The module-level name bound to ``torch`` by an unconditional top-level import
        (not under ``if``/``try``, never rebound), and that import's statement."""
        for line, top_level, names in self.torch_imports:
            for name in names:
                if top_level and not {b.kind for b in self.module_scope.bindings.get(name, ())} - {"import"}:
                    return name, line
        return None, None

    @property
    def torch_alias(self) -> Optional[str]:
        return self.torch_import[0]

    @cached_property
    def guarded_torch_import(self) -> Optional[cst.CSTNode]:
        """An import of torch that only runs conditionally or lazily (under ``if
        TYPE_CHECKING``, in ``try``, inside a function), when the module has no
        unconditional one: importing torch at module level would change the module."""
        if self.torch_alias is not None:
            return None
        return next((line for line, top_level, _ in self.torch_imports if not top_level), None)

    def torch_name_at(self, scope: Scope, order: int) -> Optional[str]:
        """A name bound to ``torch`` at this point: a function's own earlier ``import
        torch``, or the module's unconditional one."""
        current: Optional[Scope] = scope
        while current is not None:
            if current.kind == "module":
                return self.torch_alias
            for name, q in current.imports.items():
                kinds = {b.kind for b in current.bindings.get(name, ())}
                if q == "torch" and kinds == {"import"} and min(
                        b.order for b in current.bindings[name]) < order:
                    return name
            current = current.parent
        return None

    def torch_named_in(self, node: cst.CSTNode, scope: Scope) -> Optional[str]:
        """The name ``node``'s own code uses for torch (``torch.cuda.FloatTensor``:
        ``torch``), however the module imports it (in a ``try``, ParlAI's ``import
        torch.nn`` beside ``except ImportError``): a rewrite of that code may use it too,
        for it runs only where the code did."""
        return next((name for name in names_in(node) if self.lookup(name, scope)[1] == "torch"), None)

    def inside(self, scope: Scope, node: cst.CSTNode) -> bool:
        current: Optional[Scope] = scope
        while current is not None:
            if current.node is node:
                return True
            current = current.parent
        return False

"""The single pass over the LibCST tree that records the raw facts.

Scopes follow Python's rules: a function's parameter defaults, annotations and
decorators are evaluated in the enclosing scope (its own scope opens at its body); a
comprehension is a scope of its own (its targets do not leak; a walrus inside binds in
the enclosing function); ``global``/``nonlocal`` names are bound in the scope they name;
``match`` captures, ``except ... as`` and ``del`` bind too; identifiers are compared
after NFKC normalisation, as Python does (``ｄevice`` is ``device``).
"""

from __future__ import annotations

import unicodedata
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from .treewalk import own_hook, subclass_of
from .facts import (  # noqa: F401
    Binding,
    CallSite,
    ClassInfo,
    FunctionInfo,
    FunctionNode,
    Scope,
    dotted_name,
)


# the parts of compound statements that run only on some paths, and how ``cond`` names them
_BRANCHES = {
    (cst.If, "body"): "body", (cst.If, "orelse"): "orelse",
    (cst.For, "body"): "loop", (cst.For, "orelse"): "loop-else",
    (cst.While, "body"): "loop", (cst.While, "orelse"): "loop-else",
    (cst.Try, "body"): "try", (cst.Try, "orelse"): "try-else",
    (cst.TryStar, "body"): "try", (cst.TryStar, "orelse"): "try-else",
}


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# whitespace, punctuation and operators: half of a tree's nodes, never a finding's
# place nor an edit's, so their top-level statement is not kept (``Analysis.range``
# still answers for them, the slow way)
_NEVER_REPORTED = (
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.EmptyLine, cst.TrailingWhitespace,
    cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
    cst.BaseBinaryOp, cst.BaseUnaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseAugOp,
)

# LibCST finds a visitor's hooks by name for every node and every child attribute (an
# f-string and a getattr each time); the collector's are looked up once per type
_HOOK_CACHE: Dict[tuple, tuple] = {}
_ATTRIBUTE_CACHE: Dict[tuple, Optional[tuple]] = {}


def _hooks(visitor: type, kind: type) -> tuple:
    """(visit, leave, reported, comprehension, statement) for nodes of ``kind``: the
    visitor's functions (None: none), whether such a node may be reported (not
    whitespace or punctuation), whether it opens a comprehension scope, whether it is a
    statement (as CPython's ``ast`` counts them). Kept per type: most of these classes
    are ABCs, and ``isinstance`` on an ABC is slow."""
    key = (visitor, kind)
    found = _HOOK_CACHE.get(key)
    if found is None:
        found = (own_hook(visitor, f"visit_{kind.__name__}"), own_hook(visitor, f"leave_{kind.__name__}"),
                 not subclass_of(kind, _NEVER_REPORTED), subclass_of(kind, _COMPREHENSIONS),
                 subclass_of(kind, (cst.BaseSmallStatement, cst.BaseCompoundStatement)))
        _HOOK_CACHE[key] = found
    return found


def _attribute_hooks(visitor: type, kind: type, attribute: str) -> Optional[tuple]:
    """(branch part, visit, leave) for a node's child attribute, or None when the
    collector does nothing there."""
    key = (visitor, kind, attribute)
    if key not in _ATTRIBUTE_CACHE:
        part = _BRANCHES.get((kind, attribute))
        visit = own_hook(visitor, f"visit_{kind.__name__}_{attribute}")
        leave = own_hook(visitor, f"leave_{kind.__name__}_{attribute}")
        _ATTRIBUTE_CACHE[key] = None if part is None and visit is None and leave is None else (part, visit, leave)
    return _ATTRIBUTE_CACHE[key]


class _Collector(cst.CSTVisitor):
    """The single pass that records raw facts. Run it with ``treewalk.walk`` (LibCST's own
    ``visit`` gives the same facts, slower): it never looks at whitespace or punctuation,
    and listens only to the child attributes it has hooks for."""

    WALK_IGNORES = _NEVER_REPORTED

    @classmethod
    def walk_listens(cls, kind: type, attribute: str) -> bool:
        return _attribute_hooks(cls, kind, attribute) is not None

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
        # where each node that may be reported is: its simple statement line when it is
        # in one, else its top-level statement (``Analysis.range`` computes positions
        # per line, or per top-level statement)
        self.where: Dict[cst.CSTNode, cst.CSTNode] = {}
        self.current_top: Optional[cst.CSTNode] = None
        self.statements: List[cst.CSTNode] = []  # small and compound, in document order
        # every import of torch or a torch submodule: (statement line, is it a
        # top-level statement of the module, the names it binds to torch itself)
        self.torch_imports: List[tuple] = []
        self.star_imports: List[str] = []  # modules of `from M import *` at module level
        self.imported_modules: List[str] = []  # every module an import names (relative: with its dots)
        self.with_items: Set[cst.Call] = set()  # calls that are a `with` item (`with torch.device("cuda"):`)
        # what is assigned to an attribute of a name other than `self` (`args.device =
        # "cuda"`, a configuration's `_C.MODEL.DEVICE = "cuda"`), keyed by its dotted
        # spelling ("args.device"), in any scope: the binding (kind "other", no value,
        # where it is not a plain assignment) and the scope it is written in
        self.attr_sets: Dict[str, List[Tuple[Binding, Scope]]] = {}
        self.counter = 0
        self.open_calls: List[CallSite] = []
        # the branches the visitor is in, per scope (a function body starts afresh)
        self.conds: List[List[Tuple[int, str]]] = [[]]
        self.complete_ifs: Set[int] = set()  # ids of the `if`s that have an `else`
        self.ifs: Dict[int, cst.If] = {}  # every `if`, by the id `cond` names it with
        self.comprehensions: Dict[cst.CSTNode, Scope] = {}  # each comprehension's own scope

    # every node gets a document-order index; only top-level statements keep theirs
    def on_visit(self, node: cst.CSTNode) -> bool:
        self.counter += 1
        if node in self.top_level:
            self.order[node] = self.counter
            self.current_top = node
        visit, _, reported, comprehension, statement = _hooks(type(self), type(node))
        if reported and self.current_top is not None:
            self.where[node] = self.lines[-1] if self.lines else self.current_top
        if statement:
            self.statements.append(node)
        if comprehension:  # a scope of its own
            self._push(Scope("comprehension", node, self.scope, "<comprehension>"))
            self.comprehensions[node] = self.scope
        return visit is None or visit(self, node) is not False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        _, leave, _, comprehension, _ = _hooks(type(self), type(original_node))
        if leave is not None:
            leave(self, original_node)
        if comprehension:
            self._pop()

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def _push(self, scope: Scope) -> None:
        self.scopes.append(scope)
        self.withs.append([])
        self.conds.append([] if scope.kind != "comprehension" else list(self.conds[-1]))

    def _pop(self) -> None:
        self.scopes.pop()
        self.withs.pop()
        self.conds.pop()

    # branches: what runs only on some paths
    def _enter(self, node: cst.CSTNode, part: str) -> None:
        self.conds[-1].append((id(node), part))

    def _leave(self) -> None:
        self.conds[-1].pop()

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        hooks = _attribute_hooks(type(self), type(node), attribute)
        if hooks is None:
            return  # the common case: nothing to do for this child
        part, visit, _ = hooks
        if part is not None:
            if part == "orelse" and getattr(node, "orelse", None) is not None:
                self.complete_ifs.add(id(node))
            if part == "body" and isinstance(node, cst.If):
                self.ifs[id(node)] = node
            self._enter(node, part)
        if visit is not None:
            visit(self, node)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        hooks = _attribute_hooks(type(self), type(original_node), attribute)
        if hooks is None:
            return
        part, _, leave = hooks
        if leave is not None:
            leave(self, original_node)
        if part is not None:
            self._leave()

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._leave()

    def leave_ExceptStarHandler(self, node: cst.ExceptStarHandler) -> None:
        self._leave()

    def visit_MatchCase(self, node: cst.MatchCase) -> None:
        self._enter(node, "case")

    def leave_MatchCase(self, node: cst.MatchCase) -> None:
        self._leave()

    def _bind(self, name: str, kind: str, value, scope: Optional[Scope] = None, source=None) -> None:
        name = ident(name)
        scope = scope or self.scope
        if kind == "walrus":  # PEP 572: a comprehension's walrus binds outside it
            while scope.kind == "comprehension" and scope.parent is not None:
                scope = scope.parent
        declared = scope.declared.get(name)
        if declared is not None and declared is not scope:
            # `global x` / `nonlocal x`: the binding lands in that scope, at an unknown
            # time (whenever this function runs): not a value to rely on
            declared.bind(Binding(name, "other", None, self.counter, (("elsewhere", "call"),)))
            return
        cond = tuple(self.conds[-1]) if scope is self.scope else ()
        scope.bind(Binding(name, kind, value, self.counter, cond, source))

    def visit_Module(self, node: cst.Module) -> None:
        self.top_level = set(node.body)
        self.module_scope = Scope("module", node, None, "<module>")
        self._push(self.module_scope)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        outer = self.scope
        self._bind(node.name.value, "class", node)
        scope = Scope("class", node, outer, node.name.value)
        # a generic base names its class: `Loader[T]` is `Loader`, `Dataset[int]` is `Dataset`
        bases = [a.value.value if isinstance(a.value, cst.Subscript) else a.value
                 for a in node.bases if a.keyword is None]
        info = ClassInfo(node, node.name.value, scope, outer, bases)
        scope.klass = info
        self.classes.append(info)
        self._push(scope)
        self.skip_names.add(node.name)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._pop()

    def _function(self, node: FunctionNode, name: str) -> None:
        """Record the function; its scope is entered at its body (defaults, annotations
        and decorators run in the enclosing scope, when the function is defined)."""
        outer = self.scope
        klass = outer.klass if outer.kind == "class" else None
        scope = Scope("function" if isinstance(node, cst.FunctionDef) else "lambda", node, outer, name)
        params = _param_names(node.params)
        info = FunctionInfo(node, name, scope, klass, params)
        scope.function = info
        self.functions[node] = info
        if klass is not None and isinstance(node, cst.FunctionDef):
            klass.methods[name] = info
        for p in params:
            self._bind(p, "param", None, scope)
            self.names_used.add(ident(p))

    def _enter_body(self, node: FunctionNode) -> None:
        self._push(self.functions[node].scope)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind(node.name.value, "def", node)
        self.names_used.add(ident(node.name.value))
        self.skip_names.add(node.name)
        self._function(node, node.name.value)

    def visit_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._enter_body(node)

    def leave_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._function(node, "<lambda>")
        self.functions[node].returns.append(node.body)

    def visit_Return(self, node: cst.Return) -> None:
        if self.scope.function is not None:
            self.scope.function.returns.append(node.value)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self.scope.function is not None:
            self.scope.function.generator = True

    def visit_Lambda_body(self, node: cst.Lambda) -> None:
        self._enter_body(node)

    def leave_Lambda_body(self, node: cst.Lambda) -> None:
        self._pop()

    # declarations and the other binding forms
    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self.scope.declared[ident(item.name.value)] = self.module_scope

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            name = ident(item.name.value)
            outer = self.scope.parent
            while outer is not None and not (outer.is_function and name in outer.bindings):
                outer = outer.parent
            if outer is not None:
                self.scope.declared[name] = outer

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self._bind(node.name.value, "other", None)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self._bind(node.name.value, "other", None)

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:
            self._bind(node.rest.value, "other", None)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._enter(node, "handler")
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self._bind(node.name.name.value, "other", None)

    def visit_ExceptStarHandler(self, node: cst.ExceptStarHandler) -> None:
        self._enter(node, "handler")
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self._bind(node.name.name.value, "other", None)

    def visit_Del(self, node: cst.Del) -> None:
        for target in _flat_targets(node.target):
            self._bind(target, "other", None)

    def visit_Param(self, node: cst.Param) -> None:
        self.skip_names.add(node.name)

    def _torch_import(self, node: cst.CSTNode, binds_torch: List[str]) -> None:
        line = self.lines[-1] if self.lines else node
        self.torch_imports.append((line, line in self.top_level, binds_torch))

    def _skip_module_path(self, path: cst.BaseExpression) -> None:
        """The names of a module path (``torch`` in ``from torch import nn``, ``import
        torch.nn as nn``) name no binding of this module: not among the names it uses."""
        while isinstance(path, cst.Attribute):
            path = path.value
        if isinstance(path, cst.Name):
            self.skip_names.add(path)

    def visit_Import(self, node: cst.Import) -> None:
        dotted_names = [_dotted(a.name) for a in node.names]
        for a in node.names:
            self._skip_module_path(a.name)
        self.imported_modules.extend(dotted_names)
        if any(d.split(".")[0] == "torch" for d in dotted_names):
            self._torch_import(node, [
                ident(a.asname.name.value) if a.asname is not None and isinstance(a.asname.name, cst.Name)
                else "torch" for a, d in zip(node.names, dotted_names)
                if d == "torch" or (d.startswith("torch.") and a.asname is None)])
        for alias in node.names:
            dotted = _dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = ident(alias.asname.name.value)
                self.scope.imports[local] = dotted
            else:
                local = dotted.split(".")[0]
                self.scope.imports[local] = local
            self._bind(local, "import", None)
            self.names_used.add(local)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        # relative modules keep their dots (``.models``): only the whole-run index
        # (``project``) can tell what they are
        base = "." * len(node.relative) + (_dotted(node.module) if node.module is not None else "")
        if node.module is not None:
            self._skip_module_path(node.module)
        self.imported_modules.append(base)
        if isinstance(node.names, cst.ImportStar):
            if self.scope is self.module_scope:
                self.star_imports.append(base)
            return
        if not base.strip("."):
            return  # `from . import x`: a module, not a class
        if base.split(".")[0] == "torch":
            self._torch_import(node, [])
        for alias in node.names:
            name = _dotted(alias.name)
            local = ident(alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name)
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
            self.names_used.add(ident(node.value))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, "other", None)
        elif isinstance(node.target, cst.Attribute):
            self._target(node.target, None, "other")

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, "walrus", node.value)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target, None, kind="for", source=(node.iter, ()))

    def visit_CompFor(self, node: cst.CompFor) -> None:  # in the comprehension's own scope
        self._target(node.target, None, kind="for", source=(node.iter, ()))

    def _target(self, target: cst.BaseExpression, value, kind: str = "assign",
                source: Optional[Tuple[cst.BaseExpression, Tuple[int, ...]]] = None) -> None:
        if isinstance(target, cst.Name):
            self._bind(target.value, kind, value, source=source)
        elif isinstance(target, (cst.Tuple, cst.List)):
            starred = any(isinstance(e, cst.StarredElement) for e in target.elements)
            values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else None
            if values is not None and (starred or len(values) != len(target.elements) or any(
                    isinstance(e, cst.StarredElement) for e in values)):
                values = None
            for i, el in enumerate(target.elements):
                if isinstance(el, cst.StarredElement):
                    self._target(el.value, None, "other")
                elif values is not None:  # a, b = x.cuda(), y.cuda(): pair them up
                    self._target(el.value, values[i].value, kind)
                elif source is not None and not starred:  # for x, y in loader: each item's i-th
                    self._target(el.value, None, kind, (source[0], source[1] + (i,)))
                elif kind == "assign" and value is not None and not starred:
                    # `scale, zero_point = obs.calculate_qparams()`: unknown, but from that value
                    self._target(el.value, None, "other", (value, (i,)))
                else:
                    self._target(el.value, None, "other")
        elif isinstance(target, cst.Attribute) and _attribute_key(target) is not None:
            key = _attribute_key(target)  # type: ignore[assignment]
            kind = kind if kind == "assign" and value is not None else "other"
            self.attr_sets.setdefault(key, []).append(
                (Binding(key, kind, value if kind == "assign" else None, self.counter, tuple(self.conds[-1])),
                 self.scope))
        elif (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
              and target.value.value == "self" and value is not None):
            klass = self._method_class()
            if klass is not None:
                klass.self_attrs.setdefault(target.attr.value, []).append(value)
                method = next((sc.name for sc in reversed(self.scopes) if sc.kind == "function"), "")
                klass.self_attr_sets.setdefault(target.attr.value, []).append((value, method, self.counter))
                klass.self_attr_conds[(target.attr.value, self.counter)] = tuple(self.conds[-1])

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
            self.with_items.add(item)
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
            cond=tuple(self.conds[-1]),
            parent=self.open_calls[-1] if self.open_calls else None,
        )
        self.calls.append(site)
        self.open_calls.append(site)

    def leave_Call(self, node: cst.Call) -> None:
        site = self.open_calls.pop()
        site.end_order = self.counter


def ident(name: str) -> str:
    """An identifier as Python compares it: NFKC-normalised (PEP 3131)."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def _flat_targets(target: cst.BaseExpression) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _flat_targets(el.value)]
    return []


def _param_names(params: cst.Parameters) -> List[str]:
    out = [p.name.value for p in params.posonly_params] + [p.name.value for p in params.params]
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg.name.value)
    out += [p.name.value for p in params.kwonly_params]
    if params.star_kwarg is not None:
        out.append(params.star_kwarg.name.value)
    return out


_dotted = dotted_name


def _attribute_key(target: cst.Attribute) -> Optional[str]:
    """``args.device``, ``_C.MODEL.DEVICE``: an attribute chain on a name other than
    ``self``, as it is spelled; None for anything else."""
    root: cst.BaseExpression = target
    while isinstance(root, cst.Attribute):
        root = root.value
    return _dotted(target) if isinstance(root, cst.Name) and root.value != "self" else None

"""A read-only walk over a LibCST tree: ``walk(node, visitor)`` does what
``node.visit(visitor)`` does for a ``cst.CSTVisitor``, at a fraction of the cost; the
engine's parse, ``parse_valid`` (LibCST's tree without its validation); and
``positions``, LibCST's PositionProvider without the metadata wrapper's extra walk.

LibCST's ``visit`` rebuilds every node it leaves, even for a visitor that changes
nothing: each child attribute goes through a generator, and each node is constructed
again and validated (a dataclass ``__init__`` and ``_validate`` per node). It also finds
the visitor's ``visit_<Node>``/``leave_<Node>``/``visit_<Node>_<attribute>`` hooks with
an f-string and a ``getattr`` for every node and every child attribute. The analysis only
reads the tree, so this walk visits the same nodes, calls the same hooks in the same order
(``on_visit``, then per child attribute ``on_visit_attribute``, its children,
``on_leave_attribute``, then ``on_leave``), and builds nothing.

The order of a node type's child attributes is LibCST's own: it is recorded once per type
by running that type's ``_visit_and_replace_children`` with a visitor that only notes the
attributes it is told about (and does not descend). A visitor that keeps LibCST's default
``on_visit``/``on_leave``/``on_visit_attribute``/``on_leave_attribute`` gets its hooks
looked up once per (visitor class, node type) instead of once per node.
``tests/test_walk.py`` checks, on every fixture and on real files, that the events are
exactly LibCST's.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

_ATTRIBUTES: Dict[type, Tuple[str, ...]] = {}
# the child attributes that LibCST visits only when they are set (its other
# ``_visit_and_replace_children`` visit every attribute, None or not; tests/test_walk.py
# reads the installed LibCST's sources to keep this list true; t-strings came in 1.8)
VISITED_ONLY_WHEN_SET: Dict[type, Tuple[str, ...]] = {
    getattr(cst, name): ("format_spec",)
    for name in ("FormattedStringExpression", "TemplatedStringExpression") if hasattr(cst, name)
}


class _AttributeRecorder(cst.CSTVisitor):
    """Notes the child attributes ``_visit_and_replace_children`` visits, in order."""

    def __init__(self) -> None:
        self.attributes: List[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False  # one level only

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.attributes.append(attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass


def child_attributes(node: cst.CSTNode) -> Tuple[str, ...]:
    """The child attributes LibCST visits for ``node``'s type, in its order."""
    kind = type(node)
    found = _ATTRIBUTES.get(kind)
    if found is None:
        unset = {a: () for a in VISITED_ONLY_WHEN_SET.get(kind, ()) if getattr(node, a) is None}
        recorder = _AttributeRecorder()
        with _unvalidated():  # (it rebuilds the node from its own children)
            (node.with_changes(**unset) if unset else node)._visit_and_replace_children(recorder)  # type: ignore[attr-defined]
        found = _ATTRIBUTES[kind] = tuple(recorder.attributes)
    return found


_NODE_TYPES: Dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    """Whether values of this type are nodes (``CSTNode`` is an ABC: ``isinstance`` on
    it is slow, so the answer is kept per type)."""
    found = _NODE_TYPES.get(kind)
    if found is None:
        found = _NODE_TYPES[kind] = subclass_of(kind, (cst.CSTNode,))
    return found


def own_hook(vtype: type, name: str) -> Optional[Callable]:
    """The visitor class's hook ``name`` (``visit_Call``, ``leave_If_orelse``), or None
    when it has none of its own: ``cst.CSTVisitor`` defines every hook as a no-op, and
    calling those for each node and each child attribute is most of a walk's cost."""
    hook = getattr(vtype, name, None)
    return None if hook is None or hook is getattr(cst.CSTVisitor, name, None) else hook


class _Plan:
    """How one visitor class walks nodes of one type: the hooks to call on entering and
    leaving (None: none), and per child attribute, in LibCST's order, the hooks to call
    around it (None: nothing to call there) and whether LibCST skips it when unset."""

    __slots__ = ("visit", "leave", "attributes")

    def __init__(self, visit: Optional[Callable], leave: Optional[Callable],
                 attributes: Tuple[Tuple[str, Optional[Callable], Optional[Callable], bool], ...]):
        self.visit, self.leave, self.attributes = visit, leave, attributes


# visitor class -> node type -> its plan; weak: analysis code defines small visitor
# classes inside functions, one class object per call, and a long-running process (the
# language server) must not keep them all
_PLANS: "weakref.WeakKeyDictionary[type, Dict[type, Optional[_Plan]]]" = weakref.WeakKeyDictionary()


def subclass_of(kind: type, bases: tuple) -> bool:
    """``issubclass(kind, bases)`` for LibCST's node classes, read from ``kind``'s MRO.
    Their bases are ABCs, and a first ``issubclass`` that answers no walks every subclass
    of each ABC asked (~2 ms a type, 0.1-0.2 s of every process's first file); LibCST
    registers no virtual subclasses, so the MRO holds the whole answer."""
    mro = kind.__mro__
    return any(base in mro for base in bases)


_IGNORED: Dict[Tuple[type, tuple], bool] = {}


def _ignores(kind: type, ignored: tuple) -> bool:
    """Whether the walk skips ``kind`` (a visitor's ``WALK_IGNORES``), kept per pair:
    visitor classes defined inside functions plan every type anew."""
    key = (kind, ignored)
    found = _IGNORED.get(key)
    if found is None:
        found = _IGNORED[key] = subclass_of(kind, ignored)
    return found


def _call_with(method: Callable, attribute: str, visitor: cst.CSTVisitor, node: cst.CSTNode) -> None:
    method(visitor, node, attribute)


def _plan(vtype: type, node: cst.CSTNode) -> Optional[_Plan]:
    """The walk of ``node``'s type for visitors of class ``vtype`` (None: the visitor
    ignores such nodes and everything under them, see ``walk``)."""
    kind = type(node)
    if _ignores(kind, getattr(vtype, "WALK_IGNORES", ())):
        return None
    name = kind.__name__
    if vtype.on_visit is cst.CSTVisitor.on_visit and vtype.on_leave is cst.CSTVisitor.on_leave:
        visit, leave = own_hook(vtype, f"visit_{name}"), own_hook(vtype, f"leave_{name}")
    else:
        visit, leave = vtype.on_visit, vtype.on_leave
    plain = (vtype.on_visit_attribute is cst.CSTVisitor.on_visit_attribute
             and vtype.on_leave_attribute is cst.CSTVisitor.on_leave_attribute)
    listens = getattr(vtype, "walk_listens", None)
    attributes = []
    only_when_set = VISITED_ONLY_WHEN_SET.get(kind, ())
    for attribute in child_attributes(node):
        if plain:
            before = own_hook(vtype, f"visit_{name}_{attribute}")
            after = own_hook(vtype, f"leave_{name}_{attribute}")
        elif listens is None or listens(kind, attribute):
            before = functools.partial(_call_with, vtype.on_visit_attribute, attribute)
            after = functools.partial(_call_with, vtype.on_leave_attribute, attribute)
        else:
            before = after = None
        attributes.append((attribute, before, after, attribute in only_when_set))
    return _Plan(visit, leave, tuple(attributes))


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """Visit ``node`` and its descendants with ``visitor`` as ``node.visit(visitor)``
    would, without rebuilding anything.

    Two optional class attributes of the visitor make the walk cheaper still, and change
    only what the visitor declared it does not need: ``WALK_IGNORES``, a tuple of node
    types (whitespace, punctuation) the visitor never looks at: no hook runs for them or
    for anything under them; ``walk_listens(kind, attribute)``, for a visitor that
    overrides ``on_visit_attribute``/``on_leave_attribute``: whether it does anything for
    that child attribute of that node type (if not, those two are not called there).
    """
    vtype = type(visitor)
    plans = _PLANS.get(vtype)
    if plans is None:
        plans = _PLANS[vtype] = {}

    def go(n: cst.CSTNode) -> None:
        kind = type(n)
        try:
            plan = plans[kind]
        except KeyError:
            plan = plans[kind] = _plan(vtype, n)
        if plan is None:
            return
        visit = plan.visit
        if visit is None or visit(visitor, n) is not False:
            for name, before, after, only_when_set in plan.attributes:
                value = getattr(n, name)
                if only_when_set and value is None:
                    continue
                if before is not None:
                    before(visitor, n)
                kind = type(value)
                if kind is tuple or kind is list:
                    for child in value:
                        go(child)
                elif _is_node(kind):
                    go(value)
                if after is not None:
                    after(visitor, n)
        if plan.leave is not None:
            plan.leave(visitor, n)

    go(node)


# ---------------------------------------------------------------- the parse
# LibCST validates every node it builds: ``CSTNode.__post_init__`` calls ``_validate``. On
# a tree its parser builds from text CPython's parser has accepted, that finds nothing
# (or wrongly refuses valid code: LibCST's issue #1061, `() if 0 else(lambda:())`), and is
# 13-20% of the parse. ``parse_valid`` skips it on the parsing thread only: the hook
# checks a thread-local flag, so every other construction (fixes, a host's own LibCST
# code, another thread) is validated as before. Installed only over the hook LibCST is
# known to have (it calls ``_validate`` and nothing else); else parses are validated.
_PARSING = threading.local()
_LIBCST_POST_INIT = cst.CSTNode.__post_init__


def _post_init(self) -> None:
    if not getattr(_PARSING, "trusted", False):
        self._validate()


def _install() -> bool:
    hook = cst.CSTNode.__post_init__
    if hook is _post_init:
        return True
    if hook is not _LIBCST_POST_INIT or hook.__code__.co_names != ("_validate",):
        return False  # pragma: no cover - another LibCST: validate as it does
    cst.CSTNode.__post_init__ = _post_init  # type: ignore[method-assign]
    return True


@contextlib.contextmanager
def _unvalidated() -> Iterator[None]:
    """On this thread, nodes are built without LibCST's validation (when it can be skipped)."""
    if not _install():
        yield  # pragma: no cover
        return
    _PARSING.trusted = True
    try:
        yield
    finally:
        _PARSING.trusted = False


def parse_valid(text: str) -> cst.Module:
    """LibCST's tree of ``text``, which CPython's parser has accepted (its nodes are not
    validated again)."""
    with _unvalidated():
        return cst.parse_module(text)


def positions(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """What ``MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)``
    gives, from PositionProvider's own pass alone (LibCST's codegen, recording where each
    node is written). The wrapper's resolve also walks the whole tree once more for the
    batchable providers it resolves with it (none here), and copies the result: half of
    its cost. Where the installed LibCST has no such pass, the wrapper's own answer."""
    provider = PositionProvider()
    generate = getattr(provider, "_gen_impl", None)
    computed = getattr(provider, "_computed", None)
    if generate is None or not isinstance(computed, dict):  # pragma: no cover - another LibCST
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    generate(module)
    return provider._computed


__all__ = ["walk", "child_attributes", "own_hook", "subclass_of", "parse_valid", "positions",
           "VISITED_ONLY_WHEN_SET"]

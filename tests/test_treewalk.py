"""The read-only walk and the cheap positions give exactly what LibCST gives.

``analysis.treewalk.walk`` replaces ``node.visit(visitor)`` for the analysis' visitors, and
``Analysis.range``/``first_line`` place LibCST's positions from one statement line at a
time (CPython's parser says where the line starts). Both are checked against LibCST
itself, event by event and node by node, on every fixture, on the package's own sources
and on a module written to hold every shape that moves positions around.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import List, Tuple

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from helpers import fixture_programs
from torchdevlint.analysis import Analysis
from torchdevlint.analysis.collector import _Collector
from torchdevlint.analysis.treewalk import VISITED_ONLY_WHEN_SET, walk

ROOT = Path(__file__).resolve().parent.parent

# every shape that moves a position: continuation lines inside brackets and after a
# backslash, tabs, wide characters, semicolons, suites on the header line, decorators,
# comments and blank lines between statements, nested blocks, elif/else, match, try*
AWKWARD = '''\
# -*- coding: utf-8 -*-
"""Doc."""
import torch, os ; import torch.nn as nn


@torch.no_grad()
@staticmethod
def f(x,
      y=torch.zeros(2).cuda()):  # a comment
    z = torch.ones(3,
                   device="cuda"); w = z.cuda()
    if x: y.cuda()
    elif y:
        q = [a.cuda() for a in x
             if a is not None]
    else:
        pass
    s = f"é字{x!r:>{y}} {x.cuda()}" ; t = torch.tensor([1]).cuda(); u = \\
        t.cuda()
    return lambda v: v.cuda()


def g(x):
\tif x:
\t\ty = torch.ones(2,
\t\t\t\tdevice="cuda")
\treturn x.cuda()


class M(nn.Module):
    def forward(self, x):
        match x:
            case [a, *rest] if a.cuda():
                return a
            case _:
                pass
        try:
            x = x.cuda()
        except* ValueError:
            pass
        finally:
            y = (x
                 .cuda())
        with torch.cuda.device(0), open("a") as h:
            async_x = {k: v.cuda() for k, v in h}
        while (n := x.cuda()) is None: break
        for i in range(3): x.cuda(); continue
        global G; del async_x
        return x
'''


def sources(own: Tuple[str, ...] = ("**/*.py",)) -> List[str]:
    """The awkward module (also with CRLF), every fixture, and the package's own modules
    (those matching ``own``)."""
    texts = [AWKWARD, AWKWARD.replace("\n", "\r\n")]
    texts += [p.read_text(encoding="utf-8") for p in fixture_programs()]
    texts += [p.read_text(encoding="utf-8") for pattern in own for p in sorted((ROOT / "torchdevlint").glob(pattern))]
    return texts


class _Recorder(cst.CSTVisitor):
    """Every event, as LibCST delivers it; says "do not descend" at one node type."""

    def __init__(self, stop_at: type = cst.Lambda) -> None:
        self.events: list = []
        self.stop_at = stop_at

    def on_visit(self, node):
        self.events.append(("visit", id(node)))
        return not isinstance(node, self.stop_at)

    def on_leave(self, original_node):
        self.events.append(("leave", id(original_node)))

    def on_visit_attribute(self, node, attribute):
        self.events.append(("visit_attr", id(node), attribute))

    def on_leave_attribute(self, original_node, attribute):
        self.events.append(("leave_attr", id(original_node), attribute))


class _Hooks(cst.CSTVisitor):
    """A visitor with LibCST's default dispatch: named hooks only."""

    def __init__(self) -> None:
        self.events: list = []

    def visit_Name(self, node):
        self.events.append(("Name", id(node)))

    def leave_Call(self, original_node):
        self.events.append(("leave Call", id(original_node)))

    def visit_ClassDef(self, node):
        self.events.append(("ClassDef", id(node)))
        return False  # nothing inside a class

    def visit_If_body(self, node):
        self.events.append(("If.body", id(node)))

    def leave_If_orelse(self, node):
        self.events.append(("If.orelse end", id(node)))


@pytest.mark.parametrize("make", [_Recorder, lambda: _Recorder(cst.SimpleStatementLine), _Hooks])
def test_walk_delivers_libcst_events_in_libcst_order(make):
    for text in sources():
        module = cst.parse_module(text)
        theirs, ours = make(), make()
        module.visit(theirs)
        walk(module, ours)
        assert ours.events == theirs.events
        assert ours.events  # the check looked at something


def test_libcst_visits_conditionally_only_what_the_walk_knows():
    """The installed LibCST's ``_visit_and_replace_children`` visit every child attribute,
    None or not, but for a few: an ``X is not None`` test must be one ``walk`` knows (a
    new LibCST may add some: 1.8 added t-strings); an import's ``names`` is visited under
    the same attribute name either way."""
    import ast
    import inspect

    import libcst._nodes as nodes

    conditional = {}
    for path in sorted(Path(nodes.__file__).parent.glob("*.py")):
        for cls in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "_visit_and_replace_children":
                    tests = [ast.unparse(n.test) for n in ast.walk(fn) if isinstance(n, (ast.If, ast.IfExp))]
                    if tests:
                        conditional[cls.name] = tests
    assert "FormattedStringExpression" in conditional and "ImportFrom" in conditional  # the scan sees them
    known = {kind.__name__: attributes for kind, attributes in VISITED_ONLY_WHEN_SET.items()}
    for name, tests in conditional.items():
        if tests == ["isinstance(names, ImportStar)"]:
            assert inspect.getsource(getattr(cst, name)._visit_and_replace_children).count('"names"') == 2, name
        else:
            assert [f"{a} is not None" for a in known.get(name, ())] == tests, (name, tests)
    assert set(known) <= set(conditional)


def _facts(collector: _Collector) -> tuple:
    """The collector's facts. The walk does not count whitespace, so document-order
    numbers differ: each is replaced by how many of the recorded orders (calls, bindings,
    top-level statements) are at or before it, which the walk may not change."""
    scopes = [collector.module_scope] + [f.scope for f in collector.functions.values()] + [
        k.scope for k in collector.classes]
    bindings = [(scope, name, found) for scope in scopes for name, found in sorted(scope.bindings.items())]
    orders = sorted({c.order for c in collector.calls} | set(collector.order.values())
                    | {b.order for _, _, found in bindings for b in found})

    def rank(number: int) -> int:
        return bisect.bisect_right(orders, number)

    calls = [(id(c.node), c.scope.name, rank(c.order), rank(c.end_order), c.cond,
              tuple(id(w.node) if not isinstance(w, str) and w is not None else w for w in c.withs),
              id(c.line), id(c.expr_stmt), id(c.parent.node) if c.parent else None) for c in collector.calls]
    bound = [(scope.name, name, [(b.kind, id(b.value), rank(b.order), b.cond) for b in found])
             for scope, name, found in bindings]
    where = {id(k): id(v) for k, v in collector.where.items()
             if not isinstance(k, (cst.Comment, cst.Newline))}  # (nodes inside whitespace: never walked)
    return (calls, bound, sorted(collector.names_used), where, [id(s) for s in collector.statements],
            sorted(collector.complete_ifs), collector.star_imports, {id(k): rank(v) for k, v in collector.order.items()},
            [(id(line), top, names) for line, top, names in collector.torch_imports])


def test_the_collector_finds_the_same_facts_walked_as_visited():
    for text in sources():
        module = cst.parse_module(text)
        visited, walked = _Collector(), _Collector()
        module.visit(visited)
        walk(module, walked)
        assert _facts(walked) == _facts(visited)


def test_positions_are_libcst_positions_for_every_node():
    own = ("engine.py", "analysis/devices.py", "analysis/collector.py", "rules/tdl005*.py")  # (all: 20 s)
    for text in sources(own) + [AWKWARD.replace("import torch.nn as nn", "\fimport torch.nn as nn")]:
        module = cst.parse_module(text)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        analysis = Analysis(module, text=text)
        in_lines = [n for n, w in analysis._where.items()
                    if type(w) is cst.SimpleStatementLine or type(n) is cst.SimpleStatementLine]
        assert in_lines
        for node in in_lines:
            if len(analysis._line_ranges) >= 60:
                analysis._line_ranges.clear()  # (past 64 lines the whole module's positions are used)
            assert analysis.range(node) == expected[node], (type(node).__name__, analysis.code(node))
        if "\f" not in text:  # (a form feed maps LibCST's code back onto the text: the whole module)
            assert "positions" not in analysis.__dict__, "a line's position needed the whole module's"
        for stmt in analysis._statements + [n for n in in_lines if type(n) is cst.SimpleStatementLine]:
            assert analysis.first_line(stmt) == expected[stmt].start.line, analysis.code(stmt)[:60]
        for node, where in analysis._where.items():  # the rest: from the top-level statement
            if node not in in_lines and type(where) is not cst.SimpleStatementLine:
                assert analysis.range(node) == expected[node]


def test_positions_without_the_wrapper_are_the_wrapper_s_for_every_node():
    """``treewalk.positions`` runs PositionProvider's own pass without the metadata
    wrapper's extra walk of the tree: the same range for every node of every source."""
    from torchdevlint.analysis.treewalk import positions

    for text in sources(("engine.py", "analysis/*.py")):
        module = cst.parse_module(text)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        got = positions(module)
        assert len(got) == len(expected) > 0 and all(got[node] == rng for node, rng in expected.items())


def test_cpython_and_libcst_count_the_same_statements():
    for text in sources():
        analysis = Analysis(cst.parse_module(text), text=text)
        assert len(analysis._starts) == len(analysis._statements) > 0


def test_the_walk_keeps_no_visitor_class_alive():
    """Analysis code defines visitor classes inside functions (one class per call): the
    walk's per-class plans must go with them, or a long-running server grows forever."""
    import gc
    import weakref

    module = cst.parse_module("import torch\nx = torch.zeros(1).cuda()\n")
    refs = []
    for _ in range(3):
        class Local(cst.CSTVisitor):
            def visit_Name(self, node):
                pass

        walk(module, Local())
        refs.append(weakref.ref(Local))
        del Local
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_the_walk_calls_only_hooks_a_visitor_defines():
    """``cst.CSTVisitor`` defines every ``visit_<Node>``/``leave_<Node>_<attribute>`` as a
    no-op: the walk must not take those for the visitor's own, or it calls one for every
    node and every child attribute (which was half of the analysis' time)."""
    from torchdevlint.analysis.treewalk import own_hook

    assert own_hook(_Hooks, "visit_Name") is _Hooks.visit_Name
    assert own_hook(_Hooks, "visit_If_body") is _Hooks.visit_If_body
    assert own_hook(_Hooks, "visit_Call") is None and own_hook(_Hooks, "leave_Name_lpar") is None
    assert not _Collector.walk_listens(cst.Name, "lpar") and not _Collector.walk_listens(cst.Attribute, "value")
    assert _Collector.walk_listens(cst.If, "orelse") and _Collector.walk_listens(cst.FunctionDef, "body")

    calls = []

    class Counting(_Collector):
        def on_visit_attribute(self, node, attribute):
            calls.append((type(node).__name__, attribute))
            super().on_visit_attribute(node, attribute)

    walk(cst.parse_module(AWKWARD), Counting())
    assert calls and all(_Collector.walk_listens(getattr(cst, k), a) for k, a in calls)


def test_subclass_of_is_issubclass_for_every_libcst_node_class():
    """The MRO answers as ``issubclass`` does (LibCST registers no virtual subclasses)."""
    from torchdevlint.analysis.treewalk import subclass_of

    classes = [c for c in vars(cst).values() if isinstance(c, type) and issubclass(c, cst.CSTNode)]
    assert len(classes) > 150
    for kind in classes + [str, type(None), tuple]:
        for base in classes:
            assert subclass_of(kind, (base,)) == issubclass(kind, base), (kind, base)


def test_the_engine_s_parse_is_libcst_s_tree_and_validation_stays_on_elsewhere():
    """``parse_valid`` builds the tree ``cst.parse_module`` builds, without validating it
    again; any other construction is validated, also after a parse that failed."""
    import threading

    from torchdevlint.analysis.treewalk import parse_valid

    for text in sources():
        assert parse_valid(text).deep_equals(cst.parse_module(text))
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1abc")
    with pytest.raises(cst.ParserSyntaxError):
        parse_valid("def f(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1abc")
    errors = []

    def other_thread():
        try:
            cst.Name("1abc")
        except cst.CSTValidationError as exc:
            errors.append(exc)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert len(errors) == 1

"""``Analysis``: the facts about one module, composed from one mixin per concern.

One pass over the LibCST tree (``collector``) records scopes, imports, bindings,
classes, functions and every call site with its context (enclosing scope, active
``with`` contexts, statement). Everything else is derived lazily from those facts and
cached, by the mixins (``resolution``, ``receivers``, ``placement``, ``concurrency``,
``parallel``) and the lazily built ``process`` and ``devices`` facts.

Ordering facts use ``order``: the pre-order index of a node in the tree (document
order), so no positions are needed until a rule reports something.
"""

from __future__ import annotations

import ast
from functools import cached_property
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import CodeRange

from .. import names as N
from ..screen import statement_starts
from ..source import LineIndex, split_lines
from .collector import _Collector
from .treewalk import positions as node_positions, walk
from .facts import CallSite, ClassInfo, FunctionInfo, Scope, called_name
from .concurrency import ConcurrencyMixin
from .parallel import ParallelMixin
from .placement import PlacementMixin
from .receivers import ReceiversMixin
from .resolution import ResolutionMixin


class Analysis(ResolutionMixin, ReceiversMixin, PlacementMixin, ConcurrencyMixin, ParallelMixin):
    """Facts about one module. Build with ``Analysis(module)``."""

    def __init__(self, module: cst.Module, device_name: str = "device", text: Optional[str] = None,
                 project=None, starts: Optional[List[Tuple[int, int]]] = None):
        self.module = module
        self.project = project  # the run's ``project.ProjectIndex`` (CLI runs over a tree), or None
        self.project_questions = set()  # what the analysis asked the index (``index_answer``)
        # where CPython's parser saw each statement start (``statement_starts``), if the
        # caller parsed the text with it; else parsed when a position is first needed
        self._given_starts = starts
        # LibCST round-trips almost exactly: it drops form feeds before a top-level
        # statement. Positions are LibCST's; ``range`` maps them onto ``text``.
        self.text = module.code if text is None else text
        self.device_name = device_name
        collector = _Collector()
        walk(module, collector)
        self._where: Dict[cst.CSTNode, cst.CSTNode] = collector.where
        self._top_level = collector.top_level
        self._statements: List[cst.CSTNode] = collector.statements
        self.module_scope: Scope = collector.module_scope
        self.calls: List[CallSite] = collector.calls
        self.functions: Dict[cst.CSTNode, FunctionInfo] = collector.functions
        self.classes: List[ClassInfo] = collector.classes
        self.names_used: Set[str] = collector.names_used
        self.order: Dict[cst.CSTNode, int] = collector.order
        self.site_of: Dict[cst.Call, CallSite] = {c.node: c for c in self.calls}
        self._typing: Set[Tuple[str, int]] = set()
        self.torch_imports = collector.torch_imports
        self.complete_ifs = collector.complete_ifs
        self.ifs = collector.ifs
        self.star_imports = collector.star_imports
        self.imported_modules = collector.imported_modules
        self.with_items = collector.with_items
        self.attr_sets = collector.attr_sets
        self.comprehensions = collector.comprehensions
        self._ranges: Dict[cst.CSTNode, tuple] = {}
        self._line_ranges: Dict[cst.SimpleStatementLine, object] = {}
        self.memo: Dict[str, Dict] = {}  # per-module caches for fix helpers
        self._code: Dict[cst.CSTNode, str] = {}
        for site in self.calls:  # document order: a with-item call precedes its block
            site.qualname = self.qualname(site.node.func, site.scope)
            site.withs = tuple(self._with_item(w) if isinstance(w, CallSite) else w for w in site.withs)

    def _with_item(self, item: CallSite) -> Optional[str]:
        """What a with-item call stands for in ``CallSite.withs``: ``names.DEVICE_BLOCK``
        for a helper that enters a device block (``names.DEVICE_BLOCK_HELPER``), else
        its qualname. Memoised per call: every call in the block asks."""
        memo = self.memo.setdefault("with_item", {})
        if item.node not in memo:
            q = item.qualname
            block = False
            if q not in N.DEVICE_CONTEXTS and not (q is not None and N.is_torch(q)):
                fn = self.local_function(item.node.func, item.scope)
                if fn is not None:  # this file's helper: its own body enters one
                    block = self._enters_device_block(fn)
                else:
                    name = (called_name(item.node.func) or "").lower()
                    block = bool(N.DEVICE_BLOCK_HELPER.search(name)) and not N.NOT_DEVICE_BLOCK_HELPER.search(name)
            memo[item.node] = N.DEVICE_BLOCK if block else q
        return memo[item.node]

    def _enters_device_block(self, fn: FunctionInfo) -> bool:
        """Whether a function of this file enters ``with torch.cuda.device(...)`` itself."""
        return any(s.node in self.with_items and self.inside(s.scope, fn.node)
                   and self.qualname(s.node.func, s.scope) in N.DEVICE_CONTEXTS for s in self.calls)

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
    # Positions are LibCST's (``PositionProvider``), computed lazily and in small pieces:
    # PositionProvider over a whole large module costs more than its parse. A node in a
    # simple statement line gets them from that line alone, placed where CPython's parser
    # saw the line start; any other node from its top-level statement, placed where that
    # statement starts.
    @cached_property
    def positions(self):
        return node_positions(self.module)

    @cached_property
    def _realign(self) -> Optional["_Realign"]:
        """None when LibCST's code is the text (always, but for a form feed LibCST drops)."""
        if "\f" not in self.text:
            return None
        code = self.module.code
        return None if code == self.text else _Realign(code, self.text)

    @cached_property
    def _starts(self) -> Dict[cst.CSTNode, Tuple[int, int]]:
        """Each statement's start as CPython's parser saw it (``statement_starts``); empty
        when the two parsers do not count the same statements (never seen)."""
        starts = self._given_starts
        if starts is None:
            try:
                starts = statement_starts(ast.parse(self.text))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return {}
        return dict(zip(self._statements, starts)) if len(starts) == len(self._statements) else {}

    def range(self, node: cst.CSTNode) -> CodeRange:
        realign = self._realign
        if realign is not None:  # positions in LibCST's code, mapped onto the text
            return realign.range(self.positions[node])
        if "positions" in self.__dict__:
            return self.positions[node]
        where = self._where.get(node)
        line = node if type(node) is cst.SimpleStatementLine else where
        if type(line) is cst.SimpleStatementLine:
            found = self._line_range(line, node)  # type: ignore[arg-type]
            if found is not None:
                return found
        top = where
        while top is not None and top not in self._top_level:
            top = self._where.get(top)
        if top is None or top not in self._starts or len(self._ranges) >= 64:
            return self.positions[node]  # dense findings: one pass over the module is cheaper
        cached = self._ranges.get(top)
        if cached is None:
            mini = self.module.with_changes(body=[top], header=[], footer=[])
            found = node_positions(mini)
            # placed by the statement itself: CPython's parser says where it starts
            cached = self._ranges[top] = (found, self._starts[top][0] - found[top].start.line)
        return _shift(cached[0][node], cached[1])

    @cached_property
    def statement_lines(self) -> List[int]:
        """The line every statement, small or compound, starts on, in order (empty when
        CPython's parser and LibCST do not count the same statements)."""
        return sorted({line for line, _ in self._starts.values()})

    @property
    def statements(self) -> List[cst.CSTNode]:
        """Every statement, small and compound, in document order."""
        return self._statements

    def statement_line(self, node: cst.CSTNode) -> Optional[cst.SimpleStatementLine]:
        """The simple statement line that holds ``node``, if it is in one."""
        where = self._where.get(node)
        return where if type(where) is cst.SimpleStatementLine else None

    def first_line(self, stmt: cst.CSTNode) -> int:
        """The line a statement starts on (``range(stmt).start.line``: a decorated
        definition's is its ``def`` line, as in CPython), from CPython's parser."""
        start = self._starts.get(stmt.body[0] if type(stmt) is cst.SimpleStatementLine else stmt)  # type: ignore[attr-defined]
        if start is None or self._realign is not None:
            return self.range(stmt).start.line
        return start[0]

    def _line_range(self, line: cst.SimpleStatementLine, node: cst.CSTNode) -> Optional[CodeRange]:
        """``node``'s range from its simple statement line alone (None: not known so)."""
        cached = self._line_ranges.get(line)
        if cached is None:
            if len(self._line_ranges) >= max(64, len(self._statements) // 4):
                return self.positions[node]  # dense findings: one pass over the module is cheaper
            cached = self._line_ranges[line] = self._line_positions(line)
        if not cached:
            return None
        positions, copy, delta = cached
        try:
            return _shift(positions[copy if node is line else node], delta)
        except KeyError:  # pragma: no cover - every node of the line has a position
            return None

    def _line_positions(self, line: cst.SimpleStatementLine):
        """LibCST's positions for the line's nodes, computed in a module of that line
        alone, indented as it is in the text (so that continuation lines, whose
        indentation LibCST shares with the block, keep their columns); the line as
        placed there; the line offset to the text. False when the start is not known."""
        start = self._starts.get(line.body[0])
        if start is None:
            return False
        row, byte_column = start
        indent = self.lines[row - 1].encode("utf-8")[:byte_column].decode("utf-8", "replace")
        if indent.strip(" \t"):
            return False  # pragma: no cover - a simple statement line starts its line
        copy = line.with_changes(leading_lines=())
        stmt: cst.CSTNode = copy
        if indent:
            stmt = cst.If(test=cst.Name("_"), body=cst.IndentedBlock(body=[copy], indent=indent))
        mini = self.module.with_changes(body=[stmt], header=[], footer=[])
        return node_positions(mini), copy, row - (2 if indent else 1)

    def code(self, node: cst.CSTNode) -> str:
        """The node's source, as LibCST writes it (a function's is asked for by several
        facts: kept for the module's compound statements)."""
        if not isinstance(node, cst.BaseCompoundStatement):
            return self.module.code_for_node(node)
        found = self._code.get(node)
        if found is None:
            found = self._code[node] = self.module.code_for_node(node)
        return found

    @cached_property
    def lines(self) -> List[str]:
        """The text's physical lines, as Python and LibCST count them."""
        return split_lines(self.text)


def _shift(rng: CodeRange, lines: int) -> CodeRange:
    return CodeRange((rng.start.line + lines, rng.start.column), (rng.end.line + lines, rng.end.column))


class _Realign:
    """Maps positions in LibCST's regenerated code onto the original text, where LibCST
    dropped characters (form feeds before a statement; never a line break). Characters
    are matched greedily: the dropped ones are skipped in the original."""

    def __init__(self, code: str, text: str):
        self.code_index, self.text_index = LineIndex(code), LineIndex(text)
        to_text: List[int] = []
        i = 0
        for ch in code:
            while i < len(text) and text[i] != ch:
                i += 1
            to_text.append(i)
            i += 1
        if i > len(text):  # LibCST added text: never seen; no position can be trusted
            raise ValueError("LibCST's code is not a subsequence of the source")
        self.to_text = to_text + [len(text)]

    def position(self, line: int, column: int, end: bool) -> Tuple[int, int]:
        offset = self.code_index.offset((line, column))
        if end and offset > 0:  # an end is just after its last character
            return self.text_index.position(self.to_text[offset - 1] + 1)
        return self.text_index.position(self.to_text[offset])

    def range(self, rng: CodeRange) -> CodeRange:
        start = self.position(rng.start.line, rng.start.column, end=False)
        end = self.position(rng.end.line, rng.end.column, end=rng.end != rng.start)
        return CodeRange(start, end)

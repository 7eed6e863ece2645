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

from functools import cached_property
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from ..source import LineIndex, count_breaks, split_lines
from .collector import _Collector
from .facts import CallSite, ClassInfo, FunctionInfo, Scope
from .concurrency import ConcurrencyMixin
from .parallel import ParallelMixin
from .placement import PlacementMixin
from .receivers import ReceiversMixin
from .resolution import ResolutionMixin


class Analysis(ResolutionMixin, ReceiversMixin, PlacementMixin, ConcurrencyMixin, ParallelMixin):
    """Facts about one module. Build with ``Analysis(module)``."""

    def __init__(self, module: cst.Module, device_name: str = "device", text: Optional[str] = None,
                 project=None):
        self.module = module
        self.project = project  # the run's ``project.ProjectIndex`` (CLI runs over a tree), or None
        # LibCST round-trips almost exactly: it drops form feeds before a top-level
        # statement. Positions are LibCST's; ``range`` maps them onto ``text``.
        self.text = module.code if text is None else text
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
        self.torch_imports = collector.torch_imports
        self.complete_ifs = collector.complete_ifs
        self.star_imports = collector.star_imports
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
        line = 1 + count_breaks(self.text, 0, offset) if offset else 1
        out: Dict[cst.CSTNode, int] = {}
        for stmt in module.body:
            code = module.code_for_node(stmt)
            if self.text[offset:offset + len(code)] != code:
                return None  # pragma: no cover - never seen; correctness first
            out[stmt] = line
            line += count_breaks(code)
            offset += len(code)
        return out

    @cached_property
    def _realign(self) -> Optional["_Realign"]:
        """None when LibCST's code is the text (always, but for a form feed LibCST drops)."""
        if "\f" not in self.text:
            return None
        code = self.module.code
        return None if code == self.text else _Realign(code, self.text)

    def range(self, node: cst.CSTNode) -> CodeRange:
        realign = self._realign
        if realign is not None:  # positions in LibCST's code, mapped onto the text
            return realign.range(self.positions[node])
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

    @cached_property
    def lines(self) -> List[str]:
        """The text's physical lines, as Python and LibCST count them."""
        return split_lines(self.text)


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

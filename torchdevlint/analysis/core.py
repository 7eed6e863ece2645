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

from .collector import _Collector
from .facts import CallSite, ClassInfo, FunctionInfo, Scope
from .concurrency import ConcurrencyMixin
from .parallel import ParallelMixin
from .placement import PlacementMixin
from .receivers import ReceiversMixin
from .resolution import ResolutionMixin


class Analysis(ResolutionMixin, ReceiversMixin, PlacementMixin, ConcurrencyMixin, ParallelMixin):
    """Facts about one module. Build with ``Analysis(module)``."""

    def __init__(self, module: cst.Module, device_name: str = "device", text: Optional[str] = None):
        self.module = module
        self.text = module.code if text is None else text  # LibCST round-trips exactly
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
        line = 1 + self.text.count("\n", 0, offset) if offset else 1
        out: Dict[cst.CSTNode, int] = {}
        for stmt in module.body:
            code = module.code_for_node(stmt)
            if self.text[offset:offset + len(code)] != code:
                return None  # pragma: no cover - never seen; correctness first
            out[stmt] = line
            line += code.count("\n")
            offset += len(code)
        return out

    def range(self, node: cst.CSTNode) -> CodeRange:
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

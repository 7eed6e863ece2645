"""The one model of a finding that every front renders.

Positions are 1-based lines and 0-based columns internally (as LibCST gives them);
every user-facing output adds 1 to the column.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import FrozenSet, Optional, Tuple

DOCS_URL = "docs/rules.md"  # the generated rules reference, in this repository
Position = Tuple[int, int]  # (line 1-based, column 0-based, in code points)


class Applicability(str, enum.Enum):
    """How sure a fix is, as in ruff.

    SAFE: behaves the same on a GPU machine; applied by ``fix``.
    UNSAFE: may change behaviour; applied only with ``--unsafe-fixes``.
    DISPLAY: shown to the user, never applied.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY = "display"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text between ``start`` and ``end`` with ``content``."""

    start: Position
    end: Position
    content: str
    # the text the rule saw at ``start:end`` (None: not recorded). ``fix`` refuses an
    # edit whose target is anything else: a position bug must never rewrite other bytes
    expected: Optional[str] = field(default=None, compare=False)

    def to_json(self) -> dict:
        return {
            "content": self.content,
            "location": {"row": self.start[0], "column": self.start[1] + 1},
            "end_location": {"row": self.end[0], "column": self.end[1] + 1},
        }


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    edits: Tuple[Edit, ...] = ()
    # names the fix binds (e.g. an inserted ``device``): two fixes that bind the same
    # name differently are never applied in the same round
    defines: FrozenSet[str] = frozenset()
    # what keeps it from being safe, as tags tools can read (the message says it in
    # words): ``receiver`` -- the receiver is not provably torch, which the whole-run
    # index of a CLI run may still prove; ``importers`` -- the fix would run a CUDA
    # question at a library module's import, which the index may show only the run's
    # scripts do; ``constructors`` -- another module of the program may call
    # ``torch.Tensor(...)``, which the index reads (TDL005's default tensor type)
    blocked_by: FrozenSet[str] = frozenset()
    # what ``fix`` applies without ``--unsafe-fixes`` when it differs from this fix: a
    # behaviour-preserving variant (TDL001: ``device = torch.device("cuda")`` where this fix
    # defines the device with a CPU fallback). Always SAFE, never nested.
    safe: Optional["Fix"] = None

    def __post_init__(self) -> None:
        if self.safe is not None and (self.safe.applicability is not Applicability.SAFE
                                      or self.safe.safe is not None
                                      or self.applicability is Applicability.DISPLAY):
            raise ValueError("a safe variant is safe, not nested, and never of a display-only fix")

    def chosen(self, unsafe: bool) -> Optional["Fix"]:
        """The fix a run applies: with ``--unsafe-fixes`` this one; without, the safe
        variant if there is one, else this one if it is safe; None when nothing applies."""
        if not unsafe and self.safe is not None:
            return self.safe if self.safe.edits else None
        if self.edits and (self.applicability is Applicability.SAFE
                           or (unsafe and self.applicability is Applicability.UNSAFE)):
            return self
        return None

    def applies(self, unsafe: bool) -> bool:
        return self.chosen(unsafe) is not None

    @property
    def strength(self) -> Applicability:
        """The best a run can do with it: SAFE when it or its variant is safe."""
        return Applicability.SAFE if self.safe is not None else self.applicability

    def to_json(self) -> dict:
        out = {
            "applicability": self.applicability.value,
            "message": self.message,
            "edits": [e.to_json() for e in self.edits],
            "defines": sorted(self.defines),
            "blocked_by": sorted(self.blocked_by),
        }
        if self.safe is not None:
            out["safe"] = self.safe.to_json()
        return out


@dataclass(frozen=True)
class Violation:
    code: str
    name: str
    message: str
    start: Position
    end: Position
    fix: Optional[Fix] = None
    filename: str = field(default="-", compare=False)
    # in a notebook: the cell (1-based, counting every cell); rows are then the cell's
    cell: Optional[int] = None

    @property
    def where(self) -> str:
        """``cell 3:2:5`` in a notebook, ``2:5`` elsewhere (1-based column)."""
        return (f"cell {self.cell}:" if self.cell is not None else "") + f"{self.row}:{self.column}"

    @property
    def row(self) -> int:
        return self.start[0]

    @property
    def column(self) -> int:
        """1-based column, as users see it."""
        return self.start[1] + 1

    def sort_key(self):
        return (self.filename, self.cell or 0, self.start, self.code, self.message)

    @property
    def url(self) -> str:
        """The rule's section in the generated reference (the same anchor as
        ``rules.url_for``, from the violation's own name: the model needs no rules)."""
        return f"{DOCS_URL}#{self.code.lower()}-{self.name}" if self.name else f"{DOCS_URL}#{self.code.lower()}"

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "filename": self.filename,
            "location": {"row": self.start[0], "column": self.start[1] + 1},
            "end_location": {"row": self.end[0], "column": self.end[1] + 1},
            "fix": self.fix.to_json() if self.fix else None,
            "url": self.url,
            **({"cell": self.cell} if self.cell is not None else {}),
        }

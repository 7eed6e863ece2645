"""What a file must show before LibCST sees it, with nothing heavier than CPython's own
parser: the text prefilter, CPython's parse, and the gate on its tree (``words``).

The CLI screens a file here first: a file that no selected rule can match is answered
without importing the engine, the rules or LibCST (a pre-commit or editor run on a
clean file pays for Python, this module and ``ast`` only). The engine parses through
``python_parse`` too, so a syntax error reads the same on every path.
"""

from __future__ import annotations

import ast
from typing import FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

from .catalogue import TOOL_CODES, gated, may_match, tool_finding
from .model import Violation
from .words import CodeWords


def python_parse(text: str) -> Tuple[Optional[ast.Module], Optional[Violation]]:
    """CPython's tree of ``text``, or its verdict as flake8's E999 would give it."""
    try:
        return ast.parse(text), None
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        message = exc.msg
        if "\0" in text and "null bytes" in message:
            line, col = text[: text.find("\0")].count("\n") + 1, 0
        if isinstance(exc, IndentationError) or "indent" in message:
            message = f"{type(exc).__name__}: {message}"
        return None, tool_finding("TDL900", f"invalid syntax: {message}", line, col)
    except (RecursionError, MemoryError):
        return None, tool_finding("TDL900", "the file is nested too deeply for Python's parser")
    except ValueError as exc:  # NUL bytes
        line = text[: text.find("\0")].count("\n") + 1 if "\0" in text else 1
        return None, tool_finding("TDL900", f"invalid source: {exc}", line)

# above this many characters the engine screens the file itself, in the same parse: what
# a separate screen saves (importing the engine) is nothing beside parsing such a file,
# and the screen's freed tree still raised the peak of a 50,000-line file by ~2%
_LARGE = 256 * 1024


class Screened(NamedTuple):
    """What the screen leaves the engine: the codes that may fire, and where CPython saw
    each statement start (``statement_starts``: LibCST's positions are placed by it)."""

    codes: FrozenSet[str]
    starts: Optional[List[Tuple[int, int]]] = None


def screen(text: str, codes: Iterable[str]) -> Optional[Screened]:
    """The codes among ``codes`` that may fire on ``text`` (with the statements' starts
    when some may): no codes when none can (the prefilter or the gate rules them all
    out), None when the engine is to decide (the module does not parse, and the engine
    reports the syntax error; or it is large). CPython's tree is dropped before LibCST's
    is built."""
    codes = frozenset(codes)
    if not may_match(text, codes):  # (may_match leaves the tool codes out)
        return Screened(frozenset())
    if len(text) > _LARGE:
        return None  # the engine parses and gates it: a big tree parsed twice costs peak memory
    tree, error = python_parse(text)
    if error is not None or tree is None:
        return None
    passed = gated(codes, CodeWords(tree, text)) - TOOL_CODES
    return Screened(passed, statement_starts(tree) if passed else None)


def statement_starts(tree: ast.Module) -> List[Tuple[int, int]]:
    """(line, byte column) of every statement of CPython's tree, in document order: the
    order in which LibCST's walk meets its small and compound statements."""
    out: List[Tuple[int, int]] = []

    def block(body: List[ast.stmt]) -> None:
        for stmt in body:
            out.append((stmt.lineno, stmt.col_offset))
            for field in ("body", "handlers", "orelse", "finalbody", "cases"):
                value = getattr(stmt, field, None)
                if not value:
                    continue
                if field in ("handlers", "cases"):
                    for part in value:
                        block(part.body)
                else:
                    block(value)

    block(tree.body)
    return out

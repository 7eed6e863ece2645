"""What a file must show before LibCST sees it, with nothing heavier than CPython's own
parser: the text prefilter, CPython's parse, and the gate on its tree (``words``).

The CLI screens a file here first: a file that no selected rule can match is answered
without importing the engine, the rules or LibCST (a pre-commit or editor run on a
clean file pays for Python, this module and ``ast`` only). The engine parses through
``python_parse`` too, so a syntax error reads the same on every path.
"""

from __future__ import annotations

import ast
from typing import FrozenSet, Iterable, Optional, Tuple

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


def screen(text: str, codes: Iterable[str]) -> Optional[FrozenSet[str]]:
    """The codes among ``codes`` that may fire on ``text``: empty when none can (the
    prefilter or the gate rules them all out), None when the engine is to decide (the
    module does not parse, and the engine reports the syntax error; or it is large).
    CPython's tree is dropped before LibCST's is built."""
    codes = frozenset(codes)
    if not may_match(text, codes):  # (may_match leaves the tool codes out)
        return frozenset()
    if len(text) > _LARGE:
        return None  # the engine parses and gates it: a big tree parsed twice costs peak memory
    tree, error = python_parse(text)
    if error is not None or tree is None:
        return None
    return gated(codes, CodeWords(tree, text)) - TOOL_CODES

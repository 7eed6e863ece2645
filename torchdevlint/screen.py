"""What a file must show before LibCST sees it, with nothing heavier than CPython's own
parser: the text prefilter, CPython's parse, and the gate on its tree (``words``).

The CLI screens a file here first: a file that no selected rule can match is answered
without importing the engine, the rules or LibCST (a pre-commit or editor run on a
clean file pays for Python, this module and ``ast`` only). The engine parses through
``python_parse`` too, so a syntax error reads the same on every path.
"""

from __future__ import annotations

import ast
import sys
from typing import FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

from .catalogue import TOOL_CODES, gated, may_match, tool_finding
from .model import Applicability, Edit, Fix, Violation
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
        # which grammar said so: newer syntax (`type X = ...`, PEP 695) fails on an older Python
        said = f"invalid syntax (Python {sys.version_info[0]}.{sys.version_info[1]})"
        found = tool_finding("TDL900", said if message == "invalid syntax" else f"{said}: {message}", line, col)
        return None, _async_keywords(text, found) or found
    except (RecursionError, MemoryError):
        return None, tool_finding("TDL900", "the file is nested too deeply for Python's parser")
    except ValueError as exc:  # NUL bytes
        line = text[: text.find("\0")].count("\n") + 1 if "\0" in text else 1
        return None, tool_finding("TDL900", f"invalid source: {exc}", line)

# torch 0.3's spelling of `non_blocking=` (`x.cuda(async=True)`, `.to(device, async=True)`,
# `.copy_(src, async=True)`, `.type(T, async=True)`): `async` is a keyword since Python 3.7
_ASYNC_METHODS = frozenset({"cuda", "to", "copy_", "type", "pin_memory"})


def _async_keywords(text: str, found: Violation) -> Optional[Violation]:
    """The syntax error ``found`` with a fix where what keeps the file from parsing is
    torch 0.3's ``async=`` keyword argument of a tensor or module method (the file
    parses once each is ``non_blocking=``, the name torch 0.4 gave it); else None."""
    if "async" not in text:
        return None
    import io
    import tokenize  # (here: a clean file's screen imports nothing it does not need)

    layout = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in layout]
    except (tokenize.TokenError, SyntaxError):
        return None
    spots = []
    calls: List[Optional[str]] = []  # per open bracket: the method it calls, `x.<name>(`
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in "([{":
            method = (tokens[i - 1].string if tok.string == "(" and i >= 2 and tokens[i - 1].type == tokenize.NAME
                      and tokens[i - 2].string == "." else None)
            calls.append(method)
        elif tok.type == tokenize.OP and tok.string in ")]}":
            if calls:
                calls.pop()
        elif (tok.string == "async" and calls and calls[-1] in _ASYNC_METHODS and tokens[i - 1].string in "(,"
              and i + 1 < len(tokens) and tokens[i + 1].string == "="):
            spots.append(tok.start)
    if not spots:
        return None
    lines = text.splitlines(keepends=True)
    for line, col in reversed(spots):  # (one per token: later ones first keep columns right)
        lines[line - 1] = lines[line - 1][:col] + "non_blocking" + lines[line - 1][col + len("async"):]
    try:
        ast.parse("".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # something else is wrong too
    fix = Fix(Applicability.SAFE, "Spell it `non_blocking=` (torch 0.4's name for `async=`)",
              tuple(Edit((line, col), (line, col + len("async")), "non_blocking", "async") for line, col in spots))
    return Violation(found.code, found.name, f"{found.message}: `async=` is torch 0.3's `non_blocking=`, and a "
                     "keyword since Python 3.7", found.start, found.end, fix, found.filename)


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

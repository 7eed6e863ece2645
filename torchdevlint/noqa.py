"""``# noqa`` handling, with flake8's syntax and line mapping.

A ``# noqa`` on any physical line of a multi-line statement covers the whole
statement, as flake8 does, so the CLI and the flake8 plugin agree.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, FrozenSet, Optional, Sequence, Set, Tuple

from .source import split_lines

# flake8's own pattern (flake8/defaults.py), so both fronts read comments alike.
NOQA = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)

ALL = frozenset({"*"})


def noqa_map(text: str) -> Dict[int, FrozenSet[str]]:
    """Line -> codes suppressed there (``ALL`` for a bare ``# noqa``)."""
    if "noqa" not in text.lower():
        return {}
    per_line: Dict[int, FrozenSet[str]] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text, newline=None).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        tokens = []
    # Map each comment to the range of lines of its logical line.
    start_line: Optional[int] = None
    pending: list = []
    for tok in tokens:
        if start_line is None and tok.type not in (tokenize.NL, tokenize.COMMENT):
            start_line = tok.start[0]
        if tok.type == tokenize.COMMENT:
            codes = _parse(tok.string)
            if codes is not None:
                pending.append((tok.start[0], codes))
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            if tok.type == tokenize.NL and start_line is not None:
                continue  # a line break inside a logical line
            first = start_line if start_line is not None else tok.start[0]
            for _line, codes in pending:
                for line in range(min(first, _line), max(tok.end[0], _line) + 1):
                    per_line[line] = _merge(per_line.get(line), codes)
            pending, start_line = [], None
    if not tokens:  # untokenizable text: fall back to physical lines
        for number, line in enumerate(split_lines(text), 1):
            codes = _parse(line)
            if codes is not None:
                per_line[number] = codes
    return per_line


def _parse(comment: str) -> Optional[FrozenSet[str]]:
    m = NOQA.search(comment)
    if not m:
        return None
    if not m.group("codes"):
        return ALL
    return frozenset(c.upper() for c in _CODE.findall(m.group("codes")))


def _merge(a: Optional[FrozenSet[str]], b: FrozenSet[str]) -> FrozenSet[str]:
    if a is None:
        return b
    if a is ALL or b is ALL:
        return ALL
    return a | b


def suppressed(codes: Optional[FrozenSet[str]], code: str) -> bool:
    if codes is None:
        return False
    # flake8 matches by prefix: "# noqa: TDL" suppresses every TDL code.
    return codes is ALL or any(code.startswith(c) for c in codes)


def add_noqa(text: str, found: Sequence[Tuple[int, str]]) -> Tuple[str, int]:
    """Append ``# noqa: CODE`` for each (line, code) in ``found``, on the line flake8 and
    this tool read for it: the last line of the statement (a comment is legal there,
    and a noqa on any line of a statement covers the whole statement). Merges with an
    existing noqa comment; returns the new text and how many codes were added."""
    by_line: Dict[int, Set[str]] = {}
    ends = _statement_ends(text)
    for line, code in found:
        by_line.setdefault(ends.get(line, line), set()).add(code)
    lines = split_lines(text, keepends=True)
    added = 0
    for number, codes in sorted(by_line.items()):
        if number > len(lines):
            continue
        raw = lines[number - 1]
        body = raw.rstrip("\r\n")
        ending = raw[len(body):]
        existing = _parse(_comment_of(body) or "")
        if existing is ALL:
            continue
        missing = sorted(c for c in codes if not (existing and suppressed(existing, c)))
        if not missing:
            continue
        m = NOQA.search(body) if existing else None
        if m is not None:  # `# noqa: A` -> `# noqa: A, B`
            merged = ", ".join(sorted(existing | set(missing)))
            body = body[:m.start()] + f"# noqa: {merged}" + body[m.end():]
        else:
            body = body.rstrip() + f"  # noqa: {', '.join(missing)}"
        lines[number - 1] = body + ending
        added += len(missing)
    return "".join(lines), added


def _statement_ends(text: str) -> Dict[int, int]:
    """Line -> the last line of the statement it belongs to (multi-line statements)."""
    out: Dict[int, int] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text, newline=None).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return out
    first: Optional[int] = None
    for tok in tokens:
        if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        if first is None:
            first = tok.start[0]
        if tok.type == tokenize.NEWLINE:
            for line in range(first, tok.start[0] + 1):
                out[line] = tok.start[0]
            first = None
    return out


def _comment_of(line: str) -> Optional[str]:
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return tok.string
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return None

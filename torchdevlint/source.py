"""Bytes <-> text, exactly: PEP 263 encodings, a UTF-8 BOM and every newline style.

The engine works on text; ``fix`` must write back bytes that differ from the original
only inside the rewritten spans. So the BOM is split off and re-added, the declared
encoding is used both ways, and newlines are never translated.
"""

from __future__ import annotations

import bisect
import codecs
import io
import re
import tokenize
from dataclasses import dataclass
from typing import List, Optional, Sequence

from .model import Edit, Position

# Python's own notion of a line break (its tokenizer's and LibCST's): \r\n, \r or \n.
# Never str.splitlines(), which also breaks on form feeds, \v, \x1c-\x1e, \x85, U+2028
# and U+2029, and so disagrees with every position Python and LibCST report.
_NEWLINE = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, keepends: bool = False) -> List[str]:
    """The physical lines of ``text`` as Python counts them (see ``_NEWLINE``)."""
    if keepends:
        starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
        lines = [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
        return lines[:-1] if lines and not lines[-1] else lines
    lines = _NEWLINE.split(text)
    return lines[:-1] if lines and not lines[-1] else lines


class Outline:
    """The block structure of physical lines, read by indentation alone: for each line,
    the nearest earlier code line (not blank, not a comment) indented less. Following
    those links from a line walks up through the headers that enclose it (``if``,
    ``for``, ``def``...) in O(depth), however long the blocks are."""

    def __init__(self, lines: Sequence[str]):
        self.lines = lines
        self.parent: List[int] = [-1] * len(lines)  # 0-based indices; -1: none
        stack: List[tuple] = []  # (indentation, index) of the open code lines
        for i, text in enumerate(lines):
            stripped = text.lstrip()
            if not stripped or stripped.startswith("#"):
                continue
            depth = len(text) - len(stripped)
            while stack and stack[-1][0] >= depth:
                stack.pop()
            self.parent[i] = stack[-1][1] if stack else -1
            stack.append((depth, i))

    def headers(self, line: int, top: int = 1):
        """The enclosing lines of ``line`` (1-based), innermost first, down to ``top``:
        (1-based line, its text without indentation)."""
        if not 0 < line <= len(self.lines):
            return
        i = self.parent[line - 1] if self.lines[line - 1].strip() else -1
        while i >= top - 1:
            yield i + 1, self.lines[i].lstrip()
            i = self.parent[i]


def count_breaks(text: str, start: int = 0, end: Optional[int] = None) -> int:
    """How many line breaks (Python's notion) lie in ``text[start:end]``."""
    return len(_NEWLINE.findall(text, start, len(text) if end is None else end))


def shown(name: str) -> str:
    """A file name (or message) safe to print on one line of any terminal or CI log:
    control characters (a newline that would start a forged ``::warning``), line and
    paragraph separators, and undecodable bytes (surrogate escapes) become backslash
    escapes."""
    if name.isprintable():
        return name
    out = []
    for ch in name:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        elif 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that was not valid in the file system's encoding
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


class DecodeError(Exception):
    """The bytes cannot be turned into text; ``line`` is 1-based."""

    def __init__(self, message: str, line: int = 1):
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class SourceText:
    text: str
    encoding: str = "utf-8"
    bom: bool = False

    @property
    def newline(self) -> str:
        m = _NEWLINE.search(self.text)
        return m.group(0) if m else "\n"

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode(data: bytes) -> SourceText:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # unknown or conflicting coding declaration
        line = getattr(exc, "lineno", None) or 1
        raise DecodeError(str(exc).replace("encoding problem", "encoding declaration"), line)
    bom = False
    if encoding == "utf-8-sig":
        encoding, bom = "utf-8", data.startswith(codecs.BOM_UTF8)
        if bom:
            data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DecodeError(
            f"cannot decode byte 0x{data[exc.start]:02x} as {encoding}"
            f" (declare the file's encoding with a PEP 263 comment, or re-save it as UTF-8)",
            line,
        )
    return SourceText(text, encoding, bom)


class LineIndex:
    """Maps (line, column) positions to offsets in a text, for any newline style."""

    def __init__(self, text: str):
        self.text = text
        self.starts: List[int] = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offset(self, pos: Position) -> int:
        line, col = pos
        if line > len(self.starts):
            return len(self.text)
        return self.starts[line - 1] + col

    def position(self, offset: int) -> Position:
        line = bisect.bisect_right(self.starts, offset)
        return (line, offset - self.starts[line - 1])

    def line_text(self, line: int) -> str:
        if line > len(self.starts):
            return ""
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits (the caller guarantees it)."""
    index = LineIndex(text)
    spans = sorted(
        ((index.offset(e.start), index.offset(e.end), e.content) for e in edits), reverse=True
    )
    out = text
    for start, end, content in spans:
        out = out[:start] + content + out[end:]
    return out

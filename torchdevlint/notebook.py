"""Jupyter notebooks: the code cells as one module, findings per cell, byte-exact fixes.

The code cells are analysed as one module in cell order (imports and a ``device`` of an
earlier cell count), each preceded by a marker comment line so that findings map back to
(cell, line) and fixed text splits back into cells. IPython magics and shell lines
(``%``, ``%%``, ``!``, ``x = !cmd``, ``obj?``) are masked as ``pass`` lines carrying an
index, never parsed and never changed: they are put back verbatim.

Writing back keeps every byte of the JSON outside the ``source`` of the cells that
changed (outputs, metadata, indentation, key order, escapes, trailing newline). No
maintained notebook library does that: nbformat re-serialises the whole document
(indentation, key order and escapes may all change). So the small scanner below locates
each cell's ``source`` value in the raw text, and only those spans are rewritten, in
the layout the notebook already uses (a list of lines or one string).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Dict, List, Optional, Tuple

CELL_MARK = "# torchdevlint: cell {}"
_CELL_RE = re.compile(r"^# torchdevlint: cell (\d+)$")
_MAGIC_MARK = "pass  # torchdevlint: magic {}"
_MAGIC_RE = re.compile(r"^([ \t]*)pass  # torchdevlint: magic (\d+)$")
# a line IPython transforms before Python sees it
_MAGIC_LINE = re.compile(r"^[ \t]*(?:[%!?]|[\w.]+[ \t]*=[ \t]*[%!]|[\w.]+\?\??[ \t]*$)")


def is_notebook_module(text: str) -> bool:
    """Whether ``text`` is a notebook's code cells as one module (``Notebook.module``):
    what the analysis takes for a script, whose cells run top to bottom."""
    return _CELL_RE.match(text[:text.find("\n")] if "\n" in text else text) is not None


class NotebookError(ValueError):
    """Not a notebook this tool can read (the message says why)."""


@dataclass
class _Cell:
    index: int  # in the notebook's cell list
    text: str  # the joined source
    span: Tuple[int, int]  # of the source value in the raw JSON
    as_list: bool


class Notebook:
    """A notebook's code cells as one module (``module``), and the way back."""

    def __init__(self, raw: str):
        self.raw = raw
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise NotebookError(f"invalid notebook JSON: {exc}")
        cells = doc.get("cells") if isinstance(doc, dict) else None
        if not isinstance(cells, list):
            raise NotebookError("invalid notebook: no `cells` list (nbformat 4 is supported)")
        spans = _source_spans(raw)
        self.cells: List[_Cell] = []
        for i, cell in enumerate(cells):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            if isinstance(source, list) and all(isinstance(s, str) for s in source):
                text, as_list = "".join(source), True
            elif isinstance(source, str):
                text, as_list = source, False
            else:
                raise NotebookError(f"invalid notebook: cell {i + 1} has a source that is not text")
            if i not in spans:
                raise NotebookError(f"invalid notebook: cannot locate the source of cell {i + 1}")
            self.cells.append(_Cell(i, text, spans[i], as_list))
        self.magics: List[str] = []
        parts = []
        for cell in self.cells:
            parts.append(CELL_MARK.format(cell.index + 1) + "\n")
            parts.append(self._mask(cell.text))
            if cell.text and not cell.text.endswith("\n"):
                parts.append("\n")
        self.module = "".join(parts)
        # module line -> (cell number as users see it, line in the cell)
        self._line_map: Dict[int, Tuple[int, int]] = {}
        current, first = 0, 0
        for number, line in enumerate(self.module.split("\n"), 1):
            m = _CELL_RE.match(line)
            if m:
                current, first = int(m.group(1)), number + 1
            else:
                self._line_map[number] = (current, number - first + 1)

    def _mask(self, text: str) -> str:
        lines = text.split("\n")
        whole = next((line for line in lines if line.strip()), "").lstrip().startswith("%%")
        out = []
        for line in lines:
            if line.strip() and (whole or _MAGIC_LINE.match(line)):
                indent = "" if whole else line[:len(line) - len(line.lstrip())]
                out.append(indent + _MAGIC_MARK.format(len(self.magics)))
                self.magics.append(line)
            else:
                out.append(line)
        return "\n".join(out)

    def module_line(self, cell: int, line: int) -> int:
        """The line of ``module`` for a line of a cell (the inverse of ``locate``)."""
        return next((n for n, where in self._line_map.items() if where == (cell, line)), 0)

    def locate(self, line: int) -> Tuple[int, int]:
        """(cell number, line in that cell) for a line of ``module``."""
        return self._line_map.get(line, (0, line))

    def with_module(self, fixed: str) -> str:
        """The raw notebook with the code cells replaced by the fixed module's, only
        where a cell changed; every other byte as it was."""
        chunks: Dict[int, List[str]] = {}
        current: Optional[int] = None
        lines = fixed.split("\n")
        if fixed.endswith("\n"):
            lines.pop()  # the module's last newline ends the last cell's last line
        for line in lines:
            m = _CELL_RE.match(line)
            if m:
                current = int(m.group(1)) - 1
                chunks[current] = []
            elif current is not None:
                chunks[current].append(self._unmask(line))
        out, cursor = [], 0
        for cell in self.cells:
            text = "\n".join(chunks.get(cell.index, []))
            if cell.text.endswith("\n"):
                text += "\n"  # a cell's own last newline is the line break before the next marker
            if text == cell.text:
                continue
            start, end = cell.span
            out.append(self.raw[cursor:start])
            out.append(_render(self.raw[start:end], text, cell.as_list))
            cursor = end
        out.append(self.raw[cursor:])
        return "".join(out)

    def _unmask(self, line: str) -> str:
        m = _MAGIC_RE.match(line)
        return self.magics[int(m.group(2))] if m else line


def _render(old: str, text: str, as_list: bool) -> str:
    """The new source value, laid out as the old one was."""
    ascii_only = old.isascii() and "\\u" in old
    if not as_list:
        return json.dumps(text, ensure_ascii=ascii_only)
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)
    items = [json.dumps(line, ensure_ascii=ascii_only) for line in lines]
    m = re.match(r"\[(\s*)", old)
    opening = m.group(1) if m else ""
    m = re.search(r"(\s*)\]$", old)
    closing = m.group(1) if m else ""
    separator = "," + opening if opening else ", "
    if not items:
        return "[]"
    return "[" + opening + separator.join(items) + closing + "]"


_WS = re.compile(r"[ \t\n\r]*")


def _source_spans(raw: str) -> Dict[int, Tuple[int, int]]:
    """Cell index -> (start, end) of ``cells[i].source`` in the raw JSON text."""
    spans: Dict[int, Tuple[int, int]] = {}
    decoder = json.JSONDecoder()

    def skip(i: int) -> int:
        return _WS.match(raw, i).end()  # type: ignore[union-attr]

    def value(i: int, path: tuple) -> int:
        i = skip(i)
        if raw.startswith("{", i):
            i = skip(i + 1)
            if raw.startswith("}", i):
                return i + 1
            while True:
                key, i = scanstring(raw, skip(i) + 1)
                i = skip(i)
                if not raw.startswith(":", i):
                    raise NotebookError("invalid notebook JSON")
                start = skip(i + 1)
                end = value(start, path + (key,))
                if len(path) == 2 and path[0] == "cells" and key == "source":
                    spans[path[1]] = (start, end)
                i = skip(end)
                if raw.startswith(",", i):
                    i += 1
                    continue
                return i + 1
        if raw.startswith("[", i):
            i = skip(i + 1)
            if raw.startswith("]", i):
                return i + 1
            n = 0
            while True:
                end = value(i, path + (n,) if path == ("cells",) else path + (None,))
                i = skip(end)
                n += 1
                if raw.startswith(",", i):
                    i += 1
                    continue
                return i + 1
        _, end = decoder.raw_decode(raw, i)
        return end

    value(0, ())
    return spans

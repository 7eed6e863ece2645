"""``torchdevlint server``: the Language Server Protocol over stdio (pygls).

The same engine and settings as ``check`` (the nearest ``pyproject.toml`` with a
``[tool.torchdevlint]`` table, found from the document's folder):

- diagnostics on open, on save and while typing (debounced: one run per pause);
- quick fixes per finding, titled with their applicability (unsafe ones say so; display
  ones are not offered as edits); "fix all safe fixes" for the document
  (``source.fixAll``); a ``# noqa: CODE`` action per finding;
- hover on a finding: the rule's documentation.
"""

from __future__ import annotations

import asyncio
import os
from typing import Dict, List, Optional
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from . import __version__
from .engine import check_source, fix_source
from .model import Applicability, Edit, Violation
from .noqa import add_noqa
from .rules import find
from .settings import ConfigError, Settings, find_pyproject, load
from .source import split_lines

DEBOUNCE_S = 0.25
FIX_ALL = lsp.CodeActionKind.SourceFixAll


class TorchDevLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("torchdevlint", __version__)
        self.findings: Dict[str, List[Violation]] = {}
        self.pending: Dict[str, asyncio.TimerHandle] = {}
        self.settings_by_folder: Dict[str, Settings] = {}

    # ------------------------------------------------------------ settings
    def settings_for(self, uri: str) -> Settings:
        folder = os.path.dirname(_path(uri)) or os.getcwd()
        if folder not in self.settings_by_folder:
            try:
                self.settings_by_folder[folder] = load(find_pyproject(folder))
            except ConfigError as exc:
                self.window_show_message(lsp.ShowMessageParams(
                    lsp.MessageType.Error, f"torchdevlint: {exc}"))
                self.settings_by_folder[folder] = Settings()
        return self.settings_by_folder[folder]

    # ---------------------------------------------------------- diagnostics
    def lint(self, uri: str) -> None:
        self.pending.pop(uri, None)
        doc = self.workspace.get_text_document(uri)
        path = _path(uri) or uri
        found = check_source(doc.source, path, self.settings_for(uri))
        self.findings[uri] = found
        lines = split_lines(doc.source)
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, version=doc.version, diagnostics=[_diagnostic(v, lines) for v in found]))

    def lint_later(self, uri: str) -> None:
        loop = asyncio.get_event_loop()
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = loop.call_later(DEBOUNCE_S, self.lint, uri)


server = TorchDevLintServer()


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TorchDevLintServer, params: lsp.DidOpenTextDocumentParams) -> None:
    ls.lint(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TorchDevLintServer, params: lsp.DidChangeTextDocumentParams) -> None:
    ls.lint_later(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: TorchDevLintServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.settings_by_folder.clear()  # a saved pyproject.toml may have changed them
    ls.lint(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: TorchDevLintServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.findings.pop(uri, None)
    pending = ls.pending.pop(uri, None)
    if pending is not None:
        pending.cancel()
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# ---------------------------------------------------------------- code actions
@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
    code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL]))
def code_actions(ls: TorchDevLintServer, params: lsp.CodeActionParams) -> List[lsp.CodeAction]:
    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)
    text = doc.source
    lines = split_lines(text)
    found = ls.findings.get(uri)
    if found is None:
        found = check_source(text, _path(uri) or uri, ls.settings_for(uri))
    wanted = params.context.only
    actions: List[lsp.CodeAction] = []
    if not wanted or lsp.CodeActionKind.QuickFix in wanted:
        for v in found:
            if not _overlaps(v, params.range, lines):
                continue
            diagnostic = _diagnostic(v, lines)
            # the safe variant first (preferred), then the fix itself
            for fix in ([v.fix.safe, v.fix] if v.fix is not None else []):
                if fix is None or not fix.edits or fix.applicability is Applicability.DISPLAY:
                    continue
                label = " (safe)" if fix.applicability is Applicability.SAFE else " (unsafe: may change behaviour)"
                actions.append(lsp.CodeAction(
                    title=f"{v.code}: {fix.message}{label}", kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic], is_preferred=fix.applicability is Applicability.SAFE,
                    edit=lsp.WorkspaceEdit(changes={uri: [_text_edit(e, lines) for e in fix.edits]})))
            if not v.code.startswith("TDL9"):
                edit = _noqa_edit(text, v)
                if edit is not None:
                    actions.append(lsp.CodeAction(
                        title=f"{v.code}: silence on this line (# noqa: {v.code})",
                        kind=lsp.CodeActionKind.QuickFix, diagnostics=[diagnostic],
                        edit=lsp.WorkspaceEdit(changes={uri: [edit]})))
    if not wanted or any(str(k).startswith("source") for k in wanted):
        outcome = fix_source(text, _path(uri) or uri, ls.settings_for(uri), unsafe=False)
        if outcome.changed:
            n = sum(outcome.applied.values())
            actions.append(lsp.CodeAction(
                title=f"torchdevlint: apply {n} safe fix{'es' if n != 1 else ''}",
                kind=FIX_ALL,
                edit=lsp.WorkspaceEdit(changes={uri: [_whole(text, outcome.text)]})))
    return actions


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: TorchDevLintServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
    uri = params.text_document.uri
    lines = split_lines(ls.workspace.get_text_document(uri).source)
    point = lsp.Range(params.position, params.position)
    for v in ls.findings.get(uri, []):
        if _overlaps(v, point, lines):
            try:
                docs = find(v.code).docs()
            except KeyError:
                continue
            return lsp.Hover(contents=lsp.MarkupContent(lsp.MarkupKind.Markdown, docs),
                             range=_range(v.start, v.end, lines))
    return None


# ------------------------------------------------------------------ positions
def _utf16(line: str, column: int) -> int:
    """LSP counts columns in UTF-16 code units; the engine counts code points."""
    return len(line[:column].encode("utf-16-le")) // 2


def _position(pos, lines: List[str]) -> lsp.Position:
    line, column = pos
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return lsp.Position(line=max(line - 1, 0), character=_utf16(text, column))


def _range(start, end, lines: List[str]) -> lsp.Range:
    return lsp.Range(_position(start, lines), _position(end, lines))


def _overlaps(v: Violation, rng: lsp.Range, lines: List[str]) -> bool:
    r = _range(v.start, v.end, lines)
    before = (r.end.line, r.end.character) < (rng.start.line, rng.start.character)
    after = (r.start.line, r.start.character) > (rng.end.line, rng.end.character)
    return not (before or after)


def _diagnostic(v: Violation, lines: List[str]) -> lsp.Diagnostic:
    severity = lsp.DiagnosticSeverity.Error if v.code.startswith("TDL9") else lsp.DiagnosticSeverity.Warning
    return lsp.Diagnostic(
        range=_range(v.start, v.end, lines), message=v.message, severity=severity, code=v.code,
        source="torchdevlint",
        data={"applicability": v.fix.applicability.value if v.fix else None})


def _text_edit(e: Edit, lines: List[str]) -> lsp.TextEdit:
    return lsp.TextEdit(range=_range(e.start, e.end, lines), new_text=e.content)


def _whole(old: str, new: str) -> lsp.TextEdit:
    lines = split_lines(old)
    end = (len(lines) + 1, 0) if old.endswith(("\n", "\r")) or not lines else (len(lines), len(lines[-1]))
    return lsp.TextEdit(range=_range((1, 0), end, lines), new_text=new)


def _noqa_edit(text: str, v: Violation) -> Optional[lsp.TextEdit]:
    new, added = add_noqa(text, [(v.row, v.code)])
    if not added:
        return None
    old_lines, new_lines = split_lines(text), split_lines(new)
    for i, (a, b) in enumerate(zip(old_lines, new_lines)):
        if a != b:  # the one line add_noqa changed
            return lsp.TextEdit(range=_range((i + 1, 0), (i + 1, len(a)), old_lines), new_text=b)
    return None


def _path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else ""


def main() -> int:
    server.start_io()
    return 0

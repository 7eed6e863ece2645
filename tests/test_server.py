"""The language server end to end, with a real LSP client (pytest-lsp over stdio)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

SOURCE = ('import torch\ndevice = torch.device("cuda")\nx = torch.zeros(1).cuda()\n'
          "torch.cuda.set_device(1)\n")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "torchdevlint", "server"]))
async def client(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    (root / "pyproject.toml").write_text('[tool.torchdevlint]\nignore = ["TDL101"]\n')
    lsp_client.root = root
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri()))
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, text: str = SOURCE, name: str = "train.py") -> str:
    uri = (Path(client.root) / name).as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    return uri


async def test_diagnostics_quick_fix_noqa_and_fix_all(client: LanguageClient):
    uri = _open(client)
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    (diagnostic,) = client.diagnostics[uri]  # TDL101 is ignored by the project's pyproject.toml
    assert diagnostic.code == "TDL001" and diagnostic.source == "torchdevlint"
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (2, 4)

    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri), range=diagnostic.range,
        context=lsp.CodeActionContext(diagnostics=[diagnostic])))
    titles = [a.title for a in actions]
    quick = next(a for a in actions if a.is_preferred)
    assert quick.title.startswith("TDL001: ") and "unsafe" not in quick.title
    (edit,) = quick.edit.changes[uri]
    assert edit.new_text == "to(device)"
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.character) == (2, 19, 25)
    assert "TDL001: silence on this line (# noqa: TDL001)" in titles
    noqa = next(a for a in actions if "noqa" in a.title).edit.changes[uri][0]
    assert noqa.new_text == "x = torch.zeros(1).cuda()  # noqa: TDL001"
    fix_all = next(a for a in actions if a.kind == lsp.CodeActionKind.SourceFixAll)
    assert fix_all.title == "torchdevlint: apply 1 safe fix"

    # the client applies the quick fix: the diagnostic goes away (debounced re-lint)
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[lsp.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)]))
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[uri]) == []


async def _actions_on_its_one_diagnostic(client: LanguageClient, text: str, name: str):
    uri = _open(client, text, name)
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    (diagnostic,) = client.diagnostics[uri]
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri), range=diagnostic.range,
        context=lsp.CodeActionContext(diagnostics=[diagnostic])))
    return uri, actions


async def test_unsafe_fixes_are_labelled_and_hover_shows_the_rule(client: LanguageClient):
    # a receiver that may not be torch: only an unsafe fix
    _, actions = await _actions_on_its_one_diagnostic(client, "import torch\nx = batch.cuda()\n", "script.py")
    fixes = [a for a in actions if a.title.startswith("TDL001: Use")]
    assert fixes and all("(unsafe: may change behaviour)" in a.title for a in fixes)
    assert not any(a.kind == lsp.CodeActionKind.SourceFixAll for a in actions)  # nothing safe
    # a tensor: the exact device (safe, preferred) and the CPU fallback (unsafe)
    uri, actions = await _actions_on_its_one_diagnostic(client, "import torch\nx = torch.zeros(1).cuda()\n", "script2.py")
    safe, unsafe = [a for a in actions if a.title.startswith("TDL001: Use")]
    assert safe.is_preferred and safe.title.endswith("(safe)") and "falls back" not in safe.title
    assert unsafe.title.endswith("(unsafe: may change behaviour)") and "falls back to the CPU" in unsafe.title
    result = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=lsp.Position(1, 20)))
    assert result.contents.value.startswith("# TDL001 `bare-cuda-call`")
    assert "## Fix safety" in result.contents.value

"""Where users work (#13): notebooks, adoption with --add-noqa, grouped output, help."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import FIXTURES, cli

NOTEBOOK = FIXTURES / "notebooks" / "train.ipynb"


def _copy(tmp_path):
    target = tmp_path / "train.ipynb"
    shutil.copy(NOTEBOOK, target)
    return target


def test_a_notebook_is_checked_cell_by_cell(tmp_path):
    _copy(tmp_path)
    r = cli("check", "--no-cache", "train.ipynb", cwd=tmp_path)
    lines = r.stdout.decode().splitlines()
    assert lines[:3] == [
        "train.ipynb:cell 3:1:9: TDL001 [*] `.cuda()` without a device uses the implicit current device"
        " (cuda:0 unless something set it); pass an explicit device",
        "train.ipynb:cell 4:1:5: TDL001 [*] `.cuda()` without a device uses the implicit current device"
        " (cuda:0 unless something set it); pass an explicit device",
        "train.ipynb:cell 6:1:1: TDL101 `set_device` changes the current device for all later"
        " implicit-device code in this process; prefer an explicit `torch.device` (or"
        " `with torch.cuda.device(k):`)",
    ]
    data = json.loads(cli("check", "--no-cache", "--output-format", "json", "train.ipynb", cwd=tmp_path).stdout)
    assert [(d["cell"], d["location"]["row"]) for d in data] == [(3, 1), (4, 1), (6, 1)]
    # the %%time cell is masked whole: its .cuda() is never parsed
    assert not any(d["cell"] == 5 for d in data)


def test_a_notebook_is_fixed_byte_exactly_outside_the_changed_cells(tmp_path):
    target = _copy(tmp_path)
    before = target.read_text(encoding="utf-8")
    r = cli("fix", "--no-cache", "--unsafe-fixes", "train.ipynb", cwd=tmp_path)
    assert r.returncode == 1  # the TDL101 is left
    after = target.read_text(encoding="utf-8")
    old, new = json.loads(before), json.loads(after)
    changed = [i for i, (a, b) in enumerate(zip(old["cells"], new["cells"])) if a != b]
    assert changed == [1, 2, 3, 5]  # the migration runs the global set_device only with CUDA (TDL008)
    for i in changed:  # only the source changed, and magics are kept verbatim
        assert {k: v for k, v in old["cells"][i].items() if k != "source"} == \
            {k: v for k, v in new["cells"][i].items() if k != "source"}
    assert new["cells"][1]["source"] == [
        "%matplotlib inline\n", "!pip install -q torch\n", "import torch\n", "import torch.nn as nn\n",
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")']
    assert new["cells"][3]["source"][0] == "x = torch.randn(8, 4).to(device)  # a batch\n"
    assert new["cells"][3]["source"][2] == "files = !ls\n"
    assert "".join(new["cells"][5]["source"]).startswith("if torch.cuda.is_available():\n    torch.cuda.set_device(0)\n")
    # every byte outside the rewritten source values is the same
    spans_before = before.split('"source": ')
    spans_after = after.split('"source": ')
    assert len(spans_before) == len(spans_after)
    for i, (a, b) in enumerate(zip(spans_before, spans_after)):
        if i - 1 not in changed:
            assert a[a.index("]") if i else 0:] == b[b.index("]") if i else 0:] or a == b
    tail = before[before.rindex("]"):]
    assert after.endswith(tail)
    # idempotent
    cli("fix", "--no-cache", "--unsafe-fixes", "train.ipynb", cwd=tmp_path)
    assert target.read_text(encoding="utf-8") == after


def test_a_notebook_fix_diff_applies(tmp_path):
    target = _copy(tmp_path)
    r = cli("fix", "--diff", "--no-cache", "--unsafe-fixes", "train.ipynb", cwd=tmp_path)
    assert r.returncode == 1
    patch = r.stdout.decode()
    assert '-    "model = nn.Linear(4, 2).cuda()\\n",' in patch
    assert '+    "model = nn.Linear(4, 2).to(device)\\n",' in patch
    assert target.read_bytes() == NOTEBOOK.read_bytes()


@pytest.mark.parametrize("content,message", [
    ('{"cells": [ .cuda()', "TDL900 invalid notebook JSON"),
    ('{"nbformat": 4, "x": ".cuda()"}', "TDL900 invalid notebook: no `cells` list"),
    ('{"cells": [{"cell_type": "code", "source": 3}], "x": ".cuda()"}', "has a source that is not text"),
])
def test_a_malformed_notebook_is_a_finding(tmp_path, content, message):
    (tmp_path / "bad.ipynb").write_text(content)
    r = cli("check", "--no-cache", ".", cwd=tmp_path)
    assert r.returncode == 1 and message in r.stdout.decode()


def test_add_noqa_adopts_a_repository_idempotently(tmp_path):
    (tmp_path / "a.py").write_text(
        "import torch\nx = torch.zeros(1).cuda()  # noqa: E501\ny = torch.cat([\n"
        "    torch.zeros(1).cuda(),\n    torch.ones(1)])\ntorch.cuda.set_device(1)\n")
    _copy(tmp_path)
    assert cli("check", "--no-cache", ".", cwd=tmp_path).returncode == 1
    r = cli("check", "--no-cache", "--add-noqa", ".", cwd=tmp_path)
    assert r.returncode == 0 and "Added 6 noqa directives in 2 files." in r.stderr.decode()
    assert (tmp_path / "a.py").read_text() == (
        "import torch\nx = torch.zeros(1).cuda()  # noqa: E501, TDL001\ny = torch.cat([\n"
        "    torch.zeros(1).cuda(),\n    torch.ones(1)])  # noqa: TDL001\n"
        "torch.cuda.set_device(1)  # noqa: TDL101\n")
    assert cli("check", "--no-cache", ".", cwd=tmp_path).returncode == 0
    r = cli("check", "--no-cache", "--add-noqa", ".", cwd=tmp_path)
    assert "Added 0 noqa directives" in r.stderr.decode()
    # flake8 reads the same comments
    r = cli("check", "--no-cache", "a.py", cwd=tmp_path)
    assert r.returncode == 0


def test_grouped_output(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(1).cuda()\ntorch.cuda.set_device(1)\n")
    (tmp_path / "b.py").write_text("import torch\ny = torch.ones(1).cuda()\n")
    out = cli("check", "--no-cache", "--output-format", "grouped", ".", cwd=tmp_path).stdout.decode()
    assert out.startswith("a.py:\n  2:5 TDL001 ")
    assert "\n  3:1 TDL101 " in out and "\n\nb.py:\n  2:5 TDL001 " in out


def test_select_repeated_adds_up(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(1).cuda()\ntorch.cuda.set_device(1)\n")
    out = cli("check", "--no-cache", "--select", "TDL001", "--select", "TDL101", "a.py", cwd=tmp_path).stdout
    assert b"TDL001" in out and b"TDL101" in out


@pytest.mark.parametrize("command", ["check", "fix", "rule", "rules", "sim", "server"])
def test_every_command_has_help_with_examples(command):
    import argparse

    from torchdevlint.cli import build_parser

    out = cli(command, "--help").stdout.decode()
    assert "examples:" in out
    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for action in subparsers.choices[command]._actions:
        assert action.help, f"{command}: {action.option_strings or action.dest} has no help"


def test_check_help_explains_the_markers_and_unsafe_fixes_shows():
    out = cli("check", "--help").stdout.decode()
    assert "[-] some are" in out
    assert "also show fixes that may change behaviour" in " ".join(out.split())


def test_rules_states_fixability_as_the_readme_does():
    out = cli("rules").stdout.decode()
    readme = (FIXTURES.parent / "README.md").read_text()
    import re

    for code, fix in re.findall(r"^\| (TDL\d\d\d) \| [\w-]+ \| .*? \| (.*?) \|$", readme, re.M):
        if not code.startswith("TDL9"):
            assert f"fix: {fix}" in out, code


def test_a_notebook_is_a_script_its_device_defined_once_where_it_starts(tmp_path):
    # the same code as a .py file reads as a library (no main guard, no module-level work of
    # its own functions but a kept result): each function would get its own device; a
    # notebook runs top to bottom, so it gets one, after its imports (audiocraft's demos)
    cells = ["import torch\nfrom mylib import Model", "def embed(x):\n    return x.cuda()",
             "model = Model()\ny = embed(torch.zeros(2))"]
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": text.splitlines(keepends=True)} for text in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "demo.ipynb").write_text(json.dumps(nb, indent=1))
    (tmp_path / "demo.py").write_text("\n".join(cells) + "\n")
    cli("fix", "--no-cache", "--unsafe-fixes", "demo.ipynb", "demo.py", cwd=tmp_path)
    new = json.loads((tmp_path / "demo.ipynb").read_text())
    assert new["cells"][0]["source"] == ["import torch\n", "from mylib import Model\n",
                                         'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")']
    assert new["cells"][1]["source"] == ["def embed(x):\n", "    return x.to(device)"]
    assert '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' in (
        tmp_path / "demo.py").read_text()

"""Opt-in rules (TDL007): off unless selected by their own code (or ALL), the same way in
the settings, the CLI, a pyproject.toml and the flake8 plugin."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import FIXTURES, cli
from torchdevlint.catalogue import OPT_IN
from torchdevlint.rules import ALL_RULES
from torchdevlint.settings import Settings

SCRIPT = "import torch\n\n\ndef main():\n    device = torch.device('cuda:0')\n    return torch.zeros(1, device=device)\n"


def test_the_catalogue_and_the_rules_agree_on_what_is_opt_in():
    assert OPT_IN == {r.code for r in ALL_RULES if r.opt_in} == {"TDL007"}


@pytest.mark.parametrize("select, extend, ignore, on", [
    (("TDL",), (), (), False),  # the default: a prefix does not name it
    (("TDL0",), (), (), False),
    (("TDL00",), (), (), False),
    (("TDL",), ("TDL007",), (), True),
    (("TDL007",), (), (), True),
    (("ALL",), (), (), True),
    (("TDL",), ("TDL007",), ("TDL007",), False),  # ignoring it by name wins, as for any rule
    (("TDL",), ("TDL007",), ("TDL0",), True),  # the longer (named) selection wins
])
def test_an_opt_in_rule_runs_only_when_named(select, extend, ignore, on):
    codes = Settings(select=select, extend_select=extend, ignore=ignore).enabled_codes()
    assert ("TDL007" in codes) is on
    if select == ("TDL",) and not ignore:
        assert "TDL001" in codes  # the others are unaffected


def _codes(result) -> list:
    return [v["code"] for v in json.loads(result.stdout)]


def test_cli_and_pyproject_select_it_by_name(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    assert _codes(cli("check", "--isolated", "--no-cache", "--output-format", "json", ".", cwd=tmp_path)) == []
    named = cli("check", "--isolated", "--no-cache", "--output-format", "json", "--extend-select", "TDL007", ".",
                cwd=tmp_path)
    assert _codes(named) == ["TDL007"] and named.returncode == 1
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevlint]\nextend-select = ["TDL007"]\n')
    assert _codes(cli("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path)) == ["TDL007"]
    fixed = cli("fix", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')" in (tmp_path / "train.py").read_text()


def _flake8(*args: str) -> set:
    r = subprocess.run([sys.executable, "-m", "flake8", "--format=%(row)d|%(code)s", *args],
                       capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    return {line.split("|")[1] for line in r.stdout.splitlines()}


def test_flake8_runs_it_only_when_named(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(SCRIPT)
    assert _flake8("--select", "TDL", str(f)) == set()
    assert _flake8(str(f)) == set()  # flake8's own default selection: every plugin code but this one
    assert _flake8("--select", "TDL", "--extend-select", "TDL007", str(f)) == {"TDL007"}
    assert _flake8("--select", "TDL007", str(f)) == {"TDL007"}


def test_flake8_and_check_agree_on_the_opt_in_fixtures():
    programs = sorted((FIXTURES / "tdl007").glob("*.py"))
    assert programs
    found = _flake8("--select", "TDL", "--extend-select", "TDL007", *map(str, programs))
    r = cli("check", "--isolated", "--no-cache", "--output-format", "json", "--extend-select", "TDL007",
            *map(str, programs))
    assert found == set(_codes(r)) == {"TDL007"}


def test_a_migration_says_what_the_opt_in_rule_would_have_looked_at(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    hint = "Not checked (opt-in):\n  a GPU the code names itself"
    migration = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path)
    assert hint in migration.stderr.decode()
    plain = cli("fix", "--isolated", "--no-cache", "--diff", ".", cwd=tmp_path)  # not a migration: no advice
    named = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--extend-select", "TDL007", "--diff", ".",
                cwd=tmp_path)
    assert "Not checked" not in plain.stderr.decode() and "Not checked" not in named.stderr.decode()
    assert "Would convert: TDL007 1" in named.stderr.decode()

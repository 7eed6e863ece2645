"""The attack run of issue #16, as tests: every reproducer, plus a property test.

Classes of failure: edits that land on the wrong bytes (Python's line model vs. other
line models, LibCST dropping form feeds), "safe" fixes that change behaviour (name
binding that was not Python's, insertion points), filesystem promises (symlinks, hard
links, metadata, temp files on signals), poisoned state and output injection. The
semantic cases run the original and the fixed program under the CUDA simulator and
compare what they print.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict

import pytest

from helpers import cli, findings, fixed
from torchdevlint import engine
from torchdevlint.engine import fix_source, verify
from torchdevlint.model import Applicability, Edit, Fix, Violation
from torchdevlint.settings import Settings

DEVICE_CUDA = 'device = torch.device("cuda")\n'
INSERTED = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'


def safe(text: str) -> str:
    return fixed(text, unsafe=False)


# ------------------------------------------------------------- wrong bytes
def test_a_lone_carriage_return_does_not_shift_the_edit():
    src = 'import torch\ny = 1\rmsg = "' + "A" * 40 + '"\n' + DEVICE_CUDA + "x = torch.zeros(1).cuda()\n"
    out = safe(src)
    assert out == src.replace("x = torch.zeros(1).cuda()", "x = torch.zeros(1).to(device)")


def test_a_carriage_return_in_the_docstring_keeps_the_definition_below_the_import():
    src = '"""doc\rstring"""\nimport torch\nx = torch.zeros(1).cuda()\n'
    out = fixed(src)
    assert out.index("import torch") < out.index("device = torch.device(")
    assert out.endswith("x = torch.zeros(1).to(device)\n")
    compile(out, "x.py", "exec")


def test_form_feeds_before_a_statement_do_not_shift_columns():
    src = "import torch\n" + DEVICE_CUDA + "\f" * 30 + 'x = ["AAAA", torch.zeros(1).cuda()]\n'
    (v,) = findings(src)
    assert (v.row, v.column) == (3, 44)  # as Python counts: 30 form feeds, then column 14
    assert safe(src) == src.replace(".cuda()", ".to(device)")


@pytest.mark.parametrize("middle", ["y = 1\r", "\f" * 5, 's = "a\u2028b"\n', "t = '\x0b'\n"])
def test_the_diff_applies_with_git(tmp_path, middle):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    src = "import torch\n" + DEVICE_CUDA + middle + "x = torch.zeros(1).cuda()\n"
    (tmp_path / "m.py").write_bytes(src.encode())
    r = cli("fix", "--diff", "--no-cache", "m.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    (tmp_path / "m.patch").write_bytes(r.stdout)
    subprocess.run(["git", "apply", "m.patch"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "m.py").read_bytes().decode() == safe(src)


def _finding(edit: Edit) -> Violation:
    return Violation("TDL001", "bare-cuda-call", "m", edit.start, edit.end,
                     Fix(Applicability.SAFE, "f", (edit,)))


def test_an_edit_whose_target_is_not_what_the_rule_saw_is_refused(monkeypatch):
    src = 'import torch\nmsg = "cuda()"\nx = 1\n'
    bad = Edit((2, 7), (2, 13), "to(device)", expected=".cuda()")  # a position bug, simulated
    monkeypatch.setattr(engine, "check_source", lambda *a, **k: [_finding(bad)])
    outcome = fix_source(src, "x.py")
    assert outcome.text == src and not outcome.changed
    (rejected,) = outcome.rejected
    assert rejected.code == "TDL903" and "where the rule saw '.cuda()'" in rejected.message


def test_an_edit_that_splits_a_token_is_refused():
    src = 'msg = "AAAAAAAA"\n'
    start = src.index("AAAA") + 2
    regions = [(start, start + 2, start, start + 3)]
    new = src[:start] + "xyz" + src[start + 2:]
    assert "falls inside the token" in verify(src, new, regions, "x.py")


def test_fixes_that_never_settle_write_nothing(monkeypatch):
    src = "import torch\nx = 1\n"
    counter = iter(range(1000))

    def endless(text, *a, **k):
        n = next(counter)
        return [_finding(Edit((2, 4), (2, 5), str(n)))]

    monkeypatch.setattr(engine, "check_source", endless)
    outcome = fix_source(src, "x.py")
    assert outcome.text == src and not outcome.applied
    assert [v.code for v in outcome.rejected] == ["TDL903"]


# ------------------------------------------- safe fixes that changed behaviour
UNCHANGED_BY_SAFE_FIX = {
    "bound-later": "import torch\nx = torch.zeros(1).cuda()\n" + DEVICE_CUDA,
    "bound-under-main-guard": textwrap.dedent("""\
        import torch
        def f():
            return torch.zeros(1).cuda()
        if __name__ == "__main__":
            device = torch.device("cuda")
            f()
        """),
    "self-device-after-use": textwrap.dedent("""\
        import torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.zeros(1).cuda()
                self.device = torch.device("cuda")
        """),
    "match-capture": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def k(v):
            match v:
                case device:
                    pass
            return torch.zeros(1).cuda()
        """),
    "for-target": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def f(items):
            for device in items:
                pass
            return torch.zeros(1).cuda()
        """),
    "with-target": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def w(cm):
            with cm as device:
                pass
            return torch.zeros(1).cuda()
        """),
    "tuple-unpacking": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def h(pair):
            device, other = pair
            return torch.zeros(1).cuda()
        """),
    "global-elsewhere": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def reset():
            global device
            device = "cpu"
        x = torch.zeros(1).cuda()
        """),
    "nonlocal": "import torch\n" + textwrap.dedent("""\
        def outer():
            device = torch.device("cuda")
            def inner():
                nonlocal device
                device = "cpu"
            inner()
            return torch.zeros(1).cuda()
        """),
    "walrus-in-comprehension": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def f():
            [(device := "cpu") for _ in range(1)]
            return torch.zeros(1).cuda()
        """),
    "except-as": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def f():
            try:
                raise ValueError
            except ValueError as device:
                pass
            return torch.zeros(1).cuda()
        """),
    "class-default-argument": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        class C:
            device = "cpu"
            def f(self, bias=torch.zeros(3).cuda()):
                return bias
        """),
    "torch-rebound-by-match": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def f(v):
            match v:
                case torch:
                    pass
            return torch.zeros(1).cuda()
        """),
    "torch-rebound-in-comprehension": "import torch\n" + DEVICE_CUDA + textwrap.dedent("""\
        def g(v):
            return [torch.zeros(1).cuda() for torch in [v]]
        """),
    "device-is-cpu-only": 'import torch\ndevice = "cpu"\nx = torch.zeros(1).cuda()\n',
    # bound only on some paths: UnboundLocalError / NameError / AttributeError after a fix
    "bound-under-if-without-else": "import torch\n" + textwrap.dedent("""\
        def f(flag):
            if flag:
                device = torch.device("cuda")
            return torch.zeros(1).cuda()
        """),
    "bound-in-a-loop": "import torch\n" + textwrap.dedent("""\
        def f(items):
            for _ in items:
                device = torch.device("cuda")
            return torch.zeros(1).cuda()
        """),
    "bound-in-try": "import torch\n" + textwrap.dedent("""\
        def f():
            try:
                device = torch.device("cuda")
            except ValueError:
                pass
            return torch.zeros(1).cuda()
        """),
    "module-level-conditional": "import sys\nimport torch\n" + textwrap.dedent("""\
        if len(sys.argv) > 1:
            device = torch.device("cuda")
        def f():
            return torch.zeros(1).cuda()
        x = torch.zeros(1).cuda()
        """),
    "self-device-conditional": "import torch\n" + textwrap.dedent("""\
        class M(torch.nn.Module):
            def __init__(self, flag):
                super().__init__()
                if flag:
                    self.device = torch.device("cuda")
                self.w = torch.zeros(1).cuda()
        """),
}


@pytest.mark.parametrize("name", sorted(UNCHANGED_BY_SAFE_FIX))
def test_no_safe_fix_where_the_device_name_is_not_the_device(name):
    """The misleading `device` is never what a safe fix names. A script (or a library
    function) may still be converted, but only to a device of its own that is exactly
    `.cuda()`'s."""
    src = UNCHANGED_BY_SAFE_FIX[name]
    assert findings(src), "the finding stays"
    out = safe(src)
    if out == src:
        return
    added = [line for line in out.splitlines() if line not in src.splitlines()]
    exact = {m.group(1) for line in added
             for m in [re.fullmatch(r'(\w+) = torch\.device\("cuda"\)', line.strip())] if m}
    # a name of its own: never one the code already binds (`self.device` is an attribute)
    assert exact and not any(re.search(rf"(?<![\w.]){name}\s*=[^=]", src) for name in exact), out
    used = {n for line in added for n in re.findall(r"\.to\((\w+)", line)}
    assert used and used <= exact, out


CHANGED_BY_SAFE_FIX = {
    # a comprehension in a class body sees the module's device, not the class's
    "comprehension-in-class-body": (
        "import torch\n" + DEVICE_CUDA + 'class C:\n    device = "cpu"\n'
        "    xs = [torch.zeros(1).cuda() for _ in range(2)]\n",
        "    xs = [torch.zeros(1).to(device) for _ in range(2)]\n"),
    # a comprehension variable does not leak into the function
    "comprehension-variable": (
        "import torch\n" + DEVICE_CUDA + 'def g():\n    ys = [device for device in ["cpu"]]\n'
        "    return torch.zeros(1).cuda()\n",
        "    return torch.zeros(1).to(device)\n"),
    # Python reads identifiers NFKC-normalised: this is `device`
    "full-width-identifier": (
        'import torch\n\uff44evice = torch.device("cuda")\nx = torch.zeros(1).cuda()\n',
        "x = torch.zeros(1).to(device)\n"),
    # bound in both branches of an if/else: on every path
    "bound-in-if-and-else": (
        "import torch\ndef g(flag):\n    if flag:\n        " + DEVICE_CUDA + "    else:\n        "
        + DEVICE_CUDA + "    return torch.zeros(1).cuda()\n",
        "    return torch.zeros(1).to(device)\n"),
    # cuda's second positional is non_blocking; to's is dtype
    "positional-non-blocking": (
        "import torch\n" + DEVICE_CUDA + "x = torch.zeros(1).cuda(None, True)\n",
        "x = torch.zeros(1).to(device, non_blocking=True)\n"),
}


@pytest.mark.parametrize("name", sorted(CHANGED_BY_SAFE_FIX))
def test_safe_fixes_where_python_binds_the_name_to_the_device(name):
    src, line = CHANGED_BY_SAFE_FIX[name]
    out = safe(src)
    assert line in out
    assert safe(out) == out


@pytest.mark.parametrize("src,reason", [
    ("import torch; x = torch.zeros(1).cuda()\n", "shares its line with `import torch`"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n"
     "def f():\n    return torch.zeros(1).cuda()\nif __name__ == '__main__':\n    f()\n",
     "imported only conditionally or inside a function (line 3)"),
    ("try:\n    import torch\nexcept ImportError:\n    torch = None\n"
     "def f():\n    return torch.zeros(1).cuda()\nif __name__ == '__main__':\n    f()\n",
     "imported only conditionally or inside a function (line 2)"),
])
def test_no_insertion_where_it_would_change_the_module(src, reason):
    (v,) = findings(src)
    assert v.fix.applicability is Applicability.DISPLAY and reason in v.fix.message
    assert fixed(src) == src


def test_a_function_that_imports_torch_itself_gets_its_device_after_that_import():
    src = ("def f():\n    x = torch_free()\n    import torch\n    import torch.nn as nn\n"
           "    return torch.zeros(1).cuda(), nn.Linear(2, 2).cuda()\nif __name__ == '__main__':\n    f()\n")
    (one, two) = findings(src)
    assert one.fix.applicability is two.fix.applicability is Applicability.UNSAFE
    out = fixed(src)
    assert out == ("def f():\n    x = torch_free()\n    import torch\n    import torch.nn as nn\n"
                   '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                   "    return torch.zeros(1).to(device), nn.Linear(2, 2).to(device)\n"
                   "if __name__ == '__main__':\n    f()\n")
    assert fixed(out) == out
    # `fix` alone: the exact device `.cuda()` uses, at the same place, under the comment
    assert safe(src) == out.replace(
        '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
        '    # the device of `.cuda()`; for a CPU fallback: torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        '    device = torch.device("cuda")\n')
    # a use before the function's import cannot take a device defined after it
    early = "def f(x):\n    y = x.cuda()\n    import torch\n    return torch.zeros(1).cuda(), y\nf(1)\n"
    (first, second) = findings(early)
    assert first.fix.applicability is Applicability.DISPLAY and "inside a function" in first.fix.message
    assert second.fix.applicability is Applicability.UNSAFE


def test_the_definition_goes_below_a_later_import_of_torch():
    src = ("def f():\n    return torch.zeros(1).cuda()\nimport torch\n"
           "if __name__ == '__main__':\n    f()\n")
    out = fixed(src)
    assert out == ("def f():\n    return torch.zeros(1).to(device)\nimport torch\n" + INSERTED
                   + "if __name__ == '__main__':\n    f()\n")


# ------------------------------------------------- under the simulator
def _sim_outputs(tmp_path: Path, programs: Dict[str, str], tag: str) -> Dict[str, str]:
    """Run every program under one simulated process (2 GPUs); what each printed."""
    folder = tmp_path / tag
    folder.mkdir()
    names = sorted(programs)
    for name in names:
        (folder / f"{name}.py").write_text(programs[name], encoding="utf-8")
    driver = folder / "driver.py"
    driver.write_text(textwrap.dedent(f"""\
        import contextlib, io, runpy, sys
        for name in {names!r}:
            buf = io.StringIO()
            try:
                with contextlib.redirect_stdout(buf):
                    runpy.run_path(f"{folder}/{{name}}.py", run_name="__main__")
            except BaseException as exc:
                buf.write(f"raised {{type(exc).__name__}}")
            print(f"== {{name}}")
            print(buf.getvalue())
        """))
    r = subprocess.run([sys.executable, "-m", "torchdevlint", "sim", "--gpus", "2", "--report", "none",
                        str(driver)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out: Dict[str, str] = {}
    for block in r.stdout.split("== ")[1:]:
        name, _, body = block.partition("\n")
        out[name] = body
    assert sorted(out) == names
    return out


def _random_program(rng: random.Random) -> str:
    """A small script mixing device definitions, shadowing bindings and bare .cuda()."""
    definition = rng.choice([
        'device = torch.device("cuda")\n', 'device = torch.device("cuda:1")\n', 'device = "cuda"\n',
        'device = torch.device("cuda", 1)\n', "", 'device = "cpu"\n',
    ])
    shadows = [
        "", "for device in ['cpu']:\n        pass\n", "device, _ = 'cpu', 1\n",
        "match 'cpu':\n        case device:\n            pass\n",
        "global device\n    device = 'cpu'\n", "ys = [device for device in ['cpu']]\n",
        "[(device := 'cpu') for _ in range(1)]\n",
        "with contextlib.nullcontext('cpu') as device:\n        pass\n",
        "t0 = torch.ones(1).cuda()\n    device = torch.device('cuda')\n",
        "if __name__ == 'never':\n        device = torch.device('cuda')\n",
        "if len('ab') > 1:\n        device = torch.device('cuda')\n    else:\n        device = torch.device('cuda')\n",
    ]
    parts = ["import contextlib\nimport torch\n"]
    if rng.random() < 0.5:
        parts.append(definition)
    calls = []
    for i in range(rng.randint(1, 3)):
        shadow = rng.choice(shadows)
        args = rng.choice(["", "non_blocking=True", "None, True"])
        parts.append(f"def f{i}():\n    {shadow or 'pass'}\n" if shadow else f"def f{i}():\n")
        parts.append(f"    return torch.ones(2).cuda({args})\n")
        calls.append(f"print('f{i}', f{i}().device)\n")
    if rng.random() < 0.5:
        attr_first = rng.random() < 0.5
        set_attr = "        self.device = torch.device('cuda')\n"
        parts.append("class M(torch.nn.Module):\n")
        parts.append(rng.choice(["", "    device = 'cpu'\n"]))
        parts.append("    xs = [torch.ones(1).cuda() for _ in range(1)]\n")
        parts.append("    def __init__(self, b=torch.ones(1).cuda()):\n        super().__init__()\n")
        parts.append(set_attr if attr_first else "")
        parts.append("        self.t = torch.ones(1).cuda()\n        self.b = b\n")
        parts.append("" if attr_first else set_attr)
        calls.append("m = M()\nprint('M', m.t.device, m.b.device, M.xs[0].device)\n")
    if rng.random() < 0.5:
        parts.append("x = torch.zeros(1).cuda()\nprint('x', x.device)\n")
    if rng.random() < 0.5:
        parts.append('if __name__ == "__main__":\n    ' + "    ".join(calls))
    else:
        parts.extend(calls)
    return "".join(parts)


def test_random_programs_behave_the_same_after_the_safe_fix(tmp_path):
    rng = random.Random(16)
    originals: Dict[str, str] = {}
    fixed_programs: Dict[str, str] = {}
    changed = 0
    for i in range(40):
        src = _random_program(rng)
        compile(src, f"p{i}", "exec")
        out = safe(src)
        changed += out != src
        originals[f"p{i:02d}"], fixed_programs[f"p{i:02d}"] = src, out
    assert changed >= 8, "the generator must exercise fixes"
    before = _sim_outputs(tmp_path, originals, "before")
    after = _sim_outputs(tmp_path, fixed_programs, "after")
    differing = [n for n in before if before[n] != after[n]]
    assert not differing, "\n\n".join(
        f"{n}:\n{originals[n]}\n--- fixed:\n{fixed_programs[n]}\n--- before:\n{before[n]}--- after:\n{after[n]}"
        for n in differing[:3])
    assert any("cuda:" in text for text in before.values())


def test_the_scope_cases_behave_the_same_under_the_simulator(tmp_path):
    runnable = {
        "comprehension_in_class": CHANGED_BY_SAFE_FIX["comprehension-in-class-body"][0]
        + "print(C.xs[0].device)\n",
        "comprehension_variable": CHANGED_BY_SAFE_FIX["comprehension-variable"][0] + "print(g().device)\n",
        "full_width": CHANGED_BY_SAFE_FIX["full-width-identifier"][0] + "print(x.device)\n",
        "non_blocking": CHANGED_BY_SAFE_FIX["positional-non-blocking"][0] + "print(x.device)\n",
        "class_default": UNCHANGED_BY_SAFE_FIX["class-default-argument"] + "print(C().f().device)\n",
        "later_import": "def f():\n    return torch.zeros(1).cuda()\nimport torch\nprint(f().device)\n",
    }
    after = {k: fixed(v) for k, v in runnable.items()}  # unsafe fixes too: they must still run
    assert sum(after[k] != runnable[k] for k in runnable) >= 5
    before_out = _sim_outputs(tmp_path, runnable, "before")
    after_out = _sim_outputs(tmp_path, after, "after")
    assert before_out == after_out
    assert all("cuda:0" in text for text in before_out.values())


# ------------------------------------------------------------ filesystem
BAD = "import torch\n" + DEVICE_CUDA + "x = torch.zeros(1).cuda()\n"
GOOD = BAD.replace(".cuda()", ".to(device)")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinks_are_written_through_and_kept(tmp_path):
    proj, outside = tmp_path / "proj", tmp_path / "outside"
    proj.mkdir()
    outside.mkdir()
    (proj / "real.py").write_text(BAD)
    (outside / "t.py").write_text(BAD)
    os.symlink("real.py", proj / "alias.py")
    os.symlink("../outside/t.py", proj / "out.py")
    r = cli("fix", "proj", "--no-cache", cwd=tmp_path)
    out = r.stdout.decode()
    assert (proj / "real.py").read_text() == GOOD
    assert os.path.islink(proj / "alias.py") and os.path.islink(proj / "out.py")
    assert (outside / "t.py").read_text() == BAD  # outside the run: reported, not written
    assert "out.py:1:1: TDL904 not written: it links to" in out and "outside the paths being fixed" in out
    assert "changed while it was being fixed" not in out  # the alias is the same file: fixed once
    r = cli("fix", "proj/out.py", "--no-cache", cwd=tmp_path)  # named on the command line: its target is in the run
    assert (outside / "t.py").read_text() == GOOD and os.path.islink(proj / "out.py")


def test_hard_links_mode_and_xattrs_are_kept(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    os.link(tmp_path / "a.py", tmp_path / "b.py")
    (tmp_path / "c.py").write_text(BAD)
    os.chmod(tmp_path / "c.py", 0o640)
    has_xattr = hasattr(os, "setxattr")
    if has_xattr:
        try:
            os.setxattr(tmp_path / "c.py", "user.note", b"kept")
        except OSError:
            has_xattr = False
    inode = os.stat(tmp_path / "a.py").st_ino
    r = cli("fix", ".", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.stat(tmp_path / "a.py").st_ino == inode and os.stat(tmp_path / "a.py").st_nlink == 2
    assert (tmp_path / "b.py").read_text() == GOOD
    assert (tmp_path / "c.py").read_text() == GOOD
    assert os.stat(tmp_path / "c.py").st_mode & 0o777 == 0o640
    if has_xattr:
        assert os.getxattr(tmp_path / "c.py", "user.note") == b"kept"


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_no_temp_file_is_left_behind_on_a_signal(tmp_path, signal_name):
    (tmp_path / "a.py").write_text(BAD)
    script = textwrap.dedent(f"""\
        import os, signal, sys
        from torchdevlint import cli, runner
        real = os.replace
        def interrupted(src, dst):
            os.kill(os.getpid(), signal.{signal_name})  # arrives between the temp file and the rename
            real(src, dst)
        runner.os.replace = interrupted
        sys.exit(cli.main(["fix", "--no-cache", "-j", "1", "a.py"]))
        """)
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, timeout=120)
    assert r.returncode == 130, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]
    assert (tmp_path / "a.py").read_text() == BAD


# -------------------------------------------------- state and output
def test_a_cache_entry_of_the_wrong_shape_is_a_miss(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    assert cli("check", "a.py", cwd=tmp_path).returncode == 1
    (cache_file,) = (tmp_path / ".torchdevlint_cache").glob("*.json")
    for poison in ('{"a.py": {"digest": 3, "violations": 7}}', '[1, 2]',
                   '{"a.py": {"digest": "x", "violations": [{"code": "NOPE"}]}}'):
        cache_file.write_text(poison)
        r = cli("check", "a.py", cwd=tmp_path)
        assert r.returncode == 1 and b"TDL001" in r.stdout, r.stderr


def test_a_crafted_cache_entry_cannot_hide_findings(tmp_path):
    import hashlib
    import json

    (tmp_path / "a.py").write_text(BAD)
    assert cli("check", "a.py", cwd=tmp_path).returncode == 1
    (cache_file,) = (tmp_path / ".torchdevlint_cache").glob("*.json")
    unkeyed = hashlib.blake2b(BAD.encode(), digest_size=16).hexdigest()
    cache_file.write_text(json.dumps({"a.py": {"digest": unkeyed, "violations": []}}))
    r = cli("check", "a.py", cwd=tmp_path)
    assert r.returncode == 1 and b"TDL001" in r.stdout


def test_per_file_ignores_are_matched_once_per_pattern_set():
    from torchdevlint import settings as S

    patterns = tuple((f"pkg{i}/*.py", ("TDL001",)) for i in range(5000)) + (("tests/*", ("TDL0",)),)
    s = Settings(per_file_ignores=patterns)
    S._compiled.cache_clear()
    for i in range(300):
        codes = s.enabled_codes(f"a/tests/t{i}.py")
        assert "TDL001" not in codes and "TDL101" in codes
    assert S._compiled.cache_info().misses == 2  # one regex per distinct code tuple
    assert "TDL001" not in s.enabled_codes("pkg42/m.py") and "TDL002" in s.enabled_codes("pkg42/m.py")


def test_without_per_file_ignores_the_enabled_codes_are_computed_once_per_run():
    from torchdevlint import settings as S

    s = Settings(ignore=("TDL101",))
    S._enabled_codes.cache_clear()
    answers = {s.enabled_codes(f"pkg/m{i}.py") for i in range(300)}
    assert len(answers) == 1 and "TDL101" not in answers.pop()
    assert S._enabled_codes.cache_info().misses == 1  # (once per file: 3% of a cold run, profiled)
    with_ignores = Settings(per_file_ignores=(("tests/*", ("TDL0",)),))
    assert "TDL001" in with_ignores.enabled_codes("pkg/m.py")
    assert "TDL001" not in with_ignores.enabled_codes("tests/t.py")


def test_fix_on_stdin_prints_the_input_when_the_fix_cannot_be_encoded():
    src = b"# -*- coding: ascii -*-\nimport torch\nx = torch.zeros(1).cuda()\n"
    r = cli("fix", "--unsafe-fixes", "--device-name", "d\u00e9vice", "-", stdin=src)
    assert r.stdout == src
    assert b"TDL904 not fixed: the fix cannot be encoded as ascii" in r.stderr
    assert r.returncode == 1


def test_control_characters_in_file_names_are_escaped(tmp_path):
    name = "a\n::warning file=x::pwned.py"
    (tmp_path / name).write_text(BAD)
    r = cli("check", ".", "--no-cache", cwd=tmp_path)
    lines = r.stdout.decode().splitlines()
    assert not any(line.startswith("::") for line in lines)
    assert "a\\n::warning file=x::pwned.py:3:5: TDL001" in lines[0]
    r = cli("check", ".", "--no-cache", "--output-format", "github", cwd=tmp_path)
    assert all(line.startswith("::error ") for line in r.stdout.decode().splitlines())
    r = cli("fix", "--diff", ".", "--no-cache", cwd=tmp_path)
    assert r.stdout.decode().startswith('--- "a/a\\n::warning file=x::pwned.py"\n')


@pytest.mark.skipif(sys.platform != "linux", reason="needs byte file names")
def test_an_undecodable_file_name_is_reported_not_an_internal_error(tmp_path):
    with open(os.path.join(os.fsencode(tmp_path), b"b\xff.py"), "w") as fh:
        fh.write(BAD)
    r = cli("check", ".", "--no-cache", cwd=tmp_path, env_extra={"PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 1, r.stderr
    assert b"b\\xff.py:3:5: TDL001" in r.stdout


@pytest.mark.parametrize("redirect", ["2>&-", ">&-", "| head -c 0", "2>&- >&-"])
def test_closed_outputs_do_not_change_the_exit_code(tmp_path, redirect):
    (tmp_path / "a.py").write_text(BAD)
    command = f"{sys.executable} -m torchdevlint check --no-cache a.py {redirect}; echo $? >&3"
    if redirect.startswith("|"):
        command = f"{sys.executable} -m torchdevlint check --no-cache a.py {redirect}; echo ${{PIPESTATUS[0]}} >&3"
    r = subprocess.run(["bash", "-c", f"exec 3>status; {command}"], cwd=tmp_path, capture_output=True, timeout=120)
    assert (tmp_path / "status").read_text().strip() == "1", r.stderr


def _deleting(src: str, line: str):
    """``src`` without ``line`` (a whole line, its line break included), and the region."""
    start = src.index(line)
    return src.replace(line, "", 1), [(start, start + len(line), start, start)]


def test_deleting_the_last_line_of_a_block_is_verified_not_refused():
    """A fix that deletes a block's last statement (TDL005's second alias in an `if`/
    `else`, whose device the first alias's fix already made) is compared statement by
    statement, as one that deletes any other; a change outside it is still refused."""
    src = ("import torch\nif ok:\n    device = 1\n    t = 2\nelse:\n    device = 3\n    t = 4\n"
           "for i in range(2):\n    a = i\n    b = i\nz = 5\n")
    for line in ("    t = 2\n", "    t = 4\n", "    b = i\n"):
        new, regions = _deleting(src, line)
        assert verify(src, new, regions, "x.py") is None, line
        assert verify(src, new.replace("z = 5", "z = 6"), regions, "x.py") is not None, line
        assert verify(src, new.replace("device = 1", "device = 9"), regions, "x.py") is not None, line


def test_appending_to_a_block_is_verified_not_refused():
    src = "import torch\nfor i in range(2):\n    a = i\nz = 5\n"
    at = src.index("z = 5")
    new = src[:at] + "    b = i\n" + src[at:]
    regions = [(at, at, at, at + len("    b = i\n"))]
    assert verify(src, new, regions, "x.py") is None
    assert verify(src, new.replace("a = i", "a = 2"), regions, "x.py") is not None

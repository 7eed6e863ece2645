"""Bad input and byte-exact fixing: syntax errors, encodings, BOM, CRLF, atomic writes."""

from __future__ import annotations

import os
import stat
import sys

from helpers import cli

PY = f"Python {sys.version_info[0]}.{sys.version_info[1]}"  # the grammar a syntax error names

BAD = "import torch\nx = torch.zeros(3).cuda()\n"


def test_python2_file_is_tdl900_and_run_goes_on(tmp_path):
    (tmp_path / "a.py").write_text('import torch\nprint "x"\nm.cuda()\n')
    (tmp_path / "b.py").write_text(BAD)
    r = cli("check", ".", "--no-cache", cwd=tmp_path)
    out = r.stdout.decode()
    assert r.returncode == 1
    assert f"a.py:2:1: TDL900 invalid syntax ({PY}): Missing parentheses in call to 'print'" in out
    assert "b.py:2:5: TDL001" in out


def test_async_keyword_is_tdl900_and_fixable(tmp_path):
    """torch 0.3's `x.cuda(async=True)`: a syntax error since Python 3.7, whose fix is the
    keyword's new name (then TDL001's `.to(device, ...)` in the same run)."""
    (tmp_path / "a.py").write_text("import torch\nx.cuda(async=True)\n")
    out = cli("check", "a.py", cwd=tmp_path).stdout.decode()
    assert out.startswith(f"a.py:2:8: TDL900 [*] invalid syntax ({PY}): `async=` is torch 0.3's "
                          "`non_blocking=`")
    assert cli("fix", "a.py", "--unsafe-fixes", cwd=tmp_path).returncode == 0
    assert (tmp_path / "a.py").read_text() == ('import torch\ndevice = torch.device("cuda" if '
                                               'torch.cuda.is_available() else "cpu")\n'
                                               "x.to(device, non_blocking=True)\n")


def test_latin1_declaration_is_honored_and_preserved(tmp_path):
    src = "# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\nx = torch.zeros(3).cuda()\n"
    f = tmp_path / "l.py"
    f.write_bytes(src.encode("latin-1"))
    assert cli("check", "l.py", cwd=tmp_path).returncode == 1
    cli("fix", "l.py", "--unsafe-fixes", cwd=tmp_path)
    data = f.read_bytes()
    assert b"# caf\xe9\n" in data  # still latin-1, byte for byte
    assert data.decode("latin-1").endswith("x = torch.zeros(3).to(device)\n")


def test_undecodable_bytes_are_tdl901(tmp_path):
    (tmp_path / "u.py").write_bytes(b"import torch\n# \xff\xfe\nx.cuda()\n")
    out = cli("check", "u.py", cwd=tmp_path).stdout.decode()
    assert out.startswith("u.py:2:1: TDL901 cannot decode byte 0xff as utf-8")


def test_crlf_and_bom_are_preserved_outside_the_rewrite(tmp_path):
    src = b"\xef\xbb\xbfimport torch\r\n\r\nx = torch.zeros(3).cuda()\r\ny = 1\r\n"
    f = tmp_path / "w.py"
    f.write_bytes(src)
    cli("fix", "w.py", "--unsafe-fixes", cwd=tmp_path)
    assert f.read_bytes() == (
        b"\xef\xbb\xbfimport torch\r\n"
        b'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\r\n'
        b"\r\nx = torch.zeros(3).to(device)\r\ny = 1\r\n")


def test_fix_keeps_mode_bits_and_leaves_no_temp_files(tmp_path):
    f = tmp_path / "x.py"
    f.write_text(BAD)
    os.chmod(f, 0o751)
    cli("fix", "x.py", "--unsafe-fixes", cwd=tmp_path)
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o751
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.py"]


def test_unchanged_files_are_never_rewritten(tmp_path):
    f = tmp_path / "ok.py"
    f.write_text("import torch\nx = torch.zeros(3).cuda(0)\n")
    os.utime(f, (1_000_000, 1_000_000))
    cli("fix", "ok.py", "--unsafe-fixes", cwd=tmp_path)
    assert os.stat(f).st_mtime == 1_000_000


def test_file_without_trailing_newline(tmp_path):
    f = tmp_path / "n.py"
    f.write_bytes(b"import torch\nx = torch.zeros(3).cuda()")
    cli("fix", "n.py", "--unsafe-fixes", cwd=tmp_path)
    assert f.read_bytes() == (
        b'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        b"x = torch.zeros(3).to(device)")


def test_import_torch_is_added_when_absent(tmp_path):
    f = tmp_path / "s.py"
    f.write_text('"""Doc."""\nfrom torch import nn\nnet = nn.Linear(2, 2).cuda()\n')
    cli("fix", "s.py", "--unsafe-fixes", cwd=tmp_path)
    assert f.read_text() == (
        '"""Doc."""\nfrom torch import nn\nimport torch\n'
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        "net = nn.Linear(2, 2).to(device)\n")

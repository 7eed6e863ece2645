"""The simulator itself, and ``torchdevlint sim`` on small scripts."""

from __future__ import annotations

import textwrap
import threading

import pytest

from helpers import cli

torch = pytest.importorskip("torch")
from torchdevlint.sim import Simulator, device_of  # noqa: E402


def test_placement_follows_torch_rules():
    with Simulator(gpus=4):
        x = torch.ones(2).cuda()
        assert x.device == torch.device("cuda", 0) and x.is_cuda and x.get_device() == 0
        torch.cuda.set_device(2)
        assert torch.zeros(1, device="cuda").device.index == 2
        assert x.cuda() is not x.cuda(1) and x.cuda(0) is x  # nothing moves: same tensor
        m = torch.nn.Linear(2, 2).cuda()
        assert {p.device.index for p in m.parameters()} == {2}
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            m(x)
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.zeros(1).cuda(4)
        with torch.cuda.device(3):
            assert torch.ones(1).cuda().device.index == 3
        assert torch.cuda.current_device() == 2
        assert device_of(x.cpu()) == "cpu"


def test_a_new_thread_starts_on_device_zero():
    seen = {}
    with Simulator(gpus=2):
        torch.cuda.set_device(1)

        def work():
            seen["device"] = torch.ones(1).cuda().device.index

        t = threading.Thread(target=work)
        t.start()
        t.join()
        assert torch.cuda.current_device() == 1
    assert seen["device"] == 0


def test_data_parallel_needs_the_module_on_device_ids_0():
    with Simulator(gpus=2):
        ok = torch.nn.DataParallel(torch.nn.Linear(3, 2).cuda())
        out = ok(torch.randn(4, 3).cuda())
        assert out.device.index == 0 and out.shape == (4, 2)
        torch.cuda.set_device(1)
        bad = torch.nn.DataParallel(torch.nn.Linear(3, 2)).cuda()
        with pytest.raises(RuntimeError, match=r"module must have its parameters and buffers on device cuda:0"):
            bad(torch.randn(4, 3))


def test_patches_are_undone():
    with Simulator(gpus=2):
        assert torch.cuda.is_available()
    assert not torch.cuda.is_available()
    with pytest.raises((AssertionError, RuntimeError)):
        torch.zeros(1).cuda()


def _script(tmp_path, body):
    f = tmp_path / "script.py"
    f.write_text(textwrap.dedent(body))
    return f


def test_sim_cli_cross_device_mismatch_fails_with_torchs_message(tmp_path):
    f = _script(tmp_path, """
        import torch
        a = torch.ones(2).cuda(0)
        b = torch.ones(2).cuda(1)
        print(a + b)
    """)
    r = cli("sim", "--gpus", "2", str(f), cwd=tmp_path)
    assert r.returncode == 1
    assert "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1" in r.stderr.decode()


def test_sim_cli_consistent_script_passes_and_reports_cuda_1(tmp_path):
    f = _script(tmp_path, """
        import sys, torch
        device = torch.device("cuda", int(sys.argv[1]))
        model = torch.nn.Linear(4, 4).to(device)
        print(model(torch.randn(2, 4, device=device)).device)
    """)
    r = cli("sim", "--gpus", "2", str(f), "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == "cuda:1"
    err = r.stderr.decode()
    assert "cuda:1: 3 tensors, 112 bytes" in err and "warning" not in err  # weight, bias, input


def test_sim_cli_calls_out_a_thread_on_cuda_0(tmp_path):
    f = _script(tmp_path, """
        import threading, torch
        torch.cuda.set_device(1)
        main_tensor = torch.zeros(3).cuda()
        def worker():
            torch.ones(3).cuda()
        t = threading.Thread(target=worker, name="loader")
        t.start(); t.join()
    """)
    r = cli("sim", "--gpus", "2", str(f), cwd=tmp_path)
    assert r.returncode == 0
    err = r.stderr.decode()
    assert "thread 'MainThread' used cuda:1" in err
    assert "thread 'loader' used cuda:0" in err
    assert f"warning: {f}:6: thread 'loader' put a tensor on cuda:0" in err


def test_sim_cli_exit_status_and_missing_script(tmp_path):
    f = _script(tmp_path, "import sys\nsys.exit(3)\n")
    assert cli("sim", str(f), cwd=tmp_path).returncode == 3
    r = cli("sim", "nope.py", cwd=tmp_path)
    assert r.returncode == 2 and b"no such file" in r.stderr

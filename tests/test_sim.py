"""The simulator itself, and ``torchdevlint sim`` on small scripts."""

from __future__ import annotations

import json
import re

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


def test_pinned_memory_is_host_memory_a_gpu_can_read():
    """Pinning needs an accelerator in CPU torch; under the simulator it is what a GPU
    machine makes of it: host memory, then copied to the chosen GPU."""
    with Simulator(gpus=2):
        host = torch.empty(4, dtype=torch.uint8, pin_memory=True)
        assert device_of(host) == "cpu"
        x = torch.ones(3).pin_memory().cuda(1)
        assert x.device == torch.device("cuda", 1)


def test_backward_hooks_get_gradients_where_their_tensors_live():
    """The autograd engine hands hooks gradients it computed outside the simulator's
    mode; on a GPU machine they live on the tensor's (the module's) device, and code that
    combines them with activations (Opacus' per-sample gradients) must not see a mix."""
    with Simulator(gpus=2):
        layer = torch.nn.Linear(3, 2).cuda(1)
        seen = {}

        def per_sample(module, grad_input, grad_output):
            seen["grad_output"] = device_of(grad_output[0])
            seen["per_sample"] = device_of(torch.einsum("ni,nj->nij", grad_output[0], seen["activations"]))

        layer.register_forward_hook(lambda m, inputs, out: seen.__setitem__("activations", inputs[0]))
        layer.register_full_backward_hook(per_sample)
        x = torch.randn(4, 3).cuda(1)
        y = layer(x)
        y.register_hook(lambda g: seen.__setitem__("tensor_hook", device_of(g)))
        y.sum().backward()
        assert seen == {"activations": seen["activations"], "grad_output": "cuda:1", "per_sample": "cuda:1",
                        "tensor_hook": "cuda:1"}
        assert device_of(layer.weight.grad) == "cuda:1"


def test_packed_sequences_keep_their_lengths_on_the_cpu():
    """torch requires a packed sequence's lengths (and batch sizes) on the CPU whatever the
    device of the data: the simulator allows that mix there, and only there."""
    with Simulator(gpus=2):
        lstm = torch.nn.LSTM(4, 3, batch_first=True).cuda(1)
        x = torch.randn(2, 5, 4).cuda(1)
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3]), batch_first=True)
        assert device_of(packed.data) == "cuda:1" and device_of(packed.batch_sizes) == "cpu"
        out, (h, c) = lstm(packed)
        padded, lengths = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        assert device_of(padded) == device_of(h) == "cuda:1" and device_of(lengths) == "cpu"
        with pytest.raises(RuntimeError, match="same device"):
            lstm(torch.randn(2, 5, 4))  # unpacked CPU input to a GPU LSTM: still a mix


def test_a_gpu_tensor_takes_index_tensors_from_the_cpu():
    """Advanced indexing accepts index tensors on the CPU or on the indexed tensor's device
    (advertorch's `logits[torch.arange(n), targets]`), unlike other ops; a CPU tensor
    takes no GPU indices."""
    with Simulator(gpus=2):
        logits = torch.randn(4, 3).cuda(1)
        targets = torch.tensor([0, 2, 1, 0]).cuda(1)
        picked = logits[torch.arange(4), targets]
        assert device_of(picked) == "cuda:1" and device_of(logits[torch.arange(2)]) == "cuda:1"
        assert device_of(logits[logits > 0]) == "cuda:1"
        with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device .*\(cpu\)"):
            torch.randn(4)[targets]
        with pytest.raises(RuntimeError, match=r"\(cuda:1\)"):
            logits[targets.cuda(0)]
        with pytest.raises(RuntimeError, match="same device"):
            torch.gather(logits, 1, torch.zeros(4, 1, dtype=torch.long))  # other ops: no such leave


def test_type_as_changes_the_type_and_never_mixes_devices():
    """`t.type_as(other)` is `t.type(other.type())`, as in torch: a GPU tensor keeps its own
    GPU for a CUDA type (fairseq's `scale.cuda().type_as(w)` with `w` on another GPU), a
    CPU tensor goes to the current device, a CPU type brings it to the CPU."""
    with Simulator(gpus=2):
        w = torch.ones(2, dtype=torch.float64).cuda(1)
        scale = torch.ones(2).cuda()
        assert device_of(scale.type_as(w)) == "cuda:0" and scale.type_as(w).dtype == torch.float64
        assert device_of(torch.ones(2).type_as(w)) == "cuda:0"
        assert device_of(w.type_as(torch.zeros(1))) == "cpu" and w.type_as(w) is w
        torch.cuda.set_device(1)
        assert device_of(torch.ones(2).type_as(scale)) == "cuda:1"
        with pytest.raises(RuntimeError, match="same device"):
            scale.type_as(w) * w  # the op after it mixes, as on real GPUs


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


def test_data_parallel_replicas_keep_a_module_without_bias():
    """`nn.Conv2d(..., bias=False)` (every ResNet) has a `bias` entry that is None: each
    replica keeps it, as torch's `replicate` does, and runs as the module does."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                              torch.nn.LazyLinear(2)).eval()  # eval: batch norm per replica = whole batch
    x = torch.randn(4, 3, 6, 6)
    expected = net(x)
    with Simulator(gpus=2):
        out = torch.nn.DataParallel(net.cuda())(x.cuda())
        assert out.device.index == 0
        assert torch.allclose(out.cpu(), expected, atol=1e-6)


def test_the_functions_of_torch_nn_parallel_run_over_the_simulated_gpus():
    """Code that calls torch.nn.parallel's functions itself (the annotated Transformer's
    loss over its GPUs: replicate, scatter, parallel_apply, gather; EDSR's
    data_parallel(model, x, range(n))) computes what one device does, each replica on its
    GPU, with the gradient back in the module; the CPU build's own need _broadcast_coalesced."""
    P = torch.nn.parallel
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    expected = net(x)
    expected.sum().backward()
    grad = net.weight.grad.clone()
    net.zero_grad()
    with Simulator(gpus=2):
        net.cuda()
        replicas = P.replicate(net, [0, 1])
        assert [r.weight.device.index for r in replicas] == [0, 1]
        chunks = P.scatter(x.cuda(), target_gpus=[0, 1])
        assert isinstance(chunks, tuple) and [c.device.index for c in chunks] == [0, 1]
        outs = P.parallel_apply(replicas, [(c,) for c in chunks])
        assert [o.device.index for o in outs] == [0, 1]
        out = P.gather(outs, target_device=0)
        assert out.device.index == 0 and torch.allclose(out.cpu(), expected, atol=1e-6)
        out.sum().backward()
        assert torch.allclose(net.weight.grad.cpu(), grad, atol=1e-6)
        functional = P.data_parallel(net, x.cuda(), range(2))
        assert functional.device.index == 0 and torch.allclose(functional.cpu(), expected, atol=1e-6)
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            P.replicate(net, [0, 2])


def test_each_simulated_gpu_has_its_own_random_state():
    """Checkpointing code saves and restores the CUDA generators' states (fairseq, HF
    trainers call `torch.cuda.random.get_rng_state_all()`); CPU-only torch has none."""
    with Simulator(gpus=2):
        torch.cuda.manual_seed_all(3)
        states = torch.cuda.random.get_rng_state_all()
        assert len(states) == 2 and states[0].dtype == torch.uint8
        assert torch.equal(torch.cuda.get_rng_state(1), states[1]) and torch.cuda.initial_seed() == 3
        torch.cuda.set_device(1)
        torch.cuda.manual_seed(5)  # the current device's only
        assert torch.cuda.initial_seed() == 5 and torch.cuda.get_rng_state(0).equal(states[0])
        torch.cuda.set_rng_state_all(states)
        assert torch.cuda.initial_seed() == 3
    with pytest.raises((AssertionError, RuntimeError)):
        torch.cuda.get_rng_state()


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
    assert re.search(r"  cuda:1 \S{30} 3 tensors, 112 B\n", err) and "warning" not in err  # weight, bias, input
    assert re.search(r"  cuda:0 \S{30} 0 tensors, 0 B\n", err)  # the idle GPU is shown too


def test_sim_report_bars_and_json_file(tmp_path):
    import json

    f = _script(tmp_path, """
        import torch
        a = torch.zeros(256, device="cuda:0")
        b = torch.zeros(64, device="cuda:1")
    """)
    r = cli("sim", "--gpus", "3", "--report", "placement.json", str(f), cwd=tmp_path,
            env_extra={"PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "  cuda:0 " + "#" * 30 + " 1 tensor, 1.0 KiB\n" in err
    assert "  cuda:1 " + "#" * 8 + "." * 22 + " 1 tensor, 256 B\n" in err
    assert "  cuda:2 " + "." * 30 + " 0 tensors, 0 B\n" in err
    data = json.loads((tmp_path / "placement.json").read_text())
    assert data["devices"] == {"cuda:0": {"tensors": 1, "bytes": 1024}, "cuda:1": {"tensors": 1, "bytes": 256}}


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


# ------------------------------------------------ process-level setup (TDL105, TDL106)
def test_visible_devices_are_read_once_at_the_first_cuda_use(monkeypatch):
    import os

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    with Simulator(gpus=4) as sim:
        assert not sim.state.visible.initialised  # importing and entering is not a CUDA use
        assert torch.cuda.device_count() == 2
        os.environ["CUDA_VISIBLE_DEVICES"] = "2"  # too late: no effect
        assert torch.cuda.device_count() == 2
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.zeros(1).cuda(2)
        late = sim.report()["visible_devices"]["changed_after_init"]
    assert [d["value"] for d in late] == ["2"]
    assert late[0]["where"].endswith("test_sim.py:" + str(_line_of('os.environ["CUDA_VISIBLE_DEVICES"] = "2"')))


def test_visible_devices_parse_like_cuda(monkeypatch):
    from torchdevlint.sim.process import parse_visible

    assert parse_visible(None, 2) == [0, 1]
    assert parse_visible("1", 2) == [1]
    assert parse_visible("0,5,1", 2) == [0]  # out of range: the rest is ignored
    assert parse_visible("-1", 2) == [] and parse_visible("", 2) == []
    assert parse_visible("1,1", 2) == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with Simulator(gpus=2):
        assert not torch.cuda.is_available() and torch.cuda.device_count() == 0


def test_setting_the_variable_before_cuda_starts_takes_effect(monkeypatch):
    import os

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    try:
        with Simulator(gpus=4) as sim:
            os.environ.update({"CUDA_VISIBLE_DEVICES": "3"})
            assert torch.cuda.device_count() == 1
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")  # already set: unchanged, no warning
            assert sim.report()["visible_devices"]["changed_after_init"] == []
    finally:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)  # monkeypatch records nothing for an absent name


def test_seeding_before_cuda_starts_initialises_nothing(monkeypatch):
    """`torch.manual_seed(s)` seeds every GPU lazily (torch queues it until CUDA starts):
    a script that seeds, then sets CUDA_VISIBLE_DEVICES (pytorch-yolo2's train.py) sees
    the GPUs it chose, with no warning, and its GPU generators start from that seed."""
    import os

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    try:
        with Simulator(gpus=2) as sim:
            torch.manual_seed(7)
            os.environ["CUDA_VISIBLE_DEVICES"] = "1"
            assert torch.cuda.device_count() == 1
            assert sim.report()["visible_devices"]["changed_after_init"] == []
            seeded = torch.cuda.get_rng_state()
            torch.cuda.manual_seed(7)  # CUDA has started: applied at once, the same state
            assert torch.equal(seeded, torch.cuda.get_rng_state())
    finally:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)


def test_nccl_group_records_its_communicator_device(monkeypatch):
    import torch.distributed as dist

    for binding, expected_bound, expected_device in (
        (lambda: None, None, "cuda:0"),
        (lambda: torch.cuda.set_device(1), "set_device", "cuda:1"),
    ):
        with Simulator(gpus=2) as sim:
            dist.init_process_group("nccl", rank=1, world_size=2)
            assert dist.get_rank() == 1 and dist.get_world_size() == 2
            binding()
            t = torch.ones(2).cuda(1)
            dist.all_reduce(t)  # a world of one: the value is unchanged
            assert t.tolist() == [1.0, 1.0] and t.device.index == 1
            dist.destroy_process_group()
            report = sim.report()
        assert report["process_groups"][0]["bound"] == expected_bound
        assert report["process_groups"][0]["device"] == expected_device
        assert len(report["unbound_process_groups"]) == (1 if expected_bound is None else 0)
    with Simulator(gpus=2) as sim:
        dist.init_process_group(backend="nccl", device_id=torch.device("cuda", 1))
        assert sim.report()["process_groups"][0]["bound"] == "device_id"
    assert not dist.is_initialized()  # the simulator ends the groups it started


def test_collectives_shaped_by_the_world_fill_one_entry_per_rank():
    """The real group is a world of one; a program of a world of two gathers into two
    outputs (DETR's pickled `all_gather` of each rank's byte count), which gloo alone
    would refuse: every rank is taken to hold this rank's data, on the outputs' GPUs."""
    import torch.distributed as dist

    with Simulator(gpus=2):
        dist.init_process_group("nccl", rank=1, world_size=2)
        torch.cuda.set_device(1)
        local = torch.tensor([7], device="cuda")
        sizes = [torch.tensor([0], device="cuda") for _ in range(dist.get_world_size())]
        assert dist.all_gather(sizes, local) is None
        assert [t.tolist() for t in sizes] == [[7], [7]] and {t.device.index for t in sizes} == {1}
        out = torch.zeros(4, device="cuda")
        assert dist.all_gather_into_tensor(out, torch.tensor([1.0, 2.0], device="cuda"), async_op=True).wait()
        assert out.tolist() == [1.0, 2.0, 1.0, 2.0] and out.device.index == 1
        objects = [None, None]
        dist.all_gather_object(objects, {"rank": 1})
        assert objects == [{"rank": 1}, {"rank": 1}]
        mine = torch.zeros(2, device="cuda")
        dist.reduce_scatter_tensor(mine, torch.arange(4.0, device="cuda"))
        assert mine.tolist() == [2.0, 3.0] and mine.device.index == 1  # rank 1's slice
        swapped = torch.zeros(4, device="cuda")
        dist.all_to_all_single(swapped, torch.arange(4.0, device="cuda"))
        assert swapped.tolist() == [2.0, 3.0, 2.0, 3.0]
        dist.all_reduce(local)  # the world of one: unchanged
        assert local.tolist() == [7]
        dist.destroy_process_group()


def test_a_group_not_used_yet_is_reported_as_used_at_exit():
    """pytorch/examples' ImageNet trainer: init_process_group, then set_device(gpu), then
    DDP (whose broadcasts the simulator does not see). A spawned child's report is taken
    when its function returns, before the simulator's exit: the group is settled then,
    as the process ending would, not reported as 'not yet used' and unbound."""
    import torch.distributed as dist

    with Simulator(gpus=2) as sim:
        dist.init_process_group("nccl", rank=1, world_size=2)
        torch.cuda.set_device(1)
        group = sim.report()["process_groups"][0]
        assert (group["device"], group["bound"]) == ("cuda:1", "set_device")
        assert sim.report()["unbound_process_groups"] == []


def test_module_to_an_int_index():
    with Simulator(gpus=2):
        m = torch.nn.Linear(2, 2).to(1)
        assert {p.device.index for p in m.parameters()} == {1}


def test_sim_cli_reports_a_late_cuda_visible_devices(tmp_path):
    from helpers import FIXTURES

    script = FIXTURES / "tdl105" / "notebook_queries_first.py"
    r = cli("sim", "--gpus", "2", str(script), cwd=tmp_path, env_extra={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert (f"warning: {script}:11: CUDA_VISIBLE_DEVICES set to '1' after CUDA was initialised at "
            f"{script}:6: it has no effect, this process still sees 2 GPUs") in err


def test_sim_cli_simulates_spawned_ranks_and_their_process_groups(tmp_path):
    """mp.spawn children run under the simulator and report under their index: the
    tutorial's unbound NCCL groups are called out, the rewrite's are bound."""
    from helpers import FIXTURES

    original = FIXTURES / "tdl106" / "tutorial_setup.py"
    fixed = tmp_path / "tutorial_fixed.py"
    fixed.write_text(original.with_name(original.name + ".fixed").read_text())
    r = cli("sim", "--gpus", "2", str(original), cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "process 1 (a simulated child, 2 GPUs visible)" in err
    assert re.search(r"    cuda:1 \S{30} 3 tensors, 1020 B\n", err)  # rank 1 placed its work on cuda:1 ...
    assert (f"warning: {original}:10: rank 1's NCCL process group has no device bound: "
            "its communicator is on cuda:0") in err  # ... but its communicator is on cuda:0
    r = cli("sim", "--gpus", "2", str(fixed), cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "rank 1 of 2 at" in err and "communicator on cuda:1 (bound by device_id=)" in err
    assert "warning" not in err


def _sim_children(tmp_path, name: str, text: str):
    """Run ``text`` as the script ``name`` under ``sim --gpus 2 --report``; the run (it
    must succeed) and the tensors each child placed, per process and device (the
    children reported as processes 0 and 1)."""
    script = tmp_path / name
    script.write_text(text)
    r = cli("sim", "--gpus", "2", "--report", str(tmp_path / "r.json"), str(script), cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    children = json.loads((tmp_path / "r.json").read_text())["children"]
    assert [c["process"] for c in children] == [0, 1]
    return r, {c["process"]: {d: n["tensors"] for d, n in c["devices"].items() if n["tensors"]} for c in children}


def test_sim_cli_spawned_children_are_simulated_from_their_start(tmp_path):
    """A spawned child imports its parent's main module again before it calls its
    target: that code runs under the simulator too (stylegan2-pytorch asserts a GPU as
    it is imported), and what it places is the child's (every rank's import-time
    tensor lands on cuda:0, its work on its own GPU)."""
    _, placed = _sim_children(tmp_path, "spawned.py", (
        "import torch\nimport torch.multiprocessing as mp\n\n"
        "assert torch.cuda.is_available(), 'You need to have an Nvidia GPU with CUDA installed.'\n"
        "BIAS = torch.zeros(3).cuda()\n\n\ndef work(rank, world):\n    torch.cuda.set_device(rank)\n"
        "    x = torch.ones(4, 4).cuda() + BIAS.sum().to(rank)\n    return float(x.sum())\n\n\n"
        "if __name__ == '__main__':\n    mp.spawn(work, args=(2,), nprocs=2)\n"))
    assert placed[1]["cuda:0"] == 1 and placed[1]["cuda:1"] >= 1  # BIAS at import; the work on its GPU
    assert set(placed[0]) == {"cuda:0"}


def _line_of(text):
    import inspect

    lines = inspect.getsource(__import__(__name__)).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "_line_of" not in line)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_sim_cli_simulates_multiprocessing_process_children(tmp_path, method):
    """`multiprocessing.Process` targets run under the simulator in the child, whatever
    the start method, each reporting under the order it was started in: the workers
    that bind their rank's GPU land on it; the ones that do not all land on cuda:0."""
    body = (
        "import multiprocessing as mp\nimport torch\n\n\ndef work(rank):\n{bind}"
        "    x = torch.ones(4, 4).cuda()\n\n\ndef main():\n"
        f"    ctx = mp.get_context({method!r})\n"
        "    procs = [ctx.Process(target=work, args=(r,)) for r in range(2)]\n"
        "    for p in procs:\n        p.start()\n    for p in procs:\n        p.join()\n"
        "        assert p.exitcode == 0\n\n\nif __name__ == '__main__':\n    main()\n"
    )
    for bind, rank1_device in (("    torch.cuda.set_device(rank)\n", "cuda:1"), ("", "cuda:0")):
        _, placed = _sim_children(tmp_path, f"workers_{method}_{bool(bind)}.py", body.format(bind=bind))
        assert {k: sorted(v) for k, v in placed.items()} == {0: ["cuda:0"], 1: [rank1_device]}


def test_sim_cli_simulates_the_children_of_torch_distributed_launcher(tmp_path):
    """`torch.distributed.launcher`'s `elastic_launch` starts each worker in a process of
    its own, with `LOCAL_RANK` set: every one runs under the simulator and reports under
    its local rank. The worker that follows `LOCAL_RANK` lands on its rank's GPU; its bare
    `.cuda()` lands on cuda:0 in every rank (the bug the report shows)."""
    r, tensors = _sim_children(tmp_path, "launch.py", (
        "import os\nimport torch\nfrom torch.distributed.launcher.api import LaunchConfig, elastic_launch\n\n\n"
        "def train(scale):\n    rank = int(os.environ['LOCAL_RANK'])\n"
        "    x = torch.ones(4, device=f'cuda:{rank}') * scale\n    y = torch.zeros(2).cuda()\n"
        "    return float(x.sum())\n\n\nif __name__ == '__main__':\n"
        "    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2, rdzv_backend='c10d',\n"
        "                          rdzv_endpoint='localhost:0', run_id='tdl', max_restarts=0, monitor_interval=0.1)\n"
        "    print(elastic_launch(config, train)(3.0))\n"))
    assert "{0: 12.0, 1: 12.0}" in r.stdout.decode() or "{1: 12.0, 0: 12.0}" in r.stdout.decode()
    assert tensors == {0: {"cuda:0": 2}, 1: {"cuda:0": 1, "cuda:1": 1}}
    assert "process 1 (a simulated child, 2 GPUs visible)" in r.stderr.decode()


def test_child_processes_that_placed_nothing_are_one_line(tmp_path):
    """A DataLoader's forked workers run with the simulator and place nothing: one line
    names them all; a child that placed something keeps its own report."""
    script = tmp_path / "loader.py"
    script.write_text(textwrap.dedent("""
        import torch
        import multiprocessing as mp

        def place():
            torch.zeros(4).cuda()

        if __name__ == "__main__":
            mp.set_start_method("fork")
            loader = torch.utils.data.DataLoader(torch.arange(8.0), batch_size=2, num_workers=3)
            total = sum(batch.cuda().sum() for batch in loader)
            child = mp.Process(target=place)
            child.start()
            child.join()
            assert child.exitcode == 0
            print(float(total))
    """))
    r = cli("sim", "--gpus", "2", str(script), cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "28.0" in r.stdout.decode()
    assert re.search(r"\n  3 simulated child processes placed nothing on a simulated GPU \(processes \d+-\d+\)\n", err)
    assert re.search(r"\n  process \d+ \(a simulated child, 2 GPUs visible\)\n    cuda:0 \S{30} 1 tensor, 16 B\n", err)
    assert err.count("no tensor was placed") == 0

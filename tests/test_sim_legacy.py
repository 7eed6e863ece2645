"""Legacy PyTorch under the simulator (#12): typed CUDA tensors, Variable, checkpoints."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""\
    import torch
    from torch.autograd import Variable
    x = torch.cuda.LongTensor([1, 2])
    print(isinstance(x, torch.cuda.LongTensor), isinstance(x, torch.cuda.FloatTensor),
          isinstance(x, Variable), x.type())
    print(Variable(torch.zeros(2).cuda(1)).device)
    torch.cuda.set_device(1)
    y = torch.zeros(2).cuda()
    torch.save({"a": x, "b": y}, "ckpt.pt")
    torch.cuda.set_device(0)
    d = torch.load("ckpt.pt")
    print(d["a"].device, d["b"].device)
    d = torch.load("ckpt.pt", map_location="cpu")
    print(d["a"].device, d["b"].device)
    d = torch.load("ckpt.pt", map_location=torch.device("cuda", 1))
    print(d["a"].device, d["b"].device)
    d = torch.load("ckpt.pt", map_location={"cpu": "cpu"})
    print(d["a"].device, d["b"].device)
    d = torch.load("ckpt.pt", map_location=lambda storage, loc: storage.cuda(1))
    print(d["a"].device, d["b"].device)
    d = torch.load("ckpt.pt", map_location=lambda storage, loc: storage)
    print(d["a"].device, d["b"].device)
    d = torch.load("ckpt.pt", map_location=lambda storage, loc: storage.to(device="cuda:0") if loc == "cuda:1" else None)
    print(d["a"].device, d["b"].device)
    z = torch.cuda.FloatTensor(2, 3, device=1)
    print(z.device, tuple(z.shape), z.dtype, torch.zeros(3).type("torch.cuda.HalfTensor").device)
    print(torch.cuda.DoubleTensor().shape, torch.zeros(2).type(torch.cuda.IntTensor).dtype)
    """)


def _simulated(folder, name, program):
    """The lines a program prints under `torchdevlint sim --gpus 2` (it must succeed)."""
    (folder / name).write_text(program)
    r = subprocess.run([sys.executable, "-m", "torchdevlint", "sim", "--gpus", "2", "--report", "none",
                        name], cwd=folder, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_legacy_types_variable_and_checkpoints(tmp_path):
    assert _simulated(tmp_path, "legacy.py", PROGRAM) == [
        "True False True torch.cuda.LongTensor",
        "cuda:1",
        "cuda:0 cuda:1",  # restored where each was saved
        "cpu cpu",
        "cuda:1 cuda:1",
        "cuda:0 cuda:1",  # a dict map_location that maps nothing relevant
        "cuda:1 cuda:1",  # a function of the storage: where it moves each
        "cpu cpu",
        "cuda:0 cuda:0",  # ... None: restored where it was saved
        "cuda:1 (2, 3) torch.float32 cuda:0",
        "torch.Size([0]) torch.int32",
    ]


def test_a_checkpoint_written_through_an_open_file_or_a_buffer_is_restored_where_it_was(tmp_path):
    """The PyTorch examples' `with open(args.save, 'wb') as f: torch.save(model, f)`, read
    back with `open(..., 'rb')` (and a BytesIO): the model's tensors come back on the GPU
    they were saved from, as on a GPU machine; `map_location` still decides when given."""
    program = textwrap.dedent("""\
        import io
        import torch
        model = torch.nn.Linear(2, 2).cuda(1)
        with open("model.pt", "wb") as f:
            torch.save(model, f)
        with open("model.pt", "rb") as f:
            print(next(torch.load(f, weights_only=False).parameters()).device)
        with open("model.pt", "rb") as f:
            print(next(torch.load(f, weights_only=False, map_location="cpu").parameters()).device)
        buffer = io.BytesIO()
        torch.save({"w": torch.zeros(2).cuda(1)}, buffer)
        buffer.seek(0)
        print(torch.load(buffer)["w"].device)
        """)
    assert _simulated(tmp_path, "through_files.py", program) == ["cuda:1", "cpu", "cuda:1"]


def test_legacy_types_fail_on_real_cpu_torch_as_before(tmp_path):
    (tmp_path / "legacy.py").write_text("import torch\ntorch.cuda.FloatTensor(2)\n")
    r = subprocess.run([sys.executable, "legacy.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "torch.cuda.FloatTensor" in r.stderr


SAFE_SHAPES = textwrap.dedent("""\
    import torch
    device = torch.device("cuda")


    def make():
        torch.cuda.set_device(1)
        a = torch.cuda.FloatTensor(2, 3).fill_(1)
        b = torch.cuda.LongTensor([1, 2])
        c = torch.ones(2).type(torch.cuda.HalfTensor)
        return a, b, c


    def library():
        return torch.cuda.DoubleTensor(4)


    for t in make() + (library(),):
        print(t.device, t.dtype, tuple(t.shape))
    """)


def test_tdl005_safe_fixes_behave_the_same_under_the_simulator(tmp_path):
    from helpers import fixed

    after = fixed(SAFE_SHAPES, unsafe=False)
    assert "torch.empty(2, 3, dtype=torch.float32, device=device)" in after
    assert "torch.ones(2).to(device, torch.float16)" in after
    assert "torch.cuda." not in after.replace("torch.cuda.set_device", "")
    outputs = []
    for name, text in (("before.py", SAFE_SHAPES), ("after.py", after)):
        (tmp_path / name).write_text(text)
        r = subprocess.run([sys.executable, "-m", "torchdevlint", "sim", "--gpus", "2", "--report", "none",
                            name], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        outputs.append(r.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].count("cuda:1") == 4


DEFAULT_DEVICE = textwrap.dedent("""\
    import torch
    print(torch.nn.Linear(3, 2, device="cuda:1").weight.device)  # a Parameter lives where its data does
    torch.cuda.set_device(1)
    torch.set_default_tensor_type("torch.cuda.FloatTensor")
    x, m = torch.zeros(3), torch.nn.Linear(3, 2)
    print(x.device, x.dtype, m.weight.device, m(x).device, torch.get_default_device())
    print(torch.Tensor([1.0]).device, torch.Tensor(2).device, torch.FloatTensor(1).device)  # the type's followers
    torch.cuda.set_device(0)
    print(torch.ones(1).device)  # the current device at each call, as in torch
    torch.set_default_tensor_type(torch.DoubleTensor)
    print(torch.zeros(1).device, torch.zeros(1).dtype)
    torch.set_default_device("cuda:1")
    print(torch.arange(2).device, torch.nn.Linear(1, 1).bias.device, torch.Tensor(1).device)
    torch.set_default_device(None)
    print(torch.empty(1).device)
    try:
        torch.set_default_tensor_type(torch.cuda.LongTensor)
    except TypeError as exc:
        print("TypeError", "floating-point" in str(exc))
    """)


def test_default_tensor_type_and_default_device(tmp_path):
    """`set_default_tensor_type(torch.cuda.FloatTensor)` and `set_default_device("cuda")`
    put every factory call (and a module's parameters) on the simulated current device,
    as on a GPU machine; a CPU type or None goes back; the default dtype is restored after."""
    assert _simulated(tmp_path, "default.py", DEFAULT_DEVICE) == [
        "cuda:1",
        "cuda:1 torch.float32 cuda:1 cuda:1 cuda:1",
        "cuda:1 cuda:1 cpu",
        "cuda:0",
        "cpu torch.float64",
        "cuda:1 cuda:1 cpu",
        "cpu",
        "TypeError True",
    ]


TRAIN_STEP = textwrap.dedent("""\
    import sys
    import torch
    if sys.argv[1:] == ["typed"]:
        torch.set_default_tensor_type(torch.cuda.FloatTensor)
    model = torch.nn.Linear(3, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(2, 3).cuda()).sum().backward()
    opt.step()  # the first step imports torch._dynamo, which inspects torch.Tensor.__new__
    print("torch._dynamo" in sys.modules, torch.Tensor([1.0]).device, model.weight.device)
    """)


def test_an_optimizer_step_runs_with_and_without_a_cuda_default_type(tmp_path):
    """CI regression: torch._dynamo, imported by the first optimizer step, registers a
    substitute for `torch.Tensor.__new__` and rejected the simulator's patch of it (every
    training fixture failed under the simulator). The patch is installed only once a CUDA
    default type is set, and keeps a signature dynamo accepts."""
    (tmp_path / "train.py").write_text(TRAIN_STEP)
    for argv, device in (([], "cpu"), (["typed"], "cuda:0")):
        r = subprocess.run([sys.executable, "-m", "torchdevlint", "sim", "--gpus", "2", "--report", "none",
                            "train.py", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == [f"True {device} cuda:0"]


CPU_TYPES = textwrap.dedent("""\
    import torch
    x = torch.rand(1, 3, 4, 4).cuda()
    try:
        torch.FloatTensor(x)  # TDL005's old rewrite of U^2-Net's torch.cuda.FloatTensor(x.cuda())
        print("accepted")
    except TypeError as exc:
        print("TypeError", "device=cpu" in str(exc), "device=cuda:0" in str(exc))
    print(torch.as_tensor(x, dtype=torch.float32, device=x.device).device)  # its rewrite now
    print(torch.FloatTensor(torch.zeros(2)).device, tuple(torch.LongTensor(3).shape), torch.ByteTensor([1]).dtype)
    print(isinstance(x, torch.FloatTensor), isinstance(x.cpu(), torch.FloatTensor), isinstance(x, torch.cuda.FloatTensor))
    y, z = x.type(torch.FloatTensor), x.type(torch.LongTensor)
    print(y.device, y.dtype, z.device, z.dtype, torch.zeros(1).type(torch.DoubleTensor).dtype)
    print(x.type(torch.FloatTensor).type(torch.cuda.FloatTensor).device)
    """)


def test_cpu_types_refuse_a_cuda_tensor_as_on_a_gpu_machine(tmp_path):
    """`torch.FloatTensor(x)` of a CUDA tensor fails on a GPU machine (the legacy CPU
    constructor takes CPU data only): the simulator fails it too, so that a rewrite into the
    CPU twin (`torch.FloatTensor(x.cuda())`) cannot pass there. The CPU types answer
    `isinstance` and `.type(...)` as on that machine."""
    assert _simulated(tmp_path, "cpu_types.py", CPU_TYPES) == [
        "TypeError True True",
        "cuda:0",
        "cpu (3,) torch.uint8",
        "False True True",
        "cpu torch.float32 cpu torch.int64 torch.float64",
        "cuda:0",
    ]


TYPE_KEEPS_GPU = textwrap.dedent("""\
    import torch
    x = torch.ones(2, device="cuda:1")
    y = x.type(torch.cuda.HalfTensor)  # already on a GPU: only the dtype changes
    z = torch.ones(2).type("torch.cuda.HalfTensor")  # from the CPU: the current device
    print(y.device, y.dtype, x.type(torch.cuda.FloatTensor) is x, z.device)
    torch.cuda.set_device(1)
    print(torch.ones(2, device="cuda:0").type(torch.cuda.DoubleTensor).device, torch.ones(1).type(torch.cuda.IntTensor).device)
    """)


def test_type_keeps_a_gpu_tensor_on_its_gpu(tmp_path):
    """`x.type(torch.cuda.HalfTensor)` of a tensor already on a GPU keeps that GPU (torch
    takes the tensor's own device when the type's device type is the same); from the CPU
    it goes to the current device, as `.cuda()` does."""
    assert _simulated(tmp_path, "type_keeps_gpu.py", TYPE_KEEPS_GPU) == [
        "cuda:1 torch.float16 True cuda:0",
        "cuda:0 cuda:1",
    ]


BASE_CONSTRUCTOR = textwrap.dedent("""\
    import torch
    x = torch.rand(2, 3).cuda(1)
    y = torch.Tensor(x)  # an alias: torch.Tensor takes any tensor, on its device
    y[0, 0] = 7.0
    print(y.device, y.is_cuda, float(x[0, 0]), (x + y).device)
    print(torch.Tensor(torch.zeros(2)).device, torch.Tensor(2, 3).device, torch.Tensor([1.0]).device)
    """)


def test_the_base_constructor_keeps_a_cuda_tensor_where_it_is(tmp_path):
    """`torch.Tensor(x)` of a CUDA tensor is an alias of it on a GPU machine (the base
    constructor accepts any tensor, unlike `torch.FloatTensor`): under the simulator it stays
    on x's GPU too, so that a legacy program using it runs as it would there, not into a
    device mismatch of the simulator's own making; sizes and data still allocate on the CPU."""
    assert _simulated(tmp_path, "base.py", BASE_CONSTRUCTOR) == [
        "cuda:1 True 7.0 cuda:1",
        "cpu cpu cpu",
    ]

"""One-shot migration of a legacy tree (#12): the report `fix` ends with, and rewrites
of real legacy shapes."""

from __future__ import annotations

import json
import textwrap

from helpers import cli, fixed

GLOW = textwrap.dedent("""\
    import torch


    class WaveGlow(torch.nn.Module):
        def infer(self, spect, sigma=1.0):
            if spect.type() == 'torch.cuda.HalfTensor':
                audio = torch.cuda.HalfTensor(spect.size(0),
                                              self.n_remaining_channels,
                                              spect.size(2)).normal_()
            else:
                audio = torch.cuda.FloatTensor(spect.size(0),
                                               self.n_remaining_channels,
                                               spect.size(2)).normal_()
            return audio
    """)


def test_a_multi_line_constructor_in_a_block_is_rewritten():
    # (LibCST regenerates such a node without the block's indentation: the check that an
    # edit targets what its rule saw must not take that for a position bug)
    out = fixed(GLOW, unsafe=False)
    assert ("audio = torch.empty(spect.size(0), self.n_remaining_channels, spect.size(2), "
            'dtype=torch.float16, device="cuda").normal_()') in out
    assert "torch.cuda.FloatTensor" not in out.replace("'torch.cuda.HalfTensor'", "")
    assert fixed(out, unsafe=False) == out


def test_fix_ends_with_what_was_converted_and_what_is_left_and_why(tmp_path):
    (tmp_path / "lib.py").write_text(
        "import torch\n\n\ndef build(n):\n    return torch.zeros(n).cuda()\n\n\n"
        "def load(path):\n    ckpt = torch.load(path)\n    return ckpt['epoch']\n")
    (tmp_path / "train.py").write_text(
        "import torch\n\nx = torch.cuda.FloatTensor(2, 3)\ny = torch.zeros(1).cuda()\n"
        "torch.cuda.set_device(0)\n")
    r = cli("fix", "--no-cache", "--diff", "--unsafe-fixes", ".", cwd=tmp_path)
    assert "Would convert: TDL001 2, TDL005 1, TDL006 1\n" in r.stderr.decode()
    # the library function gets its own device, with the CPU fallback: unsafe only
    assert (' def build(n):\n-    return torch.zeros(n).cuda()\n'
            '+    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "+    return torch.zeros(n).to(device)\n") in r.stdout.decode()
    # without --unsafe-fixes the device is exactly the one `.cuda()` used (no CPU
    # fallback, no CUDA query), the script's where it starts, the library function's in
    # the function: every placement converts, behaviour unchanged
    r = cli("fix", "--no-cache", "--diff", ".", cwd=tmp_path)
    report = r.stderr.decode()
    assert "Would convert: TDL001 2, TDL005 1" in report
    assert '+device = torch.device("cuda")\n' in r.stdout.decode()
    assert ('+    device = torch.device("cuda")\n+    return torch.zeros(n).to(device)\n') in r.stdout.decode()
    assert "Left, by rule and reason:\n" in report and "  TDL001 " not in report
    assert ("  TDL006     1  needs --unsafe-fixes: no device is bound here, and the result is used beyond "
            "`load_state_dict`: where CUDA is, every tensor lands where it was saved, as before; without it, on "
            "the CPU\n") in report
    assert "  TDL101     1  " in report
    r = cli("fix", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    report = r.stderr.decode()
    assert "Converted: TDL001 2, TDL005 1, TDL006 1\n" in report
    assert "needs --unsafe-fixes" not in report


MODEL = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    from torch.autograd import Variable


    class RNN(nn.Module):
        def __init__(self, n_in, n_hidden):
            super(RNN, self).__init__()
            self.n_hidden = n_hidden
            self.lstm = nn.LSTM(n_in, n_hidden, batch_first=True)
            self.fc = nn.Linear(n_hidden, 2)

        def init_hidden(self, batch):
            h0 = Variable(torch.zeros(1, batch, self.n_hidden).cuda())
            c0 = Variable(torch.zeros(1, batch, self.n_hidden).cuda())
            return h0, c0

        def forward(self, x):
            out, _ = self.lstm(x, self.init_hidden(x.size(0)))
            return self.fc(out[:, -1, :])


    class Trainer(object):
        def __init__(self, model, lr):
            self.model = model.cuda()
            self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
            self.crit = nn.CrossEntropyLoss().cuda()

        def step(self, x, y):
            x, y = Variable(x.cuda()), Variable(y.cuda())
            loss = self.crit(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return loss.item()
    """)

TRAIN = textwrap.dedent("""\
    import torch
    from model import RNN, Trainer

    dtype = torch.cuda.FloatTensor


    def save_checkpoint(model, path):
        torch.save(model.state_dict(), path)


    trainer = Trainer(RNN(5, 8), lr=0.01)
    for epoch in range(2):
        x = torch.randn(4, 3, 5).type(dtype)
        y = torch.LongTensor([0, 1, 0, 1])
        print(epoch, trainer.step(x, y) > 0)
    save_checkpoint(trainer.model, "rnn.pt")  # (written elsewhere: a resume reads it back)
    trainer.model.load_state_dict(torch.load("rnn.pt"))
    """)


def test_a_two_file_legacy_program_runs_on_the_cpu_after_unsafe_fixes(tmp_path):
    """The common legacy shape: `.cuda()` in the model file (a library module: no device
    at import) and an unconditional typed-tensor alias in the script. `--unsafe-fixes`
    gives each library function its own device with the CPU fallback and the alias the
    fallback too; `fix` alone converts only what keeps behaviour (the alias, and the model
    file's provable receivers, exactly), and `--unsafe-fixes` after it ends where it alone
    would: every device falls back, no comment offers what a line already does."""
    import subprocess
    import sys

    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(TRAIN)
    run = [sys.executable, "train.py"]
    before = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert before.returncode != 0 and "CUDA" in before.stderr
    r = cli("fix", "--no-cache", ".", cwd=tmp_path)
    assert "Converted: TDL001 3, TDL005 1" in r.stderr.decode(), r.stderr.decode()
    assert 'device = torch.device("cuda")\n' in (tmp_path / "train.py").read_text()
    assert (tmp_path / "model.py").read_text().count('device = torch.device("cuda")\n') == 2  # init_hidden, Trainer
    (tmp_path / "train.py").write_text(TRAIN)
    r = cli("fix", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    assert "Converted: TDL001 3, TDL005 1, TDL006 1, TDL007 2" in r.stderr.decode(), r.stderr.decode()
    model = (tmp_path / "model.py").read_text()
    assert model.count('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")') == 3
    assert "for a CPU fallback" not in model and ".cuda()" not in model
    after = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == ["0 True", "1 True"]
    again = cli("fix", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path)
    assert again.stdout == b""  # idempotent


GUARDED = textwrap.dedent("""\
    \"\"\"A reproduction script: all of it under the main guard, `import torch` included.\"\"\"
    import time

    if __name__ == '__main__':
        import torch
        import torch.nn as nn
        torch.backends.cudnn.benchmark = True
        data = torch.randn([2, 3, 8, 8], dtype=torch.float, device='cuda', requires_grad=True)
        net = nn.Conv2d(3, 4, kernel_size=[3, 3], padding=[1, 1])
        net = net.cuda().float()
        start = time.time()
        out = net(data)
        out.backward(torch.randn_like(out))
        torch.cuda.synchronize()
        print(out.shape[1], data.grad is not None)
    """)

GUARDED_FIXED = textwrap.dedent("""\
    \"\"\"A reproduction script: all of it under the main guard, `import torch` included.\"\"\"
    import time

    if __name__ == '__main__':
        import torch
        import torch.nn as nn
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.backends.cudnn.benchmark = True
        data = torch.randn([2, 3, 8, 8], dtype=torch.float, device='cuda' if torch.cuda.is_available() else 'cpu', requires_grad=True)
        net = nn.Conv2d(3, 4, kernel_size=[3, 3], padding=[1, 1])
        net = net.to(device).float()
        start = time.time()
        out = net(data)
        out.backward(torch.randn_like(out))
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        print(out.shape[1], data.grad is not None)
    """)


def test_a_script_that_imports_torch_in_its_main_guard_runs_on_the_cpu_after_a_migration(tmp_path):
    """The guard is where such a script starts: the device is defined there, after its
    `import torch` (a module-level import would change what importing the file does), and
    the opt-in rules treat the guard as no condition."""
    import subprocess
    import sys

    script = tmp_path / "repro.py"
    script.write_text(GUARDED)
    before = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert before.returncode != 0 and "CUDA" in before.stderr
    migrate = ("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--extend-select", "TDL007,TDL008", ".")
    r = cli(*migrate, cwd=tmp_path)
    assert "Converted: TDL001 1, TDL007 1, TDL008 1" in r.stderr.decode(), r.stderr.decode()
    assert script.read_text() == GUARDED_FIXED
    after = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0 and after.stdout.split() == ["4", "True"], after.stderr
    assert cli(*migrate[:-1], "--diff", ".", cwd=tmp_path).stdout == b""  # idempotent
    # `fix` alone: the exact device `.cuda()` uses, in the same place; the same placement
    # as the original's under the simulator (safe: identical behaviour)
    script.write_text(GUARDED)
    placed = []
    for step in ("original", "safe fix"):
        if step == "safe fix":
            cli("fix", "--isolated", "--no-cache", ".", cwd=tmp_path)
            assert '    import torch.nn as nn\n    # the device of `.cuda()`' in script.read_text()
        report = tmp_path / f"{step}.json"
        sim = cli("sim", "--gpus", "2", "--report", str(report), "repro.py", cwd=tmp_path)
        assert sim.returncode == 0 and report.exists(), sim.stderr.decode()
        placed.append(json.loads(report.read_text())["devices"])
    assert placed[0] == placed[1] and "cuda:0" in placed[0], placed


DDP_TUTORIAL = textwrap.dedent("""\
    \"\"\"The DDP tutorial's shape (2020): spawned workers on the NCCL backend; each binds its
    GPU, moves the model and batches with a bare `.cuda()`, syncs its batch norms and gives DDP
    its device_ids.\"\"\"
    import os

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    def setup(rank, world_size):
        os.environ["MASTER_ADDR"] = "localhost"
        os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "12355")
        dist.init_process_group("nccl", rank=rank, world_size=world_size)


    def demo_basic(rank, world_size):
        setup(rank, world_size)
        torch.cuda.set_device(rank)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 5), nn.BatchNorm1d(5)).cuda()
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        ddp_model = DDP(model, device_ids=[rank])
        opt = torch.optim.SGD(ddp_model.parameters(), lr=0.01)
        for _ in range(2):
            loss = ddp_model(torch.randn(20, 10).cuda()).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        dist.barrier()
        if rank == 0:
            print("trained", tuple(model[0].weight.shape), type(model[1]).__name__)
        dist.destroy_process_group()


    if __name__ == "__main__":
        world_size = 2
        mp.spawn(demo_basic, args=(world_size,), nprocs=world_size, join=True)
    """)


def test_a_ddp_program_on_nccl_runs_on_the_cpu_after_a_migration(tmp_path):
    """Per-rank code is GPU code by design, and correct: nothing is found by default. A
    migration makes it run without CUDA too: the NCCL backend falls back to gloo, the
    rank's `set_device` and the SyncBatchNorm conversion run only with CUDA, what the
    binding named falls back to the CPU, and so does DDP's device list; with CUDA (the simulator's 2 GPUs) every rank places what it
    placed before, on its own GPU."""
    import socket
    import subprocess
    import sys

    script = tmp_path / "ddp.py"
    script.write_text(DDP_TUTORIAL)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(__import__("os").environ, MASTER_PORT=port)
    run = [sys.executable, "ddp.py"]
    before = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert before.returncode != 0 and "NCCL" in before.stderr
    assert cli("check", "--isolated", "--no-cache", ".", cwd=tmp_path).returncode == 0  # correct GPU code
    placed = []
    for step in ("original", "migrated"):
        if step == "migrated":
            r = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
            assert "Converted: TDL007 3, TDL008 3" in r.stderr.decode(), r.stderr.decode()
        report = tmp_path / f"{step}.json"
        for _ in range(3):  # (the same abort of gloo's teardown can end a simulated rank)
            sim = cli("sim", "--gpus", "2", "--report", str(report), "ddp.py", cwd=tmp_path)
            if b"terminate called without an active exception" not in sim.stderr:
                break
        assert sim.returncode == 0 and report.exists(), sim.stderr.decode()
        children = json.loads(report.read_text())["children"]
        placed.append(sorted((c["process"], c["devices"], [(g["backend"], g["device"]) for g in c["process_groups"]])
                             for c in children))
    assert placed[0] == placed[1], placed
    assert [p[1] for p in placed[0]] == [{"cuda:0": {"tensors": 9, "bytes": 1908}},
                                         {"cuda:1": {"tensors": 9, "bytes": 1908}}], placed[0]
    text = script.read_text()
    for line in ('    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=rank, '
                 'world_size=world_size)\n',
                 "    if torch.cuda.is_available():\n        torch.cuda.set_device(rank)\n",
                 '    model = nn.Sequential(nn.Linear(10, 5), nn.BatchNorm1d(5)).to("cuda" if torch.cuda.is_available() '
                 'else "cpu")\n',
                 "    model = nn.SyncBatchNorm.convert_sync_batchnorm(model) if torch.cuda.is_available() else model\n",
                 "    ddp_model = DDP(model, device_ids=[rank] if torch.cuda.is_available() else None)\n",
                 '        loss = ddp_model(torch.randn(20, 10).to("cuda" if torch.cuda.is_available() else "cpu"))'
                 '.pow(2).mean()\n'):
        assert line in text, text
    for _ in range(3):  # the CPU build's gloo now and then aborts a rank as its group is torn down
        after = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
        if "terminate called without an active exception" not in after.stderr:
            break
    assert after.returncode == 0 and after.stdout == "trained (5, 10) BatchNorm1d\n", after.stderr
    assert cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stdout == b""


def test_one_process_per_gpu_starts_one_on_the_cpu_after_a_migration(tmp_path):
    """`nprocs=torch.cuda.device_count()` starts no process without CUDA: the original
    "runs" on the CPU and does nothing. After the migration one rank trains there."""
    import subprocess
    import sys

    script = tmp_path / "ddp.py"
    program = DDP_TUTORIAL.replace("    world_size = 2\n", "    n_gpus = torch.cuda.device_count()\n    world_size = n_gpus\n")
    assert program != DDP_TUTORIAL
    script.write_text(program)
    run = [sys.executable, "ddp.py"]
    before = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert before.returncode == 0 and before.stdout == "", before.stderr  # no process started
    r = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    assert "Converted: TDL007 3, TDL008 4" in r.stderr.decode(), r.stderr.decode()
    assert "    n_gpus = torch.cuda.device_count() or 1\n" in script.read_text()
    after = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0 and after.stdout == "trained (5, 10) BatchNorm1d\n", after.stderr


LAUNCHED_TRAINER = textwrap.dedent("""\
    \"\"\"maskrcnn-benchmark's trainer shape (2019): run by a launcher, one process per GPU;
    distributed when the launcher's WORLD_SIZE says so, then each rank binds its GPU and
    joins an NCCL group; the model on `torch.device("cuda")`, DDP on the rank's GPU.\"\"\"
    import argparse
    import os

    import torch
    import torch.distributed as dist
    import torch.nn as nn


    def reduce_loss(loss):
        if not dist.is_initialized() or dist.get_world_size() < 2:
            return loss
        with torch.no_grad():
            loss = loss.clone()
            dist.all_reduce(loss)
            return loss / dist.get_world_size()


    def train(iters, local_rank, distributed):
        model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 1))
        device = torch.device("cuda")
        model.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        if distributed:
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[local_rank], output_device=local_rank, broadcast_buffers=False)
        g = torch.Generator().manual_seed(local_rank)
        for it in range(iters):
            images = torch.rand(2, 3, 8, 8, generator=g).to(device)
            loss = model(images).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            reduced = reduce_loss(loss.detach())
            if local_rank == 0:
                print("iter %d loss %.4f" % (it, reduced.item()))


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=0)
        parser.add_argument("--iters", type=int, default=2)
        args = parser.parse_args()
        num_gpus = int(os.environ["WORLD_SIZE"]) if "WORLD_SIZE" in os.environ else 1
        args.distributed = num_gpus > 1
        if args.distributed:
            args.local_rank = int(os.environ.get("LOCAL_RANK", args.local_rank))
            torch.cuda.set_device(args.local_rank)
            dist.init_process_group(backend="nccl", init_method="env://")
        torch.manual_seed(0)
        train(args.iters, args.local_rank, args.distributed)


    if __name__ == "__main__":
        main()
    """)


def test_a_launched_trainer_runs_distributed_on_the_cpu_after_a_migration(tmp_path):
    """The rank's `set_device` and the NCCL group sit under `if args.distributed:`, a test
    of the distributed mode, not of a GPU: a launcher runs that branch on a CPU machine
    too, so the migration gives them their CPU paths (with the model's device and DDP's
    device list) and the program trains on two gloo ranks there. Under the simulator each
    rank places what it placed before, on its own GPU."""
    import socket
    import subprocess
    import sys

    script = tmp_path / "train_net.py"
    script.write_text(LAUNCHED_TRAINER)
    before = subprocess.run([sys.executable, "train_net.py"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert before.returncode != 0 and "CUDA" in before.stderr, before.stderr
    placed = []
    for step in ("original", "migrated"):
        if step == "migrated":
            r = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
            assert "Converted: TDL007 3, TDL008 2" in r.stderr.decode(), r.stderr.decode()
        for rank in (0, 1):
            report = tmp_path / f"{step}-{rank}.json"
            env = {"WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank)}  # (as a launcher sets them)
            sim = cli("sim", "--gpus", "2", "--report", str(report), "train_net.py", cwd=tmp_path, env_extra=env)
            assert sim.returncode == 0, sim.stderr.decode()
            data = json.loads(report.read_text())
            placed.append((step, rank, data["devices"], [(g["backend"], g["device"]) for g in data["process_groups"]]))
    assert [p[1:] for p in placed[:2]] == [p[1:] for p in placed[2:]], placed
    assert [(p[2], p[3]) for p in placed[:2]] == [
        ({"cuda:0": {"tensors": 11, "bytes": 3632}}, [("nccl", "cuda:0")]),
        ({"cuda:1": {"tensors": 11, "bytes": 3632}}, [("nccl", "cuda:1")])], placed
    text = script.read_text()
    for line in ('    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
                 "device_ids=[local_rank] if torch.cuda.is_available() else None, "
                 "output_device=local_rank if torch.cuda.is_available() else None,",
                 "        if torch.cuda.is_available():\n            torch.cuda.set_device(args.local_rank)\n",
                 '        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo", '
                 'init_method="env://")\n'):
        assert line in text, text
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port,
              "train_net.py"]
    for _ in range(3):  # (the CPU build's gloo now and then aborts a rank as its group is torn down)
        after = subprocess.run(launch, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        if "terminate called without an active exception" not in after.stderr:
            break
    assert after.returncode == 0 and after.stdout.splitlines()[-1].startswith("iter 1 loss"), after.stderr
    single = subprocess.run([sys.executable, "train_net.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0 and single.stdout.startswith("iter 0 loss"), single.stderr
    assert cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stdout == b""


DETR_MISC = textwrap.dedent("""\
    \"\"\"DETR's util/misc.py (the shape DeiT, MAE and ConvNeXt copy): the distributed mode
    from the launcher's environment, the rank's GPU bound, an NCCL backend kept in
    `args`, and a pickled `all_gather` on "cuda" that pads under an `if` on the data.\"\"\"
    import os
    import pickle

    import torch
    import torch.distributed as dist


    def get_world_size():
        return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


    def all_gather(data):
        world_size = get_world_size()
        if world_size == 1:
            return [data]
        tensor = torch.ByteTensor(list(pickle.dumps(data))).to("cuda")
        local_size = torch.tensor([tensor.numel()], device="cuda")
        size_list = [torch.tensor([0], device="cuda") for _ in range(world_size)]
        dist.all_gather(size_list, local_size)
        size_list = [int(size.item()) for size in size_list]
        max_size = max(size_list)
        tensor_list = [torch.empty((max_size,), dtype=torch.uint8, device="cuda") for _ in size_list]
        if local_size != max_size:
            padding = torch.empty(size=(max_size - local_size,), dtype=torch.uint8, device="cuda")
            tensor = torch.cat((tensor, padding), dim=0)
        dist.all_gather(tensor_list, tensor)
        return [pickle.loads(t.cpu().numpy().tobytes()[:size]) for size, t in zip(size_list, tensor_list)]


    def init_distributed_mode(args):
        if 'RANK' in os.environ and 'WORLD_SIZE' in os.environ:
            args.rank = int(os.environ["RANK"])
            args.world_size = int(os.environ['WORLD_SIZE'])
            args.gpu = int(os.environ['LOCAL_RANK'])
        elif 'SLURM_PROCID' in os.environ:
            args.rank = int(os.environ['SLURM_PROCID'])
            args.gpu = args.rank % torch.cuda.device_count()
        else:
            print('Not using distributed mode')
            args.distributed = False
            return
        args.distributed = True
        torch.cuda.set_device(args.gpu)
        args.dist_backend = 'nccl'
        dist.init_process_group(backend=args.dist_backend, init_method='env://',
                                world_size=args.world_size, rank=args.rank)
    """)

DETR_MAIN = textwrap.dedent("""\
    import argparse

    import torch
    import torch.nn as nn

    import util


    def main(args):
        util.init_distributed_mode(args)
        device = torch.device(args.device)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
        if args.distributed:
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(getattr(args, "rank", 0))
        for _ in range(2):
            x = torch.randn(4, 6, generator=g).to(device)
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        # each rank's predictions, of different lengths: the gather pads
        preds = model(torch.randn(3 + getattr(args, "rank", 0), 6).to(device)).argmax(-1).tolist()
        print("gathered", [len(p) for p in util.all_gather(preds)])


    if __name__ == '__main__':
        parser = argparse.ArgumentParser()
        parser.add_argument('--device', default='cuda', help='device to use for training / testing')
        main(parser.parse_args())
    """)


def test_a_helper_module_s_distributed_setup_and_gather_run_on_cpu_ranks_after_a_migration(tmp_path):
    """DETR's shape: the NCCL backend held by `args.dist_backend` (reported where it is
    set), the padding of `all_gather` under an `if` on the data in a function that is on
    the GPU otherwise (converted with the rest, not left half done). After the migration
    the program runs on two gloo ranks on the CPU, with different gathered lengths; under
    the simulator each rank places what it placed before, on its own GPU (the gathers
    filled for a world of two)."""
    import socket
    import subprocess
    import sys

    (tmp_path / "util.py").write_text(DETR_MISC)
    (tmp_path / "main.py").write_text(DETR_MAIN)
    placed = []
    for step in ("original", "migrated"):
        if step == "migrated":
            r = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
            assert "Converted: TDL007 7, TDL008 3" in r.stderr.decode(), r.stderr.decode()
        for rank in (0, 1):
            report = tmp_path / f"{step}-{rank}.json"
            env = {"WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": "29999"}
            sim = cli("sim", "--gpus", "2", "--report", str(report), "main.py", cwd=tmp_path, env_extra=env)
            mine = 3 + rank  # (every rank is taken to hold this rank's data)
            assert sim.returncode == 0 and f"gathered [{mine}, {mine}]".encode() in sim.stdout, sim.stderr.decode()
            data = json.loads(report.read_text())
            placed.append((data["devices"], [(g["backend"], g["device"]) for g in data["process_groups"]]))
    assert placed[:2] == placed[2:], placed
    assert [sorted(p[0]) for p in placed[:2]] == [["cuda:0"], ["cuda:1"]], placed
    assert [p[1] for p in placed[:2]] == [[("nccl", "cuda:0")], [("nccl", "cuda:1")]], placed
    text = (tmp_path / "util.py").read_text()
    for line in ("        padding = torch.empty(size=(max_size - local_size,), dtype=torch.uint8, "
                 "device=\"cuda\" if torch.cuda.is_available() else \"cpu\")\n",
                 "        args.gpu = args.rank % (torch.cuda.device_count() or 1)\n",  # (SLURM's path too)
                 "    args.dist_backend = 'nccl' if torch.cuda.is_available() else 'gloo'\n"):
        assert line in text, text
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port, "main.py"]
    for _ in range(3):  # (the CPU build's gloo now and then aborts a rank as its group is torn down)
        after = subprocess.run(launch, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        if "terminate called without an active exception" not in after.stderr:
            break
    # (both ranks print: their lines may interleave)
    assert after.returncode == 0 and after.stdout.count("[3, 4]") == 2, (after.stdout, after.stderr)
    single = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0 and single.stdout == "Not using distributed mode\ngathered [3]\n", single.stderr
    assert cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stdout == b""


IMAGENET_TRAINER = textwrap.dedent("""\
    \"\"\"pytorch/examples' ImageNet trainer (2020; MoCo, SimSiam and their forks keep its
    plumbing): `--gpu`, one process per GPU with `--multiprocessing-distributed`
    (`mp.spawn(nprocs=ngpus_per_node)`, the process index as `args.gpu`), the backend an
    option's default, `if args.gpu is not None:` around the rank's device, a checkpoint
    mapped to `"cuda:{}".format(args.gpu)`.\"\"\"
    import argparse
    import os
    import random
    import shutil
    import time
    import warnings

    import torch
    import torch.nn as nn
    import torch.nn.parallel
    import torch.backends.cudnn as cudnn
    import torch.distributed as dist
    import torch.optim
    import torch.multiprocessing as mp
    import torch.utils.data
    import torch.utils.data.distributed

    parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
    parser.add_argument("--epochs", default=1, type=int)
    parser.add_argument("-b", "--batch-size", default=8, type=int)
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("--resume", default="", type=str)
    parser.add_argument("--world-size", default=-1, type=int)
    parser.add_argument("--rank", default=-1, type=int)
    parser.add_argument("--dist-url", default="tcp://127.0.0.1:23456", type=str)
    parser.add_argument("--dist-backend", default="nccl", type=str)
    parser.add_argument("--seed", default=None, type=int)
    parser.add_argument("--gpu", default=None, type=int, help="GPU id to use.")
    parser.add_argument("--multiprocessing-distributed", action="store_true")

    best_acc1 = 0


    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
            self.fc = nn.Linear(4, 10)

        def forward(self, x):
            return self.fc(torch.flatten(self.features(x), 1))


    class FakeImages(torch.utils.data.Dataset):
        def __len__(self):
            return 32

        def __getitem__(self, i):
            return torch.randn(3, 8, 8), i % 10


    def main():
        args = parser.parse_args()

        if args.seed is not None:
            random.seed(args.seed)
            torch.manual_seed(args.seed)
            cudnn.deterministic = True

        if args.gpu is not None:
            warnings.warn("You have chosen a specific GPU. This will completely disable data parallelism.")

        if args.dist_url == "env://" and args.world_size == -1:
            args.world_size = int(os.environ["WORLD_SIZE"])

        args.distributed = args.world_size > 1 or args.multiprocessing_distributed

        ngpus_per_node = torch.cuda.device_count()
        if args.multiprocessing_distributed:
            args.world_size = ngpus_per_node * args.world_size
            mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
        else:
            main_worker(args.gpu, ngpus_per_node, args)


    def main_worker(gpu, ngpus_per_node, args):
        global best_acc1
        args.gpu = gpu

        if args.gpu is not None:
            print("Use GPU: {} for training".format(args.gpu))

        if args.distributed:
            if args.dist_url == "env://" and args.rank == -1:
                args.rank = int(os.environ["RANK"])
            if args.multiprocessing_distributed:
                args.rank = args.rank * ngpus_per_node + gpu
            dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                                    world_size=args.world_size, rank=args.rank)
        model = Net()

        if args.distributed:
            if args.gpu is not None:
                torch.cuda.set_device(args.gpu)
                model.cuda(args.gpu)
                args.batch_size = int(args.batch_size / ngpus_per_node)
                model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
            else:
                model.cuda()
                model = torch.nn.parallel.DistributedDataParallel(model)
        elif args.gpu is not None:
            torch.cuda.set_device(args.gpu)
            model = model.cuda(args.gpu)
        else:
            model = torch.nn.DataParallel(model).cuda()

        criterion = nn.CrossEntropyLoss().cuda(args.gpu)
        optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9)

        if args.resume:
            if os.path.isfile(args.resume):
                print("=> loading checkpoint '{}'".format(args.resume))
                if args.gpu is None:
                    checkpoint = torch.load(args.resume)
                else:
                    loc = "cuda:{}".format(args.gpu)
                    checkpoint = torch.load(args.resume, map_location=loc)
                args.start_epoch = checkpoint["epoch"]
                best_acc1 = checkpoint["best_acc1"]
                if args.gpu is not None:
                    best_acc1 = best_acc1.to(args.gpu)
                model.load_state_dict(checkpoint["state_dict"])
                optimizer.load_state_dict(checkpoint["optimizer"])

        cudnn.benchmark = True

        train_dataset = FakeImages()
        if args.distributed:
            train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
        else:
            train_sampler = None
        train_loader = torch.utils.data.DataLoader(
            train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
            num_workers=0, pin_memory=True, sampler=train_sampler)

        for epoch in range(args.epochs):
            if args.distributed:
                train_sampler.set_epoch(epoch)
            acc1 = train(train_loader, model, criterion, optimizer, epoch, args)
            is_best = acc1 > best_acc1
            best_acc1 = max(acc1, best_acc1)
            if not args.multiprocessing_distributed or (args.multiprocessing_distributed and args.rank % ngpus_per_node == 0):
                save_checkpoint({"epoch": epoch + 1, "state_dict": model.state_dict(), "best_acc1": best_acc1,
                                 "optimizer": optimizer.state_dict()}, is_best)


    def train(train_loader, model, criterion, optimizer, epoch, args):
        model.train()
        correct = torch.zeros(())
        for i, (images, target) in enumerate(train_loader):
            if args.gpu is not None:
                images = images.cuda(args.gpu, non_blocking=True)
            if torch.cuda.is_available():
                target = target.cuda(args.gpu, non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += (output.argmax(1) == target).sum().cpu()
        print("epoch", epoch, "loss", loss.item())
        return correct / 32


    def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
        torch.save(state, filename)
        if is_best:
            shutil.copyfile(filename, "model_best.pth.tar")


    if __name__ == "__main__":
        main()
    """)


def test_a_spawned_trainer_runs_its_processes_on_the_cpu_after_a_migration(tmp_path):
    """Before, on a CPU machine the spawned path started no process (no GPU, none per
    GPU) and the plain one crashed. `args.gpu` holds the index `mp.spawn` hands each
    process, so `if args.gpu is not None:` is a rank test, not a device choice: its
    set_device and `.cuda(args.gpu)` share one CUDA guard, the option's NCCL default
    falls back to gloo, and the location map to the CPU. After the migration both paths
    train on the CPU (and resume); under the simulator each spawned process places what
    it placed before, on its own GPU."""
    import socket
    import subprocess
    import sys

    script = tmp_path / "main.py"
    script.write_text(IMAGENET_TRAINER)

    def port() -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return f"tcp://127.0.0.1:{s.getsockname()[1]}"

    def spawned(*more: str):
        return ["main.py", "--seed", "0", "--world-size", "1", "--rank", "0", "--multiprocessing-distributed",
                "--dist-url", port(), *more]

    def run(args):
        return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)

    plain, flagged = run(["main.py"]), run(spawned())
    assert plain.returncode != 0 and "CUDA" in plain.stderr, plain.stderr
    assert flagged.returncode == 0 and "epoch" not in flagged.stdout, flagged.stdout  # no process started
    placed = []
    for step in ("original", "migrated"):
        if step == "migrated":
            r = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
            assert "Converted: TDL006 1, TDL007 8, TDL008 4, TDL201 1" in r.stderr.decode(), r.stderr.decode()
        report = tmp_path / f"{step}.json"
        sim = cli("sim", "--gpus", "2", "--report", str(report), *spawned(), cwd=tmp_path)
        assert sim.returncode == 0, sim.stderr.decode()
        placed.append([(c["devices"], [(g["backend"], g["device"]) for g in c["process_groups"]])
                       for c in json.loads(report.read_text())["children"]])
    assert placed[0] == placed[1], placed
    assert sorted(sorted(devices) for devices, _ in placed[0]) == [["cuda:0"], ["cuda:1"]], placed
    text = script.read_text()
    for line in ("            if torch.cuda.is_available():\n                torch.cuda.set_device(args.gpu)\n"
                 "                model.cuda(args.gpu)\n",
                 'parser.add_argument("--dist-backend", default="nccl" if torch.cuda.is_available() else "gloo", ',
                 '                loc = "cuda:{}".format(args.gpu) if torch.cuda.is_available() else "cpu"\n'):
        assert line in text, text
    for args in (["main.py"], ["main.py", "--resume", "checkpoint.pth.tar"], spawned(),
                 spawned("--resume", "checkpoint.pth.tar")):
        after = run(args)
        assert after.returncode == 0 and "epoch 0 loss" in after.stdout, (args, after.stderr)
    assert "=> loading checkpoint" in after.stdout
    assert cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stdout == b""


def test_statements_guarded_in_a_row_share_one_block():
    """Each CUDA-only statement a migration guards gets `if torch.cuda.is_available():`;
    consecutive ones share the first's block (one question, read as one step), not
    across a comment or another statement. A statement of several lines keeps its
    continuation lines under it, one level deeper, unless a line break is inside a
    string (indenting it would change the string)."""
    from torchdevlint.settings import Settings

    source = textwrap.dedent("""\
        import torch


        def wait(rank):
            torch.cuda.synchronize()
            torch.cuda.synchronize(rank)
            torch.cuda.synchronize()
            # then
            torch.cuda.synchronize()
            torch.cuda.synchronize(
                rank)  # the rank's
            x = rank
            torch.cuda.synchronize(int('''
        0'''))
            return x
        """)
    settings = Settings(extend_select=("TDL008",))
    out = fixed(source, settings=settings)
    assert out == textwrap.dedent("""\
        import torch


        def wait(rank):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
                torch.cuda.synchronize(rank)
                torch.cuda.synchronize()
            # then
            if torch.cuda.is_available():
                torch.cuda.synchronize()
                torch.cuda.synchronize(
                    rank)  # the rank's
            x = rank
            if torch.cuda.is_available():
                torch.cuda.synchronize(int('''
        0'''))
            return x
        """), out
    assert fixed(out, settings=settings) == out


DINO_UTILS = textwrap.dedent("""\
    \"\"\"DINO's utils.init_distributed_mode (iBOT and other forks keep it): the launcher's
    environment, else SLURM's, else one process on one GPU, else a stop.\"\"\"
    import os
    import sys

    import torch
    import torch.distributed as dist


    def init_distributed_mode(args):
        if 'RANK' in os.environ and 'WORLD_SIZE' in os.environ:
            args.rank = int(os.environ["RANK"])
            args.world_size = int(os.environ['WORLD_SIZE'])
            args.gpu = int(os.environ['LOCAL_RANK'])
        elif 'SLURM_PROCID' in os.environ:
            args.rank = int(os.environ['SLURM_PROCID'])
            args.gpu = args.rank % torch.cuda.device_count()
        # launched naively with `python main_dino.py`
        elif torch.cuda.is_available():
            print('Will run the code on one GPU.')
            args.rank, args.gpu, args.world_size = 0, 0, 1
            os.environ['MASTER_ADDR'] = '127.0.0.1'
            os.environ['MASTER_PORT'] = args.port
        else:
            print('Does not support training without GPU.')
            sys.exit(1)
        dist.init_process_group(backend="nccl", init_method="env://", world_size=args.world_size, rank=args.rank)
        torch.cuda.set_device(args.gpu)
        dist.barrier()
    """)

DINO_MAIN = textwrap.dedent("""\
    import argparse

    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import utils


    def train(args):
        utils.init_distributed_mode(args)
        torch.manual_seed(0)
        student = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4))
        student = student.cuda()
        if any(isinstance(m, nn.BatchNorm1d) for m in student.modules()):
            student = nn.SyncBatchNorm.convert_sync_batchnorm(student)
        student = nn.parallel.DistributedDataParallel(student, device_ids=[args.gpu])
        center = torch.zeros(1, 4).cuda()
        optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
        for it in range(2):
            out = student(torch.randn(4, 6).cuda(non_blocking=True))
            batch_center = out.detach().sum(0, keepdim=True)
            dist.all_reduce(batch_center)
            center = 0.9 * center + 0.1 * batch_center / (4 * dist.get_world_size())
            loss = (out - center).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
            print("it", it, "loss %.4f" % loss.item())


    if __name__ == '__main__':
        parser = argparse.ArgumentParser()
        parser.add_argument("--port", default="29500")
        train(parser.parse_args())
    """)


def test_a_distributed_setup_that_refuses_the_cpu_runs_on_it_after_a_migration(tmp_path):
    """DINO's shape: `elif torch.cuda.is_available():` one process on one GPU, `else:`
    print and `sys.exit(1)`, in a helper module's distributed setup; the main script binds
    nothing itself (the helper's name says it does: no TDL003), and converts SyncBatchNorm
    under an `if` on the model beside its `.cuda()` calls. The migration takes the one-GPU
    branch without CUDA too: run plainly, the program trains on the CPU, and under the
    simulator it places what it placed before."""
    import socket
    import subprocess
    import sys

    (tmp_path / "utils.py").write_text(DINO_UTILS)
    (tmp_path / "main_dino.py").write_text(DINO_MAIN)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    run = [sys.executable, "main_dino.py", "--port", port]
    before = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert before.returncode == 1 and before.stdout == "Does not support training without GPU.\n", before.stderr
    assert "TDL003" not in cli("check", "--isolated", "--no-cache", ".", cwd=tmp_path).stdout.decode()
    placed = []
    for step in ("original", "migrated"):
        if step == "migrated":
            r = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
            assert "Converted: TDL007 4, TDL008 6" in r.stderr.decode(), r.stderr.decode()
        report = tmp_path / f"{step}.json"
        sim = cli("sim", "--gpus", "2", "--report", str(report), "main_dino.py", "--port", port, cwd=tmp_path)
        assert sim.returncode == 0 and b"it 1 loss" in sim.stdout, sim.stderr.decode()
        data = json.loads(report.read_text())
        placed.append((data["devices"], [(g["backend"], g["device"]) for g in data["process_groups"]]))
    assert placed[0] == placed[1] and list(placed[0][0]) == ["cuda:0"], placed
    text = (tmp_path / "utils.py").read_text()
    assert "    else:\n        print('Will run the code on one GPU.')\n" in text and "sys.exit(1)" not in text, text
    after = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0 and after.stdout.splitlines()[-1].startswith("it 1 loss"), after.stderr
    assert cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stdout == b""


def test_the_one_gpu_branch_keeps_the_file_s_line_breaks():
    """The elif-is_available rewrite writes the branch as written, in a CRLF file with its
    CRLF line breaks (not a mixed file), and keeps the header's comment; the import of
    `sys`, which only the stop used, goes with it, its line break too."""
    from torchdevlint.settings import Settings

    source = ("import os\r\nimport sys\r\nimport torch\r\nimport torch.distributed as dist\r\n\r\n\r\n"
              "def init(args):\r\n    if 'RANK' in os.environ:\r\n        args.rank = int(os.environ['RANK'])\r\n"
              "    elif torch.cuda.is_available():  # one process\r\n        args.rank = 0\r\n        args.gpu = 0\r\n"
              "    else:\r\n        print('Does not support training without GPU.')\r\n        sys.exit(1)\r\n"
              "    dist.init_process_group('gloo')\r\n")
    settings = Settings(extend_select=("TDL008",))
    out = fixed(source, settings=settings)
    assert out == ("import os\r\nimport torch\r\nimport torch.distributed as dist\r\n\r\n\r\n"  # (sys: the stop's)
                   "def init(args):\r\n    if 'RANK' in os.environ:\r\n        args.rank = int(os.environ['RANK'])\r\n"
                   "    else:  # one process\r\n        args.rank = 0\r\n        args.gpu = 0\r\n"
                   "    dist.init_process_group('gloo')\r\n"), repr(out)
    assert fixed(out, settings=settings) == out


def _simulated(root, script: str, gpus: str, tag: str):
    """``script`` run under the simulator with ``gpus`` GPUs: (its stdout, the report's
    tensors and bytes per device)."""
    placed = root / f"{tag}.json"
    sim = cli("sim", "--gpus", gpus, "--report", str(placed), script, cwd=root)
    assert sim.returncode == 0, sim.stderr.decode()
    return sim.stdout, json.loads(placed.read_text())["devices"]


SSD_TRAIN = textwrap.dedent("""\
    import argparse

    import torch
    import torch.nn as nn
    from torch.autograd import Variable

    from layers import MultiBoxLoss, PriorBox


    def str2bool(v):
        return v.lower() in ("yes", "true", "t", "1")


    parser = argparse.ArgumentParser()
    parser.add_argument('--cuda', default=True, type=str2bool, help='Use CUDA to train model')
    args = parser.parse_args()

    if torch.cuda.is_available():
        if args.cuda:
            torch.set_default_tensor_type('torch.cuda.FloatTensor')
        if not args.cuda:
            torch.set_default_tensor_type('torch.FloatTensor')
    else:
        torch.set_default_tensor_type('torch.FloatTensor')


    class SSD(nn.Module):
        def __init__(self):
            super(SSD, self).__init__()
            self.vgg = nn.Conv2d(3, 4, 3, padding=1)
            self.loc = nn.Conv2d(4, 4, 1)
            self.priors = Variable(PriorBox(4).forward(), volatile=True)

        def forward(self, x):
            x = self.vgg(x)
            return self.loc(x).permute(0, 2, 3, 1).reshape(x.size(0), -1, 4), self.priors


    def save_basenet(vgg):
        torch.save(vgg.state_dict(), 'vgg.pth')


    def train():
        torch.manual_seed(0)
        ssd_net = SSD()
        net = ssd_net
        if args.cuda:
            net = torch.nn.DataParallel(ssd_net)
        save_basenet(ssd_net.vgg)  # (the pretrained base network, written elsewhere)
        ssd_net.vgg.load_state_dict(torch.load('vgg.pth'))
        if args.cuda:
            net = net.cuda()
        criterion = MultiBoxLoss(args.cuda)
        for iteration in range(2):
            images = torch.rand(2, 3, 4, 4)
            targets = [torch.rand(1, 4), torch.rand(1, 4)]
            if args.cuda:
                images = Variable(images.cuda())
                targets = [Variable(ann.cuda(), volatile=True) for ann in targets]
            loss = criterion(net(images), targets)
            loss.backward()
            print('iter %d loss %.4f' % (iteration, loss.item()))


    if __name__ == '__main__':
        train()
    """)

SSD_LAYERS = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class PriorBox(object):
        def __init__(self, size):
            self.size = size

        def forward(self):
            mean = []
            for i in range(self.size * self.size):
                mean += [(i % self.size + 0.5) / self.size, (i // self.size + 0.5) / self.size, 0.2, 0.2]
            return torch.Tensor(mean).view(-1, 4)


    class MultiBoxLoss(nn.Module):
        def __init__(self, use_gpu=True):
            super(MultiBoxLoss, self).__init__()
            self.use_gpu = use_gpu

        def forward(self, predictions, targets):
            loc_data, priors = predictions
            num = loc_data.size(0)
            priors = priors[:loc_data.size(1), :]
            loc_t = torch.Tensor(num, priors.size(0), 4)
            for idx in range(num):
                loc_t[idx] = (targets[idx][:, :4] - priors).abs()
            if self.use_gpu:
                loc_t = loc_t.cuda()
            return F.smooth_l1_loss(loc_data, loc_t)
    """)


def test_a_cuda_default_tensor_type_stays_while_the_program_builds_with_torch_tensor(tmp_path):
    """ssd.pytorch's shape: the script sets `torch.cuda.FloatTensor` as the default
    type (under `is_available()`), and its prior boxes and loss targets are built with
    `torch.Tensor(...)` in another module. `set_default_device` would leave those on the
    CPU, beside the GPU's tensors: on one GPU (DataParallel does not gather there) the
    loss would mix devices. The default type stays (display, naming the call); the rest
    of the migration goes ahead: the script runs on the CPU, and under the simulator
    with one and two GPUs places and computes what it did before."""
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(SSD_TRAIN)
    (tmp_path / "layers.py").write_text(SSD_LAYERS)
    before = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert before.returncode != 0 and "CUDA" in before.stderr
    runs = {}
    for step in ("original", "migrated"):
        if step == "migrated":
            r = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
            report = r.stderr.decode()
            assert "Converted: TDL001 3, TDL006 1, TDL201 1" in report, report
            assert "TDL005     1  display only" in report and "(layers.py:14)" in report, report
        for gpus in ("1", "2"):
            runs[step, gpus] = _simulated(tmp_path, "train.py", gpus, f"{step}-{gpus}")
    for gpus in ("1", "2"):
        (out, placed), (out_after, placed_after) = runs["original", gpus], runs["migrated", gpus]
        assert out == out_after and out.count(b"loss") == 2, gpus
        # the same, but for the checkpoint's two tensors (a 4x3x3x3 weight, 4 biases), which
        # `map_location="cpu"` now loads onto the CPU before `load_state_dict` copies them
        assert placed_after["cuda:0"] == {"tensors": placed["cuda:0"]["tensors"] - 2,
                                          "bytes": placed["cuda:0"]["bytes"] - 4 * (108 + 4)}, (placed, placed_after)
        assert {k: v for k, v in placed.items() if k != "cuda:0"} == \
            {k: v for k, v in placed_after.items() if k != "cuda:0"}, (placed, placed_after)
    assert "torch.set_default_tensor_type('torch.cuda.FloatTensor')" in (tmp_path / "train.py").read_text()
    after = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0 and after.stdout.count("loss") == 2, after.stderr
    assert cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stdout == b""


PINNED_MODEL = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def prepare(self):
            self.cuda()
            return self

        def forward(self, x):
            return self.fc(x) + torch.zeros(2).cuda()
    """)

PINNED_TRAIN = textwrap.dedent("""\
    import argparse

    import torch

    from model import Net


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--gpu", type=int, default=1)
        args = parser.parse_args()
        torch.manual_seed(0)
        torch.cuda.set_device(args.gpu)
        x = torch.ones(3, 2).cuda()
        net = Net().prepare()
        print(round(net(x).sum().item(), 4))


    if __name__ == "__main__":
        main()
    """)


def test_set_device_stays_in_force_for_the_model_code_of_other_modules(tmp_path):
    """A script pins GPU `--gpu` and its model, in another module, moves itself with
    `.cuda()`: the current device. Replacing `set_device` with an explicit device for the
    script's own `.cuda()` would leave the model on GPU 0 (the migrated program crashed
    under the simulator, "cuda:1 and cuda:0"); the rest of `main` is scoped in
    `with torch.cuda.device(...)` instead. Under the simulator the migration places what
    the original did, and it runs on the CPU."""
    import subprocess
    import sys

    (tmp_path / "model.py").write_text(PINNED_MODEL)
    (tmp_path / "train.py").write_text(PINNED_TRAIN)
    runs = []
    for step in ("original", "migrated"):
        if step == "migrated":
            r = cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
            assert "TDL101 1" in r.stderr.decode(), r.stderr.decode()
        runs.append(_simulated(tmp_path, "train.py", "2", step))
    assert runs[0] == runs[1] and sorted(runs[0][1]) == ["cuda:1"], runs
    script = (tmp_path / "train.py").read_text()
    assert "    with torch.cuda.device(args.gpu if torch.cuda.is_available() else -1):\n" in script, script
    assert "torch.cuda.set_device" not in script
    after = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0 and after.stdout.strip() == runs[0][0].decode().strip(), (after.stdout, after.stderr)
    assert cli("fix", "--isolated", "--no-cache", "--unsafe-fixes", "--diff", ".", cwd=tmp_path).stdout == b""

"""TDL003 rank-code-on-fixed-device: per-rank code placing work on a rank-independent
device before anything bound the rank's device."""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from .. import names as N
from ..analysis import CallSite
from ..model import Applicability, Edit, Fix, Violation
from .base import Context, Example, Rule, Uninsertable


class RankCodeOnFixedDevice(Rule):
    code = "TDL003"
    name = "rank-code-on-fixed-device"
    summary = "per-rank code places work on a device that does not depend on the rank: every rank uses GPU 0"
    triggers = ("@gpu-use", "@gpu-ordinal")  # a bare `.cuda(`, a "cuda" string, `.cuda(0)`, `device=0`
    # the gate on the code: a bare `.cuda()`, or a GPU placement with literals (`.cuda(0)`,
    # a "cuda"/"cuda:0" device string where a device goes); and what makes code
    # per-process (analysis.devices): spawn/start_processes, a process pool, a launcher
    # handed a function, an RPC worker, a process group set up, a rank marker read by a
    # script launched per rank, or a Process running a function of the file (a target, a
    # subclass, `ctx.Process`; walked last)
    needs = (("bare:cuda", "place:cuda"),
             ("name:Pool", "name:ProcessPoolExecutor", "name:spawn", "name:start_processes",
              *(f"call:{n}" for n in sorted(N.LAUNCHERS)), "qual:torch.distributed.rpc.init_rpc",
              *(f"qual:{q}" for q in sorted(N.INIT_PROCESS_GROUP)), "text:rank", "target:Process"))
    # whatever makes code per-process (see analysis.devices): targets, launchers, RPC,
    # rank markers of a script launched per rank
    also_requires = ("@rank-launch",)  # what starts processes, as a word; a rank marker (words.TEXT_TESTS)
    fixable = "sometimes"
    fix_summary = ('`torch.device("cuda", local_rank)`, or binding the rank\'s GPU in the spawned worker '
                   '(unsafe); else display')
    what = """
        Code that runs once per process, rank or worker — an `mp.spawn`/`Process` target,
        a function handed to a launcher (`elastic_launch`, `start_processes`, `spawn`), an
        RPC worker, a script launched per rank (it reads `LOCAL_RANK`/`RANK`/`WORLD_SIZE`,
        takes `--local_rank`, asks horovod for its local rank, or initialises a process
        group of several processes: not `world_size=1`, not the `"fake"` backend, with
        which torchtitan's precompile poses as every rank from one process), and the
        helpers those call — that places work on a device that does not
        depend on the rank before anything bound the rank's device: a bare `.cuda()`,
        `.to("cuda")`, `torch.device("cuda")`, `device="cuda"`, a checkpoint loaded with
        `map_location="cuda:0"` (every rank's copy on GPU 0), or a literal `cuda:0` /
        `.cuda(0)`. Quiet after `torch.cuda.set_device(local_rank)` (or any backend's
        `set_device`, a per-process `CUDA_VISIBLE_DEVICES`, a launcher that binds the
        device, a helper of another module named for it, `select_device`, or for the
        distributed setup that binds it, `init_distributed_mode`, `init_dist`,
        `distributed_option.init()` (a bare verb on an object named for it), or for
        the process's environment and handed its rank, `setup_bagua_env(rank, env)`) on the
        same path, called first by the function, by a helper it calls first, or by a
        caller before it calls it (not a worker that builds its model with a helper and
        binds only after: `model = build()` then `set_device(rank)`; a distributed setup
        run only on a flag included: where
        it does not run there is one process); and for an index-less
        device bound to a name (`device = torch.device("cuda" if ... else "cpu")`) in a
        file that binds the rank's device: it is the current device where it is used.
        A bare `.cuda()` that ignores a device the code chose (`.to(args.device)` before it)
        is TDL004's: its fix is that device.
    """
    why = """
        Every rank runs the same line, and the line names the same GPU for all of them:
        each rank creates a CUDA context and allocates on GPU 0 (~500 MiB each before any
        work), GPU 0 runs out of memory or every rank's work lands on one card while the
        others idle (pytorch/pytorch#135279, pytorch/examples#969).
    """
    example = """
        def worker(rank, world_size):
            model = Net().cuda()
            ...

        torch.multiprocessing.spawn(worker, args=(2,), nprocs=2)
    """
    use_instead = """
        def worker(rank, world_size):
            device = torch.device("cuda", rank)
            torch.cuda.set_device(device)
            model = Net().to(device)
    """
    fix_safety = """
        When the code names the local rank (a `local_rank` variable, `args.local_rank`,
        the index an `mp.spawn` target receives, `LOCAL_RANK` from the launcher), the fix
        names the rank's device `torch.device("cuda", <local rank>)` at the site:
        **unsafe**, it changes placement (which is the point). When no rank is in scope
        at a bare `.cuda()` (a helper, a class the worker builds) but a single
        `mp.spawn`/`start_processes` target runs it, that target receives the local rank
        first (after the arguments a `functools.partial` binds): the fix binds each
        process's GPU as the target's first statement (`if torch.cuda.is_available():
        torch.cuda.set_device(rank % torch.cuda.device_count())`)
        and moves to the script's device (CPU fallback; in a library module, the
        function's own), which then resolves to that GPU: **unsafe**. Otherwise display
        only: bind the rank's device first.
    """
    VALID = (
        # one process posing as every rank (torchtitan's single-process precompile)
        "import torch\nimport torch.distributed as dist\n\n\ndef main(world_size):\n"
        "    dist.init_process_group('fake', rank=0, world_size=world_size)\n"
        "    device = torch.device('cuda:0')\n    torch.cuda.set_device(device)\n\n\n"
        "if __name__ == '__main__':\n    main(8)\n",
        # a distributed setup of another module binds the rank's GPU (DINO's, DeiT's and
        # DETR's `init_distributed_mode`: `set_device(args.gpu)` before the process group)
        "import argparse\nimport torch\nimport torch.distributed as dist\nimport torch.nn as nn\nimport utils\n\n\n"
        "def train(args):\n    utils.init_distributed_mode(args)\n    model = nn.Linear(2, 2).cuda()\n"
        "    x = torch.ones(1).cuda()\n    dist.all_reduce(x)\n"
        "    return nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu]), x\n\n\n"
        "if __name__ == '__main__':\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--local_rank', default=0, type=int)\n    train(parser.parse_args())\n",
        # ESPnet's worker: a method of another module's option object binds the rank's GPU
        # (`init_torch_distributed`: `set_device(self.local_rank)`) before the model moves
        "import torch\nimport torch.multiprocessing as mp\nfrom options import DistributedOption\n\n\n"
        "def main_worker(args):\n    option = DistributedOption(args)\n    option.init_torch_distributed()\n"
        "    return Net().to(device='cuda' if args.ngpu > 0 else 'cpu')\n\n\n"
        "def main(args):\n    for i in range(args.ngpu):\n"
        "        mp.Process(target=main_worker, args=(args,)).start()\n",
        # ESPnet 0.8's: the option object named for the distributed run sets it up, binding
        # the local rank's GPU (`distributed_option.init()`)
        "import torch\nimport torch.multiprocessing as mp\nfrom options import DistributedOption\n\n\n"
        "def main_worker(args):\n    distributed_option = DistributedOption(args)\n    distributed_option.init()\n"
        "    return Net().to(device='cuda' if args.ngpu > 0 else 'cpu')\n\n\n"
        "def main(args):\n    for i in range(args.ngpu):\n"
        "        mp.Process(target=main_worker, args=(args,)).start()\n",
        # a process pool whose initializer binds each worker's GPU before any task runs
        "import torch\nimport torch.multiprocessing as mp\n\n\n"
        "def bind(queue):\n    torch.cuda.set_device(queue.get())\n\n\n"
        "def work(n):\n    return torch.zeros(n).cuda().sum().item()\n\n\n"
        "def main(queue):\n    with mp.Pool(2, initializer=bind, initargs=(queue,)) as pool:\n"
        "        return pool.map(work, [1, 2])\n",
        # a device compared, itself or its type, before the rank binds its own: no placement
        "import torch\nimport torch.multiprocessing as mp\ndef worker(rank, device):\n"
        "    same = device.type == torch.device('cuda').type\n    torch.cuda.set_device(rank)\n    return same\n"
        "if __name__ == '__main__':\n    mp.spawn(worker, args=(None,), nprocs=2)\n",
        "import torch\nimport torch.multiprocessing as mp\n"
        "def worker(rank):\n    torch.cuda.set_device(rank)\n    return torch.zeros(1).cuda()\n"
        "mp.spawn(worker, nprocs=2)\n",
        "import torch\nimport torch.multiprocessing as mp\n"
        "def worker(rank):\n    return torch.zeros(1).cuda(rank)\nmp.spawn(worker, nprocs=2)\n",
        "import torch\ndef single(n):\n    return torch.zeros(n).cuda()\n",
        "import os, torch\nimport torch.multiprocessing as mp\n"
        "def worker(rank):\n    os.environ['CUDA_VISIBLE_DEVICES'] = str(rank)\n    return torch.zeros(1).to('cuda')\n"
        "mp.spawn(worker, nprocs=2)\n",
        # Tacotron 2: the caller runs the distributed setup (on a flag: else one process) first
        "import torch\nimport torch.distributed as dist\n"
        "def init_distributed(n_gpus, rank):\n    torch.cuda.set_device(rank % torch.cuda.device_count())\n"
        "    dist.init_process_group('nccl', world_size=n_gpus, rank=rank)\n"
        "def load_model():\n    return Net().cuda()\n"
        "def train(distributed, n_gpus, rank):\n    if distributed:\n        init_distributed(n_gpus, rank)\n"
        "    model = load_model()\n",
        # an index-less device object: the current device where it is used, after the binding
        "import os, torch\nimport torch.distributed as dist\n"
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "def main():\n    torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n    dist.init_process_group('nccl')\n"
        "    return Net().to(device)\n",
        # a bare `.cuda()` that ignores a device the code chose (`--device`): TDL004's, `.to(args.device)`
        "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--device', default='cpu')\n"
        "p.add_argument('--local_rank', type=int, default=-1)\nargs = p.parse_args()\n"
        "model = torch.nn.Linear(2, 2).to(args.device)\nx = torch.randn(4, 2).cuda()\n",
        # a helper of another module sets up the process's environment with its rank
        # (Bagua's tests: `setup_bagua_env(rank, env)` calls `set_device(rank)`)
        "import multiprocessing\nimport torch\nfrom tests.internal.multi_process import setup_bagua_env\n\n\n"
        "def run_model(rank, env):\n    setup_bagua_env(rank, env)\n    model = Net().cuda()\n"
        "    return model(torch.randn(4, 2).cuda())\n\n\n"
        "def test_run(env):\n    for i in range(2):\n"
        "        multiprocessing.Process(target=run_model, args=(i, env)).start()\n",
    )
    INVALID = (
        # an environment's setup not handed the rank (a simulator's, as RL workers make
        # one) binds no GPU
        Example(
            "import multiprocessing\nimport torch\nfrom envs import init_env\n\n\n"
            "def run_model(rank, env):\n    init_env(env)\n    return Net().cuda()\n\n\n"
            "def main(env):\n    for i in range(2):\n"
            "        multiprocessing.Process(target=run_model, args=(i, env)).start()\n",
        ),
        # ... nor a bare `init()` of an object not named for the distributed run
        Example(
            "import torch\nimport torch.multiprocessing as mp\nfrom options import TrainerOption\n\n\n"
            "def main_worker(args):\n    trainer_option = TrainerOption(args)\n    trainer_option.init()\n"
            "    return Net().to(device='cuda' if args.ngpu > 0 else 'cpu')\n\n\n"
            "def main(args):\n    for i in range(args.ngpu):\n"
            "        mp.Process(target=main_worker, args=(args,)).start()\n",
        ),
        # a helper the worker calls before it binds its rank: every rank built it on GPU 0
        Example(
            "import torch\nimport torch.multiprocessing as mp\n\n\ndef build():\n"
            "    return torch.nn.Linear(2, 2).cuda()\n\n\ndef worker(rank):\n    model = build()\n"
            "    torch.cuda.set_device(rank)\n    return model\n\n\n"
            "if __name__ == '__main__':\n    mp.spawn(worker, nprocs=2)\n",
            "import torch\nimport torch.multiprocessing as mp\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n\ndef build():\n'
            "    return torch.nn.Linear(2, 2).to(device)\n\n\ndef worker(rank):\n"
            "    if torch.cuda.is_available():  # each spawned process on its own GPU\n"
            "        torch.cuda.set_device(rank % torch.cuda.device_count())\n    model = build()\n"
            "    torch.cuda.set_device(rank)\n    return model\n\n\n"
            "if __name__ == '__main__':\n    mp.spawn(worker, nprocs=2)\n",
        ),
        Example(
            "import torch\nimport torch.multiprocessing as mp\n"
            "def worker(rank, n):\n    return torch.zeros(n).cuda()\nmp.spawn(worker, args=(3,), nprocs=2)\n",
            "import torch\nimport torch.multiprocessing as mp\n"
            "def worker(rank, n):\n    return torch.zeros(n).to(torch.device(\"cuda\", rank))\n"
            "mp.spawn(worker, args=(3,), nprocs=2)\n",
        ),
        # a GPU's ordinal: every rank allocates on GPU 0
        Example(
            "import torch\nimport torch.multiprocessing as mp\n"
            "def worker(rank, n):\n    return torch.zeros(n, device=0)\nmp.spawn(worker, args=(3,), nprocs=2)\n",
            "import torch\nimport torch.multiprocessing as mp\n"
            "def worker(rank, n):\n    return torch.zeros(n, device=torch.device(\"cuda\", rank))\n"
            "mp.spawn(worker, args=(3,), nprocs=2)\n",
        ),
        # every rank's factory calls default to the same GPU
        Example(
            "import torch\nimport torch.multiprocessing as mp\n"
            "def worker(rank, n):\n    torch.set_default_device('cuda')\n    return torch.zeros(n)\n"
            "mp.spawn(worker, args=(3,), nprocs=2)\n",
            "import torch\nimport torch.multiprocessing as mp\n"
            "def worker(rank, n):\n    torch.set_default_device(torch.device(\"cuda\", rank))\n"
            "    return torch.zeros(n)\n"
            "mp.spawn(worker, args=(3,), nprocs=2)\n",
        ),
        # every rank loads the checkpoint onto GPU 0
        Example(
            "import torch\nimport torch.multiprocessing as mp\ndef worker(rank):\n"
            "    return torch.load('ckpt.pt', map_location='cuda:0')\nmp.spawn(worker, nprocs=2)\n",
            "import torch\nimport torch.multiprocessing as mp\ndef worker(rank):\n"
            "    return torch.load('ckpt.pt', map_location=torch.device(\"cuda\", rank))\nmp.spawn(worker, nprocs=2)\n",
        ),
        # ... or maps its GPU 0 storages to GPU 0 (a location map takes strings)
        Example(
            "import torch\nimport torch.multiprocessing as mp\ndef worker(rank):\n"
            "    return torch.load('ckpt.pt', map_location={'cuda:1': 'cuda:0'})\nmp.spawn(worker, nprocs=2)\n",
            "import torch\nimport torch.multiprocessing as mp\ndef worker(rank):\n"
            "    return torch.load('ckpt.pt', map_location={'cuda:1': f\"cuda:{rank}\"})\nmp.spawn(worker, nprocs=2)\n",
        ),
        Example(
            "import os\nimport torch\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            "x = torch.zeros(2, device='cuda:0')\n",
            "import os\nimport torch\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            "x = torch.zeros(2, device=torch.device(\"cuda\", local_rank))\n",
        ),
        # no rank at the site, but one spawned worker runs it: bind each process's GPU there
        Example(
            "import torch\nimport torch.multiprocessing as mp\nclass Net:\n    def __init__(self):\n"
            "        self.w = torch.zeros(3).cuda()\ndef worker(rank, n):\n    \"\"\"One rank.\"\"\"\n"
            "    return Net()\nif __name__ == '__main__':\n    mp.spawn(worker, args=(3,), nprocs=2)\n",
            "import torch\nimport torch.multiprocessing as mp\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "class Net:\n    def __init__(self):\n"
            "        self.w = torch.zeros(3).to(device)\ndef worker(rank, n):\n    \"\"\"One rank.\"\"\"\n"
            "    if torch.cuda.is_available():  # each spawned process on its own GPU\n"
            "        torch.cuda.set_device(rank % torch.cuda.device_count())\n"
            "    return Net()\nif __name__ == '__main__':\n    mp.spawn(worker, args=(3,), nprocs=2)\n",
        ),
        # ... handed through `partial(worker, cfg)`: the index is the parameter after the bound one
        Example(
            "import functools\nimport torch\nimport torch.multiprocessing as mp\n"
            "def build():\n    return torch.nn.Linear(2, 2).cuda()\n"
            "def worker(cfg, rank):\n    return build()\n"
            "if __name__ == '__main__':\n    mp.spawn(functools.partial(worker, {}), nprocs=2)\n",
            "import functools\nimport torch\nimport torch.multiprocessing as mp\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "def build():\n    return torch.nn.Linear(2, 2).to(device)\n"
            "def worker(cfg, rank):\n"
            "    if torch.cuda.is_available():  # each spawned process on its own GPU\n"
            "        torch.cuda.set_device(rank % torch.cuda.device_count())\n"
            "    return build()\n"
            "if __name__ == '__main__':\n    mp.spawn(functools.partial(worker, {}), nprocs=2)\n",
        ),
        # ... not when two per-process entries reach it (which one's rank?)
        Example(
            "import torch\nimport torch.multiprocessing as mp\ndef build():\n    return torch.zeros(3).cuda()\n"
            "def a(rank):\n    return build()\ndef b(rank):\n    return build()\n"
            "if __name__ == '__main__':\n    mp.spawn(a, nprocs=2)\n    mp.spawn(b, nprocs=2)\n",
        ),
        # ... but where nothing binds the rank's device, every use of it is GPU 0
        Example(
            "import os, torch\nimport torch.distributed as dist\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            "device = torch.device('cuda')\n"
            "def main():\n    return Net().to(device)\n",
            "import os, torch\nimport torch.distributed as dist\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            "device = torch.device(\"cuda\", local_rank)\n"
            "def main():\n    return Net().to(device)\n",
        ),
        Example(
            "import torch\nfrom torch.distributed.elastic.multiprocessing import start_processes\n"
            "def trainer():\n    return torch.device('cuda')\n"
            "start_processes('t', trainer, {}, {}, {})\n",
        ),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        facts = a.devices
        for site, verdict in facts.sites(self.code):
            yield self._report(ctx, site, site.node, verdict.why, bare=True)
        for site, node, code in facts.fixed_placements:
            yield self._report(ctx, site, node, facts.per_rank(site) or "", bare=False, code=code)

    def _report(self, ctx: Context, site: CallSite, node: cst.CSTNode, why: str, bare: bool,
                code: str = ".cuda()") -> Violation:
        rank = ctx.analysis.process.local_rank_expr(site)
        fix = ctx.guarded(self._fix(ctx, site, node, rank, bare))
        shown = ".cuda()" if bare else code
        return ctx.violation(
            node,
            f"`{shown}` in code that {why} and has not bound its device yet: every rank "
            "places this on the same GPU (GPU 0 for a bare `.cuda()`); use the rank's device",
            fix,
        )

    def _fix(self, ctx: Context, site: CallSite, node: cst.CSTNode, rank: Optional[str], bare: bool) -> Fix:
        advice = "bind the rank's device first (`torch.cuda.set_device(local_rank)`) or name it"
        if rank is None:
            bound = self._bind_in_worker(ctx, site, node) if bare else None
            return bound or Fix(Applicability.DISPLAY, f"Not rewritten: no local rank in scope; {advice}")
        try:
            torch, edits = ctx.torch_for(site)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"Not rewritten: {exc}; {advice}")
        device = f'{torch}.device("cuda", {rank})'
        if isinstance(node, cst.Call) and site.method == "cuda":
            edits.append(ctx.cuda_to_device(node, device))
        elif _mapped_location(site, node):  # a load's location map takes strings only
            device = f'f"cuda:{{{rank}}}"'
            edits = [ctx.replace(node, device)]
        else:
            edits.append(ctx.replace(node, device))
        return Fix(Applicability.UNSAFE, f"Use the rank's device `{device}`", tuple(edits))

    def _bind_in_worker(self, ctx: Context, site: CallSite, node: cst.CSTNode) -> Optional[Fix]:
        """No rank where the `.cuda()` is (a helper, a class the worker builds), but one
        ``mp.spawn`` target runs it, and receives the local rank first: bind each process's
        GPU there, first thing (guarded, so that a CPU-only machine skips it; modulo the
        GPU count, so that more processes than GPUs share them as before rather than
        fail), and move to the script's device, which then resolves to that GPU (and
        falls back to the CPU). Every site under that worker shares the two insertions."""
        a = ctx.analysis
        worker = a.devices.spawn_root(site)
        torch = a.torch_alias
        if worker is None or torch is None or a.guarded_torch_import is not None or ctx.module_query_hazard():
            return None
        anchor = min(s.order for s, _ in a.devices.sites(self.code))
        name, definition, why = ctx.device_definition(anchor)
        defines = frozenset({name}) if name is not None else frozenset()
        if name is None:  # a library module: the function's own device (no other fix binds that name)
            name, definition, why = ctx.local_device_definition(site)
        head = ctx.function_head(worker.node)  # type: ignore[arg-type]
        if name is None or head is None:
            return None
        line, indent = head
        rank, newline = a.devices.index_targets[worker.node], a.module.default_newline
        binding = (f"{indent}if {torch}.cuda.is_available():  # each spawned process on its own GPU{newline}"
                   f"{indent}    {torch}.cuda.set_device({rank} % {torch}.cuda.device_count()){newline}")
        edits = [Edit((line, 0), (line, 0), binding)] + list(definition) + [ctx.cuda_to_device(node, name)]
        return Fix(Applicability.UNSAFE,
                   f"Bind each process's GPU first in `{worker.name}` (`torch.cuda.set_device({rank} % "
                   f"torch.cuda.device_count())`, `{rank}` is the local rank) and use `.to({name})` "
                   f"({why})", tuple(edits), defines)


def _mapped_location(site: CallSite, node: cst.CSTNode) -> bool:
    """A value of a load's ``map_location={"cuda:1": "cuda:0"}``: torch maps location
    strings to location strings there (a ``torch.device`` fails as it restores)."""
    arg = site.keyword("map_location")
    return (arg is not None and isinstance(arg.value, cst.Dict)
            and any(isinstance(e, cst.DictElement) and e.value is node for e in arg.value.elements))

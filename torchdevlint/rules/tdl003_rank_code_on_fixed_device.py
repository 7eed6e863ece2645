"""TDL003 rank-code-on-fixed-device: per-rank code placing work on a rank-independent
device before anything bound the rank's device."""

from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from .. import names as N
from ..analysis import CallSite
from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule, Uninsertable


class RankCodeOnFixedDevice(Rule):
    code = "TDL003"
    name = "rank-code-on-fixed-device"
    summary = "per-rank code places work on a device that does not depend on the rank: every rank uses GPU 0"
    triggers = ("cuda",)
    # the gate on the code: `.cuda(...)`, or a "cuda"/"cuda:0" device string; and what
    # makes code per-process (analysis.devices): a Process (target, subclass, `ctx.Process`),
    # spawn/start_processes, a process pool, a launcher handed a function, an RPC worker,
    # a process group set up, or a rank marker read by a script launched per rank
    needs = (("call:cuda", "str^cuda"),
             ("name:Process", "name:Pool", "name:ProcessPoolExecutor", "name:spawn", "name:start_processes",
              *(f"call:{n}" for n in sorted(N.LAUNCHERS)), "qual:torch.distributed.rpc.init_rpc",
              *(f"qual:{q}" for q in sorted(N.INIT_PROCESS_GROUP)), "text:rank"))
    # whatever makes code per-process (see analysis.devices): targets, launchers, RPC,
    # rank markers of a script launched per rank
    also_requires = ("spawn", "Process", "Pool", "RANK", "WORLD_SIZE", "SLURM_LOCALID", "local_rank",
                     "local-rank", "init_process_group", "init_device_mesh", "init_distributed",
                     "launch", "call_main", "distributed_main", "init_rpc", "start_processes")
    fixable = "sometimes"
    fix_summary = '`torch.device("cuda", local_rank)` (unsafe) or display'
    what = """
        Code that runs once per process, rank or worker — an `mp.spawn`/`Process` target,
        a function handed to a launcher (`elastic_launch`, `start_processes`, `spawn`), an
        RPC worker, a script launched per rank (it reads `LOCAL_RANK`/`RANK`/`WORLD_SIZE`,
        takes `--local_rank`, asks horovod for its local rank, or initialises a process
        group), and the helpers those call — that places work on a device that does not
        depend on the rank before anything bound the rank's device: a bare `.cuda()`,
        `.to("cuda")`, `torch.device("cuda")`, `device="cuda"`, or a literal `cuda:0` /
        `.cuda(0)`. Quiet after `torch.cuda.set_device(local_rank)` (or any backend's
        `set_device`, a per-process `CUDA_VISIBLE_DEVICES`, a launcher that binds the
        device) on the same path.
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
        **unsafe**, it changes placement (which is the point). Otherwise display only:
        bind the rank's device first.
    """
    VALID = (
        "import torch\nimport torch.multiprocessing as mp\n"
        "def worker(rank):\n    torch.cuda.set_device(rank)\n    return torch.zeros(1).cuda()\n"
        "mp.spawn(worker, nprocs=2)\n",
        "import torch\nimport torch.multiprocessing as mp\n"
        "def worker(rank):\n    return torch.zeros(1).cuda(rank)\nmp.spawn(worker, nprocs=2)\n",
        "import torch\ndef single(n):\n    return torch.zeros(n).cuda()\n",
        "import os, torch\nimport torch.multiprocessing as mp\n"
        "def worker(rank):\n    os.environ['CUDA_VISIBLE_DEVICES'] = str(rank)\n    return torch.zeros(1).to('cuda')\n"
        "mp.spawn(worker, nprocs=2)\n",
    )
    INVALID = (
        Example(
            "import torch\nimport torch.multiprocessing as mp\n"
            "def worker(rank, n):\n    return torch.zeros(n).cuda()\nmp.spawn(worker, args=(3,), nprocs=2)\n",
            "import torch\nimport torch.multiprocessing as mp\n"
            "def worker(rank, n):\n    return torch.zeros(n).to(torch.device(\"cuda\", rank))\n"
            "mp.spawn(worker, args=(3,), nprocs=2)\n",
        ),
        Example(
            "import os\nimport torch\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            "x = torch.zeros(2, device='cuda:0')\n",
            "import os\nimport torch\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            "x = torch.zeros(2, device=torch.device(\"cuda\", local_rank))\n",
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
        fix = ctx.guarded(self._fix(ctx, site, node, rank, bare), node if isinstance(node, cst.Call) else None)
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
            return Fix(Applicability.DISPLAY, f"Not rewritten: no local rank in scope; {advice}")
        try:
            torch, edits = ctx.torch_for(site)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"Not rewritten: {exc}; {advice}")
        device = f'{torch}.device("cuda", {rank})'
        if isinstance(node, cst.Call) and site.method == "cuda":
            edits.append(ctx.cuda_to_device(node, device))
        else:
            edits.append(ctx.replace(node, device))
        return Fix(Applicability.UNSAFE, f"Use the rank's device `{device}`", tuple(edits))

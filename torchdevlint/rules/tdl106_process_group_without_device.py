"""TDL106 process-group-without-device: an NCCL process group whose rank bound no GPU."""

from __future__ import annotations

import re
from typing import Iterable, Optional, Tuple

import libcst as cst

from ..analysis import CallSite, one_process_group
from ..model import Applicability, Fix, Violation
from .. import names as N
from .base import Context, Example, Rule, Uninsertable


class ProcessGroupWithoutDevice(Rule):
    code = "TDL106"
    name = "process-group-without-device"
    summary = "NCCL process group in a process that never binds its rank's GPU: every rank uses GPU 0"
    triggers = ("init_process_group",)
    needs = (tuple(f"qual:{q}" for q in sorted(N.INIT_PROCESS_GROUP_TORCH)),)  # the gate on the code
    fixable = "sometimes"
    fix_summary = ('`device_id=torch.device("cuda", local_rank)`, under the test that chooses NCCL where the '
                   'call has one (unsafe), or display')
    what = """
        `torch.distributed.init_process_group(...)` with the NCCL backend (`"nccl"`,
        `"cuda:nccl"`, `"cpu:gloo,cuda:nccl"`, a name bound to one of those, or no
        backend at all: the default uses NCCL for CUDA) without `device_id=`, when
        nothing on the process's setup path binds the rank's device. The setup path is
        the function that makes the call, the functions of this file that call it, and
        everything those call (where one calls a function it was handed, every function
        of this file handed on as a value, `mp.spawn(partial(wrapper, test_fn))`), and,
        for a call in a method, the object's life: every method of its class, of the
        classes of this file it derives from and of those that derive from it (a
        trainer that opens the group in `__init__` and binds in `train()`). A
        binding is `torch.cuda.set_device(...)` (any backend's `set_device`,
        `torch.accelerator.set_device_index`), a
        `with torch.cuda.device(...)` block, a per-process `CUDA_VISIBLE_DEVICES`
        assignment, or a helper whose name says it binds one (`select_device`,
        `setup_device` ...). Quiet when the backend is computed elsewhere (unknowable
        here), when `**kwargs` may carry `device_id`, for a group of one process
        (`world_size=1`: no other rank shares GPU 0 with it), and where the function
        hands the local rank back (returns it) and nothing in this file calls it: a
        helper whose caller, in another file, binds that rank next (NCCL builds the
        communicator at the first collective, not at this call).
    """
    why = """
        NCCL builds each rank's communicator on the current device. A rank that never
        bound its GPU is on GPU 0, like every other rank: barriers and collectives then
        hang or run out of memory on one card, and torch warns "using GPU 0 to perform
        barrier as devices used by this process are currently unknown" (every rank also
        creates a ~500 MiB context on GPU 0).
    """
    example = """
        import torch.distributed as dist

        def worker(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            model = DDP(Net().to(rank), device_ids=[rank])
    """
    use_instead = """
        import torch.distributed as dist

        def worker(rank, world_size):
            torch.cuda.set_device(rank)   # or device_id=torch.device("cuda", rank) below
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            model = DDP(Net().to(rank), device_ids=[rank])
    """
    fix_safety = """
        When the code names the local rank (a `local_rank` variable, `args.local_rank`,
        the index an `mp.spawn` target receives, or the parameter a spawn target passes
        it to, or the index the function itself puts its work on: `device_ids=[rank]`,
        `"cuda:{}".format(device_id)`), the fix adds `device_id=torch.device("cuda", <local rank>)`. It is
        **unsafe**: it binds the communicator eagerly at this call (torch >= 2.3), and on
        a machine without CUDA the call fails where the NCCL backend would have failed
        later anyway. Where the call itself chooses NCCL on a test (`backend="nccl" if
        device_type == "cuda" else "gloo"`), the device follows the same test
        (`device_id=torch.device("cuda", <local rank>) if device_type == "cuda" else
        None`): gloo's run on the CPU keeps working (a CUDA `device_id` would stop it on a
        build without CUDA). Otherwise display only.
    """
    VALID = (
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank, world):\n    torch.cuda.set_device(rank)\n"
        "    dist.init_process_group('nccl', rank=rank, world_size=world)\n",
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank, world):\n    dist.init_process_group('nccl', rank=rank, world_size=world)\n"
        "def worker(rank, world):\n    setup(rank, world)\n    torch.cuda.set_device(rank)\n",
        "import torch\nimport torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n",
        "import torch\nimport torch.distributed as dist\n"
        "def setup(args):\n    dist.init_process_group(backend=args.dist_backend)\n",
        "import torch\nimport torch.distributed as dist\n"
        "def setup(lr):\n    dist.init_process_group('nccl', device_id=torch.device('cuda', lr))\n",
        "import torch\nimport torch.distributed as dist\n"
        "def setup(**kw):\n    dist.init_process_group('nccl', **kw)\n",
        "import os, torch\nimport torch.distributed as dist\n"
        "def worker(rank):\n    os.environ['CUDA_VISIBLE_DEVICES'] = str(rank)\n"
        "    dist.init_process_group('nccl')\n",
        "import torch.distributed as dist\nfrom transformers import TrainingArguments\n"
        "def main():\n    dist.init_process_group(backend='nccl')\n    args = TrainingArguments('out')\n",
        "import torch.distributed as dist\ndef init(args, backend='gloo'):\n"
        "    dist.init_process_group(backend)\n",
        "import torch.distributed as dist\ndef init(args):\n    args.dist_backend = 'gloo'\n"
        "    dist.init_process_group(backend=args.dist_backend)\n",
        # a group of one process (SyncBatchNorm on a single GPU)
        "import torch.distributed as dist\ndef init():\n    dist.init_process_group('nccl', rank=0, world_size=1)\n",
        # the setup path runs a function it was handed, and the one this file hands on binds
        # (peft's distributed tests: a wrapper sets up the group, then runs the test)
        "import functools, torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
        "def wrapper(fn, rank):\n    dist.init_process_group('nccl', rank=rank, world_size=2)\n    fn(rank)\n"
        "def test_sync(rank):\n    torch.cuda.set_device(rank)\n    dist.barrier()\n"
        "def run():\n    mp.spawn(functools.partial(wrapper, test_sync), nprocs=2)\n",
        # ... or a decorator of this file sets it up around the function it decorates, which
        # binds (accelerate's tests: `@manage_process_group`, whose `wrapped` calls `func`)
        "import torch\nimport torch.distributed as dist\n"
        "def manage_process_group(func):\n    def wrapped(*args):\n        dist.init_process_group('nccl')\n"
        "        return func(*args)\n    return wrapped\n"
        "@manage_process_group\ndef load():\n    torch.cuda.set_device(dist.get_rank())\n",
        # a trainer opens the group as it is built and binds when it trains (rl_games' A2C
        # agents: the base's `__init__`, then a subclass's `train()`, before any collective)
        "import os\nimport torch\nimport torch.distributed as dist\n\n\nclass A2CBase:\n"
        "    def __init__(self, config):\n        self.local_rank = int(os.getenv('LOCAL_RANK', '0'))\n"
        "        dist.init_process_group('nccl')\n\n\nclass DiscreteA2CBase(A2CBase):\n"
        "    def train(self):\n        torch.cuda.set_device(self.local_rank)\n"
        "        dist.broadcast_object_list([self.model.state_dict()], 0)\n",
        # a helper hands the local rank to a caller in another file, which binds it next
        # (mace's `init_distributed(args)`, then `torch.cuda.set_device(local_rank)`)
        "import os\nimport torch\n\n\ndef init_distributed(args):\n    if not args.distributed:\n"
        "        return 0, 0, 1\n    rank = int(os.environ['RANK'])\n"
        "    local_rank = int(os.environ['LOCAL_RANK'])\n"
        "    torch.distributed.init_process_group(backend='nccl', init_method='env://')\n"
        "    return rank, local_rank, int(os.environ['WORLD_SIZE'])\n",
    )
    INVALID = (
        # RPC's device map binds no device (ColossalAI's pipeline groups)
        Example("import torch.distributed as dist\nfrom torch.distributed import rpc\n\n\n"
                "def init(rank, world_size):\n    dist.init_process_group('nccl', rank=rank, world_size=world_size)\n"
                "    options = rpc.TensorPipeRpcBackendOptions()\n"
                "    options.set_device_map('worker1', {rank: rank})\n"),
        # the helper hands the rank back, but its caller in this file binds nothing
        Example("import os\nimport torch.distributed as dist\n\n\ndef init():\n"
                "    local_rank = int(os.environ['LOCAL_RANK'])\n    dist.init_process_group('nccl')\n"
                "    return local_rank\n\n\ndef main():\n    rank = init()\n    dist.barrier()\n",
                "import os\nimport torch.distributed as dist\nimport torch\n\n\ndef init():\n"
                "    local_rank = int(os.environ['LOCAL_RANK'])\n"
                "    dist.init_process_group('nccl', device_id=torch.device(\"cuda\", local_rank))\n"
                "    return local_rank\n\n\ndef main():\n    rank = init()\n    dist.barrier()\n"),
        # a class of its own binds, not the object that opens the group
        Example("import os\nimport torch\nimport torch.distributed as dist\n\n\nclass Agent:\n"
                "    def __init__(self):\n        dist.init_process_group('nccl')\n\n\nclass Probe:\n"
                "    def run(self):\n        torch.cuda.set_device(0)\n"),
        # a decorated function that binds nothing: the group's setup path never does
        Example("import torch\nimport torch.distributed as dist\n"
                "def manage_process_group(func):\n    def wrapped(*args):\n        dist.init_process_group('nccl')\n"
                "        return func(*args)\n    return wrapped\n"
                "@manage_process_group\ndef load():\n    dist.barrier()\n"),
        # the index the function itself puts its work on (cogdl's trainer: `.to(rank)` and
        # DDP's `device_ids=[rank]`; PyText's dist_init: `device="cuda:{}".format(device_id)`)
        Example("import torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel\n\n\n"
                "def setup(rank, world, model):\n    dist.init_process_group('nccl', rank=rank, world_size=world)\n"
                "    return DistributedDataParallel(model.to(rank), device_ids=[rank])\n",
                "import torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel\n"
                "import torch\n\n\n"
                "def setup(rank, world, model):\n    dist.init_process_group('nccl', rank=rank, world_size=world, "
                "device_id=torch.device(\"cuda\", rank))\n"
                "    return DistributedDataParallel(model.to(rank), device_ids=[rank])\n"),
        Example("import torch\nimport torch.distributed as dist\n\n\n"
                "def dist_init(rank, world, device_id):\n"
                "    dist.init_process_group('nccl', rank=rank, world_size=world)\n"
                "    t = torch.tensor([1.0], device='cuda:{}'.format(device_id))\n    dist.all_reduce(t)\n",
                "import torch\nimport torch.distributed as dist\n\n\n"
                "def dist_init(rank, world, device_id):\n"
                "    dist.init_process_group('nccl', rank=rank, world_size=world, "
                "device_id=torch.device(\"cuda\", device_id))\n"
                "    t = torch.tensor([1.0], device='cuda:{}'.format(device_id))\n    dist.all_reduce(t)\n"),
        # torch imported only where it is available (transformers 2.x's training arguments):
        # the call itself reaches torch by that name, so the device can
        Example("from .file_utils import is_torch_available\n\nif is_torch_available():\n    import torch\n\n\n"
                "def setup(local_rank):\n    torch.distributed.init_process_group(backend='nccl')\n"
                "    return torch.device('cuda', local_rank)\n",
                "from .file_utils import is_torch_available\n\nif is_torch_available():\n    import torch\n\n\n"
                "def setup(local_rank):\n    torch.distributed.init_process_group(backend='nccl', "
                "device_id=torch.device(\"cuda\", local_rank))\n"
                "    return torch.device('cuda', local_rank)\n"),
        # ... not a device object (`.cuda(device)`: torch.device("cuda", device) would fail)
        Example("import torch\nimport torch.distributed as dist\n\n\n"
                "def setup(world, device):\n    dist.init_process_group('nccl', world_size=world)\n"
                "    return torch.zeros(1).cuda(device)\n"),
        # the local rank as the method read it, through `self` (simpletransformers' models:
        # `args` is the parameter, which may be None; `self.args` the options built from it)
        Example("import torch\n\n\nclass Model:\n    def __init__(self, args=None):\n"
                "        self.args = self._load(args)\n        if self.args.local_rank != -1:\n"
                "            torch.distributed.init_process_group(backend='nccl')\n",
                "import torch\n\n\nclass Model:\n    def __init__(self, args=None):\n"
                "        self.args = self._load(args)\n        if self.args.local_rank != -1:\n"
                "            torch.distributed.init_process_group(backend='nccl', "
                "device_id=torch.device(\"cuda\", self.args.local_rank))\n"),
        # a spawn target handed through `partial(wrapper, test_fn)`: the index lands in the
        # parameter after the bound one, and the test function it runs binds nothing
        Example("import functools\nimport torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
                "def wrapper(fn, rank):\n    dist.init_process_group('nccl', rank=rank, world_size=2)\n    fn(rank)\n"
                "def test_sync(rank):\n    dist.barrier()\n"
                "def run():\n    mp.spawn(functools.partial(wrapper, test_sync), nprocs=2)\n",
                "import functools\nimport torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
                "def wrapper(fn, rank):\n    dist.init_process_group('nccl', rank=rank, world_size=2, "
                "device_id=torch.device(\"cuda\", rank))\n    fn(rank)\n"
                "def test_sync(rank):\n    dist.barrier()\n"
                "def run():\n    mp.spawn(functools.partial(wrapper, test_sync), nprocs=2)\n"),
        # the launcher's local rank as parsed into a namespace bound before the call
        # (retinaface's inference script: `args = get_args()`)
        Example("import torch\n\n\ndef main():\n    args = get_args()\n"
                "    torch.distributed.init_process_group(backend='nccl')\n"
                "    return torch.device('cuda', args.local_rank)\n",
                "import torch\n\n\ndef main():\n    args = get_args()\n"
                "    torch.distributed.init_process_group(backend='nccl', "
                "device_id=torch.device(\"cuda\", args.local_rank))\n"
                "    return torch.device('cuda', args.local_rank)\n"),
        Example(
            "import os\nimport torch.distributed as dist\n"
            "local_rank = int(os.environ['LOCAL_RANK'])\ndist.init_process_group(backend='nccl')\n",
            "import os\nimport torch.distributed as dist\nimport torch\n"
            "local_rank = int(os.environ['LOCAL_RANK'])\n"
            "dist.init_process_group(backend='nccl', device_id=torch.device(\"cuda\", local_rank))\n",
        ),
        Example(
            "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
            "def worker(gpu, world):\n    dist.init_process_group('nccl', rank=gpu, world_size=world)\n"
            "mp.spawn(worker, args=(2,), nprocs=2)\n",
            "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
            "def worker(gpu, world):\n    dist.init_process_group('nccl', rank=gpu, world_size=world, "
            "device_id=torch.device(\"cuda\", gpu))\n"
            "mp.spawn(worker, args=(2,), nprocs=2)\n",
        ),
        # the call chooses NCCL for CUDA only (nerfstudio's workers): the GPU only on that side
        Example(
            "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
            "def worker(local_rank, device_type):\n"
            "    dist.init_process_group(backend='nccl' if device_type == 'cuda' else 'gloo', rank=local_rank)\n"
            "mp.spawn(worker, args=('cuda',), nprocs=2)\n",
            "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
            "def worker(local_rank, device_type):\n"
            "    dist.init_process_group(backend='nccl' if device_type == 'cuda' else 'gloo', rank=local_rank, "
            "device_id=torch.device(\"cuda\", local_rank) if device_type == 'cuda' else None)\n"
            "mp.spawn(worker, args=('cuda',), nprocs=2)\n",
        ),
        Example(
            "import torch.distributed as dist\ndef init(args):\n    dist.init_process_group()\n",
            None,
        ),
        Example(
            "import torch.distributed as dist\ndef init(args, backend='nccl'):\n"
            "    dist.init_process_group(backend)\n",
            None,
        ),
        Example(
            "import torch.distributed as dist\ndef init(args):\n    args.dist_backend = 'nccl'\n"
            "    dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url)\n",
            None,
        ),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        flow = a.process
        for site in a.calls:
            if site.qualname not in N.INIT_PROCESS_GROUP_TORCH or site.has_star_args:
                continue
            if site.keyword("device_id") is not None or one_process_group(site):
                continue
            backend = site.keyword("backend") or site.positional(0)
            expr = backend.value if backend is not None else None
            if not self._is_nccl(ctx, expr, site):
                continue
            if flow.binds_device_in(flow.setup_path(site)) or _rank_handed_back(a, site):
                continue
            yield ctx.violation(
                site.node,
                "NCCL process group, but this process never binds its rank's GPU: every rank "
                "builds its communicator on GPU 0 (barriers and collectives hang or run out of "
                "memory there); bind the device first or pass `device_id=`",
                self._fix(ctx, site, expr),
            )

    # ------------------------------------------------------------------ detection
    def _is_nccl(self, ctx: Context, expr: Optional[cst.BaseExpression], site: CallSite,
                 depth: int = 0) -> bool:
        """True when the backend is (or defaults to) NCCL for CUDA; False when it is
        another backend or unknowable here."""
        if expr is None or (isinstance(expr, cst.Name) and expr.value == "None"):
            return True  # the default: "cpu:gloo,cuda:nccl"
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
            value = expr.evaluated_value
            return isinstance(value, str) and "nccl" in value.lower()
        if isinstance(expr, cst.IfExp):
            return any(isinstance(e, (cst.SimpleString, cst.ConcatenatedString))
                       and self._is_nccl(ctx, e, site, depth + 1) for e in (expr.body, expr.orelse))
        if isinstance(expr, cst.Attribute) and expr.attr.value.upper() == "NCCL":
            return True  # dist.Backend.NCCL
        if depth >= 3:
            return False
        a = ctx.analysis
        if isinstance(expr, cst.Name):
            values = a.held_values(expr, site.scope)  # a parameter: its default
            return bool(values) and any(
                not isinstance(v, cst.Name) and self._is_nccl(ctx, v, site, depth + 1) for v, _ in values)
        if isinstance(expr, cst.Attribute):  # args.dist_backend = "nccl" just before, in this function
            fn = a.enclosing_function(site.scope)
            body = a.code(fn.node) if fn is not None else ""
            target = re.escape(a.code(expr))
            found = re.findall(rf"(?m)^[ \t]*{target}[ \t]*=[ \t]*(['\"])([\w:,]+)\1[ \t]*(?:#.*)?$", body)
            return bool(found) and all("nccl" in value.lower() for _, value in found)
        return False

    # ------------------------------------------------------------------ fix
    def _fix(self, ctx: Context, site: CallSite, backend: Optional[cst.BaseExpression]) -> Fix:
        rank = ctx.analysis.process.local_rank_expr(site)
        advice = ("bind the rank's GPU before this call (`torch.cuda.set_device(local_rank)`) or pass "
                  "`device_id=torch.device(\"cuda\", local_rank)`")
        if rank is None:
            return Fix(Applicability.DISPLAY, f"Not rewritten: no local rank in scope; {advice}")
        try:
            torch, edits = ctx.torch_for(site)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"Not rewritten: {exc}; {advice}")
        device = f'{torch}.device("cuda", {rank})'
        test = self._nccl_test(ctx, site, backend)
        if test is not None:  # a GPU only where the backend is NCCL: gloo's CPU run takes none
            code, nccl_if_true = test
            device = f"{device} if {code} else None" if nccl_if_true else f"None if {code} else {device}"
        keyword = ctx.add_keyword(site.node, f"device_id={device}")
        if keyword is None:
            return Fix(Applicability.DISPLAY, f"Not rewritten: the call's layout is unusual; {advice}")
        return Fix(Applicability.UNSAFE, f"Pass `device_id={device}` (binds the GPU eagerly; torch >= 2.3)",
                   tuple(edits + keyword))

    def _nccl_test(self, ctx: Context, site: CallSite,
                   backend: Optional[cst.BaseExpression]) -> Optional[Tuple[str, bool]]:
        """Where the call chooses its backend (``"nccl" if device_type == "cuda" else
        "gloo"``, nerfstudio's workers): the test's code, and whether NCCL is its true
        side. None where NCCL is the backend on every path."""
        if not isinstance(backend, cst.IfExp):
            return None
        sides = [self._is_nccl(ctx, e, site) for e in (backend.body, backend.orelse)]
        return None if all(sides) else (ctx.analysis.code(backend.test), sides[0])


def _rank_handed_back(a, site: CallSite) -> bool:
    """The call's function returns the local rank (alone or in a tuple) and nothing in
    this file calls it: binding is its caller's, in a file this one cannot see (mace's
    ``init_distributed(args)`` returns ``(rank, local_rank, world_size)`` and
    ``run_train.py`` calls ``torch.cuda.set_device(local_rank)`` next)."""
    flow = a.process
    fn = flow.owner(site)
    if fn is None or flow.reach({fn.node}, upward=True) != {fn.node}:
        return False  # module-level code, or a caller here: its path was read
    rank = flow.local_rank_expr(site)
    if rank is None:
        return False
    for value in fn.returns:
        parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        if any(p is not None and a.code(p) == rank for p in parts):
            return True
    return False

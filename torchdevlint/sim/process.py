"""Process-level device setup under the simulator: ``CUDA_VISIBLE_DEVICES`` and NCCL
process groups.

- **Visible devices.** The simulator's ``gpus`` are the machine's physical GPUs. As in
  CUDA, ``CUDA_VISIBLE_DEVICES`` is read once, at the first CUDA use (``is_available``,
  ``device_count``, a placement, ``set_device`` ...): it fixes how many devices the
  process sees (the listed ordinals, up to the first invalid, duplicate or out-of-range
  one). A later change of the variable (``os.environ[...] =``, ``update``,
  ``setdefault``, ``del``, ``os.putenv``) has no effect and is reported with where it
  happened and where CUDA was initialised.
- **Process groups.** ``torch.distributed.init_process_group`` runs a real, one-process
  gloo group in place of NCCL (the CPU build has no NCCL), while ``get_rank`` and
  ``get_world_size`` answer with the rank and world size the program asked for, so each
  simulated process reports under its own rank. For an NCCL group it records the
  communicator's device: ``device_id=`` binds it at once; otherwise it is the current
  device when the first collective or barrier runs (or the group ends), and a group
  whose process never bound a device there is reported: every rank's communicator is
  on GPU 0. Collectives see only this process (a world of one); those whose outputs hold
  one entry or slice per rank (``all_gather``, ``reduce_scatter``, ``all_to_all`` ...) fill
  them as if every rank held this rank's data.
"""

from __future__ import annotations

import inspect
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

VISIBLE = "CUDA_VISIBLE_DEVICES"
_COLLECTIVES = ("barrier", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
                "all_gather_object", "reduce", "reduce_scatter", "reduce_scatter_tensor", "gather",
                "scatter", "all_to_all", "all_to_all_single", "broadcast_object_list")


def parse_visible(value: Optional[str], physical: int) -> List[int]:
    """The physical GPUs a process sees, as CUDA reads ``CUDA_VISIBLE_DEVICES``."""
    if value is None:
        return list(range(physical))
    seen: List[int] = []
    for token in value.split(","):
        token = token.strip()
        try:
            index = int(token)
        except ValueError:
            break  # CUDA stops at the first entry it cannot use
        if index < 0 or index >= physical or index in seen:
            break
        seen.append(index)
    return seen


@dataclass
class VisibleDevices:
    """What CUDA made of ``CUDA_VISIBLE_DEVICES`` when it initialised."""

    physical: int
    devices: Optional[List[int]] = None  # None: CUDA not initialised yet
    value: Optional[str] = None  # the variable's value at initialisation
    where: str = ""  # the user code that initialised CUDA
    late: List[Dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def initialised(self) -> bool:
        return self.devices is not None

    def initialise(self, where: Callable[[], str]) -> int:
        with self.lock:
            if self.devices is None:
                self.value = os.environ.get(VISIBLE)
                self.devices = parse_visible(self.value, self.physical)
                self.where = where()
            return len(self.devices)

    def changed(self, value: Optional[str], where: str) -> None:
        if self.devices is not None and value != self.value:
            self.late.append({"where": where, "value": value, "initialised_at": self.where,
                              "visible": len(self.devices)})

    def report(self) -> Dict[str, Any]:
        return {"physical": self.physical, "at_init": self.value,
                "visible": None if self.devices is None else list(self.devices),
                "initialised_at": self.where or None, "changed_after_init": list(self.late)}


def patch_environment(sim, set_attr) -> None:
    """Watch writes of CUDA_VISIBLE_DEVICES (os.environ and os.putenv)."""
    environ_type = type(os.environ)
    original_set = environ_type.__setitem__
    original_del = environ_type.__delitem__
    original_putenv = os.putenv
    visible: VisibleDevices = sim.state.visible
    from . import _user_frame

    def setitem(env, key, value):
        original_set(env, key, value)
        if key == VISIBLE and env is os.environ:
            visible.changed(value, _user_frame())

    def delitem(env, key):
        original_del(env, key)
        if key == VISIBLE and env is os.environ:
            visible.changed(None, _user_frame())

    def putenv(key, value):
        original_putenv(key, value)
        if key == VISIBLE:
            visible.changed(value, _user_frame())

    set_attr(environ_type, "__setitem__", setitem)
    set_attr(environ_type, "__delitem__", delitem)
    set_attr(os, "putenv", putenv)


@dataclass
class Group:
    backend: str
    rank: int
    world_size: int
    where: str
    device: Optional[str] = None  # the NCCL communicator's device, once known
    bound: Optional[str] = None  # device_id | set_device | None (never bound)
    settled: bool = False

    def settle(self, current: int, thread_bound: bool) -> None:
        """The communicator's device is decided at the first collective (lazy init): the
        device current then, bound if this thread chose it (set_device) before."""
        if self.settled or "nccl" not in self.backend:
            return
        self.settled = True
        if self.bound is None and thread_bound:
            self.bound = "set_device"
        if self.device is None:
            self.device = f"cuda:{current}"

    def report(self) -> Dict[str, Any]:
        return {"backend": self.backend, "rank": self.rank, "world_size": self.world_size,
                "where": self.where, "device": self.device, "bound": self.bound}


def patch_distributed(sim, set_attr) -> None:
    """One-process gloo groups in place of NCCL, with the communicator's device recorded."""
    import torch.distributed as dist

    if not dist.is_available():  # pragma: no cover - every supported build has it
        return
    from . import _user_frame

    st = sim.state
    original_init = dist.init_process_group
    signature = inspect.signature(original_init)
    originals = {name: getattr(dist, name) for name in _COLLECTIVES if hasattr(dist, name)}
    signatures = {name: inspect.signature(fn) for name, fn in originals.items() if name in _SHAPED}
    original_destroy = dist.destroy_process_group
    original_rank, original_world = dist.get_rank, dist.get_world_size

    def settle(group: Group) -> None:
        group.settle(st.current, getattr(st.local, "bound", False))

    def init_process_group(*args, **kwargs):
        bound_args = signature.bind(*args, **kwargs)
        params = bound_args.arguments
        backend = params.get("backend") or "cpu:gloo,cuda:nccl"
        backend = str(backend).lower()
        rank = params.get("rank", -1)
        world = params.get("world_size", -1)
        rank = rank if rank is not None and rank >= 0 else int(os.environ.get("RANK", "0"))
        world = world if world is not None and world > 0 else int(os.environ.get("WORLD_SIZE", "1"))
        group = Group(backend, rank, world, _user_frame())
        device_id = params.get("device_id")
        if "nccl" in backend and device_id is not None:
            index, _ = sim.resolve(device_id)
            group.device, group.bound, group.settled = f"cuda:{index}", "device_id", True
        options = {"backend": "gloo", "store": dist.HashStore(), "rank": 0, "world_size": 1}
        if params.get("timeout") is not None:
            options["timeout"] = params["timeout"]
        original_init(**options)
        st.groups.append(group)

    def current_group() -> Optional[Group]:
        return st.groups[-1] if st.groups and dist.is_initialized() else None

    def collective(name: str):
        original = originals[name]

        def run(*args, **kwargs):
            group = current_group()
            if group is not None:
                settle(group)
                if group.world_size > 1 and name in _SHAPED:
                    params = signatures[name].bind(*args, **kwargs).arguments
                    if params.get("group") is None:  # the default group, the simulated world (not a new_group's)
                        return _as_world(name, params, group)
            return original(*args, **kwargs)

        run.__name__ = name
        return run

    def destroy_process_group(*args, **kwargs):
        group = current_group()
        if group is not None:
            settle(group)
        return original_destroy(*args, **kwargs)

    def get_rank(group=None):
        ours = current_group()
        return ours.rank if ours is not None and group is None else original_rank(group)

    def get_world_size(group=None):
        ours = current_group()
        return ours.world_size if ours is not None and group is None else original_world(group)

    def cleanup() -> None:
        for group in st.groups:
            settle(group)
        if st.groups and dist.is_initialized():
            original_destroy()

    set_attr(dist, "init_process_group", init_process_group)
    set_attr(dist, "destroy_process_group", destroy_process_group)
    set_attr(dist, "get_rank", get_rank)
    set_attr(dist, "get_world_size", get_world_size)
    set_attr(dist, "is_nccl_available", lambda: True)
    for name in originals:
        set_attr(dist, name, collective(name))
    sim._stack.callback(cleanup)  # runs before the patches are undone (LIFO)


class _Done:
    """What an ``async_op=True`` collective returns: work that is already done."""

    def wait(self, *args, **kwargs) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _as_world(name: str, params: Dict[str, Any], group: Group):
    """A collective whose outputs are shaped by the world size (one entry or slice per
    rank), as the program's world would run it, every rank holding this rank's data: the
    real group is a world of one, where gloo would refuse a list of ``world_size``
    outputs (DETR's ``all_gather`` of each rank's byte count)."""
    import torch

    world, rank = group.world_size, group.rank
    if name == "all_gather":
        for out in params["tensor_list"]:
            out.copy_(params["tensor"])
    elif name == "all_gather_into_tensor":
        params["output_tensor"].copy_(torch.cat([params["input_tensor"]] * world).reshape(
            params["output_tensor"].shape))
    elif name == "all_gather_object":
        params["object_list"][:] = [params["obj"]] * world
    elif name == "gather":
        for out in params.get("gather_list") or ():
            out.copy_(params["tensor"])
    elif name == "scatter":
        chunks = params.get("scatter_list")
        if chunks:
            params["tensor"].copy_(chunks[rank])
    elif name == "reduce_scatter":
        params["output"].copy_(params["input_list"][rank])
    elif name == "reduce_scatter_tensor":
        params["output"].copy_(params["input"].chunk(world)[rank])
    elif name == "all_to_all":
        for out in params["output_tensor_list"]:
            out.copy_(params["input_tensor_list"][rank])
    elif name == "all_to_all_single":  # equal splits: every rank sends this rank its own chunk
        piece = params["input"].chunk(world)[rank]
        for out in params["output"].chunk(world):
            out.copy_(piece)
    return _Done() if params.get("async_op") else None


# the collectives whose outputs have one entry or slice per rank
_SHAPED = ("all_gather", "all_gather_into_tensor", "all_gather_object", "gather", "scatter", "reduce_scatter",
           "reduce_scatter_tensor", "all_to_all", "all_to_all_single")


def group_warnings(groups: List[Group]) -> List[Dict[str, Any]]:
    return [{"where": g.where, "rank": g.rank, "device": g.device or "cuda:0"}
            for g in groups if "nccl" in g.backend and g.bound is None]


class SimulatedChild:
    """A process target that runs under a simulator of its own in the child process (the
    one ``boot_child`` started, when there is one) and leaves its placement report in
    ``report_dir`` (picklable: ``mp.spawn`` sends it)."""

    def __init__(self, fn, gpus: int, report_dir: str):
        self.fn = fn
        self.gpus = gpus
        self.report_dir = report_dir

    def __call__(self, index, *args):
        import json

        from . import Simulator, active

        sim = active()
        try:
            if sim is not None and sim.booted:  # the child's own, on since it started
                return self.fn(index, *args)
            sim = Simulator(self.gpus, record=True)
            with sim:
                return self.fn(index, *args)
        finally:
            data = sim.report()  # type: ignore[union-attr]
            data["process"] = index
            path = os.path.join(self.report_dir, f"process-{index}-{os.getpid()}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(data, f)


class SimulatedTarget:
    """The target of a ``multiprocessing.Process`` (any start method), run under the
    simulator in the child, reporting as process ``label`` (the order the parent started
    them in). A spawned child starts a simulator of its own; a forked one carries the
    parent's along and reports only what it placed itself."""

    def __init__(self, fn, gpus: int, report_dir: str, label: int):
        self.fn = fn
        self.gpus = gpus
        self.report_dir = report_dir
        self.label = label

    def __call__(self, *args, **kwargs):
        from . import Simulator, active

        inherited = active()
        if inherited is not None:  # the child's own (spawned), or the parent's (forked)
            if not inherited.booted:  # forked: what the parent placed is the parent's
                inherited.state.placements.clear()
            try:
                return self.fn(*args, **kwargs)
            finally:
                self._write(inherited.report())
        sim = Simulator(self.gpus, record=True)
        try:
            with sim:
                return self.fn(*args, **kwargs)
        finally:
            self._write(sim.report())

    def _write(self, data: Dict[str, Any]) -> None:
        import json

        data["process"] = self.label
        path = os.path.join(self.report_dir, f"process-{self.label}-{os.getpid()}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)


# process targets of the libraries' own machinery (mp.spawn's wrapper, pool and
# executor workers): mp.spawn's children are simulated by its own patch, and the
# workers of a pool outlive any one task
_MACHINERY = ("multiprocessing.", "concurrent.", "torch.multiprocessing.", "torch.distributed.elastic.")


def boot_child(gpus: int) -> None:
    """Start a spawned child's simulator before anything else runs in it: a spawned
    process imports its parent's main module again (and what that imports) before it
    calls its target, and that code may ask for CUDA as it is imported (``assert
    torch.cuda.is_available()`` at a module's top level) or place tensors. The simulator
    stays on for the child's life; the target's wrapper reports what it placed, import
    time included."""
    from . import Simulator

    sim = Simulator(gpus, record=True)
    sim.booted = True
    sim.__enter__()


def _booting(get_command_line, gpus: int):
    """``multiprocessing.spawn.get_command_line`` whose child program starts with
    ``boot_child(gpus)`` (this package importable from where it is now)."""
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def command_line(**kwds):
        line = list(get_command_line(**kwds))
        if "-c" in line[:-1]:
            i = line.index("-c") + 1
            line[i] = (f"import sys; sys.path.insert(0, {home!r}); import torchdevlint.sim.process as _tdl; "
                       f"_tdl.boot_child({gpus}); del sys.path[0]; {line[i]}")
        return line

    return command_line


def patch_processes(sim, set_attr) -> None:
    """``mp.spawn``/``start_processes`` children and ``multiprocessing.Process`` targets
    run under the simulator too, each reporting under its process index; a spawned child
    runs under it from its start (``boot_child``)."""
    import importlib
    import multiprocessing.process as mp_process
    import multiprocessing.spawn as mp_spawn
    import tempfile

    import torch.multiprocessing as tmp

    def report_dir() -> str:
        if sim.children_dir is None:
            sim.children_dir = tempfile.mkdtemp(prefix="torchdevlint-sim-")
        return sim.children_dir

    spawn_module = importlib.import_module("torch.multiprocessing.spawn")
    original = spawn_module.start_processes

    def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
        child = SimulatedChild(fn, sim.state.physical, report_dir())
        return original(child, args, nprocs, join, daemon, start_method)

    set_attr(spawn_module, "start_processes", start_processes)
    set_attr(tmp, "start_processes", start_processes)

    original_start = mp_process.BaseProcess.start
    started = [0]

    def start(process_self):
        target = getattr(process_self, "_target", None)
        module = getattr(target, "__module__", None) or ""
        if target is not None and not isinstance(target, SimulatedTarget) and not module.startswith(_MACHINERY):
            process_self._target = SimulatedTarget(target, sim.state.physical, report_dir(), started[0])
            started[0] += 1
        return original_start(process_self)

    set_attr(mp_process.BaseProcess, "start", start)
    set_attr(mp_spawn, "get_command_line", _booting(mp_spawn.get_command_line, sim.state.physical))


def collect_children(report_dir: Optional[str]) -> List[Dict[str, Any]]:
    """The reports the simulated children left, by process index."""
    import json
    import shutil

    if report_dir is None or not os.path.isdir(report_dir):
        return []
    out = []
    for name in sorted(os.listdir(report_dir)):
        with open(os.path.join(report_dir, name), encoding="utf-8") as f:
            out.append(json.load(f))
    shutil.rmtree(report_dir, ignore_errors=True)
    return sorted(out, key=lambda d: d.get("process", 0))

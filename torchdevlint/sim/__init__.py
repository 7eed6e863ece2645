"""A CUDA simulator: CPU-only torch behaves as if N GPUs were present.

Every tensor computes on the CPU but carries a *logical* device (``cuda:0`` ...
``cuda:N-1``, or cpu when untagged). A ``TorchFunctionMode`` sees ``Tensor.cuda/to/cpu``,
factory ``device=`` arguments, the ``.device``/``.is_cuda``/``.data``/``.grad`` properties
and every op; small patches of ``torch.cuda.*`` provide ``is_available``,
``device_count``, a per-thread current device (a new thread starts on device 0, as in
CUDA), ``set_device``, ``device``/``device_of`` contexts, streams, memory queries and
device properties; ``DataParallel``'s scatter/replicate/parallel_apply/gather follow
torch's rules. Mixing devices in one op raises torch's own "Expected all tensors to be
on the same device" error; an out-of-range index raises "invalid device ordinal".

Process-level setup (``process.py``): ``CUDA_VISIBLE_DEVICES`` read once at the first
CUDA use, late assignments reported; NCCL process groups as one-process gloo groups with
the communicator's device recorded; ``mp.spawn``/``start_processes`` children and
``multiprocessing.Process`` targets simulated, each reporting under its process index (a
spawned child from its start: its import of the parent's main module included). Legacy
PyTorch (``legacy.py``): the typed ``torch.cuda.<T>Tensor`` constructors, ``Variable``,
``torch.save``/``torch.load`` placement. The op-level mode is ``mode.py``; ``DataParallel``'s rules ``parallel.py``;
the gradients autograd hands to backward hooks ``hooks.py``.

Not modelled: GPU random numbers (the CPU generator is used, so values match the CPU
run, not a GPU run), storages, real streams/events and their ordering, collectives
across processes (each simulated process is a world of one), custom autograd
``backward`` bodies (they run outside the mode; their outputs take their inputs' devices).

torch is imported lazily: the linter never needs this module.
"""

from __future__ import annotations

import contextlib
import os
import sysconfig
import threading
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .hooks import patch_backward_hooks
from .legacy import patch_legacy
from .mode import _make_mode
from .parallel import patch_parallel
from .process import (
    Group,
    VisibleDevices,
    collect_children,
    group_warnings,
    patch_distributed,
    patch_environment,
    patch_processes,
)
from .tags import _TAG, _invalid_ordinal, device_of  # noqa: F401  (device_of is public)

_HERE = __file__.rsplit("/", 1)[0]
_ACTIVE: List["Simulator"] = []  # the simulators entered in this process, innermost last


def active() -> Optional["Simulator"]:
    """The simulator this process runs under (a forked child inherits its parent's)."""
    return _ACTIVE[-1] if _ACTIVE else None
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


@dataclass
class Placement:
    device: str
    thread: str
    where: str  # file:line of the user code
    nbytes: int
    implicit: bool  # the index came from the current device
    current_elsewhere: Optional[int]  # the main thread's current device at that time


@dataclass
class SimState:
    physical: int  # the machine's GPUs; CUDA_VISIBLE_DEVICES decides how many are seen
    local: threading.local = field(default_factory=threading.local)
    placements: List[Placement] = field(default_factory=list)
    main_thread: int = field(default_factory=threading.get_ident)
    main_current: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    visible: VisibleDevices = field(init=False)
    groups: List[Group] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.visible = VisibleDevices(self.physical)

    @property
    def gpus(self) -> int:
        """The devices this process sees: asking initialises CUDA, as in torch."""
        if self.visible.devices is None:
            return self.visible.initialise(_user_frame)
        return len(self.visible.devices)

    @property
    def current(self) -> int:
        return getattr(self.local, "current", 0)

    @current.setter
    def current(self, index: int) -> None:
        self.local.current = index
        self.local.bound = True  # this thread chose its device (set_device, a device block)
        if threading.get_ident() == self.main_thread:
            self.main_current = index


def _user_frame() -> str:
    """file:line of the innermost frame of the user's code (not torch, not the
    simulator, not the standard library)."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        name = frame.filename
        if ("/torch/" in name or name.startswith(_HERE) or "<frozen" in name
                or (name.startswith(_STDLIB) and "site-packages" not in name)):
            continue
        return f"{name}:{frame.lineno}"
    return "?"


class Simulator:
    """``with Simulator(gpus=2): ...`` runs torch code as if on a machine with 2 GPUs."""

    def __init__(self, gpus: int = 2, record: bool = False):
        import torch  # noqa: F401  (lazy: only the simulator needs torch)

        if gpus < 1:
            raise ValueError("the simulator needs at least one GPU")
        self.state = SimState(gpus)
        self.record = record
        self._stack = contextlib.ExitStack()
        self.mode = _make_mode(self)
        self.children_dir: Optional[str] = None  # where simulated child processes report
        self.booted = False  # a spawned child's, on from its start (process.boot_child)
        self.children: List[Dict[str, Any]] = []
        self.legacy_types: Dict[str, Any] = {}  # torch.cuda.<T>Tensor stand-ins (sim.legacy)
        self.cpu_types: Dict[Any, Any] = {}  # torch.<T>Tensor stand-ins -> torch's types (sim.legacy)
        # the (simulated) CUDA default device of factory calls, as `set_default_device("cuda")`
        # or `set_default_tensor_type(torch.cuda.FloatTensor)` set it (sim.legacy); None: torch's own
        self.default_device: Any = None

    # ---------------------------------------------------------------- devices
    def resolve(self, device) -> Tuple[Optional[int], bool]:
        """(index or None for cpu, implicit?) for anything torch accepts as a device."""
        import torch

        if device is None:
            self.state.gpus  # noqa: B018 - a CUDA use initialises CUDA
            return self.state.current, True
        if isinstance(device, int):
            return self._check(device), False
        if isinstance(device, str):
            device = torch.device(device)
        if isinstance(device, torch.device):
            if device.type == "cpu" or device.type == "meta":
                return None, False
            if device.type != "cuda":
                raise RuntimeError(f"the simulator models cuda and cpu devices only, not {device.type}")
            if device.index is None:
                self.state.gpus  # noqa: B018 - a CUDA use initialises CUDA
                return self.state.current, True
            return self._check(device.index), False
        raise TypeError(f"not a device: {device!r}")

    def _check(self, index: int) -> int:
        if index < 0 or index >= self.state.gpus:
            raise _invalid_ordinal()
        return index

    def tag(self, value, index: Optional[int], implicit: bool = False, new: bool = True):
        import torch

        if isinstance(value, torch.Tensor):
            if index is None:
                if hasattr(value, _TAG):
                    try:
                        delattr(value, _TAG)
                    except AttributeError:
                        pass
            else:
                setattr(value, _TAG, index)
                if self.record and new:
                    self._note(value, index, implicit)
        elif isinstance(value, (list, tuple)):
            for v in value:
                self.tag(v, index, implicit, new)
        return value

    def _note(self, t, index: int, implicit: bool) -> None:
        st = self.state
        on_main = threading.get_ident() == st.main_thread
        with st.lock:
            st.placements.append(Placement(
                f"cuda:{index}", threading.current_thread().name, _user_frame(),
                t.element_size() * t.nelement(), implicit,
                None if on_main else st.main_current))

    def index(self, t) -> Optional[int]:
        return getattr(t, _TAG, None)

    # ---------------------------------------------------------------- context
    def __enter__(self) -> "Simulator":
        try:
            self._patch()
            self._stack.enter_context(self.mode)
        except BaseException:
            self._stack.close()
            raise
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        if _ACTIVE and _ACTIVE[-1] is self:
            _ACTIVE.pop()
        try:
            self._stack.close()
        finally:
            self.children += collect_children(self.children_dir)
            self.children_dir = None

    def _patch(self) -> None:
        import importlib

        import torch

        dp = importlib.import_module("torch.nn.parallel.data_parallel")  # the module, not the function
        sim = self
        st = self.state
        cuda = torch.cuda

        def set_attr(obj, name, value):
            old = getattr(obj, name)
            setattr(obj, name, value)
            self._stack.callback(setattr, obj, name, old)

        def current_device() -> int:
            st.gpus  # noqa: B018 - initialises CUDA, as in torch
            return st.current

        def set_device(device) -> None:
            index, _ = sim.resolve(device if not isinstance(device, int) else int(device))
            if index is not None:
                st.current = index

        def exchange(index: int) -> int:
            prev = st.current
            if index >= 0:
                st.current = sim._check(index)
            return prev

        props = types.SimpleNamespace(name="Simulated GPU", total_memory=80 * 2**30,
                                      multi_processor_count=132, major=9, minor=0,
                                      is_integrated=False, is_multi_gpu_board=False)

        class Stream:
            def __init__(self, device=None, priority=0, **_):
                self.device = torch.device("cuda", sim.resolve(device)[0] or 0)

            def synchronize(self):
                return None

            def wait_stream(self, other):
                return None

            def wait_event(self, event):
                return None

            def record_event(self, event=None):
                return event or Event()

            def query(self):
                return True

        class Event:
            def __init__(self, *a, **k):
                pass

            def record(self, stream=None):
                return None

            def synchronize(self):
                return None

            def wait(self, stream=None):
                return None

            def elapsed_time(self, other):
                return 0.0

            def query(self):
                return True

        @contextlib.contextmanager
        def stream_context(stream=None):
            yield stream

        def memory(device=None) -> int:
            sim.resolve(device)  # validates the index; no bytes are really on a GPU
            return 0

        # each simulated GPU's random generator, kept by a CPU generator: checkpointing
        # code saves and restores `torch.cuda.get_rng_state()` (torch's own reads the
        # real device, and CPU-only torch has none)
        generators: Dict[int, Any] = {}
        # seeds asked for before CUDA initialised (`torch.manual_seed(s)` seeds every GPU):
        # torch queues them until it does (`_lazy_call`), initialising nothing; each is
        # (seed, or None for a random one; every GPU, or the current one)
        pending: List[Tuple[Optional[int], bool]] = []

        def generator(device=None):
            index = sim.resolve(device)[0] if device is not None else current_device()
            if index not in generators:
                made = generators[index] = torch.Generator()
                for seed, every in pending:
                    if not (every or index == st.current):
                        continue
                    if seed is None:
                        made.seed()
                    else:
                        made.manual_seed(seed)
            return generators[index]

        def manual_seed(seed, every: bool = False) -> None:
            if not st.visible.initialised:
                pending.append((int(seed), every))
                return
            for index in (range(st.gpus) if every else [current_device()]):
                generator(index).manual_seed(int(seed))

        def seed_all() -> None:
            if not st.visible.initialised:
                pending.append((None, True))
                return
            for index in range(st.gpus):
                generator(index).seed()

        def set_rng_state_all(states) -> None:
            for index, state in enumerate(states):
                generator(index).set_state(state)

        patches = {
            "is_available": lambda: st.gpus > 0,
            "device_count": lambda: st.gpus,
            "current_device": current_device,
            "set_device": set_device,
            "_exchange_device": exchange,
            "_maybe_exchange_device": exchange,
            "_lazy_init": lambda: None,
            "is_initialized": lambda: True,
            "synchronize": lambda device=None: None,
            "empty_cache": lambda: None,
            "memory_allocated": memory,
            "max_memory_allocated": memory,
            "memory_reserved": memory,
            "max_memory_reserved": memory,
            "reset_peak_memory_stats": lambda device=None: None,
            "mem_get_info": lambda device=None: (props.total_memory, props.total_memory),
            "get_device_name": lambda device=None: f"Simulated GPU {sim.resolve(device)[0]}",
            "get_device_properties": lambda device=None: (sim.resolve(device), props)[1],
            "get_device_capability": lambda device=None: (9, 0),
            "Stream": Stream,
            "Event": Event,
            "stream": stream_context,
            "current_stream": lambda device=None: Stream(device),
            "default_stream": lambda device=None: Stream(device),
            "manual_seed": manual_seed,
            "manual_seed_all": lambda seed: manual_seed(seed, every=True),
            "seed": lambda: generator().seed(),
            "seed_all": seed_all,
            "initial_seed": lambda: generator().initial_seed(),
            "get_rng_state": lambda device="cuda": generator(device).get_state(),
            "get_rng_state_all": lambda: [generator(i).get_state() for i in range(st.gpus)],
            "set_rng_state": lambda state, device="cuda": generator(device).set_state(state),
            "set_rng_state_all": set_rng_state_all,
        }
        for name, value in patches.items():
            if hasattr(cuda, name):
                set_attr(cuda, name, value)
            if hasattr(cuda.random, name):  # `torch.cuda.random.get_rng_state_all()`, as HF and fairseq call it
                set_attr(cuda.random, name, value)
        set_attr(dp, "_get_available_device_type", lambda: "cuda")
        set_attr(dp, "_get_all_device_indices", lambda: list(range(st.gpus)))
        patch_parallel(sim, set_attr)
        parameter_new = torch.nn.Parameter.__new__

        def new_parameter(cls, data=None, requires_grad=True):
            # `Parameter(t)` wraps `t`'s storage: it lives where `t` does
            # (`nn.Linear(3, 2, device="cuda")`, a CUDA default device)
            return sim.tag(parameter_new(cls, data, requires_grad), sim.index(data), new=False)

        set_attr(torch.nn.Parameter, "__new__", new_parameter)
        self._patch_threads(set_attr)
        patch_environment(self, set_attr)
        patch_distributed(self, set_attr)
        patch_processes(self, set_attr)
        patch_legacy(self, set_attr)
        patch_backward_hooks(self, set_attr)

    def _patch_threads(self, set_attr) -> None:
        """A new thread starts on device 0 (thread-local state) and re-enters the mode."""
        original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]
        sim = self

        def bootstrap(thread_self):  # wraps run() of every thread, subclasses included
            with _make_mode(sim):
                return original(thread_self)

        set_attr(threading.Thread, "_bootstrap_inner", bootstrap)

    # ---------------------------------------------------------------- report
    def report(self) -> Dict[str, Any]:
        for group in self.state.groups:  # a group never used until now is used at exit
            group.settle(self.state.current, getattr(self.state.local, "bound", False))
        per_device: Dict[str, Dict[str, int]] = {}
        threads: Dict[str, set] = {}
        suspicious = []
        for p in self.state.placements:
            d = per_device.setdefault(p.device, {"tensors": 0, "bytes": 0})
            d["tensors"] += 1
            d["bytes"] += p.nbytes
            threads.setdefault(p.thread, set()).add(p.device)
            if p.implicit and p.device == "cuda:0" and p.current_elsewhere not in (None, 0):
                suspicious.append({"where": p.where, "thread": p.thread, "device": p.device,
                                   "main_thread_device": f"cuda:{p.current_elsewhere}"})
        visible = self.state.visible
        return {
            "gpus": len(visible.devices) if visible.initialised else visible.physical,
            "devices": dict(sorted(per_device.items())),
            "threads": {k: sorted(v) for k, v in sorted(threads.items())},
            "suspicious": suspicious,
            "visible_devices": visible.report(),
            "process_groups": [g.report() for g in self.state.groups],
            "unbound_process_groups": group_warnings(self.state.groups),
            "children": self.children,
        }


@contextlib.contextmanager
def simulate(gpus: int = 2, record: bool = False):
    with Simulator(gpus, record) as sim:
        yield sim

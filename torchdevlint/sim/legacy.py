"""Legacy PyTorch under the simulator: typed CUDA tensors, ``Variable``, checkpoints.

- ``torch.cuda.FloatTensor`` and the nine other types allocate on the (simulated)
  current device, or on ``device=``; ``isinstance(x, torch.cuda.FloatTensor)`` and
  ``x.type(torch.cuda.FloatTensor)`` / ``x.type("torch.cuda.FloatTensor")`` / ``x.type()``
  behave as on a GPU machine.
- ``torch.set_default_tensor_type(torch.cuda.FloatTensor)`` (or its name) and
  ``torch.set_default_device("cuda")`` make every factory call allocate on the
  (simulated) current device, resolved at each call, as torch does; a CPU type or
  device (or None) goes back to the CPU. ``torch.get_default_device()`` answers. The
  legacy constructor ``torch.Tensor(...)`` follows a CUDA default type, not a default
  device, as in torch; given a tensor (``torch.Tensor(x)``) it returns an alias of it on
  its device, as torch does on a GPU machine.
- The CPU types (``torch.FloatTensor`` ...) refuse a (simulated) CUDA tensor, as torch's
  legacy constructor does on a GPU machine (``TypeError: expected ... device=cpu ... (got
  ... device=cuda:0 ...)``); ``isinstance(x, torch.FloatTensor)`` holds for CPU tensors
  only, and ``x.type(torch.FloatTensor)`` brings a CUDA tensor back to the CPU.
- ``Variable(t)`` returns a tensor on ``t``'s device (``isinstance(x, Variable)`` holds for
  every tensor, as in torch >= 0.4).
- ``torch.save`` remembers the simulated device of each tensor it writes to a path (or
  to an open file of one, or a buffer), and ``torch.load`` without ``map_location``
  restores them there (a real checkpoint saved on a GPU is restored to the device its
  storages name); with ``map_location`` (a device, a string, a dict of locations, or a
  function of the storage such as ``lambda storage, loc: storage.cuda()``), tensors land
  where it says.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

TYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8",
    "ShortTensor": "int16", "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool",
}


def patch_legacy(sim, set_attr) -> None:
    import torch
    import torch.autograd
    import torch.autograd.variable

    by_name: Dict[str, Any] = {}

    class LegacyCudaType:
        """A stand-in for ``torch.cuda.<T>Tensor``: callable, usable in isinstance."""

        def __init__(self, name: str, dtype):
            self.__name__ = name
            self.dtype = dtype
            self.is_cuda = True

        def __repr__(self) -> str:
            return f"<class 'torch.cuda.{self.__name__}'>"

        def __instancecheck__(self, obj) -> bool:
            return isinstance(obj, torch.Tensor) and obj.dtype == self.dtype and sim.index(obj) is not None

        def __call__(self, *args, device=None):
            index, implicit = sim.resolve(device)
            with torch._C.DisableTorchFunction():
                if not args:
                    out = torch.empty(0, dtype=self.dtype)
                elif len(args) == 1 and isinstance(args[0], torch.Tensor):
                    out = args[0].to(self.dtype, copy=True)
                elif len(args) == 1 and not isinstance(args[0], (int, torch.Size)):
                    out = torch.tensor(args[0], dtype=self.dtype)  # data: a list, tuple, numpy array
                else:
                    out = torch.empty(*args, dtype=self.dtype)
            return sim.tag(out, index, implicit)

    class LegacyCpuType:
        """A stand-in for ``torch.<T>Tensor``, the CPU type: torch's own for what it makes,
        but it refuses a CUDA tensor (its data stays on the CPU under the simulator)."""

        def __init__(self, original):
            self.original = original
            self.__name__ = original.__name__
            self.dtype = original.dtype
            self.is_cuda = False

        def __repr__(self) -> str:
            return repr(self.original)

        def __instancecheck__(self, obj) -> bool:
            return isinstance(obj, self.original) and sim.index(obj) is None

        def __call__(self, *args, **kwargs):
            for arg in args:
                index = sim.index(arg) if isinstance(arg, torch.Tensor) else None
                if index is not None:
                    want, got = (str(d).replace("torch.", "") for d in (self.dtype, arg.dtype))
                    raise TypeError(f"expected TensorOptions(dtype={want}, device=cpu, ...) (got TensorOptions("
                                    f"dtype={got}, device=cuda:{index}, ...)): {self.__name__} is a CPU type")
            return self.original(*args, **kwargs)

    cpu_types: Dict[Any, Any] = {}  # stand-in -> torch's type
    tensortype = type(getattr(torch.FloatTensor, "original", torch.FloatTensor))  # torch's, before any stand-in
    for name, dtype in TYPES.items():
        stand_in = LegacyCudaType(name, getattr(torch, dtype))
        by_name[f"torch.cuda.{name}"] = stand_in
        if hasattr(torch.cuda, name):
            set_attr(torch.cuda, name, stand_in)
        if isinstance(getattr(torch, name, None), tensortype):
            cpu = LegacyCpuType(getattr(torch, name))
            cpu_types[cpu] = cpu.original
            set_attr(torch, name, cpu)
    sim.legacy_types = by_name
    sim.cpu_types = cpu_types

    _patch_default_device(sim, set_attr, by_name)

    original_variable = torch.autograd.Variable

    class _AnyTensor(type):
        def __instancecheck__(cls, obj) -> bool:
            return isinstance(obj, torch.Tensor)

    class Variable(metaclass=_AnyTensor):
        def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False, **_):
            with torch._C.DisableTorchFunction():
                out = original_variable(data, requires_grad=requires_grad)
            return sim.tag(out, sim.index(data), new=False)

    set_attr(torch.autograd, "Variable", Variable)
    set_attr(torch.autograd.variable, "Variable", Variable)

    saved: Dict[Any, List[Optional[int]]] = {}
    kept: List[Any] = []  # the buffers keyed by identity stay alive: their ids are not reused
    original_save, original_load = torch.save, torch.load

    def save(obj, f, *args, **kwargs):
        result = original_save(obj, f, *args, **kwargs)
        key = _file_key(f)
        if key[0] == "object":
            kept.append(f)
        saved[key] = [sim.index(t) for t in _tensors(obj)]
        return result

    def load(f, map_location=None, *args, **kwargs):
        if map_location is not None and not isinstance(map_location, dict) and not callable(map_location):
            index, _ = sim.resolve(map_location)
            out = original_load(f, "cpu", *args, **kwargs)
            for t in _tensors(out):
                sim.tag(t, index)
            return out
        locations: Dict[int, str] = {}
        remap = map_location if isinstance(map_location, dict) else {}

        def record(storage, location):
            locations[storage.data_ptr()] = remap.get(location, location)
            return storage

        out = original_load(f, record, *args, **kwargs)
        known = saved.get(_file_key(f))
        for i, t in enumerate(_tensors(out)):
            if known is not None and i < len(known):  # saved under the simulator: where it was
                location = "cpu" if known[i] is None else f"cuda:{known[i]}"
                location = remap.get(location, location)
            else:  # a real checkpoint: where its storages say (already remapped)
                location = locations.get(t.untyped_storage().data_ptr(), "cpu")
            if callable(map_location):  # `lambda storage, loc: storage.cuda()`: where it moves it
                location = _placed_by(map_location, t.untyped_storage(), location)
            index, _ = sim.resolve(location) if location != "cpu" else (None, False)
            sim.tag(t, index)
        return out

    set_attr(torch, "save", save)
    set_attr(torch, "load", load)


def _file_key(f) -> tuple:
    """What identifies where a checkpoint was written: a path, the path of an open file
    (``with open(path, "wb") as f: torch.save(model, f)``), else the buffer itself."""
    name = f if isinstance(f, (str, os.PathLike)) else getattr(f, "name", None)
    if isinstance(name, (str, os.PathLike)):
        return ("path", os.path.abspath(os.fspath(name)))
    return ("object", id(f))


def _placed_by(map_location, storage, location: str) -> str:
    """Where a ``map_location`` function puts a storage saved at ``location``: the device
    it moves it to (``storage.cuda(k)``, ``storage.to(device=...)``; the storage stays on
    the CPU meanwhile, the simulated device is the answer), ``location`` itself when it
    returns None (torch's default restore), else the CPU."""
    import torch

    base = torch.storage._StorageBase
    asked: List[str] = []

    def to(self, *, device, non_blocking=False):
        asked.append(str(torch.device(device)))
        return self

    def cuda(self, device=None, non_blocking=False):
        asked.append("cuda" if device is None else str(torch.device("cuda", device)))
        return self

    original = base.to, base.cuda
    base.to, base.cuda = to, cuda
    try:
        result = map_location(storage, location)
    finally:
        base.to, base.cuda = original
    if asked:
        return asked[-1]
    return location if result is None else "cpu"


def _patch_default_device(sim, set_attr, by_name: Dict[str, Any]) -> None:
    import torch

    original_type, original_device = torch.set_default_tensor_type, torch.set_default_device
    original_get = torch.get_default_device
    dtype_at_start = torch.get_default_dtype()
    sim._stack.callback(torch.set_default_dtype, dtype_at_start)  # put back on exit
    sim._stack.callback(setattr, sim, "default_device", None)

    by_type = [False]  # the default came from a type: `torch.Tensor(...)` follows it too

    def set_default_tensor_type(t):
        stand_in = by_name.get(t) if isinstance(t, str) else (t if t in by_name.values() else None)
        by_type[0] = stand_in is not None
        if stand_in is None:  # a CPU type: torch's own
            sim.default_device = None
            return original_type(sim.cpu_types.get(t, t) if not isinstance(t, str) else t)
        if not stand_in.dtype.is_floating_point:
            raise TypeError("invalid type object: only floating-point types are supported as the default type")
        torch.set_default_dtype(stand_in.dtype)
        sim.default_device = "cuda"

    def set_default_device(device):
        by_type[0] = False
        if device is not None and (isinstance(device, int) or torch.device(device).type == "cuda"):
            sim.resolve(device)  # an invalid ordinal fails here, as on a GPU machine
            sim.default_device = device
            return original_device(None)
        sim.default_device = None
        return original_device(device)

    tensor_new = torch.Tensor.__new__
    own_new = "__new__" in vars(torch.Tensor)

    def new_tensor(*args, **kwargs):
        # the legacy constructor `torch.Tensor(...)`: given a tensor, an alias of it, on its
        # device (on a GPU machine too: torch.Tensor accepts any tensor); else it follows a
        # CUDA default *type* (not a default device): it allocates on the current device.
        # The signature stays a wildcard: torch._dynamo, imported lazily (an optimizer's
        # first step imports it), checks the signature of `torch.Tensor.__new__` then.
        out = tensor_new(*args, **kwargs)
        if not args or args[0] is not torch.Tensor:
            return out
        if len(args) == 2 and isinstance(args[1], torch.Tensor):
            sim.tag(out, sim.index(args[1]), new=False)
        elif by_type[0] and sim.default_device is not None and "device" not in kwargs:
            index, implicit = sim.resolve(sim.default_device)
            sim.tag(out, index, implicit)
        return out


    def get_default_device():
        if sim.default_device is None:
            return original_get()
        index, _ = sim.resolve(sim.default_device)
        return torch.device("cuda", index)

    set_attr(torch, "set_default_tensor_type", set_default_tensor_type)
    set_attr(torch, "set_default_device", set_default_device)
    set_attr(torch, "get_default_device", get_default_device)
    torch.Tensor.__new__ = new_tensor  # type: ignore[method-assign]
    sim._stack.callback(lambda: setattr(torch.Tensor, "__new__", tensor_new) if own_new
                        else delattr(torch.Tensor, "__new__"))


def tensor_type(sim, args, kwargs, func):
    """``Tensor.type`` under the simulator, or NotImplemented to let torch answer."""
    import torch

    t = args[0]
    target = args[1] if len(args) > 1 else kwargs.get("dtype")
    index = sim.index(t)
    if target is None:
        name = func(t)
        return name.replace("torch.", "torch.cuda.", 1) if index is not None else name
    if isinstance(target, str):
        target = sim.legacy_types.get(target, target)
    if not isinstance(target, str) and target in sim.cpu_types:  # a CPU type: a CPU tensor of its dtype
        with torch._C.DisableTorchFunction():
            out = t.to(target.dtype, copy=index is not None)
        return sim.tag(out, None) if out is not t else t
    if target in sim.legacy_types.values():
        if index is not None:  # already on a GPU: torch keeps the tensor's own (only the dtype changes)
            with torch._C.DisableTorchFunction():
                out = t.to(target.dtype)
            return sim.tag(out, index, new=False) if out is not t else t
        device_index, implicit = sim.resolve(None)  # from the CPU: the current device, as .cuda() would
        with torch._C.DisableTorchFunction():
            out = t.to(target.dtype, copy=True)
        return sim.tag(out, device_index, implicit)
    return NotImplemented


def _tensors(obj) -> List[Any]:
    """The tensors of a saved object, in a fixed order (dicts in insertion order)."""
    import torch

    out: List[Any] = []

    def walk(value) -> None:
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, torch.nn.Module):
            out.extend(value.parameters())
            out.extend(value.buffers())
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(obj)
    return out

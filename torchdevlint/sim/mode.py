"""The op-level half of the simulator: a ``TorchFunctionMode`` that tags results with
their logical device, moves tensors for ``.cuda()``/``.to()``/``.cpu()``, answers
``.device``/``.is_cuda``, and raises torch's own error when an op mixes devices."""

from __future__ import annotations

from typing import Any, Optional

from .legacy import tensor_type
from .tags import _TAG, _invalid_ordinal

Simulator = Any  # the simulator instance (``sim.Simulator``); no import cycle


_MOVE_PROPS = {"device", "is_cuda", "data", "grad"}
# ops torch allows across devices (they copy into their first argument)
_CROSS_DEVICE_OK = {"_has_compatible_shallow_copy_type", "copy_", "__setitem__", "set_",
                    "is_set_to", "__repr__", "__format__", "__str__", "_is_view", "data_ptr",
                    "size", "dim", "numel", "element_size", "is_floating_point", "requires_grad_",
                    "detach", "detach_", "__len__", "__bool__", "item", "tolist", "__hash__",
                    "_version", "is_contiguous", "stride", "storage_offset", "_grad_fn"}
# functions whose one integer argument (lengths, a packed sequence's batch sizes) and one
# result are on the CPU whatever the device of the rest, as torch requires: (that
# argument's position, that result's position or None)
_HOST_SIDE = {"_pack_padded_sequence": (1, 1), "_pad_packed_sequence": (1, 1),
              "lstm": (1, None), "gru": (1, None), "rnn_tanh": (1, None), "rnn_relu": (1, None)}


def _make_mode(sim: Simulator):
    import torch
    from torch.overrides import TorchFunctionMode

    Tensor = torch.Tensor
    parse_to_func = torch._C._nn._parse_to

    def tensors_in(obj, out):
        if isinstance(obj, Tensor):
            out.append(obj)
        elif isinstance(obj, (list, tuple)):
            for o in obj:
                tensors_in(o, out)
        elif isinstance(obj, dict):
            for o in obj.values():
                tensors_in(o, out)
        return out

    def common_device(func_name, args, kwargs) -> Optional[int]:
        found = tensors_in(args, [])
        tensors_in(kwargs, found)
        devices = []
        for t in found:
            index = getattr(t, _TAG, None)
            if index is None and t.dim() == 0:
                continue  # a 0-dim CPU tensor may mix with CUDA tensors, as in torch
            if index not in devices:
                devices.append(index)
        if len(devices) > 1:
            names = ["cpu" if d is None else f"cuda:{d}" for d in devices[:2]]
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"{names[0]} and {names[1]}! (when checking argument for {func_name})")
        if devices:
            return devices[0]
        # only 0-dim CPU tensors, or none at all
        tagged = [getattr(t, _TAG, None) for t in found if getattr(t, _TAG, None) is not None]
        return tagged[0] if tagged else None

    def parse_to(args, kwargs):
        """The device a Tensor.to(...) call asks for: (found, device)."""
        device = kwargs.get("device", None)
        if "device" in kwargs:
            return True, device
        for a in args:
            if isinstance(a, (str, torch.device, int)) and not isinstance(a, bool):
                return True, a
            if isinstance(a, Tensor):
                index = getattr(a, _TAG, None)
                return True, "cpu" if index is None else torch.device("cuda", index)
        return False, None

    from torch.utils._device import _device_constructors

    constructors = _device_constructors()

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if sim.default_device is not None and func in constructors and kwargs.get("device") is None:
                kwargs["device"] = sim.default_device  # a CUDA default device: factories land there
            owner = getattr(func, "__self__", None)
            if name in ("__get__", "__set__") and getattr(owner, "__name__", None) in _MOVE_PROPS:
                return self._prop(owner.__name__, name, func, args)
            if func is Tensor.cuda:
                return self._move(args[0], *self._cuda_target(args, kwargs), kwargs, cuda_call=True)
            if func is Tensor.cpu:
                return self._move(args[0], None, False, {}, cuda_call=False)
            if func is Tensor.to:
                found, device = parse_to(args[1:], kwargs)
                rest = [a for a in args[1:] if not (isinstance(a, (str, torch.device, int, Tensor))
                                                     and not isinstance(a, bool))]
                kw = {k: v for k, v in kwargs.items() if k != "device"}
                if not found:
                    out = func(args[0], *rest, **kw)
                    return sim.tag(out, getattr(args[0], _TAG, None), new=False)
                index, implicit = sim.resolve(device)
                return self._move(args[0], index, implicit, kw, cuda_call=False, rest=rest)
            if func is parse_to_func:  # Module.to(1): an int is a CUDA index
                args = tuple(torch.device("cuda", a) if isinstance(a, int) and not isinstance(a, bool) else a
                             for a in args)
                if isinstance(kwargs.get("device"), int) and not isinstance(kwargs["device"], bool):
                    kwargs["device"] = torch.device("cuda", kwargs["device"])
                return func(*args, **kwargs)
            if func is Tensor.type:
                out = tensor_type(sim, args, kwargs, func)
                if out is not NotImplemented:
                    return out
            if func is Tensor.type_as:  # `t.type(other.type())`: never a mix of devices
                t, other = args[0], args[1]
                here, there = getattr(t, _TAG, None), getattr(other, _TAG, None)
                if there is None:
                    index, implicit = None, False  # a CPU type: to the CPU
                elif here is None:
                    index, implicit = sim.resolve(None)  # a CUDA type from the CPU: the current device
                else:
                    index, implicit = here, False  # a GPU tensor keeps its own GPU
                rest = (other.dtype,) if other.dtype != t.dtype else ()
                return self._move(t, index, implicit, {}, cuda_call=False, rest=rest)
            if func is Tensor.get_device:
                index = getattr(args[0], _TAG, None)
                return -1 if index is None else index
            if func is Tensor.pin_memory:
                return sim.tag(args[0].clone(), None, new=False)
            if func is Tensor.is_pinned:
                return False
            if kwargs.get("pin_memory"):
                kwargs["pin_memory"] = False  # pinned host memory, as a GPU machine has it: CPU memory here
            if "device" in kwargs and kwargs["device"] is not None:
                index, implicit = sim.resolve(kwargs["device"])
                kwargs["device"] = "cpu"
                out = func(*args, **kwargs)
                return sim.tag(out, index, implicit)
            if name in _CROSS_DEVICE_OK:
                out = func(*args, **kwargs)  # a copy into self: self's device wins
                if args and isinstance(args[0], Tensor) and isinstance(out, Tensor):
                    sim.tag(out, getattr(args[0], _TAG, None), new=False)
                return out
            if name == "numpy" and args and getattr(args[0], _TAG, None) is not None:
                raise TypeError(f"can't convert cuda:{getattr(args[0], _TAG)} device type tensor to numpy. "
                                "Use Tensor.cpu() to copy the tensor to host memory first.")
            if name == "__getitem__" and args and isinstance(args[0], Tensor):
                return self._index(func, args, kwargs)
            arg, result = _HOST_SIDE.get(name, (-1, None))
            if 0 <= arg < len(args) and isinstance(args[arg], Tensor) and args[arg].dtype == torch.int64:
                # packed sequences: their lengths and batch sizes live on the CPU
                index = common_device(name, args[:arg] + args[arg + 1:], kwargs)
                out = func(*args, **kwargs)
                if index is not None:
                    sim.tag([o for i, o in enumerate(out) if i != result], index, new=False)
                return out
            index = common_device(getattr(func, "__qualname__", name), args, kwargs)
            out = func(*args, **kwargs)
            if index is not None:
                sim.tag(out, index, new=False)
            return out

        def _index(self, func, args, kwargs):
            """``x[idx]``: torch takes index tensors on the CPU or on ``x``'s device (a CUDA
            tensor indexed by ``torch.arange(n)``, advertorch's margin loss); the result is
            on ``x``'s device."""
            index = getattr(args[0], _TAG, None)
            for t in tensors_in(args[1:], []):
                where = getattr(t, _TAG, None)
                if where is not None and where != index:
                    raise RuntimeError("indices should be either on cpu or on the same device as the indexed "
                                       f"tensor ({'cpu' if index is None else f'cuda:{index}'})")
            out = func(*args, **kwargs)
            return out if index is None else sim.tag(out, index, new=False)

        def _cuda_target(self, args, kwargs):
            device = kwargs.pop("device", None)
            if device is None and len(args) > 1:
                device = args[1]
            return sim.resolve(device)

        def _move(self, t, index, implicit, kwargs, cuda_call, rest=()):
            if index is not None and index >= sim.state.gpus:
                raise _invalid_ordinal()
            current = getattr(t, _TAG, None)
            dtype_change = any(isinstance(a, torch.dtype) for a in rest) or "dtype" in kwargs
            kw = {k: v for k, v in kwargs.items() if k in ("dtype", "copy", "memory_format")}
            if current == index and not dtype_change and not kw.get("copy"):
                return t  # nothing moves: torch returns the tensor itself
            with torch._C.DisableTorchFunction():
                out = t.to("cpu", *rest, copy=True, **{k: v for k, v in kw.items() if k != "copy"})
            return sim.tag(out, index, implicit)

        def _prop(self, prop, kind, func, args):
            t = args[0]
            if kind == "__get__":
                index = getattr(t, _TAG, None)
                if prop == "device":
                    return torch.device("cpu") if index is None else torch.device("cuda", index)
                if prop == "is_cuda":
                    return index is not None
                out = func(*args)
                if out is not None:
                    sim.tag(out, index, new=False)  # .data and .grad live where the tensor lives
                return out
            value = args[1] if len(args) > 1 else None
            func(*args)
            if prop == "data" and isinstance(value, Tensor):
                sim.tag(t, getattr(value, _TAG, None), new=False)
            return None

    return Mode()

"""``DataParallel`` under the simulator: scatter, replicate, parallel_apply and gather
follow torch's rules over the simulated devices, as ``DataParallel``'s methods and as
the functions of ``torch.nn.parallel`` that code calls itself (``data_parallel(module,
x, range(n))``, the annotated Transformer's ``replicate``/``scatter``/``parallel_apply``/
``gather`` of a loss over its GPUs): torch's own go through ``torch._C``'s
``_broadcast_coalesced``, which the CPU build does not have."""

from __future__ import annotations

from typing import Any

Simulator = Any  # the simulator instance (``sim.Simulator``); no import cycle


def _get_device_index(sim: Simulator):
    def get(device, optional: bool = False, allow_cpu: bool = False) -> int:
        if isinstance(device, int):
            return device
        index, _ = sim.resolve(device)
        return -1 if index is None else index

    return get


def _index(sim: Simulator, device) -> int:
    """A device id as DataParallel takes one (an int, a ``torch.device``, ``"cuda:1"``),
    checked against the simulated GPUs."""
    return sim._check(_get_device_index(sim)(device))


# ---------------------------------------------------------------- the four steps
def scatter(sim: Simulator, obj, device_ids, dim: int = 0) -> list:
    """``obj`` split over ``device_ids`` as torch's ``scatter`` does: a tensor in chunks
    along ``dim`` (one per device, fewer when it is short), lists, tuples and dicts by
    their items, anything else repeated."""
    import torch

    if isinstance(obj, torch.Tensor):
        chunks = obj.chunk(len(device_ids), dim)
        return [sim.tag(c.clone(), _index(sim, i)) for c, i in zip(chunks, device_ids)]
    if isinstance(obj, (list, tuple)) and obj:
        parts = [scatter(sim, o, device_ids, dim) for o in obj]
        n = min(len(p) for p in parts)
        return [type(obj)(p[i] for p in parts) if not isinstance(obj, tuple) else tuple(p[i] for p in parts)
                for i in range(n)]
    if isinstance(obj, dict) and obj:
        parts = {k: scatter(sim, v, device_ids, dim) for k, v in obj.items()}
        n = min(len(p) for p in parts.values())
        return [{k: v[i] for k, v in parts.items()} for i in range(n)]
    return [obj for _ in device_ids]


def scatter_kwargs(sim: Simulator, inputs, kwargs, device_ids, dim: int = 0):
    """The positional and keyword inputs, scattered, padded to the same length."""
    scattered_inputs = scatter(sim, tuple(inputs), device_ids, dim) if inputs else []
    scattered_kwargs = scatter(sim, kwargs, device_ids, dim) if kwargs else []
    n = max(len(scattered_inputs), len(scattered_kwargs))
    scattered_inputs = list(scattered_inputs) + [() for _ in range(n - len(scattered_inputs))]
    scattered_kwargs = list(scattered_kwargs) + [{} for _ in range(n - len(scattered_kwargs))]
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def replicate(sim: Simulator, module, device_ids) -> list:
    """One replica of ``module`` per device: its parameters and buffers are views of the
    module's (gradients flow back to them, as through torch's Broadcast), on that device."""
    replicas = []
    modules = list(module.modules())
    for device in device_ids:
        index = _index(sim, device)
        copies = {id(m): m._replicate_for_data_parallel() for m in modules}
        for m in modules:
            r = copies[id(m)]
            for name, child in m._modules.items():
                r._modules[name] = copies[id(child)] if child is not None else None
            for key, p in m._parameters.items():  # a replica has none of its own; `bias=False` stays None
                r._parameters[key] = None if p is None else sim.tag(p.view_as(p), index, new=False)
            for key, b in m._buffers.items():
                if b is not None:
                    r._buffers[key] = sim.tag(b.view_as(b), index, new=False)
        replicas.append(copies[id(module)])
    return replicas


def parallel_apply(sim: Simulator, modules, inputs, kwargs=None, devices=None) -> list:
    """Each module on its inputs, with its device current (as torch's worker threads
    have it: the device given, or that of the first tensor of its inputs)."""
    import torch

    kwargs = kwargs if kwargs is not None else ({},) * len(modules)
    outputs = []
    for i, (module, args, kw) in enumerate(zip(modules, inputs, kwargs)):
        device = devices[i] if devices is not None else _first_device(args)
        with torch.cuda.device(_get_device_index(sim)(device) if device is not None else -1):
            if not isinstance(args, (list, tuple)):
                args = (args,)
            outputs.append(module(*args, **kw))
    return outputs


def _first_device(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.device
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    return next((d for d in map(_first_device, items) if d is not None), None)


def gather(sim: Simulator, outputs, output_device, dim: int = 0):
    """The outputs joined on ``output_device`` (-1 or ``"cpu"``: the CPU) along ``dim``."""
    import torch

    index = None if output_device in (-1, "cpu") else _index(sim, output_device)

    def join(items):
        first = items[0]
        if isinstance(first, torch.Tensor):
            moved = [sim.tag(t.clone(), index, new=False) for t in items]
            return torch.cat(moved, dim) if first.dim() else torch.stack(moved)
        if isinstance(first, dict):
            return type(first)({k: join([d[k] for d in items]) for k in first})
        if isinstance(first, (list, tuple)):
            return type(first)(join(list(parts)) for parts in zip(*items))
        return first

    return join(outputs)


# ---------------------------------------------------------------- the patches
def patch_parallel(sim: Simulator, set_attr) -> None:
    """DataParallel's methods and the functions of ``torch.nn.parallel`` (where the
    package, its modules and ``data_parallel``'s namespace hold them) run the steps above."""
    import importlib

    import torch.nn.parallel as package

    dp = importlib.import_module("torch.nn.parallel.data_parallel")  # the module, not the function
    sg = importlib.import_module("torch.nn.parallel.scatter_gather")
    rp = importlib.import_module("torch.nn.parallel.replicate")
    pa = importlib.import_module("torch.nn.parallel.parallel_apply")
    steps = {
        "scatter": (lambda inputs, target_gpus, dim=0: _scattered(sim, inputs, target_gpus, dim), (package, sg)),
        "scatter_kwargs": (lambda inputs, kwargs, target_gpus, dim=0: scatter_kwargs(sim, inputs, kwargs,
                                                                                      target_gpus, dim), (sg, dp)),
        "replicate": (lambda network, devices, detach=False: replicate(sim, network, devices), (package, rp, dp)),
        "parallel_apply": (lambda modules, inputs, kwargs_tup=None, devices=None: parallel_apply(
            sim, modules, inputs, kwargs_tup, devices), (package, pa, dp)),
        "gather": (lambda outputs, target_device, dim=0: gather(sim, outputs, target_device, dim), (package, sg, dp)),
    }
    for name, (function, homes) in steps.items():
        for home in homes:
            if hasattr(home, name):
                set_attr(home, name, function)
    klass = dp.DataParallel
    set_attr(klass, "scatter", lambda self, inputs, kwargs, device_ids: scatter_kwargs(sim, inputs, kwargs,
                                                                                     device_ids, self.dim))
    set_attr(klass, "replicate", lambda self, module, device_ids: replicate(sim, module, device_ids))
    set_attr(klass, "parallel_apply", lambda self, replicas, inputs, kwargs: parallel_apply(
        sim, replicas, inputs, kwargs, self.device_ids[:len(replicas)]))
    set_attr(klass, "gather", lambda self, outputs, output_device: gather(sim, outputs, output_device, self.dim))
    set_attr(dp, "_get_device_index", _get_device_index(sim))
    set_attr(dp, "_check_balance", _check_balance(sim))


def _scattered(sim: Simulator, inputs, target_gpus, dim: int):
    """torch's ``scatter``: a tensor gives a tuple of chunks, the rest a list."""
    import torch

    parts = scatter(sim, inputs, target_gpus, dim)
    return tuple(parts) if isinstance(inputs, torch.Tensor) else parts


def _check_balance(sim: Simulator):
    """DataParallel asks every device id for its properties when it is built: an id past
    the GPUs there are fails there, as on hardware (the memory balance is not modelled)."""
    def check_balance(device_ids) -> None:
        for device in device_ids:
            _index(sim, device)

    return check_balance

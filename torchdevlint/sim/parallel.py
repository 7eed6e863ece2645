"""``DataParallel`` under the simulator: scatter, replicate, parallel_apply and gather
follow torch's rules over the simulated devices."""

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


# ---------------------------------------------------------------- DataParallel
def _dp_check_balance(sim: Simulator):
    """DataParallel asks every device id for its properties when it is built: an id past
    the GPUs there are fails there, as on hardware (the memory balance is not modelled)."""
    index = _get_device_index(sim)

    def check_balance(device_ids) -> None:
        for device in device_ids:
            sim._check(index(device, True))

    return check_balance


def _dp_scatter(sim: Simulator):
    def scatter(self, inputs, kwargs, device_ids):
        import torch

        def split(obj):
            if isinstance(obj, torch.Tensor):
                chunks = obj.chunk(len(device_ids), self.dim)
                return [sim.tag(c.clone(), sim._check(i)) for c, i in zip(chunks, device_ids)]
            if isinstance(obj, (list, tuple)) and obj:
                parts = [split(o) for o in obj]
                n = min(len(p) for p in parts)
                return [type(obj)(p[i] for p in parts) if not isinstance(obj, tuple) else tuple(p[i] for p in parts)
                        for i in range(n)]
            if isinstance(obj, dict) and obj:
                parts = {k: split(v) for k, v in obj.items()}
                n = min(len(p) for p in parts.values())
                return [{k: v[i] for k, v in parts.items()} for i in range(n)]
            return [obj for _ in device_ids]

        scattered_inputs = split(tuple(inputs)) if inputs else []
        scattered_kwargs = split(kwargs) if kwargs else []
        n = max(len(scattered_inputs), len(scattered_kwargs))
        scattered_inputs = list(scattered_inputs) + [() for _ in range(n - len(scattered_inputs))]
        scattered_kwargs = list(scattered_kwargs) + [{} for _ in range(n - len(scattered_kwargs))]
        return tuple(scattered_inputs), tuple(scattered_kwargs)

    return scatter


def _dp_replicate(sim: Simulator):
    def replicate(self, module, device_ids):
        replicas = []
        modules = list(module.modules())
        for device in device_ids:
            index = sim._check(device)
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

    return replicate


def _dp_parallel_apply(sim: Simulator):
    def parallel_apply(self, replicas, inputs, kwargs):
        import torch

        outputs = []
        for replica, args, kw, device in zip(replicas, inputs, kwargs, self.device_ids):
            with torch.cuda.device(device):  # as torch's worker threads do
                if not isinstance(args, (list, tuple)):
                    args = (args,)
                outputs.append(replica(*args, **kw))
        return outputs

    return parallel_apply


def _dp_gather(sim: Simulator):
    def gather(self, outputs, output_device):
        import torch

        index = None if output_device == -1 else sim._check(
            output_device if isinstance(output_device, int) else sim.resolve(output_device)[0])

        def join(items):
            first = items[0]
            if isinstance(first, torch.Tensor):
                moved = [sim.tag(t.clone(), index, new=False) for t in items]
                return torch.cat(moved, self.dim) if first.dim() else torch.stack(moved)
            if isinstance(first, dict):
                return type(first)({k: join([d[k] for d in items]) for k in first})
            if isinstance(first, (list, tuple)):
                return type(first)(join(list(parts)) for parts in zip(*items))
            return first

        return join(outputs)

    return gather


# ---------------------------------------------------------------- the mode

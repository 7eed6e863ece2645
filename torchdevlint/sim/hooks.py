"""Gradients handed to backward hooks, under the simulator.

The autograd engine computes gradients in C++ and calls hooks outside the simulator's
torch-function mode, so what it hands to a hook carries no tag (it would look like a CPU
tensor beside the CUDA tensors it belongs with) and the hook's own ops would go unseen:
a hook called outside the mode runs inside it again (a module's backward hooks are;
a tensor's are called inside it). On a GPU machine a gradient lives where its tensor
does: a ``Tensor.register_hook`` hook gets its gradient on the tensor's device, and a
module's backward hooks (``register_full_backward_hook``, ``register_backward_hook``,
``register_full_backward_pre_hook``: Opacus computes per-sample gradients in them) get
``grad_input``/``grad_output`` on the module's device (that of its parameters and
buffers, which its forward ran on). Tensors a hook's caller already tagged keep theirs.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Optional

from .mode import _make_mode

Simulator = Any  # the simulator instance (``sim.Simulator``); no import cycle


def patch_backward_hooks(sim: Simulator, set_attr) -> None:
    import torch

    def untagged(value, index: Optional[int]):
        """``value`` (a tensor, or tuples of them, None inside) with every untagged tensor put on ``index``."""
        if index is None:
            return value
        if isinstance(value, torch.Tensor):
            return value if sim.index(value) is not None else sim.tag(value, index, new=False)
        if isinstance(value, (list, tuple)):
            for v in value:
                untagged(v, index)
        return value

    def module_device(module) -> Optional[int]:
        first = next(itertools.chain(module.parameters(), module.buffers()), None)  # (per hook call: no lists)
        return sim.index(first) if first is not None else None

    def in_mode(hook, *args):
        if torch._C._len_torch_function_stack():
            return hook(*args)
        with _make_mode(sim):
            return hook(*args)

    tensor_register_hook = torch.Tensor.register_hook

    def register_hook(self, hook):
        if not getattr(self, "requires_grad", False):
            return tensor_register_hook(self, hook)  # torch's own error

        @functools.wraps(hook)
        def on_grad(grad):
            return in_mode(hook, untagged(grad, sim.index(self)))

        return tensor_register_hook(self, on_grad)

    set_attr(torch.Tensor, "register_hook", register_hook)

    def module_hook(name: str) -> None:
        original = getattr(torch.nn.Module, name)

        def register(self, hook, *args, **kwargs):
            @functools.wraps(hook)
            def on_grads(module, *grads):
                index = module_device(module)
                return in_mode(hook, module, *(untagged(g, index) for g in grads))

            return original(self, on_grads, *args, **kwargs)

        set_attr(torch.nn.Module, name, register)

    for name in ("register_full_backward_hook", "register_backward_hook", "register_full_backward_pre_hook"):
        if hasattr(torch.nn.Module, name):
            module_hook(name)

"""TDL009 discarded-tensor-move: ``x.cuda()`` on a tensor, as a statement of its own."""

from __future__ import annotations

from typing import Iterable

import libcst as cst

from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule


class DiscardedTensorMove(Rule):
    code = "TDL009"
    name = "discarded-tensor-move"
    summary = "`x.cuda()` or `x.to(...)` on a tensor as a statement: the moved copy is dropped"
    # a `.cuda(` or `.to(` call that starts a statement, on a chain of names,
    # attributes and items (words.TEXT_TESTS); the gate: such a call as a whole statement
    triggers = ("@dropped-move",)
    needs = (("drop:cuda", "drop:to"),)
    fixable = "sometimes"
    fix_summary = "assign the move back, `x = x.cuda()` (unsafe); display for an item (`t[i]`)"
    what = """
        A `.cuda()` or `.to(...)` call that is a whole expression statement, on
        a receiver that outlives the statement (a name, or an attribute or item chain on
        one: `x`, `self.mean`, `batch[i]`) and that is provably a tensor there: bound by
        a torch factory (`torch.rand(...)`, `torch.tensor(...)`, `torch.arange(...)`), by a
        tensor method of one, a batch of torch's `DataLoader` (`for x, y in loader:`
        `x.to(device)`), or a `self.<attr>` every assignment of which is one. A
        name's binding in force at the statement decides (fairseq's quantizer rebinds
        `centroids = torch.rand(...)` under the `if` that then calls `centroids.cuda()`).
        Not a module (`model.cuda()` moves the module itself), not what a call makes
        (`torch.zeros(1).cuda()`, the idiom that starts CUDA early), nor a receiver that
        is not provably a tensor; nor a copy to the CPU (`y.cpu()`, `y.to("cpu")`), which
        timing code drops on purpose: it waits for the GPU (`y.data.cpu()  # synchronize`);
        nor a `.to()` given a dtype only (`x.to(torch.float16)`: a conversion, not a move).
    """
    why = """
        `Tensor.cuda()` and `.to()` do not move the tensor: they return a copy
        on the other device and leave the receiver where it was. Unlike `Module.cuda()`,
        called as a statement the copy is thrown away and the line does nothing but copy
        data to the GPU and free it; the code after it reads the tensor still on its old
        device, and the next op mixes devices ("Expected all tensors to be on the same
        device") or a collective refuses a CPU tensor on NCCL (fairseq's quantized
        centroids, broadcast right after).
    """
    example = """
        centroids = torch.rand(n, d)
        centroids.cuda()
        dist.broadcast(centroids, 0)
    """
    use_instead = """
        centroids = torch.rand(n, d)
        centroids = centroids.cuda()   # or .to(device)
        dist.broadcast(centroids, 0)
    """
    fix_safety = """
        Assigning the move back (`x = x.cuda()`, `self.mean = self.mean.to(device)`) is
        **unsafe**: the code after it now sees the tensor on the new device, which is
        what the line meant and not what the program did. An item (`t[i] = t[i].cuda()`
        would copy back into a CPU tensor `t`) is display-only: where the moved copy
        should go is the author's decision.
    """
    VALID = (
        "import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.cuda()\n",  # a module moves itself
        "import torch\ntorch.zeros(1).cuda()\n",  # a temporary: the idiom that starts CUDA early
        "import torch\nx = torch.zeros(1)\nx = x.cuda()\n",
        "import torch\ndef f(x):\n    x.cuda()\n    return x\n",  # not provably a tensor
        "import torch\nx = torch.zeros(1)\nif big:\n    x = build_model()\nx.cuda()\n",
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(2, 2)\n        self.fc.cuda()\n",
        "import torch\nx = torch.zeros(1)\ny = x.cuda() if ok else x\n",
        # a copy to the host, dropped: timing code's wait for the GPU
        "import torch\nfor _ in range(5):\n    y = torch.mm(a, b)\ny.cpu()\ny.to('cpu')\n",
        "import torch\nx = torch.zeros(2)\nx.to(torch.float16)\nx.to(dtype=torch.float64)\n",  # no move
    )
    INVALID = (
        Example(  # assigned back, then TDL001 names the device (a script's, with the CPU fallback)
            "import torch\nx = torch.zeros(3)\nx.cuda()\nprint(x + 1)\n",
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.zeros(3)\nx = x.to(device)\nprint(x + 1)\n"),
        Example(  # rebound under the `if` that moves it (fairseq's quantizer)
            "import torch\ndef init(quantizer, fresh):\n    centroids = quantizer.centroids.contiguous()\n"
            "    if fresh:\n        centroids = torch.rand(centroids.size())\n        centroids.cuda()\n"
            "    return centroids\n",
            "import torch\ndef init(quantizer, fresh):\n"
            '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "    centroids = quantizer.centroids.contiguous()\n"
            "    if fresh:\n        centroids = torch.rand(centroids.size())\n"
            "        centroids = centroids.to(device)\n"
            "    return centroids\n"),
        Example(
            "import torch\nclass Norm:\n    def __init__(self, mean):\n        self.mean = torch.tensor(mean)\n\n"
            "    def to_gpu(self, device):\n        self.mean.to(device, non_blocking=True)\n",
            "import torch\nclass Norm:\n    def __init__(self, mean):\n        self.mean = torch.tensor(mean)\n\n"
            "    def to_gpu(self, device):\n        self.mean = self.mean.to(device, non_blocking=True)\n"),
        Example(  # a DataLoader's batch, "moved" in the loop
            "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, data, device):\n"
            "    for x, y in DataLoader(data, batch_size=4):\n        x.to(device)\n        y.to(device)\n"
            "        model(x).sum().backward()\n",
            "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, data, device):\n"
            "    for x, y in DataLoader(data, batch_size=4):\n        x = x.to(device)\n        y = y.to(device)\n"
            "        model(x).sum().backward()\n"),
        Example("import torch\nx = torch.ones(2, 2)\nx[0].cuda()\n"),  # display: an item
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        for call, receiver in a.discarded_moves.items():
            method = call.func.attr.value  # type: ignore[attr-defined]
            held = ctx.seen(receiver)
            move = ctx.seen(call)
            if len(move) > 60 or "\n" in move:
                move = f"{held}.{method}(...)"
            message = (f"`.{method}()` returns a moved copy of the tensor `{held}` and this statement drops it: "
                       f"`{held}` stays where it was (only a module moves itself); assign it back, "
                       f"`{held} = {move}`")
            yield ctx.violation(call, message, _assign_back(ctx, call, receiver, held, move))


def _assign_back(ctx: Context, call: cst.Call, receiver: cst.BaseExpression, held: str, move: str) -> Fix:
    """``x = x.cuda()``, ``self.mean = self.mean.cuda()`` (unsafe); display for an item
    or a statement in parentheses (where ``x = `` cannot go)."""
    if isinstance(receiver, cst.Subscript) or call.lpar:
        why = ("an item: assigning it back may copy into a CPU tensor" if isinstance(receiver, cst.Subscript)
               else "a statement in parentheses")
        return Fix(Applicability.DISPLAY, f"Assign the moved copy where the code reads it (not rewritten: {why})")
    return Fix(Applicability.UNSAFE, f"Assign it back: `{held} = {move}` (the code after it sees "
               "the tensor moved, as the line meant)", (ctx.replace(call, f"{held} = {ctx.seen(call)}"),))

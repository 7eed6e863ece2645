"""TDL005 legacy-cuda-tensor-type: ``torch.cuda.FloatTensor(...)`` and friends."""

from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import libcst as cst

from ..analysis import CallSite, binding_in_force, param_annotation, walk
from ..analysis.process import _is_main_guard
from ..names import DTYPES, LEGACY_CUDA_TYPES as LEGACY
from ..model import Applicability, Edit, Fix, Violation
from ..project import outside_program
from .base import Context, Example, Rule

# what `fix --unsafe-fixes` inserts in a library function that places work (the examples)
DEVICE = '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'


class LegacyCudaTensorType(Rule):
    code = "TDL005"
    name = "legacy-cuda-tensor-type"
    summary = "a legacy `torch.cuda.<T>Tensor` type allocates or converts on the implicit current device"
    triggers = tuple(DTYPES)  # FloatTensor, LongTensor ... (not a `torch.Tensor` hint)
    also_requires = ("@cuda-type",)  # `cuda.FloatTensor`, `from torch.cuda import` ... (words.TEXT_TESTS)
    # the gate on the code: a CUDA typed tensor, or its name in a string
    needs = (tuple(f"qual:torch.cuda.{t}" for t in DTYPES) + ("str^torch.cuda.",),)
    fixable = "sometimes"
    fix_summary = ('`torch.empty`/`torch.tensor(..., dtype=, device=)`, `.to(device, dtype)`; the alias idiom '
                   'becomes a device with the same choice (safe with an exact device, else unsafe)')
    what = """
        The pre-1.0 typed-tensor API used to allocate or convert: a call of
        `torch.cuda.FloatTensor(...)` (any of the ten types), `x.type(torch.cuda.FloatTensor)`,
        `torch.set_default_tensor_type(torch.cuda.FloatTensor)` (the type or its name, as
        `.type("torch.cuda.FloatTensor")` too; or chosen on a flag against its CPU twin,
        `torch.cuda.FloatTensor if args.cuda else torch.FloatTensor`), and an alias such as `Tensor =
        torch.cuda.FloatTensor if cuda else torch.FloatTensor` (at the top level of the
        module, of its `if __name__ == "__main__":` block or of a function, or an attribute
        such as `self.Tensor`); so is one bound in a branch, the statement form of the
        same choice (`if use_cuda:` `dtype = torch.cuda.FloatTensor` `else:` `dtype =
        torch.FloatTensor`), or by unpacking (neural-style's `dtype, backward_device =
        torch.cuda.FloatTensor, "cuda:" + str(params.gpu)`: the images go to the current
        device, not to the GPU the option named), often handed back to a caller (Social
        GAN's `get_dtypes(use_gpu)`). Not `isinstance(x, torch.cuda.FloatTensor)` or type
        comparisons: those only test.
    """
    why = """
        These constructors allocate on the implicit current device (cuda:0 unless
        something set it), and they fail outright on a machine without CUDA ("type
        torch.cuda.FloatTensor not available"), which a `device` with a CPU fallback
        elsewhere in the script cannot rescue. Their dtype is spelled in the type name,
        where modern code passes `dtype=` and `device=`.
    """
    example = """
        noise = torch.cuda.FloatTensor(batch, 100).normal_()
        labels = torch.cuda.LongTensor([1, 0, 1])
        x = x.type(torch.cuda.FloatTensor)
    """
    use_instead = """
        noise = torch.empty(batch, 100, dtype=torch.float32, device=device).normal_()
        labels = torch.tensor([1, 0, 1], dtype=torch.int64, device=device)
        x = x.to(device, torch.float32)
    """
    fix_safety = """
        Sizes (integers, `x.size()`, `x.size(0)`, `x.shape[0]`, `len(x)`, arithmetic of
        those, or a local name whose binding in force is one) become `torch.empty(*sizes, dtype=...,
        device=...)`, a list, tuple, comprehension or numpy array of data (`t.numpy()`
        too) `torch.tensor(data, dtype=..., device=...)`, a tensor (`x.unsqueeze(0).float()`,
        `torch.from_numpy(a)`: the CUDA type took a CUDA tensor of its dtype as it was, and
        its CPU twin would refuse one) `torch.as_tensor(x, dtype=..., device=...)`, `.type(T)` becomes
        `.to(device, dtype)` (**unsafe** on what is provably a module: `.to` keeps its
        integer buffers, BatchNorm's `num_batches_tracked`, integers, where `.type` made
        them floating point; on a tensor already on a GPU other than the current one,
        `.type` kept it there and `.to(device)` moves it: the same wherever the tensor is
        on the CPU or on the current device, as in the single-GPU scripts this rewrites).
        Inside `forward` of a module with no device in scope,
        `fix --unsafe-fixes` names the input's device (`x.device`: unsafe, it may not be
        the current device; it is what lets the module run on the CPU; not for that very
        input's own `.type(...)`, which it would leave where it is) and `fix` alone
        spells `device="cuda"` (safe); likewise, in any function, the device of an input
        tensor the function asks for its device, or that the new tensor is made from
        (sized by `std.size()`, by `max_len = torch.max(lengths).item()`), unless a
        collective sends the new tensor and none sends the input's data (as TDL002). With
        `torch.device("cuda")` in scope (or no device at all in
        a library module, where the fix spells `device="cuda"`) the rewrite is exactly
        the old behaviour: **safe**; in a library module's function `fix --unsafe-fixes`
        defines the device there instead, with the CPU fallback (**unsafe**; as TDL001).
        With another device in scope it is **unsafe**; where that device is the code's
        own and the call makes no definition (`args.device`, the device an enclosing
        `if "cuda" in self.device_list[i]:` tests, neural-style's per-chunk placement),
        `fix` alone spells `"cuda"` (safe: the current device, as the CUDA type used). When
        nothing names a device, a script gets one definition where it starts, shared
        with TDL001: `fix` defines `torch.device("cuda")` (**safe**: the current device,
        as the CUDA type used), `fix --unsafe-fixes` the CPU fallback (**unsafe**: that is
        what makes a legacy script run without CUDA). A call whose one argument may be
        a size or data (a parameter, a name bound by a loop or an unpacking), or whose
        arguments are unpacked (`*shape`), becomes the CPU type's constructor moved to
        the device, `torch.FloatTensor(rewards).to(device)`: it takes either, with the
        meaning the CUDA type gave it (a parameter annotated `int` is a size). A call
        that names its device (`torch.cuda.LongTensor(size, device=d)`, allennlp's range
        vector) keeps that device: `torch.empty(size, dtype=torch.int64, device=d)`
        (**unsafe**: where `d` names the CPU the legacy type raised, and the factory
        allocates there); with unpacked arguments, `torch.FloatTensor(*shape).to(d)`
        (e2cnn's field dropout). Other named arguments (`**kw`) are display-only.

        A CUDA default tensor type becomes `torch.set_default_dtype(torch.float32)` and
        `torch.set_default_device(device)` (the device as above; a script's with the CPU
        fallback; `device if args.cuda else "cpu"` for a type chosen on a flag; `"cuda"`
        under `if torch.cuda.is_available():`, with nothing defined): always
        **unsafe**, for `torch.Tensor(...)` followed the default type and does not follow
        a default device: this module's own become `torch.empty(size)` /
        `torch.tensor(data, dtype=...)`, which do (display-only where the argument may be
        either). Another module's would stay on the CPU beside tensors on the GPU (SSD's
        prior boxes, built with `torch.Tensor(mean)` in `layers/functions/prior_box.py`):
        where the file imports modules of its own program (anything but the standard
        library, torch's family and common numeric packages) the rewrite is display-only,
        unless `torchdevlint fix` runs over the program and no other file of the run
        calls `torch.Tensor(...)` (the whole-run index; a single file and the flake8
        plugin cannot tell).

        The alias idiom `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`
        (or `torch.Tensor` on the CPU side, the default type: `torch.FloatTensor` where the
        file never changes the default) is rewritten as a whole (with its own aliases, `Tensor = FloatTensor`, which
        go): the alias becomes `device = torch.device("cuda" if cuda else "cpu")` (the
        very same choice, made at the same point), every `Tensor(...)` a factory call
        with `dtype=` and `device=`, every `x.type(Tensor)` a `.to(device, dtype)`:
        **safe** in a script. Where the choice is a flag that does not itself make CUDA
        certain (`opt.cuda` from options parsed in another file, or a `--cuda` switch),
        `fix --unsafe-fixes` writes `"cuda" if opt.cuda and torch.cuda.is_available()
        else "cpu"` instead (**unsafe**: where the flag asks for CUDA and there is none
        the script runs on the CPU instead of failing; `fix` alone keeps the exact
        choice). When the script already defines `device` before the alias,
        the alias goes and its uses take that device (**unsafe** unless it is the same
        expression). In a library module the alias is a public name other modules may
        import: **unsafe**; there an unconditional CUDA alias whose uses are all in
        functions goes, and each of those functions defines its own device with the CPU
        fallback (TDL001's line there: a library gets no definition at import, and the
        functions ask when they run). When `Tensor` is used in any other way (passed on,
        `isinstance`, rebound) or one of its calls has named arguments, the fix is
        display-only: all of it or nothing (a call whose one argument may be a size or
        data, or whose arguments are unpacked, becomes the CPU type's,
        `torch.FloatTensor(x).to(device)`). The statement form (`if use_cuda:` `dtype =
        torch.cuda.FloatTensor` `else:` `dtype = torch.FloatTensor`, or a CPU type that a
        branch rebinds) is rewritten as a whole too: each binding becomes the device it
        chooses in its place (`device = torch.device("cuda")`, `torch.device("cpu")`) and
        the uses as above (**safe** in a script; **unsafe** for a library's public name;
        where the script already binds its device to that very choice before, the alias
        goes and the uses take that device);
        display where the name is bound to anything else, bound to a CUDA type twice, or
        used otherwise (handed back: Social GAN's `get_dtypes`). An alias bound by
        unpacking is display-only (the message names the device the statement binds
        beside it).
    """
    VALID = (
        "import torch\ntorch.set_default_tensor_type(torch.DoubleTensor)\n",
        # a branch or an unpacking that binds the CPU types only
        "import torch\nif half:\n    dtype = torch.HalfTensor\nelse:\n    dtype = torch.FloatTensor\n",
        "import torch\ndef setup():\n    dtype, device = torch.FloatTensor, 'cpu'\n    return dtype, device\n",
        "import torch\ntorch.set_default_tensor_type('torch.FloatTensor')\n",
        "import torch\nok = isinstance(x, torch.cuda.FloatTensor)\n",
        "import torch\nok = type(x) == torch.cuda.FloatTensor\n",
        "import torch\nx = torch.FloatTensor(3)\n",
        "import torch\nx = torch.empty(3, device='cuda')\n",
    )
    INVALID = (
        # the device the call names (allennlp's get_range_vector), a size by its annotation
        Example("import torch\n\n\ndef get_range_vector(size: int, device: int) -> torch.Tensor:\n"
                "    if device > -1:\n"
                "        return torch.cuda.LongTensor(size, device=device).fill_(1).cumsum(0) - 1\n"
                "    return torch.arange(0, size, dtype=torch.long)\n",
                "import torch\n\n\ndef get_range_vector(size: int, device: int) -> torch.Tensor:\n"
                "    if device > -1:\n"
                "        return torch.empty(size, dtype=torch.int64, device=device).fill_(1).cumsum(0) - 1\n"
                "    return torch.arange(0, size, dtype=torch.long)\n"),
        # ... an argument that may be a size or data (no annotation): the CPU type, moved there
        Example("import torch\ndef rng(size, device):\n    if device > -1:\n"
                "        return torch.cuda.LongTensor(size, device=device).fill_(1)\n",
                "import torch\ndef rng(size, device):\n    if device > -1:\n"
                "        return torch.LongTensor(size).to(device).fill_(1)\n"),
        # ... or unpacked arguments (e2cnn's field dropout)
        Example("import torch\ndef drop(x, shape, device, p):\n"
                "    mask = torch.cuda.FloatTensor(*shape, device=device).bernoulli_(1 - p)\n    return x * mask\n",
                "import torch\ndef drop(x, shape, device, p):\n"
                "    mask = torch.FloatTensor(*shape).to(device).bernoulli_(1 - p)\n    return x * mask\n"),
        # a script: the device is defined where it starts (CPU fallback: unsafe)
        Example("import torch\nx = torch.cuda.FloatTensor(2, 3)\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "x = torch.empty(2, 3, dtype=torch.float32, device=device)\n"),
        # a library function: its own device, with the CPU fallback (unsafe; `fix` alone
        # spells the old placement out, `device="cuda"`: safe)
        Example("import torch\ndef labels():\n    return torch.cuda.LongTensor([1, 0, 1])\n",
                'import torch\ndef labels():\n' + DEVICE +
                '    return torch.tensor([1, 0, 1], dtype=torch.int64, device=device)\n'),
        Example("import torch\ndevice = torch.device('cuda')\nx = t.type(torch.cuda.HalfTensor)\n",
                "import torch\ndevice = torch.device('cuda')\nx = t.to(device, torch.float16)\n"),
        Example("import torch\ndef noise(batch):\n    return torch.cuda.FloatTensor(batch, 100).normal_()\n",
                "import torch\ndef noise(batch):\n" + DEVICE
                + "    return torch.empty(batch, 100, dtype=torch.float32, "
                'device=device).normal_()\n'),
        # torch imported in a `try` (ParlAI's distributed helpers): the code's own name for it
        Example("import pickle\ntry:\n    import torch.nn\nexcept ImportError:\n    pass\n\n\n"
                "def all_gather_list(data):\n    enc = list(pickle.dumps(data))\n"
                "    return torch.cuda.ByteTensor(len(enc)).zero_()\n",
                "import pickle\ntry:\n    import torch.nn\nexcept ImportError:\n    pass\n\n\n"
                "def all_gather_list(data):\n    enc = list(pickle.dumps(data))\n"
                "    return torch.empty(len(enc), dtype=torch.uint8, device=\"cuda\").zero_()\n"),
        # Tacotron 2's length mask (copied into NeMo and fairseq): a number from `.item()` is a
        # size, read from the input, whose device the mask takes
        Example("import torch\ndef get_mask_from_lengths(lengths):\n    max_len = torch.max(lengths).item()\n"
                "    ids = torch.arange(0, max_len, out=torch.cuda.LongTensor(max_len))\n"
                "    return ids < lengths.unsqueeze(1)\n",
                "import torch\ndef get_mask_from_lengths(lengths):\n"
                "    max_len = torch.max(lengths).item()\n"
                "    ids = torch.arange(0, max_len, out=torch.empty(max_len, dtype=torch.int64, "
                "device=lengths.device))\n"
                "    return ids < lengths.unsqueeze(1)\n"),
        # a tensor (backgroundremover's U^2-Net input): taken as it is, on the device
        Example("import torch\ndef predict(sample):\n    if torch.cuda.is_available():\n"
                "        return torch.cuda.FloatTensor(sample['image'].unsqueeze(0).float())\n"
                "    return torch.FloatTensor(sample['image'].unsqueeze(0).float())\n",
                "import torch\ndef predict(sample):\n" + DEVICE + "    if torch.cuda.is_available():\n"
                "        return torch.as_tensor(sample['image'].unsqueeze(0).float(), dtype=torch.float32, "
                "device=device)\n"
                "    return torch.FloatTensor(sample['image'].unsqueeze(0).float())\n"),
        Example("import torch\ndef f():\n    return torch.cuda.FloatTensor()\n",
                'import torch\ndef f():\n' + DEVICE
                + '    return torch.empty(0, dtype=torch.float32, device=device)\n'),
        # one argument that may be a size or data (a parameter, a batch unpacked in a DQN's
        # update): the CPU type's constructor takes either with the same meaning, then moves
        Example("import torch\ndef f(n):\n    return torch.cuda.FloatTensor(n)\n",
                "import torch\ndef f(n):\n" + DEVICE + "    return torch.FloatTensor(n).to(device)\n"),
        # ... or unpacked arguments (a size, or one sequence of data: the CPU type unpacks them alike)
        Example("import torch\ndef f(shape):\n    return torch.cuda.FloatTensor(*shape)\n",
                "import torch\ndef f(shape):\n" + DEVICE + "    return torch.FloatTensor(*shape).to(device)\n"),
        # ... display-only where they are named
        Example("import torch\ndef f(kw):\n    return torch.cuda.FloatTensor(**kw)\n"),
        # made from an input tensor (sized by it): the input's device, where the code's data is
        Example("import torch\ndef noise(std):\n    return torch.cuda.FloatTensor(std.size()).normal_()\n",
                "import torch\ndef noise(std):\n    return torch.empty(std.size(), dtype=torch.float32, "
                'device=std.device).normal_()\n'),
        # ... not one a collective sends: it goes where the communicator is (as TDL002 reads it)
        Example("import torch\nimport torch.distributed as dist\ndef count(x):\n"
                "    n = torch.cuda.LongTensor(x.size(0)).fill_(1)\n    dist.all_reduce(n)\n    return n\n",
                "import torch\nimport torch.distributed as dist\ndef count(x):\n" + DEVICE
                + "    n = torch.empty(x.size(0), dtype=torch.int64, device=device).fill_(1)\n"
                "    dist.all_reduce(n)\n    return n\n"),
        # sizes and data seen through a name bound once, `x.size(0)`, `len(x)`
        Example("import torch\nimport numpy as np\ndef f(x, rows):\n    ids = [r.id for r in rows]\n"
                "    n = len(rows) * 2\n    return torch.cuda.LongTensor(ids), torch.cuda.ByteTensor(x.size(0)), "
                "torch.cuda.FloatTensor(n)\n",
                "import torch\nimport numpy as np\ndef f(x, rows):\n" + DEVICE + "    ids = [r.id for r in rows]\n"
                "    n = len(rows) * 2\n    return torch.tensor(ids, dtype=torch.int64, device=device), "
                "torch.empty(x.size(0), dtype=torch.uint8, device=x.device), "
                "torch.empty(n, dtype=torch.float32, device=device)\n"),
        # the binding in force at the call: the last one before it (its own statement binds after)
        Example("import torch\nimport numpy as np\ndef sample(n):\n    labels = n\n"
                "    labels = np.array([k for k in range(n)])\n    labels = torch.cuda.LongTensor(labels)\n"
                "    return labels\n",
                "import torch\nimport numpy as np\ndef sample(n):\n" + DEVICE + "    labels = n\n"
                "    labels = np.array([k for k in range(n)])\n"
                "    labels = torch.tensor(labels, dtype=torch.int64, device=device)\n    return labels\n"),
        # ... not in a loop that rebinds it later: the second time round it is something
        # else (either, then: the CPU type's constructor)
        Example("import torch\ndef f(xs):\n    n = 3\n    for x in xs:\n        y = torch.cuda.FloatTensor(n)\n"
                "        n = x\n",
                "import torch\ndef f(xs):\n" + DEVICE + "    n = 3\n    for x in xs:\n"
                "        y = torch.FloatTensor(n).to(device)\n        n = x\n"),
        # the type by its name
        Example("import torch\ndef half(x):\n    return x.type('torch.cuda.HalfTensor')\n",
                "import torch\ndef half(x):\n" + DEVICE + "    return x.to(device, torch.float16)\n"),
        # a CUDA default tensor type: a default dtype and a default device (unsafe)
        Example("import torch\nif __name__ == '__main__':\n    torch.set_default_tensor_type('torch.cuda.FloatTensor')\n"
                "    print(torch.zeros(2))\n",
                "import torch\nif __name__ == '__main__':\n"
                "    device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
                "    torch.set_default_dtype(torch.float32)\n"
                "    torch.set_default_device(device)\n    print(torch.zeros(2))\n"),
        # ... under `if torch.cuda.is_available():` CUDA itself, with no definition (DeepXDE's backend)
        Example("import torch\nif torch.cuda.is_available():\n"
                "    torch.set_default_tensor_type(torch.cuda.FloatTensor)\n",
                "import torch\nif torch.cuda.is_available():\n    torch.set_default_dtype(torch.float32)\n"
                "    torch.set_default_device(\"cuda\")\n"),
        # ... chosen on a flag: the device chosen on it
        Example("import torch\nif __name__ == '__main__':\n    cuda = not no_cuda\n"
                "    torch.set_default_tensor_type(torch.cuda.FloatTensor if cuda else torch.FloatTensor)\n"
                "    print(torch.zeros(2))\n",
                "import torch\nif __name__ == '__main__':\n"
                "    device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
                "    cuda = not no_cuda\n    torch.set_default_dtype(torch.float32)\n"
                "    torch.set_default_device(device if cuda else \"cpu\")\n    print(torch.zeros(2))\n"),
        # ... and `torch.Tensor(...)`, which followed the type and not a device, a factory
        Example("import torch\ndef setup():\n    torch.set_default_tensor_type(torch.cuda.DoubleTensor)\n"
                "    return torch.Tensor([0.1, 0.2]), torch.Tensor(3, 4)\n",
                "import torch\ndef setup():\n    torch.set_default_dtype(torch.float64)\n"
                "    torch.set_default_device(\"cuda\")\n"
                "    return torch.tensor([0.1, 0.2], dtype=torch.float64), torch.empty(3, 4)\n"),
        # ... display-only where its argument may be a size or data
        Example("import torch\ndef setup(n):\n    torch.set_default_tensor_type(torch.cuda.DoubleTensor)\n"
                "    return torch.Tensor(n)\n"),
        # ... and where the script imports its own modules, whose `torch.Tensor(...)` it
        # cannot see (SSD's prior boxes): display-only until the whole run shows none
        Example("import torch\nfrom layers.functions import PriorBox\nif __name__ == '__main__':\n"
                "    torch.set_default_tensor_type('torch.cuda.FloatTensor')\n    print(PriorBox().forward())\n"),
        # inside `forward`: the input's device with --unsafe-fixes (the module then runs on a CPU)
        Example("import torch\nimport torch.nn as nn\nclass Drop(nn.Module):\n    def forward(self, x):\n"
                "        keep = torch.cuda.FloatTensor(len(x), 1).uniform_() > 0.5\n        return x * keep\n",
                "import torch\nimport torch.nn as nn\nclass Drop(nn.Module):\n    def forward(self, x):\n"
                "        keep = torch.empty(len(x), 1, dtype=torch.float32, device=x.device).uniform_() > 0.5\n"
                "        return x * keep\n"),
        # ... not where it converts that very input (`x.to(x.device)` would move nothing):
        # the function's own device
        Example("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n    def forward(self, x):\n"
                "        x = x.type(torch.cuda.FloatTensor)\n        return self.body(x)\n",
                "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n    def forward(self, x):\n"
                '        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "        x = x.to(device, torch.float32)\n        return self.body(x)\n"),
        # the alias idiom in a script: the same choice, as a device (safe)
        Example("import torch\nimport numpy as np\ncuda = torch.cuda.is_available()\n"
                "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
                "for x in batches:\n    z = Tensor(np.ones(3))\n    y = Tensor(4, 2).fill_(1)\n"
                "    w = x.type(Tensor)\n",
                'import torch\nimport numpy as np\ncuda = torch.cuda.is_available()\n'
                'device = torch.device("cuda" if cuda else "cpu")\n'
                "for x in batches:\n    z = torch.tensor(np.ones(3), dtype=torch.float32, device=device)\n"
                "    y = torch.empty(4, 2, dtype=torch.float32, device=device).fill_(1)\n"
                "    w = x.to(device, torch.float32)\n"),
        # ... with an alias of the alias (the DQN tutorial of 2017: `Tensor = FloatTensor`), which goes too
        Example("import torch\nuse_cuda = torch.cuda.is_available()\n"
                "FloatTensor = torch.cuda.FloatTensor if use_cuda else torch.FloatTensor\nTensor = FloatTensor\n"
                "state = torch.randn(1, 4).type(Tensor)\nreward = Tensor([0.5])\n",
                "import torch\nuse_cuda = torch.cuda.is_available()\n"
                'device = torch.device("cuda" if use_cuda else "cpu")\n'
                "state = torch.randn(1, 4).to(device, torch.float32)\n"
                "reward = torch.tensor([0.5], dtype=torch.float32, device=device)\n"),
        # an unconditional CUDA alias in a script: `fix` makes it `torch.device("cuda")`
        # (the same choice); `--unsafe-fixes` gives it the CPU fallback
        Example("import torch\nimport numpy as np\nTensor = torch.cuda.FloatTensor\n"
                "for x in batches:\n    z = Tensor(np.ones(3))\n",
                'import torch\nimport numpy as np\n'
                'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "for x in batches:\n    z = torch.tensor(np.ones(3), dtype=torch.float32, device=device)\n"),
        # the script already has its device: the alias goes (unsafe: another expression)
        Example("import torch\ndevice = torch.device('cuda:1')\nLong = torch.LongTensor if not cuda else "
                "torch.cuda.LongTensor\nif __name__ == '__main__':\n    print(Long([1, 2]))\n",
                "import torch\ndevice = torch.device('cuda:1')\nif __name__ == '__main__':\n"
                "    print(torch.tensor([1, 2], dtype=torch.int64, device=device))\n"),
        # a library module's public alias: unsafe (importers may use it)
        Example("import torch\nTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n",
                'import torch\ndevice = torch.device("cuda" if cuda else "cpu")\n'),
        # ... an unconditional one used in functions: each defines its device (deep image
        # prior's `dtype = torch.cuda.FloatTensor` in a utility module)
        Example("import torch\n\ndtype = torch.cuda.FloatTensor\n\n\ndef noise(n):\n"
                "    return torch.randn(n).type(dtype)\n\n\ndef ones(n):\n    return dtype(n, 2).fill_(1)\n",
                "import torch\n\n\ndef noise(n):\n" + DEVICE + "    return torch.randn(n).to(device, torch.float32)\n"
                "\n\ndef ones(n):\n" + DEVICE
                + "    return torch.empty(n, 2, dtype=torch.float32, device=device).fill_(1)\n"),
        # a module's `.type`: `.to` keeps its integer buffers integers (unsafe)
        Example("import torch\nnet = torch.nn.BatchNorm1d(4).type(torch.cuda.FloatTensor)\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "net = torch.nn.BatchNorm1d(4).to(device, torch.float32)\n"),
        # two functions, an alias each under the same name (YOLOv3's layer: on a flag, on
        # the input's `.is_cuda`): each is its own, and neither is the other's use
        Example("import torch\n\n\ndef grid(g, cuda):\n    T = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
                "    return torch.arange(g).type(T)\n\n\ndef boxes(x):\n"
                "    T = torch.cuda.FloatTensor if x.is_cuda else torch.FloatTensor\n    return T(x.shape)\n",
                "import torch\n\n\ndef grid(g, cuda):\n"
                '    device = torch.device("cuda" if cuda and torch.cuda.is_available() else "cpu")\n'
                "    return torch.arange(g).to(device, torch.float32)\n\n\ndef boxes(x):\n"
                '    device = torch.device("cuda" if x.is_cuda else "cpu")\n'
                "    return torch.empty(x.shape, dtype=torch.float32, device=device)\n"),
        # ... and a module's alias is not read where a function has its own of that name
        Example("import torch\nT = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n\n\ndef f(n):\n"
                "    return T(n, 2)\n\n\ndef g(T):\n    return T\n",
                'import torch\ndevice = torch.device("cuda" if cuda else "cpu")\n\n\n'
                "def f(n):\n    return torch.empty(n, 2, dtype=torch.float32, device=device)\n\n\ndef g(T):\n"
                "    return T\n"),
        # an attribute alias: its uses may be anywhere (display)
        Example("import torch\nclass Model:\n    def __init__(self, gpu_ids):\n"
                "        self.Tensor = torch.cuda.FloatTensor if gpu_ids else torch.Tensor\n"),
        # an argument that may be a size or data: the CPU type's constructor, moved
        Example("import torch\nT = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nfor n in ns:\n"
                "    x = T(n)\n",
                'import torch\ndevice = torch.device("cuda" if cuda and torch.cuda.is_available() else "cpu")\n'
                "for n in ns:\n    x = torch.FloatTensor(n).to(device)\n"),
        # a flag parsed in another file: with `--unsafe-fixes`, CUDA only where there is one
        Example("import torch\nfrom options import opt\n\nTensor = torch.cuda.FloatTensor if opt.cuda else "
                "torch.FloatTensor\n\n\ndef sample(n):\n    return Tensor(n, 100).normal_(0, 1)\n\n\n"
                "if __name__ == '__main__':\n    print(sample(4).shape)\n",
                'import torch\nfrom options import opt\n\ndevice = torch.device("cuda" if opt.cuda and '
                'torch.cuda.is_available() else "cpu")\n\n\ndef sample(n):\n'
                "    return torch.empty(n, 100, dtype=torch.float32, device=device).normal_(0, 1)\n\n\n"
                "if __name__ == '__main__':\n    print(sample(4).shape)\n"),
        # unpacked arguments: the CPU type unpacks them as the CUDA type did
        Example("import torch\nT = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nfor s in shapes:\n"
                "    x = T(*s)\n",
                'import torch\ndevice = torch.device("cuda" if cuda and torch.cuda.is_available() else "cpu")\n'
                "for s in shapes:\n    x = torch.FloatTensor(*s).to(device)\n"),
        # the device the guard tests (neural-style's ModelParallel): the chunk's, not the current one
        Example("import torch\n\n\nclass Split:\n    def c(self, x, i):\n"
                "        if x.type() == 'torch.FloatTensor' and 'cuda' in self.device_list[i]:\n"
                "            x = x.type('torch.cuda.FloatTensor')\n        return x\n",
                "import torch\n\n\nclass Split:\n    def c(self, x, i):\n"
                "        if x.type() == 'torch.FloatTensor' and 'cuda' in self.device_list[i]:\n"
                "            x = x.to(self.device_list[i], torch.float32)\n        return x\n"),
        # ... not a list of backends that holds "cuda"
        Example("import torch\n\n\ndef c(x, backends):\n    if 'cuda' in backends:\n"
                "        x = x.type('torch.cuda.FloatTensor')\n    return x\n",
                "import torch\n\n\ndef c(x, backends):\n"
                "    device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
                "    if 'cuda' in backends:\n        x = x.to(device, torch.float32)\n    return x\n"),
        # the alias idiom in a script's main block: the script's top level
        Example("import torch\nif __name__ == '__main__':\n    use_cuda = torch.cuda.is_available()\n"
                "    Tensor = torch.cuda.FloatTensor if use_cuda else torch.FloatTensor\n"
                "    print(Tensor(4, 2).normal_().shape)\n",
                "import torch\nif __name__ == '__main__':\n    use_cuda = torch.cuda.is_available()\n"
                '    device = torch.device("cuda" if use_cuda else "cpu")\n'
                "    print(torch.empty(4, 2, dtype=torch.float32, device=device).normal_().shape)\n"),
        # the statement form of the choice: each binding becomes the device it chooses
        Example("import torch\nif torch.cuda.is_available():\n    dtype = torch.cuda.FloatTensor\nelse:\n"
                "    dtype = torch.FloatTensor\nx = torch.zeros(3).type(dtype)\ny = dtype(2, 2)\n",
                "import torch\nif torch.cuda.is_available():\n    device = torch.device(\"cuda\")\nelse:\n"
                "    device = torch.device(\"cpu\")\nx = torch.zeros(3).to(device, torch.float32)\n"
                "y = torch.empty(2, 2, dtype=torch.float32, device=device)\n"),
        # ... a CPU default that a branch rebinds, in a function
        Example("import torch\ndef load(a, gpu):\n    T = torch.LongTensor\n    if gpu:\n"
                "        T = torch.cuda.LongTensor\n    return torch.from_numpy(a).type(T)\n",
                "import torch\ndef load(a, gpu):\n    device = torch.device(\"cpu\")\n    if gpu:\n"
                "        device = torch.device(\"cuda\")\n    return torch.from_numpy(a).to(device, torch.int64)\n"),
        # ... where the script already has the device that very choice makes: it takes that one
        Example("import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "if torch.cuda.is_available():\n    print('GPU')\n    dtype = torch.cuda.FloatTensor\nelse:\n"
                "    print('CPU')\n    dtype = torch.FloatTensor\nx = torch.zeros(3).type(dtype)\n",
                "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "if torch.cuda.is_available():\n    print('GPU')\nelse:\n    print('CPU')\n"
                "x = torch.zeros(3).to(device, torch.float32)\n"),
        # ... but not where removing the alias would leave a block empty: a name of its own
        Example("import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "if torch.cuda.is_available():\n    dtype = torch.cuda.FloatTensor\nelse:\n"
                "    dtype = torch.FloatTensor\nx = torch.zeros(3).type(dtype)\n",
                "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "if torch.cuda.is_available():\n    torch_device = torch.device(\"cuda\")\nelse:\n"
                "    torch_device = torch.device(\"cpu\")\nx = torch.zeros(3).to(torch_device, torch.float32)\n"),
        # ... `torch.Tensor` on the CPU side: the default type, `torch.FloatTensor` here
        Example("import torch\nif args.cuda:\n    Tensor = torch.cuda.FloatTensor\nelse:\n    Tensor = torch.Tensor\n"
                "x = Tensor(2, 3)\n",
                "import torch\nif args.cuda:\n    device = torch.device(\"cuda\")\nelse:\n"
                "    device = torch.device(\"cpu\")\nx = torch.empty(2, 3, dtype=torch.float32, device=device)\n"),
        # ... but not where the file changes the default type
        Example("import torch\ntorch.set_default_dtype(torch.float64)\nif args.cuda:\n"
                "    Tensor = torch.cuda.FloatTensor\nelse:\n    Tensor = torch.Tensor\nx = Tensor(2, 3)\n"),
        # ... bound to another dtype in the other branch: display
        Example("import torch\nif half:\n    T = torch.cuda.HalfTensor\nelse:\n    T = torch.FloatTensor\n"
                "x = torch.zeros(3).type(T)\n"),
        # ... in a helper that hands the types back (Social GAN's get_dtypes)
        Example("import torch\ndef get_dtypes(use_gpu):\n    long_dtype = torch.LongTensor\n"
                "    float_dtype = torch.FloatTensor\n    if use_gpu == 1:\n"
                "        long_dtype = torch.cuda.LongTensor\n"
                "        float_dtype = torch.cuda.FloatTensor\n    return long_dtype, float_dtype\n"),
        # ... unpacked beside the device the option names (neural-style's setup_gpu)
        Example("import torch\ndef setup_gpu(gpu):\n    if gpu != 'c':\n"
                "        dtype, backward_device = torch.cuda.FloatTensor, 'cuda:' + str(gpu)\n    else:\n"
                "        dtype, backward_device = torch.FloatTensor, 'cpu'\n    return dtype, backward_device\n"),
        # used otherwise, or with named arguments: display
        Example("import torch\nT = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nmake(T)\n"),
        Example("import torch\nT = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nfor kw in shapes:\n"
                "    x = T(**kw)\n"),
        Example("import torch\nT = torch.cuda.FloatTensor if cuda else torch.DoubleTensor\nfor n in ns:\n"
                "    x = T(2)\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        sites = a.devices.legacy_types
        anchor = min((s.order for s, _, _ in sites), default=0)
        for site, kind, dtype in sites:
            type_name = a.code(site.node.func if kind == "call" else site.node.args[0].value)
            # under `if torch.cuda.is_available():` it cannot fail (DeepXDE's default for older torch)
            fails = " and fails without CUDA" if a.devices.cuda_assured(site) is None else ""
            if kind == "default":
                message = (f"`{type_name}` as the default tensor type makes every factory call allocate on "
                           f"the implicit current device{fails and ','}{fails}; use "
                           f"`torch.set_default_dtype(torch.{dtype})` with an explicit device")
                yield ctx.violation(site.node, message, self._default_fix(ctx, site, dtype, anchor))
                continue
            message = (f"`{type_name}` allocates on the implicit current device{fails}; "
                       f"use `dtype=torch.{dtype}` with an explicit `device=`")
            chosen = site.keyword("device") if kind == "call" else None
            if chosen is not None and not (isinstance(chosen.value, cst.Name) and chosen.value.value == "None"):
                message = (f"`{type_name}` is a legacy CUDA type: it fails without CUDA whatever its `device=` "
                           f"names; use `torch.empty`/`torch.tensor` with `dtype=torch.{dtype}` and that `device=`")
            fix = self._fix(ctx, site, kind, dtype, anchor)
            yield ctx.violation(site.node, message, _unless_tensor(a, [site], fix) if kind == "type" else fix)
        yield from self._aliases(ctx)

    def _aliases(self, ctx: Context) -> Iterable[Violation]:
        """Aliases assigned at the top level of the module or of a function body."""
        a = ctx.analysis
        scopes = [a.module_scope] + [f.scope for f in a.functions.values() if isinstance(f.node, cst.FunctionDef)]
        for scope in scopes:
            body = scope.node.body if scope.kind == "module" else getattr(scope.node.body, "body", ())
            for stmt in _with_main_guard(body):
                if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                        and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1
                        and isinstance(stmt.body[0].targets[0].target, (cst.Name, cst.Attribute))):
                    continue
                value = stmt.body[0].value
                legacy = [o for o in _sides(value) if a.qualname(o, scope) in LEGACY]
                if not legacy:
                    continue
                dtype = LEGACY[a.qualname(legacy[0], scope)]  # type: ignore[index]
                node = stmt.body[0].targets[0].target
                target = a.code(node)
                message = (f"`{target}` aliases a legacy CUDA tensor type: every `{target}(...)` allocates on "
                           "the implicit current device and fails without CUDA")
                if isinstance(node, cst.Attribute):  # `self.Tensor = ...`: its uses are anyone's
                    yield ctx.violation(value, message, Fix(Applicability.DISPLAY, (
                        f"Keep a dtype (`torch.{dtype}`) and a device instead, and allocate with "
                        f"`torch.empty(..., dtype=..., device=...)` where `{target}(...)` is called (an "
                        "attribute's uses are not all in sight: not rewritten)")))
                    continue
                yield ctx.violation(value, message, self._alias_fix(ctx, scope, stmt, target, dtype))
            yield from self._branch_aliases(ctx, scope, body)

    def _branch_aliases(self, ctx: Context, scope, body) -> Iterable[Violation]:
        """The aliases the idiom above leaves: bound in a branch (`if cuda:` `dtype =
        torch.cuda.FloatTensor`, `else:` `dtype = torch.FloatTensor`: the statement form of
        the conditional expression), or by unpacking (neural-style's `dtype,
        backward_device = torch.cuda.FloatTensor, "cuda:" + str(params.gpu)`), often handed
        back to a caller (Social GAN's `get_dtypes`). Reported where the CUDA type is
        bound; the statement form is rewritten as a whole (``_branch_fix``), an unpacking
        is display only."""
        a = ctx.analysis
        lines = list(_alias_lines(_with_main_guard(body)))
        for line, nested, _ in lines:
            for small in line.body:
                if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                    continue
                target, value = small.targets[0].target, small.value
                if isinstance(target, (cst.Tuple, cst.List)):
                    if not (isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements)
                            and not any(isinstance(e, cst.StarredElement) for e in (*target.elements,
                                                                                     *value.elements))):
                        continue
                    pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
                elif nested:
                    pairs = [(target, value)]
                else:
                    continue  # a top-level alias: the idiom above
                for name, bound in pairs:
                    legacy = [o for o in _sides(bound) if a.qualname(o, scope) in LEGACY]
                    if not isinstance(name, (cst.Name, cst.Attribute)) or not legacy:
                        continue
                    dtype = LEGACY[a.qualname(legacy[0], scope)]  # type: ignore[index]
                    alias = a.code(name)
                    beside = next(((a.code(t), a.code(v)) for t, v in pairs
                                   if t is not name and isinstance(t, (cst.Name, cst.Attribute))
                                   and _names_device(a, v, scope)), None)
                    message = (f"`{alias}` aliases a legacy CUDA tensor type: every `{alias}(...)` and "
                               f"`.type({alias})` puts its tensor on the implicit current device (cuda:0 unless "
                               "something set it)")
                    if len(pairs) > 1 or isinstance(target, (cst.Tuple, cst.List)):
                        why = "an alias bound by unpacking is not rewritten"
                    elif isinstance(name, cst.Attribute):
                        why = "an attribute's uses are not all in sight: not rewritten"
                    else:
                        fix = self._branch_fix(ctx, scope, body, lines, alias, dtype)
                        if isinstance(fix, Fix):
                            yield ctx.violation(bound, message, fix)
                            continue
                        why = f"not rewritten: {fix}"
                    if beside is not None:
                        message += f", not on `{beside[0]}` (`{beside[1]}`), which this statement binds beside it"
                        hint = (f"Use `{beside[0]}` as the device: keep `torch.{dtype}` as a dtype, allocate with "
                                f"`torch.empty(..., dtype=torch.{dtype}, device={beside[0]})` and convert with "
                                f"`.to({beside[0]}, torch.{dtype})`")
                    else:
                        hint = (f"Keep a device instead (`torch.device(\"cuda\")` where the CUDA type is chosen, "
                                f"`torch.device(\"cpu\")` where the CPU one is), allocate with `torch.empty(..., "
                                f"dtype=torch.{dtype}, device=device)` and convert with `.to(device, torch.{dtype})`")
                    yield ctx.violation(bound, message, Fix(Applicability.DISPLAY, f"{hint} (display only: {why})"))

    def _branch_fix(self, ctx: Context, scope, body, lines, target: str, dtype: str) -> Union[Fix, str]:
        """The statement form of the idiom rewritten as a whole: every binding of the
        alias in its scope, each a line of its own binding a legacy CUDA type or its CPU
        twin (`if use_cuda:` `dtype = torch.cuda.FloatTensor` `else:` `dtype =
        torch.FloatTensor`; or a CPU default that a branch rebinds), becomes the device it
        chooses (`device = torch.device("cuda")`, `torch.device("cpu")`: the same choice,
        made at the same point), and every use as in the idiom. Or why it is not."""
        a = ctx.analysis
        bindings = scope.bindings.get(target, ())
        torch = a.torch_name_at(scope, min(b.order for b in bindings)) if bindings else None
        if torch is None:
            return "`torch` is not imported unconditionally"
        if target in scope.declared:
            return f"`{target}` is declared `global` or `nonlocal`"
        assigned = {id(small.value): (line, small, block) for line, _, block in lines for small in line.body
                    if isinstance(small, cst.Assign)}
        found, devices = [], []  # each binding's (line, assignment, block), and the device it chooses
        for b in bindings:
            line, assign, block = assigned.get(id(b.value), (None,) * 3) if b.kind == "assign" else (None,) * 3
            if (not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or len(assign.targets) != 1
                    or not isinstance(assign.targets[0].target, cst.Name)):
                return f"`{target}` is also bound otherwise"
            device = _alias_device(a, scope, assign.value, dtype, torch)
            if device is None:
                return f"`{target}` is also bound to something other than `torch.{_TWINS[dtype]}` or its CUDA twin"
            found.append((line, assign, block))
            devices.append(device)
        if sum(1 for _, assign, _ in found for o in _sides(assign.value) if a.qualname(o, scope) in LEGACY) != 1:
            return f"`{target}` is bound to a CUDA type more than once"
        uses, other, chained = _alias_uses(a, scope, target, [assign.targets[0].target for _, assign, _ in found])
        if other is not None:
            return f"`{target}` is also used otherwise on line {ctx.start(other)[0]}"
        # a device the code has (or another alias's fix made), where removing each alias
        # line leaves its block a statement
        name = (_same_choice(a, scope, bindings, devices) or _defined_choice(a, scope, body, bindings, devices, torch)
                if all(len(block) > 1 for _, _, block in found) else None)
        if name is not None:  # the alias just goes
            gone = [ctx.remove_lines(line) for line, _, _ in found]
            if None in gone:
                return f"a binding of `{target}` shares its line with other code"
            edits = [e for e in gone if e is not None]
            head = f"Remove the alias: `{name}` makes the same choice"
        else:
            name = a.free_name(a.device_name, within=scope.node if scope.kind == "function" else None)
            edits = [Edit((r.start.line, r.start.column), (r.end.line, r.end.column), f"{name} = {device}",
                          a.code(assign)) for (_, assign, _), device in zip(found, devices) for r in (a.range(assign),)]
            head = (f"Replace the alias by `{name}`, bound where the alias is (`{torch}.device(\"cuda\")` for the "
                    f"CUDA type, `\"cpu\"` for its CPU twin)")
        used = _rewrite_uses(ctx, torch, dtype, target, uses, chained, lambda site: name)
        if isinstance(used, str):
            return used
        why = (f"other modules may import `{target}`: this file looks like a library module"
               if scope.kind == "module" and not a.devices.is_script and not target.startswith("_")
               else _module_caveat(a, [site for site, kind in uses if kind == "type"]))
        message = f"{head}, and pass `dtype={torch}.{dtype}, device={name}` where it is used" + (
            f" ({why})" if why else "")
        return ctx.guarded(Fix(Applicability.UNSAFE if why else Applicability.SAFE, message,
                               tuple(edits) + tuple(used), frozenset({name})))

    def _alias_fix(self, ctx: Context, scope, stmt: cst.SimpleStatementLine, target: str, dtype: str) -> Fix:
        """The alias idiom as a whole: the alias becomes a device with the same choice
        (`torch.device("cuda" if cuda else "cpu")`), each `Tensor(...)` a factory call
        with `dtype=` and that device, each `.type(Tensor)` a `.to(device, dtype)`. One
        fix for the group: all of it or nothing."""
        a = ctx.analysis
        torch = a.torch_name_at(scope, scope.bindings[target][0].order)
        hint = (f"Replace the alias by a device (`torch.device(\"cuda\" if ... else \"cpu\")`) and allocate with "
                f"`torch.empty(..., dtype=torch.{dtype}, device=device)` / `torch.tensor(data, dtype=torch.{dtype}, "
                "device=device)`")

        def display(why: str) -> Fix:
            return Fix(Applicability.DISPLAY, f"{hint} ({why})")

        choice = _alias_device(a, scope, stmt.body[0].value, dtype, torch)  # type: ignore[attr-defined]
        if torch is None or choice is None:
            return display("the alias does not choose between a CUDA type and its CPU twin" if torch else
                           "`torch` is not imported unconditionally")
        if len(scope.bindings.get(target, ())) != 1 or target in scope.declared:
            return display(f"`{target}` is bound more than once")
        uses, other, chained = _alias_uses(a, scope, target, [stmt.body[0].targets[0].target])  # type: ignore[attr-defined]
        if other is not None:
            return display(f"`{target}` is also used otherwise on line {ctx.start(other)[0]}")
        library = scope.kind == "module" and not a.devices.is_script  # the alias is a public name

        def rewritten(device_of) -> Union[List[Edit], Fix]:
            used = _rewrite_uses(ctx, torch, dtype, target, uses, chained, device_of)  # type: ignore[arg-type]
            return display(used) if isinstance(used, str) else used

        def removal() -> Union[Edit, Fix]:
            gone = ctx.remove_lines(stmt)
            return display("the alias shares its line with other code") if gone is None else gone

        def build(choice: str) -> Fix:
            name, head, why = _alias_definition(a, scope, stmt, choice)
            first = head if head is not None else removal()  # the same device is already defined: the alias goes
            used = rewritten(lambda site: name)
            if isinstance(first, Fix):
                return first
            if isinstance(used, Fix):
                return used
            if library and not target.startswith("_"):
                why = why or f"other modules may import `{target}`: this file looks like a library module"
            why = why or _module_caveat(a, [site for site, kind in uses if kind == "type"])
            message = (f"Replace the alias by `{name}` and pass `dtype={torch}.{dtype}, device={name}` where it is used"
                       + (f" ({why})" if why else ""))
            return Fix(Applicability.UNSAFE if why else Applicability.SAFE, message, (first, *used), frozenset({name}))

        def build_local() -> Optional[Fix]:
            """A library's alias of the CUDA type used only in functions: each function
            defines its device with the CPU fallback where it runs (TDL001's line there),
            and the alias goes; None where a use is not in a function that can."""
            definitions: List[Edit] = []
            names = {}
            for site, _ in uses:
                name, edits, _why = ctx.local_device_definition(site)
                if name is None:
                    return None
                names[site.node] = name
                definitions += [e for e in edits if e not in definitions]
            used = rewritten(lambda site: names[site.node])
            gone = removal()
            if isinstance(used, Fix) or isinstance(gone, Fix):
                return None
            return Fix(Applicability.UNSAFE, (
                f"Remove the alias; each function that uses it defines its device (falls back to the CPU) and passes "
                f"`dtype={torch}.{dtype}, device=...` (other modules may import `{target}`: this file looks like a "
                "library module)"), tuple(definitions) + (gone,) + tuple(used))

        exact = build(choice)
        fallback = f'{torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")'
        if library and uses and exact.applicability is not Applicability.DISPLAY \
                and _squash(choice) == _squash(f'{torch}.device("cuda")'):
            local = build_local()  # no definition at import: the functions ask when they run
            if local is not None:
                return ctx.guarded(local)
        flagged = _flag_fallback(a, scope, stmt.body[0].value, torch)  # type: ignore[attr-defined]
        if flagged is not None and exact.applicability is not Applicability.DISPLAY and not library:
            # the alias follows a flag set elsewhere (`Tensor = torch.cuda.FloatTensor if opt.cuda else ...`):
            # `--unsafe-fixes` makes its device fall back to the CPU too, where the flag asks for CUDA
            unsafe = build(_alias_device(a, scope, flagged, dtype, torch))  # type: ignore[arg-type]
            if unsafe.applicability is not Applicability.DISPLAY and unsafe.edits != exact.edits:
                return ctx.guarded(Fix(Applicability.UNSAFE, unsafe.message + " (the device falls back to the CPU "
                                       "where the flag asks for CUDA and there is none)", unsafe.edits,
                                       unsafe.defines, safe=exact if exact.applicability is Applicability.SAFE
                                       else None))
        if (exact.applicability is Applicability.DISPLAY or _squash(choice) != _squash(f'{torch}.device("cuda")')
                or library or a.process.env_writes):
            return ctx.guarded(exact)
        # an unconditional CUDA alias in a script (or a function): `--unsafe-fixes` makes
        # the device fall back to the CPU, as a definition where the script starts does
        unsafe = build(fallback)
        if unsafe.applicability is Applicability.DISPLAY or unsafe.edits == exact.edits:
            return ctx.guarded(exact)
        return ctx.guarded(Fix(Applicability.UNSAFE, unsafe.message + " (the device falls back to the CPU)",
                               unsafe.edits, unsafe.defines, safe=exact if exact.applicability is
                               Applicability.SAFE else None))

    def _fix(self, ctx: Context, site: CallSite, kind: str, dtype: str, anchor: int) -> Fix:
        a = ctx.analysis
        torch = a.torch_name_at(site.scope, site.order) or a.torch_named_in(site.node, site.scope)
        if torch is None:
            return Fix(Applicability.DISPLAY, f"Use `dtype=torch.{dtype}` and an explicit `device=`")
        named = _named_device(site) if kind == "call" else None
        if named is not None:  # torch.cuda.LongTensor(size, device=d): d's device, as named
            return self._on_named_device(ctx, site, dtype, torch, named)
        args = _constructor(a, site) if kind != "type" else ("", "")
        either = _either(a, site) if args is None else None
        if args is None and either is None:
            return Fix(Applicability.DISPLAY, (
                f"Use `torch.empty(size, dtype=torch.{dtype}, device=...)` for sizes or "
                f"`torch.tensor(data, dtype=torch.{dtype}, device=...)` for data (its arguments "
                "are unpacked or named)"))

        def rewrite(device: str) -> Tuple[Edit, str]:
            if kind == "type":
                return (ctx.rename_call(site.node, "to", [cst.Arg(cst.parse_expression(device)),
                                                          cst.Arg(cst.parse_expression(f"{torch}.{dtype}"))]),
                        f"`.to({device}, {torch}.{dtype})`")
            if either is not None:  # a size or data: the CPU twin takes either, as the CUDA type did
                twin = f"{torch}.{_TWINS[dtype]}"
                return (ctx.replace(site.node, f"{twin}({either}).to({device})"),
                        f"`{twin}(...).to({device})` (the argument may be a size or data: the CPU type "
                        "takes either, as the CUDA type did)")
            factory, head = args
            text = f"{torch}.{factory}({head}{', ' if head else ''}dtype={torch}.{dtype}, device={device})"
            return ctx.replace(site.node, text), f"`{torch}.{factory}(..., dtype={torch}.{dtype}, device={device})`"

        def keeps_cuda() -> Fix:  # what `fix` alone does beside a device that may not be the current one
            exact, same = rewrite('"cuda"')
            return Fix(Applicability.SAFE, f"Use {same} (the current device, as the CUDA type used)", (exact,))

        chosen = a.devices.chosen_device(site)
        forward = a.devices.forward_input(site) if chosen is None else None
        # (not where the call converts a tensor, `.type(T)` or `T(x.cuda())`: its target is the GPU,
        # not where the input is)
        allocates = kind != "type" and (args is None or args[0] != "as_tensor")
        held = (a.devices.input_device(site, made_of=site.node)
                if chosen is None and forward is None and allocates else None)
        if forward is not None or held is not None:  # inside `forward`, or beside an input whose device is
            # at hand (Tacotron's get_mask_from_lengths): the input's device (unsafe); `fix` alone keeps "cuda"
            code, why = ((forward.code, forward.why) if forward is not None
                         else (f"{held}.device", f"the input `{held}`"))
            edit, what = rewrite(code)
            return ctx.guarded(Fix(
                Applicability.UNSAFE, f"Use {what} ({why} may not be on the current device)", (edit,),
                safe=keeps_cuda()))
        device, edits, applicability, why = self._device(ctx, site, anchor)
        defined = bool(edits)  # a definition where the script starts: `fix` alone makes it exact
        edit, what = rewrite(device)
        message = f"Use {what}" + (f" ({why})" if why else "")
        local, local_edits, local_why = (ctx.local_device_definition(site) if device == '"cuda"'
                                         and a.devices.entry_point(anchor) is None else (None, [], ""))
        if local is not None:  # a library module: the function's own device (unsafe); `fix` alone keeps "cuda"
            moved, where = rewrite(local)
            return ctx.guarded(Fix(Applicability.UNSAFE, f"Use {where} ({local_why})", tuple(local_edits) + (moved,),
                                   safe=Fix(Applicability.SAFE, message, (edit,))))
        if defined:
            return ctx.guarded(ctx.defined_device_fix(
                applicability, message, f'Use {what} (`{device} = torch.device("cuda")` defined where the script '
                "starts: the current device, as the CUDA type used)", edits, anchor, (edit,), device))
        if applicability is Applicability.UNSAFE and not edits:  # the code's own device, maybe not the
            # current one (`if "cuda" in self.device_list[i]:`): `fix` alone keeps "cuda"
            return ctx.guarded(Fix(applicability, message, (edit,), safe=keeps_cuda()))
        return ctx.guarded(Fix(applicability, message, tuple(edits) + (edit,)))

    def _on_named_device(self, ctx: Context, site: CallSite, dtype: str, torch: str, device: cst.Arg) -> Fix:
        """``torch.cuda.LongTensor(size, device=d)`` -> ``torch.empty(size, dtype=torch.int64,
        device=d)`` (allennlp's ``get_range_vector``): the device the call names, the
        factory its other arguments call for. Unsafe: where ``d`` names the CPU the legacy
        type raised, and the factory allocates there."""
        a = ctx.analysis
        positional = [arg for arg in site.node.args if arg is not device]  # (none unpacked or named)
        args = _constructor(a, site, positional)
        if args is None:  # a size or data (one argument, or unpacked): the CPU twin takes either, as the CUDA type did
            either, twin = _either(a, site, positional), f"{torch}.{_TWINS[dtype]}"
            return ctx.guarded(Fix(Applicability.UNSAFE, f"Use `{twin}(...).to(...)` with the device it names (the "
                                   "argument may be a size or data: the CPU type takes either)",
                                   (ctx.replace(site.node, f"{twin}({either}).to({a.code(device.value)})"),)))
        factory, head = args
        text = f"{torch}.{factory}({head}{', ' if head else ''}dtype={torch}.{dtype}, device={a.code(device.value)})"
        return ctx.guarded(Fix(Applicability.UNSAFE, f"Use `{torch}.{factory}(..., dtype={torch}.{dtype}, device="
                               f"{a.code(device.value)})` (where it names the CPU, the legacy type raised)",
                               (ctx.replace(site.node, text),)))

    def _default_fix(self, ctx: Context, site: CallSite, dtype: str, anchor: int) -> Fix:
        """``set_default_tensor_type(torch.cuda.FloatTensor)`` -> ``set_default_dtype(torch.float32)``
        and ``set_default_device(<device>)``, on two lines. Always unsafe: the legacy
        constructor ``torch.Tensor(...)`` followed the default tensor type and does not
        follow a default device: this module's become factories that do (display-only
        where one's argument may be a size or data)."""
        a = ctx.analysis
        torch = a.torch_name_at(site.scope, site.order) or a.torch_named_in(site.node, site.scope)
        hint = f"Use `torch.set_default_dtype(torch.{dtype})` and `torch.set_default_device(device)`"
        line = site.line
        if torch is None or site.expr_stmt is None or line is None or len(line.body) != 1:
            return Fix(Applicability.DISPLAY, f"{hint} (not a statement of its own)")
        followers = []  # `torch.Tensor(...)` followed the type; a factory follows the default device
        for follower in (s for s in a.calls if s.qualname == "torch.Tensor"):
            args = _constructor(a, follower)
            name = a.torch_name_at(follower.scope, follower.order)
            if args is None or name is None:  # it would stay on the CPU after the rewrite: a device mismatch
                return Fix(Applicability.DISPLAY, f"{hint}, and give `torch.Tensor(...)` (line "
                           f"{ctx.start(follower.node)[0]}) a device: it follows the default type, not a default "
                           "device (its argument may be a size or data)")
            factory, lead = args
            followers.append(ctx.replace(follower.node, f"{name}.empty({lead})" if factory == "empty"
                                         else f"{name}.tensor({lead}, dtype={name}.{dtype})"))
        elsewhere = _constructors_elsewhere(a, hint)
        if elsewhere is not None:
            return elsewhere
        assured = a.devices.cuda_assured(site)
        if assured and a.devices.chosen_device(site) is None:  # DeepXDE's backend: no definition to add
            device, edits, why = '"cuda"', [], f"`{assured}` makes it CUDA here"
        else:
            device, edits, _, why = self._device(ctx, site, anchor)
        chosen = site.node.args[0].value
        if isinstance(chosen, cst.IfExp):  # the type chosen on a flag: the device chosen on it
            test = a.code(chosen.test)
            device = (f'{device} if {test} else "cpu"' if a.devices.type_named(chosen.body, site) in LEGACY
                      else f'"cpu" if {test} else {device}')
        row, col = ctx.start(line)
        indent = a.lines[row - 1][:col]
        text = (f"{torch}.set_default_dtype({torch}.{dtype}){a.module.default_newline}"
                f"{indent}{torch}.set_default_device({device})")
        reasons = "; ".join(r for r in (why, "`torch.Tensor(n)`-style constructors do not follow a default "
                                        "device as they followed the default type") if r)
        hint = f"Use `{torch}.set_default_dtype({torch}.{dtype})` and `{torch}.set_default_device({device})`"
        if followers:
            hint += f", and `torch.empty`/`torch.tensor` for the {len(followers)} `torch.Tensor(...)` of this module"
        defines = frozenset({device}) if edits else frozenset()
        return ctx.guarded(Fix(Applicability.UNSAFE, f"{hint} ({reasons})",
                               tuple(edits) + (ctx.replace(site.node, text),) + tuple(followers), defines))

    def _device(self, ctx: Context, site: CallSite, anchor: int) -> Tuple[str, List[Edit], Applicability, str]:
        """The device the rewrite names: the one in scope; else a definition where the
        script starts (CPU fallback: unsafe); else (a library module) "cuda" itself."""
        a = ctx.analysis
        choice = a.devices.chosen_device(site)
        if choice is not None:
            if choice.exact:
                return choice.code, [], Applicability.SAFE, ""
            return choice.code, [], Applicability.UNSAFE, f"{choice.why} may not be the current device"
        name, edits, why = ctx.device_definition(anchor)
        if name is not None:
            assured = a.devices.cuda_assured(site)
            if assured:  # the fallback is never taken here
                return name, edits, Applicability.SAFE, f"a device defined where the script starts; `{assured}` makes it CUDA here"
            return name, edits, Applicability.UNSAFE, why
        return '"cuda"', [], Applicability.SAFE, ""


def _constructors_elsewhere(a, hint: str) -> Optional[Fix]:
    """The default-type rewrite held back (display) while another module of the program
    may call ``torch.Tensor(...)``, which would stay on the CPU beside the others'
    tensors on the GPU: where this file imports one of the program's own modules
    (``project.outside_program``) and the run's index shows such a call (or no index
    tells: a single file, the flake8 plugin; the CLI's whole-run pass looks again).
    None where the rewrite may go ahead."""
    own = sorted({m for m in a.imported_modules if not outside_program(m)})
    if not own:
        return None
    elsewhere = a.project.constructors_elsewhere() if a.project is not None else None
    if elsewhere is None:
        return Fix(Applicability.DISPLAY, f"{hint} once no module of the program calls `torch.Tensor(...)`: it "
                   "follows the default type, not a default device, and this file imports its own modules ("
                   + ", ".join(f"`{m}`" for m in own[:3]) + (", ..." if len(own) > 3 else "")
                   + "; `torchdevlint fix` over the whole program tells)", blocked_by=frozenset({"constructors"}))
    if not elsewhere:
        return None
    (path, line), more = elsewhere[0], len(elsewhere) - 1
    return Fix(Applicability.DISPLAY, f"{hint} once `torch.Tensor(...)` ({path}:{line}"
               + (f", and in {more} more file{'s' * (more > 1)}" if more else "")
               + ") has a device: it follows the default type, not a default device, and would stay on the CPU")


def _alias_device(a, scope, value: cst.BaseExpression, dtype: str, torch: Optional[str]) -> Optional[str]:
    """The device expression that makes the same choice as the alias: `"cuda"` for the
    CUDA type, `"cpu"` for its CPU twin (the same dtype), under the alias's own test."""
    def side(expr: cst.BaseExpression) -> Optional[str]:
        q = a.qualname(expr, scope)
        if q in LEGACY:
            return '"cuda"' if LEGACY[q] == dtype else None
        if q is not None and q.startswith("torch.") and DTYPES.get(q[len("torch."):]) == dtype:
            return '"cpu"'
        if q == "torch.Tensor" and dtype == "float32" and not any(
                site.qualname in _DEFAULT_TYPE_SETTERS for site in a.calls):
            return '"cpu"'  # the default tensor type, `torch.FloatTensor` where the file never changes it
        return None

    if isinstance(value, cst.IfExp):
        body, orelse = side(value.body), side(value.orelse)
        if body is None or orelse is None:
            return None
        return f"{torch}.device({body} if {a.code(value.test)} else {orelse})"
    return f"{torch}.device({side(value)})" if side(value) else None


# what makes `torch.Tensor` another type than `torch.FloatTensor`
_DEFAULT_TYPE_SETTERS = frozenset({"torch.set_default_dtype", "torch.set_default_tensor_type"})


def _flag_fallback(a, scope, value: cst.BaseExpression, torch: Optional[str]) -> Optional[cst.IfExp]:
    """An alias chosen by a flag (``T = torch.cuda.FloatTensor if opt.cuda else
    torch.FloatTensor``, ``... if not args.cpu else ...``: a name or an attribute, not a
    tensor's ``.is_cuda``) that does not itself make CUDA certain (its values in this
    file are not CUDA's availability; the options may be parsed in another file): the
    same choice with the fallback, ``opt.cuda and torch.cuda.is_available()`` when the
    CUDA type is the first branch, ``args.cpu or not torch.cuda.is_available()`` when it
    is the second. None for anything else."""
    if not isinstance(value, cst.IfExp) or torch is None:
        return None
    test = value.test
    flag = test.expression if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) else test
    if not isinstance(flag, (cst.Name, cst.Attribute)) or (isinstance(flag, cst.Attribute)
                                                          and flag.attr.value == "is_cuda"):
        return None
    if a.devices.assures(a.code(test)):
        return None
    available = f"{torch}.cuda.is_available()"
    cuda_first = a.qualname(value.body, scope) in LEGACY
    joined = f"{a.code(test)} and {available}" if cuda_first else f"{a.code(test)} or not {available}"
    return value.with_changes(test=cst.parse_expression(joined))


# how `.to(device, dtype)` differs from `.type(T)` on a module
_INTEGER_BUFFERS = ("`{}` is a module: `.to` keeps its integer buffers (BatchNorm's `num_batches_tracked`) "
                    "integers, where `.type` made them floating point")


def _same_choice(a, scope, bindings, devices: List[str]) -> Optional[str]:
    """A name the scope binds to the very devices an alias's bindings choose, each in
    the same block just before its binding of the alias (what the fix of another alias
    bound in the same branches made); or None."""
    for name, found in scope.bindings.items():
        if len(found) != len(bindings) or name in scope.declared:
            continue
        if all(f.kind == "assign" and f.value is not None and f.cond == b.cond and f.order < b.order
               and _squash(a.code(f.value)) == _squash(device)
               for f, b, device in zip(found, bindings, devices)):
            return name
    return None


def _defined_choice(a, scope, body, bindings, devices: List[str], torch: str) -> Optional[str]:
    """The configured device name where the scope binds it once, unconditionally, before
    an alias's two bindings, to the very choice they make (`device = torch.device("cuda"
    if torch.cuda.is_available() else "cpu")` before `if torch.cuda.is_available():`
    `dtype = torch.cuda.FloatTensor` `else:` `dtype = torch.FloatTensor`); or None."""
    name = a.device_name
    found = scope.bindings.get(name, ())
    if (len(bindings) != 2 or len(found) != 1 or found[0].kind != "assign" or found[0].value is None
            or found[0].cond or found[0].order > bindings[0].order or name in scope.declared):
        return None
    cuda = [i for i, device in enumerate(devices) if '"cuda"' in device]
    if len(cuda) != 1 or not bindings[cuda[0]].cond:
        return None
    cpu, branch = bindings[1 - cuda[0]], bindings[cuda[0]]
    test = _if_test(body, branch.cond[-1][0])
    if test is None or branch.cond[-1][1] != "body" or (cpu.cond != branch.cond[:-1] + ((branch.cond[-1][0], "orelse"),)
                                                         and not (cpu.cond == branch.cond[:-1] and cpu.order < branch.order)):
        return None
    choice = f'{torch}.device("cuda" if {a.code(test)} else "cpu")'
    return name if _same_device(a, a.code(found[0].value), choice) else None


def _if_test(node, wanted: int) -> Optional[cst.BaseExpression]:
    """The test of the ``if`` (or ``elif``) whose id is ``wanted``, in the statements
    ``node`` (a list) or a compound statement holds (not inside a ``def`` or ``class``)."""
    for child in node if isinstance(node, (list, tuple)) else node.children:
        if isinstance(child, cst.If) and id(child) == wanted:
            return child.test
        if isinstance(child, _HOLDERS) and not isinstance(child, (cst.FunctionDef, cst.ClassDef)):
            found = _if_test(child, wanted)
            if found is not None:
                return found
    return None


def _sides(value: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The values an assignment may bind: both sides of a conditional expression."""
    return [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]


def _with_main_guard(body) -> List[cst.CSTNode]:
    """A body's statements, those of its ``if __name__ == "__main__":`` blocks in their
    place: a script's top level, where an alias is the script's for the rest of it."""
    found: List[cst.CSTNode] = []
    for stmt in body:
        if (isinstance(stmt, cst.If) and stmt.orelse is None and _is_main_guard(stmt.test)
                and isinstance(stmt.body, cst.IndentedBlock)):
            found.extend(stmt.body.body)
        else:
            found.append(stmt)
    return found


def _alias_lines(body, nested: bool = False) -> Iterable[Tuple[Union[cst.SimpleStatementLine,
                                                                     cst.SimpleStatementSuite], bool, Sequence]]:
    """The simple statements of a scope's ``body``, each with whether it is nested in a
    compound statement (``if``, ``for``, ``with``, ``try`` ...; not a ``def`` or
    ``class``: scopes of their own) and the statements of its block."""
    for stmt in body:
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            yield stmt, nested, body
        elif not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            for block in _block_lists(stmt):
                yield from _alias_lines(block, True)


def _block_lists(node: cst.CSTNode) -> List[List[cst.CSTNode]]:
    """The statement lists of a compound statement's blocks (its ``elif``s', ``else``'s,
    handlers' and ``finally``'s too), in order."""
    found: List[List[cst.CSTNode]] = []
    for child in node.children:
        if isinstance(child, cst.IndentedBlock):
            found.append(list(child.body))
        elif isinstance(child, cst.SimpleStatementSuite):
            found.append([child])
        elif isinstance(child, _HOLDERS) and not isinstance(child, cst.BaseSuite):
            found.extend(_block_lists(child))
    return found


# what holds statements: compound statements, their blocks and their parts
_HOLDERS = (cst.BaseCompoundStatement, cst.BaseSuite, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler,
            cst.Finally, cst.MatchCase)


# a device written out: "cuda", "cuda:1", "cpu" (alone or as the head of a concatenation
# or an f-string: `"cuda:" + str(gpu)`)
_DEVICE_TEXT = re.compile(r"""^[fFrRuU]?["'](?:cuda|cpu)\b""")


def _names_device(a, value: cst.BaseExpression, scope) -> bool:
    """Whether ``value`` is a device the code writes out: a string that names one (or
    begins an expression that builds one), or ``torch.device(...)``."""
    head = value
    while isinstance(head, cst.BinaryOperation):
        head = head.left
    if isinstance(head, cst.Call) and isinstance(head.func, cst.Attribute) and head.func.attr.value == "format":
        head = head.func.value
    if isinstance(head, cst.Call):
        return a.qualname(head.func, scope) == "torch.device"
    return isinstance(head, (cst.SimpleString, cst.FormattedString)) and bool(_DEVICE_TEXT.match(a.code(head)))


def _module_caveat(a, sites: List[CallSite]) -> str:
    """Why ``x.type(T)`` -> ``x.to(device, dtype)`` changes behaviour: on a module
    ``.type`` casts every buffer, integers too ("" when no receiver is provably a module,
    the run's other files' classes counted: applicability only)."""
    for site in sites:
        receiver = site.node.func.value  # type: ignore[attr-defined]
        if a.torch_kind(receiver, site.scope, use_project=True) == "module":
            return _INTEGER_BUFFERS.format(a.code(receiver))
    return ""


def _unless_tensor(a, sites: List[CallSite], fix: Fix) -> Fix:
    """``fix`` unsafe (without a safe variant) where ``_module_caveat`` applies."""
    caveat = _module_caveat(a, sites) if fix.applicability is not Applicability.DISPLAY else ""
    if not caveat:
        return fix
    return Fix(Applicability.UNSAFE, f"{fix.message} ({caveat})", fix.edits, fix.defines, fix.blocked_by)


def _rewrite_uses(ctx: Context, torch: str, dtype: str, target: str, uses: List[Tuple[CallSite, str]],
                  chained: List[cst.SimpleStatementLine], device_of) -> Union[List[Edit], str]:
    """An alias's uses rewritten, each with the device ``device_of(site)`` names
    (``Tensor(...)`` a factory call with ``dtype=`` and ``device=``, ``x.type(Tensor)`` a
    ``.to(device, dtype)``), and the aliases of the alias removed; or why one cannot be."""
    a = ctx.analysis
    edits: List[Edit] = []
    for chain in chained:  # `Tensor = FloatTensor`: goes with the alias
        gone = ctx.remove_lines(chain)
        if gone is None:
            return f"`{a.code(chain.body[0])}` shares its line with other code"
        edits.append(gone)
    for site, kind in uses:
        name = device_of(site)
        if kind == "type":
            edits.append(ctx.rename_call(site.node, "to", [cst.Arg(cst.parse_expression(name)),
                                                           cst.Arg(cst.parse_expression(f"{torch}.{dtype}"))]))
            continue
        args = _constructor(a, site)
        either = _either(a, site) if args is None else None
        if either is not None:  # a size or data: the CPU twin takes either, as the CUDA type did
            edits.append(ctx.replace(site.node, f"{torch}.{_TWINS[dtype]}({either}).to({name})"))
            continue
        if args is None:
            return f"the arguments of `{target}(...)` on line {ctx.start(site.node)[0]} are unpacked or named"
        factory, lead = args
        edits.append(ctx.replace(site.node, f"{torch}.{factory}({lead}{', ' if lead else ''}"
                                            f"dtype={torch}.{dtype}, device={name})"))
    return edits


def _alias_uses(a, scope, target: str, bound: Sequence[cst.Name]
                ) -> Tuple[List[Tuple[CallSite, str]], Optional[cst.CSTNode], List[cst.SimpleStatementLine]]:
    """The alias's uses, ``Tensor(...)`` ("call") and ``x.type(Tensor)`` ("type"), and
    the first other mention of the name anywhere but its bindings ``bound`` (None when
    there is none).
    An alias of the alias at the top of the same scope, bound once (the DQN tutorial's
    ``Tensor = FloatTensor``), is the same alias: its uses count, and its statement is
    the third answer (the fix removes it)."""
    names, seen, chained = [target], set(bound), []
    body = scope.node.body if scope.kind == "module" else getattr(scope.node.body, "body", ())
    for name in names:  # (grows while it is read: aliases of aliases)
        for stmt in body:
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Name)
                    and small.value.value == name and isinstance(small.targets[0].target, cst.Name)):
                alias = small.targets[0].target.value
                if alias not in names and len(scope.bindings.get(alias, ())) == 1 and alias not in scope.declared:
                    names.append(alias)
                    chained.append(stmt)
                    seen.update((small.value, small.targets[0].target))
    uses: List[Tuple[CallSite, str]] = []
    for site in a.calls:
        func, args = site.node.func, site.node.args
        if isinstance(func, cst.Name) and func.value in names:
            uses.append((site, "call"))
            seen.add(func)
        elif (site.method == "type" and len(args) == 1 and args[0].keyword is None
              and isinstance(args[0].value, cst.Name) and args[0].value.value in names):
            uses.append((site, "type"))
            seen.add(args[0].value)
    # a name of another scope's own (YOLOv3's `FloatTensor = torch.cuda.FloatTensor if
    # x.is_cuda else ...` in two methods) is another alias: neither a use nor a mention
    uses = [(site, kind) for site, kind in uses
            if a.lookup(_used_name(site, kind), site.scope)[0] is scope]
    where = a.module if scope.kind == "module" else scope.node
    return uses, next((n for name in names for n in _names(a, where, name) if n not in seen), None), chained


def _used_name(site: CallSite, kind: str) -> str:
    """The alias's name at a use: ``Tensor(...)``'s callee, ``x.type(Tensor)``'s argument."""
    return (site.node.func if kind == "call" else site.node.args[0].value).value  # type: ignore[attr-defined]


def _names(a, where: cst.CSTNode, target: str) -> List[cst.Name]:
    """The mentions of the name ``target`` in ``where``, but for those in a function
    nested in it that binds the name itself (its own local, not the one of ``where``)."""
    found: List[cst.Name] = []

    class Names(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            info = a.functions.get(node)
            if node is where or info is None or target not in info.scope.bindings or target in info.scope.declared:
                return True
            params = node.params
            for part in (*node.decorators, *(p.default for p in (*params.posonly_params, *params.params,
                                                                 *params.kwonly_params) if p.default)):
                walk(part, self)  # (evaluated outside: mentions of the outer name)
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            walk(node.value, self)  # `torch.LongTensor`'s `LongTensor` is no mention
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            walk(node.value, self)  # nor is a keyword's name
            return False

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == target:
                found.append(node)

    walk(where, Names())
    return found


def _alias_definition(a, scope, stmt: cst.SimpleStatementLine, device: str) -> Tuple[str, Optional[Edit], str]:
    """(name, edit, why unsafe): the device's name, the edit that turns the alias into
    its definition, and "" when that is exact. The alias just goes (edit None) when a
    device is already bound where the alias is: the very same expression under any name
    (the fix of another alias made it), or the script's device under the configured
    name (unsafe unless it is the same expression)."""
    order = scope.bindings[stmt.body[0].targets[0].target.value][0].order  # type: ignore[attr-defined]

    def usable(bindings, owner) -> bool:  # bound once, unconditionally, before the alias
        return (len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None
                and not bindings[0].cond and (owner is not scope or bindings[0].order < order))

    for name, bindings in scope.bindings.items():
        if usable(bindings, scope) and _squash(a.code(bindings[0].value)) == _squash(device):
            return name, None, ""
    preferred = a.device_name
    owner, imported = a.lookup(preferred, scope)
    if owner is not None and imported is None and owner.kind in ("module", "function"):
        bound = owner.bindings[preferred]
        if usable(bound, owner) and a.devices.is_device_value(bound[0].value, owner):
            same = _same_device(a, a.code(bound[0].value), device)
            return preferred, None, "" if same else f"`{preferred}` may not be the device the alias chose"
    name = a.free_name(preferred, within=scope.node if scope.kind == "function" else None)
    assign = stmt.body[0]
    rng = a.range(assign)
    return name, Edit((rng.start.line, rng.start.column), (rng.end.line, rng.end.column),
                      f"{name} = {device}", a.code(assign)), ""


def _same_device(a, one: str, other: str) -> bool:
    """Whether two device expressions are the same choice: the same text, or both
    `torch.device("cuda" if <CUDA's availability> else "cpu")` whatever spells it."""
    if _squash(one) == _squash(other):
        return True
    tests = [re.fullmatch(r'\w+\.device\("cuda"if(.+)else"cpu"\)', _squash(code)) for code in (one, other)]
    return all(m is not None and a.devices.is_availability(m.group(1)) for m in tests)


def _squash(code: str) -> str:
    return "".join(code.split()).replace("'", '"')


# the CPU twin of each legacy CUDA type, by its dtype: `torch.cuda.FloatTensor` -> `FloatTensor`
_TWINS = {dtype: name for name, dtype in DTYPES.items()}


def _named_device(site: CallSite) -> Optional[cst.Arg]:
    """The ``device=`` argument a legacy constructor names (not ``None``), when every other
    argument is positional (``*shape`` included)."""
    device = site.keyword("device")
    if device is None or (isinstance(device.value, cst.Name) and device.value.value == "None"):
        return None
    others = [arg for arg in site.node.args if arg is not device]
    return device if all(arg.keyword is None and arg.star != "**" for arg in others) else None


def _either(a, site: CallSite, args: Optional[Sequence[cst.Arg]] = None) -> Optional[str]:
    """The arguments of a legacy constructor (or its ``args``), as code, when they may be a
    size or data: one that may be either (a loop's variable, a parameter:
    ``torch.cuda.FloatTensor(rewards)``), or unpacked ones (``*shape``, e2cnn's field
    dropout). Its CPU twin takes them either way, with the same meaning. None for a
    keyword or ``**`` argument."""
    args = list(site.node.args if args is None else args)
    if not args or any(arg.keyword is not None or arg.star == "**" for arg in args):
        return None
    if len(args) > 1 and not any(arg.star for arg in args):
        return None  # sizes: `_constructor`'s
    return ", ".join(arg.star + a.code(arg.value) for arg in args)


def _constructor(a, site: CallSite, args: Optional[Sequence[cst.Arg]] = None) -> Optional[Tuple[str, str]]:
    """(factory, leading arguments) for a legacy constructor call (or those of its
    ``args``), or None when they could be either sizes or data."""
    args = list(site.node.args if args is None else args)
    if any(arg.keyword is not None or arg.star for arg in args):
        return None
    if not args:
        return "empty", "0"
    kind = "size" if len(args) >= 2 else _size_or_data(a, args[0].value, site.scope, site=site)  # data is one sequence
    if kind is None:
        return None
    factory = {"size": "empty", "data": "tensor", "tensor": "as_tensor"}[kind]
    return factory, ", ".join(a.code(arg.value) for arg in args)


# methods whose result is a size (an int or a torch.Size; a one-element tensor's `item()`
# is a number, which a legacy constructor takes only as a size), and those that give data
_SIZE_METHODS = frozenset({"size", "numel", "nelement", "dim", "ndimension", "element_size", "item"})
_DATA_METHODS = frozenset({"numpy", "tolist"})
# ... and those only a tensor has, whose result is a tensor (`x.unsqueeze(0).cuda().float()`):
# the CUDA type took it as it was (an alias, where it was a CUDA tensor of that dtype),
# which `torch.as_tensor(x, dtype=..., device=...)` does; its CPU twin would refuse a CUDA tensor
_TENSOR_METHODS = frozenset({"float", "double", "half", "bfloat16", "long", "int", "short", "char", "byte",
                             "bool", "cuda", "cpu", "to", "contiguous", "unsqueeze", "detach", "clone",
                             "permute", "type_as"})
_TENSOR_FACTORIES = frozenset({"torch.from_numpy", "torch.as_tensor"})


def _size_or_data(a, value: cst.BaseExpression, scope, depth: int = 0,
                  site: Optional[CallSite] = None) -> Optional[str]:
    """Whether the one argument of a legacy constructor is a size ("size": an int,
    `x.size(0)`, `x.shape[1:]`, `len(x)`, `int(x)`, `t.item()`, arithmetic of those),
    data ("data": a list, tuple or comprehension, a numpy array, `t.numpy()`) or a tensor
    ("tensor": `x.float()`, `x.cuda()`, `torch.from_numpy(a)`), looking
    through a name to the binding in force at ``site`` (or its only one); None when it
    could be either (an unknown name, a parameter)."""
    if isinstance(value, cst.Integer):
        return "size"
    if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
        return "data"
    if isinstance(value, cst.Attribute) and value.attr.value == "shape":
        return "size"
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Attribute) and value.value.attr.value == "shape":
        return "size"
    if isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in _SIZE_METHODS:
            return "size"
        if isinstance(func, cst.Attribute) and func.attr.value in _DATA_METHODS:
            return "data"
        if isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_METHODS:
            return "tensor"
        if isinstance(func, cst.Name) and func.value in ("len", "int") and a.lookup(func.value, scope)[0] is None:
            return "size"  # the builtins
        q = a.qualname(func, scope) or ""
        if q.startswith("numpy."):
            return "data"  # an array from numpy
        if q in _TENSOR_FACTORIES:
            return "tensor"
        return None
    if isinstance(value, cst.BinaryOperation):
        sides = {_size_or_data(a, value.left, scope, depth), _size_or_data(a, value.right, scope, depth)}
        return "data" if "data" in sides else ("size" if sides == {"size"} else None)
    if isinstance(value, cst.Name) and depth < 2:
        owner, imported = a.lookup(value.value, scope)
        bindings = list(owner.bindings.get(value.value, ())) if owner is not None and imported is None else []
        if site is not None and owner is site.scope:  # in the call's own scope: the binding in force there
            held = binding_in_force(bindings, site)
            bindings = [held] if held is not None else []
        if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
            return _size_or_data(a, bindings[0].value, owner, depth + 1)
        if len(bindings) == 1 and bindings[0].kind == "param" and owner.function is not None:
            annotation = param_annotation(owner.function.node, value.value)  # `size: int`
            return "size" if isinstance(annotation, cst.Name) and annotation.value == "int" else None
    return None

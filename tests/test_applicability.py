"""Fix safety across sites: one statement and one `if cuda:` block get one applicability;
`fix` (safe only) never half-converts them."""

from __future__ import annotations

import pytest
import torch

from torchdevlint.engine import fix_source
from torchdevlint.settings import Settings

from helpers import findings, fixed

DEVICE = "import torch\ndevice = torch.device('cuda')\n"


@pytest.mark.parametrize("body", [
    "y = (torch.zeros(1).cuda(), batch.cuda())\n",
    "if args.cuda:\n    m = torch.nn.Linear(2, 2).cuda()\n    x = batch.cuda()\n",
    "if torch.cuda.is_available():\n    m = torch.zeros(2).cuda()\n    for b in loader:\n        b = b.cuda()\n",
])
def test_a_statement_or_cuda_block_is_never_half_converted(body):
    text = DEVICE + body
    found = [v for v in findings(text) if v.code.startswith("TDL00")]
    assert len(found) >= 2 and len({v.fix.applicability for v in found}) == 1
    assert fixed(text, unsafe=False) == text  # nothing half-done by the safe pass
    assert ".cuda()" not in fixed(text, unsafe=True)


def test_independent_statements_keep_their_own_applicability():
    text = DEVICE + "a = torch.zeros(1).cuda()\nb = batch.cuda()\n"
    kinds = [v.fix.applicability.value for v in findings(text)]
    assert kinds == ["safe", "unsafe"]
    assert fixed(text, unsafe=False) == DEVICE + "a = torch.zeros(1).to(device)\nb = batch.cuda()\n"


def test_a_site_inside_another_sites_rewrite_does_not_hold_it_back():
    """`torch.device("cuda", torch.cuda.current_device())`: TDL008's query (display only:
    its result is kept) sits inside TDL007's GPU, whose fallback guards it; the statement
    is converted in one pass, and nothing is left (proven below on CPU-only torch)."""
    text = ("import torch\n\n\ndef main():\n    device = torch.device('cuda', torch.cuda.current_device())\n"
            "    return torch.zeros(1, device=device)\n")
    every = Settings(select=("ALL",))
    assert sorted(v.code for v in findings(text, settings=every)) == ["TDL007", "TDL008"]
    out = fixed(text, settings=every)
    assert out == text.replace("torch.device('cuda', torch.cuda.current_device())",
                               "torch.device('cuda', torch.cuda.current_device()) if torch.cuda.is_available() "
                               "else torch.device('cpu')")
    assert findings(out, settings=every) == [] and fixed(out, settings=every) == out
    namespace: dict = {}
    exec(compile(out, "x.py", "exec"), namespace)
    assert namespace["main"]().device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    # beside a site of its own, a display-only site still holds the statement back
    two = text.replace("current_device())", "current_device()), torch.cuda.current_device()")
    assert fixed(two, settings=every) == two


def test_a_storage_is_moved_with_a_keyword_device():
    """A storage's `.to` takes the device as a keyword only: the rewrite says `device=`,
    and the result is torch's own API (run here with the CPU as the device)."""
    text = "import torch\ndevice = torch.device('cuda')\ns = torch.zeros(2).untyped_storage().cuda()\n"
    [v] = findings(text)
    assert v.fix.applicability.value != "display"
    assert fixed(text) == "import torch\ndevice = torch.device('cuda')\ns = torch.zeros(2).untyped_storage().to(device=device)\n"
    torch = pytest.importorskip("torch")
    space = {}
    exec(fixed(text).replace("'cuda'", "'cpu'"), space)
    assert isinstance(space["s"], torch.UntypedStorage) and space["s"].device.type == "cpu"


@pytest.mark.parametrize("flag,guard,safe", [
    ("", "if torch.cuda.is_available():", True),
    ("", "if torch.cuda.is_available() and x:", True),
    ("cuda = True if torch.cuda.is_available() else False\n", "if cuda:", True),
    ("args.cuda = not args.no_cuda and torch.cuda.is_available()\n", "if args.cuda:", True),
    ("cuda = torch.cuda.is_available() or force\n", "if cuda:", False),   # `or`: not certain
    ("", "if not torch.cuda.is_available():", False),
    ("USE_CUDA = True\n", "if USE_CUDA:", False),                          # a constant, not CUDA
    ("cuda = torch.cuda.is_available()\ncuda = opts.cuda\n", "if cuda:", False),  # any assignment may not
])
def test_a_guard_that_makes_cuda_certain_makes_the_fallback_device_safe(flag, guard, safe):
    """Under a guard that makes CUDA certain the script's fallback device is exactly
    CUDA: the rewrite is safe there, and only there."""
    from torchdevlint.engine import check_source
    from torchdevlint.model import Applicability

    text = f"import torch\n{flag}{guard}\n    m = torch.nn.Linear(2, 2).cuda()\n"
    [v] = [v for v in check_source(text) if v.code == "TDL001"]
    assert (v.fix.applicability is Applicability.SAFE) is safe, v.fix.message


@pytest.mark.parametrize("prelude,decorator,safe", [
    ("import pytest\n", "@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')", True),
    ("import pytest\n", "@pytest.mark.skipif(condition=torch.cuda.device_count() < 2, reason='two')", True),
    ("import pytest\n", "@pytest.mark.skipif(sys.platform == 'win32' or not torch.cuda.is_available(), "
                        "reason='x')", True),
    ("import unittest\nTEST_CUDA = torch.cuda.is_available()\n", "@unittest.skipIf(not TEST_CUDA, 'no GPU')", True),
    ("import unittest\n", "@unittest.skipUnless(torch.cuda.is_available(), 'no GPU')", True),
    ("from transformers.testing_utils import require_torch_gpu\n", "@require_torch_gpu", True),
    ("import pytest\n", "@pytest.mark.skipif(not torch.cuda.is_available() and fast, reason='x')", False),
    ("import pytest\n", "@pytest.mark.skipif(torch.cuda.is_available(), reason='CPU only')", False),
    ("import pytest\n", "@pytest.mark.skipif(torch.cuda.device_count() > 1, reason='one')", False),
    ("import unittest\n", "@unittest.skipUnless(torch.cuda.is_available() or force, 'no GPU')", False),
    ("import pytest\n", "@pytest.mark.slow", False),
])
def test_a_cuda_only_test_makes_its_own_fallback_device_safe(prelude, decorator, safe):
    """A test that runs only where CUDA is available (skipped elsewhere) takes the
    device its function defines, CPU fallback and all, exactly as `.cuda()` did: `fix`
    applies it there, and only there (elsewhere its safe twin, the device `.cuda()` uses).
    On a test class it covers every method."""
    text = f"import sys\nimport torch\n{prelude}\n\n{decorator}\ndef test_gpu():\n    x = torch.ones(2).cuda()\n"
    [v] = [v for v in findings(text) if v.code == "TDL001"]
    assert (v.fix.applicability.value == "safe") is safe, v.fix.message
    converted = fixed(text, unsafe=False)
    fallback = 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'
    assert converted == text.replace("    x = torch.ones(2).cuda()\n", (
        f"    device = {fallback}\n" if safe else f"    # the device of `.cuda()`; for a CPU fallback: {fallback}\n"
        '    device = torch.device("cuda")\n') + "    x = torch.ones(2).to(device)\n")
    assert fixed(converted, unsafe=False) == converted
    on_class = (f"import torch\n{prelude}\n\n{decorator}\nclass T:\n"
                "    def test_gpu(self):\n        x = torch.ones(2).cuda()\n")
    [v] = [v for v in findings(on_class) if v.code == "TDL001"]
    assert (v.fix.applicability.value == "safe") is safe, v.fix.message


def test_a_cuda_only_test_with_an_unproven_receiver_keeps_its_definition_unsafe():
    """One fallback definition per function, one applicability: the site whose receiver
    is not provably torch holds back the proven one. `fix` alone gives the proven one the
    exact device `.cuda()` uses, defined in the function, which the other site takes with
    `--unsafe-fixes` later: nothing is left half converted."""
    text = ("import pytest\nimport torch\n\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='x')\n"
            "def test_gpu(batch):\n    x = torch.ones(2).cuda()\n    y = batch.cuda()\n")
    proven, unproven = findings(text)
    assert proven.fix.applicability.value == unproven.fix.applicability.value == "unsafe"
    assert proven.fix.safe is not None and unproven.fix.safe is None
    exact = fixed(text, unsafe=False)
    assert exact == text.replace("    x = torch.ones(2).cuda()\n", (
        '    # the device of `.cuda()`; for a CPU fallback: torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
        '    device = torch.device("cuda")\n    x = torch.ones(2).to(device)\n'))
    assert fixed(exact, unsafe=True) == exact.replace("batch.cuda()", "batch.to(device)")


def test_one_statement_over_two_lines_gets_one_applicability():
    """A statement over two lines (a list, a comprehension with its condition on the next
    line) that moves a proven tensor and an unproven receiver: `fix` alone must not
    convert one and leave the other, as it would not on one line."""
    text = DEVICE + "ys = [torch.ones(2).cuda(),\n      batch.cuda()]\nzs = torch.zeros(2).cuda()\n"
    proven, unproven, alone = findings(text)
    assert proven.fix.applicability.value == unproven.fix.applicability.value == "unsafe"
    assert "another site of this statement" in proven.fix.message
    assert alone.fix.applicability.value == "safe"  # the next statement is its own
    assert fixed(text, unsafe=False) == text.replace("torch.zeros(2).cuda()", "torch.zeros(2).to(device)")
    assert fixed(text, unsafe=True).count(".to(device)") == 3


@pytest.mark.parametrize("receiver, safe", [
    ("torch.ones(n) * (1 - threshold)", True),  # a legacy eval script's threshold
    ("torch.from_numpy(a).float().unsqueeze(0) / 255.0", True),
    ("-torch.ones(n)", True),
    ("weights * torch.ones(n)", False),  # the left operand's operator decides: unknown
    ("not torch.ones(n)", False),
    ("(torch.randn(n) > 0.8).type(torch.float32)", True),  # mmaction's random labels: a tensor of booleans
    ("(torch.randn(n) != 0).float()", True),
    ("(torch.randn(n) in seen).float()", False),  # `in` asks for a bool
    ("(0 < torch.randn(n) < 1).float()", False),  # a chain asks for a bool too
    ("2 * (torch.rand(n) / m) - 1", True),  # after a number, the tensor's own operator (gpytorch's notebooks)
    ("2 * weights - 1", False),
    ("torch.max(torch.randn(n, 2), 1)[1]", True),  # a tensor's part is a tensor
    ("torch.randn(n)[:, None]", True),
    ("weights[0]", False),
])
def test_arithmetic_on_a_tensor_is_a_tensor(receiver, safe):
    text = f"import torch\ndevice = torch.device('cuda')\nx = {receiver}\ny = x.cuda()\n"
    (v,) = findings(text)
    assert v.fix.applicability.value == ("safe" if safe else "unsafe"), v.fix.message


LOADER = ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nfrom tqdm import tqdm\n"
          "device = torch.device('cuda')\ndata = TensorDataset(torch.randn(8, 2), torch.randn(8))\n")


@pytest.mark.parametrize("loader, loop, safe", [
    # torch's default collation: what has `.cuda()` in a batch is a tensor, however it is unpacked
    ("DataLoader(data, batch_size=4)", "for x, y in loader:", True),
    ("torch.utils.data.DataLoader(data, 4, shuffle=True)", "for i, (x, y) in enumerate(loader):", True),
    ("DataLoader(data, batch_size=4)", "for i, (x, y) in enumerate(tqdm(loader)):", True),
    ("DataLoader(data, batch_size=4)", "for (x, y), z in zip(loader, loader):", True),
    ("DataLoader(data, batch_size=4, collate_fn=None)", "for x, y in loader:", True),
    # the PyTorch examples' options, unpacked from a dict written out
    ("DataLoader(data, batch_size=4, **kwargs)", "kwargs = {'num_workers': 1, 'pin_memory': True} if cuda else {}\n"
     "for x, y in loader:", True),
    # anything else may batch other classes (torch_geometric's, a `Batch` with its own `cuda`)
    ("DataLoader(data, batch_size=4, collate_fn=my_collate)", "for x, y in loader:", False),
    ("DataLoader(data, batch_size=None)", "for x, y in loader:", False),  # no collation: items as they are
    ("DataLoader(data, 4, True, None, None, 0, my_collate)", "for x, y in loader:", False),
    ("DataLoader(data, batch_size=4, **kwargs)", "kwargs = {'collate_fn': my_collate}\nfor x, y in loader:", False),
    ("DataLoader(data, batch_size=4, **kwargs)", "kwargs = {}\nkwargs['collate_fn'] = my_collate\n"
     "for x, y in loader:", False),
    ("DataLoader(data, batch_size=4, **options())", "for x, y in loader:", False),
    ("GeometricLoader(data, batch_size=4)", "for x, y in loader:", False),
    ("DataLoader(data, batch_size=4)", "for i, (x, y) in enumerate(loader, *start):", False),
    ("DataLoader(data, batch_size=4)", "for x, *y in loader:", False),
])
def test_a_default_collated_batch_holds_tensors(loader, loop, safe):
    """Parts of a batch of torch's own DataLoader without a `collate_fn`: `default_collate`
    makes tensors (and lists, tuples, dicts and strings of them, which have no `.cuda()`),
    and refuses any other class: a receiver bound from one is a tensor."""
    text = f"{LOADER}loader = {loader}\n{loop}\n    x = x.cuda()\n"
    (v,) = [v for v in findings(text) if v.code == "TDL001"]
    assert v.fix.applicability.value == ("safe" if safe else "unsafe"), v.fix.message


@pytest.mark.parametrize("code, safe", [
    # an attribute assigned a tensor, and then its own move: the other assignment decides
    ("class D:\n    def __init__(self, h):\n        self.h = torch.tensor(h)\n        self.h = self.h.cuda()\n", True),
    ("class D:\n    def __init__(self, h):\n        self.h = h\n        self.h = self.h.cuda()\n", False),
    # `None` holds the place until a method assigns the module (ParlAI's lazy image CNN)
    ("class F:\n    def __init__(self):\n        self.cnn = None\n    def build(self):\n"
     "        self.cnn = torch.nn.Sequential(torch.nn.Linear(2, 2))\n        self.cnn.cuda()\n", True),
    ("class F:\n    def __init__(self, cnn):\n        self.cnn = None\n    def build(self, cnn):\n"
     "        self.cnn = cnn\n        self.cnn.cuda()\n", False),
    ("class F:\n    def __init__(self):\n        self.cnn = None\n    def build(self):\n"
     "        self.cnn.cuda()\n", False),
    # rows of a tensor, a literal or comprehension of tensors
    ("for x in torch.randn(3, 2):\n    x = x.cuda()\n", True),
    ("xs = [torch.ones(2) for _ in range(3)]\nys = [x.cuda() for x in xs]\n", True),
    ("for x in (torch.ones(2), torch.zeros(2)):\n    x = x.cuda()\n", True),
    ("for x in (torch.ones(2), batch):\n    x = x.cuda()\n", False),
    ("for x in [x for x in x]:\n    x = x.cuda()\n", False),
])
def test_receivers_proven_by_what_makes_them(code, safe):
    (v,) = [v for v in findings(DEVICE + code) if v.code == "TDL001"]
    assert v.fix.applicability.value == ("safe" if safe else "unsafe"), v.fix.message


def test_a_library_function_gets_the_exact_device_from_fix_alone():
    """A library module gets no device at import; its function gets one of its own: the CPU
    fallback with `--unsafe-fixes`, and from `fix` alone the exact device `.cuda()` uses
    (TorchKGE's loader, which imports only names from torch, gets `import torch` for it).
    A site whose receiver is not proven stays for `--unsafe-fixes`, which then uses that
    device; a second pass changes nothing."""
    text = ("from torch import tensor\n\n\ndef batches(heads, n, extra):\n    \"\"\"Batches.\"\"\"\n"
            "    h = tensor(heads)\n    for i in range(n):\n        yield h[i].cuda()\n        yield extra.cuda()\n")
    proven, unproven = findings(text)
    assert proven.fix.safe is not None and unproven.fix.safe is None
    assert "falls back to the CPU" in proven.fix.message
    exact = fixed(text, unsafe=False)
    assert exact == text.replace("from torch import tensor\n", "from torch import tensor\nimport torch\n").replace(
        '"""Batches."""\n', '"""Batches."""\n    # the device of `.cuda()`; for a CPU fallback: '
        'torch.device("cuda" if torch.cuda.is_available() else "cpu")\n    device = torch.device("cuda")\n').replace(
        "h[i].cuda()", "h[i].to(device)")
    assert fixed(exact, unsafe=False) == exact
    assert fixed(exact, unsafe=True) == exact.replace("extra.cuda()", "extra.to(device)")


def test_a_library_comprehension_over_two_lines_stays_whole():
    """mushroom-rl's approximator: one comprehension over two lines moves a proven tensor
    and an unproven argument in a library function; `fix` alone gives neither the
    function's exact device (it would convert one and leave the other)."""
    text = ("import numpy as np\nimport torch\n\n\ndef predict(network, *args):\n"
            "    torch_args = [torch.as_tensor(x).cuda()\n"
            "                  if isinstance(x, np.ndarray) else x.cuda() for x in args]\n"
            "    return network(*torch_args)\n")
    proven, unproven = findings(text)
    assert proven.fix.safe is None and "another site of this statement" in proven.fix.message
    assert fixed(text, unsafe=False) == text
    assert fixed(text, unsafe=True).count(".to(device)") == 2


def test_a_modules_type_conversion_is_unsafe_where_a_tensors_is_safe():
    """`.type(torch.cuda.FloatTensor)` casts every buffer of a module, its integer ones too;
    `.to(device, torch.float32)` keeps those integers (torch's own behaviour, shown here with
    the CPU types): on a provable module the rewrite is unsafe; on a tensor it is exact."""
    module = DEVICE + "net = torch.nn.BatchNorm1d(4).type(torch.cuda.FloatTensor)\n"
    tensor = DEVICE + "x = torch.zeros(4).type(torch.cuda.FloatTensor)\n"
    (on_module,), (on_tensor,) = findings(module), findings(tensor)
    assert on_module.fix.applicability.value == "unsafe" and "integer buffers" in on_module.fix.message
    assert on_tensor.fix.applicability.value == "safe"
    assert fixed(module, unsafe=False) == module
    assert fixed(tensor, unsafe=False) == DEVICE + "x = torch.zeros(4).to(device, torch.float32)\n"
    old = torch.nn.BatchNorm1d(4).type(torch.FloatTensor).num_batches_tracked.dtype
    new = torch.nn.BatchNorm1d(4).to("cpu", torch.float32).num_batches_tracked.dtype
    assert (old, new) == (torch.float32, torch.int64)


def test_a_fix_whose_rewrites_another_makes_adds_no_second_definition():
    """OpenNMT's translation server: `torch.cuda.set_device(self.opt.gpu)` then a bare
    `.cuda()`. TDL101's fix replaces the binding with a device and moves the model to it;
    TDL001's makes the same move with a device defined at the top of the function. Both
    count as converted, and only TDL101's definition is written (the other would be dead)."""
    text = ("import torch\n\n\nclass Server:\n    def to_gpu(self):\n        if self.ct2:\n"
            "            self.translator.to_gpu()\n        else:\n            torch.cuda.set_device(self.opt.gpu)\n"
            "            self.translator.model.cuda()\n")
    every = Settings(select=("ALL",))
    assert sorted(v.code for v in findings(text, settings=every)) == ["TDL001", "TDL101"]
    out = fixed(text, settings=every)
    assert out == text.replace(
        "torch.cuda.set_device(self.opt.gpu)\n            self.translator.model.cuda()",
        'device = torch.device("cuda", self.opt.gpu) if torch.cuda.is_available() else torch.device("cpu")\n'
        "            self.translator.model.to(device)")
    assert fixed(out, settings=every) == out
    outcome = fix_source(text, "server.py", every, unsafe=True)
    assert dict(outcome.applied) == {"TDL001": 1, "TDL101": 1}


def test_a_legacy_type_given_its_own_device_is_not_said_to_use_the_current_one():
    """allennlp's `torch.cuda.LongTensor(size, device=device)`: the device is explicit; the
    finding says what is wrong (a CUDA-only type), not "the implicit current device"."""
    code = ("import torch\ndef rng(size, device):\n    if device > -1:\n"
            "        return torch.cuda.LongTensor(size, device=device).fill_(1)\n"
            "def zeros(n):\n    return torch.cuda.LongTensor(n, device=None)\n")
    first, second = [v for v in findings(code) if v.code == "TDL005"]
    assert "whatever its `device=` names" in first.message and "current device" not in first.message
    assert "implicit current device" in second.message  # `device=None` is the current device


def test_a_module_moved_beside_a_tested_tensor_is_called_a_module():
    """TDL002 names what it moves: MMAction2's TPN head makes a `Conv3d` (its attribute
    `None` until then) and moves it because its other layer is on a GPU."""
    text = ("import torch\nfrom torch import nn\nclass TPNHead(nn.Module):\n    def __init__(self):\n"
            "        self.new_cls = None\n    def init_new_cls(self):\n        self.new_cls = nn.Conv3d(4, 2, 1)\n"
            "        if next(self.fc_cls.parameters()).is_cuda:\n            self.new_cls = self.new_cls.cuda()\n"
            "def count(model, size):\n    x = torch.rand(size)\n    if next(model.parameters()).is_cuda:\n"
            "        x = x.cuda()\n    return model(x)\n")
    module, tensor = findings(text)
    assert (module.code, tensor.code) == ("TDL002", "TDL002")
    assert "moves this new module to" in module.message and "moves this new tensor to" in tensor.message


@pytest.mark.parametrize("placed, aligned", [
    ("model.cuda(args.gpu)", True),
    ("model.cuda(device=args.gpu)", True),
    ("model.to(torch.device('cuda', args.gpu))", True),
    ("model.to(f'cuda:{args.gpu}')", True),
    ("model.to('cuda:{}'.format(args.gpu))", True),
    ("model.to('cuda:' + str(args.gpu))", True),
    ("model.to('cuda:%d' % args.gpu)", True),
    ("loc = 'cuda:{}'.format(args.gpu)\n    model.to(loc)", True),
    ("model.cuda(args.rank)", False),  # another index
    ("model.to(f'cuda:{args.gpu}:x')", False),  # not a device built from the index alone
    ("model.cuda()", False),  # the current device itself: nothing explicit to agree with
])
def test_a_script_that_places_on_the_index_it_sets_is_aligned(placed, aligned):
    """TDL101 in a script (PyTorch's examples' single-GPU path, Brevitas's validation
    scripts): `set_device(args.gpu)` beside a placement on that same index, however the
    device is spelled, makes the current device agree with the explicit one."""
    text = ("import argparse\nimport torch\n\n\ndef main():\n    args = argparse.ArgumentParser().parse_args()\n"
            "    model = torch.nn.Linear(2, 2)\n    torch.cuda.set_device(args.gpu)\n"
            f"    {placed}\n\n\nif __name__ == '__main__':\n    main()\n")
    assert not [v for v in findings(text) if v.code == "TDL101"] == aligned
    library = text.replace("\n\nif __name__ == '__main__':\n    main()\n", "")
    assert [v for v in findings(library) if v.code == "TDL101"]  # an imported function changes its caller's


def test_a_package_module_with_a_main_guard_defines_its_device_in_the_function():
    """Demucs's `demucs/train.py`: a main guard, but relative imports (`from .solver
    import Solver`): it runs as `python -m demucs.train` and Dora's launcher imports it, so
    a device definition at its top would query CUDA in every importer. The definition goes
    in the function; the same file outside a package keeps it where the script starts."""
    body = ("import torch\n{imports}\n\n\ndef get_solver(args):\n    model = Solver(args)\n"
            "    if torch.cuda.is_available():\n        model.cuda()\n    return model\n\n\n"
            "if __name__ == '__main__':\n    get_solver(None)\n")
    package = fixed(body.format(imports="from .solver import Solver"))
    assert "def get_solver(args):\n    device = torch.device(" in package
    assert "\ndevice = " not in package and "model.to(device)" in package
    script = fixed(body.format(imports="from solver import Solver"))
    assert '\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' in script
    assert "    device = " not in script and "model.to(device)" in script


def test_a_cached_weight_moved_beside_a_tested_input_is_not_called_new():
    """The focal losses' `if inputs.is_cuda and not self.alpha.is_cuda: self.alpha =
    self.alpha.cuda()`: TDL002 (the negated conjunct is the cache's own test, not the
    input's), and the message calls the object's weight "this tensor", not a new one; a
    parameter moved in place too. A tensor the function made is still "new"."""
    text = ("import torch\nfrom torch import nn\nclass FocalLoss(nn.Module):\n    def __init__(self, n):\n"
            "        super().__init__()\n        self.alpha = torch.ones(n)\n"
            "    def forward(self, inputs, targets):\n        if inputs.is_cuda and not self.alpha.is_cuda:\n"
            "            self.alpha = self.alpha.cuda()\n        return self.alpha[targets] * inputs\n"
            "def count(model, x):\n    if next(model.parameters()).is_cuda:\n        x = x.cuda()\n"
            "    y = torch.zeros(3)\n    if next(model.parameters()).is_cuda:\n        y = y.cuda()\n"
            "    return model(x), y\n")
    weight, param, made = findings(text)
    assert [v.code for v in (weight, param, made)] == ["TDL002"] * 3
    assert weight.message.startswith("`.cuda()` moves this tensor to") and "`inputs`" in weight.message
    assert param.message.startswith("`.cuda()` moves this tensor to")
    assert made.message.startswith("`.cuda()` moves this new tensor to")


@pytest.mark.parametrize("test, safe", [
    ("self.device == 'cuda'", True),  # the string "cuda" itself: `.to(self.device)` is `.cuda()`
    ("'cuda' == self.device", True),
    ("self.device.type == 'cuda'", False),  # a CUDA device, maybe cuda:1
    ("'cuda' in str(self.device)", False),
])
def test_the_device_a_guard_tests_is_exact_only_where_it_equals_cuda(test, safe):
    text = ("import torch\n\n\nclass Probe:\n    def build(self):\n"
            f"        if {test}:\n            return torch.nn.Linear(2, 2).cuda()\n")
    [found] = findings(text)
    assert found.code == "TDL001"
    assert found.fix.applicability.value == ("safe" if safe else "unsafe")
    assert ".to(self.device)" in fixed(text, unsafe=True)
    assert fixed(text, unsafe=False) == (text.replace(".cuda()", ".to(self.device)") if safe else text)


def test_a_chosen_device_under_its_own_equality_with_cuda_is_exact():
    """`self.device = "cuda" if ... else "cpu"` is not exact by itself (it may be the CPU),
    but under `if self.device == "cuda":` it is the string "cuda": the fix is safe there
    (proven under the simulator: original and fix place the layer on the current device,
    the last of 1, 2 and 4 GPUs, with equal outputs)."""
    text = ("import torch\n\n\nclass Probe:\n    def __init__(self):\n"
            "        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'\n\n"
            "    def build(self):\n        net = torch.nn.Linear(4, 2)\n"
            "        if self.device == 'cuda':\n            net = net.cuda()\n        return net\n")
    [found] = findings(text)
    assert (found.code, found.fix.applicability.value) == ("TDL001", "safe")
    assert fixed(text, unsafe=False) == text.replace("net.cuda()", "net.to(self.device)")
    other = text.replace("if self.device == 'cuda':", "if self.use_gpu:")
    assert findings(other)[0].fix.applicability.value == "unsafe"  # `self.device` may not be the current device

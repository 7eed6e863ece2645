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
    applies it there, and only there. On a test class it covers every method."""
    text = f"import sys\nimport torch\n{prelude}\n\n{decorator}\ndef test_gpu():\n    x = torch.ones(2).cuda()\n"
    [v] = [v for v in findings(text) if v.code == "TDL001"]
    assert (v.fix.applicability.value == "safe") is safe, v.fix.message
    converted = fixed(text, unsafe=False)
    assert (converted != text) is safe
    if safe:
        assert converted == text.replace("    x = torch.ones(2).cuda()\n", (
            '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "    x = torch.ones(2).to(device)\n"))
        assert fixed(converted, unsafe=False) == converted
    on_class = (f"import torch\n{prelude}\n\n{decorator}\nclass T:\n"
                "    def test_gpu(self):\n        x = torch.ones(2).cuda()\n")
    [v] = [v for v in findings(on_class) if v.code == "TDL001"]
    assert (v.fix.applicability.value == "safe") is safe, v.fix.message


def test_a_cuda_only_test_with_an_unproven_receiver_keeps_its_definition_unsafe():
    """One definition per function, one applicability: the site whose receiver is not
    provably torch holds back the proven one (else a later `--unsafe-fixes` finds a
    half-converted test)."""
    text = ("import pytest\nimport torch\n\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='x')\n"
            "def test_gpu(batch):\n    x = torch.ones(2).cuda()\n    y = batch.cuda()\n")
    assert {v.fix.applicability.value for v in findings(text)} == {"unsafe"}
    assert fixed(text, unsafe=False) == text


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
])
def test_arithmetic_on_a_tensor_is_a_tensor(receiver, safe):
    text = f"import torch\ndevice = torch.device('cuda')\nx = {receiver}\ny = x.cuda()\n"
    (v,) = findings(text)
    assert v.fix.applicability.value == ("safe" if safe else "unsafe"), v.fix.message


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

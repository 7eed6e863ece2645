"""Whole-run knowledge (#12): classes of sibling files make fixes surer, never findings."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import cli

MODELS = '''\
import torch.nn as nn


class Base(nn.Module):
    pass


class Generator(Base):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)


class Quantized:
    def cuda(self):
        return self
'''

TRAIN = '''\
import torch
from .models import Generator, Quantized
from pkg.models import *

device = torch.device("cuda")


def main():
    g = Generator().cuda()
    q = Quantized().cuda()
    b = Base()
    b.cuda()
    return g, q, b


if __name__ == "__main__":
    main()
'''


def _project(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models.py").write_text(MODELS)
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)


def _applicability(out: bytes):
    return [(v["location"]["row"], v["fix"]["applicability"]) for v in json.loads(out)]


def test_sibling_classes_make_fixes_safe_but_findings_do_not_change(tmp_path):
    _project(tmp_path)
    alone = cli("check", "--no-cache", "--output-format", "json", "pkg/train.py", cwd=tmp_path).stdout
    tree = cli("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path).stdout
    assert _applicability(alone) == [(9, "unsafe"), (10, "unsafe"), (12, "unsafe")]
    # a relative import and a star import of nn.Module subclasses: safe; a class with
    # its own cuda() stays unsafe
    assert _applicability(tree) == [(9, "safe"), (10, "unsafe"), (12, "safe")]
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "TDL", "pkg/train.py"],
                            cwd=tmp_path, capture_output=True, text=True).stdout
    assert [line.split(" ")[0] for line in flake8.splitlines()] == \
        ["pkg/train.py:9:9:", "pkg/train.py:10:9:", "pkg/train.py:12:5:"]  # the same findings
    cli("fix", "--no-cache", ".", cwd=tmp_path)
    fixed = (tmp_path / "pkg" / "train.py").read_text()
    assert "g = Generator().to(device)" in fixed and "b.to(device)" in fixed
    assert "q = Quantized().cuda()" in fixed


def test_the_whole_run_pass_answers_the_same_on_the_run_s_workers(tmp_path):
    """Enough files wait for the index that the whole-run pass goes to the worker
    processes of the first pass (kept for it): the same output as one process."""
    _project(tmp_path)
    for i in range(6):
        (tmp_path / "pkg" / f"train{i}.py").write_text(TRAIN)
    one = cli("check", "--no-cache", "--jobs", "1", "--output-format", "json", ".", cwd=tmp_path)
    two = cli("check", "--no-cache", "--jobs", "2", "--output-format", "json", ".", cwd=tmp_path)
    assert one.stdout == two.stdout and one.returncode == two.returncode == 1
    assert _applicability(two.stdout) == [(9, "safe"), (10, "unsafe"), (12, "safe")] * 7


def test_the_run_s_own_process_builds_and_asks_the_index_without_libcst(tmp_path):
    """The whole-run pass runs in the run's own process between the workers' passes: its
    index (which asks torch's names whether they make modules) and its questions import
    neither LibCST nor the analysis, which only the workers need."""
    _project(tmp_path)
    for i in range(6):
        (tmp_path / "pkg" / f"train{i}.py").write_text(TRAIN)
    probe = ("import sys\nfrom torchdevlint.cli import main\n"
             "rc = main(['check', '--no-cache', '-q', '--jobs', '2', '--output-format', 'json', '.'])\n"
             "print(rc, 'libcst' in sys.modules, any(m.startswith('torchdevlint.analysis') for m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert _applicability(out.stdout.rsplit("\n", 2)[0]) == [(9, "safe"), (10, "unsafe"), (12, "safe")] * 7
    assert out.stdout.split("\n")[-2] == "1 False False", out.stdout[-300:] + out.stderr


def test_the_cache_keeps_tree_and_single_file_answers_apart(tmp_path):
    _project(tmp_path)
    tree = cli("check", "--output-format", "json", ".", cwd=tmp_path).stdout
    alone = cli("check", "--output-format", "json", "pkg/train.py", cwd=tmp_path).stdout
    again = cli("check", "--output-format", "json", ".", cwd=tmp_path).stdout
    assert _applicability(tree) == _applicability(again) == [(9, "safe"), (10, "unsafe"), (12, "safe")]
    assert _applicability(alone) == [(9, "unsafe"), (10, "unsafe"), (12, "unsafe")]


def test_a_warm_run_analyses_nothing_again(tmp_path, monkeypatch):
    """The whole-run pass is cached too (under the file's digest and the index's own
    fingerprint, and under the digests of the whole tree): a second run over an unchanged
    tree builds no index and runs no analysis, and answers the same."""
    from torchdevlint import runner
    from torchdevlint.settings import Settings

    _project(tmp_path)
    paths = [str(tmp_path / "pkg" / n) for n in ("__init__.py", "models.py", "train.py")]

    def once():
        cache = runner.Cache(str(tmp_path), Settings())
        return [[(v.start, v.fix.applicability.value if v.fix else None, v.filename) for v in r.violations]
                for r in runner.run(paths, "check", Settings(), cache=cache)]

    first = once()
    assert ((9, 8), "safe", paths[2]) in first[2]  # the sibling class made it safe
    calls, indexed = [], []
    real, real_index = runner.process, runner.build_index
    monkeypatch.setattr(runner, "process", lambda job: calls.append(job.path) or real(job))
    monkeypatch.setattr(runner, "build_index", lambda *a, **k: indexed.append(1) or real_index(*a, **k))
    # an unchanged tree: not even the index is built (every file's digest says so)
    assert once() == first and calls == [] and indexed == []
    # a file the index does not read changes: the index is built, its fingerprint matches
    (tmp_path / "pkg" / "__init__.py").write_text("# touched\n")
    assert once() == first and calls == [] and indexed == [1]
    # a change to the sibling that defines the class is a miss for the whole-run answer
    (tmp_path / "pkg" / "models.py").write_text(MODELS.replace("nn.Module", "object"))
    assert once() != first and str(tmp_path / "pkg" / "train.py") in calls


ELSEWHERE = '''\
import torch
from vendor.layers import Block


def main():
    return Block().cuda()


if __name__ == "__main__":
    main()
'''


def test_the_whole_run_pass_analyses_again_only_what_the_index_answers(tmp_path, monkeypatch):
    """A file waits for the index only where its receivers' classes may be the run's own;
    the index is asked those questions again first: a file whose classes the run does not
    define (``vendor.layers.Block``) gets no other answer and is not analysed again (its
    first answer stands), while one whose class the index proves is, and becomes safe."""
    from torchdevlint import runner
    from torchdevlint.settings import Settings

    _project(tmp_path)
    (tmp_path / "pkg" / "serve.py").write_text(ELSEWHERE)
    paths = [str(tmp_path / "pkg" / n) for n in ("__init__.py", "models.py", "serve.py", "train.py")]
    serve, train = paths[2], paths[3]
    for mode in ("check", "fix"):
        calls = []
        real = runner.process
        monkeypatch.setattr(runner, "process", lambda job: calls.append(job.path) or real(job))
        results = runner.run(paths, mode if mode == "check" else "diff", Settings())
        assert calls.count(serve) == 1 and calls.count(train) == 2, mode
        assert results[2].asked == frozenset({("lookup", "vendor.layers.Block")})
        assert [(v.start[0], v.fix.applicability.value, sorted(v.fix.blocked_by))
                for v in results[2].violations] == [(6, "unsafe", ["receiver"])]
        # the same answers as analysing every waiting file again
        monkeypatch.setattr(runner, "_index_may_change", lambda *a: True)
        again = runner.run(paths, mode if mode == "check" else "diff", Settings())
        assert calls.count(serve) == 3
        assert [(r.violations, r.diff) for r in again] == [(r.violations, r.diff) for r in results]
        monkeypatch.undo()
    check = runner.run(paths, "check", Settings())
    assert [v.fix.applicability.value for v in check[3].violations] == ["safe", "unsafe", "safe"]


def test_a_file_is_analysed_again_unless_every_answer_it_got_is_known_to_hold(tmp_path):
    """What decides whether the whole-run pass analyses a file again: the index's answers
    to its questions; and always where they are unknown (a cached result) or where it
    waits on the run's importers or constructors."""
    from torchdevlint.model import Applicability, Fix, Violation
    from torchdevlint.project import build_index
    from torchdevlint.runner import FileResult, _index_may_change, read_source

    _project(tmp_path)
    paths = [str(tmp_path / "pkg" / n) for n in ("__init__.py", "models.py", "train.py")]
    index = build_index(paths, read_source)
    assert index.module_kind(("lookup", "pkg.models.Generator")) == "module"
    assert index.module_kind(("lookup", "pkg.models.Quantized")) is None  # its own cuda()
    assert index.module_kind(("star", ("pkg.models",), "Base")) == "module"
    assert index.module_kind(("lookup", "vendor.layers.Block")) is None
    waits = [Violation("TDL001", "bare-cuda-call", "m", (6, 11), (6, 24),
                       Fix(Applicability.UNSAFE, "f", blocked_by=frozenset({"receiver"})), "x.py")]
    unknown = ("lookup", "vendor.layers.Block")

    def may(asked, violations=waits, importees=()):
        return _index_may_change(FileResult("x.py", violations, asked=asked), index, importees)

    assert not may(frozenset({unknown})) and not may(frozenset())
    assert may(frozenset({unknown, ("lookup", "pkg.models.Generator")}))
    assert may(None)  # a cached first answer: what it asked is not known
    assert may(frozenset({unknown}), importees=("x.py",))
    constructors = [Violation("TDL005", "legacy-cuda-tensor-type", "m", (1, 0), (1, 5),
                              Fix(Applicability.DISPLAY, "f", blocked_by=frozenset({"constructors"})), "x.py")]
    assert may(frozenset({unknown}), constructors)


DEFAULTS = '''\
from yacs.config import CfgNode as CN

_C = CN()
_C.MODEL = CN()
# Using cuda or cpu for training
_C.MODEL.DEVICE = "cuda"
'''

TRAIN_NET = '''\
import torch
from config import cfg


def main():
    return torch.zeros(2).to(cfg.MODEL.DEVICE)


if __name__ == "__main__":
    main()
'''


def _configured(tmp_path, script=TRAIN_NET, library=False):
    """A yacs-configured project: config/defaults.py read through config/__init__.py by
    tools/train_net.py (and, ``library``, by a module of the package too)."""
    for folder in ("config", "tools", "engine"):
        (tmp_path / folder).mkdir()
    (tmp_path / "config" / "defaults.py").write_text(DEFAULTS)
    (tmp_path / "config" / "__init__.py").write_text("from .defaults import _C as cfg\n")
    (tmp_path / "tools" / "train_net.py").write_text(script)
    (tmp_path / "engine" / "trainer.py").write_text(
        ("from config import cfg\n" if library else "") + "def do_train(model):\n    return model\n")


def test_a_configuration_only_scripts_import_gets_its_fallback_where_it_is_set(tmp_path):
    """A library module's level would ask about CUDA at every import (display); a module
    that only the run's scripts import asks where they start: unsafe, and applied."""
    _configured(tmp_path)
    alone = cli("check", "--no-cache", "--output-format", "json", "--select", "TDL007", "config/defaults.py",
                cwd=tmp_path).stdout
    tree = cli("check", "--no-cache", "--output-format", "json", "--select", "TDL007", ".", cwd=tmp_path).stdout
    assert _applicability(alone) == [(6, "display")] and _applicability(tree) == [(6, "unsafe")]
    assert json.loads(alone)[0]["fix"]["blocked_by"] == ["importers"]
    flake8 = subprocess.run([sys.executable, "-m", "flake8", "--select", "TDL007", "config/defaults.py"],
                            cwd=tmp_path, capture_output=True, text=True).stdout
    assert [line.split(" ")[:2] for line in flake8.splitlines()] == [["config/defaults.py:6:19:", "TDL007"]]
    cli("fix", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    assert '_C.MODEL.DEVICE = "cuda" if torch.cuda.is_available() else "cpu"' in (
        tmp_path / "config" / "defaults.py").read_text()


def test_a_configuration_a_library_imports_or_a_script_that_hides_gpus_stays_display(tmp_path):
    """Imported by a module of the package too, the question would run at its import;
    a script that sets CUDA_VISIBLE_DEVICES after its imports (reid-strong-baseline's
    `os.environ['CUDA_VISIBLE_DEVICES'] = cfg.MODEL.DEVICE_ID`) would set it too late."""
    hides = TRAIN_NET.replace("def main():\n", "def main():\n    import os\n"
                              "    os.environ['CUDA_VISIBLE_DEVICES'] = '1'\n")
    for kwargs in ({"library": True}, {"script": hides}):
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        root.mkdir()
        _configured(root, **kwargs)
        tree = cli("check", "--no-cache", "--output-format", "json", "--select", "TDL007", ".", cwd=root).stdout
        assert _applicability(tree) == [(6, "display")], kwargs


SSD_TRAIN = '''\
import torch
from layers.functions import PriorBox

if __name__ == "__main__":
    if torch.cuda.is_available():
        torch.set_default_tensor_type("torch.cuda.FloatTensor")
    print(PriorBox().forward())
'''

PRIOR_BOX = '''\
import torch


class PriorBox(object):
    def forward(self):
        # torch.Tensor(...) in a comment is no call
        ok = isinstance(None, torch.Tensor)
        return {}
'''


def test_a_default_tensor_type_waits_for_the_programs_legacy_constructors(tmp_path):
    """SSD's shape: the script sets a CUDA default type, and its prior boxes are built
    with `torch.Tensor(mean)` in another module, which would stay on the CPU after
    `set_default_device`. Alone, the script cannot tell (display, blocked_by
    constructors); over the tree, the rewrite waits for that call to get a device, and
    goes ahead once no file of the run has one."""
    (tmp_path / "layers" / "functions").mkdir(parents=True)
    (tmp_path / "layers" / "__init__.py").write_text("")
    (tmp_path / "layers" / "functions" / "__init__.py").write_text("from .prior_box import PriorBox\n")
    prior_box = tmp_path / "layers" / "functions" / "prior_box.py"
    prior_box.write_text(PRIOR_BOX.replace("return {}", "return torch.Tensor([0.5, 0.5]).view(-1, 2)"))
    (tmp_path / "train.py").write_text(SSD_TRAIN)

    def tdl005(*paths):
        out = cli("check", "--no-cache", "--unsafe-fixes", "--output-format", "json", "--select", "TDL005", *paths,
                  cwd=tmp_path).stdout
        return [(v["location"]["row"], v["fix"]["applicability"], v["fix"]["blocked_by"], v["fix"]["message"])
                for v in json.loads(out)]

    (alone,) = tdl005("train.py")
    assert alone[:3] == (6, "display", ["constructors"]) and "`layers.functions`" in alone[3]
    (tree,) = tdl005(".")
    assert tree[:2] == (6, "display") and "(layers/functions/prior_box.py:8)" in tree[3]
    cli("fix", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    assert 'set_default_tensor_type("torch.cuda.FloatTensor")' in (tmp_path / "train.py").read_text()

    prior_box.write_text(PRIOR_BOX)  # no legacy constructor left in the program
    (tree,) = tdl005(".")
    assert tree[1] == "unsafe"
    assert tdl005("train.py")[0][1] == "display"  # alone, it still cannot tell
    cli("fix", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    fixed = (tmp_path / "train.py").read_text()
    # (under `if torch.cuda.is_available():` the device is CUDA itself)
    assert "torch.set_default_dtype(torch.float32)" in fixed and 'torch.set_default_device("cuda")' in fixed


def test_classes_a_package_re_exports_are_proven_through_its_init(tmp_path):
    """A legacy repository's `models` package: its `__init__` re-exports the networks of
    its modules, whose bases lie three modules deeper (`Generator(Block)`, `Block(Base)`,
    `Base(nn.Module)`, one of them imported from torch under another name). A script's
    `from models import Generator` (or `*`) is followed to the class; a re-exported class
    with its own `cuda()`, or one that inherits it, stays unsafe; the findings are those of
    the file alone."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "__init__.py").write_text("from .networks import Generator, Quantized, Packed\n"
                                        "from models.blocks import Block\n")
    (models / "networks.py").write_text(
        "import torch.nn as nn\nfrom .blocks import Block\n\n\nclass Generator(Block):\n    pass\n\n\n"
        "class Quantized(nn.Module):\n    def cuda(self):\n        return self\n\n\nclass Packed(Quantized):\n    pass\n")
    (models / "blocks.py").write_text("from .base import Base\n\n\nclass Block(Base):\n    pass\n")
    (models / "base.py").write_text("from .layers import Module\n\n\nclass Base(Module):\n    pass\n")
    (models / "layers.py").write_text("from torch.nn import Module\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom models import Generator, Block, Quantized, Packed\n\ndevice = torch.device('cuda')\n\n"
        "if __name__ == '__main__':\n    g = Generator().cuda()\n    b = Block().cuda()\n    q = Quantized().cuda()\n"
        "    p = Packed().cuda()\n")
    (tmp_path / "star.py").write_text(
        "import torch\nfrom models import *\n\ndevice = torch.device('cuda')\n\n"
        "if __name__ == '__main__':\n    g = Generator().cuda()\n")
    alone = cli("check", "--no-cache", "--output-format", "json", "train.py", cwd=tmp_path).stdout
    tree = cli("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path).stdout
    assert _applicability(alone) == [(7, "unsafe"), (8, "unsafe"), (9, "unsafe"), (10, "unsafe")]
    by_file = {}
    for v in json.loads(tree):
        by_file.setdefault(v["filename"].rsplit("/", 1)[-1], []).append(
            (v["location"]["row"], v["fix"]["applicability"]))
    # (a class that inherits its own cuda() has one too)
    assert by_file == {"train.py": [(7, "safe"), (8, "safe"), (9, "unsafe"), (10, "unsafe")], "star.py": [(7, "safe")]}


def test_only_receivers_the_index_can_prove_wait_for_it():
    """The whole-run pass re-analyses a file; it is asked for only where a receiver's kind
    turns on a name the run's files may define (a class imported from the program, a star
    import), never for a parameter, a loop variable or torch's, numpy's own names."""
    from helpers import findings

    text = ("import numpy as np\nimport torch\nfrom models import Generator\nfrom nets import *\n\n\n"
            "def build(batch, items):\n    g = Generator().cuda()\n    d = Discriminator().cuda()\n"
            "    b = batch.cuda()\n    for x in items:\n        x = x.cuda()\n"
            "    a = torch.as_tensor(np.ones(2)).cuda()\n    n = np.ones(2).cuda()\n")
    waiting = {v.start[0]: "receiver" in v.fix.blocked_by for v in findings(text)}
    assert waiting == {8: True, 9: True, 10: False, 12: False, 13: False, 14: False}

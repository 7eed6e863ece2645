"""The gate on the code (``words``): rules whose tokens the module's ast lacks never run,
and a module no rule passes never reaches LibCST. It may only ever skip work: every
fixture and rule example gives the same findings, and the same fixed text, with and
without it."""

from __future__ import annotations

import ast

import pytest

from helpers import fixture_programs
from torchdevlint import engine
from torchdevlint.engine import RULES, check_source, fix_source
from torchdevlint.words import CodeWords, check_tokens

TEXTS = [p.read_text(encoding="utf-8") for p in fixture_programs()]
TEXTS += [code for r in RULES for code in r.VALID] + [ex.code for r in RULES for ex in r.INVALID]
TEXTS += [
    # mentions in comments, docstrings and other words: the text prefilter passes them
    'import torch\n"""Call x.cuda() or torch.load(p) here."""\n# m.cuda()\nurl = "download"\n',
    "import torch\ndef f(t: torch.Tensor, cuda: bool):\n    return t\n",
    # spellings the gate must keep
    "import torch\nfrom torch.cuda import device as cuda_device\ncuda_device(1)\n",
    "from torch import load as tload\nstate = tload('x.pt')\n",
    "import os\nos.environ.update(CUDA_VISIBLE_DEVICES='1')\nimport torch\ntorch.zeros(1).cuda()\n",
    "import threading, torch\ndef work():\n    torch.zeros(1, device='cuda')\nthreading.Thread(target=work).start()\n",
    # per-rank code, however it is marked (TDL003's second gate group)
    "import torch\n# launched by torchrun: reads 'LOCAL_RANK'\nx = torch.zeros(1, device='cuda')\n",
    "import torch, multiprocessing as mp\nclass W(mp.Process):\n    def run(self):\n        torch.zeros(1).cuda()\n",
    "import torch\nfrom concurrent.futures import ProcessPoolExecutor as PPE\ndef w(i):\n    return torch.zeros(1).cuda()\n"
    "with PPE() as ex:\n    ex.submit(w, 1)\n",
    "import torch, multiprocessing as mp\ndef w(i):\n    return torch.zeros(1).cuda()\nctx = mp.get_context('spawn')\n"
    "p = ctx.Process(target=w, args=(0,))\n",
    "import torch, multiprocessing as mp\nfrom multiprocessing import Process as P\ndef w(i):\n"
    "    torch.zeros(1).cuda()\nP(None, w).start()\n",
    "import torch, multiprocessing as mp\nProc = mp.Process\ndef w(i):\n    torch.zeros(1).cuda()\n"
    "Proc(target=w).start()\n",
    "import torch, multiprocessing as mp\ndef run(target_func):\n    torch.zeros(1).cuda()\n"
    "    mp.get_context('spawn').Process(target=target_func).start()\n",
    # a class's own cuda(): quiet inside it (a nested lambda or def too), not in a class nested there
    "import torch\nclass Boxes:\n    def cuda(self):\n        return Boxes(self.t.cuda(), [x.cuda() for x in self.xs])\n",
    "import torch\nclass A:\n    def cuda(self):\n        class B:\n            def go(self):\n"
    "                return torch.zeros(1).cuda()\n        return B()\n",
    "import torch\ndef cuda(x):\n    return x.cuda()\nclass A:\n    def cuda(self):\n        return self.t.cuda()\n",
    # DataParallel and a move to the implicit CUDA device: chained, through a name bound to "cuda"
    "import torch\nm = torch.nn.DataParallel(torch.nn.Linear(1, 1)).cuda(None)\n",
    "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
    "m = torch.nn.DataParallel(torch.nn.Linear(1, 1))\nm.to(device)\n",
    "import torch\nm = torch.nn.DataParallel(torch.nn.Linear(1, 1))\nm.to(dev)\n",
    "import torch\nfrom detectron2.engine import launch as go\ndef main():\n    torch.zeros(1).cuda(0)\ngo(main, 2)\n",
    "import torch\nimport deepspeed\ndeepspeed.init_distributed()\nx = torch.zeros(1).cuda(0)\n",
    "import torch\nimport horovod.torch as hvd\nx = torch.zeros(1, device='cuda:0')\nprint(hvd.local_rank())\n",
    # the call shapes the finer tokens read: explicit and implicit devices, map_location
    # by keyword, by position and through **kwargs, context managers entered or not
    "import torch\nx = torch.zeros(1).cuda(None, True)\ny = torch.zeros(1).cuda(device=None)\n",
    "import torch\nx = torch.zeros(1).cuda(0)\ny = torch.zeros(1).cuda(device=d)\nz = m.cuda(*a)\nw = m.cuda(**k)\n",
    "import torch\na = torch.load(p, 'cpu')\nb = torch.load(p, map_location=None)\nc = torch.load(**kw)\n",
    "import torch as th\nfrom torch.hub import load_state_dict_from_url as get\nsd = get(url, 'd', 'cpu')\n"
    "sd2 = get(url, 'd')\nm = th.jit.load(f)\n",
    "import torch\nwith torch.cuda.device(1):\n    pass\nctx = torch.cuda.device(1)\n(torch.cuda.device(0))\n",
]


def _ungated(rules, tree, text=None):
    return list(rules)


def _describe(found):
    return [(v.code, v.start, v.end, v.message, v.fix) for v in found]


@pytest.mark.parametrize("index", range(len(TEXTS)))
def test_gate_changes_no_finding_and_no_fix(index, monkeypatch):
    text = TEXTS[index]
    gated = _describe(check_source(text))
    gated_fix = fix_source(text, unsafe=True).text
    monkeypatch.setattr(engine, "gate", _ungated)
    assert gated == _describe(check_source(text))
    assert gated_fix == fix_source(text, unsafe=True).text


def test_a_module_no_rule_passes_never_reaches_libcst(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("LibCST parsed a module the gate had ruled out")

    monkeypatch.setattr(engine.cst, "parse_module", boom)
    # `.cuda()` and `load` in a docstring and a comment
    assert check_source('import torch\n"""Call x.cuda() or torch.load(p) here."""\n# m.cuda()\nurl = "download"\n') == []
    assert check_source("import torch\ndef f(t: torch.Tensor, cuda: bool):\n    return t\n") == []
    # a "cuda" device string and pooling layers, but nothing that runs per process (TDL003)
    assert check_source("import torch\nimport torch.nn as nn\npool = nn.MaxPool2d(2)\n"
                        "def launch_kernel():\n    return torch.zeros(1, device='cuda')\n") == []


def test_words_are_code_tokens():
    words = CodeWords(ast.parse(
        '"""x.cuda()"""\n# y.set_device(1)\nimport torch.cuda as tc\nfrom torch.cuda import device as d\n'
        "tc.device(1)\nz = m.cuda(non_blocking=True)\nclass T(threading.Thread):\n    def run(self, pin_memory):\n"
        "        pass\nenv = {'CUDA_VISIBLE_DEVICES': '0'}\n"))
    assert words.has("call:cuda") and words.has("call:device") and not words.has("call:set_device")
    assert not words.has("name:set_device")  # only in a comment
    assert words.has("qual:torch.cuda.device") and words.has("name:d") and words.has("name:cuda")
    assert not words.has("qual:torch.cuda.set_device")
    assert words.has("name:non_blocking") and words.has("name:pin_memory") and words.has("name~Thread")
    assert words.has("str~CUDA_VISIBLE_DEVICES") and words.has("str^0") and not words.has("str^nothing")
    assert words.satisfies(()) and words.satisfies((("call:cuda", "name:nothing"), ("name:T",)))
    assert not words.satisfies((("call:cuda",), ("name:nothing",)))


def test_call_shape_tokens():
    """``bare:`` (a method called with no device), ``stmt:`` (a call as a statement) and
    ``nomap@N:`` (a loader call without map_location), with the module's imports."""
    words = CodeWords(ast.parse(
        "import torch as th\nfrom torch import load as tload\nfrom torch.cuda import device\n"
        "x.cuda(0)\ny.cuda(device=d)\nz.cuda(*a)\nw = th.load(p, 'cpu')\nv = tload(p, map_location=m)\n"
        "u = th.load(**kw)\nwith device(1):\n    ctx = th.cuda.device(0)\n"))
    assert words.has("call:cuda") and not words.has("bare:cuda")
    assert not words.has("nomap@1:torch.load") and not words.has("stmt:torch.cuda.device")
    words = CodeWords(ast.parse(
        "import torch as th\nfrom torch import load as tload\nfrom torch.cuda import device\n"
        "x.cuda(None, True)\nv = tload(p)\ndevice(1)\n"))
    assert words.has("bare:cuda") and words.has("nomap@1:torch.load") and words.has("stmt:torch.cuda.device")
    assert not words.has("nomap@1:torch.jit.load") and not words.has("stmt:torch.load")
    words = CodeWords(ast.parse("import torch\nsd = torch.hub.load_state_dict_from_url(u, d)\n"))
    assert words.has("nomap@2:torch.hub.load_state_dict_from_url")
    assert not words.has("nomap@1:torch.hub.load_state_dict_from_url")


@pytest.mark.parametrize("code, placed", [
    ("x.cuda(0)", True), ("x.cuda(device=1)", True), ("torch.device('cuda')", True),
    ("D('cuda:1', non_blocking=True)", True),  # any function: `from torch import device as D`
    ("x.to('cuda' if ok else 'cpu')", True), ("torch.zeros(2, device='cuda:0')", True),
    ("f(*a, 'cuda')", True),  # the first positional the analysis sees
    ("x.cuda()", False), ("x.cuda(True)", False), ("x.cuda(gpu)", False), ("x.to(device)", False),
    ("if d == 'cuda':\n    pass", False), ("torch.device('cudax')", False), ("x.to(f'cuda:{k}')", False),
    ("x.cuda(-1)", False), ("torch.zeros(2, device=b'cuda')", False),
])
def test_the_placement_token_is_what_the_analysis_calls_a_placement_on_a_gpu(code, placed):
    assert CodeWords(ast.parse("import torch\n" + code + "\n")).has("place:cuda") is placed


_COUNT, _ASSERTED = "factor:count", "stmt:torch.cuda.is_available"


@pytest.mark.parametrize("token, code, found", [
    (_ASSERTED, "use_cuda = torch.cuda.is_available()\nassert use_cuda", True),
    (_ASSERTED, "use_cuda = torch.cuda.is_available()\nassert use_cuda is True, 'a GPU'", True),
    (_ASSERTED, "use_cuda = torch.cuda.is_available()\nassert use_cuda == True", True),
    (_ASSERTED, "use_cuda = torch.cuda.is_available()\nif use_cuda:\n    pass", False),
    (_ASSERTED, "use_cuda = torch.cuda.is_available()\nassert use_cuda or cpu", False),
    (_ASSERTED, "use_cuda = flag()\nassert use_cuda", False),
    (_COUNT, "bs = args.batch_size * torch.cuda.device_count()", True),
    (_COUNT, "steps = n // (bs * torch.cuda.device_count())", True),
    (_COUNT, "ngpu = torch.cuda.device_count()\nlr = 0.1 * ngpu", True),
    (_COUNT, "ngpu = torch.cuda.device_count()\nif ngpu > 1:\n    pass", False),
    (_COUNT, "ids = range(torch.cuda.device_count())\nr = rank + torch.cuda.device_count()", False),
    (_COUNT, "r = rank % torch.cuda.device_count()", True),  # (a divisor: DETR's SLURM branch)
    (_COUNT, "n = 4\nbs = 2 * n", False),
])
def test_tokens_that_follow_a_name(token, code, found):
    """An assertion through a name is a statement of its call (``stmt:``); a GPU count
    multiplied or divided by, inline or through a name (``factor:count``)."""
    assert CodeWords(ast.parse("import torch\n" + code + "\n")).has(token) is found


@pytest.mark.parametrize("code, found", [
    ("def work(x):\n    return x.cuda()\nthreading.Thread(target=work).start()", True),
    ("def work(x):\n    return x.to(dev)\npool.submit(partial(work, 1))", True),
    ("class L(threading.Thread):\n    def run(self):\n        self.t = torch.zeros(1, device='cuda')", True),
    ("pool.map(lambda t: t.pin_memory().cuda(), xs)", True),
    ("def load(p):\n    return DataLoader(p, pin_memory=True)\nex.submit(lambda: load(p))", False),  # (pinning)
    ("pool.map(lambda t: t.pin_memory(), xs)", False),
    ("from threading import Thread as T\ndef w():\n    torch.zeros(1).cuda()\nT(target=w)", True),
    ("def work(x):\n    return x.cuda()\nwork(1)\nthreading.Thread(target=print).start()", False),
    ("def work(x):\n    return x.to(torch.float16)\nthreading.Thread(target=work).start()", False),
    ("def work(x):\n    return x + 1\ny = torch.zeros(1).cuda()\npool.submit(work, y)", False),
])
def test_the_thread_token_looks_at_what_threads_are_handed(code, found):
    assert CodeWords(ast.parse("import threading, torch\n" + code + "\n")).has("thread:cuda") is found


@pytest.mark.parametrize("code, found", [
    ("def w(i):\n    pass\nmp.Process(target=w, args=(0,))", True),
    ("from multiprocessing import Process as P\ndef w():\n    pass\nP(None, w)", True),
    ("class W(mp.Process):\n    def run(self):\n        pass", True),
    ("class T:\n    def go(self):\n        mp.get_context('spawn').Process(target=self.work)", True),
    ("mp.Process(target=partial(w, 1))", True),
    ("mp.Process(target=lambda: w())", True),
    ("mp.Process(**kwargs)", True),
    ("Proc = mp.Process\ndef w():\n    pass\nProc(target=w)", True),
    ("def run(target_func):\n    ctx.Process(target=target_func)", False),  # a parameter: no function here
    ("import psutil, os\np = psutil.Process(os.getpid())", False),  # no target
    ("from os import getpid\nmp.Process(target=getpid)", False),  # an import
    ("class P(Processor):\n    pass", False),
])
def test_the_process_token_wants_a_target_of_this_file(code, found):
    tree = ast.parse("import multiprocessing as mp\n" + code + "\n")
    assert CodeWords(tree).has("target:Process") is found


@pytest.mark.parametrize("code, found", [
    ("class A:\n    def cuda(self):\n        return self.x.cuda()\ny = t.cuda()", True),
    ("class A:\n    def cuda(self):\n        return self.x.cuda()", False),
    ("class A:\n    def cuda(self):\n        return self._convert(func=lambda x: x.cuda())", False),
    ("class A:\n    async def cuda(self):\n        def move(t):\n            return t.cuda(non_blocking=True)\n"
     "        return move(self.x)", False),
    ("def cuda(x):\n    return x.cuda()", True),  # a function, no class's override
    ("class A:\n    def cuda(self):\n        class B:\n            def go(self):\n                return t.cuda()\n"
     "        return B()", True),
    ("class A:\n    def to_gpu(self):\n        return self.x.cuda()", True),
    ("class A:\n    def cuda(self):\n        return self.x.cuda(0)", False),
])
def test_the_bare_cuda_token_leaves_out_a_class_s_own_cuda_method(code, found):
    assert CodeWords(ast.parse(code + "\n")).has("bare:cuda") is found


def test_every_rule_declares_a_well_formed_gate():
    for rule in RULES:
        check_tokens(rule.needs)
    with pytest.raises(ValueError):
        check_tokens((("cal:cuda",),))
    with pytest.raises(ValueError):
        check_tokens(((),))


def test_check_of_a_clean_file_imports_neither_the_rules_nor_libcst(tmp_path):
    """The one-file run of pre-commit and editors: the screen answers a file no rule can
    match without the engine; a file that may match imports it."""
    import subprocess
    import sys

    clean = tmp_path / "clean.py"
    clean.write_text('import torch\n"""Call x.cuda() here."""\nURL = "https://download"\ndef f(t: torch.Tensor):\n    return t + 1\n')
    dirty = tmp_path / "dirty.py"
    dirty.write_text("import torch\nx = torch.zeros(1).cuda()\n")
    probe = (
        "import sys\nfrom torchdevlint.cli import main\n"
        "rc = main(['check', '--no-cache', '-q', sys.argv[1]])\n"
        "print(rc, 'libcst' in sys.modules, any(m.startswith('torchdevlint.rules') for m in sys.modules))\n"
    )
    for path, expected in ((clean, "0 False False"), (dirty, "1 True True")):
        out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, cwd=tmp_path)
        assert out.stdout.split("\n")[-2] == expected, out.stdout + out.stderr


LOADS = ["torch.load(p)", "import torch as th\nth . load(p)", "import torch.jit \\\n  as J\nJ.load(p)",
         "from torch import (\n  jit  # (x)\n  as J)\nJ.load(p)", "(torch).load(p)", "x[0].load(p)",
         "import torch as 火\n火.load(p)", "x = (torch.\n   load(p))", "torch.\\\nload(p)", "from torch import load",
         "from torch import (\n    jit,  # a comment: with. punctuation\n    load,\n)", "torch.jit.load(p)",
         "from torch.hub import load_state_dict_from_url", "from torch import jit as J, load as L",
         "from torch import hub\nsd = hub.load_state_dict_from_url(u)", "from torch.serialization import load",
         "from torch import (\n    load)", "return (torch).load(p)", "x = (torch\n  ).load(p)", "x = [torch][0].load(p)",
         "x = f(')').load(p)", "from \\\n  torch import load"]
NOT_LOADS = ["model.load_state_dict(sd)", "download(url)", "import json\njson.load(f)",
             "import numpy as np\nimport torch\nx = np.load(p)", "import torch\nself.model.load(p)", "def load(path):\n    return 1\n\nload(p)",
             "import os\nloaded = 1", "x = reload(m)",
             "import torch\nmodel = torch.hub.load('ultralytics/yolov5', 'yolov5s')",
             "import torch\nfrom mmengine.fileio import load\nx = load(p)", "from .io import load\nx = load(p)",
             "import torch\nstate = CPUAdamBuilder().load()", "import torch\nx = a.b(c)(d).load()"]


@pytest.mark.parametrize("text", LOADS)
def test_the_load_prefilter_keeps_every_way_to_reach_torch_load(text):
    from torchdevlint.catalogue import TEXT_TESTS

    assert TEXT_TESTS["load"](text) and TEXT_TESTS["load"](text.encode())


@pytest.mark.parametrize("text", NOT_LOADS)
def test_the_load_prefilter_drops_files_that_only_say_load_otherwise(text):
    from torchdevlint.catalogue import TEXT_TESTS

    assert not TEXT_TESTS["load"](text) and not TEXT_TESTS["load"](text.encode())


@pytest.mark.parametrize("text, expected", [
    ("model = nn.DataParallel(model)", True), ("from torch.nn import DataParallel as DP", True),
    ("class P(torch.nn.parallel.DataParallel):\n    pass", True),
    ("model = DistributedDataParallel(model)", False), ("from torch.distributed.fsdp import FullyShardedDataParallel", False),
])
def test_the_data_parallel_prefilter_wants_the_word_itself(text, expected):
    from torchdevlint.catalogue import TEXT_TESTS

    assert TEXT_TESTS["data-parallel"](text) is expected and TEXT_TESTS["data-parallel"](text.encode()) is expected


# Each text test of the prefilter against the gate group it stands for: wherever the code
# passes the gate, the text passes the test (str and bytes: a necessary condition), and
# the test drops texts the plain substring let through.
def _group(code: str, index: int):
    from torchdevlint.catalogue import RULES

    return (RULES[code][3][index],)


TEXT_GATES = [
    ("bare-cuda", _group("TDL001", 0),
     ["x.cuda()", "x.cuda(None)", "x.cuda(\n    non_blocking=True)", "x.cuda ( )", "x.cuda(  # move\n)",
      "x.cuda(device=None)", "x.cuda\\\n()", "m.cuda(memory_format=torch.channels_last)", "x.cuda(None, True)"],
     ["x.cuda(0)", "x.cuda(args.gpu)", "torch.cuda.synchronize()", "y = x.is_cuda", "f(x.cuda)"]),
    ("gpu-use", _group("TDL003", 0),
     ["x.cuda(0)", "torch.device('cuda:1')", 'x.to("cuda")', "torch.zeros(1, device='cuda:0')", "x.cuda()",
      "torch.device('cuda' if c else 'cpu')", "x.cuda(device=1)", "torch.ones(2, device='cuda')"],
     ["x.cuda(args.gpu)", "torch.cuda.synchronize()", "name = 'cudagraph'", "x.to(device)", "x = 'mycuda'",
      "f(my_device=0)"]),
    ("cuda-type", _group("TDL005", 0),
     ["import torch\nx = torch.cuda.FloatTensor(2)", "from torch.cuda import FloatTensor as FT\nx = FT(2)",
      "import torch.cuda as C\nx = C.FloatTensor(2)", "from torch import cuda\nx = cuda.FloatTensor(2)",
      "import torch as th\nx = th.cuda.FloatTensor(2)",
      "x = y.type('torch.cuda.FloatTensor')", "from torch import cuda as K\nx = K.LongTensor(1)"],
     ["import torch\ndef f(x: torch.FloatTensor):\n    return x.cuda()", "x = torch.FloatTensor(2).cuda()",
      "import mycuda\nx = mycuda.FloatTensor(2)", "import torch.cudax as c\nx: torch.Tensor"]),
    ("gpu-ordinal", _group("TDL003", 0),
     ["torch.zeros(1, device=0)", "pipe = pipeline('fill-mask', device = 1)", "f(x,\n  device=\\\n  2)"],
     ["f(num_device=0)", "f(device=d0)", "f(devices=0)"]),
    ("rank-launch", _group("TDL003", 1),
     ["import torch.multiprocessing as mp\nmp.spawn(f, nprocs=2)", "from multiprocessing import Pool\nPool(2)",
      "import torch.distributed as dist\ndist.init_process_group('nccl')", "import os\nr = os.environ['LOCAL_RANK']",
      "launch(main, 2)", "import multiprocessing as m\ndef f():\n    pass\nm.Process(target=f).start()",
      "from torch.distributed.elastic.multiprocessing import start_processes\nstart_processes(f)"],
     ["import torch.nn as nn\nnn.MaxPool2d(2)", "class DataProcessor:\n    pass", "y = preprocess(x)",
      "x = spawning_rate", "# 2. Process the new logits\nx = 1", "y = f(x)  # (a Pool of them)",
      'def f():\n    """\n    >>> spawn(f)\n    """']),
    ("rank-device", (("place:rank",),),
     ["x.to(rank)", "torch.device(args.local_rank)", "x.to(device=args.gpu)", "torch.load(p, map_location=rank)",
      "DDP(m, device_ids=[args.local_rank], output_device=args.local_rank)", "x.to(\n    self.Local_Rank)",
      "y = torch.zeros(1, device=cfg.gpu_id)"],
     ["x.to(device)", "DDP(m, device_ids=None)", "f = my_device(rank)", "Device = GPU", "x.to(ranking)"]),
    # a call given map_location= at its own level, a comment, a doctest: no load the gate passes
    ("load", _group("TDL006", 0),
     ["import torch\nx = torch.load(p)", "import torch\nx = torch.load(g(map_location='cpu'))",
      "import torch\nx = torch.load(p)  # map_location='cpu'", "import torch\nx = torch.load(\n    p,  # (map_location=)\n)",
      "import torch\ns = '#'; x = torch.load(p)", "import torch\nx = torch.load(f'{p}', )",
      "import torch\nx = torch.load(p, map_location='cpu')\ny = torch.load(q)",
      "import torch\nx = torch.load(open(p, 'rb'))", "import torch\nx = torch.load(p, my_map_location=1)"],
     ["import torch\nx = torch.load(p, map_location='cpu')", "import torch\nx = torch.load(')', map_location=d)",
      "import torch\nx = torch.load(\n    p,  # a comment )\n    map_location=lambda s, l: s,\n)",
      "import torch\n# x = torch.load(p)", "import torch\nx = 1  # torch.load(p)",
      'def f():\n    """\n    >>> x = torch.load(p)\n    """', "import torch\nx = torch.jit.load(p, map_location=d)"]),
    # a device context called as a statement of its own, however spelled; not one entered,
    # assigned, passed, a device object, another name ending in `device`, a comment
    ("device-context", _group("TDL103", 0),
     ["import torch\ntorch.cuda.device(1)", "import torch as th\nth . cuda . device (1)",
      "import torch\ntorch.cuda \\\n    .device(1)", "import torch\nif x: torch.cuda.device(1)",
      "import torch\nx = 1; torch.cuda.device(1)", "import torch\n(torch.cuda.device(1))",
      "from torch.cuda import device\ndevice(1)", "from torch.cuda import device as cuda_device\ncuda_device(1)",
      "import torch.cuda as C\nC.device_of(t)", "from torch import accelerator\naccelerator.device_index(0)",
      "import torch\ndef f(t):\n    torch.cuda.device_of(t)", "import torch\ns = '#'; torch.cuda.device(1)",
      "from torch import cuda as 火\n火.device(1)", "import torch\nwith x:\n    torch.cuda.device(\n        1)"],
     ["import torch\nwith torch.cuda.device(1):\n    pass", "import torch\nctx = torch.cuda.device(1)",
      "import torch\nd = torch.device('cuda', 1)", "import torch\nn = torch.cuda.device_count()",
      "import torch\nf(torch.cuda.device(1))", "import torch\n# torch.cuda.device(1)",
      "import torch\nx = 1  # torch.cuda.device(1)", "import torch\nreturn_ = get_device(1)",
      "import torch\nwith a, torch.cuda.device(1):\n    pass", "@torch.cuda.device(1)\ndef f():\n    pass",
      "def device(self):\n    return 1", "x = [torch.device('cuda')]"]),
    # a move as a statement of its own, on a chain of names, attributes and items; not one
    # assigned, returned or passed, a temporary, one in a comment
    ("dropped-move", _group("TDL009", 0),
     ["x = torch.zeros(1)\nx.cuda()", "def f(self):\n    self.mean.to(d, non_blocking=True)\nself.mean = m",
      "x = t()\nif ok: x.cuda()", "x = 1; x = y; x.cuda()", "for batch in loader:\n    batch[i].cuda()",
      "x = f()\nx['a'].cuda()", 'state = s\nstate["exp_avg"].to(d)', "x = t\n(x).cuda()", "x = t\n(x\n    .cuda())",
      "with t() as x:\n    x \\\n        .to(d)", "x, y = b\nx[f(i)].cuda()", "for t in ts:\n    t.to(d)",
      "w = torch.FloatTensor([1])\nw.cuda()", "x = y.to(d)\nx.to(**kw)"],
     ["y = x.cuda()", "f(x.to(d))", "return x.cuda()", "# x.cuda()", "x = 1  # x.cuda()",
      "y = x.total()", "model = Net().to(d)", "print(x.cpu())"]),
]


@pytest.mark.parametrize("name, group, code", [(n, g, c) for n, g, yes, _ in TEXT_GATES for c in yes])
def test_a_text_test_lets_through_what_the_gate_lets_through(name, group, code):
    from torchdevlint.catalogue import TEXT_TESTS
    from torchdevlint.words import CodeWords

    assert CodeWords(ast.parse(code), code).satisfies(group), "the example must pass the gate itself"
    assert TEXT_TESTS[name](code) and TEXT_TESTS[name](code.encode())


@pytest.mark.parametrize("name, code", [(n, c) for n, _, _, no in TEXT_GATES for c in no])
def test_a_text_test_drops_what_no_gate_would_pass(name, code):
    from torchdevlint.catalogue import TEXT_TESTS

    assert not TEXT_TESTS[name](code) and not TEXT_TESTS[name](code.encode())


def test_the_prefilter_reads_the_launch_words_only_where_the_text_uses_a_gpu():
    """TDL003's two lists: the GPU uses (one pattern each) are tested before the process
    launchers and rank markers (a substring each): the cheaper list first."""
    from torchdevlint.catalogue import RULES, _plan, _words

    _, triggers, also, _ = RULES["TDL003"]
    assert _plan(triggers, also, str) == (_words(triggers, str), _words(also, str))
    assert _plan(triggers, also, bytes)[0] == _words(triggers, bytes)


@pytest.mark.parametrize("kind", [str, bytes])
def test_one_prefilter_over_many_rules_answers_as_each_rule_alone(kind):
    """``may_match`` keeps each word's answer across the rules it tries: the same verdict,
    per rule and in all, as each rule's own test on every fixture and rule example."""
    from torchdevlint.catalogue import CODES, TOOL_CODES, may_fire, may_match

    codes = [c for c in CODES if c not in TOOL_CODES]
    texts = [p.read_text(encoding="utf-8") for p in fixture_programs()]
    texts += list(v for r in RULES for v in r.VALID) + [e.code for r in RULES for e in r.INVALID]
    texts += ["import os\nprint(os.sep)\n"]
    for text in texts:
        data = text if kind is str else text.encode()
        alone = {c for c in codes if may_fire(c, data)}
        assert may_match(data, codes) is bool(alone)
        assert {c for c in codes if may_match(data, [c])} == alone


def test_the_gate_s_walk_meets_every_node_ast_walk_does_but_contexts_and_operators():
    """``words.walk`` skips what no gate reads as a node (``Load``, ``Add``, ``Eq``...):
    every other node, in ``ast.walk``'s order, on every fixture and rule example, and on
    the syntax a fixture may lack (match, f-strings, walrus, decorators, type params)."""
    import sys

    from torchdevlint.words import walk

    texts = [p.read_text(encoding="utf-8") for p in fixture_programs()]
    texts += list(v for r in RULES for v in r.VALID) + [e.code for r in RULES for e in r.INVALID]
    texts.append("match x:\n    case [a, *rest] if (n := len(rest)) > 1:\n        f'{a!r:>{n}}'\n"
                 "    case {'k': v, **kw}:\n        pass\n    case C(y=1) as z:\n        pass\n"
                 "@dec(1)\nasync def g(*a, b=2, **k) -> int:\n    async with m as q:\n        await q\n"
                 "    return [i async for i in q if not i]\ntry:\n    pass\nexcept* E as e:\n    del e\n")
    if sys.version_info >= (3, 12):
        texts.append("type A[T] = list[T]\ndef f[T: int](x: T) -> T:\n    return x\n")
    skipped = (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)
    for text in texts:
        tree = ast.parse(text)
        assert list(walk(tree)) == [n for n in ast.walk(tree) if not isinstance(n, skipped)], text


def test_the_dropped_move_gate_reads_the_receivers_bindings_and_the_target():
    """TDL009's gate: a statement that moves what some binding may make a tensor, to a
    device; not a module built by a class (`model = Net()`), a parameter only, another
    object's attribute, a dtype alone or the CPU (which the rule leaves alone)."""
    from torchdevlint.words import CodeWords

    def has(code, token="drop:to"):
        return CodeWords(ast.parse(code), code).has(token)

    assert has("x = torch.zeros(1)\nx.to(d)") and has("x = torch.zeros(1)\nx.cuda()", "drop:cuda")
    assert has("for x, y in loader:\n    y.to(d)") and has("x = Net()\nx = x.half()\nx.to(d)")
    assert has("w = torch.FloatTensor([1])\nw.to(d)") and has("x = torch.zeros(1)\nx.to(**kw)")
    assert not has("model = Net()\nmodel.to(d)")
    assert not has("self.fc = nn.Linear(2, 2).to(d)\nself.fc.to(d)")
    assert not has("def f(x):\n    x.to(d)") and not has("args.x.to(d)")
    assert not has("x = torch.zeros(1)\nx.to(torch.float16)") and not has("x = torch.zeros(1)\nx.to(dtype=t)")
    assert not has("x = torch.zeros(1)\nx.to('cpu')") and not has("x = torch.zeros(1)\nx.to(torch.device('cpu'))")

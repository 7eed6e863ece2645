"""TDL006 load-without-map-location: ``torch.load`` without ``map_location``."""

from __future__ import annotations

import ast
import re
from typing import Iterable, List, Optional

import libcst as cst

from ..analysis import CallSite, is_none, names_in, walk
from ..analysis.facts import dotted_name
from ..model import Applicability, Fix, Violation
from .base import Context, Example, Rule, Uninsertable
from .portability import torch_for_test

# accelerators other than CUDA that a module may save tensors from (their devices are no CUDA's)
_OTHER_ACCELERATORS = re.compile(r"(?i)\b(?:torch_xla|xla|tpu|mps|xpu|hpu|npu|habana)\b")
# what a library function's load gets where nothing says where its tensors go (the examples)
FALLBACK = 'map_location=None if torch.cuda.is_available() else "cpu"'
# loader -> the position of map_location among its positional parameters
LOADERS = {
    "torch.load": 1,
    "torch.serialization.load": 1,
    "torch.jit.load": 1,
    "torch.hub.load_state_dict_from_url": 2,
}


class LoadWithoutMapLocation(Rule):
    code = "TDL006"
    name = "load-without-map-location"
    summary = "`torch.load` without `map_location` restores tensors onto the GPU they were saved from"
    triggers = ("@load",)  # the word `load` after a dot or in an import list (see catalogue)
    also_requires = ("torch",)
    # the gate on the code: a call of one of the loaders that passes no map_location
    needs = (tuple(f"nomap@{position}:{q}" for q, position in LOADERS.items()),)
    fixable = "sometimes"
    fix_summary = ('`map_location=<device in scope>`, `"cpu"` where what it loads only reaches '
                   '`load_state_dict` (filtered, copied) and in CPU-only scripts, or the device a script or a '
                   'function that computes on the GPU defines; in other library functions `None if '
                   'torch.cuda.is_available() else "cpu"` (unsafe); display at a library\'s module level')
    what = """
        `torch.load`, `torch.jit.load` and `torch.hub.load_state_dict_from_url` called
        without `map_location` (neither by keyword nor in its position), and without
        `**kwargs` that could carry it. Not in the methods of a dataset class (one
        named `...Dataset`, as OGB's `LinkPropPredDataset(object)`, or with a base so
        named: `torch.utils.data.Dataset`, `FairseqDataset`, `VisionDataset`, here or
        through this file's classes), nor in a private helper of the module that only
        such methods call (`_try_load(path)`): what a dataset loads is
        the data its items are cut from, statistics or a preprocessed cache, which
        DataLoader workers index in other processes, where CUDA tensors cannot go: CPU
        tensors, saved from the CPU. Nor a load named as data: a vocabulary, a corpus or
        a dataset's preprocessed files (torchvision's and PyG's `processed_folder`,
        `processed_paths`, a `processed/` folder) in its path or the name it binds (`vocab =
        torch.load(opt.data + '.vocab.pt')`, `corpus_dict = torch.load(corpus_file)`), a
        dataset in the name it binds
        (`dataset = torch.load(shard)`) or in the file its path names (`cache_dir /
        "train_dataset"`, `dev_dataset_path`; not a folder: `dataset_dir`):
        preprocessing builds those on the CPU. Nor a
        load of training state that holds no CUDA tensor: an LR scheduler's or a
        GradScaler's state (`scheduler.load_state_dict(torch.load(p))`, a path or a
        name that says `scheduler` or `scaler`, a method of a class named
        `...Scheduler`), Apex's `amp` state (its loss scalers: `amp.load_state_dict(
        torch.load(p))`, `amp` as a word in the path or the name), an optimizer's param groups (its
        hyperparameters: `param_group` in the path or the name, as ColossalAI saves
        them apart from the state): Python numbers; RNG states (`rng` in the path or
        the name, or a function named for loading them: `load_random_states`;
        `torch.cuda.get_rng_state()` is a CPU tensor too); metadata and
        arguments (`metadata` or `kwargs` in the path or the name, `args` as the name
        bound or the file's own: `init_kwargs = torch.load(metadata_path)`,
        `torch.load(os.path.join(out, "training_args.bin"))`; not `args.checkpoint`).
        Nor a download
        of torchvision's published weights, which it saves from the CPU and reads with no
        `map_location` itself: a URL that torchvision names (`model_urls[...]` imported
        from `torchvision.models...`, a weights enum's `.url`) or one at
        `https://download.pytorch.org/models/` (a string, or a table of them written out
        in the file, read by `urls[arch]`, `urls.get(arch)` or a lookup helper given the
        table and no other address). Nor
        where the same function has just saved what it loads (`torch.save(obj, p)`
        then `torch.load(p)`, a `BytesIO` deep copy (or a copy of its bytes,
        `io.BytesIO(buf.getvalue())`), a ScriptModule's `m.save(p)` then
        `torch.jit.load(p)`, a `trainer.save(path=d)` then `torch.load(os.path.join(d,
        ...))`): the process
        reads its own tensors back onto devices it has. Nor in a method of a class whose
        every `torch.save` (in its other methods) writes from the CPU (ctgan's `save`:
        `self.set_device(torch.device("cpu"))`, then `torch.save(self, path)`; `model.cpu()`
        first, or `{k: v.cpu() for ...}` as it saves): what the class writes loads
        anywhere. Nor a load-or-build cache (`if
        os.path.exists(p): x = torch.load(p)`, `else: x = build(); torch.save(x, p)`, or
        the load in a `try` and the build in its `except`): either arm leaves `x` holding
        what this code builds, where it builds it; so too where the cache returns
        either (`if os.path.exists(p): return torch.load(p)`, then `x = build()`,
        `torch.save(x, p)`, `return x`; or the build, the save and `return x` in the
        `if`, and `return torch.load(p)` after it). Neither exception holds in code that
        runs once per rank, where rank 0 saves and every rank loads onto rank 0's GPU.
        Nor, in a test (a `test...` function, or a module that imports pytest or
        unittest), a path built from a fresh temporary directory (pytest's `tmpdir` or
        `tmp_path`, `tempfile.mkdtemp()`, `TemporaryDirectory()`, `NamedTemporaryFile()`)
        or from what the test made with one (`trainer = Trainer(default_root_dir=tmpdir)`,
        then `torch.load(trainer.checkpoint_callback.best_model_path)`): the run under
        test wrote that file on this machine. Outside tests a fresh directory may hold a
        download.
    """
    why = """
        Without `map_location`, every tensor goes back to the device it was saved from:
        a checkpoint written on `cuda:0` fails to load on a machine without CUDA
        ("Attempting to deserialize object on a CUDA device"), and in a multi-GPU job
        every rank materialises its copy on GPU 0 — memory on the first card, and a
        CUDA context there for every process.
    """
    example = """
        checkpoint = torch.load("model.pt")
        model.load_state_dict(torch.load("weights.pt"))
    """
    use_instead = """
        checkpoint = torch.load("model.pt", map_location=device)
        model.load_state_dict(torch.load("weights.pt", map_location="cpu"))
    """
    fix_safety = """
        Always **unsafe**: where the tensors land changes on purpose. With a device bound
        in scope (the names TDL004 recognises), `map_location=<that device>`. Without
        one, `map_location="cpu"` where the result only feeds `load_state_dict` or a
        Hugging Face `from_pretrained(..., state_dict=...)`, which loads it into the model
        it builds (directly, an entry of it, `torch.load(p)["state_dict"]`, or through the names,
        entries, copies and loops it flows into: the usual filtering of pretrained
        weights, `{k: v for k, v in sd.items() if k in model_dict}` then
        `model_dict.update(...)`, a loop that strips `module.` into an `OrderedDict`),
        all of whose other uses only look at it: a membership test `'version' in ckpt`,
        its keys, length, a tensor's shape, an entry dropped (`sd.pop(k)`), a message
        (`print(ckpt['version'])`, `f"{ckpt['epoch']}"`, a name only messages use), or
        a counter the checkpoint keeps (`start_epoch = ckpt['epoch'] + 1`, a Python
        int): `load_state_dict` copies into the model's own tensors wherever they live,
        so the CPU detour changes nothing but the peak GPU memory. Otherwise, in a
        script that places work on the GPU itself (a bare `.cuda()`, a legacy CUDA
        type), `map_location=device` with the device defined where the script starts
        (the one definition TDL001 and TDL005 use, CPU fallback included): the
        checkpoint lands on the device the script computes on, GPU 0 on a GPU machine
        as before, and it loads without CUDA (`device if args.cuda else "cpu"` where
        every placement is under one flag's `if args.cuda:`, as the PyTorch examples of
        2017 wrote them: without the flag the work stays on the CPU, and so does the
        checkpoint; not where the flag is another function's variable, which the load
        could not read); in a script that places nothing on a GPU
        (a checkpoint converter), `map_location="cpu"`.
        In a library module, where a function computes on the GPU itself (a bare
        `.cuda()`, a legacy CUDA type: a checkpoint's model rebuilt and moved),
        `map_location=device` with the device TDL001 defines in that function (CPU
        fallback, asked when the function runs); in its other functions, whose callers
        may rely on the tensors being where they were saved, `map_location=None if
        torch.cuda.is_available() else "cpu"`: where CUDA is, `None` is torch's own
        default (every tensor on the GPU it was saved from, as before), and without it
        the checkpoint loads on the CPU instead of failing (display-only in a module that
        also serves another accelerator, XLA, MPS, XPU...: its tensors would go to the
        CPU too). At a library's module level the question would run at every import:
        display-only.
    """
    VALID = (
        "import torch\nx = torch.load('a.pt', map_location='cpu')\n",
        "import torch\nx = torch.load('a.pt', 'cpu')\n",
        "import torch\nx = torch.jit.load('m.pt', map_location=device)\n",
        "import torch\nsd = torch.hub.load_state_dict_from_url(url, None, 'cpu')\n",
        # torchvision's published weights, saved from the CPU: named by torchvision (torchdistill's
        # detectors), or its download address in a table of this file's (MONAI's DenseNet)
        "from torch.hub import load_state_dict_from_url\n"
        "from torchvision.models.detection.faster_rcnn import model_urls as fasterrcnn_model_urls\n"
        "def detector(model):\n"
        "    sd = load_state_dict_from_url(fasterrcnn_model_urls['fasterrcnn_resnet50_fpn_coco'])\n"
        "    model.load_state_dict(sd)\n",
        "import torch\nfrom torchvision.models import ResNet50_Weights\n"
        "sd = torch.hub.load_state_dict_from_url(ResNet50_Weights.IMAGENET1K_V1.url)\n",
        "from torch.hub import load_state_dict_from_url\n"
        "def densenet(arch):\n    model_urls = {'densenet121': 'https://download.pytorch.org/models/densenet121-a639ec97.pth'}\n"
        "    model_url = look_up_option(arch, model_urls, None)\n    return load_state_dict_from_url(model_url)\n",
        "import torch\ndef f(path, **kw):\n    return torch.load(path, **kw)\n",
        "import json\nx = json.load(open('a.json'))\n",
        "import pickle\nimport torch\nx = pickle.load(fh)\n",
        # a dataset's own cache (catalyst's MNIST: written by its `process()` from numpy)
        "import torch\nfrom torch.utils.data import Dataset\nclass MNIST(Dataset):\n"
        "    def __init__(self, path):\n        self.data, self.targets = torch.load(path)\n",
        "import torch\nimport torch.utils.data as data\nclass Base(data.Dataset):\n    pass\n"
        "class Faces(Base):\n    def __init__(self, opt):\n        self.components = torch.load(opt['path'])\n",
        # training state without CUDA tensors: a scheduler's, a scaler's, RNG states (Hugging Face's Trainer)
        "import torch\n\n\ndef load_random_states(root_folder, rank):\n"
        "    state = torch.load(root_folder / 'random' / f'rank-{rank}.pt')\n    return state\n",
        "import os\nimport torch\n\n\ndef resume(checkpoint, scheduler, scaler):\n"
        "    scheduler.load_state_dict(torch.load(os.path.join(checkpoint, SCHEDULER_NAME)))\n"
        "    scaler.load_state_dict(torch.load(os.path.join(checkpoint, 'scaler.pt')))\n"
        "    checkpoint_rng_state = torch.load(rng_file)\n    torch.set_rng_state(checkpoint_rng_state['cpu'])\n",
        # metadata and arguments (Hugging Face's training_args.bin, neuraloperator's init
        # kwargs, jiant's cache arguments)
        "import os\nimport torch\n\n\ndef resume(args, folder, cache):\n"
        "    training_args = torch.load(os.path.join(args.output_dir, 'training_args.bin'))\n"
        "    init_kwargs = torch.load(os.path.join(folder, 'model_metadata.pkl'))\n"
        "    return training_args, init_kwargs, torch.load(os.path.join(cache, 'data_args.p'))['length']\n",
        # Apex's mixed-precision state: its loss scalers' numbers (Sockeye's training state)
        "import os\nimport torch\nimport apex\n\n\ndef resume(folder):\n"
        "    apex.amp.load_state_dict(torch.load(os.path.join(folder, C.APEX_AMP_STATE_NAME)))\n",
        # a scheduler class's own loader (SpeechBrain's NewBobScheduler: its counters and rates)
        "import torch\nclass NewBobScheduler:\n    def save(self, path):\n"
        "        torch.save({'hyperparam_value': self.hyperparam_value}, path)\n\n    def load(self, path):\n"
        "        data = torch.load(path)\n        self.hyperparam_value = data['hyperparam_value']\n",
        "import torch\ndef load_optimizer(optimizer, index):\n"
        "    saved_param_groups = torch.load(index.param_group_path)\n"
        "    optimizer.load_param_groups(saved_param_groups)\n",
        # a private helper only the file's dataset methods call (Lightning's test MNIST)
        "import os\nimport torch\nfrom torch.utils.data import Dataset\n\n\ndef _try_load(path, trials=30):\n"
        "    for _ in range(trials):\n        try:\n            return torch.load(path)\n"
        "        except Exception:\n            continue\n\n\nclass MNIST(Dataset):\n"
        "    def __init__(self, root):\n"
        "        self.data, self.targets = _try_load(os.path.join(root, 'training.pt'))\n",
        # through a generic base of this file's (pykeen's `OGBWikiKG2(OGBLoader[TrainDict, EvalDict])`)
        "import torch\nfrom typing import Generic, TypeVar\nfrom pykeen.datasets.base import LazyDataset\n"
        "T = TypeVar('T')\nclass OGBLoader(LazyDataset, Generic[T]):\n    pass\n"
        "class OGBWikiKG2(OGBLoader[dict]):\n    def _load(self, path):\n        return torch.load(path)\n",
        # a dataset class by its own name (OGB's split files, read by a plain `object` subclass)
        "import os\nimport torch\nclass LinkPropPredDataset(object):\n    def get_edge_split(self, path):\n"
        "        if os.path.isfile(os.path.join(path, 'split_dict.pt')):\n"
        "            return torch.load(os.path.join(path, 'split_dict.pt'))\n"
        "        return {'train': torch.load(os.path.join(path, 'train.pt'))}\n",
        # what the same function has just saved, read back by the same process (Opacus' deep
        # copy through a buffer, a test's round trip, a trainer's `save` of a directory)
        "import io\nimport torch\ndef clone(module):\n    buf = io.BytesIO()\n    torch.save(module, buf)\n"
        "    buf.seek(0)\n    return torch.load(buf)\n",
        # a test reads back what the run under test wrote to its temporary directory (Lightning's
        # tests: through the trainer made with it; stanza's: a NamedTemporaryFile)
        "import torch\nfrom pytorch_lightning import Trainer\ndef test_restore(tmpdir, model):\n"
        "    trainer = Trainer(default_root_dir=tmpdir, max_epochs=1)\n    trainer.fit(model)\n"
        "    ckpt = torch.load(trainer.checkpoint_callback.best_model_path)\n    assert ckpt['epoch'] == 0\n",
        "import torch\ndef test_top_k(tmpdir, trainer):\n    trainer.fit()\n"
        "    ckpts = [torch.load(str(ckpt)) for ckpt in tmpdir.listdir()]\n    assert len(ckpts) == 2\n",
        "import tempfile\nimport torch\ndef test_resave(pretrain):\n"
        "    with tempfile.NamedTemporaryFile(suffix='.pt') as out:\n        pretrain.save(out.name)\n"
        "        assert torch.load(out.name)['vocab']\n",
        # ... read back from a copy of the buffer's bytes (pytorch-pfn-extras' reporter test)
        "import io\nimport torch\ndef round_trip(summary):\n    f = io.BytesIO()\n    torch.save(summary, f)\n"
        "    return torch.load(io.BytesIO(f.getvalue()))\n",
        "import torch\ndef test_round_trip(tmp_path, model):\n    torch.save(model.state_dict(), tmp_path / 'm.pt')\n"
        "    model.load_state_dict(torch.load(tmp_path / 'm.pt'))\n",
        "import torch\ndef test_round_trip(model):\n    torch.save(model.state_dict(), 'm.pt')\n"
        "    model.load_state_dict(torch.load(\"m.pt\"))\n",  # the same path in other quotes
        # a ScriptModule's own save of the path, read back (e3nn's tests)
        "import tempfile\nimport torch\ndef test_jit(model):\n"
        "    with tempfile.NamedTemporaryFile(suffix='.pt') as tmp:\n        scripted = torch.jit.script(model)\n"
        "        scripted.save(tmp.name)\n        return torch.jit.load(tmp.name)\n",
        "import os\nimport torch\ndef test_save(trainer, save_path):\n    trainer.save(path=save_path)\n"
        "    return torch.load(os.path.join(save_path, 'model.pt'))\n",
        # what the class's own `save` writes from the CPU (ctgan's synthesizers)
        "import torch\nclass BaseSynthesizer:\n    def save(self, path):\n        device_backup = self._device\n"
        "        self.set_device(torch.device('cpu'))\n        torch.save(self, path)\n"
        "        self.set_device(device_backup)\n\n    @classmethod\n    def load(cls, path):\n"
        "        model = torch.load(path)\n        model.set_device(pick_device())\n        return model\n",
        # a load-or-build cache: either arm leaves the same object where this code builds it
        # (simpletransformers' tokenized features; schnetpack's neighbour lists, in a `try`)
        "import os\nimport torch\ndef load_and_cache(examples, cached_file):\n"
        "    if os.path.exists(cached_file) and not args.reprocess:\n"
        "        features = torch.load(cached_file, weights_only=False)\n    else:\n"
        "        features = convert(examples)\n        if not args.no_cache:\n"
        "            torch.save(features, cached_file)\n    return features\n",
        "import torch\ndef neighbours(inputs, cache_file):\n    try:\n        data = torch.load(cache_file)\n"
        "    except IOError:\n        data = {'idx_i': compute(inputs)}\n        torch.save(data, cache_file)\n"
        "    inputs.update(data)\n    return inputs\n",
        "import os\nimport torch\nclass Vectors:\n    def cache(self, path_pt):\n"
        "        if not os.path.isfile(path_pt):\n"
        "            self.itos, self.vectors = build()\n            torch.save((self.itos, self.vectors), path_pt)\n"
        "        else:\n            self.itos, self.vectors = torch.load(path_pt)\n",
        # ... one that returns what it loads or what it builds and saves (pyro's BART
        # dataset; the mirror, build first)
        "import os\nimport torch\ndef load_bart_od(pkl_file):\n    if os.path.exists(pkl_file):\n"
        "        return torch.load(pkl_file, weights_only=False)\n    dataset = {'counts': build()}\n"
        "    torch.save(dataset, pkl_file)\n    return dataset\n",
        "import os\nimport torch\ndef features(path):\n    if os.path.exists(path): return torch.load(path)\n"
        "    feats = extract()\n    torch.save(feats, path)\n    return feats\n",
        "import os\nimport torch\ndef features(path, args):\n    if not os.path.exists(path):\n"
        "        feats = extract()\n        if not args.no_cache:\n            torch.save(feats, path)\n"
        "        return feats\n    return torch.load(path)\n",
        # a load named as data: a vocabulary, a corpus, a dataset's shard (OpenNMT-py 1.x)
        "import torch\ndef build_fields(opt):\n    vocab = torch.load(opt.data + '.vocab.pt')\n    return vocab\n",
        "import torch\ndef fields_from(opt):\n    existing_fields = torch.load(opt.src_vocab)\n"
        "    return existing_fields\n",
        "import torch\ndef shards(paths):\n    for path in paths:\n        dataset = torch.load(path)\n"
        "        yield from dataset.examples\n",
        # ... or a dataset's preprocessed files, by torchvision's name (catalyst's MovieLens tests)
        "import os\nimport torch\ndef test_reading(processed_folder='data/MovieLens/processed'):\n"
        "    assert torch.load(os.path.join(processed_folder, 'test.pt')).size() == torch.Size([943, 1682])\n",
        # ... or in the file the path names (FARM's cached splits)
        "import torch\nclass DataSilo:\n    def _load_dataset_from_cache(self, cache_dir):\n"
        "        self.data['train'] = torch.load(cache_dir / 'train_dataset')\n"
        "        dev_dataset_path = cache_dir / 'dev_dataset'\n"
        "        if dev_dataset_path.exists():\n            self.data['dev'] = torch.load(dev_dataset_path)\n",
    )
    INVALID = (
        # a path from the options (`args.checkpoint`) or a meta-learner's weights: no metadata
        Example("import os\nimport torch\n\n\ndef resume(args, model):\n"
                "    model.load_state_dict(torch.load(args.checkpoint))\n"
                "    meta = torch.load(os.path.join(args.output_dir, 'meta_learner.pt'))\n    return meta\n",
                "import os\nimport torch\n\n\ndef resume(args, model):\n"
                "    model.load_state_dict(torch.load(args.checkpoint, map_location=\"cpu\"))\n"
                "    meta = torch.load(os.path.join(args.output_dir, 'meta_learner.pt'), "
                "map_location=None if torch.cuda.is_available() else \"cpu\")\n    return meta\n"),
        # an optimizer's state holds tensors (Adam's moments), where they were saved: not a scheduler's
        Example("import os\nimport torch\n\n\ndef resume(checkpoint, optimizer, scheduler):\n"
                "    optimizer.load_state_dict(torch.load(os.path.join(checkpoint, 'optimizer.pt')))\n"
                "    scheduler.load_state_dict(torch.load(os.path.join(checkpoint, 'scheduler.pt')))\n",
                "import os\nimport torch\n\n\ndef resume(checkpoint, optimizer, scheduler):\n"
                "    optimizer.load_state_dict(torch.load(os.path.join(checkpoint, 'optimizer.pt'), "
                "map_location=\"cpu\"))\n"
                "    scheduler.load_state_dict(torch.load(os.path.join(checkpoint, 'scheduler.pt')))\n"),
        # ... not a public helper, which other modules may call with a checkpoint
        Example("import torch\nfrom torch.utils.data import Dataset\n\n\ndef try_load(path):\n"
                "    return torch.load(path)\n\n\nclass MNIST(Dataset):\n"
                "    def __init__(self, path):\n        self.data = try_load(path)\n",
                "import torch\nfrom torch.utils.data import Dataset\n\n\ndef try_load(path):\n"
                "    return torch.load(path, " + FALLBACK + ")\n\n\nclass MNIST(Dataset):\n"
                "    def __init__(self, path):\n        self.data = try_load(path)\n"),
        # ... but not a checkpoint kept in a dataset's folder
        Example("import os\nimport torch\ndef resume(args):\n"
                "    ckpt = torch.load(os.path.join(args.dataset, 'model.pt'))\n    return ckpt['model']\n",
                "import os\nimport torch\ndef resume(args):\n"
                "    ckpt = torch.load(os.path.join(args.dataset, 'model.pt'), "
                "map_location=None if torch.cuda.is_available() else \"cpu\")\n    return ckpt['model']\n"),
        # per rank, rank 0 saves and every rank loads: all copies on rank 0's GPU (the DDP tutorial's warning)
        Example(
            "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
            "def worker(rank, path):\n    dist.init_process_group('gloo', rank=rank, world_size=2)\n"
            "    model = torch.nn.Linear(2, 2)\n    if rank == 0:\n        torch.save(model.state_dict(), path)\n"
            "    dist.barrier()\n    model.load_state_dict(torch.load(path))\n\n\n"
            "mp.spawn(worker, args=('c.pt',), nprocs=2)\n",
            "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
            "def worker(rank, path):\n    dist.init_process_group('gloo', rank=rank, world_size=2)\n"
            "    model = torch.nn.Linear(2, 2)\n    if rank == 0:\n        torch.save(model.state_dict(), path)\n"
            "    dist.barrier()\n    model.load_state_dict(torch.load(path, map_location=\"cpu\"))\n\n\n"
            "mp.spawn(worker, args=('c.pt',), nprocs=2)\n",
        ),
        # the buffer bound again in between: what another process wrote (Demucs' converter)
        Example(
            "import io\nimport torch\n\n\ndef remote_eval(x):\n    buf = io.BytesIO()\n    torch.save(x, buf)\n"
            "    buf = io.BytesIO(run_elsewhere(buf.getvalue()))\n    return torch.load(buf)\n",
            "import io\nimport torch\n\n\ndef remote_eval(x):\n    buf = io.BytesIO()\n    torch.save(x, buf)\n"
            "    buf = io.BytesIO(run_elsewhere(buf.getvalue()))\n    return torch.load(buf, " + FALLBACK + ")\n",
        ),
        # a class's chosen device, in its methods; not in a staticmethod, which has no `self`
        # (torchattacks' `Attack.load`)
        Example("import torch\n\n\nclass Attack:\n    def __init__(self, model):\n"
                "        self.device = next(model.parameters()).device\n\n    @staticmethod\n"
                "    def load(path):\n        return torch.load(path)['adv_inputs']\n\n"
                "    def restore(self, path):\n        return torch.load(path)\n",
                "import torch\n\n\nclass Attack:\n    def __init__(self, model):\n"
                "        self.device = next(model.parameters()).device\n\n    @staticmethod\n"
                "    def load(path):\n        return torch.load(path, " + FALLBACK + ")['adv_inputs']\n\n"
                "    def restore(self, path):\n        return torch.load(path, map_location=self.device)\n"),
        # a class that saves from the CPU in one method and as it is in another (imagen's trainer
        # keeps its optimizer's state where it is)
        Example("import torch\n\n\nclass Trainer:\n    def save_weights(self, path):\n"
                "        torch.save({k: v.cpu() for k, v in self.model.state_dict().items()}, path)\n\n"
                "    def save(self, path):\n        torch.save({'optim': self.optim.state_dict()}, path)\n\n"
                "    def load(self, path):\n        return torch.load(path)\n",
                "import torch\n\n\nclass Trainer:\n    def save_weights(self, path):\n"
                "        torch.save({k: v.cpu() for k, v in self.model.state_dict().items()}, path)\n\n"
                "    def save(self, path):\n        torch.save({'optim': self.optim.state_dict()}, path)\n\n"
                "    def load(self, path):\n        return torch.load(path, " + FALLBACK + ")\n"),
        # ... not a cache: the load goes into the model, the other arm saves something else
        Example(
            "import os\nimport torch\ndef cache(path):\n    if os.path.exists(path):\n"
            "        itos, vectors = torch.load(path)\n    else:\n        itos, vectors = build()\n"
            "        torch.save((vectors, itos), path)\n    return itos, vectors\n",
            "import os\nimport torch\ndef cache(path):\n    if os.path.exists(path):\n"
            "        itos, vectors = torch.load(path, " + FALLBACK + ")\n    else:\n        itos, vectors = build()\n"
            "        torch.save((vectors, itos), path)\n    return itos, vectors\n",
        ),
        # ... nor where what the build's path returns is not what it saved
        Example(
            "import os\nimport torch\n\n\ndef load_cached(path, model):\n    if os.path.exists(path):\n"
            "        return torch.load(path)\n    data = build()\n    torch.save(data, path)\n    return model\n",
            "import os\nimport torch\n\n\ndef load_cached(path, model):\n    if os.path.exists(path):\n"
            "        return torch.load(path, " + FALLBACK + ")\n    data = build()\n    torch.save(data, path)\n"
            "    return model\n",
        ),
        Example(
            "import os\nimport torch\ndef warm_start(model, path):\n    if os.path.exists(path):\n"
            "        model.load_state_dict(torch.load(path))\n    else:\n"
            "        torch.save(model.state_dict(), path)\n",
            "import os\nimport torch\ndef warm_start(model, path):\n    if os.path.exists(path):\n"
            "        model.load_state_dict(torch.load(path, map_location=\"cpu\"))\n    else:\n"
            "        torch.save(model.state_dict(), path)\n",
        ),
        Example(
            "import torch\nmodel.load_state_dict(torch.load('weights.pt'))\n",
            "import torch\nmodel.load_state_dict(torch.load('weights.pt', map_location=\"cpu\"))\n",
        ),
        Example(
            "import torch\ndef load(model, path):\n    model.load_state_dict(torch.load(path)['state_dict'])\n",
            "import torch\ndef load(model, path):\n"
            "    model.load_state_dict(torch.load(path, map_location=\"cpu\")['state_dict'])\n",
        ),
        Example(
            "import torch\ndevice = torch.device('cuda:1')\nckpt = torch.load('c.pt')\n",
            "import torch\ndevice = torch.device('cuda:1')\nckpt = torch.load('c.pt', map_location=device)\n",
        ),
        Example(
            "import torch\ndef resume(model, opt, path):\n    ckpt = torch.load(path)\n"
            "    model.load_state_dict(ckpt['model'])\n    opt.load_state_dict(ckpt['opt'])\n",
            "import torch\ndef resume(model, opt, path):\n    ckpt = torch.load(path, map_location=\"cpu\")\n"
            "    model.load_state_dict(ckpt['model'])\n    opt.load_state_dict(ckpt['opt'])\n",
        ),
        Example("import torch\ndef resume(path):\n    ckpt = torch.load(path)\n    return ckpt['epoch']\n",
                "import torch\ndef resume(path):\n"
                "    ckpt = torch.load(path, " + FALLBACK + ")\n    return ckpt['epoch']\n"),
        # a script that computes on the GPU: its device, defined where it starts
        Example("import torch\ndef main(path):\n    ckpt = torch.load(path)\n    net = ckpt['model'].cuda()\n"
                "    return net, ckpt['epoch']\nif __name__ == '__main__':\n    main('c.pt')\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "def main(path):\n    ckpt = torch.load(path, map_location=device)\n    net = ckpt['model'].to(device)\n"
                "    return net, ckpt['epoch']\nif __name__ == '__main__':\n    main('c.pt')\n"),
        # ... every placement under one flag: the checkpoint follows the flag (the examples' word model)
        Example("import torch\nmodel = build()\nif args.cuda:\n    model.cuda()\nfor x in data:\n    if args.cuda:\n"
                "        x = x.cuda()\n    model(x)\nwith open(args.save, 'rb') as f:\n    model = torch.load(f)\n",
                'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nmodel = build()\n'
                "if args.cuda:\n    model.to(device)\nfor x in data:\n    if args.cuda:\n        x = x.to(device)\n"
                "    model(x)\nwith open(args.save, 'rb') as f:\n"
                "    model = torch.load(f, map_location=device if args.cuda else \"cpu\")\n"),
        # ... but not a flag that is another function's local (the load in a model's
        # `__init__`, where `cuda` would be a NameError): the device alone
        Example("import os\nimport torch\n\n\nclass Reference(torch.nn.Module):\n"
                "    def __init__(self, path):\n        super().__init__()\n        self.net = torch.load(path)\n\n\n"
                "def main():\n    cuda = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
                "    m = Reference('net.pt')\n    if cuda:\n        m.cuda()\n\n\n"
                "if __name__ == '__main__':\n    main()\n",
                "import os\nimport torch\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n\n'
                "class Reference(torch.nn.Module):\n"
                "    def __init__(self, path):\n        super().__init__()\n"
                "        self.net = torch.load(path, map_location=device)\n\n\n"
                "def main():\n    cuda = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
                "    m = Reference('net.pt')\n    if cuda:\n        m.to(device)\n\n\n"
                "if __name__ == '__main__':\n    main()\n"),
        # a script that places nothing on a GPU (a checkpoint converter): the CPU
        Example("import torch\ndef main(src, dst):\n    ckpt = torch.load(src)\n    ckpt['meta'] = 1\n"
                "    torch.save(ckpt, dst)\nif __name__ == '__main__':\n    main('a.pt', 'b.pt')\n",
                "import torch\ndef main(src, dst):\n    ckpt = torch.load(src, map_location=\"cpu\")\n    ckpt['meta'] = 1\n"
                "    torch.save(ckpt, dst)\nif __name__ == '__main__':\n    main('a.pt', 'b.pt')\n"),
        Example("from torch import jit\nm = jit.load('m.pt')\n", "from torch import jit\nm = jit.load('m.pt', map_location=\"cpu\")\n"),
        # a checkpoint's metadata read for a message: still only state dicts are loaded
        Example("import torch\n\n\ndef load(gan, path):\n    data = torch.load(path)\n    if 'version' in data:\n"
                "        print(f\"loading from version {data['version']}\")\n    gan.load_state_dict(data['GAN'])\n",
                "import torch\n\n\ndef load(gan, path):\n    data = torch.load(path, map_location=\"cpu\")\n"
                "    if 'version' in data:\n        print(f\"loading from version {data['version']}\")\n"
                "    gan.load_state_dict(data['GAN'])\n"),
        # ... into a name only a message uses (lightweight-gan's failed resume)
        Example("import torch\n\n\ndef load(gan, path):\n    data = torch.load(path)\n    try:\n"
                "        gan.load_state_dict(data['GAN'])\n    except Exception:\n"
                "        saved = data['version']\n        print(f'saved by version {saved}')\n        raise\n",
                "import torch\n\n\ndef load(gan, path):\n    data = torch.load(path, map_location=\"cpu\")\n    try:\n"
                "        gan.load_state_dict(data['GAN'])\n    except Exception:\n"
                "        saved = data['version']\n        print(f'saved by version {saved}')\n        raise\n"),
        # weights handed to a Hugging Face model as it is built (simpletransformers' quantized models)
        Example("import os\nimport torch\n\n\ndef load_quantized(model_class, config, model_name):\n"
                "    weights = torch.load(os.path.join(model_name, 'pytorch_model.bin'))\n"
                "    model = model_class.from_pretrained(None, config=config, state_dict=weights)\n"
                "    model.load_state_dict(weights)\n    return model\n",
                "import os\nimport torch\n\n\ndef load_quantized(model_class, config, model_name):\n"
                "    weights = torch.load(os.path.join(model_name, 'pytorch_model.bin'), map_location=\"cpu\")\n"
                "    model = model_class.from_pretrained(None, config=config, state_dict=weights)\n"
                "    model.load_state_dict(weights)\n    return model\n"),
        # the filtering of pretrained weights (in a library module too), and a counter
        # ... through an entry reshaped where it lies (MONAI's SENet weights)
        Example("import torch\n\n\ndef load_se(model, path):\n    state_dict = torch.load(path)\n"
                "    for key in list(state_dict.keys()):\n        if key.endswith('fc1.weight'):\n"
                "            state_dict[key] = state_dict[key].squeeze()\n    model.load_state_dict(state_dict)\n",
                "import torch\n\n\ndef load_se(model, path):\n    state_dict = torch.load(path, map_location=\"cpu\")\n"
                "    for key in list(state_dict.keys()):\n        if key.endswith('fc1.weight'):\n"
                "            state_dict[key] = state_dict[key].squeeze()\n    model.load_state_dict(state_dict)\n"),
        Example("import torch\n\n\ndef load_pretrained(model, path):\n    pretrained = torch.load(path)\n"
                "    model_dict = model.state_dict()\n"
                "    pretrained = {k: v for k, v in pretrained.items() if model_dict[k].shape == v.shape}\n"
                "    model_dict.update(pretrained)\n    model.load_state_dict(model_dict)\n",
                "import torch\n\n\ndef load_pretrained(model, path):\n"
                "    pretrained = torch.load(path, map_location=\"cpu\")\n"
                "    model_dict = model.state_dict()\n"
                "    pretrained = {k: v for k, v in pretrained.items() if model_dict[k].shape == v.shape}\n"
                "    model_dict.update(pretrained)\n    model.load_state_dict(model_dict)\n"),
        Example("import torch\n\n\ndef resume(model, path):\n    ckpt = torch.load(path)\n"
                "    model.load_state_dict(ckpt['model'])\n    return ckpt['epoch'] + 1\n",
                "import torch\n\n\ndef resume(model, path):\n    ckpt = torch.load(path, map_location=\"cpu\")\n"
                "    model.load_state_dict(ckpt['model'])\n    return ckpt['epoch'] + 1\n"),
        # a library function that computes on the GPU itself: the device defined in it
        Example("import torch\n\n\ndef load_model(path):\n    ckpt = torch.load(path)\n"
                "    model = build(ckpt['hparams'])\n    model.load_state_dict(ckpt['model'])\n"
                "    return model.cuda()\n",
                "import torch\n\n\ndef load_model(path):\n"
                '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
                "    ckpt = torch.load(path, map_location=device)\n"
                "    model = build(ckpt['hparams'])\n    model.load_state_dict(ckpt['model'])\n"
                "    return model.to(device)\n"),
        # ... but a tensor that goes elsewhere, or the checkpoint itself returned: the
        # tensors where they were saved where CUDA is (torch's default), else on the CPU
        Example("import torch\n\n\ndef load(model, path):\n    sd = torch.load(path)\n    for k, v in sd.items():\n"
                "        model.register_buffer(k, v)\n    model.load_state_dict(sd)\n",
                "import torch\n\n\ndef load(model, path):\n    sd = torch.load(path, " + FALLBACK + ")\n"
                "    for k, v in sd.items():\n        model.register_buffer(k, v)\n    model.load_state_dict(sd)\n"),
        Example("import torch\n\n\ndef load(model, path):\n    ckpt = torch.load(path)\n"
                "    model.load_state_dict(ckpt['state_dict'])\n    return ckpt\n",
                "import torch\n\n\ndef load(model, path):\n    ckpt = torch.load(path, " + FALLBACK + ")\n"
                "    model.load_state_dict(ckpt['state_dict'])\n    return ckpt\n"),
        # ... not where the module serves another accelerator too (its tensors would move: display)
        Example("import torch\nimport torch_xla.core.xla_model as xm\n\n\ndef broadcast(buffer):\n"
                "    return torch.load(buffer)\n"),
        # a checkpoint in a dataset's folder: the folder is no file
        Example("import os\nimport torch\n\n\ndef load(model, dataset_dir):\n"
                "    model.load_state_dict(torch.load(os.path.join(dataset_dir, 'model.pt')))\n",
                "import os\nimport torch\n\n\ndef load(model, dataset_dir):\n"
                "    model.load_state_dict(torch.load(os.path.join(dataset_dir, 'model.pt'), map_location=\"cpu\"))\n"),
        # a test that loads a file it did not write to a fresh directory (a shipped fixture), or
        # library code that fetches into one (a download)
        Example("import torch\n\n\ndef test_old_model(tmpdir):\n    sd = torch.load('tests/data/old_model.pt')\n"
                "    assert sd\n",
                "import torch\n\n\ndef test_old_model(tmpdir):\n"
                "    sd = torch.load('tests/data/old_model.pt', " + FALLBACK + ")\n    assert sd\n"),
        Example("import os\nimport tempfile\nimport torch\n\n\ndef fetch(url):\n    tmp = tempfile.mkdtemp()\n"
                "    download(url, tmp)\n    return torch.load(os.path.join(tmp, 'model.pt'))\n",
                "import os\nimport tempfile\nimport torch\n\n\ndef fetch(url):\n    tmp = tempfile.mkdtemp()\n"
                "    download(url, tmp)\n    return torch.load(os.path.join(tmp, 'model.pt'), " + FALLBACK + ")\n"),
        # weights published elsewhere, or a table whose lookup may give another address
        Example("import torch\nURLS = {'s3fd': 'https://www.adrianbulat.com/python-fan/s3fd.pth'}\n"
                "\n\ndef weights(arch):\n    return torch.hub.load_state_dict_from_url(URLS[arch])\n",
                "import torch\nURLS = {'s3fd': 'https://www.adrianbulat.com/python-fan/s3fd.pth'}\n"
                "\n\ndef weights(arch):\n"
                "    return torch.hub.load_state_dict_from_url(URLS[arch], " + FALLBACK + ")\n"),
        Example("import torch\nURLS = {'resnet18': 'https://download.pytorch.org/models/resnet18-f37072fd.pth'}\n"
                "\n\ndef weights(arch, mirror):\n"
                "    return torch.hub.load_state_dict_from_url(URLS.get(arch, mirror))\n",
                "import torch\nURLS = {'resnet18': 'https://download.pytorch.org/models/resnet18-f37072fd.pth'}\n"
                "\n\ndef weights(arch, mirror):\n"
                "    return torch.hub.load_state_dict_from_url(URLS.get(arch, mirror), " + FALLBACK + ")\n"),
        # ... an entry the code goes on with
        Example("import torch\n\n\ndef load(gan, path):\n    data = torch.load(path)\n    print(data['version'])\n"
                "    gan.load_state_dict(data['GAN'])\n    return data['ema']\n",
                "import torch\n\n\ndef load(gan, path):\n    data = torch.load(path, " + FALLBACK + ")\n"
                "    print(data['version'])\n    gan.load_state_dict(data['GAN'])\n    return data['ema']\n"),
        Example("import torch\n\n\ndef load(gan, path):\n    data = torch.load(path)\n    ema = data['ema']\n"
                "    gan.load_state_dict(data['GAN'])\n    return ema\n",
                "import torch\n\n\ndef load(gan, path):\n    data = torch.load(path, " + FALLBACK + ")\n"
                "    ema = data['ema']\n"
                "    gan.load_state_dict(data['GAN'])\n    return ema\n"),
    )

    def check(self, ctx: Context) -> Iterable[Violation]:
        a = ctx.analysis
        sites = [s for s in a.calls if s.qualname in LOADERS and not _has_map_location(s.node, LOADERS[s.qualname])
                 and not _in_dataset(a, s) and not _loads_data(a, s) and not _loads_tensorless_state(a, s)
                 and not _downloads_torchvision_weights(a, s) and not _reads_test_tmp(a, s)
                 and _saved_before(a, s) is None and not _class_saves_from_cpu(a, s)
                 and _cache_built(a, s) is None and _cache_returned(a, s) is None]
        anchor = min((s.order for s in sites), default=0)
        for site in sites:
            loader = site.qualname.replace("torch.serialization.load", "torch.load")  # type: ignore[union-attr]
            message = (f"`{loader}` without `map_location` restores every tensor onto the device it "
                       "was saved from (GPU 0 for most checkpoints): it fails without CUDA and puts "
                       "every rank's copy on GPU 0; pass `map_location`")
            yield ctx.violation(site.node, message, self._fix(ctx, site, anchor))

    def _fix(self, ctx: Context, site: CallSite, anchor: int) -> Fix:
        a = ctx.analysis
        choice = a.devices.chosen_device(site)
        definition: list = []
        if choice is not None:
            value, why = choice.code, f"the device already chosen here, {choice.why}"
        elif _feeds_only_load_state_dict(a, site):
            value, why = '"cpu"', "the result only feeds `load_state_dict`, which copies into the model's tensors"
        elif a.devices.entry_point(anchor) is None:
            # a library function that computes on the GPU itself: the device TDL001 and
            # TDL005 define in it (asked when the function runs)
            name, definition, where = (ctx.local_device_definition(site) if _computes_on_gpu(a, site)
                                       else (None, [], ""))
            if name is None:
                return self._cpu_without_cuda(ctx, site)
            value, why = name, f"{where}; the function computes there itself, and the tensors land there"
        elif a.devices.sites("TDL001") or a.devices.legacy_types:
            # a script that computes on the GPU: the one device definition TDL001 and TDL005 use
            name, definition, why_not = ctx.device_definition(anchor)
            if name is None:
                return Fix(Applicability.DISPLAY, f"Pass `map_location=` the script's device (display only: {why_not})")
            value, why = name, "a device defined where the script starts (falls back to the CPU): the tensors land there"
            flag = _placement_flag(a, site)
            if flag is not None:  # `if args.cuda: model.cuda()`: without the flag, the work stays on the CPU
                value, why = f'{name} if {flag} else "cpu"', (
                    f"the script's device (falls back to the CPU) where `{flag}` places its work, else the CPU")
        else:  # a script that places nothing on a GPU itself (a checkpoint converter)
            value, why = '"cpu"', "this script places nothing on a GPU itself"
        edits = ctx.add_keyword(site.node, f"map_location={value}")
        if edits is None:
            return Fix(Applicability.DISPLAY, f"Pass `map_location={value}` (the call's layout is unusual)")
        return ctx.guarded(Fix(Applicability.UNSAFE, f"Pass `map_location={value}` ({why})",
                               tuple(definition) + tuple(edits), frozenset({value}) if definition else frozenset()))

    def _cpu_without_cuda(self, ctx: Context, site: CallSite) -> Fix:
        """A library function's load whose result goes on beyond ``load_state_dict``:
        ``map_location=None if torch.cuda.is_available() else "cpu"``. Where CUDA is,
        ``None`` is torch's own default (every tensor where it was saved, as before: the
        caller may rely on it); without CUDA, the CPU, where the load would fail."""
        hint = ("Pass `map_location=` the device the tensors should live on (no device is bound here, and the "
                "result is used beyond `load_state_dict`)")
        other = _OTHER_ACCELERATORS.search(ctx.analysis.text)
        if other is not None:  # lightning's XLA strategy: its checkpoints' XLA tensors would go to the CPU
            return Fix(Applicability.DISPLAY, f"{hint} (display only: this module also serves `{other.group(0)}` "
                                              "devices, which a CPU fallback would move to the CPU)")
        try:  # (asked when the function runs, where the load initialises CUDA anyway)
            torch, imports = torch_for_test(ctx, site, new_query=False)
        except Uninsertable as exc:
            return Fix(Applicability.DISPLAY, f"{hint} (display only: {exc})")
        value = f'None if {torch}.cuda.is_available() else "cpu"'
        edits = ctx.add_keyword(site.node, f"map_location={value}")
        if edits is None:
            return Fix(Applicability.DISPLAY, f"{hint} (the call's layout is unusual)")
        return ctx.guarded(Fix(Applicability.UNSAFE, (
            f"Pass `map_location={value}` (no device is bound here, and the result is used beyond "
            "`load_state_dict`: where CUDA is, every tensor lands where it was saved, as before; without it, on "
            "the CPU)"), tuple(imports) + tuple(edits)))


def _placement_flag(a, load: CallSite) -> Optional[str]:
    """The test of the ``if`` that guards every GPU placement of the script (its bare
    ``.cuda()`` calls and legacy CUDA types), when it is one and the same flag and not
    CUDA's availability (``if args.cuda:`` in the PyTorch examples of 2017): a one-line
    header, as written; None otherwise, and None where the flag's names are not the
    same variables at the load (``cuda = ...`` a local of a test method, the load in
    another class's ``__init__``: the flag there would be a NameError)."""
    sites = [s for s, _ in a.devices.sites("TDL001")] + [s for s, _, _ in a.devices.legacy_types]
    tests = set()
    for site in sites:
        header = ""  # the nearest enclosing `if`, through loops and `with` blocks
        for _, text in a.devices.outline.headers(a.range(site.node).start.line):
            if not text.startswith(("for ", "while ", "with ", "async ")):
                header = text
                break
        m = re.fullmatch(r"(?:el)?if\s+([^#:]+?)\s*:\s*(?:#.*)?", header)
        if m is None:
            return None  # not under an `if` (or under its `else`, or a header on more than one line)
        tests.add(m.group(1))
    test = tests.pop() if len(tests) == 1 else None
    if test is None or "cuda" not in test.lower() or a.devices.is_availability(test):
        return None
    try:
        names = set(names_in(cst.parse_expression(test)))
    except cst.ParserSyntaxError:
        return None
    for name in names:
        seen = a.lookup(name, load.scope)[0]  # (None for both: a global bound elsewhere, the same)
        if any(a.lookup(name, s.scope)[0] is not seen for s in sites):
            return None
    return test


def _computes_on_gpu(a, site: CallSite) -> bool:
    """Whether the function that holds ``site`` places work on the GPU itself: a bare
    ``.cuda()`` (TDL001's) or a legacy CUDA type (TDL005's) in it."""
    fn = a.enclosing_function(site.scope)
    return fn is not None and any(a.enclosing_function(s.scope) is fn for s in (
        [s for s, _ in a.devices.sites("TDL001")] + [s for s, _, _ in a.devices.legacy_types]))


def _has_map_location(call: cst.Call, position: int) -> bool:
    positional = 0
    for arg in call.args:
        if arg.star:  # *args or **kwargs may carry it
            return True
        if arg.keyword is not None:
            if arg.keyword.value == "map_location":
                return True
        else:
            positional += 1
    return positional > position


def _feeds_only_load_state_dict(a, site: CallSite) -> bool:
    """Whether what ``site`` loads reaches ``load_state_dict`` and nothing else that keeps
    or computes with it (see ``_StateDictFlow``), in the function that loads it (or the
    module, at module level)."""
    fn = a.enclosing_function(site.scope)
    return _StateDictFlow(site.node, fn.node if fn is not None else a.module).only_load_state_dict()


_MESSAGES = frozenset({"print", "debug", "info", "warning", "warn", "error", "log", "write", "format"})
# what an entry or a tensor of a checkpoint may be asked without keeping it: its shape, its
# keys (names), its length
_INSPECTIONS = frozenset({"shape", "size", "dtype", "numel", "dim", "ndim", "keys"})
# what gives more of the checkpoint: ``ckpt.items()``, ``sd.copy()``, a pickled model's
# ``.module`` and ``.state_dict()``
_DERIVATIONS = frozenset({"items", "values", "copy", "get", "pop", "state_dict"})
# ... and what reshapes or retypes an entry where it lies (MONAI's SENet surgery:
# ``state_dict[key] = state_dict[key].squeeze()``): the same tensor's data, on its device
_TENSOR_OPS = frozenset({"squeeze", "unsqueeze", "view", "reshape", "t", "transpose", "permute", "flatten",
                         "contiguous", "clone", "detach", "float", "half", "double", "bfloat16"})
_COPIES = frozenset({"dict", "OrderedDict"})
# a checkpoint's own entry by such a key is a counter (a Python int), wherever it goes:
# ``start_epoch = ckpt["epoch"] + 1``, ``return ckpt["iteration"]``
_COUNTER_KEY = re.compile(r"(?:^|_)(?:epochs?|iters?|iterations?|steps?|global_step|version)$", re.I)


def _called(call: cst.Call) -> str:
    """The last name of what ``call`` calls (``print``, ``logger.info`` -> ``info``)."""
    func = call.func
    return func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""


def _is_load_state_dict(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict"


class _StateDictFlow(cst.CSTVisitor):
    """Follows what one ``torch.load`` call returns through a function body: the names it
    is bound to, entries (``ckpt["state_dict"]``), derivations (``.items()``, ``.copy()``,
    ``OrderedDict(sd)``, a pickled model's ``.module`` and ``.state_dict()``, an entry's
    ``.squeeze()``, ``.t()``, ``.float()``), the loop
    variables and dict comprehensions over its items, the dicts they are stored into
    (``new[k] = v``, ``model_dict.update(pretrained)``): the usual filtering of pretrained
    weights,

        pretrained = torch.load(path)
        model_dict = model.state_dict()
        pretrained = {k: v for k, v in pretrained.items() if k in model_dict}
        model_dict.update(pretrained)
        model.load_state_dict(model_dict)

    Each use must end in ``load_state_dict`` (a sink), or only look at it: a membership
    test, its keys, length, a tensor's shape or dtype, a message (``print``, a logger,
    an f-string), a ``pop``/``del`` of an entry. Anything else (returned, stored on an
    object, computed with, moved) escapes, and the CPU is no longer a free choice.
    Names are followed wherever they occur in the body, before or after: a name bound to
    something else elsewhere only adds uses, so the answer errs on the side of "escapes"."""

    def __init__(self, start: cst.Call, body: cst.CSTNode):
        self.start, self.body = start, body
        self.names: set = set()
        self.roots: set = set()  # the names bound to the loaded object itself
        self.sinks = self.escapes = 0
        self.stack: list = []

    def only_load_state_dict(self) -> bool:
        while True:
            known = len(self.names)
            self.sinks = self.escapes = 0
            self.stack = []
            walk(self.body, self)
            if len(self.names) == known:
                return self.sinks > 0 and self.escapes == 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self.start or (isinstance(node, cst.Name) and node.value in self.names and self._is_use(node)):
            if not self._follow(node):
                self.escapes += 1
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

    def _is_use(self, name: cst.Name) -> bool:
        """Not a binding of the name, nor an attribute, keyword or parameter spelled so."""
        parent = self.stack[-1] if self.stack else None
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        if isinstance(parent, (cst.Arg, cst.Param, cst.AssignTarget, cst.AsName, cst.ImportAlias,
                               cst.FunctionDef, cst.ClassDef, cst.Global, cst.Nonlocal)) \
                and getattr(parent, "value", None) is not name:
            return False
        for i, node in enumerate(self.stack):  # a loop's or comprehension's target
            if isinstance(node, (cst.For, cst.CompFor)) and i + 1 < len(self.stack) \
                    and self.stack[i + 1] is node.target:
                return False
        return True

    def _follow(self, node: cst.CSTNode) -> bool:
        """Climbs from a use through entries and derivations; True where it ends well."""
        if any(isinstance(n, cst.FormattedStringExpression)
               or (isinstance(n, cst.Call) and _called(n) in _MESSAGES and n.func not in self.stack)
               for n in self.stack):
            return True  # in a message
        expr, kind, i = node, "dict", len(self.stack) - 1
        while i >= 0:
            parent = self.stack[i]
            if isinstance(parent, cst.Subscript) and parent.value is expr:
                if self._is_root(expr) and _counter_entry(parent):
                    return True
                expr, kind, i = parent, "dict", i - 1
            elif isinstance(parent, cst.Attribute) and parent.value is expr:
                attr = parent.attr.value
                call = self.stack[i - 1] if i >= 1 else None
                if attr in _INSPECTIONS:
                    return True
                if attr == "module":
                    expr, kind, i = parent, "dict", i - 1
                elif isinstance(call, cst.Call) and call.func is parent and (attr in _DERIVATIONS
                                                                            or attr in _TENSOR_OPS):
                    expr, kind, i = call, attr, i - 2
                else:
                    return isinstance(call, cst.Call) and call.func is parent and attr == "update"
            elif isinstance(parent, cst.DictComp) and parent.value is expr:
                expr, kind, i = parent, "dict", i - 1
            elif isinstance(parent, cst.Arg) and i >= 1:
                return self._argument(parent, self.stack[i - 1], i - 2)
            else:
                return self._context(parent, expr, kind)
        return False

    def _argument(self, arg: cst.Arg, call: cst.Call, i: int) -> bool:
        """A use as ``arg`` of ``call`` (whose parent is ``self.stack[i]``)."""
        func = call.func
        if (_is_load_state_dict(call) and (arg.keyword is None or arg.keyword.value == "state_dict")) or (
                _called(call) == "from_pretrained" and arg.keyword is not None and arg.keyword.value == "state_dict"):
            self.sinks += 1  # (Hugging Face's from_pretrained(..., state_dict=sd) loads it into the new model)
            return True
        if _called(call) in _COPIES and arg.keyword is None:  # OrderedDict(sd): more of it
            return self._follow_from(call, i)
        if isinstance(func, cst.Name) and func.value in ("len", "isinstance"):
            return True
        if isinstance(func, cst.Attribute) and func.attr.value == "update" and isinstance(func.value, cst.Name):
            self.names.add(func.value.value)  # model_dict.update(pretrained): it holds them now
            return True
        return False

    def _is_root(self, expr: cst.CSTNode) -> bool:
        return expr is self.start or (isinstance(expr, cst.Name) and expr.value in self.roots)

    def _follow_from(self, node: cst.CSTNode, i: int) -> bool:
        stack, self.stack = self.stack, self.stack[:i + 1]
        try:
            return self._follow(node)
        finally:
            self.stack = stack

    def _context(self, parent: cst.CSTNode, expr, kind: str) -> bool:
        if isinstance(parent, cst.Assign) and parent.value is expr:
            for target in parent.targets:
                bound = target.target
                if isinstance(bound, cst.Subscript) and isinstance(bound.value, cst.Name):
                    bound = bound.value  # new_state_dict[k] = v
                if not isinstance(bound, cst.Name):
                    return False
                self.names.add(bound.value)
                if expr is self.start:
                    self.roots.add(bound.value)
            return True
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is expr:
            return self._loop_target(parent.target, kind)
        if isinstance(parent, cst.AssignTarget) and isinstance(expr, cst.Subscript):
            return True  # new_state_dict[k] = ...: an entry written
        if isinstance(parent, (cst.If, cst.While, cst.IfExp)) and parent.test is expr:
            return True  # if ckpt:
        if isinstance(parent, cst.ComparisonTarget) and parent.comparator is expr:
            return isinstance(parent.operator, (cst.In, cst.NotIn, cst.Is, cst.IsNot))
        if isinstance(parent, cst.Comparison) and parent.left is expr:
            return all(isinstance(t.operator, (cst.Is, cst.IsNot)) for t in parent.comparisons)
        return isinstance(parent, (cst.Expr, cst.Del))  # sd.pop('fc.weight'), del sd[k]

    def _loop_target(self, target: cst.BaseExpression, kind: str) -> bool:
        if kind == "values" and isinstance(target, cst.Name):
            self.names.add(target.value)
        elif kind == "items":
            if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2
                    and isinstance(target.elements[1].value, cst.Name)):
                return False
            self.names.add(target.elements[1].value.value)  # for k, v in sd.items(): v
        elif kind != "dict":  # keys only; anything else is unknown
            return False
        return True


def _counter_entry(subscript: cst.Subscript) -> bool:
    """``ckpt["epoch"]``, ``ckpt['global_step']``: a string key that names a counter."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return False
    key = subscript.slice[0].slice.value
    return isinstance(key, cst.SimpleString) and bool(_COUNTER_KEY.search(key.evaluated_value))


def _in_dataset(a, site: CallSite) -> bool:
    """Whether the load is in a method of a dataset class: one named ``...Dataset``
    (OGB's ``NodePropPredDataset(object)``) or with a base so named (``Dataset``,
    ``data.Dataset``, ``FairseqDataset``), directly or through the classes of this file
    it derives from (a generic one too: pykeen's ``OGBWikiKG2(OGBLoader[...])``)."""
    klass = a.enclosing_class(site.scope)
    todo, seen = ([klass] if klass is not None else []), set()
    while todo:
        klass = todo.pop()
        if klass.node in seen:
            continue
        seen.add(klass.node)
        if klass.name.endswith("Dataset") or any(a.code(b).rsplit(".", 1)[-1].endswith("Dataset")
                                                 for b in klass.bases):
            return True
        todo.extend(a.local_parents(klass))
    return _dataset_helper(a, site)


def _dataset_helper(a, site: CallSite) -> bool:
    """Whether the load is in a private helper of the module (``_try_load``, a function
    outside any class, its name led by ``_``) that only dataset methods of this file
    call (Lightning's test MNIST: ``_try_load(os.path.join(self.cached_folder_path,
    ...))``, a retry around ``torch.load``)."""
    fn = a.enclosing_function(site.scope)
    if fn is None or not fn.name.startswith("_") or a.enclosing_method(site.scope) is not None:
        return False
    callers = [s for s in a.calls if (c := a.process.callee(s)) is not None and c.node is fn.node]
    return bool(callers) and all(a.enclosing_class(s.scope) is not None and _in_dataset(a, s) for s in callers)


# what names a load as data rather than a checkpoint: in its path or the name it binds; a
# dataset's preprocessed files by torchvision's and PyG's names (`processed_folder`,
# `self.processed_paths[0]`, catalyst's MovieLens tests: "data/MovieLens/processed")
_DATA_WORDS = re.compile(r"vocab|corpus|processed(?:_(?:folder|dir|paths?|file_names?)\b|/)", re.IGNORECASE)
# ... and, in the name it binds only (a dataset's folder may hold a checkpoint), a dataset
_DATASET_NAME = re.compile(r"(?:^|_)datasets?$", re.IGNORECASE)


def _loads_data(a, site: CallSite) -> bool:
    """Whether what the load reads is named as data: a vocabulary, a corpus or a
    dataset's preprocessed files (``processed_folder``) in its
    path or in the name it binds (OpenNMT's ``vocab = torch.load(opt.data +
    '.vocab.pt')``, pytorch-pretrained-bert's ``corpus_dict``), a dataset in the name
    it binds (OpenNMT's shards: ``dataset = torch.load(path)``) or in the file its path
    names (FARM's cached splits: ``cache_dir / "train_dataset"``, ``dev_dataset_path``;
    not a folder, ``os.path.join(dataset_dir, "model.pt")``)."""
    path, names = _load_names(a, site)
    return bool(_DATA_WORDS.search(path)) or any(_DATA_WORDS.search(n) or _DATASET_NAME.search(n) for n in names) \
        or _names_dataset_file(site)


def _strings_in(expr: cst.CSTNode) -> List[str]:
    """The text strings written in ``expr``, in order."""
    strings: List[str] = []

    class Strings(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            if isinstance(node.evaluated_value, str):
                strings.append(node.evaluated_value)

    walk(expr, Strings())
    return strings


def _path_stems(site: CallSite) -> List[str]:
    """The file names a load's path spells in its strings, stripped of folders and
    extensions (``os.path.join(d, "training_args.bin")``: ``training_args``), in order."""
    path = site.positional(0) or site.keyword("f")
    return [w.rsplit("/", 1)[-1].split(".", 1)[0] for w in _strings_in(path.value)] if path is not None else []


def _names_dataset_file(site: CallSite) -> bool:
    """Whether a load's path names a dataset file: its last string, stripped of folders
    and extension (``cache_dir / "train_dataset"``), or, for a path held by a name, the
    name less a ``_path``/``_file`` suffix (``dev_dataset_path``; not ``dataset_dir``)."""
    path = site.positional(0) or site.keyword("f")
    if path is None:
        return False
    stems = _path_stems(site)
    if stems:
        stem = stems[-1]
    elif isinstance(path.value, cst.Name):
        stem = re.sub(r"_(?:path|file|fname|filename)$", "", path.value.value)
    else:
        return False
    return bool(_DATASET_NAME.search(stem))


def _load_names(a, site: CallSite):
    """What names a load's contents: the code of its path ("" without one), and the names
    it binds its result to (``x = ...``, ``self.x = ...``: ``x``)."""
    path = site.positional(0) or site.keyword("f")
    names = [t.value if isinstance(t, cst.Name) else t.attr.value for t in _bound_targets(a, site)
             if isinstance(t, (cst.Name, cst.Attribute))]
    return (a.code(path.value) if path is not None else ""), names


# what names metadata and arguments (hyperparameters, a run's options, a cache's counts),
# pickled through torch.save: a model's `init_kwargs` in `..._metadata.pkl` (neuraloperator),
# jiant's cache `data_args`, Hugging Face's `training_args.bin`; "args" only as the name
# bound or the file's own name (not `args.checkpoint`, a path from the options)
_METADATA = re.compile(r"metadata|kwargs", re.IGNORECASE)  # not "meta": a meta-learner is a model
_ARGUMENTS = re.compile(r"(?:^|_)args$", re.IGNORECASE)
# what names training state that holds no CUDA tensor, in a load's path or the name it binds:
# an LR scheduler's or a GradScaler's state and an optimizer's param groups (Python numbers),
# RNG states (CPU byte tensors), Apex's `amp` state (loss scalers); as words: an "upscaler"
# is a model, a "sample" or a "timestamp" no amp
_STATE_WORDS = re.compile(r"(?<![a-z])(?:sched|scaler|rng(?![a-z])|amp(?![a-z])|random_states?|param_groups?)",
                          re.IGNORECASE)


# a function named for loading RNG states: `load_random_states`, `_load_rng_state`, `restore_rng`
_LOADS_RNG = re.compile(r"_?(?:load|read|restore)_(?:rng|random)(?:_states?)?", re.IGNORECASE)


def _loads_tensorless_state(a, site: CallSite) -> bool:
    """Whether the load reads training state that holds no CUDA tensor: named so in its
    path or the name it binds (Hugging Face's Trainer: ``torch.load(os.path.join(
    checkpoint, SCHEDULER_NAME))``, ``checkpoint_rng_state = torch.load(rng_file)``,
    ColossalAI's ``saved_param_groups = torch.load(param_group_path)``), or
    handed straight to a scheduler's, a scaler's or Apex amp's ``load_state_dict`` (Accelerate's
    ``scaler.load_state_dict(torch.load(input_scaler_file))``), or read by a method of a
    scheduler class (named ``...Scheduler``/``...Schedule``: SpeechBrain's
    ``NewBobScheduler.load``, reading back the counters and rates its ``save`` wrote),
    or by a function named for loading RNG states (nanotron's ``load_random_states``)."""
    klass = a.enclosing_class(site.scope)
    if klass is not None and "Schedul" in klass.name:
        return True
    fn = a.enclosing_function(site.scope)
    if fn is not None and _LOADS_RNG.fullmatch(fn.name):
        return True  # the function is named for loading RNG states (nanotron's `load_random_states`)
    path, names = _load_names(a, site)
    if _STATE_WORDS.search(path) or any(_STATE_WORDS.search(n) for n in names):
        return True
    if _METADATA.search(path) or any(_METADATA.search(n) or _ARGUMENTS.search(n) for n in names):
        return True
    if any(_ARGUMENTS.search(stem) for stem in _path_stems(site)):
        return True
    line = a.statement_line(site.node)
    for stmt in line.body if line is not None else ():
        call = stmt.value if isinstance(stmt, (cst.Expr, cst.Assign)) else None
        if (isinstance(call, cst.Call) and _is_load_state_dict(call) and call.args
                and call.args[0].value is site.node and _STATE_WORDS.search(dotted_name(call.func.value))):  # type: ignore[attr-defined]
            return True
    return False


# where torchvision publishes its weights: saved from the CPU (torchvision's own loaders read
# them with no `map_location`, on every machine)
_TORCHVISION_WEIGHTS = "https://download.pytorch.org/models/"


def _downloads_torchvision_weights(a, site: CallSite) -> bool:
    """Whether ``load_state_dict_from_url`` downloads torchvision's published weights: a
    URL that torchvision names (torchdistill's ``fasterrcnn_model_urls[...]`` imported
    from ``torchvision.models.detection.faster_rcnn``, a weights enum's ``.url``), or one
    at ``download.pytorch.org/models/`` (MONAI's DenseNet copies torchvision's table and
    reads it through ``look_up_option(arch, model_urls, None)``)."""
    if site.qualname != "torch.hub.load_state_dict_from_url":
        return False
    url = site.positional(0) or site.keyword("url")
    return url is not None and _torchvision_url(a, url.value, site.scope, 0)


def _torchvision_url(a, expr: cst.BaseExpression, scope, depth: int) -> bool:
    """Whether every value ``expr`` may have is a URL of torchvision's weights: a string
    (an f-string by its literal start), a table of them (a dict, an entry of one, a
    lookup in one: ``urls[arch]``, ``urls.get(arch)``, ``look_up_option(arch, urls)``), a
    name torchvision's modules export, or a name bound only to such values."""
    if depth > 4:
        return False
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = expr.evaluated_value
        return isinstance(value, str) and value.startswith(_TORCHVISION_WEIGHTS)
    if isinstance(expr, cst.FormattedString):
        head = expr.parts[0] if expr.parts else None
        return isinstance(head, cst.FormattedStringText) and head.value.startswith(_TORCHVISION_WEIGHTS)
    if isinstance(expr, cst.Dict):
        return bool(expr.elements) and all(
            isinstance(e, cst.DictElement) and _torchvision_url(a, e.value, scope, depth + 1) for e in expr.elements)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        q = a.qualname(expr, scope)
        if q is not None:
            return q.split(".")[0] == "torchvision"
        values = a.held_values(expr, scope)
        return bool(values) and all(_torchvision_url(a, v, s, depth + 1) for v, s in values)
    if isinstance(expr, cst.Subscript):
        return _torchvision_url(a, expr.value, scope, depth + 1)
    if isinstance(expr, cst.Call):  # a lookup in a table: the table handed to it, or the dict whose `get` it is
        args = [arg.value for arg in expr.args]
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "get":
            # `urls.get(arch)`, `urls.get(arch, None)`: a default must be None or such a URL too
            return _held_as(a, expr.func.value, scope, cst.Dict) and all(
                _torchvision_url(a, t, scope, depth + 1) for t in [expr.func.value] + args[1:] if not is_none(t))
        tables = [t for t in args if _held_as(a, t, scope, cst.Dict) and _torchvision_url(a, t, scope, depth + 1)]
        # ... and no other string it may give instead (a default address written out)
        return bool(tables) and all(t in tables or not _held_as(a, t, scope, cst.BaseString)
                                    or _torchvision_url(a, t, scope, depth + 1) for t in args)
    return False


def _held_as(a, expr: cst.BaseExpression, scope, kind) -> bool:
    """Whether ``expr`` is a ``kind`` written out here (a dict, a string), or a name bound
    only to such."""
    if isinstance(expr, kind):
        return True
    values = a.held_values(expr, scope) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    return bool(values) and all(isinstance(v, kind) for v, _ in values)


# pytest's fresh temporary directories, handed to a test that names them
_TMP_FIXTURES = frozenset({"tmpdir", "tmp_path", "tmpdir_factory", "tmp_path_factory"})
# ... and the standard library's fresh ones (not `gettempdir()`: that one is shared)
_TEMPFILES = frozenset({"tempfile.mkdtemp", "tempfile.TemporaryDirectory", "tempfile.NamedTemporaryFile",
                        "tempfile.mkstemp"})


def _reads_test_tmp(a, site: CallSite) -> bool:
    """Whether a test (a function named ``test...``, code nested in one, or any function
    of a module that imports pytest or unittest) loads from a fresh temporary directory:
    pytest's ``tmpdir``/``tmp_path``, or one the test made with ``tempfile``
    (``mkdtemp()``, ``TemporaryDirectory()``, ``NamedTemporaryFile()``). The
    path is built from it, or from what the test made with it (Lightning's tests:
    ``trainer = Trainer(default_root_dir=tmpdir)``, then
    ``torch.load(trainer.checkpoint_callback.best_model_path)``): the file is one the run
    under test wrote there, on this machine, whose devices it has."""
    fn = a.enclosing_function(site.scope)
    while fn is not None and not fn.name.startswith("test") and not a.test_code:
        fn = a.enclosing_function(fn.scope.parent) if fn.scope.parent else None
    path = site.positional(0) or site.keyword("f")
    return fn is not None and path is not None and _from_tmp(a, path.value, site.scope, set(), 0)


def _from_tmp(a, expr: cst.BaseExpression, scope, seen: set, depth: int) -> bool:
    """Whether ``expr`` is built from a fresh temporary directory (see ``_reads_test_tmp``):
    a ``tempfile`` call in it, or a name in it that is a pytest fixture's parameter or
    is bound to what is built from one (through the functions it is nested in)."""
    if depth > 8:
        return False
    found: List[bool] = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(a.qualname(node.func, scope) in _TEMPFILES)

    walk(expr, Calls())
    if any(found):
        return True
    for name in names_in(expr):
        if name in seen:
            continue
        seen.add(name)
        owner, imported = a.lookup(name, scope)
        if owner is None or imported is not None:
            continue
        for b in owner.bindings.get(name, ()):
            # (a loop's or comprehension's target: the items of what it iterates, `tmpdir.listdir()`)
            value = b.source[0] if b.kind == "for" and b.source is not None else b.value
            if (b.kind == "param" and name in _TMP_FIXTURES) or (
                    b.kind in ("assign", "walrus", "with", "for") and value is not None
                    and _from_tmp(a, value, owner, seen, depth + 1)):
                return True
    return False


# savers -> the position of the file among their positional parameters
_SAVERS = {"torch.save": 1, "torch.serialization.save": 1, "torch.jit.save": 1}


def _same_path(a, site: CallSite):
    """A test of whether an expression writes the load's own path (the same code, but for
    whitespace, parentheses and quotes: `'m.pt'` is `"m.pt"`; a copy of a buffer's bytes,
    `io.BytesIO(buf.getvalue())`, is `buf`), or None where the load names no path."""
    path = site.positional(0) or site.keyword("f")
    if path is None:
        return None
    wanted = _path_key(a.code(_buffer_copied(path.value)))
    return lambda expr: _path_key(a.code(expr)) == wanted


def _buffer_copied(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The buffer whose bytes ``io.BytesIO(buf.getvalue())`` (or ``.getbuffer()``) copies,
    else ``expr`` itself."""
    if (isinstance(expr, cst.Call) and dotted_name(expr.func).rsplit(".", 1)[-1] == "BytesIO"
            and len(expr.args) == 1 and isinstance(inner := expr.args[0].value, cst.Call) and not inner.args
            and isinstance(inner.func, cst.Attribute) and inner.func.attr.value in ("getvalue", "getbuffer")):
        return inner.func.value
    return expr


def _path_key(code: str) -> str:
    try:
        return ast.dump(ast.parse(f"({code})", mode="eval"))
    except SyntaxError:  # (a node's code always parses; kept total)
        return "".join(code.split())


def _cache_built(a, site: CallSite) -> Optional[CallSite]:
    """The save of a load-or-build cache: ``if os.path.exists(p): x = torch.load(p)``
    with ``else: x = build(...); torch.save(x, p)`` (either arm first, the save at any
    depth under its arm), or the load in a ``try`` and the build and save in its
    ``except``, in one function; ``x`` a name, an attribute or a tuple of those, saved as
    written (pytorch-nlp's word vectors: ``self.itos, self.vectors = torch.load(p)``,
    ``torch.save((self.itos, self.vectors), p)``). Either way ``x`` holds what this code builds, on the
    devices it builds it on: the load gives back the tensors of the save this same code
    made. Not in code that runs once per rank (rank 0's cache, loaded by every rank)."""
    targets = _bound_targets(a, site)
    if len(targets) != 1 or not _names_only(targets[0]):
        return None
    target, fn = _path_key(a.code(targets[0])), a.enclosing_function(site.scope)
    for save, saved in _saves_of_path(a, site, fn):
        if saved == target and _other_arm(a, fn, site.cond, save.cond):
            return save if a.devices.per_rank(site) is None else None  # (asked last: it reads the module)
    return None


def _saves_of_path(a, site: CallSite, fn) -> Iterable[tuple]:
    """The ``torch.save(obj, p)`` calls of the function ``fn`` (None: module level) that
    write the load's own path, each with its ``obj`` as ``_path_key`` reads it."""
    writes = _same_path(a, site)
    for save in a.calls if writes is not None else ():
        if save.qualname not in ("torch.save", "torch.serialization.save"):
            continue
        if a.enclosing_function(save.scope) is not fn:
            continue
        saved, written = save.positional(0), save.positional(1) or save.keyword("f")
        if saved is not None and written is not None and writes(written.value):
            yield save, _path_key(a.code(saved.value))


def _cache_returned(a, site: CallSite) -> Optional[CallSite]:
    """The save of a load-or-build cache that returns what it loads or builds: ``if
    os.path.exists(p): return torch.load(p)``, and after that ``if``, ``torch.save(x, p)``
    then ``return x`` (pyro's BART dataset); or the mirror, ``if not os.path.exists(p):``
    ending in ``torch.save(x, p)`` and ``return x``, then ``return torch.load(p)``. The
    ``if``'s arm ends in its ``return``, so the load and the save run on two paths, and
    either way the function gives back what this code builds, where it builds it (the
    save at any depth after the ``if``, or under its arm). Not in code that runs once per
    rank."""
    load_return, fn = _returned(a, site), a.enclosing_function(site.scope)
    if load_return is None or fn is None:
        return None
    for save, key in _saves_of_path(a, site, fn):
        if site.order < save.order:  # the load's arm returns; the build goes on after the `if`
            after = _line_col(a, save.node)
            shape = _arm_returns(a, site.cond, load_return, save.cond) and any(
                r is not None and _path_key(a.code(r)) == key and _line_col(a, r) > after for r in fn.returns)
        else:  # the build's arm returns what it saved; the load comes after the `if`
            shape = any(_arm_returns(a, save.cond[:n + 1], r, site.cond) for n in range(len(save.cond))
                        for r in _last_returns(a, save.cond[n]) if _path_key(a.code(r.value)) == key)
        if shape:
            return save if a.devices.per_rank(site) is None else None  # (asked last: it reads the module)
    return None


def _returned(a, site: CallSite) -> Optional[cst.Return]:
    """The ``return`` statement whose value is the call at ``site`` (``return torch.load(p)``,
    on its own line or ending a one-line ``if``'s body)."""
    stmts = list(site.line.body) if site.line is not None else []
    stmts += _last_returns(a, site.cond[-1]) if site.cond else []
    return next((s for s in stmts if isinstance(s, cst.Return) and s.value is site.node), None)


def _arm_returns(a, arm: tuple, ret: cst.Return, other: tuple) -> bool:
    """Whether ``ret`` ends the body of the ``if`` that ``arm`` (a ``cond``) ends in, and
    ``other`` (a ``cond``) runs after that ``if``, at its level or under it, outside that body."""
    if not arm or arm[-1][1] != "body" or arm[-1][0] not in a.ifs:
        return False
    return any(r is ret for r in _last_returns(a, arm[-1])) and other[:len(arm) - 1] == arm[:-1] and (
        len(other) < len(arm) or other[len(arm) - 1] != arm[-1])


def _last_returns(a, branch: tuple) -> List[cst.Return]:
    """The ``return`` that ends the body of the ``if`` a ``cond`` element (``(id, "body")``)
    names, if its last statement is one."""
    at, part = branch
    node = a.ifs.get(at)
    if part != "body" or node is None or not node.body.body:
        return []
    last = node.body.body[-1]
    small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else last
    return [small] if isinstance(small, cst.Return) and small.value is not None else []


def _line_col(a, node: cst.CSTNode) -> tuple:
    start = a.range(node).start
    return start.line, start.column


def _bound_targets(a, site: CallSite) -> List[cst.BaseExpression]:
    """What the load's statement binds its result to (``x = torch.load(p)``, ``x: T =
    torch.load(p)``, ``a = b = ...``); [] where the result goes anywhere else."""
    line = a.statement_line(site.node)
    for stmt in line.body if line is not None else ():
        if isinstance(stmt, cst.Assign) and stmt.value is site.node:
            return [t.target for t in stmt.targets]
        if isinstance(stmt, cst.AnnAssign) and stmt.value is site.node:
            return [stmt.target]
    return []


def _names_only(target: cst.BaseExpression) -> bool:
    """A name, an attribute (``self.vectors``), or a tuple of those: what a cache binds."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return bool(target.elements) and all(_names_only(e.value) for e in target.elements)
    return isinstance(target, cst.Name) or (isinstance(target, cst.Attribute) and _names_only(target.value))


def _other_arm(a, fn, load: tuple, save: tuple) -> bool:
    """Whether where a load runs (``cond``) and where a save runs part at one ``if``'s
    two arms, or at a ``try``'s body (the load) and one of its handlers (the save)."""
    n = next((i for i, (x, y) in enumerate(zip(load, save)) if x != y), None)
    if n is None:
        return False
    (load_at, load_part), (save_at, save_part) = load[n], save[n]
    if load_at == save_at and load_at in a.ifs:
        return {load_part, save_part} == {"body", "orelse"}
    if load_part != "try" or save_part != "handler":
        return False
    found: List[bool] = []

    class Trys(cst.CSTVisitor):
        def visit_Try(self, node: cst.Try) -> None:
            if id(node) == load_at:
                found.append(any(id(h) == save_at for h in node.handlers))

    walk(fn.node if fn is not None else a.module, Trys())
    return any(found)


def _class_saves_from_cpu(a, site: CallSite) -> bool:
    """A load in a method of a class whose every ``torch.save`` (in its other methods)
    writes from the CPU: ctgan's synthesizer ``save`` does ``self.set_device(
    torch.device("cpu"))`` then ``torch.save(self, path)``, and its ``load`` reads that
    back; FastNLP's ``model.cpu()`` then ``torch.save(model, p)``; a ``state_dict``'s
    tensors copied to the CPU as they are saved (``{k: v.cpu() for ...}``). What the
    class writes holds CPU tensors, which load anywhere. Not in code that runs once per
    rank."""
    method = a.enclosing_method(site.scope)
    if method is None or method.klass is None:
        return False
    saves = [s for s in a.calls if s.qualname in ("torch.save", "torch.serialization.save")
             and a.enclosing_class(s.scope) is method.klass]
    return (bool(saves) and all(a.enclosing_method(s.scope) is not method and _saved_from_cpu(a, s) for s in saves)
            and a.devices.per_rank(site) is None)


def _saved_from_cpu(a, save: CallSite) -> bool:
    """Whether ``torch.save(obj, ...)`` writes ``obj`` from the CPU: ``obj`` is moved
    there as it is saved (``m.cpu()``, ``m.to("cpu")``, ``{k: v.cpu() for k, v in
    sd.items()}``), or earlier in the same function on the save's own path, by a call on
    ``obj`` given nothing but the CPU (``obj.cpu()``, ``obj.to("cpu")``,
    ``self.set_device(torch.device("cpu"))``)."""
    arg = save.positional(0) or save.keyword("obj")
    if arg is None:
        return False
    if isinstance(arg.value, cst.DictComp):
        return _moves_to_cpu(arg.value.value)
    saved = arg.value
    if _moves_to_cpu(saved):
        return True
    if not isinstance(saved, (cst.Name, cst.Attribute)):
        return False
    fn, code = a.enclosing_function(save.scope), a.code(saved)
    return any(m.order < save.order and a.enclosing_function(m.scope) is fn and save.cond[:len(m.cond)] == m.cond
               and _moves_to_cpu(m.node) and a.code(m.node.func.value) == code  # type: ignore[attr-defined]
               for m in a.calls)


def _moves_to_cpu(expr: cst.BaseExpression) -> bool:
    """``x.cpu()``, or a method of ``x`` given only the CPU (``x.to("cpu")``,
    ``x.set_device(torch.device("cpu"))``)."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    if expr.func.attr.value == "cpu":
        return not expr.args
    return len(expr.args) == 1 and expr.args[0].keyword is None and _is_cpu(expr.args[0].value)


def _is_cpu(expr: cst.BaseExpression) -> bool:
    """``"cpu"``, or ``torch.device("cpu")``."""
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "cpu"
    return (isinstance(expr, cst.Call) and dotted_name(expr.func).rsplit(".", 1)[-1] == "device"
            and len(expr.args) == 1 and _is_cpu(expr.args[0].value))


def _saved_before(a, site: CallSite) -> Optional[CallSite]:
    """The save, earlier in the same function, that wrote what the load at ``site`` reads
    back, on the load's own path (not in another branch, a loop or a ``try`` the load
    is outside of): ``torch.save(obj, p)`` then ``torch.load(p)`` (the same expression,
    a path or a ``BytesIO``), or a ``save`` method handed the load's own path (a
    ScriptModule's ``m.save(tmp.name)``, then ``torch.jit.load(tmp.name)``), or a name or
    a directory the load's path is built from (``trainer.save(path=d)``, then
    ``torch.load(os.path.join(d, "model.pt"))``); none of the path's names bound again in
    between.
    The same process reads its own tensors back onto the devices they were saved from,
    which it has. Not in code that runs once per rank: there rank 0 saves and every rank
    loads its copy onto rank 0's GPU (the DDP tutorial's own warning)."""
    writes = _same_path(a, site)
    if writes is None:
        return None
    path = site.positional(0) or site.keyword("f")
    fn = a.enclosing_function(site.scope)
    names = set(names_in(path.value))
    strings = _strings_in(path.value)

    def writes_path(save: CallSite) -> bool:
        if save.qualname in _SAVERS:
            written = save.positional(_SAVERS[save.qualname]) or save.keyword("f")
            return written is not None and writes(written.value)
        if save.qualname is None and (save.method or "").startswith("save"):  # trainer.save(path=d)
            return any(writes(v) or (isinstance(v, cst.Name) and v.value in names) or (
                isinstance(v, cst.SimpleString) and isinstance(v.evaluated_value, str) and v.evaluated_value
                and any(t.startswith(v.evaluated_value) for t in strings))
                for v in (arg.value for arg in save.node.args))
        return False

    scope = fn.scope if fn is not None else a.module_scope
    for save in a.calls:
        if save.order < site.order and a.enclosing_function(save.scope) is fn and writes_path(save) \
                and site.cond[:len(save.cond)] == save.cond \
                and not any(save.order < b.order < site.order for name in names for b in scope.bindings.get(name, ())):
            # (surely run first, not `if not cached: torch.save(...)` / `else: torch.load(...)`;
            # no name of the path bound again in between, as `buf = io.BytesIO(proc.stdout)`)
            return save if a.devices.per_rank(site) is None else None  # (asked last: it reads the module)
    return None

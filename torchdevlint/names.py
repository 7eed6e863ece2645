"""Qualified names of torch (and stdlib) APIs, however they were imported.

``canonical`` folds torch's re-exports into one spelling, so a rule matches
``torch.nn.DataParallel``, ``torch.nn.parallel.DataParallel`` and
``torch.nn.parallel.data_parallel.DataParallel`` with one string.
"""

from __future__ import annotations

import re
from typing import Dict

# Re-exports: alternative spelling -> canonical spelling (prefixes are folded too).
_REEXPORTS: Dict[str, str] = {
    "torch.nn.DataParallel": "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.data_parallel": "torch.nn.parallel.data_parallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.replicate.replicate": "torch.nn.parallel.replicate",
    "torch.nn.parallel.scatter_gather.scatter": "torch.nn.parallel.scatter",
    "torch.nn.parallel.scatter_gather.gather": "torch.nn.parallel.gather",
    "torch.nn.parallel.parallel_apply.parallel_apply": "torch.nn.parallel.parallel_apply",
    "torch.nn.modules.SyncBatchNorm": "torch.nn.SyncBatchNorm",
    "torch.nn.modules.batchnorm.SyncBatchNorm": "torch.nn.SyncBatchNorm",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.nn.modules.Module": "torch.nn.Module",
    "torch.distributed.distributed_c10d": "torch.distributed",
    "torch.multiprocessing.spawn.spawn": "torch.multiprocessing.spawn",
    "torch.multiprocessing.spawn.start_processes": "torch.multiprocessing.start_processes",
    "torch.cuda.set_device": "torch.cuda.set_device",
    "multiprocessing.context.Process": "multiprocessing.Process",
    "multiprocessing.pool.Pool": "multiprocessing.Pool",
    "torch.multiprocessing.Process": "multiprocessing.Process",
    "torch.multiprocessing.Pool": "multiprocessing.Pool",
    "torch.multiprocessing.get_context": "multiprocessing.get_context",
    "concurrent.futures.thread.ThreadPoolExecutor": "concurrent.futures.ThreadPoolExecutor",
    "concurrent.futures.process.ProcessPoolExecutor": "concurrent.futures.ProcessPoolExecutor",
}

SET_DEVICE = frozenset(
    {"torch.cuda.set_device", "torch.accelerator.set_device_index", "torch.xpu.set_device",
     "torch.musa.set_device", "torch.npu.set_device", "torch.mlu.set_device",
     "torch.accelerator.set_device_idx", "torch.mps.set_device"}
)
DEVICE_CONTEXTS = frozenset(
    {"torch.cuda.device", "torch.cuda.device_of", "torch.accelerator.device_index"}
)
# A with-item of a helper that enters a device block (its own ``with torch.cuda.device(...)``):
# in this file, read from its body; of another module, named for one (gpytorch's
# ``least_used_cuda_device()``, fairscale's ``use_device(d)``, transformers' ``on_device(d)``
# and ``pipe.device_placement()``), but not a default-device or initialisation context
DEVICE_BLOCK = "<device block>"
DEVICE_BLOCK_HELPER = re.compile(r"(?:^|_)(?:cuda_|gpu_)?device(?:_placement)?$")
NOT_DEVICE_BLOCK_HELPER = re.compile(r"^_*init|default")
# ``torch.cuda`` calls that raise where CUDA is not available (checked on torch's CPU
# build; ``empty_cache``, ``manual_seed``, ``memory_allocated``, ``device_count`` do not)
CUDA_ONLY = frozenset(
    {f"torch.cuda.{name}" for name in (
        "synchronize", "current_device", "get_device_name", "get_device_properties",
        "get_device_capability", "current_stream", "default_stream", "Stream", "Event", "CUDAGraph",
        "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
        "ipc_collect", "get_rng_state", "initial_seed", "mem_get_info", "memory_summary", "init",
        "set_per_process_memory_fraction", "nvtx.range_push", "nvtx.range_pop", "nvtx.mark", "nvtx.range",
        # NVML's readings: pynvml and a GPU ("nvidia-ml-py does not seem to be installed")
        "utilization", "temperature", "power_draw", "clock_rate", "memory_usage")}
    # data parallelism by hand (the annotated Transformer's loss over its GPUs): the CPU build
    # has no broadcast, scatter or gather, and data_parallel finds no device type
    | {f"torch.nn.parallel.{name}" for name in ("replicate", "scatter", "gather", "parallel_apply", "data_parallel")}
)
# What a collective sends goes where the process group's communicator is (NCCL's: the
# current device), not where some input of the caller lies: torch.distributed's calls, and
# the names wrappers give them (Horovod's and Bagua's ``allreduce``, ``allgather``); the
# generic names (``gather``, ``scatter``, ``reduce``, ``send``) only as torch.distributed's
COLLECTIVE_NAMES = frozenset(
    {"all_gather", "all_gather_into_tensor", "all_gather_base", "_all_gather_base", "all_reduce",
     "all_reduce_coalesced", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base",
     "all_to_all", "all_to_all_single", "broadcast", "allreduce", "allgather", "allgather_into_tensor",
     "alltoall"}
)
COLLECTIVES = frozenset(
    {f"torch.distributed.{name}" for name in (
        "gather", "scatter", "reduce", "send", "recv", "isend", "irecv", "broadcast", "all_reduce",
        "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
        "all_to_all", "all_to_all_single")}
)
INIT_PROCESS_GROUP = frozenset(
    {
        "torch.distributed.init_process_group",
        "deepspeed.init_distributed",
        "torch.distributed.device_mesh.init_device_mesh",
        "torch.distributed.init_device_mesh",
    }
)
INIT_PROCESS_GROUP_TORCH = frozenset({"torch.distributed.init_process_group"})
# makes a model's batch norms synchronise across ranks: they then run on GPUs only
CONVERT_SYNC_BATCHNORM = "torch.nn.SyncBatchNorm.convert_sync_batchnorm"
# Names that hold a configuration (``args.device``, ``opt.gpu_ids``, ``cfg.cpu``)
CONFIG_NAMES = frozenset({"args", "opt", "opts", "cfg", "config", "conf", "hparams", "options",
                          "params", "flags", "FLAGS", "hp", "settings"})
# frameworks with a `cuda` of their own: `tvm.target.cuda()` is TVM's compilation
# target, not torch's implicit device (reached through the module's import)
OTHER_FRAMEWORKS = frozenset({"tvm", "cupy", "numba", "pycuda", "jax", "tensorflow", "mxnet", "paddle",
                              "mindspore", "oneflow", "jittor", "cuml"})
DATA_PARALLEL = "torch.nn.parallel.DataParallel"
MODULE = "torch.nn.Module"
THREAD = "threading.Thread"
PROCESS = "multiprocessing.Process"
PROCESS_SPAWNERS = frozenset(
    {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"}
)
THREAD_EXECUTORS = frozenset(
    {"concurrent.futures.ThreadPoolExecutor", "multiprocessing.pool.ThreadPool",
     "multiprocessing.dummy.Pool"}
)
PROCESS_EXECUTORS = frozenset(
    {"concurrent.futures.ProcessPoolExecutor", "multiprocessing.Pool"}
)
EXECUTOR_METHODS = frozenset(
    {"submit", "map", "imap", "imap_unordered", "starmap", "apply", "apply_async",
     "map_async", "starmap_async"}
)
PARTIAL = "functools.partial"
TO_THREAD = "asyncio.to_thread"

# Functions handed to these run once per process. The first group also binds each
# process's device before calling the function (detectron2's launch, fairseq's
# call_main/distributed_main set_device(local_rank) first).
BINDING_LAUNCHERS = frozenset({"launch", "call_main", "distributed_main", "launch_job"})
# launchers that call their function with the process index (the local rank) first
INDEX_LAUNCHERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
                             "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes"})
LAUNCHERS = BINDING_LAUNCHERS | frozenset({"elastic_launch", "start_processes", "spawn",
                                           "run_distributed", "launch_processes"})
# torch's dtypes by their attribute names (``torch.float16``): a `.to()` given one of them
# alone converts, it moves nothing (TDL009)
DTYPE_NAMES = frozenset({"float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8",
                         "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128",
                         "cfloat", "cdouble"})
# What a script launched once per rank reads (torchrun's environment, --local_rank, horovod)
# what a process's GPU index is called where it is used as a device (`.to(rank)`,
# `device=local_rank`, as the DDP tutorial writes): TDL007 reads it, and the gate's `place:rank`
RANK_INDEX_NAMES = frozenset({"rank", "local_rank", "localrank", "device_id", "gpu", "gpu_id", "local_gpu"})
RANK_MARKERS = re.compile(r"""['"](?:LOCAL_RANK|RANK|WORLD_SIZE|SLURM_LOCALID)['"]|--local[_-]rank|\blocal_rank\(\)""")
# A helper of another module whose name says it sets up the distributed run, binding the
# rank's GPU before its process group (DETR's, DeiT's and DINO's init_distributed_mode,
# mmcv's init_dist and its _init_dist_pytorch/_slurm/_mpi, timm's init_distributed_device,
# pysot's dist_init, setup_distributed, ESPnet's init_torch_distributed, super-gradients'
# initialize_ddp, PyTorch Lightning's init_ddp_connection); a bare verb on an object named
# for it reads as one name (ESPnet2's `distributed_option.init()`: ``facts.setup_call_name``)
DIST_SETUP_HELPER = re.compile(r"(?:^|_)(?:init(?:ialize)?|setup)_(?:torch_)?(?:dist(?:ributed)?|ddp)"
                               r"(?:_mode|_device|_pytorch|_slurm|_mpi|_connection)?$|^_?dist(?:ributed)?_init$"
                               r"|(?:^|_)(?:dist(?:ributed)?|ddp)(?:_\w+)?_(?:init(?:ialize)?|setup)$")

# A function named for setting the current device (classy_vision's
# `set_cuda_device_index(idx)`, torchtune's `_setup_cuda_device(device)`, a `bind_gpu(k)`):
# an API whose callers choose what it binds
DEVICE_SETTER = re.compile(r"^_*(?:set|setup|bind|select)_(?:\w+_)?(?:device|gpu)(?:_\w+)?$")

# The pre-1.0 typed tensors: ``torch.cuda.<T>Tensor`` -> its dtype's name in torch
DTYPES: Dict[str, str] = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8",
    "ShortTensor": "int16", "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool",
}
LEGACY_CUDA_TYPES: Dict[str, str] = {f"torch.cuda.{name}": dtype for name, dtype in DTYPES.items()}


def canonical(name: str) -> str:
    if name in _REEXPORTS:
        return _REEXPORTS[name]
    # fold a re-exported prefix: torch.distributed.distributed_c10d.X -> torch.distributed.X
    parts = name.split(".")
    for i in range(len(parts) - 1, 1, -1):
        prefix = ".".join(parts[:i])
        if prefix in _REEXPORTS:
            return _REEXPORTS[prefix] + "." + ".".join(parts[i:])
    return name


_NOT_MODULE_CONSTRUCTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter",
                                      "torch.nn.init", "torch.nn.functional", "torch.nn.utils"})


def is_module_constructor(q: str) -> bool:
    """Whether calling the qualified name ``q`` makes a torch module: a class of
    ``torch.nn`` (not a parameter, nor a function of ``init``, ``functional``, ``utils``),
    any of torchvision's models, timm's ``create_model``."""
    if any(q == n or q.startswith(n + ".") for n in _NOT_MODULE_CONSTRUCTORS):
        return False
    if q.startswith(("torch.nn.", "torchvision.models.")):
        last = q.rsplit(".", 1)[-1]
        return q.startswith("torchvision.models.") or last[:1].isupper()
    return q == "timm.create_model"


def is_torch(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")

"""Shared analysis, computed once per module and reused by every rule; one module per
concern:

- ``facts``: the recorded facts (scopes, bindings, classes, functions, call sites,
  targets, DataParallel wraps, device choices) and small node helpers;
- ``collector``: the single pass over the LibCST tree that records them;
- ``resolution``: names, imports, qualified names, the functions/classes a name means;
- ``receivers``: whether an expression is provably a torch tensor or module;
- ``placement``: current-device expressions and the uses that depend on the current device;
- ``concurrency``: thread and process targets, distributed setup, binding contexts;
- ``parallel``: DataParallel wraps;
- ``process``: execution order at process level (CUDA initialisation,
  ``CUDA_VISIBLE_DEVICES`` writes, process groups, the local rank);
- ``devices``: per-rank code, binding state along the path, chosen and input devices,
  and the one verdict each bare ``.cuda()`` gets;
- ``core``: ``Analysis``, which composes them, plus positions;
- ``treewalk``: a read-only walk of a LibCST tree (what ``node.visit`` does, building nothing).

Rules import what they need from here, never from another rule.
"""

from .core import Analysis  # noqa: F401
from .facts import (  # noqa: F401
    Binding,
    CallSite,
    ClassInfo,
    DataParallelWrap,
    DeviceChoice,
    FunctionInfo,
    ImplicitUse,
    binding_in_force,
    Scope,
    Target,
    compared,
    dotted_name,
    gpu_index,
    is_bare_cuda,
    is_docstring,
    is_none,
    names_in,
    param_annotation,
)
from .devices import one_process_group, takes_gpu_ordinal  # noqa: F401
from .treewalk import walk  # noqa: F401

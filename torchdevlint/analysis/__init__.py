"""Shared analysis, computed once per module and reused by every rule.

- ``core``: the single pass over the tree (scopes, imports, bindings, classes, call
  sites), name resolution, receiver typing, device inference, threads and processes,
  distributed setup, DataParallel wraps, implicit-device uses;
- ``process``: process-level facts in execution order: where CUDA is first
  initialised, ``CUDA_VISIBLE_DEVICES`` writes, process groups and the device
  bindings of their setup path.

Rules import what they need from here, never from another rule.
"""

from .core import (  # noqa: F401
    Analysis,
    Binding,
    CallSite,
    ClassInfo,
    DataParallelWrap,
    DeviceChoice,
    FunctionInfo,
    ImplicitUse,
    Scope,
    Target,
    is_bare_cuda,
)

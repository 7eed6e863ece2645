"""Parallel wrappers: DataParallel wraps moved to the implicit current device."""

from __future__ import annotations

from functools import cached_property
from typing import List, Set

import libcst as cst

from .. import names as N
from .facts import (  # noqa: F401
    CallSite,
    DataParallelWrap,
    Scope,
    _function_scope,
    _int_list,
    exclusive,
    is_bare_cuda,
)


class ParallelMixin:
    # ------------------------------------------------------------- DataParallel
    def is_data_parallel(self, site: CallSite) -> bool:
        if site.qualname == N.DATA_PARALLEL:
            return True
        klass = self.local_class(site.node.func, site.scope)
        return klass is not None and self.subclasses(klass, N.DATA_PARALLEL)

    @cached_property
    def data_parallel_wraps(self) -> List[DataParallelWrap]:
        """DataParallel wrappers moved with ``.cuda()`` while ``device_ids`` is implicit
        (or literal): chained, in a later statement, or through the parent module."""
        found: List[DataParallelWrap] = []
        cuda_sites = [s for s in self.calls if is_bare_cuda(s.node) or self._to_implicit_cuda(s)]
        for wrap in self.calls:
            if not self.is_data_parallel(wrap) or wrap.has_star_args:
                continue
            ids_arg = wrap.keyword("device_ids") or wrap.positional(1)
            literal = None
            if ids_arg is not None:
                literal = _int_list(ids_arg.value)
                if literal is None:
                    continue  # device_ids computed by the program: explicit
            for move, shape in self._moves_of(wrap, cuda_sites):
                found.append(DataParallelWrap(wrap, move, shape, literal))
                break
        return found

    def _moves_of(self, wrap: CallSite, cuda_sites: List[CallSite]):
        for site in cuda_sites:
            if site.node.func.value is wrap.node:  # type: ignore[union-attr]
                yield site, "chained"
        line = wrap.line
        if line is None or len(line.body) != 1 or not isinstance(line.body[0], cst.Assign):
            return
        assign = line.body[0]
        if assign.value is not wrap.node or len(assign.targets) != 1:
            return
        target = assign.targets[0].target
        target_code = self.code(target)
        parent_code = self.code(target.value) if isinstance(target, cst.Attribute) else None
        for site in cuda_sites:
            if (site.order <= wrap.end_order or not self._same_owner(site.scope, wrap.scope, target)
                    or exclusive(site.cond, wrap.cond)):
                continue  # (the other arm of an `if`: it moves the unwrapped module)
            receiver = self.code(site.node.func.value)  # type: ignore[union-attr]
            if receiver == target_code:
                yield site, "later"
            elif parent_code is not None and receiver == parent_code:
                yield site, "parent"

    def _to_implicit_cuda(self, site: CallSite) -> bool:
        """``.to(d)`` where ``d`` is an index-less CUDA device: ``"cuda"``,
        ``torch.device("cuda")``, or a cuda-or-cpu choice (the same implicit primary)."""
        if site.method != "to" or site.qualname is not None or len(site.node.args) != 1:
            return False
        arg = site.node.args[0]
        if arg.keyword is not None and arg.keyword.value != "device":
            return False
        return self._indexless_cuda(arg.value, site.scope, 0)

    def _indexless_cuda(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        if depth > 4:
            return False
        if isinstance(expr, cst.SimpleString):
            return expr.evaluated_value == "cuda"
        if isinstance(expr, cst.IfExp):
            return self._indexless_cuda(expr.body, scope, depth + 1)
        if isinstance(expr, cst.Call) and self.qualname(expr.func, scope) == "torch.device":
            args = [a for a in expr.args if not a.star]
            return len(args) == 1 and self._indexless_cuda(args[0].value, scope, depth + 1)
        if isinstance(expr, cst.Name):
            values = self.values_of(expr.value, scope)
            return bool(values) and all(self._indexless_cuda(v, s, depth + 1) for v, s in values)
        return False

    def _same_owner(self, a: Scope, b: Scope, target: cst.BaseExpression) -> bool:
        if (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == "self"):
            ka, kb = self.enclosing_class(a), self.enclosing_class(b)
            return ka is not None and ka is kb
        return _function_scope(a) is _function_scope(b)

    @cached_property
    def data_parallel_moves(self) -> Set[cst.Call]:
        return {w.move.node for w in self.data_parallel_wraps}
